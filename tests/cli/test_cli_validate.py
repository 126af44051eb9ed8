"""--validate-each on phasec opt, build and run: a planted miscompiling
pass in the default pipeline is named; the default pipeline is not blamed."""

from __future__ import annotations

import numpy as np
import pytest

import phasec.pipeline
from helpers.planted import planted_pipeline
from phasec.cli import main
from phasec.cli import opt as cli_opt

MODEL = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((4, 8), dtype="float32"), w: R.Tensor((8, 8), dtype="float32")) -> R.Tensor((4, 8), dtype="float32"):
        with R.dataflow():
            y = R.matmul(x, w)
            z = R.subtract(y, R.const(0.25, "float32"))
            R.output(z)
        return z
'''


@pytest.fixture
def model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    return str(path)


def _plant(monkeypatch, kind):
    monkeypatch.setattr(phasec.pipeline, "default_pipeline",
                        lambda opt_level=2: planted_pipeline(kind, opt_level))
    monkeypatch.setattr(cli_opt, "default_pipeline",
                        lambda opt_level=2: planted_pipeline(kind, opt_level))


@pytest.mark.parametrize("command,kind,blamed", [
    ("opt", "wrong_fold", "PlantedWrongFold"),
    ("build", "off_by_one", "PlantedOffByOne"),
    ("run", "swap", "PlantedSwapInFused"),
])
def test_planted_pass_is_named(model, monkeypatch, capsys, command, kind, blamed):
    _plant(monkeypatch, kind)
    assert main([command, model, "--validate-each"]) == 1
    err = capsys.readouterr().err
    assert f"pass {blamed} (#" in err and "changed the results" in err
    assert "not expected to change results" in err


def test_default_pipeline_passes_and_reports_overhead(model, capsys):
    for command in ("opt", "build", "run"):
        assert main([command, model, "--validate-each"]) == 0
        err = capsys.readouterr().err
        assert "no pass changed them" in err and "float64" in err


def test_inputs_every_and_tolerance_options(model, monkeypatch, capsys, tmp_path):
    x = np.ones((4, 8), "float32")
    w = np.eye(8, dtype="float32")
    np.savez(tmp_path / "in.npz", x=x, w=w)
    _plant(monkeypatch, "wrong_fold")
    assert main(["opt", model, "--validate-every", "transitions",
                 "--validate-inputs", "in.npz"]) == 1
    err = capsys.readouterr().err
    # x @ I - 0.25 = 0.75 everywhere; the planted fold (0.25 -> 1.25) makes it -0.25
    assert "PlantedWrongFold" in err and "bisection" in err
    assert "expected 0.75, got -0.25" in err
    # a tolerance loose enough to accept the change
    assert main(["opt", model, "--validate-each", "--validate-inputs", "in.npz",
                 "--validate-atol", "10"]) == 0
    assert main(["opt", model, "--validate-every", "0"]) == 2
    assert "--validate-every" in capsys.readouterr().err


def test_validate_reproducer_is_written(model, monkeypatch, capsys, tmp_path):
    from phasec.interp import run
    from phasec.testing.reproducers import read_reproducer
    from helpers.planted import off_by_one

    _plant(monkeypatch, "off_by_one")
    assert main(["build", model, "--validate-each", "--validate-reproducer", "repro"]) == 1
    err = capsys.readouterr().err
    assert "pass PlantedOffByOne (#" in err and "minimized reproducer" in err
    (repro,) = (tmp_path / "repro").glob("*.py")
    assert "# sequence: PlantedOffByOne" in repro.read_text()
    module_lines = [t for t in repro.read_text().splitlines() if t.strip() and not t.startswith("#")]
    assert len(module_lines) <= 20
    rep = read_reproducer(repro)
    # the reproducer's kernel is a matmul: before the pass it agrees with numpy
    x, w = rep.inputs[:2]
    np.testing.assert_allclose(run(rep.module, *rep.inputs), x @ w, rtol=1e-5, atol=1e-6)
    assert not np.allclose(run(off_by_one(rep.module), *rep.inputs), x @ w, atol=1e-4)

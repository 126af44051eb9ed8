"""A user's own passes wherever a built-in pass goes: ``--load``,
``$PHASEC_PLUGINS`` and installed entry points (phasec.transform.plugins)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from phasec import transform
from phasec.cli import main

PLUGIN = '''
from phasec.ir import Phase
from phasec.transform import module_pass, register_pass


@register_pass
@module_pass(phases=[Phase.INGESTION, Phase.OPTIMIZATION], name="CrashAlways")
def crash_always(mod, ctx):
    """Crashes on every module (a planted bug)."""
    raise ValueError("this pass always fails")


@register_pass
@module_pass(phases=Phase.OPTIMIZATION, name="KeepAll")
def keep_all(mod, ctx):
    """Changes nothing."""
    return mod
'''

MODEL = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        y = R.multiply(x, x)
        return y
'''


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    plugin = tmp_path / "mypasses.py"
    plugin.write_text(PLUGIN)
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    with transform.REGISTRY.scope():  # the plugin's registrations end with the test
        yield plugin, model


def test_opt_and_passes_find_a_loaded_pass(files, capsys):
    plugin, model = files
    assert main(["opt", str(model), "--passes", "LambdaLifting,KeepAll"]) == 2
    assert "unknown pass 'KeepAll'" in capsys.readouterr().err
    assert main(["opt", str(model), "--load", str(plugin), "--passes",
                 "LambdaLifting,KeepAll"]) == 0
    assert "R.multiply(" in capsys.readouterr().out
    assert main(["passes", "-v", "--load", str(plugin)]) == 0
    listing = capsys.readouterr().out
    assert re.search(r"^KeepAll +optimization .*\n +description: Changes nothing\.$", listing,
                     re.M), listing


def test_the_environment_variable_loads_plugins(files, capsys, monkeypatch):
    plugin, model = files
    monkeypatch.setenv("PHASEC_PLUGINS", os.pathsep.join(["", str(plugin)]))
    assert main(["opt", str(model), "--passes", "CrashAlways"]) == 1
    assert "this pass always fails" in capsys.readouterr().err


def test_a_broken_plugin_is_a_clear_error(tmp_path, capsys):
    broken = tmp_path / "broken.py"
    broken.write_text("x = 1\nraise RuntimeError('no GPU here')\n")
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    for spec, said in ((str(broken), f"{broken}:2"), (str(tmp_path / "absent.py"), "no such file"),
                       ("no_such_plugin_module", "No module named")):
        assert main(["opt", str(model), "--load", spec, "--passes", "Normalize"]) == 2
        err = capsys.readouterr().err
        assert "pass plugin" in err and said in err and "Traceback" not in err, err


def test_fuzz_with_a_loaded_pass_and_its_reproducer_replays(files, tmp_path, capsys):
    plugin, _ = files
    out = tmp_path / "out"
    status = main(["fuzz", "--load", str(plugin), "--passes", "CrashAlways,FuseOps",
                   "--seconds", "120", "--max-failures", "1", "--seed", "1", "--out", str(out), "--kernels", "interp",
                   "--no-roundtrip"])
    text = capsys.readouterr().out
    assert status == 1, text
    repro = next(p for p in sorted((out / "failures").glob("*.py"))
                 if "this pass always fails" in p.read_text())
    commands = re.findall(r"^#   (phasec .*)$", repro.read_text(), re.M)
    assert commands and all(f"--load {plugin}" in c for c in commands), commands
    # each printed command, run as written in a fresh process, reproduces the crash
    env = {k: v for k, v in os.environ.items() if k != "PHASEC_PLUGINS"}
    for command in commands:
        argv = shlex.split(command)
        r = subprocess.run([sys.executable, "-m", "phasec", *argv[1:], "--kernels", "interp"]
                           if "--replay" in command else [sys.executable, "-m", "phasec", *argv[1:]],
                           capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode == 1, (command, r.stdout, r.stderr)
        assert "this pass always fails" in r.stdout + r.stderr


def test_an_installed_entry_point_is_loaded(tmp_path):
    """A package declaring a 'phasec.passes' entry point: its passes are there
    without --load (found through importlib.metadata, as pip installs them)."""
    site = tmp_path / "site"
    (site / "acme_passes").mkdir(parents=True)
    (site / "acme_passes" / "__init__.py").write_text(PLUGIN)
    info = site / "acme_passes-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-passes\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[phasec.passes]\nacme = acme_passes\n")
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    env.pop("PHASEC_PLUGINS", None)
    r = subprocess.run([sys.executable, "-m", "phasec", "opt", str(model), "--passes",
                        "CrashAlways"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 1 and "this pass always fails" in r.stderr, r.stderr

"""``phasec build`` and ``phasec run``, through phasec.cli.main with capsys.

Small modules keep LLVM compilation short; the bundled MLP (the default of
``phasec run``) is compiled once per process thanks to the kernel cache.
"""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

import phasec
from phasec.cli import main
from phasec.pipeline import default_pipeline

SYMBOLIC = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 8), dtype="float32"), w: R.Tensor((8, 4), dtype="float32"),
             b: R.Tensor((4,), dtype="float32")) -> R.Tensor(("n", 4), dtype="float32"):
        n = T.int64()
        with R.dataflow():
            y = R.nn.relu(R.add(R.matmul(x, w), b))
            R.output(y)
        return y
"""


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(SYMBOLIC)
    return path


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


# ---------------------------------------------------------------------------
# phasec run: the bundled example (the README's main-job command)
# ---------------------------------------------------------------------------

def test_run_without_input_runs_the_bundled_mlp(capsys):
    code, out, err = run_cli(capsys, "run", "--repeat", "2")
    assert code == 0, err
    assert "example 'mlp'" in out
    # Every pass of the default pipeline, with its phase and its time.
    for p in default_pipeline().passes:
        assert f" {p.info.name} " in out
    for transition in ("ingestion -> optimization", "optimization -> lowering",
                       "lowering -> build"):
        assert transition in out
    assert "time (ms)" in out and "verify (ms)" in out
    assert "compiled with LLVM" in out
    assert "best of 2:" in out
    assert "reference interpreter" in out and "max abs error" in out
    assert out.rstrip().endswith("PASS")


def test_run_example_option_and_quiet(capsys):
    code, out, _ = run_cli(capsys, "run", "--example", "mlp", "--quiet", "--repeat", "1")
    assert code == 0
    assert "example 'mlp'" in out and "time (ms)" not in out and "PASS" in out


def test_run_module_file_with_symbolic_dim(capsys, model):
    code, out, _ = run_cli(capsys, "run", model, "--dim", "n=3", "--repeat", "1")
    assert code == 0
    assert "x: float32[3, 8]" in out
    assert "output: float32[3, 4]" in out and "PASS" in out
    # Default value of a symbolic dimension: 1.
    code, out, _ = run_cli(capsys, "run", model, "--repeat", "1", "-q")
    assert code == 0 and "x: float32[1, 8]" in out


def test_run_with_inputs_npz(capsys, model, tmp_path):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 8)).astype("float32")
    w = rng.standard_normal((8, 4)).astype("float32")
    deep = tmp_path / ("a-long-directory-name-" * 4)  # a path longer than a line stays whole
    deep.mkdir()
    npz = deep / "in.npz"
    np.savez(npz, x=x, w=w)  # b is left to the random generator
    code, out, _ = run_cli(capsys, "run", model, "--inputs", npz, "--repeat", "1", "-q")
    assert code == 0
    assert f"from {npz}" in out and "random (seed 0): b" in out
    assert "x: float32[5, 8]" in out and "output: float32[5, 4]" in out  # n taken from x
    assert "PASS" in out


def test_run_reports_a_failed_check(capsys, model, monkeypatch):
    real = phasec.interp.run

    def off_by_one(mod, *args, **kwargs):
        return real(mod, *args, **kwargs) + 1

    monkeypatch.setattr(phasec.interp, "run", off_by_one)
    code, out, _ = run_cli(capsys, "run", model, "--repeat", "1", "-q")
    assert code == 1
    assert "FAIL" in out and "max abs error 1" in out


def test_run_a_module_already_lowered(capsys, model, tmp_path):
    lowered = tmp_path / "lowered.json"
    code, _, _ = run_cli(capsys, "opt", model, "--passes", "LambdaLifting,LegalizeOps",
                         "-o", lowered)
    assert code == 0
    code, out, _ = run_cli(capsys, "run", lowered, "--repeat", "1")
    assert code == 0
    assert "phase lowering" in out and "Normalize" not in out
    assert "lowering -> build" in out and "PASS" in out


# ---------------------------------------------------------------------------
# phasec build, then phasec run on the executable
# ---------------------------------------------------------------------------

def test_build_then_run_executable(capsys, model, tmp_path):
    exe_path = tmp_path / "model.pvm"
    code, out, _ = run_cli(capsys, "build", model, "-o", exe_path)
    assert code == 0 and f"wrote {exe_path}" in out and "1 kernel" in out
    assert zipfile.is_zipfile(exe_path)
    exe = phasec.Executable.load(exe_path)
    assert exe.function_names() == ["main"]
    code, out, _ = run_cli(capsys, "run", exe_path, "--dim", "n=2", "--repeat", "2")
    assert code == 0
    assert "x: float32[2, 8]" in out and "output: float32[2, 4]" in out
    assert "check: skipped" in out and "compiled executable" in out


def test_run_executable_uses_its_recorded_signature(capsys, model, tmp_path):
    exe_path = tmp_path / "model.pvm"
    assert run_cli(capsys, "build", model, "-o", exe_path)[0] == 0
    (_, x), (_, w), (_, b) = phasec.Executable.load(exe_path).signature("main")
    assert x.shape[0].name == "n" and x.shape[1].value == 8 and w.shape[0].value == 8
    code, out, err = run_cli(capsys, "run", exe_path, "--dim", "n=3", "--repeat", "1")
    assert code == 0, err
    assert "x: float32[3, 8], w: float32[8, 4], b: float32[4]" in out
    assert "output: float32[3, 4]" in out
    # n from a given array; an unknown --dim names the executable's dims
    npz = tmp_path / "in.npz"
    np.savez(npz, x=np.ones((5, 8), "float32"))
    code, out, _ = run_cli(capsys, "run", exe_path, "--inputs", npz, "--repeat", "1")
    assert code == 0 and "output: float32[5, 4]" in out
    code, _, err = run_cli(capsys, "run", exe_path, "--dim", "m=2")
    assert code == 2 and "no parameter has a symbolic dimension 'm'; they have n" in err


_NO_KERNELS = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 8), dtype="float32"), w: R.Tensor((8, 4), dtype="float32"),
             b: R.Tensor((4,), dtype="float32")) -> R.Tensor((8, 4), dtype="float32"):
        return w
"""


def test_run_executable_without_recorded_signature(capsys, tmp_path):
    """Executables of format version 1 record no struct info: inputs must be
    given. (phasec reads version 1 files only without kernels: they record no
    kernel digest.)"""
    import json

    exe_path = tmp_path / "model.pvm"
    source = tmp_path / "plain.py"
    source.write_text(_NO_KERNELS)
    assert run_cli(capsys, "build", source, "-o", exe_path)[0] == 0
    with zipfile.ZipFile(exe_path) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    doc = json.loads(files["executable.json"])
    doc["version"] = 1
    for f in doc["functions"]:
        del f["param_sinfo"]
    files["executable.json"] = json.dumps(doc).encode()
    old = tmp_path / "old.pvm"
    with zipfile.ZipFile(old, "w") as zf:
        for n, data in files.items():
            zf.writestr(n, data)
    code, _, err = run_cli(capsys, "run", old, "--repeat", "1")
    assert code == 2 and "records no struct info for parameter(s) 'x', 'w', 'b'" in err
    assert "--inputs" in err
    npz = tmp_path / "in.npz"
    np.savez(npz, x=np.ones((2, 8), "float32"), w=np.ones((8, 4), "float32"),
             b=np.zeros(4, "float32"))
    code, out, _ = run_cli(capsys, "run", old, "--inputs", npz, "--repeat", "1")
    assert code == 0 and "output: float32[8, 4]" in out


def test_build_default_output_and_timing(capsys, model, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "build", model, "--opt-level", "0", "--timing",
                             "--kernels", "none")
    assert code == 0 and (tmp_path / "model.pvm").exists()
    assert "LegalizeOps" in err and "verification:" in err


def test_build_with_a_pipeline_that_stops_early(capsys, model, tmp_path):
    code, _, err = run_cli(capsys, "build", model, "--passes", "LambdaLifting,LegalizeOps",
                           "-o", tmp_path / "x.pvm")
    assert code == 1 and "leaves the module in phase lowering" in err
    assert not (tmp_path / "x.pvm").exists()


# ---------------------------------------------------------------------------
# Bad input: status != 0, one clear message, no traceback
# ---------------------------------------------------------------------------

def test_bad_input_files(capsys, tmp_path):
    code, _, err = run_cli(capsys, "run", tmp_path / "missing.py")
    assert code == 2 and "no such file" in err
    broken = tmp_path / "broken.py"
    broken.write_text("@I.ir_module\nclass M:\n    def main(:\n")
    code, _, err = run_cli(capsys, "build", broken, "-o", tmp_path / "b.pvm")
    assert code == 2 and "broken.py:3" in err
    fake = tmp_path / "fake.pvm"
    with zipfile.ZipFile(fake, "w") as zf:
        zf.writestr("hello.txt", "not an executable")
    code, _, err = run_cli(capsys, "run", fake)
    assert code == 2 and "not a phasec executable" in err
    code, _, err = run_cli(capsys, "run", tmp_path / "model.pvm")
    assert code == 2 and "model.pvm" in err


@pytest.mark.parametrize("argv, message", [
    (["--dim", "n"], "expected NAME=VALUE"),
    (["--dim", "m=2"], "no parameter has a symbolic dimension 'm'"),
    (["--entry", "nope"], "no Relax function 'nope'"),
    (["--repeat", "0"], "--repeat must be at least 1"),
    (["--inputs", "missing.npz"], "no such file"),
    (["--example", "mlp"], "either INPUT or --example"),
])
def test_bad_run_options(capsys, model, argv, message):
    code, _, err = run_cli(capsys, "run", model, *argv)
    assert code == 2 and message in err, err


def test_inputs_that_do_not_fit(capsys, model, tmp_path):
    npz = tmp_path / "in.npz"
    np.savez(npz, y=np.zeros(3, "float32"))
    code, _, err = run_cli(capsys, "run", model, "--inputs", npz)
    assert code == 2 and "'y', which is not a parameter" in err and "x, w, b" in err
    np.savez(npz, x=np.zeros((5, 8), "float32"))
    code, _, err = run_cli(capsys, "run", model, "--inputs", npz, "--dim", "n=3")
    assert code == 2 and "n = 5, but --dim says n=3" in err
    np.save(tmp_path / "one.npy", np.zeros(3, "float32"))
    code, _, err = run_cli(capsys, "run", model, "--inputs", tmp_path / "one.npy")
    assert code == 2 and "not an .npz archive" in err
    np.savez(npz, w=np.zeros((8, 5), "float32"))
    code, _, err = run_cli(capsys, "run", model, "--inputs", npz, "--repeat", "1")
    assert code == 1 and "w" in err  # the VM's shape check names the parameter


# ---------------------------------------------------------------------------
# phasec run --save-inputs / --save-outputs
# ---------------------------------------------------------------------------

def test_run_saves_its_inputs_and_outputs(capsys, model, tmp_path):
    inputs, outputs = tmp_path / "in.npz", tmp_path / "out.npz"
    code, out, _ = run_cli(capsys, "run", model, "--dim", "n=3", "-q",
                           "--save-inputs", inputs, "--save-outputs", outputs)
    assert code == 0 and "outputs written to" in out
    given = np.load(inputs)
    assert sorted(given) == ["b", "w", "x"] and given["x"].shape == (3, 8)
    want = np.maximum(given["x"] @ given["w"] + given["b"], 0)  # the model, in numpy
    np.testing.assert_allclose(np.load(outputs)["output"], want, rtol=1e-5, atol=1e-6)
    # the saved inputs replay the run exactly
    again = tmp_path / "again.npz"
    code, _, _ = run_cli(capsys, "run", model, "-q", "--inputs", inputs, "--save-outputs", again)
    assert code == 0
    np.testing.assert_array_equal(np.load(again)["output"], np.load(outputs)["output"])


def test_run_saves_tuple_outputs_by_path(capsys, tmp_path):
    path = tmp_path / "pair.py"
    path.write_text("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")):
        a = R.add(x, y)
        m = R.multiply(x, y)
        t = (a, (m, x))
        return t
""")
    inputs, outputs = tmp_path / "in.npz", tmp_path / "out.npz"
    code, _, _ = run_cli(capsys, "run", path, "-q", "--save-inputs", inputs,
                         "--save-outputs", outputs)
    assert code == 0
    x, y = np.load(inputs)["x"], np.load(inputs)["y"]
    saved = np.load(outputs)
    assert sorted(saved) == ["output[0]", "output[1][0]", "output[1][1]"]
    np.testing.assert_allclose(saved["output[0]"], x + y, rtol=1e-6)
    np.testing.assert_allclose(saved["output[1][0]"], x * y, rtol=1e-6)
    np.testing.assert_array_equal(saved["output[1][1]"], x)


@pytest.mark.parametrize("argv, message", [
    (["--save-outputs", "out.txt"], "must end in .npz"),
    (["--save-inputs", "same.npz", "--save-outputs", "same.npz"], "name the same file"),
])
def test_run_refuses_bad_save_paths(capsys, model, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, "run", model, "-q", *argv)
    assert code == 2 and message in err
    assert not (tmp_path / "out.txt").exists()


def test_run_refuses_to_save_over_its_inputs(capsys, model, tmp_path):
    inputs = tmp_path / "in.npz"
    run_cli(capsys, "run", model, "--dim", "n=2", "-q", "--save-inputs", inputs)
    before = inputs.read_bytes()
    code, _, err = run_cli(capsys, "run", model, "-q", "--inputs", inputs, "--save-outputs", inputs)
    assert code == 2 and "is an input file" in err
    assert inputs.read_bytes() == before


def test_run_reuses_the_build_of_an_unchanged_file(capsys, model, tmp_path, monkeypatch):
    """The second ``phasec run`` of the same file reuses the first's build
    (no passes run) and still computes relu(x @ w + b), checked against the
    reference interpreter; ``--timing`` (something to show) builds again."""
    monkeypatch.setenv("PHASEC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PHASEC_KERNEL_CACHE", raising=False)
    code, out, _ = run_cli(capsys, "run", model, "--dim", "n=3", "--repeat", "1")
    assert code == 0 and "lowering -> build" in out and "reused" not in out
    saved_in, saved_out = tmp_path / "in.npz", tmp_path / "out.npz"
    code, out, _ = run_cli(capsys, "run", model, "--dim", "n=3", "--repeat", "1",
                           "--save-inputs", saved_in, "--save-outputs", saved_out)
    assert code == 0 and "PASS" in out
    assert "reused from the build cache" in out and "lowering -> build" not in out
    inputs, outputs = np.load(saved_in), np.load(saved_out)
    want = np.maximum(inputs["x"] @ inputs["w"] + inputs["b"], 0)
    (got,) = [outputs[k] for k in outputs.files]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    code, out, _ = run_cli(capsys, "run", model, "--timing", "--repeat", "1", "-q")
    assert code == 0 and "reused" not in out and "PASS" in out

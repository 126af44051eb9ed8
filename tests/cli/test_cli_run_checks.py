"""``phasec run``'s check and inputs as a user meets them (issue 18 #3, #4):
non-finite outputs, scaled random inputs, adaptive repeats with progress,
float64 inputs cast with a note."""

from __future__ import annotations

import numpy as np
import pytest

from phasec.cli import main
from phasec.cli import run as run_cmd
from phasec.cli.run import compare

DEPTH, WIDTH = 40, 256


def deep_mlp_source() -> str:
    """``DEPTH`` matmul+relu layers: unscaled N(0, 1) values grow by about
    sqrt(WIDTH) per layer and overflow float32 long before the end."""
    params = ", ".join([f'x: R.Tensor((8, {WIDTH}), dtype="float32")']
                       + [f'w{i}: R.Tensor(({WIDTH}, {WIDTH}), dtype="float32")'
                          for i in range(DEPTH)])
    body, prev = [], "x"
    for i in range(DEPTH):
        body.append(f"            h{i} = R.nn.relu(R.matmul({prev}, w{i}))")
        prev = f"h{i}"
    return ("@I.ir_module\nclass Module:\n    @R.function\n"
            f"    def main({params}) -> R.Tensor((8, {WIDTH}), dtype=\"float32\"):\n"
            "        with R.dataflow():\n" + "\n".join(body)
            + f"\n            R.output({prev})\n        return {prev}\n")


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


@pytest.fixture(scope="module")
def deep(tmp_path_factory):
    path = tmp_path_factory.mktemp("deep") / "deep.py"
    path.write_text(deep_mlp_source())
    return path


def test_default_random_inputs_keep_a_deep_model_finite(capsys, deep):
    code, out, err = run_cli(capsys, "run", deep, "--repeat", "1", "-q")
    assert code == 0, out + err
    assert "PASS" in out and "NaN" not in out
    assert "RuntimeWarning" not in err


def test_all_nan_output_is_a_fail_not_a_pass(capsys, deep, tmp_path):
    rng = np.random.default_rng(0)
    npz = tmp_path / "unscaled.npz"
    np.savez(npz, **{"x": rng.standard_normal((8, WIDTH)).astype("float32"),
                     **{f"w{i}": rng.standard_normal((WIDTH, WIDTH)).astype("float32")
                        for i in range(DEPTH)}})
    code, out, err = run_cli(capsys, "run", deep, "--inputs", npz, "--repeat", "1", "-q")
    assert code == 1
    assert "nothing could be checked" in out and "FAIL" in out
    assert "RuntimeWarning" not in err and "site-packages" not in err


@pytest.mark.parametrize("y, r, expected", [
    ([1.0, np.nan], [1.0, np.nan], True),                 # NaN where the reference has it
    ([1.0, np.nan], [1.0, 2.0], False),                   # NaN the reference does not have
    ([np.inf, 1.0], [np.inf, 1.0], True),
    ([np.inf, 1.0], [-np.inf, 1.0], False),               # infinity of the other sign
    ([np.nan, np.nan], [np.nan, np.nan], False),          # nothing finite: nothing checked
    ([1.0, 2.0], [1.0, 2.0 + 1e-3], False),
])
def test_compare_non_finite_values(y, r, expected):
    ok, lines = compare(np.array(y, "float32"), np.array(r, "float32"), 1e-4)
    assert ok is expected, lines


def test_repeats_adapt_and_slow_runs_show_progress(capsys, monkeypatch):
    code, out, _ = run_cli(capsys, "run", "-q", "--repeat", "3")
    assert code == 0 and "best of 3:" in out
    monkeypatch.setattr(run_cmd, "REPEAT_BUDGET_SECONDS", 0.0)  # every run is "slow"
    monkeypatch.setattr(run_cmd, "PROGRESS_SECONDS", 0.0)
    code, out, err = run_cli(capsys, "run", "-q")
    assert code == 0 and "best of 1:" in out
    assert "phasec run: run 1 took" in err
    assert "running the reference interpreter" in err


def test_float64_inputs_are_cast_with_a_note(capsys, tmp_path):
    src = ('@I.ir_module\nclass Module:\n    @R.function\n'
           '    def main(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):\n'
           '        y = R.multiply(x, x)\n        return y\n')
    path = tmp_path / "sq.py"
    path.write_text(src)
    npz = tmp_path / "in.npz"
    np.savez(npz, x=np.array([1.0, -2.0, 3.0]))  # float64, numpy's default
    code, out, err = run_cli(capsys, "run", path, "--inputs", npz, "--repeat", "1")
    assert code == 0 and "PASS" in out
    assert "note: input 'x' is float64; cast to float32" in err


def test_report_fits_100_columns_and_says_cached(capsys, deep, monkeypatch):
    # (built, not reused from the build cache: an earlier test ran the same file)
    monkeypatch.setenv("PHASEC_KERNEL_CACHE", "off")
    code, out, _ = run_cli(capsys, "run", deep, "--repeat", "1")
    assert code == 0
    assert max(map(len, out.splitlines())) <= 100, max(out.splitlines(), key=len)
    assert "w39: float32[256, 256]" in out  # all 41 parameters listed, wrapped
    # Passes that hand back an already verified module need no new verification.
    rows = [line for line in out.splitlines() if "optimization " in line and "cached" in line]
    assert rows and "0.000" not in "".join(rows)


@pytest.mark.parametrize("kind, marker", [
    ("vm", "main"),               # the bytecode lists the entry function
    ("llvm", "define "),          # LLVM IR function definitions
    ("asm", "ret"),               # host assembly returns from each kernel
])
def test_emit_prints_only_the_code(capsys, kind, marker):
    code, out, err = run_cli(capsys, "run", "--emit", kind)
    assert code == 0
    assert marker in out
    assert "phasec run:" not in out and "PASS" not in out + err  # nothing ran
    assert "passes (opt_level" in err  # the report went to stderr
    if kind == "llvm":
        import llvmlite.binding as llvm
        llvm.parse_assembly(out).verify()  # valid IR, checked by LLVM itself

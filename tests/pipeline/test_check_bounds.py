"""Bounds-check mode (issue 15, "a bounds-check mode for any kernel"):
``phasec.build(..., check_bounds=True)`` / ``--check-bounds`` instruments
every buffer access (the default checks the accesses not proven in bounds:
tests/backend/llvm/test_bounds_default.py), so a buggy hand-written kernel ends in a
BufferAccessError naming kernel, buffer, dimension, index and extent — the
same error the TIR interpreter raises — instead of reading or writing memory
it does not own. Correct kernels compute what numpy computes.
"""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

import phasec
from phasec.backend.vm import Executable, ExecutableFormatError
from phasec.cli import main
from phasec.errors import BufferAccessError

SHIFT = '''
@I.ir_module
class Module:
    @T.prim_func
    def shift(A: T.Buffer(("n",), "float32"), B: T.Buffer(("n",), "float32")):
        n = T.int64()
        for i in range(n):
            B[{store}] = A[{load}]

    @R.function
    def main(a: R.Tensor(("n",), dtype="float32")) -> R.Tensor(("n",), dtype="float32"):
        n = T.int64()
        cls = Module
        b = R.call_tir(cls.shift, (a,), out_sinfo=R.Tensor((n,), dtype="float32"))
        return b
'''
READ_PAST_END = SHIFT.format(store="i", load="i + 1")
WRITE_PAST_END = SHIFT.format(store="i + 1", load="i")
CORRECT = SHIFT.format(store="i", load="n - 1 - i")  # reverse

SCATTER = '''
@I.ir_module
class Module:
    @T.prim_func
    def scatter(I: T.Buffer((4,), "int64"), V: T.Buffer((4,), "float32"),
                B: T.Buffer((8,), "float32")):
        for i in T.parallel(4):
            B[I[i]] = V[i]

    @R.function
    def main(i: R.Tensor((4,), dtype="int64"),
             v: R.Tensor((4,), dtype="float32")) -> R.Tensor((8,), dtype="float32"):
        cls = Module
        b = R.call_tir(cls.scatter, (i, v), out_sinfo=R.Tensor((8,), dtype="float32"))
        return b
'''

SCRATCH = '''
@I.ir_module
class Module:
    @T.prim_func
    def window(A: T.Buffer((16,), "float32"), I: T.Buffer((16,), "int64"),
               B: T.Buffer((16,), "float32")):
        tmp = T.alloc_buffer((4,), "float32")
        for i in range(16):
            tmp[I[i]] = A[i]
            B[i] = tmp[I[i]]

    @R.function
    def main(a: R.Tensor((16,), dtype="float32"),
             i: R.Tensor((16,), dtype="int64")) -> R.Tensor((16,), dtype="float32"):
        cls = Module
        b = R.call_tir(cls.window, (a, i), out_sinfo=R.Tensor((16,), dtype="float32"))
        return b
'''


def _errors(text: str, *args) -> list[BufferAccessError]:
    """The error from compiled (checked) kernels and from the TIR interpreter."""
    exe = phasec.build(phasec.parse(text), check_bounds=True)
    found = []
    for kernels in ("llvm", "interp"):
        with pytest.raises(BufferAccessError) as info:
            phasec.VirtualMachine(exe, kernels=kernels)["main"](*args)
        found.append(info.value)
    return found


@pytest.mark.parametrize("n", [1, 5, 1000])
def test_a_read_past_the_end_is_caught(n):
    compiled, interpreted = _errors(READ_PAST_END, np.ones(n, "float32"))
    for err in (compiled, interpreted):
        assert (err.kernel, err.buffer, err.dim, err.index, err.extent, err.write) == \
            ("shift", "A", 0, n, n, False)
    assert str(compiled).startswith(f"kernel 'shift': out-of-bounds read of buffer 'A': "
                                    f"index {n} in dimension 0, whose extent is {n} "
                                    f"(valid: 0 to {n - 1})")


def test_a_write_past_the_end_is_caught():
    compiled, interpreted = _errors(WRITE_PAST_END, np.ones(6, "float32"))
    for err in (compiled, interpreted):
        assert (err.buffer, err.index, err.extent, err.write) == ("B", 6, 6, True)
    assert "out-of-bounds write to buffer 'B'" in str(compiled)


@pytest.mark.parametrize("bad", [8, -1, 10**12, -(2**63)])
def test_data_dependent_indices_in_a_parallel_loop(bad):
    """Without checks ``B[I[i]]`` with 10**12 writes far outside B (the
    segfault of issue 15 #1); with them it is an error naming the index."""
    idx = np.array([0, 3, bad, 1], "int64")
    compiled, interpreted = _errors(SCATTER, idx, np.ones(4, "float32"))
    for err in (compiled, interpreted):
        assert (err.kernel, err.buffer, err.index, err.extent, err.write) == \
            ("scatter", "B", bad, 8, True)


def test_an_allocated_buffer_is_named_too():
    idx = np.arange(16, dtype="int64") % 5  # 4 is one past tmp's end
    compiled, interpreted = _errors(SCRATCH, np.ones(16, "float32"), idx)
    for err in (compiled, interpreted):
        assert (err.buffer, err.index, err.extent) == ("tmp", 4, 4)


def test_correct_kernels_compute_the_same_with_checks():
    a = np.arange(7, dtype="float32")
    exe = phasec.build(phasec.parse(CORRECT), check_bounds=True)
    np.testing.assert_array_equal(phasec.VirtualMachine(exe)["main"](a), a[::-1])
    exe = phasec.build(phasec.parse(SCATTER), check_bounds=True)
    out = phasec.VirtualMachine(exe)["main"](np.array([7, 0, 2, 5], "int64"),
                                             np.array([1, 2, 3, 4], "float32"))
    np.testing.assert_array_equal(out[[7, 0, 2, 5]], [1, 2, 3, 4])  # (the rest: unwritten)
    exe = phasec.build(phasec.parse(SCRATCH), check_bounds=True)
    a = np.arange(16, dtype="float32")
    idx = np.arange(16, dtype="int64") % 4
    np.testing.assert_array_equal(phasec.VirtualMachine(exe)["main"](a, idx), a)


def test_the_bundled_model_runs_the_same_with_checks():
    """The MLP (matmul, bias, relu...) against a numpy formula of it."""
    from phasec.cli.run import load_example

    mod = load_example("mlp")
    exe = phasec.build(mod, check_bounds=True)
    sig = exe.signature("main")
    rng = np.random.default_rng(0)
    args = [(rng.standard_normal([int(d.value) for d in s.shape]) / 8).astype(s.dtype) for _, s in sig]
    checked = phasec.VirtualMachine(exe)["main"](*args)
    plain = phasec.VirtualMachine(phasec.build(mod))["main"](*args)
    np.testing.assert_allclose(checked, plain, rtol=1e-6, atol=1e-6)
    x, w1, b1, w2, b2, w3, b3 = (a.astype("float64") for a in args)
    h1 = np.maximum(x @ w1 + b1, 0)
    h2 = np.maximum(h1 @ w2 + b2, 0)
    np.testing.assert_allclose(checked, h2 @ w3 + b3, rtol=1e-4, atol=1e-4)


def test_the_executable_records_check_bounds(tmp_path):
    exe = phasec.build(phasec.parse(READ_PAST_END), check_bounds=True, kernels="none")
    assert exe.check_bounds is True and "check_bounds=True" in repr(exe)
    path = tmp_path / "checked.pvm"
    exe.save(path)
    with zipfile.ZipFile(path) as zf:
        assert json.loads(zf.read("executable.json"))["check_bounds"] is True
    loaded = Executable.load(path)
    assert loaded.check_bounds
    with pytest.raises(BufferAccessError, match="buffer 'A'"):
        phasec.VirtualMachine(loaded)["main"](np.ones(3, "float32"))


def test_a_recorded_opt_out_does_not_switch_checks_off_when_loading(tmp_path):
    """A file is data anyone can write: its "built --unchecked" is recorded
    but loading uses the default checks unless the user opts out."""
    plain = phasec.build(phasec.parse(READ_PAST_END), kernels="none", check_bounds=False)
    assert plain.check_bounds is False
    path = tmp_path / "plain.pvm"
    plain.save(path)
    with zipfile.ZipFile(path) as zf:
        assert json.loads(zf.read("executable.json"))["check_bounds"] is False
    loaded = Executable.load(path)
    assert loaded.check_bounds is None  # the default: checked unless proven
    with pytest.raises(BufferAccessError, match="index 3 in dimension 0"):
        phasec.VirtualMachine(loaded)["main"](np.ones(3, "float32"))
    assert Executable.load(path, check_bounds=False).check_bounds is False  # the user's choice
    checked = Executable.load(path, check_bounds=True)
    with pytest.raises(BufferAccessError, match="index 3 in dimension 0"):
        phasec.VirtualMachine(checked)["main"](np.ones(3, "float32"))


def test_a_damaged_check_bounds_field(tmp_path):
    path = tmp_path / "m.pvm"
    phasec.build(phasec.parse(CORRECT), kernels="none").save(path)
    with zipfile.ZipFile(path) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    doc = json.loads(files["executable.json"])
    doc["check_bounds"] = "yes"
    files["executable.json"] = json.dumps(doc).encode()
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    with pytest.raises(ExecutableFormatError, match="check_bounds must be true, false or null"):
        Executable.load(path)


def test_cli_check_bounds(tmp_path, capsys):
    src = tmp_path / "bug.py"
    src.write_text(READ_PAST_END)
    code = main(["run", str(src), "--check-bounds", "--dim", "n=5"])
    err = capsys.readouterr().err
    assert code == 1 and "kernel 'shift': out-of-bounds read of buffer 'A': index 5" in err
    exe = tmp_path / "bug.pvm"
    assert main(["build", str(src), "-o", str(exe), "--check-bounds"]) == 0
    capsys.readouterr()
    assert main(["run", str(exe), "--dim", "n=5"]) == 1
    assert "out-of-bounds read of buffer 'A'" in capsys.readouterr().err
    plain = tmp_path / "plain.pvm"
    assert main(["build", str(src), "-o", str(plain)]) == 0
    capsys.readouterr()
    assert main(["run", str(plain), "--check-bounds", "--dim", "n=5"]) == 1
    assert "out-of-bounds read of buffer 'A'" in capsys.readouterr().err

"""Indices read from data are checked (issue 15 #1, #2): in compiled kernels
(T.checked_index), on the TIR interpreter and in the reference interpreter,
with the same semantics — negative indices count from the end, anything else
is an IndexOutOfRangeError naming the kernel or operator, the bad value and
the valid range. Never a crash, never a clamp."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import phasec
from phasec.errors import IndexOutOfRangeError

TAKE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 3), dtype="float32"), i: R.Tensor((2,), dtype="{dtype}")):
        y = R.take(x, i, axis={axis})
        return y
'''
SCATTER = '''
@I.ir_module
class Module:
    @T.prim_func
    def scatter(A: T.Buffer((4,), "int64"), V: T.Buffer((4,), "float32"),
                B: T.Buffer((8,), "float32")):
        for i in range(4):
            B[T.checked_index(A[i], T.int64(8))] = V[i]

    @R.function
    def main(a: R.Tensor((4,), dtype="int64"),
             v: R.Tensor((4,), dtype="float32")) -> R.Tensor((8,), dtype="float32"):
        cls = Module
        b = R.call_tir(cls.scatter, (a, v), out_sinfo=R.Tensor((8,), dtype="float32"))
        return b
'''
X = np.arange(12, dtype="float32").reshape(4, 3)


def _outcomes(mod, *args):
    """(kind, value) for the reference interpreter and the VM on both kernel backends."""
    exe = phasec.build(mod)
    results = []
    runners = [lambda: phasec.interp.run(mod, *args)]
    runners += [lambda k=k: phasec.VirtualMachine(exe, kernels=k)["main"](*args)
                for k in ("llvm", "interp")]
    for run in runners:
        try:
            results.append(("ok", np.asarray(run())))
        except IndexOutOfRangeError as exc:
            results.append(("error", (exc.value, exc.extent)))
        except phasec.PhasecError as exc:  # the reference interpreter wraps its errors
            cause = exc.__cause__ or exc.__context__
            assert isinstance(cause, IndexOutOfRangeError), exc
            results.append(("error", (cause.value, cause.extent)))
    return results


@pytest.mark.parametrize("dtype", ["int64", "int32"])
@pytest.mark.parametrize("axis, bad", [(0, 400_000_000), (0, -7), (0, 4), (1, 3), (1, -4)])
def test_take_out_of_range_is_an_error_everywhere(dtype, axis, bad):
    mod = phasec.parse(TAKE.format(dtype=dtype, axis=axis))
    outcomes = _outcomes(mod, X, np.array([0, bad], dtype))
    extent = X.shape[axis]
    assert outcomes == [("error", (bad, extent))] * 3


def test_take_negative_indices_count_from_the_end():
    mod = phasec.parse(TAKE.format(dtype="int64", axis=0))
    for kind, value in _outcomes(mod, X, np.array([-1, -4])):
        assert kind == "ok"
        np.testing.assert_array_equal(value, X[[3, 0]])  # numpy's own indexing


def test_message_names_kernel_value_and_range():
    mod = phasec.parse(TAKE.format(dtype="int64", axis=0))
    vm = phasec.VirtualMachine(phasec.build(mod))
    with pytest.raises(IndexOutOfRangeError) as info:
        vm["main"](X, np.array([0, 9]))
    assert str(info.value).startswith("kernel 'take': index 9 is out of range for an axis "
                                      "of extent 4 (valid: -4 to 3)")
    assert "in main" in str(info.value)


@pytest.mark.parametrize("kernels", ["llvm", "interp"])
def test_data_dependent_store_cannot_write_out_of_bounds(kernels):
    # B[A[i]] = V[i] with 10**12 in A wrote far outside B (SIGSEGV) before.
    mod = phasec.parse(SCATTER)
    vm = phasec.VirtualMachine(phasec.build(mod), kernels=kernels)
    v = np.arange(4, dtype="float32")
    with pytest.raises(IndexOutOfRangeError) as info:
        vm["main"](np.array([0, 1, 10 ** 12, 3]), v)
    assert (info.value.value, info.value.extent) == (10 ** 12, 8)
    out = vm["main"](np.array([0, 1, -1, 3]), v)
    assert out[7] == 2.0 and out[0] == 0.0 and out[3] == 3.0


def test_out_of_range_constant_indices_in_a_built_executable(tmp_path):
    # The index lives in the executable (a constant): loading and running it
    # gives the error, in a subprocess that must not die of a signal.
    src = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 3), dtype="float32")):
        i = R.const([0, 1000000000000], "int64")
        y = R.take(x, i, axis=0)
        return y
'''
    path = tmp_path / "m.py"
    path.write_text(src)
    exe = tmp_path / "m.pvm"
    code = (f"import numpy as np, phasec\n"
            f"phasec.build(phasec.load({str(path)!r})).save({str(exe)!r})\n"
            f"vm = phasec.VirtualMachine(phasec.Executable.load({str(exe)!r}))\n"
            "try:\n    vm['main'](np.zeros((4, 3), 'float32'))\n"
            "except IndexError as e:\n    print('IndexError', e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "take': index 1000000000000 is out of range for an axis of extent 4" in proc.stdout


@settings(max_examples=25, deadline=None)
@given(rows=st.integers(0, 6), idx=st.lists(st.integers(-10, 10), min_size=1, max_size=5),
       mode=st.sampled_from(["fast", "clip", "wrap"]))
def test_property_compiled_and_interpreted_agree(rows, idx, mode):
    """take in its three modes, empty axes included (issue 27 #3: clip and wrap
    over an empty axis read heap garbage): the reference interpreter and both
    kernel backends give numpy's result or the same IndexOutOfRangeError."""
    src = f'''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(({rows}, 2), dtype="float32"), i: R.Tensor(({len(idx)},), dtype="int64")):
        y = R.take(x, i, axis=0, mode="{mode}")
        return y
'''
    mod = phasec.parse(src)
    x = np.arange(rows * 2, dtype="float32").reshape(rows, 2)
    outcomes = _outcomes(mod, x, np.array(idx, "int64"))
    first = outcomes[0]
    for other in outcomes[1:]:
        assert other[0] == first[0]
        if first[0] == "ok":
            np.testing.assert_array_equal(other[1], first[1])
        else:
            assert other[1] == first[1]
    # clip and wrap accept any index into a non-empty axis; nothing is in an empty one
    in_range = rows > 0 if mode != "fast" else all(-rows <= i < rows for i in idx)
    assert (first[0] == "ok") == in_range
    if in_range:
        np.testing.assert_array_equal(first[1], np.take(x, np.array(idx), axis=0,
                                                        mode="raise" if mode == "fast" else mode))
    elif rows == 0:
        assert first[1] == (0 if mode != "fast" else idx[0], 0)


@pytest.mark.parametrize("mode", ["clip", "wrap"])
def test_take_modes_clip_and_wrap_match_numpy_in_kernels_and_reference(mode: str) -> None:
    """TVM 0.27's R.take(..., mode=clip|wrap): indices clamped into range or
    taken modulo the extent, as numpy.take's modes of the same names."""
    src = f'''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((4, 3), "float32"), i: R.Tensor((6,), "int64")):
        a = R.take(x, i, axis=0, mode="{mode}")
        return a
'''
    mod = phasec.parse(src)
    x = np.arange(12, dtype="float32").reshape(4, 3)
    i = np.array([-9, -1, 0, 3, 4, 400000000], dtype="int64")
    want = np.take(x, i, axis=0, mode=mode)
    got = phasec.VirtualMachine(phasec.build(mod))["main"](x, i)
    np.testing.assert_array_equal(np.asarray(got), want)
    from phasec.interp.relax import run as interpret

    np.testing.assert_array_equal(np.asarray(interpret(mod, x, i)), want)

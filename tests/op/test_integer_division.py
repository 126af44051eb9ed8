"""Integer division by zero is a run-time error wherever a program runs --
the operators' numpy references (the reference interpreter), the TIR
interpreter, the LLVM kernels of the default build -- a
DivisionByZeroError, never a quotient or remainder of 0 (ONNX Runtime
fails such a run too: tests/frontend/test_onnx_integer_division.py).
Non-zero divisors match Python's exact integer arithmetic: truncating
``divide`` and ``mod``, flooring ``floor_divide`` and ``floor_mod``,
negative operands, ``INT_MIN / -1`` wrapping, int8 to int64 and unsigned.
"""

from __future__ import annotations

import numpy as np
import pytest

import phasec
from phasec.backend.llvm import compile_prim_funcs
from phasec.errors import DivisionByZeroError
from phasec.interp.tir import TIRDivisionByZeroError, run_prim_func

SOURCE = '''
@I.ir_module
class Module:
    @R.function
    def main(a: R.Tensor(("n",), "{dt}"), b: R.Tensor(("n",), "{dt}")):
        return (R.divide(a, b), R.floor_divide(a, b), R.mod(a, b), R.floor_mod(a, b))
'''


def _trunc(x: int, y: int) -> int:
    q = abs(x) // abs(y)
    return q if (x < 0) == (y < 0) else -q


def _expected(a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    """Python's exact integers, wrapped to the dtype (two's complement)."""
    bits = a.dtype.itemsize * 8
    signed = a.dtype.kind == "i"

    def wrap(v: int) -> int:
        v %= 1 << bits
        return v - (1 << bits) if signed and v >= 1 << (bits - 1) else v
    rows = [(_trunc(x, y), x // y, x - y * _trunc(x, y), x % y)
            for x, y in zip(a.tolist(), b.tolist())]
    return [np.array([wrap(r[k]) for r in rows], a.dtype) for k in range(4)]


def _operands(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    info = np.iinfo(dtype)
    if info.min < 0:
        a = [7, -7, 7, -7, 0, info.min, info.min, 5, info.max, -1]
        b = [2, 2, -2, -2, 3, -1, 1, info.min, -1, info.max]
    else:
        a = [7, 0, info.max, 5, 1]
        b = [2, 3, 1, info.max, 2]
    return np.array(a, dtype), np.array(b, dtype)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint32",
                                   "uint64"])
def test_nonzero_divisors_match_python_and_zero_is_an_error(dtype):
    mod = phasec.parse(SOURCE.format(dt=dtype))
    a, b = _operands(dtype)
    want = _expected(a, b)
    vm = phasec.VirtualMachine(phasec.build(mod))
    for got in (vm["main"](a, b), phasec.interp.run(mod, a, b)):
        for g, w in zip(got, want):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
    zero = b.copy()
    zero[1] = 0
    with pytest.raises(DivisionByZeroError, match=r"^integer division by zero in kernel '\w+'"):
        vm["main"](a, zero)
    with pytest.raises(DivisionByZeroError, match=r"binding .*: integer division by zero in R\."):
        phasec.interp.run(mod, a, zero)


def test_the_tir_interpreter_and_an_unchecked_build_fail_the_same_way():
    mod = phasec.parse(SOURCE.format(dt="int32"))
    a, b = np.array([5, 6], "int32"), np.array([1, 0], "int32")
    for exe in (phasec.build(mod, kernels="interp"), phasec.build(mod, check_bounds=False)):
        with pytest.raises(DivisionByZeroError, match="integer division by zero in kernel"):
            phasec.VirtualMachine(exe)["main"](a, b)


def test_a_division_of_constants_by_zero_is_not_folded():
    src = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), "int64")):
        q = R.floor_divide(R.const([6, 7], "int64"), R.const([2, 0], "int64"))
        return R.add(x, q)
'''
    vm = phasec.VirtualMachine(phasec.build(phasec.parse(src)))
    with pytest.raises(DivisionByZeroError):
        vm["main"](np.zeros(2, "int64"))


def test_integer_mean_over_an_empty_axis_divides_nothing():
    src = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, "k"), "int32")):
        return R.mean(x, axis=[1])
'''
    vm = phasec.VirtualMachine(phasec.build(phasec.parse(src)))
    np.testing.assert_array_equal(vm["main"](np.zeros((3, 0), "int32")), np.zeros(3, "int32"))
    x = np.array([[1, 2, 4], [-7, 0, 0], [5, 5, 5]], "int32")
    np.testing.assert_array_equal(vm["main"](x), [2, -2, 5])  # 7/3, -7/3 truncated, 15/3


KERNELS = '''
@I.ir_module
class Module:
    @T.prim_func
    def guarded(c: T.Buffer((8,), "int64"), d: T.int64):
        for i in range(8):
            c[i] = T.Select(d != 0, i // d, T.int64(-1))

    @T.prim_func
    def by_data(a: T.Buffer((8,), "int64"), b: T.Buffer((8,), "int64"),
                c: T.Buffer((8,), "int64")):
        for i in range(8):
            c[i] = a[i] % b[i]

    @T.prim_func
    def by_extent(a: T.Buffer(("n", "m"), "float32"), c: T.Buffer(("n", "m"), "float32")):
        n = T.int64()
        m = T.int64()
        for k in range(n * m):
            c[k // m, k % m] = a[k // m, k % m]
'''


def test_kernels_test_a_divisor_only_when_it_may_be_zero():
    """A Select evaluates a branch that may fail only when it is chosen (as
    the TIR interpreter); a divisor read from data is tested; one proven
    non-zero (a factor of the extent of the loop it runs in) is not."""
    mod = phasec.parse(KERNELS)
    funcs = {name: mod[name] for name in ("guarded", "by_data", "by_extent")}
    lib = compile_prim_funcs(funcs, use_cache=False)
    for d in (0, 3, -3):
        want = [i // d if d else -1 for i in range(8)]
        for run in (lambda c: lib["guarded"](c, d),
                    lambda c: run_prim_func(funcs["guarded"], [c, d])):
            c = np.zeros(8, "int64")
            run(c)
            assert c.tolist() == want
    a, b = np.arange(8, dtype="int64") - 4, np.array([3, -3, 2, 5, 1, 7, -2, 4], "int64")
    c = np.zeros(8, "int64")
    lib["by_data"](a, b, c)
    assert c.tolist() == [x % y for x, y in zip(a.tolist(), b.tolist())]
    b[5] = 0
    with pytest.raises(DivisionByZeroError, match="^integer division by zero in kernel 'by_data'$"):
        lib["by_data"](a, b, c)
    with pytest.raises(TIRDivisionByZeroError, match="kernel 'by_data'"):
        run_prim_func(funcs["by_data"], [a, b, c], "by_data")
    x = np.arange(12, dtype="float32").reshape(3, 4)
    y = np.zeros_like(x)
    lib["by_extent"](x, y)
    np.testing.assert_array_equal(y, x)
    lib["by_extent"](np.zeros((3, 0), "float32"), np.zeros((3, 0), "float32"))
    ir = lib.llvm_ir
    kernel_text = {name: ir[ir.index(f'@"phasec.k.{name}"('):] for name in funcs}
    tests = {name: "divzero.flag" in text[:text.index("\n}\n")]
             for name, text in kernel_text.items()}
    assert tests == {"guarded": True, "by_data": True, "by_extent": False}, tests

"""Kernels flush subnormal float results to zero on x86-64 (phasec/backend/llvm/fpenv.py):
a result below 2**-126 is 0 instead of numpy's subnormal, operands are untouched,
the caller's floating-point environment is restored, and PHASEC_SUBNORMALS=keep
or flush_subnormals=False keeps IEEE results."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import numpy as np
import pytest

from phasec.backend.llvm import compile_prim_funcs, set_num_threads
from phasec.ir import tir as T

N = 4099  # prime: the vector loops' remainders run too
TINY = np.finfo(np.float32).tiny
ON_X86 = platform.machine().lower() in ("x86_64", "amd64")


def _product(kind: str = "serial") -> T.PrimFunc:
    a, b, c, i = T.Buffer("A", (N,)), T.Buffer("B", (N,)), T.Buffer("C", (N,)), T.Var("i")
    return T.PrimFunc((a, b, c), T.For(i, 0, N, kind, T.BufferStore(c, a[i] * b[i], (i,))))


def _operands() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Products of every magnitude from 1e-30 to 1e-50 (normal, subnormal, below the
    subnormals) and the numpy (IEEE) result."""
    a = np.full(N, 1e-20, np.float32)
    b = np.logspace(-10, -30, N).astype(np.float32)
    return a, b, a * b


def _run(kernel, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty_like(a)
    kernel(a, b, out)
    return out


def test_subnormal_results_are_zero_and_normal_results_exact() -> None:
    a, b, expected = _operands()
    got = _run(compile_prim_funcs({"mul": _product()}, use_cache=False)["mul"], a, b)
    subnormal = (expected != 0) & (np.abs(expected) < TINY)
    assert subnormal.any() and (~subnormal).any()
    normal = ~subnormal
    np.testing.assert_array_equal(got[normal], expected[normal])
    if ON_X86:
        assert (got[subnormal] == 0).all()
    else:  # other hosts keep IEEE results
        np.testing.assert_array_equal(got, expected)
    # the difference from IEEE arithmetic stays below the smallest normal number
    assert np.max(np.abs(got - expected)) < TINY
    # the caller's (numpy's) own arithmetic still has subnormals afterwards
    assert np.float32(1e-20) * np.float32(1e-20) != 0


def test_kept_when_asked() -> None:
    a, b, expected = _operands()
    lib = compile_prim_funcs({"mul": _product()}, use_cache=False, flush_subnormals=False)
    np.testing.assert_array_equal(_run(lib["mul"], a, b), expected)


def test_subnormal_operands_are_not_zero() -> None:
    # flush-to-zero only: a subnormal input still compares as nonzero, as in numpy
    x, y, i = T.Buffer("X", (8,)), T.Buffer("Y", (8,), "int32"), T.Var("i")
    zero = T.as_prim_expr(0.0, "float32")
    f = T.PrimFunc((x, y), T.For(i, 0, 8, "serial", T.BufferStore(
        y, T.Select(T.BinaryOp(">", x[i], zero), T.as_prim_expr(1, "int32"), T.as_prim_expr(0, "int32")), (i,))))
    values = np.array([1e-40, -1e-40, 0, 1, -1, 1e-45, TINY, -TINY], np.float32)
    out = np.empty(8, np.int32)
    compile_prim_funcs({"positive": f}, use_cache=False)["positive"](values, out)
    np.testing.assert_array_equal(out, (values > 0).astype(np.int32))


def test_parallel_chunks_on_pool_threads_flush_too(threads_always) -> None:
    set_num_threads(3)
    a, b, expected = _operands()
    got = _run(compile_prim_funcs({"pmul": _product("parallel")}, use_cache=False)["pmul"], a, b)
    subnormal = (expected != 0) & (np.abs(expected) < TINY)
    if ON_X86:
        assert (got[subnormal] == 0).all()
    np.testing.assert_array_equal(got[~subnormal], expected[~subnormal])


def _child(value: str) -> subprocess.CompletedProcess:
    code = ("import numpy as np\n"
            "from phasec.backend.llvm import compile_prim_funcs\n"
            "from phasec.ir import tir as T\n"
            "a, c, i = T.Buffer('A', (4,)), T.Buffer('C', (4,)), T.Var('i')\n"
            "f = T.PrimFunc((a, c), T.For(i, 0, 4, 'serial', T.BufferStore(c, a[i] * a[i], (i,))))\n"
            "x = np.full(4, 1e-20, np.float32); out = np.empty_like(x)\n"
            "compile_prim_funcs({'sq': f}, use_cache=False)['sq'](x, out)\n"
            "print(out[0] != 0)\n")
    env = {**os.environ, "PHASEC_SUBNORMALS": value}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.mark.parametrize("value, kept", [("keep", "True"), ("KEEP", "True"),
                                         ("flush", str(not ON_X86))])
def test_the_environment_variable_chooses(value: str, kept: str) -> None:
    done = _child(value)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [kept]


def test_an_invalid_setting_names_the_variable() -> None:
    done = _child("sometimes")
    assert done.returncode != 0
    assert "PHASEC_SUBNORMALS must be 'flush'" in done.stderr and "'sometimes'" in done.stderr


def _matmul_model(weight: np.ndarray):
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, weight.shape[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(weight, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("flush", [True, False])
def test_subnormal_weights_are_stored_as_signed_zeros(flush: bool) -> None:
    # a weight's subnormal elements cost every kernel reading them an assist per
    # instruction: the executable stores them as zeros of the same sign
    import phasec
    from phasec.backend.vm import codegen
    from phasec.frontend.onnx import from_onnx
    from phasec.pipeline import lower

    rng = np.random.default_rng(0)
    w = rng.standard_normal((37, 29)).astype(np.float32)
    w[::3, ::2] = np.float32(3e-39) * np.sign(w[::3, ::2])  # subnormal, both signs
    lowered = lower(from_onnx(_matmul_model(w)))
    exe = codegen(lowered, flush_subnormals=flush)
    stored = [c for c in exe.constants if isinstance(c, np.ndarray) and c.dtype == np.float32
              and c.size >= w.size]
    assert stored
    for c in stored:
        magnitude = np.abs(c)
        assert ((magnitude > 0) & (magnitude < TINY)).any() != flush
        if flush:  # only the subnormal elements changed, signs kept
            assert np.signbit(c).sum() == np.signbit(w).sum()
    x = rng.standard_normal((3, 37)).astype(np.float32)
    got = phasec.VirtualMachine(exe)["main"](x)
    np.testing.assert_allclose(got, x.astype(np.float64) @ w, rtol=1e-5, atol=1e-5)


def test_flush_subnormal_elements_leaves_other_values_and_arrays_alone() -> None:
    from phasec.backend.vm.codegen import flush_subnormal_elements

    values = np.array([1e-40, -1e-40, 0.0, -0.0, TINY, -TINY, 1.0, np.inf, np.nan, 1e-45],
                      np.float32)
    flushed = flush_subnormal_elements(values)
    np.testing.assert_array_equal(flushed.view(np.uint32), np.array(
        [0.0, -0.0, 0.0, -0.0, TINY, -TINY, 1.0, np.inf, np.nan, 0.0], np.float32).view(np.uint32))
    assert flushed.dtype == np.float32
    normal = np.array([1.0, 2.0], np.float32)
    assert flush_subnormal_elements(normal) is normal
    ints = np.array([0, 1], np.int32)
    assert flush_subnormal_elements(ints) is ints
    doubles = np.array([1e-310, 1.0])
    np.testing.assert_array_equal(flush_subnormal_elements(doubles), [0.0, 1.0])


def test_a_splat_constant_is_flushed_without_being_materialized() -> None:
    # (ConstantOfShape of 16 TiB: a broadcast view; flushing it must not allocate it)
    from phasec.backend.vm.codegen import flush_subnormal_elements

    huge = np.broadcast_to(np.float32(1.0), (1 << 40, 4))
    assert flush_subnormal_elements(huge) is huge
    tiny = np.broadcast_to(np.float32([[1e-40, 2.0, -1e-40]]), (1 << 40, 3))
    flushed = flush_subnormal_elements(tiny)
    assert flushed.shape == tiny.shape and 0 in flushed.strides
    np.testing.assert_array_equal(flushed[12345], [0.0, 2.0, -0.0])
    assert np.signbit(flushed[7, 2])

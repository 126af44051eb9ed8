"""TIR intrinsics and operators compiled to LLVM: every math intrinsic, the
vectorized float32 math library's accuracy, integer and float binary
operators, logic on bools and casts, against numpy."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from phasec.backend.llvm import compile_prim_funcs
from phasec.errors import DivisionByZeroError
from phasec.interp.tir import run_prim_func
from phasec.ir import tir as T

from helpers.tir_build import RNG, binop, buf, elementwise, loops, rand, store, var


# --------------------------------------------------------------------------
# Intrinsics and operators
# --------------------------------------------------------------------------

_NP_INTRINSICS = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "erf": np.vectorize(math.erf), "fabs": np.abs, "floor": np.floor, "ceil": np.ceil,
    "round": np.round, "trunc": np.trunc, "sin": np.sin, "cos": np.cos, "exp2": np.exp2,
    "log2": np.log2, "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite,
    "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh,
    "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
}
#: the argument each intrinsic is tested on: its domain
_UNIT = ("asin", "acos", "atanh")


def test_intrinsic_table_is_complete():
    assert set(_NP_INTRINSICS) == set(T.MATH_INTRINSICS)


@pytest.mark.parametrize("dtype,vector_math", [("float32", True), ("float32", False),
                                               ("float64", True)])
def test_every_intrinsic(dtype, vector_math):
    n = 67
    funcs = {}
    for name in T.MATH_INTRINSICS:
        out = "bool" if name in T.BOOL_INTRINSICS else dtype
        funcs[name] = elementwise(n, lambda x, name=name: T.Call(name, (x,)), dtype, out)
    funcs["atan2"] = elementwise(n, lambda y, x: T.Call("atan2", (y, x)), dtype, nin=2)
    lib = compile_prim_funcs(funcs, vector_math=vector_math)
    assert ("@erff" in lib.llvm_ir) == (dtype == "float32" and not vector_math)
    x = (RNG.standard_normal(n) * 3).astype(dtype)
    x[:4] = [0.5, 1.5, -2.5, np.nan]  # round half to even, and a NaN
    x[4:6] = [np.inf, -np.inf]
    pos = np.abs(x) + np.asarray(0.1, dtype)
    unit = np.tanh(x).astype(dtype)
    for name in T.MATH_INTRINSICS:
        arg = pos if name in ("log", "sqrt", "rsqrt", "log2") else x
        arg = unit if name in _UNIT else (pos + 1 if name == "acosh" else arg)
        y = np.empty(n, bool if name in T.BOOL_INTRINSICS else dtype)
        lib[name](arg, y)
        with np.errstate(all="ignore"):
            ref = _NP_INTRINSICS[name](arg.astype(np.float64))
        if name in T.BOOL_INTRINSICS:
            np.testing.assert_array_equal(y, ref)
        else:
            np.testing.assert_allclose(y, ref.astype(dtype), rtol=1e-5 if dtype == "float32" else 1e-12,
                                       atol=1e-6 if dtype == "float32" else 1e-14, err_msg=name)


    y = np.empty(n, dtype)
    lib["atan2"](x, pos[::-1].copy() - 1, y)
    np.testing.assert_allclose(y, np.arctan2(x.astype(np.float64), pos[::-1] - 1).astype(dtype),
                               rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-6)


def test_intrinsics_on_ints_and_half():
    n = 10
    lib = compile_prim_funcs({
        "iabs": elementwise(n, lambda x: T.Call("fabs", (x,)), "int32"),
        "ifloor": elementwise(n, lambda x: T.Call("floor", (x,)), "int16"),
        "hexp": elementwise(n, lambda x: T.Call("exp", (x,)), "float16"),
        "hadd": elementwise(n, lambda x, y: x * y + x, "float16", nin=2),
        "isnan_i": elementwise(n, lambda x: T.Call("isnan", (x,)), "int32", "bool"),
    })
    xi = rand((n,), "int32")
    y = np.empty(n, np.int32)
    lib["iabs"](xi, y)
    np.testing.assert_array_equal(y, np.abs(xi))
    xs, ys = rand((n,), "int16"), np.empty(n, np.int16)
    lib["ifloor"](xs, ys)
    np.testing.assert_array_equal(ys, xs)
    xh = rand((n,), "float16")
    yh = np.empty(n, np.float16)
    lib["hexp"](xh, yh)
    np.testing.assert_allclose(yh, np.exp(xh), rtol=2e-3)
    xh2 = rand((n,), "float16")
    lib["hadd"](xh, xh2, yh)
    np.testing.assert_allclose(yh, xh * xh2 + xh, rtol=2e-3, atol=1e-3)
    yb = np.ones(n, bool)
    lib["isnan_i"](xi, yb)
    assert not yb.any()


_MATH_REF = {
    "exp": np.exp, "tanh": np.tanh, "erf": np.vectorize(math.erf),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "log": np.log, "log2": np.log2,
}


@pytest.fixture(scope="module")
def vector_math_lib():
    n = var("n")
    funcs = {}
    for name in _MATH_REF:
        X, Y = buf("X", (n,)), buf("Y", (n,))
        funcs[name] = T.PrimFunc((X, Y), loops([n], lambda i, name=name: store(
            Y, T.Call(name, (X[i],)), i)))
    # the functions' own accuracy, subnormal results included: IEEE mode (kernels
    # flush subnormal results by default, tests/backend/llvm/test_subnormals.py)
    return compile_prim_funcs(funcs, flush_subnormals=False)


@pytest.mark.parametrize("name", sorted(_MATH_REF))
def test_vectorized_float32_math_accuracy(vector_math_lib, name):
    """phasec's own float32 exp/tanh/erf/sigmoid/log/log2 (SIMD) against float64."""
    if name in ("log", "log2"):
        x = np.concatenate([np.geomspace(1e-45, 3e38, 200_001), np.linspace(0.5, 2, 50_001)])
        special = [0.0, -0.0, -1.0, np.inf, -np.inf, np.nan, 1.0, 8.0, 1e-40]
    else:
        x = np.concatenate([np.linspace(-110, 100, 200_001), np.geomspace(1e-30, 10, 50_001)])
        x = np.concatenate([x, -x])
        special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40]
    x = np.concatenate([x, special]).astype(np.float32)
    y = np.empty_like(x)
    vector_math_lib[name](x, y)
    assert "x float>" in vector_math_lib.optimized_ir
    with np.errstate(all="ignore"):
        ref = _MATH_REF[name](x.astype(np.float64))
        ref32 = ref.astype(np.float32)
    # special values and results out of float32's normal range: exact or within a few ulps
    tiny = np.abs(ref) < np.finfo(np.float32).tiny
    nonfinite = ~np.isfinite(ref32)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(ref32))
    np.testing.assert_array_equal(y[nonfinite & ~np.isnan(ref32)], ref32[nonfinite & ~np.isnan(ref32)])
    # (sigmoid flushes its subnormal results, x < -87.3: see mathlib._sigmoidf_ir)
    tiny_bound = 2.0**-126 if name == "sigmoid" else 4 * 2.0**-149
    assert np.abs(y[tiny] - ref[tiny]).max(initial=0) <= tiny_bound
    ok = ~tiny & ~nonfinite
    rel = np.abs(y[ok] - ref[ok]) / np.abs(ref[ok])
    assert rel.max() < 5e-7, (name, rel.max(), x[ok][rel.argmax()])
    if name == "log2":
        assert y[-2] == 3.0  # exact for powers of two


def test_exp_scaled_by_ldexp_on_avx512_is_bitwise_the_portable_exp(monkeypatch):
    """With AVX-512 exp multiplies its polynomial by 2**n with llvm.ldexp (one
    vscalefps); elsewhere by two power-of-two factors built from integer
    bits. Both scalings are exact, so the two forms agree bit for bit, and
    both are within a few ulps of float64 exp (over every 4099th float32 bit
    pattern: all signs, magnitudes, subnormals, infinities and NaNs)."""
    from phasec.backend.llvm import codegen, mathlib

    assert "@llvm.ldexp" in mathlib.math_function("phasec.expf", "+sse2,+avx512f,+avx512vl")[0]
    for features in ("", "+avx2,+fma", "+avx2,-avx512f"):
        assert "@llvm.ldexp" not in mathlib.math_function("phasec.expf", features)[0]
    n = var("n")
    X, Y = buf("X", (n,)), buf("Y", (n,))
    func = T.PrimFunc((X, Y), loops([n], lambda i: store(Y, T.Call("exp", (X[i],)), i)))
    x = np.arange(0, 2**32, 4099, dtype=np.uint64).astype(np.uint32).view(np.float32)
    monkeypatch.setenv("PHASEC_KERNEL_CACHE", "off")  # both forms compiled here
    host = compile_prim_funcs({"exp": func}, use_cache=False, flush_subnormals=False)
    from phasec.backend.llvm.jit import host_target
    avx512 = "+avx512f" in host_target().features.split(",")
    assert ("@llvm.ldexp" in host.llvm_ir) == avx512
    monkeypatch.setattr(codegen, "math_function",
                        lambda name, features="": mathlib.math_function(name, ""))
    portable = compile_prim_funcs({"exp": func}, use_cache=False, flush_subnormals=False)
    assert "@llvm.ldexp" not in portable.llvm_ir
    y_host, y_portable = np.empty_like(x), np.empty_like(x)
    host["exp"](x, y_host)
    portable["exp"](x, y_portable)
    nan = np.isnan(y_host)
    np.testing.assert_array_equal(nan, np.isnan(y_portable))
    np.testing.assert_array_equal(y_host[~nan].view(np.uint32), y_portable[~nan].view(np.uint32))
    with np.errstate(all="ignore"):
        ref = np.exp(x.astype(np.float64))
    np.testing.assert_array_equal(nan, np.isnan(ref))
    normal = (ref >= np.finfo(np.float32).tiny) & (ref <= np.finfo(np.float32).max)
    assert (np.abs(y_host[normal] - ref[normal]) / ref[normal]).max() < 5e-7
    assert (y_host[ref > np.finfo(np.float32).max] == np.inf).all()
    assert np.abs(y_host[ref < np.finfo(np.float32).tiny] - ref[ref < np.finfo(np.float32).tiny]
                  ).max() <= 4 * 2.0**-149


def test_vectorized_sigmoid_over_every_kind_of_float32():
    """The SIMD sigmoid (mathlib's ``phasec.sigmoidf``) against float64 over
    every 1021st float32 bit pattern (both signs, all magnitudes, subnormal
    operands, infinities, NaNs) and densely over [-100, 30]: within 4.5 ulps
    of the float32 result where that is a normal number, within 2**-126 where
    it is subnormal (flushed from x = -88.38 down), and exact at the ends
    (1 from x = 18 up, 0.5 at zero and subnormal x, 0 at -inf, NaN at NaN)."""
    n = var("n")
    X, Y = buf("X", (n,)), buf("Y", (n,))
    lib = compile_prim_funcs({"sigmoid": T.PrimFunc((X, Y), loops([n], lambda i: store(
        Y, T.Call("sigmoid", (X[i],)), i)))})
    assert "@phasec.sigmoidf" in lib.llvm_ir and "x float>" in lib.optimized_ir
    x = np.concatenate([np.arange(0, 2**32, 1021, dtype=np.uint64).astype(np.uint32)
                        .view(np.float32), np.linspace(-100, 30, 400_001, dtype=np.float32),
                        np.float32([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-45, -1e-45, 18.0])])
    y = np.empty_like(x)
    lib["sigmoid"](x, y)
    with np.errstate(all="ignore"):
        ref = 1.0 / (1.0 + np.exp(-x.astype(np.float64)))
    nan = np.isnan(ref)
    np.testing.assert_array_equal(np.isnan(y), nan)
    normal = ~nan & (ref >= np.finfo(np.float32).tiny)
    ulps = np.abs(y[normal] - ref[normal]) / np.spacing(ref[normal].astype(np.float32))
    assert ulps.max() <= 4.5, (ulps.max(), x[normal][ulps.argmax()])
    sub = ~nan & ~normal
    assert np.abs(y[sub] - ref[sub]).max() < 2.0**-126
    assert (y[x >= 18] == 1.0).all() and (y[x == -np.inf] == 0.0).all()
    assert (y[-5:-1] == 0.5).all()


def test_silu_products_compile_to_one_quotient_within_a_few_ulps():
    """``x * sigmoid(x)`` (either order, the same operand) is phasec.siluf's
    ``x / (1 + exp(-x))``: against float64 over every 1021st float32 bit
    pattern and densely over [-100, 30], within 4.5 ulps from x = -87.3 up
    (where the sigmoid is a normal float32), within 6e-37 below it, NaN at
    -inf (as numpy's -inf * 0); x itself from 18 up, NaN at NaN.
    ``x * sigmoid(z)`` stays a product, and so does a term of a sum."""
    n = var("n")
    X, Y, Z = buf("X", (n,)), buf("Y", (n,)), buf("Z", (n,))
    lib = compile_prim_funcs({
        "silu": T.PrimFunc((X, Y), loops([n], lambda i: store(
            Y, binop("*", X[i], T.Call("sigmoid", (X[i],))), i))),
        "silu_swapped": T.PrimFunc((X, Y), loops([n], lambda i: store(
            Y, binop("*", T.Call("sigmoid", (X[i],)), X[i]), i)))}, flush_subnormals=False)
    other = compile_prim_funcs({"other": T.PrimFunc((X, Z, Y), loops([n], lambda i: store(
        Y, binop("*", X[i], T.Call("sigmoid", (Z[i],))), i))),
        # a term of a sum: the product is a multiply-add already
        "summed": T.PrimFunc((X, Z, Y), loops([n], lambda i: store(
            Y, binop("+", Z[i], binop("*", X[i], T.Call("sigmoid", (X[i],)))), i)))})
    assert "@phasec.siluf" in lib.llvm_ir and "x float>" in lib.optimized_ir
    assert "@phasec.siluf" not in other.llvm_ir and "@phasec.sigmoidf" in other.llvm_ir
    x = np.concatenate([np.arange(0, 2**32, 1021, dtype=np.uint64).astype(np.uint32)
                        .view(np.float32), np.linspace(-100, 30, 400_001, dtype=np.float32),
                        np.float32([np.inf, np.nan, 0.0, -0.0, 1e-45, -1e-45, 18.0, -88.0])])
    with np.errstate(all="ignore"):
        ref = x / (1.0 + np.exp(-x.astype(np.float64)))
    for name in ("silu", "silu_swapped"):
        y = np.empty_like(x)
        lib[name](x, y)
        nan = np.isnan(ref)
        np.testing.assert_array_equal(np.isnan(y), nan)
        finite = ~nan & np.isfinite(x)
        normal = finite & (x > -87.3)  # (where the sigmoid is a normal float32)
        ulps = np.abs(y[normal] - ref[normal]) / np.maximum(np.spacing(
            np.abs(ref[normal]).astype(np.float32)), 2.0**-149)
        assert ulps.max() <= 4.5, (name, ulps.max(), x[normal][ulps.argmax()])
        assert np.abs(y[finite & ~normal] - ref[finite & ~normal]).max() < 6e-37
        assert (y[x >= 18] == x[x >= 18]).all() and (y[x == 0] == 0).all()
    y = np.empty(2, np.float32)
    lib["silu"](np.float32([-np.inf, -1e30]), y)
    with np.errstate(invalid="ignore"):  # numpy's own SiLU: NaN at -inf
        assert np.isnan(np.float32(-np.inf) * np.float32(0.0))
    assert np.isnan(y[0]) and abs(y[1]) < 6e-37
    z = np.linspace(-9, 9, 37, dtype=np.float32)
    y = np.empty_like(z)
    other["other"](z[::-1].copy(), z, y)
    np.testing.assert_allclose(y, z[::-1] / (1 + np.exp(-z.astype(np.float64))), rtol=1e-6)
    other["summed"](z, z[::-1].copy(), y)
    np.testing.assert_allclose(y, z[::-1] + z / (1 + np.exp(-z.astype(np.float64))), rtol=1e-6,
                               atol=1e-6)


_INT_OPS = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "/": lambda a, b: np.fix(a / b),
    "//": np.floor_divide, "%": np.mod, "min": np.minimum, "max": np.maximum,
    "==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
    ">": np.greater, ">=": np.greater_equal,
}


@pytest.mark.parametrize("dtype", ["int32", "int64", "int8", "uint16"])
def test_every_integer_binary_op(dtype):
    n = 64
    funcs = {}
    for k, op in enumerate(_INT_OPS):
        out = "bool" if op in T.COMPARE_OPS else dtype
        funcs[f"op{k}"] = elementwise(n, lambda a, b, op=op: binop(op, a, b), dtype, out, nin=2)
    funcs["pow"] = elementwise(n, lambda a, b: binop("pow", a, b), dtype, nin=2)
    lib = compile_prim_funcs(funcs)
    signed = np.dtype(dtype).kind == "i"
    lo = -20 if signed else 0
    a = RNG.integers(lo, 20, n).astype(dtype)
    b = RNG.integers(lo, 20, n).astype(dtype)
    b[b == 0] = 3
    if signed:  # negative floordiv/floormod edge cases
        a[:6] = [-7, 7, -7, 7, -6, 0]
        b[:6] = [2, -2, -2, 2, 3, -5]
    for k, op in enumerate(_INT_OPS):
        y = np.empty(n, bool if op in T.COMPARE_OPS else dtype)
        lib[f"op{k}"](a, b, y)
        with np.errstate(all="ignore"):
            ref = _INT_OPS[op](a, b)
        np.testing.assert_array_equal(y, ref.astype(y.dtype), err_msg=f"{dtype} {op}")
    e = np.abs(b % 4).astype(dtype)
    y = np.empty(n, dtype)
    lib["pow"](a, e, y)
    np.testing.assert_array_equal(y, np.power(a, e))


def test_floordiv_floormod_semantics_and_division_by_zero():
    """Truncating ``/``, flooring ``//`` and ``%``, ``INT_MIN / -1`` wrapping;
    a divisor of 0 ends the kernel with a DivisionByZeroError naming it (the
    TIR interpreter's error), never a result of 0."""
    n = 6
    funcs = {op: elementwise(n, lambda a, b, op=op: binop(op, a, b), "int32", nin=2)
             for op in ("/", "//", "%")}
    lib = compile_prim_funcs(funcs)
    a = np.array([-7, 7, -7, 7, -2**31, 0], np.int32)
    b = np.array([2, -2, -2, 2, -1, 5], np.int32)
    out = {op: np.empty(n, np.int32) for op in funcs}
    for op in funcs:
        lib[op](a, b, out[op])
    np.testing.assert_array_equal(out["/"], [-3, -3, 3, 3, -2**31, 0])  # truncdiv
    np.testing.assert_array_equal(out["//"], [-4, -4, 3, 3, -2**31, 0])  # floordiv
    np.testing.assert_array_equal(out["%"], [1, -1, -1, 1, 0, 0])  # floormod
    zero = b.copy()
    zero[3] = 0
    for op in funcs:
        for run in (lambda: lib[op](a, zero, out[op]),
                    lambda: run_prim_func(funcs[op], [a, zero, out[op]], op)):
            with pytest.raises(DivisionByZeroError,
                               match=f"^integer division by zero in kernel '{re.escape(op)}'$"):
                run()


def test_every_float_binary_op():
    n = 50
    ops = {**{k: v for k, v in _INT_OPS.items() if k != "/"}, "/": np.divide, "pow": np.power}
    funcs = {f"op{k}": elementwise(n, lambda a, b, op=op: binop(op, a, b), "float32",
                                   "bool" if op in T.COMPARE_OPS else "float32", nin=2)
             for k, op in enumerate(ops)}
    lib = compile_prim_funcs(funcs)
    a, b = rand((n,)), rand((n,))
    b[b == 0] = 1.0
    a[0], b[0] = np.nan, 1.0  # NaN propagation of min/max, != on NaN
    a[1], b[1] = 5.0, 5.0
    for k, op in enumerate(ops):
        y = np.empty(n, bool if op in T.COMPARE_OPS else np.float32)
        lib[f"op{k}"](np.abs(a) if op == "pow" else a, b, y)
        with np.errstate(all="ignore"):
            ref = ops[op](np.abs(a) if op == "pow" else a, b)
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6, err_msg=op)


def test_logic_not_and_bool_buffers():
    n = 32
    P, Q, R = buf("P", (n,), "bool"), buf("Q", (n,), "bool"), buf("R", (n,), "bool")
    X = buf("X", (n,), "int32")
    funcs = {
        "and": T.PrimFunc((P, Q, R), loops([n], lambda i: store(R, binop("and", P[i], Q[i]), i))),
        "or": T.PrimFunc((P, Q, R), loops([n], lambda i: store(R, binop("or", P[i], Q[i]), i))),
        "not": T.PrimFunc((P, R), loops([n], lambda i: store(R, T.Not(P[i]), i))),
        "sel": T.PrimFunc((P, X), loops([n], lambda i: store(
            X, T.Select(P[i], T.IntImm(7, "int32"), T.IntImm(-3, "int32")), i))),
    }
    lib = compile_prim_funcs(funcs)
    p, q = rand((n,), "bool"), rand((n,), "bool")
    r = np.empty(n, bool)
    lib["and"](p, q, r)
    np.testing.assert_array_equal(r, p & q)
    lib["or"](p, q, r)
    np.testing.assert_array_equal(r, p | q)
    lib["not"](p, r)
    np.testing.assert_array_equal(r, ~p)
    assert r.view(np.uint8).max() <= 1  # bools stored as 0/1 bytes
    x = np.empty(n, np.int32)
    lib["sel"](p, x)
    np.testing.assert_array_equal(x, np.where(p, 7, -3))


@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("int32", "float32"),
                                     ("int64", "int8"), ("int8", "int64"), ("uint8", "int32"),
                                     ("float64", "float32"), ("float32", "float64"),
                                     ("float32", "bool"), ("int32", "bool"), ("bool", "float32"),
                                     ("bool", "int32"), ("float32", "float16"),
                                     ("uint32", "float64"), ("int16", "uint16")])
def test_casts(src, dst):
    n = 40
    f = elementwise(n, lambda x: T.Cast(dst, x), src, dst)
    x = (rand((n,), src) * (3 if np.dtype(src).kind == "f" else 1)).astype(src)
    if np.dtype(src).kind in "iu":
        x = rand((n,), src)
    if src == "int64":
        x[:3] = [300, -129, 2**40 + 5]
    y = np.empty(n, dst)
    compile_prim_funcs({"c": f})["c"](x, y)
    with np.errstate(all="ignore"):
        ref = x.astype(dst)
    np.testing.assert_array_equal(y, ref)


def test_mixed_integer_widths_are_promoted():
    # int32 literal + int64 loop var + int8 buffer value: all promoted to int64
    n = 10
    X, Y = buf("X", (n,), "int8"), buf("Y", (n,), "int64")
    body = loops([n], lambda i: store(Y, binop("+", binop("*", X[i], T.IntImm(1000, "int32")), i), i))
    x = rand((n,), "int8")
    y = np.empty(n, np.int64)
    compile_prim_funcs({"k": T.PrimFunc((X, Y), body)})["k"](x, y)
    np.testing.assert_array_equal(y, x.astype(np.int64) * 1000 + np.arange(n))


def test_vectorized_erf_within_two_ulps(vector_math_lib):
    """erf without exp: x + x*C(x*x) below 1.25, 1 - g(u)**8 above, clamped at
    3.92. Dense grid, the two boundaries' neighbourhoods, both signs."""
    # every float32 within 2000 ulps of the branch point and of the clamp
    near = [(np.float32(c).view(np.int32) + np.arange(-2000, 2000, dtype=np.int32))
            .view(np.float32) for c in (1.25, 3.92)]
    x = np.concatenate([np.linspace(0, 4.5, 300_001, dtype=np.float32), *near,
                        np.geomspace(1e-38, 1e-3, 2000).astype(np.float32)])
    x = np.concatenate([x, -x])
    y = np.empty_like(x)
    vector_math_lib["erf"](x, y)
    ref = np.vectorize(math.erf)(x.astype(np.float64))
    ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    err = np.abs(y - ref) / ulp
    assert err.max() <= 2.0, (err.max(), x[err.argmax()])
    np.testing.assert_array_equal(y[:len(y) // 2], -y[len(y) // 2:])   # odd, -0.0 included
    big = np.float32([3.92, 4.0, 10.0, 1e30, np.inf])
    out = np.empty_like(big)
    vector_math_lib["erf"](big, out)
    np.testing.assert_array_equal(out, 1.0)
    vector_math_lib["erf"](-big, out)
    np.testing.assert_array_equal(out, -1.0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_cube_is_two_products_with_numpys_values(dtype):
    # pow(x, 3.0), a tanh GELU's cube: no libm call (one element at a time)
    n = 37
    lib = compile_prim_funcs({"cube": elementwise(
        n, lambda x: binop("pow", x, T.FloatImm(3.0, dtype)), dtype)})
    assert "llvm.pow" not in lib.llvm_ir
    x = (rand((n,)) * 40).astype(dtype)
    x[:6] = [np.nan, np.inf, -np.inf, -0.0, 1e13, -1e-20]
    y = np.empty(n, dtype)
    lib["cube"](x, y)
    with np.errstate(all="ignore"):
        want = np.power(x, np.asarray(3.0, dtype))
    np.testing.assert_allclose(y, want, rtol=1e-6 if dtype == "float32" else 1e-14)
    np.testing.assert_array_equal(np.signbit(y[:6]), np.signbit(want[:6]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("c", [0.25, 0.5, 0.75, 1.25, 1.5, 1.75])
def test_a_quarter_power_is_square_roots_with_pows_values(dtype, c):
    # pow(x, 0.75), an LRN's: square roots LLVM vectorizes, not a libm call;
    # C's pow's values (as before, as ONNX Runtime's) at -0 (+0), -inf (+inf),
    # other negatives (NaN), NaN, inf: the reference is math.pow, as numpy's
    # own power takes its sqrt for 0.5 (-0 for -0, NaN for -inf)
    n = 45
    lib = compile_prim_funcs({"power": elementwise(
        n, lambda x: binop("pow", x, T.FloatImm(c, dtype)), dtype)})
    assert "llvm.pow" not in lib.llvm_ir and "llvm.sqrt" in lib.llvm_ir
    x = (np.abs(rand((n,))) * 40).astype(dtype)
    specials = [np.nan, np.inf, -np.inf, -0.0, 0.0, -3.0, 1.0, 1e-38, 1e30, 5e-324]
    x[:len(specials)] = np.asarray(specials).astype(dtype)
    y = np.empty(n, dtype)
    lib["power"](x, y)
    def c_pow(v: float) -> float:
        try:
            return math.pow(v, c)
        except ValueError:  # (a negative base)
            return math.nan

    with np.errstate(over="ignore"):  # (1e30 ** 1.75 is inf in float32, as computed)
        want = np.asarray([c_pow(float(v)) for v in x]).astype(dtype)
    ulp = np.finfo(dtype).eps
    np.testing.assert_allclose(y, want, rtol=2.5 * ulp, atol=0)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    real = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(y[real]), np.signbit(want[real]))

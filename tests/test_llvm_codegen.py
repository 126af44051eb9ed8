"""TIR -> LLVM kernel compiler: results compared with numpy.

Kernels are built by hand from phasec.ir.tir nodes. Several kernels share
one compile_prim_funcs call (one LLVM module) to keep the file fast.
"""

from __future__ import annotations

import os
import math

import numpy as np
import pytest

from phasec.backend.llvm import CodegenError, compile_prim_funcs
from phasec.backend.llvm import cache_info, clear_cache, get_num_threads, set_min_parallel_work, set_num_threads
from phasec.backend.llvm import set_parallel_wake_work
from phasec.backend.llvm.codegen import ModuleCodegen
from phasec.errors import PhasecError, VMError
from phasec.ir import tir as T
from phasec.target.tuning import host_tuning

RNG = np.random.default_rng(0)


@pytest.fixture
def threads_always():
    """Parallel loops use the thread pool whatever their size, waking its
    worker if it sleeps; restored after."""
    saved = get_num_threads()
    set_min_parallel_work(0)
    set_parallel_wake_work(0)
    yield
    set_min_parallel_work(host_tuning().parallel_min_work)
    set_parallel_wake_work(host_tuning().parallel_wake_work)
    set_num_threads(saved)

# --------------------------------------------------------------------------
# Small builders
# --------------------------------------------------------------------------


def var(name: str, dtype: str = "int64") -> T.Var:
    return T.Var(name, dtype)


def buf(name: str, shape, dtype: str = "float32") -> T.Buffer:
    return T.Buffer(name, tuple(shape), dtype)


def loops(extents, body_fn, kinds=None):
    """Nested serial loops over ``extents``; ``body_fn(*loop_vars)`` gives the body."""
    vs = [var(f"i{k}") for k in range(len(extents))]
    stmt = body_fn(*vs)
    kinds = kinds or ["serial"] * len(extents)
    for v, e, kind in reversed(list(zip(vs, extents, kinds))):
        stmt = T.For(v, 0, e, kind, stmt)
    return stmt


def store(b: T.Buffer, value, *idx) -> T.BufferStore:
    return T.BufferStore(b, T.as_prim_expr(value, b.dtype), tuple(idx))


def binop(op, a, b):
    return T.BinaryOp(op, a, b)


def rand(shape, dtype="float32"):
    if np.dtype(dtype).kind == "f":
        return RNG.standard_normal(shape).astype(dtype)
    if dtype == "bool":
        return RNG.integers(0, 2, shape).astype(bool)
    info = np.iinfo(dtype)
    return RNG.integers(max(info.min, -50), min(info.max, 50), shape).astype(dtype)


def elementwise(n, fn, in_dtype="float32", out_dtype=None, nin=1):
    ins = [buf(f"X{k}", (n,), in_dtype) for k in range(nin)]
    out = buf("Y", (n,), out_dtype or in_dtype)
    body = loops([n], lambda i: store(out, fn(*[x[i] for x in ins]), i))
    return T.PrimFunc((*ins, out), body)


# --------------------------------------------------------------------------
# Elementwise, broadcast, reductions
# --------------------------------------------------------------------------


def test_elementwise_and_broadcast_in_one_module():
    m, n = 7, 33
    A, B, bias, C = buf("A", (m, n)), buf("B", (m, n)), buf("bias", (n,)), buf("C", (m, n))
    add = T.PrimFunc((A, B, C), loops([m, n], lambda i, j: store(C, A[i, j] * B[i, j] + 1.5, i, j)))
    A2, C2 = buf("A", (m, n)), buf("C", (m, n))
    bcast = T.PrimFunc((A2, bias, C2), loops([m, n], lambda i, j: store(C2, A2[i, j] + bias[j], i, j)))
    lib = compile_prim_funcs({"add": add, "bcast": bcast})
    assert set(lib) == {"add", "bcast"} and len(lib) == 2
    a, b, bb = rand((m, n)), rand((m, n)), rand((n,))
    c = np.empty((m, n), np.float32)
    lib["add"](a, b, c)
    np.testing.assert_allclose(c, a * b + 1.5, rtol=1e-6)
    lib["bcast"](a, bb, c)
    np.testing.assert_allclose(c, a + bb, rtol=1e-6)


def test_reduction_with_block_init():
    m, n = 5, 37
    A, S = buf("A", (m, n)), buf("S", (m,))
    i, k = var("i"), var("k")
    vi, vk = var("vi"), var("vk")
    block = T.Block("sum", (T.IterVar(vi, m, "S"), T.IterVar(vk, n, "R")), (i, k),
                    body=store(S, S[vi] + A[vi, vk], vi), init=store(S, 0.0, vi))
    f = T.PrimFunc((A, S), T.For(i, 0, m, "serial", T.For(k, 0, n, "serial", block)))
    a = rand((m, n))
    s = np.full((m,), 123.0, np.float32)  # garbage: init must reset it
    compile_prim_funcs({"rsum": f})["rsum"](a, s)
    np.testing.assert_allclose(s, a.sum(axis=1), rtol=1e-5)


def test_block_init_without_reduce_axes_runs_every_time():
    n = 8
    A, B = buf("A", (n,)), buf("B", (n,))
    i, vi = var("i"), var("vi")
    block = T.Block("b", (T.IterVar(vi, n, "S"),), (i,), body=store(B, B[vi] + A[vi], vi),
                    init=store(B, 1.0, vi))
    f = T.PrimFunc((A, B), T.For(i, 0, n, "serial", block))
    a, b = rand((n,)), np.zeros(n, np.float32)
    compile_prim_funcs({"k": f})["k"](a, b)
    np.testing.assert_allclose(b, a + 1.0, rtol=1e-6)


def _matmul_block(M, N, K, dtype="float32"):
    A, B, C = buf("A", (M, K), dtype), buf("B", (K, N), dtype), buf("C", (M, N), dtype)
    i, j, k = var("i"), var("j"), var("k")
    vi, vj, vk = var("vi"), var("vj"), var("vk")
    block = T.Block("C", (T.IterVar(vi, M), T.IterVar(vj, N), T.IterVar(vk, K, "R")), (i, j, k),
                    body=store(C, C[vi, vj] + A[vi, vk] * B[vk, vj], vi, vj),
                    init=store(C, 0.0, vi, vj))
    return T.PrimFunc((A, B, C), T.For(i, 0, M, "serial", T.For(j, 0, N, "serial",
                                                                T.For(k, 0, K, "serial", block))))


def tiled_matmul(M, N, K, tile_i=8, tile_k=64, tile_j=64):
    """C = A @ B: parallel over row tiles, vectorized inner j loop, k tiled."""
    A, B, C = buf("A", (M, K)), buf("B", (K, N)), buf("C", (M, N))
    io, ii, ko, kk, jo, jj, z = (var(n) for n in ("io", "ii", "ko", "kk", "jo", "jj", "z"))
    i = io * tile_i + ii
    k = ko * tile_k + kk
    j = jo * tile_j + jj
    zero = T.For(ii, 0, tile_i, "serial", T.For(z, 0, N, "vectorized", store(C, 0.0, io * tile_i + ii, z)))
    update = T.For(ko, 0, K // tile_k, "serial", T.For(jo, 0, N // tile_j, "serial", T.For(
        ii, 0, tile_i, "serial", T.For(kk, 0, tile_k, "serial", T.For(
            jj, 0, tile_j, "vectorized", store(C, C[i, j] + A[i, k] * B[k, j], i, j))))))
    body = T.For(io, 0, M // tile_i, "parallel", T.SeqStmt((zero, update)))
    return T.PrimFunc((A, B, C), body)


def test_matmul_plain_and_tiled_parallel_vectorized(threads_always):
    M, N, K = 48, 128, 64
    lib = compile_prim_funcs({"plain": _matmul_block(M, N, K), "tiled": tiled_matmul(M, N, K)})
    a, b = rand((M, K)), rand((K, N))
    c1, c2 = np.empty((M, N), np.float32), np.empty((M, N), np.float32)
    lib["plain"](a, b, c1)
    lib["tiled"](a, b, c2)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c1, ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(c2, ref, rtol=1e-4, atol=1e-4)
    # The vectorized loop really became SIMD code and the parallel loop was outlined.
    assert "x float>" in lib.optimized_ir
    assert "llvm.loop.vectorize.enable" in lib.llvm_ir
    assert ".par1" in lib.llvm_ir


def test_conv2d_with_padding_guard():
    # NCHW conv, 3x3 kernel, padding 1: the padded read is a lazy Select.
    N_, C_, H, W, O, R = 2, 3, 9, 8, 4, 3
    X, Wt, Y = buf("X", (N_, C_, H, W)), buf("W", (O, C_, R, R)), buf("Y", (N_, O, H, W))
    n, o, h, w, c, r, s = (var(x) for x in "nohwcrs")
    hh, ww = h + r - 1, w + s - 1
    inb = binop("and", binop("and", binop(">=", hh, T.IntImm(0)), binop("<", hh, T.IntImm(H))),
                binop("and", binop(">=", ww, T.IntImm(0)), binop("<", ww, T.IntImm(W))))
    padded = T.Select(inb, X[n, c, hh, ww], T.FloatImm(0.0))
    acc = store(Y, Y[n, o, h, w] + padded * Wt[o, c, r, s], n, o, h, w)
    inner = T.For(c, 0, C_, "serial", T.For(r, 0, R, "serial", T.For(s, 0, R, "serial", acc)))
    body = T.For(n, 0, N_, "serial", T.For(o, 0, O, "parallel", T.For(h, 0, H, "serial", T.For(
        w, 0, W, "serial", T.SeqStmt((store(Y, 0.0, n, o, h, w), inner))))))
    lib = compile_prim_funcs({"conv": T.PrimFunc((X, Wt, Y), body)})
    x, wt = rand((N_, C_, H, W)), rand((O, C_, R, R))
    y = np.empty((N_, O, H, W), np.float32)
    lib["conv"](x, wt, y)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))).astype(np.float64)
    ref = np.zeros((N_, O, H, W))
    for rr in range(R):
        for ss in range(R):
            ref += np.einsum("nchw,oc->nohw", xp[:, :, rr:rr + H, ss:ss + W], wt[:, :, rr, ss])
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


def test_lazy_select_does_not_read_out_of_bounds():
    # B[i] = A[i - 1000000] if i > 100 else 0: the load would fault if evaluated.
    n = 16
    A, B = buf("A", (n,)), buf("B", (n,))
    i = var("i")
    far = binop("-", i, T.IntImm(1 << 40))
    body = T.For(i, 0, n, "serial", store(B, T.Select(binop(">", i, T.IntImm(100)), A[far],
                                                      T.FloatImm(2.0)), i))
    # and also through a short-circuit "and"
    C = buf("C", (n,), "bool")
    cond = binop("and", binop(">", i, T.IntImm(100)), binop(">", A[far], T.FloatImm(0.0)))
    body2 = T.For(i, 0, n, "serial", store(C, cond, i))
    lib = compile_prim_funcs({"sel": T.PrimFunc((A, B), body),
                              "sc": T.PrimFunc((A, C), body2)})
    b = np.empty(n, np.float32)
    lib["sel"](rand((n,)), b)
    assert (b == 2.0).all()
    c = np.ones(n, bool)
    lib["sc"](rand((n,)), c)
    assert not c.any()


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
    return compile_prim_funcs(funcs)


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
    assert np.abs(y[tiny] - ref[tiny]).max(initial=0) <= 4 * 2.0**-149
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
    host = compile_prim_funcs({"exp": func}, use_cache=False)
    from phasec.backend.llvm.jit import host_target
    avx512 = "+avx512f" in host_target().features.split(",")
    assert ("@llvm.ldexp" in host.llvm_ir) == avx512
    monkeypatch.setattr(codegen, "math_function",
                        lambda name, features="": mathlib.math_function(name, ""))
    portable = compile_prim_funcs({"exp": func}, use_cache=False)
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
    n = 8
    funcs = {op: elementwise(n, lambda a, b, op=op: binop(op, a, b), "int32", nin=2)
             for op in ("/", "//", "%")}
    lib = compile_prim_funcs(funcs)
    a = np.array([-7, 7, -7, 7, 5, -2**31, -2**31, 0], np.int32)
    b = np.array([2, -2, -2, 2, 0, -1, 0, 0], np.int32)
    out = {op: np.empty(n, np.int32) for op in funcs}
    for op in funcs:
        lib[op](a, b, out[op])
    np.testing.assert_array_equal(out["/"], [-3, -3, 3, 3, 0, -2**31, 0, 0])  # truncdiv
    np.testing.assert_array_equal(out["//"], [-4, -4, 3, 3, 0, -2**31, 0, 0])  # floordiv
    np.testing.assert_array_equal(out["%"], [1, -1, -1, 1, 0, 0, 0, 0])  # floormod


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


# --------------------------------------------------------------------------
# Statements
# --------------------------------------------------------------------------


def test_allocate_let_if_and_unroll():
    n = 64
    A, B = buf("A", (n,)), buf("B", (n,))
    i, j = var("i"), var("j")
    small, big = buf("tmp", (n,)), buf("big", (8192,))  # alloca / heap
    x = var("x", "float32")
    fill = T.For(i, 0, n, "unroll", store(small, A[i] * 2.0, i))
    fill_big = T.For(j, 0, 8192, "serial", store(big, T.Cast("float32", j), j))
    body = T.For(i, 0, n, "serial", T.LetStmt(x, small[i] + big[i * 100], T.IfThenElse(
        binop(">", x, T.FloatImm(0.0)), store(B, x, i), store(B, -x, i))))
    f = T.PrimFunc((A, B), T.Allocate(small, T.Allocate(big, T.SeqStmt((fill, fill_big, body)))))
    lib = compile_prim_funcs({"k": f})
    a = rand((n,))
    b = np.empty(n, np.float32)
    lib["k"](a, b)
    np.testing.assert_allclose(b, np.abs(a * 2 + np.arange(n) * 100), rtol=1e-6)
    assert "@phasec_rt_alloc" in lib.llvm_ir and "llvm.loop.unroll.full" in lib.llvm_ir


def test_symbolic_allocate_and_if_without_else():
    n = var("n")
    A, B = buf("A", (n,)), buf("B", (n,))
    tmp = buf("tmp", (n,))
    i, j = var("i"), var("j")
    body = T.Allocate(tmp, T.SeqStmt((
        T.For(i, 0, n, "serial", store(tmp, A[i] + 1.0, i)),
        T.For(j, 0, n, "serial", T.SeqStmt((store(B, 0.0, j), T.IfThenElse(
            binop("==", binop("%", j, T.IntImm(2)), T.IntImm(0)), store(B, tmp[j], j))))),
        T.Evaluate(T.IntImm(0)))))
    k = compile_prim_funcs({"k": T.PrimFunc((A, B), body)})["k"]
    for size in (5, 1000):
        a = rand((size,))
        b = np.empty(size, np.float32)
        k(a, b)
        ref = np.where(np.arange(size) % 2 == 0, a + 1, 0)
        np.testing.assert_allclose(b, ref, rtol=1e-6)


def test_zero_size_arrays():
    n = var("n")
    A, B = buf("A", (n, 3)), buf("B", (n, 3))
    k = compile_prim_funcs({"k": T.PrimFunc((A, B), loops([n, 3], lambda i, j: store(
        B, A[i, j] + 1.0, i, j)))})["k"]
    k(np.empty((0, 3), np.float32), np.empty((0, 3), np.float32))


def test_kernels_parsed_from_tvmscript():
    from phasec.script.parser import parse

    mod = parse(
        "from tvm.script import ir as I, tir as T\n"
        "@I.ir_module\n"
        "class Module:\n"
        "    @T.prim_func\n"
        "    def rsum(var_A: T.handle, var_S: T.handle):\n"
        "        n = T.int64()\n"
        "        A = T.match_buffer(var_A, (n, T.int64(16)))\n"
        "        S = T.match_buffer(var_S, (n,))\n"
        "        for i, k in T.grid(n, T.int64(16)):\n"
        "            with T.block(\"S\"):\n"
        "                vi, vk = T.axis.remap(\"SR\", [i, k])\n"
        "                with T.init():\n"
        "                    S[vi] = T.float32(0)\n"
        "                S[vi] = S[vi] + T.exp(A[vi, vk])\n")
    k = compile_prim_funcs(dict(mod.prim_funcs()))["rsum"]
    for rows in (3, 40):
        a, s = rand((rows, 16)), np.full(rows, 7.0, np.float32)
        k(a, s)
        np.testing.assert_allclose(s, np.exp(a).sum(axis=1), rtol=1e-5)


def test_symbolic_shapes_two_sizes_and_scalar_params():
    m, n = var("m"), var("n")
    alpha = var("alpha", "float32")
    off = var("off", "int32")
    A, B = buf("A", (m, n)), buf("B", (m, n))
    body = loops([m, n], lambda i, j: store(B, A[i, j] * alpha + T.Cast("float32", off), i, j))
    k = compile_prim_funcs({"k": T.PrimFunc((A, alpha, off, B), body)})["k"]
    for shape in ((3, 4), (17, 65)):
        a = rand(shape)
        b = np.empty(shape, np.float32)
        k(a, 2.5, 3, b)
        np.testing.assert_allclose(b, a * 2.5 + 3, rtol=1e-5, atol=1e-6)
    k(a, np.float32(1.0), np.int64(0), b)  # numpy scalars accepted
    np.testing.assert_allclose(b, a, rtol=1e-6)


def test_composite_and_param_bound_dims():
    n = var("n")
    A, B = buf("A", (n,)), buf("B", (binop("*", n, T.IntImm(2)),))
    i = var("i")
    body = T.For(i, 0, binop("*", n, T.IntImm(2)), "serial",
                 store(B, A[binop("//", i, T.IntImm(2))], i))
    k = compile_prim_funcs({"k": T.PrimFunc((A, B), body)})["k"]
    a = rand((5,))
    b = np.empty(10, np.float32)
    k(a, b)
    np.testing.assert_array_equal(b, np.repeat(a, 2))
    with pytest.raises(VMError, match=r"dimension 0 must be \(n \* 2\) = 10"):
        k(a, np.empty(9, np.float32))
    # a dimension given by a scalar parameter
    s = var("s")
    C = buf("C", (s,))
    k2 = compile_prim_funcs({"k2": T.PrimFunc((s, C), loops([s], lambda i: store(C, 1.0, i)))})["k2"]
    c = np.zeros(4, np.float32)
    k2(4, c)
    assert (c == 1).all()
    with pytest.raises(VMError, match="scalar parameter 's'"):
        k2(3, c)


def test_parallel_loop_matches_serial(threads_always):
    n, m = 257, 300
    A, S = buf("A", (n, m)), buf("S", (n,))
    funcs = {}
    for kind in ("serial", "parallel"):
        i, j, acc = var("i"), var("j"), buf("acc", (1,))
        body = T.For(i, 0, n, kind, T.Allocate(acc, T.SeqStmt((
            store(acc, 0.0, T.IntImm(0)),
            T.For(j, 0, m, "serial", store(acc, acc[T.IntImm(0)] + A[i, j] * A[i, j], T.IntImm(0))),
            store(S, acc[T.IntImm(0)], i)))))
        funcs[kind] = T.PrimFunc((A, S), body)
    lib = compile_prim_funcs(funcs)
    a = rand((n, m))
    s1, s2 = np.empty(n, np.float32), np.empty(n, np.float32)
    lib["serial"](a, s1)
    for threads in (2, 3, 1):
        set_num_threads(threads)
        s2[:] = 0
        lib["parallel"](a, s2)
        np.testing.assert_array_equal(s1, s2)
    assert s1.sum() == s2.sum()


def test_parallel_captures_outer_values_and_nested_parallel(threads_always):
    n = var("n")
    A, B = buf("A", (n, 16)), buf("B", (n, 16))
    x = var("x", "float32")
    i, j = var("i"), var("j")
    inner = T.For(j, 0, 16, "parallel", store(B, A[i, j] + x, i, j))  # nested: runs serially
    body = T.LetStmt(x, T.FloatImm(0.5), T.For(i, 0, n, "parallel", inner))
    lib = compile_prim_funcs({"k": T.PrimFunc((A, B), body)})
    for size in (1, 2, 100):
        a = rand((size, 16))
        b = np.empty_like(a)
        lib["k"](a, b)
        np.testing.assert_allclose(b, a + 0.5, rtol=1e-6)


def test_deep_expression_has_no_recursion_limit():
    def deep(depth):
        X, Y = buf("X", (8,)), buf("Y", (8,))
        i = var("i")
        e = X[i]
        for _ in range(depth):
            e = binop("+", e, T.FloatImm(1.0))
        return T.PrimFunc((X, Y), T.For(i, 0, 8, "serial", store(Y, e, i)))

    # Code generation alone on a very deep tree (LLVM's own passes are
    # superlinear on such chains, so the run below uses a smaller one at O1).
    gen = ModuleCodegen()
    gen.add_kernel("deep", deep(20000))
    assert gen.finish().count("fadd") == 20000
    depth = 1500
    x, y = np.zeros(8, np.float32), np.empty(8, np.float32)
    compile_prim_funcs({"deep": deep(depth)}, opt_level=1)["deep"](x, y)
    assert (y == depth).all()


# --------------------------------------------------------------------------
# Errors, cache, overhead sanity
# --------------------------------------------------------------------------


def _compile_error(f, match):
    with pytest.raises(CodegenError, match=match) as info:
        compile_prim_funcs({"bad_kernel": f}, use_cache=False)
    assert isinstance(info.value, PhasecError)
    assert "bad_kernel" in str(info.value)


def test_compile_errors_name_the_kernel():
    A, B = buf("A", (4,)), buf("B", (4,))
    i, ghost = var("i"), var("ghost")
    _compile_error(T.PrimFunc((A, B), loops([4], lambda i: store(B, A[ghost], i))),
                   "variable 'ghost' is used but not defined")
    _compile_error(T.PrimFunc((A, B), loops([4], lambda i: store(B, T.Call("frobnicate", (A[i],)), i))),
                   "unknown intrinsic 'frobnicate'")
    D = buf("D", (4,), "float64")
    _compile_error(T.PrimFunc((A, D), loops([4], lambda i: store(D, binop("+", A[i], D[i]), i))),
                   "dtype mismatch in '\\+': float32 and float64")
    I = buf("I", (4,), "int32")
    _compile_error(T.PrimFunc((A, I), loops([4], lambda i: store(I, A[i], i))),
                   "cannot use a float32 value as the value stored into buffer 'I'")
    _compile_error(T.PrimFunc((A, B), loops([4], lambda i: store(B, A[i, i], i))),
                   "buffer 'A' has 1 dimension")
    other = buf("other", (4,))
    _compile_error(T.PrimFunc((A, B), loops([4], lambda i: store(B, other[i], i))),
                   "buffer 'other' is used but is neither a parameter")
    m = var("m")
    _compile_error(T.PrimFunc((buf("Z", (binop("+", m, T.IntImm(1)),)),), T.Evaluate(T.IntImm(0))),
                   "cannot be bound at call time")
    _compile_error(T.PrimFunc((buf("Q", (4,), "bfloat16"),), T.Evaluate(T.IntImm(0))),
                   "unsupported dtype 'bfloat16'")
    _compile_error(T.PrimFunc((A, B), loops([4], lambda i: store(B, T.Call("exp", (i,)), i))),
                   "intrinsic 'exp' needs a float argument")
    _compile_error(T.PrimFunc((A, B), loops([4], lambda i: store(B, A[T.Cast("float32", i)], i))),
                   "float dtype")
    _compile_error(T.PrimFunc((A, A), T.Evaluate(T.IntImm(0))), "appears twice")
    with pytest.raises(CodegenError, match="expected a tir.PrimFunc"):
        compile_prim_funcs({"x": 3})


def test_call_errors_name_kernel_parameter_expected_and_actual():
    n = var("n")
    A, B = buf("A", (n, 4)), buf("B", (n, 4))
    s = var("s", "int32")
    k = compile_prim_funcs({"scale": T.PrimFunc((A, s, B), loops(
        [n, 4], lambda i, j: store(B, A[i, j] * T.Cast("float32", s), i, j)))})["scale"]
    a, b = rand((3, 4)), np.empty((3, 4), np.float32)
    cases = [
        ((a.astype(np.float64), 1, b), r"kernel 'scale': parameter 'A' expects a float32\(n, 4\) array, got dtype float64"),
        ((a, 1, np.empty((2, 4), np.float32)), r"parameter 'B'.*binds 'n' = 2, but dimension 0 of 'A' gave 'n' = 3"),
        ((rand((3, 5)), 1, b), r"parameter 'A'.*dimension 1 is 5, expected 4"),
        ((a, 1), r"takes 3 arguments \(A, s, B\), got 2"),
        ((a, 1.5, b), r"scalar parameter 's' expects a Python int"),
        ((a, 1, np.empty((4, 3), np.float32).T), "non C-contiguous"),
        ((a.tolist(), 1, b), "got list"),
        ((a, 1, rand((3,))), "got 1-d array"),
    ]
    ro = np.empty((3, 4), np.float32)
    ro.flags.writeable = False
    cases.append(((a, 1, ro), "read-only"))
    raw = np.zeros(3 * 4 * 4 + 1, np.uint8)[1:].view(np.float32).reshape(3, 4)
    cases.append(((raw, 1, b), "not aligned"))
    for args, pattern in cases:
        with pytest.raises(VMError, match=pattern):
            k(*args)
    k(a, 2, b)
    np.testing.assert_allclose(b, a * 2, rtol=1e-6)
    lib = compile_prim_funcs({"scale": k.abi and _matmul_block(2, 2, 2)})
    with pytest.raises(VMError, match="no kernel named 'nope'"):
        lib["nope"]
    assert "nope" not in lib


def test_cache_reuses_native_code_for_equal_modules():
    clear_cache()
    f1 = _matmul_block(4, 4, 4)
    f2 = _matmul_block(4, 4, 4)  # structurally equal, different objects
    lib1 = compile_prim_funcs({"mm": f1})
    lib2 = compile_prim_funcs({"mm": f2})
    assert lib1._native is lib2._native
    info = cache_info()
    assert info["hits"] == 1 and info["misses"] == 1
    lib3 = compile_prim_funcs({"mm": _matmul_block(4, 4, 8)})
    assert lib3._native is not lib1._native
    a, b, c = rand((4, 4)), rand((4, 4)), np.empty((4, 4), np.float32)
    lib2["mm"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-6)


def test_thread_pool_stress_and_concurrent_callers(threads_always):
    import threading

    n = var("n")
    A, B = buf("A", (n, 8)), buf("B", (n, 8))
    i, j = var("i"), var("j")
    f = T.PrimFunc((A, B), T.For(i, 0, n, "parallel", T.For(
        j, 0, 8, "serial", store(B, A[i, j] * 2.0 + T.Cast("float32", i), i, j))))
    k = compile_prim_funcs({"k": f})["k"]
    set_num_threads(2)
    # Many back-to-back jobs of varying size: generation hand-off between jobs.
    for size in list(range(1, 40)) * 20:
        a = np.full((size, 8), 1.0, np.float32)
        b = np.empty_like(a)
        k(a, b)
        assert (b == 2.0 + np.arange(size, dtype=np.float32)[:, None]).all()
    # Callers in several Python threads (ctypes releases the GIL): the pool
    # takes one job at a time, the others run serially; all results correct.
    errors = []

    def worker(seed):
        rng = np.random.default_rng(seed)
        for _ in range(50):
            a = rng.standard_normal((int(rng.integers(1, 300)), 8)).astype(np.float32)
            b = np.empty_like(a)
            k(a, b)
            if not np.allclose(b, a * 2 + np.arange(len(a))[:, None]):
                errors.append(seed)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_pool_workers_keep_off_the_callers_cpu_without_touching_the_caller(threads_always):
    """A woken worker that finds itself on its caller's CPU restricts its own
    affinity (see irlib's pool.avoid_cpu); the calling thread's affinity and
    the results are unchanged, whatever CPU each call starts on."""
    import os

    before = os.sched_getaffinity(0)
    n = 64
    A, B = buf("A", (n, 16)), buf("B", (n, 16))
    acc = buf("acc", (16,))
    i, r, j, j2, j3 = (var(x) for x in ("i", "r", "j", "j2", "j3"))
    inner = T.Allocate(acc, T.SeqStmt([
        T.For(j, 0, 16, "vectorized", store(acc, A[i, j], j)),
        T.For(r, 0, 200, "serial", T.For(j2, 0, 16, "vectorized",
                                         store(acc, acc[j2] * 0.5 + 1.0, j2))),
        T.For(j3, 0, 16, "vectorized", store(B, acc[j3], i, j3))]))
    k = compile_prim_funcs({"k": T.PrimFunc((A, B), T.For(i, 0, n, "parallel", inner))})["k"]
    a = RNG.standard_normal((n, 16)).astype(np.float32)
    want = a.copy()
    for _ in range(200):  # x -> x/2 + 1, exactly in float32
        want = want * np.float32(0.5) + np.float32(1.0)
    for threads in (2, 1, 2):
        set_num_threads(threads)
        for _ in range(30):
            b = np.empty_like(a)
            k(a, b)
            np.testing.assert_array_equal(b, want)
    assert os.sched_getaffinity(0) == before


def test_out_of_memory_is_a_vm_error(threads_always):
    n = var("n")
    A = buf("A", (n,))
    i = var("i")
    z = T.IntImm(0)
    funcs = {}
    for name, shape in (("overflow", (n, n, n, n)), ("too_big", (n, n, n))):
        huge = buf("huge", shape)
        idx = (z,) * (len(shape) - 1)
        body = T.For(i, 0, n, "parallel", T.Allocate(huge, T.SeqStmt((
            store(huge, A[i], i, *idx), store(A, huge[(i, *idx)] + 1.0, i)))))
        funcs[name] = T.PrimFunc((A,), body)
    lib = compile_prim_funcs(funcs)
    for name in funcs:
        with pytest.raises(VMError, match=f"kernel '{name}' failed: out of memory"):
            lib[name](np.zeros(200_000, np.float32))


def test_spawn_parallel_runtime_in_subprocess():
    """The per-call pthread runtime (used where the futex pool is unavailable)."""
    import os
    import subprocess
    import sys

    code = (
        "import numpy as np, sys\n"
        "sys.path.insert(0, %r)\n"
        "from test_llvm_codegen import tiled_matmul\n"
        "from phasec.backend.llvm import compile_prim_funcs, set_min_parallel_work, parallel_runtime_kind\n"
        "assert parallel_runtime_kind() == 'spawn'\n"
        "set_min_parallel_work(0)\n"
        "k = compile_prim_funcs({'t': tiled_matmul(32, 64, 64)})['t']\n"
        "a, b = np.random.rand(32, 64).astype('f4'), np.random.rand(64, 64).astype('f4')\n"
        "c = np.empty((32, 64), 'f4'); k(a, b, c)\n"
        "assert np.allclose(c, a @ b, rtol=1e-4)\n" % os.path.dirname(__file__))
    env = dict(os.environ, PHASEC_PARALLEL_RUNTIME="spawn")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr


def test_pointer_entry_fallback_fast_math_and_opt_levels(monkeypatch):
    import phasec.backend.llvm.runtime as rt

    n = var("n")
    A, S = buf("A", (n,)), buf("S", (1,))
    i = var("i")
    zero = T.IntImm(0)
    f = T.PrimFunc((A, S), T.SeqStmt((store(S, 0.0, zero), T.For(
        i, 0, n, "serial", store(S, S[zero] + A[i] * A[i], zero)))))
    a = rand((1000,))
    expected = float((a.astype(np.float64) ** 2).sum())
    # Without the probed PyArrayObject layout the ctypes call passes data pointers.
    monkeypatch.setattr(rt, "array_data_offset", None)
    lib = compile_prim_funcs({"ss": f}, use_cache=False)
    assert lib["ss"].abi.obj_symbol is None
    s = np.zeros(1, np.float32)
    lib["ss"](a, s)
    assert s[0] == pytest.approx(expected, rel=1e-5)
    monkeypatch.undo()
    fast = compile_prim_funcs({"ss": f}, fast_math=True)
    assert "fadd fast" in fast.llvm_ir
    fast["ss"](a, s)
    assert s[0] == pytest.approx(expected, rel=1e-4)
    for level in (0, 2):
        compile_prim_funcs({"ss": f}, opt_level=level)["ss"](a, s)
        assert s[0] == pytest.approx(expected, rel=1e-5)
    with pytest.raises(CodegenError, match="opt_level"):
        compile_prim_funcs({"ss": f}, opt_level=5)


def test_parallel_loop_with_offset_and_int32_loop_var(threads_always):
    n = var("n")
    A = buf("A", (n,), "int32")
    i = var("i", "int32")
    lo = T.IntImm(3, "int32")
    ext = binop("-", T.Cast("int32", n), T.IntImm(5, "int32"))
    f = T.PrimFunc((A,), T.For(i, lo, ext, "parallel", store(A, binop("*", i, i), i)))
    k = compile_prim_funcs({"k": f})["k"]
    a = np.full(1000, -1, np.int32)
    k(a)
    ref = np.full(1000, -1, np.int32)
    ref[3:998] = np.arange(3, 998) ** 2
    np.testing.assert_array_equal(a, ref)


def test_bool_scalar_parameter():
    flag = var("flag", "bool")
    A = buf("A", (4,))
    k = compile_prim_funcs({"k": T.PrimFunc((flag, A), loops([4], lambda i: store(
        A, T.Select(flag, T.FloatImm(1.0), T.FloatImm(2.0)), i)))})["k"]
    a = np.zeros(4, np.float32)
    for value, expected in ((True, 1.0), (np.False_, 2.0), (1, 1.0)):
        k(value, a)
        assert (a == expected).all()
    with pytest.raises(VMError, match="scalar parameter 'flag'"):
        k(1.5, a)


def test_native_argument_checks_and_their_fallbacks(monkeypatch):
    """Entries that check their arrays natively (KernelABI.checked): every
    refusal gives the Python diagnosis; valid arrays the native check does
    not take (subclasses, a dtype equal to but not the canonical object) run
    as views; without the probed layout the checks are in Python."""
    import phasec.backend.llvm.runtime as rt

    n, s = var("n"), var("s")
    A, B, Z = buf("A", (n, 3)), buf("B", (n, 3)), buf("Z", ())
    f = T.PrimFunc((A, s, B, Z), T.SeqStmt((
        loops([n, 3], lambda i, j: store(B, A[i, j] * T.Cast("float32", s), i, j)),
        store(Z, Z[()] + 1.0))))
    m = var("m")
    C = buf("C", (m,))
    g = T.PrimFunc((m, C), loops([m], lambda i: store(C, 2.0, i)))  # m bound by a scalar

    class Sub(np.ndarray):
        pass

    for layout in (rt.array_layout, None):
        monkeypatch.setattr(rt, "array_layout", layout)
        lib = compile_prim_funcs({"f": f, "g": g}, use_cache=False)
        k, k2 = lib["f"], lib["g"]
        assert k.abi.checked == (layout is not None) == k2.abi.checked
        a, b, z = rand((4, 3)), np.empty((4, 3), np.float32), np.zeros((), np.float32)
        k(a, 2, b, z)
        np.testing.assert_allclose(b, a * 2, rtol=1e-6)
        assert z == 1.0
        # valid, though not what the native check takes: a subclass output and
        # a non-canonical float32 dtype object
        odd = np.dtype(np.float32, metadata={"tag": 1})
        assert odd == np.float32 and odd is not np.dtype(np.float32)
        out = np.zeros((4, 3), np.float32).view(Sub)
        k(a.view(odd), 3, out, z)
        np.testing.assert_allclose(np.asarray(out), a * 3, rtol=1e-6)
        assert z == 2.0
        for bad, pattern in [
            ((a, 2, b, None), "parameter 'Z' expects a float32\\(\\) array, got NoneType"),
            ((a, 2, b, 7), "got int"),
            ((a, 2, b, np.zeros(1, np.float32)), "got 1-d array"),
            ((a, 2, rand((5, 3)), z), "binds 'n' = 5, but dimension 0 of 'A' gave 'n' = 4"),
            ((a, 2, b, np.zeros((), np.float64)), "got dtype float64"),
        ]:
            with pytest.raises(VMError, match=pattern):
                k(*bad)
        c = np.zeros(5, np.float32)
        k2(5, c)
        assert (c == 2).all()
        with pytest.raises(VMError, match="scalar parameter 'm'"):
            k2(4, c)
    # a composite dimension keeps the Python checks
    monkeypatch.undo()
    p = var("p")
    D, E = buf("D", (p,)), buf("E", (binop("*", p, T.IntImm(2)),))
    h = T.PrimFunc((D, E), loops([p], lambda i: store(E, D[i], i)))
    assert not compile_prim_funcs({"h": h})["h"].abi.checked


def test_parallel_loops_in_many_small_chunks(threads_always):
    from phasec.backend.llvm.jit import set_parallel_chunk_work

    n = var("n")
    A, B = buf("A", (n, 16)), buf("B", (n, 16))
    i, j = var("i"), var("j")
    f = T.PrimFunc((A, B), T.For(i, 0, n, "parallel", T.For(
        j, 0, 16, "serial", store(B, A[i, j] + T.Cast("float32", i), i, j))))
    k = compile_prim_funcs({"k": f})["k"]
    set_num_threads(2)
    from phasec.backend.llvm.irlib import CHUNK_WORK

    default = set_parallel_chunk_work(1)     # as many chunks as allowed: 32 per thread
    try:
        assert default == CHUNK_WORK
        for chunk_work in (1, 100, 1 << 40):  # 64 chunks, a few, the minimum (4 per thread)
            set_parallel_chunk_work(chunk_work)
            for rows in (1, 3, 64, 65, 1000, 5000):
                a = rand((rows, 16))
                b = np.full_like(a, np.nan)
                k(a, b)
                np.testing.assert_array_equal(b, a + np.arange(rows, dtype=np.float32)[:, None])
        assert set_parallel_chunk_work(0) == 1 << 40   # clamped to 1
    finally:
        set_parallel_chunk_work(default)


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


def test_kernels_prefer_the_vector_width_of_the_target_tuning():
    # LLVM's own tuning for some AVX-512 CPUs prefers 256-bit vectors; the
    # schedules' register tiles are sized for the tuning's width
    from phasec.target.tuning import host_tuning
    A, B = T.Buffer("A", (64,)), T.Buffer("B", (64,))
    i = T.Var("i")
    f = T.PrimFunc((A, B), T.For(i, 0, 64, "vectorized", T.BufferStore(B, A[i] * 2.0, (i,))))
    lib = compile_prim_funcs({"double_it": f})
    assert f'"prefer-vector-width"="{host_tuning().vector_bits}"' in lib.llvm_ir
    a = np.arange(64, dtype="float32")
    b = np.zeros(64, "float32")
    lib["double_it"](a, b)
    np.testing.assert_array_equal(b, a * 2)


def test_gather_and_scatter_kernels_build_without_llvm_warnings(tmp_path) -> None:
    """A short vectorized loop LLVM cannot vectorize (an address read from
    data) is left to LLVM's unroller: forced to stay a loop, LLVM would print
    "loop not vectorized" warnings on stderr at every build."""
    import subprocess
    import sys

    src = tmp_path / "gather.py"
    src.write_text('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 5), "float32"), j: R.Tensor((4, 2), "int64")):
        b = R.gather_elements(x, j, axis=1)
        c = R.scatter_elements(x, j, b, axis=1)
        t = R.take(x, R.const([1, 3], "int64"), axis=1)
        return (b, c, t)
''')
    env = {**os.environ, "PHASEC_KERNEL_CACHE": "off"}
    done = subprocess.run([sys.executable, "-m", "phasec", "build", str(src), "-o",
                           str(tmp_path / "g.pvm")], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "not vectorized" not in done.stderr and "warning" not in done.stderr, done.stderr


def test_reduction_tree_folds_and_gemm_tiles_build_without_llvm_warnings(tmp_path) -> None:
    """layer_norm's partial sums end in a tree fold (part[l] += part[l + 2])
    that LLVM does not vectorize as a 2-iteration loop; kept as a loop it
    printed "loop not vectorized" at every build. A matmul with a 2-column
    remainder tile is built too."""
    import subprocess
    import sys

    src = tmp_path / "ln.py"
    src.write_text('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((8, 256), "float32"), g: R.Tensor((256,), "float32"),
             w: R.Tensor((256, 34), "float32")):
        y = R.nn.layer_norm(x, g, g, axes=[-1])
        z = R.nn.relu(R.matmul(y, w))
        return z
''')
    env = {**os.environ, "PHASEC_KERNEL_CACHE": "off"}
    done = subprocess.run([sys.executable, "-m", "phasec", "build", str(src), "-o",
                           str(tmp_path / "ln.pvm")], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "not vectorized" not in done.stderr and "warning" not in done.stderr, done.stderr

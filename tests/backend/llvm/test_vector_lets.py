"""Loops of one vector whose body binds values first (a max pool's taps,
their maxima and the NaN test: ``pool_window.nan_propagating_max``) emitted
as vector instructions (phasec.backend.llvm.vectors): each lane's compares,
or-s and selects are the scalar loop's, so the results are numpy's
``where``-tree bit for bit, NaN, infinities and signed zeros included; a let
used in an index, or a select over a read that may fail, keeps the loop."""

from __future__ import annotations

import numpy as np
import pytest

from phasec.backend.llvm import compile_prim_funcs
from phasec.ir import tir as T
from phasec.te.schedules.pool_window import nan_propagating_max
from phasec.target.tuning import host_tuning

from helpers.tir_build import buf, rand, store, var

LANES = host_tuning().vector_bits // 32
VEC = f"<{LANES} x float>"


def _pool_row(lanes: int, taps: int, kind: str = "vectorized") -> T.PrimFunc:
    """Y[c * L + v] = max over the taps t of X[t, c * L + v] (NaN when one is
    NaN), as the max pools' chunk loops: ``for c: for v in vectorized(L)``."""
    n = 3 * lanes
    X, Y = buf("X", (taps, n)), buf("Y", (n,))
    c, v = var("c"), var("v")
    col = c * lanes + v
    body = nan_propagating_max([X[t, col] for t in range(taps)], "float32",
                               lambda value: store(Y, value, col))
    return T.PrimFunc((X, Y), T.For(c, 0, 3, "serial", T.For(v, 0, lanes, kind, body)))


def _reference(x: np.ndarray) -> np.ndarray:
    """The max of each column as ``nan_propagating_max`` defines it, in
    numpy: ``a if a > b else b`` in a balanced tree, NaN where any is."""
    vals = list(x)
    while len(vals) > 1:
        vals = [np.where(vals[i] > vals[i + 1], vals[i], vals[i + 1]) if i + 1 < len(vals)
                else vals[i] for i in range(0, len(vals), 2)]
    return np.where(np.isnan(x).any(axis=0), np.float32(np.nan), vals[0]).astype(np.float32)


def _special(taps: int, n: int) -> np.ndarray:
    x = rand((taps, n))
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -3.0], np.float32)
    rng = np.random.default_rng(7)
    mask = rng.random((taps, n)) < 0.3
    x[mask] = rng.choice(specials, mask.sum())
    x[:, :2] = 0.0  # ties of zeros of both signs
    x[1, :2] = -0.0
    return x


@pytest.mark.parametrize("taps", [2, 3, 5])
@pytest.mark.parametrize("lanes", sorted({4, LANES}))
def test_nan_propagating_max_of_one_vector_is_vector_code(taps: int, lanes: int) -> None:
    lib = compile_prim_funcs({"pool": _pool_row(lanes, taps)})
    vty = f"<{lanes} x float>"
    assert f"store {vty}" in lib.llvm_ir and f"fcmp une {vty}" in lib.llvm_ir
    assert f"select <{lanes} x i1>" in lib.llvm_ir
    assert "llvm.loop.vectorize.enable" not in lib.llvm_ir  # (nothing left to LLVM)
    x = _special(taps, 3 * lanes)
    y = np.full(3 * lanes, 7.0, np.float32)
    lib["pool"](x, y)
    want = _reference(x)
    np.testing.assert_array_equal(y.view(np.uint32), want.view(np.uint32))


def test_the_vector_code_is_the_scalar_loops_bit_for_bit() -> None:
    # the same body as a serial loop (scalar compares and selects): equal
    # bits on every input, NaN payloads and zeros' signs included
    vec, ser = _pool_row(LANES, 3), _pool_row(LANES, 3, "serial")
    lib = compile_prim_funcs({"vec": vec, "ser": ser})
    for seed in range(3):
        x = _special(3, 3 * LANES)
        x[seed, 5] = np.float32(np.nan)
        a, b = np.zeros(3 * LANES, np.float32), np.ones(3 * LANES, np.float32)
        lib["vec"](x, a)
        lib["ser"](x, b)
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def test_a_prime_width_keeps_the_loop() -> None:
    lib = compile_prim_funcs({"pool": _pool_row(13, 3)})
    assert "llvm.loop.vectorize.enable" in lib.llvm_ir  # (left to LLVM's vectorizer)
    x = _special(3, 39)
    y = np.zeros(39, np.float32)
    lib["pool"](x, y)
    np.testing.assert_array_equal(y.view(np.uint32), _reference(x).view(np.uint32))


def test_a_let_in_an_index_or_a_select_over_a_read_keeps_the_loop() -> None:
    # k = v + 1 indexes X: the lanes' addresses come from a let, not affine
    X, Y, v, k = buf("X", (LANES + 1,)), buf("Y", (LANES,)), var("v"), var("k")
    indexed = T.PrimFunc((X, Y), T.For(v, 0, LANES, "vectorized", T.LetStmt(
        k, v + 1, store(Y, X[k] * 2.0, v))))
    # Y[v] = X[v] > 0 ? Z[v - 1] : 0 with the read guarded by the select: the
    # scalar emitter branches around it, a vector would read every lane
    X2, Y2, Z, u, t = buf("X", (LANES,)), buf("Y", (LANES,)), buf("Z", (LANES,)), var("u"), \
        T.Var("t", "float32")
    guarded = T.PrimFunc((X2, Z, Y2), T.For(u, 0, LANES, "vectorized", T.LetStmt(
        t, X2[u], store(Y2, T.Select(T.BinaryOp(">", t, T.FloatImm(0.0)), Z[u],
                                     T.FloatImm(0.0)), u))))
    lib = compile_prim_funcs({"indexed": indexed, "guarded": guarded})
    assert f"store {VEC}" not in lib.llvm_ir
    x, y = rand((LANES + 1,)), np.zeros(LANES, np.float32)
    lib["indexed"](x, y)
    np.testing.assert_array_equal(y, x[1:] * np.float32(2.0))
    x2, z, y2 = rand((LANES,)), rand((LANES,)), np.ones(LANES, np.float32)
    lib["guarded"](x2, z, y2)
    np.testing.assert_array_equal(y2, np.where(x2 > 0, z, np.float32(0.0)))


def test_bool_lets_and_and_of_compares() -> None:
    # Y[v] = (a >= b and a != a) or a < -1 ? b : a * a, through a bool let
    X, Y, v = buf("X", (2, LANES)), buf("Y", (LANES,)), var("v")
    a, b, m = T.Var("a", "float32"), T.Var("b", "float32"), T.Var("m", "bool")
    cond = T.BinaryOp("or", T.BinaryOp("and", T.BinaryOp(">=", a, b), T.BinaryOp("!=", a, a)),
                      T.BinaryOp("<", a, T.FloatImm(-1.0)))
    body = T.LetStmt(a, X[0, v], T.LetStmt(b, X[1, v], T.LetStmt(m, cond, store(
        Y, T.Select(m, b, a * a), v))))
    lib = compile_prim_funcs({"k": T.PrimFunc((X, Y), T.For(v, 0, LANES, "vectorized", body))})
    assert f"store {VEC}" in lib.llvm_ir and f"and <{LANES} x i1>" in lib.llvm_ir
    x = _special(2, LANES)
    y = np.zeros(LANES, np.float32)
    lib["k"](x, y)
    xa, xb = x
    with np.errstate(invalid="ignore"):
        want = np.where(((xa >= xb) & (xa != xa)) | (xa < -1), xb, xa * xa)
    np.testing.assert_array_equal(y.view(np.uint32), want.astype(np.float32).view(np.uint32))


def test_arithmetic_a_comparison_decides_is_not_fused_in_vectors() -> None:
    # t = a * b + c with a = b = 1 + 2**-12, c = -(1 + 2**-11): rounded as
    # written t = 0 (the product's 2**-24 is a tie to even), fused t = 2**-24;
    # t > 0 decides the select, so its arithmetic carries no contract flag
    # in the vector code either (phasec.backend.llvm.exact)
    X, Y, v = buf("X", (3, LANES)), buf("Y", (LANES,)), var("v")
    t = T.Var("t", "float32")
    body = T.LetStmt(t, X[0, v] * X[1, v] + X[2, v], store(
        Y, T.Select(T.BinaryOp(">", t, T.FloatImm(0.0)), T.FloatImm(1.0), t), v))
    lib = compile_prim_funcs({"k": T.PrimFunc((X, Y), T.For(v, 0, LANES, "vectorized", body))})
    assert f"fmul {VEC}" in lib.llvm_ir and f"fcmp ogt {VEC}" in lib.llvm_ir
    x = np.empty((3, LANES), np.float32)
    x[0] = x[1] = np.float32(1 + 2.0**-12)
    x[2] = np.float32(-(1 + 2.0**-11))
    x[:, 1] = rand((3,))  # (other lanes: anything)
    y = np.full(LANES, 5.0, np.float32)
    lib["k"](x, y)
    prod = x[0] * x[1] + x[2]  # (float32 numpy: two roundings)
    want = np.where(prod > 0, np.float32(1.0), prod)
    assert want[0] == 0.0
    np.testing.assert_array_equal(y, want)

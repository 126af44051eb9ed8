"""Loops of exactly one vector emitted as vector instructions
(phasec.backend.llvm.vectors): results against numpy, and which loops are
left to LLVM's vectorizer (the cases where lanes depend on each other or
the access is not contiguous must keep the scalar loop's meaning)."""

from __future__ import annotations

import numpy as np

from phasec.backend.llvm import compile_prim_funcs
from phasec.ir import tir as T
from phasec.target.tuning import host_tuning

from helpers.tir_build import buf, rand, store, var

LANES = host_tuning().vector_bits // 32
VEC = f"<{LANES} x float>"


def _tile_kernel(rows: int, k: int) -> T.PrimFunc:
    """out[i, v] = max(sum_k a[k, i] * b[k, v] - 0.25, 0) through a local
    register tile, its axes bound in blocks (as a schedule's tile is)."""
    A, B, Out = buf("A", (k, rows)), buf("B", (k, LANES)), buf("Out", (rows, LANES))
    acc = T.Buffer("acc", (rows, LANES))
    kk, i, v = var("kk"), var("i"), var("v")
    bi, bv = var("bi"), var("bv")

    def block(name: str, body_of) -> T.Block:
        return T.Block(name, (T.IterVar(bi, T.IntImm(rows)), T.IterVar(bv, T.IntImm(LANES))),
                       (i, v * 1 + 0), body_of(bi, bv))

    zero = T.For(i, 0, rows, "unroll", T.For(v, 0, LANES, "vectorized", block(
        "init", lambda r, c: store(acc, 0.0, r, c))))
    update = T.For(kk, 0, k, "serial", T.For(i, 0, rows, "unroll", T.For(
        v, 0, LANES, "vectorized", block(
            "update", lambda r, c: store(acc, acc[r, c] + A[kk, r] * B[kk, c], r, c)))))
    out = T.For(i, 0, rows, "serial", T.For(v, 0, LANES, "vectorized", block(
        "out", lambda r, c: store(Out, T.BinaryOp("max", acc[r, c] - 0.25, T.FloatImm(0.0)),
                                  r, c))))
    return T.PrimFunc((A, B, Out), T.Allocate(acc, T.SeqStmt((zero, update, out))))


def _one_vector_loop(value_of, n: int = LANES) -> T.PrimFunc:
    """X[v] = value_of(X, v) over one vector (in place)."""
    X, v = buf("X", (n + 1,)), var("v")
    return T.PrimFunc((X,), T.For(v, 0, n, "vectorized", store(X, value_of(X, v), v)))


def test_register_tile_of_one_vector_loops_is_vector_code():
    rows, k = 4, 19
    lib = compile_prim_funcs({"tile": _tile_kernel(rows, k)})
    # emitted as vector instructions, not left to LLVM's vectorizer
    assert f"store {VEC}" in lib.llvm_ir and f"load {VEC}" in lib.llvm_ir
    assert "llvm.loop.vectorize.enable" not in lib.llvm_ir
    # the reduction loop around the tile (19 steps) is kept a loop
    assert "llvm.loop.unroll.disable" in lib.llvm_ir
    a, b = rand((k, rows)), rand((k, LANES))
    out = np.full((rows, LANES), np.nan, np.float32)
    lib["tile"](a, b, out)
    ref = np.maximum(a.T.astype(np.float64) @ b.astype(np.float64) - 0.25, 0.0)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_lanes_that_read_other_lanes_keep_the_loop_order():
    # X[v] = X[v + 1] * 2 reads ahead (numpy's vector semantics happen to
    # agree); X[v + 1] = X[v] + 1 reads what the lane before wrote; X[v] +=
    # X[0] reads lane 0's new value: none may become one vector operation
    ahead = _one_vector_loop(lambda X, v: X[v + 1] * 2.0)
    Y, w = buf("Y", (LANES + 1,)), var("w")
    behind = T.PrimFunc((Y,), T.For(w, 0, LANES, "vectorized", store(Y, Y[w] + 1.0, w + 1)))
    first = _one_vector_loop(lambda X, v: X[v] + X[0])
    lib = compile_prim_funcs({"ahead": ahead, "behind": behind, "first": first})
    assert f"store {VEC}" not in lib.llvm_ir
    x0 = rand((LANES + 1,))
    got = {name: x0.copy() for name in ("ahead", "behind", "first")}
    for name, x in got.items():
        lib[name](x)
    want = {name: x0.astype(np.float64) for name in got}
    for j in range(LANES):  # the loops, in order
        want["ahead"][j] = want["ahead"][j + 1] * 2
        want["behind"][j + 1] = want["behind"][j] + 1
        want["first"][j] = want["first"][j] + want["first"][0]
    for name in got:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, err_msg=name)


def test_strided_and_partial_loops_stay_loops():
    X, Y, v = buf("X", (2 * LANES,)), buf("Y", (LANES,)), var("v")
    strided = T.PrimFunc((X, Y), T.For(v, 0, LANES, "vectorized", store(Y, X[v * 2] + 1.0, v)))
    X2, Y2, u = buf("X", (13,)), buf("Y", (13,)), var("u")
    partial = T.PrimFunc((X2, Y2), T.For(u, 0, 13, "vectorized", store(Y2, X2[u] * 3.0, u)))
    lib = compile_prim_funcs({"strided": strided, "partial": partial})
    assert f"store {VEC}" not in lib.llvm_ir
    x, y = rand((2 * LANES,)), np.zeros(LANES, np.float32)
    lib["strided"](x, y)
    np.testing.assert_array_equal(y, x[::2] + np.float32(1.0))
    x2, y2 = rand((13,)), np.zeros(13, np.float32)
    lib["partial"](x2, y2)
    np.testing.assert_array_equal(y2, x2 * np.float32(3.0))


def test_a_tile_with_a_narrow_accumulation_row_is_left_to_llvm_whole():
    # rows of 16 + 3 lanes accumulated into one local tile: the 3-wide row
    # cannot be one vector, so the 16-wide one stays a loop too (a tile part
    # vector instructions, part loops, stayed in memory: 1.16x slower)
    k, width = 7, LANES + 3
    A, B, Out = buf("A", (k,)), buf("B", (k, width)), buf("Out", (width,))
    acc = T.Buffer("acc", (width,))
    kk, v, w, z = var("kk"), var("v"), var("w"), var("z")
    red = var("r")

    def update(lo: int, n: int, x: T.Var) -> T.For:
        bx = var("bx")
        blk = T.Block("update", (T.IterVar(bx, T.IntImm(width)), T.IterVar(red, T.IntImm(k), "R")),
                      (x + lo, kk), store(acc, acc[bx] + A[red] * B[red, bx], bx))
        return T.For(x, 0, n, "vectorized", blk)

    body = T.SeqStmt((
        T.For(z, 0, width, "serial", store(acc, 0.0, z)),
        T.For(kk, 0, k, "serial", T.SeqStmt((update(0, LANES, v), update(LANES, 3, w)))),
        T.For(z, 0, width, "serial", store(Out, acc[z], z))))
    lib = compile_prim_funcs({"ragged": T.PrimFunc((A, B, Out), T.Allocate(acc, body))})
    assert f"store {VEC}" not in lib.llvm_ir
    a, b = rand((k,)), rand((k, width))
    out = np.zeros(width, np.float32)
    lib["ragged"](a, b, out)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5,
                               atol=1e-6)


def _int_tile_kernel(rows: int, k: int, b_step: int = 1) -> T.PrimFunc:
    """out[i, v] = sum_k dot4(bw[k, v * b_step], aw[k, i]) through a local
    int32 tile, as the integer GEMM's tile is: B's words vary along the
    lanes, A's word is the same in every lane (bytes of B unsigned, of A
    signed: ``T.dot4_u8s8(b, a)``)."""
    Aw = buf("Aw", (k, rows), "int32")
    Bw = buf("Bw", (k, LANES * b_step), "int32")
    Out = buf("Out", (rows, LANES), "int32")
    acc = T.Buffer("acc", (rows, LANES), "int32")
    kk, i, v = var("kk"), var("i"), var("v")
    bi, bv = var("bi"), var("bv")

    def block(name: str, body_of, reduce: bool = False) -> T.Block:
        axes = (T.IterVar(bi, T.IntImm(rows)), T.IterVar(bv, T.IntImm(LANES)))
        if reduce:
            axes += (T.IterVar(var("bk"), T.IntImm(k), "R"),)
        return T.Block(name, axes, (i, v * 1 + 0, kk)[:len(axes)], body_of(bi, bv))

    def update(r, c):
        dot = T.Call("dot4_u8s8", (Bw[kk, c * b_step], Aw[kk, r]), "int32")
        return store(acc, acc[r, c] + dot, r, c)

    zero = T.For(i, 0, rows, "unroll", T.For(v, 0, LANES, "vectorized", block(
        "init", lambda r, c: store(acc, 0, r, c))))
    body = T.For(kk, 0, k, "serial", T.For(i, 0, rows, "unroll", T.For(
        v, 0, LANES, "vectorized", block("update", update, reduce=True))))
    out = T.For(i, 0, rows, "serial", T.For(v, 0, LANES, "vectorized", block(
        "out", lambda r, c: store(Out, acc[r, c], r, c))))
    return T.PrimFunc((Aw, Bw, Out), T.Allocate(acc, T.SeqStmt((zero, body, out))))


def _dot4_reference(aw: np.ndarray, bw: np.ndarray) -> np.ndarray:
    """sum_k sum_q ubyte(bw[k, v])[q] * sbyte(aw[k, i])[q], int32 wrapping."""
    a = aw.view(np.int8).reshape(*aw.shape, 4).astype(np.int64)
    b = bw.view(np.uint8).reshape(*bw.shape, 4).astype(np.int64)
    return np.einsum("kiq,kvq->iv", a, b).astype(np.int32)


def test_integer_tile_rows_are_dot4_vector_calls():
    """The integer GEMM's tile (zeroing and ``acc + dot4``) as calls of the
    helper's vector variant, not loops for LLVM's vectorizer (each one was
    seconds of LLVM in a large kernel); the sums against numpy over bytes
    at both ends (a swapped operand order would sign the wrong bytes)."""
    rows, k = 3, 23
    lib = compile_prim_funcs({"tile": _int_tile_kernel(rows, k)})
    assert f"call <{LANES} x i32> @phasec.dot4_u8s8.v{LANES}(" in lib.llvm_ir
    assert f"store <{LANES} x i32> <i32 0" in lib.llvm_ir
    rng = np.random.default_rng(5)
    aw = rng.integers(-2**31, 2**31, (k, rows), dtype=np.int64).astype(np.int32)
    bw = rng.integers(-2**31, 2**31, (k, LANES), dtype=np.int64).astype(np.int32)
    aw[0], bw[0] = -0x7f7f7f80, -1  # bytes -128 / 127 and 255
    out = np.zeros((rows, LANES), np.int32)
    lib["tile"](aw, bw, out)
    np.testing.assert_array_equal(out, _dot4_reference(aw, bw))


def test_integer_tile_with_a_strided_operand_stays_loops():
    """B's words at stride 2 along the lanes: the update is no vector call,
    and the whole tile (its zeroing too) is left to LLVM's vectorizer."""
    rows, k = 2, 5
    lib = compile_prim_funcs({"tile": _int_tile_kernel(rows, k, b_step=2)})
    assert f"call <{LANES} x i32> @phasec.dot4_u8s8" not in lib.llvm_ir
    assert f"store <{LANES} x i32>" not in lib.llvm_ir
    rng = np.random.default_rng(6)
    aw = rng.integers(-2**31, 2**31, (k, rows), dtype=np.int64).astype(np.int32)
    bw = rng.integers(-2**31, 2**31, (k, 2 * LANES), dtype=np.int64).astype(np.int32)
    out = np.zeros((rows, LANES), np.int32)
    lib["tile"](aw, bw, out)
    np.testing.assert_array_equal(out, _dot4_reference(aw, np.ascontiguousarray(bw[:, ::2])))

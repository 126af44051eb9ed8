"""One-vector loops whose accesses read their last two axes as a flat
index's row and column, ``(uint64(j) // W, uint64(j) % W)`` or the signed
``(j // W, j % W)`` with ``j``
growing by 1 a lane (the GEMM's columns over a whole image,
``GemmPlan.flat``), emitted as vector instructions (phasec.backend.llvm.vectors):
consecutive elements even where the lanes cross a row. Results against
numpy; the pairs that are not one run of memory (rows of another width,
two different indices, the row index used alone) stay loops."""

from __future__ import annotations

import numpy as np

from phasec.backend.llvm import compile_prim_funcs
from phasec.ir import tir as T
from phasec.target.tuning import host_tuning

from helpers.tir_build import buf, rand, store, var

LANES = host_tuning().vector_bits // 32
VEC = f"<{LANES} x float>"
#: rows of W elements, not a multiple of the vector: every vector crosses rows
W, H = 5, 2 * LANES // 5 + 2


def _flat(j: T.PrimExpr, op: str, w: int = W) -> T.PrimExpr:
    return T.Cast("int64", T.BinaryOp(op, T.Cast("uint64", j), T.IntImm(w, "uint64"), "uint64"))


def _signed(j: T.PrimExpr, op: str, w: int = W) -> T.PrimExpr:
    return T.BinaryOp(op, j, T.IntImm(w, "int64"))


def _kernel(read=lambda X, y, x, by, bx: X[by, bx], width: int = W, rows_of: int = W,
            other_j: bool = False, pair=_flat) -> T.PrimFunc:
    """Out[y, x] = read(...) * 2 over vector ``t`` of flat positions
    ``t*LANES + v``, the block axes ``by, bx`` bound to the pair."""
    X, Out = buf("X", (H, rows_of)), buf("Out", (H, W))
    t, v, by, bx = var("t"), var("v"), var("by"), var("bx")
    j = t * LANES + v
    k = (t * LANES + v + 1) if other_j else j
    body = T.Block("b", (T.IterVar(by, T.IntImm(H)), T.IterVar(bx, T.IntImm(W))),
                   (pair(j, "//", width), pair(k, "%", width)),
                   store(Out, read(X, None, None, by, bx) * 2.0, by, bx))
    n = (H * W - (1 if other_j else 0)) // LANES
    return T.PrimFunc((X, Out), T.For(t, 0, n, "serial", T.For(v, 0, LANES, "vectorized", body)))


def test_a_flat_pair_is_one_vector_across_rows():
    lib = compile_prim_funcs({"k": _kernel()})
    assert f"load {VEC}" in lib.llvm_ir and f"store {VEC}" in lib.llvm_ir
    assert "llvm.loop.vectorize.enable" not in lib.llvm_ir
    x = rand((H, W))
    out = np.full((H, W), np.nan, np.float32)
    lib["k"](x, out)
    n = H * W // LANES * LANES
    np.testing.assert_array_equal(out.reshape(-1)[:n], (x * np.float32(2)).reshape(-1)[:n])


def test_a_signed_flat_pair_is_one_vector_too():
    """Floor division and modulo of a signed index: ``(j // W) * W + j % W``
    simplifies to ``j`` all the same (phasec.arith)."""
    lib = compile_prim_funcs({"k": _kernel(pair=_signed)})
    assert f"load {VEC}" in lib.llvm_ir and f"store {VEC}" in lib.llvm_ir
    x = rand((H, W))
    out = np.full((H, W), np.nan, np.float32)
    lib["k"](x, out)
    n = H * W // LANES * LANES
    np.testing.assert_array_equal(out.reshape(-1)[:n], (x * np.float32(2)).reshape(-1)[:n])
    # rows one longer than the pair's: a gather, not a run
    wider = compile_prim_funcs({"wider": _kernel(pair=_signed, rows_of=W + 1)})
    assert f"store {VEC}" not in wider.llvm_ir
    x = rand((H, W + 1))
    out = np.full((H, W), np.nan, np.float32)
    wider["wider"](x, out)
    np.testing.assert_array_equal(out.reshape(-1)[:n], (x[:, :W] * np.float32(2)).reshape(-1)[:n])


def test_pairs_that_are_not_one_run_stay_loops():
    # X's rows are W + 1 long: X[j // W, j % W] skips an element a row
    wider = _kernel(rows_of=W + 1)
    # the row index alone (a row's broadcast): the same element for a row's lanes only
    row_only = _kernel(read=lambda X, y, x, by, bx: X[by, T.IntImm(0)])
    lib = compile_prim_funcs({"wider": wider, "row_only": row_only})
    assert f"store {VEC}" not in lib.llvm_ir  # (both left to LLVM's vectorizer)
    n = H * W // LANES * LANES
    x = rand((H, W + 1))
    out = np.full((H, W), np.nan, np.float32)
    lib["wider"](x, out)
    np.testing.assert_array_equal(out.reshape(-1)[:n], (x[:, :W] * np.float32(2)).reshape(-1)[:n])
    x = rand((H, W))
    out = np.full((H, W), np.nan, np.float32)
    lib["row_only"](x, out)
    want = np.repeat(x[:, :1], W, axis=1) * np.float32(2)
    np.testing.assert_array_equal(out.reshape(-1)[:n], want.reshape(-1)[:n])


def test_a_row_and_column_of_two_indices_stay_a_loop():
    lib = compile_prim_funcs({"k": _kernel(other_j=True)})
    assert f"store {VEC}" not in lib.llvm_ir
    x = rand((H, W))
    out = np.full((H, W), np.nan, np.float32)
    lib["k"](x, out)
    n = (H * W - 1) // LANES * LANES
    j = np.arange(n)
    want = np.full((H, W), np.nan, np.float32)
    want[j // W, (j + 1) % W] = x[j // W, (j + 1) % W] * np.float32(2)
    np.testing.assert_array_equal(out, want)

"""Row tiles (phasec.te.schedules.row_tile) over a last axis known only at
run time: ``q @ k^T`` over a symbolic sequence, with an epilogue. Compiled
with LLVM and run on the TIR interpreter, against numpy, at sizes around the
vector width and the row tile (0, 1, primes, exact multiples)."""

import numpy as np

from phasec import te
from phasec.backend.llvm import compile_prim_funcs
from phasec.ir import tir as T
from phasec.target.tuning import host_tuning

from helpers.te_checks import run, walk


def _scores(rows, cols):
    """``Q[b, rows, 16] @ K[b, 16, cols] + mask[rows, cols]``: the attention
    scores of one head (the GEMM schedule needs a static column count)."""
    Q = te.placeholder((2, rows, 16), "float32", "Q")
    K = te.placeholder((2, 16, cols), "float32", "K")
    mask = te.placeholder((rows, cols), "float32", "mask")
    k = te.reduce_axis(16, "k")
    mm = te.compute((2, rows, cols), lambda b, i, j: te.sum(Q[b, i, k] * K[b, k, j], axis=[k]),
                    name="mm", tag="matmul")
    out = te.compute(mm.shape, lambda b, i, j: mm[b, i, j] + mask[i, j], name="out")
    return te.create_prim_func([Q, K, mask, out])


def _accumulator_shapes(func):
    return sorted({tuple(int(d.value) for d in n.buffer.shape)
                   for n in walk(func.body) if isinstance(n, T.Allocate)})


def test_symbolic_columns_take_vector_rows_and_tiles_of_rows():
    lanes = host_tuning().lanes(32)
    rows = host_tuning().gemm_rows
    s, t = T.Var("s", "int64"), T.Var("t", "int64")
    funcs = {"sym_cols": _scores(5, s), "sym_both": _scores(t, s), "sym_cols_13": _scores(13, s)}
    # vector rows, tiles of rows when they share the columns' loads, one-wide
    # rests for the columns and single rows for the rows
    assert _accumulator_shapes(funcs["sym_both"]) == sorted({(rows, lanes), (rows, 1), (lanes,),
                                                             (1,)})
    lib = compile_prim_funcs(funcs, use_cache=False)
    rng = np.random.default_rng(5)
    for name, n_rows in (("sym_cols", 5), ("sym_both", None), ("sym_cols_13", 13)):
        for n_cols in (0, 1, lanes - 1, lanes, lanes + 1, 2 * lanes + 3):
            for r in ((n_rows,) if n_rows else (0, 1, rows - 1, rows, rows + 1, 3 * rows + 2)):
                q = rng.standard_normal((2, r, 16)).astype("float32")
                k = rng.standard_normal((2, 16, n_cols)).astype("float32")
                mask = rng.standard_normal((r, n_cols)).astype("float32")
                want = q.astype("float64") @ k.astype("float64") + mask
                got = np.full((2, r, n_cols), np.nan, "float32")
                lib[name](q, k, mask, got)
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5,
                                           err_msg=f"{name} {r}x{n_cols}")
                if name == "sym_both" and n_cols in (1, lanes + 1) and r in (1, rows + 1):
                    got = run(funcs[name], q, k, mask, np.full((2, r, n_cols), np.nan, "float32"))
                    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

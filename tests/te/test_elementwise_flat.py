"""The flat schedule of elementwise nests (te.schedules.elementwise_flat):
rows that are not whole vectors run as one loop over the last two axes when
every input reads them as a row-major pair (or not at all). Against numpy
on the TIR interpreter and LLVM, on prime, odd and symbolic shapes; the
nests that keep the plain loops (a column broadcast, a transposed read,
whole-vector rows, a matrix)."""

from __future__ import annotations

import numpy as np
import pytest

from phasec import te
from phasec.backend.llvm import compile_prim_funcs
from phasec.ir import tir as T

from helpers.te_checks import loops, rand, run

N = T.Var("n")


def _nest(shape, extra):
    """``tanh(A) * 2 + extra``, ``extra`` one of the reads the tests vary."""
    b, c, h, w = shape
    A = te.placeholder(shape, "float32", "A")
    if extra == "channel":        # per channel: reads neither of the last two axes
        X = te.placeholder((1, c, 1, 1), "float32", "X")

        def read(i, j, y, x):
            return X[0, j, 0, 0]
    elif extra == "flat":         # a row-major [.., y*W + x] read (a reshape's input)
        X = te.placeholder((b, c, h * w), "float32", "X")

        def read(i, j, y, x):
            return X[i, j, y * w + x]
    elif extra == "column":       # one value per column: keeps the plain loops
        X = te.placeholder((w,), "float32", "X")

        def read(i, j, y, x):
            return X[x]
    else:                         # transposed: keeps the plain loops
        X = te.placeholder((b, c, w, h), "float32", "X")

        def read(i, j, y, x):
            return X[i, j, x, y]
    B = te.compute(shape, lambda i, j, y, x: te.call("tanh", A[i, j, y, x]) * T.FloatImm(2.0)
                   + read(i, j, y, x), name="B")
    x_shape = {"channel": (1, c, 1, 1), "flat": (b, c, h * w), "column": (w,),
               "transposed": (b, c, w, h)}[extra]
    return te.create_prim_func([A, X, B]), x_shape


def _expected(a, xv, extra):
    b, c, h, w = a.shape
    x = {"channel": lambda: xv, "flat": lambda: xv.reshape(b, c, h, w),
         "column": lambda: xv, "transposed": lambda: xv.transpose(0, 1, 3, 2)}[extra]()
    return np.tanh(a) * 2 + x


def _flat(func, h, w):
    return any(f.kind == "vectorized" and isinstance(f.extent, T.IntImm)
               and f.extent.value == h * w for f in loops(func))


@pytest.mark.parametrize("shape,extra", [
    ((2, 3, 7, 11), "channel"),
    ((1, 4, 56, 56), "flat"),
    ((3, 2, 5, 13), "flat"),
    ((N, 3, 5, 13), "channel"),
    ((2, 3, 7, 11), "column"),
    ((2, 3, 7, 11), "transposed"),
])
def test_rows_of_part_of_a_vector_run_flat_and_match_numpy(shape, extra):
    func, x_shape = _nest(shape, extra)
    flat = extra in ("channel", "flat")
    assert _flat(func, shape[2], shape[3]) == flat
    kernel = compile_prim_funcs({"k": func})["k"]
    for batch in ((1, 2) if shape[0] is N else (shape[0],)):
        concrete = (batch, *shape[1:])
        a = rand(*concrete)
        xs = tuple(batch if d is N else d for d in x_shape)
        xv = rand(*xs)
        want = _expected(a, xv, extra)
        got = np.zeros(concrete, "float32")
        kernel(a, xv, got)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        if shape[0] is not N:
            interp = run(func, a, xv, np.zeros(concrete, "float32"))
            np.testing.assert_allclose(interp, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(2, 3, 7, 32), (7, 11)])
def test_whole_vector_rows_and_matrices_keep_the_plain_loops(shape):
    A = te.placeholder(shape, "float32", "A")
    B = te.compute(shape, lambda *i: te.call("tanh", A[i]), name="B")
    func = te.create_prim_func([A, B])
    assert not _flat(func, shape[-2], shape[-1])
    a = rand(*shape)
    np.testing.assert_allclose(run(func, a, np.zeros(shape, "float32")), np.tanh(a),
                               rtol=1e-5, atol=1e-6)

"""Operators computed through a matrix decomposition: ``det``.

``det(data)``: the determinant of each matrix of ``data`` (``[..., M, M]``,
float32 or float64), shape ``[...]`` (ONNX's Det, numpy's
``linalg.det``). The kernel is hand-written TIR: Gaussian elimination with
partial pivoting (the row with the largest magnitude in the column; the
first such row on ties) on a copy of each matrix, the determinant the
product of the pivots, negated per row swap; a zero pivot column gives 0.
"""

from __future__ import annotations

import numpy as np

from phasec import arith
from phasec import te
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.tir import Allocate, BinaryOp, Buffer, BufferStore, IfThenElse
from phasec.op._common import OpPattern, attrs_of, define, err, tensor_arg, tensor_sinfo
from phasec.op._lowering import _const, _out, _tensor, legalizes
from phasec.op._tirgen import i64, nest, seq
from phasec.op.draw import VALUE_CAP, declares_draw

__all__: list[str] = []


def _infer_det(call, ctx):
    data = tensor_arg(call, 0, ctx, "data")
    attrs_of(call)
    if data.dtype not in ("void", "float32", "float64"):
        raise err(call, f"det computes in float32 or float64, but the data is {data.dtype}")
    if data.ndim not in (-1,) and data.ndim < 2:
        raise err(call, f"det needs matrices ([..., M, M]), but the data has ndim {data.ndim}")
    if data.shape is None:
        return TensorStructInfo(None, data.dtype, -1 if data.ndim == -1 else data.ndim - 2)
    m, k = data.shape[-2], data.shape[-1]
    if not arith.prove_equal(m, k):
        a, b = arith.const_int(m), arith.const_int(k)
        if a is not None and b is not None:
            raise err(call, f"det needs square matrices, but they are {a} x {b}")
    return tensor_sinfo(tuple(data.shape[:-2]), data.dtype)


def _det_ref(data):
    x = np.asarray(data)
    return np.linalg.det(x.astype(np.float64)).astype(x.dtype)


define("det", ("data",), _infer_det, attrs={}, reference=_det_ref, pattern=OpPattern.OPAQUE,
       doc="Determinant of each square matrix (Gaussian elimination, partial pivoting).")


@legalizes("det")
def _det_te(call, inputs):
    x = _tensor(inputs, 0, call)
    out = _out(call)
    dt = out.dtype
    n = x.shape[-1]
    batch = tuple(x.shape[:-2])

    def c(v):
        return _const(v, dt)

    def build(ins, o):
        (xb,) = ins
        a = Buffer("det_a", (n, n), dt)
        d = Buffer("det_d", (i64(1),), dt)
        p = Buffer("det_p", (i64(1),), "int64")

        def per_matrix(b):
            copy = nest((n, n), lambda ij: BufferStore(a, xb[(*b, *ij)], ij), "c")

            def column(k):
                def find(i):  # rows below k: the largest magnitude (the first on ties)
                    row = BinaryOp("+", i, BinaryOp("+", k, i64(1)))
                    larger = BinaryOp(">", te.call("fabs", a[row, k]),
                                      te.call("fabs", a[p[i64(0)], k]))
                    return IfThenElse(larger, BufferStore(p, row, (i64(0),)))
                below = BinaryOp("-", BinaryOp("-", n, k), i64(1))
                search = seq(BufferStore(p, k, (i64(0),)),
                             nest((below,), lambda i: find(i[0]), "r"))

                pr = p[i64(0)]
                t = Buffer("det_t", (i64(1),), dt)
                swap = IfThenElse(BinaryOp("!=", pr, k), seq(
                    nest((n,), lambda j: seq(
                        BufferStore(t, a[k, j[0]], (i64(0),)),
                        BufferStore(a, a[pr, j[0]], (k, j[0])),
                        BufferStore(a, t[i64(0)], (pr, j[0]))), "s"),
                    BufferStore(d, BinaryOp("-", c(0.0), d[i64(0)]), (i64(0),))))
                pivot = a[k, k]

                def eliminate(i, j):
                    row = BinaryOp("+", i, BinaryOp("+", k, i64(1)))
                    col = BinaryOp("+", j, BinaryOp("+", k, i64(1)))
                    f = BinaryOp("/", a[row, k], pivot)
                    return BufferStore(a, BinaryOp("-", a[row, col], BinaryOp("*", f, a[k, col])),
                                       (row, col))
                elim = IfThenElse(BinaryOp("!=", pivot, c(0.0)),
                                  nest((below, below), lambda ij: eliminate(*ij), "e"))
                # a[i, k] below the pivot is never read again: no need to zero it
                return Allocate(t, seq(search, swap,
                                       BufferStore(d, BinaryOp("*", d[i64(0)], pivot), (i64(0),)),
                                       elim))
            body = seq(copy, BufferStore(d, c(1.0), (i64(0),)),
                       nest((n,), lambda k: column(k[0]), "k"),
                       BufferStore(o, d[i64(0)], tuple(b)))
            return body
        stmt = nest(batch, per_matrix, "b") if batch else per_matrix(())
        return Allocate(a, Allocate(d, Allocate(p, stmt)))
    return te.extern(out.shape, dt, [x], build, name="T_det")


def _draw_det(ctx):
    n = ctx.shape[-1]
    if ctx.shape[-2] != n or n > 4:
        return None
    span = max(abs(ctx.lo), abs(ctx.hi), 1.0)
    bound = float(np.prod([span * (k + 1) for k in range(n)]))  # Hadamard's bound, loosely
    if bound > VALUE_CAP:
        return None
    ctx.result_in(-bound, bound)
    return (ctx.x,), {}


declares_draw("det", ranks=(2, 3), build=_draw_det,
              fits=lambda shape: shape[-1] == shape[-2] and shape[-1] <= 4)

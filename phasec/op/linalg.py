"""matmul and reductions (sum, mean, max, min, prod).

``matmul`` follows ``numpy.matmul``: 1-D operands are promoted (a leading or
trailing 1 that is removed from the result) and batch dimensions broadcast.
With ``out_dtype`` set the operands are converted to it before multiplying
(so int8 x int8 -> int32 accumulates in int32); otherwise both operands need
the same dtype.

Reductions take ``axis=None`` (all axes) or a tuple of axes, and
``keepdims``. ``mean`` of integers truncates the sum divided by the count.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from phasec.ir import tir
from phasec import arith
from phasec import te
from phasec.ir.expr import Call
from phasec.ir.struct_info import TensorStructInfo
from phasec.te import Tensor
from phasec.ir.tir import BinaryOp, PrimExpr
from phasec.op._common import (
    OpPattern, as_bool, as_dtype, attrs_of, binary_dtype, broadcast_dims, define, err,
    int_tuple, norm_axes, opt, tensor_arg,
)
from phasec.op._draw import (
    FLOAT, VALUE_CAP, Hooks, const_dim, declares_draw, dim_max, dims_equal, iv_ok, numel_max,
)
from phasec.op._lowering import (
    I64, LEGALIZE, Inputs, LegalizeFn, _attrs, _count, _float, _i64, _is_one, _name, _norm_axis,
    _out,
    _prod, _reduction, _safe_div, _tensor, legalizes,
)

__all__: list[str] = []


# ---------------------------------------------------------------------------
# matmul
# ---------------------------------------------------------------------------

def _infer_matmul(call, ctx):
    a = tensor_arg(call, 0, ctx)
    b = tensor_arg(call, 1, ctx)
    out_dtype = attrs_of(call)["out_dtype"]
    dtype = out_dtype if out_dtype != "void" else binary_dtype(call, a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise err(call, "matmul does not accept 0-d (scalar) operands; use R.multiply")
    if a.ndim == -1 or b.ndim == -1:
        return TensorStructInfo(None, dtype, -1)
    out_ndim = max(a.ndim, b.ndim, 2) - (a.ndim == 1) - (b.ndim == 1)
    if a.shape is None or b.shape is None:
        return TensorStructInfo(None, dtype, out_ndim)
    ka = a.shape[-1]
    kb = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if arith.prove_not_equal(ka, kb):
        from phasec.ir.text import prim_expr_to_str as s
        raise err(call, f"matmul reduction lengths differ: {s(ka)} (last axis of the first "
                        f"operand) vs {s(kb)} ({'first' if b.ndim == 1 else 'second-to-last'} "
                        "axis of the second operand)")
    batch = broadcast_dims(call, a.shape[:-2], b.shape[:-2], ("batch dims of x1", "batch dims of x2"))
    if batch is None:
        return TensorStructInfo(None, dtype, out_ndim)
    dims = list(batch)
    if a.ndim > 1:
        dims.append(a.shape[-2])
    if b.ndim > 1:
        dims.append(b.shape[-1])
    return TensorStructInfo(tuple(dims), dtype)


def _matmul_ref(x1, x2, out_dtype="void"):
    x1, x2 = np.asarray(x1), np.asarray(x2)
    dtype = np.dtype(x1.dtype if out_dtype == "void" else out_dtype)
    # Float products are summed in float64 and rounded once: BLAS's float32
    # kernels sum the edge columns of a matrix in another order than the
    # others, so equal columns could give unequal results (a softmax over
    # large, equal logits then stops being uniform).
    acc = np.float64 if dtype.kind == "f" and dtype.itemsize < 8 else dtype
    return np.asarray(np.matmul(x1.astype(acc), x2.astype(acc))).astype(dtype)


define("matmul", ("x1", "x2"), _infer_matmul, attrs={"out_dtype": ("void", as_dtype)},
       reference=_matmul_ref, pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
       doc="Matrix product with numpy.matmul semantics (1-D operands, batch broadcasting).")


# ---------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------

def _infer_reduce(call, ctx):
    x = tensor_arg(call, 0, ctx)
    a = attrs_of(call)
    axis, keepdims = a["axis"], a["keepdims"]
    if x.ndim == -1:
        if axis is None and not keepdims:
            return TensorStructInfo((), x.dtype)
        return TensorStructInfo(None, x.dtype, -1)
    axes = set(range(x.ndim)) if axis is None else set(norm_axes(call, axis, x.ndim))
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, x.ndim if keepdims else x.ndim - len(axes))
    dims = []
    for i, d in enumerate(x.shape):
        if i in axes:
            if keepdims:
                dims.append(tir.IntImm(1))
        else:
            dims.append(d)
    return TensorStructInfo(tuple(dims), x.dtype)


def _np_axis(x: np.ndarray, axis):
    return None if axis is None else tuple(a % x.ndim for a in axis) if x.ndim else ()


def _reduce_ref(fn):
    def ref(x, axis=None, keepdims=False):
        x = np.asarray(x)
        return np.asarray(fn(x, axis=_np_axis(x, axis), keepdims=keepdims)).astype(x.dtype)
    return ref


def _mean_ref(x, axis=None, keepdims=False):
    x = np.asarray(x)
    ax = _np_axis(x, axis)
    if x.dtype.kind == "f":
        return np.asarray(np.mean(x, axis=ax, keepdims=keepdims, dtype=x.dtype)).astype(x.dtype)
    total = np.sum(x.astype(np.int64), axis=ax, keepdims=keepdims)
    count = x.size // max(total.size, 1) if x.size else 1
    q = np.abs(total) // count * np.sign(total)  # truncate toward zero
    return np.asarray(q).astype(x.dtype)


_REDUCE_ATTRS = {"axis": (None, opt(int_tuple)), "keepdims": (False, as_bool)}

for _opname, _ref in (("sum", _reduce_ref(np.sum)), ("mean", _mean_ref),
                    ("max", _reduce_ref(np.max)), ("min", _reduce_ref(np.min)),
                    ("prod", _reduce_ref(np.prod))):
    define(_opname, ("x",), _infer_reduce, attrs=_REDUCE_ATTRS, reference=_ref,
           pattern=OpPattern.COMM_REDUCE,
           doc=f"Reduce by {_opname} over ``axis`` (None: all axes), optionally keeping dims.")


# ---------------------------------------------------------------------------
# Legalization
# ---------------------------------------------------------------------------

def _reduce_axes(call: Call, ndim: int) -> list[int]:
    axis = _attrs(call)["axis"]
    if axis is None:
        return list(range(ndim))
    return sorted(_norm_axis(a, ndim) for a in axis)


def _make_reduce(kind: str) -> LegalizeFn:
    combiner = {"sum": te.sum, "max": te.max, "min": te.min, "prod": te.prod}[kind]

    def legalize(call: Call, inputs: Inputs) -> Tensor:
        x = _tensor(inputs, 0, call)
        out = _out(call)
        axes = _reduce_axes(call, x.ndim)
        keep = _attrs(call)["keepdims"]
        if tir.is_bool(x.dtype):
            # bool: sum/max = any, prod/min = all; accumulate 0/1 in int64 (bool
            # arithmetic would wrap: true + true is false in one bit)
            r = _reduction(x, axes, keep, out.shape, combiner, _name(call) + "_i64",
                           lambda v: te.cast(v, I64))
            return te.compute(out.shape, lambda *i: BinaryOp("!=", r[i], _i64(0)),
                              name=_name(call))
        return _reduction(x, axes, keep, out.shape, combiner, _name(call))
    return legalize


for _n in ("sum", "max", "min", "prod"):
    LEGALIZE["relax." + _n] = _make_reduce(_n)


@legalizes("mean")
def _mean(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    axes = _reduce_axes(call, x.ndim)
    keep = _attrs(call)["keepdims"]
    count = _prod([x.shape[a] for a in axes])
    dt = out.dtype
    if _float(dt):
        s = _reduction(x, axes, keep, out.shape, te.sum, "T_mean_sum")
        return te.compute(out.shape, lambda *i: BinaryOp("/", s[i], _count(count, dt)),
                          name=_name(call))
    # Integers: sum in int64, divide truncating toward zero (the reference's rule).
    s = _reduction(x, axes, keep, out.shape, te.sum, "T_mean_sum",
                   lambda v: te.cast(v, "int64"))
    return te.compute(out.shape, lambda *i: te.cast(_safe_div(s[i], count, "/"), dt),
                      name=_name(call))


@legalizes("matmul")
def _matmul(call: Call, inputs: Inputs) -> Tensor:
    a, b = _tensor(inputs, 0, call), _tensor(inputs, 1, call)
    out = _out(call)
    dt = out.dtype
    k = te.reduce_axis(a.shape[-1], "k")
    a_mat, b_mat = a.ndim > 1, b.ndim > 1
    out_nd = len(out.shape)
    n_batch = out_nd - int(a_mat) - int(b_mat)
    batch_shape = out.shape[:n_batch]

    def batch_index(t: Tensor, i: Sequence[PrimExpr]) -> list[PrimExpr]:
        tb = t.shape[:-2]
        off = n_batch - len(tb)
        return [(_i64(0) if _is_one(tb[d]) and not _is_one(batch_shape[off + d])
                 else i[off + d]) for d in range(len(tb))]

    def body(*i: PrimExpr) -> Any:
        batch = i[:n_batch]
        ai = (batch_index(a, batch) + [i[n_batch], k.var]) if a_mat else [k.var]
        bi = (batch_index(b, batch) + [k.var, i[-1]]) if b_mat else [k.var]
        return te.sum(BinaryOp("*", te.cast(a[tuple(ai)], dt), te.cast(b[tuple(bi)], dt)),
                      axis=[k])
    return te.compute(out.shape, body, name="T_matmul", tag="matmul")


# ---------------------------------------------------------------------------
# How the fuzzing generator draws them (phasec.op._draw.Hooks)
# ---------------------------------------------------------------------------

def _matmul_iv(x, y, max_dim):
    bound = dim_max(x.shape[-1], max_dim) * x.mag * y.mag
    return -bound, bound


def _matmul_ok(x, y, max_dim) -> bool:
    if y.kind != FLOAT or y.rank not in (1, 2) or x.rank + y.rank < 2:
        return False
    if x.rank == 1 and y.rank == 1:
        return False  # a 0-d dot product: fine, but keep shapes simple
    return dims_equal(x.shape[-1], y.shape[0]) and iv_ok(_matmul_iv(x, y, max_dim))


def _matmul_accepts(g, x) -> bool:
    if x.kind != FLOAT or x.rank < 1:
        return False
    k = const_dim(x.shape[-1])
    return (k is not None and g.cfg.constants
            and dim_max(x.shape[-1], g.cfg.max_dim) * x.mag * 1.0 <= VALUE_CAP)


def _matmul_build(g, x):
    from phasec.op.calls import call_op

    cands = g.visible(lambda v: _matmul_ok(x, v, g.cfg.max_dim))
    cands.append("const")
    y = g.pick(cands)
    if y == "const":  # the second operand: a value in scope, or a weight
        m = g.pick(list(range(1, g.cfg.max_dim + 1)))
        y = g.constant((const_dim(x.shape[-1]), m), (-1.0, 1.0), "float32")
    return g.emit(call_op("relax.matmul", x.expr, y.expr), FLOAT, _matmul_iv(x, y, g.cfg.max_dim))


declares_draw("matmul", Hooks(_matmul_build, (FLOAT,), 1, _matmul_accepts, order=10))


def _reduce_iv(name, x, count):
    lo, hi = x.lo, x.hi
    if name == "sum":
        return min(lo, count * lo), max(hi, count * hi)
    if name == "prod":
        if count > 8:
            return None
        bound = max(x.mag, 1.0) ** count
        return (0.0 if lo >= 0 else -bound), bound
    return lo, hi  # mean, max, min


def _reduce_draw(name: str, order: int) -> Hooks:
    def accepts(g, x) -> bool:
        if x.kind != FLOAT or x.rank < 1:
            return False
        worst = numel_max(x.shape, g.cfg.max_dim)
        return iv_ok(_reduce_iv(name, x, min(worst, 8) if name == "prod" else worst))

    def build(g, x):
        from phasec.op.calls import call_op

        options: list[Any] = [None] + [(i,) for i in range(x.rank)]
        if x.rank >= 2:
            options.append((0, x.rank - 1))
        axes = g.pick(options)
        dims = range(x.rank) if axes is None else axes
        count = 1
        for i in dims:
            count *= dim_max(x.shape[i], g.cfg.max_dim)
        iv = _reduce_iv(name, x, count)
        if not iv_ok(iv):  # fall back to one axis, always within bounds
            axes = (x.rank - 1,)
            iv = _reduce_iv(name, x, dim_max(x.shape[-1], g.cfg.max_dim))
        keepdims = g.boolean()
        return g.emit(call_op("relax." + name, x.expr, axis=axes, keepdims=keepdims), FLOAT, iv)

    return Hooks(build, (FLOAT,), 1, accepts, order=order)


for _opname, _order in (("sum", 11), ("mean", 39), ("max", 40), ("min", 41), ("prod", 42)):
    declares_draw(_opname, _reduce_draw(_opname, _order))

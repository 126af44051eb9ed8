"""Shape manipulation (TVM 0.27's ``relax.op.manipulate``, its reshaping
family): reshape, flatten, permute_dims, expand_dims, squeeze, broadcast_to,
and the sums that undo broadcasting, collapse_sum_like and collapse_sum_to.

Operand conventions (the interpreter passes these values to ``reference``):
tensors are numpy arrays, shape operands (``R.shape([...])``) tuples of ints,
tuple operands (``concat``'s ``tensors``) sequences of arrays, prim values
numpy scalars of their dtype (see :mod:`phasec.op.definitions`).

Semantics worth knowing:

* ``reshape(x, shape)``: the shape is an operand; one ``-1`` is allowed and is
  resolved in the result's struct info (legalizations should read the output
  shape from ``call.struct_info``).
* ``collapse_sum_to(data, shape)`` / ``collapse_sum_like(data, target)``:
  the sum of ``data`` over the axes along which ``shape`` (target's shape)
  was broadcast to data's (the gradient of a broadcast); ``shape`` must
  broadcast to data's shape.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from phasec import arith
from phasec import te
from phasec.ir import tir
from phasec.ir.expr import Call
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.tir import PrimExpr
from phasec.op._common import (
    REQUIRED, OpPattern, attrs_of, define, err, int_tuple, norm_axes, opt, prod, shape_arg,
    shape_tuple, tensor_arg,
)
from phasec.op._lowering import (
    Inputs, _attrs, _bcast, _flat_index, _i64, _is_one, _name, _norm_axis, _out, _reduction,
    _tensor, _unravel, legalizes,
)
from phasec.op.draw import BOOL, FLOAT, INT, NUMBERS, Hooks, const_dim, data_like, declares_draw
from phasec.ir.text import expr_to_str, prim_expr_to_str
from phasec.te import Tensor
from phasec.op.calls import call_op

__all__ = ["shape_text"]


# ---------------------------------------------------------------------------
# reshape / flatten / permute / expand / squeeze / broadcast_to
# ---------------------------------------------------------------------------

def _infer_reshape(call, ctx):
    x = tensor_arg(call, 0, ctx)
    target = shape_arg(call, 1, ctx)
    if target.values is None:
        return TensorStructInfo(None, x.dtype, target.ndim)
    values = list(target.values)
    infer_at = [i for i, v in enumerate(values) if arith.const_int(v) == -1]
    if len(infer_at) > 1:
        raise err(call, "reshape allows at most one -1 in the new shape")
    for v in values:
        c = arith.const_int(v)
        if c is not None and c < -1:
            raise err(call, f"reshape: invalid dimension {c} in the new shape")
    if x.shape is None:
        if infer_at:
            return TensorStructInfo(None, x.dtype, len(values))
        return TensorStructInfo(tuple(values), x.dtype)
    total = prod(x.shape)
    if infer_at:
        known = prod([v for i, v in enumerate(values) if i != infer_at[0]])
        t, k = arith.const_int(total), arith.const_int(known)
        if t is not None and k is not None and (k == 0 or t % k):
            raise err(call, f"cannot reshape a tensor of {t} elements into "
                            f"{shape_text(values)}: {t} is not divisible by {k}")
        values[infer_at[0]] = arith.simplify(tir.BinaryOp("//", total, known))
    elif arith.prove_not_equal(total, prod(values)):
        raise err(call, f"cannot reshape a tensor of {prim_expr_to_str(total)} elements into "
                        f"{shape_text(values)} ({prim_expr_to_str(prod(values))} elements)")
    return TensorStructInfo(tuple(values), x.dtype)


def shape_text(values) -> str:
    """A shape as Python writes a tuple: ``(2, n)``, ``(3,)``."""
    return "(" + ", ".join(prim_expr_to_str(v) for v in values) + ("," if len(values) == 1 else "") + ")"


def _reshape_ref(x, shape):
    return np.reshape(np.asarray(x), shape_tuple(shape)).copy()


define("reshape", ("x", "shape"), _infer_reshape, reference=_reshape_ref,
       pattern=OpPattern.INJECTIVE, doc="Reshape to the shape operand (one -1 allowed).")


def _infer_flatten(call, ctx):
    x = tensor_arg(call, 0, ctx)
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, 1)
    return TensorStructInfo((prod(x.shape),), x.dtype)


define("flatten", ("x",), _infer_flatten, reference=lambda x: np.asarray(x).reshape(-1).copy(),
       pattern=OpPattern.INJECTIVE, doc="Flatten to one dimension.")


def _infer_permute_dims(call, ctx):
    x = tensor_arg(call, 0, ctx)
    axes = attrs_of(call)["axes"]
    if x.ndim == -1:
        return TensorStructInfo(None, x.dtype, -1 if axes is None else len(axes))
    if axes is None:
        order = list(range(x.ndim - 1, -1, -1))
    else:
        if len(axes) != x.ndim:
            raise err(call, f"permute_dims needs one axis per dimension ({x.ndim}), "
                            f"got axes={tuple(axes)}")
        order = norm_axes(call, axes, x.ndim, "axes")
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, x.ndim)
    return TensorStructInfo(tuple(x.shape[i] for i in order), x.dtype)


def _permute_ref(x, axes=None):
    return np.ascontiguousarray(np.transpose(np.asarray(x), axes))


define("permute_dims", ("x",), _infer_permute_dims, attrs={"axes": (None, opt(int_tuple))},
       reference=_permute_ref, pattern=OpPattern.INJECTIVE,
       doc="Transpose; axes=None reverses the dimensions.")


def _infer_expand_dims(call, ctx):
    x = tensor_arg(call, 0, ctx)
    axis = attrs_of(call)["axis"]
    if x.ndim == -1:
        return TensorStructInfo(None, x.dtype, -1)
    out_ndim = x.ndim + len(axis)
    new_axes = set(norm_axes(call, axis, out_ndim))
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, out_ndim)
    it = iter(x.shape)
    return TensorStructInfo(tuple(tir.IntImm(1) if i in new_axes else next(it)
                                  for i in range(out_ndim)), x.dtype)


def _expand_dims_ref(x, axis):
    return np.expand_dims(np.asarray(x), tuple(axis)).copy()


define("expand_dims", ("x",), _infer_expand_dims, attrs={"axis": (REQUIRED, int_tuple)},
       reference=_expand_dims_ref, pattern=OpPattern.INJECTIVE,
       doc="Insert size-1 dimensions at ``axis`` (positions in the result).")


def _infer_squeeze(call, ctx):
    x = tensor_arg(call, 0, ctx)
    axis = attrs_of(call)["axis"]
    if x.ndim == -1:
        return TensorStructInfo(None, x.dtype, -1)
    if axis is None:
        if x.shape is None:
            return TensorStructInfo(None, x.dtype, -1)
        consts = [arith.const_int(d) for d in x.shape]
        if any(c is None for c in consts):
            return TensorStructInfo(None, x.dtype, -1)  # which dims are 1 is unknown
        return TensorStructInfo(tuple(d for d, c in zip(x.shape, consts) if c != 1), x.dtype)
    axes = set(norm_axes(call, axis, x.ndim))
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, x.ndim - len(axes))
    axes = _squeezed(x.shape, axes)
    return TensorStructInfo(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype)


def _squeezed(shape: Sequence[tir.PrimExpr], axes: set[int]) -> set[int]:
    """The listed axes squeeze removes. As in TVM 0.27 (and PyTorch), an axis
    whose size is a constant other than 1 is left as it is; a symbolic one is
    removed (it must be 1 at run time)."""
    return {a for a in axes if arith.const_int(shape[a]) in (None, 1)}


def _squeeze_ref(x, axis=None):
    x = np.asarray(x)
    if axis is None:
        return np.squeeze(x).copy()
    return np.squeeze(x, tuple(a % x.ndim for a in axis if x.shape[a % x.ndim] == 1)).copy()


define("squeeze", ("x",), _infer_squeeze, attrs={"axis": (None, opt(int_tuple))},
       reference=_squeeze_ref, pattern=OpPattern.INJECTIVE,
       doc="Remove size-1 dimensions (all of them, or those in ``axis``; a listed axis "
           "of another constant size stays, as in TVM 0.27).")


def _infer_broadcast_to(call, ctx):
    x = tensor_arg(call, 0, ctx)
    target = shape_arg(call, 1, ctx)
    if target.values is None:
        return TensorStructInfo(None, x.dtype, target.ndim)
    if x.ndim != -1 and x.ndim > target.ndim:
        raise err(call, f"broadcast_to cannot reduce ndim {x.ndim} to {target.ndim}")
    if x.shape is not None:
        for i in range(1, x.ndim + 1):
            d, t = x.shape[-i], target.values[-i]
            if arith.const_int(d) == 1 or arith.prove_equal(d, t):
                continue
            if arith.const_int(d) is not None and arith.const_int(t) is not None:
                raise err(call, f"cannot broadcast shape {shape_text(x.shape)} to "
                                f"{shape_text(target.values)}: dimension {prim_expr_to_str(d)} vs "
                                f"{prim_expr_to_str(t)} on axis -{i}")
    return TensorStructInfo(target.values, x.dtype)


def _broadcast_to_ref(x, shape):
    return np.broadcast_to(np.asarray(x), shape_tuple(shape)).copy()


define("broadcast_to", ("x", "shape"), _infer_broadcast_to, reference=_broadcast_to_ref,
       pattern=OpPattern.BROADCAST, doc="Broadcast to the shape operand (numpy rules).")


# ---------------------------------------------------------------------------
# collapse_sum_like / collapse_sum_to
# ---------------------------------------------------------------------------

def _collapse(call, data: TensorStructInfo, target, ndim: int) -> TensorStructInfo:
    if data.ndim != -1 and ndim != -1 and ndim > data.ndim:
        raise err(call, f"{expr_to_str(call.op)}: the target has {ndim} dimensions, more than "
                        f"the data's {data.ndim}")
    if target is not None and data.shape is not None:
        off = len(data.shape) - len(target)
        for k, t in enumerate(target):
            d = data.shape[off + k]
            if arith.const_int(t) != 1 and arith.prove_not_equal(t, d):
                raise err(call, f"{expr_to_str(call.op)}: the target shape does not broadcast "
                                f"to the data's: dimension {prim_expr_to_str(t)} vs "
                                f"{prim_expr_to_str(d)} (axis {off + k})")
    if target is None:
        return TensorStructInfo(None, data.dtype, ndim)
    return TensorStructInfo(tuple(target), data.dtype)


def _infer_collapse_like(call, ctx):
    data = tensor_arg(call, 0, ctx, "data")
    target = tensor_arg(call, 1, ctx, "collapse_target")
    return _collapse(call, data, target.shape, target.ndim)


def _infer_collapse_to(call, ctx):
    data = tensor_arg(call, 0, ctx, "data")
    shape = shape_arg(call, 1, ctx)
    return _collapse(call, data, shape.values, shape.ndim)


def _collapse_ref(data, shape):
    x = np.asarray(data)
    shape = tuple(shape)
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + k for k, d in enumerate(shape)
                                      if d == 1 and x.shape[lead + k] != 1)
    return np.sum(x, axis=axes, dtype=x.dtype).reshape(shape).astype(x.dtype)


define("collapse_sum_like", ("data", "collapse_target"), _infer_collapse_like,
       reference=lambda data, collapse_target: _collapse_ref(data, np.shape(collapse_target)),
       pattern=OpPattern.COMM_REDUCE,
       doc="Sum data over the axes along which collapse_target's shape was broadcast.")
define("collapse_sum_to", ("data", "shape"), _infer_collapse_to,
       reference=lambda data, shape: _collapse_ref(data, shape_tuple(shape)),
       pattern=OpPattern.COMM_REDUCE,
       doc="Sum data over the axes along which ``shape`` was broadcast to data's shape.")


@legalizes("collapse_sum_like", "collapse_sum_to")
def _collapse_sum(call, inputs):
    x = _tensor(inputs, 0, call)
    out = _out(call)
    lead = x.ndim - len(out.shape)
    axes = list(range(lead)) + [lead + k for k, d in enumerate(out.shape)
                                if arith.const_int(d) == 1 and arith.const_int(x.shape[lead + k]) != 1]
    if not axes:
        return te.compute(out.shape, lambda *i: x[tuple(i)], name="T_collapse_sum")
    # reduce with keepdims on the broadcast axes, then drop the leading ones
    kept = tuple(tir.IntImm(1) if d in axes else s for d, s in enumerate(x.shape))
    s = _reduction(x, axes, True, kept, te.sum, "T_collapse_sum_red")
    return te.compute(out.shape, lambda *i: s[(tir.IntImm(0),) * lead + tuple(i)],
                      name="T_collapse_sum")


# ---------------------------------------------------------------------------
# Legalization
# ---------------------------------------------------------------------------

#: reshapes of more dimensions than this (in and out together) are not split
#: into groups (the search is quadratic in the dimensions of a group)
_MAX_GROUPED_DIMS = 16


def _product(dims: Sequence[PrimExpr]) -> PrimExpr:
    total: PrimExpr = tir.IntImm(1)
    for d in dims:
        total = tir.BinaryOp("*", total, d)
    return total


def _reshape_groups(out_shape: Sequence[PrimExpr], in_shape: Sequence[PrimExpr]
                    ) -> list[tuple[int, int, int, int]] | None:
    """Both shapes cut into consecutive groups of provably equal products,
    smallest groups first, as ``(q0, q1, p0, p1)`` (output dims ``q0:q1``,
    input dims ``p0:p1``), or None when no such cut is found."""
    if len(out_shape) + len(in_shape) > _MAX_GROUPED_DIMS:
        return None
    groups = []
    p = q = 0
    while p < len(in_shape) or q < len(out_shape):
        left_in, left_out = len(in_shape) - p, len(out_shape) - q
        found = next(((a, total - a)
                      for total in range(1, left_in + left_out + 1)
                      for a in range(max(0, total - left_out), min(total, left_in) + 1)
                      if arith.prove_equal(_product(in_shape[p:p + a]),
                                           _product(out_shape[q:q + total - a]))), None)
        if found is None:
            return None
        a, b = found
        groups.append((q, q + b, p, p + a))
        p, q = p + a, q + b
    return groups


def _reshape_index(i: Sequence[PrimExpr], out_shape: Sequence[PrimExpr],
                   in_shape: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]:
    """Index of the input element for output index ``i`` of a row-major reshape.

    The two shapes are cut into consecutive groups of equal size (a reshape
    splits or merges axes within each group: ``(b, s, 64) -> (b, s, 4, 16)``
    is ``b | s | 64 = 4 * 16``), and each group is indexed on its own: a kept
    axis directly, a merge as a flat index, a split by quotients and
    remainders of the group's own dimensions. So a symbolic dimension that
    the reshape keeps never becomes a divisor, which the kernel would pay for
    on every element. Without such a cut, everything goes through the flat
    index.
    """
    groups = _reshape_groups(out_shape, in_shape)
    if groups is None:
        groups = [(0, len(out_shape), 0, len(in_shape))]
    index: list[PrimExpr] = []
    for q0, q1, p0, p1 in groups:
        if q1 - q0 == 1 and p1 - p0 == 1:
            index.append(i[q0])
        elif q1 == q0:  # input dims of size 1
            index.extend(_i64(0) for _ in range(p0, p1))
        elif p1 > p0:
            index.extend(_unravel(_flat_index(i[q0:q1], out_shape[q0:q1]), in_shape[p0:p1]))
    return tuple(index)


@legalizes("reshape", "flatten")
def _reshape(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    return te.compute(out.shape, lambda *i: x[_reshape_index(i, out.shape, x.shape)],
                      name=_name(call))


@legalizes("permute_dims")
def _permute_dims(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    axes = _attrs(call)["axes"]
    order = list(range(x.ndim - 1, -1, -1)) if axes is None else [
        _norm_axis(v, x.ndim) for v in axes]

    def body(*i: PrimExpr) -> Any:
        ind: list[PrimExpr] = [_i64(0)] * x.ndim
        for j, src in enumerate(order):
            ind[src] = i[j]
        return x[tuple(ind)]
    return te.compute(out.shape, body, name=_name(call))


@legalizes("expand_dims")
def _expand_dims(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    new = {_norm_axis(v, len(out.shape)) for v in _attrs(call)["axis"]}
    return te.compute(out.shape, lambda *i: x[tuple(v for d, v in enumerate(i) if d not in new)],
                      name=_name(call))


@legalizes("squeeze")
def _squeeze(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    axis = _attrs(call)["axis"]
    if axis is None:
        dropped = {d for d in range(x.ndim) if _is_one(x.shape[d])}
    else:
        dropped = _squeezed(x.shape, {_norm_axis(v, x.ndim) for v in axis})

    def body(*i: PrimExpr) -> Any:
        it = iter(i)
        return x[tuple(_i64(0) if d in dropped else next(it) for d in range(x.ndim))]
    return te.compute(out.shape, body, name=_name(call))


@legalizes("broadcast_to")
def _broadcast_to(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    return te.compute(out.shape, lambda *i: _bcast(x, out.shape, i), name=_name(call))


# ---------------------------------------------------------------------------
# How the fuzzing generator draws these operators (phasec.testing); all but
# the collapse sums declare phasec.op.draw.Hooks: data movement, whose
# result's elements are the operand's (its interval)
# ---------------------------------------------------------------------------

_ANY = (FLOAT, INT, BOOL)


def _call(name: str, *args: Any, **attrs: Any) -> Any:

    return call_op("relax." + name, *args, **attrs)


def _draw_permute_dims(g, x):
    perms = [p for p in itertools.permutations(range(x.rank)) if p != tuple(range(x.rank))]
    axes = g.pick([None] + perms[:6])
    return g.emit(_call("permute_dims", x.expr, axes=axes), x.kind, (x.lo, x.hi))


def _draw_expand_dims(g, x):
    axis = g.pick(list(range(x.rank + 1)))
    return g.emit(_call("expand_dims", x.expr, axis=axis), x.kind, (x.lo, x.hi))


def _squeeze_operand(g):
    # a shape with a 1 somewhere (the default operand, then a 1 inserted)
    rank = g.integers(1, max(g.cfg.max_rank, 1))
    top = max(g.cfg.max_dim, 2)
    shape = tuple(g.integers(2, top) for _ in range(rank))
    axis = g.integers(0, len(shape))
    return FLOAT, shape[:axis] + (1,) + shape[axis:]


def _draw_squeeze(g, x):
    ones = [i for i, d in enumerate(x.shape) if const_dim(d) == 1]
    # axis=None squeezes every 1: with a symbolic dim the rank is unknown
    known = all(const_dim(d) is not None for d in x.shape)
    axis = g.pick([(i,) for i in ones] + ([None] if known else []))
    return g.emit(_call("squeeze", x.expr, axis=axis), x.kind, (x.lo, x.hi))


def _draw_flatten(g, x):
    return g.emit(_call("flatten", x.expr), x.kind, (x.lo, x.hi))


def _factorizations(total: int) -> list[tuple[int, ...]]:
    out = [(total,), (1, total)]
    for a in range(2, total):
        if total % a == 0:
            out.append((a, total // a))
    return out


def _draw_reshape(g, x):
    total = math.prod(const_dim(d) for d in x.shape)
    target = g.pick(_factorizations(total))
    return g.emit(_call("reshape", x.expr, target), x.kind, (x.lo, x.hi))


def _draw_broadcast_to(g, x):
    lead = g.pick(list(range(1, g.cfg.max_dim + 1)))
    shape = [lead] + [g.pick(list(range(1, g.cfg.max_dim + 1))) if const_dim(d) == 1 else d
                      for d in x.shape]
    return g.emit(_call("broadcast_to", x.expr, tuple(shape)), x.kind, (x.lo, x.hi))


def _below_max_rank(g, x) -> bool:
    return x.kind in _ANY and x.rank < g.cfg.max_rank


def _collapsed_target(ctx):
    """A shape that broadcasts to the data's, and the count summed into each element."""
    keep = ctx.integers(0, len(ctx.shape))
    target = [d if ctx.choose([True, False]) else 1 for d in ctx.shape[len(ctx.shape) - keep:]]
    count = math.prod(ctx.shape) // max(math.prod(target), 1)
    ctx.result_in(-count * ctx.mag, count * ctx.mag)
    return tuple(target)


declares_draw("permute_dims", Hooks(_draw_permute_dims, _ANY, 2, order=47))
declares_draw("expand_dims", Hooks(_draw_expand_dims, _ANY, accepts=_below_max_rank, order=48))
declares_draw("squeeze", Hooks(_draw_squeeze, _ANY, accepts=lambda g, x: (
    x.kind in _ANY and any(const_dim(d) == 1 for d in x.shape)), operand=_squeeze_operand,
    order=49))
declares_draw("flatten", Hooks(_draw_flatten, _ANY, 2, order=50))
declares_draw("reshape", Hooks(_draw_reshape, _ANY, accepts=lambda g, x: (
    x.kind in _ANY and all(const_dim(d) is not None for d in x.shape)), order=51))
declares_draw("broadcast_to", Hooks(_draw_broadcast_to, _ANY, accepts=_below_max_rank, order=52))
declares_draw("collapse_sum_to", dtypes=NUMBERS, build=lambda ctx: (
    (ctx.x, _collapsed_target(ctx)), {}))
declares_draw("collapse_sum_like", dtypes=NUMBERS, build=lambda ctx: (
    (ctx.x, data_like(ctx, _collapsed_target(ctx))), {}))

"""How the fuzzing generator draws the operators of :mod:`.manipulate`
(:class:`phasec.op._draw.Hooks`; a sibling module only because
manipulate.py is near the size limit): permute_dims, expand_dims, squeeze,
flatten, reshape, broadcast_to, concat, split, strided_slice and take, each
with the attribute domains and operand shapes it accepts. Data movement: the
result's elements are the operand's (its interval)."""

from __future__ import annotations

import itertools
import math
from typing import Any

from phasec.ir.expr import Tuple
from phasec.op._draw import BOOL, FLOAT, INT, Hooks, const_dim, declares_draw, dims_equal, hull

__all__: list[str] = []

_ANY = (FLOAT, INT, BOOL)


def _call(name: str, *args: Any, **attrs: Any) -> Any:
    from phasec.op.calls import call_op

    return call_op("relax." + name, *args, **attrs)


def _permute_dims(g, x):
    perms = [p for p in itertools.permutations(range(x.rank)) if p != tuple(range(x.rank))]
    axes = g.pick([None] + perms[:6])
    return g.emit(_call("permute_dims", x.expr, axes=axes), x.kind, (x.lo, x.hi))


def _expand_dims(g, x):
    axis = g.pick(list(range(x.rank + 1)))
    return g.emit(_call("expand_dims", x.expr, axis=axis), x.kind, (x.lo, x.hi))


def _squeeze_operand(g):
    # a shape with a 1 somewhere (the default operand, then a 1 inserted)
    rank = g.integers(1, max(g.cfg.max_rank, 1))
    top = max(g.cfg.max_dim, 2)
    shape = tuple(g.integers(2, top) for _ in range(rank))
    axis = g.integers(0, len(shape))
    return FLOAT, shape[:axis] + (1,) + shape[axis:]


def _squeeze(g, x):
    ones = [i for i, d in enumerate(x.shape) if const_dim(d) == 1]
    # axis=None squeezes every 1: with a symbolic dim the rank is unknown
    known = all(const_dim(d) is not None for d in x.shape)
    axis = g.pick([(i,) for i in ones] + ([None] if known else []))
    return g.emit(_call("squeeze", x.expr, axis=axis), x.kind, (x.lo, x.hi))


def _flatten(g, x):
    return g.emit(_call("flatten", x.expr), x.kind, (x.lo, x.hi))


def _factorizations(total: int) -> list[tuple[int, ...]]:
    out = [(total,), (1, total)]
    for a in range(2, total):
        if total % a == 0:
            out.append((a, total // a))
    return out


def _reshape(g, x):
    total = math.prod(const_dim(d) for d in x.shape)
    target = g.pick(_factorizations(total))
    return g.emit(_call("reshape", x.expr, target), x.kind, (x.lo, x.hi))


def _broadcast_to(g, x):
    lead = g.pick(list(range(1, g.cfg.max_dim + 1)))
    shape = [lead] + [g.pick(list(range(1, g.cfg.max_dim + 1))) if const_dim(d) == 1 else d
                      for d in x.shape]
    return g.emit(_call("broadcast_to", x.expr, tuple(shape)), x.kind, (x.lo, x.hi))


def _concat(g, x):
    axis = g.pick(list(range(x.rank)))
    ys = g.visible(lambda v: v.kind == x.kind and v.dtype == x.dtype and v.rank == x.rank
                   and all(dims_equal(a, b) for i, (a, b) in enumerate(zip(x.shape, v.shape))
                           if i != axis))
    if not any(v is x for v in ys):
        ys.append(x)  # x may be a constant made to fit, not a value in scope
    y = g.pick(ys)
    iv = hull((x.lo, x.hi), (y.lo, y.hi))
    return g.emit(_call("concat", Tuple([x.expr, y.expr]), axis=axis), x.kind, iv)


def _cut_axes(x) -> list[int]:
    """Axes of constant extent >= 2 (where an operator may cut)."""
    return [i for i, d in enumerate(x.shape) if (const_dim(d) or 0) >= 2]


def _cuts(g, x) -> bool:
    return x.kind in _ANY and bool(_cut_axes(x))


def _split(g, x):
    axis = g.pick(_cut_axes(x))
    d = const_dim(x.shape[axis])
    # equal sections (an int), or split points (a list: [1] splits after index 0)
    sections = g.pick([s for s in range(2, d + 1) if d % s == 0] + [[1]])
    call = _call("split", x.expr, indices_or_sections=sections, axis=axis)
    tup = g.emit_tuple(call, [x.kind] * len(call.struct_info.fields), (x.lo, x.hi))
    return g.get_item(tup, g.pick(list(range(len(tup.fields)))))


def _strided_slice(g, x):
    axis = g.pick(_cut_axes(x))
    d = const_dim(x.shape[axis])
    begin = g.pick(list(range(d - 1)))
    end = g.pick(list(range(d, begin, -1)))
    stride = g.pick([1, 2])
    call = _call("strided_slice", x.expr, axes=[axis], begin=[begin], end=[end],
                 strides=[stride])
    return g.emit(call, x.kind, (x.lo, x.hi))


def _take(g, x):
    axis = g.pick([i for i, d in enumerate(x.shape) if const_dim(d)])
    d = const_dim(x.shape[axis])
    count = g.pick(list(range(1, g.cfg.max_dim + 1)))
    indices = g.int_constant((count,), 0, d - 1)  # in range: TVM reads no negative index
    return g.emit(_call("take", x.expr, indices, axis=axis), x.kind, (x.lo, x.hi))


def _below_max_rank(g, x) -> bool:
    return x.kind in _ANY and x.rank < g.cfg.max_rank


declares_draw("permute_dims", Hooks(_permute_dims, _ANY, 2, order=47))
declares_draw("expand_dims", Hooks(_expand_dims, _ANY, accepts=_below_max_rank, order=48))
declares_draw("squeeze", Hooks(_squeeze, _ANY, accepts=lambda g, x: (
    x.kind in _ANY and any(const_dim(d) == 1 for d in x.shape)), operand=_squeeze_operand,
    order=49))
declares_draw("flatten", Hooks(_flatten, _ANY, 2, order=50))
declares_draw("reshape", Hooks(_reshape, _ANY, accepts=lambda g, x: (
    x.kind in _ANY and all(const_dim(d) is not None for d in x.shape)), order=51))
declares_draw("broadcast_to", Hooks(_broadcast_to, _ANY, accepts=_below_max_rank, order=52))
declares_draw("concat", Hooks(_concat, _ANY, 1, order=53))
declares_draw("split", Hooks(_split, _ANY, accepts=_cuts, order=54))
declares_draw("strided_slice", Hooks(_strided_slice, _ANY, accepts=_cuts, order=55))
declares_draw("take", Hooks(_take, _ANY, 1, accepts=lambda g, x: (
    x.kind in _ANY and any(const_dim(d) for d in x.shape)), order=56))

"""How the generator applies each registered compute operator.

One :class:`OpGen` per operator: which first operands it accepts (kind,
rank, value interval), how it draws the rest (second operand, constants,
attributes) and the interval of its result. The table is ordered simplest
first: hypothesis shrinks choices towards index 0, so a minimal failing
program uses ``R.add`` unless the failure needs another operator.

The other operators are generated from the registry: those that declare
how they are drawn (:mod:`phasec.ir.op._draw`, read by
:mod:`phasec.testing._opdeclared`) and the elementwise ones
(:mod:`phasec.testing._opderived`: domains probed on the operator's numpy
reference); ``UNGENERATED`` lists the compute operators left out, with the
reason, and a test keeps the lists exact.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hypothesis import strategies as st

from ..ir.expr import ShapeExpr, Tuple
from ..ir.op import call_op
from ..ir.op._draw import Elementwise, draw_of
from ._values import (
    BOOL, FLOAT, INT, VALUE_CAP, Val, broadcast_ok, const_dim, dim_max, dims_equal, hull,
    iv_ok, numel_max,
)

if TYPE_CHECKING:
    from ._gen import FuncGen

__all__ = ["OpGen", "OP_GENS", "UNGENERATED", "op_names", "all_op_gens"]

Interval = tuple[float, float]


class OpGen:
    """How to generate calls of one operator (override the hooks)."""

    #: the registry name of the operator
    name = ""
    #: kinds of the first operand this op accepts
    kinds: tuple[str, ...] = (FLOAT,)
    min_rank = 0
    #: the operator's place among the simplest (hypothesis shrinks towards
    #: the first); None: after those with one
    order: int | None = None

    def accepts(self, g: "FuncGen", x: Val) -> bool:
        return x.kind in self.kinds and x.rank >= self.min_rank

    def build(self, g: "FuncGen", x: Val) -> Val | None:
        """Emit a call on first operand ``x``; its value, or None when the
        call does not suit after all (the generator tries another operator)."""
        raise NotImplementedError

    def operand(self, g: "FuncGen") -> tuple[str, tuple[int, ...]] | None:
        """The kind and (constant) shape of a first operand to make when
        nothing in scope fits: by default the first accepted kind, a rank
        from ``max(min_rank, 1)`` up, dimensions of at least 2 (so operators
        that cut, normalize or contract an axis fit)."""
        rank = g.draw(st.integers(max(self.min_rank, 1), max(g.cfg.max_rank, self.min_rank, 1)))
        top = max(g.cfg.max_dim, 2)
        return self.kinds[0], tuple(g.draw(st.integers(2, top)) for _ in range(rank))

    def adapt(self, g: "FuncGen", x: Val) -> Val | None:
        """A made operand the operator did not accept, brought into its
        domain (None: no way). By default a float becomes positive through
        ``exp`` (log, sqrt, rsqrt and power need one)."""
        if x.kind != FLOAT:
            return None
        iv = draw_of("exp").interval((x.lo, x.hi))
        if iv is None:
            return None
        return g.emit(call_op("relax.exp", x.expr), FLOAT, iv, hint="pos")


# ---------------------------------------------------------------------------
# Elementwise operators (from their registry declaration)
# ---------------------------------------------------------------------------

_KINDS = {"float32": FLOAT, "int32": INT, "bool": BOOL}


def _kinds(dtypes: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(_KINDS[d] for d in dtypes)


def elementwise_generator(name: str, spec: Elementwise) -> OpGen:
    """The generator of an operator declaring an :class:`Elementwise` draw."""
    return (Unary if spec.arity == 1 else Binary)(name, spec)


class Unary(OpGen):
    """``op(x)`` elementwise; ``iv`` maps the operand's interval (None: not safe).
    Made from the operator's :class:`~phasec.ir.op._draw.Elementwise` declaration."""

    def __init__(self, name: str, spec: Elementwise) -> None:
        self.name = name
        self.iv = spec.interval
        self.kinds = _kinds(spec.dtypes)
        self.out_kind = BOOL if spec.result == "bool" else None
        self.order = spec.order

    def accepts(self, g: "FuncGen", x: Val) -> bool:
        return x.kind in self.kinds and (x.kind == BOOL or iv_ok(self.iv((x.lo, x.hi))))

    def build(self, g: "FuncGen", x: Val) -> Val:
        kind = self.out_kind or x.kind
        iv = (0.0, 1.0) if kind == BOOL else self.iv((x.lo, x.hi))
        return g.emit(call_op(self.name, x.expr), kind, iv)


# ---------------------------------------------------------------------------
# Elementwise binary (broadcasting)
# ---------------------------------------------------------------------------

class Binary(OpGen):
    """``op(x1, x2)`` with numpy broadcasting.

    ``iv(a, b)`` gives the result interval or None when unsafe for those
    operand intervals; ``const_range(a)`` the range a constant second operand
    may be drawn from (None: no constant operand).
    """

    def __init__(self, name: str, spec: Elementwise) -> None:
        self.name = name
        self.iv = spec.interval
        self.kinds = _kinds(spec.dtypes)
        self.out_kind = BOOL if spec.result == "bool" else None
        self.const_range = spec.const_range or (lambda a: (-2.0, 2.0))
        self.order = spec.order

    def _ok(self, x: Val, y: Val) -> bool:
        if y.kind != x.kind or y.dtype != x.dtype or not broadcast_ok(x.shape, y.shape):
            return False
        return x.kind == BOOL or iv_ok(self.iv((x.lo, x.hi), (y.lo, y.hi)))

    def _const_ok(self, x: Val) -> Interval | None:
        if x.kind == BOOL:
            return None
        r = self.const_range((x.lo, x.hi))
        if r is None:
            return None
        if x.kind == INT:
            r = (math.ceil(r[0]), math.floor(r[1]))
            if r[0] > r[1]:
                return None
        return r if iv_ok(self.iv((x.lo, x.hi), r)) else None

    def accepts(self, g: "FuncGen", x: Val) -> bool:
        return x.kind in self.kinds and (self._const_ok(x) is not None or self._ok(x, x))

    def build(self, g: "FuncGen", x: Val) -> Val:
        cands: list[Any] = g.visible(lambda v: v.is_tensor and self._ok(x, v))
        crange = self._const_ok(x)
        if crange is not None and g.cfg.constants:
            cands.append("const")
        y = g.pick(cands)
        if y == "const":
            y = g.constant(g.const_shape(x), crange, x.dtype)
        kind = self.out_kind or x.kind
        iv = (0.0, 1.0) if kind == BOOL else self.iv((x.lo, x.hi), (y.lo, y.hi))
        return g.emit(call_op(self.name, x.expr, y.expr), kind, iv)


# ---------------------------------------------------------------------------
# Other elementwise-like operators
# ---------------------------------------------------------------------------

class Clip(OpGen):
    name = "relax.clip"
    _BOUNDS = ((-1.0, 1.0), (0.0, 1.0), (-0.5, 2.0), (0.0, 6.0))

    def build(self, g: "FuncGen", x: Val) -> Val:
        lo, hi = g.pick(list(self._BOUNDS))
        iv = (min(max(x.lo, lo), hi), min(max(x.hi, lo), hi))
        return g.emit(call_op(self.name, x.expr, min=lo, max=hi), FLOAT, iv)


class Where(OpGen):
    """``where(cond, x1, x2)``: the first operand is the condition."""

    name = "relax.where"
    kinds = (BOOL,)

    def accepts(self, g: "FuncGen", x: Val) -> bool:
        return x.kind == BOOL

    def build(self, g: "FuncGen", c: Val) -> Val:
        xs = g.visible(lambda v: v.kind == FLOAT and broadcast_ok(c.shape, v.shape))
        opts: list[Any] = xs + (["const"] if g.cfg.constants else [])
        if not xs:
            opts = ["const"]
        x1 = g.pick(opts)
        if x1 == "const":
            x1 = g.constant(g.const_shape(c), (-2.0, 2.0), "float32")
        ys = g.visible(lambda v: v.kind == FLOAT and broadcast_ok(c.shape, v.shape)
                       and broadcast_ok(x1.shape, v.shape))
        x2 = g.pick(ys + ["const"])
        if x2 == "const":
            x2 = g.constant((), (-2.0, 2.0), "float32")
        iv = hull((x1.lo, x1.hi), (x2.lo, x2.hi))
        return g.emit(call_op(self.name, c.expr, x1.expr, x2.expr), FLOAT, iv)


class AsType(OpGen):
    name = "relax.astype"
    kinds = (FLOAT, INT, BOOL)

    def accepts(self, g: "FuncGen", x: Val) -> bool:
        return x.kind in self.kinds

    def build(self, g: "FuncGen", x: Val) -> Val:
        if x.kind == FLOAT:
            # float -> int truncates; values are well inside int32
            target = g.pick(["int32", "float32"])
        else:
            target = "float32"
        kind = INT if target.startswith("int") else FLOAT
        iv = (math.trunc(x.lo), math.trunc(x.hi)) if kind == INT else (x.lo, x.hi)
        if x.kind == BOOL:
            iv = (0.0, 1.0)
        return g.emit(call_op(self.name, x.expr, dtype=target), kind, iv)


class Like(OpGen):
    """``zeros_like`` / ``ones_like``."""

    kinds = (FLOAT, INT)

    def __init__(self, name: str, value: float) -> None:
        self.name = name
        self.value = value

    def build(self, g: "FuncGen", x: Val) -> Val:
        return g.emit(call_op(self.name, x.expr), x.kind, (self.value, self.value))


class Fill(OpGen):
    """``zeros`` / ``ones`` / ``full`` of the shape of a value in scope."""

    kinds = (FLOAT, INT, BOOL)

    def __init__(self, name: str) -> None:
        self.name = name

    def build(self, g: "FuncGen", x: Val) -> Val:
        shape = ShapeExpr(x.shape)
        if self.name == "relax.full":
            fill = g.constant((), (-2.0, 2.0), "float32")
            return g.emit(call_op(self.name, shape, fill.expr), FLOAT, (fill.lo, fill.hi))
        value = 1.0 if self.name == "relax.ones" else 0.0
        return g.emit(call_op(self.name, shape, dtype="float32"), FLOAT, (value, value))


# ---------------------------------------------------------------------------
# Reductions, normalizations, linear algebra
# ---------------------------------------------------------------------------

class Reduce(OpGen):
    kinds = (FLOAT,)
    min_rank = 1

    def __init__(self, name: str) -> None:
        self.name = name

    def _axes(self, g: "FuncGen", x: Val) -> tuple[tuple[int, ...] | None, int]:
        options: list[Any] = [None] + [(i,) for i in range(x.rank)]
        if x.rank >= 2:
            options.append((0, x.rank - 1))
        axes = g.pick(options)
        dims = range(x.rank) if axes is None else axes
        count = math.prod(dim_max(x.shape[i], g.cfg.max_dim) for i in dims)
        return axes, count

    def _iv(self, x: Val, count: int) -> Interval | None:
        lo, hi = x.lo, x.hi
        if self.name == "relax.sum":
            return min(lo, count * lo), max(hi, count * hi)
        if self.name == "relax.prod":
            if count > 8:
                return None
            bound = max(x.mag, 1.0) ** count
            return (0.0 if lo >= 0 else -bound), bound
        return lo, hi  # mean, max, min

    def accepts(self, g: "FuncGen", x: Val) -> bool:
        if x.kind not in self.kinds or x.rank < 1:
            return False
        worst = numel_max(x.shape, g.cfg.max_dim)
        return iv_ok(self._iv(x, min(worst, 8) if self.name == "relax.prod" else worst))

    def build(self, g: "FuncGen", x: Val) -> Val:
        axes, count = self._axes(g, x)
        iv = self._iv(x, count)
        if not iv_ok(iv):  # fall back to one axis, always within bounds
            axes = (x.rank - 1,)
            iv = self._iv(x, dim_max(x.shape[-1], g.cfg.max_dim))
        keepdims = g.draw(st.booleans())
        return g.emit(call_op(self.name, x.expr, axis=axes, keepdims=keepdims), FLOAT, iv)


class Softmax(OpGen):
    kinds = (FLOAT,)
    min_rank = 1

    def __init__(self, name: str) -> None:
        self.name = name

    def build(self, g: "FuncGen", x: Val) -> Val:
        axis = g.pick(list(range(-1, -x.rank - 1, -1)))
        if self.name == "relax.nn.softmax":
            iv = (0.0, 1.0)
        else:
            n = dim_max(x.shape[axis], g.cfg.max_dim)
            iv = (-(x.hi - x.lo) - math.log(n) - 1.0, 0.0)
        return g.emit(call_op(self.name, x.expr, axis=axis), FLOAT, iv)

    def accepts(self, g: "FuncGen", x: Val) -> bool:
        return x.kind == FLOAT and x.rank >= 1 and x.hi - x.lo < 64


class Norm(OpGen):
    """layer_norm / rms_norm over the last axis (which must be constant)."""

    kinds = (FLOAT,)
    min_rank = 1

    def __init__(self, name: str) -> None:
        self.name = name

    def accepts(self, g: "FuncGen", x: Val) -> bool:
        return x.kind == FLOAT and x.rank >= 1 and const_dim(x.shape[-1]) is not None

    def build(self, g: "FuncGen", x: Val) -> Val:
        n = const_dim(x.shape[-1])
        gamma = g.constant((n,), (0.5, 1.5), "float32")
        bound = math.sqrt(n) * gamma.mag
        if self.name == "relax.nn.layer_norm":
            beta = g.constant((n,), (-1.0, 1.0), "float32")
            call = call_op(self.name, x.expr, gamma.expr, beta.expr, axes=[-1])
            bound += beta.mag
        else:
            call = call_op(self.name, x.expr, gamma.expr, axes=[-1])
        return g.emit(call, FLOAT, (-bound, bound))


class Matmul(OpGen):
    name = "relax.matmul"
    kinds = (FLOAT,)
    min_rank = 1

    def _ok(self, x: Val, y: Val, max_dim: int) -> bool:
        if y.kind != FLOAT or y.rank not in (1, 2) or x.rank + y.rank < 2:
            return False
        k = y.shape[0]
        if x.rank == 1 and y.rank == 1:
            return False  # a 0-d dot product: fine, but keep shapes simple
        return dims_equal(x.shape[-1], k) and iv_ok(self._iv(x, y, max_dim))

    @staticmethod
    def _iv(x: Val, y: Val, max_dim: int) -> Interval:
        bound = dim_max(x.shape[-1], max_dim) * x.mag * y.mag
        return -bound, bound

    def accepts(self, g: "FuncGen", x: Val) -> bool:
        if x.kind != FLOAT or x.rank < 1:
            return False
        k = const_dim(x.shape[-1])
        return (k is not None and g.cfg.constants
                and dim_max(x.shape[-1], g.cfg.max_dim) * x.mag * 1.0 <= VALUE_CAP)

    def build(self, g: "FuncGen", x: Val) -> Val:
        cands: list[Any] = g.visible(lambda v: self._ok(x, v, g.cfg.max_dim))
        cands.append("const")
        y = g.pick(cands)
        if y == "const":
            m = g.pick(list(range(1, g.cfg.max_dim + 1)))
            y = g.constant((const_dim(x.shape[-1]), m), (-1.0, 1.0), "float32")
        iv = self._iv(x, y, g.cfg.max_dim)
        return g.emit(call_op(self.name, x.expr, y.expr), FLOAT, iv)


# ---------------------------------------------------------------------------
# Shape manipulation
# ---------------------------------------------------------------------------

class PermuteDims(OpGen):
    name = "relax.permute_dims"
    kinds = (FLOAT, INT, BOOL)
    min_rank = 2

    def build(self, g: "FuncGen", x: Val) -> Val:
        perms = [p for p in itertools.permutations(range(x.rank)) if p != tuple(range(x.rank))]
        axes = g.pick([None] + perms[:6])
        return g.emit(call_op(self.name, x.expr, axes=axes), x.kind, (x.lo, x.hi))


class ExpandDims(OpGen):
    name = "relax.expand_dims"
    kinds = (FLOAT, INT, BOOL)

    def accepts(self, g: "FuncGen", x: Val) -> bool:
        return x.kind in self.kinds and x.rank < g.cfg.max_rank

    def build(self, g: "FuncGen", x: Val) -> Val:
        axis = g.pick(list(range(x.rank + 1)))
        return g.emit(call_op(self.name, x.expr, axis=axis), x.kind, (x.lo, x.hi))


class Squeeze(OpGen):
    name = "relax.squeeze"
    kinds = (FLOAT, INT, BOOL)

    def accepts(self, g: "FuncGen", x: Val) -> bool:
        return x.kind in self.kinds and any(const_dim(d) == 1 for d in x.shape)

    def operand(self, g: "FuncGen") -> tuple[str, tuple[int, ...]] | None:
        kind, shape = super().operand(g)
        axis = g.draw(st.integers(0, len(shape)))
        return kind, shape[:axis] + (1,) + shape[axis:]

    def build(self, g: "FuncGen", x: Val) -> Val:
        ones = [i for i, d in enumerate(x.shape) if const_dim(d) == 1]
        # axis=None squeezes every 1: with a symbolic dim the rank is unknown
        known = all(const_dim(d) is not None for d in x.shape)
        axis = g.pick([(i,) for i in ones] + ([None] if known else []))
        return g.emit(call_op(self.name, x.expr, axis=axis), x.kind, (x.lo, x.hi))


class Flatten(OpGen):
    name = "relax.flatten"
    kinds = (FLOAT, INT, BOOL)
    min_rank = 2

    def build(self, g: "FuncGen", x: Val) -> Val:
        return g.emit(call_op(self.name, x.expr), x.kind, (x.lo, x.hi))


def _factorizations(total: int) -> list[tuple[int, ...]]:
    out = [(total,), (1, total)]
    for a in range(2, total):
        if total % a == 0:
            out.append((a, total // a))
    return out


class Reshape(OpGen):
    name = "relax.reshape"
    kinds = (FLOAT, INT, BOOL)

    def accepts(self, g: "FuncGen", x: Val) -> bool:
        return x.kind in self.kinds and all(const_dim(d) is not None for d in x.shape)

    def build(self, g: "FuncGen", x: Val) -> Val:
        total = math.prod(const_dim(d) for d in x.shape)
        target = g.pick(_factorizations(total))
        return g.emit(call_op(self.name, x.expr, target), x.kind, (x.lo, x.hi))


class BroadcastTo(OpGen):
    name = "relax.broadcast_to"
    kinds = (FLOAT, INT, BOOL)

    def accepts(self, g: "FuncGen", x: Val) -> bool:
        return x.kind in self.kinds and x.rank < g.cfg.max_rank

    def build(self, g: "FuncGen", x: Val) -> Val:
        lead = g.pick(list(range(1, g.cfg.max_dim + 1)))
        shape = [lead] + [g.pick(list(range(1, g.cfg.max_dim + 1))) if const_dim(d) == 1 else d
                          for d in x.shape]
        return g.emit(call_op(self.name, x.expr, tuple(shape)), x.kind, (x.lo, x.hi))


class Concat(OpGen):
    name = "relax.concat"
    kinds = (FLOAT, INT, BOOL)
    min_rank = 1

    def build(self, g: "FuncGen", x: Val) -> Val:
        axis = g.pick(list(range(x.rank)))
        ys = g.visible(lambda v: v.kind == x.kind and v.dtype == x.dtype and v.rank == x.rank
                       and all(dims_equal(a, b) for i, (a, b) in enumerate(zip(x.shape, v.shape))
                               if i != axis))
        if not any(v is x for v in ys):
            ys.append(x)  # x may be a constant made to fit, not a value in scope
        y = g.pick(ys)
        iv = hull((x.lo, x.hi), (y.lo, y.hi))
        return g.emit(call_op(self.name, Tuple([x.expr, y.expr]), axis=axis), x.kind, iv)


class _Slicing(OpGen):
    """An operator that cuts along an axis of constant extent >= 2."""

    kinds = (FLOAT, INT, BOOL)

    def _axes(self, x: Val) -> list[int]:
        return [i for i, d in enumerate(x.shape) if (const_dim(d) or 0) >= 2]

    def accepts(self, g: "FuncGen", x: Val) -> bool:
        return x.kind in self.kinds and bool(self._axes(x))


class Split(_Slicing):
    name = "relax.split"

    def build(self, g: "FuncGen", x: Val) -> Val:
        axis = g.pick(self._axes(x))
        d = const_dim(x.shape[axis])
        # equal sections (an int), or split points (a list: [1] splits after index 0)
        sections = g.pick([s for s in range(2, d + 1) if d % s == 0] + [[1]])
        call = call_op(self.name, x.expr, indices_or_sections=sections, axis=axis)
        tup = g.emit_tuple(call, [x.kind] * len(call.struct_info.fields), (x.lo, x.hi))
        return g.get_item(tup, g.pick(list(range(len(tup.fields)))))


class StridedSlice(_Slicing):
    name = "relax.strided_slice"

    def build(self, g: "FuncGen", x: Val) -> Val:
        axis = g.pick(self._axes(x))
        d = const_dim(x.shape[axis])
        begin = g.pick(list(range(d - 1)))
        end = g.pick(list(range(d, begin, -1)))
        stride = g.pick([1, 2])
        call = call_op(self.name, x.expr, axes=[axis], begin=[begin], end=[end],
                       strides=[stride])
        return g.emit(call, x.kind, (x.lo, x.hi))


class Take(OpGen):
    name = "relax.take"
    kinds = (FLOAT, INT, BOOL)
    min_rank = 1

    def accepts(self, g: "FuncGen", x: Val) -> bool:
        return x.kind in self.kinds and any(const_dim(d) for d in x.shape)

    def build(self, g: "FuncGen", x: Val) -> Val:
        axis = g.pick([i for i, d in enumerate(x.shape) if const_dim(d)])
        d = const_dim(x.shape[axis])
        count = g.pick(list(range(1, g.cfg.max_dim + 1)))
        indices = g.int_constant((count,), 0, d - 1)
        return g.emit(call_op(self.name, x.expr, indices, axis=axis), x.kind, (x.lo, x.hi))


# ---------------------------------------------------------------------------
# Convolution and pooling (NCHW, rank 4)
# ---------------------------------------------------------------------------

def _nchw(g: "FuncGen") -> tuple[str, tuple[int, ...]]:
    """A small NCHW float operand for convolutions and pooling."""
    top = max(g.cfg.max_dim, 2)
    return FLOAT, (g.draw(st.integers(1, 2)), g.draw(st.integers(1, 3)),
                   g.draw(st.integers(2, top)), g.draw(st.integers(2, top)))


def _spatial_ok(x: Val) -> bool:
    return (x.kind == FLOAT and x.rank == 4 and const_dim(x.shape[1]) is not None
            and all((const_dim(d) or 0) >= 1 for d in x.shape[2:]))


class Conv2d(OpGen):
    name = "relax.nn.conv2d"
    kinds = (FLOAT,)

    def accepts(self, g: "FuncGen", x: Val) -> bool:
        return _spatial_ok(x) and const_dim(x.shape[1]) * 9 * x.mag <= VALUE_CAP

    def operand(self, g: "FuncGen") -> tuple[str, tuple[int, ...]] | None:
        return _nchw(g)

    def build(self, g: "FuncGen", x: Val) -> Val:
        c = const_dim(x.shape[1])
        h, w = const_dim(x.shape[2]), const_dim(x.shape[3])
        kh = g.pick([k for k in (1, 2, 3) if k <= h + 2])
        kw = g.pick([k for k in (1, 2, 3) if k <= w + 2])
        pad = g.pick([0, 1])
        if h + 2 * pad < kh or w + 2 * pad < kw:
            kh = kw = 1
        out = g.pick(list(range(1, g.cfg.max_dim + 1)))
        weight = g.constant((out, c, kh, kw), (-1.0, 1.0), "float32")
        call = call_op(self.name, x.expr, weight.expr, padding=pad)
        bound = c * kh * kw * x.mag * weight.mag
        return g.emit(call, FLOAT, (-bound, bound))


class Pool2d(OpGen):
    kinds = (FLOAT,)

    def __init__(self, name: str) -> None:
        self.name = name

    def accepts(self, g: "FuncGen", x: Val) -> bool:
        return _spatial_ok(x)

    def operand(self, g: "FuncGen") -> tuple[str, tuple[int, ...]] | None:
        return _nchw(g)

    def build(self, g: "FuncGen", x: Val) -> Val:
        h, w = const_dim(x.shape[2]), const_dim(x.shape[3])
        size = g.pick([s for s in (1, 2) if s <= min(h, w)])
        stride = g.pick([1, 2])
        call = call_op(self.name, x.expr, pool_size=(size, size), strides=(stride, stride))
        lo, hi = x.lo, x.hi
        return g.emit(call, FLOAT, (lo, hi))


# ---------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------

#: The operators whose generator is written here, by their place among the
#: simplest (see OpGen.order; the elementwise ones declare theirs in the
#: registry, between these).
OP_GENS: dict[int, OpGen] = {
    10: Matmul(),
    11: Reduce("relax.sum"),
    25: Clip(),
    37: Where(),
    38: AsType(),
    39: Reduce("relax.mean"),
    40: Reduce("relax.max"),
    41: Reduce("relax.min"),
    42: Reduce("relax.prod"),
    43: Softmax("relax.nn.softmax"),
    44: Softmax("relax.nn.log_softmax"),
    45: Norm("relax.nn.layer_norm"),
    46: Norm("relax.nn.rms_norm"),
    47: PermuteDims(),
    48: ExpandDims(),
    49: Squeeze(),
    50: Flatten(),
    51: Reshape(),
    52: BroadcastTo(),
    53: Concat(),
    54: Split(),
    55: StridedSlice(),
    56: Take(),
    57: Like("relax.zeros_like", 0.0),
    58: Like("relax.ones_like", 1.0),
    59: Fill("relax.zeros"),
    60: Fill("relax.ones"),
    61: Fill("relax.full"),
    62: Conv2d(),
    63: Pool2d("relax.nn.max_pool2d"),
    64: Pool2d("relax.nn.avg_pool2d"),
}
for _order, _gen in OP_GENS.items():
    _gen.order = _order

#: Compute operators the generator never emits, and why: none. Every
#: registered compute operator is drawn, from this table, from its draw
#: declaration in the registry (:mod:`phasec.ir.op._draw`) or from its
#: elementwise reference (:mod:`phasec.testing._opderived`); an operator that
#: cannot be drawn goes here with the reason (a test keeps the list exact).
UNGENERATED: dict[str, str] = {}


def all_op_gens() -> list[OpGen]:
    """Every generator: those with a place among the simplest (``order``:
    this module's table and the registry declarations that give one) in that
    order, then the other operators that declare how they are drawn
    (:mod:`phasec.testing._opdeclared`, in registry order), then the
    elementwise operators found by probing their numpy reference
    (:mod:`phasec.testing._opderived`)."""
    from ._opdeclared import declared_generators
    from ._opderived import derived_generators

    table = {g.name for g in OP_GENS.values()}
    declared = declared_generators(table)
    ranked = sorted([*OP_GENS.values(), *(g for g in declared if g.order is not None)],
                    key=lambda g: g.order)
    orders = [g.order for g in ranked]
    if len(set(orders)) != len(orders):
        raise ValueError(f"two operators declare the same draw order: {orders}")
    return [*ranked, *(g for g in declared if g.order is None),
            *derived_generators(table | {g.name for g in declared})]


def op_names() -> list[str]:
    """The operators the generator can emit, in the generator's order."""
    return [g.name for g in all_op_gens()]

"""The generator's generic operator machinery; the table is :mod:`._optable`.

One :class:`OpGen` per registered compute operator: which first operands it
accepts (kind, rank, value interval), how it draws the rest (second operand,
constants, attributes) and the interval of its result. Every one is made
from what the registry holds (issue 13): the operator's draw declaration
beside its definition (:mod:`phasec.op._draw`: an ``Elementwise``
interval rule, read here by :class:`Unary`/:class:`Binary`; ``Hooks`` run on
the generator, :class:`Hooked`; a ``Draw`` of operand domains, read by
:mod:`phasec.testing._opdeclared`), or for an undeclared elementwise
operator its numpy reference, probed (:mod:`phasec.testing._opderived`).

Declarations may give an ``order``: hypothesis shrinks choices towards the
first generator, so a minimal failing program uses ``R.add`` (order 0)
unless the failure needs another operator.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from hypothesis import strategies as st

from phasec.op import call_op
from phasec.testing._values import (
    BOOL, FLOAT, INT, KINDS, Elementwise, Hooks, Val, broadcast_ok, draw_of, iv_ok,
)

if TYPE_CHECKING:
    from phasec.testing._gen import FuncGen

__all__ = ["OpGen", "Unary", "Binary", "Hooked", "elementwise_generator"]

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

def _kinds(dtypes: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(KINDS[d] for d in dtypes)


def elementwise_generator(name: str, spec: Elementwise) -> OpGen:
    """The generator of an operator declaring an :class:`Elementwise` draw."""
    return (Unary if spec.arity == 1 else Binary)(name, spec)


class Hooked(OpGen):
    """An operator declaring :class:`~phasec.op._draw.Hooks`: the hooks
    run on the generator itself."""

    def __init__(self, name: str, spec: Hooks) -> None:
        self.name = name
        self.spec = spec
        self.kinds = spec.kinds
        self.min_rank = spec.min_rank
        self.order = spec.order

    def accepts(self, g: "FuncGen", x: Val) -> bool:
        if self.spec.accepts is None:
            return super().accepts(g, x)
        return self.spec.accepts(g, x)

    def operand(self, g: "FuncGen") -> tuple[str, tuple[int, ...]] | None:
        if self.spec.operand is None:
            return super().operand(g)
        return self.spec.operand(g)

    def build(self, g: "FuncGen", x: Val) -> Val | None:
        return self.spec.build(g, x)


class Unary(OpGen):
    """``op(x)`` elementwise; ``iv`` maps the operand's interval (None: not safe).
    Made from the operator's :class:`~phasec.op._draw.Elementwise` declaration."""

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

    def build(self, g: "FuncGen", x: Val) -> Val | None:
        cands: list[Any] = g.visible(lambda v: v.is_tensor and self._ok(x, v))
        crange = self._const_ok(x)
        if g.cfg.swarm:
            # distinct operands: a rewrite of ``x - x`` (a swap) would not show
            others = [v for v in cands if v is not x]
            if others or (crange is not None and g.cfg.constants):
                cands = others
            else:
                fresh = g.fresh_param(x.kind, tuple(x.shape))
                if fresh is not None and self._ok(x, fresh):
                    cands = [fresh]
        if crange is not None and g.cfg.constants:
            cands.append("const")
        if not cands:
            return None  # constants are off and nothing else fits
        y = g.pick(cands)
        if y == "const":
            y = g.constant(g.const_shape(x), crange, x.dtype)
        kind = self.out_kind or x.kind
        iv = (0.0, 1.0) if kind == BOOL else self.iv((x.lo, x.hi), (y.lo, y.hi))
        return g.emit(call_op(self.name, x.expr, y.expr), kind, iv)

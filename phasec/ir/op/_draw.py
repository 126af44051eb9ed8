"""What an operator declares about its operands for random program generation.

The fuzzing generator (:mod:`phasec.testing`) draws every registered compute
operator. For an operator whose operands need more than "a tensor in scope"
(an axis in range, an index tensor whose values fit the indexed dimension, a
weight whose channels match the data, a scalar prim value...), its family
module declares a :class:`Draw` beside the definition with
:func:`declares_draw`: the dtypes and ranks of the first operand, and a
``build`` function that, given the first operand's (static) shape, draws the
other operands and the attributes from their domains. The generator reads
only this declaration and the registry entry (no table of its own), and
checks the declaration against the operator's inference when it builds the
call.

``build(ctx)`` receives a :class:`DrawContext` and returns ``(operands,
attrs)`` or None (not applicable to this shape). ``operands[i]`` is
``ctx.x`` (the first operand), a numpy array (made an inline constant; draw
it with ``ctx.const``/``ctx.indices`` so its interval is known), a tuple of
ints (a shape), a tuple of operands (a Relax tuple) or any Relax expression
(``PrimValue``...). ``out`` gives an interval holding every element of the
result (a tuple result: of every field) for inputs in the operands'
intervals: ``"same"`` (the hull of the tensor operands' intervals, for data
movement, selection and averaging), ``"index"`` (``[0, max(shape)]``, for
positions and counts), ``"bool"``, or ``fn(ctx) -> (lo, hi)``.

An elementwise operator declares an :class:`Elementwise` instead: a rule
mapping its operands' value intervals to one holding the result (interval
arithmetic, None where the operator is unsafe: a pole, an overflow), the
operand dtypes, and for a binary operator the range a constant second
operand may be drawn from. ``order`` places an operator among the simplest:
hypothesis shrinks a choice towards the first one, so a minimal failing
program calls ``R.add`` (order 0) unless the failure needs another operator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Draw", "DrawContext", "Elementwise", "declares_draw", "draw_of", "DRAWS",
           "data_like", "FLOATS", "NUMBERS", "ANY_DTYPE", "Interval", "monotone", "corners"]

Interval = tuple[float, float]

FLOATS = ("float32",)
NUMBERS = ("float32", "int32")
ANY_DTYPE = ("float32", "int32", "bool")


class DrawContext(Protocol):
    """What ``Draw.build`` may read and draw (implemented by phasec.testing)."""

    x: Any                      # the first operand (put it in ``operands``)
    shape: tuple[int, ...]      # its static shape
    dtype: str                  # its dtype
    lo: float                   # an interval holding its elements
    hi: float

    @property
    def mag(self) -> float: ...

    def choose(self, options: Sequence[Any]) -> Any: ...

    def integers(self, lo: int, hi: int) -> int: ...

    def const(self, shape: Sequence[int], lo: float, hi: float, dtype: str = "float32"
              ) -> Any: ...

    def indices(self, shape: Sequence[int], high: int, low: int = 0) -> Any: ...

    def hull(self) -> tuple[float, float]: ...

    def include(self, lo: float, hi: float) -> None:
        """Widen the "same" result interval (a pad value, a running sum...)."""

    def result_in(self, lo: float, hi: float) -> None:
        """Fix the result interval whatever ``out`` says (positions, norms...)."""


@dataclass(frozen=True)
class Draw:
    """How to call an operator in a generated program (see the module docstring).

    Attributes:
        build: ``build(ctx) -> (operands, attrs) | None``.
        dtypes: dtypes of the first operand.
        ranks: ranks of the first operand.
        out: the result interval rule.
        shape: ``shape(ctx_choose) -> tuple`` a first operand to make when none
            in scope fits (default: a rank of ``ranks``, dimensions 2..max).
        fits: ``fits(shape) -> bool``: extra conditions on the first operand.
        impure: the call has side effects (it goes only where an impure call
            may: an impure function, outside dataflow blocks).
        static: the first operand needs a fully static shape.
        order: the operator's place among the simplest (see the module
            docstring); None: after those that have one.
    """

    build: Callable[[DrawContext], tuple[Sequence[Any], Mapping[str, Any]] | None]
    dtypes: tuple[str, ...] = FLOATS
    ranks: tuple[int, ...] = (1, 2, 3, 4)
    out: str | Callable[[DrawContext], tuple[float, float] | None] = "same"
    shape: Callable[[Callable[[Sequence[Any]], Any]], tuple[int, ...]] | None = None
    fits: Callable[[tuple[int, ...]], bool] | None = None
    impure: bool = False
    static: bool = True
    order: int | None = None


@dataclass(frozen=True)
class Elementwise:
    """How to call an elementwise operator (see the module docstring).

    Attributes:
        interval: ``interval(a)`` (unary) or ``interval(a, b)`` (binary): an
            interval holding every result for operands in intervals ``a``
            (and ``b``), or None when the operator is unsafe there.
        arity: 1 or 2 (a binary operator broadcasts its operands).
        dtypes: dtypes of the operands (both of a binary operator alike).
        result: ``"bool"`` for a bool result (comparisons, logic), None for
            the operands' dtype.
        const_range: ``const_range(a) -> (lo, hi)``: the values a constant
            second operand may take beside a first in ``a`` (binary only;
            default ``(-2, 2)``; None from the function: no constant).
        order: as :attr:`Draw.order`.
    """

    interval: Callable[..., Interval | None]
    arity: int = 1
    dtypes: tuple[str, ...] = FLOATS
    result: str | None = None
    const_range: Callable[[Interval], Interval | None] | None = None
    order: int | None = None


def monotone(f: Callable[[float], float]) -> Callable[[Interval], Interval | None]:
    """The interval rule of an increasing function (None where it overflows)."""
    def rule(iv: Interval) -> Interval | None:
        try:
            return f(iv[0]), f(iv[1])
        except (OverflowError, ValueError, ZeroDivisionError):
            return None
    return rule


def corners(f: Callable[[float, float], float]) -> Callable[[Interval, Interval],
                                                            Interval | None]:
    """The interval rule of a binary function monotonic in each operand: the
    hull of its values at the corners (None where it overflows)."""
    def rule(a: Interval, b: Interval) -> Interval | None:
        try:
            vals = [f(x, y) for x in a for y in b]
        except (OverflowError, ZeroDivisionError, ValueError):
            return None
        return min(vals), max(vals)
    return rule


#: op name -> its draw declaration
DRAWS: dict[str, Draw | Elementwise] = {}


def declares_draw(name: str, draw: Draw | Elementwise | None = None, **kw: Any
                  ) -> Draw | Elementwise:
    """Declare how ``relax.<name>`` is drawn: ``declares_draw("flip", build=...)``."""
    spec = draw if draw is not None else Draw(**kw)
    full = "relax." + name
    if full in DRAWS:
        raise ValueError(f"operator {full!r} already declares how it is drawn")
    DRAWS[full] = spec
    return spec


def draw_of(name: str) -> Draw | Elementwise | None:
    """The draw declaration of ``relax.<name>`` (or the full name), or None."""
    return DRAWS.get(name if name.startswith("relax.") else "relax." + name)


def data_like(ctx: DrawContext, shape: Sequence[int], dtype: str | None = None) -> Any:
    """A constant of ``shape`` in the first operand's dtype (or ``dtype``),
    with values in the generator's input ranges."""
    dtype = dtype or ctx.dtype
    if dtype == "bool":
        return ctx.const(shape, 0, 1, "bool")
    if dtype.startswith(("int", "uint")):
        return ctx.const(shape, -3, 3, dtype)
    return ctx.const(shape, -2.0, 2.0, dtype)

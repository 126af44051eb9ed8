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
operand may be drawn from.

An operator whose draw picks among the values in scope or controls what is
bound (matmul's second operand, a where's branches, split's tuple...)
declares :class:`Hooks` instead: ``build(gen, x)`` and optional
``accepts(gen, x)`` / ``operand(gen)`` written against the generator's
interface (:class:`GenContext`, implemented by :mod:`phasec.testing`) and
its values (:class:`Value`: an expression, a kind among :data:`KINDS` and
an interval holding its elements). The value helpers below (dimension
bounds, broadcasting, intervals) are the generator's, shared with it.

Any declaration may give an ``order``, the operator's place among the
simplest: hypothesis shrinks a choice towards the first one, so a minimal
failing program calls ``R.add`` (order 0) unless the failure needs another
operator; operators without one come after, in registry order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from phasec.ir import tir

__all__ = ["Draw", "DrawContext", "Elementwise", "Hooks", "GenContext", "Value", "declares_draw",
           "draw_of", "DRAWS", "data_like", "FLOATS", "NUMBERS", "ANY_DTYPE", "Interval",
           "monotone", "corners", "FLOAT", "INT", "BOOL", "TUPLE", "FUNC", "OPAQUE", "KINDS",
           "VALUE_CAP", "const_dim", "dim_max", "dims_equal", "shapes_equal", "broadcast_ok",
           "numel_max", "hull", "within", "iv_ok", "nchw_operand", "spatial_ok", "cut_axes"]

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


# ---------------------------------------------------------------------------
# The generator's values
# ---------------------------------------------------------------------------

#: kinds of generated values: float, int and bool tensors, tuples, functions
FLOAT, INT, BOOL, TUPLE, FUNC = "f", "i", "b", "t", "fn"
#: a tensor whose shape is not known statically: never used as an operand
OPAQUE = "o"
#: the tensor kinds by dtype
KINDS = {"float32": FLOAT, "int32": INT, "bool": BOOL}
#: No generated value may exceed this magnitude: float32 results then agree
#: with any correct evaluation order to well within the comparison tolerance.
VALUE_CAP = 256.0


def const_dim(d: Any) -> int | None:
    """The value of a constant dimension, or None for a symbolic one."""
    return d.value if type(d) is tir.IntImm else None


def dim_max(d: Any, max_dim: int) -> int:
    """An upper bound of a dimension (symbolic variables are at most ``max_dim``)."""
    t = type(d)
    if t is tir.IntImm:
        return d.value
    if t is tir.Var:
        return max_dim
    if t is tir.BinaryOp and d.op in ("+", "*"):
        a, b = dim_max(d.lhs, max_dim), dim_max(d.rhs, max_dim)
        return a + b if d.op == "+" else a * b
    return max_dim * max_dim


def dims_equal(a: Any, b: Any) -> bool:
    """Provably equal dimensions: the same constant, the same symbolic
    variable (by identity: ``n`` of one function is not ``n`` of another),
    or the same expression over them."""
    if a is b:
        return True
    ta = type(a)
    if ta is not type(b):
        return False
    if ta is tir.IntImm:
        return a.value == b.value
    if ta is tir.BinaryOp:
        return a.op == b.op and dims_equal(a.lhs, b.lhs) and dims_equal(a.rhs, b.rhs)
    return False


def cut_axes(x: Any) -> list[int]:
    """The axes of a value with a constant extent of 2 or more (where an
    operator may cut it: split, strided_slice)."""
    return [i for i, d in enumerate(x.shape) if (const_dim(d) or 0) >= 2]


def shapes_equal(s1: Sequence[Any], s2: Sequence[Any]) -> bool:
    return len(s1) == len(s2) and all(dims_equal(a, b) for a, b in zip(s1, s2))


def broadcast_ok(s1: Sequence[Any], s2: Sequence[Any]) -> bool:
    """numpy broadcasting, where symbolic dims only match themselves or 1."""
    for a, b in zip(reversed(s1), reversed(s2)):
        if not (dims_equal(a, b) or const_dim(a) == 1 or const_dim(b) == 1):
            return False
    return True


def numel_max(shape: Sequence[Any], max_dim: int) -> int:
    return math.prod(dim_max(d, max_dim) for d in shape)


def hull(*ivs: tuple[float, float]) -> tuple[float, float]:
    return min(i[0] for i in ivs), max(i[1] for i in ivs)


def within(inner: tuple[float, float], outer: tuple[float, float]) -> bool:
    return outer[0] <= inner[0] and inner[1] <= outer[1]


def iv_ok(iv: tuple[float, float] | None) -> bool:
    """An interval of finite values no larger than :data:`VALUE_CAP`."""
    return (iv is not None and all(math.isfinite(v) for v in iv)
            and -VALUE_CAP <= iv[0] <= iv[1] <= VALUE_CAP)


def nchw_operand(g: Any) -> tuple[str, tuple[int, ...]]:
    """A small NCHW float operand for convolutions and pooling (a ``Hooks.operand``)."""
    top = max(g.cfg.max_dim, 2)
    return FLOAT, (g.integers(1, 2), g.integers(1, 3), g.integers(2, top), g.integers(2, top))


def spatial_ok(x: Any) -> bool:
    """A float NCHW value with constant channels and spatial extents >= 1."""
    return (x.kind == FLOAT and x.rank == 4 and const_dim(x.shape[1]) is not None
            and all((const_dim(d) or 0) >= 1 for d in x.shape[2:]))


class Value(Protocol):
    """A value in scope for the generator (phasec.testing's ``Val``)."""

    expr: Any           # a Var or a Constant
    kind: str           # FLOAT, INT, BOOL, ...
    lo: float           # every element lies in [lo, hi]
    hi: float

    @property
    def shape(self) -> tuple: ...

    @property
    def rank(self) -> int: ...

    @property
    def dtype(self) -> str: ...

    @property
    def mag(self) -> float: ...

    @property
    def is_tensor(self) -> bool: ...


class GenConfigView(Protocol):
    max_rank: int
    max_dim: int
    constants: bool     # inline constants may be drawn


class GenContext(Protocol):
    """The generator, as :class:`Hooks` see it (phasec.testing's ``FuncGen``)."""

    cfg: GenConfigView

    def pick(self, items: Sequence[Any]) -> Any: ...

    def integers(self, lo: int, hi: int) -> int: ...

    def boolean(self) -> bool: ...

    def visible(self, pred: Callable[[Any], bool] = ...) -> list[Any]:
        """The values in scope (Values) satisfying ``pred``."""

    def const_shape(self, x: Any) -> tuple:
        """A shape for a constant operand beside ``x``: (), its last dimension or its shape."""

    def constant(self, shape: Sequence[int], rng: tuple[float, float], dtype: str) -> Any:
        """An inline constant (a Value) with elements drawn from ``rng``."""

    def int_constant(self, shape: Sequence[int], lo: int, hi: int) -> Any:
        """An int64 inline constant (an expression) with elements in [lo, hi]."""

    def emit(self, value: Any, kind: str, iv: tuple[float, float] | None) -> Any:
        """Bind ``value`` (a call) to a fresh variable: its Value."""

    def emit_tuple(self, value: Any, kinds: Sequence[str], iv: tuple[float, float]) -> Any: ...

    def get_item(self, tup: Any, index: int) -> Any: ...


@dataclass(frozen=True)
class Hooks:
    """How to call an operator whose draw needs the generator itself (see the
    module docstring).

    Attributes:
        build: ``build(gen, x)``: emit a call on first operand ``x``; its
            Value, or None when it does not suit after all.
        kinds: kinds of the first operand.
        min_rank: its least rank.
        accepts: ``accepts(gen, x) -> bool`` (default: kind and rank).
        operand: ``operand(gen) -> (kind, shape) | None``: a first operand to
            make when none in scope fits (default: the first kind, a rank
            from ``max(min_rank, 1)``, dimensions 2..max).
        order: as :attr:`Draw.order`.
    """

    build: Callable[[Any, Any], Any]
    kinds: tuple[str, ...] = (FLOAT,)
    min_rank: int = 0
    accepts: Callable[[Any, Any], bool] | None = None
    operand: Callable[[Any], tuple[str, tuple[int, ...]] | None] | None = None
    order: int | None = None


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
DRAWS: dict[str, Draw | Elementwise | Hooks] = {}


def declares_draw(name: str, draw: Draw | Elementwise | Hooks | None = None, **kw: Any
                  ) -> Draw | Elementwise | Hooks:
    """Declare how ``relax.<name>`` is drawn: ``declares_draw("flip", build=...)``."""
    spec = draw if draw is not None else Draw(**kw)
    full = "relax." + name
    if full in DRAWS:
        raise ValueError(f"operator {full!r} already declares how it is drawn")
    DRAWS[full] = spec
    return spec


def draw_of(name: str) -> Draw | Elementwise | Hooks | None:
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

"""Building tensor expressions: tensors (:func:`placeholder`, :func:`compute`,
:func:`extern`), reductions (:func:`reduce_axis`, :func:`sum`...) and the
scalar expressions of a compute body.

Arithmetic is written with Python's operators (``y * Wp + x``, ``p // s``,
``p % s``: :class:`~phasec.ir.tir.PrimExpr` overloads them, a Python int
becoming a constant of the other operand's dtype). What the operators cannot
say has a function here: comparisons (``==`` is node identity, and ``<``
is not defined on IR nodes), conjunctions, ``select``, the binary
``maximum``/``minimum`` (``max``/``min`` are reductions, as in TVM).
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from phasec import arith
from phasec.ir import tir
from phasec.ir.tir import (
    BinaryOp, Buffer, Cast, FloatImm, IntImm, IterVar, PrimExpr, Select, Stmt, Var,
)
from phasec.te.tensor import (
    ComputeOp, ExternOp, PlaceholderOp, ProducerLoad, Reduce, STORE_THROUGH, TEError, Tensor,
    View,
    post_order,
)

__all__ = [
    "placeholder", "compute", "extern", "reduce_axis", "sum", "prod", "max", "min", "fast_max",
    "const", "i64", "cast", "call", "select", "max_value", "min_value",
    "lt", "le", "gt", "ge", "eq", "ne", "all_of", "in_range", "maximum", "minimum",
    "clamp_index", "row_col",
]


# --------------------------------------------------------------------------
# Scalar expressions
# --------------------------------------------------------------------------


def const(value: Any, dtype: str) -> PrimExpr:
    """A scalar constant of ``dtype``."""
    if tir.is_bool(dtype):
        return IntImm(int(bool(value)), "bool")
    if tir.is_int(dtype):
        return IntImm(int(value), dtype)
    return FloatImm(float(value), dtype)


def i64(value: int) -> IntImm:
    """The int64 constant ``value`` (the dtype of indices and extents)."""
    return IntImm(int(value), "int64")


def cast(value: PrimExpr, dtype: str) -> PrimExpr:
    """``value`` converted to ``dtype`` (no node when already of that dtype)."""
    value = tir.as_prim_expr(value)
    return value if value.dtype == dtype else Cast(dtype, value)


def call(name: str, *args: PrimExpr) -> PrimExpr:
    """A math intrinsic ``T.<name>(args)`` (a key of ``tir.INTRINSICS``)."""
    if name not in tir.INTRINSICS:
        raise TEError(f"unknown TIR intrinsic {name!r}")
    return tir.Call(name, tuple(tir.as_prim_expr(a) for a in args))


def select(cond: PrimExpr, true_value: PrimExpr, false_value: PrimExpr) -> PrimExpr:
    """``true_value if cond else false_value``."""
    t = tir.as_prim_expr(true_value)
    f = tir.as_prim_expr(false_value, t.dtype)
    return Select(tir.as_prim_expr(cond), t, f)


def max_value(dtype: str) -> PrimExpr:
    """The largest value of ``dtype`` (+inf for floats)."""
    if tir.is_bool(dtype):
        return IntImm(1, "bool")
    if tir.is_int(dtype):
        return IntImm(int(np.iinfo(dtype).max), dtype)
    return FloatImm(float("inf"), dtype)


def min_value(dtype: str) -> PrimExpr:
    """The smallest value of ``dtype`` (-inf for floats)."""
    if tir.is_bool(dtype):
        return IntImm(0, "bool")
    if tir.is_int(dtype):
        return IntImm(int(np.iinfo(dtype).min), dtype)
    return FloatImm(float("-inf"), dtype)


def _operands(a: Any, b: Any) -> tuple[PrimExpr, PrimExpr]:
    """Both operands as expressions, a Python number taking the other's
    dtype (as the arithmetic operators of PrimExpr do)."""
    if isinstance(a, PrimExpr):
        return a, tir.as_prim_expr(b, a.dtype)
    rhs = tir.as_prim_expr(b)
    return tir.as_prim_expr(a, rhs.dtype), rhs


def lt(a: Any, b: Any) -> PrimExpr:
    """``a < b``."""
    return BinaryOp("<", *_operands(a, b))


def le(a: Any, b: Any) -> PrimExpr:
    """``a <= b``."""
    return BinaryOp("<=", *_operands(a, b))


def gt(a: Any, b: Any) -> PrimExpr:
    """``a > b``."""
    return BinaryOp(">", *_operands(a, b))


def ge(a: Any, b: Any) -> PrimExpr:
    """``a >= b``."""
    return BinaryOp(">=", *_operands(a, b))


def eq(a: Any, b: Any) -> PrimExpr:
    """``a == b`` (the value test; ``==`` on nodes is identity)."""
    return BinaryOp("==", *_operands(a, b))


def ne(a: Any, b: Any) -> PrimExpr:
    """``a != b`` (true for a NaN against itself)."""
    return BinaryOp("!=", *_operands(a, b))


def all_of(first: PrimExpr, *rest: PrimExpr) -> PrimExpr:
    """``first and rest[0] and ...``, grouped from the left."""
    cond = first
    for c in rest:
        cond = BinaryOp("and", cond, c)
    return cond


def in_range(x: PrimExpr, lo: Any, hi: Any) -> PrimExpr:
    """``lo <= x < hi`` (written ``x >= lo and x < hi``)."""
    return all_of(ge(x, lo), lt(x, hi))


def maximum(a: Any, b: Any) -> PrimExpr:
    """The larger of ``a`` and ``b`` (TIR's binary ``max``)."""
    return BinaryOp("max", *_operands(a, b))


def minimum(a: Any, b: Any) -> PrimExpr:
    """The smaller of ``a`` and ``b`` (TIR's binary ``min``)."""
    return BinaryOp("min", *_operands(a, b))


def clamp_index(i: PrimExpr, extent: PrimExpr) -> PrimExpr:
    """``i`` clamped to ``[0, extent - 1]``, so that a load stays in bounds
    when a ``select`` evaluates both of its branches."""
    return maximum(minimum(i, arith.simplify(extent - 1)), 0)


def row_col(q: PrimExpr, width: int) -> tuple[PrimExpr, PrimExpr]:
    """``(q // width, q % width)`` of a non-negative int64 flat index ``q``,
    divided unsigned: LLVM's scalar evolution sees ``(q /u W) * W + q %u W``
    in a row-major address as ``q`` (contiguous lanes where ``q`` grows by
    one a lane, not gathers); the floor division of signed values it cannot."""
    u, w = Cast("uint64", q), IntImm(width, "uint64")
    return (Cast("int64", BinaryOp("//", u, w, "uint64")),
            Cast("int64", BinaryOp("%", u, w, "uint64")))


# --------------------------------------------------------------------------
# Tensors
# --------------------------------------------------------------------------


def _as_dim(d: Any) -> PrimExpr:
    if isinstance(d, (int, np.integer)) and not isinstance(d, bool):
        if int(d) < 0:
            raise TEError(f"negative dimension {int(d)}")
        return IntImm(int(d), "int64")
    if isinstance(d, IntImm):
        return d if d.dtype == "int64" else IntImm(d.value, "int64")
    if isinstance(d, PrimExpr) and tir.is_int(d.dtype):
        return d if d.dtype == "int64" else Cast("int64", d)
    raise TEError(f"a dimension must be an integer or an integer TIR expression, got {d!r}")


def placeholder(shape: Sequence[Any], dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of the given shape (ints or int64 ``tir.Var``s) and dtype."""
    if dtype not in tir.DTYPES:
        raise TEError(f"unknown dtype {dtype!r} for placeholder {name}")
    return Tensor(tuple(_as_dim(s) for s in shape), dtype, name, PlaceholderOp())


def compute(shape: Sequence[Any], fcompute: Callable[..., Any], name: str = "compute",
            tag: str = "", inline: bool | None = None,
            attrs: Mapping[str, Any] | None = None) -> Tensor:
    """A tensor whose element at ``indices`` is ``fcompute(*indices)``.

    ``indices`` are int64 ``tir.Var``s named after ``fcompute``'s parameters.
    ``inline`` forces (True) or forbids (False) inlining into consumers;
    None inlines injective computes that are not kernel outputs. ``tag``
    names the kind of computation for scheduling (e.g. ``"matmul"``).
    """
    dims = tuple(_as_dim(s) for s in shape)
    names = _param_names(fcompute, len(dims))
    axes = tuple(Var(n, "int64") for n in names)
    body = fcompute(*axes)
    if isinstance(body, (int, float, bool, np.generic)):
        body = tir.as_prim_expr(body)
    if not isinstance(body, PrimExpr):
        raise TEError(f"compute {name}: fcompute must return a scalar expression, "
                      f"got {type(body).__name__}")
    if isinstance(body, Reduce) and inline:
        raise TEError(f"compute {name}: a reduction cannot be inlined")
    inputs = _collect_inputs(body, name)
    op = ComputeOp(axes, body, inline, tag, attrs or {}, inputs)
    return Tensor(dims, body.dtype, name, op)


def view(source: Tensor, shape: Sequence[Any], index: Callable[..., ProducerLoad],
         name: str = "view") -> View:
    """``source`` seen in ``shape``: element ``idx`` is the load
    ``index(*idx)`` of ``source``, substituted wherever the view is indexed
    (:class:`~phasec.te.tensor.View`: nothing is computed or moved)."""
    equivalent = compute(shape, index, name=name)
    return View(source, index, equivalent.op, equivalent.shape, name)


def extern(shape: Sequence[Any], dtype: str, inputs: Sequence[Tensor],
           builder: Callable[[list[Buffer], Buffer], Stmt], name: str = "extern",
           store_through: Callable[[list[Buffer], Buffer, Callable[[PrimExpr, tuple[PrimExpr, ...]],
                                                                   Stmt]], Stmt] | None = None
           ) -> Tensor:
    """A tensor computed by a hand-written TIR statement (TVM's ``te.extern``).

    ``builder(input_buffers, output_buffer)`` returns the statement that
    writes every element of ``output_buffer``; it is called once when the
    kernel is generated, with one buffer per tensor of ``inputs`` (computed
    inputs are materialized into buffers first). For what a loop nest of
    elementwise expressions cannot say: scans (cumsum), scatters, sorts.
    The statement must index the buffers with their own ``shape`` (symbolic
    dimensions are already those of the kernel) and create fresh loop
    variables. The tensor is never inlined or attached to a consumer's nest.
    ``store_through`` (optional): the same statement with every element
    stored by ``store(value, indices)``, which the lowering uses to apply
    the tensor's one elementwise consumer before the store
    (:data:`~phasec.te.tensor.STORE_THROUGH`); it must never read ``out``
    back, and must store each element once or always with the same value.
    """
    if dtype not in tir.DTYPES:
        raise TEError(f"unknown dtype {dtype!r} for extern {name}")
    for t in inputs:
        if not isinstance(t, Tensor):
            raise TEError(f"extern {name}: inputs must be te.Tensors, got {type(t).__name__}")
    op = ExternOp(tuple(inputs), builder)
    if store_through is not None:
        op.attrs[STORE_THROUGH] = store_through
    return Tensor(tuple(_as_dim(s) for s in shape), dtype, name, op)


def _param_names(fcompute: Callable[..., Any], n: int) -> list[str]:
    # A plain function's parameters come straight from its code object
    # (inspect.signature costs tens of microseconds, and a long program
    # makes one compute per operator call).
    code = getattr(fcompute, "__code__", None)
    if (type(fcompute) is types.FunctionType and code is not None
            and not hasattr(fcompute, "__wrapped__") and not hasattr(fcompute, "__signature__")):
        plain = not code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
        if plain and not code.co_kwonlyargcount and code.co_argcount == n:
            return list(code.co_varnames[:n])
        return [f"i{d}" for d in range(n)]
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        params = []
    if len(params) == n and all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                                for p in params):
        return [p.name for p in params]
    return [f"i{d}" for d in range(n)]


def _collect_inputs(body: PrimExpr, name: str) -> tuple[Tensor, ...]:
    inputs: list[Tensor] = []
    seen: set[int] = set()
    for e in post_order([body]):
        if isinstance(e, Reduce) and e is not body:
            raise TEError(f"compute {name}: a reduction (te.sum/max/min/prod) must be the whole "
                          "body of a compute; compute the reduction first, then use it")
        if isinstance(e, ProducerLoad) and id(e.tensor) not in seen:
            seen.add(id(e.tensor))
            inputs.append(e.tensor)
    return tuple(inputs)


# --------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------


def reduce_axis(extent: Any, name: str = "k") -> IterVar:
    """A reduction axis ranging over ``[0, extent)``; index tensors with it directly."""
    return IterVar(Var(name, "int64"), _as_dim(extent), "R")


def _reducer(combiner: str) -> Callable[..., Reduce]:
    def reduce(expr: PrimExpr, axis: Sequence[IterVar] | IterVar, init: Any = None) -> Reduce:
        source = tir.as_prim_expr(expr)
        axes = (axis,) if isinstance(axis, IterVar) else tuple(axis)
        if not axes:
            raise TEError(f"te.{combiner} needs at least one reduction axis")
        for a in axes:
            if not isinstance(a, IterVar) or a.kind != "R":
                raise TEError(f"te.{combiner}: axes must come from te.reduce_axis")
        dtype = source.dtype
        if init is None:
            init_e = {"sum": const(0, dtype), "prod": const(1, dtype),
                      "max": min_value(dtype), "min": max_value(dtype),
                      "fast_max": min_value(dtype)}[combiner]
        else:
            init_e = tir.as_prim_expr(init, dtype)
        return Reduce(combiner, source, axes, init_e, dtype)
    reduce.__name__ = combiner
    reduce.__doc__ = (f"The {combiner} of ``expr`` over the reduction ``axis`` (use as the whole "
                      "body of a compute).")
    return reduce


# TVM's names; they shadow Python's builtins in this module only (defined last)
sum = _reducer("sum")  # noqa: A001
prod = _reducer("prod")
max = _reducer("max")  # noqa: A001
min = _reducer("min")  # noqa: A001
fast_max = _reducer("fast_max")
fast_max.__doc__ = """The max of ``expr`` over ``axis``, combined as ``acc if acc > x else x``.

Equal to :func:`max` on inputs without NaN; with a NaN among the inputs the
result is unspecified (NaN, or the maximum of some of the other values).
That is the CPU's own max instruction, one
vector operation where the NaN-propagating max costs six, and it lets the
reduction use partial accumulators (any order gives the same maximum).
Only for consumers whose result is NaN whenever an input is NaN anyway:
softmax's ``exp(x - max)`` is NaN at the NaN element, so its sum and every
output of the row are NaN whichever maximum was chosen (measurement:
bench/README.md, "Schedule notes moved from docstrings").
"""

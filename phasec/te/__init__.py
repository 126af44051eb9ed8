"""Tensor expressions (TE): describe tensor computations, generate TIR kernels.

A small layer in the spirit of TVM's ``tvm.te``::

    n = tir.Var("n")
    A = te.placeholder((n, 4), "float32", "A")
    B = te.compute((n, 4), lambda i, j: te.call("exp", A[i, j]), name="B")
    k = te.reduce_axis(4, "k")
    C = te.compute((n,), lambda i: te.sum(B[i, k], axis=[k]), name="C")
    func = te.create_prim_func([A, C])

Every :class:`Tensor` is produced by a placeholder (a kernel input) or a
``compute`` (one scalar expression per output element, indices are int64
``tir.Var``s). A compute body may be a reduction (``te.sum/max/min/prod``)
at its top level.

:func:`create_prim_func` turns a graph of tensors into one ``PrimFunc``
whose parameters are the input buffers, then the output buffers
(destination-passing style), then scalar int64 shape parameters for the
symbolic dimensions that no input buffer binds as a bare dimension.
This module holds the expression layer and the entry points; the lowering
lives beside it: ``_te_lower`` (stages, inlining, schedule decisions) and
``_te_emit`` (loop nests, tiling, vectorization, blocks), ``_te_gemm`` (the
matmul schedule); every tile and block size comes from
:class:`phasec.target.tuning.TargetTuning`.

**Inlining versus fusion.** Two different mechanisms put several operators
into one kernel:

* *Inlining* (TVM's ``compute_inline``): an injective compute that is not an
  output (or is marked ``inline=True``) never gets a buffer; each load of it
  is replaced by its defining expression at the loaded indices. A chain of
  elementwise/broadcast/injective operators thus becomes a single expression
  in the consumer's loop nest and touches memory once. Values an expression
  uses several times are bound once with ``LetStmt`` instead of recomputed.
* *Fusion of an anchor with its epilogue*: a reduction (matmul, conv2d, sum,
  a softmax's max...) cannot be inlined, it needs an accumulator. It is
  *materialized*, but when every use of it reads, for each element of a
  consumer's loop nest, one element identified by that nest's outer loop
  indices, it is computed *inside* the consumer's loop nest into a small
  local accumulator right before the consumer uses it (TVM's
  ``compute_at``). A matmul followed by bias-add and relu becomes one nest
  where each output tile is accumulated and then the epilogue applied; a
  softmax over the last axis computes each row's max and sum inside the
  row loop. Materialized tensors that cannot be attached this way get an
  intermediate buffer (``T.alloc_buffer``) and their own loop nest, still in
  the same PrimFunc.

**Schedule hints** (``schedule_hints=True``, the default): the outermost
non-trivial spatial loop is ``parallel`` when it has at least two iterations
and the kernel does at least ``TargetTuning.parallel_min_work`` (32k) scalar
operations; the innermost spatial loop of an elementwise nest is
``vectorized`` when its extent is static;
reductions write their init value before the reduction loops (TVM's
``decompose_reduction``); a reduction whose innermost output axis indexes
the innermost dimension of one of its inputs (matmul, conv2d) is computed a
row (or a tile of rows) at a time into a local accumulator, with the
reduction loops outside and a contiguous, vectorized innermost loop,
followed by the epilogue over the same tile; a matmul (``tag="matmul"``,
a product of a row operand and a column operand) gets the blocked, packed
GEMM schedule of :mod:`phasec.te.schedules.gemm` instead (register tiles with
remainders for every shape, B packed into L2-sized panels, the epilogue
applied to each finished tile; sizes from :mod:`phasec.target.tuning`); an
injective matmul operand
that transposes its input (``permute_dims(w)``) is staged into a buffer so
that this inner loop stays contiguous; a long float sum or product along
a contiguous axis accumulates into a vector of partial sums (32 or 16
lanes, folded at the end), so it vectorizes instead of running as one
latency-bound chain; an elementwise nest that reads its inputs along its
next-to-last axis (``permute_dims`` swapping the last two axes) is
transposed four columns at a time through a row buffer
(:mod:`phasec.te.schedules.transpose`) instead of gathering; a compute marked
``attrs={ROW_LOCAL: True}`` (softmax's exp) is computed once per row into
a local row buffer that its consumers in the row loop read. With ``schedule_hints=False``
the kernel is the canonical form: serial loops, one block per stage with
``T.init()`` for reductions.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from phasec.errors import PhasecError
from phasec.ir import tir
from phasec.ir.node import Span, node, set_field
from phasec.target.tuning import TargetTuning, host_tuning
from phasec.ir.tir import (
    BinaryOp, Buffer, BufferLoad, Cast, FloatImm, IntImm, IterVar, Not, PrimExpr, PrimFunc,
    Select, Stmt, Var,
)

__all__ = [
    "Tensor", "ProducerLoad", "Reduce", "TEError", "placeholder", "compute", "reduce_axis",
    "sum", "max", "min", "prod", "fast_max", "create_prim_func", "call", "cast", "select", "const",
    "max_value", "min_value", "ScheduleOptions", "lower", "LoweredTE", "ROW_LOCAL", "extern",
    "ExternOp",
]


class TEError(PhasecError):
    """A tensor expression is malformed (wrong index count, a misplaced reduction...)."""


# --------------------------------------------------------------------------
# Nodes and tensors
# --------------------------------------------------------------------------


@node(derived=("dtype",))


class ProducerLoad(PrimExpr):
    """``T[i, j]`` inside a compute body: reads an element of a TE tensor.

    Only exists in tensor expressions; :func:`create_prim_func` replaces it
    by a ``BufferLoad`` or by the producer's inlined expression.
    """

    tensor: Any  # Tensor (not an IR node)
    indices: tuple[PrimExpr, ...]
    dtype: str = ""
    span: Span | None = None

    def __post_init__(self) -> None:
        set_field(self, "indices", tuple(self.indices))
        if not self.dtype:
            set_field(self, "dtype", self.tensor.dtype)


@node


class Reduce(PrimExpr):
    """A commutative reduction ``combiner`` of ``source`` over ``axis``.

    Allowed only as the whole body of a compute. ``combiner`` is one of
    ``sum``, ``prod``, ``max``, ``min``, ``fast_max`` (see :func:`fast_max`);
    ``init`` is its identity element.
    """

    combiner: str
    source: PrimExpr
    axis: tuple[IterVar, ...]
    init: PrimExpr
    dtype: str
    span: Span | None = None

    def __post_init__(self) -> None:
        set_field(self, "axis", tuple(self.axis))


class PlaceholderOp:
    """The producer of an input tensor."""

    __slots__ = ()


class ComputeOp:
    """The producer of a computed tensor: ``body`` evaluated at ``axes``."""

    __slots__ = ("axes", "body", "inline", "tag", "attrs", "inputs")

    def __init__(self, axes: tuple[Var, ...], body: PrimExpr, inline: bool | None, tag: str,
                 attrs: Mapping[str, Any], inputs: tuple["Tensor", ...]) -> None:
        self.axes = axes
        self.body = body
        self.inline = inline
        self.tag = tag
        self.attrs = dict(attrs)
        self.inputs = inputs

    @property
    def is_reduction(self) -> bool:
        return isinstance(self.body, Reduce)


class ExternOp:
    """The producer of a tensor computed by hand-written TIR (:func:`extern`)."""

    __slots__ = ("inputs", "builder", "inline", "attrs")

    def __init__(self, inputs: tuple["Tensor", ...],
                 builder: Callable[[list[Buffer], Buffer], Stmt]) -> None:
        self.inputs = inputs
        self.builder = builder
        self.inline = False  # always materialized
        self.attrs: dict[str, Any] = {}

    is_reduction = False


class Tensor:
    """A tensor of a TE graph; ``A[i, j]`` in a compute body reads an element."""

    __slots__ = ("shape", "dtype", "name", "op")

    def __init__(self, shape: tuple[PrimExpr, ...], dtype: str, name: str,
                 op: PlaceholderOp | ComputeOp | ExternOp) -> None:
        self.shape = shape
        self.dtype = dtype
        self.name = name
        self.op = op

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_placeholder(self) -> bool:
        return isinstance(self.op, PlaceholderOp)

    def __getitem__(self, indices: Any) -> ProducerLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != len(self.shape):
            raise TEError(f"tensor {self.name} has {len(self.shape)} dimension(s) but is indexed "
                          f"with {len(indices)}")
        return ProducerLoad(self, tuple(_as_index(i) for i in indices))

    def __repr__(self) -> str:
        return f"<te.Tensor {self.name} {self.dtype} ndim={len(self.shape)}>"


def _as_index(i: Any) -> PrimExpr:
    if isinstance(i, IterVar):
        return i.var
    if isinstance(i, (int, np.integer)) and not isinstance(i, bool):
        return IntImm(int(i), "int64")
    if isinstance(i, PrimExpr):
        if not (tir.is_int(i.dtype)):
            raise TEError(f"tensor index must be an integer expression, got dtype {i.dtype}")
        return i
    raise TEError(f"cannot use {type(i).__name__} as a tensor index")


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


def const(value: Any, dtype: str) -> PrimExpr:
    """A scalar constant of ``dtype``."""
    if tir.is_bool(dtype):
        return IntImm(int(bool(value)), "bool")
    if tir.is_int(dtype):
        return IntImm(int(value), dtype)
    return FloatImm(float(value), dtype)


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


def placeholder(shape: Sequence[Any], dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of the given shape (ints or int64 ``tir.Var``s) and dtype."""
    if dtype not in tir.DTYPES:
        raise TEError(f"unknown dtype {dtype!r} for placeholder {name}")
    return Tensor(tuple(_as_dim(s) for s in shape), dtype, name, PlaceholderOp())


def reduce_axis(extent: Any, name: str = "k") -> IterVar:
    """A reduction axis ranging over ``[0, extent)``; index tensors with it directly."""
    return IterVar(Var(name, "int64"), _as_dim(extent), "R")


_REDUCERS = ("sum", "prod", "max", "min", "fast_max")


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


sum = _reducer("sum")  # noqa: A001 - TVM's names
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
output of the row are NaN whichever maximum was chosen (4 x 128 x 128
softmax kernel 41 -> 29 us on one core).
"""


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


def extern(shape: Sequence[Any], dtype: str, inputs: Sequence[Tensor],
           builder: Callable[[list[Buffer], Buffer], Stmt], name: str = "extern") -> Tensor:
    """A tensor computed by a hand-written TIR statement (TVM's ``te.extern``).

    ``builder(input_buffers, output_buffer)`` returns the statement that
    writes every element of ``output_buffer``; it is called once when the
    kernel is generated, with one buffer per tensor of ``inputs`` (computed
    inputs are materialized into buffers first). For what a loop nest of
    elementwise expressions cannot say: scans (cumsum), scatters, sorts.
    The statement must index the buffers with their own ``shape`` (symbolic
    dimensions are already those of the kernel) and create fresh loop
    variables. The tensor is never inlined or attached to a consumer's nest.
    """
    if dtype not in tir.DTYPES:
        raise TEError(f"unknown dtype {dtype!r} for extern {name}")
    for t in inputs:
        if not isinstance(t, Tensor):
            raise TEError(f"extern {name}: inputs must be te.Tensors, got {type(t).__name__}")
    return Tensor(tuple(_as_dim(s) for s in shape), dtype, name,
                  ExternOp(tuple(inputs), builder))


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


def _children(e: PrimExpr) -> tuple[PrimExpr, ...]:
    if isinstance(e, BinaryOp):
        return (e.lhs, e.rhs)
    if isinstance(e, (Cast, Not)):
        return (e.value,)
    if isinstance(e, Select):
        return (e.condition, e.true_value, e.false_value)
    if isinstance(e, tir.Call):
        return e.args
    if isinstance(e, (BufferLoad, ProducerLoad)):
        return e.indices
    if isinstance(e, Reduce):
        return (e.source,)
    return ()


def _rebuild(e: PrimExpr, kids: Sequence[PrimExpr]) -> PrimExpr:
    old = _children(e)
    if all(a is b for a, b in zip(kids, old)):
        return e
    if isinstance(e, BinaryOp):
        return BinaryOp(e.op, kids[0], kids[1], e.dtype)
    if isinstance(e, Cast):
        return Cast(e.dtype, kids[0])
    if isinstance(e, Not):
        return Not(kids[0])
    if isinstance(e, Select):
        return Select(kids[0], kids[1], kids[2], e.dtype)
    if isinstance(e, tir.Call):
        return tir.Call(e.name, tuple(kids), e.dtype)
    if isinstance(e, BufferLoad):
        return BufferLoad(e.buffer, tuple(kids))
    if isinstance(e, ProducerLoad):
        return ProducerLoad(e.tensor, tuple(kids))
    if isinstance(e, Reduce):
        return Reduce(e.combiner, kids[0], e.axis, e.init, e.dtype)
    raise TEError(f"unexpected expression node {type(e).__name__}")


def _post_order(roots: Sequence[PrimExpr]) -> list[PrimExpr]:
    """Every distinct node reachable from ``roots``, children before parents."""
    out: list[PrimExpr] = []
    seen: set[int] = set()
    stack: list[tuple[PrimExpr, bool]] = [(r, False) for r in reversed(roots)]
    while stack:
        e, done = stack.pop()
        if done:
            out.append(e)
            continue
        if id(e) in seen:
            continue
        seen.add(id(e))
        stack.append((e, True))
        for c in reversed(_children(e)):
            if id(c) not in seen:
                stack.append((c, False))
    return out


def _collect_inputs(body: PrimExpr, name: str) -> tuple[Tensor, ...]:
    inputs: list[Tensor] = []
    seen: set[int] = set()
    for e in _post_order([body]):
        if isinstance(e, Reduce) and e is not body:
            raise TEError(f"compute {name}: a reduction (te.sum/max/min/prod) must be the whole "
                          "body of a compute; compute the reduction first, then use it")
        if isinstance(e, ProducerLoad) and id(e.tensor) not in seen:
            seen.add(id(e.tensor))
            inputs.append(e.tensor)
    return tuple(inputs)


def _expr_key(e: PrimExpr) -> Any:
    """A hashable structural key (variables by identity)."""
    if isinstance(e, Var):
        return ("v", id(e))
    if isinstance(e, IntImm):
        return ("c", e.dtype, e.value)
    memo: dict[int, Any] = {}
    for n in _post_order([e]):
        if isinstance(n, Var):
            k: Any = ("v", id(n))
        elif isinstance(n, (IntImm, FloatImm)):
            k = ("c", n.dtype, n.value)
        else:
            extra: Any = getattr(n, "op", None) or getattr(n, "name", None)
            if isinstance(n, (BufferLoad,)):
                extra = id(n.buffer)
            elif isinstance(n, ProducerLoad):
                extra = id(n.tensor)
            k = (type(n).__name__, n.dtype, extra, tuple(memo[id(c)] for c in _children(n)))
        memo[id(n)] = k
    return memo[id(e)]


def _simplify_index(e: PrimExpr, bounds: Mapping[int, tuple[int, int]] | None = None
                    ) -> PrimExpr:
    """``e`` simplified; with ``bounds`` (``id(var) -> (lo, hi)`` of the loop
    variables) quotients and remainders the ranges decide are resolved too
    (:func:`phasec.arith.bound.simplify_bounded`)."""
    if isinstance(e, (Var, IntImm)) or not tir.is_int(e.dtype):
        return e
    try:
        from phasec.arith import simplify
        from phasec.arith.bound import simplify_bounded
    except ImportError:  # pragma: no cover - arith is part of the IR core
        return e
    try:
        if bounds:
            e = simplify_bounded(e, bounds)
        return simplify(e)
    except Exception:  # noqa: BLE001 - simplification is best effort
        return e


def _static(e: PrimExpr) -> int | None:
    if isinstance(e, IntImm):
        return e.value
    s = _simplify_index(e)
    return s.value if isinstance(s, IntImm) else None


# --------------------------------------------------------------------------
# Lowering: TE graph -> PrimFunc
# --------------------------------------------------------------------------


@dataclass(frozen=True)


class ScheduleOptions:
    """Knobs of the schedule hints (see the module docstring)."""

    parallel: bool = True
    vectorize: bool = True
    tile: bool = True
    decompose_reduction: bool = True
    #: None: the target's ``parallel_min_work`` (:mod:`phasec.target.tuning`)
    parallel_min_work: int | None = None
    max_row: int = 4096
    #: tile and block sizes (None: :func:`phasec.target.tuning.host_tuning`)
    tuning: "TargetTuning | None" = None
    #: names of placeholders whose values are constants of the module (a
    #: model's weights): a matrix-vector product streams such a B operand
    #: from micro-panels packed once per build (see ``_te_gemm.plan_gemm``)
    constant_inputs: frozenset[str] = frozenset()

    @property
    def target(self) -> "TargetTuning":
        """The tuning the schedules use."""
        return self.tuning if self.tuning is not None else host_tuning()

    @property
    def min_parallel_work(self) -> int:
        """Scalar operations a loop nest needs to be made parallel."""
        if self.parallel_min_work is not None:
            return self.parallel_min_work
        return self.target.parallel_min_work

    @staticmethod
    def make(hints: "bool | ScheduleOptions | Mapping[str, Any]") -> "ScheduleOptions":
        if isinstance(hints, ScheduleOptions):
            return hints
        if hints is True:
            return ScheduleOptions()
        if hints is False or hints is None:
            return ScheduleOptions(False, False, False, False)
        return ScheduleOptions(**dict(hints))


_SYMBOLIC_GUESS = 64  # assumed extent of a symbolic dimension when estimating work
#: ``compute(..., attrs={ROW_LOCAL: True})``: a hint that the tensor is worth
#: computing once per row into a local buffer (its consumers read each of
#: its elements several times, e.g. softmax's exp, read by the sum and by
#: the division). Falls back to inlining when it cannot be attached that way.
ROW_LOCAL = "te.row_local"


def _extent_guess(e: PrimExpr) -> int:
    """An extent's value, or a typical size for a symbolic one (work estimates)."""
    v = _static(e)
    return _SYMBOLIC_GUESS if v is None else v


@dataclass(frozen=True)


class LoweredTE:
    """The result of :func:`lower`: the kernel and its symbolic-variable mapping.

    ``shape_vars`` maps each symbolic variable of the TE graph to its fresh
    copy in ``prim_func``; ``scalar_params`` lists, for each scalar
    parameter of ``prim_func`` (in order), the original TE-graph variable
    whose value the caller must pass (``call_tir``'s ``tir_vars``).
    """

    prim_func: PrimFunc
    shape_vars: Mapping[Var, Var]
    scalar_params: tuple[Var, ...]


def lower(tensors: Sequence[Tensor | Var], schedule_hints: bool | ScheduleOptions
          | Mapping[str, Any] = True, attrs: Mapping[str, Any] | None = None) -> LoweredTE:
    """Like :func:`create_prim_func`, also returning the symbolic-variable mapping."""
    from phasec.te.lowering import _Lowering  # the lowering machinery, loaded on first use

    options = ScheduleOptions.make(schedule_hints)
    low = _Lowering(tensors, options, attrs)
    func = low.run()
    if low.row_local_failed:
        # A ROW_LOCAL tensor could not be kept per row: inline it instead
        # (recomputing it beats a pass over memory through a global buffer).
        low = _Lowering(tensors, options, attrs, frozenset(low.row_local_failed))
        func = low.run()
    original = {id(fresh): orig for orig, fresh in low.svmap.items()}
    scalars = tuple(original[id(p)] for p in func.params if isinstance(p, Var))
    return LoweredTE(func, dict(low.svmap), scalars)


def create_prim_func(tensors: Sequence[Tensor | Var], schedule_hints: bool | ScheduleOptions
                     | Mapping[str, Any] = True, attrs: Mapping[str, Any] | None = None) -> PrimFunc:
    """Generate one PrimFunc computing the output tensors of ``tensors``.

    ``tensors`` lists inputs (placeholders) and outputs (computes); the
    PrimFunc's parameters are the input buffers (in the listed order), then
    the output buffers (in the listed order, destination-passing style), then
    one int64 scalar parameter for each symbolic dimension that no input
    buffer has as a bare dimension (``tir.Var``s listed in ``tensors`` first,
    then in order of first use). Symbolic variables are replaced by fresh
    ones of the same name, so the PrimFunc shares no variable with the
    program it came from (see :func:`lower` for the mapping).

    Non-output injective computes are inlined; reductions are materialized
    and fused with their elementwise consumers where possible (see the module
    docstring). ``schedule_hints`` turns the performance annotations on/off
    (or gives :class:`ScheduleOptions`). ``attrs`` are added to the
    PrimFunc's attributes (``tirx.noalias`` is always set).
    """
    return lower(tensors, schedule_hints, attrs).prim_func

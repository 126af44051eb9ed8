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
and the kernel does at least ~64k scalar operations; the innermost spatial
loop of an elementwise nest is ``vectorized`` when its extent is static;
reductions write their init value before the reduction loops (TVM's
``decompose_reduction``); a reduction whose innermost output axis indexes
the innermost dimension of one of its inputs (matmul, conv2d) is computed a
row (or a tile of rows) at a time into a local accumulator, with the
reduction loops outside and a contiguous, vectorized innermost loop,
followed by the epilogue over the same tile; an injective matmul operand
that transposes its input (``permute_dims(w)``) is staged into a buffer so
that this inner loop stays contiguous; a long float sum or product along
a contiguous axis accumulates into a vector of partial sums (32 or 16
lanes, folded at the end), so it vectorizes instead of running as one
latency-bound chain; a compute marked ``attrs={ROW_LOCAL: True}`` (softmax's
exp) is computed once per row into a local row buffer that its consumers
in the row loop read. With ``schedule_hints=False``
the kernel is the canonical form: serial loops, one block per stage with
``T.init()`` for reductions.
"""

from __future__ import annotations

import builtins as _b
import inspect
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import PhasecError
from . import tir
from .node import Span, node, set_field
from .tir_blocks import bind_loop_vars_in_blocks
from .tir import (
    Allocate, BinaryOp, Block, Buffer, BufferLoad, BufferStore, Cast, FloatImm, For, IntImm,
    IterVar, LetStmt, Not, PrimExpr, PrimFunc, Select, SeqStmt, Stmt, Var,
)

__all__ = [
    "Tensor", "ProducerLoad", "Reduce", "TEError", "placeholder", "compute", "reduce_axis",
    "sum", "max", "min", "prod", "create_prim_func", "call", "cast", "select", "const",
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
    ``sum``, ``prod``, ``max``, ``min``; ``init`` is its identity element.
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


_REDUCERS = ("sum", "prod", "max", "min")


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
                      "max": min_value(dtype), "min": max_value(dtype)}[combiner]
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


def _simplify_index(e: PrimExpr) -> PrimExpr:
    if isinstance(e, (Var, IntImm)) or not tir.is_int(e.dtype):
        return e
    try:
        from .arith import simplify
    except ImportError:  # pragma: no cover - arith is part of the IR core
        return e
    try:
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
    parallel_min_work: int = 1 << 16
    max_row: int = 4096

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
#: Partial accumulators (see _NestEmitter._partial_lanes): reductions of at
#: least this many elements along a contiguous axis; lanes tried in order,
#: the first with at least 4 iterations of the lane loop. 32 float32 lanes
#: are two AVX-512 (four AVX2) registers: independent chains that hide the
#: adder's latency.
_PARTIAL_MIN_EXTENT = 64
#: ``compute(..., attrs={ROW_LOCAL: True})``: a hint that the tensor is worth
#: computing once per row into a local buffer (its consumers read each of
#: its elements several times, e.g. softmax's exp, read by the sum and by
#: the division). Falls back to inlining when it cannot be attached that way.
ROW_LOCAL = "te.row_local"
#: Rows of a matmul/conv2d register tile (the first that divides the rows).
_TILE_ROWS = (4, 2)
_PARTIAL_LANES = (32, 16)


class _Names:
    def __init__(self) -> None:
        self.used: set[str] = set()

    def fresh(self, base: str) -> str:
        base = base or "v"
        name, k = base, 1
        while name in self.used:
            name = f"{base}_{k}"
            k += 1
        self.used.add(name)
        return name


class _Stage:
    """A materialized compute: an output, a reduction, or a forced non-inline compute."""

    def __init__(self, tensor: Tensor, index: int) -> None:
        self.tensor = tensor
        self.index = index  # topological position
        op = tensor.op
        self.extern: ExternOp | None = op if isinstance(op, ExternOp) else None
        if self.extern is not None:
            self.axes: tuple[Var, ...] = ()
            self.is_reduce = False
            self.raxes: tuple[IterVar, ...] = ()
            self.combiner = ""
            self.init: PrimExpr | None = None
            self.expr: PrimExpr | None = None
        else:
            self._init_compute(op)
        self.is_output = False
        self.loads: list[ProducerLoad] = []
        self.root: _Stage | None = None      # nest this stage is attached to (None: own nest)
        self.binding: tuple[PrimExpr, ...] = ()  # element computed, in the root's axis vars
        self.depth = 0
        #: attached with its last dimension whole (a row kept in a local
        #: buffer, see _Lowering._try_row_attach): that dimension's extent
        self.row: int | None = None
        self.buffer: Buffer | None = None    # global buffer (param or intermediate)
        self.local: Buffer | None = None     # local accumulator when attached

    def _init_compute(self, op: ComputeOp) -> None:
        self.axes = op.axes
        self.is_reduce = isinstance(op.body, Reduce)
        self.raxes: tuple[IterVar, ...] = op.body.axis if self.is_reduce else ()
        self.combiner = op.body.combiner if self.is_reduce else ""
        self.init: PrimExpr | None = op.body.init if self.is_reduce else None
        self.expr = op.body.source if self.is_reduce else op.body  # expanded later

    @property
    def name(self) -> str:
        return self.tensor.name


def _combine(combiner: str, acc: PrimExpr, value: PrimExpr) -> PrimExpr:
    if combiner == "sum":
        return BinaryOp("+", acc, value)
    if combiner == "prod":
        return BinaryOp("*", acc, value)
    return BinaryOp(combiner, acc, value)


class _Lowering:
    def __init__(self, args: Sequence[Tensor | Var], options: ScheduleOptions,
                 attrs: Mapping[str, Any] | None, no_row_local: frozenset[int] = frozenset()
                 ) -> None:
        self.opt = options
        # ids of ROW_LOCAL tensors not to materialize (a first try could not
        # attach them; see lower())
        self.no_row_local = no_row_local
        self.row_local_failed: set[int] = set()
        self.attrs = dict(attrs or {})
        self.names = _Names()
        self.block_names = _Names()
        self.svmap: dict[Var, Var] = {}   # symbolic shape var -> fresh copy for this PrimFunc
        self.inputs: list[Tensor] = []
        self.outputs: list[Tensor] = []
        self.extra_vars: list[Var] = []
        seen: set[int] = set()
        for a in args:
            if isinstance(a, Var):
                self.extra_vars.append(a)
                continue
            if not isinstance(a, Tensor):
                raise TEError(f"create_prim_func: arguments must be te.Tensors or tir.Vars, "
                              f"got {type(a).__name__}")
            if id(a) in seen:
                raise TEError(f"create_prim_func: tensor {a.name} is listed twice")
            seen.add(id(a))
            (self.inputs if a.is_placeholder else self.outputs).append(a)
        if not self.outputs:
            raise TEError("create_prim_func: no output tensor (computes) in the argument list")

    # -- graph -------------------------------------------------------------
    def _topo(self) -> list[Tensor]:
        order: list[Tensor] = []
        state: dict[int, int] = {}
        for out in self.outputs:
            stack: list[tuple[Tensor, bool]] = [(out, False)]
            while stack:
                t, done = stack.pop()
                if done:
                    state[id(t)] = 2
                    order.append(t)
                    continue
                if state.get(id(t)):
                    continue
                state[id(t)] = 1
                stack.append((t, True))
                if isinstance(t.op, (ComputeOp, ExternOp)):
                    for inp in reversed(t.op.inputs):
                        if not state.get(id(inp)):
                            stack.append((inp, False))
        return order

    def _shape_var(self, v: Var) -> Var:
        fresh = self.svmap.get(v)
        if fresh is None:
            fresh = Var(self.names.fresh(v.name), v.dtype)
            self.svmap[v] = fresh
        return fresh

    def _map_shape(self, e: PrimExpr) -> PrimExpr:
        return self._subst(e, {})

    def _subst(self, e: PrimExpr, vmap: Mapping[Var, PrimExpr]) -> PrimExpr:
        """Substitute vars (unknown vars are symbolic dims: mapped to fresh copies)."""
        if isinstance(e, IntImm):
            return e
        if isinstance(e, Var):
            r = vmap.get(e)
            return r if r is not None else self._shape_var(e)
        memo: dict[int, PrimExpr] = {}
        for n in _post_order([e]):
            if isinstance(n, Var):
                r = vmap.get(n)
                memo[id(n)] = r if r is not None else self._shape_var(n)
            elif isinstance(n, (ProducerLoad, Reduce)):
                raise TEError("internal: unexpected tensor expression in an index")
            else:
                memo[id(n)] = _rebuild(n, [memo[id(c)] for c in _children(n)])
        return memo[id(e)]

    def run(self) -> PrimFunc:
        order = self._topo()
        input_ids = {id(t) for t in self.inputs}
        output_ids = {id(t) for t in self.outputs}
        for t in order:
            if t.is_placeholder and id(t) not in input_ids:
                raise TEError(f"create_prim_func: placeholder {t.name} is used but not listed "
                              "among the arguments")
        # Names: inputs, outputs first so they keep their names.
        self.buffers: dict[int, Buffer] = {}
        self.stages: dict[int, _Stage] = {}
        self.inlined: set[int] = set()
        stage_list: list[_Stage] = []
        staged = self._operands_to_stage(order, output_ids) if self.opt.tile else set()
        for t in order:  # an extern statement reads its inputs from buffers
            if isinstance(t.op, ExternOp):
                staged.update(id(i) for i in t.op.inputs if not i.is_placeholder)
        for t in order:
            if t.is_placeholder:
                continue
            op = t.op
            materialize = (id(t) in output_ids or op.is_reduction or op.inline is False
                           or (self.opt.tile and op.attrs.get(ROW_LOCAL) and op.inline is None
                               and id(t) not in self.no_row_local)
                           or id(t) in staged)
            if id(t) in output_ids and op.inline:
                raise TEError(f"create_prim_func: output {t.name} is marked inline")
            if materialize:
                st = _Stage(t, len(stage_list))
                st.is_output = id(t) in output_ids
                self.stages[id(t)] = st
                stage_list.append(st)
            else:
                self.inlined.add(id(t))
        self.stage_list = stage_list
        params: list[Buffer | Var] = []
        for t in self.inputs:
            buf = Buffer(self.names.fresh(t.name), tuple(self._map_shape(s) for s in t.shape),
                         t.dtype)
            self.buffers[id(t)] = buf
            params.append(buf)
        for t in self.outputs:
            st = self.stages[id(t)]
            st.buffer = Buffer(self.names.fresh(t.name),
                               tuple(self._map_shape(s) for s in t.shape), t.dtype)
            params.append(st.buffer)
        self._expand_all()
        self._attach()
        # TVM reads a loop variable inside a block only through an axis.
        body = bind_loop_vars_in_blocks(self._emit_all())
        params.extend(self._scalar_params(params, body))
        attrs = {"tirx.noalias": True, **self.attrs}
        return PrimFunc(params, body, attrs)

    @staticmethod
    def _operands_to_stage(order: list[Tensor], output_ids: set[int]) -> set[int]:
        """Inlinable operands of reductions that get their own buffer (a schedule hint).

        * A matmul operand read along the output's last axis ``j`` that is a
          transpose of its input (``permute_dims(w)[k, j] = w[j, k]``): inlined,
          the matmul's innermost loop would be strided. Staged, it costs one
          copy and the matmul keeps its contiguous, vectorized schedule (TVM
          packs such weights for the same reason).
        * An operand that does arithmetic (``gelu(x)`` feeding a matmul) and is
          read independently of one of the reduction's output axes: inlined,
          it would be recomputed for every value of that axis.
        """
        staged: set[int] = set()
        for t in order:
            op = t.op
            if not isinstance(op, ComputeOp) or not op.is_reduction:
                continue
            spatial = [a for a, ext in zip(op.axes, t.shape) if _static(ext) != 1]
            for ld in _loads_of(op.body.source):
                src = ld.tensor
                sop = src.op
                if (not isinstance(sop, ComputeOp) or sop.is_reduction or sop.inline is not None
                        or id(src) in output_ids or id(src) in staged):
                    continue
                used = {id(n) for i in ld.indices for n in _post_order([i]) if isinstance(n, Var)}
                if _costly(sop.body) and _b.any(id(a) not in used for a in spatial):
                    staged.add(id(src))
                    continue
                if op.tag != "matmul" or not op.axes or not src.shape:
                    continue
                if not _last_index_uses(ld, op.axes[-1]):
                    continue
                inner = [x for x in _loads_of(sop.body) if x.indices]
                if inner and not _b.any(_last_index_uses(x, sop.axes[-1]) for x in inner):
                    staged.add(id(src))
        return staged

    # -- inlining ----------------------------------------------------------
    def _expand_all(self) -> None:
        self.inline_memo: dict[Any, PrimExpr] = {}
        self.let_names: dict[int, str] = {}
        for st in self.stage_list:
            if st.extern is not None:
                continue
            st.expr = self._expand(st.expr)
            st.loads = [e for e in _post_order([st.expr])
                        if isinstance(e, ProducerLoad) and id(e.tensor) in self.stages]

    def _expand(self, root: PrimExpr) -> PrimExpr:
        """Replace loads of inlined tensors by their (recursively expanded) bodies."""
        ctxs: list[dict] = [{}]
        memo: dict[tuple[int, int], PrimExpr] = {}
        # stack items: (expr, ctx, state, extra)
        stack: list[tuple[PrimExpr, dict, int, Any]] = [(root, ctxs[0], 0, None)]
        while stack:
            e, ctx, state, extra = stack.pop()
            key = (id(e), id(ctx))
            if state == 0:
                if key in memo:
                    continue
                if isinstance(e, Var):
                    memo[key] = ctx.get(e, e)
                    continue
                if isinstance(e, (IntImm, FloatImm)):
                    memo[key] = e
                    continue
                if isinstance(e, Reduce):
                    raise TEError("a reduction must be the whole body of a compute")
                stack.append((e, ctx, 1, None))
                for c in _children(e):
                    if (id(c), id(ctx)) not in memo:
                        stack.append((c, ctx, 0, None))
                continue
            if state == 1:
                new = [memo[(id(c), id(ctx))] for c in _children(e)]
                if isinstance(e, ProducerLoad) and id(e.tensor) in self.inlined:
                    idx = tuple(_simplify_index(i) for i in new)
                    ikey = (id(e.tensor), tuple(_expr_key(i) for i in idx))
                    hit = self.inline_memo.get(ikey)
                    if hit is not None:
                        memo[key] = hit
                        continue
                    op = e.tensor.op
                    ctx2 = dict(zip(op.axes, idx))
                    ctxs.append(ctx2)
                    stack.append((e, ctx, 2, (ikey, ctx2)))
                    stack.append((op.body, ctx2, 0, None))
                    continue
                if isinstance(e, ProducerLoad):
                    new = [_simplify_index(i) for i in new]
                memo[key] = _rebuild(e, new)
                continue
            ikey, ctx2 = extra
            value = memo[(id(e.tensor.op.body), id(ctx2))]
            self.inline_memo[ikey] = value
            self.let_names.setdefault(id(value), e.tensor.name)
            memo[key] = value
        return memo[(id(root), id(ctxs[0]))]

    # -- attachment (compute_at) -------------------------------------------
    def _attach(self) -> None:
        consumers: dict[int, list[tuple[_Stage, ProducerLoad]]] = {}
        for st in self.stage_list:
            for ld in st.loads:
                consumers.setdefault(id(ld.tensor), []).append((st, ld))
        for st in reversed(self.stage_list):
            if st.is_output or st.extern is not None:
                continue
            uses = consumers.get(id(st.tensor), [])
            placed = self._try_attach(st, uses) if uses else False
            if not placed:
                st.root = None

    def _try_attach(self, st: _Stage, uses: list[tuple[_Stage, ProducerLoad]]) -> bool:
        if self._attach_with(st, uses, row=False):
            return True
        if st.tensor.op.attrs.get(ROW_LOCAL) and not st.is_reduce and not st.is_output:
            if self._attach_with(st, uses, row=True):
                return True
            self.row_local_failed.add(id(st.tensor))
        return False

    def _attach_with(self, st: _Stage, uses: list[tuple[_Stage, ProducerLoad]], row: bool
                     ) -> bool:
        """Attach ``st`` to the nest of its consumers when every use reads the
        element its outer loop indices identify (``row``: when they identify
        a row, the last index being free; the row is then computed into a
        local buffer and read from there, TVM's compute_at with a row-sized
        cache)."""
        roots = {id(c.root or c) for c, _ in uses}
        if len(roots) != 1:
            return False
        row_extent = None
        if row:
            if st.tensor.ndim < 2:
                return False
            row_extent = _static(st.tensor.shape[-1])
            if row_extent is None or not 1 <= row_extent <= self.opt.max_row:
                return False
        root = uses[0][0].root or uses[0][0]
        root_axes = {id(v): i for i, v in enumerate(root.axes)}
        binding_key = None
        binding: tuple[PrimExpr, ...] = ()
        for consumer, ld in uses:
            if consumer is root:
                vmap: dict[Var, PrimExpr] = {}
            else:
                vmap = dict(zip(consumer.axes, consumer.binding))
            idx = []
            for i in (ld.indices[:-1] if row else ld.indices):
                j = _simplify_index(self._subst_keep(i, vmap))
                if isinstance(j, Var) and id(j) in root_axes:
                    idx.append(j)
                elif isinstance(j, IntImm):
                    idx.append(j)
                else:
                    return False
            k = tuple(_expr_key(i) for i in idx)
            if binding_key is None:
                binding_key, binding = k, tuple(idx)
            elif k != binding_key:
                return False
        used = sorted(root_axes[id(v)] for v in binding if isinstance(v, Var))
        if len(set(used)) != len(used) or used != list(range(len(used))):
            return False  # would recompute the stage for loops it does not depend on
        st.root = root
        st.binding = binding
        st.depth = len(used)
        st.row = row_extent
        return True

    @staticmethod
    def _subst_keep(e: PrimExpr, vmap: Mapping[Var, PrimExpr]) -> PrimExpr:
        if not vmap or isinstance(e, IntImm):
            return e
        if isinstance(e, Var):
            return vmap.get(e, e)
        memo: dict[int, PrimExpr] = {}
        for n in _post_order([e]):
            if isinstance(n, Var):
                memo[id(n)] = vmap.get(n, n)
            else:
                memo[id(n)] = _rebuild(n, [memo[id(c)] for c in _children(n)])
        return memo[id(e)]

    # -- emission ----------------------------------------------------------
    def _emit_all(self) -> Stmt:
        nests: list[Stmt] = []
        intermediates: list[Buffer] = []
        for st in self.stage_list:
            if st.root is not None:
                continue
            if st.buffer is None:  # a global intermediate
                st.buffer = Buffer(self.names.fresh(st.name),
                                   tuple(self._map_shape(s) for s in st.tensor.shape),
                                   st.tensor.dtype)
                intermediates.append(st.buffer)
            if st.extern is not None:
                nests.append(self._emit_extern(st))
                continue
            nests.append(_NestEmitter(self, st).emit())
        body: Stmt = nests[0] if len(nests) == 1 else SeqStmt(nests)
        for buf in reversed(intermediates):
            body = Allocate(buf, body)
        return body

    def _emit_extern(self, st: _Stage) -> Stmt:
        bufs = []
        for t in st.extern.inputs:
            if t.is_placeholder:
                bufs.append(self.buffers[id(t)])
            else:
                src = self.stages[id(t)]
                if src.buffer is None:
                    raise TEError(f"extern {st.name}: input {t.name} has no buffer")
                bufs.append(src.buffer)
        stmt = st.extern.builder(bufs, st.buffer)
        if not isinstance(stmt, Stmt):
            raise TEError(f"extern {st.name}: the builder must return a TIR statement, "
                          f"got {type(stmt).__name__}")
        return stmt

    def _scalar_params(self, params: list[Buffer | Var], body: Stmt) -> list[Var]:
        bound: set[int] = set()
        for p in params[:len(self.inputs)]:
            for d in p.shape:
                if isinstance(d, Var):
                    bound.add(id(d))
        out: list[Var] = []
        seen: set[int] = set(bound)
        for v in self.extra_vars:
            fresh = self._shape_var(v)
            if id(fresh) not in seen:
                seen.add(id(fresh))
                out.append(fresh)
        for fresh in self.svmap.values():
            if id(fresh) not in seen:
                seen.add(id(fresh))
                out.append(fresh)
        return out

    # -- expression emission -------------------------------------------
    def emit_value(self, expr: PrimExpr, vmap: Mapping[Var, PrimExpr],
                   load: Callable[[Tensor, tuple[PrimExpr, ...]], PrimExpr]) -> PrimExpr:
        memo: dict[int, PrimExpr] = {}
        loads: dict[Any, PrimExpr] = {}  # identical loads become one node (then one let)
        for n in _post_order([expr]):
            if isinstance(n, Var):
                r = vmap.get(n)
                memo[id(n)] = r if r is not None else self._shape_var(n)
            elif isinstance(n, ProducerLoad):
                idx = tuple(_simplify_index(memo[id(c)]) for c in n.indices)
                key = (id(n.tensor), tuple(_expr_key(i) for i in idx))
                hit = loads.get(key)
                if hit is None:
                    hit = loads[key] = load(n.tensor, idx)
                    if n.tensor.is_placeholder:
                        self.let_names.setdefault(id(hit), n.tensor.name)
                memo[id(n)] = hit
            else:
                new = _rebuild(n, [memo[id(c)] for c in _children(n)])
                memo[id(n)] = new
                if id(n) in self.let_names:
                    self.let_names.setdefault(id(new), self.let_names[id(n)])
        return memo[id(expr)]

    def default_load(self, t: Tensor, idx: tuple[PrimExpr, ...]) -> PrimExpr:
        if t.is_placeholder:
            return BufferLoad(self.buffers[id(t)], idx)
        st = self.stages[id(t)]
        if st.root is not None:
            return BufferLoad(st.local, (idx[-1],) if st.row else (IntImm(0, "int64"),))
        return BufferLoad(st.buffer, idx)

    def with_lets(self, values: list[PrimExpr], make: Callable[[list[PrimExpr]], Stmt]) -> Stmt:
        """CSE: bind shared (or very deep) subexpressions with LetStmt around ``make``."""
        nodes = _post_order(values)
        refs: dict[int, int] = {}
        for n in nodes:
            for c in _children(n):
                refs[id(c)] = refs.get(id(c), 0) + 1
        has_load: dict[int, bool] = {}
        for n in nodes:
            has_load[id(n)] = (isinstance(n, (BufferLoad, tir.Call))
                               or _b.any(has_load[id(c)] for c in _children(n)))
        root_ids = {id(v) for v in values}
        mapped: dict[int, PrimExpr] = {}
        depth: dict[int, int] = {}
        lets: list[tuple[Var, PrimExpr]] = []
        for n in nodes:
            kids = _children(n)
            new = _rebuild(n, [mapped[id(c)] for c in kids]) if kids else n
            d = 1 + _b.max((depth[id(c)] for c in kids), default=0)
            trivial = isinstance(n, (Var, IntImm, FloatImm))
            shared = refs.get(id(n), 0) > 1 and has_load[id(n)]
            if not trivial and id(n) not in root_ids and (shared or d > 48):
                name = self.let_names.get(id(n), "cse")
                var = Var(self.names.fresh(name), n.dtype)
                lets.append((var, new))
                mapped[id(n)] = var
                depth[id(n)] = 0
            else:
                mapped[id(n)] = new
                depth[id(n)] = d
        stmt = make([mapped[id(v)] for v in values])
        for var, value in reversed(lets):
            stmt = LetStmt(var, value, stmt)
        return stmt

    # -- work estimates ----------------------------------------------------
    @staticmethod
    def extent_guess(e: PrimExpr) -> int:
        v = _static(e)
        return _SYMBOLIC_GUESS if v is None else v


def _seq(stmts: list[Stmt]) -> Stmt:
    """The statements in sequence (nested sequences flattened). An allocation
    or let followed by more statements takes them into its scope: the same
    program (its buffer or variable is fresh), and scoped statements end their
    lists, so the kernel prints with ``T.alloc_buffer`` and reads back exactly."""
    flat: list[Stmt] = []
    for s in stmts:
        if isinstance(s, SeqStmt):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    for i in range(len(flat) - 1):
        if isinstance(flat[i], (Allocate, LetStmt)):
            flat[i:] = [_extend_scope(flat[i], flat[i + 1:])]
            break
    return flat[0] if len(flat) == 1 else SeqStmt(flat)


def _extend_scope(stmt: Allocate | LetStmt, rest: list[Stmt]) -> Stmt:
    """``stmt`` (an Allocate/LetStmt chain) with ``rest`` appended to its body."""
    chain: list[Allocate | LetStmt] = []
    inner: Stmt = stmt
    while isinstance(inner, (Allocate, LetStmt)):
        chain.append(inner)
        inner = inner.body
    body = _seq([inner, *rest])
    for s in reversed(chain):
        body = (Allocate(s.buffer, body) if isinstance(s, Allocate)
                else LetStmt(s.var, s.value, body))
    return body


class _NestEmitter:
    """Emits the loop nest of one root stage with the stages attached to it."""

    def __init__(self, low: _Lowering, root: _Stage) -> None:
        self.low = low
        self.opt = low.opt
        self.root = root
        self.attached = [s for s in low.stage_list if s.root is root]
        self.m = len(root.axes)
        self.shape = [low._map_shape(s) for s in root.tensor.shape]
        self.axis_expr: dict[Var, PrimExpr] = {}
        #: buffers to allocate at the start of the level being emitted
        self.level_buffers: list[Buffer] = []
        self.mode, self.anchor, self.it, self.jt = self._choose_mode()

    # -- mode selection ----------------------------------------------------
    def _choose_mode(self) -> tuple[str, _Stage | None, int, int]:
        m = self.m
        if not self.opt.tile or m == 0:
            return "scalar", None, 1, 1
        deep = [s for s in self.attached if s.depth == m]
        if self.root.is_reduce:
            if deep:
                return "scalar", None, 1, 1
            anchor = self.root
            p_j = m - 1
            p_i = m - 2
        else:
            if len(deep) != 1 or not deep[0].is_reduce:
                return "scalar", None, 1, 1
            anchor = deep[0]
            last = self.root.axes[m - 1]
            pos = [k for k, b in enumerate(anchor.binding) if b is last]
            if len(pos) != 1:
                return "scalar", None, 1, 1
            p_j = pos[0]
            p_i = -1
            if m >= 2:
                prev = self.root.axes[m - 2]
                pos_i = [k for k, b in enumerate(anchor.binding) if b is prev]
                p_i = pos_i[0] if len(pos_i) == 1 else -1
        jvar = anchor.axes[p_j]
        # Row-wise accumulation pays off when some input is contiguous along j
        # (matmul's B[k, j], conv2d's input row); otherwise reduce per element.
        if not _b.any(_last_index_uses(ld, jvar) for ld in _loads_of(anchor.expr)):
            return "scalar", None, 1, 1
        J = _static(self.shape[m - 1])
        if J is None or J < 2:
            return "scalar", None, 1, 1
        jt = _pick_tile(J, (64, 32, 16, 8), 64, self.opt.max_row)
        if jt is None:
            return "scalar", None, 1, 1
        it = 1
        if m >= 2 and p_i >= 0 and not [s for s in self.attached if s.depth >= m - 1
                                         and s is not anchor]:
            I = _static(self.shape[m - 2])
            if I is not None:
                it = next((t for t in _TILE_ROWS if I % t == 0), 1)
            if it > 1:
                jt = _pick_tile(J, (32, 16, 8), 32, self.opt.max_row) or jt
        return ("tile" if it > 1 else "row"), anchor, it, jt

    # -- helpers -----------------------------------------------------------
    def _loop_var(self, axis: Var) -> Var:
        return Var(self.low.names.fresh(axis.name), "int64")

    def _iter_var(self, base: str, extent: PrimExpr, kind: str) -> IterVar:
        return IterVar(Var(self.low.names.fresh("v_" + base), "int64"), extent, kind)

    def _block_name(self, base: str) -> str:
        return self.low.block_names.fresh(base)

    def _work(self) -> int:
        """Rough count of scalar operations of the nest (symbolic extents guessed)."""
        g = _Lowering.extent_guess
        total = 1
        for s in self.shape:
            total *= g(s)
        for st in self.attached + ([self.root] if self.root.is_reduce else []):
            count = 1
            depth = self.m if st is self.root else st.depth
            for s in self.shape[:depth]:
                count *= g(s)
            count *= st.row or 1
            for ax in st.raxes:
                count *= g(self.low._map_shape(ax.extent))
            total += count
        return total

    # -- emission ----------------------------------------------------------
    def emit(self) -> Stmt:
        self.loops = self._outer_loop_plan()
        self.q = _b.sum(1 for kind, _, _ in self.loops if kind == "axis")
        self.parallel_at = self._parallel_level()
        return self._level(0)

    def _outer_loop_plan(self) -> list[tuple[str, int, PrimExpr]]:
        """The loops around the innermost part: (kind, axis index, extent)."""
        m = self.m
        plan: list[tuple[str, int, PrimExpr]] = []
        if self.mode == "scalar":
            plan = [("axis", t, self.shape[t]) for t in range(m)]
        elif self.mode == "row":
            plan = [("axis", t, self.shape[t]) for t in range(m - 1)]
            plan.append(("jo", m - 1, IntImm(_static(self.shape[m - 1]) // self.jt, "int64")))
        else:
            plan = [("axis", t, self.shape[t]) for t in range(m - 2)]
            plan.append(("io", m - 2, IntImm(_static(self.shape[m - 2]) // self.it, "int64")))
            plan.append(("jo", m - 1, IntImm(_static(self.shape[m - 1]) // self.jt, "int64")))
        return plan

    def _parallel_level(self) -> int:
        if not self.opt.parallel:
            return -1
        for k, (_, _, ext) in enumerate(self.loops):
            v = _static(ext)
            if v == 1:
                continue
            if (v is None or v >= 2) and self._work() >= self.opt.parallel_min_work:
                return k
            return -1
        return -1

    def _stages_at(self, depth: int) -> list[_Stage]:
        return [s for s in self.attached if s.depth == depth and s is not self.anchor]

    def _level(self, k: int) -> Stmt:
        """Code inside the first ``k`` loops of the plan.

        The first ``q`` loops each fix one root axis; a stage attached at
        depth ``d`` is computed at level ``d``, before the loop over axis
        ``d``. Tile loops (io/jo) never have stages attached inside them
        (guaranteed by the mode choice).
        """
        stmts: list[Stmt] = []
        locals_: list[Buffer] = []
        pending = len(self.level_buffers)
        if k <= self.q:
            for st in self._stages_at(k):
                st.local = Buffer(self.low.names.fresh(st.name + "_local"),
                                  (IntImm(st.row or 1, "int64"),), st.tensor.dtype)
                locals_.append(st.local)
                stmts.extend(self._emit_attached(st))
        if k == len(self.loops):
            stmts.append(self._inner())
        else:
            kind, t, ext = self.loops[k]
            zero = IntImm(0, "int64")
            if kind == "axis":
                var = self._loop_var(self.root.axes[t])
                self.axis_expr[self.root.axes[t]] = var
                stmts.append(For(var, zero, ext, self._loop_kind(k), self._level(k + 1)))
            else:
                elide = _static(ext) == 1 and self.parallel_at != k
                var = Var(self.low.names.fresh(self.root.axes[t].name + "_o"), "int64")
                setattr(self, kind + "_var", zero if elide else var)
                body = self._level(k + 1)
                stmts.append(body if elide else For(var, zero, ext, self._loop_kind(k), body))
        body_stmt = _seq(stmts)
        # Buffers allocated at this level: the attached stages' locals, then
        # the partial accumulators emitted here. Allocations wrap the whole
        # level (never in the middle of a statement list, which the
        # TVMScript text could not tell apart from one that wraps the rest).
        locals_ += self.level_buffers[pending:]
        del self.level_buffers[pending:]
        for buf in reversed(locals_):
            body_stmt = Allocate(buf, body_stmt)
        return body_stmt

    def _loop_kind(self, k: int) -> str:
        if k == self.parallel_at:
            return "parallel"
        if (self.mode == "scalar" and self.opt.vectorize and k == self.m - 1
                and not self.root.is_reduce and not self._stages_at(self.m)):
            ext = _static(self.loops[k][2])
            if ext is not None and ext >= 2:
                return "vectorized"
        return "serial"

    # -- attached stages (scalar accumulators) ---------------------------------
    def _emit_attached(self, st: _Stage) -> list[Stmt]:
        values = [self._root_expr(b) for b in st.binding]
        target = st.local
        if st.row:  # the whole row, into the row buffer
            j = Var(self.low.names.fresh(st.axes[-1].name), "int64")
            body = self._emit_stage(st, values + [j], lambda ivs: (target, (ivs[-1],)))
            kind = "vectorized" if self.opt.vectorize and st.row >= 2 else "serial"
            return [For(j, IntImm(0, "int64"), IntImm(st.row, "int64"), kind, _seq(body))]
        return self._emit_stage(st, values, lambda ivs: (target, (IntImm(0, "int64"),)))

    def _root_expr(self, e: PrimExpr) -> PrimExpr:
        if isinstance(e, Var):
            r = self.axis_expr.get(e)
            if r is None:
                raise TEError(f"internal: root axis {e.name} used before its loop")
            return r
        return e

    def _emit_stage(self, st: _Stage, values: list[PrimExpr],
                    target: Callable[[list[Var]], tuple[Buffer, tuple[PrimExpr, ...]]]) -> list[Stmt]:
        """Blocks computing one element of ``st`` whose axes are bound to ``values``.

        ``target(iter_vars)`` gives the buffer and indices the element goes to.
        """
        low = self.low
        shape = [low._map_shape(s) for s in st.tensor.shape]

        def spatial() -> tuple[list[IterVar], dict[Var, PrimExpr], Buffer, tuple[PrimExpr, ...]]:
            ivs = [self._iter_var(ax.name, ext, "S") for ax, ext in zip(st.axes, shape)]
            buf, idx = target([iv.var for iv in ivs])
            return ivs, {ax: iv.var for ax, iv in zip(st.axes, ivs)}, buf, idx

        if not st.is_reduce:
            ivs, vmap, buf, idx = spatial()
            value = low.emit_value(st.expr, vmap, low.default_load)
            body = low.with_lets([value], lambda v: BufferStore(buf, v[0], idx))
            return [_block(self._block_name(st.name), ivs, values, body)]
        init = low._map_shape(st.init)
        decompose = self.opt.decompose_reduction
        stmts: list[Stmt] = []
        if decompose:
            ivs0, _, buf0, idx0 = spatial()
            stmts.append(_block(self._block_name(st.name + "_init"), ivs0, values,
                               BufferStore(buf0, init, idx0)))
        rloops = [Var(low.names.fresh(ax.var.name), "int64") for ax in st.raxes]
        rexts = [low._map_shape(ax.extent) for ax in st.raxes]
        lanes = self._partial_lanes(st, rexts) if decompose else None
        if lanes is not None:
            stmts.append(self._emit_partial_reduction(st, values, spatial, rloops, rexts, init,
                                                      lanes))
            return stmts
        rivs = [self._iter_var(ax.var.name, ext, "R") for ax, ext in zip(st.raxes, rexts)]
        ivs, vmap, buf, idx = spatial()
        for ax, iv in zip(st.raxes, rivs):
            vmap[ax.var] = iv.var
        src = low.emit_value(st.expr, vmap, low.default_load)
        update = low.with_lets([src], lambda v: BufferStore(
            buf, _combine(st.combiner, BufferLoad(buf, idx), v[0]), idx))
        stmt: Stmt = _block(self._block_name(st.name), ivs + rivs, list(values) + rloops, update,
                           init=None if decompose else BufferStore(buf, init, idx))
        for var, ext in reversed(list(zip(rloops, rexts))):
            stmt = For(var, IntImm(0, "int64"), ext, "serial", stmt)
        stmts.append(stmt)
        return stmts

    def _partial_lanes(self, st: _Stage, rexts: list[PrimExpr]) -> int | None:
        """Lanes of partial accumulators for reducing ``st`` (None: reduce serially).

        A float reduction ``acc = acc + x[k]`` is one chain of dependent adds:
        it runs at the adder's latency, one element every few cycles, and
        LLVM may not reorder it (float addition is not associative). Summing
        into L independent partial accumulators (lane ``l`` takes ``k = ko *
        L + l``), combined once at the end, makes the inner loop elementwise,
        so it vectorizes and pipelines. It changes the order of the float
        operations (like numpy's pairwise sums do), so only long reductions
        whose input is contiguous along the innermost reduction axis get it.
        """
        if (not self.opt.vectorize or not st.raxes or not tir.is_float(st.tensor.dtype)
                or st.combiner not in ("sum", "prod")):
            # max/min are exact in any order: LLVM vectorizes those reductions itself
            return None
        extent = _static(rexts[-1])
        if extent is None or extent < _PARTIAL_MIN_EXTENT:
            return None
        last = st.raxes[-1].var
        if not _b.any(_last_index_uses(ld, last) for ld in _loads_of(st.expr)):
            return None
        for lanes in _PARTIAL_LANES:
            if extent >= 4 * lanes:
                return lanes
        return None

    def _emit_partial_reduction(self, st: _Stage, values: list[PrimExpr],
                                spatial: Callable[[], Any], rloops: list[Var],
                                rexts: list[PrimExpr], init: PrimExpr, lanes: int) -> Stmt:
        """The reduction of ``st`` into ``lanes`` partial accumulators (see
        :meth:`_partial_lanes`): lanes set to ``init``; the innermost reduction
        loop split into ``ko`` (serial) and a vectorized lane loop, plus a
        serial tail for ``extent % lanes``; then the lanes combined into the
        element (which the init block has set). The lane buffer is allocated
        at the start of the enclosing level (see :meth:`_level`)."""
        low = self.low
        i64 = lambda v: IntImm(v, "int64")  # noqa: E731
        extent = _static(rexts[-1])
        assert extent is not None
        part = Buffer(low.names.fresh(st.name + "_part"), (i64(lanes),), st.tensor.dtype)
        lane0 = Var(low.names.fresh("lane"), "int64")
        stmts: list[Stmt] = [For(lane0, i64(0), i64(lanes), "vectorized",
                                 BufferStore(part, init, (lane0,)))]

        def update(k_value: PrimExpr, lane: PrimExpr) -> Stmt:
            rivs = [self._iter_var(ax.var.name, ext, "R") for ax, ext in zip(st.raxes, rexts)]
            ivs, vmap, _, _ = spatial()
            for ax, iv in zip(st.raxes, rivs):
                vmap[ax.var] = iv.var
            src = low.emit_value(st.expr, vmap, low.default_load)
            body = low.with_lets([src], lambda v: BufferStore(
                part, _combine(st.combiner, BufferLoad(part, (lane,)), v[0]), (lane,)))
            return _block(self._block_name(st.name), ivs + rivs,
                          list(values) + rloops[:-1] + [k_value], body)

        ko, li = rloops[-1], Var(low.names.fresh("lane"), "int64")
        main: Stmt = For(ko, i64(0), i64(extent // lanes), "serial",
                         For(li, i64(0), i64(lanes), "vectorized",
                             update(_tiled(ko, lanes, li), li)))
        tail = extent % lanes
        if tail:
            lt = Var(low.names.fresh("lane"), "int64")
            main = _seq([main, For(lt, i64(0), i64(tail), "serial",
                                   update(BinaryOp("+", i64(extent - tail), lt), lt))])
        for var, ext in reversed(list(zip(rloops[:-1], rexts[:-1]))):
            main = For(var, i64(0), ext, "serial", main)
        stmts.append(main)
        # Combine the lanes as a tree (halves folded onto each other, each
        # step a vector operation) rather than one serial chain of `lanes`.
        width = lanes // 2
        while width >= 2:
            lw = Var(low.names.fresh("lane"), "int64")
            stmts.append(For(lw, i64(0), i64(width), "vectorized",
                             BufferStore(part, _combine(st.combiner, BufferLoad(part, (lw,)),
                                                        BufferLoad(part, (lw + i64(width),))),
                                         (lw,))))
            width //= 2
        stmts.append(BufferStore(part, _combine(st.combiner, BufferLoad(part, (i64(0),)),
                                                BufferLoad(part, (i64(1),))), (i64(0),)))
        ivs, _, buf, idx = spatial()
        stmts.append(_block(self._block_name(st.name + "_lanes"), ivs, values, BufferStore(
            buf, _combine(st.combiner, BufferLoad(buf, idx), BufferLoad(part, (i64(0),))),
            idx)))
        self.level_buffers.append(part)  # allocated by the enclosing _level
        return _seq(stmts)

    # -- innermost part ----------------------------------------------------
    def _inner(self) -> Stmt:
        root = self.root
        if self.mode == "scalar":
            values = [self.axis_expr[ax] for ax in root.axes]
            stmts = self._emit_stage(root, values, lambda ivs: (root.buffer, tuple(ivs)))
            return _seq(stmts)
        return self._emit_tile()

    def _emit_tile(self) -> Stmt:
        """Row (1 x JT) or tile (IT x JT) accumulation of the anchor plus the epilogue."""
        low = self.low
        root, anchor, m = self.root, self.anchor, self.m
        it, jt = self.it, self.jt
        i64 = lambda v: IntImm(v, "int64")  # noqa: E731
        acc_shape = (i64(it), i64(jt)) if it > 1 else (i64(jt),)
        acc = Buffer(low.names.fresh(anchor.name + "_acc"), acc_shape, anchor.tensor.dtype)
        jo = self.jo_var

        def tile_loops(make_body: Callable[[PrimExpr | None, Var], Stmt], ii_kind: str) -> Stmt:
            ji = Var(low.names.fresh(root.axes[m - 1].name + "_i"), "int64")
            ii = Var(low.names.fresh(root.axes[m - 2].name + "_i"), "int64") if it > 1 else None
            inner = make_body(ii, ji)
            kind = "vectorized" if self.opt.vectorize and jt >= 2 else "serial"
            stmt: Stmt = For(ji, i64(0), i64(jt), kind, inner)
            if ii is not None:
                stmt = For(ii, i64(0), i64(it), ii_kind, stmt)
            return stmt

        def set_axes(ii: Var | None, ji: Var) -> None:
            self.axis_expr[root.axes[m - 1]] = _tiled(jo, jt, ji)
            if ii is not None:
                self.axis_expr[root.axes[m - 2]] = _tiled(self.io_var, it, ii)

        def acc_index(ii: Var | None, ji: Var) -> tuple[PrimExpr, ...]:
            return (ii, ji) if ii is not None else (ji,)

        # anchor element bound to the current tile position
        def anchor_values() -> list[PrimExpr]:
            if anchor is root:
                return [self.axis_expr[ax] for ax in root.axes]
            return [self._root_expr(b) for b in anchor.binding]

        shape = [low._map_shape(s) for s in anchor.tensor.shape]
        rexts = [low._map_shape(ax.extent) for ax in anchor.raxes]

        def init_body(ii: Var | None, ji: Var) -> Stmt:
            set_axes(ii, ji)
            ivs = [self._iter_var(ax.name, ext, "S") for ax, ext in zip(anchor.axes, shape)]
            init = low._map_shape(anchor.init)
            return _block(self._block_name(anchor.name + "_init"), ivs, anchor_values(),
                         BufferStore(acc, init, acc_index(ii, ji)))

        rloops = [Var(low.names.fresh(ax.var.name), "int64") for ax in anchor.raxes]

        def update_body(ii: Var | None, ji: Var) -> Stmt:
            set_axes(ii, ji)
            ivs = [self._iter_var(ax.name, ext, "S") for ax, ext in zip(anchor.axes, shape)]
            rivs = [self._iter_var(ax.var.name, ext, "R") for ax, ext in zip(anchor.raxes, rexts)]
            vmap: dict[Var, PrimExpr] = {ax: iv.var for ax, iv in zip(anchor.axes, ivs)}
            for ax, iv in zip(anchor.raxes, rivs):
                vmap[ax.var] = iv.var
            src = low.emit_value(anchor.expr, vmap, low.default_load)
            idx = acc_index(ii, ji)
            body = low.with_lets([src], lambda v: BufferStore(
                acc, _combine(anchor.combiner, BufferLoad(acc, idx), v[0]), idx))
            return _block(self._block_name(anchor.name + "_update"), ivs + rivs,
                         anchor_values() + rloops, body)

        def epilogue_body(ii: Var | None, ji: Var) -> Stmt:
            set_axes(ii, ji)
            ivs = [self._iter_var(ax.name, ext, "S") for ax, ext in zip(root.axes, self.shape)]
            values = [self.axis_expr[ax] for ax in root.axes]
            idx = acc_index(ii, ji)
            if anchor is root:
                value: PrimExpr = BufferLoad(acc, idx)
            else:
                vmap = {ax: iv.var for ax, iv in zip(root.axes, ivs)}

                def load(t: Tensor, ind: tuple[PrimExpr, ...]) -> PrimExpr:
                    if not t.is_placeholder and low.stages.get(id(t)) is anchor:
                        return BufferLoad(acc, idx)
                    return low.default_load(t, ind)
                value = low.emit_value(root.expr, vmap, load)
            body = low.with_lets([value], lambda v: BufferStore(root.buffer, v[0],
                                                                tuple(iv.var for iv in ivs)))
            return _block(self._block_name(root.name), ivs, values, body)

        stmts: list[Stmt] = [tile_loops(init_body, "unroll")]
        upd: Stmt = tile_loops(update_body, "unroll")
        for var, ext in reversed(list(zip(rloops, rexts))):
            upd = For(var, i64(0), ext, "serial", upd)
        stmts.append(upd)
        stmts.append(tile_loops(epilogue_body, "serial"))
        return Allocate(acc, _seq(stmts))


def _block(name: str, iter_vars: Sequence[IterVar], values: Sequence[PrimExpr], body: Stmt,
           init: Stmt | None = None) -> Block:
    """A Block with its read and write regions (single points, or the whole
    dimension when an index depends on a value computed inside the block)."""
    reads: list[tir.BufferRegion] = []
    writes: list[tir.BufferRegion] = []
    seen: set[Any] = set()
    let_vars: set[int] = set()
    exprs: list[PrimExpr] = []
    stores: list[BufferStore] = []
    for stmt in (init, body):
        while isinstance(stmt, LetStmt):
            exprs.append(stmt.value)
            let_vars.add(id(stmt.var))
            stmt = stmt.body
        if isinstance(stmt, BufferStore):
            exprs.append(stmt.value)
            exprs.extend(stmt.indices)
            stores.append(stmt)

    def region(buf: Buffer, indices: Sequence[PrimExpr]) -> tir.BufferRegion:
        dims = []
        for d, i in enumerate(indices):
            if isinstance(i, IntImm):
                dynamic = False
            elif isinstance(i, Var):
                dynamic = id(i) in let_vars
            else:
                dynamic = _b.any(isinstance(n, BufferLoad) or id(n) in let_vars
                                 for n in _post_order([i]))
            dims.append((IntImm(0, "int64"), buf.shape[d]) if dynamic
                        else (i, IntImm(1, "int64")))
        return tir.BufferRegion(buf, tuple(dims))

    for n in _post_order(exprs):
        if isinstance(n, BufferLoad):
            key = (id(n.buffer), tuple(_expr_key(i) for i in n.indices))
            if key not in seen:
                seen.add(key)
                reads.append(region(n.buffer, n.indices))
    wseen: set[Any] = set()
    for st in stores:
        key = (id(st.buffer), tuple(_expr_key(i) for i in st.indices))
        if key not in wseen:
            wseen.add(key)
            writes.append(region(st.buffer, st.indices))
    return Block(name, tuple(iter_vars), tuple(values), body, init, tuple(reads), tuple(writes))


def _tiled(outer: PrimExpr, factor: int, inner: Var) -> PrimExpr:
    """``outer * factor + inner`` (just ``inner`` when outer is the constant 0)."""
    if isinstance(outer, IntImm) and outer.value == 0:
        return inner
    return BinaryOp("+", BinaryOp("*", outer, IntImm(factor, "int64")), inner)


def _costly(e: PrimExpr) -> bool:
    """True when computing ``e`` does arithmetic beyond index computations."""
    for n in _post_order([e]):
        if isinstance(n, (tir.Call, Select)):
            return True
        if isinstance(n, BinaryOp) and not tir.is_int(n.dtype) and not (
                tir.is_bool(n.dtype) and tir.is_int(n.lhs.dtype)):
            return True
    return False


def _loads_of(e: PrimExpr) -> list[ProducerLoad]:
    return [n for n in _post_order([e]) if isinstance(n, ProducerLoad)]


def _last_index_uses(ld: ProducerLoad, var: Var) -> bool:
    """True when the innermost index of ``ld`` uses ``var`` (contiguous along it)."""
    if not ld.indices:
        return False
    return _b.any(n is var for n in _post_order([ld.indices[-1]]))


def _pick_tile(extent: int, candidates: tuple[int, ...], whole_max: int, cap: int) -> int | None:
    if extent <= whole_max:
        return extent
    for c in candidates:
        if extent % c == 0:
            return c
    return extent if extent <= cap else None


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

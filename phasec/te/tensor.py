"""The data structures of tensor expressions: tensors, the operations that
produce them, the two expression nodes only TE has (a tensor element read,
a reduction), and the walk over expressions made of TIR and TE nodes.

Every :class:`Tensor` is produced by a :class:`PlaceholderOp` (a kernel
input), a :class:`ComputeOp` (one scalar expression per output element) or
an :class:`ExternOp` (hand-written TIR). The constructors users call
(``placeholder``, ``compute``...) are in :mod:`phasec.te.operation`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from phasec.errors import PhasecError
from phasec.ir import tir
from phasec.ir.node import Span, node, set_field
from phasec.ir.tir import (
    BinaryOp, Buffer, BufferLoad, Cast, IntImm, IterVar, Not, PrimExpr, Select, Stmt, Var,
)

__all__ = [
    "TEError", "ProducerLoad", "Reduce", "PlaceholderOp", "ComputeOp", "ExternOp", "Tensor",
    "View", "ROW_LOCAL", "OWN_NEST", "STORE_THROUGH", "children", "rebuild", "post_order",
]


class TEError(PhasecError):
    """A tensor expression is malformed (wrong index count, a misplaced reduction...)."""


#: ``compute(..., attrs={ROW_LOCAL: True})``: a hint that the tensor is worth
#: computing once per row into a local buffer (its consumers read each of
#: its elements several times, e.g. softmax's exp, read by the sum and by
#: the division). Falls back to inlining when it cannot be attached that way.
ROW_LOCAL = "te.row_local"

#: ``compute(..., attrs={OWN_NEST: True})``: the tensor is computed in a loop
#: nest of its own, never attached into a consumer's (a convolution whose
#: result a relayout reads: attached, its reduction would run one output
#: element at a time instead of in the GEMM's tiles).
OWN_NEST = "te.own_nest"

#: ``extern(..., store_through=builder)``: the extern can store each element
#: through a callback, ``builder(input_buffers, out, store)`` with
#: ``store(value, indices) -> Stmt``, so that its one elementwise consumer
#: (a bias and activation, read at the same indices) is applied to the value
#: before the store, into the consumer's buffer, instead of in a pass of its
#: own over the extern's output (see :meth:`Lowering._store_through`).
STORE_THROUGH = "te.store_through"


# --------------------------------------------------------------------------
# Expression nodes
# --------------------------------------------------------------------------


@node(derived=("dtype",))
class ProducerLoad(PrimExpr):
    """``T[i, j]`` inside a compute body: reads an element of a TE tensor.

    Only exists in tensor expressions; :func:`phasec.te.create_prim_func`
    replaces it by a ``BufferLoad`` or by the producer's inlined expression.
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
    ``sum``, ``prod``, ``max``, ``min``, ``fast_max`` (see
    :func:`phasec.te.operation.fast_max`); ``init`` is its identity element.
    """

    combiner: str
    source: PrimExpr
    axis: tuple[IterVar, ...]
    init: PrimExpr
    dtype: str
    span: Span | None = None

    def __post_init__(self) -> None:
        set_field(self, "axis", tuple(self.axis))


# --------------------------------------------------------------------------
# Operations and tensors
# --------------------------------------------------------------------------


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
    """The producer of a tensor computed by hand-written TIR
    (:func:`phasec.te.operation.extern`)."""

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


class View(Tensor):
    """A tensor whose elements are another's, reindexed: ``V[idx]`` is the
    load ``index(*idx)`` of that tensor, made when it is indexed, so no
    compute's body reads ``V`` itself (schedules see the source's loads, a
    weight's constness and layout included). ``op`` is the equivalent
    compute, for what takes a tensor whole: an extern given ``V`` as an
    input reads it materialized."""

    __slots__ = ("source", "index")

    def __init__(self, source: Tensor, index: Callable[..., ProducerLoad], op: ComputeOp,
                 shape: tuple[PrimExpr, ...], name: str) -> None:
        super().__init__(shape, source.dtype, name, op)
        self.source = source
        self.index = index

    def __getitem__(self, indices: Any) -> ProducerLoad:
        load = super().__getitem__(indices)
        return self.index(*load.indices)


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


# --------------------------------------------------------------------------
# Walking expressions of TIR and TE nodes
# --------------------------------------------------------------------------


def children(e: PrimExpr) -> tuple[PrimExpr, ...]:
    """The operands of ``e`` (indices of a load, the source of a reduction)."""
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


def rebuild(e: PrimExpr, kids: Sequence[PrimExpr]) -> PrimExpr:
    """``e`` with its operands (:func:`children`) replaced by ``kids`` (``e``
    itself when they are the same objects)."""
    old = children(e)
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


def post_order(roots: Sequence[PrimExpr]) -> list[PrimExpr]:
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
        for c in reversed(children(e)):
            if id(c) not in seen:
                stack.append((c, False))
    return out

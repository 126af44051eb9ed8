"""ONNX sequences whose length and positions are known at import, expanded
into their tensors: SequenceEmpty, SequenceConstruct, SequenceInsert,
SequenceErase, SequenceAt, SequenceLength, SplitToSequence and
ConcatFromSequence.

phasec has no sequence value in its IR. A sequence built in the graph is a
:class:`SeqValue` during import: the tuple of its tensors' values. Every
sequence operator then acts on that tuple at import (its positions must be
known then: constants, or graph inputs the backend binds), and only the
tensors reach the IR. A sequence graph output is a Relax tuple of its
tensors (the ONNX backend returns it as a list). Not supported: sequence
graph inputs, sequences through control flow (a Loop carrying one), and
any other operator taking a sequence (SequenceMap, Optional...).
"""

from __future__ import annotations

import numpy as np

from phasec.frontend.onnx._context import NodeContext, SeqValue, Unsupported, Value
from phasec.frontend.onnx._registry import converter
from phasec.frontend.onnx.ops_tensor import norm_axis

__all__ = ["SeqValue", "SEQUENCE_OPS"]


#: the operators that take a sequence (the importer refuses any other)
SEQUENCE_OPS = frozenset({"SequenceInsert", "SequenceErase", "SequenceAt", "SequenceLength",
                          "ConcatFromSequence", "Identity"})


def _seq(ctx: NodeContext, i: int) -> SeqValue:
    v = ctx.input(i)
    if not isinstance(v, SeqValue):
        raise Unsupported(f"input {i} is not a sequence")
    return v


def _position(ctx: NodeContext, i: int, n: int, default: int, insert: bool = False) -> int:
    """Input ``i`` (a position, known at import) in ``0..n`` (``insert``) or ``0..n-1``."""
    if not ctx.has(i):
        return default
    p = int(ctx.const_scalar(i, "position"))
    hi = n if insert else n - 1
    if not -n <= p <= hi:
        raise Unsupported(f"position {p} is outside a sequence of {n} tensors")
    return p + n if p < 0 else p


def _check_same(ctx: NodeContext, items: tuple) -> None:
    dtypes = {ctx.dtype(v) for v in items}
    if len(dtypes) > 1:
        raise Unsupported(f"a sequence of tensors of dtypes {sorted(dtypes)}")


@converter("SequenceEmpty", since=11)
def _empty(ctx: NodeContext) -> Value:
    return SeqValue()


@converter("SequenceConstruct", since=11)
def _construct(ctx: NodeContext) -> Value:
    items = tuple(ctx.input(i) for i in range(len(ctx.inputs)))
    if any(isinstance(v, SeqValue) for v in items):
        raise Unsupported("a sequence of sequences")
    _check_same(ctx, items)
    return SeqValue(items)


@converter("SequenceInsert", since=11)
def _insert(ctx: NodeContext) -> Value:
    seq = _seq(ctx, 0)
    t = ctx.input(1)
    pos = _position(ctx, 2, len(seq), len(seq), insert=True)
    out = SeqValue(seq[:pos] + (t,) + seq[pos:])
    _check_same(ctx, out)
    return out


@converter("SequenceErase", since=11)
def _erase(ctx: NodeContext) -> Value:
    seq = _seq(ctx, 0)
    if not seq:
        raise Unsupported("SequenceErase of an empty sequence")
    pos = _position(ctx, 1, len(seq), len(seq) - 1)
    return SeqValue(seq[:pos] + seq[pos + 1:])


@converter("SequenceAt", since=11)
def _at(ctx: NodeContext) -> Value:
    seq = _seq(ctx, 0)
    if not seq:
        raise Unsupported("SequenceAt of an empty sequence")
    return seq[_position(ctx, 1, len(seq), 0) if ctx.has(1) else 0]


@converter("SequenceLength", since=11)
def _length(ctx: NodeContext) -> Value:
    return np.array(len(_seq(ctx, 0)), np.int64)


@converter("SplitToSequence", since=11)
def _split(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    dims = ctx.shape(x)
    axis = norm_axis(ctx, ctx.attr("axis", 0), len(dims))
    dim = dims[axis]
    if not isinstance(dim, int):
        raise Unsupported(f"SplitToSequence along a symbolic axis ({dim})")
    keepdims = ctx.attr("keepdims", 1) == 1
    if ctx.has(1):
        split = np.asarray(ctx.const(1, "split")).astype(np.int64)
        if split.ndim == 0:  # chunks of this size, the last one smaller
            size = int(split)
            if size < 1:
                raise Unsupported(f"split size {size}")
            sizes = [size] * (dim // size) + ([dim % size] if dim % size else [])
        else:
            sizes = [int(s) for s in split]
            if any(s < 0 for s in sizes) or sum(sizes) != dim:
                raise Unsupported(f"split sizes {sizes} for an axis of {dim}")
        keepdims = True  # (ONNX: keepdims applies without 'split' only)
    else:
        sizes = [1] * dim
    items, start = [], 0
    for s in sizes:
        part = ctx.emit("strided_slice", x, axes=[axis], begin=[start], end=[start + s])
        items.append(part if keepdims else ctx.emit("squeeze", part, axis=[axis]))
        start += s
    return SeqValue(items)


@converter("ConcatFromSequence", since=11)
def _concat(ctx: NodeContext) -> Value:
    seq = _seq(ctx, 0)
    if not seq:
        raise Unsupported("ConcatFromSequence of an empty sequence")
    new_axis = ctx.attr("new_axis", 0) == 1
    rank = ctx.ndim(seq[0]) + (1 if new_axis else 0)
    axis = norm_axis(ctx, ctx.attr("axis"), rank) if ctx.attr("axis") is not None else None
    if axis is None:
        raise Unsupported("ConcatFromSequence without its axis")
    items = [ctx.emit("expand_dims", v, axis=[axis]) for v in seq] if new_axis else list(seq)
    return items[0] if len(items) == 1 else ctx.emit("concat", items, axis=axis)

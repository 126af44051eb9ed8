"""ONNX losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss) and
Hardmax (the quantization operators are in ops_quant.py). The losses map to
``R.nn.nll_loss`` (after ``R.nn.log_softmax`` over the class axis for
SoftmaxCrossEntropyLoss).
"""

from __future__ import annotations

import numpy as np

from phasec.frontend.onnx._context import NodeContext, Unsupported, Value
from phasec.frontend.onnx._registry import converter
from phasec.frontend.onnx.ops_nn import softmax_axis_2d

__all__: list[str] = []


def _nll(ctx: NodeContext, logp: Value, target: Value, weight: Value | None) -> Value:
    if ctx.ndim(logp) < 2:
        raise Unsupported(f"input of rank {ctx.ndim(logp)} (expects (N, C, ...))")
    reduction = ctx.attr("reduction", "mean")
    if reduction not in ("none", "sum", "mean"):
        raise Unsupported(f"attribute reduction={reduction!r}")
    ignore = ctx.attr("ignore_index")
    attrs = dict(reduction=reduction)
    if ignore is not None:
        attrs["ignore_index"] = int(ignore)
    else:
        attrs["ignore_index"] = -(1 << 62)  # no class is ignored
    args = [logp, target] + ([weight] if weight is not None else [])
    return ctx.emit("nn.nll_loss", *args, **attrs)


@converter("NegativeLogLikelihoodLoss", since=12)
def _nll_loss(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    if not ctx.dtype(x).startswith("float"):
        raise Unsupported(f"dtype {ctx.dtype(x)}")
    return _nll(ctx, x, ctx.input(1), ctx.optional(2))


@converter("SoftmaxCrossEntropyLoss", since=12)
def _softmax_ce(ctx: NodeContext) -> list[Value]:
    x = ctx.input(0)
    if not ctx.dtype(x).startswith("float"):
        raise Unsupported(f"dtype {ctx.dtype(x)}")
    if ctx.ndim(x) < 2:
        raise Unsupported(f"scores of rank {ctx.ndim(x)}")
    logp = ctx.emit("nn.log_softmax", x, axis=1)
    return [_nll(ctx, logp, ctx.input(1), ctx.optional(2)), logp]


@converter("Hardmax")
def _hardmax(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    if not ctx.dtype(x).startswith("float"):
        raise Unsupported(f"dtype {ctx.dtype(x)}")
    return softmax_axis_2d(ctx, x, _hardmax_last)


def _hardmax_last(ctx: NodeContext, x: Value, axis: int) -> Value:
    """One at the first index holding the maximum along ``axis``, zeros elsewhere."""
    dims = ctx.shape(x)
    d = dims[axis]
    if not isinstance(d, int):
        raise Unsupported("Hardmax along a symbolic dimension")
    shape = [1] * len(dims)
    shape[axis] = d
    iota = ctx.iota(d, shape)
    best = ctx.emit("max", x, axis=[axis], keepdims=True)
    first = ctx.emit("min", ctx.emit("where", ctx.emit("equal", x, best), iota,
                                     np.asarray(d, np.int64)), axis=[axis], keepdims=True)
    return ctx.emit("astype", ctx.emit("equal", iota, first), dtype=ctx.dtype(x))

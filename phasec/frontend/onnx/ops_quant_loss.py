"""ONNX losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss) and
Hardmax (the quantization operators are in ops_quant.py). The losses map to
``R.nn.nll_loss`` (after ``R.nn.log_softmax`` over the class axis for
SoftmaxCrossEntropyLoss).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from phasec.frontend.errors import FrontendError
from phasec.frontend.onnx._context import NodeContext, Unsupported, Value, is_const
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
    target = _checked_target(ctx, target, ctx.shape(logp)[1], ignore)
    args = [logp, target] + ([weight] if weight is not None else [])
    return ctx.emit("nn.nll_loss", *args, **attrs)


def _checked_target(ctx: NodeContext, target: Value, classes: Any, ignore: int | None) -> Value:
    """The targets with every class index in range, as ONNX Runtime reads
    them (its function body gathers with them: a negative index counts from
    the end): an index outside ``[-C, C)`` that is not ``ignore_index`` is an
    error -- at import for known targets, at run time (a checked ``take``)
    otherwise -- never a NaN or a silently dropped sample."""
    if not isinstance(classes, int):
        return target
    if is_const(target):
        t = np.asarray(target).astype(np.int64)
        bad = (t < -classes) | (t >= classes)
        if ignore is not None:
            bad &= t != ignore
        if bad.any():
            raise FrontendError(f"target {int(t[bad].reshape(-1)[0])} is not a class index "
                                f"(there are {classes} classes"
                                f"{'' if ignore is None else f', ignore_index is {ignore}'})")
        return np.where((t < 0) & (t != (ignore if ignore is not None else 0)),
                        t + classes, t).astype(np.int64)
    t = target if ctx.dtype(target) == "int64" else ctx.emit("astype", target, dtype="int64")
    if ignore is not None:
        ignored = ctx.emit("equal", t, np.asarray(ignore, np.int64))
        probe = ctx.emit("where", ignored, np.asarray(0, np.int64), t)
    else:
        probe = t
    # the gather fails at run time on an index outside [-C, C)
    checked = ctx.emit("take", np.arange(classes, dtype=np.int64), probe, axis=0)
    return checked if ignore is None else ctx.emit("where", ignored, t, checked)


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

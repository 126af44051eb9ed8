"""ONNX quantization (QuantizeLinear, DequantizeLinear), losses
(NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss) and Hardmax.

QuantizeLinear/DequantizeLinear map to ``R.quantize``/``R.dequantize``
(round half to even, saturating), per tensor or per axis; blocked
quantization and the float8/int4 types are not supported. The losses map to
``R.nn.nll_loss`` (after ``R.nn.log_softmax`` over the class axis for
SoftmaxCrossEntropyLoss).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from phasec.frontend.errors import FrontendError
from phasec.frontend.onnx._context import NodeContext, Unsupported, Value, is_const
from phasec.frontend.onnx._registry import converter
from phasec.frontend.onnx.ops_math import onnx_to_dtype
from phasec.frontend.onnx.ops_nn import softmax_axis_2d
from phasec.frontend.onnx.ops_tensor import norm_axis

__all__: list[str] = []

_Q_OUT = ("int8", "uint8", "int16", "uint16")


def _qdq_axis(ctx: NodeContext, x: Value, scale: Value) -> int:
    if ctx.attr("block_size", 0):
        raise Unsupported("blocked quantization (attribute block_size)")
    if ctx.ndim(scale) > 1:  # (blocked quantization, the only other case, is refused above)
        raise FrontendError(f"the scale must be a scalar or 1-D, not of rank {ctx.ndim(scale)}")
    if ctx.ndim(scale) == 0 or ctx.shape(scale) == [1]:
        return -1
    return norm_axis(ctx, ctx.attr("axis", 1), ctx.ndim(x))


@converter("QuantizeLinear", since=10)
def _quantize(ctx: NodeContext) -> Value:
    x, scale = ctx.input(0), ctx.input(1)
    if ctx.has(2):
        zp = ctx.input(2)
        out = ctx.dtype(zp)
    else:
        out = onnx_to_dtype(ctx.attr("output_dtype"), "output type") \
            if ctx.attr("output_dtype") else "uint8"
        zp = np.zeros((), out)
    if out not in _Q_OUT:
        raise Unsupported(f"quantizing to {out}")
    if ctx.dtype(x) not in ("float32", "float16") or ctx.dtype(scale) != ctx.dtype(x):
        raise Unsupported(f"quantizing {ctx.dtype(x)} with a {ctx.dtype(scale)} scale")
    axis = _qdq_axis(ctx, x, scale)
    return ctx.emit("quantize", x, scale, zp, axis=axis, out_dtype=out)


@converter("DequantizeLinear", since=10)
def _dequantize(ctx: NodeContext) -> Value:
    x, scale = ctx.input(0), ctx.input(1)
    dt = ctx.dtype(x)
    if dt not in ("int8", "uint8", "int16", "uint16", "int32"):
        raise Unsupported(f"dequantizing {dt}")
    zp = ctx.input(2) if ctx.has(2) else np.zeros((), dt)
    out = ctx.dtype(scale)
    if ctx.attr("output_dtype"):
        out = onnx_to_dtype(ctx.attr("output_dtype"), "output type")
    if out not in ("float32", "float16"):
        raise Unsupported(f"dequantizing to {out}")
    axis = _qdq_axis(ctx, x, scale)
    return ctx.emit("dequantize", x, scale, zp, axis=axis, out_dtype=out)


@converter("DynamicQuantizeLinear", since=11)
def _dynamic_quantize(ctx: NodeContext) -> list[Value]:
    x = ctx.input(0)
    if ctx.dtype(x) != "float32":
        raise Unsupported(f"dtype {ctx.dtype(x)}")
    zero = np.zeros((), np.float32)
    # the range always holds 0; scale = (max - min) / 255, zero point round(-min / scale)
    lo = ctx.emit("minimum", ctx.emit("min", x), zero)
    hi = ctx.emit("maximum", ctx.emit("max", x), zero)
    scale = ctx.emit("divide", ctx.emit("subtract", hi, lo), np.asarray(255, np.float32))
    zp = ctx.emit("round", ctx.emit("divide", ctx.emit("negative", lo), scale))
    zp = ctx.emit("astype", ctx.emit("clip", zp, min=0.0, max=255.0), dtype="uint8")
    y = ctx.emit("quantize", x, scale, zp, axis=-1, out_dtype="uint8")
    return [y, scale, zp]


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

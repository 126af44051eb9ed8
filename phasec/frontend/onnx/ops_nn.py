"""ONNX neural-network operators: convolutions, pooling, normalizations,
Gemm/MatMul, softmax, dropout, LRN (Resize is in ops_image.py).

Composite operators become phasec operators: Gemm is ``permute_dims``,
``matmul``, ``multiply`` and ``add``; BatchNormalization (inference) is a
per-channel scale and shift (with constant statistics both fold at import,
so the pair fuses into the preceding convolution); LRN is an average pool
over channels of the squared input; LayerNormalization maps to
``R.nn.layer_norm`` when its scale has the normalized shape.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from phasec.frontend.errors import FrontendError
from phasec.frontend.onnx._context import NodeContext, Unsupported, Value, is_const
from phasec.frontend.onnx._registry import converter
from phasec.frontend.onnx.ops_math import scalar
from phasec.frontend.onnx.ops_tensor import norm_axis, prod_dims, reshape

__all__ = ["in_float32", "back_to_dtype", "softmax_axis_2d"]


def _float_input(ctx: NodeContext, i: int = 0) -> Value:
    x = ctx.input(i)
    if not ctx.dtype(x).startswith("float"):
        raise Unsupported(f"dtype {ctx.dtype(x)} (phasec computes {ctx.op_type} on floats)")
    return x


def _channel_shape(ndim: int, c: Any, axis: int = 1) -> tuple[Any, ...]:
    """(1, C, 1, 1...) for a rank-``ndim`` tensor with channels on ``axis``."""
    return tuple(c if i == axis else 1 for i in range(ndim))


def _spatial_pads(ctx: NodeContext, x: Value, kernel: list[int], strides: list[int],
                  dilations: list[int]) -> list[int]:
    """ONNX pads (begins, then ends) after resolving ``auto_pad``."""
    k = len(kernel)
    auto = ctx.attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = list(ctx.attr("pads", [0] * (2 * k)))
        if len(pads) != 2 * k:
            raise Unsupported(f"pads {pads} for {k} spatial dimensions")
        return pads
    if auto == "VALID":
        return [0] * (2 * k)
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise Unsupported(f"attribute auto_pad={auto!r}")
    dims = ctx.shape(x)[2:]
    if not all(isinstance(d, int) for d in dims):
        raise Unsupported(f"auto_pad={auto} on symbolic spatial dimensions")
    begins, ends = [], []
    for d, kk, s, dl in zip(dims, kernel, strides, dilations):
        out = -(-d // s)
        total = max((out - 1) * s + (kk - 1) * dl + 1 - d, 0)
        small, big = total // 2, total - total // 2
        begins.append(small if auto == "SAME_UPPER" else big)
        ends.append(big if auto == "SAME_UPPER" else small)
    return begins + ends


def _window_attrs(ctx: NodeContext, x: Value, kernel: list[int] | None = None
                  ) -> tuple[list[int], list[int], list[int], list[int]]:
    n_spatial = ctx.ndim(x) - 2
    if n_spatial not in (1, 2, 3):
        raise Unsupported(f"{ctx.op_type} on a rank-{ctx.ndim(x)} tensor "
                          "(1 to 3 spatial dimensions are supported)")
    kernel = list(ctx.attr("kernel_shape", kernel or []))
    if len(kernel) != n_spatial:
        raise Unsupported(f"kernel_shape {kernel} for {n_spatial} spatial dimensions")
    strides = list(ctx.attr("strides", [1] * n_spatial))
    dilations = list(ctx.attr("dilations", [1] * n_spatial))
    pads = _spatial_pads(ctx, x, kernel, strides, dilations)
    return kernel, strides, dilations, pads


_LAYOUTS = {1: ("NCW", "OIW", "IOW"), 2: ("NCHW", "OIHW", "IOHW"), 3: ("NCDHW", "OIDHW", "IODHW")}


def in_float32(ctx: NodeContext, values: list[Value]) -> tuple[list[Value], str]:
    """float16 operands as float32 (products then accumulate in float32, as
    ONNX Runtime's kernels do); returns them and the dtype to cast back to."""
    dtype = ctx.dtype(values[0])
    if dtype != "float16":
        return values, dtype
    return [ctx.emit("astype", v, dtype="float32") for v in values], dtype


def back_to_dtype(ctx: NodeContext, y: Value, dtype: str) -> Value:
    """``y`` cast back to ``dtype`` (what :func:`in_float32` returned), if it is not that."""
    return y if ctx.dtype(y) == dtype else ctx.emit("astype", y, dtype=dtype)


@converter("Conv")
def _conv(ctx: NodeContext) -> Value:
    _float_input(ctx)
    (x, w), dtype = in_float32(ctx, [ctx.input(0), ctx.input(1)])
    wshape = ctx.shape(w)
    kernel, strides, dilations, pads = _window_attrs(ctx, x, wshape[2:])
    _check_kernel_shape(kernel, wshape)
    n = len(kernel)
    data_layout, kernel_layout, _ = _LAYOUTS[n]
    y = ctx.emit(f"nn.conv{n}d", x, w, strides=strides, padding=pads, dilation=dilations,
                 groups=int(ctx.attr("group", 1)), data_layout=data_layout,
                 kernel_layout=kernel_layout, out_layout=data_layout)
    y = back_to_dtype(ctx, y, dtype)
    if ctx.has(2):
        b = ctx.input(2)
        y = ctx.emit("add", y, reshape(ctx, b, list(_channel_shape(n + 2, ctx.shape(b)[0]))))
    return y


def _check_kernel_shape(kernel: list[Any], wshape: list[Any]) -> None:
    """``kernel_shape`` is the weight's spatial shape where both are known
    (as ONNX Runtime checks when it runs the node): the window comes from the
    weight, so another value was silently ignored."""
    spatial = wshape[2:]
    if len(kernel) == len(spatial) and all(isinstance(d, int) for d in spatial) and \
            [int(k) for k in kernel] != spatial:
        raise FrontendError(f"kernel_shape {[int(k) for k in kernel]} does not match the "
                            f"weight's spatial shape {spatial}")


@converter("ConvTranspose")
def _conv_transpose(ctx: NodeContext) -> Value:
    _float_input(ctx)
    (x, w), dtype = in_float32(ctx, [ctx.input(0), ctx.input(1)])
    wshape = ctx.shape(w)
    n = ctx.ndim(x) - 2
    if n not in (1, 2, 3):
        raise Unsupported(f"ConvTranspose on a rank-{ctx.ndim(x)} tensor")
    kernel = list(ctx.attr("kernel_shape", wshape[2:]))
    _check_kernel_shape(kernel, wshape)
    strides = list(ctx.attr("strides", [1] * n))
    dilations = list(ctx.attr("dilations", [1] * n))
    out_pad = list(ctx.attr("output_padding", [0] * n))
    group = int(ctx.attr("group", 1))
    auto = ctx.attr("auto_pad", "NOTSET")
    out_shape = ctx.attr("output_shape")
    in_dims = ctx.shape(x)[2:]
    if out_shape is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        if not all(isinstance(d, int) for d in in_dims):
            raise Unsupported("output_shape/auto_pad on symbolic spatial dimensions")
        if out_shape is None:
            out_shape = [d * s for d, s in zip(in_dims, strides)]
        out_shape = list(out_shape)[-n:]
        begins, ends = [], []
        for i in range(n):
            total = (strides[i] * (in_dims[i] - 1) + out_pad[i] + (kernel[i] - 1) * dilations[i]
                     + 1 - out_shape[i])
            if total < 0:  # the requested size needs extra rows at the end
                out_pad[i] -= total
                total = 0
            half = total // 2
            if auto == "SAME_UPPER":
                begins.append(half)
                ends.append(total - half)
            else:
                begins.append(total - half)
                ends.append(half)
        pads = begins + ends
    elif auto == "VALID":
        pads = [0] * (2 * n)
    elif auto in ("NOTSET", ""):
        pads = list(ctx.attr("pads", [0] * (2 * n)))
    else:
        raise Unsupported(f"attribute auto_pad={auto!r}")
    if any(p >= max(s, d) for p, s, d in zip(out_pad, strides, dilations)):
        raise Unsupported(f"output_padding {out_pad} not smaller than strides {strides} "
                          f"or dilations {dilations}")
    data_layout, _, kernel_layout = _LAYOUTS[n]
    # (the schedule runs it as stride**2 sub-pixel convolutions: te/schedules)
    y = ctx.emit(f"nn.conv{n}d_transpose", x, w, strides=strides, padding=pads,
                 output_padding=out_pad, dilation=dilations, groups=group,
                 data_layout=data_layout, kernel_layout=kernel_layout, out_layout=data_layout)
    y = back_to_dtype(ctx, y, dtype)
    if ctx.has(2):
        b = ctx.input(2)
        y = ctx.emit("add", y, reshape(ctx, b, list(_channel_shape(n + 2, ctx.shape(b)[0]))))
    return y


# ---------------------------------------------------------------------------
# pooling
# ---------------------------------------------------------------------------

def _only_batch_empty(ctx: NodeContext, x: Value) -> None:
    """A pooling's input may be empty only along N (ONNX Runtime's rule for
    every pooling: an empty channel or spatial axis is refused unless N is 0)."""
    dims = ctx.shape(x)
    if dims and all(isinstance(d, int) for d in dims) and 0 in dims and dims[0] != 0:
        raise FrontendError(f"{ctx.op_type} of shape {tuple(dims)}: only N may be 0")


def _pool(ctx: NodeContext, kind: str) -> Value:
    x = ctx.input(0)
    _only_batch_empty(ctx, x)
    dtype = ctx.dtype(x)
    if kind == "max" and dtype in ("int8", "uint8", "int16", "uint16"):
        # the maximum of small integers is exact in float32
        y = _pool_float(ctx, ctx.emit("astype", x, dtype="float32"), kind)
        return ctx.emit("astype", y, dtype=dtype)
    return _pool_float(ctx, _float_input(ctx), kind)


def _empty_pool(ctx: NodeContext, x: Value, kernel: list[int], strides: list[int],
                dilations: list[int], pads: list[int]) -> Value | None:
    """A pooling whose window is one element larger than the padded input has
    an empty output (as in ONNX Runtime, which sizes it ``(in + pads -
    window) / stride + 1``, C division); a still larger window is an error."""
    if ctx.attr("ceil_mode", 0):
        return None
    dims = ctx.shape(x)
    sizes = []
    k = len(kernel)
    for i, d in enumerate(dims[2:]):
        if not isinstance(d, int):
            return None
        num = d + pads[i] + pads[i + k] - ((kernel[i] - 1) * dilations[i] + 1)
        if strides[i] < 1:
            return None
        q = num // strides[i] if num >= 0 else -((-num) // strides[i])
        sizes.append(q + 1)
    if all(s > 0 for s in sizes):
        return None
    if any(s < 0 for s in sizes):
        raise FrontendError(f"the pooling window {kernel} is larger than the padded input "
                            f"{tuple(dims[2:])}")
    return ctx.emit("zeros", (*dims[:2], *sizes), dtype=ctx.dtype(x))


def _pool_float(ctx: NodeContext, x: Value, kind: str) -> Value:
    kernel, strides, dilations, pads = _window_attrs(ctx, x)
    empty = _empty_pool(ctx, x, kernel, strides, dilations, pads)
    if empty is not None:
        return empty
    n = len(kernel)
    layout = _LAYOUTS[n][0]
    ceil = bool(ctx.attr("ceil_mode", 0))
    attrs: dict[str, Any] = dict(pool_size=kernel, strides=strides, dilation=dilations,
                                 padding=pads, ceil_mode=ceil, layout=layout, out_layout=layout)
    if kind == "avg":
        attrs["count_include_pad"] = bool(ctx.attr("count_include_pad", 0))
    y = ctx.emit(f"nn.{kind}_pool{n}d", x, **attrs)
    return _drop_padding_window(ctx, x, y, strides, pads)


def _drop_padding_window(ctx: NodeContext, x: Value, y: Value, strides: list[int],
                         pads: list[int]) -> Value:
    if not ctx.attr("ceil_mode", 0):
        return y
    # ONNX drops a last window that would start in the right padding (as
    # PyTorch does); phasec's ceil_mode size (TVM's) keeps it: slice it off.
    in_dims, out_dims = ctx.shape(x)[2:], ctx.shape(y)[2:]
    axes, ends = [], []
    for i, (d, o) in enumerate(zip(in_dims, out_dims)):
        if isinstance(d, int) and isinstance(o, int) and o > 1 and (o - 1) * strides[i] >= d + pads[i]:
            axes.append(2 + i)
            ends.append(o - 1)
    if axes:
        y = ctx.emit("strided_slice", y, axes=axes, begin=[0] * len(axes), end=ends)
    return y


@converter("MaxPool")
def _max_pool(ctx: NodeContext) -> list[Value | None]:
    values = _pool(ctx, "max")
    if len(ctx.node.output) < 2 or not ctx.node.output[1]:
        return [values, None]
    x = ctx.input(0)
    kernel, strides, dilations, pads = _window_attrs(ctx, x)
    if _empty_pool(ctx, x, kernel, strides, dilations, pads) is not None:
        return [values, ctx.emit("zeros", tuple(ctx.shape(values)), dtype="int64")]
    indices = ctx.emit("nn.onnx_max_pool_indices", x, pool_size=kernel, strides=strides,
                       padding=pads, dilation=dilations, ceil_mode=bool(ctx.attr("ceil_mode", 0)),
                       storage_order=int(ctx.attr("storage_order", 0)))
    return [values, _drop_padding_window(ctx, x, indices, strides, pads)]


@converter("AveragePool")
def _avg_pool(ctx: NodeContext) -> Value:
    return _pool(ctx, "avg")


def _spatial_input(ctx: NodeContext, x: Value) -> None:
    """A global pooling's input: (N, C, D1, ...), empty only along N."""
    dims = ctx.shape(x)
    if len(dims) < 3:
        raise FrontendError(f"{ctx.op_type} needs (N, C, D1, ...), not shape {tuple(dims)}")
    _only_batch_empty(ctx, x)


@converter("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(ctx: NodeContext) -> Value:
    x = _float_input(ctx)
    _spatial_input(ctx, x)
    axes = list(range(2, ctx.ndim(x)))
    return ctx.emit("mean" if ctx.op_type == "GlobalAveragePool" else "max", x, axis=axes,
                    keepdims=True)


@converter("LpPool")
def _lp_pool(ctx: NodeContext) -> Value:
    x = _float_input(ctx)
    _only_batch_empty(ctx, x)
    p = float(ctx.attr("p", 2))
    kernel, strides, dilations, pads = _window_attrs(ctx, x)
    empty = _empty_pool(ctx, x, kernel, strides, dilations, pads)
    if empty is not None:
        return empty
    n = len(kernel)
    layout = _LAYOUTS[n][0]
    xp = ctx.emit("power", ctx.emit("abs", x), scalar(ctx, p, x))
    # sum over the window = average with padding counted, times the window size
    avg = ctx.emit(f"nn.avg_pool{n}d", xp, pool_size=kernel, strides=strides, dilation=dilations,
                   padding=pads, ceil_mode=bool(ctx.attr("ceil_mode", 0)),
                   count_include_pad=True, layout=layout, out_layout=layout)
    total = ctx.emit("multiply", avg, scalar(ctx, float(np.prod(kernel)), x))
    return ctx.emit("power", total, scalar(ctx, _reciprocal(p), x))


@converter("GlobalLpPool")
def _global_lp_pool(ctx: NodeContext) -> Value:
    x = _float_input(ctx)
    _spatial_input(ctx, x)
    p = float(ctx.attr("p", 2))
    xp = ctx.emit("power", ctx.emit("abs", x), scalar(ctx, p, x))
    total = ctx.emit("sum", xp, axis=list(range(2, ctx.ndim(x))), keepdims=True)
    return ctx.emit("power", total, scalar(ctx, _reciprocal(p), x))


def _reciprocal(p: float) -> float:
    """1/p as ORT computes it, in IEEE arithmetic: p=0 gives inf (so a window
    of any non-zero element pools to inf, as in ORT), not ZeroDivisionError."""
    with np.errstate(divide="ignore"):
        return float(np.divide(1.0, p))


# ---------------------------------------------------------------------------
# normalizations
# ---------------------------------------------------------------------------

def _per_channel(ctx: NodeContext, v: Value, ndim: int) -> Value:
    """A per-channel parameter (C,) as (1, C, 1, ...); (C, D...) as (1, C, D...)."""
    dims = ctx.shape(v)
    if len(dims) == 1:
        return reshape(ctx, v, list(_channel_shape(ndim, dims[0])))
    return ctx.emit("expand_dims", v, axis=[0])


@converter("BatchNormalization")
def _batch_norm(ctx: NodeContext) -> list[Value | None]:
    x = _float_input(ctx)
    if ctx.attr("training_mode", 0):
        return _batch_norm_training(ctx, x)
    extra = [o for o in ctx.node.output[1:] if o]
    if extra and ctx.opset >= 9:
        raise Unsupported("running statistics outputs (training)")
    scale, bias, mean, var = (ctx.input(i) for i in range(1, 5))
    eps = float(ctx.attr("epsilon", 1e-5))
    n = ctx.ndim(x)
    # y = x * s + t with s = scale / sqrt(var + eps), t = bias - mean * s
    s = ctx.emit("divide", scale, ctx.emit("sqrt", ctx.emit("add", var, scalar(ctx, eps, var))))
    t = ctx.emit("subtract", bias, ctx.emit("multiply", mean, s))
    y = ctx.emit("add", ctx.emit("multiply", x, _per_channel(ctx, s, n)), _per_channel(ctx, t, n))
    return [y] + [None] * (len(ctx.node.output) - 1)


def _batch_norm_training(ctx: NodeContext, x: Value) -> list[Value | None]:
    """Training mode: the batch's statistics normalize, and the running
    statistics move towards them by ``1 - momentum`` (deterministic)."""
    scale, bias, run_mean, run_var = (ctx.input(i) for i in range(1, 5))
    eps = float(ctx.attr("epsilon", 1e-5))
    momentum = float(ctx.attr("momentum", 0.9))
    n = ctx.ndim(x)
    axes = [0] + list(range(2, n))
    mean_k, var_k = _moments(ctx, x, axes)  # (1, C, 1, ...), population variance
    inv = ctx.emit("rsqrt", ctx.emit("add", var_k, scalar(ctx, eps, x)))
    y = ctx.emit("multiply", ctx.emit("subtract", x, mean_k), inv)
    y = ctx.emit("add", ctx.emit("multiply", y, _per_channel(ctx, scale, n)),
                 _per_channel(ctx, bias, n))
    mean = ctx.emit("squeeze", mean_k, axis=axes)
    var = ctx.emit("squeeze", var_k, axis=axes)

    def moving(old: Value, new: Value) -> Value:
        return ctx.emit("add", ctx.emit("multiply", old, scalar(ctx, momentum, old)),
                        ctx.emit("multiply", new, scalar(ctx, 1.0 - momentum, old)))
    return [y, moving(run_mean, mean), moving(run_var, var)]


def _moments(ctx: NodeContext, x: Value, axes: list[int]) -> tuple[Value, Value]:
    """Mean and (biased) variance over ``axes``, kept as size-1 dimensions."""
    mean = ctx.emit("mean", x, axis=axes, keepdims=True)
    centered = ctx.emit("subtract", x, mean)
    var = ctx.emit("mean", ctx.emit("multiply", centered, centered), axis=axes, keepdims=True)
    return mean, var


@converter("InstanceNormalization")
def _instance_norm(ctx: NodeContext) -> Value:
    x = _float_input(ctx)
    scale, bias = ctx.input(1), ctx.input(2)
    n = ctx.ndim(x)
    return ctx.emit("nn.instance_norm", x, scale, bias, channel_axis=1,
                    axes=list(range(2, n)), epsilon=float(ctx.attr("epsilon", 1e-5)))


@converter("LayerNormalization")
def _layer_norm(ctx: NodeContext) -> list[Value | None]:
    x = _float_input(ctx)
    dims = ctx.shape(x)
    n = len(dims)
    axis = norm_axis(ctx, ctx.attr("axis", -1), n)
    axes = list(range(axis, n))
    eps = float(ctx.attr("epsilon", 1e-5))
    scale = ctx.input(1)
    bias = ctx.optional(2)
    if any(d == 0 for d in dims[axis:]):  # (as ORT: nothing to normalize over)
        raise FrontendError(f"the normalized axes {axes} of shape {tuple(dims)} are empty")
    if any(ctx.ndim(v) > n for v in (scale, bias) if v is not None):
        raise FrontendError(f"scale and bias may not have more dimensions than the input "
                            f"(rank {n})")
    for what, v in (("scale", scale), ("bias", bias)):  # broadcast to X's shape, as ORT
        if v is not None and any(isinstance(p, int) and isinstance(d, int) and p not in (1, d)
                                 for p, d in zip(ctx.shape(v)[::-1], dims[::-1])):
            raise FrontendError(f"the {what}'s shape {ctx.shape(v)} does not broadcast to the "
                                f"input's {list(dims)}")
    want_stats = any(o for o in ctx.node.output[1:])
    dtype = ctx.dtype(x)
    if ctx.shape(scale) == dims[axis:] and not want_stats and (
            bias is None or ctx.shape(bias) == dims[axis:]) and ctx.dtype(scale) == dtype:
        if bias is None:
            bias = ctx.emit("zeros_like", scale) if not is_const(scale) else np.zeros_like(scale)
        return [ctx.emit("nn.layer_norm", x, scale, bias, axes=axes, epsilon=eps), None, None]
    stash = "float32" if ctx.attr("stash_type", 1) == 1 and dtype == "float16" else dtype
    xs = x if stash == dtype else ctx.emit("astype", x, dtype=stash)
    mean, var = _moments(ctx, xs, axes)
    inv = ctx.emit("rsqrt", ctx.emit("add", var, scalar(ctx, eps, stash)))
    y = ctx.emit("multiply", ctx.emit("subtract", xs, mean), inv)
    if stash != dtype:
        y = ctx.emit("astype", y, dtype=dtype)
    y = ctx.emit("multiply", y, scale)
    if bias is not None:
        y = ctx.emit("add", y, bias)
    return [y, mean, inv]


@converter("GroupNormalization")
def _group_norm(ctx: NodeContext) -> Value:
    x = _float_input(ctx)
    dims = ctx.shape(x)
    groups = ctx.attr("num_groups")
    if len(dims) < 2:
        raise FrontendError(f"GroupNormalization needs (N, C, ...), not shape {tuple(dims)}")
    c = dims[1]
    if not isinstance(groups, int) or groups < 1 or (isinstance(c, int) and c % groups):
        raise FrontendError(f"num_groups={groups!r} does not divide the {c} channels")
    scale, bias = ctx.input(1), ctx.input(2)
    if not isinstance(c, int):
        raise Unsupported("GroupNormalization with a symbolic channel count")
    if ctx.shape(scale) == [groups] and groups != c:  # opset 18: one scale per group
        idx = np.arange(c, dtype=np.int64) // (c // groups)
        scale = ctx.emit("take", scale, idx, axis=0)
        bias = ctx.emit("take", bias, idx, axis=0)
    return ctx.emit("nn.group_norm", x, scale, bias, num_groups=groups, channel_axis=1,
                    axes=list(range(2, len(dims))), epsilon=float(ctx.attr("epsilon", 1e-5)))


@converter("MeanVarianceNormalization")
def _mvn(ctx: NodeContext) -> Value:
    x = _float_input(ctx)
    # repeated axes count once (as ORT); none at all ORT refuses
    axes = sorted({norm_axis(ctx, a, ctx.ndim(x)) for a in ctx.attr("axes", [0, 2, 3])})
    if not axes:
        raise FrontendError("MeanVarianceNormalization with no axes")
    mean = ctx.emit("mean", x, axis=axes, keepdims=True)
    sq_mean = ctx.emit("mean", ctx.emit("multiply", x, x), axis=axes, keepdims=True)
    var = ctx.emit("subtract", sq_mean, ctx.emit("multiply", mean, mean))
    std = ctx.emit("add", ctx.emit("sqrt", var), scalar(ctx, 1e-9, x))
    return ctx.emit("divide", ctx.emit("subtract", x, mean), std)


@converter("LpNormalization")
def _lp_norm(ctx: NodeContext) -> Value:
    x = _float_input(ctx)
    axis = norm_axis(ctx, ctx.attr("axis", -1), ctx.ndim(x))
    p = int(ctx.attr("p", 2))
    if p == 1:
        norm = ctx.emit("sum", ctx.emit("abs", x), axis=[axis], keepdims=True)
    elif p == 2:
        norm = ctx.emit("sqrt", ctx.emit("sum", ctx.emit("multiply", x, x), axis=[axis],
                                         keepdims=True))
    else:
        raise Unsupported(f"attribute p={p}")
    zero = scalar(ctx, 0, x)
    safe = ctx.emit("where", ctx.emit("equal", norm, zero), scalar(ctx, 1, x), norm)
    return ctx.emit("divide", x, safe)


@converter("RMSNormalization")
def _rms_norm(ctx: NodeContext) -> Value:
    x = _float_input(ctx)
    n = ctx.ndim(x)
    axis = norm_axis(ctx, ctx.attr("axis", -1), n)
    eps = float(ctx.attr("epsilon", 1e-5))
    dtype = ctx.dtype(x)
    stash = "float32" if ctx.attr("stash_type", 1) == 1 and dtype == "float16" else dtype
    xs = x if stash == dtype else ctx.emit("astype", x, dtype=stash)
    ms = ctx.emit("mean", ctx.emit("multiply", xs, xs), axis=list(range(axis, n)), keepdims=True)
    y = ctx.emit("multiply", xs, ctx.emit("rsqrt", ctx.emit("add", ms, scalar(ctx, eps, stash))))
    if stash != dtype:
        y = ctx.emit("astype", y, dtype=dtype)
    return ctx.emit("multiply", y, ctx.input(1))


@converter("LRN")
def _lrn(ctx: NodeContext) -> Value:
    x = _float_input(ctx)
    dims = ctx.shape(x)
    if len(dims) < 3:
        raise Unsupported(f"LRN of a rank-{len(dims)} tensor")
    size = ctx.attr("size")
    if not isinstance(size, int) or size < 1 or size % 2 == 0:
        raise FrontendError(f"attribute size={size!r}: LRN's size must be odd and positive")
    alpha, beta = float(ctx.attr("alpha", 1e-4)), float(ctx.attr("beta", 0.75))
    bias = float(ctx.attr("bias", 1.0))
    n, c = dims[0], dims[1]
    rest = prod_dims(dims[2:])
    # sum of squares over a channel window = size * average with padding counted
    sq = ctx.emit("multiply", x, x)
    sq = ctx.emit("reshape", sq, (n, 1, c, rest))
    lo, hi = (size - 1) // 2, math.ceil((size - 1) / 2)
    avg = ctx.emit("nn.avg_pool2d", sq, pool_size=[size, 1], strides=[1, 1], dilation=[1, 1],
                   padding=[lo, 0, hi, 0], ceil_mode=False, count_include_pad=True,
                   layout="NCHW", out_layout="NCHW")
    avg = ctx.emit("reshape", avg, tuple(dims))
    # y = x / (bias + alpha / size * sum) ** beta
    d = ctx.emit("add", ctx.emit("multiply", avg, scalar(ctx, alpha, x)), scalar(ctx, bias, x))
    return ctx.emit("divide", x, ctx.emit("power", d, scalar(ctx, beta, x)))


# ---------------------------------------------------------------------------
# Gemm / MatMul / softmax / dropout
# ---------------------------------------------------------------------------

@converter("Gemm")
def _gemm(ctx: NodeContext) -> Value:
    a, b = ctx.input(0), ctx.input(1)
    if ctx.ndim(a) != 2 or ctx.ndim(b) != 2:
        raise Unsupported("Gemm operands must be 2-D")
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    if ctx.attr("transA", 0):
        a = ctx.emit("permute_dims", a, axes=[1, 0])
    if ctx.attr("transB", 0):
        b = ctx.emit("permute_dims", b, axes=[1, 0])
    if alpha != 1.0 and is_const(b):
        b = ctx.emit("multiply", b, scalar(ctx, alpha, b))  # folds into the constant
        alpha = 1.0
    (a, b), dtype = in_float32(ctx, [a, b])
    y = back_to_dtype(ctx, ctx.emit("matmul", a, b), dtype)
    if alpha != 1.0:
        y = ctx.emit("multiply", y, scalar(ctx, alpha, y))
    if ctx.has(2) and beta != 0.0:
        c = ctx.input(2)
        if beta != 1.0:
            c = ctx.emit("multiply", c, scalar(ctx, beta, c))
        y = ctx.emit("add", y, c)
    return y


@converter("MatMul")
def _matmul(ctx: NodeContext) -> Value:
    (a, b), dtype = in_float32(ctx, [ctx.input(0), ctx.input(1)])
    ctx.shape(a), ctx.shape(b)  # (a shape known only at run time, NonZero's: unsupported)
    return back_to_dtype(ctx, ctx.emit("matmul", a, b), dtype)


def softmax_axis_2d(ctx: NodeContext, x: Value, fn: Any) -> Value:
    """``fn(ctx, x, axis)`` with the axis semantics of Softmax-like ops: along
    ``axis`` (default -1) from opset 13; before, over the input viewed as 2-D,
    split at ``axis`` (default 1)."""
    dims = ctx.shape(x)
    n = len(dims)
    if ctx.opset >= 13:
        return fn(ctx, x, norm_axis(ctx, ctx.attr("axis", -1), n))
    axis = norm_axis(ctx, ctx.attr("axis", 1), n) if n else 0
    if axis == n - 1:
        return fn(ctx, x, n - 1)
    flat = reshape(ctx, x, [prod_dims(dims[:axis]), prod_dims(dims[axis:])])
    return reshape(ctx, fn(ctx, flat, 1), dims)


def _softmax(ctx: NodeContext, op: str) -> Value:
    _float_input(ctx)
    # Softmax in float16 goes step by step as the operator's definition (exp
    # and quotient rounded to float16, the sum accumulated in float32), equal
    # to the ONNX reference; LogSoftmax in float32 throughout (a float16
    # log(sum) would cost its small results most of their digits)
    (x,), dtype = in_float32(ctx, [ctx.input(0)]) if op == "nn.log_softmax" else \
        ([ctx.input(0)], ctx.dtype(ctx.input(0)))
    y = softmax_axis_2d(ctx, x, lambda c, v, axis: c.emit(op, v, axis=axis))
    return back_to_dtype(ctx, y, dtype)


@converter("Softmax")
def _softmax_op(ctx: NodeContext) -> Value:
    return _softmax(ctx, "nn.softmax")


@converter("LogSoftmax")
def _log_softmax(ctx: NodeContext) -> Value:
    return _softmax(ctx, "nn.log_softmax")


@converter("Dropout")
def _dropout(ctx: NodeContext) -> list[Value | None]:
    x = ctx.input(0)
    if ctx.opset >= 12 and ctx.has(2):
        training = ctx.const(2, "training_mode")
        if bool(np.asarray(training).reshape(-1)[0]):
            raise Unsupported("training_mode=true (random dropout)")
    outs: list[Value | None] = [x]
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        dims = ctx.shape(x)
        mask_dtype = "bool" if ctx.opset >= 10 else ctx.dtype(x)
        outs.append(ctx.emit("full", tuple(dims), np.asarray(1, mask_dtype), fold=False))
    return outs


@converter("CausalConvWithState", since=27)
def _causal_conv_with_state(ctx: NodeContext) -> list[Value]:
    x, w = _float_input(ctx), ctx.input(1)
    b_, c, length = ctx.shape(x)
    k = ctx.shape(w)[2]
    if not isinstance(k, int):
        raise Unsupported("a symbolic kernel size")
    activation = ctx.attr("activation", "none")
    if activation not in ("none", "silu", "swish"):
        raise Unsupported(f"attribute activation={activation!r}")
    past = ctx.optional(3)
    if past is None:
        past = ctx.emit("zeros", (b_, c, k - 1), dtype=ctx.dtype(x))
    full = ctx.emit("concat", [past, x], axis=2)  # (B, C, k - 1 + L)
    (f32, w32), dtype = in_float32(ctx, [full, w])
    y = ctx.emit("nn.conv1d", f32, w32, strides=[1], padding=[0, 0], dilation=[1], groups=c,
                 data_layout="NCW", kernel_layout="OIW", out_layout="NCW")
    if ctx.has(2):
        y = ctx.emit("add", y, ctx.emit("reshape", ctx.emit("astype", ctx.input(2),
                                                            dtype=ctx.dtype(y)), (c, 1)))
    if activation != "none":  # silu in float32, as the definition computes it
        y = ctx.emit("multiply", y, ctx.emit("sigmoid", y))
    y = back_to_dtype(ctx, y, dtype)
    present = ctx.emit("strided_slice", full, axes=[2], begin=[length], end=[length + k - 1])
    return [y, present]


@converter("MaxUnpool", since=9)
def _max_unpool(ctx: NodeContext) -> Value:
    """MaxPool's inverse: zeros, with each value of X put at its index of I
    (indices flattened over the whole default-sized output, as MaxPool's
    Indices are); a ``scatter_elements`` into the flattened output (an index
    out of range stops the run with an IndexOutOfRangeError). A larger
    ``output_shape`` adds zeros after each axis, as ONNX's reference does."""
    x, idx = ctx.input(0), ctx.input(1)
    dims = ctx.static_shape(x, "MaxUnpool's input")
    k = len(dims) - 2
    kernel = [int(v) for v in ctx.attr("kernel_shape", [])]
    if k < 1 or len(kernel) != k:
        raise FrontendError(f"MaxUnpool's kernel_shape {kernel} for an input of shape {dims}")
    strides = [int(v) for v in ctx.attr("strides", [1] * k)]
    pads = [int(v) for v in ctx.attr("pads", [0] * (2 * k))]
    if len(strides) != k or len(pads) != 2 * k:
        raise FrontendError(f"MaxUnpool's strides {strides} / pads {pads} for {k} spatial dims")
    if ctx.shape(idx) != dims:
        raise FrontendError(f"MaxUnpool's indices have shape {ctx.shape(idx)}, its input {dims}")
    out = dims[:2] + [(d - 1) * s - (pads[j] + pads[k + j]) + kk
                      for j, (d, s, kk) in enumerate(zip(dims[2:], strides, kernel))]
    if ctx.has(2):
        given = [int(v) for v in ctx.const(2, "output_shape").reshape(-1)]
        if len(given) != len(dims) or given[:2] != dims[:2] or any(
                g < o for g, o in zip(given[2:], out[2:])):
            raise FrontendError(f"MaxUnpool's output_shape {given}: (N, C, ...) of the input "
                                f"and at least the default size {out}")
    else:
        given = out
    n = math.prod(dims)
    flat = ctx.emit("zeros", (math.prod(out),), dtype=ctx.dtype(x))
    y = ctx.emit("scatter_elements", flat, reshape(ctx, _int64_indices(ctx, idx), [n]),
                 reshape(ctx, x, [n]), axis=0, reduction="update")
    y = reshape(ctx, y, out)
    if given == out:
        return y
    # a larger output_shape: the default-sized result, zeros after it (ONNX's reference)
    widths = [w for g, o in zip(given, out) for w in (0, g - o)]
    return ctx.emit("nn.pad", y, pad_width=widths)


def _int64_indices(ctx: NodeContext, idx: Value) -> Value:
    return idx if ctx.dtype(idx) == "int64" else ctx.emit("astype", idx, dtype="int64")

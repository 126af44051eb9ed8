"""ONNX quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
ConvInteger, QLinearMatMul, QLinearConv.

QuantizeLinear/DequantizeLinear map to ``R.quantize``/``R.dequantize``
(round half to even, saturating) per tensor or per axis, dividing in
float32 for float16 data too (as ONNX Runtime; the opset-23 ``precision``
attribute chooses otherwise); blocked
quantization (``block_size``, opset 21) repeats each block's scale and zero
point along the axis and computes the same formula elementwise. Quantized
types: int8, uint8, int16, uint16 (and int32 data to dequantize), and the
narrow types phasec holds in a wider dtype (``_dtypes.NARROW_FORMATS``,
their values exactly): int4/uint4/int2/uint2 in int8/uint8, quantized as
int8/uint8 and then saturated to their own range; the float8s and float4
in float32, quantized as ``round_to_format(x / scale + zero_point)``
(``saturate`` applies to the float8s) and dequantized as ``(x - zero_point)
* scale``. A float8 zero point must be 0 where it is known (ONNX Runtime
refuses or ignores others). A bfloat16 scale makes a bfloat16 result,
computed in float32 and rounded.

The integer operators compute as ONNX Runtime's CPU kernels do, so their
integer results are equal to ONNX Runtime's: operands minus their zero
points in int32, products accumulated in int32 (plus the int32 bias), then
requantized with one float32 multiplier per output (``a_scale * b_scale /
y_scale``, computed in the scales' dtype): ``saturate(round_half_even(acc *
multiplier) + y_zero_point)``. QLinearMatMul of 8-bit operands with a 2-D B
and a static K accumulates on the integer GEMM (``ops_linalg.integer_gemm``:
uint8 x int8 words, zero points corrected by row and column sums after the
product), the same int32 sums; so do ConvInteger and QLinearConv of a
pointwise kernel (1x1, stride 1, no padding, one group) as ``W[O, C] @
x[N, C, positions]``.
"""

from __future__ import annotations

import numpy as np

from phasec.frontend.errors import FrontendError
from phasec.frontend.onnx._context import NodeContext, Unsupported, Value
from phasec.frontend.onnx._dtypes import NARROW_INTS, carrier, narrow_format
from phasec.frontend.onnx._registry import converter
from phasec.frontend.onnx.ops_linalg import exact_int_matmul, integer_gemm, integer_gemm_length
from phasec.frontend.onnx.ops_math import onnx_to_dtype
from phasec.frontend.onnx.ops_narrow import E8M0, FLOAT8, FLOAT_FORMATS
from phasec.frontend.onnx.ops_nn import _LAYOUTS, _window_attrs
from phasec.frontend.onnx.ops_tensor import norm_axis, pad_axis, prod_dims

__all__ = ["QUANTIZED", "centered", "requantize", "dequantize_f32", "along", "multiplier",
           "matmul_operands", "qlinear_conv", "dynamic_uint8"]

#: the quantized element types phasec computes with
QUANTIZED = ("int8", "uint8", "int16", "uint16")
_SCALES = ("float32", "float16")


def along(ctx: NodeContext, p: Value, ndim: int, axis: int) -> Value:
    """A 1-D per-channel parameter reshaped to broadcast along ``axis`` of a
    rank-``ndim`` tensor; a scalar or single-element one as it is."""
    if ctx.ndim(p) == 0 or ctx.shape(p) == [1]:
        return p if ctx.ndim(p) == 0 else ctx.emit("reshape", p, ())
    if ctx.ndim(p) != 1:
        raise Unsupported(f"a quantization parameter of shape {ctx.shape(p)} (expects a scalar "
                          "or one entry per channel)")
    shape = [1] * ndim
    shape[axis] = ctx.shape(p)[0]
    return ctx.emit("reshape", p, tuple(shape))


def centered(ctx: NodeContext, x: Value, zp: Value | None, axis: int | None = None) -> Value:
    """``int32(x) - int32(zero_point)`` (the zero point per tensor, or per
    channel along ``axis``)."""
    if ctx.dtype(x) not in QUANTIZED:
        raise Unsupported(f"quantized operand of dtype {ctx.dtype(x)}")
    x32 = ctx.emit("astype", x, dtype="int32")
    if zp is None:
        return x32
    if ctx.dtype(zp) != ctx.dtype(x):
        raise Unsupported(f"a {ctx.dtype(zp)} zero point for {ctx.dtype(x)} data")
    z = ctx.emit("astype", zp, dtype="int32")
    if axis is not None:
        z = along(ctx, z, ctx.ndim(x), axis)
    elif ctx.ndim(z) == 1 and ctx.shape(z) == [1]:
        z = ctx.emit("reshape", z, ())
    return ctx.emit("subtract", x32, z)


def _scale_f32(ctx: NodeContext, s: Value) -> Value:
    if ctx.dtype(s) not in _SCALES:
        raise Unsupported(f"a {ctx.dtype(s)} scale")
    return s if ctx.dtype(s) == "float32" else ctx.emit("astype", s, dtype="float32")


def multiplier(ctx: NodeContext, a_scale: Value, b_scale: Value, y_scale: Value) -> Value:
    """``a_scale * b_scale / y_scale`` in the scales' dtype (as the ONNX
    definition; float32 for float32 scales, as ONNX Runtime), as float32."""
    for s in (a_scale, b_scale, y_scale):
        if ctx.dtype(s) not in _SCALES:
            raise Unsupported(f"a {ctx.dtype(s)} scale")
    dt = ctx.dtype(a_scale)
    if {ctx.dtype(b_scale), ctx.dtype(y_scale)} != {dt}:
        raise Unsupported("scales of different dtypes")
    return _scale_f32(ctx, ctx.emit("divide", ctx.emit("multiply", a_scale, b_scale), y_scale))


def requantize(ctx: NodeContext, v: Value, zp: Value | None, out: str) -> Value:
    """``saturate(round_half_even(v) + zero_point)`` of float32 ``v`` into ``out``."""
    if out not in QUANTIZED:
        raise Unsupported(f"quantizing to {out}")
    z = np.zeros((), out) if zp is None else zp
    if ctx.ndim(z) == 1 and ctx.shape(z) == [1]:
        z = ctx.emit("reshape", z, ())
    if ctx.ndim(z) != 0:
        raise Unsupported("an output zero point that is not per tensor")
    return ctx.emit("quantize", v, np.ones((), np.float32), z, axis=-1, out_dtype=out)


def dequantize_f32(ctx: NodeContext, x: Value, scale: Value, zp: Value | None,
                   axis: int | None = None) -> Value:
    """``float32(int32(x) - zero_point) * scale`` (per tensor, or per channel along ``axis``)."""
    s = _scale_f32(ctx, scale)
    s = along(ctx, s, ctx.ndim(x), axis) if axis is not None else along(ctx, s, 0, 0)
    diff = ctx.emit("astype", centered(ctx, x, zp, axis), dtype="float32")
    return ctx.emit("multiply", diff, s)


# ---------------------------------------------------------------------------
# QuantizeLinear / DequantizeLinear
# ---------------------------------------------------------------------------

def _block_expand(ctx: NodeContext, p: Value, x: Value, axis: int, block: int) -> Value:
    """A blocked parameter (the data's shape, ``ceil(D / block)`` on ``axis``)
    repeated to the data's shape: element ``i`` on ``axis`` takes block ``i // block``."""
    dims, pdims = ctx.shape(x), ctx.shape(p)
    if len(pdims) != len(dims):
        raise Unsupported(f"a blocked scale of rank {len(pdims)} for data of rank {len(dims)}")
    d = dims[axis]
    if not isinstance(d, int):
        raise Unsupported("blocked quantization along a symbolic dimension")
    want = [-(-d // block) if i == axis else dims[i] for i in range(len(dims))]
    if pdims != want:
        raise Unsupported(f"a blocked scale of shape {pdims}; block_size {block} on axis "
                          f"{axis} of {dims} needs {want}")
    return ctx.emit("take", p, np.arange(d, dtype=np.int64) // block, axis=axis)


def _same_layout(ctx: NodeContext, scale: Value, zp: Value | None) -> None:
    """The zero point's shape must be the scale's (ONNX: "Shape must match
    x_scale"; as ONNX Runtime, a scalar and a one-element vector are alike)."""
    if zp is None:
        return
    one = (ctx.ndim(scale) == 0 or ctx.shape(scale) == [1],
           ctx.ndim(zp) == 0 or ctx.shape(zp) == [1])
    if one[0] != one[1] or (not one[0] and ctx.shape(zp) != ctx.shape(scale)):
        raise FrontendError(f"the zero point's shape {ctx.shape(zp)} does not match the "
                            f"scale's {ctx.shape(scale)}")


def _qdq_layout(ctx: NodeContext, x: Value, scale: Value) -> tuple[int, int]:
    """(axis, block_size): axis -1 per tensor; block 0 unless blocked."""
    _same_layout(ctx, scale, ctx.optional(2))
    block = int(ctx.attr("block_size", 0))
    if block < 0:
        raise Unsupported(f"block_size {block}")
    if block:
        if ctx.ndim(x) == 0:
            raise Unsupported("blocked quantization of a 0-d tensor")
        return norm_axis(ctx, ctx.attr("axis", 1), ctx.ndim(x)), block
    if ctx.ndim(scale) == 0 or ctx.shape(scale) == [1]:
        return -1, 0
    if ctx.ndim(scale) != 1:  # (ORT: a scalar, or 1-D per axis)
        raise FrontendError(f"a scale of shape {ctx.shape(scale)}: a scalar, or 1-D along "
                            "the axis")
    if ctx.ndim(x) == 0:
        raise Unsupported("a per-axis scale for 0-d data")
    return norm_axis(ctx, ctx.attr("axis", 1), ctx.ndim(x)), 0


def _format_of(ctx: NodeContext, i: int) -> str | None:
    """The narrow format (_dtypes.NARROW_FORMATS) input ``i`` holds, or None."""
    return ctx.formats.get(ctx.node.input[i]) if ctx.has(i) else None


def _attr_type(ctx: NodeContext, name: str) -> tuple[str | None, str | None]:
    """An element-type attribute as (phasec dtype, narrow format); (None, None) when absent."""
    t = int(ctx.attr(name, 0) or 0)
    if not t:
        return None, None
    fmt = narrow_format(t)
    return (carrier(fmt), fmt) if fmt is not None else (onnx_to_dtype(t, name), None)


def _expand(ctx: NodeContext, p: Value, x: Value, axis: int, block: int) -> Value:
    """A scale or zero point broadcastable to ``x``: per tensor as a scalar,
    per axis along ``axis``, blocked repeated to x's shape."""
    if block:
        return _block_expand(ctx, p, x, axis, block)
    return along(ctx, p, ctx.ndim(x), axis) if axis >= 0 else along(ctx, p, 0, 0)


@converter("QuantizeLinear", since=10)
def _quantize(ctx: NodeContext) -> Value:
    x, scale = ctx.input(0), ctx.input(1)
    zp = ctx.optional(2)
    attr_out, attr_fmt = _attr_type(ctx, "output_dtype")
    fmt = _format_of(ctx, 2) if zp is not None else attr_fmt
    out = ctx.dtype(zp) if zp is not None else (attr_out or "uint8")
    if attr_out and (attr_out, attr_fmt) != (out, fmt):
        raise Unsupported(f"output_dtype {attr_fmt or attr_out} with a "
                          f"{fmt or ctx.dtype(zp)} zero point")
    if fmt is None and out not in QUANTIZED:
        raise Unsupported(f"quantizing to {out}")
    if fmt in ("bfloat16", E8M0):
        raise Unsupported(f"quantizing to {fmt}")
    if ctx.dtype(scale) not in _SCALES:
        raise Unsupported(f"a {ctx.dtype(scale)} scale")
    # the division's precision: the attribute (opset 23), else float32 (as
    # ONNX Runtime divides float16 too; a float16 quotient would be rounded
    # to float16 before it is rounded to an integer)
    precision = ctx.attr("precision", 0)
    calc = onnx_to_dtype(precision, "precision") if precision else "float32"
    if calc not in _SCALES or ctx.dtype(x) not in (*_SCALES, "int32"):
        raise Unsupported(f"quantizing {ctx.dtype(x)} data in {calc}")
    x = x if ctx.dtype(x) == calc else ctx.emit("astype", x, dtype=calc)
    scale = scale if ctx.dtype(scale) == calc else ctx.emit("astype", scale, dtype=calc)
    axis, block = _qdq_layout(ctx, x, scale)
    if fmt is not None:
        ctx.formats[ctx.node.output[0]] = fmt
        if fmt not in NARROW_INTS:
            return _quantize_float_format(ctx, x, scale, zp, axis, block, fmt)
    lo, hi = _int_range(out, fmt)
    if zp is None:
        zp = np.zeros(ctx.shape(scale) if block else (), out)
    if not block:
        q = ctx.emit("quantize", x, scale, zp, axis=axis, out_dtype=out)
        # (a narrow integer: saturated to its carrier's range, then to its own)
        return q if fmt is None else ctx.emit("clip", q, min=float(lo), max=float(hi))
    s = _block_expand(ctx, scale, x, axis, block)
    z = ctx.emit("astype", _block_expand(ctx, zp, x, axis, block), dtype=calc)
    q = ctx.emit("add", ctx.emit("round", ctx.emit("divide", x, s)), z)
    q = ctx.emit("clip", q, min=float(lo), max=float(hi))
    return ctx.emit("astype", q, dtype=out)


def _int_range(dtype: str, fmt: str | None) -> tuple[int, int]:
    """The values a quantized integer type holds (a narrow one's, else its dtype's)."""
    if fmt is None:
        info = np.iinfo(dtype)
        return int(info.min), int(info.max)
    bits, signed = NARROW_INTS[fmt]
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


def _quantize_float_format(ctx: NodeContext, x: Value, scale: Value, zp: Value | None,
                           axis: int, block: int, fmt: str) -> Value:
    """``x / scale + zero_point`` rounded to a float8 / float4 format (held in
    float32; saturating unless ``saturate=0``, which concerns the float8s only)."""
    _float8_zero(ctx, fmt)
    v = ctx.emit("divide", x, _expand(ctx, scale, x, axis, block))
    if ctx.dtype(v) != "float32":
        v = ctx.emit("astype", v, dtype="float32")
    if zp is not None:
        v = ctx.emit("add", v, _expand(ctx, zp, x, axis, block))
    saturate = fmt not in FLOAT8 or ctx.attr("saturate", 1) == 1
    return ctx.emit("round_to_format", v, format=fmt, saturate=saturate)


def _float8_zero(ctx: NodeContext, fmt: str) -> None:
    """A float8 zero point known at import must be 0: ONNX Runtime refuses
    another in DequantizeLinear and ignores it in QuantizeLinear (so does the
    ONNX reference), where the ONNX formula would add it. (One computed at
    run time is used as the formula says.)"""
    if fmt in FLOAT8 and ctx.has(2) and isinstance(ctx.inputs[2], np.ndarray) \
            and np.any(ctx.inputs[2] != 0):
        raise FrontendError(f"a {fmt} zero point must be 0 (ONNX Runtime refuses or ignores "
                            f"others), got {ctx.inputs[2].tolist()}")


@converter("DequantizeLinear", since=10)
def _dequantize(ctx: NodeContext) -> Value:
    x, scale = ctx.input(0), ctx.input(1)
    dt, fmt = ctx.dtype(x), _format_of(ctx, 0)
    if fmt is None and dt not in (*QUANTIZED, "int32"):
        raise Unsupported(f"dequantizing {dt}")
    if fmt in ("bfloat16", E8M0):
        raise Unsupported(f"dequantizing {fmt}")
    if ctx.dtype(scale) not in _SCALES:
        raise Unsupported(f"a {ctx.dtype(scale)} scale")
    zp = ctx.optional(2)
    if zp is not None and (ctx.dtype(zp), _format_of(ctx, 2)) != (dt, fmt):
        raise Unsupported(f"a {_format_of(ctx, 2) or ctx.dtype(zp)} zero point for "
                          f"{fmt or dt} data")
    # a bfloat16 scale (held in float32): computed in float32, rounded to bfloat16
    out, out_fmt = ctx.dtype(scale), _format_of(ctx, 1)
    if ctx.attr("output_dtype"):
        out, out_fmt = _attr_type(ctx, "output_dtype")
    if out not in _SCALES or out_fmt not in (None, "bfloat16"):
        raise Unsupported(f"dequantizing to {out_fmt or out}")
    axis, block = _qdq_layout(ctx, x, scale)
    if not block and fmt not in FLOAT_FORMATS:
        zp = np.zeros((), dt) if zp is None else zp
        y = ctx.emit("dequantize", x, scale, zp, axis=axis, out_dtype=out)
    else:
        s = _scale_f32(ctx, _expand(ctx, scale, x, axis, block))
        if fmt in FLOAT_FORMATS:  # a float8 / float4 value is its own float32
            _float8_zero(ctx, fmt)
            v = x if zp is None else ctx.emit("subtract", x, _expand(ctx, zp, x, axis, block))
        else:
            x32 = ctx.emit("astype", x, dtype="int32")
            if zp is not None:
                z = _block_expand(ctx, zp, x, axis, block)
                x32 = ctx.emit("subtract", x32, ctx.emit("astype", z, dtype="int32"))
            v = ctx.emit("astype", x32, dtype="float32")
        y = ctx.emit("multiply", v, s)
        y = y if out == "float32" else ctx.emit("astype", y, dtype=out)
    if out_fmt is None:
        return y
    ctx.formats[ctx.node.output[0]] = out_fmt
    return ctx.emit("round_to_format", y, format=out_fmt, saturate=False)


@converter("DynamicQuantizeLinear", since=11)
def _dynamic_quantize(ctx: NodeContext) -> list[Value]:
    x = ctx.input(0)
    if ctx.dtype(x) != "float32":
        raise Unsupported(f"dtype {ctx.dtype(x)}")
    return list(dynamic_uint8(ctx, x))


def dynamic_uint8(ctx: NodeContext, x: Value) -> tuple[Value, Value, Value]:
    """float32 ``x`` quantized to uint8 over its range, which always holds 0:
    scale ``(max - min) / 255`` (1 for an all-zero ``x``, as ONNX Runtime;
    the formula's 0 would make the zero point 0 / 0), zero point
    ``round(-min / scale)``; returns (y, scale, zero point)."""
    zero = np.zeros((), np.float32)
    lo = ctx.emit("minimum", ctx.emit("min", x), zero)
    hi = ctx.emit("maximum", ctx.emit("max", x), zero)
    width = ctx.emit("subtract", hi, lo)
    scale = ctx.emit("where", ctx.emit("equal", width, zero), np.ones((), np.float32),
                     ctx.emit("divide", width, np.asarray(255, np.float32)))
    zp = ctx.emit("round", ctx.emit("divide", ctx.emit("negative", lo), scale))
    zp = ctx.emit("astype", ctx.emit("clip", zp, min=0.0, max=255.0), dtype="uint8")
    return ctx.emit("quantize", x, scale, zp, axis=-1, out_dtype="uint8"), scale, zp


# ---------------------------------------------------------------------------
# QLinearMatMul, ConvInteger, QLinearConv
# ---------------------------------------------------------------------------

def matmul_operands(ctx: NodeContext, a: Value, a_zp: Value | None, b: Value,
                    b_zp: Value | None) -> tuple[Value, Value]:
    """The two operands of an integer matmul, minus their zero points: A's
    per row (a 1-D one of M entries), B's per column (N entries)."""
    a_axis = ctx.ndim(a) - 2 if a_zp is not None and ctx.ndim(a_zp) == 1 and \
        ctx.shape(a_zp) != [1] and ctx.ndim(a) >= 2 else None
    b_axis = ctx.ndim(b) - 1 if b_zp is not None and ctx.ndim(b_zp) == 1 and \
        ctx.shape(b_zp) != [1] else None
    return centered(ctx, a, a_zp, a_axis), centered(ctx, b, b_zp, b_axis)


def _row_scale(ctx: NodeContext, s: Value, a: Value) -> Value:
    """A per-row scale of A as a column (M, 1); a per-tensor one as it is."""
    if ctx.ndim(s) == 1 and ctx.shape(s) != [1]:
        return ctx.emit("reshape", s, (ctx.shape(s)[0], 1))
    return s


@converter("QLinearMatMul", since=10)
def _qlinear_matmul(ctx: NodeContext) -> Value:
    a, a_scale, a_zp = ctx.input(0), ctx.input(1), ctx.input(2)
    b, b_scale, b_zp = ctx.input(3), ctx.input(4), ctx.input(5)
    y_scale, y_zp = ctx.input(6), ctx.input(7)
    k = integer_gemm_length(ctx, a, b)
    if k is not None:  # the integer GEMM, zero points corrected after
        acc = integer_gemm(ctx, a, b, a_zp, b_zp, k)
    else:
        a32, b32 = matmul_operands(ctx, a, a_zp, b, b_zp)
        acc = exact_int_matmul(ctx, a32, b32, a, b)
    m = multiplier(ctx, _row_scale(ctx, a_scale, a), b_scale, y_scale)
    return requantize(ctx, ctx.emit("multiply", ctx.emit("astype", acc, dtype="float32"), m),
                      y_zp, ctx.dtype(y_zp))


def _conv_int32(ctx: NodeContext, x: Value, x_zp: Value | None, w: Value,
                w_zp: Value | None) -> Value:
    """The int32 convolution of ``x - x_zp`` and ``w - w_zp`` (``w_zp`` per
    tensor or per output channel); padding holds x's zero point, as ONNX says."""
    wshape = ctx.shape(w)
    kernel, strides, dilations, pads = _window_attrs(ctx, x, wshape[2:])
    n = len(kernel)
    if (all(v == 1 for v in kernel + strides) and not any(pads)
            and int(ctx.attr("group", 1)) == 1 and isinstance(wshape[1], int)
            and all(ctx.dtype(v) in ("int8", "uint8") for v in (x, w))):
        # a pointwise convolution: W[O, C] @ x[N, C, positions] on the integer GEMM
        xshape = ctx.shape(x)
        y = integer_gemm(ctx, ctx.emit("reshape", w, (wshape[0], wshape[1])),
                         ctx.emit("reshape", x, (xshape[0], wshape[1], -1)), w_zp, x_zp,
                         wshape[1])
        return ctx.emit("reshape", y, (xshape[0], wshape[0], *xshape[2:]))
    if n == 2 and int(ctx.attr("group", 1)) == 1:
        y = _window_gemm(ctx, x, x_zp, w, w_zp, kernel, strides, dilations, pads)
        if y is not None:
            return y
    x32 = centered(ctx, x, x_zp)
    w32 = centered(ctx, w, w_zp, 0 if w_zp is not None and ctx.ndim(w_zp) == 1 and
                   ctx.shape(w_zp) != [1] else None)
    data_layout, kernel_layout, _ = _LAYOUTS[n]
    # as exact_int_matmul: 8-bit operands and sums of fewer than 2^15 terms
    # are exact in float64, where the float convolution schedules apply; a
    # schedule that transforms its operands (Winograd) is exact only to
    # ~1e-12 of the sum, so the sums are rounded, not truncated, to int32
    terms = prod_dims(wshape[1:])
    exact = (isinstance(terms, int) and terms < 1 << 15
             and all(ctx.dtype(v) in ("int8", "uint8") for v in (x, w)))
    if exact:
        x32, w32 = (ctx.emit("astype", v, dtype="float64") for v in (x32, w32))
    y = ctx.emit(f"nn.conv{n}d", x32, w32, strides=strides, padding=pads,
                 dilation=dilations, groups=int(ctx.attr("group", 1)),
                 data_layout=data_layout, kernel_layout=kernel_layout,
                 out_layout=data_layout, out_dtype="float64" if exact else "int32")
    return ctx.emit("astype", ctx.emit("round", y), dtype="int32") if exact else y


def _window_gemm(ctx: NodeContext, x: Value, x_zp: Value | None, w: Value, w_zp: Value | None,
                 kernel: list[int], strides: list[int], dilations: list[int],
                 pads: list[int]) -> Value | None:
    """A 2-D convolution of one group as ``W[O, C*KH*KW] @ windows`` on the
    integer GEMM: the windows ``nn.im2col`` of ``x`` padded with its zero
    point, so that the GEMM's zero-point corrections hold at the borders
    too. A zero point known only at run time (DynamicQuantizeLinear's) pads
    ``x`` first (the windows then unpadded): a copy of the image, where the
    float64 convolution it replaces took ~2x ONNX Runtime's time (ddddocr).
    None when the shapes are not static (but for the batch), an operand is
    not 8-bit or ``x``'s zero point is not one element."""
    xshape, wshape = ctx.shape(x), ctx.shape(w)
    if (not all(isinstance(d, int) for d in xshape[1:] + wshape)
            or not all(ctx.dtype(v) in ("int8", "uint8") for v in (x, w))):
        return None
    fill = 0
    if x_zp is not None:
        if ctx.shape(x_zp) not in ([], [1]) or ctx.dtype(x_zp) != ctx.dtype(x):
            return None
        if not isinstance(x_zp, np.ndarray):
            zp = ctx.emit("reshape", x_zp, ()) if ctx.ndim(x_zp) else x_zp
            for ax, (before, after) in ((2, (pads[0], pads[2])), (3, (pads[1], pads[3]))):
                if before or after:
                    x = pad_axis(ctx, x, ax, before, after, "constant", zp)
            xshape, pads = ctx.shape(x), [0, 0, 0, 0]
        else:
            fill = int(x_zp.reshape(-1)[0])
    n, (o, c, kh, kw) = xshape[0], wshape
    out_w = (xshape[3] + pads[1] + pads[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    out_h = (xshape[2] + pads[0] + pads[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    cols = ctx.emit("nn.im2col", x, kernel_size=(kh, kw), strides=tuple(strides),
                    padding=tuple(pads), dilation=tuple(dilations), pad_value=float(fill))
    k = c * kh * kw
    y = integer_gemm(ctx, ctx.emit("reshape", w, (o, k)), cols, w_zp, x_zp, k)
    return ctx.emit("reshape", y, (n, o, out_h, out_w))


@converter("ConvInteger", since=10)
def _conv_integer(ctx: NodeContext) -> Value:
    return _conv_int32(ctx, ctx.input(0), ctx.optional(2), ctx.input(1), ctx.optional(3))


@converter("QLinearConv", since=10)
def qlinear_conv(ctx: NodeContext, x: Value | None = None) -> Value:
    """ONNX QLinearConv (com.microsoft's too, given its input ``x`` in NCHW order)."""
    x = ctx.input(0) if x is None else x
    x_scale, x_zp = ctx.input(1), ctx.input(2)
    w, w_scale, w_zp = ctx.input(3), ctx.input(4), ctx.input(5)
    y_scale, y_zp = ctx.input(6), ctx.input(7)
    acc = _conv_int32(ctx, x, x_zp, w, w_zp)
    nd = ctx.ndim(acc)
    if ctx.has(8):
        bias = ctx.input(8)
        if ctx.dtype(bias) != "int32":
            raise Unsupported(f"a {ctx.dtype(bias)} bias (expects int32)")
        acc = ctx.emit("add", acc, along(ctx, bias, nd, 1))
    m = multiplier(ctx, x_scale, along(ctx, w_scale, nd, 1), y_scale)
    return requantize(ctx, ctx.emit("multiply", ctx.emit("astype", acc, dtype="float32"), m),
                      y_zp, ctx.dtype(y_zp))


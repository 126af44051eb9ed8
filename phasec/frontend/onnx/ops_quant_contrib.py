"""ONNX Runtime's quantized operators (domain ``com.microsoft``), the ones its
quantization tools emit and its CPU provider implements: QuantizeLinear,
DequantizeLinear, QLinearConv, QLinearAdd, QLinearMul, QLinearSigmoid,
QLinearLeakyRelu, QLinearAveragePool, QLinearGlobalAveragePool,
QLinearConcat, QLinearWhere, QLinearSoftmax, QGemm, MatMulIntegerToFloat,
MatMulInteger16, DynamicQuantizeMatMul, QAttention (without a past state),
DynamicQuantizeLSTM.

Each computes with ONNX Runtime's own formula (operands minus zero points;
float32 scale ratios; round half to even; saturation; QLinearAdd's fused
multiply-adds; QLinearSoftmax's table of exponentials), so integer results
equal ONNX Runtime's. Two exceptions can remain, both float32 sums that
ORT adds in sequence and phasec in its own order, so a value exactly at a
halfway point may round to the neighbouring integer: QLinearSoftmax's row
sum, and QLinearAveragePool's window sum (the float average pool's
schedule sums a window's rows first, then its columns).
DynamicQuantizeLSTM dequantizes its int8 weights and runs the float LSTM;
ONNX Runtime also quantizes X and the hidden state to uint8 before each
product, so its results differ from phasec's by that rounding (about 1% of
the largest output on a 16-input, 8-unit layer; ddddocr's 512-unit one is
within 2%).
Not converted: QAttention's
``past`` and ``do_rotary`` and masks other than per-batch end positions;
``QLinearReduceMean`` has no ONNX Runtime CPU kernel to compare with.
"""

from __future__ import annotations

import numpy as np

from phasec.frontend.errors import FrontendError
from phasec.frontend.onnx._context import NodeContext, Unsupported, Value
from phasec.frontend.onnx._registry import converter
from phasec.frontend.onnx.ops_linalg import exact_int_matmul
from phasec.frontend.onnx.ops_nn import _pool_float
from phasec.frontend.onnx.ops_quant import (
    QUANTIZED, centered, dequantize_f32, dynamic_uint8, matmul_operands, qlinear_conv,
    requantize,
)
from phasec.frontend.onnx.ops_rnn import convert_recurrent
from phasec.frontend.onnx.ops_tensor import norm_axis, prod_dims, reshape

__all__: list[str] = []

_MS = "com.microsoft"


def _F32(v: float) -> np.ndarray:
    """A float32 0-d constant."""
    return np.asarray(v, np.float32)


def _int8_dtype(ctx: NodeContext, v: Value) -> str:
    """``v``'s dtype, which the quantized operators take as int8 or uint8 only."""
    dt = ctx.dtype(v)
    if dt not in ("int8", "uint8"):
        raise Unsupported(f"dtype {dt}")
    return dt


def _scalar_param(ctx: NodeContext, p: Value, what: str) -> Value:
    """A per-tensor scale or zero point as a 0-d value."""
    if ctx.ndim(p) == 0:
        return p
    if ctx.shape(p) != [1]:
        raise Unsupported(f"{what} of shape {ctx.shape(p)} (expects a scalar)")
    return ctx.emit("reshape", p, ())


def _f32_scale(ctx: NodeContext, s: Value, what: str = "a scale") -> Value:
    if ctx.dtype(s) != "float32":
        raise Unsupported(f"{what} of dtype {ctx.dtype(s)} (expects float32)")
    return _scalar_param(ctx, s, what)


def _quantize_value(ctx: NodeContext, v: Value, scale: Value, zp: Value | None, out: str) -> Value:
    """``saturate(round(v / scale) + zp)``: ONNX Runtime's QuantizeLinear kernel."""
    z = np.zeros((), out) if zp is None else _scalar_param(ctx, zp, "a zero point")
    return ctx.emit("quantize", v, _f32_scale(ctx, scale), z, axis=-1, out_dtype=out)


def _dequant(ctx: NodeContext, x: Value, scale: Value, zp: Value | None) -> Value:
    return dequantize_f32(ctx, x, _f32_scale(ctx, scale), zp)


@converter("QuantizeLinear", "DequantizeLinear", domain=_MS)
def _ms_qdq(ctx: NodeContext) -> Value:
    x, scale, zp = ctx.input(0), ctx.input(1), ctx.optional(2)
    axis = norm_axis(ctx, ctx.attr("axis", 1), ctx.ndim(x)) if ctx.ndim(x) else 0
    per_axis = ctx.ndim(scale) == 1 and ctx.shape(scale) != [1]
    if ctx.op_type == "QuantizeLinear":
        out = ctx.dtype(zp) if zp is not None else "uint8"
        if out not in QUANTIZED:
            raise Unsupported(f"quantizing to {out}")
        z = zp if zp is not None else np.zeros((), out)
        return ctx.emit("quantize", x, scale, z, axis=axis if per_axis else -1, out_dtype=out)
    if ctx.dtype(x) not in QUANTIZED:
        raise Unsupported(f"dequantizing {ctx.dtype(x)}")
    z = zp if zp is not None else np.zeros((), ctx.dtype(x))
    return ctx.emit("dequantize", x, scale, z, axis=axis if per_axis else -1,
                    out_dtype=ctx.dtype(scale))


@converter("QLinearConv", domain=_MS)
def _ms_qlinear_conv(ctx: NodeContext) -> Value:
    # ONNX's QLinearConv; channels_last=1: the input and output in NHWC order
    x, back = _nchw(ctx, ctx.input(0))
    y = qlinear_conv(ctx, x)
    return y if back is None else ctx.emit("permute_dims", y, axes=back)


# ---------------------------------------------------------------------------
# elementwise: QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu
# ---------------------------------------------------------------------------

def _binary_inputs(ctx: NodeContext) -> tuple[Value, Value, Value, Value, str]:
    a, b = ctx.input(0), ctx.input(3)
    dt = ctx.dtype(a)
    if dt not in ("int8", "uint8") or ctx.dtype(b) != dt:
        raise Unsupported(f"operands of dtypes {dt} and {ctx.dtype(b)}")
    a32 = ctx.emit("astype", centered(ctx, a, ctx.optional(2)), dtype="float32")
    b32 = ctx.emit("astype", centered(ctx, b, ctx.optional(5)), dtype="float32")
    return a32, b32, _f32_scale(ctx, ctx.input(1)), _f32_scale(ctx, ctx.input(4)), dt


def _fma(ctx: NodeContext, x: Value, y: Value, z: Value) -> Value:
    """float32 ``x * y + z`` rounded once, as a fused multiply-add: the float32
    product is exact in float64, and so (nearly always) is the sum."""
    def wide(v: Value) -> Value:
        return ctx.emit("astype", v, dtype="float64")
    return ctx.emit("astype", ctx.emit("add", ctx.emit("multiply", wide(x), wide(y)), wide(z)),
                    dtype="float32")


def _scalar_span(ctx: NodeContext, x: Value, other: Value) -> bool:
    """Does ONNX Runtime's broadcast loop hand ``x`` to the kernel as one value
    per span (its innermost dimension broadcast against ``other``'s)?"""
    last = ctx.shape(x)[-1] if ctx.ndim(x) else 1
    other_last = ctx.shape(other)[-1] if ctx.ndim(other) else 1
    return last == 1 and other_last != 1


@converter("QLinearAdd", domain=_MS)
def _qlinear_add(ctx: NodeContext) -> Value:
    # ONNX Runtime's vector kernel: with r_ac = sa / sc, r_bc = sb / sc and
    # fixed = zc - (r_ac * za + r_bc * zb), fma(a, r_ac, fma(b, r_bc, fixed))
    # rounded half to even (a scalar side is folded into fixed first)
    a, b = ctx.input(0), ctx.input(3)
    dt = ctx.dtype(a)
    if dt not in ("int8", "uint8") or ctx.dtype(b) != dt:
        raise Unsupported(f"operands of dtypes {dt} and {ctx.dtype(b)}")
    sc = _f32_scale(ctx, ctx.input(6))
    r_ac = ctx.emit("divide", _f32_scale(ctx, ctx.input(1)), sc)
    r_bc = ctx.emit("divide", _f32_scale(ctx, ctx.input(4)), sc)

    def zp(i: int) -> Value:
        z = ctx.optional(i)
        z = np.zeros((), dt) if z is None else _scalar_param(ctx, z, "a zero point")
        return ctx.emit("astype", z, dtype="float32")
    fixed = ctx.emit("subtract", zp(7), ctx.emit("add", ctx.emit("multiply", r_ac, zp(2)),
                                                ctx.emit("multiply", r_bc, zp(5))))
    af, bf = (ctx.emit("astype", v, dtype="float32") for v in (a, b))
    # the scalar's fold is a fused multiply-add too (written as one: the code
    # generator fuses nothing whose value a rounding decides)
    if _scalar_span(ctx, a, b):
        v = _fma(ctx, bf, r_bc, _fma(ctx, af, r_ac, fixed))
    elif _scalar_span(ctx, b, a):
        v = _fma(ctx, af, r_ac, _fma(ctx, bf, r_bc, fixed))
    else:
        v = _fma(ctx, af, r_ac, _fma(ctx, bf, r_bc, fixed))
    return requantize(ctx, v, None, dt)


@converter("QLinearMul", domain=_MS)
def _qlinear_mul(ctx: NodeContext) -> Value:
    # (a - za) * (b - zb) * (sa * sb / sc), rounded, plus zc
    a32, b32, sa, sb, dt = _binary_inputs(ctx)
    sc = _f32_scale(ctx, ctx.input(6))
    ratio = ctx.emit("divide", ctx.emit("multiply", sa, sb), sc)
    return requantize(ctx, ctx.emit("multiply", ctx.emit("multiply", a32, b32), ratio),
                      ctx.optional(7), dt)


def _unary_lookup(ctx: NodeContext, fn: str) -> Value:
    """Dequantize, apply ``fn`` in float32, quantize (what ONNX Runtime's
    lookup table holds for each of the 256 inputs)."""
    x = ctx.input(0)
    dt = _int8_dtype(ctx, x)
    v = _dequant(ctx, x, ctx.input(1), ctx.optional(2))
    if fn == "sigmoid":
        v = ctx.emit("sigmoid", v)
    else:
        alpha = _F32(ctx.attr("alpha", 0.01))
        v = ctx.emit("where", ctx.emit("greater_equal", v, _F32(0)), v,
                     ctx.emit("multiply", v, alpha))
    return _quantize_value(ctx, v, ctx.input(3), ctx.optional(4), dt)


@converter("QLinearSigmoid", domain=_MS)
def _qlinear_sigmoid(ctx: NodeContext) -> Value:
    return _unary_lookup(ctx, "sigmoid")


@converter("QLinearLeakyRelu", domain=_MS)
def _qlinear_leaky_relu(ctx: NodeContext) -> Value:
    return _unary_lookup(ctx, "leaky_relu")


# ---------------------------------------------------------------------------
# pooling and concatenation
# ---------------------------------------------------------------------------

def _nchw(ctx: NodeContext, x: Value) -> tuple[Value, list[int] | None]:
    """``x`` in NCHW order, and the permutation back (None: it already was)."""
    if not ctx.attr("channels_last", 0):
        return x, None
    n = ctx.ndim(x)
    to = [0, n - 1, *range(1, n - 1)]
    back = [0, *range(2, n), 1]
    return ctx.emit("permute_dims", x, axes=to), back


@converter("QLinearAveragePool", domain=_MS)
def _qlinear_average_pool(ctx: NodeContext) -> Value:
    # ONNX Runtime dequantizes, pools in float32, then rounds y / y_scale + zp
    x = ctx.input(0)
    dt = _int8_dtype(ctx, x)
    xf, back = _nchw(ctx, _dequant(ctx, x, ctx.input(1), ctx.optional(2)))
    y = _pool_float(ctx, xf, "avg")
    zp = ctx.optional(4)
    zp = np.zeros((), dt) if zp is None else _scalar_param(ctx, zp, "y_zero_point")
    y = ctx.emit("add", ctx.emit("divide", y, _f32_scale(ctx, ctx.input(3))),
                 ctx.emit("astype", zp, dtype="float32"))
    y = requantize(ctx, y, None, dt)
    return y if back is None else ctx.emit("permute_dims", y, axes=back)


@converter("QLinearGlobalAveragePool", domain=_MS)
def _qlinear_global_average_pool(ctx: NodeContext) -> Value:
    # int32 sum minus zp * N, times x_scale / (y_scale * N), rounded, plus y_zp
    x = ctx.input(0)
    dt = _int8_dtype(ctx, x)
    xc, back = _nchw(ctx, x)
    dims = ctx.shape(xc)
    count = 1
    for d in dims[2:]:
        if not isinstance(d, int):
            raise Unsupported("QLinearGlobalAveragePool over symbolic dimensions")
        count *= d
    total = ctx.emit("sum", centered(ctx, xc, _scalar_param(ctx, ctx.input(2), "x_zero_point")),
                     axis=list(range(2, len(dims))), keepdims=True)
    scale = ctx.emit("divide", _f32_scale(ctx, ctx.input(1)),
                     ctx.emit("multiply", _f32_scale(ctx, ctx.input(3)), _F32(count)))
    y = requantize(ctx, ctx.emit("multiply", ctx.emit("astype", total, dtype="float32"), scale),
                   ctx.input(4), dt)
    return y if back is None else ctx.emit("permute_dims", y, axes=back)


@converter("QLinearConcat", domain=_MS)
def _qlinear_concat(ctx: NodeContext) -> Value:
    y_scale, y_zp = ctx.input(0), ctx.input(1)
    dt = _int8_dtype(ctx, y_zp)
    if (len(ctx.inputs) - 2) % 3 or len(ctx.inputs) < 5:
        raise Unsupported(f"{len(ctx.inputs)} inputs (expects Y_scale, Y_zero_point, then "
                          "triples X, X_scale, X_zero_point)")
    parts = []
    for i in range(2, len(ctx.inputs), 3):
        x = ctx.input(i)
        v = _dequant(ctx, x, ctx.input(i + 1), ctx.input(i + 2))
        parts.append(_quantize_value(ctx, v, y_scale, y_zp, dt))
    axis = norm_axis(ctx, int(ctx.attr("axis", 0)), ctx.ndim(parts[0]))
    return ctx.emit("concat", parts, axis=axis)


# ---------------------------------------------------------------------------
# QGemm, MatMulIntegerToFloat, DynamicQuantizeMatMul
# ---------------------------------------------------------------------------

@converter("QGemm", domain=_MS)
def _qgemm(ctx: NodeContext) -> Value:
    a, b = ctx.input(0), ctx.input(3)
    if ctx.attr("transA", 0):
        a = ctx.emit("permute_dims", a, axes=[1, 0])
    if ctx.attr("transB", 0):
        b = ctx.emit("permute_dims", b, axes=[1, 0])
    a32, b32 = matmul_operands(ctx, a, ctx.input(2), b, ctx.input(5))
    acc = exact_int_matmul(ctx, a32, b32, a, b)
    if ctx.has(6):
        acc = ctx.emit("add", acc, ctx.input(6))
    # ((alpha * a_scale) * b_scale) / y_scale, one per column or per tensor
    alpha = _F32(ctx.attr("alpha", 1.0))
    sa = _f32_scale(ctx, ctx.input(1))
    sb = ctx.input(4)
    if ctx.dtype(sb) != "float32":
        raise Unsupported(f"b_scale of dtype {ctx.dtype(sb)}")
    scale = ctx.emit("multiply", ctx.emit("multiply", alpha, sa), sb)
    if not ctx.has(7):
        return ctx.emit("multiply", ctx.emit("astype", acc, dtype="float32"), scale)
    scale = ctx.emit("divide", scale, _f32_scale(ctx, ctx.input(7)))
    zp = ctx.optional(8)
    out = ctx.dtype(zp) if zp is not None else "uint8"
    return requantize(ctx, ctx.emit("multiply", ctx.emit("astype", acc, dtype="float32"), scale),
                      zp, out)


def _to_float(ctx: NodeContext, acc: Value, a_scale: Value, b_scale: Value,
              bias: Value | None) -> Value:
    """``float32(acc) * (a_scale * b_scale)`` (+ bias)."""
    y = ctx.emit("multiply", ctx.emit("astype", acc, dtype="float32"),
                 ctx.emit("multiply", a_scale, b_scale))
    return y if bias is None else ctx.emit("add", y, bias)


@converter("MatMulIntegerToFloat", domain=_MS)
def _matmul_integer_to_float(ctx: NodeContext) -> Value:
    a, b = ctx.input(0), ctx.input(1)
    sa, sb = ctx.input(2), ctx.input(3)
    for s in (sa, sb):
        if ctx.dtype(s) != "float32":
            raise Unsupported(f"a scale of dtype {ctx.dtype(s)}")
    a32, b32 = matmul_operands(ctx, a, ctx.optional(4), b, ctx.optional(5))
    sa = _scalar_param(ctx, sa, "a_scale")
    return _to_float(ctx, exact_int_matmul(ctx, a32, b32, a, b), sa, sb, ctx.optional(6))


@converter("DynamicQuantizeMatMul", domain=_MS)
def _dynamic_quantize_matmul(ctx: NodeContext) -> Value:
    # A quantized as DynamicQuantizeLinear does, as ONNX Runtime does
    a, b, sb = ctx.input(0), ctx.input(1), ctx.input(2)
    if ctx.dtype(a) != "float32" or ctx.dtype(sb) != "float32":
        raise Unsupported(f"A of dtype {ctx.dtype(a)} with a {ctx.dtype(sb)} scale")
    qa, sa, za = dynamic_uint8(ctx, a)
    a32, b32 = matmul_operands(ctx, qa, za, b, ctx.optional(3))
    return _to_float(ctx, exact_int_matmul(ctx, a32, b32, qa, b), sa, sb, ctx.optional(4))



def _lstm_weight(ctx: NodeContext, q: Value, scale: Value, zp: Value | None,
                 what: str) -> Value:
    """A DynamicQuantizeLSTM weight (``[dirs, K, 4H]``, quantized per
    direction or per gate column) dequantized to float32 and transposed to
    LSTM's ``[dirs, 4H, K]``."""
    if ctx.ndim(q) != 3:
        raise FrontendError(f"DynamicQuantizeLSTM: {what} must be 3-D, got shape {ctx.shape(q)}")
    if ctx.dtype(scale) != "float32":
        raise Unsupported(f"{what}_scale of dtype {ctx.dtype(scale)} (expects float32)")
    dirs, _, cols = ctx.shape(q)
    per = (dirs, 1, 1) if ctx.ndim(scale) == 1 else (dirs, 1, cols)
    if ctx.shape(scale) not in ([dirs], [dirs, cols]):
        raise FrontendError(f"DynamicQuantizeLSTM: {what}_scale of shape {ctx.shape(scale)} "
                            f"for {what} of shape {ctx.shape(q)} (expects [{dirs}] or "
                            f"[{dirs}, {cols}])")
    if zp is not None and ctx.shape(zp) != ctx.shape(scale):
        raise FrontendError(f"DynamicQuantizeLSTM: {what}_zero_point of shape "
                            f"{ctx.shape(zp)}, {what}_scale {ctx.shape(scale)}")
    if zp is not None and ctx.dtype(zp) != ctx.dtype(q):
        raise Unsupported(f"a {ctx.dtype(zp)} zero point for {ctx.dtype(q)} {what}")
    with ctx.weight_transform():  # (a constant weight: dequantized at import)
        diff = centered(ctx, q, None)
        if zp is not None:
            z = ctx.emit("reshape", ctx.emit("astype", zp, dtype="int32"), per)
            diff = ctx.emit("subtract", diff, z)
        w = ctx.emit("multiply", ctx.emit("astype", diff, dtype="float32"),
                     ctx.emit("reshape", scale, per))
        return ctx.emit("permute_dims", w, axes=[0, 2, 1])


@converter("DynamicQuantizeLSTM", domain=_MS)
def _dynamic_quantize_lstm(ctx: NodeContext) -> list[Value]:
    # inputs: X, W, R, B, sequence_lens, initial_h, initial_c, P,
    #         W_scale, W_zero_point, R_scale, R_zero_point
    w = _lstm_weight(ctx, ctx.input(1), ctx.input(8), ctx.optional(9), "W")
    r = _lstm_weight(ctx, ctx.input(2), ctx.input(10), ctx.optional(11), "R")
    return convert_recurrent(ctx, "lstm", ctx.input(0), w, r, ctx.optional(3), ctx.optional(4),
                             ctx.optional(5), ctx.optional(6), ctx.optional(7))


@converter("MatMulInteger16", domain=_MS)
def _matmul_integer16(ctx: NodeContext) -> Value:
    a, b = ctx.input(0), ctx.input(1)
    if ctx.dtype(a) not in ("int16", "uint16") or ctx.dtype(b) not in ("int16", "uint16"):
        raise Unsupported(f"operands of dtypes {ctx.dtype(a)} and {ctx.dtype(b)}")
    return ctx.emit("matmul", centered(ctx, a, None), centered(ctx, b, None))


@converter("QLinearWhere", domain=_MS)
def _qlinear_where(ctx: NodeContext) -> Value:
    # X and Y requantized to Z's scale and zero point, then selected
    cond, z_scale, z_zp = ctx.input(0), ctx.input(7), ctx.input(8)
    dt = _int8_dtype(ctx, z_zp)
    picks = [_quantize_value(ctx, _dequant(ctx, ctx.input(i), ctx.input(i + 1), ctx.input(i + 2)),
                             z_scale, z_zp, dt) for i in (1, 4)]
    return ctx.emit("where", cond, *picks)


@converter("QLinearSoftmax", domain=_MS)
def _qlinear_softmax(ctx: NodeContext) -> Value:
    # ONNX Runtime's kernel, step by step: a table of float32 exponentials of
    # (j - 255 + shift) * x_scale, read at j = x - max(x) + 255 (the shift
    # keeps a row's sum finite); the quotient (e * floor(1 / y_scale)) / sum
    # rounded, plus the zero point, saturated at the top. The sum's order may
    # differ from ORT's sequential one (a float32 rounding: the result moves
    # only at an exact halfway point).
    x = ctx.input(0)
    dt = _int8_dtype(ctx, x)
    # (one element each: an empty scale raised IndexError here)
    x_scale = float(np.float32(ctx.const_scalar(1, "X_scale")))
    y_scale = float(np.float32(ctx.const_scalar(3, "y_scale")))
    zp = _scalar_param(ctx, ctx.input(4), "y_zero_point")
    opset = int(ctx.attr("opset", 13))
    dims = ctx.shape(x)
    if not dims:
        raise Unsupported("a 0-d input")
    axis = norm_axis(ctx, int(ctx.attr("axis", -1 if opset >= 13 else 1)), len(dims))
    flat = opset < 13 and axis != len(dims) - 1
    if flat:  # opset < 13: over the trailing dimensions from axis, flattened
        x = reshape(ctx, x, [prod_dims(dims[:axis]), prod_dims(dims[axis:])])
        axis = 1
    d = prod_dims(dims[axis:]) if opset < 13 else dims[axis]
    if not isinstance(d, int) or not x_scale > 0 or not y_scale > 0:
        raise Unsupported("QLinearSoftmax over a symbolic axis or with non-positive scales")
    shift = max(0.0, float(np.log(np.finfo(np.float32).max / d)) - 5.0) / x_scale
    table = np.exp((np.arange(256, dtype=np.float64) - 255 + shift) * x_scale).astype(np.float32)
    x32 = ctx.emit("astype", x, dtype="int32")
    index = ctx.emit("add", ctx.emit("subtract", x32, ctx.emit("max", x32, axis=[axis],
                                                                keepdims=True)),
                     np.asarray(255, np.int32))
    e = ctx.emit("take", table, ctx.emit("astype", index, dtype="int64"), axis=0)
    total = ctx.emit("sum", e, axis=[axis], keepdims=True)
    q = ctx.emit("divide", ctx.emit("multiply", e, _F32(np.floor(np.float32(1) /
                                                              np.float32(y_scale)))), total)
    q = ctx.emit("add", ctx.emit("astype", ctx.emit("round", q), dtype="int32"),
                 ctx.emit("astype", zp, dtype="int32"))
    # the quotient and zero point are never below the type's minimum
    top = np.asarray(np.iinfo(dt).max, np.int32)
    y = ctx.emit("astype", ctx.emit("minimum", q, top), dtype=dt)
    return reshape(ctx, y, dims) if flat else y


@converter("QAttention", domain=_MS)
def _qattention(ctx: NodeContext) -> Value:
    # Q, K and V from one integer matmul (input - izp) @ (weight - wzp), times
    # input_scale * weight_scale (per tensor or per column), plus the bias;
    # then ORT's float attention: softmax(Q K^T * scale + mask) V, a masked
    # score being mask_filter_value (a mask_index of shape (batch,): keys at
    # or past each end position; unidirectional: keys after the query)
    x, w, bias = ctx.input(0), ctx.input(1), ctx.input(2)
    if ctx.has(8):
        raise Unsupported("QAttention with a past state")
    if ctx.attr("do_rotary", 0):
        raise Unsupported("QAttention with do_rotary=1")
    heads = int(ctx.attr("num_heads", 0))
    b, s, _ = ctx.static_shape(x, "the input")
    hidden3 = ctx.static_shape(w, "the weight")[1]
    if heads <= 0 or hidden3 % (3 * heads):
        raise Unsupported(f"num_heads {heads} for a weight of {hidden3} columns")
    hidden = hidden3 // 3
    d = hidden // heads
    a32, w32 = matmul_operands(ctx, x, ctx.optional(6), w, ctx.optional(7))
    sx = _f32_scale(ctx, ctx.input(3), "input_scale")
    sw = ctx.input(4)
    if ctx.dtype(sw) != "float32":
        raise Unsupported(f"weight_scale of dtype {ctx.dtype(sw)}")
    qkv = _to_float(ctx, exact_int_matmul(ctx, a32, w32, x, w), sx, sw, bias)

    def head(i: int) -> Value:  # (B, S, hidden) part i -> (B, heads, S, d)
        part = ctx.emit("strided_slice", qkv, axes=[2], begin=[i * hidden],
                        end=[(i + 1) * hidden])
        return ctx.emit("permute_dims", ctx.emit("reshape", part, (b, s, heads, d)),
                        axes=[0, 2, 1, 3])
    q, k, v = head(0), head(1), head(2)
    scale = ctx.attr("scale")
    scale = _F32(1.0 / np.sqrt(d) if scale is None else float(scale))
    scores = ctx.emit("multiply", ctx.emit("matmul", q, ctx.emit("permute_dims", k,
                                                                   axes=[0, 1, 3, 2])), scale)
    fill = _F32(ctx.attr("mask_filter_value", -10000.0))
    keep: Value | None = None
    if ctx.has(5):
        mask = ctx.input(5)
        if ctx.shape(mask) != [b]:
            raise Unsupported(f"a mask_index of shape {ctx.shape(mask)} (supported: (batch,))")
        ends = ctx.emit("reshape", ctx.emit("astype", mask, dtype="int64"), (b, 1, 1, 1))
        keep = ctx.emit("less", np.arange(s, dtype=np.int64).reshape(1, 1, 1, s), ends)
    if ctx.attr("unidirectional", 0):
        causal = np.arange(s)[None, :] <= np.arange(s)[:, None]
        keep = causal if keep is None else ctx.emit("logical_and", keep, causal)
    if keep is not None:
        scores = ctx.emit("where", keep, scores, fill)
    probs = ctx.emit("nn.softmax", scores, axis=-1)
    y = ctx.emit("permute_dims", ctx.emit("matmul", probs, v), axes=[0, 2, 1, 3])
    return [ctx.emit("reshape", y, (b, s, hidden)), None]

"""Casts to and from the narrow float types phasec holds in float32
(bfloat16, the float8s, float4: ``_dtypes.NARROW_FORMATS``).

A value of such a type is a float32 tensor holding exactly the format's
values; the importer records its format by ONNX name (``ctx.formats``). A
cast to the type rounds (``R.round_to_format``, with ONNX's ``saturate``
for the float8s); a cast from it is an ordinary cast from float32, exact.
Data movement keeps the format (the importer's ``_NARROW_MOVES``);
QuantizeLinear and DequantizeLinear quantize to and from them (ops_quant).
Any other operator on bfloat16 values computes in float32 and the importer
rounds each of its float results to bfloat16; on the other formats it is
unsupported. Initializers of these types are held the same way. The ONNX backend converts
graph inputs and outputs of these types (ml_dtypes arrays) at the boundary.
"""

from __future__ import annotations

import numpy as np

from phasec.frontend.onnx._context import NodeContext, Value
from phasec.frontend.onnx._dtypes import NARROW_FORMATS, NARROW_INTS, carrier

__all__ = ["cast_narrow", "FLOAT8", "FLOAT_FORMATS"]

#: the formats ONNX's ``saturate`` applies to
FLOAT8 = frozenset(f for f in NARROW_FORMATS.values() if f.startswith("float8"))
#: the float formats held in float32
FLOAT_FORMATS = frozenset(f for f in NARROW_FORMATS.values() if f not in NARROW_INTS)


def cast_narrow(ctx: NodeContext, x: Value, fmt: str | None, dtype: str | None,
                cast_plain) -> Value:
    """Cast input ``x`` of ``ctx``'s node to format ``fmt`` (held in
    float32), or, when ``fmt`` is None, from a narrow format to ``dtype``
    (``cast_plain(ctx, x, dtype)``: the ordinary cast)."""
    out = ctx.node.output[0]
    if fmt is None:
        return cast_plain(ctx, x, dtype)
    ctx.formats[out] = fmt
    if ctx.formats.get(ctx.node.input[0]) == fmt:
        return x
    if fmt in NARROW_INTS:
        return _wrap_int(ctx, x, fmt)
    if ctx.dtype(x) != "float32":  # (from float64: rounded twice, to float32 first)
        x = ctx.emit("astype", x, dtype="float32")
    saturate = fmt in FLOAT8 and ctx.attr("saturate", 1) == 1  # (float4 always saturates)
    return ctx.emit("round_to_format", x, format=fmt, saturate=saturate)


def _wrap_int(ctx: NodeContext, x: Value, fmt: str) -> Value:
    """A cast to a narrow integer: a float to the nearest integer, ties away
    from zero (NaN to 0; as ONNX Runtime; ml_dtypes, which the ONNX
    reference calls, truncates), then wrapped into the format's range, two's
    complement (as both do), held in int8 / uint8."""
    bits, signed = NARROW_INTS[fmt]
    if ctx.dtype(x) == "bool":
        return ctx.emit("astype", x, dtype=carrier(fmt))
    if ctx.dtype(x).startswith("float"):
        x = ctx.emit("where", ctx.emit("isnan", x), np.zeros((), ctx.dtype(x)), x)
        whole = ctx.emit("trunc", x)
        half = ctx.emit("greater_equal", ctx.emit("abs", ctx.emit("subtract", x, whole)),
                        np.array(0.5, ctx.dtype(x)))
        x = ctx.emit("where", half, ctx.emit("add", whole, ctx.emit("sign", x)), whole)
        x = ctx.emit("clip", x, min=-2.0 ** 62, max=2.0 ** 62)  # within int64
    x = ctx.emit("astype", x, dtype="int64")
    span, half = np.array(1 << bits, np.int64), np.array(1 << (bits - 1), np.int64)
    if signed:
        x = ctx.emit("subtract", ctx.emit("floor_mod", ctx.emit("add", x, half), span), half)
    else:
        x = ctx.emit("floor_mod", x, span)
    return ctx.emit("astype", x, dtype=carrier(fmt))

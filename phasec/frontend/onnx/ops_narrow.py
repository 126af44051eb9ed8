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

from phasec.frontend.errors import FrontendError
from phasec.frontend.onnx._context import NodeContext, Value
from phasec.frontend.onnx._dtypes import NARROW_FORMATS, NARROW_INTS, carrier

__all__ = ["cast_narrow", "FLOAT8", "FLOAT_FORMATS", "E8M0"]

#: float8_e8m0fnu: powers of two 2^-127..2^127 and NaN (no sign, no zero),
#: the MX formats' scales; a cast to it is :func:`_to_e8m0`'s
E8M0 = "float8_e8m0fnu"
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
    if fmt == E8M0:
        return _to_e8m0(ctx, x)
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


def _to_e8m0(ctx: NodeContext, x: Value) -> Value:
    """float32 ``x`` cast to float8_e8m0fnu (held in float32): the power of
    two of ``|x|``'s binade, biased exponent ``E = e + 127``, moved up one
    binade by ONNX's ``round_mode``: ``up`` when ``|x|`` is not a power of
    two, ``nearest`` when its significand is at least 1.5, ``down`` never.
    Values below the smallest normal float32 (zero included) have ``E = 0``
    (2^-127), moved up to 2^-126 by ``up`` when nonzero and by ``nearest``
    when above 2^-127. Past 2^127 (``E = 255``): 2^127 with ``saturate``,
    else NaN; NaN and the infinities become NaN. (As the ONNX definition,
    which reads float32's exponent and fraction bits; computed in float64,
    every step exact: ``power(2, k)`` of integers, quotients by powers of two.)"""
    mode = ctx.attr("round_mode", "up")
    if mode not in ("up", "down", "nearest"):
        raise FrontendError(f"Cast to FLOAT8E8M0: round_mode {mode!r} (expects 'up', 'down' "
                            "or 'nearest')")
    saturate = ctx.attr("saturate", 1) == 1

    def f64(v: float) -> np.ndarray:
        return np.asarray(v, np.float64)

    def pow2(k: Value) -> Value:
        return ctx.emit("power", f64(2.0), k)
    a = ctx.emit("abs", ctx.emit("astype", x, dtype="float64"))
    e = ctx.emit("floor", ctx.emit("divide", ctx.emit("log", a), f64(np.log(2.0))))
    e = ctx.emit("where", ctx.emit("greater", pow2(e), a), ctx.emit("subtract", e, f64(1.0)), e)
    up1 = ctx.emit("add", e, f64(1.0))
    e = ctx.emit("where", ctx.emit("less_equal", pow2(up1), a), up1, e)
    normal = ctx.emit("greater_equal", a, f64(2.0 ** -126))
    if mode == "down":
        bump = np.zeros((), np.bool_)
    else:
        mant = ctx.emit("divide", a, pow2(e))  # in [1, 2) for a normal value
        if mode == "up":
            bump = ctx.emit("where", normal, ctx.emit("greater", mant, f64(1.0)),
                            ctx.emit("greater", a, f64(0.0)))
        else:
            bump = ctx.emit("where", normal, ctx.emit("greater_equal", mant, f64(1.5)),
                            ctx.emit("greater", a, f64(2.0 ** -127)))
    biased = ctx.emit("where", normal, ctx.emit("add", e, f64(127.0)), f64(0.0))
    biased = ctx.emit("add", biased, ctx.emit("astype", bump, dtype="float64"))
    if saturate:
        biased = ctx.emit("minimum", biased, f64(254.0))
    nan = ctx.emit("logical_or", ctx.emit("logical_not", ctx.emit("isfinite", a)),
                   ctx.emit("greater", biased, f64(254.0)))
    y = ctx.emit("astype", pow2(ctx.emit("subtract", biased, f64(127.0))), dtype="float32")
    # E = 0 is 2^-127, a subnormal float32: selected as a constant rather than
    # converted, since kernels flush subnormal results to zero
    # (phasec/backend/llvm/fpenv.py) and a select copies its operand's bits
    y = ctx.emit("where", ctx.emit("equal", biased, f64(0.0)),
                 np.asarray(2.0 ** -127, np.float32), y)
    return ctx.emit("where", nan, np.asarray(np.nan, np.float32), y)

"""Narrow float formats phasec has no dtype for (bfloat16, the float8s,
float4): ``round_to_format(x, format, saturate)`` rounds float32 values to
the values the format holds, kept in float32 (the carrier). A cast to such a
format is this rounding; a cast from it is exact. (TVM 0.27 has no such
operator; phasec's own.)

Rounding is to nearest, ties to even, subnormals included, as ml_dtypes and
ONNX Runtime convert. A value beyond the format's largest finite one becomes
that largest one with ``saturate`` (ONNX's default for the float8s), else
infinity where the format has one (bfloat16, float8_e5m2) and NaN where it
does not; infinities likewise. float4_e2m1fn has neither infinity nor NaN:
it always saturates, and NaN becomes -0 (as ml_dtypes encodes it). The
formats without a negative zero (the ``fnuz`` ones) give +0.

The kernel computes in float64: the binade ``e = floor(log2 |x|)`` (checked
against exact powers of two), the spacing ``q = 2^(max(e, emin) - mantissa
bits)``, and ``round(|x| / q) * q`` -- every step exact.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from phasec import te
from phasec.ir.tir import BinaryOp, Cast, PrimExpr, Select
from phasec.op._common import OpPattern, as_bool, attrs_of, define, err, one_of, tensor_arg
from phasec.op._lowering import _const, _out, _tensor, legalizes
from phasec.op.datatype import with_dtype
from phasec.op.draw import declares_draw

__all__ = ["Format", "FORMATS"]


class Format(NamedTuple):
    mantissa: int       #: explicit mantissa bits
    emin: int           #: exponent of the smallest normal value
    max: float          #: the largest finite value
    has_inf: bool
    has_nan: bool
    neg_zero: bool


FORMATS: dict[str, Format] = {
    "bfloat16": Format(7, -126, float(np.float32(3.3895313892515355e38)), True, True, True),
    "float8_e4m3fn": Format(3, -6, 448.0, False, True, True),
    "float8_e4m3fnuz": Format(3, -7, 240.0, False, True, False),
    "float8_e5m2": Format(2, -14, 57344.0, True, True, True),
    "float8_e5m2fnuz": Format(2, -15, 57344.0, False, True, False),
    "float4_e2m1fn": Format(1, 0, 6.0, False, False, True),
}


def _infer(call, ctx):
    x = tensor_arg(call, 0, ctx)
    if x.dtype not in ("void", "float32"):
        raise err(call, f"round_to_format rounds float32 values, but x is {x.dtype}")
    return with_dtype(x, "float32")


def _reference(x, format, saturate=True):  # noqa: A002 - the attribute's name
    f = FORMATS[format]
    v = np.asarray(x).astype(np.float64)
    a = np.abs(v)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        e = np.floor(np.log2(a))
        e = np.where(np.exp2(e) > a, e - 1, e)
        e = np.where(np.exp2(e + 1) <= a, e + 1, e)
        q = np.exp2(np.maximum(e, f.emin) - f.mantissa)
        r = np.round(a / q) * q
    sat = saturate or not (f.has_inf or f.has_nan)
    over = np.float64(np.inf) if f.has_inf else np.float64(np.nan)
    r = np.where(r > f.max, f.max if sat else over, r)
    r = np.where(np.isinf(a), f.max if sat else over, r)
    out = np.where(v < 0, -r, r)
    if not f.neg_zero:
        out = np.where(out == 0, 0.0, out)
    out = np.where(np.isnan(v), np.nan if f.has_nan else -0.0, out)
    return out.astype(np.float32)


define("round_to_format", ("x",), _infer,
       attrs={"format": ("float8_e4m3fn", one_of(*FORMATS)), "saturate": (True, as_bool)},
       reference=_reference, pattern=OpPattern.ELEMWISE,
       doc="float32 values rounded to a narrow float format's (bfloat16, float8, float4).")


@legalizes("round_to_format")
def _round_te(call, inputs):
    x = _tensor(inputs, 0, call)
    out = _out(call)
    a = attrs_of(call)
    f = FORMATS[a["format"]]
    sat = a["saturate"] or not (f.has_inf or f.has_nan)

    def c(v: float) -> PrimExpr:
        return _const(v, "float64")

    def body(*i):
        v = Cast("float64", x[i])
        mag = te.call("fabs", v)
        e0 = te.call("floor", te.call("log2", mag))
        e1 = Select(BinaryOp(">", te.call("exp2", e0), mag), BinaryOp("-", e0, c(1.0)), e0)
        e = Select(BinaryOp("<=", te.call("exp2", BinaryOp("+", e1, c(1.0))), mag),
                   BinaryOp("+", e1, c(1.0)), e1)
        q = te.call("exp2", BinaryOp("-", BinaryOp("max", e, c(float(f.emin))),
                                     c(float(f.mantissa))))
        r = BinaryOp("*", te.call("round", BinaryOp("/", mag, q)), q)
        big = c(f.max) if sat else c(float("inf") if f.has_inf else float("nan"))
        r = Select(BinaryOp("or", BinaryOp(">", r, c(f.max)), te.call("isinf", mag)), big, r)
        signed = Select(BinaryOp("<", v, c(0.0)), BinaryOp("*", c(-1.0), r), r)
        if not f.neg_zero:
            signed = Select(BinaryOp("==", signed, c(0.0)), c(0.0), signed)
        nan = c(float("nan")) if f.has_nan else c(-0.0)
        return Cast("float32", Select(te.call("isnan", v), nan, signed))
    return te.compute(out.shape, body, name="T_round_to_format")


def _draw(ctx):
    fmt = ctx.choose(sorted(FORMATS))
    lo, hi = ctx.hull()
    bound = max(abs(lo), abs(hi)) * 1.01 + 1.0
    ctx.result_in(-bound, bound)
    return (ctx.x,), {"format": fmt, "saturate": ctx.choose([True, False])}


declares_draw("round_to_format", ranks=(0, 1, 2, 3), build=_draw)

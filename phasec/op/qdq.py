"""``quantize`` and ``dequantize`` (TVM 0.27's ``relax.quantize`` /
``relax.dequantize``).

``quantize(data, scale, zero_point, axis=-1, out_dtype="int8")``::

    out = clip(round(data / scale) + zero_point, min(out_dtype), max(out_dtype))

computed in the data's float dtype (``round`` is half to even, as TVM's
``round``), for ``out_dtype`` int8/uint8/int16/uint16 (TVM's float8 outputs
are not phasec dtypes). ``dequantize(data, scale, zero_point, axis=-1,
out_dtype="float32")``::

    out = (int32(data) - zero_point) * float32(scale)      # float data: data - zero_point

clipped to the float16 range and converted for ``out_dtype="float16"``.
``scale`` and ``zero_point`` are scalars, single-element tensors (per
tensor), or 1-D with one entry per index of ``axis`` (per channel); scale is
float16/float32, zero_point int8/uint8/int16/uint16/int32/uint32/float16.
"""

from __future__ import annotations

import numpy as np

from phasec import arith
from phasec import te
from phasec.ir.text import prim_expr_to_str
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.tir import BinaryOp, IntImm
from phasec.op._common import OpPattern, as_dtype, as_int, attrs_of, define, err, tensor_arg
from phasec.op.draw import NUMBERS, declares_draw
from phasec.op._lowering import _const, _out, _tensor, legalizes

__all__: list[str] = []

_ZP_DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "float16")
_SCALE_DTYPES = ("float16", "float32")


def _singleton(p: TensorStructInfo) -> bool:
    if p.ndim == 0:
        return True
    return p.shape is not None and len(p.shape) > 0 and all(arith.const_int(d) == 1
                                                            for d in p.shape)


def _infer_qdq(quantize: bool):
    def infer(call, ctx):
        a = attrs_of(call)
        name = "quantize" if quantize else "dequantize"
        outs = ("int8", "uint8", "int16", "uint16") if quantize else ("float16", "float32")
        if a["out_dtype"] not in outs:
            raise err(call, f"{name} supports out_dtype {', '.join(outs)}, got {a['out_dtype']}")
        data = tensor_arg(call, 0, ctx, "data")
        scale = tensor_arg(call, 1, ctx, "scale")
        zp = tensor_arg(call, 2, ctx, "zero_point")
        out = TensorStructInfo(data.shape, a["out_dtype"], data.ndim)
        if "void" in (data.dtype, scale.dtype, zp.dtype):
            return TensorStructInfo(data.shape, "void", data.ndim)
        ins = ("float16", "float32") if quantize else \
            ("int8", "uint8", "int16", "uint16", "int32", "float16", "float32")
        if data.dtype not in ins:
            raise err(call, f"{name} takes {', '.join(ins)} data, got {data.dtype}")
        if scale.dtype not in _SCALE_DTYPES:
            raise err(call, f"the scale must be float16 or float32, got {scale.dtype}")
        if zp.dtype not in _ZP_DTYPES:
            raise err(call, f"the zero_point must be one of {', '.join(_ZP_DTYPES)}, got {zp.dtype}")
        if data.ndim == -1:
            return out
        axis = a["axis"] + data.ndim if a["axis"] < 0 else a["axis"]
        if data.ndim != 0 and not 0 <= axis < data.ndim:
            raise err(call, f"axis {a['axis']} is out of range for a tensor of ndim {data.ndim}")
        for p, what in ((scale, "scale"), (zp, "zero_point")):
            if _singleton(p):
                continue
            if data.ndim == 0:
                raise err(call, f"a 0-d input needs a scalar or single-element {what}")
            if p.ndim not in (-1, 1):
                raise err(call, f"the {what} must be a scalar or 1-D (per channel), but it has "
                                f"ndim {p.ndim}")
            if p.shape is not None and data.shape is not None and \
                    not arith.prove_equal(p.shape[0], data.shape[axis]):
                raise err(call, f"the {what} has {prim_expr_to_str(p.shape[0])} entries but the "
                                f"data has {prim_expr_to_str(data.shape[axis])} on axis {axis}")
        return out
    return infer


def _param_np(p, x, axis):
    """A scale/zero point broadcast against ``x`` along ``axis``."""
    p = np.asarray(p)
    if p.size == 1 or x.ndim == 0:
        return p.reshape(())
    shape = [1] * x.ndim
    shape[axis % x.ndim] = p.shape[0]
    return p.reshape(shape)


def _quantize_ref(data, scale, zero_point, axis=-1, out_dtype="int8"):
    x = np.asarray(data)
    s = _param_np(scale, x, axis).astype(x.dtype)
    z = _param_np(zero_point, x, axis).astype(x.dtype)
    info = np.iinfo(out_dtype)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q = np.round(x / s) + z
    q = np.clip(np.nan_to_num(q, nan=0.0), info.min, info.max)
    return q.astype(out_dtype)


def _dequantize_ref(data, scale, zero_point, axis=-1, out_dtype="float32"):
    x = np.asarray(data)
    s = _param_np(scale, x, axis).astype(np.float32)
    z = _param_np(zero_point, x, axis)
    if x.dtype.kind == "f":
        v = (x - z.astype(x.dtype)).astype(np.float32) * s
    else:
        v = (x.astype(np.int32) - z.astype(np.int32)).astype(np.float32) * s
    if out_dtype == "float16":
        v = np.clip(v, -65504.0, 65504.0)
    return v.astype(out_dtype)


_QDQ_ATTRS = {"axis": (-1, as_int)}
define("quantize", ("data", "scale", "zero_point"), _infer_qdq(True),
       attrs={**_QDQ_ATTRS, "out_dtype": ("int8", as_dtype)}, reference=_quantize_ref,
       pattern=OpPattern.BROADCAST,
       doc="clip(round(data / scale) + zero_point) in out_dtype (per tensor or per channel).")
define("dequantize", ("data", "scale", "zero_point"), _infer_qdq(False),
       attrs={**_QDQ_ATTRS, "out_dtype": ("float32", as_dtype)}, reference=_dequantize_ref,
       pattern=OpPattern.BROADCAST,
       doc="(data - zero_point) * scale in float32 (clipped for float16).")


def _param_te(p, axis: int, i):
    if p.ndim == 0:
        return p[()]
    if all(arith.const_int(d) == 1 for d in p.shape):
        return p[tuple(IntImm(0, "int64") for _ in p.shape)]
    return p[(i[axis],)]


@legalizes("quantize")
def _quantize(call, inputs):
    x, s, z = (_tensor(inputs, k, call) for k in range(3))
    out = _out(call)
    a = attrs_of(call)
    axis = a["axis"] % x.ndim if x.ndim else 0
    dt, od = x.dtype, out.dtype

    def body(*i):
        q = BinaryOp("+", te.call("round", BinaryOp("/", x[i], te.cast(_param_te(s, axis, i), dt))),
                     te.cast(_param_te(z, axis, i), dt))
        lo, hi = np.iinfo(od).min, np.iinfo(od).max
        q = BinaryOp("max", BinaryOp("min", q, _const(hi, dt)), _const(lo, dt))
        return te.cast(q, od)
    return te.compute(out.shape, body, name="T_quantize")


@legalizes("dequantize")
def _dequantize(call, inputs):
    x, s, z = (_tensor(inputs, k, call) for k in range(3))
    out = _out(call)
    a = attrs_of(call)
    axis = a["axis"] % x.ndim if x.ndim else 0
    calc = x.dtype if x.dtype.startswith("float") else "int32"

    def body(*i):
        diff = BinaryOp("-", te.cast(x[i], calc), te.cast(_param_te(z, axis, i), calc))
        v = BinaryOp("*", te.cast(diff, "float32"), te.cast(_param_te(s, axis, i), "float32"))
        if out.dtype == "float16":
            v = BinaryOp("max", BinaryOp("min", v, _const(65504.0, "float32")),
                         _const(-65504.0, "float32"))
        return te.cast(v, out.dtype)
    return te.compute(out.shape, body, name="T_dequantize")


# ---------------------------------------------------------------------------
# How the fuzzing generator draws these operators (phasec.testing)
# ---------------------------------------------------------------------------

def _qdq_params(ctx):
    """Per tensor or per channel scale (powers of two: exact division) and zero point."""
    axis = ctx.choose(range(-len(ctx.shape), len(ctx.shape))) if ctx.shape else -1
    n = ctx.choose([(), (ctx.shape[axis],)]) if ctx.shape else ()
    scale = np.full(n, ctx.choose([0.25, 0.5, 1.0]), "float32")
    zp = ctx.indices(n, 3, -2).astype(ctx.choose(["int8", "int32"]))
    return scale, zp, axis


def _draw_quantize(ctx):
    scale, zp, axis = _qdq_params(ctx)
    return (ctx.x, scale, zp), {"axis": axis, "out_dtype": ctx.choose(["int8", "uint8", "int16"])}


def _draw_dequantize(ctx):
    scale, zp, axis = _qdq_params(ctx)
    bound = (ctx.mag + 2.0) * float(scale.max(initial=1.0))
    ctx.result_in(-bound, bound)
    return (ctx.x, scale, zp), {"axis": axis}


declares_draw("quantize", ranks=(0, 1, 2, 3), build=_draw_quantize, out="index")
declares_draw("dequantize", dtypes=NUMBERS, ranks=(0, 1, 2, 3), build=_draw_dequantize)

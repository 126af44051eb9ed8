"""``R.layout_transform(x, index_map, pad_value=None)``: the tensor re-laid out
by an index map (TVM 0.27's ``relax.layout_transform``).

``index_map`` sends each input index to an output index
(``T.index_map(lambda i, j: (i // 4, j, i % 4))``; see :mod:`._index_map`
for what phasec reads, the shape rule and the inverse). Where the map does
not divide the input (10 rows split by 4), the output has padding positions
that hold ``pad_value`` — a scalar of the input's dtype, or None, which TVM
leaves unspecified and legalizes as 0 (so does phasec).

Pattern kind: injective (a pure data movement, inlined into consumers).
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from phasec.ir import tir
from phasec import arith
from phasec import te
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.tir import BinaryOp, IntImm, PrimExpr, Select
from phasec.op._common import REQUIRED, OpPattern, attrs_of, define, err, tensor_arg
from phasec.op.index_map import (  # _text: the canonical spelling of an index expression
    MapError, _text, apply_inverse, inverse, map_shape, parse_index_map,
)
from phasec.op.draw import ANY_DTYPE, declares_draw
from phasec.op._lowering import LegalizeError, _clamp, _out, _tensor, legalizes

__all__ = ["layout_transform_reference"]


def _norm_index_map(v: Any) -> str:
    """The canonical lambda text; a Python callable (the builder API) is
    traced once with symbolic indices (TVM's ``IndexMap.from_func``)."""
    if isinstance(v, str):
        return parse_index_map(v).text
    if callable(v):
        names = list(inspect.signature(v).parameters)
        out = v(*[tir.Var(n, "int64") for n in names])
        if not isinstance(out, (tuple, list)):
            out = (out,)
        exprs = [tir.as_prim_expr(e, "int64") if not isinstance(e, PrimExpr) else e for e in out]
        body = ", ".join(_text(e) for e in exprs) + ("," if len(exprs) == 1 else "")
        return parse_index_map(f"lambda {', '.join(names)}: ({body})").text
    raise TypeError(f"expected an index map (lambda i, j: (...)), got {v!r}")


def _norm_pad(v: Any) -> Any:
    if v is None or isinstance(v, (tir.IntImm, tir.FloatImm)):
        return v
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, float, np.integer, np.floating)):
        return v.item() if isinstance(v, np.generic) else v
    raise TypeError(f"expected a scalar or None, got {v!r}")


def typed_pad_value(attrs: dict, operands) -> dict:
    """A Python number given as ``pad_value`` takes the input's dtype, as TVM's
    ``relax.op.layout_transform`` converts it (an int for an integer tensor, an
    int or float for a float tensor)."""
    pad = attrs.get("pad_value")
    if pad is None or isinstance(pad, PrimExpr) or not operands:
        return attrs
    sinfo = getattr(operands[0], "struct_info", None)
    dtype = getattr(sinfo, "dtype", "void")
    if isinstance(pad, bool):
        return attrs
    if tir.is_float(dtype) and isinstance(pad, (int, float)):
        attrs["pad_value"] = tir.FloatImm(float(pad), dtype)
    elif (dtype.startswith("int") or dtype.startswith("uint")) and isinstance(pad, int):
        attrs["pad_value"] = tir.IntImm(pad, dtype)
    return attrs


def _pad_dtype(pad: Any) -> str:
    if isinstance(pad, PrimExpr):
        return pad.dtype
    return "bool" if isinstance(pad, bool) else "int64" if isinstance(pad, int) else "float32"


def _infer(call, ctx):
    x = tensor_arg(call, 0, ctx, "data")
    a = attrs_of(call)
    try:
        imap = parse_index_map(a["index_map"])
    except MapError as exc:
        raise err(call, str(exc)) from None
    pad = a["pad_value"]
    if pad is not None and (x.dtype == "void" or _pad_dtype(pad) != x.dtype):
        raise err(call, f"layout_transform pad_value dtype ({_pad_dtype(pad)}) and input dtype "
                        f"({x.dtype}) must be the same")
    if x.ndim == -1:
        return TensorStructInfo(None, x.dtype, imap.ndim_out)
    if x.ndim != imap.ndim_in:
        raise err(call, "number of dimensions in input must match the number of source "
                        f"dimensions in index map, but got {x.ndim} != {imap.ndim_in}")
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, imap.ndim_out)
    try:
        shape = map_shape(imap, tuple(x.shape))
    except MapError as exc:
        raise err(call, str(exc)) from None
    if shape is None:
        return TensorStructInfo(None, x.dtype, imap.ndim_out)
    return TensorStructInfo(shape, x.dtype)


class _NumpyOps:
    """The decoding arithmetic of :func:`apply_inverse` on int64 arrays."""

    @staticmethod
    def floordiv(a, c): return a // int(c)
    @staticmethod
    def floormod(a, c): return a % int(arith.const_int(c) if isinstance(c, PrimExpr) else c)
    @staticmethod
    def mul(a, c): return a * int(c)
    @staticmethod
    def add(a, b): return a + b
    @staticmethod
    def less(a, n): return a < int(arith.const_int(n) if isinstance(n, PrimExpr) else n)
    @staticmethod
    def eq0(a): return a == 0
    @staticmethod
    def and_(a, b): return a & b
    @staticmethod
    def const(v): return np.int64(v)


def _pad_scalar(pad: Any, dtype: np.dtype):
    if pad is None:
        return np.zeros((), dtype)
    value = pad.value if isinstance(pad, PrimExpr) else pad
    return np.asarray(value).astype(dtype)


def layout_transform_reference(x, index_map, pad_value=None):
    """numpy: every output position reads the input position the inverse map
    gives, or ``pad_value`` (0 when None) where that is padding."""
    x = np.asarray(x)
    imap = parse_index_map(index_map)
    shape = tuple(IntImm(int(d), "int64") for d in x.shape)
    out_shape = map_shape(imap, shape)
    inv = inverse(imap, shape)
    dims = tuple(int(arith.const_int(d)) for d in out_shape)
    grid = np.indices(dims, dtype=np.int64)
    index, cond = apply_inverse(inv, list(grid), x.shape, _NumpyOps)
    clipped = tuple(np.clip(np.broadcast_to(i, dims), 0, max(n - 1, 0))
                    for i, n in zip(index, x.shape))
    values = x[clipped] if x.size else np.zeros(dims, x.dtype)
    if cond is None:
        return values
    return np.where(cond, values, _pad_scalar(pad_value, x.dtype)).astype(x.dtype)


define("layout_transform", ("x",), _infer,
       attrs={"index_map": (REQUIRED, _norm_index_map), "pad_value": (None, _norm_pad)},
       reference=layout_transform_reference, pattern=OpPattern.INJECTIVE,
       finish_operands=typed_pad_value,
       doc="Re-lay out a tensor by an index map (T.index_map(lambda ...)); padding positions "
           "hold pad_value (0 when None).")


class _TirOps:
    """The decoding arithmetic of :func:`apply_inverse` as TIR expressions."""

    @staticmethod
    def floordiv(a, c): return BinaryOp("//", a, IntImm(int(c), "int64"))
    @staticmethod
    def floormod(a, c):
        return BinaryOp("%", a, c if isinstance(c, PrimExpr) else IntImm(int(c), "int64"))
    @staticmethod
    def mul(a, c): return BinaryOp("*", a, IntImm(int(c), "int64"))
    @staticmethod
    def add(a, b): return BinaryOp("+", a, b)
    @staticmethod
    def less(a, n): return BinaryOp("<", a, n)
    @staticmethod
    def eq0(a): return BinaryOp("==", a, IntImm(0, "int64"))
    @staticmethod
    def and_(a, b): return BinaryOp("and", a, b)
    @staticmethod
    def const(v): return IntImm(int(v), "int64")


def _same_size(a, b) -> bool:
    ca = [arith.const_int(d) for d in a]
    cb = [arith.const_int(d) for d in b]
    return None not in ca and None not in cb and int(np.prod(ca)) == int(np.prod(cb))


@legalizes("layout_transform")
def _layout_transform_te(call, inputs):
    x = _tensor(inputs, 0, call)
    out = _out(call)
    a = attrs_of(call)
    imap = parse_index_map(a["index_map"])
    try:
        inv = inverse(imap, tuple(x.shape))
    except MapError as exc:
        raise LegalizeError(f"cannot legalize R.layout_transform: {exc}") from None
    bijective = _same_size(x.shape, out.shape)
    pad = a["pad_value"]
    fill = te.const(0 if pad is None else (pad.value if isinstance(pad, PrimExpr) else pad),
                    x.dtype)

    def body(*o):
        index, cond = apply_inverse(inv, list(o), x.shape, _TirOps)
        if cond is None or bijective:
            return x[tuple(index)]
        safe = tuple(_clamp(i, n) for i, n in zip(index, x.shape))
        return Select(cond, x[safe], fill)
    return te.compute(out.shape, body, name="T_layout_trans")


# ---------------------------------------------------------------------------
# How the fuzzing generator draws these operators (phasec.testing)
# ---------------------------------------------------------------------------

def _draw_layout_transform(ctx):
    names = "ijkl"[:len(ctx.shape)]
    outs = list(names)
    if ctx.choose([False, True]):  # reverse the axes
        outs.reverse()
    if ctx.choose([False, True]):  # split one axis (padding where it does not divide)
        k = ctx.choose(range(len(names)))
        factor = ctx.choose([2, 3])
        outs = [f"{v} // {factor}" if v == names[k] else v for v in outs] + [
            f"{names[k]} % {factor}"]
    ctx.include(0, 0)  # padding positions (0 when pad_value is None)
    text = f"lambda {', '.join(names)}: ({', '.join(outs)}{',' if len(outs) == 1 else ''})"
    return (ctx.x,), {"index_map": text}


declares_draw("layout_transform", dtypes=ANY_DTYPE, build=_draw_layout_transform)

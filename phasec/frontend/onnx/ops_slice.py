"""ONNX Slice. With starts, ends and steps known at import (constants, or
shape values: symbolic bounds such as PyTorch's ``x[:, :seq]``) it is
``R.strided_slice``. With any of them computed at run time (a loop body
slicing at its iteration count, a model slicing at a position it
computed): ``R.dynamic_strided_slice`` with one bound per axis of the data,
the sliced axes' read from the run-time values and the others whole. The
sliced axes' lengths become fresh symbolic dimensions, matched when it runs
(``R.match_cast``). The axes must be known at import (they decide which
bound goes where)."""

from __future__ import annotations

from typing import Any

import numpy as np

from phasec.frontend.errors import FrontendError
from phasec.frontend.onnx._context import NodeContext, Unsupported, Value, is_const
from phasec.frontend.onnx._registry import converter
from phasec.frontend.onnx.ops_tensor import norm_axis
from phasec.ir import tir
from phasec.ir.struct_info import TensorStructInfo

__all__ = ["slice_at_run_time"]

_INT_END = (1 << 31) - 1  # phasec's "to the end" for slices on symbolic dimensions

#: an end past any dimension (numpy clamps it)
_WHOLE = np.iinfo(np.int64).max


def _int64_vector(ctx: NodeContext, i: int) -> Value:
    v = ctx.input(i)
    return v if ctx.dtype(v) == "int64" else ctx.emit("astype", v, dtype="int64")


def slice_at_run_time(ctx: NodeContext) -> Value:
    """Slice (opset 10+) with run-time starts/ends/steps, per the module docstring."""
    x = ctx.input(0)
    ndim = ctx.ndim(x)
    starts, ends = _int64_vector(ctx, 1), _int64_vector(ctx, 2)
    (k,) = ctx.shape(starts)
    if not isinstance(k, int) or ctx.shape(ends) != [k]:
        raise Unsupported("Slice's starts and ends must have one known length")
    if ctx.has(3):
        axes = [int(a) for a in np.asarray(ctx.const(3, "axes")).reshape(-1)]
    else:
        axes = list(range(k))
    if len(axes) != k or any(not -ndim <= a < ndim for a in axes):
        raise Unsupported(f"Slice axes {axes} for {k} starts of a rank-{ndim} input")
    axes = [a % ndim for a in axes]
    if len(set(axes)) != len(axes):
        raise Unsupported(f"Slice with a repeated axis: {axes}")
    steps = _int64_vector(ctx, 4) if ctx.has(4) else np.ones(k, np.int64)

    def full(values: Value, default: int) -> Value:
        pieces = []
        for a in range(ndim):
            if a in axes:
                j = axes.index(a)
                pieces.append(ctx.emit("strided_slice", values, axes=[0], begin=[j],
                                       end=[j + 1]))
            else:
                pieces.append(np.array([default], np.int64))
        return pieces[0] if ndim == 1 else ctx.emit("concat", pieces, axis=0)
    out = ctx.emit("dynamic_strided_slice", x, full(starts, 0), full(ends, _WHOLE),
                   full(steps, 1))
    # the sliced axes get fresh symbolic lengths (bound when it runs), so
    # later operators see a shape; the others keep the data's
    dims = [tir.Var(f"{ctx.hint}_len{a}", "int64") if a in axes else tir.as_prim_expr(d)
            for a, d in enumerate(ctx.shape(x))]
    return ctx.builder.match_cast(ctx.expr(out), TensorStructInfo(dims, ctx.dtype(x)), ctx.hint)


@converter("Slice")
def _slice(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    dims = ctx.shape(x)
    if ctx.opset < 10:
        starts, ends = list(ctx.attr("starts")), list(ctx.attr("ends"))
        axes = ctx.attr("axes")
        steps = None
    else:
        for i, what in enumerate(("starts", "ends", "axes", "steps"), 1):
            if ctx.has(i) and ctx.ndim(ctx.input(i)) != 1:
                raise FrontendError(f"{what} must be a 1-D tensor, not of rank "
                                    f"{ctx.ndim(ctx.input(i))}")
        if any(ctx.has(i) and not is_const(ctx.input(i)) and i not in ctx.params
               for i in (1, 2, 4)):
            return slice_at_run_time(ctx)
        starts, ends = ctx.const_ints(1, "starts"), ctx.const_ints(2, "ends")
        axes = ctx.const_ints(3, "axes") if ctx.has(3) else None
        steps = ctx.const_ints(4, "steps") if ctx.has(4) else None
    axes = list(range(len(starts))) if axes is None else list(axes)
    steps = [1] * len(starts) if steps is None else list(steps)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise Unsupported("starts, ends, axes and steps of different lengths")
    out_axes, begin, end, stride = [], [], [], []
    for a, b, e, s in zip(axes, starts, ends, steps):
        if isinstance(s, tir.PrimExpr):
            raise Unsupported("Slice with a symbolic step")
        ax = norm_axis(ctx, a, len(dims), "axis")
        if s == 0:
            raise Unsupported("Slice with step 0")
        d = dims[ax]
        if isinstance(b, tir.PrimExpr) or isinstance(e, tir.PrimExpr):
            # bounds from the shapes (PyTorch's x[:, :seq] of a position table):
            # strided_slice clamps symbolic entries at run time as ONNX does
            if s < 0:
                raise Unsupported("Slice with symbolic starts or ends and a negative step")
            b, e = (_clamped_bound(v, d) for v in (b, e))
        elif isinstance(d, int):
            lo, hi, st = slice(b, e, s).indices(d)
            if st < 0 and hi < 0:
                hi = -(d + 1)  # "before index 0": a negative end would wrap in Python
            b, e = lo, hi
        else:
            b = max(min(b, _INT_END), -_INT_END)
            e = max(min(e, _INT_END), -_INT_END)
        if isinstance(d, int) and (b, e, s) == (0, d, 1):
            continue
        out_axes.append(ax)
        begin.append(b)
        end.append(e)
        stride.append(s)
    if not out_axes:
        return x
    return ctx.emit("strided_slice", x, axes=out_axes, begin=begin, end=end,
                    strides=stride if any(s != 1 for s in stride) else None)


def _clamped_bound(v: Any, d: Any) -> Any:
    """A Slice bound beside a symbolic one (positive step): a known bound
    counted from the end and clamped into [0, d] as ONNX does (within
    strided_slice's "to the end" range on a symbolic axis); a symbolic bound
    as it is (strided_slice canonicalizes it at run time)."""
    if isinstance(v, tir.PrimExpr):
        return v
    if isinstance(d, int):
        return min(max(v + d if v < 0 else v, 0), d)
    return max(min(v, _INT_END), -_INT_END)

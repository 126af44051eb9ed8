"""ONNX Slice whose starts, ends or steps are computed at run time (a loop
body slicing at its iteration count, a model slicing at a position it
computed): ``R.dynamic_strided_slice`` with one bound per axis of the data,
the sliced axes' read from the run-time values and the others whole. The
sliced axes' lengths become fresh symbolic dimensions, matched when it runs
(``R.match_cast``). The axes must be known at import (they decide which
bound goes where)."""

from __future__ import annotations

import numpy as np

from phasec.frontend.onnx._context import NodeContext, Unsupported, Value
from phasec.ir import tir
from phasec.ir.struct_info import TensorStructInfo

__all__ = ["slice_at_run_time"]

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

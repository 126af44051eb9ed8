"""Converters of ONNX's detection operators: RoiAlign and NonMaxSuppression
(over ``R.vision.onnx_roi_align`` / ``R.vision.onnx_nms``, :mod:`phasec.op.vision`).

NonMaxSuppression's row count depends on the data: the operator writes
every possible row (the selected ones first, then rows of -1), and the
converter cuts them to the selected ones with ``R.dynamic_strided_slice``,
as NonZero's and Unique's results: a known rank, an unknown length.
"""

from __future__ import annotations

import numpy as np

from phasec.frontend.onnx._context import NodeContext, Unsupported, Value
from phasec.frontend.onnx._registry import converter

__all__: list[str] = []


@converter("RoiAlign", since=10)
def _roi_align(ctx: NodeContext) -> Value:
    x, rois, idx = ctx.input(0), ctx.input(1), ctx.input(2)
    dtype = ctx.dtype(x)
    if dtype not in ("float32", "float64"):
        raise Unsupported(f"RoiAlign on {dtype} (float32 and float64 are)")
    if ctx.opset >= 16:
        half_pixel = ctx.attr("coordinate_transformation_mode", "half_pixel") == "half_pixel"
    else:  # opset 10's RoiAlign is the later "output_half_pixel"
        half_pixel = False
    if ctx.dtype(idx) != "int64":
        idx = ctx.emit("astype", idx, dtype="int64")
    return ctx.emit("vision.onnx_roi_align", x, rois, idx,
                    output_height=int(ctx.attr("output_height", 1)),
                    output_width=int(ctx.attr("output_width", 1)),
                    sampling_ratio=int(ctx.attr("sampling_ratio", 0)),
                    spatial_scale=float(ctx.attr("spatial_scale", 1.0)),
                    mode=ctx.attr("mode", "avg"), half_pixel=half_pixel)


def _as_row(ctx: NodeContext, i: int, default: float | int, dtype: str) -> Value:
    """Optional scalar input ``i`` as a [1] tensor of ``dtype`` (``default`` when absent)."""
    v = ctx.optional(i)
    if v is None:
        return np.array([default], dtype)
    if ctx.dtype(v) != dtype:
        v = ctx.emit("astype", v, dtype=dtype)
    return ctx.emit("reshape", v, (1,))


@converter("NonMaxSuppression", since=10)
def _nms(ctx: NodeContext) -> Value:
    boxes, scores = ctx.input(0), ctx.input(1)
    dtype = ctx.dtype(boxes)
    if dtype not in ("float32", "float64"):
        raise Unsupported(f"NonMaxSuppression on {dtype} (float32 and float64 are)")
    center = int(ctx.attr("center_point_box", 0))
    if center not in (0, 1):
        raise Unsupported(f"center_point_box={center}")
    rows = ctx.emit("vision.onnx_nms", boxes, scores, _as_row(ctx, 2, 0, "int64"),
                    _as_row(ctx, 3, 0.0, dtype), _as_row(ctx, 4, 0.0, dtype),
                    center_point_box=center, has_score_threshold=ctx.has(4))
    # the selected rows are those before the first -1 row
    first = ctx.emit("strided_slice", rows, axes=[1], begin=[0], end=[1])
    valid = ctx.emit("astype", ctx.emit("greater_equal", first, np.array(0, np.int64)),
                     dtype="int64")
    count = ctx.emit("sum", valid, axis=[0])                      # [1]
    end = ctx.emit("concat", [count, np.array([3], np.int64)], axis=0)
    return ctx.emit("dynamic_strided_slice", rows, np.zeros(2, np.int64), end,
                    np.ones(2, np.int64))

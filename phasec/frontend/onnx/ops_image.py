"""Converters of ONNX's sampling-grid operators: GridSample over
``R.image.grid_sample`` (PyTorch's grid_sample, which ONNX's follows), its
grid moved from ONNX's ``[N, *out, r]`` to the operator's ``[N, r, *out]``."""

from __future__ import annotations

from phasec.frontend.onnx._context import NodeContext, Unsupported, Value
from phasec.frontend.onnx._registry import converter

__all__: list[str] = []

#: ONNX's mode names (opset 16's, then 20's) -> grid_sample's methods
_METHODS = {"bilinear": "bilinear", "linear": "bilinear", "nearest": "nearest",
            "bicubic": "bicubic", "cubic": "bicubic"}


@converter("GridSample", since=16)
def _grid_sample(ctx: NodeContext) -> Value:
    x, grid = ctx.input(0), ctx.input(1)
    r = ctx.ndim(x) - 2
    if r not in (2, 3) or ctx.ndim(grid) != r + 2:
        raise Unsupported(f"a {r}-D GridSample (2-D and 3-D are supported)")
    if ctx.dtype(x) not in ("float32", "float64"):
        raise Unsupported(f"GridSample on {ctx.dtype(x)}")
    mode = ctx.attr("mode", "bilinear" if ctx.opset < 20 else "linear")
    if mode not in _METHODS:
        raise Unsupported(f"mode={mode!r}")
    method = _METHODS[mode]
    if method == "bicubic" and r == 3:
        raise Unsupported("cubic mode of a 3-D GridSample (ONNX Runtime has none either)")
    moved = ctx.emit("permute_dims", grid, axes=[0, r + 1, *range(1, r + 1)])
    return ctx.emit("image.grid_sample", x, moved, method=method,
                    layout="NCHW" if r == 2 else "NCDHW",
                    padding_mode=ctx.attr("padding_mode", "zeros"),
                    align_corners=ctx.attr("align_corners", 0) == 1)


@converter("AffineGrid", since=20)
def _affine_grid(ctx: NodeContext) -> Value:
    theta = ctx.input(0)
    size = [int(v) for v in ctx.const_ints(1, "size")]
    r = len(size) - 2
    if r not in (2, 3):
        raise Unsupported(f"a size of {len(size)} entries (ONNX: (N, C, H, W) or (N, C, D, H, W))")
    align = ctx.attr("align_corners", 0) == 1
    if align and any(s <= 1 for s in size[2:]):
        raise Unsupported(f"align_corners=1 with a spatial size of 1 ({size})")
    if ctx.dtype(theta) not in ("float32", "float64"):
        raise Unsupported(f"AffineGrid on {ctx.dtype(theta)}")
    grid = ctx.emit("image.affine_grid", theta, tuple(size[2:]), align_corners=align)
    return ctx.emit("permute_dims", grid, axes=[0, *range(2, r + 2), 1])

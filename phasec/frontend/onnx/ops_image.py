"""Converters of ONNX's image operators: GridSample over
``R.image.grid_sample`` (PyTorch's grid_sample, which ONNX's follows), its
grid moved from ONNX's ``[N, *out, r]`` to the operator's ``[N, r, *out]``;
AffineGrid; Resize and Upsample over ``R.image.resize2d`` where TVM's resize
computes the same, ``R.image.onnx_resize`` otherwise (any axes, scales that
do not give whole sizes or whose ratio of sizes is not exact in float32,
antialiasing, ``half_pixel_symmetric``, ``tf_crop_and_resize`` with a roi,
``keep_aspect_ratio_policy``); Col2Im
over ``R.nn.col2im``; DeformConv as bilinear sampling (``grid_sample``) and
a grouped matrix product."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from phasec.frontend.errors import FrontendError
from phasec.frontend.onnx._context import NodeContext, Unsupported, Value
from phasec.frontend.onnx._registry import converter
from phasec.frontend.onnx.ops_tensor import norm_axis

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


# ---------------------------------------------------------------------------
# Resize, Upsample
# ---------------------------------------------------------------------------

#: More elements than any tensor can have (a byte count must fit in int64).
_MAX_ELEMENTS = 1 << 60
#: the coordinate modes and nearest modes R.image.resize2d shares with ONNX
_RESIZE2D_COORDS = {"half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel",
                    "tf_half_pixel_for_nn"}
_RESIZE2D_METHODS = {"nearest": "nearest_neighbor", "linear": "linear", "cubic": "cubic"}
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_COORD_MODES = _RESIZE2D_COORDS | {"half_pixel_symmetric", "tf_crop_and_resize"}


def _full_rank(values: list[Any], axes: list[int], fill: list[Any]) -> list[Any]:
    out = list(fill)
    for a, v in zip(axes, values):
        out[a] = v
    return out


def _output_sizes(ctx: NodeContext, dims: list[int], scales: list[float] | None,
                  sizes: list[int] | None, axes: list[int]) -> tuple[list[float], list[int]]:
    """ONNX's (scales, output sizes) of every axis: sizes from scales
    (floor), or scales from sizes (the ratio), the latter under
    ``keep_aspect_ratio_policy`` (one scale for the given axes, the sizes
    rounded half up)."""
    if sizes is None:
        assert scales is not None
        if not all(math.isfinite(s) and s > 0 for s in scales):
            raise FrontendError(f"scales {scales}: every scale must be a finite number above 0")
        return scales, [math.floor(d * s) for d, s in zip(dims, scales)]
    if any(s < 0 for s in sizes):
        raise FrontendError(f"output sizes {sizes}: every size must be at least 1 (0 only "
                            "where the input's axis is empty)")
    ratios = [o / d if d else 1.0 for d, o in zip(dims, sizes)]
    policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
    if policy == "stretch":
        return ratios, sizes
    if policy not in ("not_larger", "not_smaller"):
        raise FrontendError(f"keep_aspect_ratio_policy={policy!r} (ONNX has stretch, not_larger, "
                            "not_smaller)")
    chosen = [ratios[a] for a in axes]
    scale = min(chosen) if policy == "not_larger" else max(chosen)
    return ([scale if a in axes else 1.0 for a in range(len(dims))],
            [int(scale * d + 0.5) if a in axes else d for a, d in enumerate(dims)])


def _check_sizes(dims: list[int], sizes: list[int]) -> None:
    # as ONNX Runtime: an empty axis stays empty, and only an empty axis becomes one
    for axis, (d, s) in enumerate(zip(dims, sizes)):
        if d == 0 and s != 0:
            raise FrontendError(f"output sizes {sizes}: cannot resize an empty axis (axis "
                                f"{axis} of the input shape {dims}) to size {s}")
        if d != 0 and s < 1:
            raise FrontendError(f"output sizes {sizes}: every size must be at least 1 (0 only "
                                "where the input's axis is empty)")
    if math.prod(sizes) > _MAX_ELEMENTS:
        raise FrontendError(f"output sizes {sizes}: more elements than a tensor can hold")


def _exact_ratio(in_size: int, out_size: int) -> bool:
    """Whether ``in_size / out_size`` is a float32 exactly (an upsampling by
    2 or 4, a downsampling by 2, ...; for ``align_corners`` the sizes less
    one are given). Only then does resize2d's ``(x + 0.5) * (i / o) - 0.5``
    equal ONNX's ``(x + 0.5) / s - 0.5`` (and ``(i - 1) / (o - 1) * x``
    ONNX's ``x * (i - 1) / (o - 1)``): with a rounded ratio the product can
    differ from ONNX's quotient by an ulp even computed as written, and
    nearest then takes the other pixel where ONNX's coordinate is exactly
    halfway (171 of the 3,081 size pairs up to 39 -> 79, in float32 as
    numpy computes it). (Fusing into an FMA no longer moves it further: the
    code generator keeps arithmetic that a rounding decides unfused,
    :mod:`phasec.backend.llvm.exact`.)"""
    if out_size <= 0:
        return True
    denominator = out_size // math.gcd(in_size, out_size)
    return denominator & (denominator - 1) == 0 and in_size // math.gcd(in_size, out_size) < 1 << 24


def _resize(ctx: NodeContext, x: Value, scales: list[float] | None, sizes: list[int] | None,
            mode: str, coord: str, nearest: str, axes: list[int] | None = None,
            roi: list[float] | None = None) -> Value:
    """ONNX's Resize of ``x``: ``R.image.resize2d`` where it computes the
    same (4-D NCHW, spatial axes only, whole scales, its coordinate modes),
    ``R.image.onnx_resize`` otherwise."""
    dims = ctx.static_shape(x, "Resize's input")
    rank = len(dims)
    axes = list(range(rank)) if axes is None else axes
    given = scales if sizes is None else sizes
    if given is None or len(given) != len(axes):
        raise FrontendError(f"Resize has {len(given or [])} scales/sizes for {len(axes)} axes "
                            f"(input shape {dims})")
    if mode not in _RESIZE2D_METHODS:
        raise FrontendError(f"attribute mode={mode!r} (ONNX has nearest, linear, cubic)")
    if coord not in _COORD_MODES:
        raise FrontendError(f"attribute coordinate_transformation_mode={coord!r}")
    if nearest not in _NEAREST_MODES:
        raise FrontendError(f"attribute nearest_mode={nearest!r}")
    antialias = bool(ctx.attr("antialias", 0)) and mode != "nearest"
    if sizes is None:
        full_scales, full_sizes = _output_sizes(
            ctx, dims, _full_rank([float(s) for s in given], axes, [1.0] * rank), None, axes)
    else:
        full_scales, full_sizes = _output_sizes(
            ctx, dims, None, _full_rank([int(s) for s in given], axes, list(dims)), axes)
    _check_sizes(dims, full_sizes)
    full_roi = [0.0] * rank + [1.0] * rank
    if coord == "tf_crop_and_resize" and roi:
        if len(roi) != 2 * len(axes):
            raise FrontendError(f"Resize's roi has {len(roi)} numbers; tf_crop_and_resize over "
                                f"{len(axes)} axes needs {2 * len(axes)} (starts, then ends)")
        for k, a in enumerate(axes):
            full_roi[a], full_roi[rank + a] = roi[k], roi[len(axes) + k]
    whole = all(abs(d * s - o) <= 1e-6 for d, s, o in zip(dims, full_scales, full_sizes))
    if (rank == 4 and full_sizes[:2] == dims[:2] and whole and not antialias
            and coord in _RESIZE2D_COORDS
            and all(_exact_ratio(i - (coord == "align_corners"), o - (coord == "align_corners"))
                    for i, o in zip(dims[2:], full_sizes[2:]))):
        return ctx.emit("image.resize2d", x, tuple(full_sizes[2:]), roi=[0.0, 0.0, 0.0, 0.0],
                        layout="NCHW", method=_RESIZE2D_METHODS[mode],
                        coordinate_transformation_mode=coord, rounding_method=nearest,
                        cubic_alpha=float(ctx.attr("cubic_coeff_a", -0.75)),
                        cubic_exclude=int(ctx.attr("exclude_outside", 0)),
                        extrapolation_value=float(ctx.attr("extrapolation_value", 0.0)))
    if ctx.dtype(x) == "bool":
        raise Unsupported("Resize of a bool tensor")
    return ctx.emit("image.onnx_resize", x, tuple(full_sizes), scales=tuple(full_scales),
                    roi=tuple(full_roi), mode=mode, coordinate_transformation_mode=coord,
                    nearest_mode=nearest, cubic_coeff_a=float(ctx.attr("cubic_coeff_a", -0.75)),
                    exclude_outside=bool(ctx.attr("exclude_outside", 0)),
                    extrapolation_value=float(ctx.attr("extrapolation_value", 0.0)),
                    antialias=antialias)


@converter("Resize", since=10)
def _resize_op(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    if ctx.opset < 11:
        scales = [float(s) for s in ctx.const(1, "scales").reshape(-1)]
        return _resize(ctx, x, scales, None, ctx.attr("mode", "nearest"), "asymmetric", "floor")
    scales = sizes = None
    if ctx.has(3) and ctx.const(3, "sizes").size:
        sizes = [int(s) for s in ctx.const(3, "sizes").reshape(-1)]
    elif ctx.has(2) and ctx.const(2, "scales").size:
        scales = [float(s) for s in ctx.const(2, "scales").reshape(-1)]
    else:
        raise FrontendError("Resize needs scales or sizes (both are missing or empty)")
    axes = ctx.attr("axes")
    if axes is not None:  # scales/sizes for these axes only; the others keep their size
        n = ctx.ndim(x)
        axes = [norm_axis(ctx, a, n) for a in axes]
        if len(set(axes)) != len(axes):
            raise FrontendError(f"Resize's axes {list(ctx.attr('axes'))} repeat an axis")
    coord = ctx.attr("coordinate_transformation_mode", "half_pixel")
    roi = None
    if coord == "tf_crop_and_resize" and ctx.has(1):
        roi = [float(v) for v in ctx.const(1, "roi").reshape(-1)]
    return _resize(ctx, x, scales, sizes, ctx.attr("mode", "nearest"), coord,
                   ctx.attr("nearest_mode", "round_prefer_floor"), axes, roi)


@converter("Upsample", since=7)  # opset 1 had height_scale/width_scale
def _upsample(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    if ctx.opset < 9:
        scales = [float(s) for s in ctx.attr("scales", [])]
    else:
        scales = [float(s) for s in ctx.const(1, "scales").reshape(-1)]
    if not all(math.isfinite(s) and s >= 1 for s in scales):  # it only enlarges
        raise FrontendError(f"scales {scales}: Upsample's scales must be finite and at least 1")
    mode = ctx.attr("mode", "nearest")
    if mode == "bilinear":
        mode = "linear"
    return _resize(ctx, x, scales, None, mode, "asymmetric", "floor")


@converter("Col2Im", since=18)
def _col2im(ctx: NodeContext) -> Value:
    """Col2Im over ``R.nn.col2im``; its image and block shapes must be known."""
    x = ctx.input(0)
    image = [int(v) for v in ctx.const(1, "image_shape").reshape(-1)]
    block = [int(v) for v in ctx.const(2, "block_shape").reshape(-1)]
    r = len(image)
    if ctx.dtype(x) == "bool":
        raise Unsupported("Col2Im of a bool tensor")
    return ctx.emit("nn.col2im", x, image_shape=image, block_shape=block,
                    strides=list(ctx.attr("strides", [1] * r)),
                    dilations=list(ctx.attr("dilations", [1] * r)),
                    pads=list(ctx.attr("pads", [0] * (2 * r))))


@converter("DeformConv", since=19)
def _deform_conv(ctx: NodeContext) -> Value:
    """A 2-D deformable convolution: each kernel tap samples the input
    bilinearly (zeros outside) at its place shifted by ``offset`` (per offset
    group), scaled by ``mask``; the samples are the columns of a grouped
    matrix product with the weights. The sampling is ``R.image.grid_sample``
    (bilinear, zeros, pixel centres: ``align_corners=False``) over the offset
    groups as a batch."""
    x, w, offset = ctx.input(0), ctx.input(1), ctx.input(2)
    n, c, h, wd = ctx.static_shape(x, "DeformConv's input")
    oc, cg, kh, kw = ctx.static_shape(w, "DeformConv's weights")
    if ctx.dtype(x) not in ("float32", "float64"):
        raise Unsupported(f"DeformConv on {ctx.dtype(x)}")
    group, og = int(ctx.attr("group", 1)), int(ctx.attr("offset_group", 1))
    kernel = list(ctx.attr("kernel_shape", [kh, kw]))
    strides = list(ctx.attr("strides", [1, 1]))
    dil = list(ctx.attr("dilations", [1, 1]))
    pads = list(ctx.attr("pads", [0, 0, 0, 0]))
    if kernel != [kh, kw] or len(strides) != 2 or len(dil) != 2 or len(pads) != 4:
        raise FrontendError(f"DeformConv's kernel_shape {kernel}, strides {strides}, dilations "
                            f"{dil}, pads {pads} for weights of shape {[oc, cg, kh, kw]}")
    if group < 1 or og < 1 or c % group or oc % group or cg * group != c or c % og:
        raise FrontendError(f"DeformConv: {c} input channels, {oc} outputs, weights for {cg} "
                            f"per group, group={group}, offset_group={og} do not divide")
    oh = (h + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) // strides[1] + 1
    k = kh * kw
    if ctx.shape(offset) != [n, og * 2 * k, oh, ow]:
        raise FrontendError(f"DeformConv's offset has shape {ctx.shape(offset)}, expected "
                            f"{[n, og * 2 * k, oh, ow]}")
    dt = ctx.dtype(x)
    # where each tap reads without offsets, as grid_sample's normalized coordinates
    ky, kx = np.meshgrid(np.arange(kh), np.arange(kw), indexing="ij")
    base_y = (np.arange(oh)[None, :] * strides[0] - pads[0] + ky.reshape(-1, 1) * dil[0])
    base_x = (np.arange(ow)[None, :] * strides[1] - pads[1] + kx.reshape(-1, 1) * dil[1])
    off = ctx.emit("reshape", offset, (n, og, k, 2, oh, ow))
    coords = []
    for axis, base, size in ((1, base_x, wd), (0, base_y, h)):  # grid channel 0 is x
        o = ctx.emit("reshape", ctx.emit("strided_slice", off, axes=[3], begin=[axis],
                                         end=[axis + 1]), (n, og, k, oh, ow))
        shape = (k, 1, ow) if axis == 1 else (k, oh, 1)
        pos = ctx.emit("add", o, base.reshape(shape).astype(dt))
        # pixel p -> (2p + 1) / size - 1 (an empty axis samples nothing: any
        # finite step will do, where 1/size raised ZeroDivisionError)
        step = 2.0 / size if size else 0.0
        coords.append(ctx.emit("subtract", ctx.emit("multiply", pos, np.asarray(step, dt)),
                               np.asarray(1.0 - step / 2, dt)))
    grid = ctx.emit("reshape", ctx.emit("stack", coords, axis=2), (n * og, 2, k * oh, ow))
    data = ctx.emit("reshape", x, (n * og, c // og, h, wd))
    cols = ctx.emit("image.grid_sample", data, grid, method="bilinear", layout="NCHW",
                    padding_mode="zeros", align_corners=False)  # (n*og, c/og, k*oh, ow)
    cols = ctx.emit("reshape", cols, (n * og, c // og, k, oh, ow))
    if ctx.has(4):
        mask = ctx.emit("reshape", ctx.input(4), (n * og, 1, k, oh, ow))
        cols = ctx.emit("multiply", cols, mask)
    cols = ctx.emit("reshape", cols, (n, group, cg * k, oh * ow))
    weights = ctx.emit("reshape", w, (1, group, oc // group, cg * k))
    y = ctx.emit("reshape", ctx.emit("matmul", weights, cols), (n, oc, oh, ow))
    if ctx.has(3):
        y = ctx.emit("add", y, ctx.emit("reshape", ctx.input(3), (1, oc, 1, 1)))
    return y

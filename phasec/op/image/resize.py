"""Image resizing (TVM 0.27's ``relax.image`` resizes): ``image.resize2d`` and
``image.resize3d``.

``image.resize2d(data, size, roi, layout, method,
coordinate_transformation_mode, rounding_method, cubic_alpha, cubic_exclude,
extrapolation_value, out_dtype)``: TVM 0.27's 2-D image resize.

``size`` is ``R.shape([out_h, out_w])``; ``layout`` any permutation of NCHW.
Output coordinate ``x`` (per spatial dim, input size ``i``, output size
``o``, ``scale = i / o``, computed in float32 as TVM) maps to the input
coordinate ``in_x``:

================================  ==============================================
``half_pixel``                    ``(x + 0.5) * scale - 0.5``
``align_corners``                 ``(i - 1) / (o - 1) * x``
``asymmetric``                    ``scale * x``
``pytorch_half_pixel``            ``(x + 0.5) * scale - 0.5`` (0 when ``o == 1``)
``tf_half_pixel_for_nn``          ``(x + 0.5) * scale``
``tf_crop_and_resize``            ``roi_start * (i - 1) + x * (roi_end - roi_start)
                                  * (i - 1) / (o - 1)``, positions outside
                                  ``[0, i - 1]`` give ``extrapolation_value``
================================  ==============================================

``roi`` is ``(start_h, start_w, end_h, end_w)``. Methods: ``nearest_neighbor``
(``rounding_method`` ``round`` (half to even), ``round_prefer_floor``,
``round_prefer_ceil``, ``floor``, ``ceil`` (the last two with TVM's 1e-5
nudge), or ``""``: ``round`` for align_corners, else ``floor``),
``linear`` (bilinear) and ``cubic`` (Keys kernel with ``cubic_alpha``;
``cubic_exclude=1`` zeroes the taps outside the image and renormalizes).
Every tap index is clamped into the image. Integer data is interpolated in
float32 and converted back (truncating), as TVM's cast.

``image.resize3d(data, size, roi, layout, method,
coordinate_transformation_mode, rounding_method, cubic_alpha, cubic_exclude,
extrapolation_value, out_dtype)`` is the same resize over three spatial dims
(``size`` is ``R.shape([d, h, w])``, ``layout`` a permutation of NCDHW,
``roi`` six numbers: the three starts then the three ends). The coordinate
modes, rounding and the nearest / linear / cubic taps are resize2d's, per
dim; interpolation sums along W, then H, then D (float32 for integer data,
converted back).
"""

from __future__ import annotations

import numpy as np

from phasec import te
from phasec.errors import IndexOutOfRangeError
from phasec.ir import tir
from phasec.ir.text import expr_to_str
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.tir import BinaryOp, Cast, IntImm, Select
from phasec.op._common import (
    OpPattern, as_dtype, as_float, as_int, as_str, attrs_of, define, err, one_of, shape_arg,
    tensor_arg, tensor_sinfo,
)
from phasec.op._layout import Layout, layout_of
from phasec.op.draw import declares_draw
from phasec.op._lowering import _clamp, _const, _out, _tensor, legalizes

__all__: list[str] = []

F32 = "float32"
MODES = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel",
         "tf_half_pixel_for_nn", "tf_crop_and_resize")
ROUNDING = ("", "round", "round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def roi_attr(spatial: int):
    """The validator of a resize's ``roi`` attribute over ``spatial``
    dimensions: one number (for every bound) or a start and an end per axis."""
    count = 2 * spatial

    def roi(v):
        if isinstance(v, (int, float)):
            v = (v,)
        t = tuple(as_float(x) for x in v)
        if len(t) == 1:
            t = t * count
        if len(t) != count:
            raise ValueError(f"roi needs 1 or {count} numbers, got {len(t)}")
        return t
    return roi


_AXES = {2: "height, width", 3: "depth, height, width"}


def resize_inference(op: str, spatial: int, default_layout: str):
    """Struct-info inference of ``image.<op>`` resizing ``spatial`` axes:
    the data's batch and channels, the requested size, in the data's layout."""
    rank = spatial + 2

    def infer(call, ctx):
        data = tensor_arg(call, 0, ctx, "data")
        size = shape_arg(call, 1, ctx)
        a = attrs_of(call)
        layout = layout_of(call, a["layout"], default_layout, "layout")
        if size.ndim not in (-1, spatial):
            raise err(call, f"the output size must have {spatial} entries ({_AXES[spatial]}), "
                            f"but {expr_to_str(call.args[1])} has {size.ndim}")
        if data.ndim not in (-1, rank):
            raise err(call, f"{op} expects a {rank}-D tensor ({layout.name}), but the data has "
                            f"ndim {data.ndim}")
        if data.dtype == "bool":
            raise err(call, f"{op} does not compute on bool tensors")
        dtype = a["out_dtype"] if a["out_dtype"] != "void" else data.dtype
        if data.shape is None or size.values is None:
            return TensorStructInfo(None, dtype, rank)
        n, c, *spatial_in = layout.to_canonical(data.shape)
        for k, (src, dst) in enumerate(zip(spatial_in, size.values)):
            if _static_int(src) == 0 and (_static_int(dst) or 0) > 0:
                raise err(call, f"{op}: cannot resize an empty axis: spatial axis {k} of the "
                                f"data has size 0, but the output size asks for "
                                f"{_static_int(dst)} (there is nothing to sample)")
        return tensor_sinfo(layout.from_canonical((n, c, *size.values)), dtype)
    return infer


# ---------------------------------------------------------------------------
# numpy reference (float32 coordinates, as TVM)
# ---------------------------------------------------------------------------

def _static_int(e) -> int | None:
    return int(e.value) if isinstance(e, IntImm) else None


def _check_not_empty(op: str, ins, outs) -> None:
    """Sampling an empty axis: the IndexOutOfRangeError the kernels raise
    (their tap index 0 into extent 0; see :func:`_tap_index`)."""
    for i, o in zip(ins, outs):
        if i == 0 and o > 0:
            raise IndexOutOfRangeError(op, 0, 0)


def _tap_index(i, in_size):
    """A tap index ``i`` clamped into the axis; for an axis that may be empty
    (its size not a constant) also checked, so that resizing an empty axis
    stops the kernel with an IndexOutOfRangeError instead of reading memory
    outside the data."""
    clamped = _clamp(i, in_size)
    if (_static_int(in_size) or 0) > 0:
        return clamped
    return tir.Call("checked_index", (clamped, in_size), "int64")


def _coords_np(out_size: int, in_size: int, mode: str, start: float, end: float) -> np.ndarray:
    f = np.float32
    x = np.arange(out_size, dtype=f)
    scale = f(in_size) / f(max(out_size, 1))  # (no coordinates at all when out_size is 0)
    if mode == "half_pixel":
        return (x + f(0.5)) * scale - f(0.5)
    if mode == "align_corners":
        return f(in_size - 1) / f(out_size - 1) * x if out_size > 1 else np.zeros_like(x)
    if mode == "asymmetric":
        return scale * x
    if mode == "pytorch_half_pixel":
        return (x + f(0.5)) * scale - f(0.5) if out_size > 1 else np.zeros_like(x)
    if mode == "tf_half_pixel_for_nn":
        return (x + f(0.5)) * scale
    if out_size > 1:  # tf_crop_and_resize
        return f(start) * f(in_size - 1) + x * f(end - start) * f(in_size - 1) / f(out_size - 1)
    return np.full_like(x, f(0.5) * f(start + end) * f(in_size - 1))


def _nearest_np(c: np.ndarray, rounding: str) -> np.ndarray:
    f = np.float32
    if rounding == "round":
        return np.round(c)
    if rounding == "round_prefer_floor":
        return np.ceil(c - f(0.5))
    if rounding == "round_prefer_ceil":
        return np.floor(c + f(0.5))
    if rounding == "floor":
        return np.floor(c + f(1e-5))
    return np.ceil(c - f(1e-5))


def _taps_np(coords, in_size, method, rounding, alpha, exclude):
    """Per output coordinate: tap indices (clamped) and weights, shape (o, taps)."""
    if method == "nearest_neighbor":
        idx = _nearest_np(coords, rounding).astype(np.int64)[:, None]
        return np.clip(idx, 0, in_size - 1), np.ones(idx.shape, np.float32)
    base = np.floor(coords)
    t = (coords - base).astype(np.float32)
    base = base.astype(np.int64)
    if method == "linear":
        idx = np.stack([base, base + 1], axis=1)
        w = np.stack([1 - t, t], axis=1)
    else:
        t2, t3 = t * t, t * t * t
        w = np.stack([alpha * (t3 - 2 * t2 + t),
                      (alpha + 2) * t3 - (3 + alpha) * t2 + 1,
                      -(alpha + 2) * t3 + (3 + 2 * alpha) * t2 - alpha * t,
                      -alpha * t3 + alpha * t2], axis=1).astype(np.float32)
        idx = base[:, None] + np.arange(-1, 3)[None, :]
        if exclude:
            w = np.where((idx < 0) | (idx >= in_size), np.float32(0), w)
            w = w / w.sum(axis=1, keepdims=True)
    return np.clip(idx, 0, in_size - 1), w


def _resize2d_ref(data, size, roi=(0.0,) * 4, layout="NCHW", method="linear",
                  coordinate_transformation_mode="half_pixel", rounding_method="round",
                  cubic_alpha=-0.75, cubic_exclude=0, extrapolation_value=0.0,
                  out_dtype="void"):
    x = np.asarray(data)
    dtype = np.dtype(x.dtype if out_dtype == "void" else out_dtype)
    perm = [layout.index(ch) for ch in "NCHW"]
    xc = np.transpose(x, perm).astype(np.float32 if x.dtype.kind != "f" else x.dtype)
    mode = coordinate_transformation_mode
    rounding = rounding_method or ("round" if mode == "align_corners" else "floor")
    (h, w), (oh, ow) = xc.shape[2:], (int(size[0]), int(size[1]))
    _check_not_empty("resize2d", (h, w), (oh, ow))
    cy = _coords_np(oh, h, mode, roi[0], roi[2])
    cx = _coords_np(ow, w, mode, roi[1], roi[3])
    iy, wy = _taps_np(cy, h, method, rounding, cubic_alpha, cubic_exclude)
    ix, wx = _taps_np(cx, w, method, rounding, cubic_alpha, cubic_exclude)
    gathered = xc[:, :, iy[:, None, :, None], ix[None, :, None, :]]  # n c oh ow ty tx
    if method == "nearest_neighbor":
        out = gathered[..., 0, 0]
    else:  # along x first, then along y: TVM's order of float32 operations
        rows = (gathered * wx[None, :, None, :].astype(xc.dtype)).sum(axis=-1)
        out = (rows * wy[:, None, :].astype(xc.dtype)).sum(axis=-1)
    if mode == "tf_crop_and_resize":
        outside = ((cy < 0) | (cy > h - 1))[:, None] | ((cx < 0) | (cx > w - 1))[None, :]
        out = np.where(outside, np.asarray(extrapolation_value, out.dtype), out)
    return np.transpose(out, ["NCHW".index(ch) for ch in layout]).astype(dtype)


define("image.resize2d", ("data", "size"), resize_inference("resize2d", 2, "NCHW"),
       attrs={"roi": ((0.0, 0.0, 0.0, 0.0), roi_attr(2)), "layout": ("NCHW", as_str),
              "method": ("linear", one_of("nearest_neighbor", "linear", "cubic")),
              "coordinate_transformation_mode": ("half_pixel", one_of(*MODES)),
              "rounding_method": ("round", one_of(*ROUNDING)),
              "cubic_alpha": (-0.75, as_float), "cubic_exclude": (0, as_int),
              "extrapolation_value": (0.0, as_float), "out_dtype": ("void", as_dtype)},
       reference=_resize2d_ref, pattern=OpPattern.INJECTIVE,
       doc="2-D image resize (nearest, bilinear, bicubic) with TVM's coordinate modes.")


# ---------------------------------------------------------------------------
# legalization
# ---------------------------------------------------------------------------

def _coord_te(x, in_size, out_size, mode, start, end):
    """The float32 input coordinate of output index ``x`` (TE expression)."""
    f = lambda v: _const(v, F32)  # noqa: E731
    xf = Cast(F32, x)
    i_f, o_f = Cast(F32, in_size), Cast(F32, out_size)
    scale = BinaryOp("/", i_f, o_f)
    half = BinaryOp("-", BinaryOp("*", BinaryOp("+", xf, f(0.5)), scale), f(0.5))
    one_out = BinaryOp("==", out_size, IntImm(1, "int64"))
    ratio = BinaryOp("/", Cast(F32, BinaryOp("-", in_size, IntImm(1, "int64"))),
                     Cast(F32, BinaryOp("-", out_size, IntImm(1, "int64"))))
    if mode == "half_pixel":
        return half
    if mode == "align_corners":
        return Select(one_out, f(0.0), BinaryOp("*", ratio, xf))
    if mode == "asymmetric":
        return BinaryOp("*", scale, xf)
    if mode == "pytorch_half_pixel":
        return Select(one_out, f(0.0), half)
    if mode == "tf_half_pixel_for_nn":
        return BinaryOp("*", BinaryOp("+", xf, f(0.5)), scale)
    im1 = Cast(F32, BinaryOp("-", in_size, IntImm(1, "int64")))
    span = BinaryOp("+", BinaryOp("*", f(start), im1),
                    BinaryOp("*", BinaryOp("*", xf, f(end - start)), ratio))
    return Select(one_out, BinaryOp("*", f(0.5 * (start + end)), im1), span)


def _nearest_te(c, rounding):
    f = lambda v: _const(v, F32)  # noqa: E731
    if rounding == "round":
        r = te.call("round", c)
    elif rounding == "round_prefer_floor":
        r = te.call("ceil", BinaryOp("-", c, f(0.5)))
    elif rounding == "round_prefer_ceil":
        r = te.call("floor", BinaryOp("+", c, f(0.5)))
    elif rounding == "floor":
        r = te.call("floor", BinaryOp("+", c, f(1e-5)))
    else:
        r = te.call("ceil", BinaryOp("-", c, f(1e-5)))
    return Cast("int64", r)


def _taps_te(c, in_size, method, rounding, alpha, exclude):
    """[(index, weight)] for one spatial coordinate expression ``c``."""
    if method == "nearest_neighbor":
        return [(_tap_index(_nearest_te(c, rounding), in_size), None)]
    base_f = te.call("floor", c)
    base = Cast("int64", base_f)
    t = BinaryOp("-", c, base_f)
    one = _const(1.0, F32)
    if method == "linear":
        return [(_tap_index(base, in_size), BinaryOp("-", one, t)),
                (_tap_index(BinaryOp("+", base, IntImm(1, "int64")), in_size), t)]
    a = _const(alpha, F32)
    t2 = BinaryOp("*", t, t)
    t3 = BinaryOp("*", t2, t)
    k = lambda v: _const(v, F32)  # noqa: E731
    ws = [BinaryOp("*", a, BinaryOp("+", BinaryOp("-", t3, BinaryOp("*", k(2), t2)), t)),
          BinaryOp("+", BinaryOp("-", BinaryOp("*", k(alpha + 2), t3),
                                 BinaryOp("*", k(3 + alpha), t2)), one),
          BinaryOp("-", BinaryOp("+", BinaryOp("*", k(-(alpha + 2)), t3),
                                 BinaryOp("*", k(3 + 2 * alpha), t2)), BinaryOp("*", a, t)),
          BinaryOp("+", BinaryOp("*", k(-alpha), t3), BinaryOp("*", a, t2))]
    idx = [BinaryOp("+", base, IntImm(d, "int64")) for d in (-1, 0, 1, 2)]
    if exclude:
        inside = [BinaryOp("and", BinaryOp(">=", i, IntImm(0, "int64")), BinaryOp("<", i, in_size))
                  for i in idx]
        ws = [Select(ok, w, k(0.0)) for ok, w in zip(inside, ws)]
        total = BinaryOp("+", BinaryOp("+", ws[0], ws[1]), BinaryOp("+", ws[2], ws[3]))
        ws = [BinaryOp("/", w, total) for w in ws]
    return [(_tap_index(i, in_size), w) for i, w in zip(idx, ws)]


@legalizes("image.resize2d")
def _resize2d(call, inputs):
    x = _tensor(inputs, 0, call)
    out = _out(call)
    a = attrs_of(call)
    lay = layout_of(call, a["layout"], "NCHW", "layout")
    _, _, h, w = lay.to_canonical(x.shape)
    _, _, oh, ow = lay.to_canonical(out.shape)
    mode = a["coordinate_transformation_mode"]
    rounding = a["rounding_method"] or ("round" if mode == "align_corners" else "floor")
    roi = a["roi"]
    calc = x.dtype if x.dtype.startswith("float") else F32

    def body(*o):
        n, c, y, xx = lay.to_canonical(o)
        cy = _coord_te(y, h, oh, mode, roi[0], roi[2])
        cx = _coord_te(xx, w, ow, mode, roi[1], roi[3])
        ty = _taps_te(cy, h, a["method"], rounding, a["cubic_alpha"], a["cubic_exclude"])
        tx = _taps_te(cx, w, a["method"], rounding, a["cubic_alpha"], a["cubic_exclude"])
        value = None
        for iy, wy in ty:
            row = None
            for ix, wx in tx:
                v = te.cast(x[lay.from_canonical((n, c, iy, ix))], calc)
                if wx is not None:
                    v = BinaryOp("*", v, te.cast(wx, calc))
                row = v if row is None else BinaryOp("+", row, v)
            if wy is not None:
                row = BinaryOp("*", row, te.cast(wy, calc))
            value = row if value is None else BinaryOp("+", value, row)
        if mode == "tf_crop_and_resize":
            zero = _const(0.0, F32)

            def outside(cc, size):
                return BinaryOp("or", BinaryOp("<", cc, zero),
                                BinaryOp(">", cc, Cast(F32, BinaryOp("-", size, IntImm(1, "int64")))))
            value = Select(BinaryOp("or", outside(cy, h), outside(cx, w)),
                           _const(a["extrapolation_value"], calc), value)
        return te.cast(value, out.dtype)
    return te.compute(out.shape, body, name="T_resize2d")


# ---------------------------------------------------------------------------
# resize3d
# ---------------------------------------------------------------------------

def _resize3d_ref(data, size, roi=(0.0,) * 6, layout="NCDHW", method="linear",
                  coordinate_transformation_mode="half_pixel", rounding_method="",
                  cubic_alpha=-0.75, cubic_exclude=0, extrapolation_value=0.0,
                  out_dtype="void"):
    x = np.asarray(data)
    dtype = np.dtype(x.dtype if out_dtype == "void" else out_dtype)
    lay = Layout(layout, "NCDHW")
    xc = lay.array_to_canonical(x).astype(np.float32 if x.dtype.kind != "f" else x.dtype)
    mode = coordinate_transformation_mode
    rounding = rounding_method or ("round" if mode == "align_corners" else "floor")
    ins = xc.shape[2:]
    outs = tuple(int(s) for s in size)
    _check_not_empty("resize3d", ins, outs)
    coords = [_coords_np(outs[j], ins[j], mode, roi[j], roi[3 + j]) for j in range(3)]
    taps = [_taps_np(coords[j], ins[j], method, rounding, cubic_alpha, cubic_exclude)
            for j in range(3)]
    (iz, wz), (iy, wy), (ix, wx) = taps
    g = xc[:, :, iz[:, None, None, :, None, None], iy[None, :, None, None, :, None],
           ix[None, None, :, None, None, :]]  # n c od oh ow tz ty tx
    if method == "nearest_neighbor":
        out = g[..., 0, 0, 0]
    else:  # along w, then h, then d: the kernel's order of float32 operations
        f = xc.dtype
        rows = (g * wx[None, None, :, None, None, :].astype(f)).sum(axis=-1)
        planes = (rows * wy[None, :, None, None, :].astype(f)).sum(axis=-1)
        out = (planes * wz[:, None, None, :].astype(f)).sum(axis=-1)
    if mode == "tf_crop_and_resize":
        outside = np.zeros(outs, bool)
        for j in range(3):
            bad = (coords[j] < 0) | (coords[j] > ins[j] - 1)
            shape = [1, 1, 1]
            shape[j] = outs[j]
            outside = outside | bad.reshape(shape)
        out = np.where(outside, np.asarray(extrapolation_value, out.dtype), out)
    return lay.array_from_canonical(out).astype(dtype)


_resize3d_inference = resize_inference("resize3d", 3, "NCDHW")


def _infer_resize3d(call, ctx):
    """resize2d's inference over three spatial axes (NCDHW by default)."""
    return _resize3d_inference(call, ctx)


define("image.resize3d", ("data", "size"), _infer_resize3d,
       attrs={"roi": ((0.0,) * 6, roi_attr(3)), "layout": ("NCDHW", as_str),
              "method": ("linear", one_of("nearest_neighbor", "linear", "cubic")),
              "coordinate_transformation_mode": ("half_pixel", one_of(*MODES)),
              "rounding_method": ("", one_of(*ROUNDING)),
              "cubic_alpha": (-0.75, as_float), "cubic_exclude": (0, as_int),
              "extrapolation_value": (0.0, as_float), "out_dtype": ("void", as_dtype)},
       reference=_resize3d_ref, pattern=OpPattern.INJECTIVE,
       doc="3-D image resize (nearest, trilinear, tricubic) with TVM's coordinate modes.")


@legalizes("image.resize3d")
def _resize3d(call, inputs):
    x = _tensor(inputs, 0, call)
    out = _out(call)
    a = attrs_of(call)
    lay = layout_of(call, a["layout"], "NCDHW", "layout")
    ins = lay.to_canonical(x.shape)[2:]
    outs = lay.to_canonical(out.shape)[2:]
    mode = a["coordinate_transformation_mode"]
    rounding = a["rounding_method"] or ("round" if mode == "align_corners" else "floor")
    roi = a["roi"]
    calc = x.dtype if x.dtype.startswith("float") else F32

    def body(*o):
        n, c, *pos = lay.index_to_canonical(o)
        cs = [_coord_te(pos[j], ins[j], outs[j], mode, roi[j], roi[3 + j]) for j in range(3)]
        taps = [_taps_te(cs[j], ins[j], a["method"], rounding, a["cubic_alpha"],
                         a["cubic_exclude"]) for j in range(3)]

        def weighted(v, w):
            return v if w is None else BinaryOp("*", v, te.cast(w, calc))
        value = None
        for iz, wz in taps[0]:
            plane = None
            for iy, wy in taps[1]:
                row = None
                for ix, wx in taps[2]:
                    v = weighted(te.cast(x[lay.index_from_canonical((n, c, iz, iy, ix))], calc), wx)
                    row = v if row is None else BinaryOp("+", row, v)
                row = weighted(row, wy)
                plane = row if plane is None else BinaryOp("+", plane, row)
            plane = weighted(plane, wz)
            value = plane if value is None else BinaryOp("+", value, plane)
        if mode == "tf_crop_and_resize":
            zero = _const(0.0, F32)
            outside = None
            for j in range(3):
                hi = Cast(F32, BinaryOp("-", ins[j], IntImm(1, "int64")))
                bad = BinaryOp("or", BinaryOp("<", cs[j], zero), BinaryOp(">", cs[j], hi))
                outside = bad if outside is None else BinaryOp("or", outside, bad)
            value = Select(outside, _const(a["extrapolation_value"], calc), value)
        return te.cast(value, out.dtype)
    return te.compute(out.shape, body, name="T_resize3d")


# ---------------------------------------------------------------------------
# How the fuzzing generator draws these operators (phasec.testing)
# ---------------------------------------------------------------------------

def _draw_resize2d(ctx):
    size = (ctx.integers(1, 5), ctx.integers(1, 5))
    method = ctx.choose(["nearest_neighbor", "linear", "cubic"])
    mode = ctx.choose(["half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"])
    if method == "cubic":  # the Keys kernel overshoots the data (on each of two axes)
        ctx.include(ctx.lo - (ctx.hi - ctx.lo), ctx.hi + (ctx.hi - ctx.lo))
    return (ctx.x, size), {"method": method, "coordinate_transformation_mode": mode}


def _draw_resize3d(ctx):
    size = tuple(ctx.integers(1, 4) for _ in range(3))
    method = ctx.choose(["nearest_neighbor", "linear", "cubic"])
    mode = ctx.choose(["half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"])
    if method == "cubic":  # the Keys kernel overshoots the data (on each of three axes)
        span = ctx.hi - ctx.lo
        ctx.include(ctx.lo - 2 * span, ctx.hi + 2 * span)
    return (ctx.x, size), {"method": method, "coordinate_transformation_mode": mode}


declares_draw("image.resize2d", ranks=(4,), build=_draw_resize2d)
declares_draw("image.resize3d", ranks=(5,), build=_draw_resize3d)

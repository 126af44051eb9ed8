"""ONNX's Resize over any axes: ``image.onnx_resize``. (TVM 0.27's
``image.resize2d``/``resize3d`` map coordinates with the ratio of whole input
and output sizes and resize only the spatial axes of NCHW / NCDHW; ONNX maps
them with the given scale, resizes any axis, and has antialiasing, the
``half_pixel_symmetric`` mode and a per-axis region of interest. So this
operator has its own name, as ``vision.onnx_roi_align``.)

``image.onnx_resize(data, size, scales, roi, mode,
coordinate_transformation_mode, nearest_mode, cubic_coeff_a,
exclude_outside, extrapolation_value, antialias)``: ``size`` is the output
shape (every axis); ``scales`` one scale per axis (the ``s`` below; the
converter passes ``size / in`` when the model gives sizes); ``roi`` the
starts then the ends of every axis, as fractions of it (only
``tf_crop_and_resize`` reads it). Each axis whose scale is not 1, size
changes or roi is not ``[0, 1]`` is resampled in turn, in ascending order:
output index ``x`` maps to the input coordinate (float32; ``i``, ``o`` the
input and output lengths, ``w = s * i`` the unrounded output length)

=========================  =================================================
``half_pixel``             ``(x + 0.5) / s - 0.5``
``half_pixel_symmetric``   ``i/2 * (1 - o/w) + (x + 0.5) / s - 0.5``
``pytorch_half_pixel``     ``(x + 0.5) / s - 0.5``, ``-0.5`` when ``w == 1``
``align_corners``          ``x * (i - 1) / (w - 1)``, ``0`` when ``w == 1``
``asymmetric``             ``x / s``
``tf_half_pixel_for_nn``   ``(x + 0.5) / s``
``tf_crop_and_resize``     ``start * (i - 1) + x * (end - start) * (i - 1) / (w - 1)``
                           (``(start + end) / 2 * (i - 1)`` when ``w == 1``);
                           outside ``[0, i - 1]`` the output is
                           ``extrapolation_value``
=========================  =================================================

``nearest`` takes the input at the coordinate rounded by ``nearest_mode``
(``round_prefer_floor``, ``round_prefer_ceil``, ``floor``, ``ceil``; a whole
coordinate is itself). ``linear`` and ``cubic`` weigh the taps ``floor(c) +
k`` by the triangle / Keys kernel (``cubic_coeff_a``) of ``k - (c -
floor(c))``; with ``antialias`` and ``s < 1`` the kernel is stretched by
``1 / s`` (more taps, the weights divided by their sum), and
``exclude_outside`` zeroes the taps outside the axis and renormalizes. Taps
outside the axis read its edge. Integer data is interpolated in float32 and
rounded to nearest (ties to even), saturating, as ONNX's reference.
"""

from __future__ import annotations

import math

import numpy as np

from phasec import arith, te
from phasec.errors import IndexOutOfRangeError
from phasec.ir import tir
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.text import expr_to_str
from phasec.ir.tir import BinaryOp, Cast, IntImm, Select
from phasec.op._common import (
    OpPattern, as_bool, as_float, attrs_of, define, err, one_of, shape_arg, tensor_arg,
    tensor_sinfo,
)
from phasec.op._lowering import _clamp, _const, _out, _tensor, legalizes
from phasec.op.draw import declares_draw

__all__ = ["tap_offsets"]

F32 = "float32"
COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
               "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _float_tuple(v) -> tuple[float, ...]:
    if isinstance(v, (int, float)):
        v = (v,)
    return tuple(as_float(x) for x in v)


def tap_offsets(method: str, scale: float, antialias: bool) -> range:
    """The offsets ``k`` of the taps ``floor(c) + k`` that linear / cubic
    interpolation weighs (ONNX's footprint: wider by ``1 / scale`` when
    antialiasing a downscale)."""
    support = 1.0 if method == "linear" else 2.0
    s = min(scale, 1.0) if antialias else 1.0
    start = int(math.floor(-support / s)) + 1
    return range(start, 2 - start)


def _resized_axes(shape_in, shape_out, scales, roi) -> list[int]:
    """The axes a resize changes (the others are copied)."""
    out = []
    for a, (i, o) in enumerate(zip(shape_in, shape_out)):
        full_roi = math.isclose(roi[a], 0.0) and math.isclose(roi[len(scales) + a], 1.0)
        if not (math.isclose(scales[a], 1.0) and _same(i, o) and full_roi):
            out.append(a)
    return out


def _same(i, o) -> bool:
    if isinstance(i, int) and isinstance(o, int):
        return i == o
    return arith.prove_equal(i, o)


def _infer(call, ctx):
    data = tensor_arg(call, 0, ctx, "data")
    size = shape_arg(call, 1, ctx)
    a = attrs_of(call)
    if data.dtype == "bool":
        raise err(call, "onnx_resize does not compute on bool tensors")
    if data.ndim != -1 and size.ndim not in (-1, data.ndim):
        raise err(call, f"the output size must have one entry per axis of the data "
                        f"({data.ndim}), but {expr_to_str(call.args[1])} has {size.ndim}")
    rank = data.ndim if data.ndim != -1 else size.ndim
    if rank != -1:
        if len(a["scales"]) != rank:
            raise err(call, f"onnx_resize needs one scale per axis ({rank}), got {len(a['scales'])}")
        if not all(math.isfinite(s) and s > 0 for s in a["scales"]):
            raise err(call, f"onnx_resize's scales must be finite and above 0, got {a['scales']}")
        if a["roi"] and len(a["roi"]) != 2 * rank:
            raise err(call, f"onnx_resize's roi needs {2 * rank} numbers (a start and an end per "
                            f"axis), got {len(a['roi'])}")
    if a["antialias"] and a["mode"] == "nearest":
        raise err(call, "onnx_resize: antialias applies to the linear and cubic modes only")
    if size.values is None:
        return TensorStructInfo(None, data.dtype, rank)
    if data.shape is not None:
        for k, (src, dst) in enumerate(zip(data.shape, size.values)):
            if isinstance(src, IntImm) and src.value == 0 and isinstance(dst, IntImm) \
                    and dst.value > 0:
                raise err(call, f"onnx_resize: cannot resize an empty axis: axis {k} of the data "
                                f"has size 0, but the output size asks for {dst.value}")
    return tensor_sinfo(size.values, data.dtype)


# ---------------------------------------------------------------------------
# numpy reference: one dense (output, input) weight matrix per resized axis
# ---------------------------------------------------------------------------

def _kernel_np(method: str, d: np.ndarray, alpha: float) -> np.ndarray:
    d = np.abs(d)
    if method == "linear":
        return np.maximum(0.0, 1.0 - d)
    near = ((alpha + 2) * d - (alpha + 3)) * d * d + 1
    far = ((alpha * d - 5 * alpha) * d + 8 * alpha) * d - 4 * alpha
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def _coords_np(mode, n_out, n_in, scale, start, end):
    f = np.float32
    x = np.arange(n_out, dtype=f)
    s, i = f(scale), f(n_in)
    w = s * i
    if mode in ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel"):
        c = (x + f(0.5)) / s - f(0.5)
        if mode == "half_pixel_symmetric":
            c = i / f(2) * (f(1) - f(n_out) / w) + c
        if mode == "pytorch_half_pixel" and w == f(1):
            c = np.full_like(x, f(-0.5))
        return c
    if mode == "align_corners":
        return np.zeros_like(x) if w == f(1) else x * (i - f(1)) / (w - f(1))
    if mode == "asymmetric":
        return x / s
    if mode == "tf_half_pixel_for_nn":
        return (x + f(0.5)) / s
    if w == f(1):
        return np.full_like(x, (f(start) + f(end)) / f(2) * (i - f(1)))
    return f(start) * (i - f(1)) + x * (f(end) - f(start)) * (i - f(1)) / (w - f(1))


def _weights_np(n_out, n_in, scale, start, end, a) -> np.ndarray:
    c = _coords_np(a["coordinate_transformation_mode"], n_out, n_in, scale, start, end)
    m = np.zeros((n_out, n_in), np.float64)
    method = a["mode"]
    for row, cc in enumerate(c.astype(np.float64)):
        if method == "nearest":
            nm = a["nearest_mode"]
            frac = cc - math.floor(cc)
            up = {"round_prefer_floor": frac > 0.5, "round_prefer_ceil": frac >= 0.5,
                  "floor": False, "ceil": frac > 0}[nm]
            m[row, min(max(math.floor(cc) + int(up), 0), n_in - 1)] = 1.0
            continue
        base = math.floor(cc)
        ks = np.array(tap_offsets(method, scale, a["antialias"]), np.float64)
        s = min(scale, 1.0) if a["antialias"] else 1.0
        w = _kernel_np(method, (ks - (cc - base)) * s, a["cubic_coeff_a"])
        idx = base + ks.astype(np.int64)
        if a["exclude_outside"]:
            w = np.where((idx < 0) | (idx >= n_in), 0.0, w)
        if a["exclude_outside"] or a["antialias"]:
            w = w / w.sum()
        np.add.at(m[row], np.clip(idx, 0, n_in - 1), w)
    outside = None
    if a["coordinate_transformation_mode"] == "tf_crop_and_resize":
        outside = (c < 0) | (c > n_in - 1)
    return m, outside


def _onnx_resize_ref(data, size, scales=(), roi=(), mode="nearest",
                     coordinate_transformation_mode="half_pixel",
                     nearest_mode="round_prefer_floor", cubic_coeff_a=-0.75, exclude_outside=False,
                     extrapolation_value=0.0, antialias=False):
    x = np.asarray(data)
    a = dict(mode=mode, coordinate_transformation_mode=coordinate_transformation_mode,
             nearest_mode=nearest_mode, cubic_coeff_a=cubic_coeff_a,
             exclude_outside=exclude_outside, antialias=antialias)
    rank = x.ndim
    roi = tuple(roi) or (0.0,) * rank + (1.0,) * rank
    size = [int(s) for s in size]
    calc = x.dtype if x.dtype.kind == "f" and x.dtype.itemsize >= 4 else np.dtype(np.float32)
    y = x.astype(calc)
    for ax in _resized_axes(list(x.shape), size, scales, roi):
        if x.shape[ax] == 0 and size[ax] > 0:
            raise IndexOutOfRangeError("onnx_resize", 0, 0)
        m, outside = _weights_np(size[ax], x.shape[ax], scales[ax], roi[ax], roi[rank + ax], a)
        y = np.moveaxis(np.tensordot(y.astype(np.float64), m, axes=([ax], [1])), -1, ax)
        if outside is not None:
            shape = [1] * rank
            shape[ax] = size[ax]
            y = np.where(outside.reshape(shape), extrapolation_value, y)
        y = y.astype(calc)
    if x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        return np.clip(np.round(y), info.min, info.max).astype(x.dtype)
    return y.astype(x.dtype)


define("image.onnx_resize", ("data", "size"), _infer,
       attrs={"scales": ((), _float_tuple), "roi": ((), _float_tuple),
              "mode": ("nearest", one_of("nearest", "linear", "cubic")),
              "coordinate_transformation_mode": ("half_pixel", one_of(*COORD_MODES)),
              "nearest_mode": ("round_prefer_floor", one_of(*NEAREST_MODES)),
              "cubic_coeff_a": (-0.75, as_float), "exclude_outside": (False, as_bool),
              "extrapolation_value": (0.0, as_float), "antialias": (False, as_bool)},
       reference=_onnx_resize_ref, pattern=OpPattern.INJECTIVE,
       doc="ONNX Resize: nearest / linear / cubic over any axes, ONNX's coordinate modes, "
           "antialiasing.")


# ---------------------------------------------------------------------------
# legalization: one stage per resized axis
# ---------------------------------------------------------------------------

def _coord_te(mode, x, n_in, n_out, scale, start, end):
    f = lambda v: _const(v, F32)  # noqa: E731
    xf, i = Cast(F32, x), Cast(F32, n_in)
    s = f(scale)
    w = BinaryOp("*", s, i)
    w_is_one = BinaryOp("==", w, f(1.0))
    if mode in ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel"):
        c = BinaryOp("-", BinaryOp("/", BinaryOp("+", xf, f(0.5)), s), f(0.5))
        if mode == "half_pixel_symmetric":
            shift = BinaryOp("*", BinaryOp("/", i, f(2.0)),
                             BinaryOp("-", f(1.0), BinaryOp("/", Cast(F32, n_out), w)))
            c = BinaryOp("+", shift, c)
        if mode == "pytorch_half_pixel":
            c = Select(w_is_one, f(-0.5), c)
        return c
    im1 = BinaryOp("-", i, f(1.0))
    safe_wm1 = Select(w_is_one, f(1.0), BinaryOp("-", w, f(1.0)))
    if mode == "align_corners":
        return Select(w_is_one, f(0.0), BinaryOp("/", BinaryOp("*", xf, im1), safe_wm1))
    if mode == "asymmetric":
        return BinaryOp("/", xf, s)
    if mode == "tf_half_pixel_for_nn":
        return BinaryOp("/", BinaryOp("+", xf, f(0.5)), s)
    st, en = f(start), f(end)
    span = BinaryOp("/", BinaryOp("*", BinaryOp("*", xf, BinaryOp("-", en, st)), im1), safe_wm1)
    middle = BinaryOp("*", BinaryOp("/", BinaryOp("+", st, en), f(2.0)), im1)
    return Select(w_is_one, middle, BinaryOp("+", BinaryOp("*", st, im1), span))


def _kernel_te(method, d, alpha):
    f = lambda v: _const(v, F32)  # noqa: E731
    d = te.call("fabs", d)
    if method == "linear":
        return BinaryOp("max", f(0.0), BinaryOp("-", f(1.0), d))
    a = alpha
    d2 = BinaryOp("*", d, d)
    near = BinaryOp("+", BinaryOp("*", BinaryOp("-", BinaryOp("*", f(a + 2), d), f(a + 3)), d2),
                    f(1.0))
    far = BinaryOp("-", BinaryOp("*", BinaryOp("+", BinaryOp(
        "*", BinaryOp("-", BinaryOp("*", f(a), d), f(5 * a)), d), f(8 * a)), d), f(4 * a))
    return Select(BinaryOp("<=", d, f(1.0)), near,
                  Select(BinaryOp("<", d, f(2.0)), far, f(0.0)))


def _nearest_te(c, mode):
    f = lambda v: _const(v, F32)  # noqa: E731
    if mode == "round_prefer_floor":
        r = te.call("ceil", BinaryOp("-", c, f(0.5)))
    elif mode == "round_prefer_ceil":
        r = te.call("floor", BinaryOp("+", c, f(0.5)))
    else:
        r = te.call(mode, c)
    return Cast("int64", r)


def _stage(src, ax, n_out, scale, start, end, a, calc, name, last_dtype):
    """``src`` resampled along axis ``ax`` to ``n_out`` (a TE tensor)."""
    shape = list(src.shape)
    n_in = shape[ax]
    shape[ax] = n_out
    method = a["mode"]
    mode = a["coordinate_transformation_mode"]
    f = lambda v: _const(v, F32)  # noqa: E731

    def at(idx, i):
        return te.cast(src[tuple(idx[:ax]) + (_clamp(i, n_in),) + tuple(idx[ax + 1:])], calc)

    def body(*idx):
        c = _coord_te(mode, idx[ax], n_in, n_out, scale, start, end)
        if method == "nearest":
            value = at(idx, _nearest_te(c, a["nearest_mode"]))
        else:
            base_f = te.call("floor", c)
            base = Cast("int64", base_f)
            t = BinaryOp("-", c, base_f)
            s = min(scale, 1.0) if a["antialias"] else 1.0
            taps = []
            for k in tap_offsets(method, scale, a["antialias"]):
                w = _kernel_te(method, BinaryOp("*", BinaryOp("-", f(float(k)), t), f(s)),
                               a["cubic_coeff_a"])
                i = BinaryOp("+", base, IntImm(k, "int64"))
                if a["exclude_outside"]:
                    w = Select(BinaryOp("and", BinaryOp(">=", i, IntImm(0, "int64")),
                                        BinaryOp("<", i, n_in)), w, f(0.0))
                taps.append((i, w))
            if a["exclude_outside"] or a["antialias"]:
                total = taps[0][1]
                for _, w in taps[1:]:
                    total = BinaryOp("+", total, w)
                taps = [(i, BinaryOp("/", w, total)) for i, w in taps]
            value = None
            for i, w in taps:
                term = BinaryOp("*", at(idx, i), te.cast(w, calc))
                value = term if value is None else BinaryOp("+", value, term)
        if mode == "tf_crop_and_resize":
            hi = BinaryOp("-", Cast(F32, n_in), f(1.0))
            outside = BinaryOp("or", BinaryOp("<", c, f(0.0)), BinaryOp(">", c, hi))
            value = Select(outside, _const(a["extrapolation_value"], calc), value)
        if last_dtype is None:
            return value
        if tir.is_float(last_dtype):
            return te.cast(value, last_dtype)
        info = np.iinfo(last_dtype)
        rounded = te.call("round", value)
        clipped = BinaryOp("max", BinaryOp("min", rounded, _const(float(info.max), calc)),
                           _const(float(info.min), calc))
        return te.cast(clipped, last_dtype)
    return te.compute(shape, body, name=name, inline=False if last_dtype is None else None)


@legalizes("image.onnx_resize")
def _onnx_resize_te(call, inputs):
    x = _tensor(inputs, 0, call)
    out = _out(call)
    a = attrs_of(call)
    rank = len(x.shape)
    roi = a["roi"] or (0.0,) * rank + (1.0,) * rank
    scales = a["scales"]

    def static(d):
        return int(d.value) if isinstance(d, IntImm) else d
    ins = [static(d) for d in x.shape]
    outs = [static(d) for d in out.shape]
    axes = _resized_axes(ins, outs, scales, roi)
    calc = x.dtype if x.dtype in ("float32", "float64") else F32
    if not axes:
        return te.compute(out.shape, lambda *i: x[i], name="T_onnx_resize")
    t = x
    for n, ax in enumerate(axes):
        last = out.dtype if n == len(axes) - 1 else None
        t = _stage(t, ax, out.shape[ax], scales[ax], roi[ax], roi[rank + ax], a, calc,
                   f"T_onnx_resize_{ax}", last)
    return t


# ---------------------------------------------------------------------------
# How the fuzzing generator draws it (phasec.testing)
# ---------------------------------------------------------------------------

def _draw_onnx_resize(ctx):
    shape = list(ctx.shape)
    method = ctx.choose(["nearest", "linear", "cubic"])
    mode = ctx.choose(["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                       "align_corners", "asymmetric"])
    scales = [1.0] * len(shape)
    size = list(shape)
    for ax in range(max(len(shape) - 2, 0), len(shape)):
        scales[ax] = ctx.choose([0.5, 0.75, 1.5, 2.0])
        size[ax] = max(int(math.floor(shape[ax] * scales[ax])), 1)
    antialias = method != "nearest" and ctx.choose([False, True])
    if method == "cubic":  # the Keys kernel overshoots the data (on each of two axes)
        ctx.include(ctx.lo - (ctx.hi - ctx.lo), ctx.hi + (ctx.hi - ctx.lo))
    return (ctx.x, tuple(size)), {"mode": method, "coordinate_transformation_mode": mode,
                                  "scales": tuple(scales), "antialias": antialias}


declares_draw("image.onnx_resize", ranks=(2, 3, 4), build=_draw_onnx_resize)

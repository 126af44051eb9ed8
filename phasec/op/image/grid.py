"""Sampling grids (TVM 0.27's ``relax.image``): ``image.affine_grid`` and
``image.grid_sample`` (grid_sample's rules are with its definition below).

``image.affine_grid(data, size, align_corners=True)``: the sampling grid of
a batch of affine matrices ``data`` (``[N, 2, 3]`` for a 2-D ``size``
``(H, W)``, ``[N, 3, 4]`` for ``(D, H, W)``); the output is ``[N, 2, H, W]``
(``[N, 3, D, H, W]``): channel 0 the x (width) coordinate. Output index
``i`` along a dim of size ``s`` is the normalized coordinate ``-1 + i * (2 -
1e-7) / (s - 1)`` with ``align_corners`` (TVM's constant; s > 1), else
``-1 + 1 / s + i * 2 / s``; ``out[n, k] = data[n, k, ndim] + sum_r data[n,
k, ndim - 1 - r] * coord_r`` over the dims slowest first, as TVM's
kernel computes it.
"""

from __future__ import annotations

import numpy as np

from phasec import arith
from phasec import te
from phasec.ir.text import expr_to_str
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.tir import BinaryOp, Cast, IntImm, Select
from phasec.op._common import (
    OpPattern, as_bool, as_str, attrs_of, define, err, one_of, shape_arg, tensor_arg,
    tensor_sinfo,
)
from phasec.op.draw import declares_draw
from phasec.op._lowering import _clamp, _const, _out, _tensor, legalizes

__all__: list[str] = []

F32 = "float32"


# ---------------------------------------------------------------------------
# affine_grid
# ---------------------------------------------------------------------------


def _infer_affine_grid(call, ctx):
    data = tensor_arg(call, 0, ctx, "data")
    size = shape_arg(call, 1, ctx)
    a = attrs_of(call)
    if size.ndim not in (2, 3):
        raise err(call, "affine_grid expects the target size to be a 2-dim (H, W) or 3-dim "
                        f"(D, H, W) shape, but {expr_to_str(call.args[1])} has {size.ndim}")
    spatial = size.ndim
    if data.ndim not in (-1, 3):
        raise err(call, "affine_grid expects the affine matrices as a 3-D tensor (batch, "
                        f"spatial, spatial + 1), but the data has ndim {data.ndim}")
    if data.dtype != "void" and not data.dtype.startswith("float"):
        raise err(call, f"affine_grid computes in floating point, but the data is {data.dtype}")
    if data.shape is not None:
        for k, want in ((1, spatial), (2, spatial + 1)):
            v = arith.const_int(data.shape[k])
            if v is not None and v != want:
                raise err(call, f"affine_grid expects dimension {k} of the matrices to be "
                                f"{want} for a {spatial}-D grid, but it is {v}")
    if a["align_corners"] and size.values is not None:
        for d in size.values:
            v = arith.const_int(d)
            if v is not None and v <= 1:
                raise err(call, "affine_grid with align_corners needs every target size > 1 "
                                f"(TVM divides by size - 1), got {v}")
    if data.shape is None or size.values is None:
        return TensorStructInfo(None, data.dtype, spatial + 2)
    return tensor_sinfo((data.shape[0], IntImm(spatial, "int64"), *size.values), data.dtype)


def _grid_consts(s: int, align_corners: bool) -> tuple[float, float]:
    """(start, step) of the normalized coordinates along a dim of size ``s``."""
    if align_corners:
        return -1.0, (2.0 - 1e-7) / (s - 1)
    return -1.0 + 1.0 / s, 2.0 / s


def _affine_grid_ref(data, size, align_corners=True):
    theta = np.asarray(data)
    dims = tuple(int(s) for s in size)
    nd = len(dims)
    f = theta.dtype.type
    out = np.empty((theta.shape[0], nd, *dims), theta.dtype)
    coords = []
    for r, s in enumerate(dims):
        start, step = _grid_consts(s, align_corners)
        shape = [1] * nd
        shape[r] = s
        coords.append((f(start) + np.arange(s, dtype=theta.dtype) * f(step)).reshape(shape))
    for n in range(theta.shape[0]):
        for k in range(nd):
            val = np.full(dims, theta[n, k, nd], theta.dtype)
            for r in range(nd):
                val = val + theta[n, k, nd - 1 - r] * coords[r]
            out[n, k] = val
    return out


define("image.affine_grid", ("data", "size"), _infer_affine_grid,
       attrs={"align_corners": (True, as_bool)}, reference=_affine_grid_ref,
       pattern=OpPattern.INJECTIVE,
       doc="The sampling grid [N, 2, H, W] (or [N, 3, D, H, W]) of a batch of affine matrices.")


@legalizes("image.affine_grid")
def _affine_grid(call, inputs):
    theta = _tensor(inputs, 0, call)
    out = _out(call)
    nd = len(out.shape) - 2
    dt = theta.dtype
    align = attrs_of(call)["align_corners"]
    consts = []
    for d in out.shape[2:]:
        s = arith.const_int(d)
        if s is not None:
            start, step = _grid_consts(s, align)
            consts.append((_const(start, dt), _const(step, dt)))
        else:  # a symbolic size: the same constants, computed in float64 at run time
            sf = Cast("float64", d)
            if align:
                step = BinaryOp("/", _const(2.0 - 1e-7, "float64"),
                                BinaryOp("-", sf, _const(1.0, "float64")))
                consts.append((_const(-1.0, dt), Cast(dt, step)))
            else:
                start = BinaryOp("+", _const(-1.0, "float64"),
                                 BinaryOp("/", _const(1.0, "float64"), sf))
                consts.append((Cast(dt, start),
                               Cast(dt, BinaryOp("/", _const(2.0, "float64"), sf))))

    def body(n, k, *pos):
        val = theta[n, k, IntImm(nd, "int64")]
        for r in range(nd):
            start, step = consts[r]
            coord = BinaryOp("+", start, BinaryOp("*", Cast(dt, pos[r]), step))
            val = BinaryOp("+", val, BinaryOp("*", theta[n, k, IntImm(nd - 1 - r, "int64")],
                                              coord))
        return val
    return te.compute(out.shape, body, name="T_affine_grid")


def _draw_affine_grid(ctx):
    nd = ctx.shape[1]
    size = tuple(ctx.integers(2, 4) for _ in range(nd))
    return (ctx.x, size), {"align_corners": ctx.choose([True, False])}


# coordinates lie in [-1, 1]: |out| <= (nd + 1) * max|theta|
declares_draw("image.affine_grid", ranks=(3,), build=_draw_affine_grid,
              fits=lambda s: s[1] in (2, 3) and s[2] == s[1] + 1,
              shape=lambda pick: (pick([1, 2]), 2, 3) if pick([0, 1]) else (pick([1, 2]), 3, 4),
              out=lambda ctx: (-(ctx.shape[1] + 1) * ctx.mag, (ctx.shape[1] + 1) * ctx.mag))


# ---------------------------------------------------------------------------
# grid_sample
# ---------------------------------------------------------------------------
#
# ``image.grid_sample(data, grid, method, layout, padding_mode, align_corners)``
# (TVM 0.27, PyTorch's grid_sample): ``data`` NCHW (or NCDHW when ``layout``
# is "NCDHW"), ``grid`` [N, r, *out] of normalized coordinates, channel 0 the
# x (width) coordinate; the output is [N, C, *out]. A coordinate g becomes
# ``(g + 1) * (size - 1) / 2`` with ``align_corners``, else ``-0.5 + (g + 1) *
# size / 2``; "border" clamps it into [0, size - 1], "reflection" reflects it
# about the edges (TVM's formula) and clamps; "zeros" leaves it, and a tap
# outside the input reads 0. Methods: "bilinear" (the 2^r corners),
# "nearest" (round half to even), "bicubic" (2-D only; PyTorch's A = -0.75
# kernel, its taps padded per padding_mode). Every tap index comes from data,
# so it is checked before the read: a tap outside the input is padding (never
# a read outside it), and a coordinate that is NaN or beyond +-2^24 is taken
# as far outside.

_FAR = 16777216.0  # 2^24: beyond it a float32 coordinate has no fraction left


def _sanitize_np(c):
    return np.where(np.abs(c) < _FAR, c, np.asarray(-_FAR, c.dtype)).astype(c.dtype)


def _unnormalize_np(g, size, align):
    f = g.dtype.type
    if align:
        return (g + f(1)) * f(size - 1) / f(2)
    return f(-0.5) + (g + f(1)) * f(size) / f(2)


def _reflect_np(x, size, align):
    f = x.dtype.type
    span, corner = (f(size - 1), f(0)) if align else (f(size), f(-0.5))
    if span == 0:
        return np.zeros_like(x)
    inside = (x >= corner) & (x <= span + corner)
    dist = np.abs(corner - x)
    times = np.trunc(dist.astype(np.int64) / span).astype(np.int64)  # TVM's truncdiv on int32
    extra = dist - times.astype(x.dtype) * span
    refl = np.where(times % 2 == 0, extra + corner, span - extra + corner)
    return np.where(inside, x, refl).astype(x.dtype)


def _source_coords_np(g, size, align, padding):
    c = _unnormalize_np(_sanitize_np(g), size, align)
    if padding == "reflection":
        c = _reflect_np(c, size, align)
    if padding in ("reflection", "border"):
        c = np.clip(c, 0, size - 1).astype(g.dtype)
    return c


def _cubic_weights_np(t):
    a = t.dtype.type(-0.75)

    def w1(x):
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def w2(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    one, two = t.dtype.type(1), t.dtype.type(2)
    return [w2(t + one), w1(t), w1(one - t), w2(two - t)]


def _grid_sample_ref(data, grid, method="bilinear", layout="NCHW", padding_mode="zeros",
                     align_corners=False):
    x = np.asarray(data)
    g = np.asarray(grid).astype(x.dtype)
    r = x.ndim - 2
    ins = x.shape[2:]
    n_idx = np.arange(x.shape[0]).reshape((-1,) + (1,) * (r + 1))
    c_idx = np.arange(x.shape[1]).reshape((1, -1) + (1,) * r)
    # per spatial dim (slowest first) the source coordinate, shape [N, 1, *out]
    cs = [_source_coords_np(g[:, r - 1 - k][:, None], ins[k], align_corners, padding_mode)
          for k in range(r)]

    def pixel(idx):
        ok = np.ones(np.broadcast(*idx).shape, bool)
        if min(ins) == 0:  # an empty input has no pixel inside: zeros, as the kernels read
            return np.zeros(np.broadcast(n_idx, c_idx, ok).shape, x.dtype)
        for k, i in enumerate(idx):
            ok &= (i >= 0) & (i < ins[k])
        safe = tuple(np.clip(i, 0, ins[k] - 1) for k, i in enumerate(idx))
        return np.where(ok, x[(n_idx, c_idx) + safe], x.dtype.type(0))

    if method == "nearest":
        return pixel([np.round(c).astype(np.int64) for c in cs]).astype(x.dtype)
    if method == "bicubic":  # TVM's bicubic pads the taps, not the coordinates
        cs = [_unnormalize_np(_sanitize_np(g[:, r - 1 - k][:, None]), ins[k], align_corners)
              for k in range(r)]
    floors = [np.floor(c) for c in cs]
    fr = [c - fl for c, fl in zip(cs, floors)]
    base = [fl.astype(np.int64) for fl in floors]
    if method == "bilinear":
        out = np.zeros(np.broadcast(n_idx, c_idx, cs[0]).shape, x.dtype)
        one = x.dtype.type(1)
        for corner in np.ndindex(*(2,) * r):
            v = pixel([b + k for b, k in zip(base, corner)])
            for k, bit in enumerate(corner):
                v = v * (fr[k] if bit else one - fr[k])
            out = out + v
        return out.astype(x.dtype)
    # bicubic, 2-D: taps padded by the padding mode, then the separable kernel
    h, w = ins

    def pad_tap(i, size):
        if padding_mode == "border":
            return np.clip(i, 0, size - 1)
        if padding_mode == "reflection":
            return np.clip(_reflect_np(i.astype(x.dtype), size, align_corners), 0, size - 1
                           ).astype(np.int64)
        return i
    wy, wx = _cubic_weights_np(fr[0]), _cubic_weights_np(fr[1])
    rows = []
    for i in range(4):
        yi = pad_tap(base[0] - 1 + i, h)
        taps = [pixel([yi, pad_tap(base[1] - 1 + j, w)]) for j in range(4)]
        rows.append(taps[0] * wx[0] + taps[1] * wx[1] + taps[2] * wx[2] + taps[3] * wx[3])
    return (rows[0] * wy[0] + rows[1] * wy[1] + rows[2] * wy[2] + rows[3] * wy[3]).astype(x.dtype)


def _infer_grid_sample(call, ctx):
    data = tensor_arg(call, 0, ctx, "data")
    grid = tensor_arg(call, 1, ctx, "grid")
    a = attrs_of(call)
    canonical = "NCDHW" if a["layout"] == "NCDHW" else "NCHW"
    if a["layout"] != canonical:
        raise err(call, f"grid_sample supports layout NCHW or NCDHW (as TVM's kernel), got "
                        f"{a['layout']!r}")
    r = len(canonical) - 2
    if a["method"] == "bicubic" and r == 3:
        raise err(call, "grid_sample: bicubic sampling is 2-D only (TVM)")
    for sinfo, what in ((data, "data"), (grid, "grid")):
        if sinfo.ndim not in (-1, r + 2):
            raise err(call, f"grid_sample expects a {r + 2}-D {what} tensor for layout "
                            f"{canonical}, but it has ndim {sinfo.ndim}")
        if sinfo.dtype != "void" and not sinfo.dtype.startswith("float"):
            raise err(call, f"grid_sample computes in floating point, but the {what} is "
                            f"{sinfo.dtype}")
    if data.shape is None or grid.shape is None:
        return TensorStructInfo(None, data.dtype, r + 2)
    k = arith.const_int(grid.shape[1])
    if k is not None and k != r:
        raise err(call, f"grid_sample expects the grid's dimension 1 to hold {r} coordinates, "
                        f"but it is {k}")
    return tensor_sinfo((data.shape[0], data.shape[1], *grid.shape[2:]), data.dtype)


define("image.grid_sample", ("data", "grid"), _infer_grid_sample,
       attrs={"method": ("bilinear", one_of("bilinear", "nearest", "bicubic")),
              "layout": ("NCHW", as_str),
              "padding_mode": ("zeros", one_of("zeros", "border", "reflection")),
              "align_corners": (False, as_bool)},
       reference=_grid_sample_ref, pattern=OpPattern.OPAQUE,
       doc="Sample data at the grid's normalized coordinates (PyTorch's grid_sample); taps "
           "outside the input are padding, never read.")


def _reflect_te(c, size, align, dt):
    """TVM's reflection of coordinate ``c`` about the edges of a dim of ``size``."""
    i64 = "int64"
    span_i = BinaryOp("-", size, IntImm(1, i64)) if align else size
    span = Cast(dt, span_i)
    corner = _const(0.0 if align else -0.5, dt)
    dist = te.call("fabs", BinaryOp("-", corner, c))
    safe_span = BinaryOp("max", span_i, IntImm(1, i64))
    times = BinaryOp("//", Cast(i64, dist), safe_span)
    extra = BinaryOp("-", dist, BinaryOp("*", Cast(dt, times), span))
    even = BinaryOp("==", BinaryOp("%", times, IntImm(2, i64)), IntImm(0, i64))
    refl = Select(even, BinaryOp("+", extra, corner),
                  BinaryOp("+", BinaryOp("-", span, extra), corner))
    inside = BinaryOp("and", BinaryOp(">=", c, corner),
                      BinaryOp("<=", c, BinaryOp("+", span, corner)))
    out = Select(inside, c, refl)
    return Select(BinaryOp("==", span_i, IntImm(0, i64)), _const(0.0, dt), out)


def _clip_te(c, size, dt):
    return BinaryOp("min", BinaryOp("max", c, _const(0.0, dt)),
                    Cast(dt, BinaryOp("-", size, IntImm(1, "int64"))))


@legalizes("image.grid_sample")
def _grid_sample_te(call, inputs):
    x, g = _tensor(inputs, 0, call), _tensor(inputs, 1, call)
    out = _out(call)
    a = attrs_of(call)
    r = x.ndim - 2
    ins = x.shape[2:]
    dt = x.dtype
    method, padding, align = a["method"], a["padding_mode"], a["align_corners"]
    i64 = "int64"

    def f(v):
        return _const(v, dt)

    def body(n, c, *o):
        raw = []
        for k in range(r):
            gv = te.cast(g[(n, IntImm(r - 1 - k, i64), *o)], dt)
            # NaN, inf or beyond 2^24: far outside (the comparison is false for NaN)
            finite = BinaryOp("and", BinaryOp(">", gv, f(-_FAR)), BinaryOp("<", gv, f(_FAR)))
            gv = Select(finite, gv, f(-_FAR))
            size = Cast(dt, ins[k])
            if align:
                cc = BinaryOp("/", BinaryOp("*", BinaryOp("+", gv, f(1.0)),
                                            BinaryOp("-", size, f(1.0))), f(2.0))
            else:
                cc = BinaryOp("+", f(-0.5), BinaryOp("/", BinaryOp("*", BinaryOp("+", gv, f(1.0)),
                                                                  size), f(2.0)))
            raw.append(cc)
        cs = []
        for k, cc in enumerate(raw):
            if padding == "reflection":
                cc = _reflect_te(cc, ins[k], align, dt)
            if padding in ("reflection", "border"):
                cc = _clip_te(cc, ins[k], dt)
            cs.append(cc)

        def pixel(idx):
            ok = None
            for k, i in enumerate(idx):
                cond = BinaryOp("and", BinaryOp(">=", i, IntImm(0, i64)), BinaryOp("<", i, ins[k]))
                ok = cond if ok is None else BinaryOp("and", ok, cond)
            safe = tuple(_clamp(i, ins[k]) for k, i in enumerate(idx))
            return Select(ok, x[(n, c, *safe)], f(0.0))

        if method == "nearest":
            return pixel([Cast(i64, te.call("round", cc)) for cc in cs])
        src = raw if method == "bicubic" else cs
        floors = [te.call("floor", cc) for cc in src]
        fr = [BinaryOp("-", cc, fl) for cc, fl in zip(src, floors)]
        base = [Cast(i64, fl) for fl in floors]
        if method == "bilinear":
            total = None
            for corner in np.ndindex(*(2,) * r):
                v = pixel([BinaryOp("+", b, IntImm(k, i64)) for b, k in zip(base, corner)])
                for k, bit in enumerate(corner):
                    v = BinaryOp("*", v, fr[k] if bit else BinaryOp("-", f(1.0), fr[k]))
                total = v if total is None else BinaryOp("+", total, v)
            return total

        def cubic(t):
            a_ = f(-0.75)

            def w1(z):
                return BinaryOp("+", BinaryOp("*", BinaryOp("*", BinaryOp(
                    "-", BinaryOp("*", BinaryOp("+", a_, f(2.0)), z),
                    BinaryOp("+", a_, f(3.0))), z), z), f(1.0))

            def w2(z):
                inner = BinaryOp("+", BinaryOp("*", BinaryOp("-", BinaryOp("*", a_, z),
                                                             BinaryOp("*", f(5.0), a_)), z),
                                 BinaryOp("*", f(8.0), a_))
                return BinaryOp("-", BinaryOp("*", inner, z), BinaryOp("*", f(4.0), a_))
            return [w2(BinaryOp("+", t, f(1.0))), w1(t), w1(BinaryOp("-", f(1.0), t)),
                    w2(BinaryOp("-", f(2.0), t))]

        def pad_tap(i, k):
            if padding == "border":
                return _clamp(i, ins[k])
            if padding == "reflection":
                return Cast(i64, _clip_te(_reflect_te(Cast(dt, i), ins[k], align, dt), ins[k], dt))
            return i
        wy, wx = cubic(fr[0]), cubic(fr[1])
        rows = []
        for i in range(4):
            yi = pad_tap(BinaryOp("+", base[0], IntImm(i - 1, i64)), 0)
            row = None
            for j in range(4):
                xj = pad_tap(BinaryOp("+", base[1], IntImm(j - 1, i64)), 1)
                v = BinaryOp("*", pixel([yi, xj]), wx[j])
                row = v if row is None else BinaryOp("+", row, v)
            rows.append(row)
        total = None
        for i in range(4):
            v = BinaryOp("*", rows[i], wy[i])
            total = v if total is None else BinaryOp("+", total, v)
        return total
    return te.compute(out.shape, body, name="T_grid_sample")


def _draw_grid_sample(ctx):
    n, _, h, w = ctx.shape
    oh, ow = ctx.integers(1, 4), ctx.integers(1, 4)
    grid = ctx.const((n, 2, oh, ow), -1.2, 1.2)
    method = ctx.choose(["bilinear", "nearest", "bicubic"])
    if method == "bicubic":  # the kernel overshoots the data
        span = ctx.hi - ctx.lo
        ctx.include(ctx.lo - 2 * span, ctx.hi + 2 * span)
    ctx.include(0.0, 0.0)  # zero padding
    return (ctx.x, grid), {"method": method,
                           "padding_mode": ctx.choose(["zeros", "border", "reflection"]),
                           "align_corners": ctx.choose([True, False])}


declares_draw("image.grid_sample", ranks=(4,), build=_draw_grid_sample)

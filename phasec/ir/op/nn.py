"""Neural-network operators: softmax, normalizations, 2-D pooling (the
convolutions are in :mod:`.nn_conv`).

Layouts: only NCHW pooling is supported here (others are a StructInfoError).
Padding is normalized to 4 integers (top, left, bottom,
right). Output sizes (per spatial dim, kernel k, stride s, dilation d, padding
p0/p1)::

    out = (in + p0 + p1 - d * (k - 1) - 1) // s + 1            # pools
    out = (in + p0 + p1 - d * (k - 1) - 1 + s - 1) // s + 1    # pools, ceil_mode

Pool semantics: ``max_pool2d`` ignores padding (padded positions are -inf for
floats, the minimum for integers); ``avg_pool2d`` divides the sum of the valid
taps by the number of taps inside the input (``count_include_pad=False``) or
inside the padded input ``[-p0, in + p1)`` (``count_include_pad=True``), at
least 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import arith, te, tir
from ..expr import Call
from ..struct_info import TensorStructInfo
from ..te import Tensor
from ..tir import BinaryOp, Cast, PrimExpr, Select
from ._common import (
    OpPattern, REQUIRED, as_bool, as_float, as_int, as_str, define,
    err, int_tuple, norm_axes, norm_axis, padding4, pair, tensor_arg, tensor_sinfo,
)
from ._lowering import (
    Inputs, _clamp, _const, _count, _float, _i64, _norm_axis, _out, _prod, _reduction, _tensor,
    legalizes,
)
from .elementwise import _float_unary  # the float-dtype check

__all__: list[str] = []


def _attrs(call):
    from ._common import attrs_of
    return attrs_of(call)


# ---------------------------------------------------------------------------
# softmax / log_softmax
# ---------------------------------------------------------------------------

def _infer_softmax(call, ctx):
    x = _float_unary(call, ctx)
    if x.ndim != -1:
        if x.ndim == 0:
            raise err(call, "softmax needs a tensor with at least one dimension")
        norm_axis(call, _attrs(call)["axis"], x.ndim)
    return x


def _softmax_ref(x, axis=-1):
    x = np.asarray(x)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return (e / np.sum(e, axis=axis, keepdims=True)).astype(x.dtype)


def _log_softmax_ref(x, axis=-1):
    x = np.asarray(x)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return (shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))).astype(x.dtype)


for _opname, _ref in (("nn.softmax", _softmax_ref), ("nn.log_softmax", _log_softmax_ref)):
    define(_opname, ("data",), _infer_softmax, attrs={"axis": (-1, as_int)}, reference=_ref,
           pattern=OpPattern.OPAQUE,
           doc=f"{_opname.removeprefix('nn.')} along ``axis`` (numerically stable).")


# ---------------------------------------------------------------------------
# layer_norm / rms_norm
# ---------------------------------------------------------------------------

def _check_norm_param(call, x: TensorStructInfo, axes: list[int], idx: int, what: str) -> None:
    p = tensor_arg(call, idx, None, what)
    names = (call.args[0], call.args[idx])
    if x.dtype != "void" and p.dtype != "void" and x.dtype != p.dtype:
        from ..infer import expr_to_str
        raise err(call, f"{what} {expr_to_str(names[1])} has dtype {p.dtype} but the input "
                        f"{expr_to_str(names[0])} has dtype {x.dtype}")
    if p.ndim != -1 and p.ndim != len(axes):
        raise err(call, f"{what} must have one dimension per normalized axis "
                        f"({len(axes)}), but it has ndim {p.ndim}")
    if p.shape is not None and x.shape is not None:
        for pd, a in zip(p.shape, axes):
            if arith.prove_not_equal(pd, x.shape[a]):
                from ..infer import prim_expr_to_str
                raise err(call, f"{what} dimension {prim_expr_to_str(pd)} does not match input "
                                f"dimension {prim_expr_to_str(x.shape[a])} on axis {a}")


def _infer_layer_norm(call, ctx):
    x = _float_unary(call, ctx)
    for i in (1, 2):
        tensor_arg(call, i, ctx)
    attrs = _attrs(call)
    if x.ndim != -1:
        axes = norm_axes(call, attrs["axes"], x.ndim, "axes")
        _check_norm_param(call, x, axes, 1, "gamma")
        _check_norm_param(call, x, axes, 2, "beta")
    return x


def _layer_norm_ref(x, gamma, beta, axes, epsilon=1e-5, center=True, scale=True):
    x = np.asarray(x)
    axes = tuple(a % x.ndim for a in axes)
    mean = np.mean(x, axis=axes, keepdims=True)
    var = np.mean(np.square(x - mean), axis=axes, keepdims=True)
    out = (x - mean) / np.sqrt(var + np.asarray(epsilon, x.dtype))
    bshape = [x.shape[i] if i in axes else 1 for i in range(x.ndim)]
    if scale:
        out = out * np.asarray(gamma).reshape(bshape)
    if center:
        out = out + np.asarray(beta).reshape(bshape)
    return out.astype(x.dtype)


define("nn.layer_norm", ("data", "gamma", "beta"), _infer_layer_norm,
       attrs={"axes": (REQUIRED, int_tuple), "epsilon": (1e-5, as_float),
              "center": (True, as_bool), "scale": (True, as_bool)},
       reference=_layer_norm_ref, pattern=OpPattern.OPAQUE,
       doc="(x - mean) / sqrt(var + epsilon) * gamma + beta over ``axes`` (population variance).")


def _infer_rms_norm(call, ctx):
    x = _float_unary(call, ctx)
    tensor_arg(call, 1, ctx)
    if x.ndim != -1:
        axes = norm_axes(call, _attrs(call)["axes"], x.ndim, "axes")
        _check_norm_param(call, x, axes, 1, "weight")
    return x


def _rms_norm_ref(x, weight, axes=(-1,), epsilon=1e-5):
    x = np.asarray(x)
    axes = tuple(a % x.ndim for a in axes)
    ms = np.mean(np.square(x), axis=axes, keepdims=True)
    bshape = [x.shape[i] if i in axes else 1 for i in range(x.ndim)]
    out = x / np.sqrt(ms + np.asarray(epsilon, x.dtype)) * np.asarray(weight).reshape(bshape)
    return out.astype(x.dtype)


define("nn.rms_norm", ("data", "weight"), _infer_rms_norm,
       attrs={"axes": ((-1,), int_tuple), "epsilon": (1e-5, as_float)},
       reference=_rms_norm_ref, pattern=OpPattern.OPAQUE,
       doc="x / sqrt(mean(x^2 over axes) + epsilon) * weight.")


# ---------------------------------------------------------------------------
# output sizes of 2-D windows (pooling)
# ---------------------------------------------------------------------------

def _spatial_out(in_dim, k, stride, dilation, pad0, pad1, ceil_mode=False):
    i64 = tir.IntImm
    num = tir.BinaryOp("-", tir.BinaryOp("+", in_dim, i64(pad0 + pad1)),
                       tir.BinaryOp("+", tir.BinaryOp("*", i64(dilation),
                                                      tir.BinaryOp("-", k, i64(1))), i64(1)))
    if ceil_mode:
        num = tir.BinaryOp("+", num, i64(stride - 1))
    return arith.simplify(tir.BinaryOp("+", tir.BinaryOp("//", num, i64(stride)), i64(1)))


def _check_positive(call, name, values):
    if any(v <= 0 for v in values):
        raise err(call, f"{name} must be positive, got {tuple(values)}")


def _check_spatial_out(call, dims):
    for d in dims:
        v = arith.const_int(d)
        if v is not None and v <= 0:
            raise err(call, "the output spatial size would be non-positive "
                            f"({v}); the window is larger than the padded input")


# ---------------------------------------------------------------------------
# pooling
# ---------------------------------------------------------------------------

def _infer_pool(call, ctx):
    data = tensor_arg(call, 0, ctx, "data")
    a = _attrs(call)
    for key in ("layout", "out_layout"):
        if a[key] != "NCHW":
            raise err(call, f"{key} {a[key]!r} is not supported; phasec supports only NCHW pooling")
    _check_positive(call, "pool_size", a["pool_size"])
    _check_positive(call, "strides", a["strides"])
    _check_positive(call, "dilation", a["dilation"])
    if any(p < 0 for p in a["padding"]):
        raise err(call, f"padding must be non-negative, got {a['padding']}")
    if data.ndim not in (-1, 4):
        raise err(call, f"pooling expects a 4-D NCHW tensor, but the data has ndim {data.ndim}")
    if data.shape is None:
        return TensorStructInfo(None, data.dtype, 4)
    n, c, h, w = data.shape
    pt, pl, pb, pr = a["padding"]
    (kh, kw), (sh, sw), (dh, dw) = a["pool_size"], a["strides"], a["dilation"]
    oh = _spatial_out(h, tir.IntImm(kh), sh, dh, pt, pb, a["ceil_mode"])
    ow = _spatial_out(w, tir.IntImm(kw), sw, dw, pl, pr, a["ceil_mode"])
    _check_spatial_out(call, (oh, ow))
    return tensor_sinfo((n, c, oh, ow), data.dtype)


def _pool_out_size(size, k, s, d, p0, p1, ceil_mode):
    num = size + p0 + p1 - d * (k - 1) - 1
    if ceil_mode:
        num += s - 1
    return num // s + 1


def _pool_taps(data, pool_size, strides, padding, dilation, ceil_mode):
    """Yield (tap values, valid mask, in-padded-input mask) for every window tap."""
    n, c, h, w = data.shape
    (kh, kw), (sh, sw), (dh, dw) = pool_size, strides, dilation
    pt, pl, pb, pr = padding
    oh = _pool_out_size(h, kh, sh, dh, pt, pb, ceil_mode)
    ow = _pool_out_size(w, kw, sw, dw, pl, pr, ceil_mode)
    rows0 = np.arange(oh) * sh - pt
    cols0 = np.arange(ow) * sw - pl
    for p in range(kh):
        rows = rows0 + p * dh
        for q in range(kw):
            cols = cols0 + q * dw
            valid = ((rows >= 0) & (rows < h))[:, None] & ((cols >= 0) & (cols < w))[None, :]
            padded = ((rows >= -pt) & (rows < h + pb))[:, None] & \
                     ((cols >= -pl) & (cols < w + pr))[None, :]
            r = np.clip(rows, 0, h - 1)
            cc = np.clip(cols, 0, w - 1)
            yield data[:, :, r[:, None], cc[None, :]], valid, padded, (n, c, oh, ow)


def _max_pool2d_ref(data, pool_size=(1, 1), strides=(1, 1), padding=(0, 0, 0, 0),
                    dilation=(1, 1), ceil_mode=False, count_include_pad=False,
                    layout="NCHW", out_layout="NCHW"):
    data = np.asarray(data)
    low = -np.inf if data.dtype.kind == "f" else np.iinfo(data.dtype).min
    out = None
    for vals, valid, _, shape in _pool_taps(data, pool_size, strides, padding, dilation, ceil_mode):
        vals = np.where(valid, vals, np.asarray(low, data.dtype))
        out = vals if out is None else np.maximum(out, vals)
    return out.astype(data.dtype)


def _avg_pool2d_ref(data, pool_size=(1, 1), strides=(1, 1), padding=(0, 0, 0, 0),
                    dilation=(1, 1), ceil_mode=False, count_include_pad=False,
                    layout="NCHW", out_layout="NCHW"):
    data = np.asarray(data)
    acc_dtype = np.float64 if data.dtype.kind == "f" else np.int64
    total = count = None
    for vals, valid, padded, shape in _pool_taps(data, pool_size, strides, padding, dilation,
                                                 ceil_mode):
        vals = np.where(valid, vals.astype(acc_dtype), 0)
        counted = (padded if count_include_pad else valid).astype(np.int64)
        total = vals if total is None else total + vals
        count = counted if count is None else count + counted
    count = np.maximum(count, 1)
    if data.dtype.kind == "f":
        return (total / count).astype(data.dtype)
    return (total // count).astype(data.dtype)


_POOL_ATTRS = {"pool_size": ((1, 1), pair), "strides": ((1, 1), pair),
               "padding": ((0, 0, 0, 0), padding4), "dilation": ((1, 1), pair),
               "ceil_mode": (False, as_bool), "count_include_pad": (False, as_bool),
               "layout": ("NCHW", as_str), "out_layout": ("NCHW", as_str)}

define("nn.max_pool2d", ("data",), _infer_pool, attrs=_POOL_ATTRS, reference=_max_pool2d_ref,
       pattern=OpPattern.OUT_ELEMWISE_FUSABLE, doc="2-D max pooling (NCHW).")
define("nn.avg_pool2d", ("data",), _infer_pool, attrs=_POOL_ATTRS, reference=_avg_pool2d_ref,
       pattern=OpPattern.OUT_ELEMWISE_FUSABLE, doc="2-D average pooling (NCHW).")


# ---------------------------------------------------------------------------
# Legalization
# ---------------------------------------------------------------------------

def _drop(i: Sequence[PrimExpr], axes: Sequence[int]) -> tuple[PrimExpr, ...]:
    return tuple(v for d, v in enumerate(i) if d not in axes)


def _softmax_parts(x: Tensor, ax: int, prefix: str) -> tuple[Tensor, Tensor, Tensor]:
    red_shape = _drop(x.shape, [ax])
    mx = _reduction(x, [ax], False, red_shape, te.max, prefix + "_maxelem")
    shifted = te.compute(x.shape, lambda *i: BinaryOp("-", x[i], mx[_drop(i, [ax])]),
                         name=prefix + "_shifted")
    s = _reduction(shifted, [ax], False, red_shape, te.sum, prefix + "_expsum",
                   lambda v: te.call("exp", v))
    return mx, shifted, s


@legalizes("nn.softmax")
def _softmax(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    ax = _norm_axis(_attrs(call)["axis"], x.ndim)
    if ax != x.ndim - 1 or x.ndim < 2:
        _, shifted, s = _softmax_parts(x, ax, "T_softmax")
        return te.compute(x.shape, lambda *i: BinaryOp("/", te.call("exp", shifted[i]),
                                                       s[_drop(i, [ax])]), name="T_softmax")
    # Softmax over rows: exp(x - max) is computed once per element, into a
    # row buffer that both the sum and the division read (te.ROW_LOCAL),
    # instead of once in each.
    red_shape = _drop(x.shape, [ax])
    mx = _reduction(x, [ax], False, red_shape, te.max, "T_softmax_maxelem")
    e = te.compute(x.shape, lambda *i: te.call("exp", BinaryOp("-", x[i], mx[_drop(i, [ax])])),
                   name="T_softmax_exp", attrs={te.ROW_LOCAL: True})
    s = _reduction(e, [ax], False, red_shape, te.sum, "T_softmax_expsum")
    return te.compute(x.shape, lambda *i: BinaryOp("/", e[i], s[_drop(i, [ax])]),
                      name="T_softmax")


@legalizes("nn.log_softmax")
def _log_softmax(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    ax = _norm_axis(_attrs(call)["axis"], x.ndim)
    _, shifted, s = _softmax_parts(x, ax, "T_log_softmax")
    return te.compute(x.shape, lambda *i: BinaryOp("-", shifted[i],
                                                   te.call("log", s[_drop(i, [ax])])),
                      name="T_log_softmax")


def _param_index(i: Sequence[PrimExpr], axes: Sequence[int]) -> tuple[PrimExpr, ...]:
    return tuple(i[a] for a in axes)


def _mean_over(x: Tensor, axes: list[int], name: str,
               value: Callable[[PrimExpr], PrimExpr] = lambda v: v) -> Tensor:
    red_shape = _drop(x.shape, axes)
    s = _reduction(x, axes, False, red_shape, te.sum, name + "_sum", value)
    count = _count(_prod([x.shape[a] for a in axes]), x.dtype)
    return te.compute(red_shape, lambda *i: BinaryOp("/", s[i], count), name=name)


@legalizes("nn.layer_norm")
def _layer_norm(call: Call, inputs: Inputs) -> Tensor:
    x, gamma, beta = (_tensor(inputs, k, call) for k in range(3))
    a = _attrs(call)
    axes = sorted(_norm_axis(v, x.ndim) for v in a["axes"])
    dt = x.dtype
    eps = _const(a["epsilon"], dt)
    mean = _mean_over(x, axes, "T_layer_norm_mean")
    diff = te.compute(x.shape, lambda *i: BinaryOp("-", x[i], mean[_drop(i, axes)]),
                      name="T_layer_norm_diff")
    var = _mean_over(diff, axes, "T_layer_norm_var", lambda v: BinaryOp("*", v, v))

    def body(*i: PrimExpr) -> PrimExpr:
        v = BinaryOp("/", diff[i], te.call("sqrt", BinaryOp("+", var[_drop(i, axes)], eps)))
        if a["scale"]:
            v = BinaryOp("*", v, gamma[_param_index(i, axes)])
        if a["center"]:
            v = BinaryOp("+", v, beta[_param_index(i, axes)])
        return v
    return te.compute(x.shape, body, name="T_layer_norm")


@legalizes("nn.rms_norm")
def _rms_norm(call: Call, inputs: Inputs) -> Tensor:
    x, weight = _tensor(inputs, 0, call), _tensor(inputs, 1, call)
    a = _attrs(call)
    axes = sorted(_norm_axis(v, x.ndim) for v in a["axes"])
    eps = _const(a["epsilon"], x.dtype)
    ms = _mean_over(x, axes, "T_rms_norm_ms", lambda v: BinaryOp("*", v, v))
    return te.compute(x.shape, lambda *i: BinaryOp(
        "*", BinaryOp("/", x[i], te.call("sqrt", BinaryOp("+", ms[_drop(i, axes)], eps))),
        weight[_param_index(i, axes)]), name="T_rms_norm")


def _pool_window(call: Call, x: Tensor):
    a = _attrs(call)
    (kh, kw), (sh, sw), (dh, dw) = a["pool_size"], a["strides"], a["dilation"]
    pt, pl, pb, pr = a["padding"]
    ry = te.reduce_axis(kh, "ry")
    rx = te.reduce_axis(kw, "rx")
    h, w = x.shape[2], x.shape[3]

    def coords(y: PrimExpr, xx: PrimExpr) -> tuple[PrimExpr, PrimExpr]:
        row = BinaryOp("+", BinaryOp("-", BinaryOp("*", y, _i64(sh)), _i64(pt)),
                       BinaryOp("*", ry.var, _i64(dh)))
        col = BinaryOp("+", BinaryOp("-", BinaryOp("*", xx, _i64(sw)), _i64(pl)),
                       BinaryOp("*", rx.var, _i64(dw)))
        return row, col

    def inside(row: PrimExpr, col: PrimExpr, lo_h: int, hi_h: PrimExpr, lo_w: int,
               hi_w: PrimExpr) -> PrimExpr:
        return BinaryOp("and",
                        BinaryOp("and", BinaryOp(">=", row, _i64(lo_h)), BinaryOp("<", row, hi_h)),
                        BinaryOp("and", BinaryOp(">=", col, _i64(lo_w)), BinaryOp("<", col, hi_w)))
    return a, ry, rx, h, w, coords, inside, (pt, pl, pb, pr)


@legalizes("nn.max_pool2d")
def _max_pool2d(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    a, ry, rx, h, w, coords, inside, _ = _pool_window(call, x)
    low = te.min_value(x.dtype)

    def body(n: PrimExpr, c: PrimExpr, y: PrimExpr, xx: PrimExpr) -> Any:
        row, col = coords(y, xx)
        v = Select(inside(row, col, 0, h, 0, w), x[n, c, _clamp(row, h), _clamp(col, w)], low)
        return te.max(v, axis=[ry, rx])
    return te.compute(out.shape, body, name="T_max_pool2d")


@legalizes("nn.avg_pool2d")
def _avg_pool2d(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    a, ry, rx, h, w, coords, inside, (pt, pl, pb, pr) = _pool_window(call, x)
    dt = x.dtype
    acc = dt if _float(dt) else "int64"

    def total(n: PrimExpr, c: PrimExpr, y: PrimExpr, xx: PrimExpr) -> Any:
        row, col = coords(y, xx)
        v = Select(inside(row, col, 0, h, 0, w),
                   te.cast(x[n, c, _clamp(row, h), _clamp(col, w)], acc), _const(0, acc))
        return te.sum(v, axis=[ry, rx])
    s = te.compute(out.shape, total, name="T_avg_pool2d_sum")
    ry2 = te.reduce_axis(ry.extent, "ry")
    rx2 = te.reduce_axis(rx.extent, "rx")

    def count(n: PrimExpr, c: PrimExpr, y: PrimExpr, xx: PrimExpr) -> Any:
        row = BinaryOp("+", BinaryOp("-", BinaryOp("*", y, _i64(a["strides"][0])), _i64(pt)),
                       BinaryOp("*", ry2.var, _i64(a["dilation"][0])))
        col = BinaryOp("+", BinaryOp("-", BinaryOp("*", xx, _i64(a["strides"][1])), _i64(pl)),
                       BinaryOp("*", rx2.var, _i64(a["dilation"][1])))
        if a["count_include_pad"]:
            cond = inside(row, col, -pt, arith.simplify(h + _i64(pb)), -pl,
                          arith.simplify(w + _i64(pr)))
        else:
            cond = inside(row, col, 0, h, 0, w)
        return te.sum(Select(cond, _i64(1), _i64(0)), axis=[ry2, rx2])
    cnt = te.compute(out.shape, count, name="T_avg_pool2d_count")

    def body(*i: PrimExpr) -> PrimExpr:
        c = BinaryOp("max", cnt[i], _i64(1))
        if _float(dt):
            return BinaryOp("/", s[i], Cast(dt, c))
        return te.cast(BinaryOp("//", s[i], c), dt)
    return te.compute(out.shape, body, name="T_avg_pool2d")

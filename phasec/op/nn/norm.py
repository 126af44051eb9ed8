"""Normalizations (TVM 0.27's ``relax.nn``): layer_norm, rms_norm, batch_norm,
group_norm, instance_norm; and dropout.

* ``nn.layer_norm(data, gamma, beta, axes, epsilon, center, scale)``:
  ``(x - mean) / sqrt(var + epsilon) * gamma + beta`` over ``axes``
  (population variance); ``gamma``/``beta`` have one entry per normalized
  element.
* ``nn.rms_norm(data, weight, axes=(-1,), epsilon)``: ``x / sqrt(mean(x^2
  over axes) + epsilon) * weight``.
* ``nn.batch_norm(data, gamma, beta, moving_mean, moving_var, axis, epsilon,
  center, scale, momentum, training)`` returns the tuple TVM returns:
  ``(out, new_moving_mean, new_moving_var)``. With ``training=True`` (TVM's
  default) the statistics are the batch's, over every axis but ``axis``
  (population variance), and the moving statistics are updated to
  ``(1 - momentum) * moving + momentum * batch``; with ``training=False`` the
  moving statistics normalize and are returned unchanged.
* ``nn.group_norm(data, gamma, beta, num_groups, channel_axis, axes, ...)``:
  the channel axis is split into ``num_groups`` contiguous groups; each
  group is normalized over its channels and ``axes``, then scaled by
  ``gamma[c]`` and shifted by ``beta[c]``.
* ``nn.instance_norm(data, gamma, beta, channel_axis, axes, ...)``: each
  channel normalized over ``axes`` (group_norm with one channel per group).
* ``nn.dropout(data, rate)`` returns ``(data, mask)``; phasec compiles for
  inference, where dropout is the identity and the mask all ones (as TVM's
  legalization).

``center``/``scale`` switch the ``beta`` shift / ``gamma`` scale off for
layer_norm, batch_norm, group_norm and instance_norm (TVM 0.27's legalization
of group_norm and instance_norm ignores the two flags and always applies
both; phasec follows the attributes' documented meaning).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from phasec import arith
from phasec import te
from phasec.ir.expr import Call
from phasec.ir.struct_info import TensorStructInfo, TupleStructInfo
from phasec.ir.tir import BinaryOp, PrimExpr
from phasec.op._common import (
    REQUIRED, OpPattern, as_bool, as_float, as_int, attrs_of, define, err, int_tuple, norm_axes,
    norm_axis, tensor_arg,
)
from phasec.op._lowering import (
    Inputs, _const, _count, _name, _norm_axis, _out, _prod, _reduction, _tensor, legalizes,
)
from phasec.op.draw import FLOAT, Hooks, const_dim, declares_draw
from phasec.ir.text import expr_to_str, prim_expr_to_str
from phasec.op.unary import float_unary
from phasec.te import Tensor
from phasec.op.calls import call_op

__all__: list[str] = []


# ---------------------------------------------------------------------------
# layer_norm / rms_norm
# ---------------------------------------------------------------------------

def _check_norm_param(call, x: TensorStructInfo, axes: list[int], idx: int, what: str) -> None:
    p = tensor_arg(call, idx, None, what)
    names = (call.args[0], call.args[idx])
    if x.dtype != "void" and p.dtype != "void" and x.dtype != p.dtype:
        raise err(call, f"{what} {expr_to_str(names[1])} has dtype {p.dtype} but the input "
                        f"{expr_to_str(names[0])} has dtype {x.dtype}")
    if p.ndim != -1 and p.ndim != len(axes):
        raise err(call, f"{what} must have one dimension per normalized axis "
                        f"({len(axes)}), but it has ndim {p.ndim}")
    if p.shape is not None and x.shape is not None:
        for pd, a in zip(p.shape, axes):
            if arith.prove_not_equal(pd, x.shape[a]):
                raise err(call, f"{what} dimension {prim_expr_to_str(pd)} does not match input "
                                f"dimension {prim_expr_to_str(x.shape[a])} on axis {a}")


def _infer_layer_norm(call, ctx):
    x = float_unary(call, ctx)
    for i in (1, 2):
        tensor_arg(call, i, ctx)
    attrs = attrs_of(call)
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
    x = float_unary(call, ctx)
    tensor_arg(call, 1, ctx)
    if x.ndim != -1:
        axes = norm_axes(call, attrs_of(call)["axes"], x.ndim, "axes")
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
# layer_norm / rms_norm: legalization
# ---------------------------------------------------------------------------

def _drop(i: Sequence[PrimExpr], axes: Sequence[int]) -> tuple[PrimExpr, ...]:
    return tuple(v for d, v in enumerate(i) if d not in axes)


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
    a = attrs_of(call)
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
    a = attrs_of(call)
    axes = sorted(_norm_axis(v, x.ndim) for v in a["axes"])
    eps = _const(a["epsilon"], x.dtype)
    ms = _mean_over(x, axes, "T_rms_norm_ms", lambda v: BinaryOp("*", v, v))
    return te.compute(x.shape, lambda *i: BinaryOp(
        "*", BinaryOp("/", x[i], te.call("sqrt", BinaryOp("+", ms[_drop(i, axes)], eps))),
        weight[_param_index(i, axes)]), name="T_rms_norm")


# ---------------------------------------------------------------------------
# Shared by batch_norm, group_norm and instance_norm
# ---------------------------------------------------------------------------

def _float_data(call, ctx, what: str) -> TensorStructInfo:
    data = tensor_arg(call, 0, ctx, "data")
    if data.dtype != "void" and not data.dtype.startswith("float"):
        raise err(call, f"{what} requires float data, but {expr_to_str(call.args[0])} has "
                        f"dtype {data.dtype}")
    return data


def _params(call, ctx, data: TensorStructInfo, names: Sequence[str]) -> list[TensorStructInfo]:
    """The 1-D parameter operands (gamma, beta, ...): same dtype as the data."""
    out = []
    for k, what in enumerate(names, start=1):
        p = tensor_arg(call, k, ctx, what)
        if p.dtype != data.dtype:
            raise err(call, f"{what} {expr_to_str(call.args[k])} has dtype {p.dtype} but the data "
                            f"has dtype {data.dtype}; every operand needs the same dtype")
        if p.ndim not in (-1, 1):
            raise err(call, f"{what} must be 1-D (one value per channel), but it has ndim {p.ndim}")
        out.append(p)
    return out


def _channel_lengths_agree(call, data: TensorStructInfo, axis: int | None,
                           params: Sequence[TensorStructInfo], names: Sequence[str]) -> bool:
    """Check the parameters' lengths against the channel dim (and each other).

    A provable mismatch is an error; True when every length is provably equal
    (TVM then keeps the operands' shapes in the result).
    """
    lengths: list[tuple[str, PrimExpr]] = []
    if data.shape is not None and axis is not None:
        lengths.append((f"the data's axis {axis}", data.shape[axis]))
    lengths += [(n, p.shape[0]) for n, p in zip(names, params) if p.shape is not None]
    known = True
    for what, d in lengths[1:]:
        if arith.prove_not_equal(lengths[0][1], d):
            raise err(call, f"{what} has length {prim_expr_to_str(d)} but {lengths[0][0]} has "
                            f"length {prim_expr_to_str(lengths[0][1])}")
        if not arith.prove_equal(lengths[0][1], d):
            known = False
    return known


# ---------------------------------------------------------------------------
# Statistics in TE: mean and variance of groups of elements
# ---------------------------------------------------------------------------

def _group_stats(x: te.Tensor, reduce_axes: Sequence[int], channel: int | None, groups: int,
                 eps: float, prefix: str):
    """Per-group mean and 1/sqrt(var + eps) of ``x``.

    The statistics are indexed by the dims of ``x`` outside ``reduce_axes``;
    with ``channel`` set, that dim is split into ``groups`` contiguous groups
    of channels and the statistics are indexed by the group instead. Returns
    ``(mean, inv_std, stat_index)`` where ``stat_index(i)`` maps a full index
    of ``x`` to the statistics' index.
    """
    dt = x.dtype
    kept = [d for d in range(x.ndim) if d not in reduce_axes]
    cg = None
    if channel is not None:
        cg = arith.simplify(BinaryOp("//", x.shape[channel], _const(groups, "int64")))
    stat_shape = tuple(_const(groups, "int64") if d == channel else x.shape[d] for d in kept)

    def stat_index(i: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]:
        return tuple(BinaryOp("//", i[d], cg) if d == channel else i[d] for d in kept)

    def reduction(value, name):
        raxes = {a: te.reduce_axis(x.shape[a], f"r{a}") for a in reduce_axes}
        rc = te.reduce_axis(cg, "rc") if channel is not None else None

        def body(*s):
            full = []
            pos = dict(zip(kept, s))
            for d in range(x.ndim):
                if d == channel:
                    full.append(BinaryOp("+", BinaryOp("*", pos[d], cg), rc.var))
                elif d in raxes:
                    full.append(raxes[d].var)
                else:
                    full.append(pos[d])
            return te.sum(value(tuple(full)), axis=list(raxes.values()) + ([rc] if rc else []))
        return te.compute(stat_shape, body, name=name)

    count_dims = [x.shape[a] for a in reduce_axes] + ([cg] if cg is not None else [])
    count = _count(_prod(count_dims), dt)
    total = reduction(lambda i: x[i], prefix + "_sum")
    mean = te.compute(stat_shape, lambda *s: BinaryOp("/", total[s], count), name=prefix + "_mean")

    def sq(i):
        d = BinaryOp("-", x[i], mean[stat_index(i)])
        return BinaryOp("*", d, d)
    sqsum = reduction(sq, prefix + "_sqsum")
    var = te.compute(stat_shape, lambda *s: BinaryOp("/", sqsum[s], count), name=prefix + "_var")
    inv_std = te.compute(stat_shape, lambda *s: BinaryOp(
        "/", _const(1, dt), te.call("sqrt", BinaryOp("+", var[s], _const(eps, dt)))),
        name=prefix + "_inv_std")
    return mean, var, inv_std, stat_index


def _affine(x, mean_of, inv_std_of, gamma, beta, channel: int, center: bool, scale: bool,
            shape, name):
    """(x - mean) * inv_std [* gamma[c]] [+ beta[c]] over ``shape``."""
    def body(*i):
        v = BinaryOp("*", BinaryOp("-", x[i], mean_of(i)), inv_std_of(i))
        if scale:
            v = BinaryOp("*", v, gamma[(i[channel],)])
        if center:
            v = BinaryOp("+", v, beta[(i[channel],)])
        return v
    return te.compute(shape, body, name=name)


# ---------------------------------------------------------------------------
# batch_norm
# ---------------------------------------------------------------------------

_BN_PARAMS = ("gamma", "beta", "moving_mean", "moving_var")


def _infer_batch_norm(call, ctx):
    data = _float_data(call, ctx, "batch_norm")
    params = _params(call, ctx, data, _BN_PARAMS)
    a = attrs_of(call)
    if not 0.0 <= a["momentum"] <= 1.0:
        raise err(call, f"momentum must be in [0, 1], got {a['momentum']}")
    if a["epsilon"] < 0:
        raise err(call, f"epsilon must be non-negative, got {a['epsilon']}")
    axis = norm_axis(call, a["axis"], data.ndim) if data.ndim != -1 else None
    if data.ndim == 0:
        raise err(call, "batch_norm needs a tensor with at least one dimension")
    if _channel_lengths_agree(call, data, axis, params, _BN_PARAMS):
        return TupleStructInfo([data, params[2], params[3]])
    vec = TensorStructInfo(None, data.dtype, 1)
    return TupleStructInfo([TensorStructInfo(None, data.dtype, data.ndim), vec, vec])


def _batch_norm_ref(data, gamma, beta, moving_mean, moving_var, axis=1, epsilon=1e-5,
                    center=True, scale=True, momentum=0.1, training=True):
    x = np.asarray(data)
    dt = x.dtype
    axis = axis % x.ndim
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    x64 = x.astype(np.float64)
    mm, mv = np.asarray(moving_mean, np.float64), np.asarray(moving_var, np.float64)
    if training:
        others = tuple(d for d in range(x.ndim) if d != axis)
        mean, var = x64.mean(axis=others), x64.var(axis=others)
    else:
        mean, var = mm, mv
    out = (x64 - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + epsilon)
    if scale:
        out = out * np.asarray(gamma, np.float64).reshape(shape)
    if center:
        out = out + np.asarray(beta, np.float64).reshape(shape)
    if training:
        mm = (1 - momentum) * mm + momentum * mean
        mv = (1 - momentum) * mv + momentum * var
    return out.astype(dt), mm.astype(dt), mv.astype(dt)


define("nn.batch_norm", ("data", "gamma", "beta", "moving_mean", "moving_var"),
       _infer_batch_norm,
       attrs={"axis": (REQUIRED, as_int), "epsilon": (1e-5, as_float), "center": (True, as_bool),
              "scale": (True, as_bool), "momentum": (0.1, as_float),
              "training": (True, as_bool)},
       reference=_batch_norm_ref, pattern=OpPattern.OPAQUE,
       doc="Batch normalization; returns (out, new moving mean, new moving var).")


@legalizes("nn.batch_norm")
def _batch_norm(call, inputs):
    x, gamma, beta, mm, mv = (_tensor(inputs, k, call) for k in range(5))
    a = attrs_of(call)
    out = _out(call, 0)
    dt = x.dtype
    axis = a["axis"] % x.ndim
    eps = _const(a["epsilon"], dt)
    if not a["training"]:
        def inv_std_of(i):
            return BinaryOp("/", _const(1, dt),
                            te.call("sqrt", BinaryOp("+", mv[(i[axis],)], eps)))
        y = _affine(x, lambda i: mm[(i[axis],)], inv_std_of, gamma, beta, axis,
                    a["center"], a["scale"], out.shape, "T_batch_norm")
        # the moving statistics pass through (copied into the result buffers)
        new_mm = te.compute(mm.shape, lambda c: mm[(c,)], name="T_batch_norm_mean")
        new_mv = te.compute(mv.shape, lambda c: mv[(c,)], name="T_batch_norm_var")
        return [y, new_mm, new_mv]
    others = [d for d in range(x.ndim) if d != axis]
    mean, var, inv_std, idx = _group_stats(x, others, None, 1, a["epsilon"], "T_batch_norm")
    y = _affine(x, lambda i: mean[idx(i)], lambda i: inv_std[idx(i)], gamma, beta, axis,
                a["center"], a["scale"], out.shape, "T_batch_norm")
    m = _const(a["momentum"], dt)
    keep = _const(1.0 - a["momentum"], dt)

    def update(moving, stat):
        return lambda c: BinaryOp("+", BinaryOp("*", keep, moving[(c,)]),
                                  BinaryOp("*", m, stat[(c,)]))
    new_mm = te.compute(mm.shape, update(mm, mean), name="T_batch_norm_mean")
    new_mv = te.compute(mv.shape, update(mv, var), name="T_batch_norm_var")
    return [y, new_mm, new_mv]


# ---------------------------------------------------------------------------
# group_norm, instance_norm
# ---------------------------------------------------------------------------

def _infer_grouped(call, ctx, what: str, num_groups: int | None):
    data = _float_data(call, ctx, what)
    params = _params(call, ctx, data, ("gamma", "beta"))
    a = attrs_of(call)
    if a["epsilon"] < 0:
        raise err(call, f"epsilon must be non-negative, got {a['epsilon']}")
    if num_groups is not None and num_groups <= 0:
        raise err(call, f"num_groups must be positive, got {num_groups}")
    if data.ndim == -1:
        return data
    ch = norm_axis(call, a["channel_axis"], data.ndim, "channel_axis")
    axes = norm_axes(call, a["axes"], data.ndim, "axes")
    if ch in axes:
        raise err(call, f"channel_axis {a['channel_axis']} must not be one of axes {a['axes']}")
    if num_groups is not None and data.shape is not None:
        c = arith.const_int(data.shape[ch])
        if c is not None and c % num_groups:
            raise err(call, f"the {c} channels (axis {ch}) are not divisible by "
                            f"num_groups={num_groups}")
    _channel_lengths_agree(call, data, ch, params, ("gamma", "beta"))
    return data


def _group_norm_ref(data, gamma, beta, num_groups, channel_axis, axes, epsilon=1e-5,
                    center=True, scale=True):
    x = np.asarray(data)
    ch = channel_axis % x.ndim
    axes = sorted(a % x.ndim for a in axes)
    c = x.shape[ch]
    grouped = x.astype(np.float64).reshape(
        x.shape[:ch] + (num_groups, c // num_groups) + x.shape[ch + 1:])
    red = (ch + 1,) + tuple(a + 1 if a > ch else a for a in axes)
    mean = grouped.mean(axis=red, keepdims=True)
    var = grouped.var(axis=red, keepdims=True)
    out = ((grouped - mean) / np.sqrt(var + epsilon)).reshape(x.shape)
    bshape = [1] * x.ndim
    bshape[ch] = c
    if scale:
        out = out * np.asarray(gamma, np.float64).reshape(bshape)
    if center:
        out = out + np.asarray(beta, np.float64).reshape(bshape)
    return out.astype(x.dtype)


def _instance_norm_ref(data, gamma, beta, channel_axis, axes, epsilon=1e-5, center=True,
                       scale=True):
    x = np.asarray(data)
    return _group_norm_ref(x, gamma, beta, x.shape[channel_axis % x.ndim], channel_axis, axes,
                           epsilon, center, scale)


_NORM_FLAGS = {"epsilon": (1e-5, as_float), "center": (True, as_bool), "scale": (True, as_bool)}

define("nn.group_norm", ("data", "gamma", "beta"),
       lambda call, ctx: _infer_grouped(call, ctx, "group_norm", attrs_of(call)["num_groups"]),
       attrs={"num_groups": (REQUIRED, as_int), "channel_axis": (REQUIRED, as_int),
              "axes": (REQUIRED, int_tuple), **_NORM_FLAGS},
       reference=_group_norm_ref, pattern=OpPattern.OPAQUE,
       doc="Group normalization over groups of channels and ``axes``.")

define("nn.instance_norm", ("data", "gamma", "beta"),
       lambda call, ctx: _infer_grouped(call, ctx, "instance_norm", None),
       attrs={"channel_axis": (REQUIRED, as_int), "axes": (REQUIRED, int_tuple), **_NORM_FLAGS},
       reference=_instance_norm_ref, pattern=OpPattern.OPAQUE,
       doc="Instance normalization: each channel over ``axes``.")


def _grouped_norm(call, inputs, groups_of):
    x, gamma, beta = (_tensor(inputs, k, call) for k in range(3))
    a = attrs_of(call)
    out = _out(call)
    ch = a["channel_axis"] % x.ndim
    axes = sorted(v % x.ndim for v in a["axes"])
    groups = groups_of(x, ch)
    if groups is None:  # one channel per group: plain statistics per channel
        mean, _, inv_std, idx = _group_stats(x, axes, None, 1, a["epsilon"], _name(call))
    else:
        mean, _, inv_std, idx = _group_stats(x, axes, ch, groups, a["epsilon"], _name(call))
    return _affine(x, lambda i: mean[idx(i)], lambda i: inv_std[idx(i)], gamma, beta, ch,
                   a["center"], a["scale"], out.shape, _name(call))


@legalizes("nn.group_norm")
def _group_norm(call, inputs):
    return _grouped_norm(call, inputs, lambda x, ch: attrs_of(call)["num_groups"])


@legalizes("nn.instance_norm")
def _instance_norm(call, inputs):
    return _grouped_norm(call, inputs, lambda x, ch: None)


# ---------------------------------------------------------------------------
# dropout
# ---------------------------------------------------------------------------

def _infer_dropout(call, ctx):
    data = tensor_arg(call, 0, ctx, "data")
    rate = attrs_of(call)["rate"]
    if not 0.0 <= rate <= 1.0:
        raise err(call, f"rate must be in [0, 1], got {rate}")
    return TupleStructInfo([data, data])


def _dropout_ref(data, rate=0.5):
    x = np.asarray(data)
    return np.array(x, copy=True), np.ones_like(x)


define("nn.dropout", ("data",), _infer_dropout, attrs={"rate": (0.5, as_float)},
       reference=_dropout_ref, pattern=OpPattern.OPAQUE,
       doc="Dropout at inference: (data, all-ones mask), as TVM legalizes it.")


@legalizes("nn.dropout")
def _dropout(call, inputs):
    x = _tensor(inputs, 0, call)
    out = _out(call, 0)
    return [te.compute(out.shape, lambda *i: x[i], name="T_dropout"),
            te.compute(out.shape, lambda *i: _const(1, x.dtype), name="T_dropout_mask")]


# ---------------------------------------------------------------------------
# How the fuzzing generator draws these operators (phasec.testing)
# ---------------------------------------------------------------------------

def _norm_draw(name: str, order: int) -> Hooks:
    """Over the last axis (which must be constant), with constant gamma/beta."""
    def build(g, x):

        n = const_dim(x.shape[-1])
        gamma = g.constant((n,), (0.5, 1.5), "float32")
        bound = math.sqrt(n) * gamma.mag
        if name == "nn.layer_norm":
            beta = g.constant((n,), (-1.0, 1.0), "float32")
            call = call_op("relax." + name, x.expr, gamma.expr, beta.expr, axes=[-1])
            bound += beta.mag
        else:
            call = call_op("relax." + name, x.expr, gamma.expr, axes=[-1])
        return g.emit(call, FLOAT, (-bound, bound))

    return Hooks(build, (FLOAT,), 1, accepts=lambda g, x: (
        x.kind == FLOAT and x.rank >= 1 and const_dim(x.shape[-1]) is not None), order=order)


for _opname, _order in (("nn.layer_norm", 45), ("nn.rms_norm", 46)):
    declares_draw(_opname, _norm_draw(_opname, _order))


def _norm_params(ctx, channels: int):
    gamma = ctx.const((channels,), 0.5, 1.5)
    beta = ctx.const((channels,), -1.0, 1.0)
    return gamma, beta


def _draw_batch_norm(ctx):
    c = ctx.shape[1]
    gamma, beta = _norm_params(ctx, c)
    mean, var = ctx.const((c,), -1.0, 1.0), ctx.const((c,), 0.5, 1.5)
    training = ctx.choose([True, False])
    n = math.prod(ctx.shape) // c
    scale = math.sqrt(n) if training else (ctx.mag + 1.0) / math.sqrt(0.5)
    bound = max(scale * 1.5 + 1.0, ctx.mag ** 2 + 1.5)
    ctx.result_in(-bound, bound)
    return (ctx.x, gamma, beta, mean, var), {"axis": 1, "training": training,
                                             "center": ctx.choose([True, False]),
                                             "scale": ctx.choose([True, False])}


def _draw_group_norm(groups: bool):
    def build(ctx):
        c = ctx.shape[1]
        gamma, beta = _norm_params(ctx, c)
        num = ctx.choose([g for g in range(1, c + 1) if c % g == 0]) if groups else c
        axes = list(range(2, len(ctx.shape)))
        n = (c // num) * math.prod(ctx.shape[2:])
        bound = math.sqrt(n) * 1.5 + 1.0
        ctx.result_in(-bound, bound)
        attrs = {"channel_axis": 1, "axes": axes}
        if groups:
            attrs["num_groups"] = num
        return (ctx.x, gamma, beta), attrs
    return build


def _draw_dropout(ctx):
    ctx.include(1.0, 1.0)  # the mask: all ones at inference
    return (ctx.x,), {"rate": ctx.choose([0.5, 0.1])}


declares_draw("nn.batch_norm", ranks=(2, 3, 4), build=_draw_batch_norm)
declares_draw("nn.group_norm", ranks=(3, 4), build=_draw_group_norm(True))
declares_draw("nn.instance_norm", ranks=(3, 4), build=_draw_group_norm(False))
declares_draw("nn.dropout", build=_draw_dropout)

"""Data movement: tile, repeat, flip, nn.pad (injective: each output element
is one input element, or a constant).

* ``tile(data, repeats)``: numpy.tile. Fewer repeats than dimensions repeat
  the trailing ones; more repeats than dimensions add leading dimensions.
* ``repeat(data, repeats, axis=None)``: numpy.repeat with one count;
  ``axis=None`` repeats the elements of the flattened tensor.
* ``flip(data, axis)``: reverse the order along one axis (numpy.flip).
* ``nn.pad(data, pad_width, pad_value=0.0, pad_mode="constant")``:
  ``pad_width`` lists (before, after) for each axis, flattened. Modes as TVM
  0.27: ``constant`` (pad_value), ``reflect`` (mirror without the edge,
  numpy "reflect"), ``replicate`` (repeat the edge, numpy "edge"),
  ``circular`` (wrap around, numpy "wrap"). Widths are non-negative. The
  kernels use numpy's periodic formulas, so a width larger than the
  dimension is numpy's answer, never a read outside the input (TVM 0.27's
  reflect formula is only right for widths below the dimension; phasec
  agrees with it there); a mode other than constant on an empty dimension
  with padding is an error.
"""

from __future__ import annotations

import numpy as np

from .. import arith, te, tir
from ..struct_info import TensorStructInfo
from ..tir import BinaryOp, PrimExpr, Select
from ._common import (
    REQUIRED, OpPattern, as_float, as_int, attrs_of, define, err, int_tuple, norm_axis, one_of,
    opt, prod, tensor_arg,
)
from ._tirgen import checked, i64
from .legalize import _const, _out, _tensor, _unravel, legalizes

__all__: list[str] = []


# ---------------------------------------------------------------------------
# tile
# ---------------------------------------------------------------------------

def _infer_tile(call, ctx):
    x = tensor_arg(call, 0, ctx, "data")
    reps = attrs_of(call)["repeats"]
    if any(r < 0 for r in reps):
        raise err(call, f"tile: repeats must be non-negative, got {tuple(reps)}")
    if x.ndim == -1:
        return TensorStructInfo(None, x.dtype, -1)
    ndim = max(x.ndim, len(reps))
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, ndim)
    dims = [tir.IntImm(1)] * (ndim - x.ndim) + list(x.shape)
    reps = (1,) * (ndim - len(reps)) + tuple(reps)
    return TensorStructInfo(tuple(arith.simplify(BinaryOp("*", d, tir.IntImm(r)))
                                  for d, r in zip(dims, reps)), x.dtype)


define("tile", ("data",), _infer_tile, attrs={"repeats": (REQUIRED, int_tuple)},
       reference=lambda data, repeats: np.tile(np.asarray(data), repeats),
       pattern=OpPattern.INJECTIVE, doc="numpy.tile: repeat the whole tensor along each axis.")


@legalizes("tile")
def _tile(call, inputs):
    x = _tensor(inputs, 0, call)
    out = _out(call)
    lead = len(out.shape) - x.ndim

    def body(*i):
        ind = []
        for d in range(x.ndim):
            v = i[lead + d]
            ind.append(v if arith.prove_equal(out.shape[lead + d], x.shape[d])
                       else BinaryOp("%", v, x.shape[d]))
        return x[tuple(ind)]
    return te.compute(out.shape, body, name="T_tile")


# ---------------------------------------------------------------------------
# repeat
# ---------------------------------------------------------------------------

def _infer_repeat(call, ctx):
    x = tensor_arg(call, 0, ctx, "data")
    a = attrs_of(call)
    reps, axis = a["repeats"], a["axis"]
    if reps < 0:
        raise err(call, f"repeat: repeats must be non-negative, got {reps}")
    r = tir.IntImm(reps)
    if axis is None:
        if x.shape is None:
            return TensorStructInfo(None, x.dtype, 1)
        return TensorStructInfo((arith.simplify(BinaryOp("*", prod(x.shape), r)),), x.dtype)
    if x.ndim == -1:
        return TensorStructInfo(None, x.dtype, -1)
    ax = norm_axis(call, axis, x.ndim)
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, x.ndim)
    dims = list(x.shape)
    dims[ax] = arith.simplify(BinaryOp("*", dims[ax], r))
    return TensorStructInfo(tuple(dims), x.dtype)


define("repeat", ("data",), _infer_repeat,
       attrs={"repeats": (REQUIRED, as_int), "axis": (None, opt(as_int))},
       reference=lambda data, repeats, axis=None: np.repeat(np.asarray(data), repeats, axis),
       pattern=OpPattern.INJECTIVE,
       doc="numpy.repeat: each element ``repeats`` times along axis (None: flattened).")


@legalizes("repeat")
def _repeat(call, inputs):
    x = _tensor(inputs, 0, call)
    out = _out(call)
    a = attrs_of(call)
    r = i64(max(a["repeats"], 1))
    if a["axis"] is None:
        return te.compute(out.shape, lambda i: x[tuple(_unravel(BinaryOp("//", i, r), x.shape))],
                          name="T_repeat")
    ax = a["axis"] % x.ndim
    return te.compute(out.shape, lambda *i: x[tuple(BinaryOp("//", v, r) if d == ax else v
                                                    for d, v in enumerate(i))], name="T_repeat")


# ---------------------------------------------------------------------------
# flip
# ---------------------------------------------------------------------------

def _infer_flip(call, ctx):
    x = tensor_arg(call, 0, ctx, "data")
    if x.ndim != -1:
        norm_axis(call, attrs_of(call)["axis"], x.ndim)
    return TensorStructInfo(x.shape, x.dtype, x.ndim)


define("flip", ("data",), _infer_flip, attrs={"axis": (REQUIRED, as_int)},
       reference=lambda data, axis: np.flip(np.asarray(data), axis).copy(),
       pattern=OpPattern.INJECTIVE, doc="Reverse the order of elements along ``axis``.")


@legalizes("flip")
def _flip(call, inputs):
    x = _tensor(inputs, 0, call)
    out = _out(call)
    ax = attrs_of(call)["axis"] % x.ndim
    last = arith.simplify(BinaryOp("-", x.shape[ax], i64(1)))
    return te.compute(out.shape, lambda *i: x[tuple(BinaryOp("-", last, v) if d == ax else v
                                                    for d, v in enumerate(i))], name="T_flip")


# ---------------------------------------------------------------------------
# nn.pad
# ---------------------------------------------------------------------------

_PAD_MODES = ("constant", "reflect", "replicate", "circular")
_NP_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
             "circular": "wrap"}


def _infer_pad(call, ctx):
    x = tensor_arg(call, 0, ctx, "data")
    a = attrs_of(call)
    width = a["pad_width"]
    if any(w < 0 for w in width):
        raise err(call, f"nn.pad: pad_width must be non-negative, got {tuple(width)}")
    if x.ndim == -1:
        return TensorStructInfo(None, x.dtype, -1)
    if len(width) != 2 * x.ndim:
        raise err(call, f"nn.pad: pad_width needs (before, after) for each of the {x.ndim} "
                        f"axes ({2 * x.ndim} values), got {len(width)}")
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, x.ndim)
    dims = []
    for d, dim in enumerate(x.shape):
        before, after = width[2 * d], width[2 * d + 1]
        if a["pad_mode"] != "constant" and (before or after) and arith.const_int(dim) == 0:
            raise err(call, f"nn.pad: {a['pad_mode']} padding of axis {d}, which is empty")
        dims.append(arith.simplify(BinaryOp("+", dim, tir.IntImm(before + after))))
    return TensorStructInfo(tuple(dims), x.dtype)


def _pad_ref(data, pad_width, pad_value=0.0, pad_mode="constant"):
    x = np.asarray(data)
    pairs = [(pad_width[2 * d], pad_width[2 * d + 1]) for d in range(x.ndim)]
    if pad_mode == "constant":
        return np.pad(x, pairs, mode="constant", constant_values=np.asarray(pad_value, x.dtype))
    for d, (b, e) in enumerate(pairs):
        if (b or e) and x.shape[d] == 0:
            raise ValueError(f"nn.pad: {pad_mode} padding of axis {d}, which is empty")
    for d, (b, e) in enumerate(pairs):  # axis by axis, as numpy pads
        if b or e:
            mode = "edge" if pad_mode == "reflect" and x.shape[d] == 1 else _NP_MODES[pad_mode]
            one = [(0, 0)] * x.ndim
            one[d] = (b, e)
            x = np.pad(x, one, mode=mode)
    return x


define("nn.pad", ("data",), _infer_pad,
       attrs={"pad_width": (REQUIRED, int_tuple), "pad_value": (0.0, as_float),
              "pad_mode": ("constant", one_of(*_PAD_MODES))},
       reference=_pad_ref, pattern=OpPattern.INJECTIVE,
       doc="Pad each axis by (before, after): constant, reflect, replicate or circular.")


def _fmod(a: PrimExpr, n: PrimExpr) -> PrimExpr:
    """a mod n in [0, n) for any a (n > 0)."""
    return BinaryOp("%", BinaryOp("+", BinaryOp("%", a, n), n), n)


@legalizes("nn.pad")
def _pad(call, inputs):
    x = _tensor(inputs, 0, call)
    out = _out(call)
    a = attrs_of(call)
    width, mode = a["pad_width"], a["pad_mode"]
    def source(d: int, v: PrimExpr) -> PrimExpr:
        n = x.shape[d]
        symbolic = arith.const_int(n) is None
        before = width[2 * d]
        o = v if before == 0 else BinaryOp("-", v, i64(before))
        if mode == "replicate":
            m = arith.simplify(BinaryOp("-", n, i64(1)))
            idx = BinaryOp("max", BinaryOp("min", o, m), i64(0))
        elif mode == "circular":
            idx = _fmod(o, n)
        else:  # reflect, with numpy's period 2 * (n - 1)
            c = arith.const_int(n)
            if c == 1:
                return i64(0)
            m = arith.simplify(BinaryOp("-", n, i64(1)))
            p = arith.simplify(BinaryOp("*", m, i64(2)))
            if not symbolic:
                r = _fmod(o, p)
            else:  # a symbolic dimension may be 1: no period, index 0
                safe = BinaryOp("max", p, i64(1))
                r = _fmod(o, safe)
            idx = Select(BinaryOp("<", r, n), r, BinaryOp("-", p, r))
        # a symbolic dimension may be 0: checked, never a read of an empty input
        return checked(idx, n) if symbolic else idx

    padded = [d for d in range(x.ndim) if width[2 * d] or width[2 * d + 1]]
    if mode == "constant":
        fill = _const(a["pad_value"], x.dtype)
        if any(arith.const_int(d) == 0 for d in x.shape):
            return te.compute(out.shape, lambda *i: fill, name="T_pad")  # nothing to read

        def body(*i):
            conds = []
            ind = list(i)
            for d in padded:
                before = width[2 * d]
                o = BinaryOp("-", i[d], i64(before)) if before else i[d]
                ind[d] = BinaryOp("max", BinaryOp("min", o, arith.simplify(
                    BinaryOp("-", x.shape[d], i64(1)))), i64(0))
                if before:
                    conds.append(BinaryOp(">=", i[d], i64(before)))
                if width[2 * d + 1]:
                    conds.append(BinaryOp("<", o, x.shape[d]))
            if not conds:
                return x[tuple(ind)]
            inside = conds[0]
            for c in conds[1:]:
                inside = BinaryOp("and", inside, c)
            # the load index is clamped: both Select branches may be evaluated
            return Select(inside, x[tuple(ind)], fill)
        return te.compute(out.shape, body, name="T_pad")
    return te.compute(out.shape, lambda *i: x[tuple(source(d, v) if d in padded else v
                                                    for d, v in enumerate(i))], name="T_pad")

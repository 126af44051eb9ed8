"""Padding and the other data movements of TVM 0.27's ``relax.nn``: ``nn.pad``,
``nn.batch_flatten``, ``nn.pixel_shuffle`` (injective: each output element
is one input element, or the pad value).

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
* ``nn.batch_flatten(data)``: (N, product of the other axes).
* ``nn.pixel_shuffle(data, upscale_factor)``: NCHW depth to space, channels
  divisible by r**2 (torch.nn.PixelShuffle).
"""

from __future__ import annotations

import numpy as np

from phasec import arith
from phasec import te
from phasec.ir import tir
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.tir import BinaryOp, PrimExpr, Select
from phasec.op._common import (
    REQUIRED, OpPattern, as_float, as_int, attrs_of, define, err, int_tuple, one_of, prod,
    tensor_arg,
)
from phasec.op._lowering import _const, _out, _tensor, _unravel, legalizes
from phasec.op._tirgen import checked, i64
from phasec.op.draw import ANY_DTYPE, NUMBERS, declares_draw

__all__: list[str] = []


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
        elif mode == "circular":  # (a symbolic dimension may be 0: no division by it)
            idx = _fmod(o, BinaryOp("max", n, i64(1)) if symbolic else n)
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


# ---------------------------------------------------------------------------
# nn.batch_flatten / nn.pixel_shuffle
# ---------------------------------------------------------------------------

def _infer_batch_flatten(call, ctx):
    x = tensor_arg(call, 0, ctx, "data")
    if x.ndim != -1 and x.ndim < 2:
        raise err(call, f"nn.batch_flatten needs a tensor of at least 2 dimensions, got ndim "
                        f"{x.ndim}")
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, 2)
    return TensorStructInfo((x.shape[0], prod(x.shape[1:])), x.dtype)


define("nn.batch_flatten", ("data",), _infer_batch_flatten,
       reference=lambda data: np.asarray(data).reshape(
           np.shape(data)[0], int(np.prod(np.shape(data)[1:]))).copy(),
       pattern=OpPattern.INJECTIVE, doc="Flatten every axis but the first.")


@legalizes("nn.batch_flatten")
def _batch_flatten(call, inputs):
    x = _tensor(inputs, 0, call)
    out = _out(call)
    rest = x.shape[1:]
    return te.compute(out.shape, lambda b, j: x[(b, *_unravel(j, rest))], name="T_batch_flatten")


def _infer_pixel_shuffle(call, ctx):
    x = tensor_arg(call, 0, ctx, "data")
    r = attrs_of(call)["upscale_factor"]
    if r < 1:
        raise err(call, f"nn.pixel_shuffle: upscale_factor must be positive, got {r}")
    if x.ndim not in (-1, 4):
        raise err(call, f"nn.pixel_shuffle needs a 4-D NCHW tensor, got ndim {x.ndim}")
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, 4)
    n, c, h, w = x.shape
    cc = arith.const_int(c)
    if cc is not None and cc % (r * r):
        raise err(call, f"nn.pixel_shuffle: {cc} channels are not divisible by "
                        f"upscale_factor**2 = {r * r}")
    rr = tir.IntImm(r)
    return TensorStructInfo((n, arith.simplify(BinaryOp("//", c, tir.IntImm(r * r))),
                             arith.simplify(BinaryOp("*", h, rr)),
                             arith.simplify(BinaryOp("*", w, rr))), x.dtype)


def _pixel_shuffle_ref(data, upscale_factor):
    x = np.asarray(data)
    n, c, h, w = x.shape
    r = upscale_factor
    y = x.reshape(n, c // (r * r), r, r, h, w).transpose(0, 1, 4, 2, 5, 3)
    return y.reshape(n, c // (r * r), h * r, w * r).copy()


define("nn.pixel_shuffle", ("data",), _infer_pixel_shuffle,
       attrs={"upscale_factor": (REQUIRED, as_int)}, reference=_pixel_shuffle_ref,
       pattern=OpPattern.INJECTIVE,
       doc="NCHW depth to space: out[n, c, h, w] = in[n, c*r*r + (h%r)*r + w%r, h//r, w//r].")


@legalizes("nn.pixel_shuffle")
def _pixel_shuffle(call, inputs):
    x = _tensor(inputs, 0, call)
    out = _out(call)
    r = i64(attrs_of(call)["upscale_factor"])

    def body(n, c, h, w):
        ch = BinaryOp("+", BinaryOp("*", c, BinaryOp("*", r, r)),
                      BinaryOp("+", BinaryOp("*", BinaryOp("%", h, r), r), BinaryOp("%", w, r)))
        return x[n, ch, BinaryOp("//", h, r), BinaryOp("//", w, r)]
    return te.compute(out.shape, body, name="T_pixel_shuffle")


# ---------------------------------------------------------------------------
# How the fuzzing generator draws these operators (phasec.testing)
# ---------------------------------------------------------------------------

def _draw_pad(ctx):
    value = ctx.choose([0.0, 1.0])
    ctx.include(value, value)
    width = tuple(ctx.choose([0, 1]) for _ in range(2 * len(ctx.shape)))
    mode = ctx.choose(["constant", "reflect", "replicate", "circular"])
    return (ctx.x,), {"pad_width": width, "pad_value": value, "pad_mode": mode}


declares_draw("nn.pad", dtypes=NUMBERS, build=_draw_pad)
declares_draw("nn.batch_flatten", dtypes=ANY_DTYPE, ranks=(2, 3, 4), static=False,
              build=lambda ctx: ((ctx.x,), {}))
declares_draw("nn.pixel_shuffle", dtypes=ANY_DTYPE, ranks=(4,),
              fits=lambda s: s[1] % 4 == 0,
              shape=lambda pick: (pick([1, 2]), 4, pick([1, 2, 3]), pick([1, 2, 3])),
              build=lambda ctx: ((ctx.x,), {"upscale_factor": 2}))

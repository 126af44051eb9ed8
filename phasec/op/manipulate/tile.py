"""Copies along axes (TVM 0.27's ``relax.op.manipulate``): tile, repeat, flip,
reverse_sequence (each output element is one input element).

* ``tile(data, repeats)``: numpy.tile. Fewer repeats than dimensions repeat
  the trailing ones; more repeats than dimensions add leading dimensions.
* ``repeat(data, repeats, axis=None)``: numpy.repeat with one count;
  ``axis=None`` repeats the elements of the flattened tensor.
* ``flip(data, axis)``: reverse the order along one axis (numpy.flip).
* ``reverse_sequence(data, seq_lengths, seq_axis=1, batch_axis=0)``: for
  each batch entry b, the first ``seq_lengths[b]`` elements along seq_axis
  reversed (ONNX ReverseSequence); a length past the axis is an
  IndexOutOfRangeError (the first index read, length - 1), a length <= 0
  reverses nothing.
"""

from __future__ import annotations

import numpy as np

from phasec import arith
from phasec import te
from phasec.errors import IndexOutOfRangeError
from phasec.ir import tir
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.tir import BinaryOp
from phasec.op._common import (
    REQUIRED, OpPattern, as_int, attrs_of, define, err, int_tuple, norm_axis, opt, prod,
    tensor_arg,
)
from phasec.op._lowering import _out, _tensor, _unravel, legalizes
from phasec.op._tirgen import checked, i64
from phasec.op.draw import ANY_DTYPE, declares_draw
from phasec.op.manipulate.gather_scatter import int_indices
from phasec.ir.text import sinfo_to_str

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
# reverse_sequence
# ---------------------------------------------------------------------------

def _infer_reverse_sequence(call, ctx):
    data = tensor_arg(call, 0, ctx, "data")
    lens = tensor_arg(call, 1, ctx, "seq_lengths")
    int_indices(call, lens)
    if lens.ndim not in (-1, 1):
        raise err(call, f"reverse_sequence needs 1-D seq_lengths, got ndim {lens.ndim}")
    a = attrs_of(call)
    if data.ndim != -1:
        if data.ndim < 2:
            raise err(call, f"reverse_sequence needs data of rank at least 2, got {data.ndim}")
        seq = norm_axis(call, a["seq_axis"], data.ndim, "seq_axis")
        bat = norm_axis(call, a["batch_axis"], data.ndim, "batch_axis")
        if seq == bat:
            raise err(call, f"reverse_sequence: seq_axis and batch_axis are both axis {seq}")
        if data.shape is not None and lens.shape is not None and \
                arith.prove_not_equal(lens.shape[0], data.shape[bat]):
            raise err(call, f"reverse_sequence needs one length per batch entry: seq_lengths has "
                            f"{sinfo_to_str(lens)}, the batch axis {bat} of the data has "
                            f"{arith.const_int(data.shape[bat])} entries")
    return TensorStructInfo(data.shape, data.dtype, data.ndim)


def _reverse_sequence_ref(data, seq_lengths, seq_axis=1, batch_axis=0):
    x = np.asarray(data)
    seq, bat = seq_axis % x.ndim, batch_axis % x.ndim
    n = x.shape[seq]
    out = x.copy()
    for b, length in enumerate(np.asarray(seq_lengths).astype(np.int64).reshape(-1)):
        if length > n:  # the kernel's first read, index length - 1, is past the end
            raise IndexOutOfRangeError("reverse_sequence", int(length) - 1, n)
        if length <= 0:
            continue
        idx = [slice(None)] * x.ndim
        idx[bat] = b
        idx[seq] = slice(0, int(length))
        # the batch axis is gone from the selected part: the sequence axis may shift
        out[tuple(idx)] = np.flip(x[tuple(idx)], seq - (1 if seq > bat else 0))
    return out


define("reverse_sequence", ("data", "seq_lengths"), _infer_reverse_sequence,
       attrs={"seq_axis": (1, as_int), "batch_axis": (0, as_int)},
       reference=_reverse_sequence_ref, pattern=OpPattern.INJECTIVE,
       doc="Reverse the first seq_lengths[b] elements along seq_axis of each batch entry b.")


@legalizes("reverse_sequence")
def _reverse_sequence(call, inputs):
    data, lens = _tensor(inputs, 0, call), _tensor(inputs, 1, call)
    out = _out(call)
    a = attrs_of(call)
    seq, bat = a["seq_axis"] % data.ndim, a["batch_axis"] % data.ndim

    def body(*i):
        length = te.cast(lens[(i[bat],)], "int64")
        inside = BinaryOp("<", i[seq], length)
        idx = tir.Select(inside, BinaryOp("-", BinaryOp("-", length, i64(1)), i[seq]), i[seq])
        # a length past the axis reads index length - 1 first: an error, never a wild read
        return data[tuple(checked(idx, data.shape[seq]) if d == seq else v
                          for d, v in enumerate(i))]
    return te.compute(out.shape, body, name="T_reverse_sequence")


# ---------------------------------------------------------------------------
# How the fuzzing generator draws these operators (phasec.testing)
# ---------------------------------------------------------------------------

def _draw_reverse_sequence(ctx):
    lengths = ctx.indices((ctx.shape[0],), ctx.shape[1] + 1, 1)
    return (ctx.x, lengths), {"seq_axis": 1, "batch_axis": 0}


declares_draw("tile", dtypes=ANY_DTYPE, ranks=(1, 2, 3), build=lambda ctx: (
    (ctx.x,), {"repeats": tuple(ctx.choose([1, 2]) for _ in range(ctx.integers(1, 3)))}))
declares_draw("repeat", dtypes=ANY_DTYPE, build=lambda ctx: (
    (ctx.x,), {"repeats": ctx.choose([1, 2, 3]),
               "axis": ctx.choose([None, *range(len(ctx.shape))])}))
declares_draw("flip", dtypes=ANY_DTYPE, build=lambda ctx: (
    (ctx.x,), {"axis": ctx.choose(range(-len(ctx.shape), len(ctx.shape)))}))
declares_draw("reverse_sequence", dtypes=ANY_DTYPE, ranks=(2, 3, 4), build=_draw_reverse_sequence)

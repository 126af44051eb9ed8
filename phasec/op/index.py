"""Indexing (TVM 0.27's ``relax.op.index``): take, strided_slice,
dynamic_strided_slice.

* ``strided_slice``: numpy slicing ``x[begin:end:stride]`` on each listed
  axis (clipped to the dimension). For symbolic dimensions the indices are
  assumed in bounds (TVM's ``assume_inbound``); ``end >= 2**31 - 1`` means "to
  the end". A begin / end entry may be symbolic (``index + 1``, as TVM 0.27
  allows); its length follows TVM's clamped form (see :mod:`._symslice`).
* ``take(x, indices, axis)``: numpy.take; ``axis=None`` indexes the flattened
  tensor; indices must lie in [-dim, dim).
* ``dynamic_strided_slice(x, begin, end, strides)``: numpy slicing with the
  bounds read from three 1-D integer tensors, one entry per axis (numpy's
  clamping of out-of-range bounds: never a read outside x; a zero stride is
  an error when it runs); known rank, unknown shape.
  It lowers to a packed function (:mod:`phasec.op._packed`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from phasec import arith
from phasec import te
from phasec.ir import tir
from phasec.ir.expr import Call, ExternFunc, PrimValue
from phasec.ir.struct_info import PrimStructInfo, TensorStructInfo
from phasec.ir.tir import BinaryOp, PrimExpr
from phasec.op._common import (
    REQUIRED, OpPattern, as_bool, as_int, attrs_of, check_indices, define, err, int_tuple,
    norm_axes, norm_axis, one_of, opt, tensor_arg,
)
from phasec.op._lowering import (
    I64, Inputs, LegalizeError, _attrs, _clamp, _i64, _name, _norm_axis, _out, _prod, _script,
    _static, _tensor, _unravel, legalizes, legalizes_to_relax,
)
from phasec.op._packed import packed
from phasec.op._symslice import (
    canonical_index, index_tuple, is_symbolic, slice_length, stride_tuple,
)
from phasec.op.draw import ANY_DTYPE, BOOL, FLOAT, INT, Hooks, const_dim, cut_axes, declares_draw
from phasec.ir.text import expr_to_str
from phasec.op.infer import arg_sinfo
from phasec.te import Tensor
from phasec.op.calls import call_op

__all__: list[str] = []


_END = (1 << 31) - 1  # end indices at or beyond this mean "to the end"


# ---------------------------------------------------------------------------
# strided_slice / take
# ---------------------------------------------------------------------------

def _slice_len(call, dim: tir.PrimExpr, b: int, e: int, s: int) -> tir.PrimExpr:
    c = arith.const_int(dim)
    if c is not None:
        return tir.IntImm(len(range(*slice(b, e, s).indices(c))))
    i64 = tir.IntImm
    # Symbolic dimension: resolve negative / "to the end" indices against it
    # and assume the (resolved) indices are in bounds.
    if s > 0:
        lo = i64(b) if b >= 0 else dim + i64(b)
        hi = dim if e >= _END else (i64(e) if e >= 0 else dim + i64(e))
        n = tir.BinaryOp("//", (hi - lo) + i64(s - 1), i64(s))
    else:
        hi = (dim - i64(1)) if b >= _END else (i64(b) if b >= 0 else dim + i64(b))
        lo = i64(-1) if e <= -_END else (i64(e) if e >= 0 else dim + i64(e))
        n = tir.BinaryOp("//", (hi - lo) + i64(-s - 1), i64(-s))
    return arith.simplify(n)


def _infer_strided_slice(call, ctx):
    x = tensor_arg(call, 0, ctx)
    a = attrs_of(call)
    axes, begin, end, strides = a["axes"], a["begin"], a["end"], a["strides"]
    if strides is None:
        strides = (1,) * len(axes)
    if not len(axes) == len(begin) == len(end) == len(strides):
        raise err(call, f"strided_slice needs axes, begin, end (and strides) of equal length, got "
                        f"{len(axes)}, {len(begin)}, {len(end)}, {len(strides)}")
    if any(s == 0 for s in strides):
        raise err(call, "strided_slice: strides must be non-zero")
    if x.ndim == -1:
        return TensorStructInfo(None, x.dtype, -1)
    axes_n = norm_axes(call, axes, x.ndim, "axes")
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, x.ndim)
    dims = list(x.shape)
    for ax, b, e, s in zip(axes_n, begin, end, strides):
        if is_symbolic(b) or is_symbolic(e) or is_symbolic(s):
            # TVM 0.27: symbolic begin / end / stride entries (see _symslice)
            dims[ax] = slice_length(b, e, s, x.shape[ax], a["assume_inbound"])
        else:
            dims[ax] = _slice_len(call, x.shape[ax], b, e, s)
    return TensorStructInfo(tuple(dims), x.dtype)


def _strided_slice_ref(x, axes, begin, end, strides=None, assume_inbound=True):
    x = np.asarray(x)
    strides = strides or (1,) * len(axes)
    index = [slice(None)] * x.ndim
    for ax, b, e, s in zip(axes, begin, end, strides):
        index[ax % x.ndim] = slice(b, e, s)
    return x[tuple(index)].copy()


define("strided_slice", ("x",), _infer_strided_slice,
       # begin / end entries may be symbolic (TVM 0.27's PrimExpr tuples); strides are ints
       attrs={"axes": (REQUIRED, int_tuple), "begin": (REQUIRED, index_tuple),
              "end": (REQUIRED, index_tuple), "strides": (None, opt(stride_tuple)),
              # TVM 0.27: "the slice stays in bounds" lets TVM skip clamping; phasec
              # always clamps as numpy does, which is the same where the promise holds.
              # It decides the inferred length of a symbolic begin / end only. Off by
              # default, as TVM 0.27's strided_slice (which prints it when False).
              "assume_inbound": (False, as_bool)},
       reference=_strided_slice_ref, pattern=OpPattern.INJECTIVE,
       doc="numpy slicing x[begin:end:stride] on the listed axes.")


def _infer_take(call, ctx):
    x = tensor_arg(call, 0, ctx)
    # TVM 0.27: a scalar index (R.prim_value / an R.Prim variable) is a 0-d tensor of indices
    prim = arg_sinfo(call.args[1], ctx) if len(call.args) > 1 else None
    if isinstance(prim, PrimStructInfo):
        idx = TensorStructInfo((), prim.dtype)
    else:
        idx = tensor_arg(call, 1, ctx, "indices")
    if idx.dtype != "void" and not tir.is_int(idx.dtype):
        raise err(call, f"take needs integer indices, but {expr_to_str(call.args[1])} has "
                        f"dtype {idx.dtype}")
    axis = attrs_of(call)["axis"]
    if axis is None:
        return TensorStructInfo(idx.shape, x.dtype, idx.ndim)
    if x.ndim == -1:
        return TensorStructInfo(None, x.dtype, -1)
    if x.ndim == 0:
        raise err(call, "take cannot index a 0-d tensor along an axis")
    ax = norm_axis(call, axis, x.ndim)
    if x.shape is None or idx.shape is None:
        return TensorStructInfo(None, x.dtype, -1 if idx.ndim == -1 else x.ndim - 1 + idx.ndim)
    return TensorStructInfo(tuple(x.shape[:ax]) + tuple(idx.shape) + tuple(x.shape[ax + 1:]),
                            x.dtype)


def _take_ref(x, indices, axis=None, mode="fast"):
    x = np.asarray(x)
    idx = np.asarray(indices).astype(np.int64)
    extent = x.size if axis is None else x.shape[axis]
    if mode != "fast":  # TVM's clip (clamp into range) and wrap (modulo the extent)
        if extent == 0 and idx.size:  # nothing to clamp or wrap into: the kernels' error
            check_indices(np.zeros(1, np.int64), 0, "take")
        return np.take(x, idx, axis=axis, mode=mode)
    check_indices(idx, extent, "take")
    return np.take(x, idx, axis=axis, mode="raise")


define("take", ("x", "indices"), _infer_take,
       attrs={"axis": (None, opt(as_int)), "mode": ("fast", one_of("fast", "clip", "wrap"))},
       reference=_take_ref, pattern=OpPattern.INJECTIVE,
       doc="numpy.take: gather along ``axis`` (None: the flattened tensor). ``mode``: "
           "fast (TVM's default, unchecked there; phasec bounds-checks it: negative "
           "indices from the end, anything else out of range is an error), clip, wrap.")


# ---------------------------------------------------------------------------
# dynamic_strided_slice
# ---------------------------------------------------------------------------

def _infer_dynamic_strided_slice(call, ctx):
    x = tensor_arg(call, 0, ctx)
    for k, what in ((1, "begin"), (2, "end"), (3, "strides")):
        t = tensor_arg(call, k, ctx, what)
        if t.dtype != "void" and not tir.is_int(t.dtype):
            raise err(call, f"dynamic_strided_slice needs integer {what}, got dtype {t.dtype}")
        if t.ndim not in (-1, 1):
            raise err(call, f"dynamic_strided_slice needs a 1-D {what}, got ndim {t.ndim}")
        n = arith.const_int(t.shape[0]) if t.shape is not None else None
        if n is not None and x.ndim != -1 and n != x.ndim:
            raise err(call, f"dynamic_strided_slice: {what} has {n} entries for a tensor of "
                            f"ndim {x.ndim}")
    return TensorStructInfo(None, x.dtype, x.ndim)


define("dynamic_strided_slice", ("x", "begin", "end", "strides"), _infer_dynamic_strided_slice,
       reference=lambda x, begin, end, strides: packed("phasec.dynamic_strided_slice")(
           x, begin, end, strides),
       pattern=OpPattern.OPAQUE, doc="numpy slicing with bounds read from tensors.")


@legalizes_to_relax("dynamic_strided_slice")
def _dynamic_strided_slice(call):

    return call_op("call_pure_packed", ExternFunc("phasec.dynamic_strided_slice"), *call.args,
                   sinfo_args=[call.struct_info], span=call.span)


# ---------------------------------------------------------------------------
# Legalization
# ---------------------------------------------------------------------------

def _slice_start(dim: PrimExpr, b: int, e: int, s: int) -> PrimExpr:
    c = _static(dim)
    if c is not None:
        return _i64(range(*slice(b, e, s).indices(c)).start if c else 0)
    if s > 0:
        return _i64(b) if b >= 0 else arith.simplify(BinaryOp("+", dim, _i64(b)))
    if b >= _END:
        return arith.simplify(BinaryOp("-", dim, _i64(1)))
    return _i64(b) if b >= 0 else arith.simplify(BinaryOp("+", dim, _i64(b)))


@legalizes("strided_slice")
def _strided_slice(call: Call, inputs: Inputs) -> Tensor:
    x = _tensor(inputs, 0, call)
    out = _out(call)
    a = _attrs(call)
    strides = a["strides"] or (1,) * len(a["axes"])
    spec = {}
    for axis, b, e, s in zip(a["axes"], a["begin"], a["end"], strides):
        d = _norm_axis(axis, x.ndim)
        if is_symbolic(b) or is_symbolic(e) or is_symbolic(s):
            # numpy's start (negative from the end, clamped), whether or not
            # assume_inbound promised it in bounds: the same where it is
            spec[d] = (canonical_index(b, x.shape[d], 1 if is_symbolic(s) else s), s)
        else:
            spec[d] = (_slice_start(x.shape[d], b, e, s), s)

    def body(*i: PrimExpr) -> Any:
        ind = []
        for d, v in enumerate(i):
            if d in spec:
                start, s = spec[d]
                term = v if s == 1 else BinaryOp("*", v, s if isinstance(s, PrimExpr) else _i64(s))
                ind.append(term if _static(start) == 0 else BinaryOp("+", start, term))
            else:
                ind.append(v)
        return x[tuple(ind)]
    return te.compute(out.shape, body, name=_name(call))


class _ScalarIndex:
    """A scalar index (R.prim_value) read like a 0-d tensor: ``idx[()]``."""

    ndim = 0

    def __init__(self, value: PrimExpr) -> None:
        self.value = value

    def __getitem__(self, _: Any) -> PrimExpr:
        return self.value


def _take_indices(call: Call, inputs: Inputs) -> Any:
    if isinstance(inputs[1], Tensor):
        return inputs[1]
    value = inputs[1]
    if isinstance(value, PrimValue):
        return _ScalarIndex(value.value)
    sinfo = getattr(value, "struct_info", None)
    if isinstance(sinfo, PrimStructInfo) and sinfo.value is not None:
        return _ScalarIndex(sinfo.value)
    raise LegalizeError(f"{_script(call)}: a scalar index must be an R.prim_value or an R.Prim "
                        "with a known value to be lowered to a kernel")


@legalizes("take")
def _take(call: Call, inputs: Inputs) -> Tensor:
    x, idx = _tensor(inputs, 0, call), _take_indices(call, inputs)
    out = _out(call)
    axis = _attrs(call)["axis"]
    mode = _attrs(call).get("mode", "fast")

    def wrap(v: PrimExpr, dim: PrimExpr) -> PrimExpr:
        v = te.cast(v, I64)
        d64 = te.cast(dim, I64)
        if mode == "clip":
            v = _clamp(v, d64)  # into [0, dim - 1]; 0 when the axis is empty
        elif mode == "wrap":  # floor modulo: in [0, dim); 0 when the axis is empty
            v = BinaryOp("%", v, BinaryOp("max", d64, _i64(1)))
        # fast: numpy's negative indices. Anything out of range (for clip and
        # wrap: any index into an empty axis) stops the kernel with an
        # IndexOutOfRangeError, as the reference does (never a wild read)
        return tir.Call("checked_index", (v, dim), "int64")

    if axis is None:
        size = _prod(x.shape)
        return te.compute(out.shape, lambda *i: x[tuple(_unravel(wrap(idx[i], size), x.shape))],
                          name=_name(call))
    ax = _norm_axis(axis, x.ndim)
    k = idx.ndim

    def body(*i: PrimExpr) -> Any:
        pick = wrap(idx[tuple(i[ax:ax + k])], x.shape[ax])
        return x[tuple(i[:ax]) + (pick,) + tuple(i[ax + k:])]
    return te.compute(out.shape, body, name=_name(call))


# ---------------------------------------------------------------------------
# How the fuzzing generator draws these operators (phasec.testing; take and
# strided_slice: phasec.op.draw.Hooks)
# ---------------------------------------------------------------------------

_ANY = (FLOAT, INT, BOOL)


def _call(name: str, *args: Any, **attrs: Any) -> Any:

    return call_op("relax." + name, *args, **attrs)


def _cuts(g, x) -> bool:
    return x.kind in _ANY and bool(cut_axes(x))


def _draw_strided_slice(g, x):
    axis = g.pick(cut_axes(x))
    d = const_dim(x.shape[axis])
    begin = g.pick(list(range(d - 1)))
    end = g.pick(list(range(d, begin, -1)))
    stride = g.pick([1, 2])
    call = _call("strided_slice", x.expr, axes=[axis], begin=[begin], end=[end],
                 strides=[stride])
    return g.emit(call, x.kind, (x.lo, x.hi))


def _draw_take(g, x):
    axis = g.pick([i for i, d in enumerate(x.shape) if const_dim(d)])
    d = const_dim(x.shape[axis])
    count = g.pick(list(range(1, g.cfg.max_dim + 1)))
    indices = g.int_constant((count,), 0, d - 1)  # in range: TVM reads no negative index
    return g.emit(_call("take", x.expr, indices, axis=axis), x.kind, (x.lo, x.hi))


def _draw_dynamic_strided_slice(ctx):
    begin, end, strides = [], [], []
    for d in ctx.shape:
        b = ctx.integers(-d, d - 1)
        begin.append(b)
        end.append(ctx.integers(-d - 1, d + 1))
        strides.append(ctx.choose([1, 2, -1]))
    rows = [np.array(v, "int64") for v in (begin, end, strides)]
    return (ctx.x, *rows), {}


declares_draw("strided_slice", Hooks(_draw_strided_slice, _ANY, accepts=_cuts, order=55))
declares_draw("take", Hooks(_draw_take, _ANY, 1, accepts=lambda g, x: (
    x.kind in _ANY and any(const_dim(d) for d in x.shape)), order=56))
declares_draw("dynamic_strided_slice", dtypes=ANY_DTYPE, build=_draw_dynamic_strided_slice)

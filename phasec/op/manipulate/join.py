"""Joining and splitting (TVM 0.27's ``relax.op.manipulate``): concat, split,
stack, meshgrid; and the checks of a tuple-of-tensors operand they share with
einsum (:mod:`phasec.op.linear_algebra`).

* ``split(x, indices_or_sections, axis)``: an int splits into that many equal
  parts (the dimension must be divisible, as numpy.split); a tuple gives the
  split points (non-decreasing, clipped to the dimension).
* ``stack(tensors, axis=0)``: tensors of one shape and dtype joined along a
  new axis (numpy.stack); ``axis`` in ``[-ndim-1, ndim]``.
* ``meshgrid(tensors, indexing="ij")``: 1-D tensors -> a tuple of N-D grids
  (numpy.meshgrid); "xy" swaps the first two axes of the result, as numpy
  (TVM 0.27's inference keeps the "ij" shape for "xy", its documented
  meaning aside; phasec follows numpy).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from phasec import arith
from phasec import te
from phasec.ir import tir
from phasec.ir.expr import Call, Tuple
from phasec.ir.struct_info import TensorStructInfo, TupleStructInfo
from phasec.ir.tir import BinaryOp, PrimExpr, Select
from phasec.op._common import (
    REQUIRED, OpPattern, as_int, attrs_of, define, err, int_tuple, norm_axis, one_of, opt, prod,
    tensor_arg, tensor_sinfo,
)
from phasec.op._lowering import (
    Inputs, LegalizeError, _attrs, _clamp, _i64, _name, _norm_axis, _out, _prod, _script, _static,
    _tensor, _unravel, legalizes,
)
from phasec.op.draw import (
    ANY_DTYPE, BOOL, FLOAT, INT, Hooks, const_dim, cut_axes, data_like, declares_draw, dims_equal,
    hull,
)
from phasec.op.manipulate.reshape import shape_text
from phasec.ir.text import expr_to_str, prim_expr_to_str, sinfo_to_str
from phasec.op.infer import arg_sinfo
from phasec.te import Tensor
from phasec.op.calls import call_op

__all__ = ["split_bounds", "tuple_of_tensors", "common_dtype", "tensor_list"]


def tuple_of_tensors(call, ctx, what: str) -> list[TensorStructInfo]:
    """The tensors of the tuple operand (the first), of one dtype (``what`` names
    the operator in errors)."""
    tup = arg_sinfo(call.args[0], ctx) if call.args else None
    if not isinstance(tup, TupleStructInfo):
        raise err(call, f"{what} expects a tuple of tensors, but "
                        f"{expr_to_str(call.args[0]) if call.args else 'nothing'} has struct info "
                        f"{sinfo_to_str(tup)}")
    if not tup.fields:
        raise err(call, f"{what} needs at least one tensor")
    for k, f in enumerate(tup.fields):
        if not isinstance(f, TensorStructInfo):
            raise err(call, f"{what}: field {k} of the tuple is {sinfo_to_str(f)}, not a tensor")
    dtypes = {f.dtype for f in tup.fields if f.dtype != "void"}
    if len(dtypes) > 1:
        raise err(call, f"{what} needs tensors of one dtype, got {', '.join(sorted(dtypes))}")
    return list(tup.fields)


def common_dtype(fields) -> str:
    """The fields' dtype, or "void" if they differ."""
    return fields[0].dtype if all(f.dtype == fields[0].dtype for f in fields) else "void"


def tensor_list(inputs, call) -> list[te.Tensor]:
    """The TE tensors of the tuple operand (the first) of a call being legalized."""
    ts = inputs[0] if isinstance(inputs[0], list) else [inputs[0]]
    if not ts or not all(isinstance(t, te.Tensor) for t in ts):
        raise LegalizeError(f"{_script(call)}: expects a tuple of tensors")
    return ts


def _int_or_tuple(v):
    if isinstance(v, (list, tuple)):
        return int_tuple(v)
    return as_int(v)


# ---------------------------------------------------------------------------
# concat / split
# ---------------------------------------------------------------------------

def _infer_concat(call, ctx):
    tup = arg_sinfo(call.args[0], ctx) if call.args else None
    if not isinstance(tup, TupleStructInfo):
        raise err(call, "concat expects a tuple of tensors as its operand, but "
                        f"{expr_to_str(call.args[0]) if call.args else 'nothing'} has struct info "
                        f"{sinfo_to_str(tup)}")
    if not tup.fields:
        raise err(call, "concat needs at least one tensor")
    for i, f in enumerate(tup.fields):
        if not isinstance(f, TensorStructInfo):
            raise err(call, f"concat: field {i} of the tuple is {sinfo_to_str(f)}, not a tensor")
    dtypes = {f.dtype for f in tup.fields if f.dtype != "void"}
    if len(dtypes) > 1:
        raise err(call, f"concat needs tensors of one dtype, got {', '.join(sorted(dtypes))}")
    dtype = dtypes.pop() if dtypes and all(f.dtype != "void" for f in tup.fields) else "void"
    axis = attrs_of(call)["axis"]
    if axis is None:  # flatten everything, then concatenate
        if any(f.shape is None for f in tup.fields):
            return TensorStructInfo(None, dtype, 1)
        total = sum((prod(f.shape) for f in tup.fields[1:]), prod(tup.fields[0].shape))
        return tensor_sinfo((total,), dtype)
    ndims = {f.ndim for f in tup.fields if f.ndim != -1}
    if len(ndims) > 1:
        raise err(call, f"concat needs tensors of one ndim, got {sorted(ndims)}")
    if not ndims:
        return TensorStructInfo(None, dtype, -1)
    ndim = ndims.pop()
    if ndim == 0:
        raise err(call, "concat cannot join 0-d tensors")
    ax = norm_axis(call, axis, ndim)
    if any(f.shape is None for f in tup.fields):
        return TensorStructInfo(None, dtype, ndim)
    first = tup.fields[0].shape
    dims = list(first)
    for j, f in enumerate(tup.fields[1:], start=1):
        for i in range(ndim):
            if i != ax and arith.prove_not_equal(first[i], f.shape[i]):
                raise err(call, f"concat: tensor {j} has shape {shape_text(f.shape)}, which differs "
                                f"from tensor 0's {shape_text(first)} on axis {i} (only axis {ax} may differ)")
            if i != ax and not arith.prove_equal(first[i], f.shape[i]):
                return TensorStructInfo(None, dtype, ndim)
    dims[ax] = arith.simplify(sum((f.shape[ax] for f in tup.fields[1:]), first[ax]))
    return TensorStructInfo(tuple(dims), dtype)


def _concat_ref(tensors, axis=0):
    arrays = [np.asarray(t) for t in tensors]
    if axis is None:
        return np.concatenate([a.reshape(-1) for a in arrays])
    return np.concatenate(arrays, axis=axis)


define("concat", ("tensors",), _infer_concat, attrs={"axis": (0, opt(as_int))},
       reference=_concat_ref, pattern=OpPattern.INJECTIVE,
       doc="Concatenate a tuple of tensors along ``axis`` (None: flatten first).")


def split_bounds(dim: tir.PrimExpr, spec) -> list[tuple[tir.PrimExpr, tir.PrimExpr]]:
    """(begin, length) of each output of ``split`` along a dimension of size
    ``dim``, as TVM 0.27's InferTypeSplit: ``n`` sections are ``ceildiv(dim,
    n)`` long but the last, which takes the rest; indices are clamped to
    ``[0, dim]`` and a section between decreasing indices is empty. (With a
    symbolic ``dim``, constant indices are taken to be inside it.)"""
    i64 = tir.IntImm
    c = arith.const_int(dim)
    if isinstance(spec, int):
        if c is not None:
            part = -(-c // spec)
            return [(i64(k * part), i64(part if k < spec - 1 else c - part * (spec - 1)))
                    for k in range(spec)]
        if arith.prove_equal(arith.simplify(tir.BinaryOp("%", dim, i64(spec))), i64(0)):
            part = arith.simplify(tir.BinaryOp("//", dim, i64(spec)))
        else:
            part = arith.simplify(tir.BinaryOp("//", tir.BinaryOp("+", dim, i64(spec - 1)),
                                               i64(spec)))
        out = [(arith.simplify(tir.BinaryOp("*", part, i64(k))), part) for k in range(spec - 1)]
        begin = arith.simplify(tir.BinaryOp("*", part, i64(spec - 1)))
        return out + [(begin, arith.simplify(tir.BinaryOp("-", dim, begin)))]
    bounds = [0, *spec]
    out = []
    for k, lo in enumerate(bounds):
        hi = bounds[k + 1] if k + 1 < len(bounds) else None
        if c is not None:
            lo_c = min(max(lo, 0), c)
            hi_c = c if hi is None else min(max(hi, 0), c)
            out.append((i64(lo_c), i64(max(hi_c - lo_c, 0))))
        else:
            lo_c = max(lo, 0)
            length = (arith.simplify(tir.BinaryOp("-", dim, i64(lo_c))) if hi is None
                      else i64(max(max(hi, 0) - lo_c, 0)))
            out.append((i64(lo_c), length))
    return out


def _single(spec) -> bool:
    """One section, or no split points: TVM 0.27 returns the input tensor itself."""
    return spec == 1 or spec == ()


def _infer_split(call, ctx):
    x = tensor_arg(call, 0, ctx)
    a = attrs_of(call)
    spec = a["indices_or_sections"]
    if isinstance(spec, int) and spec <= 0:
        raise err(call, f"split: the number of sections must be positive, got {spec}")
    if _single(spec):
        return x
    n_out = spec if isinstance(spec, int) else len(spec) + 1
    if x.ndim == -1:
        return TupleStructInfo([TensorStructInfo(None, x.dtype, -1)] * n_out)
    if x.ndim == 0:
        raise err(call, "split cannot split a 0-d tensor")
    ax = norm_axis(call, a["axis"], x.ndim)
    if x.shape is None:
        return TupleStructInfo([TensorStructInfo(None, x.dtype, x.ndim)] * n_out)
    fields = []
    for _, length in split_bounds(x.shape[ax], spec):
        v = arith.const_int(length)
        if v is not None and v < 0:
            raise err(call, f"split: {prim_expr_to_str(x.shape[ax])} cannot be split into "
                            f"{spec} sections of ceil({prim_expr_to_str(x.shape[ax])} / {spec}): "
                            f"the last would have {v} elements")
        dims = list(x.shape)
        dims[ax] = length
        fields.append(TensorStructInfo(tuple(dims), x.dtype))
    return TupleStructInfo(fields)


def _split_ref(x, indices_or_sections, axis=0):
    x = np.asarray(x)
    spec = indices_or_sections
    if _single(spec):
        return x.copy()
    ax = axis % x.ndim
    parts = []
    for begin, length in split_bounds(tir.IntImm(x.shape[ax]), spec):
        b, n = int(begin.value), int(length.value)
        parts.append(np.take(x, np.arange(b, b + n), axis=ax))
    return tuple(parts)


define("split", ("x",), _infer_split,
       attrs={"indices_or_sections": (REQUIRED, _int_or_tuple), "axis": (0, as_int)},
       reference=_split_ref, pattern=OpPattern.INJECTIVE,
       doc="Split into n sections (ceildiv(dim, n) long, the last the rest) or at indices "
           "(clamped into the dimension); a tuple, or the tensor itself for one section.")


# ---------------------------------------------------------------------------
# stack
# ---------------------------------------------------------------------------

def _infer_stack(call, ctx):
    fields = tuple_of_tensors(call, ctx, "stack")
    dtype = common_dtype(fields)
    ndims = {f.ndim for f in fields if f.ndim != -1}
    if len(ndims) > 1:
        raise err(call, f"stack needs tensors of one ndim, got {sorted(ndims)}")
    if not ndims:
        return TensorStructInfo(None, dtype, -1)
    ndim = ndims.pop()
    axis = attrs_of(call)["axis"]
    if not -ndim - 1 <= axis <= ndim:
        raise err(call, f"stack: axis {axis} is out of range for stacking tensors of ndim {ndim} "
                        f"(expected {-ndim - 1} <= axis <= {ndim})")
    ax = axis % (ndim + 1)
    known = [f for f in fields if f.shape is not None]
    if len(known) < len(fields):
        return TensorStructInfo(None, dtype, ndim + 1)
    first = known[0].shape
    for k, f in enumerate(known[1:], start=1):
        if any(arith.prove_not_equal(a, b) for a, b in zip(first, f.shape)):
            raise err(call, f"stack needs tensors of one shape, but tensor {k} has struct info "
                            f"{sinfo_to_str(f)} and tensor 0 {sinfo_to_str(known[0])}")
    dims = list(first)
    dims.insert(ax, tir.IntImm(len(fields)))
    return TensorStructInfo(tuple(dims), dtype)


define("stack", ("tensors",), _infer_stack, attrs={"axis": (0, as_int)},
       reference=lambda tensors, axis=0: np.stack([np.asarray(t) for t in tensors], axis),
       pattern=OpPattern.INJECTIVE, doc="numpy.stack: join tensors along a new axis.")


@legalizes("stack")
def _stack(call, inputs):
    ts = tensor_list(inputs, call)
    out = _out(call)
    ax = attrs_of(call)["axis"] % len(out.shape)

    def body(*i):
        rest = tuple(i[:ax]) + tuple(i[ax + 1:])
        value = ts[-1][rest]
        for k in range(len(ts) - 2, -1, -1):
            value = tir.Select(BinaryOp("==", i[ax], tir.IntImm(k)), ts[k][rest], value)
        return value
    return te.compute(out.shape, body, name="T_stack")


# ---------------------------------------------------------------------------
# meshgrid
# ---------------------------------------------------------------------------

def _infer_meshgrid(call, ctx):
    fields = tuple_of_tensors(call, ctx, "meshgrid")
    dtype = common_dtype(fields)
    for k, f in enumerate(fields):
        if f.ndim not in (-1, 0, 1):
            raise err(call, f"meshgrid needs 1-D tensors, but tensor {k} has struct info "
                          f"{sinfo_to_str(f)}")
    n = len(fields)
    if any(f.shape is None for f in fields):
        return TupleStructInfo([TensorStructInfo(None, dtype, n)] * n)
    dims = [f.shape[0] if f.ndim == 1 else tir.IntImm(1) for f in fields]
    if attrs_of(call)["indexing"] == "xy" and n >= 2:
        dims[0], dims[1] = dims[1], dims[0]
    return TupleStructInfo([TensorStructInfo(tuple(dims), dtype)] * n)


def _meshgrid_ref(tensors, indexing="ij"):
    return tuple(g.copy() for g in np.meshgrid(*[np.asarray(t).reshape(-1) for t in tensors],
                                               indexing=indexing))


define("meshgrid", ("tensors",), _infer_meshgrid,
       attrs={"indexing": ("ij", one_of("ij", "xy"))}, reference=_meshgrid_ref,
       pattern=OpPattern.INJECTIVE, doc="numpy.meshgrid of 1-D tensors (a tuple of grids).")


@legalizes("meshgrid")
def _meshgrid(call, inputs):
    ts = tensor_list(inputs, call)
    xy = attrs_of(call)["indexing"] == "xy" and len(ts) >= 2
    outs = []
    for k, t in enumerate(ts):
        out = _out(call, k)
        axis = {0: 1, 1: 0}.get(k, k) if xy else k

        def body(*i, t=t, axis=axis):
            return t[(i[axis],)] if t.ndim == 1 else t[()]
        outs.append(te.compute(out.shape, body, name=f"T_meshgrid{k}"))
    return outs


# ---------------------------------------------------------------------------
# Legalization
# ---------------------------------------------------------------------------

@legalizes("concat")
def _concat(call: Call, inputs: Inputs) -> Tensor:
    tensors = inputs[0]
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    if not isinstance(tensors, list) or not tensors:
        raise LegalizeError(f"{_script(call)}: expects a tuple of tensors")
    out = _out(call)
    axis = _attrs(call)["axis"]
    if axis is None:
        flat = []
        for k, t in enumerate(tensors):
            size = _prod(t.shape)
            flat.append(te.compute((size,), lambda i, t=t: t[tuple(_unravel(i, t.shape))],
                                   name=f"T_concat_flat{k}"))
        tensors, ax = flat, 0
    else:
        ax = _norm_axis(axis, len(out.shape))
    parts = [t for t in tensors if _static(t.shape[ax]) != 0]
    if not parts:
        parts = tensors[:1]

    def body(*i: PrimExpr) -> PrimExpr:
        offsets: list[PrimExpr] = []
        off: PrimExpr = _i64(0)
        for t in parts:
            offsets.append(off)
            off = arith.simplify(BinaryOp("+", off, t.shape[ax]))

        def load(k: int) -> PrimExpr:
            t = parts[k]
            local = i[ax] if _static(offsets[k]) == 0 else BinaryOp("-", i[ax], offsets[k])
            if len(parts) > 1:
                local = _clamp(local, t.shape[ax])
            return t[tuple(local if d == ax else v for d, v in enumerate(i))]
        value = load(len(parts) - 1)
        for k in range(len(parts) - 2, -1, -1):
            value = Select(BinaryOp("<", i[ax], offsets[k + 1]), load(k), value)
        return value
    return te.compute(out.shape, body, name=_name(call))


@legalizes("split")
def _split(call: Call, inputs: Inputs) -> Any:
    x = _tensor(inputs, 0, call)
    a = _attrs(call)
    spec = a["indices_or_sections"]
    if _single(spec):
        out = _out(call)
        return te.compute(out.shape, lambda *i: x[i], name="T_split")
    sinfo = call.struct_info
    if not isinstance(sinfo, TupleStructInfo):
        raise LegalizeError(f"{_script(call)}: expected a tuple result")
    ax = _norm_axis(a["axis"], x.ndim)
    outs: list[Tensor] = []
    for k, (begin, _) in enumerate(split_bounds(x.shape[ax], spec)):
        out = _out(call, k)

        def body(*i: PrimExpr, begin: PrimExpr = begin) -> Any:
            start = i[ax] if _static(begin) == 0 else BinaryOp("+", i[ax], begin)
            return x[tuple(start if d == ax else v for d, v in enumerate(i))]
        outs.append(te.compute(out.shape, body, name=f"T_split{k}"))
    return outs


# ---------------------------------------------------------------------------
# How the fuzzing generator draws these operators (phasec.testing; concat and
# split: phasec.op.draw.Hooks)
# ---------------------------------------------------------------------------

_ANY = (FLOAT, INT, BOOL)


def _call(name: str, *args: Any, **attrs: Any) -> Any:

    return call_op("relax." + name, *args, **attrs)


def _cuts(g, x) -> bool:
    return x.kind in _ANY and bool(cut_axes(x))


def _draw_concat(g, x):
    axis = g.pick(list(range(x.rank)))
    ys = g.visible(lambda v: v.kind == x.kind and v.dtype == x.dtype and v.rank == x.rank
                   and all(dims_equal(a, b) for i, (a, b) in enumerate(zip(x.shape, v.shape))
                           if i != axis))
    if not any(v is x for v in ys):
        ys.append(x)  # x may be a constant made to fit, not a value in scope
    y = g.pick(ys)
    iv = hull((x.lo, x.hi), (y.lo, y.hi))
    return g.emit(_call("concat", Tuple([x.expr, y.expr]), axis=axis), x.kind, iv)


def _draw_split(g, x):
    axis = g.pick(cut_axes(x))
    d = const_dim(x.shape[axis])
    # equal sections (an int), or split points (a list: [1] splits after index 0)
    sections = g.pick([s for s in range(2, d + 1) if d % s == 0] + [[1]])
    call = _call("split", x.expr, indices_or_sections=sections, axis=axis)
    tup = g.emit_tuple(call, [x.kind] * len(call.struct_info.fields), (x.lo, x.hi))
    return g.get_item(tup, g.pick(list(range(len(tup.fields)))))


def _draw_stack(ctx):
    others = [data_like(ctx, ctx.shape) for _ in range(ctx.integers(0, 2))]
    rank = len(ctx.shape)
    return ([ctx.x, *others],), {"axis": ctx.choose(range(-rank - 1, rank + 1))}


def _draw_meshgrid(ctx):
    others = [data_like(ctx, (ctx.integers(1, 3),)) for _ in range(ctx.integers(0, 2))]
    return ([ctx.x, *others],), {"indexing": ctx.choose(["ij", "xy"])}


declares_draw("concat", Hooks(_draw_concat, _ANY, 1, order=53))
declares_draw("split", Hooks(_draw_split, _ANY, accepts=_cuts, order=54))
declares_draw("stack", dtypes=ANY_DTYPE, ranks=(1, 2, 3), build=_draw_stack)
declares_draw("meshgrid", dtypes=ANY_DTYPE, ranks=(1,), build=_draw_meshgrid)

"""Operators combining several tensors: stack, meshgrid, outer, einsum, and
the sums that undo broadcasting: collapse_sum_like, collapse_sum_to.

* ``stack(tensors, axis=0)``: tensors of one shape and dtype joined along a
  new axis (numpy.stack); ``axis`` in ``[-ndim-1, ndim]``.
* ``meshgrid(tensors, indexing="ij")``: 1-D tensors -> a tuple of N-D grids
  (numpy.meshgrid); "xy" swaps the first two axes of the result, as numpy
  (TVM 0.27's inference keeps the "ij" shape for "xy", its documented
  meaning aside; phasec follows numpy).
* ``outer(x1, x2)``: ``x1[i] * x2[j]`` of two 1-D tensors of one dtype.
* ``einsum(operands, subscripts)``: numpy.einsum — explicit (``ij,jk->ik``)
  or implicit output, repeated labels (diagonals, ``ii->i``), and ``...``
  (broadcast batch axes, 1 against anything); one kernel, the contracted
  labels summed in the operands' dtype.
* ``collapse_sum_to(data, shape)`` / ``collapse_sum_like(data, target)``:
  the sum of ``data`` over the axes along which ``shape`` (target's shape)
  was broadcast to data's (the gradient of a broadcast); ``shape`` must
  broadcast to data's shape.
"""

from __future__ import annotations

import math
import string

import numpy as np

from phasec.ir import tir
from phasec import arith
from phasec import te
from phasec.ir.text import expr_to_str, prim_expr_to_str, sinfo_to_str
from phasec.op.infer import arg_sinfo
from phasec.ir.struct_info import TensorStructInfo, TupleStructInfo
from phasec.ir.tir import BinaryOp, PrimExpr
from phasec.op._common import (
    REQUIRED, OpPattern, as_int, as_str, attrs_of, define, err, one_of, shape_arg, shape_tuple,
    tensor_arg,
)
from phasec.op._draw import ANY_DTYPE, FLOATS, NUMBERS, data_like, declares_draw
from phasec.op._lowering import LegalizeError, _out, _reduction, _script, _tensor, legalizes

__all__: list[str] = []


def _tensors(call, ctx, what: str) -> list[TensorStructInfo]:
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


def _dtype(fields) -> str:
    return fields[0].dtype if all(f.dtype == fields[0].dtype for f in fields) else "void"


def _tensor_list(inputs, call) -> list[te.Tensor]:
    ts = inputs[0] if isinstance(inputs[0], list) else [inputs[0]]
    if not ts or not all(isinstance(t, te.Tensor) for t in ts):
        raise LegalizeError(f"{_script(call)}: expects a tuple of tensors")
    return ts


# ---------------------------------------------------------------------------
# stack
# ---------------------------------------------------------------------------

def _infer_stack(call, ctx):
    fields = _tensors(call, ctx, "stack")
    dtype = _dtype(fields)
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
    ts = _tensor_list(inputs, call)
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
# meshgrid / outer
# ---------------------------------------------------------------------------

def _infer_meshgrid(call, ctx):
    fields = _tensors(call, ctx, "meshgrid")
    dtype = _dtype(fields)
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
    ts = _tensor_list(inputs, call)
    xy = attrs_of(call)["indexing"] == "xy" and len(ts) >= 2
    outs = []
    for k, t in enumerate(ts):
        out = _out(call, k)
        axis = {0: 1, 1: 0}.get(k, k) if xy else k

        def body(*i, t=t, axis=axis):
            return t[(i[axis],)] if t.ndim == 1 else t[()]
        outs.append(te.compute(out.shape, body, name=f"T_meshgrid{k}"))
    return outs


def _infer_outer(call, ctx):
    a, b = tensor_arg(call, 0, ctx), tensor_arg(call, 1, ctx)
    for k, x in enumerate((a, b)):
        if x.ndim not in (-1, 1):
            raise err(call, f"outer needs 1-D tensors, but {expr_to_str(call.args[k])} has "
                            f"ndim {x.ndim}")
    if "void" not in (a.dtype, b.dtype) and a.dtype != b.dtype:
        raise err(call, f"outer needs two tensors of one dtype, got {a.dtype} and {b.dtype}")
    if a.shape is None or b.shape is None:
        return TensorStructInfo(None, a.dtype, 2)
    return TensorStructInfo((a.shape[0], b.shape[0]), a.dtype)


define("outer", ("x1", "x2"), _infer_outer,
       reference=lambda x1, x2: np.outer(np.asarray(x1), np.asarray(x2)),
       pattern=OpPattern.BROADCAST, doc="The outer product x1[i] * x2[j] of two 1-D tensors.")


@legalizes("outer")
def _outer(call, inputs):
    a, b = _tensor(inputs, 0, call), _tensor(inputs, 1, call)
    out = _out(call)
    return te.compute(out.shape, lambda i, j: BinaryOp("*", a[i], b[j]), name="T_outer")


# ---------------------------------------------------------------------------
# einsum
# ---------------------------------------------------------------------------

_ELL = [chr(0x3B1 + k) for k in range(24)]  # labels for the axes of "..." (alpha, beta...)


class _Spec:
    """A parsed subscripts string, with "..." expanded for the operand ranks."""

    def __init__(self, inputs: list[list[str]], output: list[str]) -> None:
        self.inputs = inputs
        self.output = output
        seen: list[str] = []
        for labels in inputs:
            for c in labels:
                if c not in seen:
                    seen.append(c)
        self.summed = [c for c in seen if c not in output]


def _parse_einsum(subscripts: str, ndims: list[int], fail) -> _Spec:
    text = subscripts.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ndims):
        fail(f"einsum: the subscripts {subscripts!r} name {len(terms)} operand(s), but "
             f"{len(ndims)} were given")
    allowed = set(string.ascii_letters)
    n_ell = 0
    parsed: list[list[str]] = []
    for term, nd in zip(terms, ndims):
        if term.count("...") > 1 or any(c not in allowed for c in term.replace("...", "")):
            fail(f"einsum: bad term {term!r} in {subscripts!r} (letters and one '...')")
        letters = term.replace("...", "")
        if "..." in term:
            k = nd - len(letters)
            if k < 0:
                fail(f"einsum: term {term!r} has more labels than its operand's {nd} axes")
            n_ell = max(n_ell, k)
            head, _, tail = term.partition("...")
            parsed.append(list(head) + _ELL[len(_ELL) - k:] + list(tail) if k else
                          list(head) + list(tail))
        else:
            if len(letters) != nd:
                fail(f"einsum: term {term!r} has {len(letters)} labels but its operand has "
                     f"{nd} axes")
            parsed.append(list(letters))
    ell = _ELL[len(_ELL) - n_ell:] if n_ell else []
    if arrow:
        if rhs.count("...") > 1 or any(c not in allowed for c in rhs.replace("...", "")):
            fail(f"einsum: bad output {rhs!r} in {subscripts!r}")
        head, dots, tail = rhs.partition("...")
        out = list(head) + (ell if dots else []) + list(tail)
        if not dots and ell:
            fail(f"einsum: the output {rhs!r} must keep the '...' axes")
        inputs_labels = {c for p in parsed for c in p}
        for c in out:
            if c not in inputs_labels:
                fail(f"einsum: output label {c!r} does not appear in the inputs")
        if len(set(out)) != len(out):
            fail(f"einsum: output {rhs!r} repeats a label")
    else:
        counts: dict[str, int] = {}
        for p in parsed:
            for c in p:
                if c not in ell:
                    counts[c] = counts.get(c, 0) + 1
        out = ell + sorted(c for c, n in counts.items() if n == 1)
    return _Spec(parsed, out)


def _label_dims(spec: _Spec, shapes, fail) -> dict[str, PrimExpr]:
    dims: dict[str, PrimExpr] = {}
    for labels, shape in zip(spec.inputs, shapes):
        for c, d in zip(labels, shape):
            prev = dims.get(c)
            if prev is None or (c in _ELL and arith.const_int(prev) == 1):
                dims[c] = d
            elif arith.const_int(d) == 1 and c in _ELL:
                continue  # a "..." axis of size 1 broadcasts
            elif arith.prove_not_equal(prev, d):
                fail(f"einsum: label {c!r} has sizes {prim_expr_to_str(prev)} and "
                     f"{prim_expr_to_str(d)}")
    return dims


def _infer_einsum(call, ctx):
    fields = _tensors(call, ctx, "einsum")
    dtype = _dtype(fields)
    subs = attrs_of(call)["subscripts"]

    def fail(msg):
        raise err(call, msg)
    if any(f.ndim == -1 for f in fields):
        return TensorStructInfo(None, dtype, -1)
    spec = _parse_einsum(subs, [f.ndim for f in fields], fail)
    if any(f.shape is None for f in fields):
        return TensorStructInfo(None, dtype, len(spec.output))
    dims = _label_dims(spec, [f.shape for f in fields], fail)
    return TensorStructInfo(tuple(dims[c] for c in spec.output), dtype)


define("einsum", ("operands",), _infer_einsum, attrs={"subscripts": (REQUIRED, as_str)},
       reference=lambda operands, subscripts: np.asarray(np.einsum(
           subscripts, *[np.asarray(o) for o in operands])).astype(np.asarray(operands[0]).dtype),
       pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
       doc="numpy.einsum over a tuple of tensors (explicit or implicit output, '...').")


@legalizes("einsum")
def _einsum(call, inputs):
    ts = _tensor_list(inputs, call)
    out = _out(call)

    def fail(msg):
        raise LegalizeError(msg)
    spec = _parse_einsum(attrs_of(call)["subscripts"], [t.ndim for t in ts], fail)
    dims = _label_dims(spec, [t.shape for t in ts], fail)
    raxes = {c: te.reduce_axis(dims[c], f"k_{ord(c)}") for c in spec.summed}

    def body(*i):
        var = dict(zip(spec.output, i))
        var.update({c: r.var for c, r in raxes.items()})
        prod = None
        for t, labels in zip(ts, spec.inputs):
            ind = []
            for c, d in zip(labels, t.shape):
                # a broadcast "..." axis of size 1 against a longer one
                ind.append(tir.IntImm(0) if arith.const_int(d) == 1 and
                           arith.const_int(dims[c]) != 1 else var[c])
            load = t[tuple(ind)]
            prod = load if prod is None else BinaryOp("*", prod, load)
        return te.sum(prod, axis=list(raxes.values())) if raxes else prod
    return te.compute(out.shape, body, name="T_einsum", tag="einsum")


# ---------------------------------------------------------------------------
# collapse_sum_like / collapse_sum_to
# ---------------------------------------------------------------------------

def _collapse(call, data: TensorStructInfo, target, ndim: int) -> TensorStructInfo:
    if data.ndim != -1 and ndim != -1 and ndim > data.ndim:
        raise err(call, f"{expr_to_str(call.op)}: the target has {ndim} dimensions, more than "
                        f"the data's {data.ndim}")
    if target is not None and data.shape is not None:
        off = len(data.shape) - len(target)
        for k, t in enumerate(target):
            d = data.shape[off + k]
            if arith.const_int(t) != 1 and arith.prove_not_equal(t, d):
                raise err(call, f"{expr_to_str(call.op)}: the target shape does not broadcast "
                                f"to the data's: dimension {prim_expr_to_str(t)} vs "
                                f"{prim_expr_to_str(d)} (axis {off + k})")
    if target is None:
        return TensorStructInfo(None, data.dtype, ndim)
    return TensorStructInfo(tuple(target), data.dtype)


def _infer_collapse_like(call, ctx):
    data = tensor_arg(call, 0, ctx, "data")
    target = tensor_arg(call, 1, ctx, "collapse_target")
    return _collapse(call, data, target.shape, target.ndim)


def _infer_collapse_to(call, ctx):
    data = tensor_arg(call, 0, ctx, "data")
    shape = shape_arg(call, 1, ctx)
    return _collapse(call, data, shape.values, shape.ndim)


def _collapse_ref(data, shape):
    x = np.asarray(data)
    shape = tuple(shape)
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + k for k, d in enumerate(shape)
                                      if d == 1 and x.shape[lead + k] != 1)
    return np.sum(x, axis=axes, dtype=x.dtype).reshape(shape).astype(x.dtype)


define("collapse_sum_like", ("data", "collapse_target"), _infer_collapse_like,
       reference=lambda data, collapse_target: _collapse_ref(data, np.shape(collapse_target)),
       pattern=OpPattern.COMM_REDUCE,
       doc="Sum data over the axes along which collapse_target's shape was broadcast.")
define("collapse_sum_to", ("data", "shape"), _infer_collapse_to,
       reference=lambda data, shape: _collapse_ref(data, shape_tuple(shape)),
       pattern=OpPattern.COMM_REDUCE,
       doc="Sum data over the axes along which ``shape`` was broadcast to data's shape.")


@legalizes("collapse_sum_like", "collapse_sum_to")
def _collapse_sum(call, inputs):
    x = _tensor(inputs, 0, call)
    out = _out(call)
    lead = x.ndim - len(out.shape)
    axes = list(range(lead)) + [lead + k for k, d in enumerate(out.shape)
                                if arith.const_int(d) == 1 and arith.const_int(x.shape[lead + k]) != 1]
    if not axes:
        return te.compute(out.shape, lambda *i: x[tuple(i)], name="T_collapse_sum")
    # reduce with keepdims on the broadcast axes, then drop the leading ones
    kept = tuple(tir.IntImm(1) if d in axes else s for d, s in enumerate(x.shape))
    s = _reduction(x, axes, True, kept, te.sum, "T_collapse_sum_red")
    return te.compute(out.shape, lambda *i: s[(tir.IntImm(0),) * lead + tuple(i)],
                      name="T_collapse_sum")


# ---------------------------------------------------------------------------
# How the fuzzing generator draws these operators (phasec.testing)
# ---------------------------------------------------------------------------

def _draw_stack(ctx):
    others = [data_like(ctx, ctx.shape) for _ in range(ctx.integers(0, 2))]
    rank = len(ctx.shape)
    return ([ctx.x, *others],), {"axis": ctx.choose(range(-rank - 1, rank + 1))}


def _draw_meshgrid(ctx):
    others = [data_like(ctx, (ctx.integers(1, 3),)) for _ in range(ctx.integers(0, 2))]
    return ([ctx.x, *others],), {"indexing": ctx.choose(["ij", "xy"])}


def _draw_outer(ctx):
    y = data_like(ctx, (ctx.integers(1, 4),))
    bound = ctx.mag * max(abs(float(y.min())), abs(float(y.max())))
    ctx.result_in(-bound, bound)
    return (ctx.x, y), {}


def _draw_einsum(ctx):
    rank = len(ctx.shape)
    letters = "abcd"[:rank]
    choices = [f"{letters}->{letters[::-1]}", f"{letters}->"]
    if rank >= 2 and ctx.shape[-1] == ctx.shape[-2]:
        choices.append(f"{letters[:-1]}{letters[-2]}->{letters[:-1]}")  # a diagonal
    subscripts = ctx.choose(choices)
    operands = [ctx.x]
    if ctx.choose([False, True]):  # contract the last axis with a matrix
        m = ctx.integers(1, 3)
        w = ctx.const((ctx.shape[-1], m), -1.0, 1.0, ctx.dtype)
        subscripts = f"{letters},{letters[-1]}z->{letters[:-1]}z"
        operands.append(w)
        bound = ctx.shape[-1] * ctx.mag
    elif subscripts.endswith("->"):
        bound = math.prod(ctx.shape) * ctx.mag
    else:
        bound = ctx.mag
    ctx.result_in(-bound, bound)
    return (operands,), {"subscripts": subscripts}


def _collapsed_target(ctx):
    """A shape that broadcasts to the data's, and the count summed into each element."""
    keep = ctx.integers(0, len(ctx.shape))
    target = [d if ctx.choose([True, False]) else 1 for d in ctx.shape[len(ctx.shape) - keep:]]
    count = math.prod(ctx.shape) // max(math.prod(target), 1)
    ctx.result_in(-count * ctx.mag, count * ctx.mag)
    return tuple(target)


declares_draw("stack", dtypes=ANY_DTYPE, ranks=(1, 2, 3), build=_draw_stack)
declares_draw("meshgrid", dtypes=ANY_DTYPE, ranks=(1,), build=_draw_meshgrid)
declares_draw("outer", dtypes=NUMBERS, ranks=(1,), build=_draw_outer)
declares_draw("einsum", dtypes=FLOATS, build=_draw_einsum)
declares_draw("collapse_sum_to", dtypes=NUMBERS, build=lambda ctx: (
    (ctx.x, _collapsed_target(ctx)), {}))
declares_draw("collapse_sum_like", dtypes=NUMBERS, build=lambda ctx: (
    (ctx.x, data_like(ctx, _collapsed_target(ctx))), {}))

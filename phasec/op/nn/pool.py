"""Pooling over 1, 2 and 3 spatial dims, adaptive average pooling (1-3 dims),
and where max pooling's maxima are (ONNX MaxPool's second output).

``nn.max_pool{1,2,3}d``/``avg_pool{1,2,3}d`` take TVM's attributes:
``pool_size``, ``strides``, ``dilation`` (1 or r ints), ``padding`` (1, r or
2r ints: the r leading pads, then the r trailing pads), ``ceil_mode``,
``count_include_pad``, ``layout`` (any permutation of ``NCW`` / ``NCHW`` /
``NCDHW``, or a packed layout such as ``NCHW4c``, see
:class:`~phasec.op._layout.PackedLayout`) and ``out_layout`` (None
becomes the data layout when the call is built, as TVM's constructor does). Output size
per spatial dim (input ``i``, window ``k``, stride ``s``, dilation ``d``,
pads ``p0``/``p1``), as TVM 0.27::

    out = (i + p0 + p1 - d * (k - 1) - 1 [+ s - 1 with ceil_mode]) // s + 1
    with ceil_mode, out -= 1 when the last window would start at or past i + p0
    (for a symbolic i, as min/max arithmetic where TVM writes T.if_then_else)

Max pooling ignores padded positions; average pooling divides the sum of
the taps inside the input by the number of taps inside the input
(``count_include_pad=False``) or inside ``[-p0, i + p1)``
(``count_include_pad=True``), at least 1; integer averages round down.

``nn.adaptive_avg_pool{1,2,3}d(data, output_size, layout, out_layout)``:
output index ``o`` of a spatial dim of input size ``i`` and output size ``n``
averages the input window ``[floor(o * i / n), ceil((o + 1) * i / n))``;
``output_size`` None keeps the input size, one int is used for every dim.

``nn.onnx_max_pool_indices(data, pool_size, strides, padding, dilation,
ceil_mode, storage_order)`` (NC + 1-3 spatial dims, sizes as max pooling's):
int64, per output position the flattened index into ``data`` of its
window's maximum, ONNX MaxPool's ``Indices``: ``(n * C + c) * (D1 * ... * Dr)``
plus the spatial position flattened row major (``storage_order`` 0) or
column major (1); of equal maxima the first in the window's row-major
order, as ONNX Runtime; taps in the padding never count.
"""

from __future__ import annotations

import numpy as np

from phasec import arith
from phasec import te
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.tir import BinaryOp, Cast, IntImm, PrimExpr, Select
from phasec.op._common import (
    OpPattern, as_bool, as_int, as_str, attrs_of, define, err, int_tuple, opt, tensor_sinfo, tensor_arg,
)
from phasec.op._layout import (
    SPATIAL_LETTERS, Layout, _packed, check_nonneg, check_positive, layout_of, opt_layout,
    padding_nd, spatial,
)
from phasec.op.draw import FLOAT, Hooks, const_dim, declares_draw, nchw_operand, spatial_ok
from phasec.op._lowering import _clamp, _const, _name, _out, _tensor, legalizes
from phasec.te import schedules
from phasec.te.schedules.workloads import PoolWorkload

__all__ = ["pool_out_size", "pool_reference"]


def _attrs(call):
    return attrs_of(call)


def _i64(v: int) -> IntImm:
    return IntImm(int(v), "int64")


def _canonical(rank: int) -> str:
    return "NC" + SPATIAL_LETTERS[rank]


# ---------------------------------------------------------------------------
# Output sizes
# ---------------------------------------------------------------------------

def pool_out_size(in_dim: PrimExpr, k: int, s: int, d: int, p0: int, p1: int,
                  ceil_mode: bool) -> PrimExpr:
    """One spatial output size, TVM 0.27's formula (see the module docstring)."""
    num = (in_dim + (p0 + p1)) - (d * (k - 1) + 1)
    if ceil_mode:
        num = num + (s - 1)
    raw = arith.simplify(num // s + 1)
    if not ceil_mode:
        return raw
    # The last window starts at (raw - 1) * s, which lies in
    # [num - s + 1, num] for num = i + p0 + (p1 - d * (k - 1) + s - 2): it is
    # never past i + p0 when p1 - d * (k - 1) + s - 2 < 0, always when
    # p1 - d * (k - 1) - 1 >= 0 (decided without knowing i).
    slack = p1 - d * (k - 1)
    if slack + s - 2 < 0:
        return raw
    if slack - 1 >= 0:
        return arith.simplify(raw - 1)
    # Otherwise the adjustment depends on i: subtract the indicator
    # [last start >= i + p0], written min(max(last - (i + p0) + 1, 0), 1) rather
    # than a Select (TVM's if_then_else) so the size stays integer arithmetic
    # that buffer shapes in compiled kernels accept.
    last_start = (raw - 1) * s
    over = last_start - (in_dim + p0) + 1
    indicator = te.minimum(te.maximum(over, 0), 1)
    return arith.simplify(raw - indicator)


def _out_sizes_int(in_sizes, a, rank):
    pads = a["padding"]
    out = []
    for j in range(rank):
        k, s, d = a["pool_size"][j], a["strides"][j], a["dilation"][j]
        p0, p1 = pads[j], pads[rank + j]
        num = in_sizes[j] + p0 + p1 - d * (k - 1) - 1 + (s - 1 if a["ceil_mode"] else 0)
        raw = num // s + 1
        if a["ceil_mode"] and (raw - 1) * s >= in_sizes[j] + p0:
            raw -= 1
        out.append(raw)
    return out


def _check_out_positive(call, dims):
    for d in dims:
        v = arith.const_int(d)
        if v is not None and v <= 0:
            raise err(call, "the output spatial size would be non-positive "
                            f"({v}); the window is larger than the padded input")


# ---------------------------------------------------------------------------
# max/avg pool 1d and 3d
# ---------------------------------------------------------------------------

def _infer_pool(rank: int):
    canonical = _canonical(rank)

    def infer(call, ctx):
        data = tensor_arg(call, 0, ctx, "data")
        a = _attrs(call)
        layout = layout_of(call, a["layout"], canonical, "layout", packed=True)
        out_layout = layout_of(call, a["out_layout"] or a["layout"], canonical, "out_layout",
                           packed=True)
        check_positive(call, "pool_size", a["pool_size"])
        check_positive(call, "strides", a["strides"])
        check_positive(call, "dilation", a["dilation"])
        check_nonneg(call, "padding", a["padding"])
        if data.dtype == "bool":
            raise err(call, "pooling does not compute on bool tensors; convert the data first")
        if data.ndim not in (-1, layout.ndim):
            raise err(call, f"{rank}-D pooling expects a {layout.ndim}-D tensor ({layout.name}), "
                            f"but the data has ndim {data.ndim}")
        if data.shape is None:
            return TensorStructInfo(None, data.dtype, out_layout.ndim)
        n, c, *sp = layout.to_canonical(data.shape)
        pads = a["padding"]
        out_sp = [pool_out_size(sp[j], a["pool_size"][j], a["strides"][j], a["dilation"][j],
                                pads[j], pads[rank + j], a["ceil_mode"]) for j in range(rank)]
        _check_out_positive(call, out_sp)
        return tensor_sinfo(out_layout.from_canonical((n, c, *out_sp)), data.dtype)
    return infer


def pool_reference(data, kind, rank, pool_size, strides, padding, dilation, ceil_mode,
                   count_include_pad, layout, out_layout):
    """numpy max/avg pooling over ``rank`` spatial dims in any layout."""
    x = np.asarray(data)
    xc = _ref_layout(layout, rank).array_to_canonical(x)
    in_sizes = xc.shape[2:]
    a = {"pool_size": pool_size, "strides": strides, "padding": padding, "dilation": dilation,
         "ceil_mode": ceil_mode}
    out_sizes = _out_sizes_int(in_sizes, a, rank)
    acc = np.float64 if x.dtype.kind == "f" else np.int64
    low = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    result = np.full(xc.shape[:2] + tuple(out_sizes), low if kind == "max" else 0, acc)
    count = np.zeros(tuple(out_sizes), np.int64)
    for taps in np.ndindex(*pool_size):
        # positions of this tap for every output index, per spatial dim
        pos = [np.arange(out_sizes[j]) * strides[j] - padding[j] + taps[j] * dilation[j]
               for j in range(rank)]
        inside = [(p >= 0) & (p < in_sizes[j]) for j, p in enumerate(pos)]
        padded = [(p >= -padding[j]) & (p < in_sizes[j] + padding[rank + j])
                  for j, p in enumerate(pos)]
        grid = np.ix_(*[np.clip(p, 0, in_sizes[j] - 1) for j, p in enumerate(pos)])
        valid = np.ones(tuple(out_sizes), bool)
        in_pad = np.ones(tuple(out_sizes), bool)
        for j in range(rank):
            shape = [1] * rank
            shape[j] = out_sizes[j]
            valid = valid & inside[j].reshape(shape)
            in_pad = in_pad & padded[j].reshape(shape)
        vals = xc[(slice(None), slice(None)) + grid].astype(acc)
        if kind == "max":
            result = np.where(valid, np.maximum(result, vals), result)
        else:
            result = result + np.where(valid, vals, 0)
            count += (in_pad if count_include_pad else valid)
    if kind == "avg":
        div = np.maximum(count, 1)
        result = result / div if x.dtype.kind == "f" else result // div
    return _ref_layout(out_layout or layout, rank).array_from_canonical(result).astype(x.dtype)


def _ref_layout(name: str, rank: int):
    """The layout of a reference call (inference has checked the attribute)."""
    canonical = _canonical(rank)
    if sorted(name) == sorted(canonical):
        return Layout(name, canonical)
    return _packed(name, canonical)


def _fill_out_layout(attrs: dict) -> dict:
    """``out_layout`` None -> the data layout (TVM's ``out_layout.value_or(layout)``)."""
    if attrs.get("out_layout") is None and isinstance(attrs.get("layout"), str):
        attrs["out_layout"] = attrs["layout"]
    return attrs


def _pool_attrs(rank: int):
    default = (1,) * rank
    return {"pool_size": (default, spatial(rank)), "strides": (default, spatial(rank)),
            "padding": ((0,) * (2 * rank), padding_nd(rank)), "dilation": (default, spatial(rank)),
            "ceil_mode": (False, as_bool), "count_include_pad": (False, as_bool),
            "layout": (_canonical(rank), as_str), "out_layout": (None, opt_layout)}


def _pool_ref(kind: str, rank: int):
    def ref(data, pool_size=(1,) * rank, strides=(1,) * rank, padding=(0,) * (2 * rank),
            dilation=(1,) * rank, ceil_mode=False, count_include_pad=False,
            layout=_canonical(rank), out_layout=None):
        return pool_reference(data, kind, rank, pool_size, strides, padding, dilation, ceil_mode,
                              count_include_pad, layout, out_layout)
    return ref


for _rank in (1, 2, 3):
    for _kind in ("max", "avg"):
        define(f"nn.{_kind}_pool{_rank}d", ("data",), _infer_pool(_rank), attrs=_pool_attrs(_rank),
               reference=_pool_ref(_kind, _rank), pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
               finish=_fill_out_layout,
               doc=f"{_rank}-D {_kind} pooling (layout {_canonical(_rank)} or a permutation).")


def _pool_te(call, inputs, kind: str, rank: int):
    """The pooling's kernel, in the schedule the table of
    :mod:`phasec.te.schedules` picks."""
    x = _tensor(inputs, 0, call)
    out = _out(call)
    a = _attrs(call)
    canonical = _canonical(rank)
    lay = layout_of(call, a["layout"], canonical, "layout", packed=True)
    out_lay = layout_of(call, a["out_layout"] or a["layout"], canonical, "out_layout",
                        packed=True)
    return schedules.schedule_pool(PoolWorkload(
        x, out.shape, kind, rank, tuple(a["pool_size"]),
        tuple(a["strides"]), tuple(a["padding"]), tuple(a["dilation"]),
        a["count_include_pad"], lay, out_lay, a["layout"] == canonical, _name(call)))


for _rank in (1, 2, 3):
    for _kind in ("max", "avg"):
        legalizes(f"nn.{_kind}_pool{_rank}d")(
            lambda call, inputs, k=_kind, r=_rank: _pool_te(call, inputs, k, r))


# ---------------------------------------------------------------------------
# onnx_max_pool_indices: where each max pooling window's maximum is
# ---------------------------------------------------------------------------

def _infer_pool_indices(call, ctx):
    data = tensor_arg(call, 0, ctx, "data")
    a = _attrs(call)
    rank = len(a["pool_size"])
    if rank not in (1, 2, 3):
        raise err(call, f"onnx_max_pool_indices pools 1 to 3 spatial dims, got a pool_size of "
                        f"{rank}")
    for name, n in (("strides", rank), ("dilation", rank), ("padding", 2 * rank)):
        if len(a[name]) != n:
            raise err(call, f"onnx_max_pool_indices needs {n} {name} for a {rank}-D window, "
                            f"got {len(a[name])}")
    check_positive(call, "pool_size", a["pool_size"])
    check_positive(call, "strides", a["strides"])
    check_positive(call, "dilation", a["dilation"])
    check_nonneg(call, "padding", a["padding"])
    if a["storage_order"] not in (0, 1):
        raise err(call, f"storage_order is 0 (row major) or 1 (column major), got "
                        f"{a['storage_order']}")
    if data.dtype == "bool":
        raise err(call, "pooling does not compute on bool tensors; convert the data first")
    if data.ndim not in (-1, rank + 2):
        raise err(call, f"{rank}-D pooling expects a {rank + 2}-D tensor, but the data has ndim "
                        f"{data.ndim}")
    if data.shape is None:
        return TensorStructInfo(None, "int64", rank + 2)
    n, c, *sp = data.shape
    pads = a["padding"]
    out_sp = [pool_out_size(sp[j], a["pool_size"][j], a["strides"][j], a["dilation"][j],
                            pads[j], pads[rank + j], a["ceil_mode"]) for j in range(rank)]
    _check_out_positive(call, out_sp)
    return tensor_sinfo((n, c, *out_sp), "int64")


def _flat_strides(sizes, storage_order: int):
    """Each spatial dim's step in the flattened index (row or column major)."""
    rank = len(sizes)
    out = []
    for j in range(rank):
        step = 1
        for k in (range(j + 1, rank) if storage_order == 0 else range(j)):
            step = step * sizes[k]
        out.append(step)
    return out


def _pool_indices_ref(data, pool_size=(1,), strides=(), padding=(), dilation=(),
                      ceil_mode=False, storage_order=0):
    x = np.asarray(data)
    rank = len(pool_size)
    strides = strides or (1,) * rank
    dilation = dilation or (1,) * rank
    padding = padding or (0,) * (2 * rank)
    sizes = x.shape[2:]
    a = {"pool_size": pool_size, "strides": strides, "padding": padding, "dilation": dilation,
         "ceil_mode": ceil_mode}
    outs = _out_sizes_int(sizes, a, rank)
    steps = _flat_strides(sizes, storage_order)
    n, c = x.shape[:2]
    result = np.full((n, c, *outs), -1, np.int64)
    for b, ch, *o in np.ndindex(n, c, *outs):
        best = None
        for taps in np.ndindex(*pool_size):  # the window in row-major order: the first maximum
            pos = [o[j] * strides[j] - padding[j] + taps[j] * dilation[j] for j in range(rank)]
            if any(p < 0 or p >= sizes[j] for j, p in enumerate(pos)):
                continue
            v = x[(b, ch, *pos)]
            if best is None or v > best:
                best = v
                flat = (b * c + ch) * int(np.prod(sizes)) + sum(p * s for p, s in zip(pos, steps))
                result[(b, ch, *o)] = flat
    return result


define("nn.onnx_max_pool_indices", ("data",), _infer_pool_indices,
       attrs={"pool_size": ((1,), int_tuple), "strides": ((), int_tuple),
              "padding": ((), int_tuple), "dilation": ((), int_tuple),
              "ceil_mode": (False, as_bool), "storage_order": (0, as_int)},
       reference=_pool_indices_ref, pattern=OpPattern.INJECTIVE,
       doc="ONNX MaxPool's Indices: where each window's (first) maximum is, flattened.")


@legalizes("nn.onnx_max_pool_indices")
def _pool_indices_te(call, inputs):
    """Two stages: each window's maximum (taps outside the input left out),
    then the first tap, in the window's row-major order, that equals it."""
    x = _tensor(inputs, 0, call)
    out = _out(call)
    a = _attrs(call)
    rank = len(a["pool_size"])
    sizes = list(x.shape[2:])
    steps = _flat_strides(sizes, a["storage_order"])
    lowest = _const(-np.inf if x.dtype.startswith("float") else
                    int(np.iinfo(x.dtype).min), x.dtype)
    taps = list(np.ndindex(*a["pool_size"]))

    def tap(o, t):
        pos = [BinaryOp("+", BinaryOp("-", BinaryOp("*", o[j], _i64(a["strides"][j])),
                                      _i64(a["padding"][j])), _i64(t[j] * a["dilation"][j]))
               for j in range(rank)]
        inside = None
        for j, p in enumerate(pos):
            ok = BinaryOp("and", BinaryOp(">=", p, _i64(0)), BinaryOp("<", p, sizes[j]))
            inside = ok if inside is None else BinaryOp("and", inside, ok)
        return pos, inside

    def maximum(b, ch, *o):
        best = None
        for t in taps:
            pos, inside = tap(o, t)
            v = Select(inside, x[(b, ch, *(_clamp(p, sizes[j]) for j, p in enumerate(pos)))],
                       lowest)
            best = v if best is None else BinaryOp("max", best, v)
        return best
    mx = te.compute(out.shape, maximum, name="T_pool_max", inline=False)
    total = _i64(1)
    for d in sizes:
        total = BinaryOp("*", total, d)

    def first(b, ch, *o):
        found = _i64(-1)
        base = BinaryOp("*", BinaryOp("+", BinaryOp("*", b, x.shape[1]), ch), total)
        for t in reversed(taps):
            pos, inside = tap(o, t)
            v = x[(b, ch, *(_clamp(p, sizes[j]) for j, p in enumerate(pos)))]
            hit = BinaryOp("and", inside, BinaryOp("==", v, mx[(b, ch, *o)]))
            flat = base
            for p, s in zip(pos, steps):
                flat = BinaryOp("+", flat, BinaryOp("*", p, s if not isinstance(s, int)
                                                    else _i64(s)))
            found = Select(hit, flat, found)
        return found
    return te.compute(out.shape, first, name=_name(call))


def _draw_pool_indices(ctx):
    rank = len(ctx.shape) - 2
    kernel = tuple(ctx.integers(1, min(3, d)) for d in ctx.shape[2:])
    strides = tuple(ctx.integers(1, 2) for _ in range(rank))
    pads = tuple(ctx.integers(0, k - 1) for k in kernel) * 2
    ctx.result_in(-1.0, float(int(np.prod(ctx.shape)) - 1))
    return (ctx.x,), {"pool_size": kernel, "strides": strides, "padding": pads,
                      "dilation": (1,) * rank, "storage_order": ctx.choose([0, 1])}


declares_draw("nn.onnx_max_pool_indices", ranks=(3, 4, 5), build=_draw_pool_indices,
              out="index")


# ---------------------------------------------------------------------------
# adaptive_avg_pool1d/2d/3d
# ---------------------------------------------------------------------------

def _output_size(rank: int):
    def norm(v):
        t = int_tuple(v)
        if len(t) == 1:
            t = t * rank
        if len(t) != rank:
            raise ValueError(f"expected 1 or {rank} integers, got {len(t)}")
        if any(s <= 0 for s in t):
            raise ValueError(f"output sizes must be positive, got {t}")
        return t
    return opt(norm)


def _infer_adaptive(rank: int):
    canonical = _canonical(rank)

    def infer(call, ctx):
        data = tensor_arg(call, 0, ctx, "data")
        a = _attrs(call)
        layout = layout_of(call, a["layout"], canonical, "layout", packed=True)
        out_layout = layout_of(call, a["out_layout"] or a["layout"], canonical, "out_layout",
                           packed=True)
        if data.dtype == "bool":
            raise err(call, "pooling does not compute on bool tensors; convert the data first")
        if data.ndim not in (-1, layout.ndim):
            raise err(call, f"adaptive_avg_pool{rank}d expects a {layout.ndim}-D tensor "
                            f"({layout.name}), but the data has ndim {data.ndim}")
        if data.shape is None:
            return TensorStructInfo(None, data.dtype, out_layout.ndim)
        n, c, *sp = layout.to_canonical(data.shape)
        if a["output_size"] is not None:
            sp = [_i64(s) for s in a["output_size"]]
        return tensor_sinfo(out_layout.from_canonical((n, c, *sp)), data.dtype)
    return infer


def _adaptive_ref(rank: int):
    def ref(data, output_size=None, layout=_canonical(rank), out_layout=None):
        x = np.asarray(data)
        xc = _ref_layout(layout, rank).array_to_canonical(x)
        in_sizes = xc.shape[2:]
        sizes = output_size if output_size is not None else in_sizes
        acc = np.float64 if x.dtype.kind == "f" else np.int64
        out = np.zeros(xc.shape[:2] + tuple(sizes), acc)
        for o in np.ndindex(*sizes):
            window = tuple(slice((o[j] * in_sizes[j]) // sizes[j],
                                 -((-(o[j] + 1) * in_sizes[j]) // sizes[j]))
                           for j in range(rank))
            block = xc[(slice(None), slice(None)) + window].astype(acc)
            total = block.sum(axis=tuple(range(2, 2 + rank)))
            cnt = int(np.prod([w.stop - w.start for w in window]))
            out[(slice(None), slice(None)) + o] = total / cnt if acc is np.float64 else total // cnt
        return _ref_layout(out_layout or layout, rank).array_from_canonical(out).astype(x.dtype)
    return ref


for _rank in (1, 2, 3):
    define(f"nn.adaptive_avg_pool{_rank}d", ("data",), _infer_adaptive(_rank),
           attrs={"output_size": (None, _output_size(_rank)),
                  "layout": (_canonical(_rank), as_str), "out_layout": (None, opt_layout)},
           reference=_adaptive_ref(_rank), pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
           finish=_fill_out_layout,
           doc=f"{_rank}-D adaptive average pooling to ``output_size``.")


def _max_window(in_dim: PrimExpr, out_dim: PrimExpr) -> PrimExpr:
    """The longest adaptive window: exact for static sizes, else ceil(i / n) + 1."""
    i, n = arith.const_int(in_dim), arith.const_int(out_dim)
    if i is not None and n is not None:
        return _i64(max(-((-(o + 1) * i) // n) - (o * i) // n for o in range(n)))
    return arith.simplify((in_dim + out_dim - 1) // out_dim + 1)


def _adaptive_te(call, inputs, rank: int):
    x = _tensor(inputs, 0, call)
    out = _out(call)
    a = _attrs(call)
    canonical = _canonical(rank)
    lay = layout_of(call, a["layout"], canonical, "layout", packed=True)
    out_lay = layout_of(call, a["out_layout"] or a["layout"], canonical, "out_layout",
                           packed=True)
    in_sp = lay.to_canonical(x.shape)[2:]
    out_sp = out_lay.to_canonical(out.shape)[2:]
    dt = x.dtype
    acc = dt if dt.startswith("float") else "int64"
    taps = [te.reduce_axis(_max_window(in_sp[j], out_sp[j]), f"r{j}") for j in range(rank)]

    def bounds(oi):
        starts, ends = [], []
        for j in range(rank):
            starts.append(oi[j] * in_sp[j] // out_sp[j])
            # ceil((o + 1) * i / n) for non-negative operands
            ends.append(((oi[j] + 1) * in_sp[j] + (out_sp[j] - 1)) // out_sp[j])
        return starts, ends

    def total(*o):
        n, c, *oi = out_lay.index_to_canonical(o)
        starts, ends = bounds(oi)
        pos = [starts[j] + taps[j].var for j in range(rank)]
        inside = te.all_of(*[te.lt(pos[j], ends[j]) for j in range(rank)])
        idx = lay.index_from_canonical((n, c, *[_clamp(p, in_sp[j]) for j, p in enumerate(pos)]))
        return te.sum(te.select(inside, te.cast(x[idx], acc), _const(0, acc)), axis=taps)
    s = te.compute(out.shape, total, name=_name(call) + "_sum")

    def body(*o):
        _, _, *oi = out_lay.index_to_canonical(o)
        starts, ends = bounds(oi)
        cnt: PrimExpr = _i64(1)
        for j in range(rank):
            cnt = cnt * (ends[j] - starts[j])
        if dt.startswith("float"):
            return s[o] / Cast(dt, cnt)
        return te.cast(s[o] // cnt, dt)
    return te.compute(out.shape, body, name=_name(call))


for _rank in (1, 2, 3):
    legalizes(f"nn.adaptive_avg_pool{_rank}d")(
        lambda call, inputs, r=_rank: _adaptive_te(call, inputs, r))


# ---------------------------------------------------------------------------
# How the fuzzing generator draws these operators (phasec.testing)
# ---------------------------------------------------------------------------

def _spatial_shape(rank: int):
    top = 4 if rank < 3 else 3
    return lambda pick: (pick([1, 2]), pick([1, 2, 3]),
                         *(pick(range(2, top + 1)) for _ in range(rank)))


def _draw_pool(rank: int, avg: bool):
    def build(ctx):
        spatial = ctx.shape[2:]
        size = tuple(ctx.integers(1, min(2, d)) for d in spatial)
        pad = tuple(ctx.choose([0, 1]) if k > 1 else 0 for k in size) * 2
        attrs = {"pool_size": size, "strides": tuple(ctx.choose([1, 2]) for _ in spatial),
                 "padding": pad, "ceil_mode": ctx.choose([False, True])}
        if avg:
            attrs["count_include_pad"] = ctx.choose([False, True])
            ctx.include(0, 0)
        return (ctx.x,), attrs
    return build


def _draw_adaptive(ctx):
    size = ctx.choose([None, tuple(ctx.integers(1, d + 1) for d in ctx.shape[2:])])
    return (ctx.x,), {"output_size": size}


for _rank in (1, 3):
    declares_draw(f"nn.max_pool{_rank}d", ranks=(_rank + 2,), shape=_spatial_shape(_rank),
                  build=_draw_pool(_rank, False))
    declares_draw(f"nn.avg_pool{_rank}d", ranks=(_rank + 2,), shape=_spatial_shape(_rank),
                  build=_draw_pool(_rank, True))
for _rank in (1, 2, 3):
    declares_draw(f"nn.adaptive_avg_pool{_rank}d", ranks=(_rank + 2,),
                  shape=_spatial_shape(_rank), build=_draw_adaptive)


def _pool2d_draw(name: str, order: int) -> Hooks:
    """NCHW data, a square window of 1 or 2, strides 1 or 2 (the result within the data's interval)."""
    def build(g, x):
        from phasec.op.calls import call_op

        h, w = const_dim(x.shape[2]), const_dim(x.shape[3])
        size = g.pick([s for s in (1, 2) if s <= min(h, w)])
        stride = g.pick([1, 2])
        call = call_op("relax." + name, x.expr, pool_size=(size, size), strides=(stride, stride))
        return g.emit(call, FLOAT, (x.lo, x.hi))

    return Hooks(build, (FLOAT,), accepts=lambda g, x: spatial_ok(x), operand=nchw_operand,
                 order=order)


declares_draw("nn.max_pool2d", _pool2d_draw("nn.max_pool2d", 63))
declares_draw("nn.avg_pool2d", _pool2d_draw("nn.avg_pool2d", 64))

"""Convolutions over 1, 2 and 3 spatial dims (``nn.conv{1,2,3}d``) and
transposed convolutions over 1, 2 and 3 (``nn.conv{1,2,3}d_transpose``, below).

Attributes as TVM 0.27: ``strides``, ``dilation`` (1 or r ints), ``padding``
(1, r or 2r ints: the r leading pads, then the r trailing pads), ``groups``,
``data_layout`` (a permutation of ``NCW`` / ``NCHW`` / ``NCDHW``: ``NHWC``...),
``kernel_layout`` (a permutation of ``OIW`` / ``OIHW`` / ``OIDHW``: ``HWIO``,
``OHWI``...), ``out_layout`` (None becomes the data layout when the call is
built, as TVM's constructor does) and ``out_dtype`` ("void": the operands'
dtype). Every layout lowers through the same kernel: its indices are
permuted into the canonical order (index generalization), so no transpose
is materialized. Cross-correlation, as TVM
and PyTorch; the kernel has ``C / groups`` input channels and its output
channels are split evenly between the groups. Output size per spatial dim::

    out = (i + p0 + p1 - d * (k - 1) - 1) // s + 1
"""

from __future__ import annotations

import math

import numpy as np

from phasec import arith
from phasec.ir.text import prim_expr_to_str
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.tir import IntImm
from phasec.op._common import (
    OpPattern, as_dtype, as_int, as_str, attrs_of, binary_dtype, define, err, tensor_arg,
    tensor_sinfo,
)
from phasec.op._layout import (
    Layout, SPATIAL_LETTERS, _packed, check_nonneg, check_positive, layout_of, opt_layout,
    padding_nd, spatial,
)
from phasec.op.draw import FLOAT, VALUE_CAP, Hooks, const_dim, declares_draw, nchw_operand, spatial_ok
from phasec.op._lowering import _out, _tensor, legalizes
from phasec.te import schedules
from phasec.te.schedules.workloads import ConvTransposeWorkload, ConvWorkload

__all__ = ["conv_reference", "conv_transpose_reference"]


def _attrs(call):
    return attrs_of(call)


def _i64(v: int) -> IntImm:
    return IntImm(int(v), "int64")


def _data_layout(rank: int) -> str:
    return "NC" + SPATIAL_LETTERS[rank]


def _kernel_layout(rank: int) -> str:
    return "OI" + SPATIAL_LETTERS[rank]


def _conv_out(in_dim, k, s, d, p0, p1):
    num = (in_dim + (p0 + p1)) - (_i64(d) * (k - 1) + 1)
    return arith.simplify(num // s + 1)


def _infer_conv(rank: int):
    def infer(call, ctx):
        data = tensor_arg(call, 0, ctx, "data")
        weight = tensor_arg(call, 1, ctx, "weight")
        a = _attrs(call)
        dl = layout_of(call, a["data_layout"], _data_layout(rank), "data_layout", packed=True)
        kl = layout_of(call, a["kernel_layout"], _kernel_layout(rank), "kernel_layout", packed=True)
        ol = layout_of(call, a["out_layout"] or a["data_layout"], _data_layout(rank), "out_layout", packed=True)
        check_positive(call, "strides", a["strides"])
        check_positive(call, "dilation", a["dilation"])
        check_nonneg(call, "padding", a["padding"])
        groups = a["groups"]
        if groups < 1:
            raise err(call, f"groups must be positive, got {groups}")
        for sinfo, what, lay in ((data, "data", dl), (weight, "weight", kl)):
            if sinfo.dtype == "bool":
                raise err(call, f"conv{rank}d does not compute on bool tensors ({what})")
            if sinfo.ndim not in (-1, lay.ndim):
                raise err(call, f"conv{rank}d expects a {lay.ndim}-D {what} tensor "
                                f"({lay.name}), but it has ndim {sinfo.ndim}")
        dtype = a["out_dtype"] if a["out_dtype"] != "void" else binary_dtype(call, data, weight)
        if data.shape is None or weight.shape is None:
            return TensorStructInfo(None, dtype, ol.ndim)
        n, c, *sp = dl.to_canonical(data.shape)
        o, i, *ks = kl.to_canonical(weight.shape)
        if arith.prove_not_equal(c, i * groups):
            raise err(call, f"the data has {prim_expr_to_str(c)} input channels but the weight "
                            f"expects {prim_expr_to_str(i)} x groups({groups})")
        oc = arith.const_int(o)
        if oc is not None and oc % groups:
            raise err(call, f"the weight's {oc} output channels are not divisible by "
                            f"groups={groups}")
        pads = a["padding"]
        out_sp = [_conv_out(sp[j], ks[j], a["strides"][j], a["dilation"][j], pads[j],
                            pads[rank + j]) for j in range(rank)]
        for d in out_sp:
            v = arith.const_int(d)
            if v is not None and v <= 0:
                raise err(call, f"the output spatial size would be non-positive ({v}); the "
                                "kernel is larger than the padded input")
        _check_packed_out(call, ol, (n, o, *out_sp))
        return tensor_sinfo(ol.from_canonical((n, o, *out_sp)), dtype)
    return infer


def _check_packed_out(call, layout, dims) -> None:
    """A packed output layout (NCHW4c) must divide the dimension it packs."""
    for letter, f in getattr(layout, "factors", {}).items():
        v = arith.const_int(dims[layout.canonical.index(letter)])
        if v is not None and v % f:
            raise err(call, f"out_layout {layout.name!r} packs {letter} by {f}, but the output "
                            f"has {v}")


def _layouts(rank: int, data_layout: str, kernel_layout: str, out_layout, transpose=False):
    """The Layout objects of a reference call (the attributes were checked by inference)."""
    def get(name, canonical):
        if sorted(name) == sorted(canonical):
            return Layout(name, canonical)
        return _packed(name, canonical)
    kcan = _transpose_kernel_layout(rank) if transpose else _kernel_layout(rank)
    return (get(data_layout, _data_layout(rank)), get(kernel_layout, kcan),
            get(out_layout or data_layout, _data_layout(rank)))


def conv_reference(data, weight, rank, strides, padding, dilation, groups, data_layout,
                   kernel_layout, out_layout, out_dtype):
    """numpy N-d grouped, dilated, strided convolution in any layout."""
    x, w = np.asarray(data), np.asarray(weight)
    dtype = np.dtype(x.dtype if out_dtype == "void" else out_dtype)
    acc = np.float64 if dtype.kind == "f" else np.int64
    dl, kl, ol = _layouts(rank, data_layout, kernel_layout, out_layout)
    x = dl.array_to_canonical(x).astype(acc)
    w = kl.array_to_canonical(w).astype(acc)
    x = np.pad(x, [(0, 0), (0, 0)] + [(padding[j], padding[rank + j]) for j in range(rank)])
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    ks = w.shape[2:]
    out_sp = [(x.shape[2 + j] - dilation[j] * (ks[j] - 1) - 1) // strides[j] + 1
              for j in range(rank)]
    out = np.zeros((n, o, *out_sp), acc)
    og = o // groups
    for g in range(groups):
        xs = x[:, g * cg:(g + 1) * cg]
        ws = w[g * og:(g + 1) * og]
        for taps in np.ndindex(*ks):
            window = tuple(slice(taps[j] * dilation[j],
                                 taps[j] * dilation[j] + strides[j] * (out_sp[j] - 1) + 1,
                                 strides[j]) for j in range(rank))
            patch = xs[(slice(None), slice(None)) + window]
            out[:, g * og:(g + 1) * og] += np.tensordot(
                patch, ws[(slice(None), slice(None)) + taps], axes=([1], [1])).transpose(
                    [0, rank + 1] + list(range(1, rank + 1)))
    return ol.array_from_canonical(out).astype(dtype)


def _conv_ref(rank: int):
    def ref(data, weight, strides=(1,) * rank, padding=(0,) * (2 * rank), dilation=(1,) * rank,
            groups=1, data_layout=_data_layout(rank), kernel_layout=_kernel_layout(rank),
            out_layout=None, out_dtype="void"):
        return conv_reference(data, weight, rank, strides, padding, dilation, groups,
                              data_layout, kernel_layout, out_layout, out_dtype)
    return ref


def _conv_attrs(rank: int):
    one = (1,) * rank
    return {"strides": (one, spatial(rank)), "padding": ((0,) * (2 * rank), padding_nd(rank)),
            "dilation": (one, spatial(rank)), "groups": (1, as_int),
            "data_layout": (_data_layout(rank), as_str),
            "kernel_layout": (_kernel_layout(rank), as_str),
            "out_layout": (None, opt_layout), "out_dtype": ("void", as_dtype)}


def _fill_out_layout(attrs: dict) -> dict:
    """``out_layout`` None -> the data layout (TVM's ``out_layout.value_or(data_layout)``)."""
    if attrs.get("out_layout") is None and isinstance(attrs.get("data_layout"), str):
        attrs["out_layout"] = attrs["data_layout"]
    return attrs


for _rank in (1, 2, 3):
    define(f"nn.conv{_rank}d", ("data", "weight"), _infer_conv(_rank), attrs=_conv_attrs(_rank),
           reference=_conv_ref(_rank), pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
           finish=_fill_out_layout,
           doc=f"{_rank}-D convolution (layouts {_data_layout(_rank)}/{_kernel_layout(_rank)} "
               "or permutations), groups, dilation.")


def _conv_te(call, inputs, rank: int):
    """The convolution's kernel, in the schedule the table of
    :mod:`phasec.te.schedules` picks (Winograd, flat rows, im2col, direct)."""
    data, weight = _tensor(inputs, 0, call), _tensor(inputs, 1, call)
    out = _out(call)
    a = _attrs(call)
    dl = layout_of(call, a["data_layout"], _data_layout(rank), "data_layout", packed=True)
    kl = layout_of(call, a["kernel_layout"], _kernel_layout(rank), "kernel_layout", packed=True)
    ol = layout_of(call, a["out_layout"] or a["data_layout"], _data_layout(rank), "out_layout", packed=True)
    return schedules.schedule_conv(ConvWorkload(
        data, weight, out.shape, out.dtype, rank, tuple(a["strides"]), tuple(a["padding"]),
        tuple(a["dilation"]), a["groups"], dl, kl, ol))


for _rank in (1, 2, 3):
    legalizes(f"nn.conv{_rank}d")(lambda call, inputs, r=_rank: _conv_te(call, inputs, r))


# ---------------------------------------------------------------------------
# conv1d_transpose, conv2d_transpose, conv3d_transpose
# ---------------------------------------------------------------------------
#
# The kernel is (in channels, out channels per group, *window) in canonical
# order (IOW / IOHW / IODHW, or any permutation); the result has
# out-per-group x groups channels. Each input element at position i scatters
# ``data * weight`` to output position ``i * s - p0 + t * d`` for every tap t:
#
#     out = (i - 1) * s - p0 - p1 + d * (k - 1) + output_padding + 1
#
# ``output_padding`` (less than the stride, as TVM checks) lengthens the
# output at the end.

def _transpose_kernel_layout(rank: int) -> str:
    return "IO" + SPATIAL_LETTERS[rank]


def _infer_conv_transpose(rank: int):
    def infer(call, ctx):
        data = tensor_arg(call, 0, ctx, "data")
        weight = tensor_arg(call, 1, ctx, "weight")
        a = _attrs(call)
        name = f"conv{rank}d_transpose"
        dl = layout_of(call, a["data_layout"], _data_layout(rank), "data_layout", packed=True)
        kl = layout_of(call, a["kernel_layout"], _transpose_kernel_layout(rank), "kernel_layout", packed=True)
        ol = layout_of(call, a["out_layout"] or a["data_layout"], _data_layout(rank), "out_layout", packed=True)
        check_positive(call, "strides", a["strides"])
        check_positive(call, "dilation", a["dilation"])
        check_nonneg(call, "padding", a["padding"])
        check_nonneg(call, "output_padding", a["output_padding"])
        groups = a["groups"]
        if groups < 1:
            raise err(call, f"groups must be positive, got {groups}")
        if any(op >= s for op, s in zip(a["output_padding"], a["strides"])):
            raise err(call, f"output_padding {a['output_padding']} must be less than the strides "
                            f"{a['strides']}")
        for sinfo, what, lay in ((data, "data", dl), (weight, "weight", kl)):
            if sinfo.dtype == "bool":
                raise err(call, f"{name} does not compute on bool tensors ({what})")
            if sinfo.ndim not in (-1, lay.ndim):
                raise err(call, f"{name} expects a {lay.ndim}-D {what} tensor ({lay.name}), "
                                f"but it has ndim {sinfo.ndim}")
        dtype = a["out_dtype"] if a["out_dtype"] != "void" else binary_dtype(call, data, weight)
        if data.shape is None or weight.shape is None:
            return TensorStructInfo(None, dtype, ol.ndim)
        n, c, *sp = dl.to_canonical(data.shape)
        i, o, *ks = kl.to_canonical(weight.shape)
        if arith.prove_not_equal(c, i):
            raise err(call, f"the data has {prim_expr_to_str(c)} channels but the weight's input "
                            f"channels are {prim_expr_to_str(i)}")
        ic = arith.const_int(i)
        if ic is not None and ic % groups:
            raise err(call, f"the weight's {ic} input channels are not divisible by "
                            f"groups={groups}")
        pads = a["padding"]
        out_sp = []
        for j in range(rank):
            size = arith.simplify((sp[j] - 1) * a["strides"][j] + (
                _i64(a["dilation"][j]) * (ks[j] - 1)
                + (a["output_padding"][j] + 1 - pads[j] - pads[rank + j])))
            v = arith.const_int(size)
            if v is not None and v <= 0:
                raise err(call, f"the output spatial size would be non-positive ({v}); the "
                                "padding removes the whole output")
            out_sp.append(size)
        oc = arith.simplify(o * groups)
        _check_packed_out(call, ol, (n, oc, *out_sp))
        return tensor_sinfo(ol.from_canonical((n, oc, *out_sp)), dtype)
    return infer


def conv_transpose_reference(data, weight, rank, strides, padding, output_padding, dilation,
                             groups, data_layout, kernel_layout, out_layout, out_dtype):
    """numpy transposed convolution: every input element scatters into the output."""
    x, w = np.asarray(data), np.asarray(weight)
    dtype = np.dtype(x.dtype if out_dtype == "void" else out_dtype)
    acc = np.float64 if dtype.kind == "f" else np.int64
    dl, kl, ol = _layouts(rank, data_layout, kernel_layout, out_layout, transpose=True)
    x = dl.array_to_canonical(x).astype(acc)
    w = kl.array_to_canonical(w).astype(acc)
    n, c, *sp = x.shape
    _, og, *ks = w.shape
    cg = c // groups
    full = [(sp[j] - 1) * strides[j] + dilation[j] * (ks[j] - 1) + 1 + output_padding[j]
            for j in range(rank)]
    out = np.zeros((n, og * groups, *full), acc)
    for g in range(groups):
        xs = x[:, g * cg:(g + 1) * cg]
        ws = w[g * cg:(g + 1) * cg]
        for taps in np.ndindex(*ks):
            # (n, cg, *sp) x (cg, og) -> (n, og, *sp), scattered with stride s
            contrib = np.moveaxis(np.tensordot(xs, ws[(slice(None), slice(None)) + taps],
                                               axes=([1], [0])), -1, 1)
            window = tuple(slice(taps[j] * dilation[j],
                                 taps[j] * dilation[j] + strides[j] * (sp[j] - 1) + 1, strides[j])
                           for j in range(rank))
            out[(slice(None), slice(g * og, (g + 1) * og)) + window] += contrib
    crop = tuple(slice(padding[j], full[j] - padding[rank + j]) for j in range(rank))
    out = out[(slice(None), slice(None)) + crop]
    return ol.array_from_canonical(out).astype(dtype)


def _conv_transpose_ref(rank: int):
    def ref(data, weight, strides=(1,) * rank, padding=(0,) * (2 * rank),
            output_padding=(0,) * rank, dilation=(1,) * rank, groups=1,
            data_layout=_data_layout(rank), kernel_layout=_transpose_kernel_layout(rank),
            out_layout=None, out_dtype="void"):
        return conv_transpose_reference(data, weight, rank, strides, padding, output_padding,
                                        dilation, groups, data_layout, kernel_layout, out_layout,
                                        out_dtype)
    return ref


def _conv_transpose_attrs(rank: int):
    one = (1,) * rank
    return {"strides": (one, spatial(rank)), "padding": ((0,) * (2 * rank), padding_nd(rank)),
            "output_padding": ((0,) * rank, spatial(rank)),
            "dilation": (one, spatial(rank)), "groups": (1, as_int),
            "data_layout": (_data_layout(rank), as_str),
            "kernel_layout": (_transpose_kernel_layout(rank), as_str),
            "out_layout": (None, opt_layout), "out_dtype": ("void", as_dtype)}


for _rank in (1, 2, 3):
    define(f"nn.conv{_rank}d_transpose", ("data", "weight"), _infer_conv_transpose(_rank),
           attrs=_conv_transpose_attrs(_rank), reference=_conv_transpose_ref(_rank),
           pattern=OpPattern.OUT_ELEMWISE_FUSABLE, finish=_fill_out_layout,
           doc=f"{_rank}-D transposed convolution (layouts {_data_layout(_rank)}/"
               f"{_transpose_kernel_layout(_rank)} or permutations), groups, dilation, "
               "output_padding.")


def _conv_transpose_te(call, inputs, rank: int):
    """The transposed convolution's kernel, in the schedule the table of
    :mod:`phasec.te.schedules` picks (sub-pixel phases, or the gather)."""
    data, weight = _tensor(inputs, 0, call), _tensor(inputs, 1, call)
    out = _out(call)
    a = _attrs(call)
    dl = layout_of(call, a["data_layout"], _data_layout(rank), "data_layout", packed=True)
    kl = layout_of(call, a["kernel_layout"], _transpose_kernel_layout(rank), "kernel_layout",
                   packed=True)
    ol = layout_of(call, a["out_layout"] or a["data_layout"], _data_layout(rank), "out_layout",
                   packed=True)
    return schedules.schedule_conv_transpose(ConvTransposeWorkload(
        data, weight, out.shape, out.dtype, rank, tuple(a["strides"]), tuple(a["padding"]),
        tuple(a["output_padding"]), tuple(a["dilation"]), a["groups"], dl, kl, ol))


for _rank in (1, 2, 3):
    legalizes(f"nn.conv{_rank}d_transpose")(
        lambda call, inputs, r=_rank: _conv_transpose_te(call, inputs, r))


# ---------------------------------------------------------------------------
# How the fuzzing generator draws these operators (phasec.testing)
# ---------------------------------------------------------------------------

def _conv_shape(rank: int):
    top = 4 if rank < 3 else 3
    return lambda pick: (pick([1, 2]), pick([1, 2, 3, 4]),
                         *(pick(range(2, top + 1)) for _ in range(rank)))


def _draw_conv(rank: int, transpose: bool):
    def build(ctx):
        c, spatial = ctx.shape[1], ctx.shape[2:]
        groups = ctx.choose([g for g in range(1, c + 1) if c % g == 0])
        per_group = ctx.integers(1, 2)
        kernel = tuple(ctx.integers(1, min(3, d)) for d in spatial)
        strides = tuple(ctx.choose([1, 2]) for _ in spatial)
        pads = [ctx.choose([0, 1]) for _ in range(rank)]
        if transpose:  # output (i - 1) * s - 2 p + k: keep it positive
            pads = [0 if (i - 1) * s + k - 2 * p < 1 else p
                    for i, s, k, p in zip(spatial, strides, kernel, pads)]
        pads = tuple(pads) * 2
        if transpose:
            weight = ctx.const((c, per_group, *kernel), -1.0, 1.0)
            taps = (c // groups) * math.prod(kernel)
        else:
            weight = ctx.const((groups * per_group, c // groups, *kernel), -1.0, 1.0)
            taps = (c // groups) * math.prod(kernel)
        bound = taps * ctx.mag
        ctx.result_in(-bound, bound)
        return (ctx.x, weight), {"strides": strides, "padding": pads, "groups": groups}
    return build


for _rank in (1, 3):
    declares_draw(f"nn.conv{_rank}d", ranks=(_rank + 2,), shape=_conv_shape(_rank),
                  build=_draw_conv(_rank, False))
for _rank in (1, 2, 3):
    declares_draw(f"nn.conv{_rank}d_transpose", ranks=(_rank + 2,), shape=_conv_shape(_rank),
                  build=_draw_conv(_rank, True))


def _conv2d_build(g, x):
    """NCHW data, a constant OIHW weight of 1..3 square-ish kernels, padding 0 or 1."""
    from phasec.op.calls import call_op

    c = const_dim(x.shape[1])
    h, w = const_dim(x.shape[2]), const_dim(x.shape[3])
    kh = g.pick([k for k in (1, 2, 3) if k <= h + 2])
    kw = g.pick([k for k in (1, 2, 3) if k <= w + 2])
    pad = g.pick([0, 1])
    if h + 2 * pad < kh or w + 2 * pad < kw:
        kh = kw = 1
    out = g.pick(list(range(1, g.cfg.max_dim + 1)))
    weight = g.constant((out, c, kh, kw), (-1.0, 1.0), "float32")
    call = call_op("relax.nn.conv2d", x.expr, weight.expr, padding=pad)
    bound = c * kh * kw * x.mag * weight.mag
    return g.emit(call, FLOAT, (-bound, bound))


declares_draw("nn.conv2d", Hooks(_conv2d_build, (FLOAT,), accepts=lambda g, x: (
    spatial_ok(x) and const_dim(x.shape[1]) * 9 * x.mag <= VALUE_CAP),
    operand=nchw_operand, order=62))

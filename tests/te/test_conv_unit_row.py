"""A 1-D convolution over short rows computed as a 2-D one of one row
(``te.schedules.conv_unit_row``: views of the 1-D operands, the 2-D table's
matmul over the output channels, read back). The values against a numpy
1-D convolution written out here, on LLVM and on the TIR interpreter, with
bias and relu fused, for padding, strides, dilation, groups, a
channels-last layout, float64, prime sizes and a symbolic batch; that a
constant weight is packed once per build through its views; and that long
rows stay with the direct schedule."""

from __future__ import annotations

import numpy as np
import pytest

import phasec
from phasec.backend.llvm import compile_prim_funcs
from phasec.ir import Constant, TensorStructInfo, Var, tir
from phasec.ir.tir import IntImm
from phasec.op import call_op
from phasec.op.legalize import lower_fused
from phasec.pipeline import lower
from phasec.script.builder import BlockBuilder
from phasec.te import operation as te
from phasec.te.schedules import conv_unit_row
from phasec.te.schedules.gemm import PACK_MARK
from phasec.te.schedules.gemm_operands import reads_flat_reduction
from phasec.te.schedules.workloads import CanonicalLayout, ConvWorkload

from helpers.legalize import check_depthwise, fused, tvar, walk

RNG = np.random.default_rng(47)


def _conv1d(x, w, stride=1, pad=(0, 0), dilation=1, groups=1):
    """The cross-correlation of ``x`` [N, C, L] with ``w`` [O, C/groups, K],
    element by element in float64."""
    n, c, _ = x.shape
    o, cg, k = w.shape
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), pad])
    length = (xp.shape[2] - dilation * (k - 1) - 1) // stride + 1
    og = o // groups
    out = np.zeros((n, o, length))
    for oc in range(o):
        g = oc // og
        for pos in range(length):
            taps = xp[:, g * cg:(g + 1) * cg, pos * stride:pos * stride + dilation * (k - 1) + 1:
                      dilation]
            out[:, oc, pos] = (taps * w[oc].astype(np.float64)).sum(axis=(1, 2))
    return out


CASES = {  # (data NCL, weight OIK, attrs)
    "encoder_4_to_2": ((4, 128, 4), (64, 128, 3), {"strides": (2,), "padding": (1, 1)}),
    "one_position": ((4, 64, 1), (128, 64, 3), {"padding": (1, 1)}),
    "frames": ((3, 1, 71), (37, 1, 16), {"strides": (8,)}),
    "dilated_prime": ((2, 7, 13), (19, 7, 3), {"padding": (2, 1), "dilation": (2,)}),
    "groups": ((2, 6, 9), (9, 2, 3), {"padding": (1, 1), "groups": 3}),
    "depthwise": ((3, 20, 11), (20, 1, 5), {"padding": (2, 2), "groups": 20}),
    "depthwise_9_taps": ((2, 24, 12), (24, 1, 9), {"padding": (4, 4), "groups": 24}),
    "pointwise": ((5, 33, 3), (17, 33, 1), {}),
}


def _attrs_1d(attrs):
    return {"strides": attrs.get("strides", (1,)), "pad": attrs.get("padding", (0, 0)),
            "dilation": attrs.get("dilation", (1,))[0], "groups": attrs.get("groups", 1)}


def _want(x, w, b, attrs):
    a = _attrs_1d(attrs)
    return np.maximum(_conv1d(x, w, a["strides"][0], a["pad"], a["dilation"], a["groups"])
                      + b, 0)


def _lowered(xs, ws, dtype="float32", **attrs):
    d, w = tvar("d", xs, dtype), tvar("w", ws, dtype)
    b = tvar("b", (1, ws[0], 1), dtype)
    return lower_fused(fused([d, w, b], lambda bb: call_op("nn.relu", bb.emit(call_op(
        "add", bb.emit(call_op("nn.conv1d", d, w, **attrs)), b)))))


@pytest.mark.parametrize("name", list(CASES))
def test_short_rows_match_numpy(name):
    xs, ws, attrs = CASES[name]
    low = _lowered(xs, ws, **attrs)
    x = RNG.standard_normal(xs).astype("float32")
    w = RNG.standard_normal(ws).astype("float32")
    b = RNG.standard_normal((1, ws[0], 1)).astype("float32")
    check_depthwise(low.prim_func, x, w, b, _want(x, w, b, attrs),
                    name in ("one_position", "groups"))


def test_channels_last_and_float64():
    low = _lowered((2, 5, 6), (4, 6, 3), "float64", padding=(1, 1), data_layout="NWC",
                   out_layout="NCW")
    x = RNG.standard_normal((2, 5, 6))
    w = RNG.standard_normal((4, 6, 3))
    b = RNG.standard_normal((1, 4, 1))
    want = _want(x.transpose(0, 2, 1), w, b, {"padding": (1, 1)})
    got = np.zeros(want.shape)
    compile_prim_funcs({"k": low.prim_func})["k"](x, w, b, got)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_symbolic_batch():
    n = tir.Var("n")
    low = _lowered((n, 24, 3), (40, 24, 3), padding=(1, 1))
    kernel = compile_prim_funcs({"k": low.prim_func})["k"]
    for batch in (1, 5):
        x = RNG.standard_normal((batch, 24, 3)).astype("float32")
        w = RNG.standard_normal((40, 24, 3)).astype("float32")
        b = RNG.standard_normal((1, 40, 1)).astype("float32")
        want = _want(x, w, b, {"padding": (1, 1)})
        got = np.zeros(want.shape, "float32")
        kernel(x, w, b, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _model(xs, weight, **attrs):
    """relu(conv1d(x, weight)), the weight a constant."""
    x = Var("x", TensorStructInfo(xs, "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        y = bb.emit(call_op("relax.nn.conv1d", x, Constant(weight), **attrs))
        bb.emit_func_output(bb.emit(call_op("relax.nn.relu", y)))
    return bb.get()


def test_a_constant_weight_is_packed_once_through_its_views():
    """A silero-style encoder layer (4 x 128 x 4 -> 64 channels, 3 taps,
    stride 2): the kernel reads the weight's panels packed at build time,
    never packing it per call, and its results are numpy's."""
    weight = RNG.standard_normal((64, 128, 3)).astype("float32")
    mod = _model((4, 128, 4), weight, strides=[2], padding=[1, 1])
    kernels = dict(lower(mod).prim_funcs())
    assert any(name.endswith("_prepacked") for name in kernels), sorted(kernels)
    for name, func in kernels.items():
        assert not any(type(s) is tir.AttrStmt and s.key == PACK_MARK
                       for s in walk(func.body)), name
    x = RNG.standard_normal((4, 128, 4)).astype("float32")
    got = np.asarray(phasec.VirtualMachine(phasec.build(mod))["main"](x))
    want = np.maximum(_conv1d(x, weight, 2, (1, 1)), 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_long_rows_stay_one_dimensional():
    """Rows of a few hundred positions run at the direct schedule's speed
    (at ORT's): the unit-row form takes rows of a few vectors, not those."""
    def workload(length):
        data = te.placeholder((1, 8, length), "float32", "x")
        weight = te.placeholder((8, 8, 3), "float32", "w")
        return ConvWorkload(data, weight, (1, 8, length - 2), "float32", 1, (1,), (0, 0), (1,),
                            1, CanonicalLayout("NCW"), CanonicalLayout("OIW"),
                            CanonicalLayout("NCW"))
    assert conv_unit_row.takes(workload(6))
    assert not conv_unit_row.takes(workload(300))


def test_a_flat_reduction_read_through_unit_axes():
    """The weight [N, C, KW] of a 1-D convolution read at [j, c, rx] is the
    flat reduction over (c, ry, rx) of extents (C, 1, KW); read in another
    order, or with an axis of more than one value left out, it is not."""
    c, ry, rx = (tir.Var(v) for v in ("c", "ry", "rx"))
    zero = IntImm(0, "int64")
    ks, exts = (c, ry, rx), (5, 1, 3)
    assert reads_flat_reduction((c, rx), (5, 3), ks, exts)
    assert reads_flat_reduction((c, ry, rx), (5, 1, 3), ks, exts)
    assert reads_flat_reduction((c, zero, rx), (5, 1, 3), ks, exts)
    assert not reads_flat_reduction((rx, c), (3, 5), ks, exts)
    assert not reads_flat_reduction((c,), (5,), ks, exts)
    assert not reads_flat_reduction((c, rx), (5, 4), ks, exts)

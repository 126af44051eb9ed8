"""Depthwise convolutions: narrow stride-1 ones over flat padded rows
(``te.schedules.conv_flat_rows``: the rows copied in by hand, whole tiles of
columns, one channel per row tile since no input row is shared between
channels), strided ones over their input's stride phases laid flat
(``te.schedules.conv_depthwise_strided``, ``pool_window.PhaseGeometry``;
rows of a vector or more: test_conv_depthwise_rows.py) and
grouped ones over the padded copy written by hand
(``pool_window.padded_input``). The values against numpy's reference, with
bias and relu fused, on LLVM and on the TIR interpreter, for odd and prime
sizes and a symbolic batch."""

from __future__ import annotations

import numpy as np
import pytest

from phasec.backend.llvm import compile_prim_funcs
from phasec.interp.tir import run_prim_func
from phasec.ir import tir
from phasec.op import call_op, get_op
from phasec.op.legalize import lower_fused
from phasec.target.tuning import host_tuning
from phasec.te import operation as te
from phasec.te.lowering import create_prim_func
from phasec.te.operation import i64
from phasec.te.schedules import conv_depthwise_direct
from phasec.te.schedules.pool_window import PhaseGeometry
from phasec.te.stmt import seq

from helpers.legalize import depthwise_case, fused, tvar, walk

RNG = np.random.default_rng(41)


def _lower(xs, k, **attrs):
    c = xs[1]
    d, w, b = tvar("d", xs), tvar("w", (c, 1, k, k)), tvar("b", (1, c, 1, 1))
    return lower_fused(fused([d, w, b], lambda bb: call_op("nn.relu", bb.emit(call_op(
        "add", bb.emit(call_op("nn.conv2d", d, w, groups=c, **attrs)), b)))))


def _allocs(prim):
    return {s.buffer.name: s.buffer for s in walk(prim.body) if isinstance(s, tir.Allocate)}


def _check(low, xs, k, interp, **attrs):
    x, w, b, y = depthwise_case(xs, k, RNG, **attrs)
    want = np.maximum(y, 0)
    got = np.zeros(want.shape, "float32")
    compile_prim_funcs({"k": low.prim_func})["k"](x, w, b, got)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    if interp:
        again = np.zeros(want.shape, "float32")
        run_prim_func(low.prim_func, [x, w, b, again])
        np.testing.assert_allclose(again, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("xs,k,interp", [((1, 8, 13, 13), 7, False), ((2, 4, 7, 7), 7, True),
                                         # rows of a few vectors, not whole ones,
                                         # whole vectors wasting more than a quarter
                                         ((1, 3, 11, 20), 3, False), ((1, 2, 7, 19), 5, False)])
def test_narrow_depthwise_over_flat_rows(xs, k, interp):
    low = _lower(xs, k, padding=k // 2)
    allocs = _allocs(low.prim_func)
    assert "pad_flat" in allocs
    # one channel per tile: a 1-D accumulator (no tile of channels)
    assert all(len(buf.shape) == 1 for name, buf in allocs.items() if name.endswith("_acc"))
    _check(low, xs, k, interp, padding=k // 2)


STRIDED = {  # (data shape, kernel, attrs, TIR interpreter too)
    "3x3_s2_29": ((1, 5, 29, 29), 3, {"padding": 1, "strides": 2}, False),
    "3x3_s2_batch2": ((2, 3, 11, 9), 3, {"padding": 1, "strides": 2}, True),
    "5x5_s2x3_uneven_pads": ((1, 3, 13, 17), 5, {"padding": (2, 1, 1, 2), "strides": (2, 3)},
                             False),
    "3x3_s2_dilation2": ((1, 2, 15, 15), 3, {"padding": 2, "strides": 2, "dilation": 2},
                         False),
    "3x3_s2_no_padding_prime": ((1, 7, 23, 19), 3, {"padding": 0, "strides": 2}, True),
    "3x3_s2_wide_prime": ((1, 3, 5, 5), 3, {"padding": 1, "strides": 2}, True),
    "3x3_s2_phased_prime": ((1, 2, 37, 41), 3, {"padding": 1, "strides": 2}, False),
    "5x5_s2_rows_only_strided": ((1, 3, 17, 11), 5, {"padding": 2, "strides": (1, 2)},
                                 False),
    # output rows of a vector or more (at 16 lanes; at 8 too)
    "3x3_s2_rows_of_31": ((1, 3, 9, 61), 3, {"padding": 1, "strides": 2}, False),
    "5x5_s2_rows_of_17_batch2": ((2, 2, 7, 33), 5, {"padding": 2, "strides": 2}, True),
}


@pytest.mark.parametrize("name", list(STRIDED))
def test_strided_depthwise_over_the_stride_phases_or_wide(name):
    xs, k, attrs, interp = STRIDED[name]
    low = _lower(xs, k, **attrs)
    allocs = _allocs(low.prim_func)
    two = lambda v: (v, v) if isinstance(v, int) else v  # noqa: E731
    pads, sw, dw = attrs["padding"], two(attrs["strides"])[1], two(attrs.get("dilation", 1))[1]
    left, right = (pads, pads) if isinstance(pads, int) else (pads[1], pads[3])
    out_w = (xs[3] + left + right - (k - 1) * dw - 1) // sw + 1
    lanes = host_tuning().lanes(32)
    if (k - 1) * dw <= 2 and 2 * out_w * sw <= lanes:
        # a row of at most half a vector: every input column summed, every sw-th kept
        assert "pad_temp" in allocs and "T_conv2d_wide" in allocs
    elif conv_depthwise_direct.takes(out_w, sw, k * k, lanes):
        # rows of one or two vectors, read at the stride from the plane: no phases
        assert "row_sums" in allocs and "stride_phases" not in allocs
    elif "phase_plane" in allocs:
        # rows of up to half a vector at stride 2 on the Xeon: phase rows as
        # wide as the output's (test_conv_depthwise_strided_flat.py)
        assert host_tuning().depthwise_narrow_plane and sw == 2
        assert 2 * out_w <= lanes < 4 * out_w and "stride_phases" not in allocs
    elif out_w >= lanes and -(-out_w // lanes) * lanes * 4 <= out_w * 5:
        # rows of vectors stored as NCHW rows, the epilogue before the store
        assert "stride_phases" in allocs and "T_conv2d_flat" not in allocs
        assert set(allocs) <= {"stride_phases", "row_sums"}
    else:  # the input de-interleaved into its phases, the sums over the flat plane
        assert "stride_phases" in allocs and "T_conv2d_flat" in allocs
    _check(low, xs, k, interp, **attrs)


def test_grouped_strided_over_the_padded_copy():
    d, w = tvar("d", (1, 4, 9, 9)), tvar("w", (4, 2, 3, 3))
    low = lower_fused(fused([d, w], lambda bb: call_op(
        "nn.conv2d", d, w, groups=2, padding=1, strides=2)))
    assert "pad_temp" in _allocs(low.prim_func)
    x = RNG.standard_normal((1, 4, 9, 9)).astype("float32")
    wa = RNG.standard_normal((4, 2, 3, 3)).astype("float32")
    want = get_op("relax.nn.conv2d").reference(x, wa, groups=2, padding=(1, 1, 1, 1),
                                               strides=(2, 2))
    got = np.zeros(want.shape, "float32")
    compile_prim_funcs({"k": low.prim_func})["k"](x, wa, got)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("channels,k,padding,strides", [(6, 5, 2, 1), (4, 3, 1, 2)])
def test_a_symbolic_batch(channels, k, padding, strides):
    n = tir.Var("n")
    low = _lower((n, channels, 11, 11), k, padding=padding, strides=strides)
    if strides > 1:  # both forms of the strided schedule need static sizes
        allocs = _allocs(low.prim_func)
        assert "stride_phases" not in allocs and "T_conv2d_wide" not in allocs
    kernel = compile_prim_funcs({"k": low.prim_func})["k"]
    for batch in (1, 3):
        x = RNG.standard_normal((batch, channels, 11, 11)).astype("float32")
        w = RNG.standard_normal((channels, 1, k, k)).astype("float32")
        b = RNG.standard_normal((1, channels, 1, 1)).astype("float32")
        want = np.maximum(get_op("relax.nn.conv2d").reference(
            x, w, groups=channels, padding=(padding,) * 4, strides=(strides, strides)) + b, 0)
        got = np.zeros(want.shape, "float32")
        kernel(x, w, b, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("hw,window,strides,dilation,lead,lanes", [
    ((9, 37), (3, 3), (2, 2), (1, 1), (1, 1), 8),   # whole vectors, the last overlapping
    ((11, 53), (5, 5), (2, 3), (1, 1), (2, 1), 4),  # three phases a row, a whole number
    ((7, 13), (3, 3), (2, 2), (2, 2), (0, 0), 16),  # a row shorter than a vector
    ((5, 5), (3, 3), (2, 2), (1, 1), (1, 1), 16),   # a row of one or two columns
])
def test_the_stride_phases_hold_every_element_once_copied(hw, window, strides, dilation, lead,
                                                          lanes):
    """Every element of the phases is written (the buffer starts as NaN):
    the input where ``u*sh + a - top``, ``v*sw + e - left`` lands in it,
    zero elsewhere -- the padding, the rows below, the tail."""
    (H, W), (sh, sw), (top, left) = hw, strides, lead
    out_hw = tuple((n + 2 * p - (k - 1) * d - 1) // s + 1
                   for n, p, k, d, s in zip(hw, lead, window, dilation, strides))
    geo = PhaseGeometry.of(hw, out_hw, window, strides, dilation, lead, lanes)
    x = te.placeholder((1, 2, H, W), "float32", "x")

    def build(bufs, out):
        b, ch = tir.Var("b", "int64"), tir.Var("ch", "int64")
        stmts = geo.copy(bufs[0], b, ch, te.const(0, "float32"),
                         lambda f, q: (out, b, ch, f, q), lanes)
        return tir.For(b, i64(0), i64(1), "serial", tir.For(ch, i64(0), i64(2), "serial",
                                                            seq(stmts)))
    phases = te.extern((i64(1), i64(2), i64(sh * sw), i64(geo.length)), "float32", [x], build,
                       name="phases")
    prim = create_prim_func([x, phases])
    data = RNG.standard_normal((1, 2, H, W)).astype("float32")
    want = np.zeros((1, 2, sh * sw, geo.length), "float32")
    for a, e, u, v in np.ndindex(sh, sw, geo.U, geo.V):
        y, col = u * sh + a - top, v * sw + e - left
        if 0 <= y < H and 0 <= col < W:
            want[0, :, a * sw + e, u * geo.V + v] = data[0, :, y, col]
    got = np.full(want.shape, np.nan, "float32")
    compile_prim_funcs({"k": prim})["k"](data, got)
    np.testing.assert_array_equal(got, want)
    again = np.full(want.shape, np.nan, "float32")
    run_prim_func(prim, [data, again])
    np.testing.assert_array_equal(again, want)

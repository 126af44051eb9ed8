"""Depthwise convolutions strided by 2 along the rows whose output rows are
more than a quarter of a vector and at most half (7x7 outputs at 16 lanes:
MobileNetV2's 576x14x14 3x3/2; ``conv_depthwise_strided_flat``): per
channel the input de-interleaved into phase rows as wide as the output's,
the sums over the output's own flat positions, a tap outside its phase row
reading a zero through a mask, stored through the epilogue. The values
against numpy's reference on LLVM and on the TIR interpreter for odd,
prime and uneven shapes, pads, strides and dilation; infinities at rows'
ends and infinite weights at the padding taps reach only the outputs (and
padded products) the padded convolution has them in; every access proven
in bounds; the copy's loads are whole vectors (no gather); the shapes it
does not take keep their forms."""

from __future__ import annotations

import numpy as np
import pytest

from phasec.arith.inbounds import prove_accesses
from phasec.backend.llvm import compile_prim_funcs
from phasec.ir import tir
from phasec.op import get_op
from phasec.target.tuning import host_tuning

from helpers.legalize import (
    check_depthwise, check_infinities_3x3s2, check_other_form, depthwise_case,
    lowered_depthwise, walk,
)

RNG = np.random.default_rng(31)
LANES = host_tuning().lanes(32)
NARROW_PLANE = host_tuning().depthwise_narrow_plane  # (AVX-512 hosts)
H = LANES - 2  # 14 at 16 lanes: 7-wide output rows


def _act(act, v):
    return np.minimum(np.maximum(v, 0), 6) if act == "relu6" else v / (1 + np.exp(-v))


def _allocs(prim):
    return {s.buffer.name for s in walk(prim.body) if isinstance(s, tir.Allocate)}


CASES = [  # (data shape, kernel, activation, attrs, TIR interpreter too)
    # MobileNetV2's 576x14x14 3x3/2 in blocks of 16 channels, a batch of two
    ((1, 48, H, H), 3, "relu6", {"padding": 1, "strides": 2}, False),
    ((2, 4, H, H), 3, "silu", {"padding": 1, "strides": 2}, True),
    # an odd channel count (no pipeline); odd and prime sizes: the right
    # pad read (13, 15), the last rows copied element by element
    ((1, 5, 13, 13), 3, "relu6", {"padding": 1, "strides": 2}, True),
    ((1, 3, 11, H + 1), 3, "silu", {"padding": 1, "strides": 2}, True),
    ((2, 3, 9, 11), 3, "relu6", {"padding": 1, "strides": 2}, False),
    ((1, 3, 7, H + 2), 3, "relu6", {"padding": 1, "strides": 2}, True),
    # padding on one side only, uneven pads, a 2x2 window unpadded,
    # dilation 2, stride 3 along the columns' axis, stride 1 along it
    ((1, 5, 12, 12), 3, "silu", {"padding": (0, 0, 1, 1), "strides": 2}, True),
    ((1, 3, 13, H), 3, "relu6", {"padding": (2, 1, 0, 1), "strides": 2}, False),
    ((1, 6, H, H), 2, "silu", {"padding": 0, "strides": 2}, True),
    ((1, 2, 15, 15), 3, "relu6", {"padding": 2, "strides": 2, "dilation": 2}, True),
    ((1, 4, 13, H), 3, "silu", {"padding": 1, "strides": (3, 2)}, True),
    ((1, 3, 6, H), 3, "relu6", {"padding": 1, "strides": (1, 2)}, False),
]


@pytest.mark.parametrize("xs,k,act,attrs,interp", CASES)
def test_strided_rows_of_half_a_vector_sum_over_the_flat_output(narrow_plane, xs, k, act, attrs,
                                                                 interp):
    prim = lowered_depthwise(xs, k, act, **attrs).prim_func
    assert prove_accesses(prim).counts()[1] == 0
    if narrow_plane:  # (else these rows keep the stride phases' flat form)
        allocs = _allocs(prim)
        # the phases, a row's vector; nothing of the tensor's size
        assert allocs == {"phase_plane", "plane_row"}, allocs
    x, w, b, y = depthwise_case(xs, k, RNG, **attrs)
    check_depthwise(prim, x, w, b, _act(act, y), interp)


@pytest.mark.parametrize("W", [H, 13])
def test_infinities_at_the_rows_ends_and_in_the_weights(W):
    """A tap whose column leaves its phase row reads a zero, not the
    neighbouring row's element: an infinity in a row's last column (or the
    next row's first) shows only in the outputs whose window holds it. An
    infinite weight times a padding column or row is NaN, as in the padded
    convolution (the padding's products are computed)."""
    xs, attrs = (1, 6, 13, W), {"padding": 1, "strides": 2}
    prim = lowered_depthwise(xs, 3, "relu6", **attrs).prim_func
    check_infinities_3x3s2(prim, xs, (5, 6), RNG)


def test_the_copy_reads_whole_vectors():
    """Each input row's vector is one contiguous load, de-interleaved in
    registers: no gather (its rows unrolled, or the vector read straight
    into the phases' buffer, LLVM made the loads 8-lane gathers)."""
    prim = lowered_depthwise((1, 32, H, H), 3, "relu6", padding=1, strides=2).prim_func
    optimized = compile_prim_funcs({"k": prim}).optimized_ir
    assert "masked.gather" not in optimized and "masked.scatter" not in optimized
    if NARROW_PLANE and LANES == 16:
        assert f"load <{LANES} x float>" in optimized


@pytest.mark.parametrize("xs,k,attrs", [
    ((1, 4, 2 * LANES - 4, 2 * LANES - 4), 3, {"padding": 1, "strides": 2}),  # rows of 14
    ((1, 4, LANES // 2, LANES // 2), 3, {"padding": 1, "strides": 2}),  # a quarter: wide
    ((1, 4, H, H), 5, {"padding": 2, "strides": 2}),        # 25 taps
    ((1, 4, H, H), 3, {"padding": 1, "strides": 3}),        # stride 3 along the rows
    ((1, 4, 3, H), 3, {"padding": 1, "strides": 2}),        # fewer outputs than a vector
    # no padding: the last column's right tap reads the input past the phase row
    ((1, 4, 15, 15), 3, {"padding": 0, "strides": 2}),
])
def test_other_shapes_keep_their_forms(xs, k, attrs):
    check_other_form(xs, k, attrs, "phase_plane", RNG)


def test_a_symbolic_batch_keeps_the_direct_form():
    n = tir.Var("n")
    prim = lowered_depthwise((n, 4, H, H), 3, "relu6", padding=1, strides=2).prim_func
    assert "phase_plane" not in _allocs(prim)
    lib = compile_prim_funcs({"k": prim})
    for batch in (1, 2):
        x, w, b, y = depthwise_case((batch, 4, H, H), 3, RNG, padding=1, strides=2)
        got = np.full(y.shape, np.nan, "float32")
        lib["k"](x, w, b, got)
        np.testing.assert_allclose(got, _act("relu6", y), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("side", [LANES // 4 * 2 - 1, LANES // 4 * 2, LANES // 4 * 2 - 2])
def test_float64_rows_of_half_a_vector(side):
    """float64 (half the lanes): 3x3/2 over 6x6 to 8x8 at 8 lanes, output
    rows of 3-4, against numpy in float64, every access proven."""
    from phasec.ir import TensorStructInfo, Var
    from phasec.op import call_op
    from phasec.op.legalize import lower_fused

    from helpers.legalize import fused
    c = 4
    d = Var("d", TensorStructInfo((1, c, side, side), "float64"))
    wt = Var("w", TensorStructInfo((c, 1, 3, 3), "float64"))
    bv = Var("b", TensorStructInfo((1, c, 1, 1), "float64"))
    prim = lower_fused(fused([d, wt, bv], lambda bb: call_op("add", bb.emit(call_op(
        "nn.conv2d", d, wt, groups=c, strides=2, padding=1)), bv))).prim_func
    assert prove_accesses(prim).counts()[1] == 0
    if NARROW_PLANE and LANES == 16:
        assert "phase_plane" in _allocs(prim)
    x = RNG.standard_normal((1, c, side, side))
    w = RNG.standard_normal((c, 1, 3, 3))
    b = RNG.standard_normal((1, c, 1, 1))
    want = get_op("relax.nn.conv2d").reference(x, w, groups=c, strides=(2, 2),
                                               padding=(1,) * 4) + b
    got = np.full(want.shape, np.nan)
    compile_prim_funcs({"k": prim})["k"](x, w, b, got)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)

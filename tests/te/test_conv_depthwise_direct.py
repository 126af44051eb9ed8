"""Strided depthwise convolutions whose output rows are one or two vectors
(``conv_depthwise_direct``: more than half a vector, less than two, not
exactly one, a window of up to 9 taps): every tap read at the stride
straight from the input plane, no stride phases. The values against numpy's reference on LLVM and
on the TIR interpreter for odd, prime and uneven shapes, pads on one side,
dilation and strides 2 and 3; infinities at a row's ends and in the weights
reach only the outputs (and padded products) the padded convolution has
them in; every access proven in bounds; the loads are whole interleaved
groups (no gather); the shapes it does not take keep their forms."""

from __future__ import annotations

import numpy as np
import pytest

from phasec.arith.inbounds import prove_accesses
from phasec.backend.llvm import compile_prim_funcs
from phasec.ir import tir
from phasec.target.tuning import host_tuning
from phasec.te.schedules import conv_depthwise_direct

from helpers.legalize import (
    check_depthwise, check_infinities_3x3s2, depthwise_case, lowered_depthwise, walk,
)

RNG = np.random.default_rng(29)
LANES = host_tuning().lanes(32)


def _act(act, v):
    return np.minimum(np.maximum(v, 0), 6) if act == "relu6" else v / (1 + np.exp(-v))


def _allocs(prim):
    return {s.buffer.name for s in walk(prim.body) if isinstance(s, tir.Allocate)}


def _out_w(W, k, pads, sw, dw):
    return (W + pads[1] + pads[3] - (k - 1) * dw - 1) // sw + 1


CASES = [  # (data shape, kernel, activation, attrs, TIR interpreter too)
    # MobileNetV2's 192x28x28 3x3/2 (14-wide rows at 16 lanes), a batch of two
    ((1, 24, 2 * LANES - 4, 2 * LANES - 4), 3, "relu6", {"padding": 1, "strides": 2}, False),
    ((2, 3, 2 * LANES - 4, 2 * LANES - 4), 3, "silu", {"padding": 1, "strides": 2}, True),
    # odd and prime sizes: the right pad read (27, 23), no padding (19)
    ((1, 5, 27, 2 * LANES - 5), 3, "relu6", {"padding": 1, "strides": 2}, True),
    ((1, 3, 29, 2 * LANES - 9), 3, "silu", {"padding": 1, "strides": 2}, False),
    ((1, 3, 19, LANES + 3), 3, "relu6", {"padding": 0, "strides": 2}, True),
    # padding on one side only, uneven pads, dilation 2
    ((1, 3, 13, 2 * LANES - 4), 3, "relu6", {"padding": (0, 0, 1, 1), "strides": 2}, True),
    ((1, 4, 25, 2 * LANES - 11), 3, "silu", {"padding": (1, 0, 2, 1), "strides": 2}, False),
    ((1, 2, 15, 2 * LANES - 5), 3, "relu6", {"padding": 2, "strides": 2, "dilation": 2}, True),
    # stride 3 (whole groups of three, no extra member), rows only strided,
    # a 2x2 window
    ((1, 3, 17, 3 * LANES - 8), 3, "relu6", {"padding": 1, "strides": 3}, True),
    ((1, 3, 9, 2 * LANES - 4), 3, "silu", {"padding": 1, "strides": (1, 2)}, False),
    ((1, 3, 11, 2 * LANES - 2), 2, "relu6", {"padding": 0, "strides": 2}, False),
    # rows of one to two vectors (MobileNetV2's 144x56x56 3x3/2: two vectors
    # in the row, column 0 by scalars), prime and odd widths, uneven pads,
    # no padding, dilation 2, stride 3, a batch of two
    ((1, 5, 9, 3 * LANES + 8), 3, "relu6", {"padding": 1, "strides": 2}, True),
    ((2, 3, 7, 4 * LANES - 3), 3, "silu", {"padding": 1, "strides": 2}, True),
    ((1, 3, 11, 3 * LANES - 3), 3, "relu6", {"padding": (0, 2, 1, 0), "strides": 2}, False),
    ((1, 2, 9, 3 * LANES + 5), 3, "silu", {"padding": 0, "strides": 2}, False),
    ((1, 2, 13, 3 * LANES + 7), 3, "relu6", {"padding": 2, "strides": 2, "dilation": 2}, True),
    ((1, 3, 10, 4 * LANES - 4), 3, "relu6", {"padding": 1, "strides": 3}, False),
]


@pytest.mark.parametrize("xs,k,act,attrs,interp", CASES)
def test_strided_rows_of_one_vector_read_the_plane_at_the_stride(xs, k, act, attrs, interp):
    two = lambda v: (v, v) if isinstance(v, int) else v  # noqa: E731
    pads = attrs["padding"]
    pads = (pads,) * 4 if isinstance(pads, int) else pads
    out_w = _out_w(xs[3], k, pads, two(attrs["strides"])[1], two(attrs.get("dilation", 1))[1])
    assert conv_depthwise_direct.takes(out_w, two(attrs["strides"])[1], k * k, LANES)
    prim = lowered_depthwise(xs, k, act, **attrs).prim_func
    allocs = _allocs(prim)
    assert "row_sums" in allocs and "stride_phases" not in allocs, allocs
    assert prove_accesses(prim).counts()[1] == 0
    x, w, b, y = depthwise_case(xs, k, RNG, **attrs)
    check_depthwise(prim, x, w, b, _act(act, y), interp)


@pytest.mark.parametrize("W", [2 * LANES - 5, 3 * LANES + 8])
def test_infinities_at_the_rows_ends_and_in_the_weights(W):
    """The taps past a row's ends read zeros, not the neighbouring row's
    elements: an infinity in a row's last column (or the next row's first)
    shows only in the outputs whose window holds it. An infinite weight
    times a padding column or row is NaN, as in the padded convolution
    (the products of the padding are computed, not left out). Rows of
    one vector (odd: the right pad read) and of two (column 0 by scalars)."""
    xs, attrs = (1, 6, 27, W), {"padding": 1, "strides": 2}
    prim = lowered_depthwise(xs, 3, "relu6", **attrs).prim_func
    check_infinities_3x3s2(prim, xs, (9, 10), RNG)


@pytest.mark.parametrize("hw", [(2 * LANES - 4, 2 * LANES - 4), (27, 2 * LANES - 5),
                                (9, 3 * LANES + 8)])
def test_the_loads_are_whole_interleaved_groups(hw):
    """Each tap's load is part of a whole interleaved group (a 3x3/2's
    columns completed with ``2x+2``): LLVM's vectorizer loads two vectors
    and shuffles them, all 16 lanes, no gather (a group with a member
    missing took 8 lanes and a remainder)."""
    xs, attrs = (1, 32, *hw), {"padding": 1, "strides": 2}
    prim = lowered_depthwise(xs, 3, "silu", **attrs).prim_func
    optimized = compile_prim_funcs({"k": prim}).optimized_ir
    assert "masked.gather" not in optimized and "masked.scatter" not in optimized
    if LANES == 16:
        assert "load <32 x float>" in optimized
    x, w, b, y = depthwise_case(xs, 3, RNG, **attrs)
    check_depthwise(prim, x, w, b, _act("silu", y), False)


@pytest.mark.parametrize("xs,k,attrs", [
    ((1, 4, 2 * LANES - 4, 2 * LANES - 4), 5, {"padding": 2, "strides": 2}),  # 25 taps
    ((1, 4, 14, 14), 3, {"padding": 1, "strides": 2}),           # rows of half a vector
    ((1, 4, 9, 2 * LANES), 3, {"padding": 1, "strides": 2}),      # rows of one vector
    ((1, 4, 9, 5 * LANES - 1), 3, {"padding": 1, "strides": 2}),  # of two vectors or more
])
def test_other_shapes_keep_their_forms(xs, k, attrs):
    prim = lowered_depthwise(xs, k, "relu6", **attrs).prim_func
    # (rows of half a vector: the phases, or on the Xeon phase rows as wide
    # as the output's, test_conv_depthwise_strided_flat.py)
    assert "stride_phases" in _allocs(prim) or (
        host_tuning().depthwise_narrow_plane and "phase_plane" in _allocs(prim))
    assert "row_sums" not in _allocs(prim) or "stride_phases" in _allocs(prim)
    x, w, b, y = depthwise_case(xs, k, RNG, **attrs)
    check_depthwise(prim, x, w, b, _act("relu6", y), False)


def test_a_symbolic_batch_falls_back_and_computes_the_same():
    n = tir.Var("n")
    side = 2 * LANES - 4
    prim = lowered_depthwise((n, 3, side, side), 3, "relu6", padding=1,
                             strides=2).prim_func
    assert "row_sums" not in _allocs(prim)
    kernel = compile_prim_funcs({"k": prim})["k"]
    for batch in (1, 2):
        x, w, b, y = depthwise_case((batch, 3, side, side), 3, RNG, padding=1, strides=2)
        got = np.zeros(y.shape, "float32")
        kernel(x, w, b, got)
        np.testing.assert_allclose(got, _act("relu6", y), rtol=1e-4, atol=1e-4)

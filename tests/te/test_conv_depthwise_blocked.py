"""Stride-1 depthwise convolutions whose output rows are one or two vectors,
not whole ones, under windows of 9 taps or more (``conv_depthwise_blocked``:
3x3 and 5x5 over 14x14 and 28x28 at 16 lanes): per channel a zero-padded
plane, several output rows summed from each loaded plane row. The values against the registry's
reference (numpy) on LLVM and on the TIR interpreter for odd, prime and
uneven shapes, pads on one side or none, dilation, batches, channel counts
that split into no block of 16, with ReLU6 and SiLU epilogues and without
one; infinities at a row's ends and in the weights reach only the outputs
the padded convolution has them in; every access proven in bounds, no
gather; the shapes it does not take keep their forms."""

from __future__ import annotations

import numpy as np
import pytest

from phasec.arith.inbounds import prove_accesses
from phasec.backend.llvm import compile_prim_funcs
from phasec.interp.tir import run_prim_func
from phasec.ir import tir
from phasec.op import get_op
from phasec.target.tuning import host_tuning
from phasec.te.schedules import conv_depthwise_blocked
from phasec.op import call_op
from phasec.op.legalize import lower_fused

from helpers.legalize import (
    check_depthwise, check_other_form, depthwise_case, fused, lowered_depthwise, tvar, walk,
)

RNG = np.random.default_rng(2929)
LANES = host_tuning().lanes(32)
REGISTERS = host_tuning().vector_registers
#: whether this host takes a 5x5 (AVX-512: 32 registers; a 3x3 then too)
TAKES_5X5 = conv_depthwise_blocked.takes(LANES - 2, 25, LANES, REGISTERS)


def _act(act, v):
    if act == "relu6":
        return np.minimum(np.maximum(v, 0), 6)
    return v / (1 + np.exp(-v))


def _allocs(prim):
    return {s.buffer.name for s in walk(prim.body) if isinstance(s, tir.Allocate)}


def _out(n, k, lo, hi, d):
    return n + lo + hi - (k - 1) * d


CASES = [  # (data shape, kernel, activation, attrs, TIR interpreter too)
    # EfficientNet's 14x14 5x5 (at 16 lanes), channels in blocks of 16, a batch of two
    ((1, 32, LANES - 2, LANES - 2), 5, "relu6", {"padding": 2}, False),
    ((2, 3, LANES - 2, LANES - 2), 5, "silu", {"padding": 2}, True),
    # odd and prime sizes, channel counts of no block of 16 (17: blocks of one)
    ((1, 5, 13, LANES - 5), 5, "relu6", {"padding": 2}, True),
    ((1, 17, 11, LANES - 3), 5, "silu", {"padding": 2}, False),
    ((1, 7, 2, LANES - 1), 5, "relu6", {"padding": 2}, True),     # two rows, one short
    ((1, 3, 1, LANES // 2 + 1), 5, "silu", {"padding": 2}, True),  # one row: read by columns
    # no padding (the input wider than the output), pads on one side, uneven
    ((1, 3, 9, LANES // 2 + 5), 5, "relu6", {"padding": 0}, True),
    ((1, 4, 12, LANES - 3), 5, "silu", {"padding": (0, 0, 4, 4)}, False),
    ((1, 3, 10, LANES - 6), 5, "relu6", {"padding": (1, 4, 3, 0)}, True),
    ((1, 3, 7, LANES - 4), 5, "silu", {"padding": (2, 1, 2, 3)}, False),
    # dilation 2 (a plane of lanes + 8 columns), a 4x4 window (16 taps)
    ((1, 3, 15, LANES - 2), 5, "relu6", {"padding": 4, "dilation": 2}, True),
    ((1, 5, 10, LANES - 3), 4, "silu", {"padding": (1, 1, 2, 2)}, False),
    # 3x3 (MobileNetV2's 14x14), odd, no padding, one side
    ((1, 20, LANES - 2, LANES - 2), 3, "relu6", {"padding": 1}, True),
    ((1, 3, 13, LANES - 5), 3, "silu", {"padding": 1}, False),
    ((1, 3, 7, LANES // 2 + 3), 3, "relu6", {"padding": 0}, True),
    ((1, 3, 11, LANES - 1), 3, "silu", {"padding": (0, 2, 1, 0)}, True),
    # rows of two vectors (28x28 at 16 lanes: the second vector's copy of
    # the last rows shifted over the first), odd and prime, uneven pads,
    # no padding, dilation 2, a batch of two
    ((1, 20, 2 * LANES - 4, 2 * LANES - 4), 5, "silu", {"padding": 2}, True),
    ((2, 3, 2 * LANES - 4, 2 * LANES - 4), 3, "relu6", {"padding": 1}, False),
    ((1, 5, 13, 2 * LANES - 5), 5, "relu6", {"padding": 2}, True),
    ((1, 3, 7, 2 * LANES - 3), 3, "silu", {"padding": (1, 0, 0, 2)}, True),
    ((1, 3, 9, 2 * LANES + 1), 5, "relu6", {"padding": 0}, False),  # a third vector's copy
    # ... and a padding row below only
    ((1, 3, 9, 2 * LANES + 1), 5, "silu", {"padding": (0, 0, 2, 0)}, True),
    ((1, 3, 11, 2 * LANES - 2), 5, "silu", {"padding": 4, "dilation": 2}, True),
    ((1, 4, 2, 2 * LANES - 6), 5, "relu6", {"padding": (2, 1, 1, 3)}, True),
]


def _case_takes(xs, k, attrs):
    pads = attrs["padding"]
    pads = (pads,) * 4 if isinstance(pads, int) else pads
    d = attrs.get("dilation", 1)
    out_w = _out(xs[3], k, pads[1], pads[3], d)
    return conv_depthwise_blocked.takes(out_w, k * k, LANES, REGISTERS)


@pytest.mark.parametrize("xs,k,act,attrs,interp", CASES)
def test_blocked_rows_equal_the_padded_convolution(xs, k, act, attrs, interp):
    prim = lowered_depthwise(xs, k, act, **attrs).prim_func
    allocs = _allocs(prim)
    # on a host of 32 vector registers (AVX-512) every case is taken here
    assert ("padded_plane" in allocs) == _case_takes(xs, k, attrs)
    assert _case_takes(xs, k, attrs) or not TAKES_5X5
    assert prove_accesses(prim).counts()[1] == 0
    x, w, b, y = depthwise_case(xs, k, RNG, **attrs)
    check_depthwise(prim, x, w, b, _act(act, y), interp)


def test_no_epilogue_and_no_gathers():
    """The convolution alone (no bias, no activation): the extern's stores
    are the output's; the copies read the plane as contiguous vectors (the
    unsigned flat pair), no gather or scatter."""
    xs, k, c = (1, 20, LANES - 2, LANES - 2), 5, 20
    d, wv = tvar("d", xs), tvar("w", (c, 1, k, k))
    prim = lower_fused(fused([d, wv], lambda bb: call_op(
        "nn.conv2d", d, wv, groups=c, padding=2))).prim_func
    assert ("padded_plane" in _allocs(prim)) == TAKES_5X5
    assert prove_accesses(prim).counts()[1] == 0
    compiled = compile_prim_funcs({"k": prim})
    optimized = compiled.optimized_ir
    assert "masked.gather" not in optimized and "masked.scatter" not in optimized
    x = RNG.standard_normal(xs).astype("float32")
    w = RNG.standard_normal((c, 1, k, k)).astype("float32")
    want = get_op("relax.nn.conv2d").reference(x, w, groups=c, padding=(2,) * 4)
    got = np.full(want.shape, np.nan, "float32")
    compiled["k"](x, w, got)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    again = np.full(want.shape, np.nan, "float32")
    run_prim_func(prim, [x, w, again])
    np.testing.assert_allclose(again, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("hw", [(LANES - 2, LANES - 2), (13, LANES - 5)])
def test_infinities_at_the_rows_ends_and_in_the_weights(hw):
    """The plane's lanes past a row's columns are zeros, not the next row's
    elements read flat: an infinity in a row's last column and the next
    row's first, and in the last row (whose vector is shifted left), shows
    only in the outputs whose window holds it. An infinite weight times a
    padding element is NaN in the padded convolution, and here too."""
    xs, k = (1, 4, *hw), 5
    prim = lowered_depthwise(xs, k, "relu6", padding=2).prim_func
    x, w, b, _ = depthwise_case(xs, k, RNG, padding=2)
    H, W = hw
    x[0, 0, 3, W - 1] = np.inf
    x[0, 0, 4, 0] = -np.inf
    x[0, 1, H - 1, 0] = np.inf
    x[0, 1, H - 2, W - 1] = np.inf
    w[2, 0, 0, 0] = np.inf
    want = _act("relu6", get_op("relax.nn.conv2d").reference(x, w, groups=4, padding=(2,) * 4)
                + b)
    assert np.isnan(want).any() and np.isfinite(want).any()
    got = np.full(want.shape, -1.0, "float32")
    compile_prim_funcs({"k": prim})["k"](x, w, b, got)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("xs,k,attrs", [
    ((1, 4, 9, LANES + LANES // 2), 5, {"padding": 2}),  # two vectors, a quarter wasted
    ((1, 4, 9, 3 * LANES - 4), 3, {"padding": 1}),                  # three vectors
    ((1, 4, 9, LANES // 2), 5, {"padding": 2}),                     # half a vector
    ((1, 4, 9, LANES), 5, {"padding": 2}),                          # one whole vector
    ((1, 4, 9, 2 * LANES), 3, {"padding": 1}),                      # two whole vectors
    ((1, 4, 2 * LANES - 4, 2 * LANES - 4), 5, {"padding": 2, "strides": 2}),  # strided
])
def test_other_shapes_keep_their_schedules(xs, k, attrs):
    check_other_form(xs, k, attrs, "padded_plane", RNG)


def test_a_symbolic_batch_keeps_another_form_and_computes_the_same():
    """Symbolic sizes (here the batch) are not taken (static shapes only):
    another form computes the same values for each batch."""
    n = tir.Var("n")
    xs = (n, 3, 13, LANES - 3)
    prim = lowered_depthwise(xs, 5, "relu6", padding=2).prim_func
    assert "padded_plane" not in _allocs(prim)
    kernel = compile_prim_funcs({"k": prim})["k"]
    for batch in (1, 2):
        x, w, b, y = depthwise_case((batch, *xs[1:]), 5, RNG, padding=2)
        got = np.full(y.shape, np.nan, "float32")
        kernel(x, w, b, got)
        np.testing.assert_allclose(got, _act("relu6", y), rtol=1e-4, atol=1e-4)


def test_which_rows_it_takes():
    assert conv_depthwise_blocked.block_rows(25, 32) == 5
    assert conv_depthwise_blocked.block_rows(9, 32) == conv_depthwise_blocked.MAX_ROWS
    assert conv_depthwise_blocked.takes(14, 25, 16, 32)
    assert not conv_depthwise_blocked.takes(14, 25, 16, 16)   # 16 registers: the weights
    assert not conv_depthwise_blocked.takes(6, 9, 8, 16)      # 16 registers: unmeasured
    assert conv_depthwise_blocked.takes(14, 9, 16, 32)        # a 3x3
    assert not conv_depthwise_blocked.takes(14, 4, 16, 32)    # a 2x2
    assert not conv_depthwise_blocked.takes(8, 25, 16, 32)    # half a vector
    assert not conv_depthwise_blocked.takes(16, 25, 16, 32)   # a whole vector
    assert conv_depthwise_blocked.takes(28, 25, 16, 32)       # two vectors
    assert conv_depthwise_blocked.block_rows(25, 32, 2) == 2
    assert not conv_depthwise_blocked.takes(24, 9, 16, 32)    # a quarter wasted
    assert not conv_depthwise_blocked.takes(32, 9, 16, 32)    # whole vectors
    assert not conv_depthwise_blocked.takes(44, 9, 16, 32)    # three vectors
    assert not conv_depthwise_blocked.takes(14, 49, 16, 32)   # 7x7: one row's registers

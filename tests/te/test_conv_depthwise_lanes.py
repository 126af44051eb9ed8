"""Depthwise convolutions with a block of channels in the vector lanes
(``te.schedules.conv_depthwise_lanes``): windows of 25 taps or more over
output rows of at most half a vector. The values against numpy's
reference, with bias and relu fused, on LLVM (and once on the TIR
interpreter), for channel counts that are no multiple of the lanes (nor of
four), odd and prime sizes, uneven pads, strides, dilation, float64; a
symbolic batch and a 3x3 window keep the other schedules."""

from __future__ import annotations

import numpy as np
import pytest

from phasec.backend.llvm import compile_prim_funcs
from phasec.interp.tir import run_prim_func
from phasec.ir import tir
from phasec.op import call_op, get_op
from phasec.op.legalize import lower_fused
from phasec.target.tuning import host_tuning

from helpers.legalize import fused, tvar, walk

RNG = np.random.default_rng(43)
#: float32 lanes of the host: the schedule's block of channels
L = host_tuning().lanes(32)
#: the widest output row the schedule takes (half a vector)
HALF = L // 2


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def _lower(xs, k, dtype="float32", **attrs):
    c = xs[1]
    d, w, b = (tvar("d", xs, dtype), tvar("w", (c, 1, k, k), dtype),
               tvar("b", (1, c, 1, 1), dtype))
    return lower_fused(fused([d, w, b], lambda bb: call_op("nn.relu", bb.emit(call_op(
        "add", bb.emit(call_op("nn.conv2d", d, w, groups=c, **attrs)), b)))))


def _takes_lanes(low) -> bool:
    names = {s.buffer.name for s in walk(low.prim_func.body) if isinstance(s, tir.Allocate)}
    return "dw_lanes_in" in names


def _check(low, xs, k, dtype="float32", interp=False, **attrs):
    c = xs[1]
    x = RNG.standard_normal(xs).astype(dtype)
    w = RNG.standard_normal((c, 1, k, k)).astype(dtype)
    b = RNG.standard_normal((1, c, 1, 1)).astype(dtype)
    pads = attrs["padding"]
    ref = {"padding": (pads,) * 4 if isinstance(pads, int) else pads,
           "strides": _pair(attrs.get("strides", 1)), "dilation": _pair(attrs.get("dilation", 1))}
    want = np.maximum(get_op("relax.nn.conv2d").reference(x, w, groups=c, **ref) + b, 0)
    # NaN first: every output element must be written
    got = np.full(want.shape, np.nan, dtype)
    compile_prim_funcs({"k": low.prim_func})["k"](x, w, b, got)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    if interp:
        again = np.full(want.shape, np.nan, dtype)
        run_prim_func(low.prim_func, [x, w, b, again])
        np.testing.assert_allclose(again, want, rtol=1e-4, atol=1e-4)


# (data shape, kernel, attrs): output rows of at most HALF columns
CASES = {
    # a prime channel count, one block and three channels of a group
    "5x5_s1_prime_channels": ((1, L + 3, HALF, HALF), 5, {"padding": 2}),
    # two blocks and a partial one, a batch of two, stride 2
    "5x5_s2_batch2": ((2, 2 * L + 5, 2 * HALF - 1, 2 * HALF - 1), 5,
                      {"padding": 2, "strides": 2}),
    # whole groups of four in the last block (no partial group)
    "5x5_s2_channels_of_whole_groups": ((1, L + 4, 2 * HALF + 1, 2 * HALF - 3), 5,
                                        {"padding": 2, "strides": 2}),
    # uneven pads, a different stride along each axis, odd sizes
    "5x5_uneven_pads_strides": ((1, L + 1, 7, 2 * HALF - 1), 5,
                                {"padding": (2, 1, 1, 2), "strides": (1, 2)}),
    "5x5_dilation2_s2": ((1, L, 2 * HALF + 1, 2 * HALF - 1), 5,
                         {"padding": 4, "strides": 2, "dilation": 2}),
    "5x5_no_padding": ((1, L + 2, HALF + 4, HALF + 4), 5, {"padding": 0}),
    "7x7": ((1, L + 5, HALF, HALF - 1), 7, {"padding": 3}),
    # more taps than pixels: the weights' groups fill more of the quads
    # buffer than the image does
    "7x7_over_5x5": ((1, L + 2, 5, 5), 7, {"padding": 3}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_depthwise_with_channels_in_the_lanes(name):
    xs, k, attrs = CASES[name]
    low = _lower(xs, k, **attrs)
    assert _takes_lanes(low)
    _check(low, xs, k, **attrs)


def test_no_gathers_in_the_layout_changes():
    """The input and the weights go to channels in the lanes by groups of
    four (shuffles), not by a gather of a vector of channels per pixel or
    per tap (the weights' loop over the lanes was one)."""
    xs = (1, 2 * L, HALF - 1, HALF - 1)
    low = _lower(xs, 5, padding=2)
    assert _takes_lanes(low)
    optimized = compile_prim_funcs({"k": low.prim_func}).optimized_ir
    assert "masked.gather" not in optimized and "masked.scatter" not in optimized
    _check(low, xs, 5, padding=2)


def test_on_the_tir_interpreter_too():
    xs = (1, L + 3, 5, 5)
    low = _lower(xs, 5, padding=2)
    assert _takes_lanes(low)
    _check(low, xs, 5, interp=True, padding=2)


def test_float64_blocks_of_its_own_lanes():
    lanes = host_tuning().lanes(64)
    xs = (1, lanes + 3, lanes // 2, lanes // 2 + 1)
    low = _lower(xs, 5, dtype="float64", padding=2, strides=(1, 2))
    assert _takes_lanes(low) == (lanes % 4 == 0)
    _check(low, xs, 5, dtype="float64", padding=2, strides=(1, 2))


@pytest.mark.parametrize("xs,k,attrs", [
    ((1, L + 3, HALF, HALF), 3, {"padding": 1}),                 # 3x3: too few taps
    ((1, L + 3, 2 * HALF + 2, 2 * HALF + 2), 5, {"padding": 2}),  # rows wider than half
    ((1, L - 1, HALF, HALF), 5, {"padding": 2}),                 # fewer channels than lanes
])
def test_other_shapes_keep_the_row_schedules(xs, k, attrs):
    low = _lower(xs, k, **attrs)
    assert not _takes_lanes(low)
    _check(low, xs, k, **attrs)


def test_a_symbolic_batch_keeps_the_row_schedules():
    n = tir.Var("n")
    c = L + 3
    low = _lower((n, c, HALF, HALF), 5, padding=2)
    assert not _takes_lanes(low)  # its block loop needs static sizes
    kernel = compile_prim_funcs({"k": low.prim_func})["k"]
    for batch in (1, 2):
        x = RNG.standard_normal((batch, c, HALF, HALF)).astype("float32")
        w = RNG.standard_normal((c, 1, 5, 5)).astype("float32")
        b = RNG.standard_normal((1, c, 1, 1)).astype("float32")
        want = np.maximum(get_op("relax.nn.conv2d").reference(
            x, w, groups=c, padding=(2,) * 4, strides=(1, 1)) + b, 0)
        got = np.zeros(want.shape, "float32")
        kernel(x, w, b, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)

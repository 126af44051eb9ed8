"""Stride-1 depthwise convolutions whose output is the input's size, rows
of half a vector or less under a 3x3 window or smaller (7x7 at 16 lanes;
``conv_depthwise_strided._flat_same``): per channel the plane copied whole
between runs of zeros, the sums over the output's own flat positions, a
tap outside the row reading a zero through a mask of the row's columns,
stored through the epilogue. The values against numpy's reference on LLVM
and on the TIR interpreter for odd, prime and uneven shapes, pads and
dilation; an infinity at a row's end reaches only the outputs whose window
holds it; every access proven in bounds; the shapes it does not take keep
their forms."""

from __future__ import annotations

import numpy as np
import pytest

from phasec.arith.inbounds import prove_accesses
from phasec.backend.llvm import compile_prim_funcs
from phasec.ir import tir
from phasec.op import get_op
from phasec.target.tuning import host_tuning

from helpers.legalize import check_depthwise, depthwise_case, lowered_depthwise, walk

RNG = np.random.default_rng(7)
LANES = host_tuning().lanes(32)


def _lower(xs, k, act, **attrs):
    return lowered_depthwise(xs, k, act, **attrs).prim_func


def _act(act, v):
    return np.minimum(np.maximum(v, 0), 6) if act == "relu6" else v / (1 + np.exp(-v))


def _allocs(prim):
    return {s.buffer.name for s in walk(prim.body) if isinstance(s, tir.Allocate)}


def _check(prim, x, w, b, want, interp):
    check_depthwise(prim, x, w, b, want, interp)


CASES = [  # (data shape, kernel, activation, attrs, TIR interpreter too)
    # MobileNetV2's 960x7x7 in blocks of 16 channels, a batch of two
    ((1, 48, 7, 7), 3, "relu6", {"padding": 1}, False),
    ((2, 4, 7, 7), 3, "silu", {"padding": 1}, True),
    # an odd channel count (no pipeline), a prime width, rows of half a vector
    ((1, 5, 7, 7), 3, "relu6", {"padding": 1}, True),
    ((1, 3, 11, 5), 3, "silu", {"padding": 1}, True),
    ((1, 2, 6, LANES // 2), 3, "relu6", {"padding": 1}, False),
    ((1, 3, 13, 3), 3, "relu6", {"padding": 1}, False),
    # uneven pads that keep the size (no zeros before the plane: top and
    # left 0), dilation 2, a 2x2 and a 1x3 window
    ((1, 4, 7, 7), 3, "silu", {"padding": (0, 0, 2, 2)}, True),
    ((1, 4, 7, 7), 3, "relu6", {"padding": (2, 1, 0, 1)}, False),
    ((1, 2, 9, 7), 3, "relu6", {"padding": 2, "dilation": 2}, True),
    ((1, 6, 7, 7), 2, "silu", {"padding": (0, 1, 1, 0)}, False),
]


@pytest.mark.parametrize("xs,k,act,attrs,interp", CASES)
def test_same_size_rows_sum_over_the_flat_plane(narrow_plane, xs, k, act, attrs, interp):
    prim = _lower(xs, k, act, **attrs)
    assert prove_accesses(prim).counts()[1] == 0
    if narrow_plane:  # (else these rows keep the flat rows: AVX2 and generic hosts)
        allocs = _allocs(prim)
        # the plane, nothing of the tensor's size: the epilogue in the stores
        assert allocs == {"same_plane"}, allocs
    x, w, b, y = depthwise_case(xs, k, RNG, **attrs)
    _check(prim, x, w, b, _act(act, y), interp)


def test_an_infinity_at_a_rows_end_reaches_only_its_windows():
    """The taps past a row's ends read zeros, not the neighbouring row's
    elements: an infinity at the end of a row (or the start of the next)
    shows only in the outputs whose window holds it (a mask multiplied in
    would make the next row's first outputs NaN)."""
    xs, attrs = (1, 16, 7, 7), {"padding": 1}
    prim = _lower(xs, 3, "relu6", **attrs)
    x, w, b, _ = depthwise_case(xs, 3, RNG, **attrs)
    x[:, :8, 3, 6] = np.inf
    x[:, 8:, 4, 0] = -np.inf
    ref = get_op("relax.nn.conv2d").reference(x, w, groups=16, padding=(1,) * 4) + b
    assert np.isfinite(ref[:, :8, 3, 0]).all() and np.isfinite(ref[:, 8:, 3, 6]).all()
    _check(prim, x, w, b, _act("relu6", ref), True)


@pytest.mark.parametrize("xs,k,attrs", [
    ((1, 4, 14, 14), 3, {"padding": 1}),            # rows over half a vector
    ((1, 4, 7, 7), 3, {"padding": (1, 1, 1, 0)}),   # an output narrower than the input
    ((1, 4, 7, 7), 5, {"padding": 2}),              # more than 9 taps
    ((1, 4, 3, 3), 3, {"padding": 1}),              # fewer outputs than a vector
])
def test_other_shapes_keep_their_forms(xs, k, attrs):
    prim = _lower(xs, k, "relu6", **attrs)
    assert "same_plane" not in _allocs(prim)
    x, w, b, y = depthwise_case(xs, k, RNG, **attrs)
    _check(prim, x, w, b, _act("relu6", y), False)


def test_the_stores_through_the_epilogue_are_whole_vectors():
    """Every vector of output positions, the first or not, is one store at
    ``(p // W, p % W)``: LLVM sees the unsigned pair of a vector's lanes as
    contiguous (no scatter, no gather in the optimized code)."""
    xs, attrs = (1, 32, 7, 7), {"padding": 1}
    prim = _lower(xs, 3, "silu", **attrs)
    lib = compile_prim_funcs({"k": prim})
    optimized = lib.optimized_ir
    assert "masked.scatter" not in optimized and "masked.gather" not in optimized
    x, w, b, y = depthwise_case(xs, 3, RNG, **attrs)
    _check(prim, x, w, b, _act("silu", y), False)

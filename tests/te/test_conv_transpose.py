"""Transposed convolutions through the sub-pixel phases
(``te.schedules.conv_transpose.subpixel``: one stride-1 convolution with
``prod(strides)`` times the output channels, then the phases interleaved by
``te.schedules.interleave``) and through the gather form where the phases
do not apply (dilation, a padding that crops past the window's reach). The
values against numpy's scatter reference, on LLVM and on the TIR
interpreter, for every attribute (groups, strides per axis, paddings,
output_padding, dilation, layouts), 1-D and 3-D, odd and prime sizes, and
symbolic batch and spatial sizes; and which form each call takes."""

from __future__ import annotations

import numpy as np
import pytest

from phasec.backend.llvm import compile_prim_funcs
from phasec.interp.tir import run_prim_func
from phasec.ir import tir
from phasec.op import call_op, get_op
from phasec.op.legalize import lower_call

from helpers.legalize import tvar, walk

RNG = np.random.default_rng(29)


def _lower(xs, ws, **attrs):
    rank = len(xs) - 2
    return lower_call(call_op(f"nn.conv{rank}d_transpose", tvar("x", xs), tvar("w", ws),
                              **attrs), True)


def _buffers(prim):
    return {s.buffer.name for s in walk(prim.body) if isinstance(s, tir.Allocate)}


def _check(low, xs, ws, rank, interp=True, **attrs):
    x = RNG.standard_normal(xs).astype("float32")
    w = RNG.standard_normal(ws).astype("float32")
    want = get_op(f"relax.nn.conv{rank}d_transpose").reference(x, w, **attrs)
    got = np.zeros(want.shape, "float32")
    compile_prim_funcs({"k": low.prim_func})["k"](x, w, got)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    if interp:
        again = np.zeros(want.shape, "float32")
        run_prim_func(low.prim_func, [x, w, again])
        np.testing.assert_allclose(again, want, rtol=1e-4, atol=1e-4)


CASES = {  # (data shape, weight shape, attrs, takes the sub-pixel phases)
    "2x2_s2": ((1, 3, 5, 7), (3, 4, 2, 2), {"strides": (2, 2)}, True),
    "3x3_s2_pad1_batch2": ((2, 3, 3, 5), (3, 2, 3, 3),
                           {"strides": (2, 2), "padding": (1, 1, 1, 1)}, True),
    "4x5_s2x3_uneven_pads_output_padding": (
        (1, 2, 3, 5), (2, 2, 4, 5),
        {"strides": (2, 3), "padding": (1, 2, 0, 3), "output_padding": (1, 2)}, True),
    "groups3": ((1, 6, 5, 7), (6, 2, 3, 2),
                {"strides": (2, 2), "groups": 3, "padding": (0, 1, 1, 0)}, True),
    "stride1": ((1, 3, 5, 7), (3, 2, 3, 3), {"padding": (1, 1, 1, 1)}, True),
    "wide_rows_interleaved": ((1, 5, 3, 37), (5, 3, 2, 2), {"strides": (2, 2)}, True),
    "1d_s3": ((1, 3, 11), (3, 5, 3), {"strides": (3,), "padding": (2, 1),
                                      "output_padding": (2,)}, True),
    "3d": ((1, 2, 3, 4, 5), (2, 3, 2, 3, 2),
           {"strides": (2, 1, 2), "padding": (0, 1, 1, 0, 0, 1)}, True),
    "nhwc": ((1, 5, 7, 3), (3, 4, 2, 2), {"strides": (2, 2), "data_layout": "NHWC"}, True),
    "dilation_gathers": ((1, 3, 5, 7), (3, 2, 3, 3), {"strides": (2, 2), "dilation": (2, 2)},
                         False),
    "crop_past_reach_gathers": ((1, 3, 5, 7), (3, 2, 2, 2),
                                {"strides": (2, 2), "padding": (3, 3, 0, 0)}, False),
}


@pytest.mark.parametrize("name", list(CASES))
def test_conv_transpose_matches_the_scatter_reference(name):
    xs, ws, attrs, phases = CASES[name]
    low = _lower(xs, ws, **attrs)
    assert ("subpixel_weight" in _buffers(low.prim_func)) == phases
    # the TIR interpreter on the small ones (the slow part of the test)
    _check(low, xs, ws, len(xs) - 2, interp=name in ("2x2_s2", "groups3", "1d_s3"), **attrs)


def test_the_phases_interleave_without_gathers():
    """24 -> 24 channels 2x2 stride 2: a 1x1 convolution to 96 channels,
    then the output written two phases per vectorized step."""
    low = _lower((1, 24, 16, 16), (24, 24, 2, 2), strides=(2, 2))
    loops = [s for s in walk(low.prim_func.body) if isinstance(s, tir.For)]
    assert any(s.kind == "vectorized" and s.loop_var.name.endswith("_q") for s in loops)
    _check(low, (1, 24, 16, 16), (24, 24, 2, 2), 2, interp=False, strides=(2, 2))


def test_symbolic_batch_and_size():
    n, h = tir.Var("n"), tir.Var("h")
    call = call_op("nn.conv2d_transpose", tvar("x", (n, 4, h, 6)), tvar("w", (4, 3, 3, 2)),
                   strides=(2, 2), padding=(1, 0, 0, 1), output_padding=(1, 0))
    low = lower_call(call, True)
    assert "subpixel_weight" in _buffers(low.prim_func)
    kernel = compile_prim_funcs({"k": low.prim_func})["k"]
    for batch, rows in ((1, 5), (2, 7)):
        x = RNG.standard_normal((batch, 4, rows, 6)).astype("float32")
        w = RNG.standard_normal((4, 3, 3, 2)).astype("float32")
        want = get_op("relax.nn.conv2d_transpose").reference(
            x, w, strides=(2, 2), padding=(1, 0, 0, 1), output_padding=(1, 0))
        got = np.zeros(want.shape, "float32")
        kernel(x, w, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)

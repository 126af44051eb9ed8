"""Reductions over the last two axes of static extents whose rows are not
whole vectors (a squeeze-excite's mean over 7x7 ... 56x56, rows narrower or
wider than the partial sums' lane loop): one reduce axis over both
(``op._lowering._reduction``), contiguous, so a long enough float sum gets
vector partial accumulators (a short one, 7x7, the narrowest lanes: its
element-wise prologue, a SiLU, runs vectorized). The values against numpy
for odd and prime sizes, keepdims or not, every combiner, integer and bool
inputs, a symbolic leading axis; symbolic rows and rows of whole vectors
keep two axes."""

from __future__ import annotations

import numpy as np
import pytest

from phasec.backend.llvm import compile_prim_funcs
from phasec.interp.tir import run_prim_func
from phasec.ir import tir
from phasec.op import call_op
from phasec.op.legalize import lower_fused

from helpers.legalize import fused, tvar, walk

RNG = np.random.default_rng(47)
NUMPY = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}


def _lower(op, shape, dtype="float32", **attrs):
    d = tvar("d", shape, dtype)
    return lower_fused(fused([d], lambda bb: call_op(op, d, **attrs))).prim_func


def _one_row(prim, ndim: int) -> bool:
    """Whether the kernel reduces the last two axes as one (its reduce axis
    is named after both)."""
    return f"k{ndim - 2}_{ndim - 1}" in str(prim)


def _run(prim, x, out_shape, dtype, interp=False):
    got = np.zeros(out_shape, dtype)
    if interp:
        run_prim_func(prim, [x, got])
    else:
        compile_prim_funcs({"k": prim})["k"](x, got)
    return got


@pytest.mark.parametrize("op,shape,keep", [
    ("mean", (2, 13, 14, 14), True),     # long enough: partial accumulators
    ("sum", (1, 5, 11, 13), False),
    ("mean", (3, 2, 7, 7), True),        # 49 elements: 16 partial lanes, a tail of 1
    ("max", (1, 3, 13, 11), True),
    ("min", (2, 3, 5, 3), False),
    ("prod", (1, 2, 3, 5), True),
    ("sum", (13, 11), False),            # the whole of a 2-D tensor
    ("mean", (1, 3, 28, 28), True),      # rows wider than a lane loop: one plane too
    ("sum", (2, 17, 33), False),         # prime rows of 33: one lane loop and a tail of 1 each
    ("max", (1, 2, 19, 37), True),
])
def test_the_last_two_axes_reduce_as_one_row(op, shape, keep):
    prim = _lower(op, shape, axis=[len(shape) - 2, len(shape) - 1], keepdims=keep)
    assert _one_row(prim, len(shape))
    x = RNG.standard_normal(shape).astype("float32")
    if op == "prod":
        x = 1 + x / 8
    want = NUMPY[op](x, axis=(-2, -1), keepdims=keep)
    np.testing.assert_allclose(_run(prim, x, want.shape, "float32"), want, rtol=1e-5,
                               atol=1e-6)


def test_three_axes_with_the_rows_flattened_and_the_interpreter():
    shape = (2, 3, 5, 7)
    prim = _lower("sum", shape, axis=[1, 2, 3], keepdims=False)
    x = RNG.standard_normal(shape).astype("float32")
    want = x.sum(axis=(1, 2, 3))
    np.testing.assert_allclose(_run(prim, x, want.shape, "float32"), want, rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(_run(prim, x, want.shape, "float32", interp=True), want,
                               rtol=1e-5, atol=1e-6)


def test_integer_and_bool_inputs():
    xi = RNG.integers(-9, 9, (2, 3, 7, 5)).astype("int32")
    prim = _lower("mean", xi.shape, "int32", axis=[2, 3], keepdims=True)
    want = np.trunc(xi.astype(np.int64).sum(axis=(2, 3), keepdims=True) / 35).astype("int32")
    np.testing.assert_array_equal(_run(prim, xi, want.shape, "int32"), want)
    xb = RNG.integers(0, 2, (3, 5, 3)).astype(bool)
    prim = _lower("max", xb.shape, "bool", axis=[1, 2], keepdims=False)
    np.testing.assert_array_equal(_run(prim, xb, (3,), "bool"), xb.any(axis=(1, 2)))


def test_a_symbolic_leading_axis_and_symbolic_rows():
    n = tir.Var("n")
    for rows, cols, lanes in ((9, 14, [16]), (7, 7, [16])):   # 7x7: a short sum
        prim = _lower("mean", (n, 4, rows, cols), axis=[2, 3], keepdims=True)
        assert _lane_counts(prim) == lanes
        kernel = compile_prim_funcs({"k": prim})["k"]
        for batch in (1, 3):
            x = RNG.standard_normal((batch, 4, rows, cols)).astype("float32")
            got = np.zeros((batch, 4, 1, 1), "float32")
            kernel(x, got)
            np.testing.assert_allclose(got, x.mean(axis=(2, 3), keepdims=True), rtol=1e-5,
                                       atol=1e-6)
    # rows of whole vectors (32 wide) stay two axes, and add up right
    prim = _lower("sum", (2, 3, 32), axis=[1, 2], keepdims=False)
    assert not _one_row(prim, 3)
    x = RNG.standard_normal((2, 3, 32)).astype("float32")
    np.testing.assert_allclose(_run(prim, x, (2,), "float32"), x.sum(axis=(1, 2)), rtol=1e-5,
                               atol=1e-6)
    h = tir.Var("h")
    prim = _lower("sum", (2, h, 6), axis=[1, 2], keepdims=False)  # rows of unknown count
    assert not _one_row(prim, 3)  # two axes, as before
    x = RNG.standard_normal((2, 5, 6)).astype("float32")
    got = np.zeros((2,), "float32")
    compile_prim_funcs({"k": prim})["k"](x, got)
    np.testing.assert_allclose(got, x.sum(axis=(1, 2)), rtol=1e-5, atol=1e-6)


def _lane_counts(prim) -> list[int]:
    """The lane counts of the partial-accumulator buffers (``*_part``) of ``prim``."""
    return [int(n.buffer.shape[0].value) for n in walk(prim.body)
            if isinstance(n, tir.Allocate) and n.buffer.name.endswith("_part")]


@pytest.mark.parametrize("channels,rows,cols,lanes", [
    (3, 7, 7, [16]),     # EfficientNet's head: 49 elements, 3 lane loops and a tail of 1
    (5, 3, 11, [16]),    # 33 (prime rows), tail 1
    (2, 4, 4, [16]),     # exactly one lane loop, no tail
    (7, 3, 5, []),       # 15: shorter than one lane loop, a serial sum
])
def test_a_silu_then_a_short_mean_sums_in_lanes(channels, rows, cols, lanes):
    # EfficientNet-B0's x * sigmoid(x) then global average pooling: the
    # element-wise prologue is computed inside the sum's lane loop
    shape = (1, channels, rows, cols)
    d = tvar("d", shape)
    prim = lower_fused(fused([d], lambda bb: call_op(
        "mean", bb.emit(call_op("multiply", d, bb.emit(call_op("sigmoid", d)))),
        axis=[2, 3], keepdims=True))).prim_func
    assert _lane_counts(prim) == lanes
    x = (RNG.standard_normal(shape) * 3).astype("float32")
    x64 = x.astype(np.float64)
    want = (x64 / (1 + np.exp(-x64))).mean(axis=(2, 3), keepdims=True)
    for interp in (False, True):
        np.testing.assert_allclose(_run(prim, x, want.shape, "float32", interp=interp), want,
                                   rtol=1e-5, atol=1e-6)

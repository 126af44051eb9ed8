"""Depthwise convolutions: narrow stride-1 ones over flat padded rows
(``te.schedules.conv_flat_rows``: the rows copied in by hand, whole tiles of
columns, one channel per row tile since no input row is shared between
channels), strided ones over the padded copy written by hand
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

from helpers.legalize import fused, tvar, walk

RNG = np.random.default_rng(41)


def _lower(xs, k, **attrs):
    c = xs[1]
    d, w, b = tvar("d", xs), tvar("w", (c, 1, k, k)), tvar("b", (1, c, 1, 1))
    return lower_fused(fused([d, w, b], lambda bb: call_op("nn.relu", bb.emit(call_op(
        "add", bb.emit(call_op("nn.conv2d", d, w, groups=c, **attrs)), b)))))


def _allocs(prim):
    return {s.buffer.name: s.buffer for s in walk(prim.body) if isinstance(s, tir.Allocate)}


def _check(low, xs, k, interp, **attrs):
    c = xs[1]
    x = RNG.standard_normal(xs).astype("float32")
    w = RNG.standard_normal((c, 1, k, k)).astype("float32")
    b = RNG.standard_normal((1, c, 1, 1)).astype("float32")
    ref = {"padding": (attrs["padding"],) * 4, "strides": (attrs.get("strides", 1),) * 2}
    want = np.maximum(get_op("relax.nn.conv2d").reference(x, w, groups=c, **ref) + b, 0)
    got = np.zeros(want.shape, "float32")
    compile_prim_funcs({"k": low.prim_func})["k"](x, w, b, got)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    if interp:
        again = np.zeros(want.shape, "float32")
        run_prim_func(low.prim_func, [x, w, b, again])
        np.testing.assert_allclose(again, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("xs,k,interp", [((1, 8, 13, 13), 5, False), ((2, 4, 7, 7), 3, True)])
def test_narrow_depthwise_over_flat_rows(xs, k, interp):
    low = _lower(xs, k, padding=k // 2)
    allocs = _allocs(low.prim_func)
    assert "pad_flat" in allocs
    # one channel per tile: a 1-D accumulator (no tile of channels)
    assert all(len(buf.shape) == 1 for name, buf in allocs.items() if name.endswith("_acc"))
    _check(low, xs, k, interp, padding=k // 2)


@pytest.mark.parametrize("xs,interp", [((1, 5, 29, 29), False), ((2, 3, 11, 9), True)])
def test_strided_depthwise_over_the_padded_copy(xs, interp):
    low = _lower(xs, 3, padding=1, strides=2)
    assert "pad_temp" in _allocs(low.prim_func)
    _check(low, xs, 3, interp, padding=1, strides=2)


def test_a_symbolic_batch():
    n = tir.Var("n")
    low = _lower((n, 6, 11, 11), 5, padding=2)
    kernel = compile_prim_funcs({"k": low.prim_func})["k"]
    for batch in (1, 2):
        x = RNG.standard_normal((batch, 6, 11, 11)).astype("float32")
        w = RNG.standard_normal((6, 1, 5, 5)).astype("float32")
        b = RNG.standard_normal((1, 6, 1, 1)).astype("float32")
        want = np.maximum(get_op("relax.nn.conv2d").reference(
            x, w, groups=6, padding=(2, 2, 2, 2)) + b, 0)
        got = np.zeros(want.shape, "float32")
        kernel(x, w, b, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)

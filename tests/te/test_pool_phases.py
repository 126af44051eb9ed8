"""Strided max pools with rows narrower than a vector over the input split
into its stride phases (``te.schedules.pool_max_phases``). The values
against numpy's reference pooling (NaNs included: the pooling propagates
them; infinities, both zeros, a window of -inf only) on LLVM and on the TIR interpreter, for padding, ceil_mode, dilation,
uneven strides, odd and prime sizes; and that a symbolic size keeps the
plain max pool."""

from __future__ import annotations

import numpy as np
import pytest

from phasec.backend.llvm import compile_prim_funcs
from phasec.interp.tir import run_prim_func
from phasec.ir import tir
from phasec.op import call_op, get_op
from phasec.op.legalize import lower_call

from helpers.legalize import tvar, walk

RNG = np.random.default_rng(37)


def _phases(prim):
    return any(isinstance(s, tir.Allocate) and s.buffer.name == "stride_phases"
               for s in walk(prim.body))


def _values(shape):
    """Normal values with NaNs, infinities and zeros of both signs among them
    (the max is the CPU's, its NaN an unordered compare: both are checked)."""
    x = RNG.standard_normal(shape).astype("float32")
    x.flat[5::13] = np.inf
    x.flat[3::7] = -np.inf
    x.flat[1::11] = -0.0
    x.flat[2::17] = 0.0
    x.flat[::29] = np.nan
    x[0, 0, :3, :3] = -np.inf  # a window of nothing but the max's identity
    return x


CASES = {  # (data shape, attrs)
    "3x3_s2_11": ((1, 3, 11, 11), {"pool_size": (3, 3), "strides": (2, 2)}),
    "3x3_s2_pad1_7": ((2, 3, 7, 7), {"pool_size": (3, 3), "strides": (2, 2),
                                        "padding": (1, 1, 1, 1)}),
    "3x2_s2x3_uneven_pads": ((1, 2, 13, 10), {"pool_size": (3, 2), "strides": (2, 3),
                                              "padding": (1, 0, 1, 1)}),
    "2x2_s3_drops_a_column": ((1, 2, 11, 10), {"pool_size": (2, 2), "strides": (3, 3)}),
    "ceil_mode": ((1, 2, 13, 9), {"pool_size": (3, 3), "strides": (2, 2),
                                  "padding": (1, 1, 1, 1), "ceil_mode": True}),
    "dilation2": ((1, 2, 17, 17), {"pool_size": (3, 3), "strides": (2, 2),
                                   "dilation": (2, 2)}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_phased_max_pool_matches_numpy(name):
    xs, attrs = CASES[name]
    low = lower_call(call_op("nn.max_pool2d", tvar("x", xs), **attrs), True)
    assert _phases(low.prim_func)
    x = _values(xs)
    want = get_op("relax.nn.max_pool2d").reference(x, **attrs)
    got = np.zeros(want.shape, "float32")
    compile_prim_funcs({"k": low.prim_func})["k"](x, got)
    np.testing.assert_array_equal(got, want)
    if name in ("3x3_s2_pad1_7", "ceil_mode"):
        again = np.zeros(want.shape, "float32")
        run_prim_func(low.prim_func, [x, again])
        np.testing.assert_array_equal(again, want)


def test_a_symbolic_size_keeps_the_plain_max_pool():
    h = tir.Var("h")
    attrs = {"pool_size": (3, 3), "strides": (2, 2)}
    low = lower_call(call_op("nn.max_pool2d", tvar("x", (1, 2, h, 11)), **attrs), True)
    assert not _phases(low.prim_func)
    x = _values((1, 2, 11, 11))
    want = get_op("relax.nn.max_pool2d").reference(x, **attrs)
    got = np.zeros(want.shape, "float32")
    compile_prim_funcs({"k": low.prim_func})["k"](x, got)
    np.testing.assert_array_equal(got, want)

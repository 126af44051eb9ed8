"""Max pools strided along their rows, the max over the window's rows
first, then over its columns (``te.schedules.pool_max_rows``).
The values against numpy's reference pooling (NaNs included: the pooling
propagates them; infinities, both zeros, a window of -inf only, a window
wholly in the padding) on LLVM and on the TIR interpreter, for padding,
ceil_mode, dilation, uneven strides, float64, odd and prime sizes; that
stride-1 pools keeping the input's width take their inner rows' columns in
one flat vector loop (a NaN or infinity at an edge column, which that loop
reaches from the neighbouring row, stays in its own windows); and that a
symbolic size keeps the plain max pool."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from phasec.arith.inbounds import prove_accesses
from phasec.backend.llvm import compile_prim_funcs
from phasec.errors import PhasecError
from phasec.interp.tir import run_prim_func
from phasec.ir import tir
from phasec.op import call_op, get_op
from phasec.op.legalize import lower_call

from helpers.legalize import tvar, walk

RNG = np.random.default_rng(37)


def _rows_first(prim):
    return any(isinstance(s, tir.Allocate) and s.buffer.name.endswith("_rows")
               for s in walk(prim.body))


def _edge_rows(prim):
    return any(isinstance(s, tir.Allocate) and s.buffer.name.endswith("_edge_rows")
               for s in walk(prim.body))


def _values(shape, dtype="float32"):
    """Normal values with NaNs, infinities and zeros of both signs among them
    (the max is the CPU's, its NaN an unordered compare: both are checked)."""
    x = RNG.standard_normal(shape).astype(dtype)
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
    "rows_stride1": ((1, 3, 9, 23), {"pool_size": (3, 3), "strides": (1, 2),
                                     "padding": (1, 0, 1, 2)}),
    "a_window_in_the_padding": ((1, 2, 7, 9), {"pool_size": (2, 2), "strides": (2, 2),
                                               "padding": (2, 2, 2, 2)}),
    "wide_input_rows": ((1, 2, 9, 53), {"pool_size": (3, 3), "strides": (2, 2),
                                        "padding": (1, 1, 1, 1)}),
    # input rows narrower than a vector, many of them: one loop over the
    # rows laid end to end, the border rows and columns one by one
    "flat_pad1": ((1, 3, 14, 14), {"pool_size": (3, 3), "strides": (2, 2),
                                   "padding": (1, 1, 1, 1)}),
    "flat_uneven": ((2, 2, 23, 11), {"pool_size": (3, 2), "strides": (2, 2),
                                     "padding": (1, 0, 2, 1), "dilation": (2, 1),
                                     "ceil_mode": True}),
    # input rows short enough for LLVM to unroll a loop over one: laid end
    # to end too
    "flat_short_rows": ((1, 3, 28, 28), {"pool_size": (2, 2), "strides": (2, 2)}),
    # output rows of a vector or more at a stride of 3: one output row at a
    # time (strides 1 and 2: tests/te/test_pool_max_blocks.py)
    "row_by_row": ((2, 3, 33, 50), {"pool_size": (2, 2), "strides": (2, 3)}),
    # input rows of a vector or more, output rows narrower (Inception v2's
    # 320x28x28 3x3/2, end padding 1): every output row's rows in one buffer
    "narrow_outputs": ((2, 3, 29, 31), {"pool_size": (3, 3), "strides": (2, 2),
                                        "padding": (0, 0, 1, 1)}),
    # a stride of 1 along the rows (Inception's 3x3/1 pad 1): rows first too
    "stride1_pad1": ((1, 3, 13, 13), {"pool_size": (3, 3), "strides": (1, 1),
                                      "padding": (1, 1, 1, 1)}),
    "row_by_row_stride1": ((1, 2, 7, 50), {"pool_size": (3, 2), "strides": (1, 3),
                                           "padding": (1, 0, 2, 1)}),
    "float64": ((1, 3, 19, 13), {"pool_size": (3, 3), "strides": (2, 2),
                                 "padding": (1, 1, 1, 1)}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_rows_first_max_pool_matches_numpy(name):
    xs, attrs = CASES[name]
    dtype = "float64" if name == "float64" else "float32"
    low = lower_call(call_op("nn.max_pool2d", tvar("x", xs, dtype), **attrs), True)
    assert _rows_first(low.prim_func)
    if name.startswith("flat") or name.startswith("row_by_row"):
        assert _edge_rows(low.prim_func) == name.startswith("flat")
    if name.startswith("row_by_row"):  # a buffer of one row, not of every output row
        (rows,) = [s.buffer for s in walk(low.prim_func.body)
                   if isinstance(s, tir.Allocate) and s.buffer.name.endswith("_rows")]
        assert rows.shape[0].value < 2 * xs[-1]
    x = _values(xs, dtype)
    want = get_op("relax.nn.max_pool2d").reference(x, **attrs)
    got = np.zeros(want.shape, dtype)
    compile_prim_funcs({"k": low.prim_func})["k"](x, got)
    np.testing.assert_array_equal(got, want)
    if name in ("3x3_s2_pad1_7", "ceil_mode", "a_window_in_the_padding", "flat_uneven"):
        again = np.zeros(want.shape, dtype)
        run_prim_func(low.prim_func, [x, again])
        np.testing.assert_array_equal(again, want)


def _flat_columns(prim):
    """Whether the pool takes its inner rows' columns in one flat vector loop."""
    return any(isinstance(s, tir.For) and s.kind == "vectorized" and s.loop_var.name == "g"
               for s in walk(prim.body))


FLAT = {  # stride 1, as many output columns as input columns: (data shape, attrs)
    "3x3_pad1_7": ((2, 3, 7, 7), {"pool_size": (3, 3), "padding": (1, 1, 1, 1)}),
    "3x3_pad1_prime_11": ((1, 5, 11, 11), {"pool_size": (3, 3), "padding": (1, 1, 1, 1)}),
    "3x3_pad1_14": ((1, 3, 14, 14), {"pool_size": (3, 3), "padding": (1, 1, 1, 1)}),
    "pad_right_only": ((1, 2, 13, 7), {"pool_size": (3, 3), "padding": (1, 0, 1, 2)}),
    "pad_left_only": ((1, 2, 9, 13), {"pool_size": (3, 3), "padding": (0, 2, 2, 0)}),
    "5x5_pad2_13x9": ((1, 3, 13, 9), {"pool_size": (5, 5), "padding": (2, 2, 2, 2),
                                       "ceil_mode": True}),
    "dilation2_pad2": ((1, 2, 17, 11), {"pool_size": (3, 3), "dilation": (2, 2),
                                        "padding": (2, 2, 2, 2)}),
}


STRIDED_FLAT = {  # output rows narrower than a vector, sw*OW >= left padding + W
    "3x3_s2_end_pad1_28": ((1, 3, 28, 28), {"pool_size": (3, 3), "strides": (2, 2),
                                            "padding": (0, 0, 1, 1)}),
    "3x3_s2_ceil_28": ((2, 2, 28, 28), {"pool_size": (3, 3), "strides": (2, 2),
                                        "ceil_mode": True}),
    "3x3_s2_pad1_prime_27": ((1, 3, 29, 27), {"pool_size": (3, 3), "strides": (2, 2),
                                              "padding": (1, 1, 1, 1)}),
    "3x3_s3_end_pad2_prime_41": ((1, 2, 23, 41), {"pool_size": (3, 3), "strides": (2, 3),
                                                  "padding": (0, 0, 1, 2)}),
    "3x3_s2_pad1_13": ((1, 3, 13, 13), {"pool_size": (3, 3), "strides": (2, 2),
                                        "padding": (1, 1, 1, 1)}),
}


@pytest.mark.parametrize("name", [*FLAT, *STRIDED_FLAT])
def test_flat_columns_match_numpy(name):
    """The inner rows' columns (stride 1) or every row's (rows of sw*OW) in
    one flat loop, the columns whose windows that loop ran into the next or
    previous row recomputed after it: a NaN or infinity there stays out."""
    xs, attrs = {**FLAT, **STRIDED_FLAT}[name]
    low = lower_call(call_op("nn.max_pool2d", tvar("x", xs), **attrs), True)
    assert _rows_first(low.prim_func) and _flat_columns(low.prim_func)
    assert prove_accesses(low.prim_func).counts()[1] == 0  # every access proven in bounds
    x = _values(xs)
    if name in FLAT:  # edge columns the flat loop reaches from the neighbouring rows
        x[0, -1, 2, 0], x[0, -1, 4, -1], x[0, -1, 5, 0] = np.nan, np.inf, np.inf
    else:  # the first columns a window past the previous row would read
        x[0, -1, 1:, :2] = np.inf
        x[0, -1, 2, 0] = np.nan
    want = get_op("relax.nn.max_pool2d").reference(x, **attrs)
    for run in (lambda got: compile_prim_funcs({"k": low.prim_func})["k"](x, got),
                lambda got: run_prim_func(low.prim_func, [x, got])):
        got = np.zeros(want.shape, "float32")
        run(got)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("xs, attrs", [
    ((1, 2, 8, 8), {"pool_size": (3, 3), "padding": (1, 1, 1, 1)}),  # loops of whole vectors
    ((1, 2, 27, 27), {"pool_size": (3, 3), "strides": (2, 2)}),  # sw*OW = 26 < 27
    ((1, 2, 13, 13), {"pool_size": (3, 3), "strides": (2, 2)}),  # sw*OW = 12 < 13
    ((1, 2, 13, 13), {"pool_size": (3, 3)}),  # 11 output columns
])
def test_other_pools_keep_the_columns_by_row(xs, attrs):
    low = lower_call(call_op("nn.max_pool2d", tvar("x", xs), **attrs), True)
    assert not _flat_columns(low.prim_func)
    x = _values(xs)
    want = get_op("relax.nn.max_pool2d").reference(x, **attrs)
    got = np.zeros(want.shape, "float32")
    compile_prim_funcs({"k": low.prim_func})["k"](x, got)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("xs, attrs", [
    ((1, 3, 27, 27), {"pool_size": (3, 3), "strides": (2, 2)}),  # no padding column read
    ((1, 2, 28, 28), {"pool_size": (3, 3), "strides": (2, 2),
                      "padding": (1, 1, 1, 1)}),  # the left one, not the right ones
    ((2, 3, 29, 31), {"pool_size": (3, 3), "strides": (2, 2),
                      "padding": (0, 0, 1, 1)}),  # end padding past every tap
    ((1, 2, 21, 29), {"pool_size": (3, 3), "strides": (2, 2), "dilation": (1, 2),
                      "padding": (0, 1, 0, 1)}),  # every other column: left and one right
])
def test_only_the_padding_columns_a_tap_reads_are_filled(xs, attrs):
    """Output rows narrower than a vector over input rows of one or more:
    the rows' buffer holds the max's identity in exactly the padding columns
    some output's taps read (each row's, in one loop over the rows); the
    others are never written. The TIR interpreter starts every buffer as
    NaN: a column read but left unwritten would show in the output."""
    low = lower_call(call_op("nn.max_pool2d", tvar("x", xs), **attrs), True)
    W, (_, left, _, _) = xs[3], attrs.get("padding", (0, 0, 0, 0))
    (_, sw), (_, dw) = attrs["strides"], attrs.get("dilation", (1, 1))
    x = _values(xs)
    want = get_op("relax.nn.max_pool2d").reference(x, **attrs)
    read = {ox * sw + r1 * dw for ox in range(want.shape[3]) for r1 in range(3)}
    pads = [col for col in read if not left <= col < left + W]
    loops = [s for s in walk(low.prim_func.body)
             if isinstance(s, tir.For) and s.loop_var.name == "p"]
    fills = [s for loop in loops for s in walk(loop.body) if isinstance(s, tir.BufferStore)
             and s.buffer.name.endswith("_rows") and isinstance(s.value, tir.FloatImm)]
    assert len(fills) == len(pads)
    assert all(loop.extent.value == want.shape[2] for loop in loops)
    for run in (lambda got: compile_prim_funcs({"k": low.prim_func})["k"](x, got),
                lambda got: run_prim_func(low.prim_func, [x, got])):
        got = np.zeros(want.shape, "float32")
        run(got)
        np.testing.assert_array_equal(got, want)


def test_a_symbolic_size_keeps_the_plain_max_pool():
    h = tir.Var("h")
    attrs = {"pool_size": (3, 3), "strides": (2, 2)}
    low = lower_call(call_op("nn.max_pool2d", tvar("x", (1, 2, h, 11)), **attrs), True)
    assert not _rows_first(low.prim_func)
    x = _values((1, 2, 11, 11))
    want = get_op("relax.nn.max_pool2d").reference(x, **attrs)
    got = np.zeros(want.shape, "float32")
    compile_prim_funcs({"k": low.prim_func})["k"](x, got)
    np.testing.assert_array_equal(got, want)


@st.composite
def _pools(draw):
    """A max pooling strided along its rows: input rows narrower than a
    vector, around one or two, or over three vectors; any window, padding,
    dilation and ceil_mode."""
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = tuple(draw(st.integers(0, k[i % 2] - 1)) for i in range(4))
    attrs = {"pool_size": k, "strides": (draw(st.integers(1, 3)), draw(st.integers(1, 3))),
             "padding": pads, "dilation": d, "ceil_mode": draw(st.booleans())}
    h = draw(st.integers(k[0] * d[0], 29))
    w = draw(st.sampled_from([*range(k[1] * d[1], 16), 17, 28, 33, 48, 53]))
    return (draw(st.integers(1, 2)), draw(st.integers(1, 3)), h, w), attrs


@settings(max_examples=8)
@given(_pools())
def test_drawn_max_pools_match_numpy(case):
    xs, attrs = case
    try:
        low = lower_call(call_op("nn.max_pool2d", tvar("x", xs), **attrs), True)
    except PhasecError:
        assume(False)  # an output of no positions, a padding the operator refuses
    assert _rows_first(low.prim_func)
    x = _values(xs)
    want = get_op("relax.nn.max_pool2d").reference(x, **attrs)
    got = np.zeros(want.shape, "float32")
    compile_prim_funcs({"k": low.prim_func})["k"](x, got)
    np.testing.assert_array_equal(got, want)


def test_the_output_rows_of_narrow_outputs_stay_a_loop(xeon):
    # output rows narrower than a vector, read from the rows' maxima: one
    # loop over the output rows, kept (LLVM unrolled SqueezeNet's 13 rows of
    # 256x27x27 3x3/2 and vectorized each again: 204 -> 72 ms of LLVM for
    # ~1% of the pool's run time); the values are still numpy's
    xs, attrs = CASES["narrow_outputs"]
    low = lower_call(call_op("nn.max_pool2d", tvar("x", xs), **attrs), True)
    kept = [s for s in walk(low.prim_func.body)
            if isinstance(s, tir.AttrStmt) and s.key == tir.KEEP_LOOP_ATTR]
    assert len(kept) == 1 and kept[0].value.value == 1
    loop = kept[0].body
    assert loop.kind == "serial" and loop.extent.value == 14  # (29 + 1 - 3) // 2 + 1
    x = _values(xs)
    want = get_op("relax.nn.max_pool2d").reference(x, **attrs)
    got = np.zeros(want.shape, "float32")
    compile_prim_funcs({"k": low.prim_func})["k"](x, got)
    np.testing.assert_array_equal(got, want)

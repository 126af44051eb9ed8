"""Float 2-D average pools of static shape, rows first then columns, divided
by a count known at build time (``te.schedules.pool_avg_rows``).

The values against an independent numpy pooling (zero-padded sums over each
window, the count from a padded mask of ones) on LLVM and on the TIR
interpreter, for padding (uneven, windows wholly in it), ceil_mode,
dilation, strides, count_include_pad, float64, odd and prime sizes, and
drawn cases; that stride-1 pools keeping the input's width take one flat
vector loop over their inner rows' columns (infinities and NaNs at the
edge columns, whose flat taps reach the neighbouring rows, stay in their
own windows); and that a symbolic size keeps the plain average pool."""

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
from phasec.op import call_op
from phasec.op.legalize import lower_call

from helpers.legalize import tvar, walk

RNG = np.random.default_rng(41)


def _out_size(n, k, s, lo, hi, d, ceil):
    span = n + lo + hi - d * (k - 1) - 1
    q = -(-span // s) if ceil else span // s
    if ceil and q * s >= n + lo:  # the last window must start inside (ONNX, PyTorch)
        q -= 1
    return q + 1


def _avg_pool_ref(x, pool_size, strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1),
                  ceil_mode=False, count_include_pad=False):
    """NCHW average pooling with numpy: windows over a zero-padded copy, the
    count over a padded mask (1 inside the input, or inside the padded
    extent with ``count_include_pad``), at least 1."""
    (kh, kw), (sh, sw), (dh, dw) = pool_size, strides, dilation
    t, l, b, r = padding
    n, c, h, w = x.shape
    oh = _out_size(h, kh, sh, t, b, dh, ceil_mode)
    ow = _out_size(w, kw, sw, l, r, dw, ceil_mode)
    extra = (sh + kh * dh, sw + kw * dw)  # room for ceil_mode's last window
    big = np.zeros((n, c, h + t + b + extra[0], w + l + r + extra[1]), np.float64)
    big[:, :, t:t + h, l:l + w] = x
    mask = np.zeros(big.shape[2:])
    if count_include_pad:
        mask[:t + h + b, :l + w + r] = 1
    else:
        mask[t:t + h, l:l + w] = 1
    out = np.empty((n, c, oh, ow), np.float64)
    for i in range(oh):
        for j in range(ow):
            rows = slice(i * sh, i * sh + dh * (kh - 1) + 1, dh)
            cols = slice(j * sw, j * sw + dw * (kw - 1) + 1, dw)
            out[:, :, i, j] = big[:, :, rows, cols].sum(axis=(2, 3)) / max(
                1, mask[rows, cols].sum())
    return out.astype(x.dtype)


def _rows_first(prim):
    return any(isinstance(s, tir.Allocate) and s.buffer.name.endswith("_rows")
               for s in walk(prim.body))


def _flat_columns(prim):
    """Whether the pool takes its inner rows' columns in one flat vector loop."""
    return any(isinstance(s, tir.For) and s.kind == "vectorized" and s.loop_var.name == "g"
               for s in walk(prim.body))


def _check(xs, attrs, dtype="float32", interp=False, x=None, flat=None):
    low = lower_call(call_op("nn.avg_pool2d", tvar("x", xs, dtype), **attrs), True)
    assert _rows_first(low.prim_func)
    if flat is not None:
        assert _flat_columns(low.prim_func) == flat
    assert prove_accesses(low.prim_func).counts()[1] == 0  # every access proven in bounds
    x = RNG.standard_normal(xs).astype(dtype) if x is None else x
    want = _avg_pool_ref(x, **attrs)
    got = np.zeros(want.shape, dtype)
    compile_prim_funcs({"k": low.prim_func})["k"](x, got)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    if interp:
        again = np.zeros(want.shape, dtype)
        run_prim_func(low.prim_func, [x, again])
        np.testing.assert_allclose(again, want, rtol=tol, atol=tol)


CASES = {  # (data shape, attrs)
    "3x3_s1_pad1_14": ((1, 5, 14, 14), {"pool_size": (3, 3), "padding": (1, 1, 1, 1)}),
    "3x3_s1_pad1_28_include_pad": ((2, 3, 28, 28), {"pool_size": (3, 3),
                                                    "padding": (1, 1, 1, 1),
                                                    "count_include_pad": True}),
    "7x7_global": ((1, 3, 7, 7), {"pool_size": (7, 7)}),
    "3x2_s2x3_uneven_pads": ((1, 2, 13, 11), {"pool_size": (3, 2), "strides": (2, 3),
                                              "padding": (1, 0, 2, 1)}),
    "ceil_mode": ((1, 2, 13, 9), {"pool_size": (3, 3), "strides": (2, 2),
                                  "padding": (1, 1, 1, 1), "ceil_mode": True}),
    "ceil_mode_include_pad": ((1, 2, 11, 17), {"pool_size": (2, 3), "strides": (2, 2),
                                               "padding": (0, 1, 0, 1), "ceil_mode": True,
                                               "count_include_pad": True}),
    "dilation2": ((1, 2, 17, 19), {"pool_size": (3, 3), "dilation": (2, 2),
                                   "padding": (2, 1, 2, 3)}),
    "a_window_in_the_padding": ((1, 2, 7, 9), {"pool_size": (2, 2), "strides": (2, 2),
                                               "padding": (2, 2, 2, 2)}),
    "wide_rows": ((1, 2, 5, 53), {"pool_size": (3, 3), "padding": (1, 1, 1, 1)}),
    "no_inner_row": ((1, 2, 2, 31), {"pool_size": (3, 3), "padding": (1, 1, 1, 1)}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_rows_first_avg_pool_matches_numpy(name):
    xs, attrs = CASES[name]
    _check(xs, attrs, interp=name in ("ceil_mode", "a_window_in_the_padding", "dilation2"))


FLAT = {  # stride 1, as many output columns as input columns: (data shape, attrs)
    "3x3_pad1_14": ((1, 3, 14, 14), {"pool_size": (3, 3), "padding": (1, 1, 1, 1)}),
    "3x3_pad1_prime_13x17_include_pad": ((2, 3, 13, 17), {"pool_size": (3, 3),
                                                          "padding": (1, 1, 1, 1),
                                                          "count_include_pad": True}),
    "3x3_pad_right_only": ((1, 2, 11, 7), {"pool_size": (3, 3), "padding": (1, 0, 1, 2)}),
    "3x3_pad_left_only": ((1, 2, 5, 19), {"pool_size": (3, 3), "padding": (0, 2, 2, 0)}),
    "5x5_pad2_7x7": ((1, 4, 7, 7), {"pool_size": (5, 5), "padding": (2, 2, 2, 2)}),
    "3x3_dilation2_pad2": ((1, 2, 11, 23), {"pool_size": (3, 3), "dilation": (2, 2),
                                            "padding": (2, 2, 2, 2)}),
    "1x3_one_row": ((1, 2, 9, 37), {"pool_size": (1, 3), "padding": (0, 1, 0, 1)}),
}


@pytest.mark.parametrize("name", list(FLAT))
def test_flat_columns_match_numpy(name):
    xs, attrs = FLAT[name]
    _check(xs, attrs, interp=True, flat=True)


def test_flat_columns_keep_infinities_and_nans_in_their_windows():
    """An infinity or NaN in the first or last column of a row reaches the
    flat loop's sums of the neighbouring row's edge column; those outputs
    are recomputed over their own taps, as numpy's windows."""
    xs, attrs = (1, 2, 9, 11), {"pool_size": (3, 3), "padding": (1, 1, 1, 1)}
    x = RNG.standard_normal(xs).astype("float32")
    x[0, 0, 3, 0], x[0, 0, 5, 10], x[0, 1, 4, 0], x[0, 1, 6, 10] = np.inf, -np.inf, np.nan, np.nan
    _check(xs, attrs, interp=True, x=x, flat=True)


def test_strided_or_narrowed_pools_keep_the_columns_by_row():
    _check((1, 2, 13, 13), {"pool_size": (3, 3), "strides": (2, 2),
                            "padding": (1, 1, 1, 1)}, flat=False)
    _check((1, 2, 13, 13), {"pool_size": (3, 3), "strides": (1, 2),
                            "padding": (1, 1, 1, 1)}, flat=False)
    _check((1, 2, 13, 13), {"pool_size": (3, 3)}, flat=False)  # 11 output columns
    # a window of one column (an LRN's sum over channels): its rows are long already
    _check((1, 1, 19, 37), {"pool_size": (5, 1), "padding": (2, 0, 2, 0)}, flat=False)


def test_float64():
    _check((1, 3, 19, 13), {"pool_size": (3, 3), "strides": (2, 1),
                            "padding": (1, 1, 1, 1)}, "float64")


def test_a_symbolic_size_keeps_the_plain_avg_pool():
    h = tir.Var("h")
    attrs = {"pool_size": (3, 3), "padding": (1, 1, 1, 1)}
    low = lower_call(call_op("nn.avg_pool2d", tvar("x", (1, 2, h, 11)), **attrs), True)
    assert not _rows_first(low.prim_func)
    x = RNG.standard_normal((1, 2, 11, 11)).astype("float32")
    want = _avg_pool_ref(x, **attrs)
    got = np.zeros(want.shape, "float32")
    compile_prim_funcs({"k": low.prim_func})["k"](x, got)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@st.composite
def _pools(draw):
    """Any window, strides, padding, dilation, ceil_mode and
    count_include_pad over rows narrower than a vector or wider."""
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = tuple(draw(st.integers(0, k[i % 2] - 1)) for i in range(4))
    attrs = {"pool_size": k, "strides": (draw(st.integers(1, 3)), draw(st.integers(1, 3))),
             "padding": pads, "dilation": d, "ceil_mode": draw(st.booleans()),
             "count_include_pad": draw(st.booleans())}
    h = draw(st.integers(k[0] * d[0], 23))
    w = draw(st.sampled_from([*range(k[1] * d[1], 16), 17, 29, 37]))
    return (draw(st.integers(1, 2)), draw(st.integers(1, 3)), h, w), attrs


@settings(max_examples=8)
@given(_pools())
def test_drawn_avg_pools_match_numpy(case):
    xs, attrs = case
    try:
        lower_call(call_op("nn.avg_pool2d", tvar("x", xs), **attrs), True)
    except PhasecError:
        assume(False)  # an output of no positions, a padding the operator refuses
    _check(xs, attrs)


def _quotient_values(n):
    """``n`` float32 values over every exponent (random bit patterns) and the
    edges: zeros, infinities, NaN, the largest finite, subnormals, and the
    neighbourhood of 9 * 2**-126 (quotients around the smallest normal)."""
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3.4028235e38, -3.4028235e38,
                      1e-45, -1e-45, 1.1754944e-38, 1.0, -1.0, 9.0, 25.0, 49.0],
                     np.float32)
    near = np.float32(9 * 2.0 ** -126).view(np.int32) + np.arange(-60, 61, dtype=np.int32)
    bits = RNG.integers(0, 2 ** 32, n - len(edges) - len(near), dtype=np.uint64)
    return np.concatenate([edges, near.view(np.float32), bits.astype(np.uint32).view(np.float32),
                           -near.view(np.float32)])[:n]


def _spaced(k, rows, cols, values):
    """A (1, 1, rows*k, cols*k) image of zeros with ``values`` at the
    centres of its k x k blocks: every window of a k x k pool holds at most
    one of them, so its sum is that value exactly (or zero)."""
    x = np.zeros((1, 1, rows * k, cols * k), np.float32)
    x[0, 0, k // 2::k, k // 2::k] = values.reshape(rows, cols)
    return x


@pytest.mark.parametrize("k,include_pad", [(3, True), (3, False), (5, True), (7, False)])
def test_quotients_round_as_float32_division(k, include_pad):
    """The flat loop's odd counts (9, 25, 49: whole windows) divide through
    a float64 reciprocal; the quotients are float32 division's, bit for
    bit, over every exponent, subnormal results, infinities, NaN and signed
    zeros (the reference: numpy's division of the exact window sums; the
    edge columns keep the division). With subnormal results flushed (the
    default on x86), those are zeros, signed as the quotient where the sum
    is normal, and the others unchanged (the few within 2**-20 of 2**-126
    are not compared there)."""
    attrs = {"pool_size": (k, k), "padding": (k // 2,) * 4, "count_include_pad": include_pad}
    rows, cols = 24, 23
    x = _spaced(k, rows, cols, _quotient_values(rows * cols))
    low = lower_call(call_op("nn.avg_pool2d", tvar("x", x.shape), **attrs), True)
    assert _flat_columns(low.prim_func)
    text = str(low.prim_func)
    assert f"T.float64({1 / k ** 2!r})" in text  # the whole windows' reciprocal
    assert " / T.float32(" in text  # the edge columns' loops keep the division
    with np.errstate(invalid="ignore"):  # (infinities of both signs in a window: NaN)
        want = _avg_pool_ref(x, **attrs)
    for flush in (False, True):
        got = np.zeros(want.shape, np.float32)
        compile_prim_funcs({"k": low.prim_func}, flush_subnormals=flush)["k"](x, got)
        if not flush:
            np.testing.assert_array_equal(got.view(np.uint32)[~np.isnan(want)],
                                          want.view(np.uint32)[~np.isnan(want)])
            assert np.isnan(got[np.isnan(want)]).all()
            continue
        normal = np.abs(want) >= np.float32(2.0 ** -126 * (1 + 2 ** -20))
        tiny = np.abs(want) < np.float32(2.0 ** -126 * (1 - 2 ** -20))  # (not the sliver between)
        np.testing.assert_array_equal(got[normal], want[normal])
        assert (got[tiny] == 0).all()
        # a sign where the sum is normal (a subnormal value's sum is flushed already,
        # a -0 then added to +0)
        summed_normal = _avg_pool_ref((np.abs(x) >= 2.0 ** -126).astype(np.float32), **attrs) > 0
        signed = tiny & summed_normal
        assert signed.sum() > 10
        np.testing.assert_array_equal(np.signbit(got[signed]), np.signbit(want[signed]))
        assert np.isnan(got[np.isnan(want)]).all()
    again = np.zeros(want.shape, np.float32)
    run_prim_func(low.prim_func, [x, again])
    np.testing.assert_array_equal(again, want)  # (the interpreter keeps subnormals)

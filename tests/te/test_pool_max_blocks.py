"""Max pools at a stride of 1 or 2 over output rows of a vector or more, in
blocks of rows whose columns take one flat loop
(``te.schedules.pool_max_blocks``). The values against numpy's reference
pooling on LLVM and on the TIR interpreter (NaNs, infinities, zeros of
both signs, a window of -inf only; NaNs and infinities planted at the edge
columns, which the flat loop reaches from the neighbouring row's slot and
recomputes) for the models' shapes (112 wide with padding 1 or end padding
1, 111 and 55 without padding, ceil_mode), prime widths, padding on one
side only, dilation, 5x5 and 2x2 windows, stride 1, float64; every access
proven in bounds; the bits equal to the row-by-row schedule's, zeros'
signs included."""

from __future__ import annotations

import numpy as np
import pytest

import phasec
from phasec.arith.inbounds import prove_accesses
from phasec.backend.llvm import compile_prim_funcs
from phasec.interp.tir import run_prim_func
from phasec.ir import IRModule, tir
from phasec.ir.structural import assert_structural_equal
from phasec.op import call_op, get_op
from phasec.op.legalize import lower_call
from phasec.te.schedules import pool_max_blocks, pool_max_rows
from phasec.te.schedules.pool_window import RowsFirst

from helpers.legalize import tvar, walk

RNG = np.random.default_rng(53)

CASES = {  # (data shape, attrs)
    "resnet_stem_pad1": ((1, 2, 19, 112), {"pool_size": (3, 3), "strides": (2, 2),
                                           "padding": (1, 1, 1, 1)}),
    "inception_end_pad1": ((1, 2, 17, 112), {"pool_size": (3, 3), "strides": (2, 2),
                                             "padding": (0, 0, 1, 1)}),
    "squeezenet_111": ((1, 2, 15, 111), {"pool_size": (3, 3), "strides": (2, 2)}),
    "squeezenet_55": ((2, 3, 15, 55), {"pool_size": (3, 3), "strides": (2, 2)}),
    "ceil_111": ((1, 2, 16, 111), {"pool_size": (3, 3), "strides": (2, 2),
                                   "ceil_mode": True}),
    "prime_37_top_left_pads": ((1, 2, 13, 37), {"pool_size": (3, 3), "strides": (2, 2),
                                                "padding": (1, 1, 0, 0)}),
    "prime_61_bottom_right_pads": ((1, 2, 11, 61), {"pool_size": (3, 3), "strides": (2, 2),
                                                    "padding": (0, 0, 2, 1)}),
    "dilation2": ((1, 2, 17, 71), {"pool_size": (3, 3), "strides": (2, 2),
                                   "dilation": (2, 2), "padding": (1, 2, 1, 2)}),
    "5x5_pad2": ((1, 2, 13, 64), {"pool_size": (5, 5), "strides": (2, 2),
                                  "padding": (2, 2, 2, 2)}),
    "2x2_vgg": ((1, 2, 8, 64), {"pool_size": (2, 2), "strides": (2, 2)}),
    "stride1_27_pad1": ((1, 3, 11, 27), {"pool_size": (3, 3), "padding": (1, 1, 1, 1)}),
    "stride1_uneven_pads": ((1, 2, 9, 41), {"pool_size": (3, 2), "padding": (1, 0, 2, 1)}),
    "rows_stride1": ((1, 2, 9, 53), {"pool_size": (3, 3), "strides": (1, 2),
                                     "padding": (1, 1, 1, 1)}),
    "odd_ceil_batch2": ((2, 3, 21, 47), {"pool_size": (3, 3), "strides": (2, 2),
                                         "padding": (1, 1, 1, 1), "ceil_mode": True}),
    "float64": ((1, 2, 11, 45), {"pool_size": (3, 3), "strides": (2, 2),
                                 "padding": (1, 1, 1, 1)}),
    # outputs whose taps reach a neighbour's slot, taken from their row's
    # maxima before the next row overwrites them: two a row past the slot
    # (stride 1, prime width), left of it (left padding wider than the
    # stride), both, a column dilation; inner rows left over after the
    # blocks, with a bottom border (ceil_mode)
    "edges_stride1_prime_37": ((1, 3, 11, 37), {"pool_size": (3, 3)}),
    "edges_left_5x5_pad2_prime_43": ((1, 2, 13, 43), {"pool_size": (5, 5), "strides": (2, 2),
                                                      "padding": (2, 2, 2, 2)}),
    "edges_both_sides_53": ((1, 2, 15, 53), {"pool_size": (3, 5), "strides": (2, 2),
                                             "padding": (1, 1, 1, 1)}),
    "edges_column_dilation3": ((1, 2, 15, 50), {"pool_size": (3, 3), "strides": (2, 2),
                                                "dilation": (1, 3), "padding": (1, 3, 1, 3)}),
    "rows_left_over_bottom_border_ceil": ((1, 2, 20, 47), {
        "pool_size": (3, 3), "strides": (2, 2), "padding": (0, 1, 0, 1), "ceil_mode": True}),
}


def _values(shape, dtype):
    """Normal values with NaNs, infinities and zeros of both signs among
    them, and NaNs and infinities at the first and last two columns of some
    rows (the columns the flat loop reads from a neighbouring row's slot)."""
    x = RNG.standard_normal(shape).astype(dtype)
    x.flat[5::13] = np.inf
    x.flat[3::7] = -np.inf
    x.flat[1::11] = -0.0
    x.flat[2::17] = 0.0
    x.flat[::29] = np.nan
    x[0, 0, :3, :3] = -np.inf  # a window of nothing but the max's identity
    x[0, -1, 2::5, 0] = np.nan
    x[0, -1, 4::5, -1] = np.nan
    x[0, -1, 1::3, 1] = np.inf
    x[0, -1, 3::4, -2] = np.inf
    return x


def _lowered(xs, attrs, dtype="float32"):
    return lower_call(call_op("nn.max_pool2d", tvar("x", xs, dtype), **attrs), True)


def _buffers(prim):
    return {s.buffer.name.rsplit("_", 1)[-1] for s in walk(prim.body)
            if isinstance(s, tir.Allocate)}


@pytest.mark.parametrize("name", list(CASES))
def test_blocks_match_numpy(name):
    xs, attrs = CASES[name]
    dtype = "float64" if name == "float64" else "float32"
    low = _lowered(xs, attrs, dtype)
    # the blocks' buffers: the rows', the recomputed columns', and at
    # stride 2 the stride phases
    assert {"rows", "edge"} <= _buffers(low.prim_func)
    assert ("phases" in _buffers(low.prim_func)) == (attrs.get("strides", (1, 1))[1] == 2)
    assert prove_accesses(low.prim_func).counts()[1] == 0  # every access proven in bounds
    # its text reads back as the same kernel (each loop variable bound once)
    mod = IRModule({"k": low.prim_func})
    assert_structural_equal(phasec.parse(mod.script(), "pool.py"), mod)
    x = _values(xs, dtype)
    want = get_op("relax.nn.max_pool2d").reference(x, **attrs)
    for run in (lambda got: compile_prim_funcs({"k": low.prim_func})["k"](x, got),
                lambda got: run_prim_func(low.prim_func, [x, got])):
        got = np.zeros(want.shape, dtype)
        run(got)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["resnet_stem_pad1", "squeezenet_111", "ceil_111",
                                  "stride1_27_pad1", "dilation2", "squeezenet_55",
                                  "edges_stride1_prime_37", "edges_left_5x5_pad2_prime_43",
                                  "edges_both_sides_53", "edges_column_dilation3",
                                  "rows_left_over_bottom_border_ceil"])
def test_blocks_give_the_row_by_row_bits(name, monkeypatch):
    """The same maxima in the same trees as one output row at a time: the
    same bits, which of two zeros included (and the same NaN)."""
    xs, attrs = CASES[name]
    x = RNG.choice(np.array([0.0, -0.0, 1.0, -1.0, np.nan, -np.inf], "float32"), xs)
    got = {}
    for way in ("blocks", "rows"):
        if way == "rows":
            def by_row(w, rows):
                inside = RowsFirst.of(w)
                W, OW = w.data.shape[3].value, w.out_shape[3].value
                (sw, dw, KW, left) = (w.strides[1], w.dilation[1], w.pool_size[1],
                                      w.padding[1])
                pitch = max(left + W, (OW - 1) * sw + (KW - 1) * dw + 1)
                return pool_max_rows._row_by_row(w, inside.first, inside.stop, pitch)
            monkeypatch.setattr(pool_max_blocks, "schedule", by_row)
        low = _lowered(xs, attrs)
        assert ("edge" in _buffers(low.prim_func)) == (way == "blocks")
        out = np.zeros(get_op("relax.nn.max_pool2d").reference(x, **attrs).shape, "float32")
        compile_prim_funcs({"k": low.prim_func})["k"](x, out)
        got[way] = out.view(np.int32)
    np.testing.assert_array_equal(got["blocks"], got["rows"])


def test_stride3_keeps_row_by_row():
    low = _lowered((1, 2, 9, 60), {"pool_size": (3, 3), "strides": (2, 3)})
    assert "edge" not in _buffers(low.prim_func)

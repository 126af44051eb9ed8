"""Grouped NCHW conv2d (ShuffleNet's 1x1 convolutions: 4 groups of 34, 68
and 136 channels at 28x28, 14x14 and 7x7). Narrow stride-1 ones run over
the rows laid end to end (``te.schedules.conv_flat_rows``), grouped 1x1 ones
without padding as one GEMM over all positions (``conv_pointwise_flat``),
and the GEMM schedule
takes them when its register tiles' rows lie in one group
(``GemmPlan.row_group``). The values against numpy's reference
convolution on LLVM and on the TIR interpreter for groups of 68, 34, 17
(odd), 6 and 1 (depthwise: flat rows too, no GEMM) channels, 1x1 and
3x3, a symbolic batch; the schedule taken (the GEMM's register tiles,
read from the kernel's buffers)."""

from __future__ import annotations

import numpy as np
import pytest

from phasec.backend.llvm import compile_prim_funcs
from phasec.interp.tir import run_prim_func
from phasec.ir import TensorStructInfo, Var, tir
from phasec.op import call_op, get_op
from phasec.op.legalize import lower_fused
from phasec.target.tuning import host_tuning

from helpers.legalize import fused  # a Primitive function built by a BlockBuilder

RNG = np.random.default_rng(16)


def _grouped(n, og: int, groups: int, h: int, w: int, k: int, pad: int):
    """conv2d (+ bias + relu) of ``groups`` groups of ``og`` channels in and out."""
    c = og * groups
    d = Var("d", TensorStructInfo((n, c, h, w), "float32"))
    wt = Var("w", TensorStructInfo((c, og, k, k), "float32"))
    b = Var("b", TensorStructInfo((1, c, 1, 1), "float32"))
    return fused([d, wt, b], lambda bb: call_op("nn.relu", bb.emit(call_op(
        "add", bb.emit(call_op("nn.conv2d", d, wt, groups=groups, padding=pad)), b))))


def _allocs(prim) -> dict[str, list[tuple[int, ...]]]:
    out: dict[str, list[tuple[int, ...]]] = {}
    stack = [prim.body]
    while stack:
        s = stack.pop()
        if isinstance(s, tir.Allocate):
            shape = tuple(int(d.value) if isinstance(d, tir.IntImm) else -1
                          for d in s.buffer.shape)
            out.setdefault(s.buffer.name, []).append(shape)
        stack.extend(tir.stmt_children(s))
    return out


def _check(low, og, groups, batch, h, w, k, pad, interp: bool) -> None:
    c = og * groups
    x = RNG.standard_normal((batch, c, h, w)).astype("float32")
    wa = RNG.standard_normal((c, og, k, k)).astype("float32")
    ba = RNG.standard_normal((1, c, 1, 1)).astype("float32")
    want = np.maximum(get_op("relax.nn.conv2d").reference(
        x, wa, padding=(pad,) * 4, groups=groups) + ba, 0)
    got = np.zeros(want.shape, "float32")
    compile_prim_funcs({"k": low.prim_func})["k"](x, wa, ba, got)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    if interp:
        got = np.zeros(want.shape, "float32")
        run_prim_func(low.prim_func, [x, wa, ba, got])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


#: (the interpreter runs ~5-10k multiply-adds a second: cases on it stay
#: under ~40k; numpy checks every case)
CASES = {  # og, groups, h, w, k, pad, on the interpreter too (small enough)
    "og68_1x1_narrow": (68, 2, 3, 5, 1, 0, False),
    "og68_3x3_narrow": (68, 2, 7, 7, 3, 1, False),
    "og34_1x1_rows_under_two_vectors": (34, 2, 2, 20, 1, 0, False),
    "og34_3x3_narrow": (34, 3, 5, 6, 3, 1, False),
    "og17_1x1_odd": (17, 3, 4, 9, 1, 0, True),
    "og17_3x3_odd": (17, 3, 5, 5, 3, 1, False),
    "og6_3x3": (6, 3, 7, 7, 3, 1, False),
    "og6_3x3_small": (6, 3, 3, 7, 3, 1, True),
    "og6_1x1_wide": (6, 2, 3, 40, 1, 0, True),
    "og68_1x1_wide_plain": (68, 2, 2, 33, 1, 0, False),
    "depthwise_7x7_narrow": (1, 12, 7, 7, 7, 3, True),  # (3x3, 5x5: stride_phases)
    "depthwise_3x3_14": (1, 16, 14, 14, 3, 1, False),
    "depthwise_3x3_rows_of_few_vectors": (1, 8, 4, 20, 3, 1, True),
    "depthwise_3x3_wide_plain": (1, 4, 3, 32, 3, 1, True),
    "depthwise_1x1_narrow": (1, 5, 6, 9, 1, 0, True),
}


@pytest.mark.parametrize("name", list(CASES))
def test_grouped_conv_matches_numpy(name):
    og, groups, h, w, k, pad, interp = CASES[name]
    low = lower_fused(_grouped(1, og, groups, h, w, k, pad))
    lanes = host_tuning().lanes(32)
    flat = w < lanes or (k == 1 and w < 2 * lanes and w % lanes != 0) or (
        og == 1 and w < 4 * lanes and w % lanes != 0)  # depthwise rows of a few vectors
    # depthwise 3x3 rows of more than half a vector, under one: each
    # channel's padded plane (conv_depthwise_blocked where 32 vector registers
    # hold the rows, else the flat sums of conv_depthwise_strided.schedule_rows)
    flat = flat and not (og == 1 and k == 3 and 2 * w > lanes > w and h >= 2)
    # grouped 1x1 ones over rows that are not whole vectors: one GEMM over
    # all the image's positions (conv_pointwise_flat)
    flat = flat and not (k == 1 and pad == 0 and og > 1 and w % lanes)
    assert ("pad_flat" in _allocs(low.prim_func)) == flat
    _check(low, og, groups, 1, h, w, k, pad, interp)


def test_a_symbolic_batch():
    n = tir.Var("n")
    for og, w, k, pad in ((34, 20, 1, 0), (17, 7, 3, 1)):
        low = lower_fused(_grouped(n, og, 2, 3, w, k, pad))
        # (the 1x1 one: one GEMM over the image's positions, read in place)
        assert ("pad_flat" in _allocs(low.prim_func)) == (k != 1)
        for batch in (1, 3):
            _check(low, og, 2, batch, 3, w, k, pad, interp=False)


def _tiles(allocs) -> list[tuple[int, ...]]:
    """The GEMM's register tiles (the accumulators of each tile shape)."""
    return [s for name, shapes in allocs.items()
            if name.startswith(("T_conv2d_rows_acc", "T_conv2d_acc")) for s in shapes]


@pytest.mark.parametrize("og,hw", [(68, 14), (34, 28), (136, 7)])
def test_shufflenet_shapes_take_the_gemm_tiles_over_all_positions(og, hw):
    """ShuffleNet's grouped 1x1 convolutions: one GEMM over the H*W positions
    (not one per output row of 7-28 columns), the input read in place
    (conv_pointwise_flat), register tiles of the rows within a group (68 =
    8 x 8 + 4), whole vectors wide."""
    t = host_tuning()
    low = lower_fused(_grouped(1, og, 4, hw, hw, 1, 0))
    allocs = _allocs(low.prim_func)
    assert "pad_flat" not in allocs
    tiles = _tiles(allocs)
    # every tile several rows (of one group) by whole vectors and more, but
    # the last columns when they are too few to join the micro-panel before
    # them (196 = 3 x 64 + 4 with the Xeon's 64-column tiles)
    tail = hw * hw % t.gemm_cols(32)
    assert all(r >= 2 and (c >= t.lanes(32) or c == tail) for r, c in tiles), tiles
    if hw * hw >= 2 * t.gemm_cols(32):  # whole micro-panels
        # (a group's tile rows: a power of two, see gemm.plan_gemm)
        assert (1 << (t.gemm_rows.bit_length() - 1), t.gemm_cols(32)) in tiles, tiles
    _check(low, og, 4, 1, hw, hw, 1, 0, interp=False)


@pytest.mark.parametrize("og,k", [(17, 1), (17, 3), (34, 3), (6, 3)])
def test_groups_the_tile_rows_do_not_divide_end_in_a_smaller_tile(xeon, og, k):
    """Each group's rows in whole register tiles of the plan's rows (at most
    the group's), then its last rows in one smaller tile: every tile reads
    one group's input (``GemmEmitter._panel``). (The rows below are the Xeon
    profile's plan: the avx512 profile balances 17 rows as 4 + 4 + ... .)"""
    t = xeon
    # the plan's rows as a power of two (see gemm.plan_gemm), halved to fit
    # the group (over the flat rows: more columns than a vector)
    mr = 1 << (t.gemm_rows.bit_length() - 1)
    while mr > og:
        mr //= 2
    rows = {mr, og % mr} if og % mr else {mr}
    low = lower_fused(_grouped(1, og, 4, 8, 12, k, k // 2))
    assert {r for r, _ in _tiles(_allocs(low.prim_func))} == rows
    _check(low, og, 4, 1, 8, 12, k, k // 2, interp=False)
    if (og, k) in ((17, 1), (6, 3)):  # the same tiles over a 3x7 image on the interpreter
        small = lower_fused(_grouped(1, og, 4, 3, 7, k, k // 2))
        assert {r for r, _ in _tiles(_allocs(small.prim_func))} == rows
        _check(small, og, 4, 1, 3, 7, k, k // 2, interp=True)

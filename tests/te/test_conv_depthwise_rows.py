"""Depthwise convolutions whose output rows are a vector or more
(``conv_depthwise_strided.schedule_rows`` at stride 1, the same rows at
stride 2): per channel the padded plane in a buffer of its own, each input
row copied in a few output rows before it is read, each output row in
whole vectors (the last overlapping), the bias and activation applied
before the store through the extern's ``store_through`` (no intermediate
tensor, no epilogue nest). The values against numpy's reference on LLVM
and on the TIR interpreter, for odd, prime and uneven shapes and pads,
3x3 and 5x5 (5x5: the channel's plane of sums, then the epilogue), dilation, and the fallbacks (symbolic
sizes, rows wasting a quarter) computing the same."""

from __future__ import annotations

import numpy as np
import pytest

from phasec.backend.llvm import compile_prim_funcs
from phasec.interp.tir import run_prim_func
from phasec.ir import tir
from phasec.op import get_op
from phasec.target.tuning import host_tuning
from phasec.te.schedules import conv_depthwise_blocked
from phasec.te.schedules.conv_depthwise_strided import RING_MIN_BYTES, RING_ROWS, ROW_BUFFER_TAPS

from helpers.legalize import check_depthwise, depthwise_case, lowered_depthwise, walk

RNG = np.random.default_rng(224)


def _relu6(v):
    return np.minimum(np.maximum(v, 0), 6)


def _silu(v):
    return v / (1 + np.exp(-v))


def _lower(xs, k, act, **attrs):
    return lowered_depthwise(xs, k, act, **attrs)


def _allocs(prim):
    return {s.buffer.name for s in walk(prim.body) if isinstance(s, tir.Allocate)}


def _run(prim, xs, k, act, interp, **attrs):
    x, w, b, y = depthwise_case(xs, k, RNG, **attrs)
    check_depthwise(prim, x, w, b, (_relu6 if act == "relu6" else _silu)(y), interp)


LANES = host_tuning().lanes(32)

ROWS = {  # (data shape, kernel, activation, attrs, TIR interpreter too)
    "3x3_batch2": ((2, 3, 5, 2 * LANES - 2), 3, "relu6", {"padding": 1}, True),
    "3x3_prime_width": ((1, 5, 7, 2 * LANES - 1), 3, "relu6", {"padding": 1}, False),
    "3x3_whole_vectors_odd_height": ((1, 3, 9, 4 * LANES), 3, "silu", {"padding": 1}, False),
    "5x5_row_buffer": ((1, 3, 11, 2 * LANES - 3), 5, "silu", {"padding": 2}, True),
    "5x5_uneven_pads": ((1, 2, 8, 2 * LANES - 2), 5, "relu6", {"padding": (2, 1, 1, 3)},
                        False),
    "3x3_dilation2": ((1, 3, 9, 2 * LANES - 2), 3, "relu6", {"padding": 2, "dilation": 2},
                      False),
    "3x3_no_padding": ((1, 7, 6, 2 * LANES), 3, "silu", {"padding": 0}, False),
    # every input row copied before the first output row (too few rows, or
    # a padding beyond the rows the first output row reads)
    "3x3_three_rows": ((1, 2, 3, 2 * LANES - 1), 3, "relu6", {"padding": 1}, True),
    "3x3_s2_one_vector": ((1, 2, 7, 2 * LANES), 3, "silu", {"padding": 1, "strides": 2}, False),
    "3x3_padding_5": ((1, 2, 4, 2 * LANES - 8), 3, "silu", {"padding": 5}, False),
    # (a 3x3/2 over rows of one to two vectors: test_conv_depthwise_direct.py)
    "5x5_s2_rows": ((1, 3, 13, 4 * LANES - 2), 5, "relu6", {"padding": 2, "strides": 2}, False),
    # rows of two vectors or more: phase rows of whole vectors, their last
    # columns unwritten (never read)
    "3x3_s2_aligned_rows": ((1, 2, 9, 5 * LANES - 1), 3, "silu", {"padding": 1, "strides": 2},
                            True),
    "5x5_aligned_rows": ((1, 2, 6, 2 * LANES + 8), 5, "relu6", {"padding": 2}, False),
    # the channel's plane of sums, then the epilogue over it: stride 2, a
    # prime height, a row not of whole vectors
    "5x5_s2_plane": ((1, 3, 13, 4 * LANES - 3), 5, "silu", {"padding": 2, "strides": 2}, True),
}


@pytest.mark.parametrize("name", list(ROWS))
def test_depthwise_rows_store_the_epilogue_directly(name, monkeypatch):
    # (the blocked rows, which AVX-512 hosts take for rows of under two
    # vectors, turned off: this is the form of hosts of 16 registers)
    monkeypatch.setattr(conv_depthwise_blocked, "MIN_REGISTERS", 1 << 30)
    xs, k, act, attrs, interp = ROWS[name]
    low = _lower(xs, k, act, **attrs)
    allocs = _allocs(low.prim_func)
    # the padded plane (and a 5x5 window's plane of sums), nothing of the
    # tensor's size: the bias and activation went into the extern's stores
    assert "stride_phases" in allocs
    assert allocs <= {"stride_phases", "row_sums"}
    assert ("row_sums" in allocs) == (k * k > ROW_BUFFER_TAPS)
    _run(low.prim_func, xs, k, act, interp, **attrs)


@pytest.mark.parametrize("xs,k,kept", [
    ((1, 3, 5, LANES + LANES // 2), 3, "pad_flat"),  # over a quarter wasted: flat rows
    ((1, 2, 6, LANES - 1), 7, "pad_flat"),           # under a vector, 7x7: flat rows
    ((1, 2, 6, LANES), 3, "pad_temp"),               # one vector at stride 1: direct
])
def test_other_rows_keep_their_schedules(xs, k, kept):
    low = _lower(xs, k, "relu6", padding=1)
    allocs = _allocs(low.prim_func)
    assert kept in allocs and "stride_phases" not in allocs
    _run(low.prim_func, xs, k, "relu6", False, padding=1)


@pytest.mark.parametrize("xs,k,act,interp", [
    ((1, 5, 7, LANES - 1), 3, "relu6", True),       # a prime height, one column short
    ((2, 3, 4, LANES // 2 + 1), 3, "silu", False),  # just over half a vector, batch 2
    ((1, 2, 6, LANES // 2), 3, "relu6", False),     # half a vector (7x7 at 16 lanes)
    ((1, 3, 5, 3), 3, "silu", True),                # a few columns
    ((1, 4, 9, LANES - 3), 5, "silu", True),        # 5x5 (14x14 at 16 lanes)
    ((2, 3, 7, 5), 5, "relu6", False),              # 5x5 over half a vector, batch 2
])
def test_rows_under_a_vector_sum_over_the_channels_plane(narrow_plane, xs, k, act, interp):
    # stride 1, rows narrower than a vector: the padded plane per channel in
    # a buffer of its own, the flat sums, then the epilogue over their rows
    # (no global padded copy). On AVX-512 hosts (depthwise_narrow_plane) every such row
    # under a 3x3 or 5x5 window; elsewhere 3x3 over more than half a vector, the
    # rest over the flat rows. A 5x5 over rows of more than half a vector,
    # where 32 registers hold its weights: the blocked rows
    # (test_conv_depthwise_blocked.py)
    low = _lower(xs, k, act, padding=k // 2)
    allocs = _allocs(low.prim_func)
    out_w = xs[3]
    blocked = conv_depthwise_blocked.takes(out_w, k * k, LANES, host_tuning().vector_registers)
    phased = not blocked and (narrow_plane or (k == 3 and 2 * out_w > LANES))
    # (a 3x3 over rows of half a vector or less: the plane copied flat,
    # test_conv_depthwise_same.py)
    assert ("padded_plane" in allocs) == blocked
    assert ("stride_phases" in allocs or "same_plane" in allocs) == phased
    assert ("pad_flat" in allocs) == (not phased and not blocked)
    _run(low.prim_func, xs, k, act, interp, padding=k // 2)


def test_a_symbolic_batch_falls_back_and_computes_the_same():
    n = tir.Var("n")
    low = _lower((n, 3, 5, 2 * LANES - 2), 3, "relu6", padding=1)
    assert "stride_phases" not in _allocs(low.prim_func)
    kernel = compile_prim_funcs({"k": low.prim_func})["k"]
    for batch in (1, 2):
        x = RNG.standard_normal((batch, 3, 5, 2 * LANES - 2)).astype("float32")
        w = RNG.standard_normal((3, 1, 3, 3)).astype("float32")
        b = RNG.standard_normal((1, 3, 1, 1)).astype("float32")
        want = _relu6(get_op("relax.nn.conv2d").reference(x, w, groups=3, padding=(1,) * 4)
                      + b)
        got = np.zeros(want.shape, "float32")
        kernel(x, w, b, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.fixture
def _phases_only(monkeypatch):
    """The strided rows of up to half a vector in the stride phases' flat
    form, which the Xeon's conv_depthwise_strided_flat takes first where it
    can (test_conv_depthwise_strided_flat.py): the form other hosts, and the
    shapes it declines, keep."""
    from phasec.te import schedules
    monkeypatch.setattr(schedules, "RULES", tuple(
        r for r in schedules.RULES if r.schedule != "conv_depthwise_strided_flat"))


@pytest.mark.parametrize("xs,k,act,attrs,blocked,interp", [
    # channels in blocks (the largest even divisor up to 16): several
    # blocks of 16, one block of 6 (its pair loop twice), of 4 (once), of 2
    # (no loop: the last pair alone), an odd count (no pipeline: copy, sums)
    # (stride 1: pads that do not keep the input's size, which
    # test_conv_depthwise_same.py's form takes)
    ((1, 48, 7, 7), 3, "relu6", {"padding": (1, 1, 1, 0)}, True, False),
    ((1, 18, 13, 13), 3, "silu", {"padding": 1, "strides": 2}, True, True),
    ((2, 4, 14, 14), 3, "relu6", {"padding": 1, "strides": 2}, True, True),
    ((1, 2, 5, 7), 3, "silu", {"padding": (1, 0, 1, 1)}, True, True),
    ((1, 5, 7, 7), 3, "relu6", {"padding": (0, 1, 1, 1)}, False, True),
    ((1, 7, 11, 11), 5, "silu", {"padding": 2, "strides": 2}, False, False),
    ((1, 6, 13, 11), 5, "silu", {"padding": 2, "strides": 2}, True, True),
    # strided, a prime width, uneven pads, rows of half a vector or less
    ((1, 6, 9, 13), 3, "relu6", {"padding": (1, 0, 2, 1), "strides": 2}, True, True),
    # rows over half a vector: each channel's copy, then its sums (a 5x5
    # window: a 3x3 takes test_conv_depthwise_direct.py's direct rows)
    ((1, 4, 7, LANES + 3), 5, "silu", {"padding": 2, "strides": 2}, False, True),
])
def test_narrow_flat_sums_read_the_phases_copied_a_channel_before(_phases_only, xs, k, act,
                                                                  attrs, blocked, interp):
    low = _lower(xs, k, act, **attrs)
    prim = low.prim_func
    if attrs.get("strides", 1) in (1, (1, 1)) and not host_tuning().depthwise_narrow_plane:
        # (stride 1, rows of half a vector or less: the flat rows off the Xeon)
        assert "pad_flat" in _allocs(prim)
        _run(prim, xs, k, act, interp, **attrs)
        return
    phases = [s.buffer for s in walk(prim.body)
              if isinstance(s, tir.Allocate) and s.buffer.name == "stride_phases"]
    assert len(phases) == 1 and "T_conv2d_flat" in _allocs(prim)
    # blocks of several channels, or each channel on its own
    blocks = [s for s in walk(prim.body) if isinstance(s, tir.For) and s.loop_var.name == "blk"]
    assert len(blocks) == 1
    assert (int(blocks[0].extent.value) < xs[1]) == blocked
    _run(prim, xs, k, act, interp, **attrs)


def _flat_row_copies(prim):
    """The stores of the phases that read the input as a flat plane
    (``d[b, ch, g // W, g % W]``: the whole phase rows of the pipelined
    narrow flat form)."""
    return [s for s in walk(prim.body) if isinstance(s, tir.BufferStore)
            and s.buffer.name == "stride_phases" and isinstance(s.value, tir.BufferLoad)
            and s.value.buffer.name == "d" and isinstance(s.value.indices[2], tir.BinaryOp)
            and s.value.indices[2].op == "//"]


@pytest.mark.parametrize("xs,k,act,attrs,interp", [
    # 7x7 outputs of a 14x14 (MobileNetV2's 576 ch layer), a batch of two
    ((2, 4, 14, 14), 3, "relu6", {"padding": 1, "strides": 2}, True),
    # odd and prime sizes, padding 0 / 1 / 2, uneven pads, 3x3 and 5x5
    ((1, 6, 13, 13), 3, "silu", {"padding": 1, "strides": 2}, False),
    ((1, 4, 15, 11), 3, "relu6", {"padding": 0, "strides": 2}, True),
    ((1, 2, 9, 9), 3, "silu", {"padding": 2, "strides": 2}, False),
    ((1, 2, 13, 11), 5, "silu", {"padding": 2, "strides": 2}, True),
    ((2, 4, 11, 13), 5, "relu6", {"padding": (2, 1, 1, 2), "strides": 2}, False),
    # stride 2 along the rows only, stride 3 along both
    ((1, 4, 13, 13), 3, "relu6", {"padding": 1, "strides": (1, 2)}, False),
    ((1, 4, 17, 17), 3, "relu6", {"padding": 1, "strides": 3}, False),
])
def test_whole_phase_rows_read_the_input_as_a_flat_plane(_phases_only, xs, k, act, attrs,
                                                         interp):
    """The pipelined narrow flat form copies its middle input rows as whole
    phase rows (one interleaved group of loads over the channel's plane as
    if flat, the columns past the row's ends then filled), the first and
    last rows as before: the same values as numpy's reference (and the TIR
    interpreter's), every access proven in bounds."""
    from phasec.arith.inbounds import prove_accesses
    prim = _lower(xs, k, act, **attrs).prim_func
    assert "stride_phases" in _allocs(prim) and "T_conv2d_flat" in _allocs(prim)
    if LANES >= 16:  # (rows of up to half a vector: 7x7 outputs at 16 lanes)
        assert _flat_row_copies(prim)
    assert prove_accesses(prim).counts()[1] == 0
    _run(prim, xs, k, act, interp, **attrs)


def test_whole_phase_rows_only_where_the_sums_read_a_channel_later(_phases_only):
    # an odd channel count (no pipeline: the sums read the copy at once,
    # where whole-row stores and the border fills after them would not
    # forward to the sums' loads) and rows over half a vector keep the rows
    # of PhaseGeometry.copy_by_rows
    for xs in ((1, 5, 14, 14), (1, 4, 28, 28)):
        prim = _lower(xs, 3, "relu6", padding=1, strides=2).prim_func
        assert not _flat_row_copies(prim)
        _run(prim, xs, 3, "relu6", False, padding=1, strides=2)


def test_blocks_of_channels_run_in_parallel_with_the_same_values():
    # 192 channels of 14x14 3x3/2 (7x7 outputs): 12 blocks of 16, enough
    # work for the parallel loop, run on two threads and on one
    from phasec.backend.llvm.jit import get_num_threads, set_num_threads
    xs, attrs = (1, 192, 14, 14), {"padding": 1, "strides": 2}
    prim = _lower(xs, 3, "relu6", **attrs).prim_func
    blocks = [s for s in walk(prim.body) if isinstance(s, tir.For) and s.loop_var.name == "blk"]
    assert len(blocks) == 1 and int(blocks[0].extent.value) == 12
    assert blocks[0].kind == "parallel"
    saved = get_num_threads()
    try:
        for threads in (2, 1):
            set_num_threads(threads)
            _run(prim, xs, 3, "relu6", False, **attrs)
    finally:
        set_num_threads(saved)


#: rows of two vectors or more, input copied into the phases from column 0
#: in aligned groups of ``sw*lanes`` columns (``PhaseGeometry._aligned_row``):
#: the left pads put each column phase's first vector at another phase column,
#: the widths leave a tail of the row or none, and the borders go one by one
ALIGNED = {  # (data shape, kernel, activation, attrs, TIR interpreter too)
    "s2_pad1_whole_groups": ((1, 2, 5, 4 * LANES), 3, "relu6", {"padding": 1, "strides": 2},
                             True),
    "s2_pad0_tail": ((1, 2, 6, 4 * LANES + 3), 3, "silu", {"padding": 0, "strides": 2},
                     False),
    "s2_left3_uneven": ((1, 3, 7, 4 * LANES + 5), 3, "relu6",
                        {"padding": (1, 3, 2, 0), "strides": 2}, False),
    "5x5_s2_prime_width": ((1, 3, 7, 4 * LANES + 7), 5, "silu", {"padding": 2, "strides": 2},
                           False),
    "s1_prime_width": ((1, 3, 5, 3 * LANES - 1), 3, "relu6", {"padding": 1}, False),
    "7x7_s1_pad3": ((1, 2, 9, 2 * LANES + 11), 7, "silu", {"padding": 3}, False),
}


@pytest.mark.parametrize("name", list(ALIGNED))
def test_aligned_phase_rows_copy_whole_groups_from_column_0(name):
    xs, k, act, attrs, interp = ALIGNED[name]
    low = _lower(xs, k, act, **attrs)
    assert "stride_phases" in _allocs(low.prim_func)
    _run(low.prim_func, xs, k, act, interp, **attrs)


@pytest.mark.parametrize("left,sw,window", [(1, 2, 3), (0, 2, 3), (3, 2, 3), (2, 2, 5),
                                             (1, 1, 3), (3, 1, 7), (1, 3, 3)])
def test_an_aligned_geometry_stores_each_phases_first_vector_aligned(left, sw, window):
    """The shift of column phase ``e`` puts the phase column of input column
    ``(e - left) mod sw`` (where the copy's first vector of that phase
    starts) at a whole vector, and the shifted phases stay apart."""
    from phasec.te.schedules.pool_window import PhaseGeometry, _first
    width = 4 * LANES * sw + 5
    out_w = (width + left - window) // sw + 1
    geo = PhaseGeometry.of((9, width), (4, out_w), (window, window), (sw, sw), (1, 1),
                           (1, left), LANES, LANES)
    for e in range(sw):
        first = _first(e, left, sw)
        # input column first*sw + e - left is the first of the phase in [0, sw)
        assert 0 <= first * sw + e - left < sw
        assert (geo.shift(e) + first) % LANES == 0
        assert geo.shift(e) + geo.span <= geo.length
    # unaligned geometries (pools, stems) keep their phases unshifted
    plain = PhaseGeometry.of((9, width), (4, out_w), (window, window), (sw, sw), (1, 1),
                             (1, left), LANES)
    assert [plain.shift(e) for e in range(sw)] == [0] * sw and plain.span == plain.length


#: channels whose phases exceed RING_MIN_BYTES: a ring of phase rows, row u
#: at slot u % ring (rows above the input filled first, those below after
#: the last copy: stride 1 reads its bottom padding, 7x7 three rows of it)
def _tall(width, extra):
    return RING_MIN_BYTES // (4 * width) + extra  # a plane of just over the bytes


RING = {  # (data shape, kernel, activation, attrs, TIR interpreter too)
    "s2_pad1": ((1, 2, 2 * _tall(8 * LANES + 3, 7), 8 * LANES + 3), 3, "relu6",
                {"padding": 1, "strides": 2}, False),
    "s1_pad1_prime_width": ((1, 2, _tall(8 * LANES - 1, 4), 8 * LANES - 1), 3, "silu",
                            {"padding": 1}, False),
    "5x5_s2_uneven": ((1, 2, 2 * _tall(8 * LANES + 5, 9), 8 * LANES + 5), 5, "silu",
                      {"padding": (2, 1, 3, 2), "strides": 2}, False),
    "7x7_s1_pad3": ((1, 1, _tall(8 * LANES + 1, 3), 8 * LANES + 1), 7, "relu6",
                    {"padding": 3}, False),
    "5x5_s1_batch2": ((2, 1, _tall(8 * LANES, 5), 8 * LANES), 5, "relu6", {"padding": 2},
                      False),
    "3x3_dilation2_s2": ((1, 1, 2 * _tall(8 * LANES + 2, 6), 8 * LANES + 2), 3, "silu",
                         {"padding": 2, "dilation": 2, "strides": 2}, False),
}


def _phase_elements(prim):
    return [int(s.buffer.shape[0].value) for s in walk(prim.body)
            if isinstance(s, tir.Allocate) and s.buffer.name == "stride_phases"]


@pytest.mark.parametrize("name", list(RING))
def test_large_phases_are_a_ring_of_phase_rows(name):
    xs, k, act, attrs, interp = RING[name]
    low = _lower(xs, k, act, **attrs)
    (elements,) = _phase_elements(low.prim_func)
    s = attrs.get("strides", 1)
    # the ring holds RING_ROWS[-1] rows of a phase at most, the plane all of them
    assert elements <= s * s * RING_ROWS[-1] * (xs[3] // s + 2 * LANES)
    assert elements < xs[2] * xs[3] // 2
    _run(low.prim_func, xs, k, act, interp, **attrs)


def test_small_phases_stay_whole_planes():
    xs = (1, 2, 9, 4 * LANES)  # (phases of 9-10 rows: under RING_MIN_BYTES)
    low = _lower(xs, 3, "relu6", padding=1)
    (elements,) = _phase_elements(low.prim_func)
    assert elements * 4 <= RING_MIN_BYTES and elements >= 9 * 4 * LANES
    _run(low.prim_func, xs, 3, "relu6", False, padding=1)


def test_a_small_ring_on_the_tir_interpreter():
    """The ring's slots (a modulo in every index) on the reference
    interpreter too, over a channel just past RING_MIN_BYTES."""
    rows = RING_MIN_BYTES // (4 * 2 * LANES * 4) + 4  # 3x3/2: 4 phases of 2*LANES columns
    xs = (1, 1, 2 * rows, 4 * LANES)
    low = _lower(xs, 3, "silu", padding=1, strides=2)
    (elements,) = _phase_elements(low.prim_func)
    assert elements < rows * 4 * 2 * LANES
    _run(low.prim_func, xs, 3, "silu", True, padding=1, strides=2)


@pytest.mark.parametrize("width,left", [(2 * LANES, 1), (2 * LANES + 1, 1), (2 * LANES, 3)])
def test_an_aligned_row_of_one_group_reads_nothing_left_of_the_row(width, left):
    """A row of just one ``sw*lanes`` group at stride 2 (not a shape the
    schedule takes: its outputs are under two vectors): the row's vector of
    phase columns would start left of the input, so its columns go one by
    one. Each phase column holds its input column, or 0 at the padding."""
    from phasec.te.schedules.pool_window import PhaseGeometry
    H, sw, lanes = 3, 2, LANES
    out_w = (width + left - 3) // sw + 1
    geo = PhaseGeometry.of((H, width), (2, out_w), (3, 3), (sw, sw), (1, 1), (0, left),
                           lanes, lanes)
    x_buf = tir.Buffer("x", (1, 1, H, width), "float32")
    out = tir.Buffer("ph", (sw * sw * geo.length,), "float32")
    b, ch = tir.Var("b", "int64"), tir.Var("ch", "int64")
    stmts, rows, row = geo.copy_by_rows(x_buf, b, ch, tir.FloatImm(0.0, "float32"),
                                        lambda f, q: (out, f * geo.length + q), lanes)
    y = tir.Var("y", "int64")
    body = tir.For(b, tir.IntImm(0, "int64"), tir.IntImm(1, "int64"), "serial", tir.For(
        ch, tir.IntImm(0, "int64"), tir.IntImm(1, "int64"), "serial", tir.SeqStmt(tuple(
            [*stmts, tir.For(y, tir.IntImm(0, "int64"), tir.IntImm(rows, "int64"), "serial",
                             row(y))]))))
    prim = tir.PrimFunc([x_buf, out], body)
    x = RNG.standard_normal((1, 1, H, width)).astype("float32")
    got = np.full(out.shape[0].value, np.nan, "float32")
    run_prim_func(prim, [x, got])
    for e in range(sw):
        for col in range(geo.reach):
            src = col * sw + e - left
            want = x[0, 0, 0, src] if 0 <= src < width else 0.0
            assert got[e * geo.length + col + geo.shift(e)] == want

"""1x1 convolutions as one GEMM over all of an image's positions
(``te.schedules.conv_pointwise_flat``): stride 1, unpadded, rows that are
not whole vectors. The GEMM's columns span the output's last two axes
(``GemmPlan.flat``: column ``j`` is position ``(j // W, j % W)``), its
input read in place and its epilogue (bias, relu, a residual) in the
register tiles. The values against numpy's reference convolution on LLVM
and on the TIR interpreter, on odd and prime channel counts and image
sizes, rows of whole vectors, a batch of two, a symbolic batch, grouped
channels, float64; the
kernel's structure (register tiles wider than a row, no copy of the input,
no second pass); where the rule is taken and where not."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from phasec.arith.inbounds import prove_accesses
from phasec.backend.llvm import compile_prim_funcs
from phasec.interp.tir import run_prim_func
from phasec.ir import TensorStructInfo, Var, tir
from phasec.op import call_op, get_op
from phasec.op.legalize import lower_fused
from phasec.te import schedules
from phasec.te.analysis import static_int
from phasec.te.schedules.conv_im2col import ANCHOR_NAME as IM2COL
from phasec.te.schedules.conv_pointwise_flat import MIN_WHOLE_ROW_CHANNELS
from phasec.te.schedules.gemm_plan import FLAT_COLUMNS_ATTR
from phasec.te.schedules.workloads import ConvWorkload
from phasec.target.tuning import host_tuning
from phasec.te.schedules.gemm_plan import GEMM_TILE_ATTR

from helpers.legalize import fused  # a Primitive function built by a BlockBuilder
from helpers.te_checks import walk

RNG = np.random.default_rng(45)
LANES = host_tuning().lanes(32)


def _conv(n, c, h, w, o, *, groups=1, residual=False, dtype="float32", **attrs):
    """relu(conv2d(d, w) + b) (+ r): the epilogue the GEMM fuses in its tiles."""
    d = Var("d", TensorStructInfo((n, c, h, w), dtype))
    k = attrs.pop("k", 1)
    wt = Var("w", TensorStructInfo((o, c // groups, k, k), dtype))
    b = Var("b", TensorStructInfo((1, o, 1, 1), dtype))
    params = [d, wt, b]
    if residual:
        params.append(Var("r", TensorStructInfo((n, o, h, w), dtype)))

    def body(bb):
        y = bb.emit(call_op("nn.relu", bb.emit(call_op(
            "add", bb.emit(call_op("nn.conv2d", d, wt, groups=groups, **attrs)), b))))
        return call_op("add", y, params[-1]) if residual else y
    return fused(params, body)


def _allocs(prim) -> dict[str, list[tuple[int, ...]]]:
    """The shapes of the buffers ``prim`` allocates, by name."""
    out: dict[str, list[tuple[int, ...]]] = {}
    for s in walk(prim.body):
        if isinstance(s, tir.Allocate):
            out.setdefault(s.buffer.name, []).append(tuple(static_int(d) or -1
                                                           for d in s.buffer.shape))
    return out


def _check(prim, n, c, h, w, o, *, groups=1, residual=False, dtype="float32",
           interp=False) -> None:
    """``prim`` on LLVM (and on the TIR interpreter) against numpy."""
    x = RNG.standard_normal((n, c, h, w)).astype(dtype)
    wa = RNG.standard_normal((o, c // groups, 1, 1)).astype(dtype)
    ba = RNG.standard_normal((1, o, 1, 1)).astype(dtype)
    args = [x, wa, ba]
    want = np.maximum(get_op("relax.nn.conv2d").reference(x, wa, groups=groups) + ba, 0)
    if residual:
        r = RNG.standard_normal(want.shape).astype(dtype)
        args.append(r)
        want = want + r
    got = np.zeros(want.shape, dtype)
    compile_prim_funcs({"k": prim})["k"](*args, got)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    if interp:
        got = np.zeros(want.shape, dtype)
        run_prim_func(prim, [*args, got])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _flat_tiles(prim, w: int) -> list[tuple[int, ...]]:
    """The GEMM's register tiles; each wider than one output row when the
    columns span the image (not a copy of the input: no pad_flat)."""
    allocs = _allocs(prim)
    assert "pad_flat" not in allocs and "T_conv2d_rows" not in allocs
    # the epilogue in the tiles: the product has no buffer of its own
    assert "T_conv2d" not in allocs
    return [s for name, shapes in allocs.items() if name.startswith("T_conv2d_acc")
            for s in shapes]


CASES = {  # n, c, h, w, o, residual, on the interpreter too (< ~40k multiply-adds)
    "5_to_7_over_7x11": (1, 5, 7, 11, 7, False, True),
    "5_to_7_over_13x13_residual": (1, 5, 13, 13, 7, True, True),
    "batch_2_over_3x19_residual": (2, 3, 3, 19, 11, True, True),
    "prime_channels_over_9x23": (1, 13, 9, 23, 17, False, True),
    "wide_rows_56": (1, 24, 6, 56, 40, True, False),
    "rows_of_28": (1, 16, 28, 28, 20, False, False),
    "one_row": (1, 6, 1, 37, 9, True, True),
    # rows of whole vectors, enough output channels (MIN_WHOLE_ROW_CHANNELS)
    "whole_vector_rows": (1, 3, 3, 2 * LANES, 33, True, True),
}


@pytest.mark.parametrize("name", list(CASES))
def test_one_gemm_over_the_image_matches_numpy(request, name):
    n, c, h, w, o, residual, interp = CASES[name]
    if w >= 2 * LANES:  # (tiles wider than these rows: the Xeon profile's 4 vectors)
        request.getfixturevalue("xeon")
    low = lower_fused(_conv(n, c, h, w, o, residual=residual))
    tiles = _flat_tiles(low.prim_func, w)
    if h >= 2:
        # some register tile runs past the end of a row into the next
        assert any(cols > w for _, cols in tiles) or h * w < LANES, tiles
    _check(low.prim_func, n, c, h, w, o, residual=residual, interp=interp)


def test_float64_and_grouped_channels():
    low = lower_fused(_conv(1, 6, 5, 7, 9, dtype="float64"))
    _flat_tiles(low.prim_func, 7)
    _check(low.prim_func, 1, 6, 5, 7, 9, dtype="float64", interp=True)
    # 3 groups of 2 -> 4 channels: the tiles' rows within a group
    low = lower_fused(_conv(1, 6, 3, 13, 12, groups=3, residual=True))
    assert any(cols > 13 for _, cols in _flat_tiles(low.prim_func, 13))
    _check(low.prim_func, 1, 6, 3, 13, 12, groups=3, residual=True, interp=True)


def test_a_symbolic_batch():
    n = tir.Var("n")
    low = lower_fused(_conv(n, 7, 5, 11, 9, residual=True))
    assert any(cols > 11 for _, cols in _flat_tiles(low.prim_func, 11))
    _check_batches(low.prim_func, (1, 3), 7, 5, 11, 9)


def _check_batches(prim, batches, c, h, w, o) -> None:
    """``prim`` (relu(conv + b) + r over a symbolic batch) compiled once,
    run on each batch size against numpy."""
    lib = compile_prim_funcs({"k": prim})
    for batch in batches:
        x = RNG.standard_normal((batch, c, h, w)).astype("float32")
        wa = RNG.standard_normal((o, c, 1, 1)).astype("float32")
        ba = RNG.standard_normal((1, o, 1, 1)).astype("float32")
        r = RNG.standard_normal((batch, o, h, w)).astype("float32")
        want = np.maximum(get_op("relax.nn.conv2d").reference(x, wa) + ba, 0) + r
        got = np.zeros(want.shape, "float32")
        lib["k"](x, wa, ba, r, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _workload(c, h, w, o, k=1, groups=1, **attrs) -> ConvWorkload:
    """The workload the conv2d legalization passes the table."""
    seen: list[ConvWorkload] = []
    choose = schedules.choose

    def spy(kind, subject):
        if kind == "conv":
            seen.append(subject)
        return choose(kind, subject)
    schedules.choose = spy
    try:
        lower_fused(_conv(1, c, h, w, o, k=k, groups=groups, **attrs))
    finally:
        schedules.choose = choose
    return seen[0]


def _taken(wl: ConvWorkload) -> bool:
    t = schedules.schedule_conv(wl)
    # (conv_im2col's GEMM over gathered windows is flat too)
    return bool(t.op.attrs.get(FLAT_COLUMNS_ATTR)) and t.name != IM2COL


@pytest.mark.parametrize("c,h,w,o,k,groups,attrs", [
    (8, 7, 11, 8, 1, 1, {}), (64, 56, 56, 256, 1, 1, {}), (32, 28, 28, 64, 1, 1, {}),
    (8, 3, 13, 12, 1, 2, {}), (8, 1, 37, 8, 1, 1, {}),
    (8, 4, 2 * LANES, MIN_WHOLE_ROW_CHANNELS, 1, 1, {}),
])
def test_taken_for_1x1_over_rows_that_are_not_whole_vectors(c, h, w, o, k, groups, attrs):
    assert _taken(_workload(c, h, w, o, k, groups, **attrs))


@pytest.mark.parametrize("c,h,w,o,k,groups,attrs", [
    (8, 7, 11, 8, 3, 1, {"padding": 1}),     # 3x3
    (8, 7, 11, 8, 1, 1, {"padding": 1}),     # padded
    (8, 14, 22, 8, 1, 1, {"strides": 2}),    # strided
    (8, 4, 2 * LANES, MIN_WHOLE_ROW_CHANNELS - 1, 1, 1, {}),  # whole vectors, few channels
    (8, 4, 2 * LANES, 2 * MIN_WHOLE_ROW_CHANNELS - 2, 1, 2, {}),  # (a group's)
    (8, 7, 11, 8, 1, 8, {}),                 # depthwise
    (96, 2, 2, 64, 1, 1, {}),                # fewer positions than a vector
])
def test_not_taken_elsewhere(c, h, w, o, k, groups, attrs):
    assert not _taken(_workload(c, h, w, o, k, groups, **attrs))


@pytest.fixture
def _packed_panels(monkeypatch):
    """B packed whatever its size and row tiles of 4 rows x 2 vectors, on
    any host profile: small enough for the interpreter."""
    from phasec.target import tuning
    monkeypatch.setenv("PHASEC_TUNING", "gemm_pack_min_bytes=0,gemm_rows=4,gemm_vectors=2,"
                       "pointwise_flat_tile_max_columns=0")
    tuning.host_tuning.cache_clear()
    yield
    tuning.host_tuning.cache_clear()


@pytest.mark.parametrize("n,c,h,w,o,residual,interp", [
    # 169 = 5 tiles of 32 + 9 (SqueezeNet's classifier's 13x13): the last
    # tile and the 9 as 41 columns, computed as 3 vectors; its residual read
    # only at the real columns
    (1, 9, 13, 13, 11, True, True),
    # prime sizes: 11 x 17 = 187 = 5 tiles + 27 (2 vectors); a batch of two
    (2, 7, 11, 17, 13, False, True),
    # 17 x 47 = 799, 1 column short of 25 tiles: one loop (gemm._one_loop)
    (1, 5, 17, 47, 7, True, False),
    # 87 = 2 tiles + 23: a remainder of 7 of 16 (one vector more); in
    # float64 (8 lanes) other tiles and remainders
    (1, 5, 3, 29, 10, True, False),
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_last_columns_packed_as_whole_vectors(_packed_panels, n, c, h, w, o, residual, interp,
                                              dtype):
    """The last columns of a flat GEMM whose panels are packed: packed too,
    into a panel of whole vectors zero past them, computed as whole vectors,
    the epilogue storing (and reading the residual at) the real ones only."""
    low = lower_fused(_conv(n, c, h, w, o, residual=residual, dtype=dtype))
    tiles = _flat_tiles(low.prim_func, w)
    packs = [s for name, shapes in _allocs(low.prim_func).items()
             if name.startswith("T_conv2d_bpack") for s in shapes]
    if LANES == 16 and dtype == "float32":  # (the sizes chosen for 16 lanes)
        # no tile is narrower than its whole vectors (41 would be 16+16+8+1)
        assert all(t[1] % LANES == 0 for t in tiles), tiles
        if -(h * w) % 32 * 64 <= h * w:  # (one tile in one loop: nothing packed apart)
            assert {t[1] for t in tiles} == {32} and all(p[2] == 32 for p in packs), packs
        else:
            assert any(p[0] == 1 and p[2] % LANES == 0 and p[2] > (h * w) % 32
                       for p in packs), packs
    _check(low.prim_func, n, c, h, w, o, residual=residual, interp=interp, dtype=dtype)


@pytest.mark.parametrize("n,c,h,w,o,residual,interp", [
    # 196 = 3 tiles + 4 (MobileNetV2's 14x14): the 4 were one 4-lane vector
    # read and stored by gathers and scatters; a residual read at the real 4
    (1, 5, 14, 14, 9, True, True),
    # 81 = a tile + 17 (a scalar column), 225 = 3 tiles + 33; a batch of two
    (2, 7, 9, 9, 11, False, True),
    (1, 3, 15, 15, 13, True, False),
    # prime sizes: 13 x 11 = 143 = 2 tiles + 15
    (1, 11, 13, 11, 7, False, True),
])
def test_last_columns_of_b_read_in_place_packed_as_whole_vectors(n, c, h, w, o, residual,
                                                                interp):
    """B read in place (too small to pack, the host's tuning): the last
    columns, whatever their number, are still packed into a panel of whole
    vectors zero past them and computed as whole vectors; the epilogue stores
    (and reads the residual at) the real ones only."""
    low = lower_fused(_conv(n, c, h, w, o, residual=residual))
    tiles = _flat_tiles(low.prim_func, w)
    packs = [s for name, shapes in _allocs(low.prim_func).items()
             if name.startswith("T_conv2d_bpack") for s in shapes]
    # only the last columns' panel: the whole ones are read in place
    assert len(packs) == 1 and packs[0][0] == 1 and packs[0][2] % LANES == 0, packs
    assert all(t[1] % LANES == 0 for t in tiles), tiles
    assert prove_accesses(low.prim_func).counts()[1] == 0
    _check(low.prim_func, n, c, h, w, o, residual=residual, interp=interp)


def test_last_columns_of_b_read_in_place_with_a_symbolic_batch():
    n = tir.Var("n")
    low = lower_fused(_conv(n, 5, 14, 14, 9, residual=True))
    packs = [s for name, shapes in _allocs(low.prim_func).items()
             if name.startswith("T_conv2d_bpack") for s in shapes]
    assert len(packs) == 1 and packs[0][2] % LANES == 0, packs
    assert prove_accesses(low.prim_func).counts()[1] == 0
    _check_batches(low.prim_func, (1, 2), 5, 14, 14, 9)


@pytest.fixture
def _flat_tile(monkeypatch):
    """The 6 x 4 register tiles of 1x1 convolutions over 2 vectors to 196
    flat positions (``pointwise_flat_tile``, the avx512 profile's) on any
    host, from 16 output channels (the profile's 256: too many for the
    interpreter)."""
    from phasec.target import tuning
    tuned = replace(tuning.host_tuning(), pointwise_flat_tile=(6, 4),
                    pointwise_flat_tile_max_columns=196, pointwise_flat_tile_min_rows=16)
    monkeypatch.setattr(tuning, "host_tuning", lambda: tuned)
    yield tuned


@pytest.mark.parametrize("n,c,h,w,o,residual,interp", [
    # MobileNetV2's 7x7 (49 columns: one tile of 3 vectors and a column;
    # 26 rows: 6-row tiles, where 8-row ones make 7 + 7 + 6 + 6), its 14x14
    # (196 = 3 tiles of 64 + 4) with a residual, a prime 13 x 11 (143 = 2
    # tiles + 15) of a batch of two, an odd 5 x 7 (35: 2 vectors and 3
    # columns) on the interpreter too
    (1, 13, 7, 7, 26, False, False),
    (1, 9, 14, 14, 26, True, False),
    (2, 7, 13, 11, 19, True, False),
    (1, 5, 5, 7, 26, True, True),
])
def test_small_images_take_the_flat_tile(_flat_tile, n, c, h, w, o, residual, interp):
    """Over at most ``pointwise_flat_tile_max_columns`` positions the GEMM's
    register tiles are ``pointwise_flat_tile``'s vectors wide (the image's
    positions when fewer) and at most its rows; every access proven; the
    values those of numpy's convolution."""
    from phasec.te.schedules.conv_pointwise_flat import flat_tile
    rows, vectors = _flat_tile.pointwise_flat_tile
    assert flat_tile(_workload(c, h, w, o)) == {GEMM_TILE_ATTR: (rows, vectors)}
    low = lower_fused(_conv(n, c, h, w, o, residual=residual))
    tiles = _flat_tiles(low.prim_func, w)
    # (19 rows: 5 + 5 + 5 + 4, the GEMM's balanced row tiles)
    assert max(r for r, _ in tiles) <= rows, tiles
    width = vectors * LANES
    assert max(cols for _, cols in tiles) == min(width, h * w), tiles
    assert prove_accesses(low.prim_func).counts()[1] == 0
    _check(low.prim_func, n, c, h, w, o, residual=residual, interp=interp)


def test_small_images_take_the_flat_tile_with_a_symbolic_batch(_flat_tile):
    n = tir.Var("n")
    low = lower_fused(_conv(n, 7, 7, 7, 13, residual=True))
    assert max(cols for _, cols in _flat_tiles(low.prim_func, 7)) == 49
    _check_batches(low.prim_func, (1, 3), 7, 7, 7, 13)


@pytest.mark.parametrize("c,h,w,o,dtype", [
    (9, 15, 15, 17, "float32"),   # 225 positions: more than 196
    (9, 2, 8, 17, "float32"),     # 16: not more than a vector (of 16 lanes or more)
    (9, 1, 1, 17, "float32"),     # a squeeze-excite's 1x1 image
    (9, 7, 7, 17, "float64"),     # float64
    (9, 7, 7, 13, "float32"),     # fewer output channels than 16 (not a projection)
])
def test_flat_tile_declined(_flat_tile, c, h, w, o, dtype):
    """No tile of its own elsewhere: the GEMM's; the values still numpy's."""
    from phasec.te.schedules.conv_pointwise_flat import flat_tile
    assert flat_tile(_workload(c, h, w, o, dtype=dtype)) == {}
    low = lower_fused(_conv(1, c, h, w, o, dtype=dtype))
    _check(low.prim_func, 1, c, h, w, o, dtype=dtype)


def test_flat_tile_for_projections_and_not_grouped(_flat_tile):
    """Fewer output channels than ``pointwise_flat_tile_min_rows`` take the
    tile when the input has four times as many and they are whole tiles of
    its rows or leave a last tile of at least half of them (a projection:
    48 -> 12, 60 -> 15); not 47 -> 12, nor 52 -> 13 or 56 -> 14 (a last
    tile of one or two rows); grouped channels never (their row tiles stay
    within a group)."""
    from phasec.te.schedules.conv_pointwise_flat import flat_tile
    assert flat_tile(_workload(48, 7, 7, 12)) == {GEMM_TILE_ATTR: (6, 4)}
    assert flat_tile(_workload(60, 7, 7, 15)) == {GEMM_TILE_ATTR: (6, 4)}
    assert flat_tile(_workload(47, 7, 7, 12)) == {}
    assert flat_tile(_workload(52, 7, 7, 13)) == {}
    assert flat_tile(_workload(56, 7, 7, 14)) == {}
    low = lower_fused(_conv(1, 60, 7, 7, 15, residual=True))
    assert max(cols for _, cols in _flat_tiles(low.prim_func, 7)) == 49
    _check(low.prim_func, 1, 60, 7, 7, 15, residual=True, interp=True)
    low = lower_fused(_conv(1, 48, 7, 7, 12, residual=True))
    tiles = _flat_tiles(low.prim_func, 7)
    assert max(cols for _, cols in tiles) == 49 and {r for r, _ in tiles} == {6}, tiles
    _check(low.prim_func, 1, 48, 7, 7, 12, residual=True)
    assert flat_tile(_workload(32, 7, 7, 32, groups=2)) == {}
    low = lower_fused(_conv(1, 32, 7, 7, 32, groups=2))
    _check(low.prim_func, 1, 32, 7, 7, 32, groups=2)


def test_flat_tile_over_several_panels_only_with_two_micro_panels_a_panel(_flat_tile):
    """Over more positions than a tile (14x14), the tile only where a panel
    of ``gemm_panel_bytes`` holds two of its micro-panels (K x 4 vectors):
    K at the bound taken, one more declined; over 7x7 (one tile) any K."""
    from phasec.te.schedules.conv_pointwise_flat import flat_tile
    k = _flat_tile.gemm_panel_bytes // (2 * 4 * LANES * 4)
    assert flat_tile(_workload(k, 14, 14, 16)) == {GEMM_TILE_ATTR: (6, 4)}
    assert flat_tile(_workload(k + 1, 14, 14, 16)) == {}
    if 7 * 7 <= 4 * LANES:
        assert flat_tile(_workload(k + 1, 7, 7, 16)) == {GEMM_TILE_ATTR: (6, 4)}


def test_flat_tile_not_for_long_reductions(_flat_tile):
    """At most ``MAX_REDUCTION`` input channels (ResNet-50's 2048 -> 512 over
    7x7 lost with the tile); the values numpy's either side of the bound."""
    from phasec.te.schedules.conv_pointwise_flat import MAX_REDUCTION, flat_tile
    assert flat_tile(_workload(MAX_REDUCTION, 7, 7, 24)) == {GEMM_TILE_ATTR: (6, 4)}
    assert flat_tile(_workload(MAX_REDUCTION + 1, 7, 7, 24)) == {}
    for c in (MAX_REDUCTION, MAX_REDUCTION + 1):
        low = lower_fused(_conv(1, c, 7, 7, 24))
        _check(low.prim_func, 1, c, 7, 7, 24)


def test_flat_tile_not_for_a_symbolic_channel_count(_flat_tile):
    """Input channels of no static count: no tile of its own (the bounds
    on the reduction cannot be checked); the values numpy's for two counts."""
    from phasec.te.schedules.conv_pointwise_flat import flat_tile
    c = tir.Var("c")
    assert flat_tile(_workload(c, 7, 7, 24)) == {}
    low = lower_fused(_conv(1, c, 7, 7, 24))
    for count in (5, 13):
        _check(low.prim_func, 1, count, 7, 7, 24)

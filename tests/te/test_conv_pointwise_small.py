"""1x1 convolutions over fewer positions than a vector, and projections
over a few vectors of them (``te.schedules.conv_pointwise_small``): a
matmul whose rows are the positions and whose columns are the output
channels, by the weight read transposed, which PackConstantWeights packs
once when it is a constant. The values against the reference interpreter
(numpy) on odd and prime channel counts and image sizes, with bias, SiLU
and a residual fused, a weight that is a parameter, and a symbolic batch
(which keeps the direct form)."""

from __future__ import annotations

import numpy as np
import pytest

import phasec
from phasec.interp import run as interpret
from phasec.ir import Constant, TensorStructInfo, Var, tir
from phasec.op import call_op
from phasec.pipeline import lower
from phasec.script.builder import BlockBuilder
from phasec.te.schedules.conv_pointwise_small import estimate, max_transposed_bytes
from phasec.te.schedules.gemm import PACK_MARK
from phasec.target import tuning

RNG = np.random.default_rng(29)


@pytest.fixture
def avx512_tiles(monkeypatch):
    """The avx512 profile's 8 x 32 register tiles, which the structures
    below were written for, on a Xeon host too (its 6 x 64 tiles:
    test_tuning_profiles.py)."""
    if tuning.host_tuning().name == "avx512_xeon":
        monkeypatch.setenv("PHASEC_TUNING", "avx512")
        tuning.host_tuning.cache_clear()
    yield
    tuning.host_tuning.cache_clear()


def _module(xs, out_ch: int, *, weight_param: bool = False, residual: bool = False):
    """silu(conv1x1(x, W) + b) (+ x2 for ``residual``), W a constant or a parameter."""
    x = Var("x", TensorStructInfo(xs, "float32"))
    c = xs[1]
    w = (RNG.standard_normal((out_ch, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
    params = [x]
    weight = Constant(w)
    if weight_param:
        weight = Var("w", TensorStructInfo((out_ch, c, 1, 1), "float32"))
        params.append(weight)
    out_shape = (xs[0], out_ch, xs[2], xs[3])
    if residual:
        params.append(Var("r", TensorStructInfo(out_shape, "float32")))
    bias = Constant(RNG.standard_normal((1, out_ch, 1, 1)).astype(np.float32))
    bb = BlockBuilder()
    with bb.function("main", params):
        y = bb.emit(call_op("relax.add", bb.emit(call_op("relax.nn.conv2d", x, weight)), bias))
        y = bb.emit(call_op("relax.multiply", y, bb.emit(call_op("relax.sigmoid", y))))
        if residual:
            y = bb.emit(call_op("relax.add", y, params[-1]))
        bb.emit_func_output(y)
    return bb.get(), w


def _check(mod, *args) -> None:
    want = np.asarray(interpret(mod, *args), dtype=np.float64)
    got = np.asarray(phasec.VirtualMachine(phasec.build(mod))["main"](*args))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def _kernel_texts(mod) -> dict[str, str]:
    return {name: repr(f) for name, f in lower(mod).prim_funcs()}


@pytest.mark.parametrize("xs,out_ch", [
    ((1, 13, 2, 3), 101), ((2, 7, 1, 5), 257),
    # projections over a few vectors of positions
    ((1, 97, 7, 7), 41),          # 49 positions: 7 register tiles of 7 rows
    ((2, 131, 13, 11), 37),       # 143 positions, a batch of two
    ((1, 288, 14, 14), 48),       # MobileNetV2's 14x14 projection
])
def test_constant_weight_packed_once_prime_channels(xs, out_ch, avx512_tiles):
    mod, _ = _module(xs, out_ch, residual=True)
    texts = _kernel_texts(mod)
    (packed,) = [t for n, t in texts.items() if n.endswith("_prepacked")]
    # positions as rows, channels as columns; the packing nest gone
    assert "T_conv2d_positions" in packed and PACK_MARK not in packed
    if xs[2] * xs[3] == 49:
        # balanced row tiles: no last tile of one position
        assert "T_conv2d_positions_acc = T.alloc_buffer((T.int64(7)" in packed
        assert "T_conv2d_positions_acc_1 = T.alloc_buffer((T.int64(1)" not in packed
    x = RNG.standard_normal(xs).astype(np.float32)
    r = RNG.standard_normal((xs[0], out_ch, xs[2], xs[3])).astype(np.float32)
    _check(mod, x, r)


@pytest.mark.parametrize("xs,out_ch,packed", [
    ((1, 11, 3, 2), 101, PACK_MARK),
    # (37 columns: one tile, its panel packed on every call, unmarked)
    ((1, 131, 13, 11), 37, "T_conv2d_positions_bpack"),
])
def test_weight_as_a_parameter_packs_per_call(xs, out_ch, packed):
    mod, w = _module(xs, out_ch, weight_param=True)
    texts = _kernel_texts(mod)
    assert any("T_conv2d_positions" in t and packed in t for t in texts.values())
    _check(mod, RNG.standard_normal(xs).astype(np.float32), w)


def test_a_symbolic_batch_keeps_the_direct_form():
    n = tir.Var("n", "int64")
    mod, _ = _module((n, 5, 2, 2), 67)
    assert not any("T_conv2d_positions" in t for t in _kernel_texts(mod).values())
    vm = phasec.VirtualMachine(phasec.build(mod))
    for batch in (1, 3):
        x = RNG.standard_normal((batch, 5, 2, 2)).astype(np.float32)
        want = np.asarray(interpret(mod, x), dtype=np.float64)
        np.testing.assert_allclose(np.asarray(vm["main"](x)), want, rtol=1e-4,
                                   atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("channels,reduced", [(96, 48), (40, 101)])
def test_squeeze_excite_on_one_position(channels, reduced):
    """x * sigmoid(conv(silu(conv(mean(x))))): both 1x1 convolutions over one
    position as matmuls by the transposed weight, packed once into
    micro-panels (48 columns; 96 + 5 of 101; 32 + 8 of 40: the last
    columns of a micro-panel of their own, zero past them)."""
    x = Var("x", TensorStructInfo((1, channels, 5, 3), "float32"))
    w1 = (RNG.standard_normal((reduced, channels, 1, 1)) / np.sqrt(channels)).astype(np.float32)
    w2 = (RNG.standard_normal((channels, reduced, 1, 1)) / np.sqrt(reduced)).astype(np.float32)
    bb = BlockBuilder()
    with bb.function("main", [x]):
        s = bb.emit(call_op("relax.mean", x, axis=[2, 3], keepdims=True))
        s = bb.emit(call_op("relax.nn.conv2d", s, Constant(w1)))
        s = bb.emit(call_op("relax.multiply", s, bb.emit(call_op("relax.sigmoid", s))))
        s = bb.emit(call_op("relax.sigmoid", bb.emit(call_op("relax.nn.conv2d", s, Constant(w2)))))
        bb.emit_func_output(bb.emit(call_op("relax.multiply", x, s)))
    mod = bb.get()
    texts = _kernel_texts(mod)
    assert sum("T_conv2d_positions" in t for t in texts.values()) == 2
    assert sum(n.endswith("_prepacked") for n in texts) == 2
    _check(mod, RNG.standard_normal((1, channels, 5, 3)).astype(np.float32))


#: output channels over 14x14 whose transposed output is just past the
#: host's limit (79 KB at 101 where it is 64 KB, 257 KB at 335 at 256 KB)
PAST_LIMIT = max_transposed_bytes() // (14 * 14 * 4) + 1


@pytest.mark.parametrize("xs,out_ch", [
    ((1, 48, 7, 7), 288),         # an expansion: more output channels than input ones
    ((1, 67, 11, 11), 19),        # the estimate prefers the flat rows
    ((1, 240, 28, 28), 40),       # more positions than MAX_POSITION_VECTORS vectors
    ((1, 2 * PAST_LIMIT + 1, 14, 14), PAST_LIMIT),  # a transposed output past the limit
])
def test_other_1x1_convolutions_keep_the_flat_rows(xs, out_ch):
    mod, _ = _module(xs, out_ch)
    assert not any("T_conv2d_positions" in t for t in _kernel_texts(mod).values())
    _check(mod, RNG.standard_normal(xs).astype(np.float32))


def test_estimate_against_the_measured_choices():
    """The estimate on shapes measured alone (flat rows / positions, us):
    288 -> 48 over 14x14 + residual 66 / 55, 480 -> 160 over 7x7 97 / 83,
    192 -> 32 over 14x14 35 / 22; 48 -> 288 over 14x14 71 / 85, 24 -> 120
    over 14x14 21.7 / 28.2; a weight that is a parameter adds its packing."""
    for positions, c, o in ((196, 288, 48), (49, 480, 160), (196, 192, 32)):
        mine, rows = estimate(positions, c, o, 16, False)
        assert mine < rows
    for positions, c, o in ((196, 48, 288), (196, 24, 120)):
        mine, rows = estimate(positions, c, o, 16, False)
        assert mine > rows
    const, rows = estimate(49, 97, 41, 16, False)
    per_call, same = estimate(49, 97, 41, 16, True)
    assert const < rows == same < per_call


def test_projection_micro_panels_outer_with_the_next_one_prefetched(avx512_tiles):
    """101 output channels: two whole micro-panels of 32 (the second joined
    by the last 5 columns), each met by all 7 row tiles of 7 positions
    before the next, whose packed weight lines are prefetched meanwhile."""
    xs, out_ch = (1, 233, 7, 7), 101
    mod, _ = _module(xs, out_ch, residual=True)
    (packed,) = [t for n, t in _kernel_texts(mod).items() if n.endswith("_prepacked")]
    lines = packed.splitlines()
    jt = next(i for i, line in enumerate(lines) if "for jt in" in line)
    io = next(i for i, line in enumerate(lines) if "for io in" in line)
    assert jt < io
    assert any('"phasec.prefetch": const_packed[' in line for line in lines)
    x = RNG.standard_normal(xs).astype(np.float32)
    r = RNG.standard_normal((1, out_ch, 7, 7)).astype(np.float32)
    _check(mod, x, r)


@pytest.mark.parametrize("profile,taken", [("avx512_xeon", True), ("avx512", False)])
def test_a_projection_of_75_kb_takes_the_positions_where_the_profile_allows(
        monkeypatch, profile, taken):
    # MobileNetV2's 576 -> 96 over 14x14 + residual (its transposed output
    # 75 KB): the positions as rows under the Xeon's 256 KB, flat rows under
    # Zen 4's 64 KB (pointwise_max_transposed_bytes)
    monkeypatch.setenv("PHASEC_TUNING", profile)
    tuning.host_tuning.cache_clear()
    try:
        assert max_transposed_bytes() == {"avx512_xeon": 256 << 10, "avx512": 64 << 10}[profile]
        mod, _ = _module((1, 576, 14, 14), 96, residual=True)
        assert taken == any("T_conv2d_positions" in t for t in _kernel_texts(mod).values())
        _check(mod, RNG.standard_normal((1, 576, 14, 14)).astype(np.float32),
               RNG.standard_normal((1, 96, 14, 14)).astype(np.float32))
    finally:
        tuning.host_tuning.cache_clear()


@pytest.mark.parametrize("profile,c,o,taken", [
    ("avx512_xeon", 1024, 112, True),     # 448 KB of weight: the positions as rows
    ("avx512_xeon", 1031, 128, False),    # 516 KB (prime input channels): over the image
    ("avx512", 1024, 112, True),          # Zen 4: the same bound
    ("avx512", 1031, 128, False),
    ("avx2", 1031, 128, True),            # no weight limit
])
def test_a_large_projection_over_7x7_runs_over_the_image_on_the_xeon(monkeypatch, profile,
                                                                     c, o, taken):
    # (inside a model such a weight comes from L3: pointwise_max_weight_bytes)
    monkeypatch.setenv("PHASEC_TUNING", profile)
    tuning.host_tuning.cache_clear()
    try:
        mod, _ = _module((1, c, 7, 7), o, residual=True)
        texts = _kernel_texts(mod).values()
        assert taken == any("T_conv2d_positions" in t for t in texts)
        _check(mod, RNG.standard_normal((1, c, 7, 7)).astype(np.float32),
               RNG.standard_normal((1, o, 7, 7)).astype(np.float32))
    finally:
        tuning.host_tuning.cache_clear()


@pytest.mark.parametrize("xs,out_ch,width", [
    ((1, 13, 2, 3), 96, 96),      # six vectors: one 4 x 6 tile wide
    ((2, 7, 1, 5), 80, 96),       # five vectors (packed 96 wide, zero past 80), two images
    ((1, 173, 3, 5), 160, 96),    # ten: a 4 x 6 tile, then 4 x 4
    ((1, 29, 1, 7), 137, 96),     # nine vectors, the last of 9 lanes
    ((1, 11, 3, 5), 112, 64),     # seven vectors: the target's 6 x 4 tiles
    ((1, 19, 3, 5), 64, 64),      # four
])
def test_five_to_ten_vectors_of_channels_take_4_x_6_tiles_on_the_xeon(monkeypatch, xs, out_ch,
                                                                      width):
    import re

    from phasec.arith.inbounds import prove_accesses
    monkeypatch.setenv("PHASEC_TUNING", "avx512_xeon")
    tuning.host_tuning.cache_clear()
    try:
        assert tuning.host_tuning().pointwise_wide_tile == (4, 6)
        mod, _ = _module(xs, out_ch, residual=True)
        funcs = dict(lower(mod).prim_funcs())
        (packed,) = [f for n, f in funcs.items() if n.endswith("_prepacked")]
        text = repr(packed)
        # the weight packed in micro-panels one tile wide; the tiles' rows
        (got,) = re.findall(r"const_packed: T.Buffer\(\(T.int64\(\d+\), T.int64\(%d\), "
                            r"T.int64\((\d+)\)\)" % xs[1], text)
        assert int(got) == width
        rows = 4 if width == 96 else 6
        if xs[2] * xs[3] >= 6:
            assert "T_conv2d_positions_acc = T.alloc_buffer((T.int64(%d)," % rows in text
        assert all(prove_accesses(f).counts()[1] == 0 for f in funcs.values())
        x = RNG.standard_normal(xs).astype(np.float32)
        r = RNG.standard_normal((xs[0], out_ch, xs[2], xs[3])).astype(np.float32)
        _check(mod, x, r)
    finally:
        tuning.host_tuning.cache_clear()


@pytest.mark.parametrize("xs,out_ch", [((1, 131, 7, 7), 96), ((2, 101, 3, 5), 160)])
def test_a_weight_parameter_is_packed_per_call_96_wide_on_the_xeon(monkeypatch, xs, out_ch):
    monkeypatch.setenv("PHASEC_TUNING", "avx512_xeon")
    tuning.host_tuning.cache_clear()
    try:
        mod, w = _module(xs, out_ch, weight_param=True)
        (text,) = [t for t in _kernel_texts(mod).values() if "T_conv2d_positions" in t]
        assert "T_conv2d_positions_bpack = T.alloc_buffer((T.int64(1), T.int64(%d), " \
            "T.int64(96))" % xs[1] in text
        _check(mod, RNG.standard_normal(xs).astype(np.float32), w)
    finally:
        tuning.host_tuning.cache_clear()

"""The target profiles of ``phasec.target.tuning``: which one a CPU gets
(the Intel Xeon profile from LLVM's CPU name, the others unchanged),
``PHASEC_TUNING``'s overrides, and the schedules the Xeon profile changes
(6 x 4 GEMM tiles, 8 rows over one vector of columns, Winograd's F(2x2) over 14x14, strided 28-wide rows over
gathered columns) against numpy's reference on odd, prime and symbolic
shapes, on LLVM and on the TIR interpreter."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from phasec import te
from phasec.arith.inbounds import prove_accesses
from phasec.backend.llvm import compile_prim_funcs
from phasec.errors import InputError
from phasec.interp.tir import run_prim_func
from phasec.ir import TensorStructInfo, Var, tir
from phasec.op import call_op, get_op
from phasec.op.legalize import lower_fused
from phasec.target import tuning as tn
from phasec.te.schedules.build_time import ir_nodes
from phasec.te.schedules.conv_im2col import ANCHOR_NAME
from phasec.te.schedules.winograd import WINOGRAD_MARK

from helpers.legalize import fused  # a Primitive function built by a BlockBuilder
from helpers.te_checks import check_llvm_and_interp

#: conv_im2col's packed panels of the image's windows
IM2COL_PANELS = ANCHOR_NAME + "_bpack"

RNG = np.random.default_rng(29)
AVX512 = {"avx512f", "avx2", "fma"}


@pytest.mark.parametrize("flags,cpu,name", [
    (AVX512, "emeraldrapids", "avx512_xeon"),
    (AVX512, "sapphirerapids", "avx512_xeon"),
    (AVX512, "graniterapids", "avx512_xeon"),
    (AVX512, "znver4", "avx512"),             # where the avx512 profile was tuned
    (AVX512, "skylake-avx512", "avx512"),     # not measured: left as it was
    (AVX512, "", "avx512"),
    ({"avx2", "fma"}, "emeraldrapids", "avx2"),  # (AVX-512 off: its profile needs it)
    ({"avx2", "fma"}, "znver3", "avx2"),
    ({"sse2"}, "emeraldrapids", "generic"),
])
def test_the_profile_follows_the_flags_and_the_cpu_name(flags, cpu, name):
    assert tn.tuning_for(flags, cpu).name == name


def test_the_other_profiles_are_unchanged():
    # the values the avx512 profile (tuned on Zen 4) had before the Xeon one (but the
    # narrow depthwise planes and the weight bound of 1x1 projections with positions as
    # rows, since measured faster on Zen 4 too)
    t = tn.avx512_tuning()
    assert (t.gemm_rows, t.gemm_vectors, t.gemm_panel_bytes, t.gemm_pack_min_bytes,
            t.gemm_prefetch_min_k, t.gemm_prefetch_a_min_k, t.winograd_tile,
            t.winograd_min_tile_vectors, t.im2col_row_vectors, t.gemm_narrow_rows,
            t.int_gemm_tile, t.pointwise_max_transposed_bytes, t.depthwise_narrow_plane,
            t.gemm_tail_min_accumulators, t.winograd_narrow_max_weight_bytes,
            t.gemm_flat_panel_bytes, t.pointwise_max_weight_bytes
            ) == (8, 2, 384 * 1024, 1 << 20, 256, 64, 4, 1, 1, 0, (), 64 * 1024, True, 0, 0, 0,
                  512 * 1024)
    for t in (tn.avx2_tuning(), tn.generic_tuning()):
        assert (t.gemm_rows, t.gemm_vectors, t.gemm_prefetch_min_k, t.gemm_prefetch_a_min_k,
                t.winograd_min_tile_vectors, t.im2col_row_vectors,
                t.gemm_tail_min_accumulators, t.winograd_narrow_max_weight_bytes,
                t.depthwise_narrow_plane) == (4, 2, 256, 64, 1, 1, 0, 0, False)
    x, t = tn.avx512_xeon_tuning(), tn.avx512_tuning()
    changed = {f.name for f in dataclasses.fields(t) if getattr(x, f.name) != getattr(t, f.name)}
    assert changed == {"name", "gemm_rows", "gemm_vectors", "gemm_narrow_rows", "int_gemm_tile",
                       "gemm_tail_min_accumulators",
                       "gemm_pack_min_bytes", "gemm_prefetch_min_k", "gemm_prefetch_a_min_k",
                       "gemm_prefetch_a_max_k", "gemm_prefetch_a_max_columns",
                       "gemm_prefetch_a_min_bytes",
                       "winograd_min_tile_vectors", "winograd_narrow_max_weight_bytes",
                       "im2col_row_vectors",
                       "pointwise_max_transposed_bytes",
                       "gemm_flat_panel_bytes", "gemm_flat_micro_panel_max_rows",
                       "pointwise_wide_tile",
                       "gemm_k_block_bytes", "gemm_pack_a_max_columns",
                       "gemm_pack_a_min_bytes", "gemm_pack_a_max_k",
                       # the avx512 profile's 6 x 4 tiles of 1x1 convolutions over
                       # small images: the Xeon's GEMM has such tiles throughout
                       "pointwise_flat_tile", "pointwise_flat_tile_max_columns",
                       "pointwise_flat_tile_min_rows"}
    assert (t.pointwise_flat_tile, t.pointwise_flat_tile_max_columns,
            t.pointwise_flat_tile_min_rows) == ((6, 4), 196, 256)
    assert not tn.avx2_tuning().pointwise_flat_tile and not tn.generic_tuning().pointwise_flat_tile
    # row panels of A (gemm_prepack.row_panels) on the Xeon only
    assert (x.gemm_pack_a_max_columns, x.gemm_pack_a_min_bytes, x.gemm_pack_a_max_k
            ) == (64, 512 * 1024, 512)
    assert all(p().gemm_pack_a_max_columns == 0
               for p in (tn.avx512_tuning, tn.avx2_tuning, tn.generic_tuning))
    # the integer GEMM keeps the avx512 profile's tile
    assert x.int_gemm_tile == (t.gemm_rows, t.gemm_vectors) == (8, 2)


def test_host_tuning_reads_the_cpu_name_and_phasec_tuning(monkeypatch):
    monkeypatch.setattr(tn, "_cpu_flags", lambda: AVX512)
    monkeypatch.delenv("PHASEC_VECTOR_BITS", raising=False)
    monkeypatch.delenv("PHASEC_WINOGRAD", raising=False)
    try:
        for cpu, env, want in [
                ("emeraldrapids", "", ("avx512_xeon", 6, 4)),
                ("znver4", "", ("avx512", 8, 2)),
                ("emeraldrapids", "avx512", ("avx512", 8, 2)),
                ("znver4", "avx512_xeon", ("avx512_xeon", 6, 4)),
                ("znver4", "gemm_rows=6, gemm_vectors=4", ("avx512", 6, 4)),
                ("emeraldrapids", "avx512,gemm_rows=12", ("avx512", 12, 2)),
                ("znver4", "gemm_narrow_rows=0,winograd_tile=0,parallel_min_work=0",
                 ("avx512", 8, 2))]:
            monkeypatch.setattr(tn, "_host_cpu_name", lambda cpu=cpu: cpu)
            monkeypatch.setenv("PHASEC_TUNING", env)
            tn.host_tuning.cache_clear()
            t = tn.host_tuning()
            assert (t.name, t.gemm_rows, t.gemm_vectors) == want, (cpu, env)
        # a boolean field takes 0 or 1, over the profile's own value
        for env, want in (("depthwise_narrow_plane=0", False),
                          ("avx2,depthwise_narrow_plane=1", True)):
            monkeypatch.setenv("PHASEC_TUNING", env)
            tn.host_tuning.cache_clear()
            assert tn.host_tuning().depthwise_narrow_plane is want, env
        # a typo is refused, naming the variable, not ignored
        for bad in ("gemm_row=6", "gemm_rows=-1", "gemm_rows=six", "name=x", "vector_bits=256",
                    "partial_lanes=16", "gemm_rows=6,avx512", "zen4",
                    # sizes that would divide by zero or unroll without end
                    "gemm_rows=0", "gemm_vectors=0", "gemm_vectors=1000", "gemm_panel_bytes=0",
                    "winograd_tile=3", "gemm_narrow_rows=65",
                    # a boolean is 0 or 1; AMX code would fault on a CPU without it
                    "depthwise_narrow_plane=2", "depthwise_narrow_plane=yes", "int8_amx=1"):
            monkeypatch.setenv("PHASEC_TUNING", bad)
            tn.host_tuning.cache_clear()
            with pytest.raises(InputError, match="PHASEC_TUNING"):
                tn.host_tuning()
    finally:
        tn.host_tuning.cache_clear()


def _gemm(m, k, n):
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    r = te.reduce_axis(k, "r")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r.var] * b[r.var, j], axis=[r]), name="C",
                   tag="matmul")  # (the GEMM schedule takes matmuls and convolutions)
    return [a, b, c]


@pytest.mark.parametrize("m,k,n", [(24, 37, 128), (17, 13, 53), (37, 300, 150), (6, 5, 64),
                                   (29, 7, 16), (13, 11, 11), ("sym", 31, 101), ("sym", 5, 16)])
def test_gemm_in_6x4_tiles_and_narrow_columns_in_8_rows_matches_numpy(xeon, m, k, n):
    assert xeon.gemm_cols(32) == 64 and xeon.gemm_narrow_rows == 8
    sym = tir.Var("m") if m == "sym" else None
    args = _gemm(sym if sym is not None else m, k, n)
    prim = te.create_prim_func(args, schedule_hints=te.ScheduleOptions(tuning=xeon))
    lib = compile_prim_funcs({"k": prim})
    for rows in ((1, 9, 29) if sym is not None else (m,)):
        a = RNG.standard_normal((rows, k)).astype("float32")
        b = RNG.standard_normal((k, n)).astype("float32")
        want = a.astype("float64") @ b.astype("float64")
        got = np.zeros((rows, n), "float32")
        lib["k"](a, b, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        if rows * k * n <= 30_000:  # (the interpreter: ~30 us a multiply-add)
            interp = np.zeros((rows, n), "float32")
            run_prim_func(prim, [a, b, interp])
            np.testing.assert_allclose(interp, want, rtol=1e-4, atol=1e-4)


def _row_tiles(prim) -> list[int]:
    """The extents of the loops over whole register tiles of rows (``io``)."""
    return [n.extent.value for n in ir_nodes(prim.body) if type(n) is tir.For
            and n.loop_var.name.startswith("io") and isinstance(n.extent, tir.IntImm)]


def _check_gemm(prim, m, k, n):
    """The matmul ``prim`` (m x k @ k x n) on LLVM and on the interpreter
    against numpy, for random values."""
    a = RNG.standard_normal((m, k)).astype("float32")
    b = RNG.standard_normal((k, n)).astype("float32")
    want = a.astype("float64") @ b.astype("float64")
    got = np.zeros((m, n), "float32")
    compile_prim_funcs({"k": prim})["k"](a, b, got)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    interp = np.zeros((m, n), "float32")
    run_prim_func(prim, [a, b, interp])
    np.testing.assert_allclose(interp, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m,n,io", [
    (50, 64, 8),    # 8 x 6 rows + 2 x 4 vectors (8 accumulators): kept (else 10 x 5)
    (53, 71, 8),    # 8 x 6 + 5 (half the tile: kept anyway), 64 columns and 7 more
    (50, 112, 8),   # 8 x 6 + 2 over 64 columns (over the other 48, 2 x 3: 10 x 5)
    (49, 64, 9),    # 8 x 6 + 1 x 4 accumulators: too few, 9 x 5 + 4
    (20, 64, 4),    # 3 x 6 + 2: too few whole tiles, 4 x 5 as on every profile
    (50, 16, 10),   # one vector of columns, 8 rows: 6 x 8 + 2 x 1, too few: 10 x 5
])
def test_a_last_tile_of_enough_accumulators_keeps_the_tile_rows(xeon, m, n, io):
    assert xeon.gemm_tail_min_accumulators == 8
    k = 7
    prim = te.create_prim_func(_gemm(m, k, n), schedule_hints=te.ScheduleOptions(tuning=xeon))
    assert io in _row_tiles(prim)
    _check_gemm(prim, m, k, n)


@pytest.mark.parametrize("m,n,io", [
    (128, 80, 16),  # 64 columns in 6 x 4 tiles, the last 16 in 8 x 1 (not 25 x 5)
    (61, 80, 7),    # 7 x 8 + 5 rows over the last 16 (not 10 x 6 + 1)
    (37, 85, 4),    # the last 21 columns not one vector: a wider tile as before
])
def test_last_columns_of_one_vector_take_the_narrow_rows(xeon, m, n, io):
    k = 5
    prim = te.create_prim_func(_gemm(m, k, n), schedule_hints=te.ScheduleOptions(tuning=xeon))
    assert (io in _row_tiles(prim)) == (n % 64 == xeon.lanes(32))
    _check_gemm(prim, m, k, n)


def test_the_avx512_profile_balances_its_tiles_as_before(xeon):
    # 8 x 2 tiles: 20 rows = 2 x 8 + 4 (half the tile: kept); 50 = 6 x 8 + 2 of 2 x 2
    # accumulators -> 10 x 5 (where the Xeon keeps 8 x 6 + 2 x 4)
    avx = tn.avx512_tuning()
    for m, io in ((20, 2), (50, 10)):
        prim = te.create_prim_func(_gemm(m, 13, 64), schedule_hints=te.ScheduleOptions(
            tuning=avx))
        assert io in _row_tiles(prim), m


def _conv_relu(n, c, h, w, o, k, **attrs):
    d = Var("d", TensorStructInfo((n, c, h, w), "float32"))
    wt = Var("w", TensorStructInfo((o, c, k, k), "float32"))
    return fused([d, wt], lambda bb: call_op("nn.relu", bb.emit(call_op(
        "nn.conv2d", d, wt, **attrs))))


def _buffers(prim) -> list[str]:
    """The names of the buffers ``prim`` allocates."""
    return [n.buffer.name for n in ir_nodes(prim.body) if type(n) is tir.Allocate]


def _check_conv(prim, batches, c, h, w, o, k, attrs, interp=True):
    two = lambda v: (v, v) if isinstance(v, int) else v  # noqa: E731
    pads = attrs.get("padding", 0)
    lib = compile_prim_funcs({"k": prim})
    for n in batches:
        x = RNG.standard_normal((n, c, h, w)).astype("float32")
        wa = RNG.standard_normal((o, c, k, k)).astype("float32")
        want = np.maximum(get_op("relax.nn.conv2d").reference(
            x, wa, padding=(pads,) * 4 if isinstance(pads, int) else pads,
            strides=two(attrs.get("strides", 1))), 0)
        got = np.zeros(want.shape, "float32")
        lib["k"](x, wa, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        if interp:
            ref = np.zeros(want.shape, "float32")
            run_prim_func(prim, [x, wa, ref])
            np.testing.assert_allclose(ref, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c,h,o,k,attrs", [
    (5, 56, 7, 3, {"padding": 1, "strides": 2}),   # 28-wide rows (ResNet's 56 -> 28)
    (6, 37, 11, 1, {"strides": 2}),               # 19 wide, 1x1, prime sizes
    (5, 61, 7, 3, {"padding": (1, 0, 2, 1), "strides": 2}),  # 31 wide, uneven padding
])
def test_strided_rows_of_under_two_vectors_use_the_columns_on_the_xeon(xeon, c, h, o, k, attrs):
    prim = lower_fused(_conv_relu(1, c, h, h, o, k, **attrs)).prim_func
    assert IM2COL_PANELS in _buffers(prim)
    _check_conv(prim, (1,), c, h, h, o, k, attrs, interp=h < 40)  # (interpreter: small only)
    sym = lower_fused(_conv_relu(tir.Var("n"), c, h, h, o, k, **attrs)).prim_func
    assert IM2COL_PANELS in _buffers(sym)
    _check_conv(sym, (1, 2), c, h, h, o, k, attrs, interp=False)


def test_the_avx512_profile_keeps_its_choices(monkeypatch):
    # 28-wide strided rows as they were; F(4x4) over 14x14
    monkeypatch.setenv("PHASEC_TUNING", "avx512")
    tn.host_tuning.cache_clear()
    try:
        prim = lower_fused(_conv_relu(1, 5, 56, 56, 7, 3, padding=1, strides=2)).prim_func
        assert IM2COL_PANELS not in _buffers(prim)
        prim = lower_fused(_conv_relu(1, 9, 14, 14, 11, 3, padding=1),
                           constant_params=(1,)).prim_func
        assert _winograd_m(prim) == 4
    finally:
        tn.host_tuning.cache_clear()


def _winograd_m(prim) -> int | None:
    """The m of the kernel's Winograd weight transform (None: direct)."""
    marks = [n for n in ir_nodes(prim.body) if type(n) is tir.AttrStmt
             and n.key == WINOGRAD_MARK]
    return marks[0].value.value if marks else None


@pytest.mark.parametrize("c,h,o,m_xeon", [(9, 14, 11, 2), (8, 13, 8, 2), (8, 28, 8, 4),
                                          (9, 7, 9, 2)])
def test_winograd_tiles_fill_two_vectors_on_the_xeon(xeon, c, h, o, m_xeon):
    # (a constant weight: the rule alone decides, see test_winograd.py)
    prim = lower_fused(_conv_relu(1, c, h, h, o, 3, padding=1), constant_params=(1,)).prim_func
    assert _winograd_m(prim) == m_xeon
    # (the interpreter for the small images only: F(4x4)'s TIR over 28x28 is
    # read by the interpreter in test_winograd.py)
    _check_conv(prim, (1,), c, h, h, o, 3, {"padding": 1}, interp=h < 20)


@pytest.mark.parametrize("c,h,o,m", [
    (9, 7, 9, None),    # 16 tiles (one vector), U = 16 x 9 x 9 floats = 5184 bytes: direct
    (8, 7, 8, 2),       # U = 4096 bytes, at the limit: F(2x2)
    (9, 14, 11, 2),     # 49 tiles fill two vectors: F(2x2) whatever U's size
])
def test_one_vector_winograd_only_below_its_weight_limit(monkeypatch, c, h, o, m):
    # the Xeon profile with a small limit (its own, 128 KB, would need large, slow shapes)
    monkeypatch.setenv("PHASEC_TUNING", "avx512_xeon,winograd_narrow_max_weight_bytes=4096")
    monkeypatch.delenv("PHASEC_WINOGRAD", raising=False)
    monkeypatch.delenv("PHASEC_VECTOR_BITS", raising=False)
    tn.host_tuning.cache_clear()
    try:
        assert tn.avx512_xeon_tuning().winograd_narrow_max_weight_bytes == 128 * 1024
        prim = lower_fused(_conv_relu(1, c, h, h, o, 3, padding=1),
                           constant_params=(1,)).prim_func
        assert _winograd_m(prim) == m
        _check_conv(prim, (1,), c, h, h, o, 3, {"padding": 1}, interp=h < 10)
        # a symbolic batch is planned for one image: the same choice
        sym = lower_fused(_conv_relu(tir.Var("n"), c, h, h, o, 3, padding=1),
                          constant_params=(1,)).prim_func
        assert _winograd_m(sym) == m
        if m is None:  # (the direct schedule's values over two images)
            _check_conv(sym, (2,), c, h, h, o, 3, {"padding": 1}, interp=False)
    finally:
        tn.host_tuning.cache_clear()


def _loop_extents(prim, *names):
    found = {n.loop_var.name: n.extent.value for n in ir_nodes(prim.body)
             if type(n) is tir.For and isinstance(n.extent, tir.IntImm)}
    return tuple(found.get(name, 1) for name in names)


@pytest.mark.parametrize("c,o,h,w,extra,panels", [
    (5, 12, 13, 23, "", (1, 4)),                        # K = 5: one panel of the 4 tiles
    (5, 12, 13, 23, ",gemm_flat_panel_bytes=0", (4, 1)),  # off: 64-column panels
    (5, 6, 13, 23, "", (4, 1)),                         # one row tile: too few
    (7, 12, 13, 23, ",gemm_flat_panel_max_k=6", (4, 1)),  # a reduction too long
    (3 * 7, 13, 11, 17, "", (1, 2)),                    # 13 rows, 187 = 2 x 64 + 59 columns
])
def test_a_gemm_over_the_image_takes_wide_panels_on_the_xeon(monkeypatch, c, o, h, w, extra,
                                                             panels):
    # (the profile's sizes scaled down so that the interpreter runs it: panels
    # of 64 columns, two row tiles enough)
    monkeypatch.setenv("PHASEC_TUNING", "avx512_xeon,gemm_flat_panel_min_row_tiles=2,"
                       "gemm_panel_max_cols=64" + extra)
    tn.host_tuning.cache_clear()
    try:
        assert tn.avx512_xeon_tuning().gemm_flat_panel_bytes == 1 << 20
        d = Var("d", TensorStructInfo((1, c, h, w), "float32"))
        wt = Var("w", TensorStructInfo((o, c, 1, 1), "float32"))
        r = Var("r", TensorStructInfo((1, o, h, w), "float32"))
        low = lower_fused(fused([d, wt, r], lambda bb: call_op(
            "add", bb.emit(call_op("nn.conv2d", d, wt)), r)))
        assert _loop_extents(low.prim_func, "jc", "jt") == panels
        x = RNG.standard_normal((1, c, h, w)).astype("float32")
        wa = RNG.standard_normal((o, c, 1, 1)).astype("float32")
        ra = RNG.standard_normal((1, o, h, w)).astype("float32")
        want = get_op("relax.nn.conv2d").reference(x, wa) + ra
        check_llvm_and_interp(low.prim_func, [x, wa, ra], want.astype("float32"))
    finally:
        tn.host_tuning.cache_clear()


@pytest.mark.parametrize("n,c,o,h,w,extra,panels", [
    (1, 5, 16, 13, 23, "", (4, 1)),     # 16 rows: one micro-panel a panel
    (1, 5, 16, 13, 23, ",gemm_flat_micro_panel_max_rows=0", (1, 4)),  # off: one panel
    (1, 7, 64, 13, 23, "", (4, 1)),     # 64 rows (11 row tiles), the bound
    (1, 7, 65, 13, 23, "", (1, 4)),     # 65 rows: one panel of the 4 micro-panels
    # 13 rows, 319 = 4 x 64 + 63 columns, two images: 5 micro-panels in
    # one loop, the last ending at 319 (gemm._one_loop)
    (2, 3, 13, 11, 29, "", (5, 1)),
    ("n", 3, 31, 7, 37, "", (4, 1)),    # a symbolic batch (two images), 31 rows, 259 columns
])
def test_a_gemm_over_the_image_of_few_rows_packs_one_micro_panel_at_a_time(
        monkeypatch, n, c, o, h, w, extra, panels):
    # (against numpy on LLVM, and on the interpreter where it is quick)
    monkeypatch.setenv("PHASEC_TUNING", "avx512_xeon" + extra)
    tn.host_tuning.cache_clear()
    try:
        assert tn.avx512_xeon_tuning().gemm_flat_micro_panel_max_rows == 64
        batch = tir.Var("n") if n == "n" else n
        d = Var("d", TensorStructInfo((batch, c, h, w), "float32"))
        wt = Var("w", TensorStructInfo((o, c, 1, 1), "float32"))
        r = Var("r", TensorStructInfo((batch, o, h, w), "float32"))
        low = lower_fused(fused([d, wt, r], lambda bb: call_op(
            "nn.relu", bb.emit(call_op("add", bb.emit(call_op("nn.conv2d", d, wt)), r)))))
        assert _loop_extents(low.prim_func, "jc", "jt") == panels
        assert prove_accesses(low.prim_func).counts()[1] == 0  # every access proven
        b = 2 if n == "n" else n
        x = RNG.standard_normal((b, c, h, w)).astype("float32")
        wa = RNG.standard_normal((o, c, 1, 1)).astype("float32")
        ra = RNG.standard_normal((b, o, h, w)).astype("float32")
        want = np.maximum(get_op("relax.nn.conv2d").reference(x, wa) + ra, 0).astype("float32")
        if o < 64:
            check_llvm_and_interp(low.prim_func, [x, wa, ra], want)
        else:
            got = np.zeros_like(want)
            compile_prim_funcs({"k": low.prim_func})["k"](x, wa, ra, got)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    finally:
        tn.host_tuning.cache_clear()

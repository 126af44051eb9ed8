"""The GEMM's columns in one loop (``GemmEmitter._one_loop``): every panel
of whole micro-panels in one loop, the last panel's count a ``min``, the
last micro-panel ending at N (recomputing the columns it shares with the one
before), so the kernel holds one copy of the register tile; taken when at
most N / 64 columns are recomputed. Checked against numpy (float64) and the
TIR reference interpreter: N not a multiple of the tile (one column short
of it, and a whole tile less one), M not a multiple of the tile's rows, a
symbolic M, a last panel of fewer micro-panels, B packed or read in place,
epilogues with a bias and relu, and gelu with a residual read at the
recomputed columns; N below the tile, or many columns short of it, keeps
the narrower last tile. Every access is proven in bounds."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers.te_checks import PACK_ALWAYS, run, walk
from te.test_gemm_schedule import (
    _check_gemm, _conv_nchw, _conv_reference, _gemm, _operands,
)

from phasec import te
from phasec.arith.inbounds import prove_accesses
from phasec.ir import tir as T
from phasec.target.tuning import host_tuning

NR = host_tuning().gemm_cols(32)
#: panels of two micro-panels: several panels, the last of fewer
SMALL_PANELS = dataclasses.replace(host_tuning(), gemm_panel_max_cols=2 * NR)
#: (a matmul's B is a parameter read as B[k, j]: packed, it is marked for
#: PackConstantWeights, which the one loop is not, so packed matmuls keep
#: their tails; the convolutions below pack the image)
TUNINGS = {"host": host_tuning(), "small panels": SMALL_PANELS}


def _tiles(func) -> list[tuple[int, int]]:
    return [tuple(int(d.value) for d in s.buffer.shape) for s in walk(func.body)
            if isinstance(s, T.Allocate) and "_acc" in s.buffer.name]


# (M, K, N): N one column short of 9 tiles, 9 short of 33, 3 short of 7; M
# prime, not a multiple of the tile's rows (8 on AVX-512, 6 on the Xeon)
SHAPES = [(13, 37, 9 * NR - 1), (29, 17, 33 * NR - 9), (7, 64, 7 * NR - 3)]


@pytest.mark.parametrize("tuning_name", list(TUNINGS))
@pytest.mark.parametrize("M,K,N", SHAPES)
def test_one_tile_in_one_loop_matches_numpy(tuning_name, M, K, N):
    opts = te.ScheduleOptions(tuning=TUNINGS[tuning_name])
    funcs, cases = {}, []
    for epilogue in ("none", "bias_relu", "gelu_res"):
        ins, out, ref = _gemm(M, K, N, epilogue=epilogue)
        funcs[epilogue] = te.create_prim_func(ins + [out], schedule_hints=opts)
        cases.append((epilogue, _operands(ins, M, K, N), (M, N), "float32", ref))
    for name, f in funcs.items():
        widths = {w for _, w in _tiles(f)}
        # every column in tiles of one width (the last ending at N), the
        # row tiles of the plan and the rest rows: no narrower tile
        assert widths == {NR}, (name, _tiles(f))
        assert "T.min(" in str(f), name
        assert prove_accesses(f).counts()[1] == 0, name
    _check_gemm(funcs, cases)


@pytest.mark.parametrize("tuning", [PACK_ALWAYS, dataclasses.replace(
    PACK_ALWAYS, gemm_panel_max_cols=2 * NR)], ids=["packed", "packed small panels"])
@pytest.mark.parametrize("c,h,w,o,k", [
    (3, 5, 9 * NR // 3 + 1, 13, 3),   # 3 rows of 3 * NR - 1 outputs: flat, packed
    (5, 1, 33 * NR - 5, 11, 1),       # one row of 33 tiles less 5 columns (1x1)
])
def test_a_convolution_packed_in_one_loop(tuning, c, h, w, o, k):
    """A convolution's B (the image) packed in one loop of micro-panels,
    the last ending at the last output; M (output channels) prime."""
    ins, out = _conv_nchw(1, c, h, w, o, k, k)
    f = te.create_prim_func(ins + [out], schedule_hints=te.ScheduleOptions(tuning=tuning))
    assert {wd for _, wd in _tiles(f)} == {NR}, _tiles(f)
    assert any(s.buffer.name.startswith("conv_bpack") for s in walk(f.body)
               if isinstance(s, T.Allocate))
    assert prove_accesses(f).counts()[1] == 0
    rng = np.random.default_rng(c * h + w)
    arrays = [rng.standard_normal((1, c, h, w)).astype("float32"),
              rng.standard_normal((o, c, k, k)).astype("float32"),
              rng.standard_normal(o).astype("float32")]
    shape = (1, o, h - k + 1, w - k + 1)
    _check_gemm({"f": f}, [("f", arrays, shape, "float32",
                            lambda x, wt, b: _conv_reference(x, wt, b, 1))])
    got = run(f, *arrays, np.zeros(shape, "float32"))
    np.testing.assert_allclose(got, _conv_reference(*arrays, 1), rtol=1e-4, atol=1e-4)


def test_one_loop_on_the_interpreter_with_a_residual_and_several_panels():
    """The recomputed columns' residual is read from R, not from the output
    (which the first tile over them has written): the interpreter agrees,
    over panels of two micro-panels, the last panel one."""
    M, K, N = 11, 5, 5 * NR - 2
    ins, out, ref = _gemm(M, K, N, epilogue="gelu_res")
    f = te.create_prim_func(ins + [out], schedule_hints=te.ScheduleOptions(tuning=SMALL_PANELS))
    assert {w for _, w in _tiles(f)} == {NR}
    arrays = _operands(ins, M, K, N)
    got = run(f, *arrays, np.zeros((M, N), "float32"))
    want = ref(*arrays)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_one_loop_with_a_symbolic_row_count():
    n = T.Var("n")
    N = 7 * NR - 2
    ins, out, ref = _gemm(n, 19, N, epilogue="bias_relu")
    f = te.create_prim_func(ins + [out], schedule_hints=te.ScheduleOptions(tuning=host_tuning()))
    assert {w for _, w in _tiles(f)} <= {NR} and "T.min(" in str(f)
    assert prove_accesses(f).counts()[1] == 0
    funcs, cases = {"sym": f}, []
    for rows in (1, 5, 23):
        arrays = _operands(ins, rows, 19, N)
        cases.append(("sym", arrays, (rows, N), "float32", ref))
    _check_gemm(funcs, cases)
    arrays = cases[1][1]
    got = run(f, *arrays, np.zeros((5, N), "float32"))
    want = ref(*arrays)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("N", [NR // 2 + 3, 2 * NR + NR // 2, 3 * NR - 7])
def test_few_columns_or_many_recomputed_keep_the_narrower_last_tile(N):
    """N below one tile (nothing to end at N), or more than N / 64 columns
    short of whole tiles (2.5 tiles: half a tile recomputed; 3 tiles less 7
    of 89): the last columns in a narrower tile, as before."""
    M, K = 13, 23
    ins, out, ref = _gemm(M, K, N, epilogue="bias_relu")
    f = te.create_prim_func(ins + [out], schedule_hints=te.ScheduleOptions(tuning=host_tuning()))
    assert any(w != NR for _, w in _tiles(f)), _tiles(f)
    assert prove_accesses(f).counts()[1] == 0
    arrays = _operands(ins, M, K, N)
    _check_gemm({"f": f}, [("f", arrays, (M, N), "float32", ref)])
    got = run(f, *arrays, np.zeros((M, N), "float32"))
    want = ref(*arrays)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_no_thread_stores_another_panels_columns():
    """Five micro-panels in panels of two would leave the last panel only the
    micro-panel ending at N, which shares columns with the one before it: two
    threads storing them at once. The panels hold three and two instead; the
    values are numpy's."""
    M, K, N = 64, 16, 5 * NR - 2
    ins, out, ref = _gemm(M, K, N, epilogue="bias_relu")
    f = te.create_prim_func(ins + [out], schedule_hints=te.ScheduleOptions(tuning=SMALL_PANELS))
    (panels,) = [s for s in walk(f.body) if isinstance(s, T.For) and s.kind == "parallel"]
    assert panels.loop_var.name.startswith("jc") and int(panels.extent.value) == 2
    assert prove_accesses(f).counts()[1] == 0
    arrays = _operands(ins, M, K, N)
    _check_gemm({"f": f}, [("f", arrays, (M, N), "float32", ref)])

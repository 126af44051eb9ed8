"""The GEMM's last rows in the loop of whole row tiles
(``gemm_tile.tiled_rows``): ``ceil(M / mr)`` tiles of ``mr`` rows,
the last one moved back to end at M over rows of the one before it,
storing only its own, so the kernel holds one copy of the register tile,
not a second of ``M % mr`` rows; taken when at most M / 64 rows are
computed in vain. Checked against
numpy (float64) on LLVM with one and two threads, and the TIR interpreter:
M prime and every remainder ``M % mr`` from 1 to ``mr - 1``, epilogues
with a bias and relu and a residual, a reduction in blocks, a 1x1
convolution's output channels (and SqueezeNet's layer against ONNX
Runtime); few rows keep the remainder tile. No two iterations of a
parallel loop store one element (each run alone on the interpreter), and
every access is proven in bounds."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from helpers.te_checks import PACK_ALWAYS, run, walk
from te.test_gemm_k_block import _blocks_of
from te.test_gemm_schedule import (
    _check_gemm, _conv_nchw, _conv_reference, _gemm, _operands,
)

import phasec
from phasec import te
from phasec.frontend.onnx import from_onnx
from phasec.arith.inbounds import prove_accesses
from phasec.backend.llvm import (
    compile_prim_funcs, get_num_threads, set_min_parallel_work, set_num_threads,
)
from phasec.ir import tir as T
from phasec.ir.tir_visitor import StmtExprMutator
from phasec.target.tuning import host_tuning
from phasec.te.schedules import gemm
from phasec.te.schedules.gemm import GemmEmitter

MR = host_tuning().gemm_rows
NR = host_tuning().gemm_cols(32)
#: the host's tuning keeping the plan's rows whatever the last tile's (over
#: at least eight whole tiles: ``gemm_tail_min_accumulators``), so that
#: every remainder of ``MR`` is met
KEEP = dataclasses.replace(host_tuning(), gemm_tail_min_accumulators=1)


def _m_with(rem: int) -> int:
    """The least M of at least 8 tiles with ``M % MR == rem`` and at most
    M / 64 rows in vain (odd where it can be)."""
    m = max(8 * MR, 64 * (MR - rem))
    m += (rem - m) % MR
    return m + MR if m % 2 == 0 and MR % 2 and rem % 2 == 0 else m


#: M for each remainder; 71, 197 and 449 are prime on a tile of 8 rows
ROWS = [_m_with(r) for r in range(1, MR)]


def _tile_rows(func) -> set[int]:
    return {int(s.buffer.shape[0].value) for s in walk(func.body)
            if isinstance(s, T.Allocate) and "_acc" in s.buffer.name}


@pytest.fixture(params=[1, 2], ids=["1 thread", "2 threads"])
def threads(request):
    saved = get_num_threads()
    set_num_threads(request.param)
    set_min_parallel_work(0)  # (the small ones' parallel loops on both threads too)
    yield request.param
    set_num_threads(saved)
    set_min_parallel_work(host_tuning().parallel_min_work)


@pytest.mark.parametrize("M", ROWS)
def test_every_remainder_in_the_loop_of_whole_tiles_matches_numpy(M, threads):
    K = 23
    funcs, cases = {}, []
    for epilogue in ("bias_relu", "gelu_res"):
        for N, tag in ((3 * NR, "whole"), (3 * NR + 5, "tail")):
            ins, out, ref = _gemm(M, K, N, epilogue=epilogue)
            name = f"{epilogue}_{tag}"
            funcs[name] = te.create_prim_func(ins + [out], schedule_hints=te.ScheduleOptions(
                tuning=KEEP))
            cases.append((name, _operands(ins, M, K, N), (M, N), "float32", ref))
    for name, f in funcs.items():
        assert prove_accesses(f).counts()[1] == 0, name
    # one tile of MR rows over every column (no tile of M % MR rows), the
    # last moved back to end at M
    for name in ("bias_relu_whole", "gelu_res_whole"):
        assert _tile_rows(funcs[name]) == {MR}
        assert f"T.int64({M - MR}))" in str(funcs[name]), name
    _check_gemm(funcs, cases)


def test_few_rows_keep_their_remainder_tile(threads):
    """4.5 tiles of rows: half a tile in vain is too much; the last rows
    keep their own tile of MR / 2 rows."""
    M, K, N = 4 * MR + MR // 2, 19, 2 * NR
    ins, out, ref = _gemm(M, K, N, epilogue="bias_relu")
    f = te.create_prim_func(ins + [out], schedule_hints=te.ScheduleOptions(tuning=KEEP))
    assert _tile_rows(f) == {MR, MR // 2}
    assert prove_accesses(f).counts()[1] == 0
    _check_gemm({"f": f}, [("f", _operands(ins, M, K, N), (M, N), "float32", ref)])


def test_a_reduction_in_blocks_keeps_the_rows_past_m_out_of_its_partial_sums(threads):
    """Blocks of K with the partial sums in memory between them: the last
    tile reads row M - 1's sums for its rows past M and keeps only its
    own rows' (the buffer has M rows)."""
    M, K, N = ROWS[-1], 97, 3 * NR
    ins, out, ref = _gemm(M, K, N, epilogue="gelu_res")
    tuning = dataclasses.replace(_blocks_of(PACK_ALWAYS, 16), gemm_tail_min_accumulators=1)
    f = te.create_prim_func(ins + [out], schedule_hints=te.ScheduleOptions(tuning=tuning))
    assert any(s.buffer.name.endswith("_part") for s in walk(f.body)
               if isinstance(s, T.Allocate))
    assert _tile_rows(f) == {MR}
    assert prove_accesses(f).counts()[1] == 0
    _check_gemm({"f": f}, [("f", _operands(ins, M, K, N), (M, N), "float32", ref)])


def test_a_pointwise_convolutions_output_channels(threads):
    """A 1x1 convolution over 13x13 (SqueezeNet's expand layers), its
    output channels the rows: a prime count, on its own schedule's tile."""
    c, o = 16, 197
    ins, out = _conv_nchw(1, c, 13, 13, o, 1, 1)
    f = te.create_prim_func(ins + [out])
    (rows,) = _tile_rows(f)
    assert o % rows and f"T.int64({o - rows}))" in str(f), rows
    assert prove_accesses(f).counts()[1] == 0
    rng = np.random.default_rng(o)
    arrays = [rng.standard_normal((1, c, 13, 13)).astype("float32"),
              rng.standard_normal((o, c, 1, 1)).astype("float32"),
              rng.standard_normal(o).astype("float32")]
    _check_gemm({"f": f}, [("f", arrays, (1, o, 13, 13), "float32",
                            lambda x, w, b: _conv_reference(x, w, b, 1))])


def test_squeezenets_expand_layer_against_onnxruntime(threads, monkeypatch):
    """SqueezeNet's 1x1 expand convolution (64 channels over 13x13, plus a
    bias and relu) through the ONNX frontend and the model pipeline, with
    383 output channels (prime: a remainder of 1 to 7 rows in vain on a
    tile of 3 to 8 rows) against ONNX Runtime."""
    taken: list[tuple[int, bool]] = []
    real = gemm.tiled_rows

    def spy(em: GemmEmitter, M: int, mr: int) -> tuple[int, int, int | None]:
        split = real(em, M, mr)
        taken.append((M, split[2] is not None))
        return split
    monkeypatch.setattr(gemm, "tiled_rows", spy)
    c, o = 64, 383
    rng = np.random.default_rng(o)
    w = rng.standard_normal((o, c, 1, 1)).astype("float32") / 8
    b = rng.standard_normal(o).astype("float32")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"]),
         helper.make_node("Relu", ["y"], ["z"])], "expand",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 13, 13])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, o, 13, 13])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    x = rng.standard_normal((1, c, 13, 13)).astype("float32")
    got = np.asarray(phasec.VirtualMachine(phasec.build(from_onnx(model)))["main"](x))
    assert (o, True) in taken, taken
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


class _OneIteration(StmtExprMutator):
    """The function with its parallel loop running iteration ``value`` only."""

    def __init__(self, value: int) -> None:
        self.value = value

    def visit_for_(self, s: T.For) -> T.For:
        if s.kind != "parallel":
            return s
        return T.For(s.loop_var, T.IntImm(self.value, "int64"), T.IntImm(1, "int64"),
                     "serial", s.body)


def test_no_thread_stores_another_tiles_rows():
    """Each iteration of the parallel row loop run alone on the interpreter
    (the output NaN before): the elements they store are disjoint and
    together every element, numpy's values: the last tile, moved back over
    rows of the one before it, stores only its own."""
    M, K, N = ROWS[-1], 5, NR + 3
    ins, out, ref = _gemm(M, K, N, epilogue="bias_relu")
    opts = te.ScheduleOptions(tuning=KEEP, parallel_min_work=0)
    f = te.create_prim_func(ins + [out], schedule_hints=opts)
    loops = [s for s in walk(f.body) if isinstance(s, T.For) and s.kind == "parallel"]
    assert len(loops) == 1
    arrays = _operands(ins, M, K, N)
    stored = np.zeros((M, N), "int64")
    got = np.full((M, N), np.nan, "float32")
    for v in range(int(loops[0].extent.value)):
        one = T.PrimFunc(f.params, _OneIteration(v).visit(f.body), f.attrs)
        part = run(one, *arrays, np.full((M, N), np.nan, "float32"))
        mine = ~np.isnan(part)
        # (a relu's zeros are stored values too: NaN only where not stored)
        stored += mine
        got[mine] = part[mine]
    assert stored.max() == 1 and stored.min() == 1, np.argwhere(stored != 1)[:5]
    (rows,) = _tile_rows(f)  # (the plan's, or fewer for a wider tile)
    assert M % rows and int(loops[0].extent.value) == -(-M // rows)
    want = ref(*arrays)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    lib = compile_prim_funcs({"f": f})
    full = np.zeros((M, N), "float32")
    lib["f"](*arrays, full)
    np.testing.assert_allclose(full, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())

"""The GEMM's reduction run in blocks (``GemmPlan.k_block``, from
``TargetTuning.gemm_k_block_bytes``): every row tile and micro-panel of one
block of K before the next, the partial sums kept in memory between blocks.
Checked against numpy (float64) and the TIR reference interpreter on odd and
prime shapes, K not a multiple of the block and K just over one block, a
symbolic batch, float64, a convolution's three reduction axes and a constant
weight packed at build time; the sums are those of the unsplit reduction in
the same order, so the results equal the unblocked kernel's bitwise; every
access of the blocked kernels is proven in bounds."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers.te_checks import PACK_ALWAYS, run, walk
from te.test_gemm_schedule import (
    _check_gemm,
    _conv_nchw,
    _conv_reference,
    _gemm,
    _operands,
)

import phasec
from phasec import te
from phasec.arith.inbounds import prove_accesses
from phasec.backend.llvm import compile_prim_funcs
from phasec.interp import run as interpret
from phasec.ir import Constant, IRModule, TensorStructInfo, Var
from phasec.ir import tir as T
from phasec.ir.structural import assert_structural_equal
from phasec.op import call_op
from phasec.pipeline import lower
from phasec.script.builder import BlockBuilder
from phasec.target import tuning as tn
from phasec.target.tuning import host_tuning

#: the host's tuning, K never split
WHOLE = dataclasses.replace(host_tuning(), gemm_k_block_bytes=0)


def _blocks_of(tuning: tn.TargetTuning, length: int, inner: int = 1) -> tn.TargetTuning:
    """``tuning`` splitting every GEMM's reduction (of ``inner`` elements per
    step of its first axis) into blocks of about ``length`` steps (a
    multiple of 16 / gcd(16, inner): see ``gemm_plan._k_block``)."""
    return dataclasses.replace(tuning, gemm_k_block_min_bytes=0,
                               gemm_k_block_bytes=tuning.gemm_cols(32) * 4 * inner * length,
                               gemm_k_block_tags=("matmul", "conv2d"))


def _partial_buffers(func) -> set[str]:
    return {s.buffer.name for s in walk(func.body)
            if isinstance(s, T.Allocate) and s.buffer.name.endswith("_part")}


# (M, K, N): K of 7 blocks of 16 and one of 1, K just over one block, K over
# many blocks ending in 3; rows and columns of several tiles and a rest (at
# least two row tiles on every profile: one micro-panel is never split)
SHAPES = [(13, 97, 130), (11, 17, 131), (29, 131, 257), (61, 48, 200)]


@pytest.mark.parametrize("M,K,N", SHAPES)
def test_blocked_gemm_matches_numpy_and_the_unsplit_sum_bitwise(M, K, N):
    blocked = _blocks_of(PACK_ALWAYS, 16)
    funcs, cases = {}, []
    for epilogue in ("none", "bias_relu", "gelu_res"):
        ins, out, ref = _gemm(M, K, N, epilogue=epilogue)
        for name, tuning in (("blocked", blocked), ("whole", WHOLE),
                             ("blocked_unpacked", _blocks_of(WHOLE, 16))):
            funcs[f"{name}_{epilogue}"] = te.create_prim_func(
                ins + [out], schedule_hints=te.ScheduleOptions(tuning=tuning))
        cases.append((epilogue, _operands(ins, M, K, N), ref))
    for name, f in funcs.items():
        assert bool(_partial_buffers(f)) == name.startswith("blocked"), name
        assert prove_accesses(f).counts()[1] == 0, name
    # its text reads back as the same kernel (each loop variable bound once)
    mod = IRModule(funcs)
    assert_structural_equal(phasec.parse(mod.script(), "blocked.py"), mod)
    lib = compile_prim_funcs(funcs)
    for epilogue, arrays, ref in cases:
        got = {}
        for name in ("blocked", "whole", "blocked_unpacked"):
            got[name] = np.zeros((M, N), "float32")
            lib[f"{name}_{epilogue}"](*arrays, got[name])
        want = ref(*arrays)
        np.testing.assert_allclose(got["blocked"], want, rtol=1e-4,
                                   atol=1e-4 * np.abs(want).max(), err_msg=epilogue)
        # the same additions in the same order: equal to the unsplit sum, bitwise
        np.testing.assert_array_equal(got["blocked"], got["whole"], err_msg=epilogue)
        np.testing.assert_array_equal(got["blocked_unpacked"], got["whole"], err_msg=epilogue)


def _tiles(func) -> int:
    return sum(1 for s in walk(func.body)
               if isinstance(s, T.Allocate) and "_acc" in s.buffer.name)


def test_equal_blocks_take_one_loop_with_one_copy_of_the_tiles():
    """K a whole number of blocks: one loop over every block, the last's
    epilogue chosen by a condition, so LLVM compiles each register tile
    once (a peeled last block doubled the kernel's LLVM time); K of unequal
    blocks keeps the last block peeled. Both equal the unsplit sum bitwise
    (test above: 48 = 3 x 16 and 97 = 6 x 16 + 1)."""
    counts = {}
    for K in (48, 97):
        ins, out, _ = _gemm(61, K, 200, epilogue="bias_relu")
        for name, tuning in (("blocked", _blocks_of(PACK_ALWAYS, 16)), ("whole", WHOLE)):
            f = te.create_prim_func(ins + [out],
                                    schedule_hints=te.ScheduleOptions(tuning=tuning))
            assert bool(_partial_buffers(f)) == (name == "blocked")
            counts[name, K] = _tiles(f)
            conds = [s for s in walk(f.body) if isinstance(s, T.IfThenElse)]
            assert bool(conds) == (name == "blocked" and K == 48), (name, K)
    assert counts["blocked", 48] == counts["whole", 48]
    assert counts["blocked", 97] > counts["whole", 97]


def test_blocked_gemm_on_the_interpreter_a_symbolic_batch_and_float64():
    funcs, cases = {}, []
    opts = te.ScheduleOptions(tuning=_blocks_of(PACK_ALWAYS, 16))
    ins, out, ref = _gemm(13, 37, 131, epilogue="gelu_res")
    funcs["f32"] = te.create_prim_func(ins + [out], schedule_hints=opts)
    cases.append(("f32", _operands(ins, 13, 37, 131), (13, 131), "float32", ref))
    ins_d, out_d, ref_d = _gemm(11, 53, 130, epilogue="bias_relu", dtype="float64")
    funcs["f64"] = te.create_prim_func(ins_d + [out_d], schedule_hints=opts)
    cases.append(("f64", _operands(ins_d, 11, 53, 130, "float64"), (11, 130), "float64", ref_d))
    b = T.Var("b")
    ins_b, out_b, ref_b = _gemm(9, 41, 129, epilogue="bias_relu", batch=b)
    funcs["batch"] = te.create_prim_func(ins_b + [out_b], schedule_hints=opts)
    rng = np.random.default_rng(5)
    for batch in (1, 3):
        arrays = [rng.standard_normal((batch, 9, 41)).astype("float32"),
                  rng.standard_normal((batch, 41, 129)).astype("float32"),
                  rng.standard_normal(129).astype("float32")]
        cases.append(("batch", arrays, (batch, 9, 129), "float32", ref_b))
    for f in funcs.values():
        assert _partial_buffers(f) and prove_accesses(f).counts()[1] == 0
    _check_gemm(funcs, cases)
    # the TIR interpreter (the reference semantics) agrees
    x = cases[0][1]
    got = run(funcs["f32"], *x, np.zeros((13, 131), "float32"))
    np.testing.assert_allclose(got, ref(*x), rtol=1e-4, atol=1e-4 * np.abs(ref(*x)).max())


def test_symbolic_rows_or_one_micro_panel_keep_the_whole_reduction():
    """Blocks need a static M (the partial sums' buffer) and at least two
    row tiles and two micro-panels (else nothing is reused across them)."""
    opts = te.ScheduleOptions(tuning=_blocks_of(PACK_ALWAYS, 16))
    cols = PACK_ALWAYS.gemm_cols(32)
    ins, out, ref = _gemm(T.Var("n"), 67, 2 * cols + 3, epilogue="bias_relu")
    sym = te.create_prim_func(ins + [out], schedule_hints=opts)
    ins1, out1, _ = _gemm(31, 67, cols, epilogue="bias_relu")
    one = te.create_prim_func(ins1 + [out1], schedule_hints=opts)
    ins2, out2, _ = _gemm(1, 67, 2 * cols + 3, epilogue="bias_relu")
    row = te.create_prim_func(ins2 + [out2], schedule_hints=opts)
    assert not _partial_buffers(sym) and not _partial_buffers(one) and not _partial_buffers(row)
    lib = compile_prim_funcs({"sym": sym})
    for rows in (1, 7, 23):
        arrays = _operands(ins, rows, 67, 2 * cols + 3)
        got = np.zeros((rows, 2 * cols + 3), "float32")
        lib["sym"](*arrays, got)
        want = ref(*arrays)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_blocked_conv2d_gemm_over_three_reduction_axes():
    """A convolution's GEMM (output channels as rows, a row's positions as
    columns, ``rc, ry, rx`` the reduction): blocks along ``rc``, the last
    one shorter."""
    cols = host_tuning().gemm_cols(32)
    n, c, h, w, o = 2, 23, 4, 2 * cols + 7, 13
    ins, out = _conv_nchw(n, c, h, w, o, 3, 3)
    opts = {name: te.ScheduleOptions(tuning=t) for name, t in
            (("blocked", _blocks_of(PACK_ALWAYS, 4, inner=9)), ("whole", WHOLE))}
    funcs = {name: te.create_prim_func(ins + [out], schedule_hints=o_)
             for name, o_ in opts.items()}
    assert _partial_buffers(funcs["blocked"]) and not _partial_buffers(funcs["whole"])
    assert prove_accesses(funcs["blocked"]).counts()[1] == 0
    lib = compile_prim_funcs(funcs)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((n, c, h, w)).astype("float32")
    wt = rng.standard_normal((o, c, 3, 3)).astype("float32")
    b = rng.standard_normal(o).astype("float32")
    got = {}
    for name in funcs:
        got[name] = np.zeros((n, o, h - 2, w - 2), "float32")
        lib[name](x, wt, b, got[name])
    want = _conv_reference(x, wt, b, 1)
    np.testing.assert_allclose(got["blocked"], want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    np.testing.assert_array_equal(got["blocked"], got["whole"])


def _conv_module(xs: tuple[int, ...], out_ch: int) -> BlockBuilder:
    """relu(conv2d(x, W, padding 1) + b), 3x3, W and b constants."""
    rng = np.random.default_rng(29)
    x = Var("x", TensorStructInfo(xs, "float32"))
    w = (rng.standard_normal((out_ch, xs[1], 3, 3)) / np.sqrt(9 * xs[1])).astype(np.float32)
    bias = Constant(rng.standard_normal((1, out_ch, 1, 1)).astype(np.float32))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        y = bb.emit(call_op("relax.nn.conv2d", x, Constant(w), padding=[1, 1, 1, 1]))
        y = bb.emit(call_op("relax.nn.relu", bb.emit(call_op("relax.add", y, bias))))
        bb.emit_func_output(y)
    return bb.get()


def test_blocked_small_image_conv_with_its_weight_packed_at_build_time(monkeypatch):
    """A 3x3 convolution over 5x5 (its 25 positions the GEMM's rows, its
    output channels the columns, the weight packed once per build): K =
    61 * 9 in blocks of 16 input channels, the last of 13; against the
    reference interpreter, bitwise equal to the unsplit build, every
    access proven."""
    cols = host_tuning().gemm_cols(32)
    mod = _conv_module((1, 61, 5, 5), 2 * cols + 3)
    x = np.random.default_rng(3).standard_normal((1, 61, 5, 5)).astype(np.float32)
    got, texts = {}, {}
    for name, fields in (("whole", "gemm_k_block_bytes=0"),
                         ("blocked", f"gemm_k_block_min_bytes=0,gemm_k_block_bytes={cols * 144}")):
        monkeypatch.setenv("PHASEC_TUNING", fields)
        tn.host_tuning.cache_clear()
        try:
            lowered = lower(mod)
            texts[name] = {n: repr(f) for n, f in lowered.prim_funcs()}
            assert sum(prove_accesses(f).counts()[1] for _, f in lowered.prim_funcs()) == 0
            got[name] = np.asarray(phasec.VirtualMachine(phasec.build(mod))["main"](x))
        finally:
            monkeypatch.delenv("PHASEC_TUNING")
            tn.host_tuning.cache_clear()
    (packed,) = [t for n, t in texts["blocked"].items() if n.endswith("_prepacked")]
    assert "_part" in packed and not any("_part" in t for t in texts["whole"].values())
    want = np.asarray(interpret(mod, x), dtype=np.float64)
    np.testing.assert_allclose(got["blocked"], want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    np.testing.assert_array_equal(got["blocked"], got["whole"])


def test_the_xeon_blocks_a_long_reduction_over_few_row_tiles_only():
    """The Xeon's tuning splits a 1.18 MB micro-panel (K = 4608 over 49
    rows) into blocks of 128 (a 32 KB micro-panel block), not BERT's 128 x
    3072 @ 3072 x 768 (786 KB) nor 49 x 2304 @ 2304 x 512; a convolution's,
    not a plain matmul's."""
    from phasec.te.schedules import gemm_plan
    xeon = tn.avx512_xeon_tuning()
    ins, out, _ = _gemm(49, 4608, 512, epilogue="bias_relu")
    mm = te.create_prim_func(ins + [out], schedule_hints=te.ScheduleOptions(tuning=xeon))
    assert not _partial_buffers(mm)
    ins, out = _conv_nchw(1, 512, 3, 130, 13, 3, 3)  # (K = 4608, 128 positions as columns)
    conv = te.create_prim_func(ins + [out], schedule_hints=te.ScheduleOptions(tuning=xeon))
    assert _partial_buffers(conv)
    init = T.FloatImm(0.0, "float32")
    assert gemm_plan._k_block(xeon, 49, 6, 64, 8, [4608], 4, init) == 128
    assert gemm_plan._k_block(xeon, 49, 6, 64, 8, [512, 3, 3], 4, init) == 16
    assert gemm_plan._k_block(xeon, 128, 6, 64, 12, [3072], 4, init) == 0
    assert gemm_plan._k_block(xeon, 49, 6, 64, 8, [2304], 4, init) == 0
    assert gemm_plan._k_block(xeon, 49, 6, 64, 1, [4608], 4, init) == 0  # one micro-panel
    assert gemm_plan._k_block(tn.avx512_tuning(), 49, 6, 64, 8, [4608], 4, init) == 0

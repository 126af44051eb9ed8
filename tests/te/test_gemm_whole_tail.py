"""A GEMM tile's last columns, more than half a vector, computed as one whole
vector when B's reads stay inside their buffers up to its end
(``GemmEmitter._whole_tail``: a convolution of few channels over its stride
phases, a B wider than the columns it is read at), its epilogue storing only
the real columns (one vector under a constant mask). Against numpy and the
TIR reference interpreter; tails of more than half a vector (9-15 lanes of
16), of at most half (unchanged pieces), prime widths, strides 1 and 2,
bias + relu, batch 2; where B has no slack (a plain matmul, a stride-1
convolution) nothing changes."""

from __future__ import annotations

import numpy as np
import pytest

import phasec
from phasec import console, te
from phasec.backend.llvm import compile_prim_funcs
from phasec.interp import run as interpret
from phasec.ir import Constant, TensorStructInfo, Var
from phasec.ir import tir as T
from phasec.op import call_op
from phasec.pipeline import lower
from phasec.script.builder import BlockBuilder
from phasec.target.tuning import host_tuning

from helpers.te_checks import run as run_tir, walk

LANES = host_tuning().lanes(32)
RNG = np.random.default_rng(29)


def _acc_widths(funcs) -> set[int]:
    """The column counts of every register tile's accumulators."""
    return {int(s.buffer.shape[-1].value) for f in funcs for s in walk(f.body)
            if isinstance(s, T.Allocate) and "_acc" in s.buffer.name}


def _whole(width: int) -> bool:
    tail = width % LANES
    return tail > LANES // 2 or (tail > 4 and tail % 4 == 3)


def _conv(xs, out_ch: int, stride: tuple[int, int], padding: int, epilogue: bool = True):
    """conv2d(x, W) 3x3 (+ bias, relu), W and b constants."""
    x = Var("x", TensorStructInfo(xs, "float32"))
    w = RNG.standard_normal((out_ch, xs[1], 3, 3)).astype(np.float32)
    bias = Constant(RNG.standard_normal((1, out_ch, 1, 1)).astype(np.float32))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        y = bb.emit(call_op("relax.nn.conv2d", x, Constant(w), strides=list(stride),
                            padding=[padding] * 4))
        if epilogue:
            y = bb.emit(call_op("relax.nn.relu", bb.emit(call_op("relax.add", y, bias))))
        bb.emit_func_output(y)
    return bb.get()


def _out_width(w: int, stride: int, padding: int) -> int:
    return (w + 2 * padding - 3) // stride + 1


# (input, output channels, strides, padding, interpreted too); output widths
# with LANES = 16: 25 (16 + 9), 31 (16 + 15), 47 (32 + 15), 29 (16 + 13),
# 23 (16 + 7 = 4 + 2 + 1: whole too), 37 (32 + 5: pieces), 22 (16 + 6: pieces),
# 24 (16 + 8: pieces), 35 (32 + 3: pieces)
CASES = [
    ((1, 3, 7, 49), 5, (2, 2), 1, True),
    ((2, 3, 5, 61), 3, (2, 2), 1, True),      # batch 2
    ((1, 3, 9, 93), 13, (2, 2), 0, False),    # 47 wide, unpadded (SqueezeNet's)
    ((1, 2, 6, 58), 7, (1, 2), 1, True),      # 29 wide, strides differing
    ((1, 3, 9, 45), 17, (2, 2), 1, False),    # 23
    ((2, 1, 5, 73), 4, (2, 2), 1, True),      # 37: pieces
    ((1, 3, 7, 45), 6, (2, 2), 0, True),      # 22 unpadded
    ((1, 3, 5, 49), 9, (2, 2), 0, True),      # 24: exactly half a vector
    ((1, 3, 5, 71), 5, (2, 2), 0, True),      # 35
]


@pytest.mark.parametrize("xs,out_ch,stride,padding,interp", CASES)
def test_few_channel_conv_tails_match_numpy_and_the_interpreter(xs, out_ch, stride, padding,
                                                                 interp):
    mod = _conv(xs, out_ch, stride, padding, epilogue=xs[0] == 1 or out_ch != 3)
    low = lower(mod)
    funcs = [f for _, f in low.prim_funcs()]
    assert any("stride_phases" in repr(f) for f in funcs)
    ow = _out_width(xs[3], stride[1], padding)
    widths = _acc_widths(funcs)
    # the last tile's columns: one whole vector past them, or the pieces
    if _whole(ow):
        assert all(w % LANES == 0 for w in widths), widths
    elif ow % LANES:
        assert any(w % LANES for w in widths), widths
    x = RNG.standard_normal(xs).astype(np.float32)
    want = np.asarray(interpret(mod, x), dtype=np.float64)  # the operators' numpy references
    got = np.asarray(phasec.VirtualMachine(phasec.build(mod))["main"](x))
    assert got.shape == want.shape and got.shape[-1] == ow
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    if interp:  # the scheduled kernels, interpreted exactly
        exact = np.asarray(interpret(low, x), dtype=np.float64)
        np.testing.assert_allclose(exact, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_a_stride_one_conv_reads_no_column_past_its_input():
    # a 3x3 stride-1 convolution reads its input up to its last column: no
    # slack, the tail stays in pieces (31 wide: 16 + 8 + 4 + 2 + 1 at 16 lanes)
    xs = (1, 3, 5, 2 * LANES + 1)
    mod = _conv(xs, 5, (1, 1), 0)
    funcs = [f for _, f in lower(mod).prim_funcs()]
    assert any(w % LANES for w in _acc_widths(funcs))
    x = RNG.standard_normal(xs).astype(np.float32)
    want = np.asarray(interpret(mod, x), dtype=np.float64)
    got = np.asarray(phasec.VirtualMachine(phasec.build(mod))["main"](x))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def _matmul(M: int, K: int, N: int, stored: int):
    """relu(A @ B[:, :N] + bias), B ``stored`` columns wide (>= N)."""
    A = te.placeholder((M, K), "float32", "A")
    B = te.placeholder((K, stored), "float32", "B")
    bias = te.placeholder((N,), "float32", "bias")
    k = te.reduce_axis(K, "k")
    mm = te.compute((M, N), lambda i, j: te.sum(A[i, k.var] * B[k.var, j], axis=[k]),
                    name="mm", tag="matmul")
    out = te.compute((M, N), lambda i, j: T.BinaryOp("max", mm[i, j] + bias[j],
                                                      T.FloatImm(0.0, "float32")), name="out")
    return te.create_prim_func([A, B, bias, out])


@pytest.mark.parametrize("N", [2 * LANES - 1, LANES + LANES // 2 + 1, 2 * LANES + 7, 3 * LANES + 3])
def test_a_matmul_takes_the_whole_vector_only_when_b_has_the_columns(N):
    """B exactly N wide (a plain matmul): the pieces. B wide enough for the
    last whole vector: one vector. One column short of it: the pieces. A
    tail of at most half a vector (51 = 48 + 3): the pieces, however wide B."""
    M, K = 5, 7
    need = N + (LANES - N % LANES)
    wide = {N, need - 1, need} if _whole(N) else {N, N + LANES}
    funcs = {f"b{s}": _matmul(M, K, N, s) for s in sorted(wide)}
    for name, f in funcs.items():
        stored = int(name[1:])
        whole = _whole(N) and stored >= need
        assert all(w % LANES == 0 for w in _acc_widths([f])) == whole, (name, N)
    lib = compile_prim_funcs(funcs)
    rng = np.random.default_rng(N)
    for name, f in funcs.items():
        a = rng.standard_normal((M, K)).astype("float32")
        b = rng.standard_normal((K, int(name[1:]))).astype("float32")
        bias = rng.standard_normal(N).astype("float32")
        want = np.maximum(a.astype(np.float64) @ b[:, :N] + bias, 0)
        got = np.full((M, N), np.nan, "float32")
        lib[name](a, b, bias, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=name)
        exact = run_tir(f, a, b, bias, np.zeros((M, N), "float32"))
        np.testing.assert_allclose(exact, want, rtol=1e-4, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("ow", [3 * LANES - 1, LANES + 3 * LANES // 4])
def test_the_last_vector_is_one_masked_store_without_llvm_warnings(ow):
    """47 columns a row (SqueezeNet's stem, smaller: 32 + 15 at 16 lanes):
    the last vector stored under a constant mask. 28 (16 + 12): whole
    4-lane pieces, left to LLVM (loops.py), which vectorizes it all the
    same."""
    from phasec.arith.inbounds import prove_accesses
    mod = _conv((1, 3, 7, 2 * ow + 1), 16, (2, 2), 0)
    funcs = dict(lower(mod).prim_funcs())
    assert all(w % LANES == 0 for w in _acc_widths(funcs.values()))
    console.recent_native_diagnostics(clear=True)
    lib = compile_prim_funcs(funcs, use_cache=False)
    assert console.recent_native_diagnostics(clear=True) == []
    masked = ow % 4 != 0
    assert ("llvm.loop.vectorize.predicate.enable" in lib.llvm_ir) == masked
    assert ("llvm.masked.store" in lib.optimized_ir) == masked
    # every access proven in bounds: no check left in the kernel
    assert all(prove_accesses(f).counts()[1] == 0 for f in funcs.values())


def test_whole_tails_after_whole_micro_panels_and_row_tiles():
    # several row tiles (37, 50 rows), whole micro-panels then the tail
    # (111 = 64 + 47, 79 = 64 + 15 at 16 lanes), B one vector's slack wide
    rng = np.random.default_rng(3)
    for M, K, N in ((37, 19, 111), (50, 40, 79)):
        stored = -(-N // LANES) * LANES
        f = _matmul(M, K, N, stored)
        assert all(w % LANES == 0 for w in _acc_widths([f])) == _whole(N)
        lib = compile_prim_funcs({"f": f})
        a = rng.standard_normal((M, K)).astype("float32")
        b = rng.standard_normal((K, stored)).astype("float32")
        bias = rng.standard_normal(N).astype("float32")
        got = np.full((M, N), np.nan, "float32")
        lib["f"](a, b, bias, got)
        want = np.maximum(a.astype(np.float64) @ b[:, :N] + bias, 0)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)

"""Convolutions of few input channels (``te.schedules.conv_few_channels``):
the input split into its stride phases, the GEMM over the output rows
reading them in place, the epilogue in its tiles. The values against the reference interpreter
(numpy) on odd and prime shapes, strides of 2 and 3 (per axis), asymmetric padding, dilation,
bias and relu fused; a symbolic batch and the convolutions the
schedule declines keep their schedules."""

from __future__ import annotations

import numpy as np
import pytest

import phasec
from phasec.interp import run as interpret
from phasec.ir import Constant, TensorStructInfo, Var, tir
from phasec.op import call_op
from phasec.pipeline import lower
from phasec.te.schedules.build_time import ir_nodes
from phasec.script.builder import BlockBuilder

RNG = np.random.default_rng(31)


def _module(xs, out_ch: int, kernel: tuple[int, int], stride, padding, dilation=1):
    """relu(conv2d(x, W) + b), W and b constants."""
    strides = list(stride) if isinstance(stride, tuple) else [stride, stride]
    x = Var("x", TensorStructInfo(xs, "float32"))
    w = RNG.standard_normal((out_ch, xs[1], *kernel)).astype(np.float32)
    bias = Constant(RNG.standard_normal((1, out_ch, 1, 1)).astype(np.float32))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        y = bb.emit(call_op("relax.nn.conv2d", x, Constant(w), strides=strides,
                            padding=padding, dilation=[dilation, dilation]))
        y = bb.emit(call_op("relax.nn.relu", bb.emit(call_op("relax.add", y, bias))))
        bb.emit_func_output(y)
    return bb.get()


def _taken(mod) -> bool:
    return any("stride_phases" in repr(f) for _, f in lower(mod).prim_funcs())


def _check(vm, mod, xs) -> None:
    x = RNG.standard_normal(xs).astype(np.float32)
    want = np.asarray(interpret(mod, x), dtype=np.float64)
    got = np.asarray(vm["main"](x))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("xs,out_ch,kernel,stride,padding,dilation", [
    ((1, 1, 23, 45), 7, (3, 5), 2, [1, 2, 0, 1], 1),     # one channel, asymmetric
    ((1, 3, 37, 61), 64, (7, 7), 2, [3, 3, 3, 3], 1),    # a ResNet stem, odd sides
    ((1, 3, 27, 41), 13, (3, 3), 2, [0, 0, 0, 0], 1),    # SqueezeNet's first, unpadded
    ((3, 4, 31, 59), 11, (5, 5), 3, [2, 2, 2, 2], 1),    # stride 3, four channels
    ((1, 2, 41, 67), 5, (3, 3), 2, [0, 0, 0, 0], 2),     # dilated
    ((1, 3, 19, 39), 17, (1, 1), 2, [0, 0, 0, 0], 1),    # 1x1, strided
    ((2, 3, 21, 41), 16, (3, 3), (1, 2), [1, 1, 1, 1], 1),  # strides differing by axis
    ((1, 3, 23, 37), 16, (5, 3), (3, 1), [2, 1, 0, 1], 1),
    # a wide kernel (rows of 28 outputs over phase rows of 35), a row width
    # of no whole vectors (23), a prime count of output channels
    ((1, 3, 20, 56), 16, (3, 15), 2, [0, 0, 0, 0], 1),
    ((1, 3, 47, 45), 31, (3, 3), 2, [1, 1, 1, 1], 1),
])
def test_few_input_channels_match_the_reference(xs, out_ch, kernel, stride, padding,
                                                 dilation):
    """(the output rows: 16 wide at the least for one vector of AVX-512)"""
    mod = _module(xs, out_ch, kernel, stride, padding, dilation)
    assert _taken(mod)
    _check(phasec.VirtualMachine(phasec.build(mod)), mod, xs)


def test_a_symbolic_batch_keeps_the_direct_form():
    n = tir.Var("n", "int64")
    mod = _module((n, 3, 29, 41), 19, (3, 3), 2, [1, 1, 1, 1])
    assert not _taken(mod)
    vm = phasec.VirtualMachine(phasec.build(mod))
    for batch in (1, 2):
        _check(vm, mod, (batch, 3, 29, 41))


@pytest.mark.parametrize("xs,kernel,stride,padding", [
    ((1, 5, 41, 41), (3, 3), 2, [1, 1, 1, 1]),   # five input channels
    ((2, 3, 17, 17), (3, 3), 1, [1, 1, 1, 1]),   # stride 1 (small_cnn's, odd)
    ((1, 3, 9, 9), (3, 3), 2, [2, 2, 2, 2]),     # rows narrower than a vector
])
def test_other_convolutions_keep_their_schedules(xs, kernel, stride, padding):
    """(the output rows: 16 wide at the least for one vector of AVX-512)"""
    mod = _module(xs, 16, kernel, stride, padding)
    assert not _taken(mod)
    _check(phasec.VirtualMachine(phasec.build(mod)), mod, xs)


def _prefetched_buffers(mod) -> set[str]:
    """The buffers whose lines a kernel of ``mod`` prefetches for writing."""
    return {n.value.buffer.name for _, f in lower(mod).prim_funcs() for n in ir_nodes(f.body)
            if type(n) is tir.AttrStmt and n.key == tir.PREFETCH_WRITE_ATTR}


@pytest.mark.parametrize("xs,out_ch,kernel,prefetched", [
    ((1, 3, 45, 43), 13, (3, 3), True),    # a stem's 3x3 over RGB: K = 27
    ((1, 3, 37, 41), 17, (3, 3), True),    # odd, prime
    ((1, 1, 41, 43), 7, (5, 5), False),    # K = 25: too short
])
def test_a_stems_output_lines_are_prefetched_on_the_xeon(monkeypatch, xs, out_ch, kernel,
                                                         prefetched):
    """The Xeon profile's ``gemm_prefetch_min_k`` (27): each tile's output
    rows are prefetched for writing before its reduction (inside a model
    each line was a miss), the values unchanged."""
    from phasec.target import tuning
    monkeypatch.setenv("PHASEC_TUNING", "avx512_xeon")
    tuning.host_tuning.cache_clear()
    try:
        assert tuning.host_tuning().gemm_prefetch_min_k == 27
        mod = _module(xs, out_ch, kernel, 2, [0, 0, 0, 0])
        assert _taken(mod)
        assert bool(_prefetched_buffers(mod)) == prefetched
        _check(phasec.VirtualMachine(phasec.build(mod)), mod, xs)
    finally:
        monkeypatch.delenv("PHASEC_TUNING")
        tuning.host_tuning.cache_clear()

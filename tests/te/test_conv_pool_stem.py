"""A stem's convolution, epilogue and 2-D max pool in one kernel
(``te.schedules.conv_pool_stem``, selected by FuseOps' ``stem_pool``): the
convolution's rows computed into a ring and pooled from it. Values against
the reference interpreter (numpy operators) on odd and prime shapes, pool
padding (its -inf semantics under values of both signs), ceil mode, pool
dilation and strides of 1 to 3, a batch of 2, NaN inputs (propagated as the
separate max pool does), the TIR interpreter on the kernel itself; every
access proven in bounds; the kernel reads back from its text; a symbolic
batch fused without the ring; what is not fused."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import phasec
from phasec.arith.inbounds import prove_accesses
from phasec.interp import run as interpret
from phasec.ir import Constant, IRModule, TensorStructInfo, Var, tir
from phasec.ir.structural import first_mismatch
from phasec.ir.tir_visitor import walk
from phasec.op import call_op
from phasec.passes.fuse_ops import DEFAULT_RULES, TVM_RULES
from phasec.pipeline import lower
from phasec.script.builder import BlockBuilder
from phasec.transform import PassContext

RNG = np.random.default_rng(29)


def _module(xs, out_ch: int, kernel, stride, padding, pool: dict, relu: bool = True):
    """max_pool2d(relu?(conv2d(x, W) + b), **pool), W and b constants."""
    x = Var("x", TensorStructInfo(xs, "float32"))
    w = RNG.standard_normal((out_ch, xs[1], *kernel)).astype(np.float32)
    bias = Constant(RNG.standard_normal((1, out_ch, 1, 1)).astype(np.float32))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        y = bb.emit(call_op("relax.nn.conv2d", x, Constant(w), strides=list(stride),
                            padding=padding))
        y = bb.emit(call_op("relax.add", y, bias))
        if relu:
            y = bb.emit(call_op("relax.nn.relu", y))
        bb.emit_func_output(bb.emit(call_op("relax.nn.max_pool2d", y, **pool)))
    return bb.get()


def _kernels(mod) -> dict[str, tir.PrimFunc]:
    return {str(gv): f for gv, f in lower(mod).prim_funcs()}


def _ring_kernel(mod) -> tir.PrimFunc | None:
    found = [f for name, f in _kernels(mod).items()
             if "conv2d" in name and "max_pool2d" in name and "_ring" in repr(f)]
    return found[0] if found else None


def _check(vm, mod, x) -> None:
    want = np.asarray(interpret(mod, x), dtype=np.float64)
    got = np.asarray(vm["main"](x))
    assert got.shape == want.shape
    scale = np.abs(want[np.isfinite(want)]).max()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale)


def _pool(size, strides, padding, dilation=(1, 1), ceil_mode=False) -> dict:
    return dict(pool_size=list(size), strides=list(strides), padding=list(padding),
                dilation=list(dilation), ceil_mode=ceil_mode)


CASES = [
    # SqueezeNet's stem, odd sides, a prime count of channels
    ((1, 3, 29, 37), 13, (3, 3), (2, 2), [0, 0, 0, 0], _pool((3, 3), (2, 2), [0] * 4), True),
    # ResNet-50's: 7x7/2 pad 3, then 3x3/2 pad 1
    ((1, 3, 37, 41), 17, (7, 7), (2, 2), [3] * 4, _pool((3, 3), (2, 2), [1] * 4), True),
    # no ReLU, values of both signs: the pool's padding is -inf, not 0; a batch of 2
    ((2, 1, 45, 41), 7, (5, 5), (2, 2), [2] * 4, _pool((3, 3), (2, 2), [1] * 4), False),
    # ceil mode, asymmetric pool padding, strides 3 x 2 (rows past the windows skipped)
    ((1, 4, 31, 43), 5, (3, 3), (2, 2), [1] * 4,
     _pool((2, 3), (3, 2), [1, 0, 0, 1], ceil_mode=True), False),
    # a dilated pool at stride 1, a window taller than its stride
    ((1, 3, 41, 47), 8, (3, 3), (2, 2), [1] * 4, _pool((3, 3), (1, 1), [2] * 4, (2, 2)), True),
    # Inception's 7x7/2 stem over a prime side, ceil-mode pool
    ((1, 3, 53, 53), 11, (7, 7), (2, 2), [3] * 4, _pool((3, 3), (2, 2), [0] * 4,
                                                        ceil_mode=True), True),
]


@pytest.mark.parametrize("xs,out_ch,kernel,stride,padding,pool,relu", CASES)
def test_the_stem_and_its_pool_match_the_reference(xs, out_ch, kernel, stride, padding, pool,
                                                   relu):
    mod = _module(xs, out_ch, kernel, stride, padding, pool, relu)
    func = _ring_kernel(mod)
    assert func is not None and len(_kernels(mod)) == 1
    assert prove_accesses(func).counts()[1] == 0
    vm = phasec.VirtualMachine(phasec.build(mod))
    _check(vm, mod, RNG.standard_normal(xs).astype(np.float32))


def test_nan_inputs_propagate_as_in_the_separate_pool():
    xs = (1, 3, 33, 35)
    mod = _module(xs, 9, (3, 3), (2, 2), [1] * 4, _pool((3, 3), (2, 2), [1] * 4), False)
    assert _ring_kernel(mod) is not None
    x = RNG.standard_normal(xs).astype(np.float32)
    x[0, 1, 5, 7] = x[0, 0, 30, 2] = x[0, 2, 0, 34] = np.nan
    with PassContext(config={"FuseOps.rules": dataclasses.replace(DEFAULT_RULES,
                                                                  stem_pools=False)}):
        separate = np.asarray(phasec.VirtualMachine(phasec.build(mod))["main"](x))
    got = np.asarray(phasec.VirtualMachine(phasec.build(mod))["main"](x))
    want = np.asarray(interpret(mod, x))
    assert np.isnan(want).any() and not np.isnan(want).all()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got, separate)  # the same conv rows, the same maxima
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, equal_nan=True)


def test_the_tir_interpreter_runs_the_ring_kernel():
    xs = (1, 2, 13, 35)
    mod = _module(xs, 5, (3, 3), (2, 2), [1] * 4, _pool((3, 3), (2, 2), [1] * 4), False)
    assert _ring_kernel(mod) is not None
    vm = phasec.VirtualMachine(phasec.build(mod, kernels="interp"))
    _check(vm, mod, RNG.standard_normal(xs).astype(np.float32))


def test_the_kernel_reads_back_from_its_text():
    mod = _module((1, 3, 29, 37), 16, (3, 3), (2, 2), [0] * 4, _pool((3, 3), (2, 2), [0] * 4))
    func = _ring_kernel(mod)
    assert func is not None
    text = IRModule({"k": func})
    assert first_mismatch(phasec.parse(text.script(), "k.py"), text) is None


def test_a_symbolic_batch_is_fused_without_the_ring():
    n = tir.Var("n", "int64")
    mod = _module((n, 3, 27, 29), 7, (3, 3), (2, 2), [1] * 4, _pool((3, 3), (2, 2), [1] * 4))
    kernels = _kernels(mod)
    assert len(kernels) == 1 and _ring_kernel(mod) is None
    vm = phasec.VirtualMachine(phasec.build(mod))
    for batch in (1, 2):
        _check(vm, mod, RNG.standard_normal((batch, 3, 27, 29)).astype(np.float32))


def test_what_is_not_fused():
    pool = _pool((3, 3), (2, 2), [1] * 4)
    many = _module((1, 16, 27, 29), 8, (3, 3), (2, 2), [1] * 4, pool)  # not a stem
    assert len(_kernels(many)) == 2
    stem = _module((1, 3, 27, 29), 8, (3, 3), (2, 2), [1] * 4, pool)
    with PassContext(config={"FuseOps.rules": TVM_RULES}):
        assert len(_kernels(stem)) == 2


@pytest.mark.parametrize("bands", [2, 3])
def test_bands_in_parallel_recompute_their_first_rows(monkeypatch, bands):
    """``stem_pool_bands`` > 1: the output rows in bands (19 rows: the last
    band shorter), each band's first window computing its rows again."""
    from phasec.target import tuning
    monkeypatch.setenv("PHASEC_TUNING", f"stem_pool_bands={bands}")
    tuning.host_tuning.cache_clear()
    try:
        xs = (1, 3, 77, 71)
        mod = _module(xs, 16, (3, 3), (2, 2), [1] * 4, _pool((3, 3), (2, 2), [1] * 4), False)
        func = _ring_kernel(mod)
        assert func is not None and prove_accesses(func).counts()[1] == 0
        loops = [n for n in walk(func.body) if isinstance(n, tir.For) and n.kind == "parallel"
                 and n.loop_var.name == "band"]
        assert [int(n.extent.value) for n in loops] == [bands]
        _check(phasec.VirtualMachine(phasec.build(mod)), mod,
               RNG.standard_normal(xs).astype(np.float32))
    finally:
        monkeypatch.delenv("PHASEC_TUNING")
        tuning.host_tuning.cache_clear()


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_bands_follow_the_threads_set_when_built(threads):
    """By default (``stem_pool_bands`` 0) the kernel has as many bands as
    the threads parallel loops use when it is built: none on one thread
    (one band, no parallel loop), one per thread on more; the values are the
    same either way."""
    from phasec.backend.llvm import get_num_threads, set_num_threads
    before = get_num_threads()
    set_num_threads(threads)
    try:
        xs = (1, 3, 77, 71)
        mod = _module(xs, 16, (3, 3), (2, 2), [1] * 4, _pool((3, 3), (2, 2), [1] * 4), False)
        func = _ring_kernel(mod)
        assert func is not None
        loops = [int(n.extent.value) for n in walk(func.body)
                 if isinstance(n, tir.For) and n.loop_var.name == "band" and n.kind == "parallel"]
        assert loops == ([] if threads == 1 else [threads])
        _check(phasec.VirtualMachine(phasec.build(mod)), mod,
               RNG.standard_normal(xs).astype(np.float32))
    finally:
        set_num_threads(before)

"""When the parallel runtime uses its worker threads, and that the loops it
runs either way compute what numpy computes.

* The pool does not wake a sleeping worker for a loop too small to pay for
  the wake-up (``TargetTuning.parallel_wake_work``), except for a stream of
  such loops; an awake worker still takes loops down to ``parallel_min_work``.
* Kernels whose work lies between the old schedule threshold (64k scalar
  operations) and the tuned one (32k) are parallel now; on odd and prime
  shapes they match numpy formulas at one and two threads, with the worker
  awake and asleep.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import phasec
from phasec.backend.llvm import (
    compile_prim_funcs, get_num_threads, set_min_parallel_work, set_num_threads,
    set_parallel_wake_work,
)
from phasec.backend.llvm.jit import _pool_state
from phasec.ir import tir as T
from phasec.target.tuning import host_tuning

RNG = np.random.default_rng(16)


@pytest.fixture
def two_threads():
    saved = get_num_threads()
    set_num_threads(2)
    yield
    set_num_threads(saved)
    set_min_parallel_work(host_tuning().parallel_min_work)
    set_parallel_wake_work(host_tuning().parallel_wake_work)


def _wait_until_asleep() -> None:
    """Wait (polling, up to 20 s) until the pool's worker has gone to sleep:
    it spins for a while after its last job first."""
    deadline = time.monotonic() + 20
    while _pool_state()[0] < 1:
        assert time.monotonic() < deadline, "the pool's worker never went to sleep"
        time.sleep(0.002)


def _scale_kernel(rows: int, cols: int):
    """B = A * 2 + 1 over a parallel row loop: rows * cols estimated stores."""
    A, B = T.Buffer("A", (rows, cols)), T.Buffer("B", (rows, cols))
    i, j = T.Var("i"), T.Var("j")
    body = T.For(i, 0, rows, "parallel", T.For(j, 0, cols, "vectorized", T.BufferStore(
        B, T.as_prim_expr(A[i, j] * 2.0 + 1.0, "float32"), (i, j))))
    name = f"scale_{rows}x{cols}"
    kernel = compile_prim_funcs({name: T.PrimFunc((A, B), body)})[name]
    a = RNG.standard_normal((rows, cols)).astype(np.float32)

    def run() -> None:
        b = np.full_like(a, np.nan)
        kernel(a, b)
        np.testing.assert_array_equal(b, a * np.float32(2) + np.float32(1))
    return run


def test_a_sleeping_worker_is_woken_only_for_loops_worth_it(two_threads):
    tuning = host_tuning()
    assert tuning.parallel_min_work < tuning.parallel_wake_work
    # 67 x 1021 (68k stores): parallel, but not worth waking a worker for
    small = _scale_kernel(67, 1021)
    # 521 x 1031 (537k stores): worth it
    large = _scale_kernel(521, 1031)
    large()  # starts the worker
    _wait_until_asleep()
    _, wakeups = _pool_state()
    small()  # alone, after idle: runs on the caller, the worker sleeps on
    assert _pool_state() == (1, wakeups)
    large()
    assert _pool_state()[1] == wakeups + 1
    # a stream of small loops wakes the worker after a few of them
    _wait_until_asleep()
    _, wakeups = _pool_state()
    for _ in range(200):
        small()
        if _pool_state()[1] > wakeups:
            break
    assert _pool_state()[1] == wakeups + 1
    # wake_work 0: every parallel loop wakes the worker
    _wait_until_asleep()
    set_parallel_wake_work(0)
    _, wakeups = _pool_state()
    small()
    assert _pool_state()[1] == wakeups + 1
    # one thread never wakes anyone
    set_parallel_wake_work(tuning.parallel_wake_work)
    set_num_threads(1)
    _, wakeups = _pool_state()
    for _ in range(5):
        large()
        small()
    assert _pool_state()[1] == wakeups


def test_transcendental_values_count_as_more_work(two_threads):
    """A loop of tanh is worth waking the worker for at a size where a loop of
    plain arithmetic is not: each call in a stored value counts for several
    stores in the work estimate (a store of a tanh costs ~7x a scaled copy)."""
    rows, cols = 251, 1021  # 256k stores, below parallel_wake_work
    assert rows * cols < host_tuning().parallel_wake_work
    A, B = T.Buffer("A", (rows, cols)), T.Buffer("B", (rows, cols))
    i, j = T.Var("i"), T.Var("j")
    body = T.For(i, 0, rows, "parallel", T.For(j, 0, cols, "vectorized", T.BufferStore(
        B, T.Call("tanh", (A[i, j] * 0.5,), "float32"), (i, j))))
    kernel = compile_prim_funcs({"tanh_rows": T.PrimFunc((A, B), body)})["tanh_rows"]
    plain = _scale_kernel(rows, cols)
    a = (RNG.standard_normal((rows, cols)) * 3).astype(np.float32)
    want = np.tanh(a.astype(np.float64) * 0.5)
    _scale_kernel(521, 1031)()  # starts the worker
    _wait_until_asleep()
    _, wakeups = _pool_state()
    plain()
    assert _pool_state()[1] == wakeups
    b = np.full_like(a, np.nan)
    kernel(a, b)
    assert _pool_state()[1] == wakeups + 1
    np.testing.assert_allclose(b, want, rtol=1e-6, atol=1e-6)


SOURCE = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 131, 97), dtype="float32"), y: R.Tensor((61, 241), dtype="float32"),
             g: R.Tensor((241,), dtype="float32"), b: R.Tensor((241,), dtype="float32"),
             s: R.Tensor((3, 37, 109), dtype="float32"), u: R.Tensor((181, 199), dtype="float32"),
             v: R.Tensor((181, 199), dtype="float32")):
        with R.dataflow():
            t = R.permute_dims(x, axes=[2, 0, 1])
            n = R.nn.layer_norm(y, g, b, axes=[-1], epsilon=1e-05, center=True, scale=True)
            m = R.nn.softmax(s, axis=-1)
            r = R.nn.relu(R.add(u, v))
            R.output(t, n, m, r)
        return (t, n, m, r)
"""


@pytest.fixture(scope="module")
def vm():
    return phasec.VirtualMachine(phasec.build(phasec.parse(SOURCE)))


def _has_parallel_loop(func: T.PrimFunc) -> bool:
    stack = [func.body]
    while stack:
        s = stack.pop()
        if isinstance(s, T.For) and s.kind == "parallel":
            return True
        stack.extend(T.stmt_children(s))
    return False


def test_kernels_between_the_thresholds_are_parallel_and_match_numpy(vm, two_threads):
    # every kernel does between 32k and 64k scalar operations (by the
    # schedule's estimate): serial under the old 64k bound, parallel now
    assert host_tuning().parallel_min_work == 1 << 15
    kernels = vm.exe.prim_funcs
    assert len(kernels) == 4 and all(_has_parallel_loop(f) for f in kernels.values())
    x = RNG.standard_normal((3, 131, 97)).astype(np.float32)
    y = RNG.standard_normal((61, 241)).astype(np.float32)
    g = RNG.standard_normal(241).astype(np.float32)
    b = RNG.standard_normal(241).astype(np.float32)
    s = (RNG.standard_normal((3, 37, 109)) * 4).astype(np.float32)
    u = RNG.standard_normal((181, 199)).astype(np.float32)
    v = RNG.standard_normal((181, 199)).astype(np.float32)
    y64 = y.astype(np.float64)
    mean = y64.mean(axis=-1, keepdims=True)
    norm = (y64 - mean) / np.sqrt(((y64 - mean) ** 2).mean(axis=-1, keepdims=True) + 1e-5) * g + b
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    soft = e / e.sum(axis=-1, keepdims=True)
    for threads in (1, 2):
        set_num_threads(threads)
        for asleep in (False, True):
            if asleep and threads == 2:
                _wait_until_asleep()
            for wake_work in (host_tuning().parallel_wake_work, 0):
                set_parallel_wake_work(wake_work)
                t, n, m, r = vm["main"](x, y, g, b, s, u, v)
                np.testing.assert_array_equal(np.asarray(t), x.transpose(2, 0, 1))
                np.testing.assert_allclose(np.asarray(n), norm, rtol=1e-4, atol=1e-4)
                np.testing.assert_allclose(np.asarray(m), soft, rtol=1e-5, atol=1e-6)
                np.testing.assert_array_equal(np.asarray(r), np.maximum(u + v, 0))


FUSED_SOURCE = """
@I.ir_module
class Module:
    @R.function
    def main(s: R.Tensor((3, 67, 101), dtype="float32"), y: R.Tensor((5, 7, 1031), dtype="float32"),
             g: R.Tensor((1031,), dtype="float32"), b: R.Tensor((1031,), dtype="float32"),
             u: R.Tensor((7, 211, 37), dtype="float32"), w: R.Tensor((4, 131, 97), dtype="float32")):
        with R.dataflow():
            m = R.nn.softmax(s, axis=-1)
            n = R.nn.layer_norm(y, g, b, axes=[-1], epsilon=1e-05, center=True, scale=True)
            r = R.nn.relu(R.add(u, u))
            e = R.exp(w)
            R.output(m, n, r, e)
        return (m, n, r, e)
"""


def _parallel_extents(func: T.PrimFunc) -> list[int]:
    found, stack = [], [func.body]
    while stack:
        s = stack.pop()
        if isinstance(s, T.For) and s.kind == "parallel":
            found.append(s.extent.value)
        stack.extend(T.stmt_children(s))
    return found


def test_short_odd_parallel_axes_are_fused_with_the_next(two_threads):
    """A parallel outer axis of 3, 5 or 7 iterations becomes one parallel loop
    with the next axis (i0 = f // E1, i1 = f % E1); an even one (4) is left
    alone. Values against numpy at 1 and 2 threads."""
    exe = phasec.build(phasec.parse(FUSED_SOURCE))
    extents = {name: _parallel_extents(f) for name, f in exe.prim_funcs.items()}
    assert extents == {"fused_softmax": [3 * 67], "fused_layer_norm": [5 * 7],
                       "fused_add_relu": [7 * 211], "fused_exp": [4]}, extents
    vm = phasec.VirtualMachine(exe)
    s = (RNG.standard_normal((3, 67, 101)) * 3).astype(np.float32)
    y = RNG.standard_normal((5, 7, 1031)).astype(np.float32)
    g = RNG.standard_normal(1031).astype(np.float32)
    b = RNG.standard_normal(1031).astype(np.float32)
    u = RNG.standard_normal((7, 211, 37)).astype(np.float32)
    w = RNG.standard_normal((4, 131, 97)).astype(np.float32)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    y64 = y.astype(np.float64)
    mean = y64.mean(axis=-1, keepdims=True)
    norm = (y64 - mean) / np.sqrt(((y64 - mean) ** 2).mean(axis=-1, keepdims=True) + 1e-5) * g + b
    for threads in (1, 2):
        set_num_threads(threads)
        m, n, r, x = vm["main"](s, y, g, b, u, w)
        np.testing.assert_allclose(np.asarray(m), e / e.sum(axis=-1, keepdims=True),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(n), norm, rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(np.asarray(r), np.maximum(u + u, 0))
        np.testing.assert_allclose(np.asarray(x), np.exp(w.astype(np.float64)), rtol=1e-6)

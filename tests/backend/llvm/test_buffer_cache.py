"""The LLVM runtime's cache of kernels' freed intermediate buffers
(``phasec_rt_alloc`` / ``phasec_rt_free``, :data:`phasec.backend.llvm.bufcache.BUFFER_CACHE_IR`):
a block given back is kept and reused, correct results under concurrent
calls, the limit (0: nothing kept), and releasing what is kept."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from phasec.backend.llvm import compile_prim_funcs, set_buffer_cache_limit, trim_buffer_cache
from phasec.backend.llvm.bufcache import BUFFER_CACHE_BYTES
from phasec.errors import PhasecError
from phasec.ir import tir

RNG = np.random.default_rng(5)


def _add(x, y):
    return tir.BinaryOp("+", x, y)


def test_the_buffer_cache_reuses_and_releases_large_buffers():
    n, big = 64, 1 << 18  # a 1 MiB intermediate: from the heap, through the cache
    A, B = tir.Buffer("A", (n,)), tir.Buffer("B", (n,))
    tmp = tir.Buffer("tmp", (big,))
    i, j = tir.Var("i"), tir.Var("j")
    fill = tir.For(j, 0, big, "serial", tir.BufferStore(tmp, tir.Cast("float32", j), (j,)))
    body = tir.For(i, 0, n, "serial", tir.BufferStore(
        B, _add(A[i], tmp[i * 4096]), (i,)))
    kernel = compile_prim_funcs({"k": tir.PrimFunc((A, B), tir.Allocate(
        tmp, tir.SeqStmt((fill, body))))})["k"]
    set_buffer_cache_limit(64 << 20)  # (off by default)
    a = RNG.standard_normal(n).astype(np.float32)
    want = a + np.arange(n, dtype=np.float32) * 4096
    errors = []

    def worker() -> None:
        for _ in range(50):
            out = np.zeros(n, np.float32)
            kernel(a, out)
            if not np.array_equal(out, want):
                errors.append(out)
    try:
        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        # what the calls gave back is kept (at least one 1 MiB block), then released
        assert trim_buffer_cache() >= big * 4
        assert trim_buffer_cache() == 0
    finally:
        set_buffer_cache_limit(BUFFER_CACHE_BYTES)


def test_the_buffer_cache_limit():
    n = 1 << 18
    A = tir.Buffer("A", (n,))
    tmp = tir.Buffer("tmp", (n,))
    i = tir.Var("i")
    kernel = compile_prim_funcs({"k": tir.PrimFunc((A,), tir.Allocate(tmp, tir.SeqStmt((
        tir.For(i, 0, n, "serial", tir.BufferStore(tmp, A[i], (i,))),
        tir.For(i, 0, n, "serial", tir.BufferStore(A, _add(tmp[i], tmp[i]), (i,)))))))})["k"]
    a = np.ones(n, np.float32)
    try:
        set_buffer_cache_limit(0)  # nothing kept
        kernel(a)
        assert trim_buffer_cache() == 0
        set_buffer_cache_limit(2 << 20)
        kernel(a)
        assert trim_buffer_cache() == n * 4
        np.testing.assert_array_equal(a, 4.0)
        with pytest.raises(PhasecError, match="byte count"):
            set_buffer_cache_limit(-1)
    finally:
        set_buffer_cache_limit(BUFFER_CACHE_BYTES)


@pytest.mark.parametrize("value", ["lots", "-5", "1.5X"])
def test_a_bad_limit_in_the_environment_is_refused_with_its_name(value):
    import os
    import subprocess
    import sys

    code = ("from phasec.backend.llvm import compile_prim_funcs\n"
            "from phasec.ir import tir\n"
            "A = tir.Buffer('A', (4,))\n"
            "nothing = tir.Evaluate(tir.IntImm(0, 'int32'))\n"
            "try:\n"
            "    compile_prim_funcs({'k': tir.PrimFunc((A,), nothing)})\n"
            "except Exception as e:\n"
            "    print(type(e).__name__, e)\n")
    env = {**os.environ, "PHASEC_BUFFER_CACHE": value}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert "Traceback" not in out.stderr, out.stderr
    assert f"the environment variable PHASEC_BUFFER_CACHE: {value!r} is not a size" in out.stdout



def _kernel_with_buffer(floats: int):
    """k(A, B): B[i] = A[i] + tmp[i * stride] for an intermediate tmp[j] = j
    of ``floats`` float32 (a heap block of 4 * floats bytes), and the
    expected result for a given A."""
    n = 64
    stride = floats // n
    A, B = tir.Buffer("A", (n,)), tir.Buffer("B", (n,))
    tmp = tir.Buffer("tmp", (floats,))
    i, j = tir.Var("i"), tir.Var("j")
    fill = tir.For(j, 0, floats, "serial", tir.BufferStore(tmp, tir.Cast("float32", j), (j,)))
    body = tir.For(i, 0, n, "serial", tir.BufferStore(B, _add(A[i], tmp[i * stride]), (i,)))
    kernel = compile_prim_funcs({"k": tir.PrimFunc((A, B), tir.Allocate(
        tmp, tir.SeqStmt((fill, body))))})["k"]
    return kernel, lambda a: a + np.arange(n, dtype=np.float32) * stride


def test_a_block_lent_to_a_smaller_request_comes_back_whole():
    big = _kernel_with_buffer(1 << 18)  # 1 MiB
    smaller = _kernel_with_buffer(3 << 16)  # 768 KiB: served by the 1 MiB block (within 2x)
    a = RNG.standard_normal(64).astype(np.float32)
    set_buffer_cache_limit(64 << 20)
    trim_buffer_cache()
    try:
        for kernel, want in (big, smaller, big, smaller, big):
            out = np.zeros(64, np.float32)
            kernel(a, out)
            np.testing.assert_array_equal(out, want(a))
        # One block served every call. Had the smaller request's size been
        # taken for the block's when it came back, the next 1 MiB request
        # would have missed it and a second block would be kept.
        assert trim_buffer_cache() == 1 << 20
    finally:
        set_buffer_cache_limit(BUFFER_CACHE_BYTES)


def test_an_error_exit_gives_a_lent_block_back_to_the_cache():
    from phasec.errors import BufferAccessError

    n, floats = 4, 1 << 18
    A = tir.Buffer("A", (n,))
    tmp = tir.Buffer("tmp", (floats,))
    j = tir.Var("j")
    where = tir.Cast("int64", A[0])  # from the data: checked at run time
    body = tir.SeqStmt((
        tir.For(j, 0, floats, "serial", tir.BufferStore(tmp, tir.Cast("float32", j), (j,))),
        tir.BufferStore(A, tmp[where], (1,))))
    kernel = compile_prim_funcs({"k": tir.PrimFunc((A,), tir.Allocate(tmp, body))})["k"]
    set_buffer_cache_limit(64 << 20)
    trim_buffer_cache()
    try:
        good = np.array([7, 0, 0, 0], np.float32)
        kernel(good)
        assert good[1] == 7  # the block, kept; the next call borrows it
        with pytest.raises(BufferAccessError):
            kernel(np.array([floats + 3, 0, 0, 0], np.float32))
        assert trim_buffer_cache() == floats * 4  # back in the cache, not lost to free()
        kernel(good)
        assert good[1] == 7
    finally:
        set_buffer_cache_limit(BUFFER_CACHE_BYTES)

"""LLVM's own diagnostics ("remark: ... loop not vectorized", "warning: ...
loop not vectorized") never reach standard error unless asked for with -v.

phasec captures what LLVM writes to file descriptor 2 while it compiles
(phasec/backend/llvm/jit.py), and does not ask for what LLVM cannot do: a
loop scheduled `vectorized` that calls libm (atanh: the ONNX conformance
suite's test_atanh printed 24 such lines) or holds a run-time bounds check
(an early exit) is emitted without the vectorize hint. A hand-written
`T.vectorized` loop with a loop-carried dependence still makes LLVM talk."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np

from phasec import console
from phasec.backend.llvm import compile_prim_funcs
from phasec.ir import tir as T

ATANH_MODULE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 4, 5), "float32")):
        y = R.atanh(x)
        return y
'''

#: a prefix sum written as a vectorized loop: each step reads the last one's
#: result, which no vectorizer can do in parallel
RECURRENCE_MODULE = '''
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def prefix(A: T.Buffer((T.int64(64),), "float32"), B: T.Buffer((T.int64(64),), "float32")):
        B[0] = A[0]
        for i in T.vectorized(T.int64(63)):
            B[i + 1] = B[i] + A[i + 1]

    @R.function
    def main(x: R.Tensor((64,), "float32")):
        cls = Module
        y = R.call_tir(cls.prefix, (x,), out_sinfo=R.Tensor((64,), "float32"))
        return y
'''


def _build(tmp_path, source: str, *flags: str) -> subprocess.CompletedProcess:
    src = tmp_path / "m.py"
    src.write_text(source)
    env = {**os.environ, "PHASEC_KERNEL_CACHE": "off"}
    return subprocess.run([sys.executable, "-m", "phasec", "build", str(src), "-o",
                           str(tmp_path / "m.pvm"), *flags], capture_output=True, text=True,
                          env=env, timeout=300)


def test_build_is_quiet_and_verbose_shows_what_llvm_said(tmp_path) -> None:
    quiet = _build(tmp_path, RECURRENCE_MODULE)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
    verbose = _build(tmp_path, RECURRENCE_MODULE, "-v")
    assert verbose.returncode == 0, verbose.stderr
    # the same build does make LLVM talk: -v shows it, each line once with a count
    lines = verbose.stderr.splitlines()
    assert lines and all(line.startswith("llvm: ") for line in lines), verbose.stderr
    assert any("loop not vectorized" in line for line in lines)
    assert len(lines) == len(set(lines))


def test_a_loop_calling_libm_is_not_asked_to_vectorize(tmp_path) -> None:
    verbose = _build(tmp_path, ATANH_MODULE, "-v")
    assert verbose.returncode == 0 and verbose.stderr == "", verbose.stderr


def test_a_bounds_checked_loop_is_not_asked_to_vectorize() -> None:
    n = 50
    A, I, B = T.Buffer("A", (n,)), T.Buffer("I", (n,), "int32"), T.Buffer("B", (n,))
    i = T.Var("i")
    scatter = T.PrimFunc((A, I, B), T.For(i, 0, n, "vectorized",
                                          T.BufferStore(B, A[i], (I[i],))))
    console.recent_native_diagnostics(clear=True)
    lib = compile_prim_funcs({"scatter": scatter}, use_cache=False)
    assert console.recent_native_diagnostics(clear=True) == []
    a = np.arange(n, dtype="float32")
    perm = np.random.default_rng(0).permutation(n).astype("int32")
    b = np.zeros(n, "float32")
    lib["scatter"](a, perm, b)
    expected = np.zeros(n, "float32")
    expected[perm] = a
    np.testing.assert_array_equal(b, expected)


def _prefix_kernel(n: int) -> T.PrimFunc:
    A, B = T.Buffer("A", (n,)), T.Buffer("B", (n,))
    i = T.Var("i")
    return T.PrimFunc((A, B), T.SeqStmt([
        T.BufferStore(B, A[0], (0,)),
        T.For(i, 0, n - 1, "vectorized", T.BufferStore(B, B[i] + A[i + 1], (i + 1,)))]))


def test_capture_keeps_other_threads_output_and_records_llvm_lines(capfd) -> None:
    """fd 2 is the process's: a line another thread writes while LLVM is
    compiling still reaches standard error (afterwards), LLVM's lines do not."""
    console.recent_native_diagnostics(clear=True)
    writing = threading.Event()
    stop = threading.Event()

    def chatter() -> None:
        while not stop.is_set():
            os.write(2, b"other thread line\n")
            writing.set()
            stop.wait(0.001)

    thread = threading.Thread(target=chatter)
    thread.start()
    writing.wait(5)
    try:
        lib = compile_prim_funcs({"prefix": _prefix_kernel(77)}, use_cache=False)
    finally:
        stop.set()
        thread.join()
    a = np.linspace(-0.9, 0.9, 77, dtype="float32")
    b = np.zeros_like(a)
    lib["prefix"](a, b)
    np.testing.assert_allclose(b, np.cumsum(a, dtype="float64"), rtol=1e-5, atol=1e-5)
    err = capfd.readouterr().err
    assert "other thread line" in err
    assert "not vectorized" not in err and "remark" not in err
    kept = console.recent_native_diagnostics(clear=True)
    assert any(k.startswith("llvm: ") and "loop not vectorized" in k for k in kept)


def test_a_diagnostic_split_by_another_threads_line_is_still_recognized(capfd) -> None:
    """LLVM writes a diagnostic in pieces: another thread's line written
    between them runs into the head, and the tail is a line of its own
    (seen once in CI: "0:0: loop not vectorized: ..." reached stderr)."""
    from phasec.backend.llvm.jit import _dispatch_captured

    console.recent_native_diagnostics(clear=True)
    _dispatch_captured(b"remark: <unknown>:other thread line\n"
                       b"0:0: loop not vectorized: a reason\n"
                       b"remark: <unknown>:0:0: loop not vectorized: whole\n"
                       b"a line of its own\n")
    err = capfd.readouterr().err
    assert err == "other thread line\na line of its own\n"
    kept = console.recent_native_diagnostics(clear=True)
    assert "llvm: 0:0: loop not vectorized: a reason" in kept, kept
    assert any("loop not vectorized: whole" in k for k in kept), kept

"""LLVM's own diagnostics ("remark: ... loop not vectorized", "warning: ...
loop not vectorized") never reach standard error unless asked for with -v.

A vectorized loop calling libm's atanh is one LLVM cannot vectorize: it
prints a remark and a warning per such loop (the ONNX conformance suite's
test_atanh printed 24 lines). phasec captures what LLVM writes to file
descriptor 2 while it compiles (phasec/backend/llvm/jit.py)."""

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


def _build(tmp_path, *flags: str) -> subprocess.CompletedProcess:
    src = tmp_path / "atanh.py"
    src.write_text(ATANH_MODULE)
    env = {**os.environ, "PHASEC_KERNEL_CACHE": "off"}
    return subprocess.run([sys.executable, "-m", "phasec", "build", str(src), "-o",
                           str(tmp_path / "a.pvm"), *flags], capture_output=True, text=True,
                          env=env, timeout=300)


def test_build_is_quiet_and_verbose_shows_what_llvm_said(tmp_path) -> None:
    quiet = _build(tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
    verbose = _build(tmp_path, "-v")
    assert verbose.returncode == 0, verbose.stderr
    # the same build does make LLVM talk: -v shows it, each line once with a count
    lines = verbose.stderr.splitlines()
    assert lines and all(line.startswith("llvm: ") for line in lines), verbose.stderr
    assert any("loop not vectorized" in line for line in lines)
    assert len(lines) == len(set(lines))


def _atanh_kernel(n: int) -> T.PrimFunc:
    A, B = T.Buffer("A", (n,)), T.Buffer("B", (n,))
    i = T.Var("i")
    return T.PrimFunc((A, B), T.For(i, 0, n, "vectorized",
                                    T.BufferStore(B, T.Call("atanh", (A[i],)), (i,))))


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
        lib = compile_prim_funcs({"atanh_k": _atanh_kernel(77)}, use_cache=False)
    finally:
        stop.set()
        thread.join()
    a = np.linspace(-0.9, 0.9, 77, dtype="float32")
    b = np.zeros_like(a)
    lib["atanh_k"](a, b)
    np.testing.assert_allclose(b, np.arctanh(a), rtol=1e-6)
    err = capfd.readouterr().err
    assert "other thread line" in err
    assert "not vectorized" not in err and "remark" not in err
    kept = console.recent_native_diagnostics(clear=True)
    assert any(k.startswith("llvm: ") and "loop not vectorized" in k for k in kept)

"""Signals act within a second during long writes (issue 27, #8: Ctrl-C took
12-34 s while a large ``.pvm`` was written): nothing hands the system or a
compressor more than one piece (``fileio.WRITE_PIECE_BYTES``) in a call no
signal interrupts, and the final ``fsync`` is waited for in slices. The
conventions (exit 130/143, one line, the previous output kept, no temporary
file left) are those of test_interrupts.py.

The child processes below make the flush to disk last "forever" with signals
blocked, as a kernel flushing a large file does (an uninterruptible wait):
the command must still stop on the signal. The timeouts only turn a hang
into a failure; they measure nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import numpy as np
import pytest

from phasec import fileio
from phasec.backend.vm import Executable
from phasec.errors import FileAccessError

HANG = 120

MODULE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
        y = R.multiply(R.add(x, x), x)
        return y
'''

_STUCK_FSYNC = textwrap.dedent('''
    import ctypes, os, signal, sys
    from phasec.cli import main

    def stuck_fsync(fd):
        # an uninterruptible flush: signals blocked in this thread, a C-level wait
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        print("syncing", flush=True)
        ctypes.CDLL(None).sleep(100000)

    os.fsync = stuck_fsync
    sys.exit(main(sys.argv[1:]))
''')


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as a terminal starts it (test_interrupts.py)


def test_ctrl_c_during_the_flush_to_disk_stops_the_write(tmp_path):
    """(SIGTERM takes the same path: interrupts.signals_as_exceptions.)"""
    sig, status, word = signal.SIGINT, 130, "interrupted"
    src = tmp_path / "m.py"
    src.write_text(MODULE)
    out = tmp_path / "m.pvm"
    out.write_bytes(b"the previous output")
    proc = subprocess.Popen([sys.executable, "-c", _STUCK_FSYNC, "build", str(src), "-o",
                             str(out), "--kernels", "none"], cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=_default_sigint)
    try:
        assert proc.stdout.readline() == "syncing\n"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=HANG)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == status, err
    assert err == f"phasec build: {word}\n"
    assert out.read_bytes() == b"the previous output"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["m.py", "m.pvm"])


def test_large_writes_reach_the_compressor_and_the_file_in_pieces(tmp_path, monkeypatch):
    """An executable with a 3 MiB constant: every deflate call and every write
    to the file takes at most one piece, so a signal waits for one piece at
    most (a 200 MiB constant took 29 s to react before, 0.03 s now)."""
    compressed: list[int] = []
    real = zlib.compressobj

    class Recording:
        def __init__(self, *args):
            self.inner = real(*args)

        def compress(self, data):
            compressed.append(len(memoryview(data).cast("B")))
            return self.inner.compress(data)

        def flush(self, *args):
            return self.inner.flush(*args)

    written: list[int] = []

    class Counting:
        def __init__(self, fh):
            self.fh = fh

        def write(self, data):
            written.append(len(memoryview(data).cast("B")))
            return self.fh.write(data)

        def __getattr__(self, name):
            return getattr(self.fh, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

    monkeypatch.setattr(zlib, "compressobj", Recording)
    monkeypatch.setattr(fileio.writing, "_fdopen", lambda fd, mode: Counting(os.fdopen(fd, mode)))
    import phasec

    exe = phasec.build(phasec.parse(MODULE))
    weights = np.random.default_rng(1).standard_normal(3 << 18).astype("float32")
    consts = [exe.constants[i] for i in range(len(exe.constants))] + [weights]
    big = Executable(exe.functions, consts, exe.prim_funcs)
    path = tmp_path / "big.pvm"
    big.save(path)
    assert sum(compressed) > weights.nbytes and sum(written) > weights.nbytes // 2
    assert max(compressed) <= fileio.WRITE_PIECE_BYTES
    assert max(written) <= fileio.WRITE_PIECE_BYTES
    monkeypatch.undo()
    loaded = Executable.load(path)
    np.testing.assert_array_equal(loaded.constants[len(consts) - 1], weights)


def test_write_atomic_passes_large_data_on_in_pieces(tmp_path, monkeypatch):
    written: list[int] = []
    real = fileio.writing._fdopen

    def recording(fd, mode):
        fh = real(fd, mode)
        write = fh.write
        fh.write = lambda data: written.append(len(memoryview(data).cast("B"))) or write(data)
        return fh

    monkeypatch.setattr(fileio.writing, "_fdopen", recording)
    data = bytes(range(256)) * (12 << 12)  # 3 MiB
    fileio.write_atomic(tmp_path / "out.bin", data)
    assert (tmp_path / "out.bin").read_bytes() == data
    assert sum(written) == len(data) and max(written) <= fileio.WRITE_PIECE_BYTES
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]


def test_write_atomic_reports_a_failed_flush(tmp_path, monkeypatch):
    """The flush runs in a helper thread; its error still reaches the caller
    as the usual FileAccessError, and the temporary file is gone."""
    def failing(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(FileAccessError, match="no space left on device \\(nothing was "
                                                     "written\\)"):
        fileio.write_atomic(tmp_path / "out.bin", b"data")
    assert list(Path(tmp_path).iterdir()) == []

"""Ctrl-C for native kernels.

Python runs signal handlers between bytecodes only, so a compiled kernel
busy for an hour in native code would ignore Ctrl-C until it returned. So
kernels poll a process-wide cancel flag, the C symbol ``phasec_rt_cancel``
(see :mod:`phasec.backend.llvm.loops`), and this module sets it when SIGINT or SIGTERM arrives:

* while a kernel runs in the main thread (:func:`armed`), a wakeup file
  descriptor is installed (:func:`signal.set_wakeup_fd`): Python's C-level
  signal handler writes the signal number to it the moment the signal
  arrives, even while the main thread is inside native code;
* a watcher thread blocked on the other end of that pipe sets the flag;
* the kernel sees the flag at its next poll (well within a second), frees
  its temporary buffers and returns ``RC_CANCELLED``; the Python-level
  handler then runs as usual — KeyboardInterrupt for Ctrl-C — and the
  process stays usable (a REPL keeps its state).

A wakeup descriptor set by someone else (asyncio's event loop) is restored
after the call, and the signal numbers that arrived meanwhile are passed on
to it. Kernels running in other threads stop too when Ctrl-C arrives while
the main thread runs one; on their own they cannot be interrupted (Python
delivers signals to the main thread only).
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
from typing import Any

__all__ = ["FLAG", "flag_address", "armed", "claim_short", "release_short",
           "raise_interrupt", "cancel_requested"]

#: the flag kernels poll (exported to LLVM as ``phasec_rt_cancel``); kept
#: alive for the life of the process, as compiled code holds its address
FLAG = ctypes.c_int32(0)

_SIGNALS = frozenset(int(s) for s in (signal.SIGINT, signal.SIGTERM))
_lock = threading.Lock()
_pipe: tuple[int, int] | None = None
_forward = -1  # the wakeup fd that was set before ours (asyncio's), or -1
_is_armed = False
_main_ident = threading.main_thread().ident  # (refreshed after a fork)


def flag_address() -> int:
    """The address of :data:`FLAG`, for the JIT's symbol table."""
    return ctypes.addressof(FLAG)


def cancel_requested() -> bool:
    return FLAG.value != 0


def _watch(read_fd: int) -> None:
    while True:
        try:
            data = os.read(read_fd, 64)
        except InterruptedError:  # pragma: no cover - retried by Python already
            continue
        except OSError:
            return
        if not data:
            return
        if _is_armed and any(b in _SIGNALS for b in data):
            FLAG.value = 1
        fwd = _forward
        if fwd >= 0:
            try:
                os.write(fwd, data)
            except OSError:
                pass


def _ensure_watcher() -> tuple[int, int]:
    global _pipe
    with _lock:
        if _pipe is None:
            r, w = os.pipe()
            os.set_blocking(w, False)  # set_wakeup_fd requires it
            threading.Thread(target=_watch, args=(r,), name="phasec-interrupt-watcher",
                             daemon=True).start()
            _pipe = (r, w)
        return _pipe


def _after_fork() -> None:  # the watcher thread does not survive a fork
    global _pipe, _is_armed, _forward, _main_ident
    _pipe, _is_armed, _forward = None, False, -1
    _main_ident = threading.main_thread().ident  # (the forking thread's, in the child)
    FLAG.value = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


class armed:
    """Context manager around native calls: Ctrl-C and SIGTERM cancel them.

    Only the outermost use in the main thread does anything (nested uses and
    other threads pass through), so the VM can arm once per call and the
    kernels it runs pay nothing more.
    """

    __slots__ = ("_mine",)

    def __enter__(self) -> "armed":
        global _is_armed, _forward
        self._mine = False
        if _is_armed or threading.current_thread() is not threading.main_thread():
            return self
        _, w = _ensure_watcher()
        FLAG.value = 0
        try:
            previous = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        except (ValueError, OSError):  # e.g. a sub-interpreter: run unarmed
            return self
        _forward = previous if previous != w else -1
        _is_armed = self._mine = True
        return self

    def __exit__(self, *exc: Any) -> None:
        global _is_armed, _forward
        if not self._mine:
            return
        try:
            signal.set_wakeup_fd(_forward)
        except (ValueError, OSError):  # pragma: no cover - the fd was closed meanwhile
            signal.set_wakeup_fd(-1)
        _is_armed = False
        _forward = -1
        FLAG.value = 0


def claim_short() -> bool:
    """Mark a call known to be short (the VM's judgement: the same work took
    milliseconds at most last time) as running: its kernels do not arm one
    by one, and nothing is installed, so a signal is handled by Python when
    the call returns, as during any Python code. Arming costs two
    ``signal.set_wakeup_fd`` calls, as much as a small kernel. True when
    this call claimed the state (give it back with :func:`release_short`);
    False inside an armed or claimed call, or off the main thread (where
    :class:`armed` does nothing anyway). Two plain functions rather than a
    context manager: this runs once per model call, and a small model's
    call is a few microseconds of Python."""
    global _is_armed
    if _is_armed or threading.get_ident() != _main_ident:
        return False
    _is_armed = True  # (the watcher forwards; FLAG stays 0: no fd of ours)
    return True


def release_short() -> None:
    """End the short call :func:`claim_short` claimed (only when it returned True)."""
    global _is_armed
    _is_armed = False


def raise_interrupt(kernel: str, what: str = "kernel") -> None:
    """A kernel returned RC_CANCELLED (or the VM saw :data:`FLAG` set between
    calls: ``what`` is then ``"function"``): raise what the signal's handler
    raises (KeyboardInterrupt for Ctrl-C), or KeyboardInterrupt if it already
    ran (a handler that ran inside a weakref callback or ``__del__`` had its
    exception dropped by Python: the flag still says the signal came)."""
    FLAG.value = 0
    if threading.current_thread() is threading.main_thread():
        ctypes.pythonapi.PyErr_CheckSignals()  # runs pending handlers; raises what they raise
    raise KeyboardInterrupt(f"{what} {kernel!r} interrupted")

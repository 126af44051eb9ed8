"""How phasec's command-line tools stop on SIGINT and SIGTERM.

Both end a command within a second (compiled kernels poll a cancel flag,
:mod:`phasec.backend.interrupt`), leave no partial output (files are
written atomically, :mod:`phasec.fileio`) and print one line: exit status
130 for Ctrl-C (SIGINT), 143 for SIGTERM, as shells report a process killed
by those signals. Python raises KeyboardInterrupt for SIGINT; for SIGTERM
(which would otherwise kill the process at once, skipping every cleanup)
:func:`signals_as_exceptions` installs a handler raising :class:`Terminated`,
and makes sure neither exception can be lost.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Terminated", "signals_as_exceptions", "EXIT_SIGINT", "EXIT_SIGTERM",
           "interrupted_exit", "reporting_interruption"]

EXIT_SIGINT, EXIT_SIGTERM = 128 + signal.SIGINT, 128 + signal.SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived. A KeyboardInterrupt, so everything that treats Ctrl-C
    specially (``except Exception`` lets it through, hypothesis stops the run
    instead of recording a failure, cleanups run) does the same for it."""


class _Stopper:
    """The handlers of one :func:`signals_as_exceptions` block.

    An exception raised by a signal handler can be lost: when the signal
    arrives while Python runs a garbage-collector callback or a ``__del__``,
    the exception is printed as "ignored" and the program goes on. So after
    the first signal a watchdog thread delivers it again every second
    (``_thread.interrupt_main``) until the block has been left.
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self.done = threading.Event()

    def handler(self, signum: int, frame: Any) -> None:
        if self.done.is_set():
            return  # being reported already: do not interrupt the report
        if self.signum is None:
            self.signum = signum
            threading.Thread(target=self._redeliver, name="phasec-signal-redeliver",
                             daemon=True).start()
        raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    def _redeliver(self) -> None:
        import _thread

        while not self.done.wait(1.0):
            _thread.interrupt_main(self.signum)


#: the :func:`signals_as_exceptions` blocks being run (innermost last)
_ACTIVE: list[_Stopper] = []


def reporting_interruption() -> None:
    """The interruption has been caught and is being reported (a summary
    written, say): stop redelivering it, and ignore further signals of the
    innermost :func:`signals_as_exceptions` block, so the report is not cut
    short. Does nothing outside such a block."""
    if _ACTIVE:
        _ACTIVE[-1].done.set()


@contextmanager
def signals_as_exceptions() -> Iterator[Any]:
    """Within the block, SIGINT raises KeyboardInterrupt and SIGTERM
    :class:`Terminated`, and keep doing so every second until the block is
    left (main thread only: elsewhere Python cannot install handlers and
    nothing changes; an ignored SIGINT, as under ``nohup``, stays ignored).
    Call ``.done.set()`` on the value it yields when the interruption is
    being reported, so a late redelivery cannot interrupt the report."""
    stopper = _Stopper()
    if threading.current_thread() is not threading.main_thread():
        yield stopper
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    # (None: a handler installed outside Python, which could not be restored)
    mine = [sig for sig, old in previous.items() if old is not signal.SIG_IGN and old is not None]
    for sig in mine:
        signal.signal(sig, stopper.handler)
    hook = sys.unraisablehook

    def quiet_lost_interrupts(info: Any) -> None:
        # A lost Ctrl-C is delivered again (above): not worth a traceback.
        if not isinstance(info.exc_value, KeyboardInterrupt):
            hook(info)

    sys.unraisablehook = quiet_lost_interrupts
    _ACTIVE.append(stopper)
    try:
        yield stopper
    finally:
        stopper.done.set()
        _ACTIVE.remove(stopper)
        sys.unraisablehook = hook
        for sig in mine:
            signal.signal(sig, previous[sig])


def interrupted_exit(exc: BaseException) -> tuple[int, str]:
    """(exit status, word) for KeyboardInterrupt or Terminated."""
    if isinstance(exc, Terminated):
        return EXIT_SIGTERM, "terminated (SIGTERM)"
    return EXIT_SIGINT, "interrupted"

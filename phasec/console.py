"""What phasec's tools show besides their results: how talkative they are
(``-q``/``-v``), progress lines for long steps, and the diagnostics native
libraries print on their own (LLVM's optimization remarks and "loop not
vectorized" warnings), which phasec captures.

Library code marks a long step with :func:`step`; nothing is shown unless a
command line turned progress on (:func:`enable_progress`), and then only on a
terminal: the line is redrawn in place (a carriage return) about twice a
second with the time spent so far, and erased when the outermost step ends,
so pipes, files and CI logs never see one. A step shorter than half a second
shows nothing.

Captured native diagnostics go to :func:`native_diagnostics`: shown on
standard error (``llvm: ...``, repeated lines once with a count) at
:data:`VERBOSE`, otherwise only kept (:func:`recent_native_diagnostics`).
"""

from __future__ import annotations

import collections
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from phasec.errors import MessageStream

__all__ = ["QUIET", "NORMAL", "VERBOSE", "set_verbosity", "verbosity", "enable_progress",
           "disable_progress", "progress_enabled", "erasing_progress", "step", "Step", "native_diagnostics",
           "recent_native_diagnostics"]

#: verbosity levels: ``-q`` (results only, no progress), the default, ``-v``
QUIET, NORMAL, VERBOSE = -1, 0, 1

#: a step shows its line once it has taken this long (no flicker for short ones)
SHOW_AFTER_SECONDS = 0.5
#: how often the line is redrawn while a step runs
REDRAW_SECONDS = 0.5
#: native diagnostic lines kept for :func:`recent_native_diagnostics`
KEPT_DIAGNOSTICS = 1000

_lock = threading.RLock()
_verbosity = NORMAL
_terminal: Any = None          # the stream progress lines go to, when on
_owner = 0                     # the process that turned them on (not its forked workers)
_owned_file: Any = None        # the duplicate of fd 2 opened for it (closed when off)
_steps: list["Step"] = []      # the running steps, outermost first
_shown = 0                     # characters of the line on screen now (0: none)
_drawn = ""                    # that line
_ticking = False               # a ticker thread redraws the line while steps run
_recent: collections.deque[str] = collections.deque(maxlen=KEPT_DIAGNOSTICS)


def set_verbosity(level: int) -> None:
    """:data:`QUIET`, :data:`NORMAL` (the default) or :data:`VERBOSE`."""
    global _verbosity
    if level not in (QUIET, NORMAL, VERBOSE):
        raise ValueError(f"verbosity must be QUIET, NORMAL or VERBOSE, not {level!r}")
    _verbosity = level


def verbosity() -> int:
    return _verbosity


def enable_progress(stream: Any = None) -> bool:
    """Show progress lines on ``stream`` (default: a duplicate of file
    descriptor 2, so the lines reach the terminal even while phasec captures
    what LLVM writes there) when it is a terminal and the verbosity is not
    :data:`QUIET`. Returns whether progress is on."""
    global _terminal, _owned_file, _owner
    disable_progress()
    if _verbosity == QUIET:
        return False
    with _lock:
        if stream is None:
            try:
                if not os.isatty(2):
                    return False
                _owned_file = os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8",
                                        errors="replace")
            except OSError:
                return False
            stream = MessageStream(_owned_file)
        elif not _isatty(stream):
            return False
        _terminal = stream
        _owner = os.getpid()
        return True


def disable_progress() -> None:
    """Stop showing progress lines (erasing one on screen)."""
    global _terminal, _owned_file
    with _lock:
        _erase()
        _terminal = None
        if _owned_file is not None:
            try:
                _owned_file.close()
            except OSError:
                pass
            _owned_file = None


def progress_enabled() -> bool:
    """Whether progress lines are shown (in this process: a worker forked
    from the command draws none)."""
    return _terminal is not None and _owner == os.getpid()


class _ErasingStream:
    """A terminal stream that erases the progress line before each write, so
    a message never lands after a half-drawn progress line."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        with _lock:
            _erase()
            return self.stream.write(text)

    def write_styled(self, text: str, style: Any) -> int:
        with _lock:
            _erase()
            return self.stream.write_styled(text, style)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextmanager
def erasing_progress() -> Iterator[None]:
    """For a command's run: while progress is on, what is written to
    ``sys.stdout`` and ``sys.stderr`` on the terminal erases the progress
    line first; at the end progress is turned off (the line erased)."""
    if not progress_enabled():
        try:
            yield
        finally:
            disable_progress()
        return
    out, err = sys.stdout, sys.stderr
    wrapped_out = _ErasingStream(out) if _isatty(out) else out
    wrapped_err = _ErasingStream(err)
    sys.stdout, sys.stderr = wrapped_out, wrapped_err
    try:
        yield
    finally:
        disable_progress()
        if sys.stdout is wrapped_out:
            sys.stdout = out
        if sys.stderr is wrapped_err:
            sys.stderr = err


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class Step:
    """One long step (see :func:`step`); ``update`` says how far it got."""

    def __init__(self, what: str, total: int | None = None) -> None:
        self.what = what
        self.total = total
        self.done = 0
        self.detail = ""
        self.started = time.monotonic()

    def update(self, done: int | None = None, detail: str = "") -> None:
        """``done`` of ``total`` finished (one more when None); ``detail``
        names the item being worked on."""
        self.done = self.done + 1 if done is None else done
        self.detail = detail
        if progress_enabled():
            _redraw()

    def text(self, now: float) -> str:
        parts = [self.what]
        if self.total is not None:
            parts.append(f"{min(self.done, self.total)}/{self.total}")
        if self.detail:
            parts.append(f"({self.detail})")
        parts.append(f"{now - self.started:.0f} s")
        return " ".join(parts)

    def __enter__(self) -> "Step":
        with _lock:
            _steps.append(self)
            _start_ticker()
            if progress_enabled():
                _redraw()
        return self

    def __exit__(self, *exc: Any) -> None:
        with _lock:
            if self in _steps:
                _steps.remove(self)
            if not _steps:
                _erase()
            elif progress_enabled():
                _redraw()


def step(what: str, total: int | None = None) -> Step:
    """A context manager marking a long step: ``what`` (e.g. "compiling 29
    kernels with LLVM"), with ``total`` items if it counts them. Cheap when
    progress is off."""
    return Step(what, total)


def _line(now: float) -> str:
    shown = [s for s in _steps if now - s.started >= SHOW_AFTER_SECONDS]
    if not shown:
        return ""
    return "phasec: " + ": ".join(s.text(now) for s in shown[-2:])


def _width() -> int:
    """The terminal's width less one (a line that wraps cannot be redrawn in
    place); 80 columns when the terminal does not say."""
    try:
        columns = os.get_terminal_size(_terminal.fileno()).columns
    except (AttributeError, ValueError, OSError):
        columns = shutil.get_terminal_size().columns
    return max(20, (columns or 80) - 1)


def _redraw() -> None:
    global _shown, _drawn
    with _lock:
        if not progress_enabled():
            return
        text = _line(time.monotonic())
        if not text and not _shown:
            return
        text = text[:_width()]  # a wrapped line could not be redrawn in place
        if text == _drawn:
            return
        pad = " " * max(0, _shown - len(text))
        try:
            _terminal.write("\r" + text + pad)
            if pad:
                _terminal.write("\r" + text)
            _terminal.flush()
        except (OSError, ValueError):
            return
        _shown, _drawn = len(text), text


def _erase() -> None:
    global _shown, _drawn
    _drawn = ""
    if not progress_enabled() or not _shown:
        _shown = 0
        return
    try:
        _terminal.write("\r" + " " * _shown)
        _terminal.write("\r")
        _terminal.flush()
    except (OSError, ValueError):
        pass
    _shown = 0


def _start_ticker() -> None:
    global _ticking
    if not progress_enabled() or _ticking:
        return
    _ticking = True
    threading.Thread(target=_tick, name="phasec-progress", daemon=True).start()


def _tick() -> None:
    global _ticking
    while True:
        time.sleep(REDRAW_SECONDS)
        with _lock:
            if not _steps or _terminal is None:
                _ticking = False
                return
            _redraw()


def native_diagnostics(source: str, lines: Iterable[str]) -> None:
    """What a native library (``source``, e.g. ``"llvm"``) printed while
    phasec captured it: kept, and shown on standard error at :data:`VERBOSE`
    (each distinct line once, with how often it came)."""
    lines = [ln for ln in lines if ln.strip()]
    _recent.extend(f"{source}: {ln}" for ln in lines)
    if _verbosity < VERBOSE or not lines:
        return
    counts = collections.Counter(lines)
    with _lock:
        _erase()
        for text, n in counts.items():
            print(f"{source}: {text}" + (f" (x{n})" if n > 1 else ""), file=sys.stderr)
        sys.stderr.flush()


def recent_native_diagnostics(clear: bool = False) -> list[str]:
    """The last captured native diagnostic lines (``"llvm: ..."``), oldest
    first; ``clear`` forgets them."""
    out = list(_recent)
    if clear:
        _recent.clear()
    return out

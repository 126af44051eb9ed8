"""LLVM's diagnostics, taken off the process's standard error.

LLVM prints its diagnostics (optimization remarks such as "loop not
vectorized: call instruction cannot be vectorized", and the warning that a
loop marked for vectorization was not) to file descriptor 2 itself, and
llvmlite offers no diagnostic handler. So while LLVM optimizes and generates
code, fd 2 points at a temporary file (:func:`captured_llvm_output`); what
LLVM wrote goes to :func:`phasec.console.native_diagnostics` (shown with
``-v``), and anything else written there meanwhile (another thread's
messages) is passed on to the real standard error afterwards
(:func:`dispatch_captured`).

LLVM writes one diagnostic as six unbuffered writes: the severity, ": ",
the location ("<unknown>:0:0"), ": ",
the message and "\\n". Another thread's line can land between any two of
them, so the captured text is read piece by piece rather than by lines: a
line that interrupts a diagnostic is passed on, and the diagnostic is put
back together. One gap cannot be told apart: a line landing just before the
message is read as the message, and the message then passes on as a line
of its own (a line landing just after the message runs into it, and an
empty line passes on).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from phasec import console

__all__ = ["captured_llvm_output", "dispatch_captured"]

_SEVERITY = re.compile(rb"remark|warning|note|error")
#: what follows the severity, one piece at a time (some LLVM versions write
#: the location in pieces split at its colons, so those are pieces here too;
#: its file is always "<unknown>": phasec emits no debug information)
_PIECES = tuple(re.compile(p) for p in (
    rb": ", rb"<unknown>", rb":", rb"\d+", rb":", rb"\d+", rb": ", rb"[^\n]*", rb"\n"))
#: a whole diagnostic line in another form (no location): kept as LLVM's
_WHOLE_DIAGNOSTIC = re.compile(rb"(?:remark|warning|note|error): [^\n]*\n?")


@contextmanager
def captured_llvm_output() -> Iterator[None]:
    """Run the block with file descriptor 2 pointing at a temporary file, then
    hand LLVM's diagnostics to :func:`console.native_diagnostics` and pass
    everything else on to the real fd 2.

    Callers hold the JIT's compile lock, so captures never nest. fd 2 is
    process wide: text another thread writes to standard error during the
    block is delayed until the block ends, not lost. (LLVM's fatal errors,
    which end the process inside the block, are the one thing this hides;
    phasec verifies the IR before LLVM sees it.)"""
    flush_stderr()
    try:
        saved = os.dup(2)
    except OSError:  # no standard error at all: nothing to capture
        yield
        return
    try:
        sink = tempfile.TemporaryFile()
    except OSError:
        os.close(saved)
        yield
        return
    with sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            flush_stderr()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            dispatch_captured(sink.read())


def flush_stderr() -> None:
    """Flush Python's standard error streams (before fd 2 is moved)."""
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass


def dispatch_captured(data: bytes) -> None:
    """Split captured standard error into LLVM's diagnostics (to
    :func:`console.native_diagnostics`) and everything else (written to fd 2)."""
    if not data:
        return
    diagnostics, other = split_diagnostics(data)
    view = memoryview(other)
    try:
        while view:
            view = view[os.write(2, view):]
    except OSError:
        pass
    console.native_diagnostics("llvm", diagnostics)


def split_diagnostics(data: bytes) -> tuple[list[str], bytes]:
    """LLVM's diagnostics in ``data`` (each put back together, without its
    newline) and the rest of ``data``, in order."""
    diagnostics: list[str] = []
    other = bytearray()
    pos = 0
    while pos < len(data):
        parsed = _diagnostic_at(data, pos)
        if parsed is not None:
            text, interruptions, pos = parsed
            diagnostics.append(text.decode("utf-8", "replace"))
            other += interruptions
            continue
        end = _line_end(data, pos)
        if _WHOLE_DIAGNOSTIC.fullmatch(data, pos, end):
            diagnostics.append(data[pos:end].decode("utf-8", "replace").rstrip("\n"))
        else:
            other += data[pos:end]
        pos = end
    return diagnostics, bytes(other)


def _diagnostic_at(data: bytes, pos: int) -> tuple[bytes, bytes, int] | None:
    """The diagnostic starting at ``pos`` (a line's start), the lines that
    interrupted it, and where it ends; None if none starts there. Any number
    of lines may interrupt it (a thread writing in a loop fits thousands
    between two of LLVM's writes); a line that only begins like a severity
    ("remarkable") is found out at the next one or at the end, so the whole
    capture is read at most twice."""
    severity = _SEVERITY.match(data, pos)
    if severity is None:
        return None
    text, interruptions = bytearray(severity.group()), bytearray()
    pos = severity.end()
    for piece in _PIECES:
        while (match := piece.match(data, pos)) is None:
            if pos >= len(data) or _SEVERITY.match(data, pos):  # (the next diagnostic)
                return None
            end = _line_end(data, pos)
            interruptions += data[pos:end]
            pos = end
        text += match.group()
        pos = match.end()
    return bytes(text[:-1]), bytes(interruptions), pos


def _line_end(data: bytes, pos: int) -> int:
    end = data.find(b"\n", pos)
    return len(data) if end < 0 else end + 1

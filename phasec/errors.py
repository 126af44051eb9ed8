"""The exceptions phasec raises for users' mistakes.

Every error names what is wrong and where. All derive from
:class:`PhasecError`, so a CLI can turn any of them into a clean message.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from phasec.ir.node import Span

__all__ = ["PhasecError", "InputError", "ParseError", "StructInfoError", "PhaseError",
           "InvalidPhaseError", "PassError", "WellFormedError", "SchemaError", "VMError",
           "IndexOutOfRangeError", "index_error_text", "counted", "FileAccessError",
           "BufferAccessError", "DivisionByZeroError", "ProgramAssertionError", "with_location",
           "printable", "MessageStream", "MESSAGE_LINE_LIMIT", "MESSAGE_LIMIT"]


class PhasecError(Exception):
    """Base of every error phasec raises on purpose."""


class InputError(PhasecError):
    """What the user gave is wrong: a file, its contents, an option value.

    The command-line tools exit with status 2 for these (1 is for checks
    that fail: phase errors, violations, results that do not match).
    """


class ParseError(InputError):
    """TVMScript that phasec cannot read: carries file, line and column."""

    def __init__(self, message: str, span: "Span | None" = None) -> None:
        self.message = message
        self.span = span
        super().__init__(f"{span}: {message}" if span is not None else message)


class StructInfoError(PhasecError):
    """Struct-info inference failed: names the operator, operands and location."""

    def __init__(self, message: str, span: "Span | None" = None) -> None:
        self.message = message
        self.span = span
        super().__init__(f"{span}: {message}" if span is not None else message)


class PhaseError(PhasecError):
    """A pass was asked to run on a module in a phase it does not accept."""


class InvalidPhaseError(PhaseError, ValueError):
    """A value that names no phase (``"foo"``, ``7``), e.g. as a module's
    ``phase`` attribute. Also a ``ValueError``, as it always was."""


class PassError(PhasecError):
    """A pass raised an exception; chained to the original (``__cause__``)."""

    def __init__(self, message: str, pass_name: str = "", phase: Any = None) -> None:
        self.pass_name = pass_name
        self.phase = phase
        super().__init__(message)


class WellFormedError(PhasecError):
    """The verifier found violations; ``diagnostics`` lists every one."""

    def __init__(self, message: str, diagnostics: Sequence[Any] = (), pass_name: str | None = None) -> None:
        self.diagnostics = list(diagnostics)
        self.pass_name = pass_name
        super().__init__(message)


class FileAccessError(InputError):
    """A file cannot be read or written: missing, special (a FIFO, a device),
    larger than the input size limit, or the disk is full. The message names
    the path (``path``) and says what is wrong; see :mod:`phasec.fileio`."""

    def __init__(self, message: str, path: str = "", reason: str = "") -> None:
        self.path = path
        self.reason = reason or message  # the message without "cannot read PATH: "
        super().__init__(message)


class SchemaError(InputError):
    """A JSON module document does not fit the schema; lists offending paths."""


class VMError(PhasecError):
    """A compiled program was called wrongly (argument count, shape, dtype)."""


class IndexOutOfRangeError(VMError, IndexError):
    """An index read from data is outside its axis (``R.take`` with 7 on 4
    rows): the compiled kernel, the TIR interpreter and the reference
    interpreter all raise it, with the same wording (:func:`index_error_text`).
    ``where`` names the kernel or operator; ``value`` and ``extent`` are the
    bad index and the axis length."""

    def __init__(self, where: str, value: int, extent: int, context: str = "") -> None:
        self.where, self.value, self.extent = where, value, extent
        text = index_error_text(where, value, extent)
        super().__init__(f"{text} {context}" if context else text)

    def at(self, where: str) -> "IndexOutOfRangeError":
        """The same error, said of ``where`` (e.g. the kernel that raised it)."""
        return IndexOutOfRangeError(where, self.value, self.extent)


class BufferAccessError(VMError, IndexError):
    """A kernel indexed a buffer outside its extent: caught by compiled
    kernels at every access not proven in bounds (the default; every access
    with ``check_bounds=True``, none with ``check_bounds=False``) and always
    by the TIR interpreter. ``kernel``, ``buffer``, ``dim``, ``index`` and
    ``extent`` say where; ``write`` whether it was a store."""

    def __init__(self, kernel: str, buffer: str, dim: int, index: int, extent: int,
                 write: bool = False, message: str | None = None) -> None:
        self.kernel, self.buffer, self.dim = kernel, buffer, dim
        self.index, self.extent, self.write = index, extent, write
        if message is None:
            access = "write to" if write else "read of"
            valid = f"valid: 0 to {extent - 1}" if extent > 0 else "the dimension is empty"
            message = (f"kernel {kernel!r}: out-of-bounds {access} buffer {buffer!r}: index "
                       f"{index} in dimension {dim}, whose extent is {extent} ({valid})")
        super().__init__(message)


class DivisionByZeroError(VMError, ZeroDivisionError):
    """An integer division or remainder by zero while a program runs
    (``R.divide``, ``R.floor_divide``, ``R.mod``, ``R.floor_mod`` on
    integers, ONNX ``Div``/``Mod``, or ``/``, ``//``, ``%`` in a kernel).
    phasec has one rule for it everywhere -- the operators' numpy references,
    the reference and TIR interpreters, compiled kernels, the VM's shape
    arithmetic: it is this error, never a quotient or remainder of 0 (as
    ONNX Runtime fails such a run). ``where`` names the kernel or operator.
    (Float division by zero is no error: IEEE infinities and NaN; ``INT_MIN /
    -1`` wraps to ``INT_MIN``.)"""

    def __init__(self, where: str) -> None:
        self.where = where
        super().__init__(f"integer division by zero in {where}")


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 argument``, ``2 arguments``: a count and its noun, for messages
    (never ``2 argument(s)``); ``plural`` when it is not ``noun + "s"``."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def index_error_text(where: str, value: int, extent: int) -> str:
    """``kernel 'take': index 7 is out of range for an axis of extent 4 (valid: -4 to 3)``."""
    valid = f"valid: {-extent} to {extent - 1}" if extent > 0 else "the axis is empty"
    return f"{where}: index {value} is out of range for an axis of extent {extent} ({valid})"


class ProgramAssertionError(VMError, AssertionError):
    """``R.assert_op`` found its condition false while the program ran (on the
    VM or the reference interpreter); the message is the op's formatted one."""


def with_location(exc: BaseException, where: str) -> VMError:
    """``exc``, raised while a program ran, as a VMError with ``where`` (the
    program point) appended; of the same kind where callers catch the kind:
    IndexOutOfRangeError and BufferAccessError (IndexErrors),
    DivisionByZeroError (a ZeroDivisionError), ProgramAssertionError."""
    detail = str(exc) if isinstance(exc, PhasecError) else f"{type(exc).__name__}: {exc}"
    if isinstance(exc, IndexOutOfRangeError):
        return IndexOutOfRangeError(exc.where, exc.value, exc.extent, where)
    if isinstance(exc, BufferAccessError):
        return BufferAccessError(exc.kernel, exc.buffer, exc.dim, exc.index, exc.extent,
                                 exc.write, f"{exc} {where}")
    if isinstance(exc, DivisionByZeroError):
        return DivisionByZeroError(f"{exc.where} {where}")
    if isinstance(exc, ProgramAssertionError):
        return ProgramAssertionError(f"{detail} {where}")
    return VMError(f"{detail} {where}")


#: A line of a message longer than this is clipped (a list of 10,000 names is
#: no use to anyone on a terminal), and so is a whole message longer than
#: :data:`MESSAGE_LIMIT`.
MESSAGE_LINE_LIMIT = 4096
MESSAGE_LIMIT = 65536

# C0 controls but newline and tab (a message's structure), DEL, C1 controls.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def printable(text: str, line_limit: int = MESSAGE_LINE_LIMIT, limit: int = MESSAGE_LIMIT,
              escape: str = "\\x{:02x}") -> str:
    """``text`` made safe to show on a terminal: every control character
    except newline and tab written as an escape (``escape``, by default
    ``\\x1b``), so names and strings from a model, a program or a server
    cannot move the cursor, recolour or retitle the terminal; every line
    clipped to ``line_limit`` characters and the whole to ``limit``, saying
    how much was left out."""
    text = _CONTROL.sub(lambda m: escape.format(ord(m.group())), text)
    if len(text) > line_limit:
        text = "\n".join(_clip(line, line_limit) for line in text.split("\n"))
    return _clip(text, limit)


class MessageStream:
    """A text stream whose every write is made :func:`printable`: the one
    place where messages, diagnostics, warnings and progress lines are
    escaped and clipped on their way to the terminal (both command lines
    wrap their stdout and stderr in one). A write that starts with a
    carriage return (a progress line redrawn in place) keeps it.

    With ``data`` (standard output: modules, JSON, tables that programs
    read) nothing is clipped and a control character becomes ``\\u001b``:
    inside a JSON string that is the same character, so JSON stays valid
    and equal."""

    def __init__(self, stream: Any, data: bool = False) -> None:
        self.stream = stream
        self.data = data

    def write(self, text: str) -> int:
        """Write ``text`` escaped (and clipped); returns ``len(text)`` as a stream does."""
        redraw = text.startswith("\r")
        body = text[1:] if redraw else text
        body = (printable(body, sys.maxsize, sys.maxsize, "\\u{:04x}") if self.data
                else printable(body))
        self.stream.write(("\r" if redraw else "") + body)
        return len(text)

    def write_styled(self, text: str, style: Callable[[str], str]) -> int:
        """Write ``text`` escaped and clipped as on a terminal, then passed
        through ``style`` (which adds phasec's own colour sequences: those
        are the only control characters that reach the stream)."""
        self.stream.write(style(printable(text)))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding...
        return getattr(self.stream, name)

"""Diagnostics: one violation of one rule, with location and a hint.

:class:`Diagnostic` is a frozen slotted dataclass (cheap: the verifier runs
after every pass); pydantic appears only in the CLI's JSON output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from phasec.ir.node import Span

__all__ = ["Diagnostic", "ERROR", "WARNING", "format_location", "format_diagnostic",
           "source_excerpt", "summarize"]

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A rule violation.

    Attributes:
        code: the rule's stable code (``WF001``, ``PH201`` ...).
        severity: ``"error"`` or ``"warning"``; only errors make a module ill-formed.
        message: what is wrong, naming the variables/operators involved.
        function: the module-level function it is in (None for module-level problems).
        binding: the name of the variable bound by the offending binding, or None.
        span: the source location, when the IR carries one.
        help: how to fix it: which pass to run, or which phase to declare.
    """

    code: str
    severity: str
    message: str
    function: str | None = None
    binding: str | None = None
    span: Span | None = None
    help: str = ""

    @property
    def is_error(self) -> bool:
        return self.severity == ERROR

    def __str__(self) -> str:
        return format_diagnostic(self)


def format_location(diag: Diagnostic, default_file: str | None = None) -> str:
    """``file:line:col`` (1-based column) or ``file`` / ``<module>`` without a span."""
    if diag.span is not None:
        return str(diag.span)
    return default_file or "<module>"


def _context(diag: Diagnostic) -> str:
    where = []
    if diag.function:
        where.append(f"function '{diag.function}'")
    if diag.binding:
        where.append(f"binding '{diag.binding}'")
    return f" (in {', '.join(where)})" if where else ""


def format_diagnostic(diag: Diagnostic, source_lines: Sequence[str] | None = None,
                      default_file: str | None = None) -> str:
    """The text form: ``file:line:col: error[CODE]: message``, an optional
    source line with a caret under the column, and the help line."""
    out = [f"{format_location(diag, default_file)}: {diag.severity}[{diag.code}]: "
           f"{diag.message}{_context(diag)}"]
    if source_lines is not None and diag.span is not None:
        out.extend(source_excerpt(source_lines, diag.span))
    if diag.help:
        out.append(f"  help: {diag.help}")
    return "\n".join(out)


#: The most characters of a source line an excerpt shows.
EXCERPT_WIDTH = 120


def source_excerpt(source_lines: Sequence[str], span: Span) -> list[str]:
    """The source line of ``span`` and a caret line under its column.

    The caret line repeats the tabs of the source line so that it lines up in
    any terminal; when the span ends on the same line it is underlined.
    """
    if not 1 <= span.line <= len(source_lines):
        return []
    line = source_lines[span.line - 1].rstrip("\r\n")
    col = max(0, min(span.col, len(line)))
    width = 1
    if span.end_line == span.line and span.end_col is not None and span.end_col > col:
        width = min(span.end_col, len(line)) - col
    if len(line) > EXCERPT_WIDTH:
        # A long line (generated code, a minified file) shows a window around
        # the column, with "..." where it is cut.
        start = max(0, min(col - EXCERPT_WIDTH // 3, len(line) - EXCERPT_WIDTH))
        end = start + EXCERPT_WIDTH
        head, tail = ("..." if start > 0 else ""), ("..." if end < len(line) else "")
        width = min(width, end - col)
        line, col = head + line[start:end] + tail, col - start + len(head)
    pad = "".join(ch if ch == "\t" else " " for ch in line[:col])
    return [f"  {line}", f"  {pad}^{'~' * max(0, width - 1)}"]


def summarize(diags: Sequence[Diagnostic], limit: int = 5) -> str:
    """The first ``limit`` diagnostics formatted, and how many were left out."""
    shown = [format_diagnostic(d) for d in diags[:limit]]
    text = "\n".join(shown)
    if len(diags) > limit:
        text += f"\n... and {len(diags) - limit} more"
    return text

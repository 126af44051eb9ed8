"""Checking a module as it was read, before any pass runs.

A tool that runs a pipeline on a file (``phasec run``) checks the file's
module first: a module that is ill-formed before any pass ran is an error of
the input, not of the first pass, and is reported as ``phasec-check``
reports it (location, rule code and message, the source line with a caret,
the help), naming no pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from phasec.errors import PhasecError, WellFormedError
from phasec.fileio import read_bytes
from phasec.ir.module import IRModule
from phasec.ir.phase import Phase

from phasec.verifier.checker import check
from phasec.verifier.diagnostics import ERROR, Diagnostic, format_diagnostic

__all__ = ["check_input", "format_input_errors"]

#: The most errors the message lists (phasec-check lists every one).
SHOWN_ERRORS = 20


def _lines(path: str, cache: dict[str, list[str] | None]) -> list[str] | None:
    """The lines of the file a span names, or None when it cannot be read."""
    if path not in cache:
        try:
            cache[path] = read_bytes(path).decode("utf-8-sig", "replace").splitlines()
        except (OSError, PhasecError):
            cache[path] = None
    return cache[path]


def format_input_errors(errors: Sequence[Diagnostic], what: str, phase: Phase) -> str:
    """The message of an ill-formed input: a head line, then each error as
    ``phasec-check`` prints it, with the source line read from its file."""
    count = f"{len(errors)} error{'s' if len(errors) != 1 else ''}"
    out = [f"{what} is not well-formed at phase {phase.label} (checked before any pass "
           f"ran): {count}"]
    cache: dict[str, list[str] | None] = {}
    for d in errors[:SHOWN_ERRORS]:
        lines = _lines(d.span.file, cache) if d.span is not None and d.span.file else None
        out.append(format_diagnostic(d, lines))
    if len(errors) > SHOWN_ERRORS:
        out.append(f"... and {len(errors) - SHOWN_ERRORS} more (phasec-check lists every one)")
    return "\n".join(out)


def check_input(mod: IRModule, what: str = "the input", *,
                repair: Callable[[IRModule], IRModule] | None = None) -> None:
    """Raise :class:`~phasec.errors.WellFormedError` when ``mod``, a module as
    read, is not well-formed at its phase; its message is
    :func:`format_input_errors` and it names no pass (``pass_name`` None).

    ``repair`` is what the pipeline does to its input first (``Normalize``:
    A-normal form, struct info filled in). An input whose every error it
    repairs is not an ill-formed input: the pipeline takes it as it is.
    """
    errors = [d for d in check(mod) if d.severity == ERROR]
    if not errors:
        return
    if repair is not None:
        try:
            repaired = repair(mod)
        except Exception:  # noqa: BLE001 - it cannot repair it (e.g. inference fails)
            repaired = None
        if repaired is not None and not any(d.severity == ERROR for d in check(repaired)):
            return
    raise WellFormedError(format_input_errors(errors, what, mod.phase), errors)

"""The JSON report of ``phasec-check --format json`` (pydantic models).

pydantic lives only here, at the boundary: the verifier itself produces
plain :class:`~verifier.diagnostics.Diagnostic` objects.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from .diagnostics import Diagnostic
from .rules import get_rule

__all__ = ["DiagnosticModel", "InputErrorModel", "FileReport", "CheckReport", "diagnostic_model"]


class DiagnosticModel(BaseModel):
    """One rule violation. Lines and columns are 1-based."""

    code: str = Field(description="stable rule code, e.g. WF001 or PH202")
    title: str = Field(description="the rule's one-line title")
    severity: Literal["error", "warning"]
    message: str
    function: str | None = Field(None, description="module-level function")
    binding: str | None = Field(None, description="variable bound by the offending binding")
    file: str | None = None
    line: int | None = None
    column: int | None = None
    end_line: int | None = None
    end_column: int | None = None
    help: str = Field("", description="how to fix: a pass to run or a phase to declare")


class InputErrorModel(BaseModel):
    """The file could not be read as a module (exit status 2)."""

    message: str
    kind: str = Field(description="ParseError, SchemaError, OSError, ...")
    line: int | None = None
    column: int | None = None


class FileReport(BaseModel):
    path: str
    status: Literal["ok", "violations", "input-error"]
    declared_phase: str | None = None
    checked_phase: str | None = None
    inferred_phase: str | None = Field(
        None, description="with --infer-phase: the highest phase the module satisfies")
    input_error: InputErrorModel | None = None
    diagnostics: list[DiagnosticModel] = Field(default_factory=list)


class CheckReport(BaseModel):
    tool: Literal["phasec-check"] = "phasec-check"
    files: list[FileReport]
    errors: int
    warnings: int
    input_errors: int
    exit_code: int


def diagnostic_model(diag: Diagnostic) -> DiagnosticModel:
    span = diag.span
    try:
        title = get_rule(diag.code).title
    except KeyError:
        title = ""
    return DiagnosticModel(
        code=diag.code, title=title, severity=diag.severity, message=diag.message,
        function=diag.function, binding=diag.binding,
        file=span.file if span else None, line=span.line if span else None,
        column=span.col + 1 if span else None,
        end_line=span.end_line if span else None,
        end_column=span.end_col + 1 if span and span.end_col is not None else None,
        help=diag.help)

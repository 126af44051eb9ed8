"""The JSON report of ``phasec-check --format json`` (pydantic models).

pydantic lives only here, at the boundary: the verifier itself produces
plain :class:`~verifier.diagnostics.Diagnostic` objects.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from phasec import __version__
from phasec.verifier.diagnostics import Diagnostic
from phasec.verifier.input_codes import INPUT_CODES
from phasec.verifier.rules import all_rules, get_rule

__all__ = ["DiagnosticModel", "InputErrorModel", "FileReport", "CheckReport", "diagnostic_model",
           "sarif_log"]


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
    code: str = Field("", description="stable input code, e.g. IN002 (phasec-check --explain)")
    line: int | None = None
    column: int | None = None


class FileReport(BaseModel):
    path: str
    module: str | None = Field(
        None, description="the @I.ir_module class, when the file holds its modules among "
                          "other Python code (one report per class)")
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


# -- SARIF ------------------------------------------------------------------

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _sarif_region(span: Any) -> dict[str, int]:
    region = {"startLine": span.line, "startColumn": span.col + 1}
    if span.end_line is not None:
        region["endLine"] = span.end_line
        if span.end_col is not None:
            region["endColumn"] = span.end_col + 1
    return region


def _sarif_location(path: str, span: Any) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": {"uri": path.replace(os.sep, "/")}}
    if span is not None:
        physical["region"] = _sarif_region(span)
    return {"physicalLocation": physical}


def sarif_log(results: Sequence[Any]) -> dict[str, Any]:
    """The results as a SARIF 2.1.0 log (what code-scanning tools read).

    One run of the tool ``phasec-check``; its rules are the verifier's rules
    and the input codes, each with its title and explanation; every
    diagnostic and every input error is a result pointing at its file and,
    when known, its line and column.
    """
    rules = [{"id": r.code, "name": r.title,
              "shortDescription": {"text": r.title},
              "fullDescription": {"text": " ".join(r.explanation.split())},
              "help": {"text": r.help or r.title},
              "defaultConfiguration": {"level": "error" if r.severity == "error" else "warning"}}
             for r in all_rules()]
    rules += [{"id": c.code, "name": c.title, "shortDescription": {"text": c.title},
               "fullDescription": {"text": c.explanation},
               "defaultConfiguration": {"level": "error"}} for c in INPUT_CODES.values()]
    index = {rule["id"]: i for i, rule in enumerate(rules)}
    out: list[dict[str, Any]] = []
    for r in results:
        if r.error is not None:
            code = r.error.code
            out.append({"ruleId": code, "ruleIndex": index[code], "level": "error",
                        "message": {"text": r.error.message},
                        "locations": [_sarif_location(r.path, r.error.span)]})
            continue
        for d in r.diagnostics:
            text = d.message + (f" (help: {d.help})" if d.help else "")
            entry = {"ruleId": d.code, "level": "error" if d.severity == "error" else "warning",
                     "message": {"text": text},
                     "locations": [_sarif_location(d.span.file if d.span else r.path, d.span)]}
            if d.code in index:
                entry["ruleIndex"] = index[d.code]
            out.append(entry)
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0",
            "runs": [{"tool": {"driver": {"name": "phasec-check", "version": __version__,
                                          "rules": rules}},
                      "results": out}]}

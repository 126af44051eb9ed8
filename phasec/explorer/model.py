"""The pipeline report as data: pydantic models, the JSON format and its schema.

A report is one compilation told pass by pass. Layout of a document::

    {"format": "phasec.pipeline_report", "version": 1,
     "title": "mlp.py", "phases": ["ingestion", "optimization", "lowering", "build"],
     "texts": ["# from tvm.script ...", ...],       # every distinct IR text, once
     "steps": [{"index": 0, "pass": "LambdaLifting", "status": "ran",
                "phase_before": "ingestion", "phase_after": "optimization",
                "transition": true, "seconds": 0.0002, "verify_seconds": 0.001,
                "verify": "checked", "before": 0, "after": 1, "changed": true,
                "diff": [{"function": "main", "lines": ["@@ -1,4 +1,4 @@", "-...", "+..."]}],
                "diagnostics": []}, ...],
     "error": null,                                  # or what stopped the pipeline
     "summary": {"final_phase": "build", "phases_reached": [...], "passes_run": 13, ...}}

``before``/``after`` are indices into ``texts`` (TVMScript of the whole
module), so a text that several passes leave unchanged is stored once.
Constants larger than ``limits.constant_elements`` print as TVM's metadata
references (``metadata["relax.expr.Constant"][i]``, the same index for the
same value throughout the report) with a comment legend giving their shape,
dtype, size and digest; a snapshot longer than ``limits.snapshot_chars`` is
cut, and once the report's texts and diffs reach ``limits.report_chars`` the
rest are omitted (``limits`` counts each; a step's ``diff_note`` says why its
diff is missing).
:func:`report_json_schema` returns the JSON Schema (``phasec schema --report``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DiagnosticDoc", "FunctionDiff", "StepDoc", "ErrorDoc", "SummaryDoc", "LimitsDoc",
           "ReportDoc",
           "report_json_schema", "FORMAT_NAME", "FORMAT_VERSION"]

FORMAT_NAME = "phasec.pipeline_report"
FORMAT_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class DiagnosticDoc(_Model):
    """A verifier diagnostic; lines and columns are 1-based."""

    code: str = Field(description="rule code, e.g. WF405 or PH201")
    severity: Literal["error", "warning"]
    message: str
    function: str | None = None
    binding: str | None = None
    source: str | None = Field(None, description="where the offending node came from "
                                                 "(file:line:col of the parsed source)")
    text: int | None = Field(None, description="index into 'texts' of the module the "
                                               "diagnostic is about")
    line: int | None = Field(None, description="the line of that text that shows the binding "
                                               "(or function) the diagnostic names")
    help: str = ""


class FunctionDiff(_Model):
    """The unified diff of one function between a pass's input and output."""

    function: str = Field(description="the module-level function the hunks are in "
                                      "('' for module-level lines)")
    lines: list[str] = Field(description="unified diff lines: '@@' hunk headers, then lines "
                                         "starting with ' ', '-' or '+'")


class StepDoc(_Model):
    """One pass call (or one pass skipped) of the pipeline, in order."""

    index: int
    pass_: str = Field(alias="pass")
    status: Literal["ran", "skipped", "failed"]
    reason: str = Field("", description="why the pass was skipped, or its error")
    required_by: str | None = Field(None, description="the pass that required this one")
    phase_before: str
    phase_after: str
    transition: bool = Field(description="the pass moved the module to a new phase")
    seconds: float = Field(description="time in the pass body")
    verify_seconds: float = Field(description="time the verifier spent on this step")
    verify: Literal["checked", "cached", "off", "none"] = Field(
        description="checked: verified after the pass; cached: the result was already "
                    "verified; off: the verify mode checks nothing here; none: did not run")
    before: int | None = Field(None, description="index into 'texts': the module it was given")
    after: int | None = Field(None, description="index into 'texts': the module it returned")
    changed: bool = False
    diff: list[FunctionDiff] = Field(default_factory=list)
    diff_note: str = Field("", description="why the diff of a changed module is not shown "
                                           "(a size budget of the report)")
    diagnostics: list[DiagnosticDoc] = Field(default_factory=list)


class ErrorDoc(_Model):
    """What stopped the pipeline."""

    kind: str = Field(description="PhaseError, WellFormedError, PassError, ...")
    message: str
    pass_: str | None = Field(None, alias="pass", description="the pass that failed")
    phase_needed: list[str] = Field(default_factory=list,
                                    description="the phases that pass accepts (PhaseError)")
    module_phase: str | None = Field(None, description="the phase the module was in")
    fix: str = Field("", description="what to do, from the error message")
    diagnostics: list[DiagnosticDoc] = Field(default_factory=list)


class SummaryDoc(_Model):
    final_phase: str
    phases_reached: list[str]
    passes_run: int
    passes_skipped: int
    passes_changed: int
    passes_failed: int
    kernels: int = Field(description="PrimFuncs in the final module (compiled by a build)")
    total_seconds: float = Field(description="time in pass bodies")
    verify_seconds: float


class LimitsDoc(_Model):
    """The report's size limits and how often they applied."""

    constant_elements: int = Field(description="constants of more elements print as "
                                               "metadata references")
    snapshot_chars: int = Field(description="the most one module text keeps")
    report_chars: int = Field(description="the most all texts and diffs together keep")
    constants_elided: int = Field(0, description="distinct constants printed as references")
    constant_bytes_elided: int = Field(0, description="their total size in bytes")
    snapshots_cut: int = Field(0, description="module texts cut at snapshot_chars")
    snapshots_omitted: int = Field(0, description="module texts left out: report_chars spent")
    diffs_omitted: int = Field(0, description="diffs left out (report_chars spent, or a "
                                              "side cut or omitted)")

    @property
    def applied(self) -> bool:
        """Whether anything was elided, cut or omitted."""
        return bool(self.constants_elided or self.snapshots_cut or self.snapshots_omitted
                    or self.diffs_omitted)


class ReportDoc(_Model):
    """A whole pipeline report."""

    format: Literal["phasec.pipeline_report"] = FORMAT_NAME
    version: Literal[1] = FORMAT_VERSION
    title: str
    phases: list[str]
    texts: list[str]
    steps: list[StepDoc]
    error: ErrorDoc | None = None
    summary: SummaryDoc
    limits: LimitsDoc | None = None


def report_json_schema() -> dict:
    """The JSON Schema of report documents (``phasec schema --report``)."""
    return ReportDoc.model_json_schema(by_alias=True)

"""Pipeline reports: a compilation, pass by pass and phase by phase.

::

    rep = phasec.report(mod)                    # the default pipeline, or:
    rep = phasec.report(mod, "LambdaLifting,FoldConstant,FuseOps")
    rep                                         # in Jupyter: the interactive view
    rep.save("out.html")                        # one self-contained page (no network)
    rep.save("out.json")                        # the same data (schema: phasec schema --report)

The command-line tools take ``--report PATH`` (``phasec opt``, ``run``,
``build`` and ``fuzz --replay``). A pipeline that fails still gives a report
up to the failure, with the error — that is when it is most useful. See
:mod:`phasec.explorer.model` for the JSON layout and :mod:`phasec.explorer.html`
for the page.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

from phasec.errors import InputError, PhasecError
from phasec.ir import IRModule
from phasec.explorer.html import render_fragment, render_html
from phasec.explorer.model import ReportDoc, report_json_schema
from phasec.explorer.recorder import PipelineRecorder
from phasec.fileio import write_atomic
from phasec.pipeline import lower_context, pipeline_for_phase, pipeline_from, run_pipeline

__all__ = ["PipelineReport", "PipelineRecorder", "report", "report_json_schema",
           "check_report_path", "REPORT_SUFFIXES"]

#: report file suffix -> format
REPORT_SUFFIXES = {".html": "HTML", ".htm": "HTML", ".json": "JSON"}
_fragment_ids = itertools.count()


class PipelineReport:
    """A finished report: ``doc`` is the data; HTML and JSON are views of it."""

    def __init__(self, doc: ReportDoc) -> None:
        self.doc = doc

    @property
    def error(self) -> Any:
        """What stopped the pipeline (an ErrorDoc), or None."""
        return self.doc.error

    def to_json(self, indent: int | None = 2) -> str:
        return self.doc.model_dump_json(by_alias=True, indent=indent) + "\n"

    def to_html(self) -> str:
        return render_html(self.doc)

    def _repr_html_(self) -> str:
        return render_fragment(self.doc, f"phasec-report-{next(_fragment_ids)}")

    def save(self, path: str | os.PathLike) -> None:
        """Write the report: HTML or JSON by the suffix; written whole or not at all."""
        check_report_path(path)
        text = self.to_json() if Path(path).suffix.lower() == ".json" else self.to_html()
        write_atomic(path, text, what="report")

    def __repr__(self) -> str:
        s = self.doc.summary
        return (f"<PipelineReport {self.doc.title!r}: {s.passes_run} passes run, final phase "
                f"{s.final_phase}{', failed' if self.doc.error else ''}>")


def check_report_path(path: str | os.PathLike) -> None:
    """Refuse, before any work, a report path that cannot be written: an
    unknown suffix, a missing or unwritable directory, a directory."""
    p = Path(path)
    if p.suffix.lower() not in REPORT_SUFFIXES:
        known = ", ".join(REPORT_SUFFIXES)
        raise InputError(f"cannot write the report to {str(path)!r}: unknown type "
                         f"{p.suffix or '(no suffix)'!r}; expected {known}")
    if p.is_dir():
        raise InputError(f"cannot write the report to {str(path)!r}: it is a directory")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"cannot write the report to {str(path)!r}: no directory "
                         f"{str(parent)!r}")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise InputError(f"cannot write the report to {str(path)!r}: permission denied")


def report(mod: IRModule, pipeline: Any = None, *, opt_level: int = 2, verify: str = "each",
           title: str | None = None) -> PipelineReport:
    """Run ``pipeline`` on ``mod`` and report every pass.

    ``pipeline`` is what :func:`phasec.build` takes: None for the default
    pipeline (from the module's phase to the build phase), a textual spec, a
    ``Sequential``/``Pipeline`` or a list of passes. Errors do not raise: the
    report ends with the error (``rep.error``), after the passes that ran.
    """
    recorder = PipelineRecorder(verify if isinstance(verify, str) else
                                ("each" if verify else "off"))
    result: IRModule | None = None
    error: PhasecError | None = None
    try:
        full = pipeline_from(pipeline, opt_level)
        part = pipeline_for_phase(full, mod.phase) if pipeline is None else full
        ctx = lower_context(opt_level, verify, [recorder])
        result = run_pipeline(part, mod, ctx)
    except PhasecError as exc:
        error = exc
    doc = recorder.document(title or "module", start=mod, final=result, error=error)
    return PipelineReport(doc)

"""Recording a pipeline run as a :class:`~phasec.explorer.model.ReportDoc`.

:class:`PipelineRecorder` is a pass instrument: add it to a
``PassContext`` (or to ``phasec.build``/``lower``'s ``instruments``) and it
notes every pass called or skipped, the phase before and after, the pass and
verifier times, and the module each pass was given and returned (printed as
TVMScript, each distinct text stored once). :meth:`PipelineRecorder.document`
turns that into the report, with per-function diffs and the error that
stopped the pipeline, if any.

Reports stay small on real models: constants of more than
:data:`MAX_CONSTANT_ELEMENTS` elements print as TVM's metadata references
(:class:`phasec.script.printer.ConstantElision`), a module text is cut at
:data:`SNAPSHOT_CHARS` and texts and diffs together stop at
:data:`REPORT_CHARS`; the report's ``limits`` says what was applied.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import time
from typing import Any

from phasec import console
from phasec import fileio
from phasec.errors import PhaseError, PhasecError, WellFormedError
from phasec.ir import IRModule, Phase, tir
from phasec.transform import REGISTRY, PassInstrument, get_pass_entry
from phasec.script.printer import ConstantElision, elide_constants, print_module
from phasec.explorer.model import (
    DiagnosticDoc, ErrorDoc, FunctionDiff, LimitsDoc, ReportDoc, StepDoc, SummaryDoc,
)

__all__ = ["PipelineRecorder", "MAX_CONSTANT_ELEMENTS", "SNAPSHOT_CHARS", "REPORT_CHARS"]

#: constants of more elements print as metadata references (TVM prints every
#: tensor constant so; phasec keeps small ones readable: shapes, scalars, indices)
MAX_CONSTANT_ELEMENTS = 64
#: the most one module text keeps (characters)
SNAPSHOT_CHARS = 2 << 20
#: the most all module texts and diffs of a report keep together (characters):
#: a browser opens a report of this size in a few seconds
REPORT_CHARS = 48 << 20

#: a module-level function header in printed TVMScript (``    def main(``)
_FUNCTION_HEADER = re.compile(r"^    def (\w+)\(")
#: lines of context around each change in a diff
DIFF_CONTEXT = 3


class PipelineRecorder(PassInstrument):
    """A pass instrument that records a pipeline run for a report.

    ``verify_mode`` is the ``PassContext``'s verify setting, so that the
    report can tell "cached" (already verified) from "off" (not checked).
    """

    def __init__(self, verify_mode: str = "each", *,
                 max_constant_elements: int = MAX_CONSTANT_ELEMENTS,
                 snapshot_chars: int = SNAPSHOT_CHARS, report_chars: int = REPORT_CHARS) -> None:
        self.verify_mode = verify_mode
        self.texts: list[str] = []
        self._text_ids: dict[str, int] = {}  # digest of the full text -> index
        self.elision = ConstantElision(max_constant_elements)
        self.limits = LimitsDoc(constant_elements=max_constant_elements,
                                snapshot_chars=snapshot_chars, report_chars=report_chars)
        self._stored = 0  # characters kept in texts
        self._stored_diffs = 0  # characters of diffs kept (by document())
        self._partial: set[int] = set()  # texts cut or omitted: no diff against them
        self._function_texts: dict[Any, Any] = {}  # the printer's lines of each function
        self._sources: dict[str, list[str]] = {}  # source file -> its lines (diagnostic spans)
        self._script_of: dict[int, tuple[IRModule, int]] = {}  # id(module) -> (module, text id)
        self.steps: list[dict[str, Any]] = []
        self._open: list[tuple[int, float]] = []
        self._required: dict[str, str] = {}
        self._pending_verify = 0.0
        self.first_module: IRModule | None = None
        self.last_module: IRModule | None = None
        self.error: BaseException | None = None
        self.started = time.perf_counter()

    # -- texts -------------------------------------------------------------
    def text_id(self, mod: IRModule) -> int:
        """The index of ``mod``'s TVMScript in :attr:`texts` (printed once per module)."""
        cached = self._script_of.get(id(mod))
        if cached is not None and cached[0] is mod:
            return cached[1]
        self.elision.used.clear()
        with elide_constants(self.elision):
            text = print_module(mod, function_texts=self._function_texts)
        legend = self.elision.legend(self.elision.used)
        if legend:
            text = "\n".join(legend) + "\n" + text
        key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        index = self._text_ids.get(key)
        if index is None:
            index = self._text_ids[key] = len(self.texts)
            self.texts.append(self._within_budget(text, index))
        self._script_of[id(mod)] = (mod, index)
        return index

    def _within_budget(self, text: str, index: int) -> str:
        """``text`` as the report keeps it: cut at the snapshot budget, or
        only a note once the report's budget is spent."""
        limits = self.limits
        if self._stored + min(len(text), limits.snapshot_chars) > limits.report_chars:
            limits.snapshots_omitted += 1
            self._partial.add(index)
            note = (f"# module text {index} omitted ({len(text):,} characters): the report "
                    f"keeps at most {limits.report_chars:,} characters of module texts and "
                    "diffs")
            self._stored += len(note)
            return note
        if len(text) > limits.snapshot_chars:
            limits.snapshots_cut += 1
            self._partial.add(index)
            cut = text.rfind("\n", 0, limits.snapshot_chars)
            text = (text[:cut if cut > 0 else limits.snapshot_chars]
                    + f"\n# ... cut: this module text has {len(text):,} characters; the report "
                      f"keeps at most {limits.snapshot_chars:,} of each")
        self._stored += len(text)
        return text

    # -- instrument hooks ----------------------------------------------------
    def run_before_required(self, mod: IRModule, info: Any, required_by: Any) -> None:
        self._required[info.name] = required_by.name

    def run_before_pass(self, mod: IRModule, info: Any) -> None:
        if self.first_module is None:
            self.first_module = mod
        self.steps.append({"pass": info.name, "status": "running", "reason": "",
                           "required_by": self._required.pop(info.name, None),
                           "phase_before": mod.phase, "phase_after": mod.phase,
                           "seconds": 0.0, "verify_seconds": self._pending_verify,
                           "verified": self._pending_verify > 0, "before": self.text_id(mod),
                           "after": None, "diagnostics": [], "input_violation": False})
        self._pending_verify = 0.0
        self._open.append((len(self.steps) - 1, time.perf_counter()))

    def _close(self, mod: IRModule, status: str, reason: str = "") -> dict[str, Any] | None:
        if not self._open:
            return None
        index, start = self._open.pop()
        step = self.steps[index]
        step.update(status=status, reason=reason, seconds=time.perf_counter() - start,
                    phase_after=mod.phase, after=self.text_id(mod))
        self.last_module = mod
        return step

    def run_after_pass(self, mod: IRModule, info: Any) -> None:
        self._close(mod, "ran")

    def run_after_verify(self, mod: IRModule, info: Any, seconds: float, stage: str) -> None:
        if stage == "input":  # checked before the pass: counted for the pass about to run
            self._pending_verify += seconds
            return
        for step in reversed(self.steps):
            if step["pass"] == info.name:
                step["verify_seconds"] += seconds
                step["verified"] = True
                return

    def run_on_error(self, mod: IRModule, info: Any, error: BaseException) -> None:
        step = None
        if self._open and self.steps[self._open[-1][0]]["pass"] == info.name:
            step = self._close(mod, "failed", _first_line(error))
        else:  # a verification failure after the pass body had returned
            step = next((s for s in reversed(self.steps) if s["pass"] == info.name), None)
            if step is not None:
                step["status"] = "failed"
                step["reason"] = _first_line(error)
        if step is not None and isinstance(error, WellFormedError):
            step["input_violation"] = error.pass_name != info.name
            step["diagnostics"] = list(error.diagnostics)

    def run_on_skip(self, mod: IRModule, info: Any, reason: str) -> None:
        self.steps.append({"pass": info.name, "status": "skipped", "reason": reason,
                           "required_by": self._required.pop(info.name, None),
                           "phase_before": mod.phase, "phase_after": mod.phase,
                           "seconds": 0.0, "verify_seconds": 0.0, "verified": False,
                           "before": None, "after": None, "diagnostics": [],
                           "input_violation": False})

    # -- the document ----------------------------------------------------------
    def document(self, title: str, start: IRModule | None = None,
                 final: IRModule | None = None, error: BaseException | None = None,
                 kernels: int | None = None) -> ReportDoc:
        """The report: ``start``/``final`` default to the first module a pass
        saw and the last one a pass returned; ``error`` is what stopped the
        pipeline; ``kernels`` the number of compiled kernels (default: the
        PrimFuncs of the final module)."""
        start = start if start is not None else self.first_module
        final = final if final is not None else (self.last_module or start)
        self._stored_diffs, self.limits.diffs_omitted = 0, 0  # (each document anew)
        steps = []
        with console.step("writing the report: diffs", total=len(self.steps)) as progress:
            for i, s in enumerate(self.steps):
                steps.append(self._step_doc(i, s))
                progress.update(i + 1, s["pass"])
        phases = [p.label for p in Phase]
        final_phase = final.phase if final is not None else Phase.INGESTION
        reached = sorted({s["phase_before"] for s in self.steps if s["status"] != "skipped"}
                         | {s["phase_after"] for s in self.steps if s["status"] == "ran"}
                         | ({start.phase} if start is not None else set()))
        if kernels is None:
            kernels = sum(isinstance(f, tir.PrimFunc) for f in final.functions.values()) \
                if final is not None else 0
        ran = [s for s in steps if s.status == "ran"]
        summary = SummaryDoc(
            final_phase=final_phase.label, phases_reached=[p.label for p in reached],
            passes_run=len(ran), passes_skipped=sum(s.status == "skipped" for s in steps),
            passes_changed=sum(s.changed for s in ran),
            passes_failed=sum(s.status == "failed" for s in steps), kernels=kernels,
            total_seconds=sum(s.seconds for s in steps),
            verify_seconds=sum(s.verify_seconds for s in steps))
        subject = final if final is not None else start  # what the error is about
        error_doc = None
        if error is not None:
            text = self.text_id(subject) if subject is not None else None
            error_doc = self._error_doc(error, final_phase, text)
        self.limits.constants_elided = len(self.elision.entries)
        self.limits.constant_bytes_elided = sum(e[3] for e in self.elision.entries)
        return ReportDoc(title=title, phases=phases, texts=self.texts, steps=steps,
                         error=error_doc, summary=summary, limits=self.limits.model_copy())

    def _step_doc(self, index: int, s: dict[str, Any]) -> StepDoc:
        before, after = s["before"], s["after"]
        changed = before is not None and after is not None and before != after
        diff, note = self._diff_within_budget(before, after) if changed else ([], "")
        text = before if s["input_violation"] else (after if after is not None else before)
        if s["status"] == "skipped":
            verify = "none"
        elif s["verified"]:
            verify = "checked"
        else:
            transition = s["phase_before"] != s["phase_after"]
            checked = self.verify_mode == "each" or (self.verify_mode == "transitions"
                                                      and transition)
            verify = "cached" if checked and s["status"] == "ran" else "off"
        return StepDoc(index=index, pass_=s["pass"], status=s["status"], reason=s["reason"],
                       required_by=s["required_by"], phase_before=s["phase_before"].label,
                       phase_after=s["phase_after"].label,
                       transition=s["phase_before"] != s["phase_after"],
                       seconds=s["seconds"], verify_seconds=s["verify_seconds"], verify=verify,
                       before=before, after=after, changed=changed, diff=diff,
                       diff_note=note, diagnostics=[self._diagnostic_doc(d, text) for d in s["diagnostics"]])

    def _diff_within_budget(self, before: int, after: int) -> tuple[list[FunctionDiff], str]:
        """The diff of two texts, or none and why (a side cut or omitted, or
        the report's budget spent)."""
        limits = self.limits
        if before in self._partial or after in self._partial:
            limits.diffs_omitted += 1
            return [], ("diff not shown: a module text was cut or omitted to keep the report "
                        "within its size budget")
        diff = _diff(self.texts[before], self.texts[after])
        size = sum(len(line) + 1 for d in diff for line in d.lines)
        if self._stored + self._stored_diffs + size > limits.report_chars:
            limits.diffs_omitted += 1
            return [], (f"diff not shown ({size:,} characters): the report keeps at most "
                        f"{limits.report_chars:,} characters of module texts and diffs")
        self._stored_diffs += size
        return diff, ""

    def _source_line(self, span: Any) -> str | None:
        """The line of the parsed source a span points at (its code, comment
        dropped), to find the same statement in the printed module: the CLI
        shows that line, so the report highlights it too. None when the file
        cannot be read (any more) or the span names none."""
        if span is None or not getattr(span, "file", None) or not span.line:
            return None
        lines = self._sources.get(span.file)
        if lines is None:
            try:
                with fileio.open_regular(span.file, limit=1 << 24) as fh:
                    lines = fh.read(1 << 24).decode("utf-8", "replace").splitlines()
            except (OSError, PhasecError):
                lines = []
            self._sources[span.file] = lines
        if not 0 < span.line <= len(lines):
            return None
        return lines[span.line - 1].split("#", 1)[0].strip() or None

    def _error_doc(self, error: BaseException, module_phase: Phase,
                   text: int | None) -> ErrorDoc:
        name = getattr(error, "requested_pass", None) or getattr(error, "pass_name", None) \
            or None
        needed: list[str] = []
        fix = ""
        if isinstance(error, PhaseError):
            if name:
                if name in REGISTRY:
                    needed = [p.label for p in sorted(get_pass_entry(name).info.phases)]
            fix = _fix_of(str(error))
        diagnostics = []
        if isinstance(error, WellFormedError):
            diagnostics = [self._diagnostic_doc(d, text) for d in error.diagnostics]
        return ErrorDoc(kind=type(error).__name__, message=str(error), pass_=name,
                        phase_needed=needed, module_phase=module_phase.label, fix=fix,
                        diagnostics=diagnostics)

    def _diagnostic_doc(self, d: Any, text: int | None) -> DiagnosticDoc:
        """A diagnostic located in the printed module: spans point into the
        parsed source (kept as ``source``), which passes may have changed, so
        the line shown is found by the function and binding it names."""
        span = d.span
        line = (_locate(self.texts[text], d.function, d.binding, self._source_line(span))
                if text is not None else None)
        return DiagnosticDoc(code=d.code, severity=d.severity, message=d.message,
                             function=d.function, binding=d.binding, help=d.help,
                             source=str(span) if span is not None else None,
                             text=text if line is not None else None, line=line)


def _first_line(error: BaseException) -> str:
    text = str(error)
    return text.splitlines()[0] if text else type(error).__name__


def _fix_of(message: str) -> str:
    """The advice of a phase error: the clause after its last colon."""
    head = message.split(". Nothing has run")[0]
    return head.rsplit(": ", 1)[-1].rstrip(".") if ": " in head else ""


def _locate(text: str, function: str | None, binding: str | None,
            source_line: str | None = None) -> int | None:
    """The 1-based line of ``text`` that binds ``binding`` in ``function``;
    without a binding, the line of the function that reads as
    ``source_line`` (the statement the diagnostic's span shows, e.g. a
    ``return``), else the function's header; or None."""
    if function is None:
        return None
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines)
                  if (m := _FUNCTION_HEADER.match(line)) and m.group(1) == function), None)
    if start is None:
        return None
    if binding is None:
        if source_line:
            for i in range(start + 1, len(lines)):
                if _FUNCTION_HEADER.match(lines[i]):
                    break
                if lines[i].strip() == source_line:
                    return i + 1
        return start + 1
    target = re.compile(rf"^\s+{re.escape(binding)}(:| =)")
    for i in range(start + 1, len(lines)):
        if _FUNCTION_HEADER.match(lines[i]):
            break
        if target.match(lines[i]):
            return i + 1
    return start + 1


def _sections(text: str) -> dict[str, list[str]]:
    """A printed module split by module-level function (its decorators
    included); ``""`` holds the module's own lines (imports, attributes)."""
    lines = text.splitlines()
    sections: dict[str, list[str]] = {"": []}
    current = ""
    pending: list[str] = []  # decorator lines, waiting for their def
    for line in lines:
        if line.startswith("    @"):
            pending.append(line)
            continue
        m = _FUNCTION_HEADER.match(line)
        if m:
            current = m.group(1)
            sections[current] = pending + [line]
        else:
            if pending:
                sections[current].extend(pending)
            sections[current].append(line)
        pending = []
    if pending:
        sections[current].extend(pending)
    return sections


def _diff(before: str, after: str) -> list[FunctionDiff]:
    """Unified diff hunks of two module texts, one entry per function that changed
    (the module's own lines under ``""``), in the order of the new text."""
    a, b = _sections(before), _sections(after)
    names = list(b) + [n for n in a if n not in b]
    out = []
    for name in names:
        old, new = a.get(name, []), b.get(name, [])
        if old == new:
            continue
        lines: list[str] = []
        matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
        for group in matcher.get_grouped_opcodes(DIFF_CONTEXT):
            i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
            lines.append(f"@@ -{i1 + 1},{i2 - i1} +{j1 + 1},{j2 - j1} @@")
            for tag, k1, k2, l1, l2 in group:
                if tag == "equal":
                    lines.extend(" " + line for line in old[k1:k2])
                    continue
                lines.extend("-" + line for line in old[k1:k2])
                lines.extend("+" + line for line in new[l1:l2])
        out.append(FunctionDiff(function=name, lines=lines))
    return out

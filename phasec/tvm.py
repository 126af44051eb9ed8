"""A bridge for TVM users: phasec modules to and from TVM, and phase checking
of TVM's own pipeline.

Needs the optional extra ``phasec[tvm]`` (apache-tvm, pinned to the release
this module is tested with, 0.27). TVM is imported when a function here is
first called, never by ``import phasec`` nor by ``import phasec.tvm``.

* :func:`from_tvm` / :func:`to_tvm` convert through TVMScript text (what TVM
  0.27 prints is what phasec reads, and the other way round); the phase
  travels as the module attribute ``phase``.
* :class:`PhaseCheck` is a ``tvm.instrument`` pass instrument: it follows the
  phase through TVM's pipeline, with the transitions of ``PHASES.md`` under
  TVM's names for them (:data:`TVM_TRANSITIONS`), and runs phasec's verifier
  on the module after every TVM pass, recording the first pass that breaks an
  invariant of the phase the module should be in. It changes nothing in TVM.
  The disagreements PHASES.md documents for TVM's own pipeline
  (:data:`TVM_DOCUMENTED_DEVIATIONS`, decided by :func:`documented_deviation`,
  which ``phasec fuzz --against tvm`` uses too) are marked, not reported.
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from phasec.errors import InputError, PhasecError, WellFormedError
from phasec.ir.module import IRModule
from phasec.ir.phase import Phase
from phasec import verifier
from phasec.ir.expr import Call, ExternFunc, Op
from phasec.ir.visitor import ExprMutator
from phasec.op import call_op
from phasec.op.unary import STOP_FUSION_PACKED
from phasec.script.parser import parse
from phasec.transform.results import (
    Tolerance, as_float64, compare_outputs, copy_value, rounding_length, validation_inputs,
    widen,
)
from phasec import interp

__all__ = ["from_tvm", "to_tvm", "PhaseCheck", "PassVerdict", "ResultVerdict", "TVM_TRANSITIONS",
           "check_dump_results", "DumpResults",
           "TVMNotAvailableError", "TESTED_TVM_VERSION", "require_tvm", "PhaseCheckError",
           "TVM_DOCUMENTED_DEVIATIONS", "documented_deviation"]

#: The TVM release this bridge is tested with (the ``phasec[tvm]`` pin).
TESTED_TVM_VERSION = "0.27"

#: TVM pass name -> the phase a module enters through it (phasec's
#: transitions, by the names TVM gives them: phasec's LambdaLifting is TVM's
#: LambdaLift; VMBuiltinLower was renamed LowerRuntimeBuiltin in TVM).
TVM_TRANSITIONS: dict[str, Phase] = {
    "LambdaLift": Phase.OPTIMIZATION,
    "LambdaLifting": Phase.OPTIMIZATION,
    "LegalizeOps": Phase.LOWERING,
    "LowerRuntimeBuiltin": Phase.BUILD,
    "VMBuiltinLower": Phase.BUILD,
}


#: What TVM 0.27's pipeline does differently from phasec's phases, as
#: PHASES.md documents it ("TVM's pipeline, phase-checked"): not findings.
#: Keys name the deviation; :func:`documented_deviation` recognises them.
TVM_DOCUMENTED_DEVIATIONS: dict[str, str] = {
    "legalize-without-lambda-lift":
        "TVM's default pipeline never runs LambdaLift, so LegalizeOps runs in phase "
        "ingestion; harmless when there is nothing to lift (the module then satisfies "
        "the optimization phase)",
    "dataflow-after-legalize":
        "TVM's transition into lowering spans LegalizeOps and ToNonDataflow: dataflow "
        "blocks stay until ToNonDataflow (PH201)",
    "reshape-after-legalize":
        "RewriteDataflowReshape turns a legalized reshape back into R.reshape, which "
        "LowerRuntimeBuiltin lowers (PH202 naming reshape only, until LowerRuntimeBuiltin)",
}


def documented_deviation(verdict: "PassVerdict", ran: Sequence[str]) -> bool:
    """Whether every finding of ``verdict`` is one of TVM's documented
    deviations (:data:`TVM_DOCUMENTED_DEVIATIONS`), given the names of the TVM
    passes ``ran`` so far (the verdict's pass last). An unreadable module or
    any other finding is not."""
    if verdict.unreadable or verdict.ok:
        return False
    after_legalize = list(ran[ran.index("LegalizeOps"):]) if "LegalizeOps" in ran else []
    if verdict.order_error:
        # only LegalizeOps run straight from ingestion, with nothing left to lift
        if not (verdict.pass_name == "LegalizeOps" and "LambdaLift" not in ran
                and "LambdaLifting" not in ran and "ran in phase ingestion" in verdict.order_error
                and verdict.inferred is not None and verdict.inferred >= Phase.OPTIMIZATION):
            return False
    codes = {d.code for d in verdict.diagnostics}
    if "PH201" in codes and after_legalize and "ToNonDataflow" not in after_legalize:
        codes.discard("PH201")
    if ("PH202" in codes and "LowerRuntimeBuiltin" not in after_legalize
            and all("reshape" in d.message for d in verdict.diagnostics if d.code == "PH202")):
        codes.discard("PH202")
    return not codes


class PhaseCheckError(WellFormedError):
    """What ``PhaseCheck(raise_on_violation=True)`` raises: a
    :class:`~phasec.errors.WellFormedError` with the verdict's
    ``diagnostics`` and ``pass_name``. It is registered with TVM's FFI, so it
    comes out of ``tvm.compile`` as itself, not as TVM's ``RuntimeError``."""

    #: raised instances by message, for the copy TVM's FFI makes from the
    #: message alone on the way out (a few; the newest are kept)
    _raised: "OrderedDict[str, PhaseCheckError]" = OrderedDict()
    _lock = threading.Lock()

    def __init__(self, message: str, diagnostics: Sequence[Any] = (),
                 pass_name: str | None = None, verdict: "PassVerdict | None" = None) -> None:
        with PhaseCheckError._lock:
            original = PhaseCheckError._raised.get(message)
        if original is not None and not diagnostics and verdict is None:
            diagnostics, pass_name, verdict = (original.diagnostics, original.pass_name,
                                               original.verdict)
        super().__init__(message, diagnostics, pass_name)
        self.verdict = verdict

    def remember(self) -> "PhaseCheckError":
        with PhaseCheckError._lock:
            PhaseCheckError._raised[str(self)] = self
            while len(PhaseCheckError._raised) > 16:
                PhaseCheckError._raised.popitem(last=False)
        return self


class TVMNotAvailableError(InputError):
    """TVM is not installed (or not a release this bridge reads). An
    :class:`~phasec.errors.InputError`: the command line exits 2, as for a
    missing onnx or redis package."""


def require_tvm() -> Any:
    """The installed ``tvm`` package (its Relax half too), ready for the
    bridge; :class:`TVMNotAvailableError` saying how to install it otherwise."""
    try:
        import tvm
        from tvm import relax  # noqa: F401 - the Relax half must be there too
    except ImportError as exc:
        raise TVMNotAvailableError(
            f"phasec.tvm needs TVM {TESTED_TVM_VERSION}: pip install \"phasec[tvm]\" "
            f"({exc})") from None
    _register_stop_fusion(tvm)
    return tvm


def _stop_fusion_as_packed(mod: IRModule) -> IRModule:
    """``mod`` with each ``R.stop_fusion(x)`` as the packed call TVM's text
    spells it with. TVM's LegalizeOps keeps that call (a packed call, which
    TVM runs as such), while phasec reads it back as ``R.stop_fusion``, a
    high-level operator the lowering phase forbids (PH202): from lowering on,
    PhaseCheck verifies it as what it is in TVM's pipeline."""
    class _Packed(ExprMutator):
        def visit_call_(self, expr: Call) -> Any:
            expr = super().visit_call_(expr)
            if type(expr.op) is Op and expr.op.name == "relax.stop_fusion" \
                    and expr.struct_info is not None:
                return call_op("call_pure_packed", ExternFunc(STOP_FUSION_PACKED), *expr.args,
                               sinfo_args=[expr.struct_info], span=expr.span)
            return expr

    changed = {}
    for name, func in mod.relax_functions():
        new = _Packed().visit_expr(func)
        if new is not func:
            changed[name] = new
    if not changed:
        return mod
    return mod.with_functions({**dict(mod.functions), **changed})


def _register_stop_fusion(tvm: Any) -> None:
    """Give TVM's VM the packed function TVM's syntax spells ``R.stop_fusion``
    with (:data:`phasec.op.unary.STOP_FUSION_PACKED`): the identity,
    returning a copy (the result must not alias the operand, whose storage
    TVM's memory planning may reuse once the operand is dead)."""
    if tvm.get_global_func(STOP_FUSION_PACKED, allow_missing=True) is None:
        tvm.register_global_func(STOP_FUSION_PACKED,
                                 lambda x: tvm.runtime.tensor(x.numpy(), device=x.device))


def from_tvm(tvm_mod: Any, *, filename: str = "<tvm>",
             phase: "Phase | str | None" = None) -> IRModule:
    """A phasec :class:`IRModule` from a ``tvm.IRModule`` (through its TVMScript).

    The phase is TVM's module attribute ``phase`` when present. Otherwise:
    ingestion (``phase=None``, as for any module without one), the phase
    given, or with ``phase="infer"`` the highest phase the module satisfies
    (:func:`phasec.verifier.infer_phase`: a module TVM lowered comes back in
    the lowering or build phase). Syntax phasec does not read is a
    :class:`~phasec.errors.ParseError` naming the line of TVM's text.
    """
    tvm = require_tvm()
    if not isinstance(tvm_mod, tvm.IRModule):
        raise TypeError(f"from_tvm expects a tvm.IRModule, not {type(tvm_mod).__name__}")
    text, metadata = _script(tvm_mod)
    mod = parse(text, filename, metadata=metadata)
    if phase is None or "phase" in mod.attrs:
        return mod
    if phase == "infer":
        return mod.with_phase(verifier.infer_phase(mod))
    return mod.with_phase(phase)


_METADATA_REF = re.compile(r'metadata\["([\w.]+)"\]\[(\d+)\]')
_TOP_LEVEL_DEF = re.compile(r"^    def (\w+)\(", re.MULTILINE)


def _script(tvm_mod: Any) -> tuple[str, dict[str, list[Any]]]:
    """TVM's text of ``tvm_mod`` and the values of the constants it refers to.

    TVM prints every non-scalar Relax constant as ``metadata["key"][i]``.
    Printing the metadata section itself (``show_meta=True``) crashes TVM
    0.27 (a segmentation fault in ``ffi::ToJSONGraph``) for any module with a
    tensor constant, so the values are taken from the module instead: TVM
    numbers the distinct constants in the order it prints them, which is the
    order of the functions in the text and, within each, the left-to-right
    order of the expression tree.
    """
    from tvm import relax
    from tvm.ir.expr import Constant

    text = tvm_mod.script(show_meta=False)
    refs = _METADATA_REF.findall(text)
    if not refs:
        return text, {}
    keys = {key for key, _ in refs}
    if len(keys) != 1:
        raise PhasecError(f"TVM's text refers to several metadata kinds ({', '.join(sorted(keys))}); "
                          "phasec reads Relax tensor constants only")
    constants: list[Any] = []

    def visit(node: Any) -> None:
        # Scalars are printed inline (R.const(1.5, "float32")); so are the
        # integer immediates of shapes, which are constants in TVM 0.27 too.
        if (isinstance(node, Constant) and len(getattr(node.value, "shape", ())) > 0
                and not any(node.same_as(c) for c in constants)):
            constants.append(node)

    by_name = {gv.name_hint: func for gv, func in tvm_mod.functions.items()}
    for name in _TOP_LEVEL_DEF.findall(text):
        func = by_name.get(name)
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    used = {int(index) for _, index in refs}
    if used != set(range(len(constants))):
        raise PhasecError(f"TVM's text refers to {len(used)} metadata constants but the module "
                          f"holds {len(constants)}; phasec cannot match them up")
    return text, {keys.pop(): [c.value.numpy() for c in constants]}


def to_tvm(mod: IRModule) -> Any:
    """A ``tvm.IRModule`` from a phasec module (TVM parses phasec's TVMScript).

    The phase goes along as the module attribute ``phase``; TVM's
    well-formedness check runs as part of TVM's parsing.
    """
    tvm = require_tvm()
    if not isinstance(mod, IRModule):
        raise TypeError(f"to_tvm expects a phasec IRModule, not {type(mod).__name__}")
    if "phase" not in mod.attrs:  # spelt out, so that it survives the trip
        mod = mod.with_attr("phase", mod.phase.label)
    return tvm.script.from_source(mod.script(syntax="tvm"))


@dataclass(frozen=True)
class PassVerdict:
    """What :class:`PhaseCheck` found after one TVM pass.

    ``phase`` is the phase the module should be in after the pass (the
    tracked phase); ``inferred`` the highest phase it satisfies (None when
    not even structurally well-formed, or unreadable); ``diagnostics`` the
    verifier's errors at ``phase``; ``order_error`` a transition run from the
    wrong phase (e.g. LegalizeOps on a module never lambda-lifted);
    ``unreadable`` the parse error when phasec could not read TVM's text;
    ``documented`` that every finding is one of TVM's documented deviations
    (:func:`documented_deviation`).
    """

    index: int
    pass_name: str
    phase: Phase
    inferred: Phase | None
    diagnostics: tuple[Any, ...] = ()
    order_error: str | None = None
    unreadable: str | None = None
    documented: bool = False

    @property
    def ok(self) -> bool:
        return not self.diagnostics and self.order_error is None and self.unreadable is None

    def describe(self) -> str:
        head = (f"#{self.index} {self.pass_name}: phase {self.phase.label}, satisfies "
                f"{self.inferred.label if self.inferred is not None else 'none'}")
        lines = [head + (" (a documented TVM deviation)" if self.documented else "")]
        if self.order_error:
            lines.append(f"  phase order: {self.order_error}")
        if self.unreadable:
            lines.append(f"  unreadable: {self.unreadable}")
        lines += [f"  {d.code}: {d.message}" for d in self.diagnostics]
        return "\n".join(lines)


@dataclass(frozen=True)
class ResultVerdict:
    """What ``PhaseCheck(check_results=True)`` found after one TVM pass:
    ``status`` is ``"reference"`` (the module TVM started from, run in
    phasec's interpreter), ``"same"``, ``"changed"`` (``detail`` says where
    and by how much) or ``"cannot run"`` (``detail`` says why: unreadable
    text, or an interpreter failure on a stage that is no result change,
    such as a kernel calling TVM's runtime); never silently skipped."""

    index: int
    pass_name: str
    status: str
    detail: str = ""


class _ResultCheck:
    """Runs every stage TVM prints in phasec's interpreter on the same inputs
    and compares it with the first (float64 where it has a float64 form)."""

    def __init__(self, inputs: Any, tolerance: Tolerance | None, entry: str) -> None:
        self.inputs, self.tolerance, self.entry = inputs, tolerance or Tolerance(), entry
        self.args: tuple | None = None
        self.ref32: Any = None
        self.ref64: Any = None
        self.length = 1
        self.verdicts: list[ResultVerdict] = []

    @property
    def first_change(self) -> ResultVerdict | None:
        return next((v for v in self.verdicts if v.status == "changed"), None)

    def start(self, mod: IRModule, pass_name: str) -> None:
        index = len(self.verdicts)
        try:
            self.args = validation_inputs(mod, self.entry, self.inputs)
            self.ref32 = interp.run(mod, *(copy_value(a) for a in self.args), entry=self.entry)
        except Exception as exc:  # noqa: BLE001 - then nothing can be compared
            self.args = None
            self.verdicts.append(ResultVerdict(index, pass_name, "cannot run",
                                               f"the starting module: {_first_line(exc)}"))
            return
        try:
            self.ref64 = interp.run(widen(mod), *(as_float64(copy_value(a)) for a in self.args),
                                    entry=self.entry)
        except Exception:  # noqa: BLE001 - compared with its own results then
            self.ref64 = None
        self.length = rounding_length(mod)
        self.verdicts.append(ResultVerdict(index, f"(before {pass_name})", "reference",
                                           "float64" if self.ref64 is not None else "own types"))

    def check(self, mod: IRModule | None, pass_name: str, why_not: str | None = None) -> None:
        index = len(self.verdicts)
        if self.args is None or mod is None:
            reason = why_not or "no reference (the starting module could not run)"
            self.verdicts.append(ResultVerdict(index, pass_name, "cannot run", reason))
            return
        try:
            out = interp.run(mod, *(copy_value(a) for a in self.args), entry=self.entry)
        except Exception as exc:  # noqa: BLE001 - reported, not skipped
            self.verdicts.append(ResultVerdict(index, pass_name, "cannot run", _first_line(exc)))
            return
        problem = compare_outputs(out, self.ref32, self.ref64, self.tolerance, self.length)
        self.verdicts.append(ResultVerdict(index, pass_name,
                                           "same" if problem is None else "changed",
                                           problem.describe() if problem is not None else ""))


def _first_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text[:300]}"


@dataclass
class _State:
    phase: Phase | None = None
    last_text: str | None = None
    last_verdict: PassVerdict | None = None
    verdicts: list[PassVerdict] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)


class PhaseCheck:
    """A TVM pass instrument that phase-checks TVM's own pipeline.

    Use it like any TVM instrument::

        check = PhaseCheck()
        with tvm.transform.PassContext(opt_level=3, instruments=[check.instrument()]):
            tvm.compile(mod, target="llvm")
        print(check.report())

    The phase starts at the first module's ``phase`` attribute (ingestion
    when it has none). A TVM pass named in :data:`TVM_TRANSITIONS` moves it
    forward; one run from a phase other than the one phasec runs it in is
    reported (``order_error``). After every pass whose result still holds a
    Relax function (TVM's TIR pipeline after VM codegen is outside phasec's
    phases), the module is read back through its text and verified at the
    tracked phase.

    ``allow_documented`` (the default): a verdict whose findings are all
    deviations PHASES.md documents for TVM's pipeline
    (:data:`TVM_DOCUMENTED_DEVIATIONS`) is marked ``documented`` and is no
    violation (``first_violation``, ``raise_on_violation``); False treats it
    as any other. ``raise_on_violation``: raise a :class:`PhaseCheckError`
    (a :class:`~phasec.errors.WellFormedError`) at the first violation, which
    stops TVM's pipeline, instead of only recording it.
    """

    def __init__(self, *, raise_on_violation: bool = False, allow_documented: bool = True,
                 check_results: bool = False, inputs: Any = None,
                 tolerance: Tolerance | None = None, entry: str = "main") -> None:
        self.raise_on_violation = raise_on_violation
        self.allow_documented = allow_documented
        self._state = _State()
        # check_results: run every stage in phasec's interpreter (ResultVerdict)
        self.check_results = check_results
        self._results = _ResultCheck(inputs, tolerance, entry) if check_results else None

    @property
    def result_verdicts(self) -> list[ResultVerdict]:
        """With ``check_results``: one verdict per stage, the reference first."""
        return list(self._results.verdicts) if self._results is not None else []

    @property
    def first_result_change(self) -> ResultVerdict | None:
        """With ``check_results``: the first TVM pass that changed the results."""
        return self._results.first_change if self._results is not None else None

    def results_report(self) -> str:
        """With ``check_results``: the results after every TVM pass, then the verdict."""
        rows = [f"{v.index:3d} {v.pass_name:<28} {v.status}" + (f": {v.detail}" if v.detail
                                                               else "")
                for v in self.result_verdicts]
        change = self.first_result_change
        verdict = (f"first TVM pass that changed the results: {change.pass_name}"
                   if change is not None else "no TVM pass changed the results")
        return "\n".join([*rows, verdict])

    def before_pass(self, tvm_mod: Any, pass_name: str) -> None:
        """Record the module TVM starts from as the results' reference (what
        the instrument calls before the first pass)."""
        results = self._results
        if results is None or results.verdicts:
            return
        from tvm import relax

        if not any(isinstance(f, relax.Function) for f in tvm_mod.functions.values()):
            return
        try:
            text, metadata = _script(tvm_mod)
            mod = parse(text, f"<before {pass_name}>", metadata=metadata)
        except PhasecError as exc:
            results.verdicts.append(ResultVerdict(0, f"(before {pass_name})", "cannot run",
                                                  f"unreadable: {exc}"))
            return
        results.start(mod, pass_name)

    # -- results ------------------------------------------------------------
    @property
    def verdicts(self) -> list[PassVerdict]:
        """One verdict per TVM pass that left a Relax module, in order."""
        return list(self._state.verdicts)

    @property
    def violations(self) -> list[PassVerdict]:
        """The verdicts that are violations (documented deviations left out
        when ``allow_documented``)."""
        return [v for v in self._state.verdicts if self._is_violation(v)]

    @property
    def first_violation(self) -> PassVerdict | None:
        """The first pass after which the module broke its phase (or None)."""
        return next(iter(self.violations), None)

    def _is_violation(self, verdict: PassVerdict) -> bool:
        return not verdict.ok and not (verdict.documented and self.allow_documented)

    def report(self) -> str:
        """A readable summary: the phase after every pass, then the findings."""
        rows = [f"{v.index:3d} {v.pass_name:<28} {v.phase.label:<12} "
                f"{v.inferred.label if v.inferred is not None else '-':<12} "
                f"{'ok' if v.ok else 'VIOLATION' if self._is_violation(v) else 'documented'}"
                for v in self._state.verdicts]
        head = f"{'#':>3} {'pass':<28} {'phase':<12} {'satisfies':<12} verdict"
        findings = [v.describe() for v in self._state.verdicts if not v.ok]
        if not any(self._is_violation(v) for v in self._state.verdicts):
            findings.append("no phase violations")
        return "\n".join([head, *rows, "", *findings])

    # -- the instrument -------------------------------------------------------
    def instrument(self) -> Any:
        """The ``tvm.instrument`` object to put in a ``PassContext``."""
        tvm = require_tvm()
        check = self
        import tvm_ffi  # (TVM's FFI, installed with it)

        # so that PhaseCheckError crosses TVM's C++ pipeline as itself
        tvm_ffi.register_error("phasec.PhaseCheckError", PhaseCheckError)

        @tvm.instrument.pass_instrument
        class _PhaseCheckInstrument:
            def run_before_pass(self, mod: Any, info: Any) -> None:
                check.before_pass(mod, info.name)

            def run_after_pass(self, mod: Any, info: Any) -> None:
                check.after_pass(mod, info.name)

        return _PhaseCheckInstrument()

    def after_pass(self, tvm_mod: Any, pass_name: str) -> PassVerdict | None:
        """Check ``tvm_mod`` as the result of TVM pass ``pass_name`` (what the
        instrument calls; usable directly on dumped modules too)."""
        from tvm import relax

        self._state.ran.append(pass_name)
        if not any(isinstance(f, relax.Function) for f in tvm_mod.functions.values()):
            return None  # TVM's TIR pipeline: outside phasec's phases
        try:
            text, metadata = _script(tvm_mod)
        except PhasecError as exc:
            state = self._state
            return self._record(PassVerdict(len(state.verdicts), pass_name,
                                            state.phase or Phase.INGESTION, None,
                                            unreadable=str(exc)), None)
        return self._check_text(text, pass_name, metadata)

    def check_text(self, text: str, pass_name: str, *,
                   metadata: dict[str, list[Any]] | None = None) -> PassVerdict:
        """Check one module text as the result of ``pass_name`` (``metadata``:
        the values of TVM's ``metadata["key"][i]`` constants, as for
        :func:`~phasec.script.parser.parse`)."""
        self._state.ran.append(pass_name)
        return self._check_text(text, pass_name, metadata)

    def _check_text(self, text: str, pass_name: str,
                    metadata: dict[str, list[Any]] | None) -> PassVerdict:
        state = self._state
        index = len(state.verdicts)
        order_error = None
        target = TVM_TRANSITIONS.get(pass_name)
        if state.phase is None:
            state.phase = Phase.INGESTION
        if target is not None:
            expected_from = Phase(target.value - 1)
            if state.phase != expected_from:
                order_error = (f"{pass_name} moves a module from {expected_from.label} to "
                               f"{target.label}, but it ran in phase {state.phase.label}"
                               + (" (phasec's pipeline runs LambdaLifting first)"
                                  if state.phase < expected_from == Phase.OPTIMIZATION else ""))
            state.phase = max(state.phase, target)
        if (text == state.last_text and state.last_verdict is not None and order_error is None
                and state.last_verdict.phase == state.phase):  # a transition re-verifies
            prev = state.last_verdict
            verdict = PassVerdict(index, pass_name, state.phase, prev.inferred, prev.diagnostics,
                                  None, prev.unreadable)
            if self._results is not None:  # the same text: the same results
                last = self._results.verdicts[-1] if self._results.verdicts else None
                self._results.verdicts.append(ResultVerdict(
                    len(self._results.verdicts), pass_name,
                    last.status if last is not None and last.status != "reference" else "same",
                    "(unchanged text)"))
        else:
            try:
                mod = parse(text, f"<after {pass_name}>", metadata=metadata)
            except PhasecError as exc:
                verdict = PassVerdict(index, pass_name, state.phase, None, (), order_error,
                                      str(exc))
                if self._results is not None:
                    self._results.check(None, pass_name, f"unreadable: {exc}")
            else:
                if self._results is not None:
                    if not self._results.verdicts:
                        self._results.start(mod, pass_name)
                    else:
                        self._results.check(mod, pass_name)
                if index == 0 and "phase" in mod.attrs and target is None:
                    state.phase = mod.phase
                if state.phase >= Phase.LOWERING:
                    mod = _stop_fusion_as_packed(mod)
                diags = tuple(d for d in verifier.check(mod, state.phase)
                              if d.severity == verifier.ERROR)
                try:
                    inferred: Phase | None = verifier.infer_phase(mod)
                except PhasecError:
                    inferred = None
                verdict = PassVerdict(index, pass_name, state.phase, inferred, diags,
                                      order_error)
        return self._record(verdict, text)

    def _record(self, verdict: PassVerdict, text: str | None) -> PassVerdict:
        state = self._state
        if documented_deviation(verdict, state.ran):
            verdict = dataclasses.replace(verdict, documented=True)
        state.last_text, state.last_verdict = text, verdict
        state.verdicts.append(verdict)
        if self.raise_on_violation and self._is_violation(verdict):
            raise PhaseCheckError(
                f"phase check after TVM pass {verdict.pass_name}:\n{verdict.describe()}",
                verdict.diagnostics, verdict.pass_name, verdict).remember()
        return verdict


#: The files TVM's ``tvm.ir.instrument.DumpIR`` writes: the module after each
#: pass, ``NNN_PassName.py`` (NNN counts passes from 000; no file holds the
#: module TVM started from)
_DUMP_FILE = re.compile(r"^(\d{3,})_(.+)\.py$")
_RELAX_DEF = re.compile(r"^[ \t]*@R\.function\b", re.MULTILINE)


@dataclass
class DumpResults:
    """What :func:`check_dump_results` found: one :class:`ResultVerdict` per
    stage (the reference first), and the first TVM pass that changed them."""

    verdicts: list[ResultVerdict]
    reference: str

    @property
    def first_change(self) -> ResultVerdict | None:
        return next((v for v in self.verdicts if v.status == "changed"), None)

    def report(self) -> str:
        rows = [f"{v.index:3d} {v.pass_name:<28} {v.status}" + (f": {v.detail}" if v.detail
                                                               else "")
                for v in self.verdicts]
        change = self.first_change
        cannot = sum(v.status == "cannot run" for v in self.verdicts)
        verdict = (f"first TVM pass that changed the results: {change.pass_name}"
                   if change is not None else "no TVM pass changed the results")
        note = (f" ({cannot} stage{'s' if cannot != 1 else ''} could not run: "
                "listed above)" if cannot else "")
        return "\n".join([f"reference: {self.reference}", *rows, verdict + note])


def check_dump_results(directory: str, *, start: IRModule | None = None, inputs: Any = None,
                       tolerance: Tolerance | None = None, entry: str = "main") -> DumpResults:
    """Run every stage TVM's ``DumpIR`` instrument wrote to ``directory`` in
    phasec's interpreter, on the same inputs, and compare each with the
    reference: ``start`` (the module given to ``tvm.compile``, so that the
    first pass is checked too), else the first stage that runs (the passes
    up to it are then unchecked). Stages are taken in their counter's order;
    a stage phasec cannot read (TVM's text with ``metadata[...]`` constants
    DumpIR leaves out, syntax phasec lacks), one with no Relax function (TVM's
    TIR pipeline) or one the interpreter fails on is ``cannot run``, with
    the reason -- never skipped."""
    try:
        names = os.listdir(directory)
    except OSError as exc:
        raise InputError(f"cannot read the DumpIR directory {directory!r}: "
                         f"{exc.strerror or exc}") from exc
    stages = sorted(((int(m.group(1)), m.group(2), n) for n in names
                     if (m := _DUMP_FILE.match(n))), key=lambda s: s[0])
    if not stages:
        raise InputError(f"{directory!r} holds no file of TVM's DumpIR instrument "
                         "(NNN_PassName.py)")
    check = _ResultCheck(inputs, tolerance, entry)
    reference = "the module TVM started from" if start is not None else ""
    if start is not None:
        check.start(start, stages[0][1])
    for _, pass_name, name in stages:
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            check.check(None, pass_name, f"unreadable file: {exc}")
            continue
        if not _RELAX_DEF.search(text):
            check.check(None, pass_name, "no Relax function (TVM's TIR pipeline): nothing "
                                         "the interpreter runs as the model")
            continue
        try:
            mod = parse(text, path)
        except PhasecError as exc:
            check.check(None, pass_name, f"unreadable: {str(exc).splitlines()[0][:300]}")
            continue
        if start is None and check.args is None:  # the first stage that runs is the reference
            check.start(mod, pass_name)
            last = check.verdicts[-1]
            check.verdicts[-1] = dataclasses.replace(last, pass_name=pass_name)
            if check.args is not None:
                reference = f"the module after {name} (the passes up to it are not checked)"
            continue
        check.check(mod, pass_name)
    return DumpResults(check.verdicts, reference or "none (no stage ran)")

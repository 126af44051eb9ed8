"""Which pass changed my results? Result validation after passes.

:class:`ValidateResults` is a pass instrument: the module the pipeline
starts from is run in the reference interpreter on fixed inputs (the
user's, or seeded ones fitted to the parameters), once in its own types and
once made float64 (:func:`~phasec.transform.results.widen`); after each pass
(or every N-th, or each phase transition) the module runs again on the same
inputs and its outputs are compared with that reference, within bounds that
leave room for rounding (:class:`~phasec.transform.results.Tolerance`). The
first pass whose result leaves the bounds is reported as a
:class:`ResultChange` (pass, phase, output, index, by how much, the
functions it changed, before and after) in a :class:`ResultsChangedError`::

    from phasec import transform as T

    check = T.ValidateResults(every=1)
    with T.PassContext(instruments=[check]):
        lowered = phasec.lower(mod)      # raises ResultsChangedError on a change
    print(check.summary())

When checks are sparser than every pass (``every=4``, ``"transitions"``),
a change is localized by bisection over the modules the unchecked passes
produced (they are kept), so the blamed pass is the same as with
``every=1``, at O(log N) more interpreter runs.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from phasec import interp
from phasec.errors import InputError, PassError, PhasecError
from phasec.ir import IRModule, Phase, structural_equal
from phasec.transform.context import PassContext
from phasec.transform.info import PassConfigError
from phasec.transform.instruments import PassInstrument
from phasec.transform.results import (
    Mismatch, Tolerance, as_float64, compare_outputs, copy_value, leaves, rounding_length,
    validation_inputs, widen, worst_ratio,
)

if TYPE_CHECKING:
    from phasec.interp import KernelRunner
    from phasec.transform.info import PassInfo

__all__ = ["ValidateResults", "ResultChange", "ResultsChangedError", "StageCheck",
           "ROUNDING_PASSES", "changed_functions"]

#: Passes of phasec's pipeline expected to change float results by rounding
#: (and why); every other pass should keep them bit for bit. A change within
#: the tolerance is never blamed; this table is what the report says about
#: the pass it names.
ROUNDING_PASSES: dict[str, str] = {
    "FoldConstant": "constant operators are evaluated at compile time (numpy references, "
                    "possibly in another order than the kernels)",
    "LegalizeOps": "operators become loop nests: reductions are tiled and vectorized (another "
                   "summation order), convolutions may use Winograd's algorithm, exp/erf/tanh "
                   "use phasec's vectorizable approximations (within 4 ulps)",
    "PackConstantWeights": "constant weights are transformed at build time (Winograd's "
                           "G g G^T rounds differently from the transform at run time)",
}


@dataclass
class StageCheck:
    """One interpreter run of :class:`ValidateResults`: after which pass,
    in which phase, how long it took and how close to its bound the worst
    float element came (``ratio`` 1.0 is the bound)."""

    pass_name: str
    phase: Phase
    seconds: float
    ok: bool
    ratio: float = 0.0


@dataclass
class ResultChange:
    """The first pass that changed the results (what :class:`ValidateResults` reports)."""

    pass_name: str
    pass_spec: str
    position: int                      # 1-based, among the passes that ran at top level
    phase_before: Phase
    phase_after: Phase
    mismatch: Mismatch
    previous: Any                      # the value at that place before the pass
    reference: str                     # what the values were compared with
    before: IRModule
    after: IRModule
    functions: tuple[str, ...] = ()    # functions the pass changed
    localized_by: str = ""             # how the pass was found (check or bisection)
    rounding_expected: bool = False

    def describe(self, max_lines: int = 40) -> str:
        """The change as text: what, where, how much, and the functions before and after."""
        m = self.mismatch
        phases = (self.phase_before.label if self.phase_before == self.phase_after
                  else f"{self.phase_before.label} -> {self.phase_after.label}")
        lines = [f"pass {self.pass_spec} (#{self.position}, phase {phases}) changed the "
                 f"results: {m.describe()}"]
        if not m.reason:
            lines.append(f"  before the pass: {self.previous!r}; reference "
                         f"({self.reference}): {m.expected!r}; after: {m.got!r}")
        note = ROUNDING_PASSES.get(self.pass_name)
        lines.append(f"  {self.pass_name} is expected to change rounding ({note}), but not by "
                     "this much" if note else
                     f"  {self.pass_name} is not expected to change results at all")
        if self.localized_by:
            lines.append(f"  found by {self.localized_by}")
        if self.functions:
            lines.append(f"  functions it changed: {', '.join(self.functions)}")
            for name in self.functions[:2]:
                for title, mod in (("before", self.before), ("after", self.after)):
                    lines.append(f"  -- {name} {title} {self.pass_name}:")
                    lines += _excerpt(mod, name, max_lines)
        return "\n".join(lines)


def _excerpt(mod: IRModule, name: str, max_lines: int) -> list[str]:
    """The lines of function ``name`` in ``mod``'s TVMScript."""
    if name not in mod:
        return ["     (not in the module)"]
    lines = mod.script().splitlines()
    start = next((i for i, t in enumerate(lines) if t.startswith(f"    def {name}(")), None)
    if start is None:
        return ["     (not printed)"]
    end = start + 1
    while start > 0 and lines[start - 1].startswith("    @"):
        start -= 1
    while end < len(lines) and not lines[end].startswith(("    @", "    def ")):
        end += 1
    # (long lines are inline constants: their start says enough)
    body = [t if len(t) <= 160 else t[:150] + " ..." for t in lines[start:end] if t.strip()]
    if len(body) > max_lines:
        body = body[:max_lines] + [f"    ... ({len(body) - max_lines} more lines)"]
    return ["   " + t for t in body]


def changed_functions(before: IRModule, after: IRModule) -> tuple[str, ...]:
    """Names of the functions that differ between two modules (added ones
    included), Relax functions first."""
    names = [n for n in after if n not in before or not structural_equal(before[n], after[n])]
    names += [n for n in before if n not in after]
    return tuple(sorted(names, key=lambda n: (n not in after or
                                              type(after[n]).__name__ != "Function", n)))


class ResultsChangedError(PassError):
    """A pass changed the module's results; ``change`` says which and how."""

    def __init__(self, change: ResultChange) -> None:
        self.change = change
        super().__init__(change.describe(), change.pass_name, change.phase_before)


@dataclass
class _Step:
    info: "PassInfo"
    spec: str
    module: IRModule
    phase_before: Phase
    position: int


@dataclass
class _Baseline:
    module: IRModule
    args: tuple
    ref32: Any
    ref64: Any | None
    length: int
    reference: str
    notes: list[str] = field(default_factory=list)


class ValidateResults(PassInstrument):
    """After each pass (or every N-th, or each transition), run the module in
    the interpreter and compare its results with the module the pipeline
    started from.

    Args:
        inputs: the entry function's arguments (a sequence), or some of them
            by parameter name (the rest are drawn, seeded by ``seed``); see
            :func:`~phasec.transform.results.validation_inputs`.
        rtol, atol: the tolerance's relative and absolute terms;
            ``tolerance`` gives all of its terms instead.
        every: ``1`` checks after every pass, ``N`` after every N-th pass,
            ``"transitions"`` after each phase transition; the module the
            pipeline ends with is always checked (when the context exits).
        entry: the function to run.
        dims: values of symbolic dimensions (default: from given arrays,
            else small: :data:`~phasec.transform.results.DEFAULT_DIM`).
        float64: compare with a float64 evaluation of the starting module
            (when it has one; else with its own results).
        kernel_runner: how PrimFuncs run (default: the exact TIR interpreter,
            slow on large tensors; ``phasec.backend.kernel_runner.llvm_kernel_runner()``
            compiles them with LLVM, bounds-checked).
        raise_on_change: raise :class:`ResultsChangedError` at the first
            change (else record it in :attr:`change` and stop checking).

    Only passes run at top level are checked (not passes a pass body calls).
    """

    def __init__(self, inputs: Sequence[Any] | Mapping[str, Any] | None = None, *,
                 rtol: float | None = None, atol: float | None = None,
                 every: int | str = 1, entry: str = "main", seed: int = 0,
                 dims: Mapping[str, int] | None = None, tolerance: Tolerance | None = None,
                 float64: bool = True, kernel_runner: "KernelRunner | None" = None,
                 raise_on_change: bool = True) -> None:
        if every != "transitions" and (isinstance(every, bool) or not isinstance(every, int)
                                       or every < 1):
            raise PassConfigError(f"ValidateResults(every={every!r}): expected an int >= 1 "
                                  "or 'transitions'")
        base = tolerance or Tolerance()
        self.tolerance = Tolerance(base.rtol if rtol is None else rtol,
                                   base.atol if atol is None else atol, base.noise, base.growth)
        self.inputs = inputs
        self.every = every
        self.entry = entry
        self.seed = seed
        self.dims = dict(dims or {})
        self.float64 = float64
        self.kernel_runner = kernel_runner
        self.raise_on_change = raise_on_change
        self.reset()

    # -- state ------------------------------------------------------------------
    def reset(self) -> None:
        """Forget everything (done when a context holding it is entered)."""
        self.change: ResultChange | None = None
        self.checks: list[StageCheck] = []
        self.passes_run = 0
        self.seconds = 0.0
        self._base: _Baseline | None = None
        self._stack: list[str] = []
        self._steps: list[_Step] = []       # passes run since the last good check
        self._good: IRModule | None = None  # the module of the last good check
        self._good_out: Any = None
        self._pending: _Step | None = None

    @property
    def notes(self) -> list[str]:
        return list(self._base.notes) if self._base is not None else []

    @property
    def start_module(self) -> IRModule | None:
        """The module the pipeline started from (after the first pass started)."""
        return self._base.module if self._base is not None else None

    @property
    def args(self) -> tuple:
        """The inputs the modules ran on (after the first pass started)."""
        return self._base.args if self._base is not None else ()

    # -- hooks ------------------------------------------------------------------
    def enter_pass_ctx(self) -> None:
        self.reset()

    def run_before_pass(self, mod: IRModule, info: "PassInfo") -> None:
        self._stack.append(info.name)
        if len(self._stack) == 1 and self._base is None and self.change is None:
            self._start(mod)

    def run_after_pass(self, mod: IRModule, info: "PassInfo") -> None:
        if not self._stack:
            return
        self._stack.pop()
        if self._stack or self._base is None or self.change is not None:
            return
        self.passes_run += 1
        before = self._steps[-1].module if self._steps else self._good
        if mod is before:
            return  # the pass returned its input: the results cannot have changed
        if self._pending is not None:  # its verification never came: check it now
            self._pending = None
            self._check()
            if self.change is not None:
                return
            before = self._good
        step = _Step(info, _spec(info), mod, before.phase if before is not None else mod.phase,
                     self.passes_run)
        self._steps.append(step)
        due = (info.is_transition if self.every == "transitions"
               else self.passes_run % int(self.every) == 0)
        if not due:
            return
        ctx = PassContext.current()
        if ctx.verify == "each" or (ctx.verify == "transitions" and info.is_transition):
            self._pending = step  # check once the verifier accepted it
        else:
            self._check()

    def run_after_verify(self, mod: IRModule, info: "PassInfo", seconds: float,
                         stage: str) -> None:
        step = self._pending
        if stage == "output" and step is not None and step.module is mod:
            self._pending = None
            self._check()

    def run_on_error(self, mod: IRModule, info: "PassInfo", error: BaseException) -> None:
        if self._stack and self._stack[-1] == info.name:
            self._stack.pop()
        self._pending = None

    def exit_pass_ctx(self) -> None:
        self._pending = None
        if self._steps and self.change is None and self._base is not None:
            self._check()

    # -- checking ---------------------------------------------------------------
    def _run(self, mod: IRModule, args: tuple) -> Any:
        return interp.run(mod, *(copy_value(a) for a in args), entry=self.entry,
                          kernel_runner=self.kernel_runner)

    def _start(self, mod: IRModule) -> None:
        start = time.perf_counter()
        args = validation_inputs(mod, self.entry, self.inputs, self.seed, self.dims)
        try:
            ref32 = self._run(mod, args)
        except PhasecError as exc:
            raise InputError(f"cannot validate results: the interpreter fails on the module "
                             f"the pipeline starts from, with these inputs ({exc}); give "
                             "inputs it runs on") from exc
        notes: list[str] = []
        ref64, reference = None, "the starting module"
        if self.float64:
            try:
                ref64 = interp.run(widen(mod), *(as_float64(copy_value(a)) for a in args),
                                   entry=self.entry, kernel_runner=self.kernel_runner)
                reference = "float64 evaluation of the starting module"
            except Exception as exc:  # noqa: BLE001 - not every module has a float64 twin
                notes.append(f"no float64 evaluation ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0][:160]}); compared with the "
                             "starting module's own results")
        self._base = _Baseline(mod, args, ref32, ref64, rounding_length(mod), reference, notes)
        self._good, self._good_out = mod, ref32
        self._record("(start)", mod.phase, time.perf_counter() - start, True, 0.0)

    def _record(self, name: str, phase: Phase, seconds: float, ok: bool, ratio: float) -> None:
        self.checks.append(StageCheck(name, phase, seconds, ok, ratio))
        self.seconds += seconds

    def _outcome(self, mod: IRModule) -> tuple[Any, Mismatch | None, float]:
        """Run ``mod``; its outputs, the first mismatch and the worst ratio."""
        base = self._base
        assert base is not None
        try:
            out = self._run(mod, base.args)
        except Exception as exc:  # noqa: BLE001 - any failure is a change of results
            text = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            return None, Mismatch("output", (), None, None, float("inf"), 0.0, 1, 1,
                                  f"the interpreter fails on it: {text[:300]}"), float("inf")
        problem = compare_outputs(out, base.ref32, base.ref64, self.tolerance, base.length)
        return out, problem, worst_ratio(out, base.ref32, base.ref64, self.tolerance,
                                         base.length)

    def _check(self) -> None:
        steps = self._steps
        start = time.perf_counter()
        out, problem, ratio = self._outcome(steps[-1].module)
        last = steps[-1]
        self._record(last.info.name, last.module.phase, time.perf_counter() - start,
                     problem is None, ratio)
        if problem is None:
            self._good, self._good_out, self._steps = last.module, out, []
            return
        # Bisection over the unchecked passes: steps[lo] is the last known good
        # (-1: the last checked module), steps[hi] the first known bad.
        lo, hi, bad_problem, prev_out = -1, len(steps) - 1, problem, self._good_out
        while hi - lo > 1:
            mid = (lo + hi) // 2
            t0 = time.perf_counter()
            mid_out, mid_problem, mid_ratio = self._outcome(steps[mid].module)
            self._record(steps[mid].info.name, steps[mid].module.phase,
                         time.perf_counter() - t0, mid_problem is None, mid_ratio)
            if mid_problem is None:
                lo, prev_out = mid, mid_out
            else:
                hi, bad_problem = mid, mid_problem
        self._blame(steps, lo, hi, bad_problem, prev_out)

    def _blame(self, steps: list[_Step], lo: int, hi: int, problem: Mismatch,
               prev_out: Any) -> None:
        base = self._base
        assert base is not None
        step = steps[hi]
        before = steps[lo].module if lo >= 0 else self._good
        assert before is not None
        previous = None
        if problem.index is not None and not problem.reason:
            value = dict(leaves(prev_out)).get(problem.output)
            try:
                previous = value[problem.index].item() if problem.index else value.item()
            except Exception:  # noqa: BLE001 - shown as unknown
                previous = None
        localized = ("a check after the pass" if len(steps) == 1 else
                     f"bisection over the {len(steps)} passes since the last good check")
        self.change = ResultChange(
            step.info.name, step.spec, step.position, step.phase_before, step.module.phase,
            problem, previous, base.reference, before, step.module,
            changed_functions(before, step.module), localized,
            step.info.name in ROUNDING_PASSES)
        self._steps = []
        if self.raise_on_change:
            raise ResultsChangedError(self.change)

    # -- reporting ----------------------------------------------------------------
    def summary(self) -> str:
        """One line per interpreter run, the overhead, the notes and the verdict."""
        rows = [f"  {c.pass_name:<28} {c.phase.label:<13} {c.seconds * 1e3:9.1f} ms  "
                f"{'ok' if c.ok else 'CHANGED'}" + (f"  (worst {c.ratio:.2g} of bound)"
                                                    if c.ok and c.ratio else "")
                for c in self.checks]
        head = (f"result validation: {len(self.checks)} interpreter run(s) for "
                f"{self.passes_run} pass(es), {self.seconds:.2f} s")
        if self._base is not None:
            head += (f"; reference: {self._base.reference}; rounding length K = "
                     f"{self._base.length}")
        verdict = (self.change.describe() if self.change is not None
                   else "no pass changed the results")
        notes = [f"  note: {n}" for n in self.notes]
        return "\n".join([head, *rows, *notes, verdict])


def _spec(info: "PassInfo") -> str:
    return info.name

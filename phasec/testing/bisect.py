"""Which pass introduced the difference? Bisection over a pipeline.

:func:`run_stages` runs a pipeline and keeps the module after every pass
(modules are immutable, so this costs no copies). :func:`bisect_stages`
then finds the first stage whose results leave the reference's bounds by
bisection: O(log passes) interpreter runs instead of one per pass, which is
what makes it usable on a large model. ``phasec bisect MODEL``
(:mod:`phasec.cli.bisect`) is its command line: the reference is ONNX
Runtime for an ``.onnx`` model, the interpreter on the module itself
otherwise, and the compiled model (the VM) is what is checked first.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from phasec import interp
from phasec.backend.kernel_runner import llvm_kernel_runner
from phasec.interp import KernelRunner
from phasec.ir import IRModule, Phase
from phasec.pipeline import lower, pipeline_from, run_pipeline
from phasec.transform import PassContext, PassInstrument
from phasec.transform.results import (
    Mismatch, Tolerance, compare_outputs, copy_value, leaves, rounding_length,
)
from phasec.transform.validate import ROUNDING_PASSES, ResultChange, changed_functions

__all__ = ["Stage", "BisectResult", "run_stages", "bisect_stages"]


@dataclass(frozen=True)
class Stage:
    """The module after one pass (``index`` 0 is the starting module, with
    ``pass_name`` ``"(start)"``)."""

    index: int
    pass_name: str
    module: IRModule
    phase_before: Phase


class _Record(PassInstrument):
    def __init__(self, start: IRModule) -> None:
        self.stages = [Stage(0, "(start)", start, start.phase)]
        self.depth = 0

    def run_before_pass(self, mod: IRModule, info: Any) -> None:
        self.depth += 1

    def run_after_pass(self, mod: IRModule, info: Any) -> None:
        self.depth -= 1
        if self.depth == 0:
            last = self.stages[-1]
            self.stages.append(Stage(len(self.stages), info.name, mod, last.module.phase))

    def run_on_error(self, mod: IRModule, info: Any, error: BaseException) -> None:
        self.depth = max(0, self.depth - 1)


def run_stages(mod: IRModule, pipeline: Any = None, opt_level: int = 2, *,
               to_build: bool = True) -> list[Stage]:
    """Lower ``mod`` (default pipeline, or ``pipeline``) and return every
    stage: the starting module, then the module after each top-level pass.
    ``to_build=False``: run ``pipeline`` as given (as ``phasec opt`` does),
    in a context of its own (no instrument of the current one)."""
    record = _Record(mod)
    if to_build:
        lower(mod, opt_level, pipeline=pipeline, instruments=[record])
    else:
        run_pipeline(pipeline_from(pipeline, opt_level), mod,
                     PassContext(opt_level=opt_level, instruments=[record]))
    return record.stages


@dataclass
class BisectResult:
    """What :func:`bisect_stages` found.

    ``change`` names the first pass whose result leaves the bounds (None:
    every stage agrees with the reference, or the starting module already
    does not: ``start_problem``). ``runs`` counts the interpreter runs and
    ``probes`` lists (stage index, agrees) in the order they were made.
    """

    stages: list[Stage]
    change: ResultChange | None
    start_problem: Mismatch | None = None
    runs: int = 0
    seconds: float = 0.0
    probes: list[tuple[int, bool]] = field(default_factory=list)

    def describe(self) -> str:
        head = (f"bisection over {len(self.stages) - 1} passes: {self.runs} interpreter "
                f"run(s), {self.seconds:.2f} s; stages probed: "
                + ", ".join(f"#{i} {self.stages[i].pass_name} "
                            f"{'ok' if ok else 'differs'}" for i, ok in self.probes))
        if self.start_problem is not None:
            return (f"{head}\nthe starting module already differs from the reference (no pass "
                    f"is to blame: the importer, or the reference): "
                    f"{self.start_problem.describe()}")
        if self.change is None:
            return f"{head}\nevery stage agrees with the reference"
        return f"{head}\nfirst pass introducing the difference:\n{self.change.describe()}"


def bisect_stages(stages: Sequence[Stage], args: Sequence[Any], ref32: Any,
                  ref64: Any | None = None, *, reference: str = "the reference",
                  tolerance: Tolerance | None = None, entry: str = "main",
                  kernel_runner: KernelRunner | None = None,
                  final_differs: bool = True) -> BisectResult:
    """Find the first stage whose interpreter results leave the bounds of
    ``ref32`` (``ref64``: its float64 version, see
    :func:`~phasec.transform.results.compare_outputs`).

    The starting stage is checked first (when it already differs, no pass
    is blamed); with ``final_differs`` the last stage is taken to differ
    (the compiled model did) and is checked too, as every probe is.
    """
    tol = tolerance or Tolerance()
    runner = kernel_runner or llvm_kernel_runner()
    length = rounding_length(stages[0].module)
    result = BisectResult(list(stages), None)
    outputs: dict[int, Any] = {}
    start_time = time.perf_counter()

    def probe(i: int) -> Mismatch | None:
        result.runs += 1
        try:
            out = interp.run(stages[i].module, *(copy_value(a) for a in args), entry=entry,
                             kernel_runner=runner)
        except Exception as exc:  # noqa: BLE001 - a stage that fails differs
            first = str(exc).splitlines()[0] if str(exc) else ""
            problem: Mismatch | None = Mismatch(
                "output", (), None, None, float("inf"), 0.0, 1, 1,
                f"the interpreter fails on it: {type(exc).__name__}: {first[:300]}")
        else:
            outputs[i] = out
            problem = compare_outputs(out, ref32, ref64, tol, length)
        result.probes.append((i, problem is None))
        return problem

    first = probe(0)
    if first is not None:
        result.start_problem = first
        result.seconds = time.perf_counter() - start_time
        return result
    lo, hi = 0, len(stages) - 1
    bad = probe(hi)
    if bad is None:
        result.seconds = time.perf_counter() - start_time
        return result
    while hi - lo > 1:
        mid = (lo + hi) // 2
        problem = probe(mid)
        if problem is None:
            lo = mid
        else:
            hi, bad = mid, problem
    before, after = stages[lo].module, stages[hi].module
    previous = None
    if not bad.reason and lo in outputs:
        value = dict(leaves(outputs[lo])).get(bad.output)
        try:
            previous = value[bad.index].item() if bad.index else value.item()
        except Exception:  # noqa: BLE001 - shown as unknown
            previous = None
    name = stages[hi].pass_name
    result.change = ResultChange(name, name, hi, stages[hi].phase_before, after.phase, bad,
                                 previous, reference, before, after,
                                 changed_functions(before, after),
                                 f"bisection ({result.runs} interpreter runs)",
                                 name in ROUNDING_PASSES)
    result.seconds = time.perf_counter() - start_time
    return result

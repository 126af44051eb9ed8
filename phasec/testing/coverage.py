"""What a fuzzing campaign reached: operators drawn, passes run per phase,
transitions, VM runs.

The operator list is the registry's (``phasec.op.list_ops``), read when
the table is made, so operators registered after this file was written are
listed (as not drawn, until the generator's table has an entry for them)
instead of silently missing. Counts merge (``+``) so the per-worker results
of ``phasec fuzz --jobs N`` add up to one table.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any

from phasec.ir.expr import Call, Op
from phasec.ir.module import IRModule
from phasec.ir.visitor import ExprVisitor
from phasec.ir.phase import Phase
from phasec.op import list_ops
from phasec.testing._optable import UNGENERATED

__all__ = ["Coverage", "ops_in", "registered_compute_ops"]


def registered_compute_ops() -> list[str]:
    """The registry's compute operators (the ones programs are made of)."""
    return sorted(o.name for o in list_ops() if o.category == "compute")


class _OpCounter(ExprVisitor):
    def __init__(self) -> None:
        self.counts: collections.Counter = collections.Counter()

    def visit_call_(self, call: Call) -> None:
        super().visit_call_(call)
        if isinstance(call.op, Op):
            self.counts[call.op.name] += 1


def ops_in(mod: IRModule) -> collections.Counter:
    """Operator name -> number of calls in the Relax functions of ``mod``."""
    counter = _OpCounter()
    for _, func in mod.relax_functions():
        counter.visit_expr(func)
    return counter.counts


@dataclass
class Coverage:
    """Counters of one campaign (or of several, merged with ``+``).

    Attributes:
        ops: operator -> calls in the generated programs.
        op_programs: operator -> programs containing it.
        passes: ``"phase:Pass"`` -> times the pass ran in that phase.
        transitions: transition pass -> times it moved a module on.
        vm_runs: sequences whose result ran on the VM.
        reach_added: sequences that got transitions added to reach a named
            pass's phase (restricted pools).
    """

    ops: collections.Counter = field(default_factory=collections.Counter)
    op_programs: collections.Counter = field(default_factory=collections.Counter)
    passes: collections.Counter = field(default_factory=collections.Counter)
    transitions: collections.Counter = field(default_factory=collections.Counter)
    vm_runs: int = 0
    reach_added: int = 0

    def add_program(self, mod: IRModule) -> None:
        counts = ops_in(mod)
        self.ops.update(counts)
        self.op_programs.update(counts.keys())

    def add_report(self, report: Any) -> None:
        """Count what one :class:`~phasec.testing.properties.SequenceReport` ran."""
        for name, phase, transition in report.ran:
            self.passes[f"{phase.label}:{name}"] += 1
            if transition:
                self.transitions[name] += 1
        self.vm_runs += bool(report.vm_ran)

    def __add__(self, other: "Coverage") -> "Coverage":
        return Coverage(self.ops + other.ops, self.op_programs + other.op_programs,
                        self.passes + other.passes, self.transitions + other.transitions,
                        self.vm_runs + other.vm_runs, self.reach_added + other.reach_added)

    def missing_ops(self, universe: list[str] | None = None) -> list[str]:
        """Registered compute operators never drawn."""
        names = universe if universe is not None else registered_compute_ops()
        return [n for n in names if not self.ops.get(n)]

    def as_dict(self) -> dict[str, Any]:
        universe = registered_compute_ops()
        return {
            "operators": {"registered": len(universe),
                          "drawn": len(universe) - len(self.missing_ops(universe)),
                          "calls": dict(sorted(self.ops.items())),
                          "programs": dict(sorted(self.op_programs.items())),
                          "never_drawn": self.missing_ops(universe)},
            "passes": dict(sorted(self.passes.items())),
            "transitions": dict(sorted(self.transitions.items())),
            "vm_runs": self.vm_runs,
            "reach_added": self.reach_added,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Coverage":
        ops = data.get("operators", {})
        return cls(collections.Counter(ops.get("calls", {})),
                   collections.Counter(ops.get("programs", {})),
                   collections.Counter(data.get("passes", {})),
                   collections.Counter(data.get("transitions", {})),
                   int(data.get("vm_runs", 0)), int(data.get("reach_added", 0)))

    def short(self) -> str:
        """One line for the summary."""
        universe = registered_compute_ops()
        drawn = len(universe) - len(self.missing_ops(universe))
        return (f"operators {drawn}/{len(universe)} drawn, "
                f"{len(self.passes)} pass/phase pairs, transitions "
                f"{sum(self.transitions.values())}, VM runs {self.vm_runs}")

    def table(self) -> str:
        """The full table (``phasec fuzz --coverage``)."""
        universe = registered_compute_ops()
        lines = [f"coverage: operators drawn {len(universe) - len(self.missing_ops(universe))} "
                 f"of {len(universe)} registered compute operators"]
        width = max((len(n) for n in universe), default=10)
        lines.append(f"  {'operator':{width}s}  {'calls':>7s}  {'programs':>8s}")
        for name in universe:
            note = ""
            if not self.ops.get(name):
                why = UNGENERATED.get(name)
                note = f"   never drawn{': ' + why if why else ''}"
            lines.append(f"  {name:{width}s}  {self.ops.get(name, 0):7d}  "
                         f"{self.op_programs.get(name, 0):8d}{note}")
        others = sorted(set(self.ops) - set(universe))
        if others:
            lines.append("  other operators (calls): " + ", ".join(
                f"{n} {self.ops[n]}" for n in others))
        lines.append("coverage: passes run per phase")
        by_phase: dict[str, list[tuple[str, int]]] = collections.defaultdict(list)
        for key, count in self.passes.items():
            phase, name = key.split(":", 1)
            by_phase[phase].append((name, count))
        for phase in Phase:
            rows = sorted(by_phase.get(phase.label, []))
            lines.append(f"  {phase.label:12s} " + (", ".join(f"{n} {c}" for n, c in rows)
                                                    or "(none)"))
        lines.append("coverage: transitions reached  " + (", ".join(
            f"{n} {c}" for n, c in sorted(self.transitions.items())) or "(none)"))
        lines.append(f"coverage: VM runs {self.vm_runs}; sequences given transitions to reach "
                     f"a named pass's phase {self.reach_added}")
        return "\n".join(lines)

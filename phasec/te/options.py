"""The knobs of the schedule hints (see :mod:`phasec.te`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from phasec.target.tuning import TargetTuning, host_tuning

__all__ = ["ScheduleOptions"]


@dataclass(frozen=True)
class ScheduleOptions:
    """Knobs of the schedule hints (see the docstring of :mod:`phasec.te`)."""

    parallel: bool = True
    vectorize: bool = True
    tile: bool = True
    decompose_reduction: bool = True
    #: None: the target's ``parallel_min_work`` (:mod:`phasec.target.tuning`)
    parallel_min_work: int | None = None
    max_row: int = 4096
    #: tile and block sizes (None: :func:`phasec.target.tuning.host_tuning`)
    tuning: "TargetTuning | None" = None
    #: names of placeholders whose values are constants of the module (a
    #: model's weights): a matrix-vector product streams such a B operand
    #: from micro-panels packed once per build (see
    #: :func:`phasec.te.schedules.gemm_plan.plan_gemm`)
    constant_inputs: frozenset[str] = frozenset()

    @property
    def target(self) -> "TargetTuning":
        """The tuning the schedules use."""
        return self.tuning if self.tuning is not None else host_tuning()

    @property
    def min_parallel_work(self) -> int:
        """Scalar operations a loop nest needs to be made parallel."""
        if self.parallel_min_work is not None:
            return self.parallel_min_work
        return self.target.parallel_min_work

    @staticmethod
    def make(hints: "bool | ScheduleOptions | Mapping[str, Any]") -> "ScheduleOptions":
        """Options from ``schedule_hints``: True (all on), False or None (the
        canonical form), options, or a mapping of their fields."""
        if isinstance(hints, ScheduleOptions):
            return hints
        if hints is True:
            return ScheduleOptions()
        if hints is False or hints is None:
            return ScheduleOptions(False, False, False, False)
        return ScheduleOptions(**dict(hints))

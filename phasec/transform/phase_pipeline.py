"""Pipelines with phase windows: the extension points for user passes.

A :class:`Pipeline` is an ordered list of passes. Walking the phases through
it (the transitions move the module on) splits it into one *window* per
phase reached: the stretch during which the module is in that phase. Users
add their passes to a window (e.g. target-specific lowering at the end of
the lowering window)::

    pipeline.insert(Phase.LOWERING, passes=[MyKernelTweak()], at="end")

A pass that does not accept the window's phase, or that is a transition
(which would move the phase under the passes after it), is rejected with a
:class:`PhaseError` and the pipeline is left unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable

from phasec.errors import PhaseError
from phasec.ir import IRModule, Phase
from phasec.transform.context import PassContext
from phasec.transform.info import PassConfigError, describe_phases, phase_after
from phasec.transform.pass_infra import Pass
from phasec.transform.sequential import Sequential, _RunEverything, as_pass_list

__all__ = ["Pipeline"]


class Pipeline:
    """An editable, phase-validated list of passes.

    ``insert`` edits the pipeline in place and returns it (so calls chain).
    Build pipelines in functions (``def my_pipeline(): ...``) and a shared
    default cannot be changed by accident; :meth:`copy` makes a copy.
    """

    def __init__(self, passes: Iterable[Pass] = (), *, start_phase: Phase | int | str =
                 Phase.INGESTION, name: str = "pipeline") -> None:
        self._passes: list[Pass] = list(passes)
        self.start_phase = Phase.parse(start_phase)
        self.name = name
        self.validate()

    @property
    def passes(self) -> tuple[Pass, ...]:
        return tuple(self._passes)

    def copy(self) -> "Pipeline":
        return Pipeline(self._passes, start_phase=self.start_phase, name=self.name)

    def to_sequential(self, opt_level: int = 0) -> Sequential:
        return Sequential(self._passes, opt_level=opt_level, name=self.name)

    def __call__(self, mod: IRModule) -> IRModule:
        """Run the pipeline on ``mod`` (as a Sequential, in the current context)."""
        return self.to_sequential()(mod)

    def spec(self) -> str:
        return self.to_sequential().spec()

    def validate(self, ctx: PassContext | None = None) -> Phase:
        """Walk the phases through the pipeline from ``start_phase``; return
        the final phase or raise :class:`PhaseError` naming the first misfit.
        Without ``ctx`` nothing is considered skipped."""
        return self.to_sequential().validate(self.start_phase,
                                             ctx if ctx is not None else _RunEverything())

    def windows(self) -> dict[Phase, tuple[int, int]]:
        """Phase -> (start, end) insertion indices into :attr:`passes`: the
        module is in that phase before ``passes[start]`` ... ``passes[end-1]``."""
        phase = self.start_phase
        start = 0
        out: dict[Phase, tuple[int, int]] = {}
        for i, p in enumerate(self._passes):
            after = phase_after(p.info, phase) if phase in p.info.phases else phase
            if after != phase:
                out[phase] = (start, i)
                phase, start = after, i + 1
        out[phase] = (start, len(self._passes))
        return out

    def insert(self, phase: Phase | int | str, passes: Iterable[Pass], at: str = "end") -> "Pipeline":
        """Add ``passes`` at the start or end of ``phase``'s window.

        Raises :class:`PhaseError` when the pipeline never has the module in
        ``phase`` or a pass does not fit the window, :class:`PassConfigError`
        for a bad ``at``. On error the pipeline is unchanged.
        """
        target = Phase.parse(phase)
        if at not in ("start", "end"):
            raise PassConfigError(f"Pipeline.insert(at={at!r}): expected 'start' or 'end'")
        new = list(as_pass_list(passes, "Pipeline.insert(passes=...)"))
        windows = self.windows()
        if target not in windows:
            reached = " -> ".join(p.label for p in windows)
            raise PhaseError(f"pipeline {self.name!r} never has the module in phase "
                             f"{target.label} (it goes {reached}); cannot insert passes there")
        for p in new:
            info = p.info
            if info.is_transition:
                raise PhaseError(
                    f"cannot insert {info.name} into the {target.label} window of pipeline "
                    f"{self.name!r}: it is a transition pass (to {info.transition_to.label}); "
                    "extension passes must keep the module's phase")
            if target not in info.phases:
                raise PhaseError(
                    f"cannot insert {info.name} into the {target.label} window of pipeline "
                    f"{self.name!r}: it accepts {describe_phases(info.phases)}")
        start, end = windows[target]
        index = start if at == "start" else end
        saved = self._passes
        self._passes = saved[:index] + new + saved[index:]
        try:
            self.validate()  # required passes of the new passes must fit too
        except BaseException:
            self._passes = saved
            raise
        return self

    def __repr__(self) -> str:
        return f"Pipeline({self.spec()!r}, start_phase={self.start_phase.label})"

"""Sequential: an ordered list of passes, validated as a whole before any runs.

A sequence is checked by walking the phases through it (transitions
included, the passes each one requires resolved from the registry) before
anything runs; a misordered sequence is a :class:`PhaseError` naming the
first offending pass and its position.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from phasec.errors import PassError, PhaseError
from phasec.ir import IRModule, Phase
from phasec.transform.context import PassContext
from phasec.transform.info import (
    ALL_PHASES, PassConfigError, PassInfo, describe_phases, phase_after, phase_mismatch_message,
)
from phasec.transform.pass_infra import Pass, notify_instruments
from phasec.transform.registry import get_pass

__all__ = ["Sequential", "PlanStep", "as_pass_list"]


@dataclass(frozen=True)
class PlanStep:
    """One step of a validated :class:`Sequential`.

    ``position`` is the 1-based place in the sequence ("2.3" inside a nested
    Sequential); ``skip_reason`` is non-empty for a skipped pass;
    ``required_by`` is set for a pass run because another requires it.
    """

    pass_: Pass
    position: str
    phase_before: Phase
    phase_after: Phase
    skip_reason: str = ""
    required_by: PassInfo | None = None

    @property
    def runs(self) -> bool:
        return not self.skip_reason


def as_pass_list(passes: Pass | Iterable[Pass], what: str) -> tuple[Pass, ...]:
    """``passes`` (one pass, kept whole if a Sequential, or a collection of
    passes) as a tuple; ``what`` names the receiver in the error otherwise."""
    if isinstance(passes, Pass):
        return (passes,)
    if not isinstance(passes, Iterable):
        raise PassConfigError(f"{what} takes a list of passes, not {type(passes).__name__}")
    items = tuple(passes)
    for i, p in enumerate(items, 1):
        if not isinstance(p, Pass):
            hint = (" (a pass class: instantiate it)" if isinstance(p, type)
                    and issubclass(p, Pass) else "")
            raise PassConfigError(f"{what}: item {i} is {type(p).__name__}{hint}, not a Pass")
    return items


def _still_in_effect(name: str, owner: PassInfo, steps: list[PlanStep]) -> bool:
    """True when ``name`` ran and only other requirements of ``owner`` ran since.

    Any other pass in between may have undone its work (ConvertToDataflow
    after ToNonDataflow), so then the requirement runs again.
    """
    for step in reversed(steps):
        if not step.runs:
            continue
        ran = step.pass_.info.name
        if ran == name:
            return True
        if ran not in owner.required:
            return False
    return False


class _RunEverything:
    """A stand-in context for static analysis: nothing is skipped."""

    disabled_pass: frozenset[str] = frozenset()

    @staticmethod
    def pass_enabled(info: PassInfo) -> tuple[bool, str]:
        return True, ""


#: Sequential names that phasec gives itself; messages leave them out.
_ANONYMOUS_SEQUENTIALS = frozenset({"sequential", "opt", "pipeline"})


class Sequential(Pass):
    """An ordered list of passes, validated as a whole before any runs.

    Running it: the phases are walked through every pass (transitions
    included, required passes resolved from the registry); a misordered
    sequence raises :class:`PhaseError` naming the first offending pass and
    its position before anything has run. Then the passes run in order, each
    with its full per-pass protocol. Passes above the context's opt_level
    or named in ``disabled_pass`` are skipped, as in TVM, except transition
    passes: they always run, and disabling one is an error.

    Unlike a leaf pass, a Sequential is not itself reported to instruments.
    """

    __slots__ = ("passes", "_opt_level", "_name", "_required", "_info")

    def __init__(self, passes: Iterable[Pass] = (), opt_level: int = 0,
                 name: str = "sequential", required: Iterable[str] = ()) -> None:
        items = as_pass_list(passes, f"Sequential {name!r}")
        # Validate the declaration now (name, opt_level, required).
        PassInfo(name, opt_level, ALL_PHASES, None, tuple(required))
        self.passes: tuple[Pass, ...] = items
        self._opt_level = opt_level
        self._name = name
        self._required = tuple(required)
        self._info: PassInfo | None = None

    @classmethod
    def option_defaults(cls) -> dict[str, Any]:
        return {}

    @property
    def name(self) -> str:
        return self._name

    @property
    def info(self) -> PassInfo:  # type: ignore[override]
        """Derived: the phases it can start in (static walk, nothing skipped)
        and, if it contains transitions, the phase it ends in."""
        if self._info is None:
            starts = []
            final: Phase | None = None
            for start in Phase:
                try:
                    end = self._walk(start, _RunEverything(), [], "")
                except PhaseError:
                    continue
                starts.append(start)
                if end != start:
                    final = end
            self._info = PassInfo(self._name, self._opt_level, frozenset(starts),
                                  final if starts else None, self._required)
        return self._info

    def __len__(self) -> int:
        return len(self.passes)

    def __iter__(self) -> Iterator[Pass]:
        return iter(self.passes)

    def __repr__(self) -> str:
        return f"Sequential({self.spec()!r}, name={self._name!r})"

    # -- validation --------------------------------------------------------
    def plan(self, phase: Phase | int | str = Phase.INGESTION,
             ctx: PassContext | None = None) -> list[PlanStep]:
        """Validate the sequence for a module starting in ``phase`` and return
        the steps it would take under ``ctx`` (default: the current context).

        Raises :class:`PhaseError` for a misordered sequence or a disabled
        transition pass, :class:`PassConfigError` for an unknown required pass.
        """
        steps: list[PlanStep] = []
        self._walk(Phase.parse(phase), ctx if ctx is not None else PassContext.current(),
                   steps, "")
        return steps

    def validate(self, phase: Phase | int | str = Phase.INGESTION,
                 ctx: PassContext | None = None) -> Phase:
        """Validate statically (see :meth:`plan`); return the phase at the end."""
        steps = self.plan(phase, ctx)
        return steps[-1].phase_after if steps else Phase.parse(phase)

    def _walk(self, phase: Phase, ctx: Any, steps: list[PlanStep], prefix: str,
              outer_skip: str = "", outer_disabled: str | None = None) -> Phase:
        for index, p in enumerate(self.passes, 1):
            pos = f"{prefix}{index}"
            if isinstance(p, Sequential):
                skip, disabled = outer_skip, outer_disabled
                if not skip:
                    enabled, why = ctx.pass_enabled(PassInfo(p._name, p._opt_level))
                    if not enabled:
                        skip = f"enclosing Sequential {p._name!r}: {why}"
                        disabled = p._name if p._name in ctx.disabled_pass else None
                if not skip:
                    owner = PassInfo(p._name, p._opt_level, ALL_PHASES, None, p._required)
                    phase = self._add_required(owner, pos, phase, steps, (p._name,))
                phase = p._walk(phase, ctx, steps, pos + ".", skip, disabled)
                continue
            info = p.info
            skip, disabled = outer_skip, outer_disabled
            if not skip:
                enabled, skip = ctx.pass_enabled(info)
                disabled = info.name if info.name in ctx.disabled_pass else None
            if skip and info.is_transition:
                if disabled is not None:
                    raise self._error(
                        f"{self._describe()}: {info.name} at position {pos} is a transition pass "
                        f"({describe_phases(info.phases)} -> {info.transition_to.label}) and "
                        f"cannot be disabled (PassContext disabled_pass names {disabled!r}); "
                        "nothing has run", info.name, pos)
                skip = ""  # transitions run whatever the opt_level
            if skip:
                steps.append(PlanStep(p, pos, phase, phase, skip))
                continue
            phase = self._add_required(info, pos, phase, steps, (info.name,))
            self._check(info, pos, phase, steps)
            after = phase_after(info, phase)
            steps.append(PlanStep(p, pos, phase, after))
            phase = after
        return phase

    def _add_required(self, owner: PassInfo, pos: str, phase: Phase, steps: list[PlanStep],
                      chain: tuple[str, ...]) -> Phase:
        """Append the steps of ``owner``'s required passes (theirs first).

        A required pass whose effect still holds is not run again (like an
        LLVM analysis that is still available): see :func:`_still_in_effect`.
        """
        if not owner.required:
            return phase
        for rname in owner.required:
            if _still_in_effect(rname, owner, steps):
                continue
            if rname in chain:
                raise PassConfigError(f"required passes form a cycle: "
                                      f"{' -> '.join(chain + (rname,))}")
            try:
                rp = get_pass(rname)
            except PassConfigError as exc:
                raise PassConfigError(f"{owner.name} requires {rname!r}, which cannot be "
                                      f"created: {exc}") from None
            phase = self._add_required(rp.info, pos, phase, steps, chain + (rname,))
            self._check(rp.info, pos, phase, steps, required_by=owner)
            after = phase_after(rp.info, phase)
            steps.append(PlanStep(rp, pos, phase, after, required_by=owner))
            phase = after
        return phase

    def _describe(self) -> str:
        return f"Sequential {self._name!r}"

    @staticmethod
    def _error(message: str, pass_name: str, position: str) -> PhaseError:
        err = PhaseError(message)
        err.pass_name = pass_name  # type: ignore[attr-defined]
        err.position = position  # type: ignore[attr-defined]
        return err

    def _check(self, info: PassInfo, pos: str, phase: Phase, steps: list[PlanStep],
               required_by: PassInfo | None = None) -> None:
        if phase in info.phases:
            return
        last = next((s for s in reversed(steps) if s.runs and s.phase_after != s.phase_before),
                    None)
        context = (f" at that point (after {last.pass_.info.name} at position {last.position})"
                   if last is not None else " at that point (the phase it starts in)")
        # Explain in terms of the pass the user wrote: a required pass that
        # cannot run is reported through the pass that requires it.
        shown = info
        if required_by is not None and required_by.phases and phase not in required_by.phases:
            shown = required_by
        reason = phase_mismatch_message(shown, phase, where="the module would be in",
                                        context=context)
        if shown is info and required_by is not None:
            reason = (f"{required_by.name} requires {info.name}, which cannot run there: "
                      + reason)
        owner = (required_by or info).name
        # pass_name is the leaf pass whose phase check fails (what running the
        # steps one by one would hit); the message, and requested_pass, name
        # the pass the user wrote.
        err = self._error(f"misordered passes{self._where()}: {owner} at position {pos} "
                          f"cannot run. {reason}. Nothing has run.", info.name, pos)
        err.requested_pass = owner  # type: ignore[attr-defined]
        raise err

    def _where(self) -> str:
        """`` in Sequential 'x'`` for a name the user chose; empty for the default names."""
        return "" if self._name in _ANONYMOUS_SEQUENTIALS else f" in Sequential {self._name!r}"

    # -- running -----------------------------------------------------------
    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            raise PassError(f"{self._describe()} must be called on an IRModule, not "
                            f"{type(mod).__name__}", self._name, None)
        ctx = PassContext.current()
        steps = self.plan(mod.phase, ctx)
        for step in steps:
            info = step.pass_.info
            if step.skip_reason:
                notify_instruments(ctx, "run_on_skip", mod, info, step.skip_reason)
                continue
            if step.required_by is not None:
                notify_instruments(ctx, "run_before_required", mod, info, step.required_by)
            mod = step.pass_(mod)
        return mod

    def spec(self) -> str:
        """Its leaf passes' specs, comma-separated (a textual pipeline)."""
        return ",".join(p.spec() for p in self.flatten())

    def flatten(self) -> list[Pass]:
        """The leaf passes, nested Sequentials expanded."""
        out: list[Pass] = []
        for p in self.passes:
            out.extend(p.flatten() if isinstance(p, Sequential) else (p,))
        return out

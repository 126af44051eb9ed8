"""Pass metadata (:class:`PassInfo`) and the phase vocabulary of the pass infra.

A pass declares the phases it accepts and, if it is a transition pass, the
phase it moves the module to. The helpers here normalise those declarations
and produce the messages users see when a pass is called in the wrong phase.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from phasec.errors import PhasecError
from phasec.ir import Phase

__all__ = [
    "PassInfo", "PassConfigError", "ALL_PHASES", "TRANSITION_PASSES", "PhasesLike",
    "as_phases", "describe_phases", "phase_mismatch_message", "phase_after", "is_int_at_least",
    "declare_pass_name", "declared_pass_names", "on_first_lookup", "unknown_name_message",
]

#: Every phase; pass ``phases=ALL_PHASES`` (or ``"all"``) for phase-agnostic passes.
ALL_PHASES: frozenset[Phase] = frozenset(Phase)

#: The canonical transition pass into each phase (the design's phase ordering).
#: Used to tell users what to run when a module is in too early a phase.
TRANSITION_PASSES: Mapping[Phase, str] = {
    Phase.OPTIMIZATION: "LambdaLifting",
    Phase.LOWERING: "LegalizeOps",
    Phase.BUILD: "VMBuiltinLower",
}

PhasesLike = Union[Phase, int, str, Iterable[Union[Phase, int, str]]]

# Pass names must survive a round trip through a textual pipeline spec.
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")


#: The name of every pass declared in this process: each PassInfo made (by
#: @module_pass, @function_pass, Sequential...) and each name registered.
#: PassContext checks disabled_pass/required_pass against it.
_DECLARED_PASSES: set[str] = set()
#: Run before the declarations are read (once each, in order): the pass
#: registry, a higher module, installs the lazy import of the built-in passes.
_LOADERS: list[Callable[[], None]] = []


def declare_pass_name(name: str) -> None:
    """Record that a pass named ``name`` exists (PassInfo does it for every pass)."""
    _DECLARED_PASSES.add(name)


def on_first_lookup(load: Callable[[], None]) -> None:
    """Have ``load`` run before declarations are looked up (it declares the
    built-in passes and their config options; it must be idempotent)."""
    _LOADERS.append(load)


def load_declarations() -> None:
    """Run the loaders of :func:`on_first_lookup`."""
    for load in _LOADERS:
        load()


def declared_pass_names() -> frozenset[str]:
    """The names of every pass declared so far, the built-in ones included."""
    load_declarations()
    return frozenset(_DECLARED_PASSES)


def unknown_name_message(kind: str, name: str, known: Iterable[str],
                         kinds: str | None = None) -> str:
    """``unknown pass 'LegalizeOp' (did you mean LegalizeOps?); known passes: ...``:
    the one wording of an unknown name, for passes (pipeline specs, the
    registry, PassContext) and config options. ``kinds`` is the plural of
    ``kind`` (default: ``kind + "s"``)."""
    names = sorted(known)
    close = difflib.get_close_matches(name, names, n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return (f"unknown {kind} {name!r}{hint}; known {kinds or kind + 's'}: "
            f"{', '.join(names) if names else '(none)'}")


def is_int_at_least(value: Any, minimum: int) -> bool:
    """True for an int (not a bool) >= ``minimum``: the check of integer options."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


class PassConfigError(PhasecError, ValueError):
    """A pass, pipeline or pass context was configured wrongly.

    Raised for an unknown pass name or option, a malformed textual pipeline,
    an invalid ``PassContext`` argument and a malformed pass declaration.
    It is a :class:`ValueError` as well, so generic callers can catch it.
    """


def as_phases(value: PhasesLike) -> frozenset[Phase]:
    """Normalise a phase declaration to a frozenset of :class:`Phase`.

    Accepts one phase (a Phase, its number or its name), ``"all"``/``"*"``,
    or any iterable of phases.
    """
    if isinstance(value, str) and value.strip().lower() in ("all", "*", "any"):
        return ALL_PHASES
    if isinstance(value, (Phase, int, str)):
        items: Iterable[Any] = (value,)
    elif isinstance(value, Iterable):
        items = value
    else:
        raise PassConfigError(f"phases must be a phase or a collection of phases, "
                              f"not {type(value).__name__}; {Phase.choices()}")
    try:
        return frozenset(Phase.parse(p) for p in items)
    except ValueError as exc:
        raise PassConfigError(str(exc)) from None


def describe_phases(phases: Iterable[Phase]) -> str:
    """``"optimization"``, ``"ingestion or optimization"``, ``"any phase"``..."""
    ordered = sorted(set(phases))
    if not ordered:
        return "no phase"
    if len(ordered) == len(Phase):
        return "any phase"
    labels = [p.label for p in ordered]
    if len(labels) == 1:
        return labels[0]
    return ", ".join(labels[:-1]) + " or " + labels[-1]


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", then ".join(names)


def phase_mismatch_message(info: "PassInfo", phase: Phase, *, where: str = "the module is in",
                           context: str = "") -> str:
    """The explanation of why ``info`` cannot run on a module in ``phase``.

    Says what the pass accepts, where the module is, and what to do: the
    transitions to run first, or (phases only move forward) that the pass
    must run before the transition that left its phases behind. ``where``
    and ``context`` frame the module's phase ("but {where} {phase}{context}").
    """
    head = (f"{info.name} expects phase {describe_phases(info.phases)}, "
            f"but {where} {phase.label}{context}")
    target = info.transition_to
    if target is not None and phase >= target:
        # A transition the module has already made (e.g. LambdaLifting twice).
        return (f"{head}: {info.name} is the transition into {target.label}, which the "
                f"module has already made; remove this {info.name}")
    later = sorted(p for p in info.phases if p > phase)
    if later:
        target = later[0]
        steps = [TRANSITION_PASSES.get(Phase(v), f"the transition into {Phase(v).label}")
                 for v in range(phase + 1, target + 1)]
        return f"{head}: run {_join(steps)} first"
    if not info.phases:
        return f"{head}: it accepts no phase at all"
    last = max(info.phases)
    nxt = Phase(last + 1)
    transition = TRANSITION_PASSES.get(nxt, f"the transition into {nxt.label}")
    return (f"{head}: phases only move forward, so {info.name} must run before "
            f"{transition} (which moves the module to {nxt.label})")


@dataclass(frozen=True)
class PassInfo:
    """What the pass infrastructure knows about a pass.

    Attributes:
        name: the pass name (registry key, spec spelling, trace label).
        opt_level: the minimum ``PassContext.opt_level`` at which a
            ``Sequential`` runs the pass (transition passes always run).
        phases: the phases in which the pass accepts a module.
        transition_to: for transition passes, the phase the infrastructure
            sets after the pass has run; None for every other pass.
        required: names of registered passes a ``Sequential`` runs right
            before this one.
        verify_input: whether verify-each checks the module handed to the
            pass first. False for passes whose job is to repair what the
            verifier rejects (``Normalize`` puts programs built by hand into
            A-normal form).
    """

    name: str
    opt_level: int = 0
    phases: frozenset[Phase] = field(default=ALL_PHASES)
    transition_to: Phase | None = None
    required: tuple[str, ...] = ()
    verify_input: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise PassConfigError(
                f"invalid pass name {self.name!r}: use letters, digits, '_', '.' or '-', "
                "starting with a letter or '_'")
        declare_pass_name(self.name)
        if not is_int_at_least(self.opt_level, 0):
            raise PassConfigError(f"pass {self.name}: opt_level must be an int >= 0, "
                                  f"not {self.opt_level!r}")
        object.__setattr__(self, "phases", as_phases(self.phases))
        if self.transition_to is not None:
            try:
                target = Phase.parse(self.transition_to)
            except ValueError as exc:
                raise PassConfigError(f"pass {self.name}: transition_to: {exc}") from None
            object.__setattr__(self, "transition_to", target)
            if not self.phases:
                raise PassConfigError(f"transition pass {self.name} must accept at least one phase")
            if target <= max(self.phases):
                raise PassConfigError(
                    f"transition pass {self.name} moves to {target.label} but accepts "
                    f"{describe_phases(self.phases)}: phases only move forward, so "
                    "transition_to must come after every accepted phase")
        required = (self.required,) if isinstance(self.required, str) else tuple(self.required)
        for r in required:
            if not isinstance(r, str) or not _NAME_RE.match(r):
                raise PassConfigError(f"pass {self.name}: required pass names must be "
                                      f"strings, got {r!r}")
        if self.name in required:
            raise PassConfigError(f"pass {self.name} cannot require itself")
        object.__setattr__(self, "required", required)

    @property
    def is_transition(self) -> bool:
        return self.transition_to is not None

    def __str__(self) -> str:
        text = f"{self.name} (opt_level={self.opt_level}, phases={describe_phases(self.phases)}"
        if self.transition_to is not None:
            text += f", transition_to={self.transition_to.label}"
        if self.required:
            text += f", required={list(self.required)}"
        return text + ")"


def phase_after(info: PassInfo, phase: Phase) -> Phase:
    """The phase a module is in after ``info`` ran on it in ``phase``."""
    return info.transition_to if info.transition_to is not None else phase

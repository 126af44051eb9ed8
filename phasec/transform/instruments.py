"""Pass instruments: hooks the pass infrastructure calls around every pass.

The five TVM hooks (``enter_pass_ctx``, ``exit_pass_ctx``, ``should_run``,
``run_before_pass``, ``run_after_pass``) keep their meaning. phasec adds four
notifications with no-op defaults, so the built-in instruments can show what
is specific to phasec: verification time, skipped passes, required passes and
failures.

Instruments see leaf passes (module, function and PrimFunc passes), not the
``Sequential`` containers around them, so nothing is counted twice.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field, replace
from collections.abc import Iterable
from typing import IO, TYPE_CHECKING, Any, Callable

from phasec.ir import Phase, structural_equal

if TYPE_CHECKING:
    from phasec.ir import IRModule
    from phasec.transform.info import PassInfo

__all__ = ["PassInstrument", "pass_instrument", "PrintBeforeAll", "PrintAfterAll",
           "PassTiming", "TimingRow", "PassTrace", "TraceEntry"]


class PassInstrument:
    """Base class of instruments; override the hooks you need.

    Hook order for one pass call: ``should_run`` (every instrument; any False
    skips the pass, then ``run_on_skip``), ``run_before_pass``, the pass,
    ``run_after_pass`` (with the result, whose phase is already set), then
    ``run_after_verify`` when the result was verified. If the pass raises,
    ``run_on_error`` replaces ``run_after_pass``; if its input or its result
    fails verification, ``run_on_error`` follows ``run_after_verify``.
    """

    def enter_pass_ctx(self) -> None:
        """Called when a PassContext holding this instrument is entered."""

    def exit_pass_ctx(self) -> None:
        """Called when that PassContext is exited."""

    def should_run(self, mod: "IRModule", info: "PassInfo") -> bool:
        """Return False to skip the pass (not allowed for transition passes)."""
        return True

    def run_before_pass(self, mod: "IRModule", info: "PassInfo") -> None:
        """Called just before the pass body runs, with its input."""

    def run_after_pass(self, mod: "IRModule", info: "PassInfo") -> None:
        """Called after the pass body returned, with its result."""

    # -- phasec additions ----------------------------------------------------
    def run_after_verify(self, mod: "IRModule", info: "PassInfo", seconds: float,
                         stage: str) -> None:
        """Called after the verifier checked ``mod`` for pass ``info``.

        ``stage`` is ``"output"`` for the pass's result or ``"input"`` when the
        infrastructure verified a module no verified pass had produced (so
        that a violation already present is not blamed on the pass).
        Called before a verification failure is raised, too.
        """

    def run_on_skip(self, mod: "IRModule", info: "PassInfo", reason: str) -> None:
        """Called when a pass is skipped (opt_level, disabled_pass, should_run)."""

    def run_on_error(self, mod: "IRModule", info: "PassInfo", error: BaseException) -> None:
        """Called when the pass raised (instead of ``run_after_pass``) or when
        its input or result failed verification."""

    def run_before_required(self, mod: "IRModule", info: "PassInfo",
                            required_by: "PassInfo") -> None:
        """Called when a ``Sequential`` is about to run ``info`` because
        ``required_by`` lists it in ``required``."""


_HOOKS = ("enter_pass_ctx", "exit_pass_ctx", "should_run", "run_before_pass",
          "run_after_pass", "run_after_verify", "run_on_skip", "run_on_error",
          "run_before_required")


def pass_instrument(cls: type | None = None) -> Any:
    """Class decorator (as TVM's): make ``cls`` a :class:`PassInstrument`.

    The class defines any of the hooks; the others are no-ops.
    """

    def wrap(c: type) -> type:
        if not isinstance(c, type):
            raise TypeError("@pass_instrument decorates a class")
        if issubclass(c, PassInstrument):
            return c
        if not any(hasattr(c, h) for h in _HOOKS):
            raise TypeError(f"@pass_instrument class {c.__name__} defines none of the hooks "
                            f"{', '.join(_HOOKS)}")
        return type(c.__name__, (c, PassInstrument),
                    {"__module__": c.__module__, "__qualname__": c.__qualname__,
                     "__doc__": c.__doc__})

    return wrap if cls is None else wrap(cls)


class _Printer(PassInstrument):
    """Dumps go to standard error by default: standard output is for results."""

    def __init__(self, file: IO[str] | None = None) -> None:
        self._file = file

    def _print(self, text: str) -> None:
        print(text, file=self._file if self._file is not None else sys.stderr)


class PrintBeforeAll(_Printer):
    """Print the pass name, the module's phase and its IR before every pass."""

    def run_before_pass(self, mod: "IRModule", info: "PassInfo") -> None:
        self._print(f"# Before {info.name} (phase {mod.phase.label})\n{mod.script()}")


class PrintAfterAll(_Printer):
    """Print the pass name, the resulting phase and the IR after every pass.

    ``only``: print after these passes alone (``--print-after PASS``);
    ``only_changed``: print only when the pass changed the module
    (``--print-after-change``; compared structurally with its input).
    """

    def __init__(self, file: IO[str] | None = None, only: Iterable[str] | None = None,
                 only_changed: bool = False) -> None:
        super().__init__(file)
        self.only = frozenset(only) if only is not None else None
        self.only_changed = only_changed
        self._inputs: list["IRModule"] = []

    def run_before_pass(self, mod: "IRModule", info: "PassInfo") -> None:
        if self.only_changed:
            self._inputs.append(mod)

    def run_on_error(self, mod: "IRModule", info: "PassInfo", error: BaseException) -> None:
        if self.only_changed and self._inputs:
            self._inputs.pop()

    def run_after_pass(self, mod: "IRModule", info: "PassInfo") -> None:
        before = self._inputs.pop() if self.only_changed and self._inputs else None
        if self.only is not None and info.name not in self.only:
            return
        if before is not None:
            if mod is before or structural_equal(mod, before):
                return
        self._print(f"# After {info.name} (phase {mod.phase.label})\n{mod.script()}")


# -- timing -------------------------------------------------------------------
@dataclass
class TimingRow:
    """One line of a :class:`PassTiming` table (times in seconds)."""

    name: str
    phases: list[Phase] = field(default_factory=list)
    calls: int = 0
    seconds: float = 0.0
    verify_seconds: float = 0.0
    verify_calls: int = 0
    share: float = 0.0


class PassTiming(PassInstrument):
    """Wall-clock time per pass, with the verifier's time shown separately.

    Data is reset when a context holding the instrument is entered and kept
    after it exits, so read :meth:`render` or :meth:`rows` afterwards. Pass
    time covers the body only (``run_before_pass`` to ``run_after_pass``);
    verification is outside that window and has its own column. ``share`` is
    the fraction of top-level pass time (passes called from within another
    pass count inside their caller, too).
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self.reset()

    def reset(self) -> None:
        self._rows: dict[str, TimingRow] = {}
        self._stack: list[tuple[str, float]] = []
        self.total_seconds = 0.0
        self.verify_seconds = 0.0

    def _row(self, name: str) -> TimingRow:
        row = self._rows.get(name)
        if row is None:
            row = self._rows[name] = TimingRow(name)
        return row

    def enter_pass_ctx(self) -> None:
        self.reset()

    def run_before_pass(self, mod: "IRModule", info: "PassInfo") -> None:
        row = self._row(info.name)
        if mod.phase not in row.phases:
            row.phases.append(mod.phase)
        self._stack.append((info.name, self._clock()))

    def _finish(self) -> None:
        name, start = self._stack.pop()
        elapsed = self._clock() - start
        row = self._row(name)
        row.calls += 1
        row.seconds += elapsed
        if not self._stack:
            self.total_seconds += elapsed

    def run_after_pass(self, mod: "IRModule", info: "PassInfo") -> None:
        self._finish()

    def run_on_error(self, mod: "IRModule", info: "PassInfo", error: BaseException) -> None:
        if self._stack and self._stack[-1][0] == info.name:
            self._finish()

    def run_after_verify(self, mod: "IRModule", info: "PassInfo", seconds: float,
                         stage: str) -> None:
        row = self._row(info.name)
        row.verify_seconds += seconds
        row.verify_calls += 1
        self.verify_seconds += seconds

    def rows(self) -> list[TimingRow]:
        """The rows in first-run order, with ``share`` filled in."""
        out = list(self._rows.values())
        for row in out:
            row.share = row.seconds / self.total_seconds if self.total_seconds > 0 else 0.0
        return out

    def render(self) -> str:
        """The timing table as text."""
        rows = self.rows()
        header = ("pass", "phase", "calls", "time (ms)", "share", "verify (ms)")
        body = [(r.name, ", ".join(p.label for p in r.phases) or "-", str(r.calls),
                 f"{r.seconds * 1e3:.3f}", f"{r.share * 100:.1f}%",
                 f"{r.verify_seconds * 1e3:.3f}") for r in rows]
        grand = self.total_seconds + self.verify_seconds
        vshare = self.verify_seconds / grand * 100 if grand > 0 else 0.0
        footer = ("total", "", str(sum(r.calls for r in rows)),
                  f"{self.total_seconds * 1e3:.3f}", "100.0%" if rows else "-",
                  f"{self.verify_seconds * 1e3:.3f}")
        table = [header, *body, footer]
        widths = [max(len(line[i]) for line in table) for i in range(len(header))]

        def fmt(line: tuple[str, ...]) -> str:
            cells = [line[0].ljust(widths[0]), line[1].ljust(widths[1])]
            cells += [c.rjust(w) for c, w in zip(line[2:], widths[2:])]
            return "  ".join(cells).rstrip()

        rule = "-" * len(fmt(header))
        lines = [fmt(header), rule, *(fmt(b) for b in body), rule, fmt(footer),
                 f"verification: {self.verify_seconds * 1e3:.3f} ms "
                 f"({vshare:.1f}% of pass + verification time)"]
        return "\n".join(lines)


# -- trace --------------------------------------------------------------------
@dataclass(frozen=True)
class TraceEntry:
    """One event of a :class:`PassTrace`.

    ``status`` is ``"ran"``, ``"skipped"``, ``"failed"`` (or ``"running"``
    while the pass is still running); ``reason`` says
    why a pass was skipped or how it failed; ``required_by`` names the pass
    whose ``required`` list caused this run; ``depth`` is 0 for passes run by
    the user or a Sequential, more for passes called inside a pass body.
    """

    name: str
    status: str
    phase_before: Phase
    phase_after: Phase
    reason: str = ""
    required_by: str | None = None
    depth: int = 0


class PassTrace(PassInstrument):
    """Records each pass run with the phase before and after, required passes
    resolved, and passes skipped or failed (with the reason)."""

    def __init__(self) -> None:
        self.entries: list[TraceEntry] = []
        self._stack: list[int] = []  # indices of the entries of running passes
        self._pending_required: dict[str, str] = {}

    def enter_pass_ctx(self) -> None:
        self.entries = []
        self._stack = []
        self._pending_required = {}

    def run_before_required(self, mod: "IRModule", info: "PassInfo",
                            required_by: "PassInfo") -> None:
        self._pending_required[info.name] = required_by.name

    def run_before_pass(self, mod: "IRModule", info: "PassInfo") -> None:
        # Entries are listed in start order; this one is completed after the pass.
        self._stack.append(len(self.entries))
        self.entries.append(TraceEntry(info.name, "running", mod.phase, mod.phase, "",
                                       self._pending_required.pop(info.name, None),
                                       len(self._stack) - 1))

    def _complete(self, info: "PassInfo", **changes: Any) -> bool:
        if not self._stack or self.entries[self._stack[-1]].name != info.name:
            return False
        idx = self._stack.pop()
        self.entries[idx] = replace(self.entries[idx], **changes)
        return True

    def run_after_pass(self, mod: "IRModule", info: "PassInfo") -> None:
        self._complete(info, status="ran", phase_after=mod.phase)

    def run_on_error(self, mod: "IRModule", info: "PassInfo", error: BaseException) -> None:
        reason = f"{type(error).__name__}: {error}"
        if not self._complete(info, status="failed", reason=reason):
            # failed outside run_before/after_pass: its input or its result did not verify
            self.entries.append(TraceEntry(info.name, "failed", mod.phase, mod.phase, reason,
                                           self._pending_required.pop(info.name, None),
                                           len(self._stack)))

    def run_on_skip(self, mod: "IRModule", info: "PassInfo", reason: str) -> None:
        self.entries.append(TraceEntry(info.name, "skipped", mod.phase, mod.phase, reason,
                                       self._pending_required.pop(info.name, None),
                                       len(self._stack)))

    def ran(self) -> list[str]:
        """Names of the passes that ran, in order."""
        return [e.name for e in self.entries if e.status == "ran"]

    def skipped(self) -> list[tuple[str, str]]:
        """(name, reason) of every skipped pass, in order."""
        return [(e.name, e.reason) for e in self.entries if e.status == "skipped"]

    def render(self) -> str:
        """The trace as text, one line per event."""
        lines = []
        for i, e in enumerate(self.entries, 1):
            phases = (e.phase_before.label if e.phase_before == e.phase_after
                      else f"{e.phase_before.label} -> {e.phase_after.label}")
            note = e.status
            if e.required_by:
                note += f" (required by {e.required_by})"
            if e.reason:
                note += f": {e.reason}"
            lines.append(f"{i:3d}  {'  ' * e.depth}{e.name:<24} {phases:<28} {note}")
        return "\n".join(lines)

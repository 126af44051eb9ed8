"""The fuzzing campaign behind ``phasec fuzz``.

Round after round, hypothesis draws a program, one to three pass sequences
(each with a PassContext opt_level) and inputs, and :func:`phasec.testing.properties.check_sequence` checks each
sequence (static validation exact, invariants kept, results preserved on the
interpreter and, for sequences that reach build, on the VM; optionally exact
round trips). A failure not seen before in this campaign is raised, so
hypothesis shrinks it; the minimal example is saved as a reproducer file and
its signature (kind, pass, message shape) is remembered, so later rounds
count it without stopping again, and the campaign goes on looking for new
ones until the time is up.

Hypothesis's example database lives in ``OUT/hypothesis``: the next campaign
replays the saved failures first (in its first rounds). Entries are never
deleted (the campaign suppresses failures it already reported, which would
otherwise make hypothesis drop them as "fixed").
"""

from __future__ import annotations

import collections
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Verbosity, given, reject, settings
from hypothesis import Phase as HPhase
from hypothesis import strategies as st
from hypothesis.database import ExampleDatabase
from hypothesis.errors import Flaky

from phasec.fileio import write_atomic
from phasec.interrupts import Terminated, reporting_interruption
from phasec.ir.module import IRModule
from phasec.ir.phase import Phase
from phasec.testing.errors import GeneratorError
from phasec.testing.coverage import Coverage
from phasec.testing.databases import FuzzDatabaseError, KeepFailuresDatabase, describe, open_database
from phasec.testing.properties import (
    FAILURE_KINDS, Failure, _error_text, check_sequence, reference_results,
)
from phasec.testing.reproducers import Reproducer, SavedFailure, read_reproducer, replay, save_reproducer
from phasec.testing.strategies import inputs_for, modules, pass_sequences
from phasec.errors import InputError
from phasec.testing.against_tvm import (
    check_against_tvm, tvm_can_read, tvm_operators, tvm_pass_pool, tvm_sequences,
)
from phasec.transform import Pass, PassContext, Sequential, get_pass, parse_pipeline
from phasec.testing.check_pass import _check_one as check_pass_once
from phasec.testing.properties import ATOL, RTOL
from phasec.testing.steering import probe_pass
from phasec.tvm import require_tvm

__all__ = ["CampaignStats", "SavedFailure", "run_campaign", "replay", "read_reproducer",
           "KeepFailuresDatabase", "Reproducer", "save_reproducer", "pass_pool"]

#: examples per hypothesis run (a new seed each round)
ROUND_EXAMPLES = 100


@dataclass
class CampaignStats:
    """The numbers of a campaign."""

    seconds: float = 0.0
    seed: int = 0
    programs: int = 0
    sequences: int = 0
    passes_run: int = 0
    static_refusals: int = 0
    reached_build: int = 0
    failing_runs: collections.Counter = field(default_factory=collections.Counter)
    unique: list[SavedFailure] = field(default_factory=list)
    coverage: Coverage = field(default_factory=Coverage)
    #: "SIGINT" or "SIGTERM" when a signal ended the campaign early
    interrupted: str | None = None
    #: worker processes whose results were merged (``--jobs``)
    jobs: int = 1
    #: the example database (a directory or a Redis URL without its password)
    database: str = ""
    #: examples replayed from the database (earlier campaigns' findings)
    replayed: int = 0
    #: ``--against tvm``: the differential mode, and the programs left out
    #: (an operator TVM 0.27 lacks, a float remainder: see against_tvm)
    against: str | None = None
    left_out: int = 0
    #: operators the probe found the named passes fail on (drawn most)
    focus: list[str] = field(default_factory=list)

    def unique_by_kind(self) -> collections.Counter:
        return collections.Counter(s.failure.kind for s in self.unique)

    def progress_line(self) -> str:
        rate = self.passes_run / self.seconds if self.seconds else 0.0
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.unique_by_kind().items()))
        fails = f"{len(self.unique)}" + (f" ({kinds})" if kinds else "")
        return (f"{self.seconds:6.0f}s  programs {self.programs}  sequences {self.sequences}  "
                f"passes {self.passes_run} ({rate:.1f}/s)  build {self.reached_build}  "
                f"failures {fails}")

    def summary(self) -> str:
        secs = max(self.seconds, 1e-9)
        how = (f", interrupted ({self.interrupted}): the numbers so far"
               if self.interrupted else "")
        workers = f", {self.jobs} worker processes" if self.jobs > 1 else ""
        workers += f", against {self.against}" if self.against else ""
        lines = [
            f"phasec fuzz: {self.seconds:.0f} s, seed {self.seed}{workers}{how}",
            f"  programs generated  {self.programs:8d}   ({self.programs / secs:.2f}/s)",
            f"  sequences run       {self.sequences:8d}   ({self.sequences / secs:.2f}/s; "
            f"{self.static_refusals} refused by static validation)",
            f"  replayed            {self.replayed:8d}   (examples from the database"
            + (f" {self.database}" if self.database else "") + ")",
            f"  passes run          {self.passes_run:8d}   ({self.passes_run / secs:.1f}/s)",
            f"  reached build       {self.reached_build:8d}   (checked on the VM)",
            *([f"  left out            {self.left_out:8d}   (programs TVM 0.27 cannot take: "
               f"phasec-only operators, packed sorts, float remainders)"]
              if self.against else []),
            f"  failures            {len(self.unique):8d} unique   "
            f"({sum(self.failing_runs.values())} failing runs, shrinking included)",
        ]
        for kind, count in sorted(self.unique_by_kind().items()):
            lines.append(f"    {kind:12s} {count:4d}   {FAILURE_KINDS.get(kind, '')}")
        lines.append(f"  coverage            {self.coverage.short()}")
        if self.focus:
            shown = ", ".join(self.focus[:8]) + (" ..." if len(self.focus) > 8 else "")
            lines.append(f"  steered toward      {len(self.focus):8d} operators   "
                         f"(the probe of the named passes failed on them: {shown})")
        if self.unique:
            lines.append("  reproducers:")
            for saved in self.unique:
                lines.append(f"    {saved.path}   [{saved.failure.kind}] "
                             f"{saved.failure.pass_spec or ''}")
                for note in saved.reach:
                    lines.append(f"      reached by adding {note}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 1), "seed": self.seed, "programs": self.programs,
            "sequences": self.sequences, "passes_run": self.passes_run,
            "static_refusals": self.static_refusals, "reached_build": self.reached_build,
            "failing_runs": dict(self.failing_runs),
            "failures": [{"kind": s.failure.kind, "pass": s.failure.pass_spec,
                          "message": s.failure.message.splitlines()[0] if s.failure.message
                          else "", "file": str(s.path), "sequence": s.sequence,
                          "reach": list(s.reach), "signature": list(s.failure.signature)}
                         for s in self.unique],
            "interrupted": self.interrupted,
            "jobs": self.jobs,
            "database": self.database,
            "replayed": self.replayed,
            "against": self.against,
            "left_out": self.left_out,
            "coverage": self.coverage.as_dict(),
            "focus": list(self.focus),
        }


class _NewFailure(Exception):
    def __init__(self, failure: Failure, mod: IRModule | None, seq: Any,
                 args: Sequence[Any]) -> None:
        super().__init__(str(failure))
        self.failure = failure
        self.mod = mod
        self.seq = seq
        self.args = args


def run_campaign(seconds: float = 60.0, seed: int | None = None, passes: Any = None,
                 out_dir: str | Path = "fuzz-out", *, kernels: str = "llvm",
                 roundtrip: bool = True, max_bindings: int = 8, timeout: float = 60.0,
                 progress: Callable[[CampaignStats], None] | None = None,
                 progress_every: float = 1.0, summary_name: str = "summary.json",
                 failure_prefix: str = "", stop_after_failures: int | None = None,
                 summary_every: float | None = None,
                 database: str | Path | ExampleDatabase | None = None,
                 against: str | None = None,
                 stop_when: Callable[[CampaignStats], bool] | None = None,
                 ops: Any = None) -> CampaignStats:
    """Fuzz pass orderings for ``seconds``; see the module docstring.

    Args:
        seed: seeds hypothesis's choices (default: from the clock).
        passes: the passes sequences are drawn from: a textual pipeline spec
            (``"FoldConstant,FuseOps{fuse_opt_level=2}"``), a list of names or
            pass objects, or None for every registered pass. Sequences get
            the transitions (and the passes these require) needed to reach
            each drawn pass's phase; the reproducer says which were added.
        out_dir: reproducers go to ``OUT/failures``, hypothesis's database to
            ``OUT/hypothesis`` (unless ``database`` says otherwise), the
            numbers to ``OUT/summary.json``.
        database: hypothesis's example database: a directory, a Redis URL
            (``redis://host:port/db``, shared by campaigns on several
            machines) or an ``ExampleDatabase``; see
            :mod:`phasec.testing.databases`. A bad one raises
            :class:`~phasec.testing.databases.FuzzDatabaseError`.
        against: ``"tvm"``: differential fuzzing against TVM 0.27 instead of
            phasec's pass orderings (:mod:`phasec.testing.against_tvm`;
            ``passes`` then names TVM passes, see
            :func:`~phasec.testing.against_tvm.tvm_pass_pool`).
        kernels: how the VM runs PrimFuncs (``"llvm"`` or ``"interp"``).
        roundtrip: also check text/JSON round trips of every module produced.
        timeout: seconds allowed for one pass, interpreter or VM run.
        progress: called with the stats about every ``progress_every`` s.
        summary_name, failure_prefix: where the numbers go and how reproducer
            files start (worker processes of ``--jobs`` use their own).
        stop_after_failures: end the campaign once this many unique
            failures are saved (None: run for ``seconds``).
        ops: with ``against``, draw only these operators (registry names,
            ``relax.`` optional), e.g. to aim at a TVM pass of your own.
        stop_when: end the campaign once this returns true (checked after
            every round), e.g. when a failure of some kind has been saved.
        summary_every: also rewrite the summary every this many seconds
            (worker processes do, so the parent can show merged progress).

    Ctrl-C (KeyboardInterrupt) or SIGTERM (:class:`phasec.interrupts.Terminated`)
    ends the campaign cleanly: a failure being shrunk is saved as it stands,
    the summary is written with ``"interrupted"`` set, and the exception is
    raised again with the stats as its ``campaign_stats`` attribute.
    """
    out = Path(out_dir)
    (out / "failures").mkdir(parents=True, exist_ok=True)
    if database is None:
        database = out / "hypothesis"
    shown = describe(database) if not isinstance(database, ExampleDatabase) else repr(database)
    db = KeepFailuresDatabase(open_database(database), name=shown)
    base_seed = int(seed) if seed is not None else int(time.time()) % 1_000_000
    stats = CampaignStats(seed=base_seed, database=shown)
    start = time.monotonic()  # the probe below is part of the campaign's seconds
    deadline = start + seconds
    if against is not None:
        module_strategy, sequence_strategy = _against_strategies(against, passes, max_bindings,
                                                                 ops)
        stats.against = against
    else:
        pool = pass_pool(passes)
        # swarm testing: each program dense in a few operators and features;
        # for passes the user names, mostly the operators they fail on
        if pool is not None:
            stats.focus = sorted(pool_focus(pool, timeout,
                                            deadline=start + PROBE_SHARE * seconds) or ())
        module_strategy = modules(max_bindings=max_bindings, swarm=True,
                                  focus=stats.focus or None)
        sequence_strategy = pass_sequences(pool, valid=None)
    known: set[tuple] = set()  # failures already saved by this campaign
    last_report = [start]
    newest: list[_NewFailure] = []

    last_write = [start]

    def tick() -> None:
        now = time.monotonic()
        stats.seconds = now - start
        stats.replayed = db.replayed
        if progress is not None and now - last_report[0] >= progress_every:
            last_report[0] = now
            progress(stats)
        if summary_every is not None and now - last_write[0] >= summary_every:
            last_write[0] = now
            write_summary()

    def write_summary() -> None:
        stats.seconds = time.monotonic() - start
        stats.replayed = db.replayed
        write_atomic(out / summary_name, json.dumps(stats.as_dict(), indent=2) + "\n",
                     what="fuzz summary")

    def keep(found: _NewFailure) -> None:
        """Save a new failure's reproducer (once per signature)."""
        if found.failure.signature in known:
            return
        stats.unique.append(save_reproducer(out / "failures", len(stats.unique) + 1,
                                            found.failure, found.mod, found.seq, found.args,
                                            prefix=failure_prefix))
        known.add(found.failure.signature)
        write_summary()  # the numbers so far survive a crash or a restart
        if progress is not None:
            progress(stats)

    @given(st.data())
    def prop(data: Any) -> None:
        if time.monotonic() >= deadline:
            return  # time is up: let hypothesis finish quickly
        try:
            mod = data.draw(module_strategy, label="module")
        except GeneratorError as exc:  # a bug in the fuzzer: report it once, go on
            stats.failing_runs["generator"] += 1
            failure = Failure("generator", str(exc).splitlines()[0], detail=_error_text(exc))
            if failure.signature not in known:
                newest.append(_NewFailure(failure, None, None, ()))
                raise newest[-1] from exc
            reject()
        if against is not None and _left_out(mod):
            stats.left_out += 1
            reject()
        args = data.draw(inputs_for(mod), label="inputs")
        stats.programs += 1
        stats.coverage.add_program(mod)
        try:
            expected = reference_results(mod, args, timeout=timeout)
        except Exception:  # noqa: BLE001 - check_sequence reports it as "reference"
            expected = None
        for index in range(3):
            if index and not data.draw(st.integers(0, 3), label="another sequence") >= 2:
                break
            seq = data.draw(sequence_strategy, label="sequence")
            if against is not None:
                report: Any = check_against_tvm(mod, seq, args, expected, timeout=timeout)
            else:
                # passes above the opt_level are skipped, statically and when run
                opt_level = data.draw(st.sampled_from((3, 2, 1, 0)), label="opt_level")
                report = check_sequence(mod, seq, args, expected=expected, kernels=kernels,
                                        roundtrip=roundtrip and index == 0, timeout=timeout,
                                        opt_level=opt_level)
            stats.sequences += 1
            stats.passes_run += report.passes_run
            stats.static_refusals += report.static_refusal is not None
            stats.reached_build += report.reached_build
            stats.coverage.add_report(report)
            stats.coverage.reach_added += bool(getattr(seq, "reach_notes", ()))
            tick()
            for failure in report.failures:
                stats.failing_runs[failure.kind] += 1
                if failure.signature not in known:
                    exc = _NewFailure(failure, mod, seq, args)
                    newest.append(exc)
                    raise exc

    test = settings(
        database=db, max_examples=ROUND_EXAMPLES, deadline=None, derandomize=False,
        report_multiple_bugs=False, verbosity=Verbosity.quiet, print_blob=False,
        phases=[HPhase.explicit, HPhase.reuse, HPhase.generate, HPhase.shrink],
        suppress_health_check=list(HealthCheck))(prop)
    _seed_hypothesis(base_seed)
    round_index = 0
    try:
        while time.monotonic() < deadline:
            if stop_after_failures is not None and len(stats.unique) >= stop_after_failures:
                break
            if stop_when is not None and stop_when(stats):
                break
            newest.clear()
            round_index += 1
            try:
                test()
            except (_NewFailure, Flaky):
                pass
            except FuzzDatabaseError:
                raise  # the database went away: every later round would fail the same way
            except Exception as exc:  # noqa: BLE001 - an error outside the checks: go on
                if not newest:
                    print(f"phasec fuzz: round {round_index} stopped: {type(exc).__name__}: "
                          f"{exc}", file=sys.stderr)
                    stats.failing_runs["internal"] += 1
                    db.replaying = False  # a saved example may be what stops the rounds
                    continue
            if not newest:
                # a round ran to its end: every saved failure has been replayed
                # (and reported again, or found fixed); later rounds skip them
                db.replaying = False
            if newest:
                keep(newest[-1])  # the last one raised is hypothesis's smallest
            tick()
    except FuzzDatabaseError:  # the numbers so far are kept, then the error is reported
        write_summary()
        raise
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Terminated)
        reporting_interruption()  # no second delivery while the summary is written
        stats.interrupted = "SIGTERM" if isinstance(exc, Terminated) else "SIGINT"
        if newest:  # a failure being shrunk: keep the smallest example so far
            keep(newest[-1])
        write_summary()
        exc.campaign_stats = stats  # type: ignore[attr-defined]
        raise
    write_summary()
    return stats


def _seed_hypothesis(seed: int) -> None:
    """Make the rounds' random choices follow ``seed``.

    ``@hypothesis.seed`` would disable the example database, so the campaign
    seeds the generator hypothesis draws each run's seed from instead (a
    private attribute: without it, runs are simply not reproducible by seed).
    """
    import random

    from hypothesis import core

    local = getattr(core, "threadlocal", None)
    if local is not None and hasattr(local, "_hypothesis_global_random"):
        local._hypothesis_global_random = random.Random(seed)


def _against_strategies(against: str, passes: Any, max_bindings: int,
                        only: Any = None) -> tuple[Any, Any]:
    """The module and sequence strategies of ``--against tvm``."""
    if against != "tvm":
        raise InputError(f"--against {against!r}: the one engine to fuzz against is 'tvm'")
    require_tvm()  # TVMNotAvailableError (how to install it) before any round
    pool = tvm_pass_pool(passes)
    ops = tvm_operators()
    if only is not None:  # the operators asked for, of those TVM has
        ops = ops & {o if o.startswith("relax.") else "relax." + o for o in only}
    # TVMScript cannot spell every closure; TVM's VM has not phasec's packed test functions
    common = dict(max_bindings=max_bindings, closures=False, packed=False, ops=ops)
    mods = st.one_of(modules(**common), modules(phase=Phase.OPTIMIZATION, **common))
    return mods, tvm_sequences(pool)


def _left_out(mod: IRModule) -> bool:
    return tvm_can_read(mod) is not None


#: the share of a campaign's seconds its probe of the named passes may take
#: (a probe cut short steers by the operators it reached)
PROBE_SHARE = 0.25


def pool_focus(pool: Sequence[Any], timeout: float = 60.0,
               deadline: float | None = None) -> frozenset[str] | None:
    """The operators the passes of ``pool`` fail on, found by the probe of
    :mod:`phasec.testing.steering` (at each pass's first phase); None when
    the probe found no failure. ``deadline`` (a ``time.monotonic()`` value)
    ends the probe there, with what it found so far."""
    found: set[str] = set()
    for item in pool:
        p = get_pass(item) if isinstance(item, str) else item
        if not isinstance(p, Pass) or p.info.is_transition or not p.info.phases:
            continue

        def run(mod: IRModule, args: Sequence[Any], p: Any = p) -> tuple[Any, Any]:
            try:
                with PassContext(opt_level=3):
                    if p.info.required:
                        mod = Sequential([get_pass(n) for n in p.info.required])(mod)
                failure, result = check_pass_once(p, mod, args, rtol=RTOL, atol=ATOL,
                                                  timeout=timeout)
            except Exception:  # noqa: BLE001 - the probe module does not run: no signal
                return None, None
            return failure, (mod, result) if result is not None else None

        # only the operators a pass fails on: "touched" ones mislead here (FuseOps
        # touches whatever its probe modules happened to hold in a dataflow block)
        found |= set(probe_pass(run, min(p.info.phases), deadline=deadline).hot)
    return frozenset(found) or None


def pass_pool(passes: Any) -> list[Any] | None:
    """The passes a campaign draws orderings from: ``None`` (every registered
    pass), a textual pipeline (``"FoldConstant,DeadCodeElimination"``; a bad
    one raises the parser's error) or a list of passes."""
    if passes is None:
        return None
    if isinstance(passes, str):
        seq = parse_pipeline(passes)
        return list(seq.flatten())
    return list(passes)



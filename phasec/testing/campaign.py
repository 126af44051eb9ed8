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
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Verbosity, given, reject, settings
from hypothesis import Phase as HPhase
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase
from hypothesis.errors import Flaky

from ..fileio import write_atomic
from ..ir.module import IRModule
from ._gen import GeneratorError
from .properties import (
    FAILURE_KINDS, Failure, _error_text, check_sequence, reference_results,
)
from .strategies import inputs_for, modules, pass_sequences

__all__ = ["CampaignStats", "SavedFailure", "run_campaign", "replay", "read_reproducer",
           "KeepFailuresDatabase"]

#: examples per hypothesis run (a new seed each round)
ROUND_EXAMPLES = 100


class KeepFailuresDatabase(ExampleDatabase):
    """A database that never forgets: saves go to ``inner``, deletes are
    ignored (a ``move`` only copies), and fetches return the stored examples
    only while ``replaying`` is true (until a round ends without a new
    failure: later rounds would only replay failures already reported)."""

    def __init__(self, inner: ExampleDatabase) -> None:
        super().__init__()
        self.inner = inner
        self.replaying = True

    def save(self, key: bytes, value: bytes) -> None:
        self.inner.save(key, value)

    def fetch(self, key: bytes) -> Any:
        return self.inner.fetch(key) if self.replaying else iter(())

    def delete(self, key: bytes, value: bytes) -> None:
        pass

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.inner.save(dest, value)


@dataclass
class SavedFailure:
    """A new failure and the reproducer files written for it."""

    failure: Failure
    path: Path
    direct_path: Path | None
    sequence: str


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
        lines = [
            f"phasec fuzz: {self.seconds:.0f} s, seed {self.seed}",
            f"  programs generated  {self.programs:8d}   ({self.programs / secs:.2f}/s)",
            f"  sequences run       {self.sequences:8d}   ({self.sequences / secs:.2f}/s; "
            f"{self.static_refusals} refused by static validation)",
            f"  passes run          {self.passes_run:8d}   ({self.passes_run / secs:.1f}/s)",
            f"  reached build       {self.reached_build:8d}   (checked on the VM)",
            f"  failures            {len(self.unique):8d} unique   "
            f"({sum(self.failing_runs.values())} failing runs, shrinking included)",
        ]
        for kind, count in sorted(self.unique_by_kind().items()):
            lines.append(f"    {kind:12s} {count:4d}   {FAILURE_KINDS.get(kind, '')}")
        if self.unique:
            lines.append("  reproducers:")
            for saved in self.unique:
                lines.append(f"    {saved.path}   [{saved.failure.kind}] "
                             f"{saved.failure.pass_spec or ''}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 1), "seed": self.seed, "programs": self.programs,
            "sequences": self.sequences, "passes_run": self.passes_run,
            "static_refusals": self.static_refusals, "reached_build": self.reached_build,
            "failing_runs": dict(self.failing_runs),
            "failures": [{"kind": s.failure.kind, "pass": s.failure.pass_spec,
                          "message": s.failure.message.splitlines()[0] if s.failure.message
                          else "", "file": str(s.path), "sequence": s.sequence}
                         for s in self.unique],
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
                 progress_every: float = 1.0) -> CampaignStats:
    """Fuzz pass orderings for ``seconds``; see the module docstring.

    Args:
        seed: seeds hypothesis's choices (default: from the clock).
        passes: the passes sequences are drawn from: a textual pipeline spec
            (``"FoldConstant,FuseOps{fuse_opt_level=2}"``), a list of names or
            pass objects, or None for every registered pass.
        out_dir: reproducers go to ``OUT/failures``, hypothesis's database to
            ``OUT/hypothesis``, the numbers to ``OUT/summary.json``.
        kernels: how the VM runs PrimFuncs (``"llvm"`` or ``"interp"``).
        roundtrip: also check text/JSON round trips of every module produced.
        timeout: seconds allowed for one pass, interpreter or VM run.
        progress: called with the stats about every ``progress_every`` s.
    """
    out = Path(out_dir)
    (out / "failures").mkdir(parents=True, exist_ok=True)
    (out / "hypothesis").mkdir(exist_ok=True)
    db = KeepFailuresDatabase(DirectoryBasedExampleDatabase(str(out / "hypothesis")))
    base_seed = int(seed) if seed is not None else int(time.time()) % 1_000_000
    stats = CampaignStats(seed=base_seed)
    pool = _pass_pool(passes)
    module_strategy = modules(max_bindings=max_bindings)
    sequence_strategy = pass_sequences(pool)
    known: set[tuple] = set()  # failures already saved by this campaign
    start = time.monotonic()
    deadline = start + seconds
    last_report = [start]
    newest: list[_NewFailure] = []

    def tick() -> None:
        now = time.monotonic()
        stats.seconds = now - start
        if progress is not None and now - last_report[0] >= progress_every:
            last_report[0] = now
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
        args = data.draw(inputs_for(mod), label="inputs")
        stats.programs += 1
        try:
            expected = reference_results(mod, args, timeout=timeout)
        except Exception:  # noqa: BLE001 - check_sequence reports it as "reference"
            expected = None
        for index in range(3):
            if index and not data.draw(st.integers(0, 3), label="another sequence") >= 2:
                break
            seq = data.draw(sequence_strategy, label="sequence")
            # passes above the opt_level are skipped, statically and when run
            opt_level = data.draw(st.sampled_from((3, 2, 1, 0)), label="opt_level")
            report = check_sequence(mod, seq, args, expected=expected, kernels=kernels,
                                    roundtrip=roundtrip and index == 0, timeout=timeout,
                                    opt_level=opt_level)
            stats.sequences += 1
            stats.passes_run += report.passes_run
            stats.static_refusals += report.static_refusal is not None
            stats.reached_build += report.reached_build
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
    while time.monotonic() < deadline:
        newest.clear()
        round_index += 1
        try:
            test()
        except (_NewFailure, Flaky):
            pass
        except Exception as exc:  # noqa: BLE001 - an error outside the checks: go on
            if not newest:
                print(f"phasec fuzz: round {round_index} stopped: {type(exc).__name__}: {exc}",
                      file=sys.stderr)
                stats.failing_runs["internal"] += 1
                db.replaying = False  # a saved example may be what stops the rounds
                continue
        if not newest:
            # a round ran to its end: every saved failure has been replayed
            # (and reported again, or found fixed); later rounds skip them
            db.replaying = False
        if newest:
            found = newest[-1]  # the last one raised is hypothesis's smallest
            if found.failure.signature not in known:
                known.add(found.failure.signature)
                stats.unique.append(save_reproducer(out / "failures", len(stats.unique) + 1,
                                                    found.failure, found.mod, found.seq,
                                                    found.args))
                if progress is not None:
                    progress(stats)
        tick()
    stats.seconds = time.monotonic() - start
    write_atomic(out / "summary.json", json.dumps(stats.as_dict(), indent=2) + "\n",
                 what="fuzz summary")
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


def _pass_pool(passes: Any) -> list[Any] | None:
    if passes is None:
        return None
    if isinstance(passes, str):
        from ..transform import parse_pipeline

        seq = parse_pipeline(passes)
        return list(seq.flatten())
    return list(passes)


# ---------------------------------------------------------------------------
# Reproducer files
# ---------------------------------------------------------------------------

def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")[:40] or "sequence"


def _comment(text: str) -> list[str]:
    return ["#   " + line for line in text.splitlines()] or ["#"]


def save_reproducer(folder: Path, number: int, failure: Failure, mod: IRModule | None,
                    seq: Any, args: Sequence[Any]) -> SavedFailure:
    """Write ``NNN-kind-pass.py`` (the generated module, replayable with
    ``phasec opt FILE --passes SPEC``), its inputs as ``.npz`` and, when one
    pass is to blame, ``NNN-kind-pass-direct.py`` (the module that pass ran on,
    with just that pass). A generator failure (no module) is saved as
    ``NNN-generator.txt`` with its traceback."""
    folder.mkdir(parents=True, exist_ok=True)
    if mod is None:
        path = folder / f"{number:03d}-{failure.kind}.txt"
        write_atomic(path, f"phasec fuzz: {FAILURE_KINDS.get(failure.kind, '')}\n"
                           f"{failure.message}\n\n{failure.detail}", what="reproducer")
        return SavedFailure(failure, path, None, "")
    sequence = seq.spec()
    name = (failure.pass_spec or sequence).split("{")[0]
    stem = f"{number:03d}-{failure.kind}-{_slug(name)}"
    path = folder / f"{stem}.py"
    inputs_path = folder / f"{stem}.npz"
    params = [p.name_hint for p in mod["main"].params] if "main" in mod else []
    arrays = {(params[i] if i < len(params) else f"arg{i}"): np.asarray(a)
              for i, a in enumerate(args) if isinstance(a, (np.ndarray, np.generic))}
    write_atomic(inputs_path, lambda fh: np.savez(fh, **arrays), what="reproducer inputs")
    header = [
        "# phasec fuzz reproducer",
        f"# kind: {failure.kind} ({FAILURE_KINDS.get(failure.kind, '')})",
        f"# failing pass: {failure.pass_spec or '(the sequence as a whole)'}"
        + (f" (step {failure.position + 1})" if failure.position is not None else ""),
        "# problem:",
        *_comment(failure.message),
        f"# sequence: {sequence}",
        f"# inputs: {inputs_path.name} (arrays by parameter name)",
        "# replay the passes:",
        f"#   phasec opt {path} --passes '{sequence}' --opt-level 3",
        "# re-check every property (results included):",
        f"#   phasec fuzz --replay {path}",
        f"# signature: {json.dumps(list(failure.signature))}",
        "# (the program may call phasec.testing.* packed functions: import phasec.testing",
        "#  before running it with phasec.interp.run or the VM)",
        "",
    ]
    write_atomic(path, "\n".join(header) + mod.script(), what="reproducer")
    direct_path = None
    if failure.pass_spec and failure.before is not None and failure.before is not mod:
        direct_path = folder / f"{stem}-direct.py"
        direct = [
            "# phasec fuzz reproducer (direct): the module the failing pass ran on",
            f"# kind: {failure.kind}",
            f"# sequence: {failure.pass_spec}",
            f"# inputs: {inputs_path.name}",
            f"#   phasec opt {direct_path} --passes '{failure.pass_spec}' --opt-level 3",
            f"#   phasec fuzz --replay {direct_path}",
            "",
        ]
        write_atomic(direct_path, "\n".join(direct) + failure.before.script(), what="reproducer")
    return SavedFailure(failure, path, direct_path, sequence)


@dataclass
class Reproducer:
    """A reproducer file read back."""

    module: IRModule
    sequence: str
    inputs: tuple


def read_reproducer(path: str | Path) -> Reproducer:
    """The module, pass sequence and inputs of a reproducer file."""
    from ..script.loader import load

    from ..fileio import read_bytes, read_npz

    path = Path(path)
    text = read_bytes(path, "reproducer").decode("utf-8", "replace")
    match = re.search(r"^# sequence: (.*)$", text, re.M)
    if match is None:
        from ..errors import InputError

        raise InputError(f"{path}: not a phasec fuzz reproducer (no '# sequence:' line)")
    mod = load(path)
    inputs: tuple = ()
    m = re.search(r"^# inputs: (\S+)", text, re.M)
    if m is not None and (path.parent / m.group(1)).exists():
        by_name = read_npz(path.parent / m.group(1), "reproducer inputs")
        names = [p.name_hint for p in mod["main"].params] if "main" in mod else []
        inputs = tuple(by_name[n] for n in names if n in by_name)
        if len(inputs) != len(names):
            inputs = ()
    return Reproducer(mod, match.group(1).strip(), inputs)


def replay(path: str | Path, *, kernels: str = "llvm", roundtrip: bool = True) -> list[Failure]:
    """Check a reproducer again; the failures it still shows (empty: fixed)."""
    from ..transform import parse_pipeline

    rep = read_reproducer(path)
    seq = parse_pipeline(rep.sequence) if rep.sequence else []
    report = check_sequence(rep.module, seq, rep.inputs or None, kernels=kernels,
                            roundtrip=roundtrip)
    return report.failures

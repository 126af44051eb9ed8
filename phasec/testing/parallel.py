"""``phasec fuzz --jobs N``: N worker processes, one hypothesis database,
one summary.

Each worker is a forked process running :func:`run_campaign` with its own
seed (``seed + k``) in the same output folder: hypothesis's
``DirectoryBasedExampleDatabase`` in ``OUT/hypothesis`` is safe to share
between processes (one file per example, written atomically), so a failure
one worker saves is replayed by the next campaign of any worker (with
``database="redis://..."`` each worker opens its own connection to the
server after the fork, and the findings are shared with other machines too). Workers
name their reproducers ``wK-NNN-...`` and write their numbers to
``OUT/workers/worker-K.json`` (at each new failure and at the end); the
parent merges them into ``OUT/summary.json``: counts added, coverage merged,
failures de-duplicated by signature (the first worker's reproducer is the
one listed).

With ``stop_after_failures``, the parent counts the merged failures and,
once there are enough, writes ``OUT/workers/stop``: each worker ends after
its current round (the marker is removed when the campaign ends).

Ctrl-C reaches every worker (same process group); SIGTERM sent to the
parent is passed on to the workers. Either way each worker writes its
numbers and the parent writes the merged summary, then re-raises.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from phasec.fileio import write_atomic
from phasec.interrupts import Terminated, reporting_interruption, signals_as_exceptions
from phasec.testing.campaign import CampaignStats, run_campaign
from phasec.testing.coverage import Coverage
from phasec.testing.properties import Failure
from phasec.testing.reproducers import SavedFailure

__all__ = ["run_parallel_campaign", "merge_summaries"]


def _worker(index: int, seconds: float, seed: int, kwargs: dict[str, Any]) -> None:
    stop_file = _stop_file(Path(kwargs["out_dir"]))
    own_stop = kwargs.pop("stop_when", None)

    def stop_when(stats: CampaignStats) -> bool:
        return stop_file.exists() or (own_stop is not None and own_stop(stats))

    with signals_as_exceptions():  # the forked handlers' watchdog did not survive the fork
        try:
            run_campaign(seconds, seed=seed, summary_name=f"workers/worker-{index}.json",
                         failure_prefix=f"w{index}-", summary_every=2.0,
                         stop_when=stop_when, **kwargs)
        except KeyboardInterrupt:
            pass  # its summary is written; the parent reports the interruption


def _stop_file(out: Path) -> Path:
    """Created by the parent when the workers together have saved
    ``stop_after_failures`` failures; each worker ends after its round."""
    return out / "workers" / "stop"


def merge_summaries(dicts: list[dict[str, Any]]) -> CampaignStats:
    """One :class:`CampaignStats` from workers' ``summary.json`` contents."""
    stats = CampaignStats(jobs=len(dicts))
    seen: set[tuple] = set()
    for d in dicts:
        stats.seconds = max(stats.seconds, float(d.get("seconds", 0.0)))
        for key in ("programs", "sequences", "passes_run", "static_refusals", "reached_build",
                    "replayed", "left_out"):
            setattr(stats, key, getattr(stats, key) + int(d.get(key, 0)))
        stats.failing_runs.update(d.get("failing_runs", {}))
        stats.coverage = stats.coverage + Coverage.from_dict(d.get("coverage", {}))
        if d.get("interrupted") and not stats.interrupted:
            stats.interrupted = d["interrupted"]
        for f in d.get("failures", []):
            signature = tuple(f.get("signature") or (f["kind"], f.get("pass"), f["message"]))
            if signature in seen:
                continue
            seen.add(signature)
            failure = Failure(f["kind"], f.get("message", ""), pass_spec=f.get("pass"))
            stats.unique.append(SavedFailure(failure, Path(f["file"]), None,
                                             f.get("sequence", ""), tuple(f.get("reach", ()))))
    if dicts:
        stats.seed = int(dicts[0].get("seed", 0))
        stats.database = str(dicts[0].get("database", ""))
        stats.against = dicts[0].get("against")
    return stats


def run_parallel_campaign(jobs: int, seconds: float = 60.0, seed: int | None = None, *,
                          out_dir: str | Path = "fuzz-out",
                          progress: Callable[[CampaignStats], None] | None = None,
                          **kwargs: Any) -> CampaignStats:
    """:func:`run_campaign` in ``jobs`` forked worker processes; the merged stats.

    ``kwargs`` go to every worker's :func:`run_campaign` (``passes``,
    ``kernels``, ``roundtrip``, ``max_bindings``, ``timeout``,
    ``stop_after_failures``, which counts the workers' failures together,
    de-duplicated). Passes registered in this process are seen by the
    workers (they are forked). Raises KeyboardInterrupt (or Terminated)
    after writing the merged summary when interrupted, with the merged stats
    as its ``campaign_stats``.
    """
    out = Path(out_dir)
    (out / "workers").mkdir(parents=True, exist_ok=True)
    (out / "failures").mkdir(exist_ok=True)
    (out / "hypothesis").mkdir(exist_ok=True)
    for old in (out / "workers").glob("worker-*.json"):
        old.unlink()  # a previous campaign's numbers are not this one's
    _stop_file(out).unlink(missing_ok=True)
    stop_after = kwargs.get("stop_after_failures")
    base = int(seed) if seed is not None else int(time.time()) % 1_000_000
    ctx = multiprocessing.get_context("fork")
    kwargs = {**kwargs, "out_dir": out}
    procs = [ctx.Process(target=_worker, args=(k + 1, seconds, base + k, kwargs),
                         name=f"phasec-fuzz-{k + 1}", daemon=False) for k in range(jobs)]
    for p in procs:
        p.start()
    interrupted: BaseException | None = None
    try:
        while any(p.is_alive() for p in procs):
            for p in procs:
                p.join(timeout=1.0 / max(len(procs), 1))
            if progress is not None or stop_after is not None:
                merged = merge_summaries(_read(out, jobs))
                if progress is not None:
                    progress(merged)
                if stop_after is not None and len(merged.unique) >= stop_after:
                    write_atomic(_stop_file(out), "stop\n", what="fuzz stop marker")
                    stop_after = None  # (once: the workers end after their round)
    except KeyboardInterrupt as exc:
        reporting_interruption()
        interrupted = exc
        sig = signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT
        for p in procs:  # Ctrl-C already reached them; SIGTERM may not have
            if p.is_alive() and p.pid is not None:
                try:
                    os.kill(p.pid, sig)
                except ProcessLookupError:
                    pass
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
                p.join()
    _stop_file(out).unlink(missing_ok=True)
    stats = merge_summaries(_read(out, jobs))
    stats.jobs = jobs
    stats.seed = base
    if interrupted is not None:
        stats.interrupted = "SIGTERM" if isinstance(interrupted, Terminated) else "SIGINT"
    write_atomic(out / "summary.json", json.dumps(stats.as_dict(), indent=2) + "\n",
                 what="fuzz summary")
    if interrupted is not None:
        interrupted.campaign_stats = stats  # type: ignore[attr-defined]
        raise interrupted
    return stats


def _read(out: Path, jobs: int) -> list[dict[str, Any]]:
    found = []
    for k in range(1, jobs + 1):
        path = out / "workers" / f"worker-{k}.json"
        try:
            found.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue  # not written yet (atomic writes: never half a file)
    return found

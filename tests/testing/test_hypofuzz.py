"""HypoFuzz runs the fuzzing properties of tests/testing/fuzz_targets.py.

``hypothesis fuzz`` (HypoFuzz, in the test extra) is started as the README
says, in a subprocess with its own session, with ``$PHASEC_FUZZ_DB`` naming
a fresh database directory. It runs until its database holds a progress
report with examples run (bounded: at most a few minutes on a loaded
machine), then gets Ctrl-C (SIGINT to its process group) and must end; a
process group still there after that is killed. The test checks what
HypoFuzz itself recorded: that it collected the three targets, and the
reports it wrote for them, by test node id.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

from hypothesis.database import DirectoryBasedExampleDatabase

from helpers.paths import FUZZ_TARGETS

TARGETS = ("test_pass_orderings_keep_invariants_and_results",
           "test_optimization_sequences_preserve_results", "test_roundtrips_are_exact")


def _reports(db: DirectoryBasedExampleDatabase) -> dict[str, dict]:
    """HypoFuzz's latest report per test node id (its database layout: the
    list of test keys under ``hypofuzz.test_keys``, JSON reports under
    ``KEY.hypofuzz.reports``)."""
    latest: dict[str, dict] = {}
    for key in db.fetch(b"hypofuzz.test_keys"):
        for raw in db.fetch(key + b".hypofuzz.reports"):
            report = json.loads(raw)
            old = latest.get(report["nodeid"])
            if old is None or report["elapsed_time"] > old["elapsed_time"]:
                latest[report["nodeid"]] = report
    return latest


def _examples_run(report: dict) -> int:
    return sum(int(n) for n in report["status_counts"].values())


def test_hypofuzz_fuzzes_the_targets_with_the_named_database(tmp_path):
    exe = shutil.which("hypothesis", path=os.path.dirname(sys.executable))
    assert exe, "HypoFuzz's `hypothesis fuzz` command is required (the test extra has it)"
    db_dir = tmp_path / "shared-db"
    env = {k: v for k, v in os.environ.items()
           if k not in ("CI", "HYPOTHESIS_PROFILE")}  # HypoFuzz leaves derandomized tests out
    env.update(PHASEC_FUZZ_DB=str(db_dir))
    out = tmp_path / "hypofuzz.out"
    with open(out, "wb") as log:
        proc = subprocess.Popen(
            [exe, "fuzz", "-n", "1", "--no-dashboard", "--",
             str(FUZZ_TARGETS)],
            cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
            # SIGINT at its default, as from a terminal (a background job's children ignore it)
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    db = DirectoryBasedExampleDatabase(str(db_dir))
    reports: dict[str, dict] = {}
    try:
        for _ in range(600):  # until a target has run examples; 5 minutes at most
            if proc.poll() is not None:
                break
            if db_dir.is_dir():
                reports = _reports(db)
                if any(_examples_run(r) >= 5 for r in reports.values()):
                    break
            time.sleep(0.5)
        assert proc.poll() is None, out.read_text()  # it fuzzes until stopped
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C, as a user ends it
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError("HypoFuzz did not end on SIGINT") from None
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of its group
        except ProcessLookupError:
            pass
        proc.wait()
    text = out.read_text()
    assert "using 1 process to fuzz 3 tests" in text, text
    reports = _reports(db)
    assert reports, text
    for nodeid, report in reports.items():
        assert nodeid.startswith("tests/testing/fuzz_targets.py::")
        assert nodeid.split("::")[1] in TARGETS
    assert max(_examples_run(r) for r in reports.values()) >= 5, reports
    # no failure: the properties hold on what it ran
    for key in db.fetch(b"hypofuzz.test_keys"):
        assert list(db.fetch(key + b".hypofuzz.failures")) == []

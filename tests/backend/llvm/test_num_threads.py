"""The default thread count of parallel loops follows the CPUs the process
may use (affinity mask, cgroup quota), and PHASEC_NUM_THREADS sets it
(issue 32, item 10: the default ignored both)."""

from __future__ import annotations

import os
import subprocess
import sys

CHILD = ("import os, sys\n"
         "if len(sys.argv) > 1: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
         "from phasec.backend.llvm import get_num_threads\n"
         "print(get_num_threads(), len(os.sched_getaffinity(0)))\n")


def _child(*args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "PHASEC_NUM_THREADS"}
    return subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True,
                          env={**environ, **env}, timeout=120)


def test_default_follows_the_affinity_mask_and_the_variable_overrides_it() -> None:
    pinned = _child("pin")
    assert pinned.returncode == 0, pinned.stderr
    assert pinned.stdout.split() == ["1", "1"]  # one CPU allowed: one thread
    free = _child()
    threads, allowed = map(int, free.stdout.split())
    assert 1 <= threads <= allowed
    assert _child(PHASEC_NUM_THREADS="3").stdout.split()[0] == "3"


def test_an_invalid_thread_count_is_a_usage_error_naming_the_variable() -> None:
    done = subprocess.run([sys.executable, "-m", "phasec", "run", "-q", "--repeat", "1"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PHASEC_NUM_THREADS": "0"})
    assert done.returncode == 2
    assert "PHASEC_NUM_THREADS must be a number of threads from 1 to 256, not '0'" in done.stderr

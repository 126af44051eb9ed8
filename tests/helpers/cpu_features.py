"""Running test code compiled for a CPU with fewer features than this one."""

from __future__ import annotations

import os
import subprocess
import sys


def run_without_vnni(test_file: str, statements: str) -> None:
    """Run ``statements`` in a fresh process whose kernels are compiled as
    for a CPU without VNNI nor AMX (``PHASEC_CPU_FEATURES``; the target is chosen
    once per process), with the test module of ``test_file`` imported as
    ``t``; fails with the process's error output unless it succeeds and
    the target really lacks VNNI."""
    folder, name = os.path.split(os.path.abspath(test_file))
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = (f"import sys; sys.path[:0] = sys.argv[1:]; import {name[:-3]} as t; "
            f"{statements}; from phasec.backend.llvm.jit import host_target; "
            "assert '-avx512vnni' in host_target().features.split(',')")
    env = {**os.environ, "PHASEC_CPU_FEATURES": "-avx512vnni,-avxvnni,-amx-int8"}
    done = subprocess.run([sys.executable, "-c", code, folder, tests], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]

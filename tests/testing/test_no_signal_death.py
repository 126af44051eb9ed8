"""Fuzz property: compiled kernels fed random index data never die of a signal.

A subprocess builds every data-indexed operator (take and the operators of
helpers/hostile_indices.py) and runs each on many random index tensors: in
range, negative, past either end, the extremes of the dtype. Every run must
end in a result or an IndexOutOfRangeError; the parent fails on any signal
death (a segfault would kill the subprocess, not the test runner), so a new
crash is caught here rather than by a user."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from helpers.paths import TESTS

CHILD = textwrap.dedent('''
    import sys
    import numpy as np
    import phasec
    from phasec.errors import IndexOutOfRangeError, PhasecError
    sys.path.insert(0, sys.argv[3])
    from helpers.hostile_indices import CALLS, HOSTILE

    calls = dict((name, spec[0]) for name, spec in CALLS.items())
    calls["take"] = "R.take(x, i, axis=1)"
    seed, cases = int(sys.argv[1]), int(sys.argv[2])
    rng = np.random.default_rng(seed)
    counts = {"ok": 0, "error": 0}
    for dtype in ("int64", "int32"):
        info = np.iinfo(dtype)
        pool = np.array([0, 1, -1, 2, 3, 4, 5, 6, -5, -6, 100, -100, info.max, info.min,
                         info.max // 2, 1 << 20], dtype)
        for name, call in sorted(calls.items()):
            exe = phasec.build(phasec.parse(HOSTILE.format(dtype=dtype, call=call)))
            vm = phasec.VirtualMachine(exe)
            for _ in range(cases):
                args = {
                    "x": rng.standard_normal((4, 5)).astype("float32"),
                    "i": rng.choice(pool, (4, 3)), "u": rng.standard_normal((4, 3)).astype("float32"),
                    "g": rng.choice(pool, (2, 2)), "gu": rng.standard_normal(2).astype("float32"),
                    "a": rng.choice(pool, 2), "g64": rng.choice(pool, (2, 2)).astype("int64"),
                }
                try:
                    vm["main"](*args.values())
                    counts["ok"] += 1
                except (IndexOutOfRangeError, PhasecError):
                    counts["error"] += 1
    print(counts["ok"], counts["error"])
''')


@pytest.mark.parametrize("seed", [0, 1])
def test_random_indices_never_kill_the_process(seed: int) -> None:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(seed), "60", str(TESTS)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode >= 0, (f"the kernels died of signal {-proc.returncode}:\n"
                                  f"{proc.stderr[-2000:]}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    ok, errors = map(int, proc.stdout.split())
    # both outcomes occur: the pool yields in-range and hostile tensors alike
    assert ok > 0 and errors > 0

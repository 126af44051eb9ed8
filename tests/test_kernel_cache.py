"""The persistent kernel cache: a second process loads the machine code the
first compiled (no LLVM optimization or code generation), with the same
results; damaged entries are ignored and rebuilt; it can be turned off and
cleared."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

CHILD = '''
import json, sys, time
import numpy as np
import phasec
from phasec.backend.llvm import jit
optimized = []
real = jit.llvm.create_pass_builder
def counting(*a, **k):  # the optimization pipeline runs only when compiling
    optimized.append(1)
    return real(*a, **k)
jit.llvm.create_pass_builder = counting
mod = phasec.load(sys.argv[1])
vm = phasec.VirtualMachine(phasec.build(mod))
rng = np.random.default_rng(0)
args = [rng.standard_normal([d.value for d in p.struct_info.shape]).astype("float32")
        for p in mod["main"].params]
out = np.asarray(vm["main"](*args))
ref = np.asarray(phasec.interp.run(mod, *args))
err = float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))  # as phasec run measures it
print(json.dumps({"optimized": len(optimized), "max_err": err}))
'''


def _run(cache: Path, example: str, **env: str) -> dict:
    import json

    import phasec

    path = Path(phasec.__file__).parent / "examples" / f"{example}.py"
    proc = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True,
                          env={**os.environ, "PHASEC_CACHE_DIR": str(cache), **env}, check=True)
    return json.loads(proc.stdout.splitlines()[-1])


def test_second_process_loads_cached_code_with_the_same_results(tmp_path: Path) -> None:
    cache = tmp_path / "kernels"
    cold = _run(cache, "mlp")
    assert cold["optimized"] > 0 and cold["max_err"] < 1e-4
    assert list(cache.glob("*/*.kc"))
    warm = _run(cache, "mlp")
    assert warm["optimized"] == 0  # LLVM did not optimize or compile anything
    assert warm["max_err"] < 1e-4


def test_damaged_entries_are_ignored_and_rebuilt(tmp_path: Path) -> None:
    cache = tmp_path / "kernels"
    _run(cache, "mlp")
    entries = list(cache.glob("*/*.kc"))
    for e in entries:  # flip a byte inside the machine code, truncate another
        data = bytearray(e.read_bytes())
        data[len(data) // 2] ^= 0xFF
        e.write_bytes(bytes(data))
    entries[0].write_bytes(entries[0].read_bytes()[:100])
    again = _run(cache, "mlp")
    assert again["optimized"] > 0 and again["max_err"] < 1e-4
    warm = _run(cache, "mlp")  # rebuilt entries are good again
    assert warm["optimized"] == 0


def test_cache_off_and_clear(tmp_path: Path) -> None:
    cache = tmp_path / "kernels"
    _run(cache, "mlp", PHASEC_KERNEL_CACHE="off")
    assert not cache.exists()
    _run(cache, "mlp")
    env = {**os.environ, "PHASEC_CACHE_DIR": str(cache)}
    info = subprocess.run([sys.executable, "-m", "phasec", "cache", "info"], env=env,
                          capture_output=True, text=True, check=True).stdout
    n = len(list(cache.glob("*/*.kc")))
    assert f"{n} entries" in info and str(cache) in info
    cleared = subprocess.run([sys.executable, "-m", "phasec", "cache", "clear"], env=env,
                             capture_output=True, text=True, check=True).stdout
    assert f"removed {n} kernel cache entr" in cleared
    assert not list(cache.glob("*/*.kc"))


def test_compiled_code_holds_no_address_of_the_process() -> None:
    """What makes the code cacheable: numpy's objects are named symbols."""
    import re

    import phasec
    from phasec.backend.llvm import compile_prim_funcs
    from phasec.pipeline import lower

    low = lower(phasec.load(str(Path(phasec.__file__).parent / "examples" / "mlp.py")))
    funcs = {n: f for n, f in low.functions.items() if isinstance(f, phasec.ir.tir.PrimFunc)}
    lib = compile_prim_funcs(funcs, use_cache=False)
    assert not re.search(r"inttoptr \(i64 \d{9,}", lib.optimized_ir)
    assert id(np.ndarray) != 0  # (the address the code used to embed)


@pytest.mark.parametrize("value", ["off", "0", "no", "false", "OFF"])
def test_off_values(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from phasec.backend.llvm import diskcache

    monkeypatch.setenv("PHASEC_KERNEL_CACHE", value)
    assert not diskcache.enabled()

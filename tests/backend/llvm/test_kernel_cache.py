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
from phasec.backend.llvm import codegen
generated = []
real_add = codegen.ModuleCodegen.add_kernel
def generating(self, *a, **k):  # LLVM IR generated for a kernel
    generated.append(1)
    return real_add(self, *a, **k)
codegen.ModuleCodegen.add_kernel = generating
mod = phasec.load(sys.argv[1])
exe = phasec.build(mod)
vm = phasec.VirtualMachine(exe)
rng = np.random.default_rng(0)
args = [rng.standard_normal([d.value for d in p.struct_info.shape]).astype("float32")
        for p in mod["main"].params]
out = np.asarray(vm["main"](*args))
ref = np.asarray(phasec.interp.run(mod, *args))
err = float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))  # as phasec run measures it
n_generated = len(generated)
from phasec.backend.llvm import compile_prim_funcs
ir_ok = "define" in compile_prim_funcs(exe.prim_funcs).llvm_ir  # the IR, generated on demand
print(json.dumps({"optimized": len(optimized), "generated": n_generated, "max_err": err,
                  "ir_on_demand": ir_ok}))
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
    assert warm["generated"] == 0  # nor did phasec generate LLVM IR: keyed by the program
    assert warm["max_err"] < 1e-4
    assert warm["ir_on_demand"]


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


# -- the program key: what lets a warm build skip code generation ------------

def _kernel(out_name: str = "C", const: float = 1.0, extent: int = 7):
    from phasec.ir import tir as T

    A, C = T.Buffer("A", (extent,)), T.Buffer(out_name, (extent,))
    i = T.Var("i")
    body = T.For(i, 0, extent, "serial",
                 T.BufferStore(C, A[i] * T.as_prim_expr(const, "float32"), (i,)))
    return T.PrimFunc((A, C), body)


def test_exact_fingerprint_tells_programs_apart_and_equal_ones_alike() -> None:
    from phasec.ir.structural import exact_fingerprint, structural_equal, structural_hash

    a, b = _kernel(), _kernel()  # separately built, equal
    assert a is not b and exact_fingerprint(a) == exact_fingerprint(b)
    assert exact_fingerprint({"k": a}) == exact_fingerprint({"k": b})
    assert structural_hash({"k": a}) == structural_hash({"k": b})
    differ = [_kernel(extent=11), _kernel(const=2.0), _kernel(const=-0.0),
              _kernel(out_name="D")]  # names matter here (not to structural_equal)
    prints = {exact_fingerprint(f) for f in [a, *differ]}
    assert len(prints) == 1 + len(differ)
    assert structural_equal(a, _kernel(out_name="D"))  # what structural_hash ignores
    assert exact_fingerprint({"k": a}) != exact_fingerprint({"k2": a})  # kernel names too
    assert exact_fingerprint({"k": a, "l": b}) != exact_fingerprint({"k": a})


def test_exact_fingerprint_refuses_what_it_cannot_write_exactly() -> None:
    from phasec.ir.structural import exact_fingerprint

    f = _kernel().with_attr("opaque", object())  # repr holds an address
    assert exact_fingerprint(f) is None
    assert exact_fingerprint({"k": f}) is None
    assert exact_fingerprint({"k": _kernel(), "m": f}) is None


def test_program_key_follows_settings_and_opt_level() -> None:
    from phasec.backend.llvm import diskcache

    target = ("x86_64", "cpu", "+avx")
    k = diskcache.program_key("f" * 64, "settings", 3, target)
    assert k == diskcache.program_key("f" * 64, "settings", 3, target)
    others = {diskcache.program_key("e" * 64, "settings", 3, target),
              diskcache.program_key("f" * 64, "other", 3, target),
              diskcache.program_key("f" * 64, "settings", 2, target),
              diskcache.program_key("f" * 64, "settings", 3, ("x86_64", "cpu", "-avx"))}
    assert k not in others and len(others) == 4


def test_warm_library_in_process_reads_the_disk_cache(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Same process, in-memory cache bypassed: the second compile loads the
    program-keyed entry, generates no IR and computes the same values."""
    from phasec.backend.llvm import codegen, compile_prim_funcs

    monkeypatch.setenv("PHASEC_CACHE_DIR", str(tmp_path / "kernels"))
    monkeypatch.delenv("PHASEC_KERNEL_CACHE", raising=False)
    x = np.arange(7, dtype=np.float32) - 3
    cold = compile_prim_funcs({"scale": _kernel(const=2.5)}, use_cache=False)
    y1 = np.empty(7, np.float32)
    cold["scale"](x, y1)
    calls = []
    real = codegen.ModuleCodegen.add_kernel
    monkeypatch.setattr(codegen.ModuleCodegen, "add_kernel",
                        lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    warm = compile_prim_funcs({"scale": _kernel(const=2.5)}, use_cache=False)
    y2 = np.empty(7, np.float32)
    warm["scale"](x, y2)
    assert not calls
    np.testing.assert_array_equal(y1, x * np.float32(2.5))
    np.testing.assert_array_equal(y2, y1)
    assert warm.llvm_ir == cold.llvm_ir  # generated on demand, the same text
    other = compile_prim_funcs({"scale": _kernel(const=3.5)}, use_cache=False)
    y3 = np.empty(7, np.float32)
    other["scale"](x, y3)  # a different constant is a different entry
    np.testing.assert_array_equal(y3, x * np.float32(3.5))

"""What the switches of LLVM's pipeline cost and buy, kernel by kernel.

A variant is an optimization level and the pipeline switches turned off
(``objworker.PIPELINE_SWITCHES``): ``O3`` (phasec's pipeline), ``O2``,
``O3-unroll`` (O3 without LLVM's own loop unrolling: the loops phasec's
metadata marks unrolled still are), ``O3-unroll-slp``... (``-vec``,
``-slp``, ``-unroll``, ``-interleave``). Two measurements, each in this
process and on one core:

* compile time: ``python bench/bench_compile.py --variants squeezenet
  [--variant-list O3,O3-unroll,O2] [--repeat 3]`` prints, per kernel, LLVM's
  CPU time (optimization and code generation of a module holding that
  kernel alone, best of R) under each variant, and whether its object code
  is the first variant's (the same code needs no run-time check);
* run time: ``python bench/bench_compile.py --variant-ab squeezenet
  --variant O3-unroll [--rounds 20]`` compiles the model's kernels with O3
  and with the variant, checks the model's outputs are bitwise equal, then
  runs the two libraries alternately (one thread, thread time, best of R
  rounds) and prints each kernel's time and the ratio.

Round 10 of issue 29 (bench/README.md) measured O3-unroll and O2 this way on
SqueezeNet, ResNet-50, ShuffleNet, DenseNet-121, Inception v2 and
MobileNetV2: each saves 10-25% of LLVM's time and makes some kernels of
every model slower.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from typing import Any

import _common as C

__all__ = ["parse_variant", "variant_costs", "variant_ab"]

#: a variant's suffixes and the switches they turn off
_SWITCHES = {"vec": "loop_vectorization", "slp": "slp_vectorization",
             "unroll": "loop_unrolling", "interleave": "loop_interleaving"}


def parse_variant(spec: str) -> tuple[int, frozenset[str]]:
    """(optimization level, switches off) of ``spec`` ('O3', 'O2-unroll-slp'...)."""
    level, *off = spec.split("-")
    if level not in ("O0", "O1", "O2", "O3") or any(s not in _SWITCHES for s in off):
        raise SystemExit(f"a variant is O0-O3 followed by -{', -'.join(_SWITCHES)}: not {spec!r}")
    return int(level[1]), frozenset(_SWITCHES[s] for s in off)


def _compile_time(text: str, target: Any, spec: str, repeat: int) -> tuple[float, str]:
    """(best CPU seconds of optimization and code generation, object code digest)."""
    import llvmlite.binding as llvm

    from phasec.backend.llvm import objworker

    level, off = parse_variant(spec)
    best, digest = float("inf"), ""
    for _ in range(repeat):
        tm = objworker.target_machine(target.triple, target.cpu, target.features)
        mod = llvm.parse_assembly(text)
        mod.triple = target.triple
        mod.data_layout = str(tm.target_data)
        t0 = time.thread_time()
        objworker.optimize(mod, tm, level, off)
        obj = bytes(tm.emit_object(mod))
        best = min(best, time.thread_time() - t0)
        digest = hashlib.sha256(obj).hexdigest()
    return best, digest


def variant_costs(model: str, specs: list[str], repeat: int = 3) -> None:
    """Print each kernel's LLVM time under each variant of ``specs`` (module docstring)."""
    from bench_compile_kernels import emitted_library

    for spec in specs:
        parse_variant(spec)
    target, names, module_of = emitted_library(model)
    totals = dict.fromkeys(specs, 0.0)
    rows = []
    for name in names:
        text = module_of(name)
        cells: list[str] = []
        first = ""
        for spec in specs:
            seconds, digest = _compile_time(text, target, spec, repeat)
            totals[spec] += seconds
            first = first or digest
            cells.append(C.fmt_seconds(seconds) + ("" if digest == first else " *"))
        rows.append((name, *cells))
    rows.append((f"sum of {len(names)} kernels", *(C.fmt_seconds(totals[s]) for s in specs)))
    print(f"LLVM optimization + code generation per kernel (alone), CPU of one thread, best of "
          f"{repeat}; * other object code than {specs[0]}; {C.machine_description()}; "
          f"load average {os.getloadavg()[0]:.2f}\n")
    C.print_table(("kernel", *specs), rows)


def _input_arrays(path: str) -> list[Any]:
    """Random float32 arrays for the graph inputs of ``path`` (symbolic dimensions 1)."""
    import numpy as np
    import onnx

    graph = onnx.load(path, load_external_data=False).graph
    initialized = {i.name for i in graph.initializer}
    rng = np.random.default_rng(0)
    return [rng.standard_normal([d.dim_value or 1 for d in i.type.tensor_type.shape.dim])
            .astype(np.float32) for i in graph.input if i.name not in initialized]


def _library(exe: Any, spec: str) -> dict[str, Callable[..., Any]]:
    """``exe``'s kernels compiled with the variant ``spec``, in this process."""
    import functools

    from phasec.backend.llvm import compile_prim_funcs, objworker, runtime

    level, off = parse_variant(spec)
    optimize = objworker.optimize
    objworker.optimize = functools.partial(optimize, off=off)  # type: ignore[assignment]
    try:
        runtime.clear_cache()
        lib = compile_prim_funcs(dict(exe.prim_funcs), check_bounds=exe.check_bounds,
                                 opt_level=level)
        return {name: lib[name] for name in exe.prim_funcs}
    finally:
        objworker.optimize = optimize  # type: ignore[assignment]


def variant_ab(model: str, spec: str, rounds: int = 20, base: str = "O3") -> None:
    """Print each kernel's run time compiled with ``base`` and with ``spec``
    (module docstring)."""
    import numpy as np

    import phasec
    from bench_compile_kernels import _model_file
    from phasec.backend.llvm.jit import set_num_threads
    from phasec.frontend.onnx import from_onnx

    os.environ["PHASEC_KERNEL_CACHE"] = "0"  # (each variant compiled here, nothing cached)
    os.environ["PHASEC_COMPILE_JOBS"] = "1"  # (in this process, through its optimize)
    set_num_threads(1)
    path = _model_file(model)
    exe = phasec.build(from_onnx(path), 2, kernels="none")
    specs = (base, spec)
    libs = {s: _library(exe, s) for s in specs}
    args = _input_arrays(path)
    best: dict[str, dict[str, float]] = {s: {} for s in specs}
    spent: dict[str, float] = {}

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        native = getattr(fn, "native_call", None)  # (as the VM calls it: see profiler.py)

        def call(*kargs: Any) -> Any:
            t = time.thread_time()
            if native is None:
                fn(*kargs)
            elif rc := native(*kargs):
                fn.failed(rc, kargs)
            spent[name] = spent.get(name, 0.0) + time.thread_time() - t
        call.written_arguments = getattr(fn, "written_arguments", None)  # type: ignore[attr-defined]
        return call

    vms = {s: phasec.VirtualMachine(exe, kernels={n: timed(n, k) for n, k in libs[s].items()})
           for s in specs}
    outs = [[np.asarray(o) for o in _outputs(vms[s]["main"](*args))] for s in specs]
    equal = all(np.array_equal(a, b) for a, b in zip(*outs))
    for r in range(rounds):
        for s in (specs if r % 2 == 0 else specs[::-1]):
            spent.clear()
            vms[s]["main"](*args)
            for name, seconds in spent.items():
                best[s][name] = min(best[s].get(name, float("inf")), seconds)
    names = sorted(best[base], key=lambda n: -best[base][n])
    rows = [(n, C.fmt_seconds(best[base][n]), C.fmt_seconds(best[spec][n]),
             f"{best[spec][n] / best[base][n]:.3f}") for n in names]
    a, b = sum(best[base].values()), sum(best[spec].values())
    rows.append((f"sum of {len(names)} kernels", C.fmt_seconds(a), C.fmt_seconds(b), f"{b / a:.3f}"))
    print(f"{model}: kernels compiled with {base} and {spec}, outputs "
          f"{'bitwise equal' if equal else 'DIFFERENT'}; one thread, thread time, best of "
          f"{rounds} alternating rounds; load average {os.getloadavg()[0]:.2f}\n")
    C.print_table(("kernel", base, spec, "ratio"), rows)


def _outputs(result: Any) -> list[Any]:
    return list(result) if isinstance(result, (tuple, list)) else [result]

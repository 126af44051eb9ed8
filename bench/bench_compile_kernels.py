"""Where a cold build of one ONNX model spends its CPU time, kernel by kernel.

``python bench/bench_compile.py --kernels squeezenet`` (or any light model
of ``bench_onnx.py``, or a path to an ``.onnx`` file) prints, in this process
and on one core (CPU time of this thread, so other load on the machine
inflates it little):

* the Python side: import, the pass pipeline with its verification and VM
  code generation (``build(kernels="none")``);
* one row per kernel: LLVM IR emission in Python, then LLVM parsing, the
  optimization pipeline (phasec's own: ``objworker.optimize`` at O3) and
  machine code generation of a module holding that kernel alone, with the
  characters of IR before and after optimization (how much LLVM's
  unrolling and vectorization grew it);
* the LLVM passes that cost most over the whole library (LLVM's own
  pass timing), so a pipeline change can be aimed at them.

A kernel compiled alone repeats the shared library code (runtime helpers,
math functions) that the real build compiles once per module; those cost
about 3 ms a module (an empty module), so the sum of the rows is the build's
LLVM time within a few percent.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

import _common as C

__all__ = ["kernel_profile"]


@dataclass
class KernelCost:
    name: str
    emit: float
    parse: float
    optimize: float
    codegen: float
    ir_chars: int
    optimized_chars: int

    @property
    def llvm(self) -> float:
        return self.parse + self.optimize + self.codegen


def _model_file(name: str) -> str:
    if name.endswith(".onnx"):
        return name
    import bench_onnx as O

    return O._model_path(name)


def _compile_alone(text: str, target: Any, opt_level: int) -> tuple[float, float, float, int]:
    """(parse, optimize, codegen) CPU seconds and optimized IR characters of one module."""
    import llvmlite.binding as llvm

    from phasec.backend.llvm import objworker

    tm = objworker.target_machine(target.triple, target.cpu, target.features)
    t0 = time.thread_time()
    mod = llvm.parse_assembly(text)
    mod.verify()
    mod.triple = target.triple
    mod.data_layout = str(tm.target_data)
    t1 = time.thread_time()
    objworker.optimize(mod, tm, opt_level)
    t2 = time.thread_time()
    optimized = len(str(mod))
    tm.emit_object(mod)
    return t1 - t0, t2 - t1, time.thread_time() - t2, optimized


_TIMING_ROW = re.compile(r"^\s*([\d.]+)\s+\(.*\)\s+([A-Za-z<>:,_ ]+?)\s*$")


def _pass_times(text: str, target: Any, opt_level: int) -> list[tuple[str, float]]:
    """LLVM's per-pass user time (seconds) optimizing ``text``, largest first."""
    import llvmlite.binding as llvm

    from phasec.backend.llvm import objworker

    tm = objworker.target_machine(target.triple, target.cpu, target.features)
    mod = llvm.parse_assembly(text)
    mod.triple = target.triple
    mod.data_layout = str(tm.target_data)
    pb = objworker.pass_builder(tm, opt_level)
    pb.start_pass_timing()
    pb.getModulePassManager().run(mod, pb)
    report = pb.finish_pass_timing()
    seen: dict[str, float] = {}
    for line in report.splitlines():
        m = _TIMING_ROW.match(line)
        # (LLVM lists each pass twice, once per timer group: keep the first)
        if m and not m.group(2).startswith("Total") and m.group(2) not in seen:
            seen[m.group(2)] = float(m.group(1))
    return sorted(seen.items(), key=lambda kv: -kv[1])


def emitted_library(model: str) -> tuple[Any, list[str], Callable[[str], str]]:
    """(the host target, the kernel names of a cold build of ``model``, a
    function giving the LLVM module of one kernel alone)."""
    os.environ["PHASEC_KERNEL_CACHE"] = "0"
    from phasec.backend.llvm import runtime as R
    from phasec.frontend.onnx import from_onnx
    from phasec.pipeline import build
    from phasec.target.tuning import host_tuning

    funcs = build(from_onnx(_model_file(model)), 2, kernels="none").prim_funcs
    target = R.host_target()
    options = R.CodegenOptions(cpu=target.cpu, features=target.features,
                               prefer_vector_width=host_tuning().vector_bits)
    gen = R.ModuleCodegen(options, R.array_data_offset, R.array_layout)
    names = sorted(funcs)
    for name in names:
        gen.add_kernel(name, funcs[name])

    def module_of(name: str) -> str:
        rest = [n for n in names if n != name]
        return gen.finish_split([[name], rest] if rest else [[name]])[0]

    return target, names, module_of


def kernel_profile(model: str, top_passes: int = 12) -> None:
    """Print where a cold build of ``model`` spends its CPU time (module docstring)."""
    os.environ["PHASEC_KERNEL_CACHE"] = "0"  # nothing from an earlier build
    t0 = time.thread_time()
    import phasec  # noqa: F401
    from phasec.backend.llvm import runtime as R
    from phasec.frontend.onnx import from_onnx
    from phasec.pipeline import build
    from phasec.target.tuning import host_tuning

    t1 = time.thread_time()
    exe = build(from_onnx(_model_file(model)), 2, kernels="none")
    t2 = time.thread_time()
    funcs = exe.prim_funcs
    target = R.host_target()
    options = R.CodegenOptions(cpu=target.cpu, features=target.features,
                               prefer_vector_width=host_tuning().vector_bits)
    gen = R.ModuleCodegen(options, R.array_data_offset, R.array_layout)
    emit: dict[str, float] = {}
    for name in sorted(funcs):
        t = time.thread_time()
        gen.add_kernel(name, funcs[name])
        emit[name] = time.thread_time() - t
    sizes = gen.kernel_sizes()
    names = sorted(funcs)
    costs = []
    for name in names:
        rest = [n for n in names if n != name]
        text = gen.finish_split([[name], rest] if rest else [[name]])[0]
        parse, optimize, codegen, optimized = _compile_alone(text, target, 3)
        costs.append(KernelCost(name, emit[name], parse, optimize, codegen, sizes[name],
                                optimized))
    costs.sort(key=lambda k: -(k.emit + k.llvm))
    print(f"cold build of {model}, CPU time of one thread; {C.machine_description()}; "
          f"load average {os.getloadavg()[0]:.2f}\n")
    C.print_table(("phase (Python)", "cpu"),
                  [("import phasec", C.fmt_seconds(t1 - t0)),
                   ("passes, verification, VM codegen", C.fmt_seconds(t2 - t1)),
                   ("LLVM IR emission (sum of kernels)",
                    C.fmt_seconds(sum(k.emit for k in costs)))])
    print()
    rows = [(k.name, C.fmt_seconds(k.emit), C.fmt_seconds(k.parse), C.fmt_seconds(k.optimize),
             C.fmt_seconds(k.codegen), k.ir_chars, k.optimized_chars) for k in costs]
    rows.append((f"sum of {len(costs)} kernels", C.fmt_seconds(sum(k.emit for k in costs)),
                 C.fmt_seconds(sum(k.parse for k in costs)),
                 C.fmt_seconds(sum(k.optimize for k in costs)),
                 C.fmt_seconds(sum(k.codegen for k in costs)),
                 sum(k.ir_chars for k in costs), sum(k.optimized_chars for k in costs)))
    C.print_table(("kernel", "IR emit", "parse", "optimize", "codegen", "IR chars",
                   "optimized"), rows)
    print()
    passes = _pass_times(gen.finish(), target, 3)
    whole = sum(s for _, s in passes) or 1.0
    C.print_table(("LLVM pass (whole library, O3)", "cpu", "share"),
                  [(n, C.fmt_seconds(s), f"{100 * s / whole:.1f}%")
                   for n, s in passes[:top_passes]])

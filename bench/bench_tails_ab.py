"""Run time of a model's kernels with the GEMM's columns in one loop
(:meth:`phasec.te.schedules.gemm.GemmEmitter._one_loop`) and in the form
before it (the last panel and the last narrower tile after the loop), one
process: the model built twice (the second with ``_one_loop_fits`` false),
each library compiled here, then the calls through two VMs alternating;
per kernel the best thread time of its calls over the rounds, on one
thread (``--threads 1``, the work) or two (wall time of each call, the
balance of the parallel loops); issue 29, tails (bench/README.md)::

    python bench/bench_tails_ab.py squeezenet --rounds 30 --threads 1

``--llvm``: instead, each changed kernel's LLVM CPU time (parse, O3,
code generation of a module holding it alone), both forms alternating,
best of ``--rounds``.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import _common as C


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--llvm", action="store_true", help="LLVM CPU per changed kernel")
    ap.add_argument("--quick", action="store_true", help="two rounds")
    args = ap.parse_args()
    if args.quick:
        args.rounds = 2
    os.environ["PHASEC_KERNEL_CACHE"] = "0"
    import numpy as np

    import phasec
    from bench_compile_kernels import _model_file
    from bench_compile_variants import _input_arrays, _outputs
    from phasec.backend.llvm import compile_prim_funcs, runtime
    from phasec.backend.llvm.jit import set_num_threads
    from phasec.frontend.onnx import from_onnx
    from phasec.te.schedules.gemm import GemmEmitter

    set_num_threads(2)  # (the schedules sized for this machine's two threads)
    path = _model_file(args.model)
    fits = GemmEmitter._one_loop_fits
    exes = {}
    for form in ("before", "one loop"):
        if form == "before":
            GemmEmitter._one_loop_fits = lambda self: False  # type: ignore[method-assign]
        exes[form] = phasec.build(from_onnx(path), 2, kernels="none")
        GemmEmitter._one_loop_fits = fits  # type: ignore[method-assign]
    if args.llvm:
        _llvm_ab(exes, args.rounds)
        return
    libs = {}
    for form, exe in exes.items():
        runtime.clear_cache()
        lib = compile_prim_funcs(dict(exe.prim_funcs), check_bounds=exe.check_bounds)
        libs[form] = {name: lib[name] for name in exe.prim_funcs}
    set_num_threads(args.threads)
    clock = time.thread_time if args.threads == 1 else time.perf_counter
    spent: dict[str, float] = {}

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        native = getattr(fn, "native_call", None)

        def call(*kargs: Any) -> Any:
            t = clock()
            if native is None:
                fn(*kargs)
            elif rc := native(*kargs):
                fn.failed(rc, kargs)
            spent[name] = spent.get(name, 0.0) + clock() - t
        call.written_arguments = getattr(fn, "written_arguments", None)  # type: ignore
        return call

    vms = {f: phasec.VirtualMachine(exes[f], kernels={n: timed(n, k) for n, k in libs[f].items()})
           for f in exes}
    arrays = _input_arrays(path)
    outs = [[np.asarray(o) for o in _outputs(vms[f]["main"](*arrays))] for f in exes]
    equal = all(np.array_equal(a, b) for a, b in zip(*outs))
    best: dict[str, dict[str, float]] = {f: {} for f in exes}
    forms = list(exes)
    for r in range(args.rounds):
        for f in (forms if r % 2 == 0 else forms[::-1]):
            spent.clear()
            vms[f]["main"](*arrays)
            for name, seconds in spent.items():
                best[f][name] = min(best[f].get(name, float("inf")), seconds)
    a, b = forms
    changed = [n for n in best[a] if str(exes[a].prim_funcs[n])
               != str(exes[b].prim_funcs[n])]
    if not changed:
        print(f"{args.model}: no kernel changed")
        return
    names = sorted(changed, key=lambda n: -best[a][n])
    rows = [(n, C.fmt_seconds(best[a][n]), C.fmt_seconds(best[b][n]),
             f"{best[b][n] / best[a][n]:.3f}") for n in names]
    sa, sb = sum(best[a][n] for n in names), sum(best[b][n] for n in names)
    rows.append((f"sum of {len(names)} changed kernels", C.fmt_seconds(sa), C.fmt_seconds(sb),
                 f"{sb / sa:.3f}"))
    print(f"{args.model}: outputs {'bitwise equal' if equal else 'DIFFERENT'}; "
          f"{args.threads} thread(s), {'thread' if args.threads == 1 else 'wall'} time, "
          f"best of {args.rounds} alternating rounds; load average {os.getloadavg()[0]:.2f}\n")
    C.print_table(("kernel", a, b, "ratio"), rows)


def _llvm_ab(exes: dict[str, Any], rounds: int) -> None:
    """Each changed kernel's LLVM CPU (parse + O3 + codegen), forms alternating."""
    from bench_compile_kernels import _compile_alone
    from phasec.backend.llvm import runtime as R
    from phasec.target.tuning import host_tuning

    target = R.host_target()
    options = R.CodegenOptions(cpu=target.cpu, features=target.features,
                               prefer_vector_width=host_tuning().vector_bits)
    forms = list(exes)
    a, b = forms
    names = sorted(n for n in exes[a].prim_funcs
                   if str(exes[a].prim_funcs[n]) != str(exes[b].prim_funcs[n]))
    texts = {}
    for f in forms:
        gen = R.ModuleCodegen(options, R.array_data_offset, R.array_layout)
        for n in names:
            gen.add_kernel(n, exes[f].prim_funcs[n])
        for n in names:
            rest = [m for m in names if m != n]
            texts[f, n] = gen.finish_split([[n], rest] if rest else [[n]])[0]
    best: dict[tuple[str, str], float] = {}
    for r in range(rounds):
        for f in (forms if r % 2 == 0 else forms[::-1]):
            for n in names:
                t = sum(_compile_alone(texts[f, n], target, 3)[:3])
                best[f, n] = min(best.get((f, n), float("inf")), t)
    rows = [(n, C.fmt_seconds(best[a, n]), C.fmt_seconds(best[b, n]),
             f"{best[b, n] / best[a, n]:.3f}") for n in sorted(names, key=lambda n: -best[a, n])]
    sa, sb = sum(best[a, n] for n in names), sum(best[b, n] for n in names)
    rows.append((f"sum of {len(names)} changed kernels", C.fmt_seconds(sa), C.fmt_seconds(sb),
                 f"{sb / sa:.3f}"))
    print(f"LLVM CPU (parse, O3, codegen) of each changed kernel alone, best of {rounds} "
          f"alternating rounds; load average {os.getloadavg()[0]:.2f}\n")
    C.print_table(("kernel", a, b, "ratio"), rows)


if __name__ == "__main__":
    main()

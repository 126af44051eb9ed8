"""Compile time of the default pipeline: the 10k-binding chain and every example model.

For each program, ``phasec.build(mod, opt_level=2)`` (verify after every
pass, the default) split into:

* ``passes``: time in pass bodies (PassTiming);
* ``verify``: time in the verifier after each pass;
* ``codegen``: VM bytecode generation (includes the final check);
* ``llvm``: compiling the kernels to native code (the LLVM cache is
  cleared first, so this is a cold compile);
* ``total``: wall clock of the whole build.

Programs: ``chain10k`` (one dataflow block of 10,000 elementwise bindings,
parsed from TVMScript; reference: TVM 0.27's default pipeline takes about
4.1 s), the bundled examples (``phasec/examples``: mlp, cnn, transformer)
and the models of ``bench_runtime.py``. Parsing is not included (its time
is printed separately). Best of R builds; the slowest passes of the chain
are listed below the table.

    python bench/bench_compile.py             # best of 3
    python bench/bench_compile.py --quick     # one build each, 2k-binding chain
    python bench/bench_compile.py --chain 20000 --repeat 5

``--models resnet50,squeezenet`` measures instead what a user waits for
the first time and every later time they load an ONNX model (the light
models of ``bench_onnx.py``): each build in a fresh process, from the
file to a VirtualMachine ready to run (``phasec.build_file``; phasec
imported beforehand, as ONNX Runtime is), against ONNX Runtime's session
creation on the same file in a fresh process. ``cold`` starts with an
empty cache (a private temporary one: no kernels, no builds), ``warm`` is
the next build with that cache. Wall time and
CPU time (the build process plus the compile workers it waited for: the
better figure when others share the machine) are printed beside the load
average at the time::

    python bench/bench_compile.py --models resnet50,squeezenet --repeat 3

``--kernels MODEL`` prints where a cold build of one model spends its CPU
time: Python phases, then per kernel IR emission, LLVM optimization and
code generation, then the costliest LLVM passes (bench_compile_kernels.py)::

    python bench/bench_compile.py --kernels squeezenet

``--variants MODEL`` and ``--variant-ab MODEL`` measure what LLVM's pipeline
switches (unrolling, vectorization, the level) cost in compile time and buy
in run time, kernel by kernel (bench_compile_variants.py)::

    python bench/bench_compile.py --variants squeezenet --variant-list O3,O3-unroll,O2
    python bench/bench_compile.py --variant-ab squeezenet --variant O3-unroll
"""

from __future__ import annotations

import _common as C

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402


@dataclass
class BuildTimes:
    total: float
    passes: float
    verify: float
    codegen: float
    llvm: float
    kernels: int
    slowest: list[tuple[str, float, float]]


def build_once(mod: Any, verify: str = "each") -> BuildTimes:
    """One cold build of ``mod``, timed by parts."""
    from phasec.backend.llvm import clear_cache
    from phasec.backend.vm import codegen
    from phasec.pipeline import lower
    from phasec.transform import PassTiming, verification

    clear_cache()
    verification.forget_verified()
    gc.collect()
    timing = PassTiming()
    t0 = time.perf_counter()
    lowered = lower(mod, 2, verify=verify, instruments=[timing])
    t1 = time.perf_counter()
    exe = codegen(lowered, verify=not verification.is_verified(lowered))
    t2 = time.perf_counter()
    exe.kernels("llvm")
    t3 = time.perf_counter()
    rows = sorted(timing.rows(), key=lambda r: -(r.seconds + r.verify_seconds))
    return BuildTimes(t3 - t0, timing.total_seconds, timing.verify_seconds, t2 - t1, t3 - t2,
                      len(exe.prim_funcs),
                      [(r.name, r.seconds, r.verify_seconds) for r in rows[:6]])


def best_build(mod: Any, repeat: int) -> BuildTimes:
    best: BuildTimes | None = None
    for _ in range(repeat):
        t = build_once(mod)
        if best is None or t.total < best.total:
            best = t
    assert best is not None
    return best


def programs(chain: int) -> list[tuple[str, str]]:
    """(name, TVMScript source)."""
    from phasec.cli.run import EXAMPLES, example_source

    import bench_runtime as R

    out = [(f"chain{chain // 1000}k" if chain % 1000 == 0 else f"chain{chain}",
            C.chain_source(chain))]
    out += [(f"example {name}", example_source(name)) for name in EXAMPLES]
    out += [(f"bench {m.name}", m.source) for m in R.MODELS if m.name != "tiny"]
    return out


def _cpu_seconds() -> float:
    """CPU time of this process and of the children it has waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def model_worker(engine: str, path: str) -> None:
    """In a fresh process: build ``path`` with ``engine`` (phasec or ort) and
    print the figures as JSON (the parent reads the last line)."""
    t0 = time.perf_counter()
    if engine == "phasec":
        import phasec
        import phasec.buildcache  # noqa: F401 - what building needs, imported like ORT
    else:
        import onnxruntime as ort
    t1 = time.perf_counter()
    c1 = _cpu_seconds()
    if engine == "phasec":
        vm = phasec.VirtualMachine(phasec.build_file(path))
        assert vm["main"] is not None
    else:
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    print(json.dumps({"import": t1 - t0, "wall": time.perf_counter() - t1,
                      "cpu": _cpu_seconds() - c1}))


def _run_worker(engine: str, path: str, cache_dir: str) -> dict[str, float]:
    env = {**os.environ, "PHASEC_CACHE_DIR": cache_dir}
    env.pop("PHASEC_KERNEL_CACHE", None)
    load = os.getloadavg()[0]
    out = subprocess.run([sys.executable, __file__, "--worker", engine, path], env=env,
                         capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"{engine} worker failed on {path}:\n{out.stderr}")
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "load": load}


def models_table(names: list[str], repeat: int) -> None:
    """Cold and warm builds of ONNX models vs ONNX Runtime's session creation."""
    import bench_onnx as O

    rows = []
    for name in names:
        path = O._model_path(name)
        best: dict[str, dict[str, float]] = {}
        for _ in range(repeat):
            with tempfile.TemporaryDirectory(prefix="phasec-bench-cache-") as tmp:
                cache = os.path.join(tmp, "kernels")
                for label, engine in (("cold", "phasec"), ("warm", "phasec"), ("ort", "ort")):
                    t = _run_worker(engine, path, cache)
                    if label not in best or t["cpu"] < best[label]["cpu"]:
                        best[label] = t
        for label in ("cold", "warm", "ort"):
            t = best[label]
            rows.append((name, label, C.fmt_seconds(t["wall"]), C.fmt_seconds(t["cpu"]),
                         f"{t['load']:.2f}", C.fmt_seconds(t["import"])))
    C.print_table(("model", "build", "wall", "cpu", "load avg", "import (excluded)"), rows)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        model_worker(argv[1], argv[2])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one build each, 2k-binding chain")
    ap.add_argument("--chain", type=int, default=None, help="bindings of the chain (10000)")
    ap.add_argument("--repeat", type=int, default=None, help="best of R builds (3)")
    ap.add_argument("--models", default=None,
                    help="ONNX light models (resnet50,squeezenet,...): cold and warm builds "
                         "in fresh processes against ONNX Runtime's session creation")
    ap.add_argument("--kernels", default=None, metavar="MODEL",
                    help="a light ONNX model (or .onnx path): CPU time of a cold build by "
                         "phase and by kernel, and the costliest LLVM passes")
    ap.add_argument("--variants", default=None, metavar="MODEL",
                    help="LLVM's CPU time per kernel under each pipeline variant of "
                         "--variant-list, and whether the object code changes")
    ap.add_argument("--variant-list", default="O3,O3-unroll,O2",
                    help="pipeline variants: O0-O3, then -unroll, -vec, -slp, -interleave "
                         "for switches off (O3,O3-unroll,O2)")
    ap.add_argument("--variant-ab", default=None, metavar="MODEL",
                    help="run time per kernel compiled with O3 and with --variant, "
                         "alternating, one thread")
    ap.add_argument("--variant", default="O3-unroll", help="the variant of --variant-ab")
    ap.add_argument("--rounds", type=int, default=20, help="rounds of --variant-ab (20)")
    args = ap.parse_args(argv)
    if args.variants or args.variant_ab:
        import bench_compile_variants as V

        if args.variants:
            V.variant_costs(args.variants, args.variant_list.split(","), args.repeat or 3)
        if args.variant_ab:
            V.variant_ab(args.variant_ab, args.variant, args.rounds)
        return
    if args.kernels:
        from bench_compile_kernels import kernel_profile

        kernel_profile(args.kernels)
        return
    if args.models:
        print(f"time to a model ready to run, fresh process each, best CPU time of "
              f"{args.repeat or 3}; {C.machine_description()}\n")
        models_table(args.models.split(","), args.repeat or 3)
        return
    chain = args.chain or (2000 if args.quick else 10000)
    repeat = args.repeat or (1 if args.quick else 3)

    import phasec

    print(f"compile time, phasec.build(opt_level=2, verify='each'), cold LLVM cache; "
          f"{C.machine_description()}; best of {repeat}\n")
    rows = []
    chain_detail: BuildTimes | None = None
    for name, source in programs(chain):
        mod, parse_s = C.timed(lambda: phasec.parse(source))
        t = best_build(mod, repeat)
        if chain_detail is None:
            chain_detail = t
        rows.append((name, C.count_bindings(mod), C.fmt_seconds(parse_s), C.fmt_seconds(t.total),
                     C.fmt_seconds(t.passes), C.fmt_seconds(t.verify),
                     C.fmt_seconds(t.codegen), C.fmt_seconds(t.llvm), t.kernels))
    C.print_table(("program", "bindings", "parse", "total", "passes", "verify", "codegen",
                   "llvm", "kernels"), rows)
    print("reference: TVM 0.27's default pipeline on the 10k chain takes about 4.1 s\n")
    assert chain_detail is not None
    C.print_table(("slowest passes of the chain", "pass", "verify after it"),
                  [(n, C.fmt_seconds(s), C.fmt_seconds(v)) for n, s, v in chain_detail.slowest])


if __name__ == "__main__":
    main()

"""Verifier scaling: seconds per 10k bindings, at every phase, for N = 1k..100k.

The program is one function whose dataflow block is a chain of N
elementwise bindings (``bench/_common.py: chain_source``). It is checked
with ``verifier.verify`` as parsed (ingestion) and after lowering passes
(run with verification off, so only the final check is timed):

* ``ingestion``: as parsed;
* ``lowering (LegalizeOps)``: Normalize, LambdaLifting, ToNonDataflow,
  LegalizeOps: every binding a ``call_tir`` into a PrimFunc;
* ``lowering (+CallTIRRewrite)``: also RemovePurityChecking and
  CallTIRRewrite: explicit allocations, twice the bindings;
* ``build (VMBuiltinLower)``: also StaticPlanBlockMemory and VMBuiltinLower.

For each N and phase: best-of-R seconds, seconds per 10k bindings of the
source chain and per 10k bindings of the module actually checked and the growth ratio against the previous N (10x
the bindings: a ratio of 10 is linear). Reference: TVM 0.27's
well-formedness check needs about 0.05 s per 10k bindings on the first
module and about 30 s for 8k bindings of the lowered one.

    python bench/bench_verifier_scaling.py            # N = 1k, 10k, 100k
    python bench/bench_verifier_scaling.py --quick    # N = 1k, 10k; fewer repeats
    python bench/bench_verifier_scaling.py --sizes 1000,20000 --repeat 5
    python bench/bench_verifier_scaling.py --profile 10000   # cProfile of one check per phase

Preparing the 100k modules (parsing and lowering) takes about a minute;
only the checks are timed.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import sys
from typing import Any

import _common as C

STAGES = (
    ("ingestion", ()),
    ("lowering (LegalizeOps)", ("Normalize", "LambdaLifting", "ToNonDataflow", "LegalizeOps")),
    ("lowering (+CallTIRRewrite)", ("RemovePurityChecking", "CallTIRRewrite")),
    ("build (VMBuiltinLower)", ("StaticPlanBlockMemory", "VMBuiltinLower")),
)


def prepared_modules(n: int) -> list[tuple[str, Any]]:
    """(stage label, module) for every stage, each from the previous one."""
    from phasec.transform import PassContext, get_pass

    mod = C.chain_module(n)
    out = []
    with PassContext(opt_level=2, verify="off"):
        for label, passes in STAGES:
            for name in passes:
                mod = get_pass(name)(mod)
            out.append((label, mod))
    return out


def time_verify(mod: Any, repeat: int) -> float:
    from phasec import verifier

    def run() -> None:
        verifier.verify(mod, phase=mod.phase)
    # The garbage collector's pauses are part of the cost a user sees, but a
    # collection triggered by earlier allocations would be charged at random.
    gc.collect()
    return C.best_of(run, repeat=repeat, warmup=1)


def profile(n: int, limit: int = 25) -> None:
    from phasec import verifier

    for label, mod in prepared_modules(n):
        prof = cProfile.Profile()
        prof.enable()
        verifier.verify(mod, phase=mod.phase)
        prof.disable()
        print(f"== {label}: {C.count_bindings(mod)} bindings")
        pstats.Stats(prof).sort_stats("tottime").print_stats(limit)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="N = 1k, 10k and 2 repeats")
    ap.add_argument("--sizes", default=None, help="comma-separated N (default 1000,10000,100000)")
    ap.add_argument("--repeat", type=int, default=None, help="best of R checks (default 5; "
                    "3 for the largest N)")
    ap.add_argument("--profile", type=int, default=None, metavar="N",
                    help="print a cProfile of one check per phase at N bindings and stop")
    args = ap.parse_args(argv)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))  # the default; never raised
    if args.profile:
        profile(args.profile)
        return
    sizes = ([int(s) for s in args.sizes.split(",")] if args.sizes
             else [1000, 10000] if args.quick else [1000, 10000, 100000])
    print(f"verifier scaling; {C.machine_description()}")
    print("chain of N elementwise bindings in one dataflow block; modules prepared with "
          "verify='off', then only verifier.verify timed (best of R)\n")
    results: dict[str, list[tuple[int, int, float]]] = {label: [] for label, _ in STAGES}
    for n in sizes:
        repeat = args.repeat or (2 if args.quick else 3 if n >= 50000 else 5)
        for label, mod in prepared_modules(n):
            bindings = C.count_bindings(mod)
            results[label].append((n, bindings, time_verify(mod, repeat)))
    rows = []
    for label, _ in STAGES:
        prev = None
        for n, bindings, secs in results[label]:
            per_n = secs / n * 10_000
            per_binding = secs / bindings * 10_000
            growth = "-" if prev is None else f"{secs / prev[1]:.1f} (N x{n / prev[0]:g})"
            rows.append((label, n, bindings, C.fmt_seconds(secs), f"{per_n:.3f} s",
                         f"{per_binding:.3f} s", growth))
            prev = (n, secs)
    C.print_table(("phase", "N", "bindings", "verify", "per 10k of N", "per 10k bindings",
                   "growth"), rows, left=1)
    print("per 10k of N: per 10k bindings of the source chain; per 10k bindings: of the "
          "module checked (lowering adds allocation bindings)")
    print("target: 0.05 s per 10k bindings at every phase (TVM 0.27: ~0.05 s at ingestion, "
          "~30 s for 8k bindings lowered)")


if __name__ == "__main__":
    main()

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
"""

from __future__ import annotations

import _common as C

import argparse  # noqa: E402
import gc  # noqa: E402
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


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one build each, 2k-binding chain")
    ap.add_argument("--chain", type=int, default=None, help="bindings of the chain (10000)")
    ap.add_argument("--repeat", type=int, default=None, help="best of R builds (3)")
    args = ap.parse_args(argv)
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

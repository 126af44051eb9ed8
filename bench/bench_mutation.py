"""Mutation score of ``check_pass``: how many plausible pass bugs it finds.

    python bench/bench_mutation.py                 # every mutant (~30 min)
    python bench/bench_mutation.py --quick         # a sample: every 6th mutant of each family
    python bench/bench_mutation.py --family swap   # one family
    python bench/bench_mutation.py --planted 20    # the two planted faults, 20 seeds each
    python bench/bench_mutation.py --json out.json # the figures, machine-readable

The mutants come from :mod:`phasec.testing.mutants` (made from the operator
registry through the public pass decorators: operand swaps, dropped or
replaced unary operators, shape/axis attributes off by one, reductions over
a wrong axis or with keepdims flipped, bugs in FoldConstant, FuseOps and
LegalizeOps). Each is checked by ``check_pass`` with its default budget
(``max_examples=100`` per phase); a mutant is *killed* when check_pass raises
:class:`~phasec.testing.PassCheckFailure`. The table gives, per family, the
mutants, the equivalent ones (excluded, with the reason), the killed
fraction of the others and the median seconds to kill (shrinking
included); then the survivors.
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import sys
import time
from typing import Any

import _common  # noqa: F401 - puts the repository on sys.path

from phasec.testing import PassCheckFailure, check_pass
from phasec.testing.mutants import FAMILIES, Mutant, catalogue, operator_mutant

_SEEDED = "seed" in inspect.signature(check_pass).parameters


def run_one(m: Mutant, seed: int | None) -> dict[str, Any]:
    """check_pass on one mutant: killed or not, the seconds, how."""
    kw: dict[str, Any] = {"derandomize": False}
    if _SEEDED and seed is not None:
        kw["seed"] = seed
    start = time.perf_counter()
    try:
        check_pass(m.make(), **kw)
        killed, kind = False, ""
    except PassCheckFailure as exc:
        killed, kind = True, exc.kind
    except Exception as exc:  # noqa: BLE001 - a bug outside the mutant: shown, not counted
        killed, kind = False, f"error: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
    return {"name": m.name, "family": m.family, "killed": killed, "kind": kind,
            "seconds": round(time.perf_counter() - start, 2)}


def table(results: list[dict[str, Any]], mutants: list[Mutant]) -> str:
    equivalent = [m for m in mutants if m.equivalent]
    lines = [f"{'family':10s} {'mutants':>7s} {'equiv':>6s} {'killed':>7s} {'score':>7s} "
             f"{'median s':>9s} {'max s':>7s}"]
    total_k = total_n = 0
    times_all: list[float] = []
    for fam in FAMILIES:
        rs = [r for r in results if r["family"] == fam]
        eq = sum(m.family == fam for m in equivalent)
        if not rs and not eq:
            continue
        killed = [r for r in rs if r["killed"]]
        times = [r["seconds"] for r in killed]
        times_all += times
        total_k += len(killed)
        total_n += len(rs)
        score = f"{100 * len(killed) / len(rs):.0f}%" if rs else "-"
        med = f"{statistics.median(times):.1f}" if times else "-"
        top = f"{max(times):.1f}" if times else "-"
        lines.append(f"{fam:10s} {len(rs) + eq:7d} {eq:6d} {len(killed):7d} {score:>7s} "
                     f"{med:>9s} {top:>7s}")
    if total_n:
        med = f"{statistics.median(times_all):.1f}" if times_all else "-"
        lines.append(f"{'all':10s} {total_n + len(equivalent):7d} {len(equivalent):6d} "
                     f"{total_k:7d} {100 * total_k / total_n:6.1f}% {med:>9s}")
    survivors = [r for r in results if not r["killed"]]
    lines.append("")
    lines.append(f"survivors ({len(survivors)}):" if survivors else "survivors: none")
    for r in survivors:
        lines.append(f"  {r['name']}   ({r['seconds']:.0f} s){'  ' + r['kind'] if r['kind'] else ''}")
    if equivalent:
        lines.append("")
        lines.append(f"equivalent, excluded ({len(equivalent)}):")
        for m in equivalent:
            lines.append(f"  {m.name}: {m.equivalent}")
    return "\n".join(lines)


def planted(seeds: int) -> dict[str, Any]:
    """The issue's two planted faults, ``seeds`` seeds each: caught how often."""
    out = {}
    for label, make in (("swap R.subtract", lambda: operator_mutant("subtract", "swap")),
                        ("drop R.nn.relu", lambda: operator_mutant("nn.relu", "drop"))):
        times, caught = [], 0
        for seed in range(seeds):
            r = run_one(Mutant(label, "planted", label, make), seed)
            caught += r["killed"]
            times.append(r["seconds"])
            print(f"  {label} seed {seed}: {'caught' if r['killed'] else 'MISSED'} "
                  f"in {r['seconds']:.1f} s", flush=True)
        out[label] = {"caught": caught, "seeds": seeds,
                      "median_s": round(statistics.median(times), 2)}
        print(f"{label}: caught in {caught} of {seeds} seeds, median "
              f"{statistics.median(times):.1f} s", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="every 6th mutant of each family")
    ap.add_argument("--family", choices=FAMILIES, help="only this family")
    ap.add_argument("--sample", type=int, default=0, help="every Nth mutant (default: all)")
    ap.add_argument("--planted", type=int, default=0, metavar="SEEDS",
                    help="only the two planted faults, with this many seeds each")
    ap.add_argument("--seed", type=int, default=0, help="check_pass's seed (default 0)")
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args(argv)
    if args.planted:
        figures: Any = planted(args.planted)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(figures, f, indent=2)
        return 0
    mutants = [m for m in catalogue() if args.family in (None, m.family)]
    step = args.sample or (6 if args.quick else 1)
    live: list[Mutant] = []
    for fam in FAMILIES:
        live += [m for m in mutants if m.family == fam and not m.equivalent][::step]
    print(f"{len(live)} mutants to check ({len(mutants)} in the catalogue, "
          f"{sum(bool(m.equivalent) for m in mutants)} equivalent)", flush=True)
    results = []
    for i, m in enumerate(live, 1):
        r = run_one(m, args.seed)
        results.append(r)
        print(f"[{i}/{len(live)}] {m.name}: "
              f"{'killed (' + r['kind'] + ')' if r['killed'] else 'SURVIVED'} "
              f"in {r['seconds']:.1f} s", flush=True)
    print()
    print(table(results, [m for m in mutants if m.equivalent] + live))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results,
                       "equivalent": {m.name: m.equivalent for m in mutants if m.equivalent}},
                      f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

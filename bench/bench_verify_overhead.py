"""Cost of verifying after every pass: PassContext(verify="each") vs "off".

Builds a long program (one dataflow block of N elementwise bindings, parsed
from TVMScript), runs pipelines over it in each verify mode and prints a
table: total time, time in pass bodies, time in the verifier, and the
overhead relative to ``verify="off"``.

Pipelines measured:

* ``synthetic``: K passes that rebuild every binding (a realistic linear
  pass cost), a transition pass, K more rebuilding passes;
* ``registered``: the real passes, when the registry has them (skipped
  otherwise);
* ``default``: the whole default pipeline (``phasec.pipeline.default_pipeline(2)``,
  ingestion to build, run with ``run_pipeline`` as ``phasec.build`` does).

Usage: ``python bench/bench_verify_overhead.py [--bindings 10000] [--passes 4] [--repeat 3]``
(``--quick``: 2000 bindings, one repeat).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from phasec.ir import ExprMutator, Function, IRModule, MatchCast, Phase, VarBinding
from phasec.script.parser import parse
from phasec.transform import (
    PassContext, PassTiming, Sequential, function_pass, list_passes, module_pass,
    parse_pipeline, verification,
)


def long_program(n: int) -> IRModule:
    lines = ["@I.ir_module", "class Module:", "    @R.function",
             '    def main(x: R.Tensor((16,), "float32")) -> R.Tensor((16,), "float32"):',
             "        with R.dataflow():"]
    prev = "x"
    ops = ("R.add", "R.multiply", "R.subtract")
    for i in range(n):
        lines.append(f"            lv{i} = {ops[i % 3]}({prev}, x)")
        prev = f"lv{i}"
    lines += [f"            gv = R.exp({prev})", "            R.output(gv)", "        return gv"]
    return parse("\n".join(lines))


class _Rebuild(ExprMutator):
    """Rebuilds every binding object (values and variables are kept)."""

    def visit_binding(self, binding):
        value = self.visit_expr(binding.value)
        if isinstance(binding, MatchCast):
            return MatchCast(binding.var, value, binding.struct_info, span=binding.span)
        return VarBinding(binding.var, value, span=binding.span)


@function_pass(phases=[Phase.INGESTION, Phase.OPTIMIZATION], name="RebuildBindings")
def rebuild_bindings(func: Function, mod: IRModule, ctx: PassContext) -> Function:
    return _Rebuild().visit_expr(func)


@module_pass(phases=Phase.INGESTION, transition_to=Phase.OPTIMIZATION, name="BenchLift")
def bench_lift(mod: IRModule, ctx: PassContext) -> IRModule:
    """A transition with nothing to lift (the program has no nested functions)."""
    return mod


def synthetic_pipeline(k: int) -> Sequential:
    return Sequential([rebuild_bindings] * k + [bench_lift] + [rebuild_bindings] * k,
                      name="synthetic")


def registered_pipeline() -> Sequential | None:
    wanted = ["LambdaLifting", "FoldConstant", "FuseOps", "LegalizeOps"]
    have = set(list_passes())
    names = [n for n in wanted if n in have]
    return parse_pipeline(",".join(names), name="registered") if names == wanted else None


def default_pipeline_runner() -> Callable[[IRModule], IRModule] | None:
    """The default pipeline as ``phasec.build`` runs it, or None if unavailable."""
    try:
        from phasec.pipeline import default_pipeline, run_pipeline
        pipeline = default_pipeline(2)
    except Exception:  # noqa: BLE001 - not built yet: the row is skipped
        return None
    return lambda mod: run_pipeline(pipeline, mod)


def measure(run: Callable[[], object], mode: str, repeat: int) -> tuple[float, float, float, int]:
    """Best-of-``repeat`` (total, pass, verify seconds, verifier calls)."""
    best = None
    for _ in range(repeat):
        verification.forget_verified()  # every run verifies its fresh input again
        timing = PassTiming()
        with PassContext(opt_level=3, verify=mode, instruments=[timing]):
            start = time.perf_counter()
            run()
            total = time.perf_counter() - start
        calls = sum(r.verify_calls for r in timing.rows())
        sample = (total, timing.total_seconds, timing.verify_seconds, calls)
        if best is None or sample[0] < best[0]:
            best = sample
    assert best is not None
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bindings", type=int, default=10000)
    ap.add_argument("--passes", type=int, default=4, help="rebuilding passes on each side "
                    "of the transition in the synthetic pipeline")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="2000 bindings, one repeat")
    args = ap.parse_args()
    if args.quick:
        args.bindings, args.repeat = min(args.bindings, 2000), 1

    verification.load_verifier()  # fail early and clearly if the verifier is missing
    mod = long_program(args.bindings)
    pipelines = [("synthetic", synthetic_pipeline(args.passes))]
    real = registered_pipeline()
    if real is not None:
        pipelines.append(("registered", real))
    default = default_pipeline_runner()

    print(f"program: 1 function, {args.bindings} bindings in one dataflow block; "
          f"best of {args.repeat}")
    header = ("pipeline", "passes", "verify", "total ms", "passes ms", "verify ms",
              "verifications", "overhead vs off")
    rows = []
    runs: list[tuple[str, int, Callable[[IRModule], IRModule]]] = [
        (label, len(seq.flatten()), seq) for label, seq in pipelines]
    if default is not None:
        from phasec.pipeline import default_pipeline
        runs.append(("default", len(default_pipeline(2).passes), default))
    for label, npasses, run in runs:
        results = {mode: measure(lambda: run(mod), mode, args.repeat)
                   for mode in ("off", "transitions", "each")}
        base = results["off"][0]
        for mode in ("off", "transitions", "each"):
            total, passes, verify, calls = results[mode]
            overhead = (total - base) / base * 100 if base > 0 else 0.0
            rows.append((label, str(npasses), mode, f"{total * 1e3:.1f}",
                         f"{passes * 1e3:.1f}", f"{verify * 1e3:.1f}", str(calls),
                         "-" if mode == "off" else f"{overhead:+.0f}%"))
    if real is None:
        print("(registered pipeline skipped: LambdaLifting, FoldConstant, FuseOps and "
              "LegalizeOps are not all registered yet)")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(c.ljust(w) if i < 3 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(r, widths))))


if __name__ == "__main__":
    main()

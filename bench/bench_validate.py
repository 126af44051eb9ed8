"""Result validation (``--validate-each``) and ``phasec bisect``: planted
miscompilations found, no false blame, and the overhead.

    python bench/bench_validate.py                     # examples + tiny ONNX models
    python bench/bench_validate.py --light squeezenet  # plus light ONNX models
    python bench/bench_validate.py --fuzz 200          # random programs, default pipeline
    python bench/bench_validate.py --only "" --fuzz-minutes 10   # a timed campaign
    python bench/bench_validate.py --quick             # the MLP example and one ONNX model

For each model: the default pipeline under ``ValidateResults`` (LLVM
kernels), its time against plain lowering (the overhead ratio) and whether
any pass was blamed (it must not be); then each planted pass of
``tests/helpers/planted.py`` (operand swap in a fused function, off-by-one
in a lowered loop, wrong constant fold) inserted into the default pipeline,
and the pass ``ValidateResults`` and bisection name, with bisection's
interpreter runs and the size of the minimized reproducer (lines of
TVMScript). ``--fuzz N`` draws N programs with ``phasec.testing.modules``
(``--fuzz-minutes M``: as many as M minutes allow) and counts blames on the
default pipeline, kernels compiled with LLVM as ``--validate-each`` runs
them.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from helpers.planted import PLANTED, planted_pipeline  # noqa: E402
from phasec import interp  # noqa: E402
from phasec.backend.kernel_runner import llvm_kernel_runner  # noqa: E402
from phasec.cli.run import load_example  # noqa: E402
from phasec.pipeline import lower  # noqa: E402
from phasec.testing.bisect import bisect_stages, run_stages  # noqa: E402
from phasec.testing.minimize import minimize_stage_change  # noqa: E402
from phasec.transform.results import validation_inputs  # noqa: E402
from phasec.transform.validate import ValidateResults  # noqa: E402


def _tiny_onnx(folder: Path) -> dict[str, str]:
    from onnx import TensorProto, helper, numpy_helper, save

    def model(name, nodes, inputs, output, inits):
        graph = helper.make_graph(
            nodes, name, [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                          for n, s in inputs],
            [helper.make_tensor_value_info(output[0], TensorProto.FLOAT, output[1])],
            [numpy_helper.from_array(v, k) for k, v in inits.items()])
        path = folder / f"{name}.onnx"
        save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
        return str(path)

    rng = np.random.default_rng(3)
    w = (rng.standard_normal((16, 8)) / 4).astype("float32")
    b = rng.standard_normal(8).astype("float32")
    k = (rng.standard_normal((4, 3, 3, 3)) / 5).astype("float32")
    return {
        "onnx-mlp": model("mlp", [helper.make_node("MatMul", ["x", "w"], ["h"]),
                                  helper.make_node("Sub", ["h", "b"], ["s"]),
                                  helper.make_node("Relu", ["s"], ["y"])],
                          [("x", [4, 16])], ("y", [4, 8]), {"w": w, "b": b}),
        "onnx-conv": model("conv", [helper.make_node("Conv", ["x", "k"], ["c"],
                                                     pads=[1, 1, 1, 1]),
                                    helper.make_node("Div", ["c", "d"], ["y"])],
                           [("x", [1, 3, 6, 6])], ("y", [1, 4, 6, 6]),
                           {"k": k, "d": np.array([2.0], "float32")}),
        "onnx-gemm": model("gemm", [helper.make_node("Gemm", ["x", "w", "b"], ["g"]),
                                    helper.make_node("Sub", ["g", "m"], ["s"]),
                                    helper.make_node("Softmax", ["s"], ["y"], axis=-1)],
                           [("x", [2, 16])], ("y", [2, 8]),
                           {"w": w, "b": b, "m": np.full(8, 0.5, "float32")}),
    }


def _load(name: str, paths: dict[str, str]):
    if name in paths:
        from phasec.frontend.onnx import from_onnx

        return from_onnx(paths[name])
    return load_example(name)


def bench_model(name: str, mod) -> None:
    runner = llvm_kernel_runner()
    start = time.perf_counter()
    lower(mod, 2)
    plain = time.perf_counter() - start
    check = ValidateResults(kernel_runner=runner, raise_on_change=False)
    start = time.perf_counter()
    lower(mod, 2, instruments=[check])
    validated = time.perf_counter() - start
    worst = max((c.ratio for c in check.checks), default=0.0)
    blame = check.change.pass_name if check.change else "none"
    print(f"{name:<14} default pipeline: blamed {blame:<8} worst error/bound {worst:.3g}; "
          f"lower {plain:.2f} s, with --validate-each {validated:.2f} s "
          f"({len(check.checks)} runs, ratio {validated / plain:.1f}x)", flush=True)
    args = validation_inputs(mod)
    ref = interp.run(mod, *args, kernel_runner=runner)
    for kind in PLANTED:
        pipeline = planted_pipeline(kind)
        check = ValidateResults(kernel_runner=runner, raise_on_change=False)
        lower(mod, 2, pipeline=pipeline, instruments=[check])
        named = check.change.pass_name if check.change else "none"
        stages = run_stages(mod, planted_pipeline(kind))
        found = bisect_stages(stages, args, ref, None, kernel_runner=runner)
        bisected = found.change.pass_name if found.change else "none"
        lines = "-"
        if found.change is not None:
            small = minimize_stage_change(stages, found.change.position,
                                          planted_pipeline(kind).passes, args,
                                          kernel_runner=runner)
            lines = str(len([t for t in small.module.script().splitlines()
                             if t.strip() and not t.startswith("#")])) if small else "-"
        # the last stage agreeing: the planted pass found nothing to break here
        no_effect = found.change is None and found.probes[-1:] == [(len(stages) - 1, True)]
        print(f"{'':<14} planted {kind:<11}: --validate-each names {named:<20} "
              f"bisect names {bisected:<20} ({found.runs} runs; reproducer {lines} lines)"
              + ("  [no effect on the results: nothing to find]" if no_effect else ""),
              flush=True)


class _TimeUp(Exception):
    pass


def fuzz(count: int, seed: int, minutes: float = 0.0) -> None:
    from hypothesis import HealthCheck, Phase, given, settings

    import phasec.testing  # noqa: F401 - registers the packed functions programs call
    from phasec.testing import modules

    tally = {"clean": 0, "blamed": 0, "not validated": 0}
    blamed: list[str] = []
    worst = [0.0]
    runner = llvm_kernel_runner()
    deadline = time.monotonic() + minutes * 60 if minutes else None

    @settings(max_examples=count if not minutes else 10**6, deadline=None, database=None,
              derandomize=not minutes, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(modules(max_bindings=6))
    def one(mod):
        if deadline is not None and time.monotonic() > deadline:
            raise _TimeUp
        check = ValidateResults(raise_on_change=False, seed=seed, kernel_runner=runner)
        try:
            lower(mod, 2, instruments=[check])
        except Exception:  # noqa: BLE001 - a module the pipeline or interpreter refuses
            tally["not validated"] += 1
            return
        worst[0] = max([worst[0], *(c.ratio for c in check.checks)])
        if check.change is not None:
            tally["blamed"] += 1
            blamed.append(check.change.describe(max_lines=10))
        else:
            tally["clean"] += 1

    try:
        one()
    except _TimeUp:
        pass
    what = f"{minutes:g} minutes" if minutes else f"{count} random programs"
    print(f"fuzz: {what}, default pipeline: {tally}; worst error/bound {worst[0]:.3g}")
    for text in blamed[:3]:
        print(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--light", default="", help="comma-separated light ONNX models")
    parser.add_argument("--fuzz", type=int, default=0, help="random programs to validate")
    parser.add_argument("--fuzz-minutes", type=float, default=0.0,
                        help="validate random programs for this many minutes")
    parser.add_argument("--only", default=None, help="comma-separated models to run (\"\": none)")
    parser.add_argument("--quick", action="store_true", help="two small models only")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    paths = _tiny_onnx(folder)
    if args.light:
        import onnx

        light = Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light"
        paths.update({m: str(light / f"light_{m}.onnx") for m in args.light.split(",")})
    names = ["mlp", "cnn", "transformer", *paths]
    if args.quick:
        names = ["mlp", "onnx-gemm"]
    if args.only is not None:
        names = [n for n in args.only.split(",") if n]
    for name in names:
        bench_model(name, _load(name, paths))
    if args.fuzz or args.fuzz_minutes:
        fuzz(args.fuzz, 0, args.fuzz_minutes)


if __name__ == "__main__":
    main()

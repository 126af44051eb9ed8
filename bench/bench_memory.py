"""Peak memory allocated by the VM with and without StaticPlanBlockMemory.

Each model is lowered twice:

* ``planned``: the default pipeline (``phasec.build``), where
  StaticPlanBlockMemory lets tensors whose lifetimes do not overlap share
  storage;
* ``unplanned``: the same passes called one by one in a PassContext,
  without StaticPlanBlockMemory (CallTIRRewrite's output goes straight into
  VMBuiltinLower: every tensor gets its own allocation). Passes are called
  directly, not through a Sequential, because a Sequential would run
  VMBuiltinLower's required passes, StaticPlanBlockMemory among them.

Both executables run the same inputs once on a fresh VM; the table gives
``vm.peak_bytes`` (the most VM-allocated bytes alive at once; inputs and
constants are not counted), the number of storage allocations, and the
saving. At ``opt_level=0`` nothing is fused, so every intermediate tensor
is a VM allocation and planning has the most to do; at ``opt_level=2``
FuseOps has already removed most intermediates.

    python bench/bench_memory.py            # opt_level 0 and 2
    python bench/bench_memory.py --quick    # opt_level 2, without the CNN
"""

from __future__ import annotations

import _common as C

import argparse  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402


def lower_without_planning(mod: Any, opt_level: int) -> Any:
    """The default pipeline's passes, minus StaticPlanBlockMemory, called one by one."""
    from phasec.pipeline import default_pipeline
    from phasec.transform import PassContext

    with PassContext(opt_level=opt_level, verify="transitions"):
        for p in default_pipeline(opt_level).passes:
            if p.info.name == "StaticPlanBlockMemory":
                continue
            if p.info.opt_level > opt_level and not p.info.is_transition:
                continue
            mod = p(mod)
    return mod


def run_peak(exe: Any, inputs: list[np.ndarray]) -> tuple[int, int, np.ndarray]:
    """(peak bytes, storage allocations, output) of one run on a fresh VM."""
    from phasec.backend.vm import VirtualMachine

    vm = VirtualMachine(exe)
    vm.reset_stats()
    out = vm["main"](*inputs)
    stats = vm.stats
    return stats["peak_bytes"], stats["storage_allocs"] + stats["tensor_allocs"], out


def model_inputs(source: str, rng: np.random.Generator) -> list[np.ndarray]:
    """Random float32 inputs for the parameters of ``main`` (symbolic dims = 2)."""
    import phasec
    from phasec.ir.struct_info import TensorStructInfo
    from phasec.ir.tir import IntImm

    mod = phasec.parse(source)
    out = []
    for p in mod["main"].params:
        sinfo = p.struct_info
        assert isinstance(sinfo, TensorStructInfo)
        shape = tuple(d.value if isinstance(d, IntImm) else 2 for d in sinfo.shape)
        out.append((rng.standard_normal(shape) * 0.1).astype(sinfo.dtype))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="opt_level 2 only, no CNN")
    args = ap.parse_args(argv)

    import phasec
    from phasec.backend.vm import codegen
    from phasec.cli.run import EXAMPLES, example_source

    import bench_runtime as R

    sources = [(f"example {n}", example_source(n)) for n in EXAMPLES
               if not (args.quick and n == "cnn")]
    sources += [(f"bench {m.name}", m.source) for m in R.MODELS]
    levels = (2,) if args.quick else (0, 2)
    print("VM peak bytes with and without StaticPlanBlockMemory (one run, fresh VM; "
          "symbolic dims = 2)\n")
    rows = []
    for opt_level in levels:
        for name, source in sources:
            inputs = model_inputs(source, np.random.default_rng(0))
            planned = phasec.build(phasec.parse(source), opt_level=opt_level)
            unplanned = codegen(lower_without_planning(phasec.parse(source), opt_level))
            peak_p, allocs_p, out_p = run_peak(planned, inputs)
            peak_u, allocs_u, out_u = run_peak(unplanned, inputs)
            same = np.allclose(out_p, out_u, rtol=1e-5, atol=1e-6)
            saving = 1 - peak_p / peak_u if peak_u else 0.0
            rows.append((name, opt_level, C.fmt_bytes(peak_u), C.fmt_bytes(peak_p),
                         f"{saving * 100:.0f}%", allocs_u, allocs_p,
                         "same" if same else "DIFFERENT"))
    C.print_table(("model", "opt", "peak unplanned", "peak planned", "saved",
                   "allocs unplanned", "allocs planned", "outputs"), rows, left=1)


if __name__ == "__main__":
    main()

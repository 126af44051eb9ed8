"""The PyTorch-exported corpus (tests/fixtures/torch_exports/) against ONNX
Runtime: every architecture imported, compiled and run by phasec and by ORT
on the same refilled weights and seeded inputs, in the same process.

Per model: the compile time (``from_onnx`` + ``build``, a cold kernel cache
of the bench's own), the largest difference from ORT over its output range
(``max|phasec - ORT| / max|ORT|``, at each size for a model with dynamic
axes) beside ORT's own (its result without graph optimizations against its
result with them: the noise floor of a model whose refilled weights make it
ill-conditioned), the run time of phasec and of ORT at one thread each (interleaved
batches, best of N; ``ratio`` is phasec / ORT) and, for a model with a
dynamic batch or sequence axis, the same model compiled a second time with
those axes fixed to the timed sizes (``static``): ``dyn/static`` is the
time of the one build with symbolic dimensions over the static build's, at
the same size.

    python bench/bench_torch_exports.py                 # every fixture
    python bench/bench_torch_exports.py --only bert,gpt2
    python bench/bench_torch_exports.py --quick         # best of 3
    python bench/bench_torch_exports.py --clock thread  # CPU time: a busy machine

onnxruntime is a bench extra, never a phasec dependency; PyTorch is not
needed (the fixtures are exported already, see their README.md).
"""

from __future__ import annotations

import os
import sys
import tempfile

os.environ["PHASEC_CACHE_DIR"] = tempfile.mkdtemp(prefix="phasec-bench-torch-")

import _common as C  # noqa: E402

C.prepare_blas_env(keep=C.wants_keep_blas_env())

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(C._ROOT, "tests"))
from helpers import torch_exports as tx  # noqa: E402

#: the sizes a dynamic axis is timed at (its other run checks a second size)
TIMED = {"batch": 2, "seq": 16, "tgt": 8}
CHECKED = {"batch": 3, "seq": 5, "tgt": 3}


def _rel_err(got: np.ndarray, expected: np.ndarray) -> float:
    got = np.asarray(got)
    if got.shape != expected.shape:
        return float("inf")
    return float(np.max(np.abs(got - expected)) / max(float(np.max(np.abs(expected))), 1e-30))


def _interleaved(fns: list, repeat: int, clock=time.perf_counter) -> list[float]:
    """Best seconds per call of each function, their batches taken in turn."""
    numbers = [C.calibrate(f, 0.02) for f in fns]
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for k, (f, n) in enumerate(zip(fns, numbers)):
            t0 = clock()
            for _ in range(n):
                f()
            best[k] = min(best[k], (clock() - t0) / n)
    return best


#: --clock: wall time, or the CPU time of the calling thread (both engines run
#: on it at one thread), which a machine shared with other jobs disturbs less
CLOCKS = {"wall": time.perf_counter, "thread": time.thread_time}


def bench(name: str, repeat: int, clock: str = "wall") -> list[str]:
    import phasec
    from phasec.backend.llvm.jit import set_num_threads
    from phasec.frontend.onnx import from_onnx

    set_num_threads(1)
    model = tx.load(name)
    dims = tx.input_dims(model)
    symbols = sorted({d for ds in dims.values() for d in ds if isinstance(d, str)})
    try:
        t0 = time.perf_counter()
        main = phasec.VirtualMachine(phasec.build(from_onnx(model)))["main"]
        compile_s = time.perf_counter() - t0
    except Exception as exc:  # noqa: BLE001 - a row saying what failed
        return [name, "no", f"{type(exc).__name__}: {str(exc).splitlines()[0][:60]}"]
    sess = tx.session(model)
    plain = tx.session(model, optimized=False)
    errs, noise = [], []
    for sizes in ([{}] if not symbols else [CHECKED, TIMED]):
        x = tx.inputs(model, sizes)
        (expected,) = sess.run(None, x)
        errs.append(_rel_err(main(*x.values()), expected))
        noise.append(_rel_err(plain.run(None, x)[0], expected))
    x = tx.inputs(model, TIMED)
    args = list(x.values())
    fns = [lambda: main(*args), lambda: sess.run(None, x)]
    if symbols:
        shapes = {k: [TIMED[d] if isinstance(d, str) else d for d in ds] for k, ds in dims.items()}
        static = phasec.VirtualMachine(phasec.build(from_onnx(model, shapes=shapes)))["main"]
        fns.append(lambda: static(*args))
    times = _interleaved(fns, repeat, CLOCKS[clock])
    dyn = C.fmt_ratio(times[0] / times[2]) if symbols else "-"
    return [name, "yes", f"{compile_s:.1f} s", " ".join(f"{e:.1e}" for e in errs),
            f"{max(noise):.1e}",
            C.fmt_seconds(times[0]), C.fmt_seconds(times[1]), C.fmt_ratio(times[0] / times[1]),
            C.fmt_seconds(times[2]) if symbols else "-", dyn,
            ",".join(f"{s}={TIMED[s]}" for s in symbols) or "static"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated fixture names")
    ap.add_argument("--quick", action="store_true", help="best of 3 batches")
    ap.add_argument("--repeat", type=int, default=10, help="timed batches per engine")
    ap.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                    help="wall time, or the calling thread's CPU time (steadier on a busy "
                         "machine)")
    ap.add_argument("--keep-blas-env", action="store_true")
    opts = ap.parse_args()
    names = opts.only.split(",") if opts.only else tx.names()
    repeat = 3 if opts.quick else opts.repeat
    print(C.machine_description())
    rows = []
    for name in names:
        rows.append(bench(name, repeat, opts.clock))
        print("  ".join(rows[-1]), flush=True)
    header = ["model", "phasec ok", "compile", "max rel err", "ORT self", "phasec 1T", "ORT 1T", "ratio",
              "static 1T", "dyn/static", "timed at"]
    C.print_table(header, [r + [""] * (len(header) - len(r)) for r in rows],
                  title=f"\nPyTorch exports, phasec against ONNX Runtime (1 thread, "
                        f"{opts.clock} time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

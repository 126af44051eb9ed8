"""The nine light ONNX models (``onnx/backend/test/data/light/``: ResNet-50,
DenseNet-121, Inception v1/v2, SqueezeNet, ShuffleNet, VGG-19, AlexNet,
ZFNet-512; weights made by ConstantOfShape, compute full size), phasec
against ONNX Runtime, in the same run.

For each model and engine a fresh worker process (so that peak memory is
the model's own):

* **compile**: phasec ``from_onnx`` + ``phasec.build`` + loading the VM
  (LLVM compilation of every kernel, cold: no kernel cache on disk);
  ONNX Runtime ``InferenceSession`` creation (graph optimizations, all
  levels);
* **run**: best of N batches (batch calibrated to ~0.2 s), one input of
  shape (1, 3, 224, 224), with 1 and with 2 threads (phasec's parallel loops
  via ``set_num_threads``; ONNX Runtime's ``intra_op_num_threads``, a new
  session per thread count); the "spread" is median/best over the batches;
* **peak memory**: the worker's peak resident set (``ru_maxrss``) minus its
  resident set after importing the engine, i.e. what compiling and running
  the model added (for phasec this includes the folded weights and LLVM's
  working memory; the VM's own peak of live tensors is shown separately);
* outputs are checked against each other (rtol 1e-3) before timing.

    python bench/bench_onnx.py                       # all nine models
    python bench/bench_onnx.py --models resnet50,squeezenet --repeat 5
    python bench/bench_onnx.py --quick               # squeezenet, best of 2
    python bench/bench_onnx.py --profile shufflenet  # each phasec kernel, 1 thread, and ORT

``--profile MODEL`` times every phasec kernel of one model at one thread
(each call site's best over the rounds, summed per kernel), the whole call
and ONNX Runtime's whole call in the same process, rounds alternating.
"""

from __future__ import annotations

import _common as C

C.prepare_blas_env(keep=C.wants_keep_blas_env())

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

MODELS = ["resnet50", "densenet121", "inception_v1", "inception_v2", "squeezenet", "shufflenet",
          "vgg19", "bvlc_alexnet", "zfnet512"]
THREADS = (1, 2)


def _model_path(name: str) -> str:
    import onnx

    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light",
                        f"light_{name}.onnx")


def _rss() -> int:
    """Current resident set size in bytes (Linux), else the peak so far."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _input(model: Any) -> tuple[str, Any]:
    import numpy as np

    inits = {t.name for t in model.graph.initializer}
    (vi,) = [v for v in model.graph.input if v.name not in inits]
    shape = tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
    return vi.name, np.random.default_rng(0).random(shape, np.float32)


def _time(fn: Any, repeat: int) -> tuple[float, float]:
    fn()  # warm up
    number = C.calibrate(fn, 0.2)
    samples = C.samples(fn, repeat, number, warmup=0)
    return min(samples), C.spread(samples)


def worker(engine: str, name: str, repeat: int) -> dict[str, Any]:
    """Compile and run one model in this process; returns the figures."""
    import numpy as np
    import onnx

    if engine == "phasec":
        import phasec
        from phasec.backend.llvm import set_num_threads
        from phasec.frontend.onnx import from_onnx
    else:
        import onnxruntime as ort
    model = onnx.load(_model_path(name))
    in_name, x = _input(model)
    base = _rss()
    out: dict[str, Any] = {"engine": engine, "model": name}
    if engine == "phasec":
        for n in THREADS:
            # built per thread count, as ORT's sessions below: a build sizes
            # some schedules by the threads set (tuning.build_threads)
            set_num_threads(n)
            t0 = time.perf_counter()
            vm = phasec.VirtualMachine(phasec.build(from_onnx(model)))
            if n == THREADS[0]:
                out["compile"] = time.perf_counter() - t0
            f = vm["main"]
            y = f(x)
            out[f"run{n}"], out[f"spread{n}"] = _time(lambda: f(x), repeat)
        out["vm_peak"] = vm.peak_bytes
    else:
        data = model.SerializeToString()
        for n in THREADS:
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = n
            opts.inter_op_num_threads = 1
            opts.log_severity_level = 3
            t0 = time.perf_counter()
            sess = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
            if n == THREADS[0]:
                out["compile"] = time.perf_counter() - t0
            feeds = {in_name: x}
            y = sess.run(None, feeds)[0]
            out[f"run{n}"], out[f"spread{n}"] = _time(lambda: sess.run(None, feeds), repeat)
    out["peak"] = _peak_rss() - base
    out["output"] = np.asarray(y, np.float64).ravel()[:1000].tolist()
    return out


def _spawn(engine: str, name: str, repeat: int) -> dict[str, Any]:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", engine, name,
           "--repeat", str(repeat), "--keep-blas-env"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{engine} on {name} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def profile(name: str, repeat: int, top: int = 40) -> None:
    """Where one model's time goes: each phasec kernel at one thread (the best
    of each call site over ``repeat`` rounds, summed per kernel), the whole
    call, and ONNX Runtime's whole call, rounds alternating (see the module
    docstring)."""
    import math

    import onnx
    import onnxruntime as ort

    import phasec
    from phasec.backend.llvm import set_num_threads
    from phasec.backend.vm import VirtualMachine
    from phasec.frontend.onnx import from_onnx

    model = onnx.load(_model_path(name))
    in_name, x = _input(model)
    set_num_threads(1)
    exe = phasec.build(from_onnx(model))
    state = {"site": 0}
    best: dict[tuple[int, str], float] = {}

    def record(kname: str, dt: float) -> None:
        key = (state["site"], kname)
        best[key] = min(best.get(key, math.inf), dt)
        state["site"] += 1
    timed_main = C.timed_kernels_vm(exe, record)["main"]
    plain_main = VirtualMachine(exe)["main"]
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    feeds = {in_name: x}
    plain_main(x)
    sess.run(None, feeds)
    whole = ort_best = math.inf
    for _ in range(repeat):
        state["site"] = 0
        timed_main(x)
        t0 = time.perf_counter()
        plain_main(x)
        whole = min(whole, time.perf_counter() - t0)
        t0 = time.perf_counter()
        sess.run(None, feeds)
        ort_best = min(ort_best, time.perf_counter() - t0)
    per: dict[str, list[float]] = {}
    for (_, kname), t in best.items():
        per.setdefault(kname, []).append(t)
    total = sum(sum(v) for v in per.values())
    rows = [[k, len(v), C.fmt_seconds(sum(v)), f"{100 * sum(v) / total:.1f}%"]
            for k, v in sorted(per.items(), key=lambda kv: -sum(kv[1]))[:top]]
    rows.append(["(sum of kernels)", "", C.fmt_seconds(total), ""])
    rows.append(["(whole call, best)", "", C.fmt_seconds(whole), ""])
    rows.append(["(ONNX Runtime, whole call, best)", "", C.fmt_seconds(ort_best),
                 C.fmt_ratio(whole / ort_best)])
    C.print_table(["kernel", "calls", "1T", "share"], rows,
                  title=f"{name}: best of {repeat} alternating rounds, one thread")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--repeat", type=int, default=10, help="timed batches per figure (best of)")
    p.add_argument("--quick", action="store_true", help="squeezenet only, best of 2")
    p.add_argument("--keep-blas-env", action="store_true")
    p.add_argument("--worker", nargs=2, metavar=("ENGINE", "MODEL"), help=argparse.SUPPRESS)
    p.add_argument("--profile", default="", metavar="MODEL", choices=["", *MODELS],
                   help="time each phasec kernel of one model (one thread) beside ORT")
    args = p.parse_args()
    if args.profile:
        profile(args.profile, max(args.repeat, 10))
        return
    if args.worker:
        print(json.dumps(worker(args.worker[0], args.worker[1], args.repeat)))
        return
    import numpy as np
    import onnxruntime as ort

    import phasec

    models = ["squeezenet"] if args.quick else args.models.split(",")
    repeat = 2 if args.quick else args.repeat
    print(f"{C.machine_description()}; phasec {phasec.__version__}, onnxruntime "
          f"{ort.__version__}; best of {repeat} batches, input (1, 3, 224, 224) float32")
    rows = []
    for name in models:
        ph = _spawn("phasec", name, repeat)
        rt = _spawn("ort", name, repeat)
        a, b = np.asarray(ph["output"]), np.asarray(rt["output"])
        ok = np.allclose(a, b, rtol=1e-3, atol=1e-6)
        rows.append([
            name, C.fmt_seconds(ph["compile"]), C.fmt_seconds(rt["compile"]),
            C.fmt_seconds(ph["run1"]), C.fmt_seconds(rt["run1"]),
            C.fmt_ratio(ph["run1"] / rt["run1"]),
            C.fmt_seconds(ph["run2"]), C.fmt_seconds(rt["run2"]),
            C.fmt_ratio(ph["run2"] / rt["run2"]),
            f"{max(ph['spread1'], ph['spread2']):.2f}/{max(rt['spread1'], rt['spread2']):.2f}",
            C.fmt_bytes(ph["peak"]), C.fmt_bytes(ph["vm_peak"]), C.fmt_bytes(rt["peak"]),
            "yes" if ok else "NO"])
        print(f"  {name} done", file=sys.stderr, flush=True)
    C.print_table(
        ["model", "compile phasec", "compile ORT", "run 1T phasec", "run 1T ORT", "ratio 1T",
         "run 2T phasec", "run 2T ORT", "ratio 2T", "spread ph/ORT", "peak RSS phasec",
         "VM peak", "peak RSS ORT", "agree"], rows,
        title="light ONNX models: phasec vs ONNX Runtime (ratio = phasec time / ORT time)")


if __name__ == "__main__":
    main()

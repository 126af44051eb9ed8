"""Depthwise convolutions of the mobile networks (MobileNetV2/V3-Small,
EfficientNet-B0 at 224x224), one layer each, against ONNX Runtime.

Each workload is one ONNX model: a depthwise ``Conv`` (with bias) and the
network's activation (ReLU6 as ``Clip``, hardswish, or SiLU as ``Sigmoid``
then ``Mul``), compiled by phasec and run on its VM, and run by an ORT
session (all graph optimizations), one thread each, batches taken in turn,
best of N; ``ratio`` is phasec / ORT. The results are compared first.

    python bench/bench_depthwise.py                  # every layer
    python bench/bench_depthwise.py --only 576x14s2,672x14k5
    python bench/bench_depthwise.py --clock thread   # CPU time: a busy machine

onnxruntime is a bench extra, never a phasec dependency.
"""

from __future__ import annotations

import os
import sys
import tempfile

os.environ["PHASEC_CACHE_DIR"] = tempfile.mkdtemp(prefix="phasec-bench-dw-")

import _common as C  # noqa: E402

C.prepare_blas_env(keep=C.wants_keep_blas_env())

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

#: (channels, image side, kernel, stride, activation): the networks' layers
LAYERS = [
    (32, 112, 3, 1, "relu6"), (96, 112, 3, 2, "relu6"), (144, 56, 3, 1, "relu6"),
    (144, 56, 3, 2, "relu6"), (192, 28, 3, 1, "relu6"), (192, 28, 3, 2, "relu6"),
    (384, 14, 3, 1, "relu6"), (576, 14, 3, 1, "relu6"), (576, 14, 3, 2, "relu6"),
    (960, 7, 3, 1, "relu6"),
    (16, 112, 3, 2, "relu"), (72, 56, 3, 2, "relu"), (88, 28, 3, 1, "relu"),
    (96, 28, 5, 2, "hardswish"), (240, 14, 5, 1, "hardswish"), (288, 14, 5, 2, "hardswish"),
    (576, 7, 5, 1, "hardswish"),
    (144, 56, 5, 2, "silu"), (240, 28, 5, 1, "silu"), (240, 28, 3, 2, "silu"),
    (480, 14, 3, 1, "silu"), (480, 14, 5, 1, "silu"), (672, 14, 5, 2, "silu"),
    (1152, 7, 5, 1, "silu"), (1152, 7, 3, 1, "silu"),
]

CLOCKS = {"wall": time.perf_counter, "thread": time.thread_time}


def key(c: int, hw: int, k: int, s: int) -> str:
    return f"{c}x{hw}" + (f"k{k}" if k != 3 else "") + (f"s{s}" if s != 1 else "")


def model(c: int, hw: int, k: int, s: int, act: str):
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(c * 1000 + hw * 10 + k)
    w = numpy_helper.from_array(rng.standard_normal((c, 1, k, k)).astype(np.float32) / k, "w")
    b = numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], group=c, kernel_shape=[k, k],
                              pads=[k // 2] * 4, strides=[s, s])]
    consts = [w, b]
    if act == "relu6":
        consts += [numpy_helper.from_array(np.float32(0), "lo"),
                   numpy_helper.from_array(np.float32(6), "hi")]
        nodes.append(helper.make_node("Clip", ["y", "lo", "hi"], ["z"]))
    elif act == "relu":
        nodes.append(helper.make_node("Relu", ["y"], ["z"]))
    elif act == "hardswish":
        nodes.append(helper.make_node("HardSwish", ["y"], ["z"]))
    else:
        nodes += [helper.make_node("Sigmoid", ["y"], ["sg"]),
                  helper.make_node("Mul", ["y", "sg"], ["z"])]
    out = (hw + 2 * (k // 2) - k) // s + 1
    graph = helper.make_graph(
        nodes, "dw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, c, out, out])], consts)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def bench(layer, repeat: int, clock: str) -> list[str]:
    import onnxruntime as ort
    import phasec
    from phasec.frontend.onnx import from_onnx
    c, hw, k, s, act = layer
    m = model(*layer)
    main = phasec.VirtualMachine(phasec.build(from_onnx(m)))["main"]
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((1, c, hw, hw)).astype(np.float32)
    (expected,) = sess.run(None, {"x": x})
    got = np.asarray(main(x))
    err = float(np.max(np.abs(got - expected)) / max(float(np.max(np.abs(expected))), 1e-30))
    fns = [lambda: main(x), lambda: sess.run(None, {"x": x})]
    numbers = [C.calibrate(f, 0.02) for f in fns]
    best = [float("inf")] * 2
    tick = CLOCKS[clock]
    for _ in range(repeat):
        for i, (f, n) in enumerate(zip(fns, numbers)):
            t0 = tick()
            for _ in range(n):
                f()
            best[i] = min(best[i], (tick() - t0) / n)
    return [key(c, hw, k, s), f"{k}x{k}/{s} {act}", f"{err:.1e}", C.fmt_seconds(best[0]),
            C.fmt_seconds(best[1]), C.fmt_ratio(best[0] / best[1])]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated keys (CxHW[kK][sS], e.g. 576x14s2)")
    ap.add_argument("--repeat", type=int, default=10, help="timed batches per engine")
    ap.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    ap.add_argument("--keep-blas-env", action="store_true")
    opts = ap.parse_args()
    from phasec.backend.llvm.jit import set_num_threads
    set_num_threads(1)
    only = set(opts.only.split(",")) if opts.only else None
    rows = []
    for layer in LAYERS:
        if only is None or key(*layer[:4]) in only:
            rows.append(bench(layer, opts.repeat, opts.clock))
            print("  ".join(rows[-1]), flush=True)
    C.print_table(["layer", "window", "max rel err", "phasec 1T", "ORT 1T", "ratio"], rows,
                  title=f"\ndepthwise layers, phasec against ONNX Runtime (1 thread, "
                        f"{opts.clock} time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

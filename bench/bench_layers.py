"""Each convolution of an ONNX model, phasec's kernel beside ONNX Runtime's node.

usage: ``python bench/bench_layers.py MODEL.onnx [--rounds N] [--top K]``

At one thread: phasec's kernels are timed per call site (the best over the
rounds, ``time.perf_counter`` around each native call, as ``phasec run
--profile``), ONNX Runtime's nodes by its own profiler (all graph
optimizations: its fused NCHWc nodes record the logical NCHW shapes of the
``Conv`` they replace; the best of each node over the rounds). The model's ``Conv`` nodes
are matched with phasec's kernel call sites by the shapes of their input,
output and weight (one kernel per convolution: phasec fuses the epilogue,
bias, residual and activation, into the convolution's kernel, never two
convolutions into one; a Conv left unmatched stops the script), and with
ONNX Runtime's by the shapes its profiler records. Printed: one row per
layer shape (the layers of one shape summed on each side: the two may add
a residual in different layers of a shape; ``n`` is phasec's layers / ORT's
nodes, which differ where ORT merges or splits layers), the largest
absolute gap first, then the sums.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402,F401  (the BLAS environment, phasec importable)

import numpy as np  # noqa: E402


def layer_text(c: int, o: int, kh: int, kw: int, group: int, xhw: Any, yhw: Any) -> str:
    """A convolution's shape as the table prints it: ``3x3 128->128 56x56->28x28``
    (the sizes tell the stride)."""
    return (f"{kh}x{kw} {c}->{o}{f' g{group}' if group > 1 else ''} "
            f"{xhw[0]}x{xhw[1]}->{yhw[0]}x{yhw[1]}")


def conv_layers(model: Any) -> list[tuple[str, tuple[int, ...], tuple[int, ...], int]]:
    """(layer shape text, input shape, output shape, weight elements) of each
    Conv node, in graph order."""
    import onnx
    from onnx import shape_inference

    inferred = shape_inference.infer_shapes(model)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(inferred.graph.value_info) + list(inferred.graph.input)
              + list(inferred.graph.output)}
    inits = {t.name: list(t.dims) for t in model.graph.initializer}
    rows = []
    for node in model.graph.node:
        if node.op_type != "Conv":
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        o, cg, kh, kw = inits.get(node.input[1]) or shapes[node.input[1]]
        x, y = shapes[node.input[0]], shapes[node.output[0]]
        text = layer_text(x[1], o, kh, kw, int(attrs.get("group", 1)), x[2:], y[2:])
        rows.append((text, tuple(x), tuple(y), o * cg * kh * kw))
    return rows


def match_sites(layers: list[tuple[str, tuple[int, ...], tuple[int, ...], int]],
                sites: list[tuple[str, list[tuple[int, ...]], float]]
                ) -> list[tuple[str, str, float]]:
    """(layer text, kernel, seconds) of each convolution call site: the site
    reads the layer's input (its first argument) and writes its output (its
    last); among layers of the same input and output shapes (a 1x1 and a 3x3
    of 64 channels over 56x56), the one whose weight size is nearest its
    second argument's (a packed or Winograd weight is a few times larger,
    never nine times smaller), in graph order."""
    left = list(layers)
    found = []
    for kernel, shapes, seconds in sites:
        same = [t for t in left if shapes and t[1] == shapes[0] and t[2] == shapes[-1]]
        if not same:
            continue
        size = math.prod(shapes[1]) if len(shapes) > 2 else 1
        layer = min(same, key=lambda t: abs(math.log(max(size, 1) / t[3])))
        left.remove(layer)
        found.append((layer[0], kernel, seconds))
    if left:
        raise SystemExit(f"no phasec kernel call matched {len(left)} Conv nodes "
                         f"({left[0][0]}, ...)")
    return found


def phasec_sites(path: str, rounds: int) -> list[tuple[str, list[tuple[int, ...]], float]]:
    """(kernel, argument shapes, best seconds) of each kernel call site of
    the model's ``main``, in call order, at one thread."""
    import onnx

    import phasec
    from phasec.backend.llvm.jit import set_num_threads
    from phasec.backend.vm.vm import VirtualMachine
    from phasec.frontend.onnx import from_onnx

    set_num_threads(1)
    exe = phasec.build(from_onnx(onnx.load(path)))
    spent: list[tuple[str, list[tuple[int, ...]], float]] = []

    def timed(name: str, fn: Any) -> Callable[..., Any]:
        call = getattr(fn, "native_call", None) or fn

        def timed_kernel(*args: Any) -> Any:
            start = time.perf_counter()
            rc = call(*args)
            seconds = time.perf_counter() - start
            spent.append((name, [tuple(np.shape(a)) for a in args], seconds))
            if rc and call is not fn:
                fn.failed(rc, args)
        timed_kernel.written_arguments = getattr(fn, "written_arguments", None)  # type: ignore
        return timed_kernel

    native = exe.kernels("llvm")
    main = VirtualMachine(exe, kernels={n: timed(n, k) for n, k in native.items()})["main"]
    inputs = [np.random.default_rng(0).standard_normal(shape).astype(np.float32)
              for shape in _input_shapes(path)]
    main(*inputs)
    best: list[tuple[str, list[tuple[int, ...]], float]] = []
    for _ in range(rounds):
        spent.clear()
        main(*inputs)
        if not best:
            best = list(spent)
        best = [(n, s, min(t, spent[k][2])) for k, (n, s, t) in enumerate(best)]
    return best


def _input_shapes(path: str) -> list[list[int]]:
    import onnxruntime as ort

    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return [[d if isinstance(d, int) else 1 for d in i.shape] for i in session.get_inputs()]


def ort_convs(path: str, rounds: int) -> dict[str, list[float]]:
    """ONNX Runtime's Conv nodes at one thread: their best seconds by layer
    shape (from the shapes its profiler records: logical NCHW / OIHW, also
    for its NCHWc nodes), and ``"+add"`` nodes (those that add a residual)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 3
    with tempfile.TemporaryDirectory(prefix="bench-layers-") as tmp:
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(tmp, "ort")
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        feed = {i.name: np.random.default_rng(0).standard_normal(s).astype(np.float32)
                for i, s in zip(session.get_inputs(), _input_shapes(path))}
        for _ in range(rounds + 1):
            session.run(None, feed)
        with open(session.end_profiling(), encoding="utf-8") as f:
            events = json.load(f)
    best: dict[str, tuple[str, float]] = {}
    for event in events:
        name = str(event.get("name", ""))
        args = event.get("args", {})
        if (event.get("cat") != "Node" or not name.endswith("_kernel_time")
                or args.get("op_name") not in ("Conv", "FusedConv")):
            continue
        shapes = [next(iter(s.values())) for s in args["input_type_shape"]]
        (x, w), y = shapes[:2], next(iter(args["output_type_shape"][0].values()))
        text = layer_text(x[1], w[0], w[2], w[3], x[1] // w[1], x[2:], y[2:])
        text += " +add" if len(shapes) > 3 else ""
        seconds = min(best.get(name, ("", math.inf))[1], float(event["dur"]) * 1e-6)
        best[name] = (text, seconds)
    by_text: dict[str, list[float]] = {}
    for text, seconds in best.values():
        by_text.setdefault(text.removesuffix(" +add"), []).append(seconds)
        if text.endswith(" +add"):
            by_text.setdefault("+add", []).append(seconds)
    return by_text


def main() -> None:
    import onnx

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    layers = conv_layers(onnx.load(args.model))
    ours = match_sites(layers, phasec_sites(args.model, args.rounds))
    theirs = ort_convs(args.model, args.rounds)
    rows: dict[str, list[Any]] = {}
    for text, kernel, seconds in ours:
        row = rows.setdefault(text, [0, 0.0, sum(theirs.get(text, [math.nan])), kernel])
        row[0] += 1
        row[1] += seconds
    for text in theirs.keys() - rows.keys() - {"+add"}:
        rows[text] = [0, 0.0, sum(theirs[text]), "-"]
    ordered = sorted(rows.items(), key=lambda r: -(r[1][1] - r[1][2]))
    print(f"{'layer':38s} {'n':>5s} {'phasec us':>10s} {'ORT us':>9s} {'ratio':>6s} "
          f"{'gap us':>8s}  kernel")
    for text, (n, mine, ort_s, kernel) in ordered[: args.top]:
        # (n: phasec's layers / ORT's nodes of the shape; they differ where
        # ORT merged or split a layer)
        count = f"{n}/{len(theirs.get(text, ()))}"
        print(f"{text:38s} {count:>5s} {mine * 1e6:10.0f} {ort_s * 1e6:9.0f} "
              f"{mine / ort_s if ort_s else math.nan:6.2f} {(mine - ort_s) * 1e6:8.0f}  {kernel}")
    mine = sum(r[1] for r in rows.values())
    ort_s = sum(r[2] for r in rows.values())
    count = f"{len(ours)}/{sum(len(v) for k, v in theirs.items() if k != '+add')}"
    print(f"{'all convolutions':38s} {count:>5s} {mine * 1e6:10.0f} {ort_s * 1e6:9.0f} "
          f"{mine / ort_s:6.2f} {(mine - ort_s) * 1e6:8.0f}")
    print(f"(ORT's nodes adding a residual: {len(theirs.get('+add', []))}; phasec's kernel "
          "of a layer shape is its first layer's)")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

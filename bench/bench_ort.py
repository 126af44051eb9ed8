"""phasec against ONNX Runtime on the workloads of issue 16, same models,
same process, same inputs.

Every workload is built as an ONNX model with ``onnx.helper`` (weights as
initializers) and run by phasec (``phasec.frontend.onnx.from_onnx`` +
``phasec.build`` + the VM) and by ONNX Runtime (all graph optimizations),
with 1 and 2 threads each (phasec: ``set_num_threads``; ORT:
``intra_op_num_threads``, one session per count). Figures are the best of N
batches of ~1 ms (at least N, as many as fit in 0.4 s); ratios are phasec time / ORT time in
the same run, so both saw the same machine load.

* **GFLOP/s** counts the multiply-adds of the matmuls and convolutions (2
  flops each) of the workload, nothing else; "-" for the elementwise one.
* **% peak** is phasec's 1-thread GFLOP/s over the *measured* single-core
  peak: a phasec-compiled kernel of 16 independent chains of vector FMAs on
  registers (no memory traffic), timed like the workloads. It is the
  ceiling of FMA throughput at the widest vectors phasec emits here.
* **compile** is ``from_onnx`` + ``build`` + loading the VM: *cold* with an
  empty kernel cache on disk (a fresh ``PHASEC_CACHE_DIR``) and an empty
  in-memory cache; *warm* the same again in the same process after
  clearing the in-memory cache, i.e. LLVM skipped through the disk cache.
* Outputs are checked against ORT's (``rtol 1e-3``) before timing.

    python bench/bench_ort.py                   # all workloads
    python bench/bench_ort.py --quick           # best of 3, no BERT/ResNet
    python bench/bench_ort.py --only bert,mlp1024
    python bench/bench_ort.py --only int8        # the QDQ int8 MatMul and Conv
    python bench/bench_ort.py --profile bert    # each phasec kernel at 1 and 2 threads

Run it with the Python whose ``phasec`` you want to measure (``PYTHONPATH``
picks a tree: the header prints which one). onnxruntime is a bench extra,
never a phasec dependency.
"""

from __future__ import annotations

import os
import sys
import tempfile

# a cold disk cache of our own, before phasec is imported
os.environ["PHASEC_CACHE_DIR"] = tempfile.mkdtemp(prefix="phasec-bench-ort-")

import _common as C  # noqa: E402

C.prepare_blas_env(keep=C.wants_keep_blas_env())

import argparse  # noqa: E402
import gc  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

THREADS = (1, 2)
OPSET = 20  # Gelu (with approximate="tanh") and LayerNormalization


@dataclass
class Workload:
    key: str
    title: str
    model: Any            # onnx.ModelProto
    inputs: dict[str, np.ndarray]
    flops: float | None   # multiply-adds x 2 of matmuls/convs; None: elementwise
    #: outputs agree within this (default: 1e-3 of the largest); a quantized
    #: output may differ by one quantum where a float sum lands on a tie
    atol: float | None = None


# ---------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------

class _Graph:
    """A small builder over onnx.helper: nodes, initializers, fresh names."""

    def __init__(self, seed: int) -> None:
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.rng = np.random.default_rng(seed)
        self.n = 0

    def name(self, base: str) -> str:
        self.n += 1
        return f"{base}_{self.n}"

    def const(self, value: np.ndarray, base: str = "c") -> str:
        from onnx import numpy_helper

        name = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(self, *shape: int, scale: float | None = None) -> str:
        s = scale if scale is not None else 1.0 / math.sqrt(shape[0] if len(shape) == 2
                                                           else int(np.prod(shape[1:])))
        return self.const((self.rng.standard_normal(shape) * s).astype(np.float32), "w")

    def op(self, op_type: str, *inputs: str, **attrs: Any) -> str:
        from onnx import helper

        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def linear(self, x: str, k: int, n: int) -> str:
        return self.op("Add", self.op("MatMul", x, self.weight(k, n)),
                       self.const(self.rng.standard_normal(n).astype(np.float32) * 0.1, "b"))

    def layer_norm(self, x: str, n: int) -> str:
        return self.op("LayerNormalization", x, self.const(np.ones(n, np.float32), "g"),
                       self.const(np.zeros(n, np.float32), "beta"), axis=-1, epsilon=1e-5)

    def model(self, inputs: dict[str, tuple[int, ...]], output: str, shape: tuple[int, ...]
              ) -> Any:
        from onnx import TensorProto, helper

        graph = helper.make_graph(
            self.nodes, "bench",
            [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v))
             for k, v in inputs.items()],
            [helper.make_tensor_value_info(output, TensorProto.FLOAT, list(shape))],
            initializer=self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                 ir_version=9)


def _inputs(shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {k: rng.standard_normal(v).astype(np.float32) for k, v in shapes.items()}


def mlp(rows: int, widths: list[int], key: str, title: str) -> Workload:
    g = _Graph(2)
    shapes = {"x": (rows, widths[0])}
    h = "x"
    for i, (k, n) in enumerate(zip(widths, widths[1:])):
        h = g.linear(h, k, n)
        if i < len(widths) - 2:
            h = g.op("Relu", h)
    flops = sum(2.0 * rows * k * n for k, n in zip(widths, widths[1:]))
    return Workload(key, title, g.model(shapes, h, (rows, widths[-1])), _inputs(shapes), flops)


def ln_gelu_residual() -> Workload:
    g = _Graph(3)
    shapes = {"x": (512, 1024)}
    y = g.op("Add", g.op("Gelu", g.layer_norm("x", 1024), approximate="tanh"), "x")
    return Workload("ln_gelu", "layer_norm + gelu_tanh + residual, 512x1024",
                    g.model(shapes, y, (512, 1024)), _inputs(shapes), None)


def attention(b: int = 4, s: int = 128, d: int = 64) -> Workload:
    g = _Graph(4)
    shapes = {"q": (b, s, d), "k": (b, s, d), "v": (b, s, d)}
    scores = g.op("Mul", g.op("MatMul", "q", g.op("Transpose", "k", perm=[0, 2, 1])),
                  g.const(np.float32(1 / math.sqrt(d))))
    y = g.op("MatMul", g.op("Softmax", scores, axis=-1), "v")
    return Workload("attention", f"attention {b}x{s}x{d}", g.model(shapes, y, (b, s, d)),
                    _inputs(shapes), 2.0 * 2 * b * s * s * d)


def bert_layer(s: int = 128, h: int = 768, heads: int = 12, ff: int = 3072) -> Workload:
    g = _Graph(5)
    dh = h // heads
    shapes = {"x": (1, s, h)}

    def split(t: str, perm: list[int]) -> str:
        r = g.op("Reshape", t, g.const(np.array([1, s, heads, dh], np.int64)))
        return g.op("Transpose", r, perm=perm)
    q = split(g.linear("x", h, h), [0, 2, 1, 3])
    k = split(g.linear("x", h, h), [0, 2, 3, 1])
    v = split(g.linear("x", h, h), [0, 2, 1, 3])
    p = g.op("Softmax", g.op("Mul", g.op("MatMul", q, k), g.const(np.float32(1 / math.sqrt(dh)))),
             axis=-1)
    ctx = g.op("Reshape", g.op("Transpose", g.op("MatMul", p, v), perm=[0, 2, 1, 3]),
               g.const(np.array([1, s, h], np.int64)))
    x1 = g.layer_norm(g.op("Add", g.linear(ctx, h, h), "x"), h)
    f = g.linear(g.op("Gelu", g.linear(x1, h, ff)), ff, h)
    y = g.layer_norm(g.op("Add", f, x1), h)
    flops = 2.0 * (4 * s * h * h + 2 * s * s * h + 2 * s * h * ff)
    return Workload("bert", f"BERT-base encoder layer, batch 1, seq {s}",
                    g.model(shapes, y, (1, s, h)), _inputs(shapes), flops)


def resnet_block(c: int = 64, hw: int = 56) -> Workload:
    g = _Graph(6)
    shapes = {"x": (1, c, hw, hw)}

    def conv(t: str) -> str:
        return g.op("Conv", t, g.weight(c, c, 3, 3, scale=1 / math.sqrt(9 * c)),
                    g.const(g.rng.standard_normal(c).astype(np.float32) * 0.1, "b"),
                    pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    y = g.op("Relu", g.op("Add", conv(g.op("Relu", conv("x"))), "x"))
    return Workload("resnet", f"ResNet block: two conv3x3 {c}ch {hw}x{hw} + relu + residual",
                    g.model(shapes, y, (1, c, hw, hw)), _inputs(shapes),
                    2 * 2.0 * c * c * 9 * hw * hw)


def resnet_block_params(c: int = 64, hw: int = 56) -> Workload:
    """The ResNet block with its weights and biases as graph inputs, not
    initializers (issue 29: a TVMScript function taking its weights as
    parameters ran at 1.3-1.6x ORT, Winograd chosen as if transforming the
    weights on every call were free)."""
    g = _Graph(6)
    shapes = {"x": (1, c, hw, hw), "w1": (c, c, 3, 3), "b1": (c,), "w2": (c, c, 3, 3),
              "b2": (c,)}

    def conv(t: str, k: int) -> str:
        return g.op("Conv", t, f"w{k}", f"b{k}", pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    y = g.op("Relu", g.op("Add", conv(g.op("Relu", conv("x", 1)), 2), "x"))
    inputs = _inputs(shapes)
    rng = np.random.default_rng(6)
    for name in ("w1", "w2"):
        inputs[name] = (rng.standard_normal(shapes[name]) / math.sqrt(9 * c)).astype(np.float32)
    for name in ("b1", "b2"):
        inputs[name] = (rng.standard_normal(c) * 0.1).astype(np.float32)
    return Workload("resnet_params", f"the ResNet block, weights as inputs ({c}ch {hw}x{hw})",
                    g.model(shapes, y, (1, c, hw, hw)), inputs, 2 * 2.0 * c * c * 9 * hw * hw)


def tied_lm_head(s: int = 64, h: int = 512, vocab: int = 50257) -> Workload:
    """GPT-2's output layer as torch.onnx exports it: the token embedding,
    transposed on every call, then MatMul (issue 29: FoldConstant kept the
    transpose of its 25.7M-element weight as a run-time operator)."""
    g = _Graph(7)
    shapes = {"x": (s, h)}
    y = g.op("MatMul", "x", g.op("Transpose", g.weight(vocab, h), perm=[1, 0]))
    return Workload("tied_head", f"tied LM head: x[{s},{h}] @ Transpose(W[{vocab},{h}])",
                    g.model(shapes, y, (s, vocab)), _inputs(shapes), 2.0 * s * h * vocab)


def _conv(g: _Graph, x: str, cin: int, cout: int, k: tuple[int, int], **attrs: Any) -> str:
    groups = attrs.get("group", 1)
    return g.op("Conv", x, g.weight(cout, cin // groups, *k,
                                    scale=1 / math.sqrt(cin // groups * k[0] * k[1])),
                g.const(g.rng.standard_normal(cout).astype(np.float32) * 0.1, "b"),
                kernel_shape=list(k), **attrs)


def conv_transpose(c: int, o: int, hw: int, key: str) -> Workload:
    """A 2x2 stride-2 ConvTranspose with bias (a text detector's upsampling
    head, issue 29: 45-95x ORT by the direct scatter)."""
    g = _Graph(8)
    shapes = {"x": (1, c, hw, hw)}
    y = g.op("ConvTranspose", "x", g.weight(c, o, 2, 2, scale=1 / math.sqrt(c)),
             g.const(g.rng.standard_normal(o).astype(np.float32) * 0.1, "b"),
             kernel_shape=[2, 2], strides=[2, 2])
    return Workload(key, f"ConvTranspose 2x2/2 {c}->{o} ch on {hw}x{hw}",
                    g.model(shapes, y, (1, o, 2 * hw, 2 * hw)), _inputs(shapes),
                    2.0 * c * o * 4 * hw * hw)


def conv_1d(c: int, n: int, k: int, column: bool) -> Workload:
    """A 1-D convolution as a 2-D one: K x 1 over an N x 1 image (tf2onnx's
    export) or 1 x K over 1 x N; the same arithmetic."""
    g = _Graph(9)
    shape = (1, c, n, 1) if column else (1, c, 1, n)
    kern = (k, 1) if column else (1, k)
    pads = [k // 2, 0, k // 2, 0] if column else [0, k // 2, 0, k // 2]
    y = g.op("Relu", _conv(g, "x", c, c, kern, pads=pads))
    layout = f"{k}x1 over {n}x1" if column else f"1x{k} over 1x{n}"
    return Workload("conv1d_col" if column else "conv1d_row",
                    f"1-D conv {c}->{c} ch, {layout} + relu", g.model({"x": shape}, y, shape),
                    _inputs({"x": shape}), 2.0 * c * c * k * n)


def small_cnn() -> Workload:
    """conv3x3 3->16 on 2x3x33x33 + bias + relu + maxpool 2x2/2."""
    g = _Graph(10)
    shapes = {"x": (2, 3, 33, 33)}
    y = g.op("MaxPool", g.op("Relu", _conv(g, "x", 3, 16, (3, 3), pads=[1, 1, 1, 1])),
             kernel_shape=[2, 2], strides=[2, 2])
    return Workload("small_cnn", "conv3x3 3->16 on 2x3x33x33 + relu + maxpool 2x2/2",
                    g.model(shapes, y, (2, 16, 16, 16)), _inputs(shapes),
                    2.0 * 2 * 16 * 3 * 9 * 33 * 33)


def max_pool(c: int, hw: int, pad: int, key: str) -> Workload:
    """A narrow 3x3 stride-2 max pool (SqueezeNet's last; a padded one)."""
    g = _Graph(11)
    shapes = {"x": (1, c, hw, hw)}
    out = (hw + 2 * pad - 3) // 2 + 1
    y = g.op("MaxPool", "x", kernel_shape=[3, 3], strides=[2, 2], pads=[pad] * 4)
    return Workload(key, f"max pool 3x3/2 pad {pad}, {c}x{hw}x{hw}",
                    g.model(shapes, y, (1, c, out, out)), _inputs(shapes), None)


def depthwise(c: int, hw: int, k: int, stride: int, key: str) -> Workload:
    """A depthwise convolution + bias + relu (MobileNetV2, EfficientNet-B0)."""
    g = _Graph(12)
    shapes = {"x": (1, c, hw, hw)}
    out = (hw + 2 * (k // 2) - k) // stride + 1
    y = g.op("Relu", _conv(g, "x", c, c, (k, k), pads=[k // 2] * 4, strides=[stride] * 2,
                           group=c))
    return Workload(key, f"depthwise {k}x{k}/{stride}, {c} ch {hw}x{hw} + relu",
                    g.model(shapes, y, (1, c, out, out)), _inputs(shapes),
                    2.0 * c * k * k * out * out)


def silu(c: int = 96, hw: int = 112) -> Workload:
    """SiLU as PyTorch exports it: Sigmoid, then Mul by the input."""
    g = _Graph(13)
    shapes = {"x": (1, c, hw, hw)}
    y = g.op("Mul", "x", g.op("Sigmoid", "x"))
    return Workload("silu", f"SiLU (Sigmoid then Mul), 1x{c}x{hw}x{hw}",
                    g.model(shapes, y, (1, c, hw, hw)), _inputs(shapes), None)


def _qdq(g: _Graph, x: str, scale: float, zero: np.ndarray) -> str:
    """QuantizeLinear then DequantizeLinear (the QDQ format's activations)."""
    s, z = g.const(np.float32(scale), "s"), g.const(zero, "z")
    return g.op("DequantizeLinear", g.op("QuantizeLinear", x, s, z), s, z)


def _qweight(g: _Graph, w: np.ndarray) -> str:
    """An int8 weight, symmetric per tensor, dequantized (QDQ's weights)."""
    scale = float(np.abs(w).max()) / 127
    q = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
    return g.op("DequantizeLinear", g.const(q, "wq"), g.const(np.float32(scale), "ws"),
                g.const(np.int8(0), "wz"))


#: the scales of the QDQ workloads' activations (inputs ~N(0, 1), uint8, zero 128)
_QDQ_SCALE = 9.0 / 255


def qdq_matmul(m: int = 256, k: int = 1024, n: int = 1024) -> Workload:
    """A QDQ int8 MatMul (what ORT's quantizer writes: uint8 activations,
    int8 weights), which ORT runs as QLinearMatMul."""
    g = _Graph(14)
    shapes = {"x": (m, k)}
    w = (g.rng.standard_normal((k, n)) / math.sqrt(k)).astype(np.float32)
    y = g.op("MatMul", _qdq(g, "x", _QDQ_SCALE, np.uint8(128)), _qweight(g, w))
    y = _qdq(g, y, _QDQ_SCALE, np.uint8(128))
    return Workload("qdq_matmul", f"QDQ int8 MatMul {m}x{k} @ {k}x{n} (u8 x s8)",
                    g.model(shapes, y, (m, n)), _inputs(shapes), 2.0 * m * k * n,
                    atol=1.01 * _QDQ_SCALE)


def qdq_conv(c: int = 64, hw: int = 56) -> Workload:
    """A QDQ int8 3x3 Conv with bias (uint8 activations, int8 weights), which
    ORT runs as QLinearConv."""
    g = _Graph(15)
    shapes = {"x": (1, c, hw, hw)}
    w = (g.rng.standard_normal((c, c, 3, 3)) / math.sqrt(9 * c)).astype(np.float32)
    y = g.op("Conv", _qdq(g, "x", _QDQ_SCALE, np.uint8(128)), _qweight(g, w),
             pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    y = _qdq(g, y, _QDQ_SCALE, np.uint8(128))
    return Workload("qdq_conv", f"QDQ int8 Conv 3x3 {c}ch {hw}x{hw} (u8 x s8)",
                    g.model(shapes, y, (1, c, hw, hw)), _inputs(shapes),
                    2.0 * c * c * 9 * hw * hw, atol=1.01 * _QDQ_SCALE)


def qdq_pointwise(c: int = 128, o: int = 128, hw: int = 28) -> Workload:
    """A QDQ int8 1x1 Conv (MobileNet's pointwise layers) with per-channel
    int8 weights and an int32 bias, as ORT's quantizer writes it."""
    g = _Graph(16)
    shapes = {"x": (1, c, hw, hw)}
    w = (g.rng.standard_normal((o, c)) / math.sqrt(c)).astype(np.float32)
    sw = (np.abs(w).max(axis=1) / 127).astype(np.float32)
    q = np.clip(np.round(w / sw[:, None]), -127, 127).astype(np.int8).reshape(o, c, 1, 1)
    wd = g.op("DequantizeLinear", g.const(q, "wq"), g.const(sw, "ws"),
              g.const(np.zeros(o, np.int8), "wz"), axis=0)
    bias_scale = (np.float32(_QDQ_SCALE) * sw).astype(np.float32)
    bq = np.round(g.rng.standard_normal(o) * 0.1 / bias_scale).astype(np.int32)
    bd = g.op("DequantizeLinear", g.const(bq, "bq"), g.const(bias_scale, "bs"), axis=0)
    y = g.op("Conv", _qdq(g, "x", _QDQ_SCALE, np.uint8(128)), wd, bd, kernel_shape=[1, 1])
    y = _qdq(g, y, _QDQ_SCALE, np.uint8(128))
    return Workload("qdq_pointwise", f"QDQ int8 Conv 1x1 {c}->{o} ch {hw}x{hw}, per-channel",
                    g.model(shapes, y, (1, o, hw, hw)), _inputs(shapes),
                    2.0 * c * o * hw * hw, atol=1.01 * _QDQ_SCALE)


#: the quantized cases of issue 29 (``--only int8``)
INT8_KEYS = ("qdq_matmul", "qdq_conv", "qdq_pointwise")

#: the convolution and pooling cases of issue 29 (``--only`` or ``--set conv``)
CONV_KEYS = ("convT_24", "convT_1", "conv1d_col", "conv1d_row", "small_cnn", "pool_narrow",
             "pool_narrow_pad", "dw3x3s2", "dw5x5", "silu")


def workloads() -> list[Workload]:
    return [
        mlp(64, [256, 256, 64], "mlp64", "MLP 64x256->256->64 (relu)"),
        ln_gelu_residual(),
        attention(),
        bert_layer(),
        mlp(256, [1024] * 4, "mlp1024", "MLP 256x1024, three 1024x1024 layers"),
        mlp(1, [1024] * 4, "mlp1024_b1", "the same MLP at batch 1"),
        resnet_block(),
        resnet_block_params(),
        tied_lm_head(),
        conv_transpose(24, 24, 80, "convT_24"),
        conv_transpose(24, 1, 160, "convT_1"),
        conv_1d(64, 4000, 9, column=True),
        conv_1d(64, 4000, 9, column=False),
        small_cnn(),
        max_pool(256, 27, 0, "pool_narrow"),
        max_pool(576, 14, 1, "pool_narrow_pad"),
        depthwise(144, 56, 3, 2, "dw3x3s2"),
        depthwise(672, 14, 5, 1, "dw5x5"),
        silu(),
        qdq_matmul(),
        qdq_conv(),
        qdq_pointwise(),
    ]


# ---------------------------------------------------------------------------
# measuring
# ---------------------------------------------------------------------------

def _budget(call_seconds: float, budget: float) -> float:
    """Seconds of sampling: ``budget``, or more for calls of milliseconds
    (about 60 calls, at most 3 s): on a shared machine a long call is rarely
    undisturbed, so its best needs more tries than a short one's."""
    return max(budget, min(3.0, 60 * call_seconds))


def _best(fn: Callable[[], Any], repeat: int, budget: float = 0.4) -> float:
    """Best mean seconds per call over batches of ~1 ms (at least ``repeat``
    batches, more while within ``budget`` seconds, see :func:`_budget`). On a
    machine shared with other jobs the scheduler takes the core away for
    milliseconds at a time, so a long batch is always interrupted; the best
    short one is not."""
    fn()
    number = C.calibrate(fn, 0.001)
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-9)
    batch = one * number
    return C.best_of(fn, max(repeat, min(2000, int(_budget(one, budget) / batch))), number,
                     warmup=0)


def _best_by_threads(fn: Callable[[], Any], threads: tuple[int, ...], repeat: int,
                     budget: float = 0.8) -> dict[int, float]:
    """Best mean seconds per call of ``fn`` with each thread count, batches of
    ~1 ms *alternating* between the counts (at least ``repeat`` rounds, more
    while within ``budget`` seconds): both counts then see the same machine
    load, so their ratio (the speedup) means something on a shared machine."""
    from phasec.backend.llvm import set_num_threads

    numbers = {}
    one = math.inf
    for n in threads:
        set_num_threads(n)
        fn()
        t0 = time.perf_counter()
        fn()
        one = min(one, time.perf_counter() - t0)
        numbers[n] = C.calibrate(fn, 0.001)
    best = {n: math.inf for n in threads}
    t_end = time.perf_counter() + 2 * _budget(one, budget / 2)
    rounds = 0
    while rounds < repeat or (time.perf_counter() < t_end and rounds < 2000):
        for n in threads:
            set_num_threads(n)
            best[n] = min(best[n], C.best_of(fn, 1, numbers[n], warmup=0))
        rounds += 1
    return best


def measure_peak(repeat: int) -> float:
    """Single-core FMA peak (GFLOP/s) of phasec-compiled code: 16 rows x one
    vector of accumulators, each updated by ``acc = acc * x + y`` (one FMA)
    per iteration: 16 independent chains, enough to hide the FMA latency."""
    from phasec.backend.llvm import compile_prim_funcs, set_num_threads
    from phasec.ir import tir as T

    try:
        from phasec.target.tuning import host_tuning
        lanes = host_tuning().lanes(32)
    except ImportError:  # a tree from before the tunings existed (an AVX-512 host)
        lanes = 16
    rows, reps = 16, 20000
    X, Y = T.Buffer("X", (lanes,)), T.Buffer("Y", (lanes,))
    O, acc = T.Buffer("O", (rows, lanes)), T.Buffer("acc", (rows, lanes))
    r, i, j, i2, j2, i3, j3 = (T.Var(n) for n in ("r", "i", "j", "i2", "j2", "i3", "j3"))

    def st(b: Any, v: Any, *idx: Any) -> Any:
        return T.BufferStore(b, T.as_prim_expr(v, b.dtype), tuple(idx))
    body = T.SeqStmt([
        T.For(i, 0, rows, "unroll", T.For(j, 0, lanes, "vectorized", st(acc, X[j], i, j))),
        T.For(r, 0, reps, "serial", T.For(i2, 0, rows, "unroll", T.For(
            j2, 0, lanes, "vectorized", st(acc, acc[i2, j2] * X[j2] + Y[j2], i2, j2)))),
        T.For(i3, 0, rows, "unroll", T.For(j3, 0, lanes, "vectorized", st(O, acc[i3, j3], i3, j3))),
    ])
    kernel = compile_prim_funcs({"peak": T.PrimFunc((X, Y, O), T.Allocate(acc, body))})["peak"]
    set_num_threads(1)
    x, y = np.full(lanes, 0.999, np.float32), np.full(lanes, 1e-3, np.float32)
    o = np.empty((rows, lanes), np.float32)
    t = _best(lambda: kernel(x, y, o), repeat, budget=1.0)
    return 2.0 * rows * lanes * reps / t / 1e9


def compile_phasec(model: Any) -> tuple[Any, float, float, float]:
    """(VM function, cold seconds, warm seconds, warm seconds without the
    ONNX import); warm figures are the best of three builds."""
    import phasec
    from phasec.backend.llvm import clear_cache
    from phasec.frontend.onnx import from_onnx

    def build(mod: Any) -> Any:
        return phasec.VirtualMachine(phasec.build(mod))["main"]
    clear_cache()
    t0 = time.perf_counter()
    build(from_onnx(model))
    cold = time.perf_counter() - t0
    warm = warm_build = math.inf
    for _ in range(3):
        clear_cache()  # the in-memory cache: the next build reads the disk cache
        t0 = time.perf_counter()
        mod = from_onnx(model)
        t1 = time.perf_counter()
        fn = build(mod)
        t2 = time.perf_counter()
        warm, warm_build = min(warm, t2 - t0), min(warm_build, t2 - t1)
    return fn, cold, warm, warm_build


def run_workload(w: Workload, repeat: int) -> dict[str, Any]:
    import onnxruntime as ort

    fn, cold, warm, warm_build = compile_phasec(w.model)
    args = [w.inputs[i.name] for i in w.model.graph.input]
    got = np.asarray(fn(*args))
    out: dict[str, Any] = {"cold": cold, "warm": warm, "warm_build": warm_build}
    data = w.model.SerializeToString()
    want = None
    # phasec first, with no ORT session alive: ORT's idle worker threads spin
    # after each run and would take the cores phasec's threads need
    for n, t in _best_by_threads(lambda: fn(*args), THREADS, repeat).items():
        out[f"ph{n}"] = t
    for n in THREADS:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = n
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
        want = sess.run(None, w.inputs)[0]
        out[f"ort{n}"] = _best(lambda: sess.run(None, w.inputs), repeat)
        del sess
        gc.collect()
    atol = w.atol if w.atol is not None else 1e-3 * float(np.abs(want).max())
    out["agree"] = bool(np.allclose(got, want, rtol=1e-3, atol=atol))
    return out


def profile(w: Workload, repeat: int, budget: float = 6.0) -> None:
    """Where the time of one workload goes, at 1 and at 2 threads in the same
    run: the best time of each phasec kernel (summed over its calls, each
    call site's best), their sum, the VM's time between them, and the whole
    call; rounds alternate the thread counts so both see the same load.

    The whole call's time is also given over the *undisturbed* calls only:
    those during which no thread of the process waited for a CPU longer than
    1% of the call (:func:`_common.run_queue_wait`). On a machine shared with
    other jobs a best-of of the whole workload at 2 threads mostly measures
    the other jobs; the undisturbed calls, and the per-kernel bests, measure
    phasec."""
    import phasec
    from phasec.backend.llvm import set_num_threads
    from phasec.backend.vm import VirtualMachine
    from phasec.frontend.onnx import from_onnx

    exe = phasec.build(from_onnx(w.model))
    args = [w.inputs[i.name] for i in w.model.graph.input]
    state = {"threads": 1, "site": 0}
    best: dict[tuple[int, int, str], float] = {}  # (threads, call site, kernel) -> seconds

    def record(name: str, dt: float) -> None:
        key = (state["threads"], state["site"], name)
        best[key] = min(best.get(key, math.inf), dt)
        state["site"] += 1
    timed_main = C.timed_kernels_vm(exe, record)["main"]
    plain_main = VirtualMachine(exe)["main"]
    whole: dict[int, list[tuple[float, bool]]] = {1: [], 2: []}
    for n in THREADS:  # warm up both counts (the pool starts on first use)
        set_num_threads(n)
        plain_main(*args)
    t_end = time.perf_counter() + budget
    rounds = 0
    while rounds < repeat or (time.perf_counter() < t_end and rounds < 2000):
        for n in THREADS:
            set_num_threads(n)
            state["threads"], state["site"] = n, 0
            timed_main(*args)
            w0 = C.run_queue_wait()
            t0 = time.perf_counter()
            plain_main(*args)
            dt = time.perf_counter() - t0
            w1 = C.run_queue_wait()
            quiet = w0 is not None and w1 is not None and (w1 - w0) < 0.01 * dt
            whole[n].append((dt, quiet))
        rounds += 1
    set_num_threads(max(THREADS))

    def fmt(t: float) -> str:
        return C.fmt_seconds(t) if math.isfinite(t) else "-"

    def speedup(a: float, b: float) -> str:
        return f"{a / b:.2f}x" if math.isfinite(a) and math.isfinite(b) and b > 0 else "-"
    per: dict[str, dict[int, float]] = {}
    calls: dict[str, set[int]] = {}
    for (n, site, name), t in best.items():
        per.setdefault(name, {}).setdefault(n, 0.0)
        per[name][n] += t
        calls.setdefault(name, set()).add(site)
    rows = []
    total = {n: sum(v.get(n, 0.0) for v in per.values()) for n in THREADS}
    for name, t in per.items():
        rows.append([name, len(calls[name]), fmt(t[1]), fmt(t[2]), speedup(t[1], t[2]),
                     f"{100 * t[2] / total[2]:.1f}%"])
    rows.append(["(sum of kernels)", "", fmt(total[1]), fmt(total[2]),
                 speedup(total[1], total[2]), ""])
    bw = {n: min(t for t, _ in whole[n]) for n in THREADS}
    rows.append(["(whole call, best)", "", fmt(bw[1]), fmt(bw[2]), speedup(bw[1], bw[2]), ""])
    rows.append(["(VM between kernels: whole - sum)", "", fmt(bw[1] - total[1]),
                 fmt(bw[2] - total[2]), "", ""])
    quiet = {n: sorted(t for t, q in whole[n] if q) for n in THREADS}
    qb = {n: quiet[n][0] if quiet[n] else math.inf for n in THREADS}
    qm = {n: quiet[n][len(quiet[n]) // 2] if quiet[n] else math.inf for n in THREADS}
    label = f"(whole call, undisturbed: best; {len(quiet[1])}/{len(quiet[2])} of {rounds} calls)"
    rows.append([label, "", fmt(qb[1]), fmt(qb[2]), speedup(qb[1], qb[2]), ""])
    rows.append(["(whole call, undisturbed: median)", "", fmt(qm[1]), fmt(qm[2]),
                 speedup(qm[1], qm[2]), ""])
    C.print_table(["kernel", "calls", "1T", "2T", "speedup", "share of 2T"], rows,
                  title=f"{w.title}: best of {rounds} alternating rounds per thread count")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=20, help="timed batches per figure (best of)")
    p.add_argument("--quick", action="store_true", help="best of 3, without BERT and ResNet")
    p.add_argument("--only", default="", help="comma-separated workload keys: " + ", ".join(
        ["mlp64", "ln_gelu", "attention", "bert", "mlp1024", "mlp1024_b1", "resnet",
         "resnet_params", "tied_head",
         *CONV_KEYS, *INT8_KEYS]) + "; 'conv' for all of issue 29's convolution and pooling "
        "cases, 'int8' for its quantized ones")
    p.add_argument("--profile", default="", metavar="KEY",
                   help="time each phasec kernel of one workload at 1 and 2 threads instead")
    p.add_argument("--keep-blas-env", action="store_true")
    args = p.parse_args()
    if args.profile:
        profile(next(w for w in workloads() if w.key == args.profile), args.repeat)
        return
    import onnxruntime as ort

    import phasec

    repeat = 3 if args.quick else args.repeat
    only = set(args.only.split(",")) if args.only else set()
    if "conv" in only:
        only |= set(CONV_KEYS)
    if "int8" in only:
        only |= set(INT8_KEYS)
    chosen = [w for w in workloads()
              if (not only or w.key in only)
              and not (args.quick and w.key in ("bert", "resnet", "resnet_params",
                                                "tied_head"))]
    peak = measure_peak(repeat)
    print(f"{C.machine_description()}; phasec {phasec.__version__} from "
          f"{os.path.dirname(phasec.__file__)}, onnxruntime {ort.__version__}; best of {repeat}")
    print(f"measured single-core peak (phasec FMA loop, 1 thread): {peak:.0f} GFLOP/s")
    rows = []
    for w in chosen:
        r = run_workload(w, repeat)

        def gf(t: float) -> str:
            return "-" if w.flops is None else f"{w.flops / t / 1e9:.0f}"
        rows.append([
            w.title, C.fmt_seconds(r["ph1"]), C.fmt_seconds(r["ort1"]),
            C.fmt_ratio(r["ph1"] / r["ort1"]), gf(r["ph1"]), gf(r["ort1"]),
            "-" if w.flops is None else f"{100 * w.flops / r['ph1'] / 1e9 / peak:.0f}%",
            C.fmt_seconds(r["ph2"]), C.fmt_seconds(r["ort2"]), C.fmt_ratio(r["ph2"] / r["ort2"]),
            f"{r['ph1'] / r['ph2']:.2f}x", C.fmt_seconds(r["cold"]), C.fmt_seconds(r["warm"]),
            C.fmt_seconds(r["warm_build"]), "yes" if r["agree"] else "NO"])
        print(f"  {w.key} done", file=sys.stderr, flush=True)
    C.print_table(
        ["workload", "phasec 1T", "ORT 1T", "ratio 1T", "phasec GF/s", "ORT GF/s",
         "phasec % peak", "phasec 2T", "ORT 2T", "ratio 2T", "phasec 2T speedup",
         "compile cold", "compile warm", "warm w/o import", "agree"], rows,
        title="phasec vs ONNX Runtime (ratio = phasec time / ORT time; 1T/2T = threads)")


if __name__ == "__main__":
    main()

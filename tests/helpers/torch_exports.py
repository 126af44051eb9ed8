"""The PyTorch-exported corpus (tests/fixtures/torch_exports/): loading a
fixture with its weights refilled, seeded inputs for it, ONNX Runtime's
session on it. No PyTorch here: the fixtures were exported once by
``export.py`` in a separate environment (see the folder's README.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fixtures", "torch_exports")
#: the vocabulary size of every transformers model in the corpus
VOCAB = 128


def names() -> list[str]:
    """Every fixture in the corpus, by file name."""
    return sorted(f[:-5] for f in os.listdir(FIXTURES) if f.endswith(".onnx"))


def refill(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with its stripped weights drawn again: each tensor from a
    normal distribution of the mean and standard deviation PyTorch's values
    had, clipped to their range (a constant tensor, such as a LayerNorm's
    ones or a bias of zeros, comes back exactly), from one seeded generator
    in the recorded order."""
    meta = {p.key: p.value for p in model.metadata_props}
    spec = json.loads(meta["phasec.weights"])
    rng = np.random.default_rng(spec["seed"])
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for t in spec["tensors"]:
        draw = rng.standard_normal(t["dims"]) * t["std"] + t["mean"]
        arr = np.clip(draw, t["min"], t["max"]).astype(t["dtype"])
        out.graph.initializer.append(numpy_helper.from_array(arr, t["name"]))
    return out


def load(name: str) -> onnx.ModelProto:
    """Fixture ``name`` with its weights refilled."""
    return refill(onnx.load(os.path.join(FIXTURES, f"{name}.onnx")))


def input_dims(model: onnx.ModelProto) -> dict[str, list[int | str]]:
    """Each graph input's declared dimensions (names for dynamic ones)."""
    out = {}
    for vi in model.graph.input:
        out[vi.name] = [d.dim_value if d.HasField("dim_value") else d.dim_param
                        for d in vi.type.tensor_type.shape.dim]
    return out


def inputs(model: onnx.ModelProto, sizes: Mapping[str, int] | None = None,
           seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs: token ids below the vocabulary for int64 inputs (an
    ``attention_mask`` of ones with its last position masked on every other
    row), standard normal images otherwise; a dynamic dimension takes its
    size from ``sizes`` (default 2)."""
    rng = np.random.default_rng(seed)
    sizes = dict(sizes or {})
    out = {}
    for vi in model.graph.input:
        dims = [d.dim_value if d.HasField("dim_value") else sizes.get(d.dim_param, 2)
                for d in vi.type.tensor_type.shape.dim]
        if vi.type.tensor_type.elem_type == onnx.TensorProto.INT64:
            if "mask" in vi.name:
                mask = np.ones(dims, np.int64)
                mask[::2, -1] = 0
                out[vi.name] = mask
            else:
                out[vi.name] = rng.integers(0, VOCAB, dims).astype(np.int64)
        else:
            out[vi.name] = rng.standard_normal(dims).astype(np.float32)
    return out


def session(model: onnx.ModelProto, threads: int = 1,
            optimized: bool = True) -> ort.InferenceSession:
    """ONNX Runtime's CPU session on ``model`` (without graph optimizations
    unless ``optimized``)."""
    opts = ort.SessionOptions()
    if not optimized:
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])

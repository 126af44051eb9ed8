"""ONNX TensorScatter (opset 24, the KV-cache update beside Attention;
phasec/frontend/onnx/ops_attention.py) against ONNX Runtime: linear and
circular writes (wrapping past the cache's end), 3-D and 4-D caches, the
sequence axis other than the default, absent write indices, odd sizes."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

import phasec
from phasec.frontend.onnx import from_onnx


def test_tensor_scatter_against_onnxruntime():
    rng = np.random.default_rng(0)
    # (past shape, update shape, axis, mode, write indices or None)
    cases = [((3, 2, 7, 5), (3, 2, 3, 5), -2, "linear", [0, 4, 2]),
             ((3, 2, 7, 5), (3, 2, 3, 5), 2, "circular", [5, 6, 1]),
             ((2, 5, 3), (2, 1, 3), 1, "circular", [4, 0]),
             ((2, 5, 3), (2, 2, 3), 1, "linear", None),
             ((2, 3, 6), (2, 3, 4), -1, "circular", [3, 5])]
    nodes, inputs, feeds = [], [], {}
    for k, (pshape, ushape, axis, mode, idx) in enumerate(cases):
        names = [f"p{k}", f"u{k}"] + ([f"w{k}"] if idx is not None else [])
        nodes.append(helper.make_node("TensorScatter", names, [f"y{k}"], axis=axis, mode=mode))
        feeds[f"p{k}"] = rng.standard_normal(pshape).astype(np.float32)
        feeds[f"u{k}"] = rng.standard_normal(ushape).astype(np.float32)
        inputs += [helper.make_tensor_value_info(f"p{k}", TensorProto.FLOAT, pshape),
                   helper.make_tensor_value_info(f"u{k}", TensorProto.FLOAT, ushape)]
        if idx is not None:
            feeds[f"w{k}"] = np.array(idx, np.int64)
            inputs.append(helper.make_tensor_value_info(f"w{k}", TensorProto.INT64, [len(idx)]))
    graph = helper.make_graph(nodes, "g", inputs, [
        helper.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, None) for k in range(len(cases))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])
    model.ir_version = 10
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)
    got = phasec.VirtualMachine(phasec.build(from_onnx(model)))["main"](*feeds.values())
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), w)

"""Run a small ONNX graph through phasec and ONNX Runtime (the quantization tests)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import phasec
from phasec.frontend.onnx import from_onnx

_TYPES = {np.dtype(k): v for k, v in [
    ("float32", TensorProto.FLOAT), ("float16", TensorProto.FLOAT16),
    ("int8", TensorProto.INT8), ("uint8", TensorProto.UINT8), ("int16", TensorProto.INT16),
    ("uint16", TensorProto.UINT16), ("int32", TensorProto.INT32), ("bool", TensorProto.BOOL),
    ("int64", TensorProto.INT64)]}


def run_both(nodes, inputs, outputs, inits=None, opset=21, domains=(), optimize=True):
    """(phasec's, ONNX Runtime's) outputs of the graph; inputs are graph inputs,
    ``outputs`` maps each output's name to its dtype; ``optimize=False`` turns
    ONNX Runtime's graph optimizations (its fusions) off."""
    vis = [helper.make_tensor_value_info(n, _TYPES[a.dtype], a.shape) for n, a in inputs.items()]
    outs = [helper.make_tensor_value_info(n, _TYPES[np.dtype(t)], None)
            for n, t in outputs.items()]
    graph = helper.make_graph(nodes, "quant", vis, outs, initializer=[
        numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()])
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 10
    options = ort.SessionOptions()
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])
    want = sess.run(None, inputs)
    got = phasec.VirtualMachine(phasec.build(from_onnx(model)))["main"](*inputs.values())
    got = [np.asarray(g) for g in (got if len(outputs) > 1 else [got])]
    return got, want


def assert_same(got, want, exact=True, rtol=1e-6):
    """Equal dtypes and shapes; equal values (``exact``) or within ``rtol``."""
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        if exact:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol)

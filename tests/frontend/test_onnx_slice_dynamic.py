"""ONNX Slice with starts, ends and steps computed at run time
(phasec/frontend/onnx/ops_slice.py: R.dynamic_strided_slice, the
sliced lengths matched to symbolic dimensions): compiled once, run at
several bounds (negative, out of range, reversed), against ONNX Runtime."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import phasec
from phasec.frontend.onnx import from_onnx


def test_run_time_slice_against_onnxruntime():
    nodes = [helper.make_node("Add", ["s", "two"], ["e"]),
             helper.make_node("Slice", ["x", "s", "e", "axes", "k"], ["y"]),
             # a later operator sees the sliced shape (symbolic lengths)
             helper.make_node("Mul", ["y", "y"], ["z"])]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 7]),
         helper.make_tensor_value_info("s", TensorProto.INT64, [2]),
         helper.make_tensor_value_info("k", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.array([2, 3], np.int64), "two"),
                     numpy_helper.from_array(np.array([1, 0], np.int64), "axes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    vm = phasec.VirtualMachine(phasec.build(from_onnx(model)))
    x = np.arange(35, dtype=np.float32).reshape(5, 7)
    for s, k in [([0, 1], [1, 1]), ([-4, 2], [1, 2]), ([5, -9], [1, 1]), ([9, 4], [-1, -1]),
                 ([3, 0], [2, 1])]:
        feeds = {"x": x, "s": np.array(s, np.int64), "k": np.array(k, np.int64)}
        (want,) = sess.run(None, feeds)
        got = np.asarray(vm["main"](*feeds.values()))
        assert got.shape == want.shape, (s, k)
        np.testing.assert_array_equal(got, want)

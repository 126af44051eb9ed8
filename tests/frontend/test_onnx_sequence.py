"""ONNX sequence operators expanded at import (phasec/frontend/onnx/ops_sequence.py):
a graph building, editing, splitting and concatenating sequences against
ONNX Runtime; a sequence output through the backend as a list; what is
refused (a sequence through If, a non-sequence operator on one)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import phasec.frontend.onnx.backend as backend
from phasec.frontend.errors import FrontendError, UnsupportedModelError
from phasec.frontend.onnx import from_onnx

from helpers.onnx_run import run_both


def _c(name, v):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(
        np.array(v, np.int64), name))


def test_sequences_against_onnxruntime():
    rng = np.random.default_rng(7)
    x, y, z = (rng.standard_normal((2, 3)).astype(np.float32) for _ in range(3))
    nodes = [_c("p0", 0), _c("p1", 1), _c("pm1", -1), _c("two", 2),
             helper.make_node("SequenceConstruct", ["x", "y"], ["s1"]),
             helper.make_node("SequenceInsert", ["s1", "z", "p0"], ["s2"]),   # z x y
             helper.make_node("SequenceInsert", ["s2", "x"], ["s3"]),         # z x y x
             helper.make_node("SequenceErase", ["s3", "p1"], ["s4"]),         # z y x
             helper.make_node("SequenceLength", ["s4"], ["n"]),
             helper.make_node("SequenceAt", ["s4", "pm1"], ["last"]),
             helper.make_node("ConcatFromSequence", ["s4"], ["stacked"], axis=1, new_axis=1),
             helper.make_node("ConcatFromSequence", ["s4"], ["joined"], axis=-1),
             helper.make_node("SplitToSequence", ["joined", "two"], ["parts"], axis=1),
             helper.make_node("SequenceAt", ["parts", "pm1"], ["tail"]),
             helper.make_node("SplitToSequence", ["x"], ["rows"], keepdims=0),
             helper.make_node("ConcatFromSequence", ["rows"], ["back"], axis=0, new_axis=1),
             helper.make_node("SequenceEmpty", [], ["e"]),
             helper.make_node("SequenceInsert", ["e", "y"], ["e1"]),
             helper.make_node("SequenceAt", ["e1", "p0"], ["only"])]
    outs = {"n": "int64", "last": "float32", "stacked": "float32", "joined": "float32",
            "tail": "float32", "back": "float32", "only": "float32"}
    got, want = run_both(nodes, {"x": x, "y": y, "z": z}, outs, opset=18)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def _model(nodes, outputs, opset=18):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [2, 5])], outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_sequence_output_and_refusals():
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    seq_out = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)
    model = _model([_c("k", 2), helper.make_node("SplitToSequence", ["x", "k"], ["s"], axis=1)],
                   [seq_out])
    (parts,) = backend.prepare(model).run([x])
    assert isinstance(parts, list) and len(parts) == 3
    for got, want in zip(parts, np.split(x, [2, 4], axis=1)):
        np.testing.assert_array_equal(got, want)
    relu = _model([helper.make_node("SequenceConstruct", ["x"], ["s"]),
                   helper.make_node("Relu", ["s"], ["y"])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    with pytest.raises(FrontendError, match=r"seq\(tensor\(float\)\)"):
        from_onnx(relu)  # (refused by validation, as ONNX Runtime does)
    # a sequence out of an If branch: refused by the importer
    branch = helper.make_graph([helper.make_node("SequenceConstruct", ["x"], ["bs"])], "b", [],
                               [helper.make_tensor_sequence_value_info("bs", TensorProto.FLOAT,
                                                                       None)])
    cond = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["s"], then_branch=branch, else_branch=branch)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5]), cond], [seq_out])
    with pytest.raises(UnsupportedModelError, match="a sequence where a tensor is needed"):
        from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))

"""BatchTakenMatmuls: its before/after case (tests/passes/cases/
batch_taken_matmuls_*), its declaration, and a recurrence exported step by
step (Gather of each step's input, Gemm by one shared weight, an LSTM-like
cell) against ONNX Runtime, its symbolic batch included."""

from __future__ import annotations

import re

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import phasec
from phasec.frontend.onnx import from_onnx
from phasec.ir import Phase
from phasec.pipeline import default_pipeline, lower
from phasec.transform import get_pass

from helpers.pass_cases import case_names, run_case


@pytest.mark.parametrize("name", case_names("batch_taken_matmuls_"))
def test_case(name):
    run_case(name)


def test_declaration_and_default_pipeline():
    info = get_pass("BatchTakenMatmuls").info
    assert info.opt_level == 1 and info.phases == {Phase.OPTIMIZATION}
    names = [p.info.name for p in default_pipeline(2).passes]
    assert names.index("FoldConstant") < names.index("BatchTakenMatmuls") < names.index(
        "FuseOps")


def _stepped_model(steps: int, features: int, hidden: int, seed: int, used: int | None = None):
    """``h = tanh(x_t @ W^T + b + h @ R^T)`` for t < ``used``, each step's
    input a Gather of ``seq`` [steps, batch, features] (batch symbolic), W
    one initializer read by every step's Gemm (transB), as PyTorch exports a
    loop over a cell."""
    rng = np.random.default_rng(seed)
    def normal(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)
    inits = [numpy_helper.from_array(normal(hidden, features), "W"),
             numpy_helper.from_array(normal(hidden), "b"),
             numpy_helper.from_array(normal(hidden, hidden), "R")]
    nodes, h = [], "h0"
    for t in range(steps if used is None else used):
        inits.append(numpy_helper.from_array(np.array(t, np.int64), f"t{t}"))
        nodes += [helper.make_node("Gather", ["seq", f"t{t}"], [f"x{t}"], axis=0),
                  helper.make_node("Gemm", [f"x{t}", "W", "b"], [f"p{t}"], transB=1),
                  helper.make_node("Gemm", [h, "R"], [f"q{t}"], transB=1),
                  helper.make_node("Add", [f"p{t}", f"q{t}"], [f"s{t}"]),
                  helper.make_node("Tanh", [f"s{t}"], [f"h{t + 1}"])]
        h = f"h{t + 1}"
    graph = helper.make_graph(
        nodes, "steps",
        [helper.make_tensor_value_info("seq", TensorProto.FLOAT, [steps, "batch", features]),
         helper.make_tensor_value_info("h0", TensorProto.FLOAT, ["batch", hidden])],
        [helper.make_tensor_value_info(h, TensorProto.FLOAT, ["batch", hidden])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("steps,features,hidden,batch,used", [
    (7, 37, 13, 1, None),   # odd, prime sizes; one matmul of 7 x 37 rows
    (5, 64, 24, 3, None),   # a batch of 3: rows of every step and batch
    (6, 16, 8, 2, 3),       # half of the steps: still one matmul
])
def test_stepped_recurrence_equals_onnxruntime(steps, features, hidden, batch, used):
    model = _stepped_model(steps, features, hidden, steps + features, used)
    rng = np.random.default_rng(features)
    feeds = {"seq": rng.standard_normal((steps, batch, features)).astype(np.float32),
             "h0": rng.standard_normal((batch, hidden)).astype(np.float32)}
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    mod = from_onnx(model)
    lowered = str(lower(mod)["main"])
    # the input products are one kernel's (called once; the recurrence's
    # products are fused with each step's take, add and tanh)
    assert len(re.findall(r"cls\.fused_matmul(_prepacked)?\(", lowered)) == 1
    vm = phasec.VirtualMachine(phasec.build(mod))
    got = np.asarray(vm["main"](feeds["seq"], feeds["h0"]))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_few_steps_of_a_long_sequence_stay_per_step():
    model = _stepped_model(8, 16, 8, 3, used=3)  # 3 of 8 rows: under half
    lowered = str(lower(from_onnx(model))["main"])
    assert "_steps" not in lowered

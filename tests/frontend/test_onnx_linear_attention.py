"""ONNX LinearAttention (opset 27; phasec/frontend/onnx/ops_attention.py,
the state recurrence unrolled) against the ONNX reference implementation
(ONNX Runtime has no kernel for it): every update rule, decay per head and
per key channel, beta per head and shared, grouped query heads, a past
state, odd sizes; and the refusal of a rule given the wrong inputs."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import phasec
from phasec.frontend.errors import FrontendError
from phasec.frontend.onnx import from_onnx

B, T, HQ, HKV, DK, DV = 3, 3, 6, 2, 3, 5


def _model(cases):
    nodes, inputs, outputs = [], {}, []
    rng = np.random.default_rng(0)
    for k, (rule, decay_last, beta_last, past) in enumerate(cases):
        names = {"q": (B, T, HQ * DK), "k": (B, T, HKV * DK), "v": (B, T, HKV * DV)}
        if past:
            names["p"] = (B, HKV, DK, DV)
        if decay_last:
            names["g"] = (B, T, decay_last)
        if beta_last:
            names["b"] = (B, T, beta_last)
        for n, shape in names.items():
            x = rng.standard_normal(shape).astype(np.float32)
            if n == "g":
                x = -np.abs(x) * 0.3
            if n == "b":
                x = np.abs(x) % 1.0
            if n == "k":  # unit keys per head, as the delta rules expect
                x = x.reshape(B, T, HKV, DK)
                x = (x / np.linalg.norm(x, axis=-1, keepdims=True)).reshape(shape)
            inputs[f"{n}{k}"] = x.astype(np.float32)
        ins = [f"{n}{k}" if n in names else "" for n in "qkvpgb"]
        while not ins[-1]:
            ins.pop()
        nodes.append(helper.make_node("LinearAttention", ins, [f"y{k}", f"s{k}"],
                                      update_rule=rule, q_num_heads=HQ, kv_num_heads=HKV,
                                      **({"scale": 0.7} if k == 0 else {})))
        outputs += [f"y{k}", f"s{k}"]
    graph = helper.make_graph(nodes, "g", [
        helper.make_tensor_value_info(n, TensorProto.FLOAT, x.shape) for n, x in inputs.items()],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 27)]), inputs


def test_linear_attention_against_the_onnx_reference():
    model, feeds = _model([("linear", 0, 0, True), ("gated", HKV * DK, 0, True),
                           ("delta", 0, HKV, False), ("gated_delta", HKV, 1, True)])
    want = ReferenceEvaluator(model).run(None, feeds)
    got = phasec.VirtualMachine(phasec.build(from_onnx(model)))["main"](*feeds.values())
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5)


def test_a_rule_without_its_inputs_is_refused():
    model, _ = _model([("gated_delta", 0, HKV, False)])  # no decay
    with pytest.raises(FrontendError, match="requires decay input"):
        from_onnx(model)

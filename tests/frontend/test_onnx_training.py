"""The optimizers of ai.onnx.preview.training (Adagrad, Adam, Momentum
standard and Nesterov; phasec/frontend/onnx/ops_training.py) against the
ONNX reference implementation (ONNX Runtime has no kernels for them): one
and several tensors of odd shapes, every attribute away from its default,
the first step (T = 0: no bias correction, gradient coefficient 1) and a
later one."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import phasec
from phasec.frontend.errors import FrontendError
from phasec.frontend.onnx import from_onnx

_TRAINING = "ai.onnx.preview.training"
_SHAPES = [(3, 5), (7,), (2, 1, 3)]


def _node(op, groups, n, outs, **attrs):
    ins = ["r", "t"] + [f"{op}_{g}{k}" for g in groups for k in range(n)]
    names = [f"{op}_{o}{k}_out" for o in outs for k in range(n)]
    return helper.make_node(op, ins, names, domain=_TRAINING, **attrs), ins[2:], names


def test_optimizers_against_the_onnx_reference():
    nodes, inputs, outputs = [], [], []
    specs = [("Adagrad", "xgh", 2, "xh", {"decay_factor": 0.1, "epsilon": 1e-5,
                                         "norm_coefficient": 0.01}),
             ("Adam", "xgvh", 3, "xvh", {"alpha": 0.8, "beta": 0.95, "epsilon": 1e-4,
                                        "norm_coefficient": 0.02, "norm_coefficient_post": 0.03}),
             ("Momentum", "xgv", 1, "xv", {"alpha": 0.7, "beta": 0.4, "mode": "standard",
                                          "norm_coefficient": 0.05})]
    for op, groups, n, outs, attrs in specs:
        node, ins, names = _node(op, groups, n, outs, **attrs)
        nodes.append(node)
        inputs += ins
        outputs += names
    nest, ins, names = _node("Momentum", "xgv", 2, "xv", alpha=0.6, beta=0.9, mode="nesterov",
                             norm_coefficient=0.0)
    nest.output[:] = [f"nest_{o}" for o in names]
    nest.input[:] = ["r", "t"] + [f"nest_{i}" for i in ins]
    nodes.append(nest)
    inputs += [f"nest_{i}" for i in ins]
    outputs += [f"nest_{o}" for o in names]
    rng = np.random.default_rng(0)

    def shape_of(name):
        return _SHAPES[int(name[-1]) % len(_SHAPES)]
    feeds = {name: (rng.standard_normal(shape_of(name)) * (1 if "_h" not in name else 0)
                    + (np.abs(rng.standard_normal(shape_of(name))) if "_h" in name else 0)
                    ).astype(np.float32) for name in inputs}
    graph = helper.make_graph(nodes, "g", [
        helper.make_tensor_value_info("r", TensorProto.FLOAT, []),
        helper.make_tensor_value_info("t", TensorProto.INT64, [])] + [
        helper.make_tensor_value_info(name, TensorProto.FLOAT, shape_of(name)) for name in inputs],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(_TRAINING, 1)])
    vm = phasec.VirtualMachine(phasec.build(from_onnx(model)))["main"]
    ref = ReferenceEvaluator(model)
    for t in (0, 3):
        scalars = {"r": np.array(0.1, np.float32), "t": np.array(t, np.int64)}
        want = ref.run(None, {**scalars, **feeds})
        got = vm(*scalars.values(), *feeds.values())
        for name, g, w in zip(outputs, got, want):
            np.testing.assert_allclose(np.asarray(g), w, rtol=2e-6, atol=1e-7, err_msg=name)


def test_momentum_without_its_attributes_is_refused():
    node, ins, names = _node("Momentum", "xgv", 1, "xv", alpha=0.5, beta=0.5)
    graph = helper.make_graph([node], "g", [
        helper.make_tensor_value_info("r", TensorProto.FLOAT, []),
        helper.make_tensor_value_info("t", TensorProto.INT64, [])] + [
        helper.make_tensor_value_info(name, TensorProto.FLOAT, [2]) for name in ins],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in names])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(_TRAINING, 1)])
    with pytest.raises(FrontendError, match="mode, norm_coefficient"):
        from_onnx(model)

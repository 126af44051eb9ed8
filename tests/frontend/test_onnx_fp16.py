"""float16 graphs through the ONNX importer: products and sums accumulate in
float32 (phasec/op/_lowering.py, linear_algebra.py, statistical.py), and
float16 softmax rounds step by step as the operator's definition does, so
phasec equals the ONNX reference implementation (numpy, which also
accumulates float16 in float32) bit for bit on Softmax and causal
Attention, and ONNX Runtime within float16 rounding on whole models.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import phasec
from phasec.frontend.onnx import from_onnx

H = TensorProto.FLOAT16


def _model(nodes, inputs, outputs, inits=(), opset=23):
    vis = [helper.make_tensor_value_info(n, H, a.shape) for n, a in inputs.items()]
    outs = [helper.make_tensor_value_info(n, H, None) for n in outputs]
    graph = helper.make_graph(nodes, "fp16", vis, outs,
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def _phasec(model, inputs):
    out = phasec.VirtualMachine(phasec.build(from_onnx(model)))["main"](*inputs.values())
    return [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]


def _ort(model, inputs):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, inputs)


def _reference(model, inputs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ReferenceEvaluator(model).run(None, inputs)


def _ulps(a: np.ndarray, b: np.ndarray) -> int:
    """The largest distance in float16 steps between ``a`` and ``b`` (same signs)."""
    ia = a.astype(np.float16).view(np.int16).astype(np.int64)
    ib = b.astype(np.float16).view(np.int16).astype(np.int64)
    return int(np.max(np.abs(ia - ib)))


def test_causal_attention_equals_the_reference_bit_for_bit():
    # the BackendTest's test_attention_4d_causal_fp16 (and _expanded) at other seeds
    for seed in range(2):
        rng = np.random.default_rng(seed)
        q = rng.random((2, 3, 4, 8)).astype(np.float16)
        k = rng.random((2, 3, 6, 8)).astype(np.float16)
        v = rng.random((2, 3, 6, 8)).astype(np.float16)
        inputs = {"Q": q, "K": k, "V": v}
        model = _model([helper.make_node("Attention", ["Q", "K", "V"], ["Y"], is_causal=1)],
                       inputs, ["Y"])
        (got,), (want,) = _phasec(model, inputs), _reference(model, inputs)
        np.testing.assert_array_equal(got, want)
        # ONNX Runtime computes the softmax in float32 throughout: an ulp or two away
        assert _ulps(got, _ort(model, inputs)[0]) <= 2


def test_softmax_and_reductions_equal_the_reference_bit_for_bit():
    rng = np.random.default_rng(1)
    x = rng.uniform(-4, 4, (3, 2500)).astype(np.float16)
    nodes = [helper.make_node("Softmax", ["x"], ["sm"], axis=-1),
             helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("ReduceMean", ["x", "ax"], ["m"], keepdims=1),
             helper.make_node("LogSoftmax", ["x"], ["ls"], axis=0)]
    inputs = {"x": x}
    model = _model(nodes, inputs, ["sm", "s", "m", "ls"], inits=[("ax", np.array([1]))],
                   opset=18)
    got, want = _phasec(model, inputs), _reference(model, inputs)
    # The reference's ReduceMean rounds the sum to float16 before dividing
    # (np.mean with dtype=float16); phasec divides the float32 sum and rounds
    # once, as np.mean does by default for float16
    want[2] = np.mean(x, axis=1, keepdims=True)
    # The reference's LogSoftmax is log(Softmax) in float16 (inexact near 0):
    # against float64, rounded
    x64 = x.astype(np.float64)
    shifted = x64 - x64.max(0)
    want[3] = (shifted - np.log(np.exp(shifted).sum(0))).astype(np.float16)
    for g, w, name in zip(got, want, ("Softmax", "ReduceSum", "ReduceMean", "LogSoftmax")):
        assert g.dtype == np.float16 and g.shape == w.shape, name
        # a float16 accumulator would be thousands of ulps off here (the sums pass 2048)
        assert _ulps(g, w) <= (0 if name != "LogSoftmax" else 2), name


def test_fp16_mlp_and_convnet_match_onnxruntime():
    rng = np.random.default_rng(2)

    def w(*shape, s=0.3):
        return rng.normal(0, s, shape).astype(np.float16)
    x = rng.normal(0, 1, (2, 3, 12, 12)).astype(np.float16)
    inits = [("w1", w(8, 3, 3, 3)), ("b1", w(8)), ("g", (1 + w(8, s=0.1))), ("be", w(8)),
             ("mu", w(8, s=0.1)), ("var", np.abs(w(8)) + np.float16(0.5)),
             ("w2", w(8, 3, 3, 3, s=0.2).reshape(8, 3, 3, 3)[:, :1].repeat(1, 1)),
             ("fc", w(8, 64, s=0.2)), ("fb", w(64)), ("fc2", w(64, 10, s=0.2)),
             ("shape", np.array([2, -1]))]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "g", "be", "mu", "var"], ["bn"]),
        helper.make_node("Relu", ["bn"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], group=8, pads=[1, 1, 1, 1]),
        helper.make_node("MaxPool", ["c2"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p1"], ["gp"]),
        helper.make_node("Reshape", ["gp", "shape"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc", "fb"], ["h"]),
        helper.make_node("Sigmoid", ["h"], ["hs"]),
        helper.make_node("Mul", ["h", "hs"], ["silu"]),
        helper.make_node("MatMul", ["silu", "fc2"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["y"]),
    ]
    inputs = {"x": x}
    model = _model(nodes, inputs, ["y", "logits"], inits=inits, opset=17)
    for got, want in zip(_phasec(model, inputs), _ort(model, inputs)):
        assert got.dtype == np.float16 and got.shape == want.shape
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32),
                                   rtol=1e-2, atol=2e-3)

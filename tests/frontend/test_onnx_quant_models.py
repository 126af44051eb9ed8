"""A float model quantized by ONNX Runtime's own tools gives ONNX Runtime's
output through phasec: exactly from ``quantize_static`` (QOperator format:
QLinearConv, QLinearAdd, QLinearMul, QLinearSigmoid, QLinearAveragePool,
QLinearConcat, QLinearGlobalAveragePool, QGemm, QLinearLeakyRelu between
QuantizeLinear and DequantizeLinear), to float32 rounding from
``quantize_dynamic`` (DynamicQuantizeLinear, ConvInteger, MatMulInteger, the
rescaling in float32), whose integer products run on the integer GEMM."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (
    CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic, quantize_static,
)

import phasec
from phasec.frontend.onnx import from_onnx
from phasec.ir import Call, collect_exprs


def _float_model(rng):
    def w(*shape, s=0.3):
        return rng.normal(0, s, shape).astype(np.float32)
    inits = {"w1": w(8, 3, 3, 3), "b1": w(8), "w2": w(8, 8, 3, 3, s=0.1), "b2": w(8),
             "w3": w(8, 4, 1, 1), "fc": w(16, 10), "fb": w(10), "shape": np.array([0, -1])}
    node = helper.make_node
    nodes = [node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             node("Relu", ["c1"], ["r1"]),
             node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             node("Add", ["c2", "r1"], ["s"]),
             node("Sigmoid", ["s"], ["sg"]),
             node("Mul", ["s", "sg"], ["m"]),
             node("AveragePool", ["m"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             node("Conv", ["p", "w3"], ["c3"], group=2),
             node("Concat", ["p", "c3"], ["cat"], axis=1),
             node("GlobalAveragePool", ["cat"], ["g"]),
             node("Reshape", ["g", "shape"], ["f"]),
             node("Gemm", ["f", "fc", "fb"], ["h"]),
             node("LeakyRelu", ["h"], ["y"], alpha=0.1)]
    graph = helper.make_graph(
        nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


class _Calibration(CalibrationDataReader):
    def __init__(self, rng):
        self.samples = iter([{"x": rng.normal(size=(1, 3, 16, 16)).astype(np.float32)}
                             for _ in range(4)])

    def get_next(self):
        return next(self.samples, None)


def test_qoperator_model_from_ort_quantization_tool(tmp_path):
    rng = np.random.default_rng(0)
    src, dst = tmp_path / "float.onnx", tmp_path / "quant.onnx"
    src.write_bytes(_float_model(rng).SerializeToString())
    quantize_static(str(src), str(dst), _Calibration(rng), quant_format=QuantFormat.QOperator,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    ops = {n.op_type for n in onnx.load(str(dst)).graph.node}
    assert {"QLinearConv", "QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearAveragePool",
            "QLinearConcat", "QLinearGlobalAveragePool", "QGemm", "QLinearLeakyRelu"} <= ops
    x = rng.normal(size=(1, 3, 16, 16)).astype(np.float32)
    want = ort.InferenceSession(str(dst), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = phasec.VirtualMachine(phasec.build(from_onnx(str(dst))))["main"](x)
    np.testing.assert_array_equal(np.asarray(got), want[0])


def test_dynamic_model_from_ort_quantization_tool(tmp_path):
    rng = np.random.default_rng(1)
    src, dst = tmp_path / "float.onnx", tmp_path / "dynamic.onnx"
    src.write_bytes(_float_model(rng).SerializeToString())
    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8)
    ops = {n.op_type for n in onnx.load(str(dst)).graph.node}
    assert {"DynamicQuantizeLinear", "ConvInteger", "MatMulInteger"} <= ops
    x = rng.normal(size=(1, 3, 16, 16)).astype(np.float32)
    want = ort.InferenceSession(str(dst), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = phasec.VirtualMachine(phasec.build(from_onnx(str(dst))))["main"](x)
    np.testing.assert_allclose(np.asarray(got), want[0], rtol=1e-5, atol=1e-6)


def _encoder_block(rng, d: int = 24, f: int = 40):
    """A transformer encoder's feed-forward half (LayerNorm, MatMul + bias,
    Relu, MatMul + bias, the residual), batch and sequence symbolic."""
    inits = {"g": np.ones(d, np.float32), "be": np.zeros(d, np.float32),
             "w1": rng.normal(0, d ** -0.5, (d, f)).astype(np.float32),
             "b1": rng.normal(0, 0.1, f).astype(np.float32),
             "w2": rng.normal(0, f ** -0.5, (f, d)).astype(np.float32),
             "b2": rng.normal(0, 0.1, d).astype(np.float32)}
    node = helper.make_node
    nodes = [node("LayerNormalization", ["x", "g", "be"], ["n"], axis=-1),
             node("MatMul", ["n", "w1"], ["h"]), node("Add", ["h", "b1"], ["hb"]),
             node("Relu", ["hb"], ["r"]), node("MatMul", ["r", "w2"], ["o"]),
             node("Add", ["o", "b2"], ["ob"]), node("Add", ["x", "ob"], ["y"])]
    graph = helper.make_graph(
        nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "t", d])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "t", d])],
        initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_dynamic_encoder_block_runs_the_integer_gemm(tmp_path):
    """``quantize_dynamic``'s DynamicQuantizeLinear -> MatMulInteger on a
    transformer block: both products are uint8 x int8 -> int32 matmuls (the
    integer GEMM), none in float, and the output is ORT's to float32 rounding."""
    rng = np.random.default_rng(2)
    src, dst = tmp_path / "float.onnx", tmp_path / "dynamic.onnx"
    src.write_bytes(_encoder_block(rng).SerializeToString())
    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8)
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= {
        n.op_type for n in onnx.load(str(dst)).graph.node}
    mod = from_onnx(str(dst))
    products = [c for c in _calls(mod, "relax.matmul")]
    assert len(products) == 2 and all(
        c.struct_info.dtype == "int32" and {a.struct_info.dtype for a in c.args} == {
            "uint8", "int8"} for c in products)
    x = rng.normal(size=(2, 7, 24)).astype(np.float32)
    want = ort.InferenceSession(str(dst), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = phasec.VirtualMachine(phasec.build(mod))["main"](x)
    np.testing.assert_allclose(np.asarray(got), want[0], rtol=1e-5, atol=1e-5)


def _calls(mod, name: str) -> list:
    return [e for f in mod.functions.values() for e in collect_exprs(f.body, (Call,))
            if getattr(e.op, "name", None) == name]

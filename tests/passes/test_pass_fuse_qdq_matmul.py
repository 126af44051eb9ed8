"""FuseQDQMatmul: its before/after case (tests/passes/cases/fuse_qdq_matmul_*),
its declaration, the recovery of int8 weights, and QDQ int8 matmuls built
with it against ONNX Runtime, bit for bit."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import phasec
from phasec.frontend.onnx import from_onnx
from phasec.ir import Phase
from phasec.passes.fuse_qdq_matmul import int8_weight
from phasec.pipeline import default_pipeline
from phasec.transform import get_pass

from helpers.pass_cases import case_names, run_case


@pytest.mark.parametrize("name", case_names("fuse_qdq_matmul_"))
def test_case(name):
    run_case(name)


def test_declaration_and_default_pipeline():
    info = get_pass("FuseQDQMatmul").info
    assert info.opt_level == 1 and info.phases == {Phase.OPTIMIZATION}
    names = [p.info.name for p in default_pipeline(2).passes]
    assert names.index("FoldConstant") < names.index("FuseQDQMatmul") < names.index(
        "DeadCodeElimination")


def test_int8_weight_recovery():
    rng = np.random.default_rng(5)
    wq = rng.integers(-127, 128, (13, 7)).astype(np.int8)
    wq[0, 0] = 127
    sw = np.float32(0.0123)
    found = int8_weight(wq.astype(np.float32) * sw)
    assert found is not None
    np.testing.assert_array_equal(found[0].astype(np.float32) * found[1],
                                  wq.astype(np.float32) * sw)
    assert int8_weight(rng.standard_normal((5, 3)).astype(np.float32)) is None
    assert int8_weight(np.zeros((2, 2), np.float32)) is None


def _qdq_model(M: int, K: int, N: int, adt: str, za: int, sa: float, sy: float, zy: int,
               odt: str, seed: int, per_column: bool = False):
    """x (float) -> Q -> DQ -> MatMul(DQ(int8 weight)) -> Q -> DQ, as ORT's
    quantizer writes (symmetric weights: some |wq| = 127 under each scale)."""
    rng = np.random.default_rng(seed)
    wq = rng.integers(-127, 128, (K, N)).astype(np.int8)
    wq[0] = 127
    sw = rng.uniform(0.01, 0.03, N).astype(np.float32) if per_column else np.float32(0.02)
    inits = [numpy_helper.from_array(np.float32(sa), "sa"),
             numpy_helper.from_array(np.array(za, adt), "za"),
             numpy_helper.from_array(wq, "wq"), numpy_helper.from_array(sw, "sw"),
             numpy_helper.from_array(np.zeros(N, np.int8) if per_column else np.int8(0), "zw"),
             numpy_helper.from_array(np.float32(sy), "sy"),
             numpy_helper.from_array(np.array(zy, odt), "zy")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sa", "za"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sa", "za"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"], axis=1),
             helper.make_node("MatMul", ["xd", "wd"], ["m"]),
             helper.make_node("QuantizeLinear", ["m", "sy", "zy"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [M, K])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [M, N])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("M,K,N,adt,za,odt,zy,per_column", [
    (37, 61, 29, "uint8", 128, "uint8", 128, False),
    (5, 130, 33, "int8", -7, "int8", 3, True),      # int8 activations, shifted to uint8
    (64, 96, 48, "uint8", 255, "uint8", 0, False),  # saturation at both ends
])
def test_qdq_matmul_equals_onnxruntime(M, K, N, adt, za, odt, zy, per_column):
    model = _qdq_model(M, K, N, adt, za, 0.04, 0.05, zy, odt, M + K, per_column)
    x = (np.random.default_rng(M).standard_normal((M, K)) * 3).astype(np.float32)
    _assert_fused_and_equal(model, x)


def _assert_fused_and_equal(model, x: np.ndarray) -> None:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})[0]
    exe = phasec.build(from_onnx(model))
    # one kernel: the integer GEMM with the requantization in its epilogue
    assert any(k.startswith("fused_matmul_") and "multiply_quantize" in k for k in exe.kernels())
    result = phasec.VirtualMachine(exe)["main"](x)
    got = np.asarray(result.numpy() if hasattr(result, "numpy") else result)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("per_channel,bias,adt", [(True, True, "uint8"), (False, False, "int8")])
def test_qdq_pointwise_conv_equals_onnxruntime(per_channel, bias, adt):
    """A QDQ 1x1 Conv (per-channel or per-tensor int8 weight, an int32 bias
    dequantized with scale sx * sw, as quantizers write it) against ORT's QLinearConv."""
    rng = np.random.default_rng(11)
    C, O, H, W = 19, 12, 6, 9
    sx, sy = np.float32(0.04), np.float32(0.05)
    wq = rng.integers(-127, 128, (O, C, 1, 1)).astype(np.int8)
    wq[:, 0] = -127
    sw = rng.uniform(0.005, 0.02, O).astype(np.float32) if per_channel else np.float32(0.01)
    zx, zy = np.array(120 if adt == "uint8" else -5, adt), np.array(100 if adt == "uint8" else 2, adt)
    inits = [numpy_helper.from_array(sx, "sx"), numpy_helper.from_array(zx, "zx"),
             numpy_helper.from_array(wq, "wq"), numpy_helper.from_array(sw, "sw"),
             numpy_helper.from_array(np.zeros(O, np.int8) if per_channel else np.int8(0), "zw"),
             numpy_helper.from_array(sy, "sy"), numpy_helper.from_array(zy, "zy")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"], axis=0)]
    conv_in = ["xd", "wd"]
    if bias:
        inits += [numpy_helper.from_array(rng.integers(-5000, 5000, O).astype(np.int32), "bq"),
                  numpy_helper.from_array((sx * sw).astype(np.float32), "bs")]
        nodes.append(helper.make_node("DequantizeLinear", ["bq", "bs"], ["bd"], axis=0))
        conv_in.append("bd")
    nodes += [helper.make_node("Conv", conv_in, ["c"]),
              helper.make_node("QuantizeLinear", ["c", "sy", "zy"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    graph = helper.make_graph(nodes, "qdq_conv", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [2, C, H, W])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    x = (rng.standard_normal((2, C, H, W)) * 2).astype(np.float32)
    _assert_fused_and_equal(model, x)


@pytest.mark.parametrize("trans_b,per_column", [(True, True), (False, False)])
def test_qdq_gemm_with_bias_equals_onnxruntime(trans_b, per_column):
    """A QDQ Gemm (int8 weight, transposed or not; an int32 bias dequantized
    with scale sx * sw, as quantizers write it) against ORT's QGemm."""
    rng = np.random.default_rng(13)
    M, K, N = 9, 37, 23
    sx, sy = np.float32(0.04), np.float32(0.06)
    wq = rng.integers(-127, 128, (N, K) if trans_b else (K, N)).astype(np.int8)
    wq[(slice(None), 0) if trans_b else (0, slice(None))] = -127  # |wq| = 127 in each column
    sw = rng.uniform(0.005, 0.02, N).astype(np.float32) if per_column else np.float32(0.01)
    axis = 0 if trans_b else 1
    inits = [numpy_helper.from_array(sx, "sx"), numpy_helper.from_array(np.uint8(131), "zx"),
             numpy_helper.from_array(wq, "wq"), numpy_helper.from_array(sw, "sw"),
             numpy_helper.from_array(np.zeros(N, np.int8) if per_column else np.int8(0), "zw"),
             numpy_helper.from_array(rng.integers(-4000, 4000, N).astype(np.int32), "bq"),
             numpy_helper.from_array((sx * sw).astype(np.float32), "bs"),
             numpy_helper.from_array(sy, "sy"), numpy_helper.from_array(np.uint8(7), "zy")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"], axis=axis),
             helper.make_node("DequantizeLinear", ["bq", "bs"], ["bd"], axis=0),
             helper.make_node("Gemm", ["xd", "wd", "bd"], ["g"], transB=int(trans_b)),
             helper.make_node("QuantizeLinear", ["g", "sy", "zy"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    graph = helper.make_graph(nodes, "qdq_gemm", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [M, K])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [M, N])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    x = (rng.standard_normal((M, K)) * 3).astype(np.float32)
    _assert_fused_and_equal(model, x)

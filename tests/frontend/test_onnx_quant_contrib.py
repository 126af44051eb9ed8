"""ONNX Runtime's com.microsoft quantized operators (phasec/frontend/onnx/
ops_quant_contrib.py) against ONNX Runtime itself: integer outputs exactly,
float outputs (QGemm without y_scale, MatMulIntegerToFloat,
DynamicQuantizeMatMul) to float32 rounding.

QLinearAdd's scales put many results within a float32 rounding of a halfway
point, where ORT's fused multiply-adds decide: phasec reproduces them."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.onnx_run import assert_same, run_both
from onnx import helper

MS = "com.microsoft"


def ms(op, ins, outs=("y",), **attrs):
    return helper.make_node(op, list(ins), list(outs), domain=MS, **attrs)


def _q(dt, shape, rng):
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max + 1, shape).astype(dt)


def _params(dt):
    # scales whose ratios put many results on (or a float32 rounding from) a halfway point
    return {"sa": np.float32(0.031), "za": np.array(3, dt), "sb": np.float32(0.047),
            "zb": np.array(-2 if dt == "int8" else 200, dt), "sc": np.float32(0.06),
            "zc": np.array(7, dt), "sm": np.float32(1.3), "s256": np.float32(1 / 256)}


@pytest.mark.parametrize("dt", ["uint8", "int8"])
def test_elementwise(dt):
    rng = np.random.default_rng(0)
    a, b = _q(dt, (4, 33, 17), rng), _q(dt, (33, 17), rng)
    col, one = _q(dt, (4, 33, 1), rng), _q(dt, (1,), rng)
    every = np.arange(np.iinfo(dt).min, np.iinfo(dt).max + 1).astype(dt).reshape(16, 16)
    qp = ["sa", "za"]
    nodes = [ms("QLinearAdd", ["a", *qp, "b", "sb", "zb", "sc", "zc"], ["add"]),
             ms("QLinearAdd", ["col", *qp, "a", "sb", "zb", "sc", "zc"], ["add_col"]),
             ms("QLinearAdd", ["a", *qp, "one", "sb", "zb", "sc"], ["add_one"]),
             ms("QLinearMul", ["a", *qp, "b", "sb", "zb", "sm", "zc"], ["mul"]),
             ms("QLinearSigmoid", ["every", *qp, "s256", "zc"], ["sig"]),
             ms("QLinearLeakyRelu", ["every", *qp, "sc", "zc"], ["leaky"], alpha=0.1),
             ms("QLinearWhere", ["cond", "a", *qp, "col", "sb", "zb", "sc", "zc"], ["where"])]
    outs = {k: dt for k in ("add", "add_col", "add_one", "mul", "sig", "leaky", "where")}
    cond = rng.random((33, 17)) < 0.5
    got, want = run_both(nodes, {"a": a, "b": b, "col": col, "one": one, "every": every,
                                 "cond": cond}, outs, _params(dt), domains=[MS])
    assert_same(got, want)


@pytest.mark.parametrize("dt", ["uint8", "int8"])
def test_pooling_concat_softmax(dt):
    rng = np.random.default_rng(1)
    x, x2 = _q(dt, (2, 3, 9, 8), rng), _q(dt, (2, 5, 9, 8), rng)
    qp = ["x", "sa", "za", "sc", "zc"]
    nodes = [ms("QLinearAveragePool", qp, ["avg"], kernel_shape=[3, 3], strides=[2, 2],
                pads=[1, 1, 1, 1]),
             ms("QLinearAveragePool", qp, ["avg_pad"], kernel_shape=[2, 3], strides=[2, 2],
                pads=[1, 0, 1, 1], count_include_pad=1, ceil_mode=1),
             ms("QLinearAveragePool", qp, ["avg_nhwc"], kernel_shape=[2, 2], channels_last=1),
             ms("QLinearGlobalAveragePool", qp, ["gap"]),
             ms("QLinearGlobalAveragePool", qp, ["gap_nhwc"], channels_last=1),
             ms("QLinearConcat", ["sc", "zc", "x", "sa", "za", "x2", "sb", "zb", "x", "sc", "zc"],
                ["cat"], axis=1),
             ms("QLinearSoftmax", ["x", "sa", "za", "s256", "zc"], ["soft"], axis=-1, opset=13),
             ms("QLinearSoftmax", ["x", "sb", "za", "s256", "zc"], ["soft_axis"], axis=1, opset=13),
             ms("QLinearSoftmax", ["x", "sa", "za", "s256", "zc"], ["soft_flat"], axis=1, opset=12),
             ms("QLinearConv", ["x", "sa", "za", "w", "sw", "zw", "sc", "zc", "bias"],
                ["conv_nhwc"], channels_last=1, pads=[1, 1, 1, 1])]
    outs = {k: dt for k in ("avg", "avg_pad", "avg_nhwc", "gap", "gap_nhwc", "cat", "soft",
                            "soft_axis", "soft_flat", "conv_nhwc")}
    inits = {**_params(dt), "w": _q("int8", (4, 8, 3, 3), rng), "sw": np.float32(0.011),
             "zw": np.array(0, np.int8), "bias": rng.integers(-3000, 3000, 4).astype(np.int32)}
    got, want = run_both(nodes, {"x": x, "x2": x2}, outs, inits, domains=[MS])
    # The average pools sum their dequantized window in float32, as ORT
    # does, but not in its order (rows first, then columns: the schedule
    # of a float average pool), so a sum at a rounding tie may quantize one
    # step apart; every other output is ORT's exactly.
    pools = len([k for k in outs if k.startswith(("avg", "gap"))])
    for g, w in zip(got[:pools], want[:pools]):
        assert g.dtype == w.dtype and g.shape == w.shape
        diff = np.abs(g.astype(np.int32) - w.astype(np.int32))
        assert diff.max() <= 1 and np.mean(diff) < 0.02, (diff.max(), np.mean(diff))
    assert_same(got[pools:], want[pools:])


@pytest.mark.parametrize("dt", ["uint8", "int8"])
def test_gemm_and_matmuls(dt):
    rng = np.random.default_rng(2)
    a, bt, b = _q(dt, (5, 12), rng), _q("int8", (7, 12), rng), _q("int8", (12, 7), rng)
    at = np.ascontiguousarray(a.T)
    inits = {**_params(dt), "zb8": np.array(0, np.int8), "zbc": np.zeros(7, np.int8),
             "sbc": rng.uniform(0.01, 0.05, 7).astype(np.float32),
             "c": rng.integers(-500, 500, 7).astype(np.int32),
             "bias": rng.normal(size=7).astype(np.float32)}
    nodes = [ms("QGemm", ["a", "sa", "za", "bt", "sb", "zb8", "c", "sc", "zc"], ["q"],
                transB=1, alpha=0.7),
             ms("QGemm", ["at", "sa", "za", "b", "sbc", "zbc", "c", "sc", "zc"], ["q_col"],
                transA=1),
             ms("QGemm", ["a", "sa", "za", "bt", "sbc", "zbc", "c"], ["f"], transB=1),
             ms("MatMulIntegerToFloat", ["a", "b", "sa", "sbc", "za", "zbc", "bias"], ["m"]),
             ms("MatMulIntegerToFloat", ["a", "b", "sa", "sb"], ["m_plain"])]
    outs = {"q": dt, "q_col": dt, "f": "float32", "m": "float32", "m_plain": "float32"}
    got, want = run_both(nodes, {"a": a, "at": at, "bt": bt, "b": b}, outs, inits, domains=[MS])
    assert_same(got[:2], want[:2])
    assert_same(got[2:], want[2:], exact=False, rtol=1e-5)


def test_dynamic_quantize_matmul_and_qdq():
    rng = np.random.default_rng(3)
    a = rng.normal(size=(3, 5, 12)).astype(np.float32)
    zeros = np.zeros((2, 12), np.float32)           # an empty range: scale 1, as ORT
    b = _q("int8", (12, 7), rng)
    x = rng.normal(size=(2, 3, 4)).astype(np.float32)
    inits = {"sbc": rng.uniform(0.01, 0.05, 7).astype(np.float32), "zbc": np.zeros(7, np.int8),
             "bias": rng.normal(size=7).astype(np.float32),
             "s": np.array([0.01, 0.02, 0.03], np.float32),
             "z": np.array([100, 30000, 5], np.uint16), "b": b}
    nodes = [ms("DynamicQuantizeMatMul", ["a", "b", "sbc", "zbc", "bias"], ["y"]),
             ms("DynamicQuantizeMatMul", ["zeros", "b", "sbc"], ["y0"]),
             ms("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
             ms("DequantizeLinear", ["q", "s", "z"], ["d"], axis=1),
             ms("MatMulInteger16", ["a16", "b16"], ["i16"])]
    a16 = rng.integers(-32768, 32768, (3, 8)).astype(np.int16)
    b16 = rng.integers(-32768, 32768, (8, 4)).astype(np.int16)
    got, want = run_both(nodes, {"a": a, "zeros": zeros, "x": x, "a16": a16, "b16": b16},
                         {"y": "float32", "y0": "float32", "q": "uint16", "d": "float32",
                          "i16": "int32"}, inits, domains=[MS])
    assert_same(got[2:], want[2:])
    assert_same(got[:2], want[:2], exact=False, rtol=1e-5)


def test_qattention():
    rng = np.random.default_rng(4)
    x = rng.integers(0, 256, (2, 5, 8)).astype(np.uint8)
    w = rng.integers(-128, 128, (8, 24)).astype(np.int8)
    inits = {"bias": rng.normal(size=24).astype(np.float32), "sx": np.float32(0.02),
             "sw": np.float32(0.01), "swc": rng.uniform(0.005, 0.02, 24).astype(np.float32),
             "zx": np.array(120, np.uint8), "zw": np.array(0, np.int8),
             "ends": np.array([5, 3], np.int32)}
    nodes = [ms("QAttention", ["x", "w", "bias", "sx", "sw"], ["plain"], num_heads=2),
             ms("QAttention", ["x", "w", "bias", "sx", "swc", "ends", "zx", "zw"], ["masked"],
                num_heads=2),
             ms("QAttention", ["x", "w", "bias", "sx", "sw", "", "zx"], ["causal"],
                num_heads=4, unidirectional=1)]
    got, want = run_both(nodes, {"x": x, "w": w},
                         {"plain": "float32", "masked": "float32", "causal": "float32"},
                         inits, domains=[MS])
    assert_same(got, want, exact=False, rtol=1e-5)


@pytest.mark.parametrize("scale", ["X_scale", "y_scale"])
def test_a_qlinear_softmax_scale_of_no_elements_is_refused(scale):
    # (the converter read element 0 of each scale: IndexError from inside it)
    from onnx import TensorProto as TP, numpy_helper as nh

    from phasec.frontend.errors import FrontendError
    from phasec.frontend.onnx import from_onnx

    scales = {"X_scale": np.float32(0.1), "y_scale": np.float32(1 / 256)}
    scales[scale] = np.zeros(0, np.float32)
    inits = [nh.from_array(np.asarray(v), k) for k, v in scales.items()]
    inits += [nh.from_array(np.array(0, np.uint8), k) for k in ("zx", "zy")]
    node = ms("QLinearSoftmax", ["x", "X_scale", "zx", "y_scale", "zy"], ["y"], opset=13)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TP.UINT8, [2, 3])],
                              [helper.make_tensor_value_info("y", TP.UINT8, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(MS, 1)])
    with pytest.raises(FrontendError, match=rf"input \d \({scale}\) must be a scalar, got "
                                            r"shape \(0,\)"):
        from_onnx(model)

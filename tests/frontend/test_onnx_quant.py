"""Quantized ONNX operators against ONNX Runtime, integer outputs exactly:
QuantizeLinear / DequantizeLinear per tensor, per axis and blocked, in
int8/uint8/int16/uint16, with halfway cases (round half to even) and
saturation; ConvInteger, QLinearMatMul, QLinearConv (phasec/frontend/onnx/ops_quant.py)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.onnx_run import assert_same, run_both
from onnx import TensorProto, helper

def _data(shape, scale, rng):
    """Values on and between the quantization steps: halfway cases (k + 0.5)
    * scale, values far past the range (saturation), and random ones."""
    k = rng.integers(-300, 300, shape).astype(np.float32)
    x = (k + rng.choice([0.0, 0.5, -0.5, 0.25], shape)) * np.float32(scale)
    return np.where(rng.random(shape) < 0.1, rng.uniform(-1e5, 1e5, shape), x).astype(np.float32)


@pytest.mark.parametrize("out", ["int8", "uint8", "int16", "uint16"])
def test_quantize_per_tensor_and_per_axis(out):
    rng = np.random.default_rng(0)
    x = _data((3, 4, 5), 0.5, rng)
    zp_t = np.array(rng.integers(0, 20), out)
    s_ax = np.array([0.5, 0.25, 2.0, 1.0], np.float32)
    zp_ax = rng.integers(0, 20, 4).astype(out)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["t"]),
             helper.make_node("QuantizeLinear", ["x", "sa", "za"], ["a"], axis=1),
             helper.make_node("DequantizeLinear", ["t", "s", "z"], ["dt"]),
             helper.make_node("DequantizeLinear", ["a", "sa", "za"], ["da"], axis=-2)]
    got, want = run_both(nodes, {"x": x}, {"t": out, "a": out, "dt": "float32", "da": "float32"},
                         {"s": np.float32(0.5), "z": zp_t, "sa": s_ax, "za": zp_ax})
    assert_same(got, want)


@pytest.mark.parametrize("out,axis,block", [("int8", 1, 2), ("uint8", 0, 3), ("int16", -1, 4),
                                             ("uint16", 1, 5)])
def test_quantize_blocked(out, axis, block):
    rng = np.random.default_rng(1)
    x = _data((6, 5, 7), 0.25, rng)
    bshape = list(x.shape)
    bshape[axis] = -(-x.shape[axis] // block)
    s = rng.choice([0.25, 0.5, 1.0, 0.125], bshape).astype(np.float32)
    z = rng.integers(0, 9, bshape).astype(out)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=axis,
                              block_size=block),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], axis=axis,
                              block_size=block)]
    got, want = run_both(nodes, {"x": x}, {"q": out, "d": "float32"}, {"s": s, "z": z})
    assert_same(got, want)


def test_quantize_output_dtype_and_float16_data():
    # float16 data and scale: the quotient is rounded once, from float32 (as
    # ORT); a float16 quotient would round 28 of these 2000 values differently
    rng = np.random.default_rng(2)
    x = rng.uniform(-60, 60, (40, 50)).astype(np.float16)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s"], ["q"],
                              output_dtype=TensorProto.INT8),
             helper.make_node("QuantizeLinear", ["x", "s"], ["u"]),    # default: uint8
             helper.make_node("DequantizeLinear", ["i32", "s32"], ["d"])]
    i32 = rng.integers(-2**20, 2**20, (3, 3)).astype(np.int32)
    got, want = run_both(nodes, {"x": x, "i32": i32}, {"q": "int8", "u": "uint8", "d": "float32"},
                         {"s": np.float16(0.3), "s32": np.float32(0.125)})
    assert_same(got, want)


def test_dynamic_quantize_linear_of_zeros():
    # the range [0, 0] is empty: scale 1 and zero point 0, as ORT (not 0 / 0)
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])]
    got, want = run_both(nodes, {"x": np.zeros((3, 4), np.float32)},
                         {"y": "uint8", "s": "float32", "z": "uint8"})
    assert_same(got, want)


def test_qlinear_matmul_per_tensor_and_per_column():
    rng = np.random.default_rng(3)
    nodes, inputs, inits, outs = [], {}, {"bsc": rng.uniform(0.005, 0.02, 6).astype(np.float32),
                                          "as": np.float32(0.02), "bs": np.float32(0.013),
                                          "ys": np.float32(0.37)}, {}
    for adt, bdt in (("uint8", "int8"), ("int8", "int8"), ("uint8", "uint8")):
        k = f"{adt}_{bdt}"
        ia, ib = np.iinfo(adt), np.iinfo(bdt)
        inputs["a" + k] = rng.integers(ia.min, ia.max + 1, (2, 5, 16)).astype(adt)
        inputs["b" + k] = rng.integers(ib.min, ib.max + 1, (16, 6)).astype(bdt)
        inits.update({"az" + k: np.array(7, adt), "yz" + k: np.array(5, adt),
                      "bz" + k: np.array(3 if bdt == "uint8" else 0, bdt)})
        a, b, az, bz, yz = "a" + k, "b" + k, "az" + k, "bz" + k, "yz" + k
        nodes += [helper.make_node("QLinearMatMul", [a, "as", az, b, "bs", bz, "ys", yz],
                                   ["t" + k]),
                  helper.make_node("QLinearMatMul", [a, "as", az, b, "bsc", bz, "ys", yz],
                                   ["c" + k]),
                  helper.make_node("MatMulInteger", [a, b, az, bz], ["i" + k])]
        outs.update({"t" + k: adt, "c" + k: adt, "i" + k: "int32"})
    got, want = run_both(nodes, inputs, outs, inits)
    assert_same(got, want)


@pytest.mark.parametrize("pads,strides,group", [([1, 1, 1, 1], [1, 1], 1),
                                                ([0, 1, 2, 0], [2, 1], 2)])
def test_conv_integer_and_qlinear_conv(pads, strides, group):
    rng = np.random.default_rng(4)
    x = rng.integers(0, 256, (2, 4, 7, 6)).astype(np.uint8)
    w = rng.integers(-128, 128, (6, 4 // group, 3, 3)).astype(np.int8)
    bias = rng.integers(-3000, 3000, 6).astype(np.int32)
    inits = {"xz": np.array(120, np.uint8), "wz": np.array(0, np.int8),
             "xs": np.float32(0.03), "ws": np.float32(0.011),
             "wsc": rng.uniform(0.004, 0.02, 6).astype(np.float32),
             "ys": np.float32(0.9), "yz": np.array(100, np.uint8), "b": bias}
    attrs = dict(pads=pads, strides=strides, group=group)
    nodes = [helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["i"], **attrs),
             helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                              ["t"], **attrs),
             helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "wsc", "wz", "ys", "yz"],
                              ["c"], **attrs)]
    got, want = run_both(nodes, {"x": x, "w": w}, {"i": "int32", "t": "uint8", "c": "uint8"},
                         inits, opset=10)
    assert_same(got, want)


def test_conv_integer_uint8_weights_with_zero_point():
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (1, 3, 5, 5)).astype(np.uint8)
    w = rng.integers(0, 256, (2, 3, 2, 2)).astype(np.uint8)
    nodes = [helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["i"], pads=[1, 0, 1, 0],
                              auto_pad="NOTSET")]
    got, want = run_both(nodes, {"x": x, "w": w}, {"i": "int32"},
                         {"xz": np.array(128, np.uint8), "wz": np.array(131, np.uint8)},
                         opset=10)
    assert_same(got, want)


def test_qdq_triples_equal_ort_computing_them_as_written():
    # DequantizeLinear -> float operator -> QuantizeLinear, as ONNX defines it
    # (ORT's default optimizations would fuse them into integer kernels)
    rng = np.random.default_rng(6)
    x = rng.integers(0, 256, (1, 4, 16, 16)).astype(np.uint8)
    inits = {"s": np.float32(0.05), "z": np.array(128, np.uint8), "s2": np.float32(0.013),
             "w": (rng.normal(size=(8, 4, 3, 3)) * 0.05).astype(np.float32)}
    ops = {"sig": helper.make_node("Sigmoid", ["xf"], ["sig_f"]),
           "conv": helper.make_node("Conv", ["xf", "w"], ["conv_f"], pads=[1, 1, 1, 1]),
           "pool": helper.make_node("AveragePool", ["xf"], ["pool_f"], kernel_shape=[3, 3]),
           "add": helper.make_node("Add", ["xf", "xf"], ["add_f"])}
    nodes = [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["xf"]), *ops.values()]
    nodes += [helper.make_node("QuantizeLinear", [k + "_f", "s2", "z"], [k]) for k in ops]
    got, want = run_both(nodes, {"x": x}, {k: "uint8" for k in ops}, inits, opset=19,
                         optimize=False)
    assert_same(got, want)

"""ConvInteger and QLinearConv on the integer GEMM (KxK through nn.im2col
padded with the input's zero point, 1x1 as W @ x; then uint8 x int8 ->
int32): kernels, strides,
padding, dilation, odd and prime sizes, zero points at the ends of their
types, per-channel weight scales, a symbolic batch, against ONNX Runtime and
numpy's int64 convolution."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import phasec
from phasec.frontend.onnx import from_onnx

_ONNX_TYPE = {"uint8": TensorProto.UINT8, "int8": TensorProto.INT8}


def _range(dtype: str) -> tuple[int, int]:
    return (0, 256) if dtype == "uint8" else (-128, 128)


def _exact(x: np.ndarray, w: np.ndarray, xz: int, wz: np.ndarray, strides, pads,
           dilations) -> np.ndarray:
    """The int64 convolution of ``x - xz`` (padded with ``xz``: zeros after
    centring) and ``w - wz`` (wz per output channel)."""
    xc = np.pad(x.astype(np.int64) - xz, [(0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])])
    wc = w.astype(np.int64) - wz.reshape(-1, 1, 1, 1)
    O, _, KH, KW = w.shape
    OH = (xc.shape[2] - dilations[0] * (KH - 1) - 1) // strides[0] + 1
    OW = (xc.shape[3] - dilations[1] * (KW - 1) - 1) // strides[1] + 1
    y = np.zeros((x.shape[0], O, OH, OW), np.int64)
    for i in range(KH):
        for j in range(KW):
            y0, x0 = i * dilations[0], j * dilations[1]
            win = xc[:, :, y0:y0 + strides[0] * (OH - 1) + 1:strides[0],
                     x0:x0 + strides[1] * (OW - 1) + 1:strides[1]]
            y += np.einsum("oc,nchw->nohw", wc[:, :, i, j], win)
    return y


@pytest.mark.parametrize("xdt,wdt,xz,wz,kernel,strides,pads,dilations,batch", [
    ("uint8", "int8", 255, 0, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 2),
    ("uint8", "uint8", 0, 131, (2, 3), (2, 1), (0, 2, 1, 0), (1, 2), "n"),  # symbolic batch
    ("int8", "int8", 127, 0, (4, 3), (3, 2), (2, 2, 2, 2), (1, 1), "n"),
    # 1x1: W[O, C] @ x[N, C, positions] on the integer GEMM, no windows
    ("uint8", "int8", 255, 0, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 2),
    ("uint8", "uint8", 7, 131, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 2),
    ("int8", "int8", -128, 0, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 2),
])
def test_conv_integer_and_qlinear_conv(xdt, wdt, xz, wz, kernel, strides, pads,
                                              dilations, batch):
    rng = np.random.default_rng(sum(kernel) + xz + 128)
    C, O, H, W = 7, 5, 11, 9
    x = rng.integers(*_range(xdt), (2, C, H, W)).astype(xdt)
    w = rng.integers(*_range(wdt), (O, C, *kernel)).astype(wdt)
    x[0, :, 0, :] = _range(xdt)[1] - 1   # the extremes of both operands
    w[0] = _range(wdt)[0]
    attrs = dict(kernel_shape=list(kernel), strides=list(strides), pads=list(pads),
                 dilations=list(dilations))
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(xz, xdt), "xz"),
             numpy_helper.from_array(np.array(wz, wdt), "wz"),
             numpy_helper.from_array(np.float32(0.03), "xs"),
             numpy_helper.from_array(rng.uniform(0.004, 0.02, O).astype(np.float32), "ws"),
             numpy_helper.from_array(np.float32(0.9), "ys"),
             numpy_helper.from_array(np.array(3, xdt), "yz"),
             numpy_helper.from_array(rng.integers(-3000, 3000, O).astype(np.int32), "b")]
    nodes = [helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["i"], **attrs),
             helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                              ["q"], **attrs)]
    outs = [helper.make_tensor_value_info("i", TensorProto.INT32, None),
            helper.make_tensor_value_info("q", _ONNX_TYPE[xdt], None)]
    if wdt == "uint8" or xdt == "int8":  # what ORT's kernels take: one of the two nodes
        nodes, outs = (nodes[:1], outs[:1]) if xdt == "uint8" else (nodes[1:], outs[1:])
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", _ONNX_TYPE[xdt], [batch, C, H, W])], outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})
    exe = phasec.build(from_onnx(model))
    windows = any("im2col" in k for k in exe.kernels())
    assert windows == (kernel != (1, 1)) and not any(
        "conv2d" in k for k in exe.kernels()), exe.kernels()
    got = phasec.VirtualMachine(exe)["main"](x)
    got = got if isinstance(got, (list, tuple)) else [got]
    for g, e in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g.numpy() if hasattr(g, "numpy") else g), e)
    if nodes[0].op_type == "ConvInteger":
        np.testing.assert_array_equal(want[0], _exact(x, w, xz, np.full(O, wz), strides,
                                                      pads, dilations))


@pytest.mark.parametrize("xdt,wdt,kernel,strides,pads,shape", [
    ("uint8", "int8", (3, 3), (1, 1), (1, 1, 1, 1), []),
    ("uint8", "uint8", (2, 5), (2, 3), (0, 2, 3, 1), [1]),   # a one-element zero point
    ("int8", "int8", (3, 2), (1, 2), (2, 0, 0, 1), []),
])
def test_conv_integer_with_a_zero_point_known_at_run_time(xdt, wdt, kernel, strides, pads,
                                                          shape):
    """x's zero point a graph input (DynamicQuantizeLinear's, in a model):
    x padded with it at run time, then the windows on the integer GEMM, not
    a float convolution; against numpy's int64 convolution and ORT."""
    rng = np.random.default_rng(sum(kernel) + len(shape))
    C, O, H, W = 5, 7, 13, 10
    x = rng.integers(*_range(xdt), (2, C, H, W)).astype(xdt)
    w = rng.integers(*_range(wdt), (O, C, *kernel)).astype(wdt)
    wz = np.array(9 if wdt == "uint8" else -4, wdt)
    xz = np.array(_range(xdt)[1] - 3, xdt).reshape(shape)
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], kernel_shape=list(kernel),
                            strides=list(strides), pads=list(pads))
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", _ONNX_TYPE[xdt], [2, C, H, W]),
                      helper.make_tensor_value_info("xz", _ONNX_TYPE[xdt], shape)],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(wz, "wz")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    exe = phasec.build(from_onnx(model))
    assert any("im2col" in k for k in exe.kernels()) and not any(
        "conv2d" in k for k in exe.kernels()), exe.kernels()
    got = phasec.VirtualMachine(exe)["main"](x, xz)
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
    want = _exact(x, w, int(xz.reshape(-1)[0]), np.full(O, int(wz)), strides, pads, (1, 1))
    np.testing.assert_array_equal(got, want)
    if xdt == "uint8":  # (ORT's ConvInteger takes uint8 data only)
        sess = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        np.testing.assert_array_equal(sess.run(None, {"x": x, "xz": xz})[0], want)

"""FuseQDQMatmul on KxK convolutions: QDQ int8 Conv (any kernel, strides,
padding, dilation; one group) through nn.im2col (padded with the input's
zero point) and the integer GEMM, or for a stride-1 "same" one
nn.im2col_matmul (its GEMM packs the windows from the image), requantized
in its epilogue, against ONNX
Runtime's QLinearConv bit for bit: odd and prime sizes, zero points at the
ends of both types, outputs that saturate, a symbolic batch; and the same without VNNI (the
vpmaddwd path) in a process of its own."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import phasec
from phasec.frontend.onnx import from_onnx

from helpers.cpu_features import run_without_vnni


def qdq_conv_model(C: int, O: int, H: int, W: int, kernel: tuple[int, int],
                   strides: tuple[int, int], pads: tuple[int, ...], dilations: tuple[int, int],
                   adt: str, zx: int, zy: int, sy: float, per_channel: bool, bias: bool,
                   seed: int, batch: int | str = 2):
    """x (float) -> Q -> DQ -> Conv(DQ(int8 weight), DQ(int32 bias)) -> Q -> DQ,
    as ORT's quantizer writes it (symmetric weights, some |wq| = 127)."""
    rng = np.random.default_rng(seed)
    sx, sy_ = np.float32(0.05), np.float32(sy)
    wq = rng.integers(-127, 128, (O, C, *kernel)).astype(np.int8)
    wq[:, 0, 0, 0] = 127
    sw = rng.uniform(0.005, 0.02, O).astype(np.float32) if per_channel else np.float32(0.01)
    inits = [numpy_helper.from_array(sx, "sx"), numpy_helper.from_array(np.array(zx, adt), "zx"),
             numpy_helper.from_array(wq, "wq"), numpy_helper.from_array(sw, "sw"),
             numpy_helper.from_array(np.zeros(O, np.int8) if per_channel else np.int8(0), "zw"),
             numpy_helper.from_array(sy_, "sy"), numpy_helper.from_array(np.array(zy, adt), "zy")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"], axis=0)]
    conv_in = ["xd", "wd"]
    if bias:
        inits += [numpy_helper.from_array(rng.integers(-9000, 9000, O).astype(np.int32), "bq"),
                  numpy_helper.from_array((sx * sw).astype(np.float32), "bs")]
        nodes.append(helper.make_node("DequantizeLinear", ["bq", "bs"], ["bd"], axis=0))
        conv_in.append("bd")
    nodes += [helper.make_node("Conv", conv_in, ["c"], kernel_shape=list(kernel),
                               strides=list(strides), pads=list(pads),
                               dilations=list(dilations)),
              helper.make_node("QuantizeLinear", ["c", "sy", "zy"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    graph = helper.make_graph(nodes, "qdq_conv", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [batch, C, H, W])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


#: (C, O, H, W, kernel, strides, pads (top, left, bottom, right), dilations,
#:  activation dtype, x zero point, y zero point, y scale, per channel, bias)
CASES = [
    (5, 7, 11, 13, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), "uint8", 0, 255, 0.3, True, True),
    # two row tiles (11 channels) over 42 positions: the GEMM packs its run-time B
    (3, 11, 13, 13, (3, 3), (2, 2), (1, 0, 2, 1), (1, 1), "int8", -128, 127, 0.2, False, True),
    (6, 3, 8, 7, (5, 2), (1, 1), (2, 1, 0, 3), (2, 1), "uint8", 255, 0, 0.1, True, False),
    (4, 9, 6, 6, (2, 2), (1, 1), (0, 0, 0, 0), (1, 1), "int8", 127, -128, 0.4, False, False),
    (7, 4, 7, 9, (3, 1), (1, 3), (0, 2, 1, 0), (1, 1), "uint8", 128, 7, 0.25, True, True),
    # stride-1 "same" over several panels of whole rows, two sharing one
    # packing (nn.im2col_matmul, packed from the image)
    (9, 20, 60, 28, (5, 5), (1, 1), (2, 2, 2, 2), (1, 1), "int8", -3, 127, 0.5, True, True),
    (16, 19, 30, 31, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), "uint8", 255, 128, 0.3, False, True),
    # words loaded straight from the image (interior panels) and from the
    # edge panels' staged rows: 7 channels (a group of 4 and a rest of 3,
    # K = 63), 13 output channels, 59 rows of 28
    (7, 13, 59, 28, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), "int8", -5, 3, 0.35, True, True),
]


def check_qdq_conv(case: tuple, batch: int | str = 2) -> None:
    """The fused integer convolution of ``case`` equals ORT's QLinearConv
    (``batch`` a symbolic name: the model's batch is, the input's is 3)."""
    C, _, H, W = case[:4]
    model = qdq_conv_model(*case, seed=C * 31 + H, batch=batch)
    # wide enough that the input quantization saturates at both ends too
    x = (np.random.default_rng(H).standard_normal((batch if isinstance(batch, int) else 3, C,
                                                  H, W)) * 4).astype(np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})[0]
    exe = phasec.build(from_onnx(model))
    kernels = exe.kernels()
    # a stride-1 "same" convolution's GEMM packs the windows from the image
    same = case[5] == (1, 1) and sum(case[6][1::2]) == case[7][1] * (case[4][1] - 1)
    prefix = "fused_im2col_matmul_" if same else "fused_matmul_"
    assert any(k.startswith(prefix) and "multiply_quantize" in k for k in kernels), kernels
    assert not any("conv2d" in k for k in kernels), kernels
    result = phasec.VirtualMachine(exe)["main"](x)
    got = np.asarray(result.numpy() if hasattr(result, "numpy") else result)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case,batch", [(c, "n" if i == 2 else 2) for i, c in enumerate(CASES)],
                         ids=[f"{c[4][0]}x{c[4][1]}-s{c[5][0]}{c[5][1]}-{c[8]}" for c in CASES])
def test_qdq_conv_equals_onnxruntime(case, batch):
    check_qdq_conv(case, batch)  # the third with a symbolic batch


def test_qdq_conv_without_vnni():
    """A strided int8 case whose windows the GEMM packs, and a "same" one
    packed from the image, compiled as for a CPU without VNNI (the vpmaddwd
    sequence): a fresh process, since the target is chosen once per process."""
    run_without_vnni(__file__, "t.check_qdq_conv(t.CASES[1]); t.check_qdq_conv(t.CASES[5])")

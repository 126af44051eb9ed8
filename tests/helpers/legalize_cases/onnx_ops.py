"""Legalization cases of the operators with ONNX's own semantics that the
conformance work added: nn.onnx_max_pool_indices (tests/frontend/
test_onnx_maxpool_indices.py checks them against ONNX Runtime), det
(tests/op/test_ops_decomposition.py, against numpy) and nn.col2im
(tests/frontend/test_onnx_image.py, ONNX Runtime); nn.im2col, the integer
convolutions' columns (tests/frontend/test_onnx_int8_conv.py, ONNX Runtime),
and nn.im2col_matmul, their GEMM (tests/te/test_gemm_windows.py, numpy)."""

from __future__ import annotations

import numpy as np

from phasec.ir import TensorStructInfo, Var
from phasec.op import call_op

_X4 = Var("ox4", TensorStructInfo((2, 2, 5, 4), "float32"))
_T4 = Var("ot4", TensorStructInfo((1, 2, 4, 4), "float32"))
_X3 = Var("ox3", TensorStructInfo((2, 3, 7), "float32"))
_M = Var("om", TensorStructInfo((2, 4, 4), "float32"))
_M1 = Var("om1", TensorStructInfo((1, 1), "float64"))
_IMG8 = Var("oimg8", TensorStructInfo((2, 3, 5, 7), "uint8"))
_COLS = Var("ocols", TensorStructInfo((2, 2 * 6, 4 * 6), "float32"))
_W8 = Var("ow8", TensorStructInfo((4, 3 * 2 * 3), "int8"))
_IMGS8 = Var("oimgs8", TensorStructInfo((1, 2, 6, 5), "int8"))
_WU8 = Var("owu8", TensorStructInfo((5, 2 * 3 * 3), "uint8"))
#: ties, so that the first maximum of a window is the one found
ONNX_OPS_VALUES = {_T4: np.array([0, 1, 1, 0, 2, 2, 0, 1] * 4, "float32").reshape(1, 2, 4, 4),
                   # a zero first pivot (a row swap), and a singular matrix
                   _M: np.array([[[0, 2, 1, 3], [1, 1, 0, 2], [4, 0, 1, 1], [2, 1, 3, 0]],
                                 [[1, 2, 3, 4], [2, 4, 6, 8], [0, 1, 0, 1], [3, 0, 2, 1]]],
                                "float32")}

ONNX_OPS_LEGALIZE_CASES = [
    ("onnx_max_pool_indices-col-major", lambda: call_op(
        "nn.onnx_max_pool_indices", _X4, pool_size=(3, 2), strides=(2, 1),
        padding=(1, 0, 1, 1), dilation=(1, 1), storage_order=1)),
    ("onnx_max_pool_indices-ties-ceil", lambda: call_op(
        "nn.onnx_max_pool_indices", _T4, pool_size=(2, 2), strides=(2, 2),
        padding=(0, 0, 1, 1), dilation=(1, 1), ceil_mode=True)),
    ("onnx_max_pool_indices-1d-dilated", lambda: call_op(
        "nn.onnx_max_pool_indices", _X3, pool_size=(3,), strides=(2,), padding=(1, 2),
        dilation=(2,))),
    ("det", lambda: call_op("det", _M)),
    ("det-1x1", lambda: call_op("det", _M1)),
    ("col2im-strided-dilated-padded", lambda: call_op(
        "nn.col2im", _COLS, image_shape=(7, 6), block_shape=(2, 3), strides=(2, 1),
        dilations=(2, 1), pads=(1, 2, 2, 0))),
    ("im2col-uint8-zero-point-padded", lambda: call_op(
        "nn.im2col", _IMG8, kernel_size=(3, 3), padding=(1, 1, 1, 1), pad_value=131.0)),
    ("im2col-padded-dilated-wider-than-the-image", lambda: call_op(
        "nn.im2col", _IMG8, kernel_size=(2, 3), strides=(3, 1), padding=(2, 4, 0, 5),
        dilation=(2, 4), pad_value=255.0)),
    ("im2col_matmul-uint8-padded-dilated", lambda: call_op(
        "nn.im2col_matmul", _IMG8, _W8, kernel_size=(2, 3), strides=(1, 2), padding=(1, 2, 0, 1),
        dilation=(2, 1), pad_value=200.0)),
    ("im2col_matmul-int8-data-same-padding", lambda: call_op(
        "nn.im2col_matmul", _IMGS8, _WU8, kernel_size=(3, 3), padding=(1, 1, 1, 1),
        pad_value=-3.0)),
    ("im2col-strided-dilated", lambda: call_op(
        "nn.im2col", _X4, kernel_size=(2, 3), strides=(2, 1), padding=(0, 2, 1, 0),
        dilation=(1, 2))),
]

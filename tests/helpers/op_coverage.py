"""Which operators each operator family's test module checks against an
independent reference: tests/op/test_ops_reference.py requires their union
to be every compute operator. A test module that starts checking another
operator adds it to its set here."""

from __future__ import annotations

#: tests/op/test_ops_nn.py
NN_TESTED = {
    "nn.leakyrelu", "nn.prelu", "nn.selu", "nn.softplus", "nn.batch_norm", "nn.group_norm",
    "nn.instance_norm", "nn.dropout", "nn.max_pool1d", "nn.avg_pool1d", "nn.max_pool3d",
    "nn.avg_pool3d", "nn.adaptive_avg_pool1d", "nn.adaptive_avg_pool2d",
    "nn.adaptive_avg_pool3d", "nn.conv1d", "nn.conv2d", "nn.conv3d", "nn.conv1d_transpose",
    "nn.conv2d_transpose", "nn.conv3d_transpose",
}

#: tests/op/test_ops_nn_attention.py
ATTENTION_TESTED = {"nn.attention", "nn.attention_bias", "nn.cross_entropy_with_logits",
                    "nn.nll_loss"}

#: tests/op/test_ops_image_qdq.py
IMAGE_QDQ_TESTED = {"image.resize2d", "quantize", "dequantize"}

#: tests/op/test_ops_ext.py
EXT_TESTED = {"arange", "full_like", "tril", "triu", "one_hot", "eye", "eye_like", "tile",
              "repeat", "flip", "nn.pad", "argmax", "argmin", "variance", "std", "cumsum",
              "cumprod"}

#: tests/op/test_ops_indexing.py
INDEXING_TESTED = {"gather_elements", "gather_nd", "scatter_elements", "scatter_nd", "index_put"}

#: tests/op/test_ops_shape.py
SHAPE_TESTED = {"shape_of", "shape_to_tensor", "tensor_to_shape", "print", "assert_op"}

#: the float-only unary math functions (their legalization cases too)
FLOAT_UNARY = ["acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh", "sin", "sinh",
               "tan"]
#: tests/op/test_ops_elementwise_math.py
EW_TESTED = set(FLOAT_UNARY) | {
    "sign", "square", "trunc", "isfinite", "isinf", "isnan", "bitwise_not", "atan2",
    "log_add_exp", "floor_mod", "mod", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift",
    "right_shift", "logical_xor", "ewise_fma"}

#: tests/op/test_ops_sorting.py
SORTING_TESTED = {"sort", "argsort", "topk", "median", "unique", "nonzero"}

#: tests/op/test_ops_combine.py
COMBINE_TESTED = {"stack", "meshgrid", "outer", "einsum", "collapse_sum_like", "collapse_sum_to",
                  "nn.batch_flatten", "nn.pixel_shuffle", "slice_scatter",
                  "dynamic_strided_slice"}

#: tests/op/test_ops_more.py
MORE_TESTED = {"hamming_window", "size", "bucketize", "index_tensor", "reverse_sequence"}

#: tests/op/test_ops_layout_transform.py
LAYOUT_TESTED = {"layout_transform"}

#: tests/op/test_ops_image_ext.py
IMAGE_EXT_TESTED = {"image.resize3d", "image.affine_grid", "image.grid_sample",
                    # this one in test_ops_onnx_resize.py (against ONNX's reference)
                    "image.onnx_resize",
                    # these two in test_ops_builtins_ext.py
                    "builtin.stop_lift_params", "multinomial_from_uniform"}

#: tests/op/test_ops_device_grad.py
#: (to_vdevice is a memory builtin, as in TVM: not a compute operator)
DEVICE_GRAD_TESTED = {"hint_on_device", "wrap_param", "grad.no_grad", "grad.start_checkpoint",
                      "grad.end_checkpoint"}

#: tests/op/test_ops_nn_rnn.py
RNN_TESTED = {"nn.lstm", "nn.gru", "nn.rnn"}

#: tests/op/test_ops_signal.py (numpy.fft, the DFT matrix), tests/frontend/
#: test_onnx_vision.py (ONNX Runtime), tests/frontend/test_onnx_narrow.py (ml_dtypes)
SIGNAL_VISION_TESTED = {"signal.dft", "signal.stft", "vision.onnx_roi_align", "vision.onnx_nms",
                        "round_to_format"}

#: tests/frontend/test_onnx_maxpool_indices.py, test_onnx_image.py and
#: test_onnx_int8_conv.py (ONNX Runtime), tests/op/test_ops_decomposition.py (numpy),
#: tests/te/test_gemm_windows.py (nn.im2col_matmul, numpy)
ONNX_OPS_TESTED = {"nn.onnx_max_pool_indices", "det", "nn.col2im", "nn.im2col",
                   "nn.im2col_matmul"}

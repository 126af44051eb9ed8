"""A 1x1 NCHW conv2d over an image of fewer positions than a vector
(EfficientNet's and MobileNet's last stages at 2x2 or 4x4, squeeze-excite's
1x1 convolutions), as a matmul whose columns are the output channels.

The GEMM schedule vectorizes a convolution along its output positions: over
a 2x2 image, a quarter of each vector; over a squeeze-excite's 1x1, one lane
of it, while the weight (up to 1280 x 320) is streamed for a handful of
products. Here the positions are the rows and the output channels the
columns, ``t[b, p, o] = sum_c data[b, c, p] * weight[o, c]``: a matmul by
the weight transposed, whose panels the GEMM packs (once, at build time, for
a constant weight: PackConstantWeights; over one position, the GEMM's
matrix-vector form, whose packed panel is the whole row when the output
channels are fewer than its tile and whole vectors) and whose vectors are
whole. The
output is ``t`` read back transposed, ``out[b, o, y, x] = t[b, y*W + x, o]``,
where the epilogue (bias, activation, a residual) runs; ``t`` has a nest of
its own even when the epilogue broadcasts it (squeeze-excite's
``x * sigmoid(conv(s))``), where it would otherwise be attached one output
channel at a time, a scalar dot product each. Each element is the
same sum over the input channels as the direct convolution's.
"""

from __future__ import annotations

from phasec import arith
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.te.schedules.workloads import ConvWorkload
from phasec.te.tensor import OWN_NEST, Tensor

__all__ = ["schedule"]


def schedule(w: ConvWorkload) -> Tensor | None:
    """The 1x1 convolution ``w`` (NCHW float conv2d) as a matmul over its
    output channels; None unless it is 1x1, stride 1, unpadded, ungrouped,
    of static sizes, over fewer positions than a vector and at least a
    vector of output channels."""
    data, weight = w.data, w.weight
    if w.data_layout.name != "NCHW" or w.kernel_layout.name != "OIHW" \
            or w.out_layout.name != "NCHW":
        return None
    dims = [arith.const_int(d) for d in (*data.shape, *weight.shape)]
    if any(d is None for d in dims):
        return None
    n, c, H, W, O, C, KH, KW = dims
    if (KH, KW) != (1, 1) or w.groups != 1 or any(w.padding) \
            or tuple(w.strides) != (1, 1) or not (H * W < w.lanes <= O):
        return None
    k = te.reduce_axis(i64(C), "rc")
    rows = te.compute((i64(n), i64(H * W), i64(O)), lambda b, p, o: te.sum(
        data[b, k.var, p // W, p % W] * weight[o, k.var, 0, 0], axis=[k]),
        name="T_conv2d_positions", tag="conv2d", attrs={OWN_NEST: True})
    return te.compute(w.out_shape, lambda b, o, y, x: rows[b, y * W + x, o], name="T_conv2d")

"""A depthwise NCHW conv2d strided along its rows' axis (MobileNet's and
EfficientNet's downsampling 3x3 / 5x5 stride 2), computed stride-1 along
the row and decimated once.

Vectorized along an output row, each tap of the direct convolution reads
the input row with a stride of ``sw``: LLVM makes that load a gather, or an
interleaved load with a gap, which forces a scalar remainder half as long
as the row (16 outputs: 8 in a vector, 8 one by one, per tap). Here the
row sum runs over every input column instead,
``wide[b, c, y, x] = sum data_padded[b, c, y*sh + r0*dh, x + r1*dw] * w[c, r0, r1]``
for ``x`` in ``[0, OW*sw)``: contiguous loads and whole vectors, ``sw``
times the products (a depthwise convolution is bound by its loads, not its
products); the output reads every ``sw``-th column of it once,
``out[b, c, y, x] = wide[b, c, y, x*sw]``, into a buffer of its own that
the epilogue (bias, activation) reads contiguously. Each kept column is the same sum, in the same order, as
the direct convolution's. The padded copy reaches as far as the extra
columns' taps (zeros).
"""

from __future__ import annotations

from phasec import arith
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.te.schedules.pool_window import padded_input
from phasec.te.schedules.workloads import ConvWorkload
from phasec.te.tensor import OWN_NEST, Tensor

__all__ = ["schedule"]


def schedule(w: ConvWorkload) -> Tensor | None:
    """The depthwise convolution ``w`` (NCHW float conv2d) stride-1 along
    its rows, then decimated; None unless it is depthwise (one input and
    one output channel per group), strided along the rows' axis, with
    static sizes."""
    data, weight = w.data, w.weight
    if w.data_layout.name != "NCHW" or w.kernel_layout.name != "OIHW" \
            or w.out_layout.name != "NCHW":
        return None
    dims = [arith.const_int(d) for d in (*data.shape, *weight.shape, *w.out_shape)]
    if any(d is None for d in dims):
        return None
    n, c, H, W, O, CG, KH, KW, _, _, OH, OW = dims
    sh, sw = w.strides
    dh, dw = w.dilation
    if not (w.groups == c == O and CG == 1 and sw > 1 and OW >= 2):
        return None
    top, left = w.padding[0], w.padding[1]
    columns = OW * sw
    # the padded copy reaches the last column the extra columns' taps read
    # (input coordinates, exclusive), and the last row the kept rows' taps read
    reach = [(OH - 1) * sh + (KH - 1) * dh - top + 1, columns + (KW - 1) * dw - left]
    zero = te.const(0, data.dtype)
    padded = padded_input(data, w.padding, 2, zero, reach)
    if padded is None:  # no padding: pad anyway on the right for the extra columns
        padded = padded_input(data, [0, 0, 0, 1], 2, zero, reach)
    ry, rx = te.reduce_axis(KH, "r0"), te.reduce_axis(KW, "r1")
    wide = te.compute(
        (i64(n), i64(c), i64(OH), i64(columns)),
        lambda b, ch, y, x: te.sum(
            padded[b, ch, y * sh + ry.var * dh, x + rx.var * dw] * weight[ch, 0, ry.var, rx.var],
            axis=[ry, rx]),
        name="T_conv2d_wide", tag="conv2d")
    # kept columns in a buffer of their own: read every sw-th element, the
    # epilogue's loads would be a gather or half scalar (a SiLU's exp too)
    return te.compute(w.out_shape, lambda b, ch, y, x: wide[b, ch, y, x * sw], name="T_conv2d",
                      inline=False, attrs={OWN_NEST: True})

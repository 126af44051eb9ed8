"""A strided NCHW conv2d whose output rows are narrower than a vector
(ResNet's 28x28 -> 14x14 and 14x14 -> 7x7 downsampling), or on targets that
ask for it (``TargetTuning.im2col_row_vectors``) narrower than a few vectors
and not whole ones (28 wide), as one GEMM over all its output positions
whose column operand is the input's windows (im2col).

The GEMM's columns are the output positions ``y*OW + x``
(``FLAT_COLUMNS_ATTR``: whole vectors, not rows of 28 or 7), its epilogue
(bias, activation, a residual) in its register tiles. Its column operand is
the gather ``data[b, c, y*sy + ry - top, x*sx + rx - left]`` (zero in the
padding) itself, not a tensor of columns: B read by gathers is packed
panel by panel (``gemm_plan``: every panel, the last narrower one too), so
each panel's columns are gathered from the image straight into the packed
micro-panels, which stay in L2. (A tensor of columns was written whole,
3.6 MB for ResNet-50's 128 channels 56 -> 28, then read again to pack
them.) The plain schedule would make a GEMM per output row, OW columns
wide. Measurements: bench/README.md, "ResNet-50's and Inception v2's
convolutions beside ORT's, layer by layer" and "Strided convolutions packed
straight from the image".
"""

from __future__ import annotations

from phasec import arith
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.te.schedules.gemm_plan import FLAT_COLUMNS_ATTR
from phasec.target import tuning
from phasec.te.schedules.workloads import ConvWorkload
from phasec.te.tensor import Tensor

__all__ = ["ANCHOR_NAME", "schedule"]

#: the convolution's name (its GEMM's packed panels: ``ANCHOR_NAME + "_bpack"``)
ANCHOR_NAME = "T_conv2d_im2col"


def schedule(w: ConvWorkload) -> Tensor | None:
    """The convolution of ``w`` (an NCHW float conv2d) over its gathered
    columns, or None when it is not strided, ungrouped, with static sizes
    and output rows narrower than a vector, or than the target's
    ``im2col_row_vectors`` vectors and not whole ones (but at least a
    vector of output positions)."""
    data, weight, dt = w.data, w.weight, w.dtype
    _, _, *sp = w.data_layout.to_canonical(data.shape)
    _, _, *ks = w.kernel_layout.to_canonical(weight.shape)
    if w.groups != 1 or tuple(w.strides) == (1, 1):
        return None
    shape = [arith.const_int(d) for d in (*sp, *ks, w.out_shape[2], w.out_shape[3])]
    if any(v is None for v in shape):
        return None
    H, W, KH, KW, OH, OW = shape
    # rows of a few vectors that are not whole ones: their tiles would leave
    # lanes idle (28 = 16 + 8 + 4), where the flat positions fill them
    wide = OW % w.lanes != 0 and OW < tuning.host_tuning().im2col_row_vectors * w.lanes
    if not (OW < w.lanes or wide) or OH * OW < w.lanes:
        return None
    top, left = w.padding[0], w.padding[1]
    (sy, sx), (dy, dx) = w.strides, w.dilation
    c = data.shape[1]
    zero = te.const(0, dt)

    def gathered(b, ch, r, s, oy, ox):
        y = oy * sy + (r * dy - top)
        x = ox * sx + (s * dx - left)
        value = data[b, ch, te.clamp_index(y, i64(H)), te.clamp_index(x, i64(W))]
        if not any(w.padding):
            return value
        return te.select(te.all_of(te.in_range(y, 0, H), te.in_range(x, 0, W)), value, zero)
    rc, ry, rx = te.reduce_axis(c, "rc"), te.reduce_axis(KH, "r0"), te.reduce_axis(KW, "r1")
    # (the GEMM's columns span both output axes: FLAT_COLUMNS_ATTR; its
    # panels of B packed from the gather: ``T_conv2d_im2col_bpack``)
    return te.compute(w.out_shape, lambda b, oc, y, x: te.sum(
        gathered(b, rc.var, ry.var, rx.var, y, x) * weight[oc, rc.var, ry.var, rx.var],
        axis=[rc, ry, rx]), name=ANCHOR_NAME, tag="conv2d", attrs={FLAT_COLUMNS_ATTR: True})

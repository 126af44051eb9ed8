"""A strided NCHW conv2d whose output rows are narrower than a vector
(ResNet's 14x14 -> 7x7 downsampling), or on targets that ask for it
(``TargetTuning.im2col_row_vectors``) narrower than a few vectors and not
whole ones (28 wide), over its input gathered into columns (im2col).

The input is gathered once, ``cols[b, c, ry, rx, y, x]`` for output
position ``(y, x)`` (loops over the output's rows and columns: no division
by the row width), then one GEMM runs over all the output positions
(``FLAT_COLUMNS_ATTR``: its columns ``y*OW + x``, whole vectors), the
epilogue (bias, activation, a residual) in its register tiles. Rows under
a vector are gathered as ``cols[b, c, ry, rx, y*OW + x]`` instead, and the
GEMM's flat result is read back by the epilogue's own nest (as in
:mod:`phasec.te.schedules.conv_flat_rows`; see :func:`schedule`). The
plain schedule would make a GEMM per output row, OW columns wide, and pack
each of its panels through gathers. Measurements: bench/README.md,
"Schedule notes moved from docstrings" and "ResNet-50's and Inception v2's
convolutions beside ORT's, layer by layer".
"""

from __future__ import annotations

from phasec import arith
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.te.schedules.gemm_plan import FLAT_COLUMNS_ATTR
from phasec.target import tuning
from phasec.te.schedules.workloads import ConvWorkload
from phasec.te.tensor import Tensor

__all__ = ["schedule"]


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
    n, c = data.shape[0], data.shape[1]
    zero = te.const(0, dt)

    def gathered(b, ch, r, s, oy, ox):
        y = oy * sy + (r * dy - top)
        x = ox * sx + (s * dx - left)
        value = data[b, ch, te.clamp_index(y, i64(H)), te.clamp_index(x, i64(W))]
        if not any(w.padding):
            return value
        return te.select(te.all_of(te.in_range(y, 0, H), te.in_range(x, 0, W)), value, zero)
    rc, ry, rx = te.reduce_axis(c, "rc"), te.reduce_axis(KH, "r0"), te.reduce_axis(KW, "r1")
    if OW < w.lanes:
        # rows under a vector (14 -> 7): the columns over the flat positions
        # ``p = y*OW + x``, the epilogue a nest of its own. (Gathered per row,
        # each row a loop under one vector with strided loads, LLVM's code
        # generation took 4 s for ResNet-50's 256 channels 28 -> 14.)
        cols = te.compute((n, c, i64(KH), i64(KW), i64(OH * OW)), lambda b, ch, r, s, p:
                          gathered(b, ch, r, s, p // OW, p % OW), name="im2col", inline=False)
        flat = te.compute((n, w.out_shape[1], i64(OH * OW)), lambda b, oc, p: te.sum(
            cols[b, rc.var, ry.var, rx.var, p] * weight[oc, rc.var, ry.var, rx.var],
            axis=[rc, ry, rx]), name="T_conv2d_cols", tag="conv2d")
        return te.compute(w.out_shape, lambda b, oc, y, x: flat[b, oc, y * OW + x],
                          name="T_conv2d")
    cols = te.compute((n, c, i64(KH), i64(KW), i64(OH), i64(OW)), gathered, name="im2col",
                      inline=False)
    # (the GEMM's columns span both output axes: FLAT_COLUMNS_ATTR)
    return te.compute(w.out_shape, lambda b, oc, y, x: te.sum(
        cols[b, rc.var, ry.var, rx.var, y, x] * weight[oc, rc.var, ry.var, rx.var],
        axis=[rc, ry, rx]), name="T_conv2d", tag="conv2d", attrs={FLAT_COLUMNS_ATTR: True})

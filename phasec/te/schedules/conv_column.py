"""A 2-D convolution that is a 1-D one along its rows: a ``K x 1`` window
over an ``N x 1`` image (how tf2onnx exports a 1-D convolution).

Every schedule of the table tiles the output's last axis, here of extent 1:
the GEMM's register tiles are one column wide, a fraction of each vector.
The same image read with H and W swapped (:class:`SwappedSpatial`: indices
permuted, nothing moved) is ``1 x N`` with a ``1 x K`` window, which the
table schedules like any row (the GEMM over ``N`` columns); its ``1 x N``
result is then written back as the ``N x 1`` output (one pass over the
output, into which the epilogue fuses).
"""

from __future__ import annotations

from collections.abc import Callable

from phasec import arith
from phasec.te import operation as te
from phasec.te.schedules.workloads import CanonicalLayout, ConvWorkload, SwappedSpatial
from phasec.te.tensor import OWN_NEST, ComputeOp, Tensor

__all__ = ["takes", "schedule_with"]


def takes(w: ConvWorkload) -> bool:
    """A 2-D convolution whose input, window and output are one column
    wide (no padding along W) and more than one row high."""
    if w.rank != 2:
        return False
    _, _, h, width = w.data_layout.to_canonical(w.data.shape)
    _, _, _, kw = w.kernel_layout.to_canonical(w.weight.shape)
    _, _, oh, _ = w.out_layout.to_canonical(w.out_shape)
    return (arith.const_int(width) == 1 and arith.const_int(kw) == 1
            and w.padding[1] == w.padding[3] == 0 and arith.const_int(oh) != 1)


def schedule_with(schedule_conv: Callable[[ConvWorkload], Tensor]
                  ) -> Callable[[ConvWorkload], Tensor | None]:
    """The column convolution, its row form scheduled by ``schedule_conv``."""
    def take(w: ConvWorkload) -> Tensor | None:
        if not takes(w):
            return None
        n, o, oh, ow = w.out_layout.to_canonical(w.out_shape)
        (sh, sw), (dh, dw) = w.strides, w.dilation
        top, _, bottom, _ = w.padding
        rows = schedule_conv(ConvWorkload(
            w.data, w.weight, (n, o, ow, oh), w.dtype, 2, (sw, sh), (0, top, 0, bottom),
            (dw, dh), w.groups, SwappedSpatial(w.data_layout), SwappedSpatial(w.kernel_layout),
            CanonicalLayout("NCHW")))
        if isinstance(rows.op, ComputeOp):
            rows.op.attrs[OWN_NEST] = True  # the GEMM's nest, not one element at a time

        def back(*idx):
            b, ch, y, x = w.out_layout.index_to_canonical(idx)
            return rows[b, ch, x, y]
        return te.compute(w.out_shape, back, name="T_conv2d")
    return take

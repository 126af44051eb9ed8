"""A 1-D convolution over short rows, scheduled as a 2-D one of one row.

PyTorch exports ``Conv1d`` as a rank-1 ONNX Conv (``nn.conv1d``), which only
the direct schedule takes: its output positions along the vector lanes.
Rows of a few positions (a voice-activity detector's encoder: 4, 2, 1
positions of 64-129 channels, batch 4) fill a fraction of each vector, at
2-8x ONNX Runtime's time. As a 2-D convolution of one row (``N x C x 1 x L``
with a ``1 x K`` window) the rest of the table takes them: a matmul whose
columns are the output channels (``conv_small_image``,
``conv_pointwise_small``). The 2-D operands are views of the 1-D ones
(indices mapped, nothing moved: inlined where they are read), and the 2-D
result is read back as the 1-D output, where the epilogue fuses.

Rows of a vector or more stay with the direct schedule, which runs them at
or under ORT's time (an encoder's 80 -> 384 over 3000 frames: 0.95x; 64 ->
64 channels over 16 positions, batch 8: 33 us here against 39 us in this
form, ORT 48 us). Measured on the AVX-512 host, one thread, against the
direct schedule: 4 x 128 x 6 -> 128, 3 taps: 74 -> 28 us; over 12
positions 72 -> 51 us; 8 x 64 x 4 -> 64: 20 -> 12 us; over 8 positions the
same (21 us).
"""

from __future__ import annotations

from collections.abc import Callable

from phasec import arith
from phasec.te import operation as te
from phasec.te.schedules.workloads import CanonicalLayout, ConvWorkload
from phasec.te.tensor import OWN_NEST, ComputeOp, Tensor

__all__ = ["MIN_DIRECT_VECTORS", "takes", "schedule_with"]

#: output rows of at least this many vectors stay 1-D (the direct schedule)
MIN_DIRECT_VECTORS = 1


def takes(w: ConvWorkload) -> bool:
    """A 1-D float convolution with a static output row shorter than
    :data:`MIN_DIRECT_VECTORS` vectors of the output's dtype."""
    if w.rank != 1 or w.dtype not in ("float32", "float64") or w.data.dtype != w.dtype \
            or w.weight.dtype != w.dtype:
        return False
    length = arith.const_int(w.out_layout.to_canonical(w.out_shape)[2])
    return length is not None and length < MIN_DIRECT_VECTORS * w.lanes


def _unit_row(t: Tensor, layout, name: str) -> Tensor:
    """``t`` (1-D spatial, in ``layout``) seen as canonical 2-D with one row."""
    a, b, length = layout.to_canonical(t.shape)
    return te.view(t, (a, b, 1, length),
                   lambda i, j, _h, x: t[layout.index_from_canonical((i, j, x))], name)


def schedule_with(schedule_conv: Callable[[ConvWorkload], Tensor]
                  ) -> Callable[[ConvWorkload], Tensor | None]:
    """The 1-D convolution, its one-row 2-D form scheduled by ``schedule_conv``."""
    def take(w: ConvWorkload) -> Tensor | None:
        if not takes(w):
            return None
        n, o, length = w.out_layout.to_canonical(w.out_shape)
        (left, right), (s,), (d,) = w.padding, w.strides, w.dilation
        rows = schedule_conv(ConvWorkload(
            _unit_row(w.data, w.data_layout, "data_row"),
            _unit_row(w.weight, w.kernel_layout, "weight_row"),
            (n, o, 1, length), w.dtype, 2, (1, s), (0, left, 0, right), (1, d), w.groups,
            CanonicalLayout("NCHW"), CanonicalLayout("OIHW"), CanonicalLayout("NCHW")))
        if isinstance(rows.op, ComputeOp):
            rows.op.attrs[OWN_NEST] = True  # the schedule's nest, not one element at a time

        def back(*idx):
            b, ch, x = w.out_layout.index_to_canonical(idx)
            return rows[b, ch, 0, x]
        return te.compute(w.out_shape, back, name="T_conv1d")
    return take

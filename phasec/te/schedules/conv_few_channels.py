"""A strided NCHW conv2d of few input channels (an image's 1-4: a CNN's
stem) over its input split into stride phases laid end to end.

The GEMM schedule takes a convolution one output row at a time (rows: the
output channels; columns: the row's positions). Strided, every column of B
is a gather (``data[.., s*x + rx]``), packed per output row: for a stem's
short reduction (``C*KH*KW``: 27 for 3x3 over RGB) the gathered packing
costs about as much as the products. Here the padded input is split once
into its ``sh x sw`` stride phases laid flat, ``V`` columns a row
(:func:`phasec.te.schedules.pool_window.stride_phases`, as for strided
depthwise convolutions and pools), so that tap ``(ry, rx)`` of output
position ``(y, x)`` reads phase ``(ry*dh % sh, rx*dw % sw)`` at ``y*V + x
+ (ry*dh // sh)*V + rx*dw // sw``: contiguous along the output row. The
GEMM schedule then takes the output rows as with a stride-1 convolution,
its B read in place and the epilogue (bias, activation) in its register
tiles. (A first form ran one GEMM over the ``OH*V`` flat columns, the
``V - OW`` past each row computed and dropped, and the epilogue in a nest
of its own reading the rows back through memory: on the Intel Xeon, one
thread, MobileNetV2's 3 -> 32 3x3/2 over 224x224 + ReLU6 343-352 -> 227
us this way, MobileNetV3's 3 -> 16 198-208 -> 121 us, ResNet-50's 7x7/2
1988-2123 -> 1770-1806 us, a 3 -> 64 3x3/2 to 112x112 646-805 -> 395 us,
AlexNet's 11x11/4 1206-1221 -> 1185-1189 us; + SiLU 357-377 us either
way.) Stride 1 keeps the GEMM schedule's rows, whose B is contiguous
already. Each element is the same sum over ``(c, ry, rx)`` as the direct
convolution's.
"""

from __future__ import annotations

from phasec import arith
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.te.schedules.pool_window import stride_phases
from phasec.te.schedules.workloads import ConvWorkload
from phasec.te.tensor import Tensor

__all__ = ["MAX_CHANNELS", "schedule"]

#: input channels up to which a convolution takes this schedule
MAX_CHANNELS = 4


def schedule(w: ConvWorkload) -> Tensor | None:
    """The convolution ``w`` (an NCHW float conv2d) over its stride phases,
    or None unless it is strided, ungrouped, with at most
    :data:`MAX_CHANNELS` input channels, static sizes (a symbolic batch
    keeps the GEMM schedule's rows), output rows of at
    least a vector (narrower ones are :mod:`~phasec.te.schedules.conv_im2col`'s)."""
    data, weight = w.data, w.weight
    dims = [arith.const_int(d) for d in (*data.shape, *weight.shape, w.out_shape[2],
                                         w.out_shape[3])]
    if any(d is None for d in dims) or w.groups != 1 or tuple(w.strides) == (1, 1):
        return None
    _, _, _, _, O, C, KH, KW, OH, OW = dims
    (sh, sw), (dh, dw) = w.strides, w.dilation
    if C > MAX_CHANNELS or OH < 1 or OW < w.lanes:
        return None
    phases, V, _ = stride_phases(data, (OH, OW), (KH, KW), w.strides, w.dilation,
                                       (w.padding[0], w.padding[1]), te.const(0, w.dtype),
                                       w.lanes)
    rc = te.reduce_axis(i64(C), "rc")
    ry, rx = te.reduce_axis(i64(KH), "r0"), te.reduce_axis(i64(KW), "r1")

    def body(b, o, p):
        ey, ex = ry.var * dh, rx.var * dw
        phase, tap = ey % sh * sw + ex % sw, ey // sh * V + ex // sw
        return te.sum(phases[b, rc.var, phase, p + tap] * weight[o, rc.var, ry.var, rx.var],
                      axis=[rc, ry, rx])
    return te.compute(w.out_shape, lambda b, o, y, x: body(b, o, y * V + x), name="T_conv2d",
                      tag="conv2d")

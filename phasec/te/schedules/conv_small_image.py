"""A KxK NCHW conv2d over a small image (SqueezeNet's last fire modules:
3x3 over 3x3 images at a 64x64 input; ResNet-18's last stages at 2x2 and
4x4), as a matmul whose columns are the output channels.

Along the output positions, such a convolution fills a fraction of each
vector: :mod:`~phasec.te.schedules.conv_flat_rows` computes a 3x3 image
padded to 5 columns as 15 columns (vectors of 8, 4 and 3 lanes for 9
results), at about a third of the FMA units' rate. Here, as in
:mod:`~phasec.te.schedules.conv_pointwise_small` for 1x1 convolutions, the
positions are the rows and the output channels the columns::

    cols[b, p, c, ry, rx] = data[b, c, y*sy + ry*dy - top, x*sx + rx*dx - left]
                            (zero in the padding; p = y*OW + x: read from
                            the padded input, copied once, without a test)
    t[b, p, o] = sum_{c, ry, rx} cols[b, p, c, ry, rx] * weight[o, c, ry, rx]

a GEMM of ``OH*OW`` rows, ``O`` columns (whole vectors) and ``C*KH*KW``
reductions, whose B is the OIHW weight read transposed: its flat ``[O,
C*KH*KW]`` view. The GEMM packs B into micro-panels, at build time for a
constant weight (PackConstantWeights: :func:`phasec.te.schedules.gemm_prepack.b_parameter`
takes the weight's four indices as the flat reduction). The output is ``t``
read back transposed, where the epilogue (bias, activation) runs. Each
element is the same sum over ``(c, ry, rx)`` as the direct convolution's.

Taken where :func:`estimate` says it is faster than the output positions
in the vectors (counting the gathered columns, the transposed output, and
B's packing when the weight is a parameter and so packed on every call),
over fewer than :data:`MAX_POSITION_VECTORS` vectors of positions, after
Winograd's rule in the table (which takes images of a vector of tiles).
Measured, one core, constant weights, Winograd off: 3x3 256 -> 256 over
3x3 356 -> 115 us, over 4x4 279 -> 205 us; 128 -> 128 over 5x5 128 -> 82
us, over 7x7 210 -> 159 us; 64 -> 64 over 6x6 36 -> 35 us (the estimate
keeps the rows there); 3x3/2 256 -> 256 from 14x14 to 7x7 618 -> 580 us. Not
a 1x1 convolution over a vector of positions or more (see :func:`schedule`).
"""

from __future__ import annotations

from phasec import arith
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.te.schedules.pool_window import padded_input
from phasec.te.schedules.workloads import ConvWorkload
from phasec.te.tensor import OWN_NEST, Tensor

__all__ = ["NS_PER_VECTOR_FMA", "NS_PER_WHOLE_VECTOR", "NS_PER_PART_VECTOR", "NS_PER_COPY",
           "NS_PER_PACKED", "MAX_POSITION_VECTORS", "estimate", "vector_pieces", "schedule"]

#: the cost model (:func:`estimate`), nanoseconds on one core, fitted to
#: single kernels on the AVX-512 host (3x3 convolutions over 3x3 to 7x7
#: images, 17 -> 53 to 256 -> 256 channels, the weight a constant and a
#: parameter, Winograd off): a vector multiply-add of this schedule's GEMM;
#: one of the positions in the vectors, a whole vector or part of one (a
#: row split as :func:`vector_pieces` counts); an element gathered into the
#: columns or transposed back; an element of B packed on every call (the
#: weight a parameter: read by gathers)
NS_PER_VECTOR_FMA = 0.33
NS_PER_WHOLE_VECTOR = 0.32
NS_PER_PART_VECTOR = 0.20
NS_PER_COPY = 0.5
NS_PER_PACKED = 0.41

#: at most this many output positions, in vectors: the sizes measured
#: (larger images keep their positions in the vectors, whole ones)
MAX_POSITION_VECTORS = 4


def vector_pieces(width: int, lanes: int) -> tuple[int, int]:
    """The vector operations a row of ``width`` lanes takes in the GEMM
    schedule's tiles, (whole vectors, parts of one): whole vectors, then
    powers of two down to 4, then one for the last 1-3 lanes (as
    :class:`~phasec.te.schedules.gemm.GemmEmitter` splits a row)."""
    parts, tail, bit = 0, width % lanes, lanes
    while tail >= 4:
        bit //= 2
        if tail >= bit:
            parts, tail = parts + 1, tail - bit
    return width // lanes, parts + (1 if tail else 0)


def estimate(positions: int, reduction: int, out_channels: int, columns: int, lanes: int,
             weight_per_call: bool) -> tuple[float, float]:
    """(this schedule, the positions in the vectors): the estimated time of
    one image's call in ns. ``columns``: the positions the other schedules
    compute per output channel (dropped ones included: the padded rows laid
    end to end). A model, not a measurement: with the weight a parameter,
    packing it on every call costs about what the whole vectors save."""
    mine = (positions * reduction * -(-out_channels // lanes) * NS_PER_VECTOR_FMA
            + (positions * reduction + positions * out_channels) * NS_PER_COPY
            + (reduction * out_channels * NS_PER_PACKED if weight_per_call else 0.0))
    whole, parts = vector_pieces(columns, lanes)
    return mine, out_channels * reduction * (whole * NS_PER_WHOLE_VECTOR
                                             + parts * NS_PER_PART_VECTOR)


def schedule(w: ConvWorkload) -> Tensor | None:
    """The convolution ``w`` (an NCHW float conv2d) as a matmul over its
    output channels; None unless it is 2-D in NCHW/OIHW, ungrouped, of
    static sizes (the batch too), over fewer output positions than
    :data:`MAX_POSITION_VECTORS` vectors with at least a vector of output
    channels, and :func:`estimate` puts it below the positions in the
    vectors."""
    data, weight = w.data, w.weight
    if (w.rank != 2 or (w.data_layout.name, w.kernel_layout.name, w.out_layout.name)
            != ("NCHW", "OIHW", "NCHW") or w.groups != 1):
        return None
    dims = [arith.const_int(d) for d in (*data.shape, *weight.shape, w.out_shape[2],
                                         w.out_shape[3])]
    if any(d is None for d in dims):
        return None
    n, C, H, W, O, _, KH, KW, OH, OW = dims
    M, K = OH * OW, C * KH * KW
    if not (1 <= M < MAX_POSITION_VECTORS * w.lanes and w.lanes <= O) or n < 1:
        return None
    if KH * KW == 1 and M >= w.lanes:
        # a 1x1 over whole vectors of positions keeps them: its flat rows are
        # a GEMM of long rows and columns at the FMA units' rate (ResNet-50's
        # 512 -> 2048 over 7x7: 1033 us, against 1200 here)
        return None
    _, left, _, right = w.padding
    (sy, sx), (dy, dx) = w.strides, w.dilation
    # the other schedules' columns: the padded rows end to end (stride 1),
    # else each output row on its own
    columns = OH * (W + left + right) if (sy, sx) == (1, 1) else OH * OW
    mine, other = estimate(M, K, O, columns, w.lanes, not w.weight_is_constant)
    if mine >= other:
        return None
    # stride 1: the padded input copied once (contiguous runs, the border's
    # zeros stored once), the columns read from it without a border test, a
    # clamp or a select per element. Strided, the copy cost more than it
    # saved inside the models (ResNet-50's 3x3/2 512 ch 14 -> 7 +3-5%,
    # Inception v2's 128 -> 192 +7%): the border tested per element there
    padded = (padded_input(data, w.padding, 2, te.const(0, data.dtype), [0, 0])
              if (sy, sx) == (1, 1) else None)
    top, zero = w.padding[0], te.const(0, w.dtype)

    def col_body(b, p, ch, r, s):
        y, x = p // OW * sy + r * dy, p % OW * sx + s * dx
        if padded is not None or not any(w.padding):
            return (data if padded is None else padded)[b, ch, y, x]
        y, x = y - top, x - left
        value = data[b, ch, te.clamp_index(y, i64(H)), te.clamp_index(x, i64(W))]
        return te.select(te.all_of(te.in_range(y, 0, H), te.in_range(x, 0, W)), value, zero)
    cols = te.compute((i64(n), i64(M), i64(C), i64(KH), i64(KW)), col_body,
                      name="im2col_positions", inline=False)
    rc, ry, rx = te.reduce_axis(i64(C), "rc"), te.reduce_axis(i64(KH), "r0"), \
        te.reduce_axis(i64(KW), "r1")
    rows = te.compute((i64(n), i64(M), i64(O)), lambda b, p, o: te.sum(
        cols[b, p, rc.var, ry.var, rx.var] * weight[o, rc.var, ry.var, rx.var],
        axis=[rc, ry, rx]), name="T_conv2d_positions", tag="conv2d", attrs={OWN_NEST: True})
    return te.compute(w.out_shape, lambda b, o, y, x: rows[b, y * OW + x, o], name="T_conv2d")

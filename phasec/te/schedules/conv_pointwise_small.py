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

The projections (fewer output channels than input ones) over images of a
vector of positions up to :data:`MAX_POSITION_VECTORS` vectors
(MobileNetV2's and EfficientNet's 14x14 and 7x7 stages) too, where
:func:`estimate` puts it below the positions in the vectors (the flat rows
of :mod:`~phasec.te.schedules.conv_flat_rows`): 49 positions are three
whole vectors and one lane, 196 twelve and a quarter, and the flat rows
copy the input and read their sums back for the epilogue, while here the
output channels fill whole vectors and the cost is the transposed output.
"""

from __future__ import annotations

import numpy as np

from phasec import arith
from phasec.target import tuning
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.te.schedules.conv_small_image import NS_PER_PACKED, vector_pieces
from phasec.te.schedules.gemm_plan import GEMM_TILE_ATTR
from phasec.te.schedules.workloads import ConvWorkload
from phasec.te.tensor import OWN_NEST, Tensor

__all__ = ["NS_PER_VECTOR_FMA", "NS_PER_TRANSPOSED", "NS_PER_WHOLE_VECTOR",
           "NS_PER_PART_VECTOR", "NS_PER_ROW_COPY", "MAX_POSITION_VECTORS",
           "max_transposed_bytes", "estimate", "schedule"]

#: the cost model (:func:`estimate`), nanoseconds on one core, fitted (least
#: squares of the relative error) to 1x1 convolutions alone over 7x7, 14x14
#: and 28x28 images, 16 to 1152 input and output channels, constant weights,
#: on the AVX-512 host (Emerald Rapids, load 2-3): a vector multiply-add of
#: this schedule's GEMM and an element of its transposed output; a whole
#: vector or part of one (:func:`~.conv_small_image.vector_pieces`) of the
#: flat rows' GEMM, and an element of their copied input or read-back sums
NS_PER_VECTOR_FMA = 0.344
NS_PER_TRANSPOSED = 0.449
NS_PER_WHOLE_VECTOR = 0.358
NS_PER_PART_VECTOR = 0.488
NS_PER_ROW_COPY = 0.114

def max_transposed_bytes() -> int:
    """The largest transposed output (``t``, positions x output channels)
    this schedule takes on the host (its tuning's
    ``pointwise_max_transposed_bytes``): ``t``'s elements are gathered back
    a vector of positions at a time, one cache line each.

    Zen 4 (1 MB of L2 a core), 64 KB: inside DenseNet-121 (light model,
    one thread) the 14x14 bottlenecks of 256 to 768 -> 128 channels (t of
    100 KB) lost 17-29% this way (256 -> 128: 143 -> 185 us), where the 7x7
    ones (25 KB) gained 17% (512 -> 128: 95 -> 79 us), MobileNetV2's 288 ->
    48 over 14x14 (38 KB) 13%, SqueezeNet's 384 -> 64 over 13x13 (43 KB) 19%.
    The Intel Xeon (Emerald Rapids, 2 MB L2 and 48 KB L1d), 256 KB: alone,
    one thread, flat rows -> positions as rows, 576 -> 96 over 14x14 +
    residual (t 75 KB) 267 -> 214 us, 384 -> 96 190 -> 143 us, 672 -> 112
    362 -> 305 us, 768 -> 128 (96 KB) 480-776 -> 404-423 us, 1024 -> 256
    (196 KB) 1290 -> 800 us; with the Xeon GEMM profile of the same round
    (8x3 tiles) 170 -> 137, 112 -> 93, 230 -> 218, 295-402 -> 277-286,
    786-839 -> 759-769 us, and 256 -> 128 (98 KB) 97-127 -> 111 us."""
    return tuning.host_tuning().pointwise_max_transposed_bytes


#: at most this many vectors of positions over which :func:`estimate`
#: chooses (14x14 is 12.25 vectors; over 28x28 the flat rows measured
#: faster for every shape tried, 16 to 240 channels: 240 -> 40 272 against
#: 349 us, 40 -> 240 273 against 594)
MAX_POSITION_VECTORS = 16


def estimate(positions: int, reduction: int, out_channels: int, lanes: int,
             weight_per_call: bool) -> tuple[float, float]:
    """(this schedule, the flat rows): the estimated time in ns of one
    image's 1x1 convolution of ``reduction`` input channels. With the weight
    a parameter, this schedule also packs it on every call (the flat rows
    read it in place)."""
    mine = (positions * reduction * -(-out_channels // lanes) * NS_PER_VECTOR_FMA
            + positions * out_channels * NS_PER_TRANSPOSED
            + (reduction * out_channels * NS_PER_PACKED if weight_per_call else 0.0))
    whole, parts = vector_pieces(positions, lanes)
    rows = (out_channels * reduction * (whole * NS_PER_WHOLE_VECTOR + parts * NS_PER_PART_VECTOR)
            + positions * (reduction + out_channels) * NS_PER_ROW_COPY)
    return mine, rows


def schedule(w: ConvWorkload) -> Tensor | None:
    """The 1x1 convolution ``w`` (NCHW float conv2d) as a matmul over its
    output channels; None unless it is 1x1, stride 1, unpadded, ungrouped,
    of static sizes, with at least a vector of output channels, over fewer
    positions than a vector, or up to :data:`MAX_POSITION_VECTORS` vectors
    of them with no more output channels than input ones and a transposed
    output of at most :func:`max_transposed_bytes`, where :func:`estimate`
    puts it below the flat rows."""
    data, weight = w.data, w.weight
    if w.data_layout.name != "NCHW" or w.kernel_layout.name != "OIHW" \
            or w.out_layout.name != "NCHW":
        return None
    dims = [arith.const_int(d) for d in (*data.shape, *weight.shape)]
    if any(d is None for d in dims):
        return None
    n, c, H, W, O, C, KH, KW = dims
    if (KH, KW) != (1, 1) or w.groups != 1 or any(w.padding) \
            or tuple(w.strides) != (1, 1) or not (H * W < MAX_POSITION_VECTORS * w.lanes
                                                  and w.lanes <= O):
        return None
    if H * W >= w.lanes:
        # Projections only (fewer output channels than input ones): inside
        # MobileNetV2 at 224x224, where the weights are not in the cache, the
        # expansions lost this way whatever the estimate (80 -> 480 over 7x7
        # 40-43 -> 50-52 us, 160 -> 1280 183-191 -> 188-193 us), the
        # projections gained (480 -> 160 over 7x7 90 -> 73 us, 192 -> 32
        # over 14x14 29 -> 19 us)
        mine, flat = estimate(H * W, C, O, w.lanes, not w.weight_is_constant)
        elem = np.dtype(str(w.dtype)).itemsize
        limit = tuning.host_tuning().pointwise_max_weight_bytes
        if (O > C or mine >= flat or H * W * O * elem > max_transposed_bytes()
                or (limit and O * C * elem >= limit)):
            return None
    k = te.reduce_axis(i64(C), "rc")
    rows = te.compute((i64(n), i64(H * W), i64(O)), lambda b, p, o: te.sum(
        data[b, k.var, p // W, p % W] * weight[o, k.var, 0, 0], axis=[k]),
        name="T_conv2d_positions", tag="conv2d",
        attrs={OWN_NEST: True, **_wide_tile(O, w.lanes, str(w.dtype))})
    return te.compute(w.out_shape, lambda b, o, y, x: rows[b, y * W + x, o], name="T_conv2d")


def _wide_tile(out_channels: int, lanes: int, dtype: str) -> dict[str, tuple[int, int]]:
    """The GEMM's register tile (:data:`.gemm_plan.GEMM_TILE_ATTR`) for
    ``out_channels`` float columns, when the target's tuning has one
    (``pointwise_wide_tile``) and they are 5-10 vectors of which whole tiles
    of ``gemm_vectors`` would leave one or two: 96 channels as one 4 x 6
    tile read each input value once, as a 6 x 4 and a 6 x 2 tile (12
    accumulators) twice (bench/README.md)."""
    target = tuning.host_tuning()
    vectors = -(-out_channels // lanes)
    if (not target.pointwise_wide_tile or dtype != "float32"
            or not 5 <= vectors <= 10 or vectors % target.gemm_vectors not in (1, 2)):
        return {}
    rows, width = target.pointwise_wide_tile
    return {GEMM_TILE_ATTR: (rows, width)}

"""A stride-1, unpadded NCHW float 1x1 conv2d as one GEMM over all the
image's positions: ``out[b, o, p] = sum_c w[o, c] * x[b, c, p]`` with ``p =
y*W + x`` over ``H*W`` columns.

The GEMM schedule takes a convolution one output row at a time (columns:
the row's ``W`` positions). A row that is not whole vectors (56 = 3.5
vectors of AVX-512's 16 lanes; 28; 14) fills its last vector of each row
of the register tile by halves or less; a row of a few whole vectors (32
wide) makes narrow panels, each GEMM a short one. Input and output are contiguous
across both spatial axes, so the product is the same matrix product with
``H*W`` columns: this schedule returns the plain 1x1 sum over the input
channels with the anchor marked (``FLAT_COLUMNS_ATTR``), and the GEMM plan
(:func:`.gemm_plan.plan_gemm`) runs its columns over ``y*W + x`` when B
and every load of the epilogue (bias, activation, a residual) read the two
axes as a row-major pair: the epilogue stays in the register tiles. (The
flat rows of :mod:`.conv_flat_rows` copied the input and ran the epilogue
as a second pass over the output.) Where the plan cannot (an epilogue that
reads the rows otherwise), the GEMM runs row by row as for
:mod:`.conv_direct`. Each element is the same sum over the input channels
in the same order.
"""

from __future__ import annotations

from phasec import arith
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.target import tuning
from phasec.te.schedules.gemm_plan import FLAT_COLUMNS_ATTR, GEMM_TILE_ATTR
from phasec.te.schedules.workloads import ConvWorkload
from phasec.te.tensor import Tensor

__all__ = ["MIN_WHOLE_ROW_CHANNELS", "takes", "schedule", "flat_tile"]

#: rows of whole vectors are taken from this many output channels (a
#: group's) up: alone, one thread, on the Xeon, rows -> one GEMM, 128 ->
#: 128 + residual over 32x32 0.42 -> 0.25 ms, 256 -> 256 + residual over
#: 64x64 5.75 -> 3.89, 64 -> 64 over 112x112 1.13 -> 0.90, 16 -> 96 over
#: 112x112 0.53 -> 0.40, 64 -> 128 over 16x16 36 -> 33 us; but 32 -> 16
#: over 112x112 0.134 -> 0.158 ms and 32 -> 24 0.177 -> 0.217 (a few row
#: tiles re-read the wider panel of B from L2, where each row's stayed in L1)
MIN_WHOLE_ROW_CHANNELS = 32

#: a 1x1 convolution reducing its channels at least this many times (an
#: inverted residual block's projection: MobileNetV2's 576 -> 96) takes
#: ``pointwise_flat_tile`` with fewer output channels than
#: ``pointwise_flat_tile_min_rows`` when they are whole tiles of its rows
#: or leave a last tile of at least half of them (Zen 4, in the models: 576
#: -> 96 over 14x14 424 -> 411 us for two calls, 960 -> 160 over 7x7 323 ->
#: 302; but DenseNet-121's 768-992 -> 128, 21 tiles of 6 rows and one of
#: 2, which the GEMM balances into smaller tiles, against 16 of 8, 2-3%
#: slower)
PROJECTION_RATIO = 4

#: ... and input channels (the reduction) of at most this many: ResNet-50's
#: 2048 -> 512 over 7x7 was 1-3% slower with the tile (2058 / 2060 -> 2126 /
#: 2080 us, two calls), reductions of up to 1152 faster
MAX_REDUCTION = 1536


def takes(w: ConvWorkload) -> bool:
    """Whether ``w`` (an NCHW float conv2d) is a 1x1 convolution this
    schedule takes: stride 1, unpadded, static spatial sizes, rows that are
    not whole vectors (or are, with at least :data:`MIN_WHOLE_ROW_CHANNELS`
    output channels a group), at least two output channels a
    group (the GEMM's register tiles keep within one: a depthwise one has no
    GEMM)."""
    data, weight = w.data, w.weight
    dims = [arith.const_int(d) for d in (*data.shape[2:], *weight.shape[2:], weight.shape[0])]
    if any(d is None for d in dims):
        return False
    H, W, KH, KW, O = dims
    return ((KH, KW) == (1, 1) and tuple(w.strides) == (1, 1) and not any(w.padding)
            and (W % w.lanes != 0 or O // w.groups >= MIN_WHOLE_ROW_CHANNELS)
            and O // w.groups >= 2)


def schedule(w: ConvWorkload) -> Tensor | None:
    """The 1x1 convolution ``w`` for one GEMM over its flat positions, or
    None unless :func:`takes` holds."""
    if not takes(w):
        return None
    data, weight = w.data, w.weight
    cg = weight.shape[1]
    og = arith.simplify(w.out_shape[1] // w.groups) if w.groups > 1 else None
    rc = te.reduce_axis(cg, "rc")

    def body(b, o, y, x):
        ch = rc.var if og is None else (o // og) * cg + rc.var
        return te.sum(data[b, ch, y, x] * weight[o, rc.var, i64(0), i64(0)], axis=[rc])
    return te.compute(w.out_shape, body, name="T_conv2d", tag="conv2d",
                      attrs={FLAT_COLUMNS_ATTR: True, **flat_tile(w)})


def flat_tile(w: ConvWorkload) -> dict[str, tuple[int, ...]]:
    """The GEMM's register tile (:data:`.gemm_plan.GEMM_TILE_ATTR`) for the
    1x1 convolution ``w`` over its flat positions, when the target's tuning
    has one (``pointwise_flat_tile``) for its float32 images of more than a
    vector and at most ``pointwise_flat_tile_max_columns`` positions, one
    group, at least ``pointwise_flat_tile_min_rows`` output channels or
    :data:`PROJECTION_RATIO` times fewer than its input's in whole tiles of
    rows (a last one of at least half), at most :data:`MAX_REDUCTION` input
    channels, and over more positions than a tile only where a panel of B
    (``gemm_panel_bytes``) holds two of its micro-panels; else none (the
    GEMM's own; also for channels of no static count)."""
    target = tuning.host_tuning()
    positions = 1
    for d in w.data.shape[2:]:
        positions *= arith.const_int(d) or 0
    out_channels = arith.const_int(w.weight.shape[0]) or 0
    in_channels = arith.const_int(w.weight.shape[1]) or 0
    # (an image of one vector of positions or less, a squeeze-excite's 1x1,
    # keeps the GEMM's narrow tiles; grouped channels make the tiles' rows a
    # power of two within a group)
    if (not target.pointwise_flat_tile or str(w.dtype) != "float32" or w.groups != 1
            or not out_channels or not in_channels
            or not w.lanes < positions <= target.pointwise_flat_tile_max_columns):
        return {}
    rows, vectors = target.pointwise_flat_tile
    if out_channels < target.pointwise_flat_tile_min_rows and (
            in_channels < PROJECTION_RATIO * out_channels
            or 0 < out_channels % rows < (rows + 1) // 2):
        return {}
    if in_channels > MAX_REDUCTION:
        return {}
    micro_panel = in_channels * vectors * w.lanes * 4
    if positions > vectors * w.lanes and 2 * micro_panel > target.gemm_panel_bytes:
        # over several panels, one of the tile's micro-panels a panel where
        # the GEMM's own narrower tiles make two or three: the weight then
        # streams once more (ResNet-50's 1024 -> 512 over 14x14, K = 1024,
        # 2037 -> 2097 us; 1024 -> 256 gained, 5114 -> 4935)
        return {}
    return {GEMM_TILE_ATTR: (rows, vectors)}

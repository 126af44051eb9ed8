"""CPU schedules, one module each, and the one table that says which
schedule takes which loop nest or operator.

:data:`RULES` is read top to bottom for a subject of a kind: the first rule
of that kind whose condition holds and whose schedule takes the subject
(returns its plan or tensors rather than None) wins; the last rule of each
kind takes everything. The kinds:

* ``"nest"``: the loop nest of one root stage of a lowered TE graph
  (:class:`phasec.te.emit.NestEmitter`); the schedule returns a
  :class:`NestSchedule`, which gives the loops around its innermost part
  and emits that part.
* ``"conv"``: a convolution (:class:`~phasec.te.schedules.workloads.ConvWorkload`,
  from :mod:`phasec.op.nn.conv`); the schedule returns its TE tensor.
* ``"conv_transpose"``: a transposed convolution
  (:class:`~phasec.te.schedules.workloads.ConvTransposeWorkload`); the
  schedule returns its TE tensor.
* ``"pool"``: a max or average pooling
  (:class:`~phasec.te.schedules.workloads.PoolWorkload`, from
  :mod:`phasec.op.nn.pool`); the schedule returns its TE tensor.

A schedule that transforms a weight in a way that can run at build time
declares it (:mod:`phasec.te.schedules.build_time`); :data:`WEIGHT_TRANSFORMS`
lists the declarations, which PackConstantWeights tries in order.

A new schedule is one module here and one row below.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from phasec.arith import const_int
from phasec.ir.tir import PrimExpr, Stmt
from phasec.te.schedules import (
    conv_column, conv_depthwise_blocked, conv_depthwise_direct, conv_depthwise_lanes,
    conv_depthwise_strided,
    conv_depthwise_strided_flat, conv_direct,
    conv_few_channels, conv_flat_rows, conv_pool_stem, conv_im2col, conv_pointwise_flat,
    conv_pointwise_small, conv_unit_row,
    conv_small_image, conv_transpose, elementwise_flat, gemm, gemm_prepack, interleave, plain,
    pool_avg, pool_avg_rows, pool_max, pool_max_blocks, pool_max_fast, pool_max_rows,
    row_tile, transpose, transposed_weights, winograd,
)
from phasec.te.schedules.build_time import WeightTransform
from phasec.te.schedules.workloads import ConvTransposeWorkload, ConvWorkload, PoolWorkload
from phasec.te.tensor import Tensor

if TYPE_CHECKING:
    from phasec.te.emit import NestEmitter
    from phasec.te.lowering import Stage

__all__ = ["Rule", "RULES", "NestSchedule", "WEIGHT_TRANSFORMS", "choose", "schedule_nest",
           "schedule_conv", "schedule_conv_transpose", "schedule_pool"]


class NestSchedule(Protocol):
    """The schedule of one loop nest, as :class:`~phasec.te.emit.NestEmitter` uses it."""

    #: the reduction accumulated in the schedule's tiles (None: none), which
    #: the emitter does not compute as an attached stage
    anchor: Stage | None
    #: the innermost axis loop is vectorized when it can be
    vectorizes_last_axis: bool

    def outer_loops(self, nest: NestEmitter) -> list[tuple[str, int, PrimExpr]]:
        """The loops around the innermost part: (kind, axis index, extent);
        kind "axis" loops over a root axis, any other kind is a tile loop
        whose variable the emitter records in ``nest.tile_vars[kind]``."""

    def emit_inner(self, nest: NestEmitter) -> Stmt:
        """The innermost part, inside the outer loops."""


@dataclass(frozen=True)
class Rule:
    """One row of the table: ``schedule`` takes a subject of ``kind`` for
    which ``holds`` is true, unless it returns None (it does not take it)."""

    kind: str
    #: the schedule's module in this package
    schedule: str
    #: the condition, in words
    when: str
    holds: Callable[[Any], bool]
    take: Callable[[Any], Any]


def _always(_: Any) -> bool:
    return True


def _untiled(nest: NestEmitter) -> bool:
    return not nest.opt.tile or nest.m == 0


def _no_tile_anchor(nest: NestEmitter) -> bool:
    return nest.tile_anchor is None


def _nchw_float_conv2d(w: ConvWorkload) -> bool:
    return (w.rank == 2
            and (w.data_layout.name, w.kernel_layout.name, w.out_layout.name)
            == ("NCHW", "OIHW", "NCHW")
            and w.dtype in ("float32", "float64") and w.data.dtype == w.dtype
            and w.weight.dtype == w.dtype)


def _strided_positions_fill_vectors(w: ConvWorkload) -> bool:
    """A strided NCHW float conv2d whose output positions, as a GEMM's
    columns (whole vectors, then parts: ``conv_small_image.vector_pieces``),
    fill at least 3/4 of the lanes they take: 7x7's 49 of 64, 6x6's 36 of
    48, not 5x5's 25 of 48 (bench/README.md, "Strided convolutions packed
    straight from the image")."""
    if not _nchw_float_conv2d(w) or all(s == 1 for s in w.strides):
        return False
    oh, ow = (const_int(d) for d in w.out_shape[2:4])
    if oh is None or ow is None:
        return False
    whole, parts = conv_small_image.vector_pieces(oh * ow, w.lanes)
    return 4 * oh * ow >= 3 * (whole + parts) * w.lanes


def _max_pool(w: PoolWorkload) -> bool:
    return w.kind == "max"


def _fast_max_pool(w: PoolWorkload) -> bool:
    return w.kind == "max" and pool_max_fast.takes(w)


RULES: tuple[Rule, ...] = (
    # -- loop nests (phasec.te.emit) ------------------------------------------------------
    Rule("nest", "plain", "no tiling (schedule_hints off), or a nest without axes",
         _untiled, plain.plan),
    Rule("nest", "transpose", "an elementwise nest with nothing attached that reads its "
         "inputs along its next-to-last axis", _always, transpose.schedule),
    Rule("nest", "interleave", "an elementwise nest with nothing attached that reads its "
         "inputs through // s and % s of its last axis (s = 2..4)", _always,
         interleave.schedule),
    Rule("nest", "elementwise_flat", "an elementwise nest with nothing attached whose rows "
         "are not whole vectors, its inputs read along its last two axes as row-major pairs "
         "(or not at all): those axes as one loop", _always, elementwise_flat.schedule),
    Rule("nest", "plain", "no reduction to tile: a reduction with a stage attached at its "
         "full depth, or not one reduction attached at full depth along the last axis",
         _no_tile_anchor, plain.plan),
    Rule("nest", "gemm", "a float sum of products of a row operand and a column operand "
         "(matmul, convolution), or an int32 sum of their T.dot4_u8s8 (8-bit matmul)",
         _always, gemm.schedule),
    Rule("nest", "row_tile", "a reduction with an input contiguous along the last axis "
         "(a symbolic extent: rows of one vector, then the rest one column at a time)",
         _always, row_tile.plan),
    Rule("nest", "plain", "any other nest", _always, plain.plan),
    # -- convolutions (phasec.op.nn.conv) ---------------------------------------------------
    Rule("conv", "conv_column", "a conv2d one column wide (K x 1 over N x 1): its row form "
         "through this table, written back", _always,
         conv_column.schedule_with(lambda w: schedule_conv(w))),
    Rule("conv", "conv_unit_row", "a 1-D float convolution whose output rows are shorter "
         "than a vector: its one-row 2-D form through this table, read back", _always,
         conv_unit_row.schedule_with(lambda w: schedule_conv(w))),
    Rule("conv", "conv_pointwise_small", "an NCHW float 1x1 conv2d over fewer positions "
         "than a vector, or a projection over a few vectors of them where its cost estimate "
         "is the lower: a matmul whose columns are the output channels",
         _nchw_float_conv2d, conv_pointwise_small.schedule),
    Rule("conv", "conv_few_channels", "an NCHW float conv2d of 1-4 input channels (a "
         "stem), the same stride along both axes: its input split into stride phases, one "
         "GEMM over all the image's positions", _nchw_float_conv2d,
         conv_few_channels.schedule),
    Rule("conv", "conv_depthwise_lanes", "an NCHW float depthwise conv2d of static shape, "
         "at least a vector of channels, a window of 25 taps or more over output rows of at "
         "most half a vector (5x5 over 7x7): a block of channels in the vector lanes",
         _nchw_float_conv2d, conv_depthwise_lanes.schedule),
    Rule("conv", "conv_depthwise_blocked", "an NCHW float32 depthwise conv2d of static "
         "shape, stride 1, output rows of more than half a vector, at most two vectors and "
         "not whole ones (a quarter wasted at most), a window of 9 taps or more (3x3 and 5x5 "
         "over 14x14 and 28x28), where 32 vector registers hold a block of rows beside its "
         "weights: per channel its padded plane, each output row one or two vectors, "
         "several rows summed from each loaded plane row",
         _nchw_float_conv2d, conv_depthwise_blocked.schedule),
    Rule("conv", "conv_depthwise_strided", "an NCHW float depthwise conv2d of static shape, "
         "stride 1, output rows of at least a vector (or of more than half a vector under a "
         "3x3 or smaller window): per channel, its padded plane and flat sums in the cache, "
         "the rows stored as NCHW", _nchw_float_conv2d,
         conv_depthwise_strided.schedule_rows),
    Rule("conv", "winograd", "an NCHW float conv2d: 3x3, stride 1, one group, enough "
         "channels", _nchw_float_conv2d, winograd.schedule),
    Rule("conv", "conv_im2col", "(ahead of conv_small_image) an NCHW float conv2d: "
         "strided, one group, output rows narrower than a vector, its output positions "
         "filling at least 3/4 of their vectors' lanes", _strided_positions_fill_vectors,
         conv_im2col.schedule),
    Rule("conv", "conv_small_image", "an NCHW float conv2d, one group, over fewer output "
         "positions than four vectors, where its cost estimate is the lower: a matmul of its "
         "gathered columns whose columns are the output channels", _nchw_float_conv2d,
         conv_small_image.schedule),
    Rule("conv", "conv_pointwise_flat", "an NCHW float 1x1 conv2d: stride 1, unpadded, "
         "static rows that are not whole vectors (or are, with enough output channels): one "
         "GEMM over all the image's positions, the epilogue in its tiles", _nchw_float_conv2d,
         conv_pointwise_flat.schedule),
    Rule("conv", "conv_flat_rows", "an NCHW float conv2d: stride 1, output rows narrower "
         "than a vector (depthwise: up to four vectors, not whole ones)", _nchw_float_conv2d,
         conv_flat_rows.schedule),
    Rule("conv", "conv_im2col", "an NCHW float conv2d: strided, one group, output rows "
         "narrower than a vector", _nchw_float_conv2d, conv_im2col.schedule),
    Rule("conv", "conv_depthwise_direct", "an NCHW float depthwise conv2d of static shape "
         "strided along its rows, output rows of more than half a vector and less than two "
         "(not exactly one), a 3x3 or smaller window: each row in one or two vectors, its "
         "taps read at the stride straight from the plane", _nchw_float_conv2d,
         conv_depthwise_direct.schedule),
    Rule("conv", "conv_depthwise_strided_flat", "an NCHW float depthwise conv2d of static "
         "shape strided by 2 along its rows, output rows of more than a quarter of a vector "
         "and at most half, a 3x3 or smaller window, on hosts with depthwise_narrow_plane: "
         "phase rows as wide as the output's, the sums over its flat positions",
         _nchw_float_conv2d, conv_depthwise_strided_flat.schedule),
    Rule("conv", "conv_depthwise_strided", "an NCHW float depthwise conv2d strided along "
         "its rows: stride 1 along them, then every stride-th column", _nchw_float_conv2d,
         conv_depthwise_strided.schedule),
    Rule("conv", "conv_direct", "any convolution", _always, conv_direct.schedule),
    # -- transposed convolutions (phasec.op.nn.conv) ----------------------------------------
    Rule("conv_transpose", "conv_transpose", "dilation 1 (the sub-pixel phases: one "
         "stride-1 convolution through the table above, then interleaved)", _always,
         conv_transpose.subpixel_with(lambda w: schedule_conv(w))),
    Rule("conv_transpose", "conv_transpose", "any transposed convolution (the gather form)",
         _always, conv_transpose.gather),
    # -- pooling (phasec.op.nn.pool) ----------------------------------------------------------
    Rule("pool", "conv_pool_stem", "a float 2-D max pooling in NCHW of static shape whose "
         "input its kernel computes (a stem's convolution and epilogue, fused with it), "
         "lowered as one nest over its output rows: those rows computed into a ring in the "
         "cache, each output row pooled as soon as its window's rows are there", _max_pool,
         conv_pool_stem.schedule),
    Rule("pool", "pool_max_blocks", "a float 2-D max pooling in NCHW of static shape, "
         "a stride of 1 or 2 along its rows, output rows of a vector or more: the max over "
         "the window's rows for a block of output rows, then the block's columns in one flat "
         "loop over its stride phases", _max_pool, pool_max_blocks.take),
    Rule("pool", "pool_max_rows", "a float 2-D max pooling in NCHW of static shape, "
         "a stride of 1 to 3 along its rows: the max over the window's rows along whole input rows, "
         "then over its columns", _max_pool, pool_max_rows.schedule),
    Rule("pool", "pool_max_fast", "a float max pooling with stride 1 along the rows or "
         "output rows of a vector", _fast_max_pool, pool_max_fast.schedule),
    Rule("pool", "pool_max", "a max pooling", _max_pool, pool_max.schedule),
    Rule("pool", "pool_avg_rows", "a float 2-D average pooling in NCHW of static shape: "
         "the sum over the window's rows along the input rows laid end to end, then over "
         "its columns, divided by a count known at build time", _always,
         pool_avg_rows.schedule),
    Rule("pool", "pool_avg", "an average pooling", _always, pool_avg.schedule),
)

#: the transforms of weights the schedules declare, tried in this order
WEIGHT_TRANSFORMS: tuple[WeightTransform, ...] = (gemm_prepack.WEIGHT_TRANSFORM,
                                                  gemm_prepack.ROW_WEIGHT_TRANSFORM,
                                                  winograd.WEIGHT_TRANSFORM,
                                                  transposed_weights.INPUT_TRANSFORM,
                                                  transposed_weights.RECURRENCE_TRANSFORM)


def choose(kind: str, subject: Any) -> Any:
    """What the first rule of ``kind`` that takes ``subject`` makes of it."""
    for rule in RULES:
        if rule.kind == kind and rule.holds(subject):
            made = rule.take(subject)
            if made is not None:
                return made
    raise LookupError(f"no schedule takes this {kind}")  # the last rule of a kind takes all


def schedule_nest(nest: NestEmitter) -> NestSchedule:
    """The schedule of a loop nest."""
    return choose("nest", nest)


def schedule_conv(w: ConvWorkload) -> Tensor:
    """The TE tensor of a convolution."""
    return choose("conv", w)


def schedule_conv_transpose(w: ConvTransposeWorkload) -> Tensor:
    """The TE tensor of a transposed convolution."""
    return choose("conv_transpose", w)


def schedule_pool(w: PoolWorkload) -> Tensor:
    """The TE tensor of a pooling."""
    return choose("pool", w)

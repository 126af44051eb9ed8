"""Schedule tunables per target: every size the kernel schedules use, in one place.

The TE scheduler (:mod:`phasec.te` and the schedules of
:mod:`phasec.te.schedules`) reads tile sizes, cache-block sizes and vector
widths from one :class:`TargetTuning`; the LLVM backend reads the vector
width it asks LLVM to prefer from the same object, so the schedule's
register tiles and the code LLVM emits for them agree. :func:`host_tuning`
picks the tuning of the machine phasec runs on.

Why these numbers (measured with ``bench/bench_ort.py`` on an AVX-512 host):

* *Register tile* of a matmul: ``gemm_rows`` rows x ``gemm_vectors`` vectors
  of accumulators. With 32 vector registers (AVX-512) 8 x 2 keeps 16
  accumulators, two B vectors and a broadcast A value live: 16 independent
  FMA chains hide the FMA latency, and each B vector loaded feeds 8 FMAs.
  With 16 registers (AVX2/SSE) 4 x 2 fits.
* *B panel* (``gemm_panel_bytes``): the columns of B packed together are
  sized so that the packed panel (K x NC elements) stays in the per-core L2
  cache while every row tile of A streams past it; a panel's micro-panels
  (K x NR, contiguous) are read sequentially.
* *Packing* pays for its copy only when several row tiles reuse the panel
  (``gemm_pack_min_row_tiles``) and B does not fit in L2 anyway
  (``gemm_pack_min_bytes``); a matrix-vector product reads B directly.

Profiles (:func:`host_tuning` picks one from the CPU's flags and LLVM's name
for it): ``avx512`` was tuned on an AMD Zen 4 (one 512-bit FMA a cycle in
effect, 1 MB L2); ``avx512_xeon`` (:func:`avx512_xeon_tuning`) on an Intel
Xeon Emerald Rapids (two 512-bit FMA units, 48 KB L1d, 2 MB L2), for the
Xeon cores of that family and later (``_XEON_CPUS``); ``avx2`` and
``generic`` elsewhere. ``PHASEC_TUNING`` overrides a profile's fields for
trying sizes (see :func:`host_tuning`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
import os
from dataclasses import dataclass, replace

from phasec.errors import InputError
from phasec.target.amx import host_amx

__all__ = ["TargetTuning", "host_tuning", "tuning_for", "generic_tuning", "avx512_tuning",
           "avx512_xeon_tuning", "avx2_tuning"]


@dataclass(frozen=True)
class TargetTuning:
    """Sizes the kernel schedules use on one kind of target."""

    #: short name for messages and benchmarks
    name: str
    #: widest vector register the schedules plan for (bits); the LLVM backend
    #: passes it as ``prefer-vector-width`` so LLVM emits vectors this wide
    vector_bits: int
    #: number of vector registers (sizes the register tiles)
    vector_registers: int
    #: matmul register tile: rows of the output computed together
    gemm_rows: int
    #: matmul register tile: vectors of columns computed together
    gemm_vectors: int
    #: bytes of a packed B panel (K x NC elements), sized to stay in L2
    gemm_panel_bytes: int
    #: at most this many columns in a packed B panel
    gemm_panel_max_cols: int
    #: pack B only when at least this many row tiles (of ``gemm_rows``) read it
    gemm_pack_min_row_tiles: int
    #: ... and when B is at least this big: a smaller B stays in L2 anyway,
    #: and the hardware prefetchers follow its rows as well as a packed copy
    #: (measured: 64x256 @ 256x256 +8% without packing)
    gemm_pack_min_bytes: int = 1 << 20
    #: the integer (8-bit) GEMM's register tile, (rows, vectors), when it
    #: differs from the float one (empty: ``gemm_rows`` x ``gemm_vectors``)
    int_gemm_tile: tuple[int, ...] = ()
    #: a float GEMM whose columns fit one vector takes tiles of this many
    #: rows (0: ``gemm_rows``)
    gemm_narrow_rows: int = 0
    #: a matmul of at most this many rows (a matrix-vector product) is
    #: computed whole rows at a time (up to ``gemv_acc_bytes`` of
    #: accumulators, in L1): B is then read row after row, one sequential
    #: stream the prefetchers follow across pages (measured 1x1024 @
    #: 1024x1024: 58 -> 54 us, 1x768 @ 768x3072: 140 -> 116 us, against
    #: 512-column strips). One strip means no parallel loop over strips.
    gemv_max_rows: int = 2
    gemv_acc_bytes: int = 16 * 1024
    #: columns of a GEMM left over after the whole micro-panels that are not
    #: whole vectors join the last micro-panel in one tile of at most this
    #: many registers a row (with fewer rows, see ``GemmEmitter._column_split``)
    gemm_wide_tail_vectors: int = 4
    #: a GEMM's last row tile of fewer than half the tile's rows makes the
    #: tiles smaller (``GemmEmitter._balanced_rows``) unless it has at least
    #: this many accumulators (0: always)
    gemm_tail_min_accumulators: int = 0
    #: a GEMM over a whole image's positions (``GemmPlan.flat``: a 1x1 or
    #: im2col convolution) of a reduction of at most ``gemm_flat_panel_max_k``
    #: and at least ``gemm_flat_panel_min_row_tiles`` row tiles takes panels
    #: of up to this many bytes, whatever ``gemm_panel_max_cols`` (0: no such
    #: panels): its epilogue's residual and output are then read and
    #: written in runs a panel long along each plane (see ``avx512_xeon_tuning``)
    gemm_flat_panel_bytes: int = 0
    gemm_flat_panel_max_k: int = 128
    gemm_flat_panel_min_row_tiles: int = 16
    #: such a GEMM of at most this many rows (0: none) packs one micro-panel
    #: (``gemm_cols`` columns) at a time, each then read by every row tile
    #: (see ``avx512_xeon_tuning``)
    gemm_flat_micro_panel_max_rows: int = 0
    #: a GEMM tile prefetches the lines its epilogue reads (a residual) and
    #: writes before its reduction when that is at least this long (see
    #: ``gemm_prefetch.epilogue_prefetch``; measured: K = 128 batched matmuls
    #: of BERT's attention were slower with it, K >= 256 as fast or faster)
    gemm_prefetch_min_k: int = 256
    #: a GEMM tile prefetches the next row tile's A (a constant weight read
    #: directly) when its reduction is at least this long and it has at most
    #: this many columns (see ``gemm_prefetch.next_rows_prefetch``; measured:
    #: MobileNetV2's 1x1 convolutions over 7x7 inside the model 231 -> ~160
    #: us, as fast as alone)
    gemm_prefetch_a_min_k: int = 64
    gemm_prefetch_a_max_columns: int = 256
    #: ... and at most this many steps (longer rows of A are streams the
    #: hardware prefetchers follow; see ``avx512_xeon_tuning``)
    gemm_prefetch_a_max_k: int = 1 << 62
    #: ... and A of at least this many bytes
    gemm_prefetch_a_min_bytes: int = 0
    #: a GEMM over at most this many flat columns a call (0: never) whose A
    #: is a constant weight of at least ``gemm_pack_a_min_bytes`` reads A
    #: packed into row panels, one contiguous run a row tile
    #: (``gemm_prepack.row_panels``; see ``avx512_xeon_tuning``)
    gemm_pack_a_max_columns: int = 0
    gemm_pack_a_min_bytes: int = 0
    #: ... and a reduction of at most this many steps
    gemm_pack_a_max_k: int = 1 << 62
    #: a GEMM whose B micro-panel (K x a tile's columns) exceeds
    #: ``gemm_k_block_min_bytes``, over at least two row tiles and two
    #: micro-panels, runs its reduction in blocks of at most
    #: ``gemm_k_block_bytes`` of a micro-panel (``GemmPlan.k_block``: in each
    #: of two chunks of micro-panels, every row tile of one block before the
    #: next, partial sums in memory between blocks): the micro-panel's block
    #: stays in L1 across the row tiles, A's in L1/L2 across the chunk's
    #: micro-panels (0: K not split; bench/README.md, "The GEMM's reduction
    #: in blocks")
    gemm_k_block_bytes: int = 0
    gemm_k_block_min_bytes: int = 1 << 20
    #: ... for anchors of these tags: a convolution's (ResNet-50's 3x3 512
    #: over 7x7 in the model 5095 -> 4030 us), not a plain matmul's (49 /
    #: 97 x 4608 @ 4608 x 512 alone 7-11% slower blocked)
    gemm_k_block_tags: tuple[str, ...] = ("conv2d",)
    #: register tile rows of conv2d (and of a matmul the GEMM schedule does
    #: not take): the first that divides the rows
    tile_rows: tuple[int, ...] = (4, 2)
    #: partial accumulators of long float sums (see
    #: ``NestEmitter._partial_lanes``): lanes tried in order, the first with
    #: at least ``partial_iterations`` iterations of the lane loop, else the
    #: first with at least 4. 32 float32 lanes are two AVX-512 (four AVX2)
    #: registers: independent chains that hide the adder's latency.
    partial_lanes: tuple[int, ...] = (32, 16)
    #: ... a short row (softmax over 128 keys) spends more on folding 32
    #: lanes than it saves: 16 lanes there, 4 x 128 x 128 softmax 45.9 ->
    #: 41.4 us (one core)
    partial_iterations: int = 8
    #: ... for reductions of at least this many elements along a contiguous axis
    partial_min_extent: int = 64
    #: ... and a shorter one of at least this many (a global mean over 7x7,
    #: 49 elements, flattened into one axis) takes the narrowest lanes of
    #: ``partial_lanes`` when its innermost axis holds them: an element-wise
    #: prologue (EfficientNet-B0's SiLU before its mean, 1280x7x7) then runs
    #: vectorized too (measured 1 core: 191 -> 26 us; the mean alone over
    #: 1152x7x7 15.4 -> 3.2 us, over 1024x4x4 5.7 -> 1.8 us)
    partial_short_min: int = 16
    #: a loop nest is parallel when it does at least this many scalar
    #: operations (estimated element stores; the parallel runtime checks the
    #: same bound again at run time, for symbolic extents). With the pool's
    #: worker awake a loop of 64k stores (8.5 us on one thread) runs in
    #: 5.9 us on two; 32k stores break even. 4 x 128 x 64 attention's
    #: transpose (32k elements, a gather: 14 us) 14.0 -> 8.8 us.
    parallel_min_work: int = 1 << 15
    #: ... but while the pool's workers sleep (after ~0.1 ms idle) a loop
    #: of fewer stores than this runs on the calling thread alone: waking a
    #: worker costs the caller ~10 us on a virtual machine and the worker
    #: arrives tens of microseconds later (measured after 1 ms idle: 262k
    #: stores 36.8 us on one thread, 45.1 us waking the worker; 524k stores
    #: 62.9 vs 59.3 us). See phasec/backend/llvm/irlib.py.
    parallel_wake_work: int = 1 << 19
    #: a parallel outer axis of an odd number of static iterations below
    #: this is fused with the next loop (when that is another axis of static
    #: extent with nothing computed between the two): an odd count splits
    #: unevenly over two threads (3 x 128 x 1024 softmax: 1.45x on two
    #: threads over its 3 batches, 1.77x fused into 384 rows). Even counts
    #: are left alone: they split evenly already, and the extra chunks of a
    #: fused loop cost ~0.4 us each here (4 x 128 x 128 softmax: 13.5 us
    #: over its 4 batches, 15.6 us fused)
    parallel_min_iterations: int = 16
    #: a stem's max pool computed with its convolution from a ring of the
    #: convolution's rows (:mod:`phasec.te.schedules.conv_pool_stem`) splits
    #: its output rows in this many bands run in parallel, each recomputing
    #: the rows its first window shares with the band before. 0 (the
    #: default): as many as the threads parallel loops use when the kernel is
    #: built (:func:`build_threads`), so one band on one thread: there two
    #: or four bands cost 150-250 us more in ResNet-50's stem (conv + pool in
    #: one kernel 1515-1605 us in one band, 1663-1914 in two, 1901 in four;
    #: 1711-1879 as two kernels), more than the one recomputed row, while on
    #: more threads one band would leave the stem on one of them
    stem_pool_bands: int = 0
    #: 3x3 stride-1 convolutions (NCHW, one group) of at least
    #: ``winograd_min_channels`` input and output channels are computed by
    #: Winograd's F(m x m, 3 x 3) with m at most ``winograd_tile`` (4 or 2;
    #: 0: never), see :mod:`phasec.te.schedules.winograd`. One core, against
    #: the direct convolution: 64 channels at 56x56 2.11 -> 0.80 ms, 256 at 14x14
    #: 2.43 -> 1.04 ms, 512 at 7x7 (F(2x2)) 4.06 -> 1.95 ms; 16 -> 64 at 56x56
    #: 514 -> 277 us, 16 -> 16 136 -> 91 us, 8 -> 16 71 -> 62 us (with the
    #: kernel buffer cache: without it, 16 channels once seemed to gain nothing)
    winograd_tile: int = 4
    #: the integer GEMM's register tiles of 16 and 32 rows run on AMX tiles
    #: (:mod:`phasec.target.amx`; set by :func:`host_tuning` when the host
    #: has AMX-INT8 and the OS grants it), 32 rows x 32 columns a tile
    int8_amx: bool = False
    winograd_min_channels: int = 8
    #: ... with the largest ``m`` whose tiles fill at least this many vectors
    #: of the Winograd GEMMs' columns, else the largest that fills one (see
    #: ``winograd.winograd_conv2d``)
    winograd_min_tile_vectors: int = 1
    #: ... and one whose tiles fill fewer than that many vectors only while
    #: its transformed weight has at most this many bytes (0: any size; see
    #: ``winograd.winograd_conv2d``)
    winograd_narrow_max_weight_bytes: int = 0
    #: a strided one-group NCHW conv2d whose output rows are narrower than
    #: this many vectors and not whole vectors runs over its input gathered
    #: into columns (:mod:`phasec.te.schedules.conv_im2col`): one GEMM over
    #: whole vectors of output positions instead of rows of part-vectors
    im2col_row_vectors: int = 1
    #: a 1x1 convolution over 1-16 vectors of positions runs positions x
    #: output channels (:mod:`phasec.te.schedules.conv_pointwise_small`) only
    #: while that transposed output has at most this many bytes: its
    #: elements are gathered back a vector of positions at a time, one cache
    #: line each (Zen 4, 1 MB L2: DenseNet-121's 100 KB 14x14 bottlenecks
    #: lost 17-29%; the Xeon's 2 MB L2 holds 256 KB of them: see that module)
    pointwise_max_transposed_bytes: int = 64 * 1024
    #: ... and a weight of fewer bytes than this (0: any): a larger one is
    #: not in the cache inside a model (see ``avx512_xeon_tuning``)
    pointwise_max_weight_bytes: int = 0
    #: (rows, vectors): that matmul's register tile when its output channels
    #: are 5-10 vectors of which whole tiles of ``gemm_vectors`` would leave
    #: one or two (80, 96, 144, 160 float32 channels on AVX-512), or () for
    #: the GEMM's own (see ``avx512_xeon_tuning``)
    pointwise_wide_tile: tuple[int, ...] = ()
    #: (rows, vectors): the register tile of a float32 1x1 convolution run
    #: as one GEMM over its image's flat positions
    #: (:mod:`phasec.te.schedules.conv_pointwise_flat`) of at most
    #: ``pointwise_flat_tile_max_columns`` positions, or () for the GEMM's
    #: own (see ``avx512_tuning``)
    pointwise_flat_tile: tuple[int, ...] = ()
    pointwise_flat_tile_max_columns: int = 0
    #: ... of at least this many output channels (or a projection reducing
    #: its channels four times: ``conv_pointwise_flat.PROJECTION_RATIO``)
    pointwise_flat_tile_min_rows: int = 0
    #: stride-1 depthwise rows narrower than a vector (not only those of
    #: more than half a vector) with windows of up to 25 taps (not 9) take
    #: the per-channel padded plane
    #: (:func:`phasec.te.schedules.conv_depthwise_strided.plan`), and rows
    #: strided by 2 of a quarter to half a vector take
    #: :mod:`phasec.te.schedules.conv_depthwise_strided_flat`: measured
    #: faster on the Xeon, and on Zen 4 (``avx512_tuning``) since the plane
    #: sums over the output's flat positions (one layer + activation, one
    #: thread, two alternating runs: 960x7x7 3x3 39-40 -> 26 us, 1152x7x7
    #: 3x3 73 -> 49-51, 240x14x14 5x5 66-68 -> 59-61, 480x14x14 5x5 149-150
    #: -> 135-136, 576x14x14 3x3/2 30-31 -> 21-22; the other layers of
    #: bench_depthwise.py unchanged); not measured on AVX2 or generic hosts
    depthwise_narrow_plane: bool = False

    def splits_unevenly(self, iterations: int) -> bool:
        """Whether a parallel axis of ``iterations`` is fused with the next
        loop: odd and below :attr:`parallel_min_iterations`."""
        return iterations % 2 == 1 and iterations < self.parallel_min_iterations

    def lanes(self, dtype_bits: int) -> int:
        """Elements of ``dtype_bits`` bits in one vector register."""
        return max(1, self.vector_bits // dtype_bits)

    def gemm_cols(self, dtype_bits: int) -> int:
        """Columns of a matmul register tile for elements of ``dtype_bits`` bits."""
        return self.gemm_vectors * self.lanes(dtype_bits)

    def gemv_cols(self, rows: int, dtype_bits: int) -> int:
        """Columns of a matrix-vector product's tile when its B is a constant
        packed once per build: ``rows`` x that many columns of accumulators
        in half the vector registers (AVX-512, one row: 16 vectors, 256
        float32 columns). Each micro-panel (K x columns) is then read as one
        sequential stream, and no accumulator goes through memory: the
        batch-1 1024-wide MLP's three layers 190.5 / 173.5 -> 172.1 / 171.3
        us (one core, two interleaved runs; under other processes' memory
        traffic 428 -> 233 us) against rows of B read four at a time into
        accumulators in L1."""
        vectors = max(1, self.vector_registers // (2 * max(1, rows)))
        return vectors * self.lanes(dtype_bits)


def avx512_tuning() -> TargetTuning:
    """x86-64 with AVX-512F: 32 registers of 512 bits.

    1x1 convolutions over at most 196 flat positions (14x14, 7x7) take 6 x 4
    register tiles rather than the GEMM's 8 x 2 (``pointwise_flat_tile``):
    each loaded vector of the input feeds six FMAs, each broadcast weight
    four, and 49 positions are one tile of 64 columns rather than two of 32
    (bench/README.md, issue 29, mnv2). As on the Xeon, 1x1 projections with
    positions as rows (``conv_pointwise_small``) only for a weight under 512
    KB (``pointwise_max_weight_bytes``): in a model a larger one comes from
    L3, and the GEMM over the image's positions was faster there
    (MobileNetV2's 960 -> 320 over 7x7 323 -> 298 us, EfficientNet-B0's
    1152 -> 192 + residual 700 -> 649, Inception v2's three 1024 -> 128-192
    over 7x7 1910 -> 1826 in all).
    """
    return TargetTuning(name="avx512", vector_bits=512, vector_registers=32, gemm_rows=8,
                        gemm_vectors=2, gemm_panel_bytes=384 * 1024, gemm_panel_max_cols=512,
                        gemm_pack_min_row_tiles=2, depthwise_narrow_plane=True,
                        pointwise_flat_tile=(6, 4), pointwise_flat_tile_max_columns=196,
                        pointwise_flat_tile_min_rows=256, pointwise_max_weight_bytes=512 * 1024)


def avx2_tuning() -> TargetTuning:
    """x86-64 with AVX2/FMA: 16 registers of 256 bits."""
    return TargetTuning(name="avx2", vector_bits=256, vector_registers=16, gemm_rows=4,
                        gemm_vectors=2, gemm_panel_bytes=192 * 1024, gemm_panel_max_cols=256,
                        gemm_pack_min_row_tiles=2)


#: a reduction length no GEMM reaches: the prefetch it gates is never made
_NEVER = 1 << 62


def avx512_xeon_tuning() -> TargetTuning:
    """An Intel Xeon core with two 512-bit FMA units, 48 KB L1d and 2 MB L2
    (Sapphire/Emerald/Granite Rapids), measured on Emerald Rapids against
    :func:`avx512_tuning` (tuned on a Zen 4), one core, single convolutions
    of ResNet-50 interleaved in one process (bench/README.md, "The float
    convolutions retuned for an Intel Xeon"):

    * 6 x 4 register tiles (24 accumulators, 64 float32 columns): each
      broadcast A value feeds four FMAs; the two FMA units want more work
      per load than one does (ResNet-50's and SqueezeNet's convolutions,
      weighted by calls, against 8 x 3: 93.3 -> 87.9 ms), but 8
      rows where the columns fit one vector (``gemm_narrow_rows``: 6
      accumulators do not cover the FMA latency; Winograd's GEMMs over
      7x7), and the integer GEMM's 8 x 2 kept (``int_gemm_tile``, not
      measured here);
    * a last row tile of 2 x 4 accumulators kept after at least eight
      whole 6 x 4 ones (``gemm_tail_min_accumulators``: 8 chains cover the
      two FMA units' latency) rather than every tile made 5 rows: 128
      output channels (ResNet-50's 1x1 256 -> 128 over 56x56: 2.17 -> 1.86
      ms alone; 32 rows kept 8 x 4 tiles: SqueezeNet's 128 -> 32 over 27x27
      was 98 -> 110 us in 5 x 6 + 2);
    * the next row tile's A prefetched only for reductions of 128-384 over
      at most 64 columns and a weight of at least 512 KB
      (``gemm_prefetch_a_min_k``, ``_max_k``, ``_max_columns``,
      ``_min_bytes``; ShuffleNet's grouped 544 x 136 (289 KB) over 7x7
      lost 24 us a call with it where a residual is added): MobileNetV2's
      1x1 expansions over 7x7 in the model (weights from L3) 320 -> 1280
      488 -> 404 us, 160 -> 960 (three calls) 508 -> 425; elsewhere its address arithmetic in the reduction
      loop cost more than the prefetch saved (1x1 1024 -> 256 over 14x14:
      1.40 -> 1.03 ms without; over 7x7, K = 512 and 960 the hardware
      prefetchers follow A's longer rows: 956 -> 982, 454 -> 532 us with
      it; K = 96 within noise alone, +7 us a call in MobileNetV3-Small);
      where A is packed into row panels (below) the prefetch is not made;
    * a constant A of at least 512 KB over at most 64 flat columns and a
      reduction of at most 512 packed at build time into row panels, each
      row tile's rows one contiguous run (``gemm_pack_a_max_columns``,
      ``_min_bytes``, ``_max_k``; ``gemm_prepack.row_panels``): read in
      place, a tile's 6 rows were 6 short streams. In the model, each
      build twice: ResNet-50's 512 -> 2048 + residual over 7x7 (three
      calls) 3123 / 3275 -> 2772 / 2715 us, MobileNetV2's 160 -> 960
      (three) 595 / 583 -> 429 / 427 and 320 -> 1280 531 / 529 -> 401 /
      395 (against the prefetch above; one build a side at load 8 within
      noise; alone faster warm and cold); but the projections of K = 1024
      (Inception v2's 1024 -> 352 and -> 192 over 7x7, +11-12%) and 2048
      (ResNet-50's 2048 -> 512, 1.6 -> 1.9 ms) lost, K = 960 unchanged
      (bench/README.md, issue 29, pw7b);
    * the epilogue's lines prefetched from a reduction of 27 on
      (``gemm_prefetch_min_k``): a residual read 56 floats per row from 256
      planes misses everywhere (1x1 64 -> 256 + residual over 56x56: 1.25x
      -> 0.81x ORT's time for the same convolution); a stem's 3x3 over RGB
      (27) writes 64 planes' rows of a few hundred bytes each, each line
      a miss inside a model (SqueezeNet's 3 -> 64 3x3/2 in the model,
      builds of each in one process: 576, 579 -> 540, 508 us; 1056, 954,
      984, 1350 -> 771, 776, 785, 766; MobileNetV2/V3 and EfficientNet-B0
      unchanged);
    * B packed from 128 KB on (``gemm_pack_min_bytes``): read in place, its
      rows a few hundred bytes apart, it streamed slower from L2;
    * Winograd with tiles over at least two vectors of GEMM columns
      (``winograd_min_tile_vectors``: F(2x2) over 14x14, 49 tiles, rather
      than F(4x4), 16), but over 7x7 (16 tiles, one vector) only for a
      transformed weight of at most 128 KB
      (``winograd_narrow_max_weight_bytes``): in a model its GEMMs stream
      ``U`` (16/9 of the weight) for one vector of tiles, and the direct
      convolution was faster (ResNet-50's 512 channels 2.69 -> 2.41 ms a
      call, Inception v2's six over 7x7 3.73 -> 2.84 ms, DenseNet-121's 16
      of 128 -> 32 1.43 -> 0.82 ms, each kernel timed in its model), and
      strided convolutions with rows of one to two
      vectors over gathered columns (``im2col_row_vectors``: 28-wide rows
      as 16 + 8 + 4 lanes left the FMA units a third idle);
    * panels of up to 1 MB for a GEMM over a whole image's positions of
      a reduction of at most 128 and at least 16 row tiles
      (``gemm_flat_panel_bytes``), wider than ``gemm_panel_max_cols``:
      ResNet-50's 1x1 64 -> 256 + residual over 56x56 (three calls) 2.81
      -> 2.26 ms in the model, its epilogue's residual and output read and
      written along each plane in runs of the whole image rather than of
      448 columns; larger reductions were as fast or slower with them
      (256 -> 128 over 56x56 1.45 -> 1.50 ms, 512 -> 256 over 28x28 1.32
      -> 1.38), MobileNetV2 and EfficientNet-B0 unchanged; but panels of
      one micro-panel for such a GEMM of at most 64 rows
      (``gemm_flat_micro_panel_max_rows``): packed into L1 and read there by
      each of its few row tiles, where a panel of 512 columns (256 KB for
      K = 128) went to L2 and came back once a row tile (in the model,
      SqueezeNet's 128 -> 16 over 55x55 189 -> 175 us, 64 -> 16 95 -> 69,
      16 -> 64 136 -> 115, 256 -> 32 over 27x27 136 -> 124; MobileNetV2's
      144 -> 24 + residual over 56x56 242 -> 226; 128 rows lost in ResNet-50:
      512 -> 128 over 28x28 2.12 -> 2.20 ms);
    * 1x1 projections over 7x7 and 14x14 with positions as rows only for
      a weight under 512 KB (``pointwise_max_weight_bytes``; larger ones
      over the image's positions, ``conv_pointwise_flat``): inside a model
      the weight comes from L3 and the positions-as-rows GEMM, fitted
      alone, lost (ResNet-50's 2048 -> 512 over 7x7 1.17 -> 0.85 ms a
      call, 1024 -> 256 over 14x14 0.87 -> 0.77; MobileNetV2's 960 -> 160
      + residual and 960 -> 320 over 7x7 -23% and -20%; the whole of ResNet-50, the
      kernels' sum, 64.6 -> 63.8 ms, EfficientNet-B0 11.80 -> 11.42,
      MobileNetV2 7.24 -> 7.04, DenseNet-121 and Inception v2 within noise);
    * those with 5-10 vectors of output channels that 4-vector tiles
      would leave one or two of, in 4 x 6 register tiles
      (``pointwise_wide_tile``: 96 channels one tile wide, each input
      value broadcast once, not a 6 x 4 tile and a 6 x 2 one): alone
      576 -> 96 over 14x14 157 -> 142 us, 384 -> 96 102 -> 97, 480 -> 80
      114 -> 102, 576 -> 160 over 7x7 79 -> 66; 144 and 160 over 14x14
      within 2%; not 64, 112, 192 or 224 channels (64 -> 87, 196 -> 240,
      83 -> 86, 342 -> 354 us); in MobileNetV2 the 576 -> 96 + residual
      (two calls) 353 -> 313 us;
    * 1x1 convolutions over 14x14 with positions as rows up to a 256 KB
      transposed output (``pointwise_max_transposed_bytes``), measured in
      MobileNetV2 / EfficientNet-B0 (bench/README.md, "Mobile networks on
      the Intel Xeon"), where narrow depthwise rows on per-channel planes
      (``depthwise_narrow_plane``, now every AVX-512 host's) were first
      measured.
    """
    return replace(avx512_tuning(), name="avx512_xeon", gemm_rows=6, gemm_vectors=4,
                   gemm_narrow_rows=8, int_gemm_tile=(8, 2), gemm_tail_min_accumulators=8,
                   gemm_pack_min_bytes=128 * 1024, gemm_prefetch_min_k=27,
                   gemm_prefetch_a_min_k=128, gemm_prefetch_a_max_k=384,
                   gemm_prefetch_a_max_columns=64, gemm_prefetch_a_min_bytes=512 * 1024,
                   winograd_min_tile_vectors=2,
                   winograd_narrow_max_weight_bytes=128 * 1024,
                   im2col_row_vectors=2, pointwise_max_transposed_bytes=256 * 1024,
                   gemm_flat_panel_bytes=1 << 20,
                   gemm_flat_micro_panel_max_rows=64, pointwise_max_weight_bytes=512 * 1024,
                   pointwise_wide_tile=(4, 6), gemm_k_block_bytes=32 * 1024,
                   gemm_pack_a_max_columns=64, gemm_pack_a_min_bytes=512 * 1024,
                   gemm_pack_a_max_k=512, pointwise_flat_tile=(),
                   pointwise_flat_tile_max_columns=0, pointwise_flat_tile_min_rows=0)


def generic_tuning() -> TargetTuning:
    """Any other target: 128-bit vectors, 16 registers."""
    return TargetTuning(name="generic", vector_bits=128, vector_registers=16, gemm_rows=4,
                        gemm_vectors=2, gemm_panel_bytes=128 * 1024, gemm_panel_max_cols=256,
                        gemm_pack_min_row_tiles=2)


def _cpu_flags() -> set[str]:
    """The CPU feature flags of the host (Linux ``/proc/cpuinfo``; empty elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


#: LLVM's names of the Xeon cores :func:`avx512_xeon_tuning` is for: two
#: 512-bit FMA units, 2 MB of L2 a core (measured on emeraldrapids only)
_XEON_CPUS = frozenset({"sapphirerapids", "emeraldrapids", "graniterapids", "graniterapids-d"})

#: the profiles by name, for ``PHASEC_TUNING``
_PROFILES = {"generic": generic_tuning, "avx2": avx2_tuning, "avx512": avx512_tuning,
             "avx512_xeon": avx512_xeon_tuning}


def _host_cpu_name() -> str:
    """LLVM's name of the host CPU (``emeraldrapids``; "" when unknown)."""
    try:
        import llvmlite.binding as llvm
        return str(llvm.get_host_cpu_name())
    except Exception:  # pragma: no cover - llvmlite is a dependency
        return ""


def tuning_for(flags: set[str], cpu: str) -> TargetTuning:
    """The profile of a CPU with feature ``flags`` (``/proc/cpuinfo``'s) and
    LLVM's name ``cpu``: AVX-512F on a Xeon of ``_XEON_CPUS`` ->
    :func:`avx512_xeon_tuning`, other AVX-512F -> :func:`avx512_tuning`, AVX2
    with FMA -> :func:`avx2_tuning`, otherwise :func:`generic_tuning`."""
    if "avx512f" in flags:
        return avx512_xeon_tuning() if cpu in _XEON_CPUS else avx512_tuning()
    if "avx2" in flags and "fma" in flags:
        return avx2_tuning()
    return generic_tuning()


#: reports the threads parallel loops run on (the LLVM runtime registers
#: its ``get_num_threads``; the target layer cannot import the backend)
_thread_count: Callable[[], int] | None = None


def register_thread_count(report: Callable[[], int]) -> None:
    """Let :func:`build_threads` ask ``report`` (the runtime's thread count)."""
    global _thread_count
    _thread_count = report


def build_threads() -> int:
    """The threads parallel loops use now, for a schedule that splits its
    work in as many parts when it is built (a session's thread count fixed
    when it is created, as ONNX Runtime's is): 1 before a runtime reports one."""
    return max(1, _thread_count()) if _thread_count is not None else 1


@functools.lru_cache(maxsize=1)
def host_tuning() -> TargetTuning:
    """The tuning for the machine phasec runs on (:func:`tuning_for`).

    ``PHASEC_TUNING`` replaces it for trying sizes: a profile's name
    (``avx512``, ``avx512_xeon``, ``avx2``, ``generic``) and/or integer or
    boolean (0/1) fields, ``[profile,]field=value,...``
    (``avx512,gemm_rows=6``, ``depthwise_narrow_plane=1``).
    ``PHASEC_VECTOR_BITS`` (128, 256 or 512) caps the vector width, e.g. to
    compare against 256-bit code on an AVX-512 machine; ``PHASEC_WINOGRAD``
    (0: off, 2 or 4) sets the Winograd tile. Any other value of these is an
    :class:`~phasec.errors.InputError` naming the variable.
    """
    flags = _cpu_flags()
    tuning = _env_overrides(tuning_for(flags, _host_cpu_name()),
                            os.environ.get("PHASEC_TUNING", ""))
    cap = _env_choice("PHASEC_VECTOR_BITS", ("128", "256", "512"))
    if cap and int(cap) < tuning.vector_bits:
        tuning = replace(tuning, vector_bits=int(cap))
    if host_amx(flags, os.environ.get("PHASEC_CPU_FEATURES", "")):
        tuning = replace(tuning, int8_amx=True)
    wino = _env_choice("PHASEC_WINOGRAD", ("0", "2", "4"))
    if wino:
        tuning = replace(tuning, winograd_tile=int(wino))
    return tuning


def _env_choice(name: str, accepted: tuple[str, ...]) -> str:
    """The environment variable ``name`` ("" when unset or empty), which must
    be one of ``accepted``: anything else is refused rather than ignored."""
    value = os.environ.get(name, "").strip()
    if value and value not in accepted:
        raise InputError(f"the environment variable {name} must be one of "
                         f"{', '.join(accepted)} (or unset), not {value!r}")
    return value


def _env_overrides(tuning: TargetTuning, text: str) -> TargetTuning:
    """``tuning`` as ``text`` (``PHASEC_TUNING``) changes it: its first item
    may name a profile (which replaces ``tuning``), the others are
    ``field=value`` of integer fields (``gemm_rows=6,gemm_vectors=4``) or
    boolean ones (``depthwise_narrow_plane=1``). An unknown name or field, or
    a value that is no integer >= 0 (0 or 1 for a boolean), is an
    :class:`~phasec.errors.InputError`."""
    changes: dict[str, int | bool] = {}
    for n, item in enumerate(filter(None, (part.strip() for part in text.split(",")))):
        key, eq, value = (part.strip() for part in item.partition("="))
        if not eq and n == 0 and key in _PROFILES:
            tuning = _PROFILES[key]()
            continue
        kind = type(getattr(tuning, key, None))
        if kind not in (int, bool) or key in _NOT_OVERRIDDEN or not value.isdigit():
            raise InputError(f"the environment variable PHASEC_TUNING takes a profile "
                             f"({', '.join(_PROFILES)}) then field=value pairs of integer "
                             f"or boolean (0 or 1) tuning fields, not {item!r}")
        low, high = (0, 1) if kind is bool else _LIMITS.get(key, (0, None))
        if int(value) < low or (high is not None and int(value) > high):
            raise InputError(f"the environment variable PHASEC_TUNING: {key} must be from "
                             f"{low} to {high if high is not None else 'any size'}, "
                             f"not {value}")
        changes[key] = kind(int(value))
    if changes.get("winograd_tile", 0) not in (0, 2, 4):
        raise InputError("the environment variable PHASEC_TUNING: winograd_tile must be "
                         f"0, 2 or 4, not {changes['winograd_tile']}")
    return replace(tuning, **changes) if changes else tuning


#: fields PHASEC_TUNING does not set: the vector width (PHASEC_VECTOR_BITS caps
#: it) and AMX, which code for a CPU without it would fault on
_NOT_OVERRIDDEN = frozenset({"vector_bits", "int8_amx"})

#: PHASEC_TUNING's bounds of the fields that count a tile's registers, rows
#: or vectors (0 would divide by zero, thousands unroll without end) and of
#: sizes that divide (every other integer field: 0 or more, 0 meaning
#: "always" for a threshold)
_LIMITS: dict[str, tuple[int, int | None]] = {
    **dict.fromkeys(("vector_registers", "gemm_rows", "gemm_vectors", "gemm_wide_tail_vectors",
                     "partial_iterations", "winograd_min_tile_vectors", "im2col_row_vectors"),
                    (1, 64)),
    "gemm_narrow_rows": (0, 64),
    **dict.fromkeys(("gemm_panel_bytes", "gemm_panel_max_cols", "gemv_acc_bytes"), (1, None)),
}

"""A depthwise NCHW conv2d strided along its rows' axis (MobileNet's and
EfficientNet's downsampling 3x3 / 5x5 stride 2), over its input split into
stride phases.

Vectorized along an output row, each tap of the direct convolution reads
the input row with a stride of ``sw``: LLVM makes that load a gather, or an
interleaved load with a gap, which forces a scalar remainder half as long
as the row. Summing over every input column and keeping every ``sw``-th
(the previous form here) did ``sw`` times the work. Instead the input is
de-interleaved once, per channel, into its ``sh x sw`` phases laid flat
(:class:`pool_window.PhaseGeometry`, zeros for the padding): tap ``(r0,
r1)`` of output ``p = y*V + x`` reads phase ``((r0*dh) % sh, (r1*dw) % sw)``
at ``p + (r0*dh)//sh * V + (r1*dw)//sw``, contiguous in ``p``, so the sum
runs over whole vectors of the flat plane whatever the row's width; only
the ``V - OW`` columns past each row (``(KW-1)*dw // sw``: one for a 3x3
stride 2) are computed and dropped. Each kept output is the same sum, in
the same tap order, as the direct convolution's. The copy and the sums are
one hand-written nest per channel, the phases in a buffer of their own
that stays in the cache between the two (all channels' phases as one
tensor went out to memory and back: 144x56x56 3x3/2 112 -> 104 us); over
output rows of up to half a vector, two channels' phases, each channel's
sums reading those copied one channel before (:func:`_pipelined`). The
epilogue (bias, activation) reads the flat plane's rows, contiguous.

Output rows of a vector or more (``OW >= lanes``, no more than a quarter
of the row's vectors wasted; :func:`schedule_rows` takes the stride-1 ones
too, whose one phase is the padded plane): each row is its own whole
vectors, the last one overlapping the one before, stored at the NCHW
output through the extern's ``store_through`` (:func:`te.extern
<phasec.te.operation.extern>`), so the lowering applies the bias and
activation to the sums in registers before the store: no flat plane of
the tensor's size goes out to memory and back, no epilogue nest. For
output rows of two vectors or more the phase rows are whole vectors long
(``PhaseGeometry.of(..., align=lanes)``, the columns past the last one a
tap reads left unwritten): the taps at whole phase columns then load
aligned vectors, where nearly every 64-byte load of a 57-wide row crossed
two cache lines (96x112x112 3x3/2 199-212 -> 188-190 us, 144x56x56 3x3
170-179 -> 165-169 us alone). Their copy reads the input from column 0
in aligned groups of ``sw*lanes`` columns and stores each column phase
shifted so that its vectors land aligned too (``PhaseGeometry.shift``;
the taps add the shift): from the first whole group of phase columns
(input column 1 under a left pad of 1 at stride 2), every load and store
of the copy was split across two cache lines (alone, 16x112x112 3x3/2 +
ReLU 48-55 -> 43 us, 96x112x112 3x3/2 + ReLU6 342 -> 310 us, + SiLU
417-455 -> 355-377 us). A channel's phases of more than
:data:`RING_MIN_BYTES` are a ring of phase rows (:func:`_ring_rows`), so
that they stay in the L1 cache. Rows of 28 (two vectors, the second
overlapping) gained nothing alone and lost 1-2 us inside MobileNetV3-Small
(72x56x56 3x3/2: 37 -> 38-39 us): the phases grow, half the loads stay
unaligned. A window
of more than :data:`ROW_BUFFER_TAPS` taps puts the channel's sums in a
plane of rows in the cache first, then applies the epilogue to it in a
loop of its own (one row's buffer used right after its row, LLVM kept in
registers, spilling a 5x5 window's 25 weights and a SiLU's constants in
one loop: 144x56x56 5x5/2 + SiLU 188-198 -> 174-176 us alone). Inside
MobileNetV2 at 224x224 (one thread, per-node profile):
144x56x56 3x3 + relu6 357 -> 193 us, 192x28x28 102 -> 65 us, 32x112x112
225 -> 182 us, 96x112x112 3x3/2 304 -> 250 us, 144x56x56 3x3/2 101 ->
84 us (bench/README.md).

A 3x3 (or narrower) window whose strided output row spans at most half a
vector of input (``2*OW*sw <= lanes``: at 16 lanes MobileNet's 8x8 and
smaller images) keeps the wide form: the row sums over every input column of a padded copy,
one vector a row, and every ``sw``-th column is kept in a buffer of its own.
There the phases' copy costs more than the products it saves (measured per
kernel against ORT, bench/README.md).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from phasec.target import tuning
from phasec.te import operation as te
from phasec.te.operation import i64, row_col
from phasec.ir.tir import (
    Allocate, BinaryOp, Buffer, BufferLoad, BufferStore, For, IntImm, PrimExpr, Select,
    Stmt, Var,
)
from phasec.te.schedules.pool_window import PhaseGeometry, padded_input
from phasec.te.stmt import seq
from phasec.te.schedules.workloads import ConvWorkload
from phasec.te.tensor import OWN_NEST, Tensor

__all__ = ["schedule", "schedule_rows", "ROW_BUFFER_TAPS", "FLAT_PLANE_TAPS", "COPY_LEAD",
           "RING_ROWS", "RING_MIN_BYTES", "PIPELINE_CHANNELS"]

#: a window of more taps puts the channel's sums in a plane of rows, then
#: applies the epilogue to it in a loop of its own (see _row)
ROW_BUFFER_TAPS = 9
#: a window of at most this many taps over rows narrower than a vector
#: takes the per-channel plane and its flat sums (see schedule_rows)
FLAT_PLANE_TAPS = 25
#: output rows of rows: schedule_rows copies each input row this many output
#: rows before the first that reads it (see _rows_as_read). Read by the very
#: next row, a row just stored was read back across two stores, which the
#: store buffer cannot forward (192x28x28 3x3: 75 -> 107 us; 1 row early 74,
#: 2 65, 3 69; 96x112x112 3x3/2 + SiLU 416 -> 392, 302, 307, 312)
COPY_LEAD = 2


def schedule(w: ConvWorkload) -> Tensor | None:
    """The depthwise convolution ``w`` (NCHW float conv2d) over its input's
    stride phases, or wide then decimated (see the module docstring); None
    unless it is depthwise (one input and one output channel per group),
    strided along the rows' axis, with static sizes."""
    dims = w.depthwise_dims()
    if dims is None:
        return None
    n, c, H, W, KH, KW, OH, OW = dims
    sh, sw = w.strides
    if not (sw > 1 and OW >= 2):
        return None
    lanes = tuning.host_tuning().lanes(int(w.data.dtype[5:]))
    if (KW - 1) * w.dilation[1] <= 2 and 2 * OW * sw <= lanes:
        return _wide(w, n, c, OH, OW, KH, KW)
    if OW >= lanes and not _row_waste(OW, lanes):
        # rows of vectors: written as NCHW rows (see schedule_rows)
        return _phased(w, n, c, (H, W), (OH, OW), (KH, KW), lanes, rows_out=True)
    return _phased(w, n, c, (H, W), (OH, OW), (KH, KW), lanes)


def schedule_rows(w: ConvWorkload) -> Tensor | None:
    """The depthwise convolution ``w`` (NCHW float conv2d), stride 1, output
    rows of more than a vector with at most a quarter of their vectors
    wasted, static sizes: per channel its padded plane in a buffer of its
    own, then each row in whole vectors stored through the epilogue (see
    the module docstring). None for any other convolution. The schedules
    that took them before (:mod:`conv_flat_rows` for rows of a few vectors,
    the direct one for whole vectors) wrote the padded input, the sums and
    the output through memory in turn. Rows of one vector keep the direct
    schedule: 96x16x16 3x3 + relu6 (MobileNetV2 at 64x64) 11.4 -> 13.3 us
    here, the per-row copy and borders weighing more than the pass saved.

    Rows narrower than a vector, a window of 2 to 25 taps (3x3 and 5x5
    over 14x14 and 7x7; on hosts other than the Intel Xeon of issue 29's
    round 6, its tuning's ``depthwise_narrow_plane``, rows of more than
    half a vector and 2 to 9 taps, as measured on Zen 4): the padded plane
    per channel in a buffer of its own, then the flat sums (the strided
    schedule's flat form, one phase), the epilogue reading their rows:
    :mod:`conv_flat_rows` wrote the padded input for all channels through
    memory first (384x14x14 3x3 + relu6 40 -> 35 us alone, 147-153 ->
    124-126 us inside MobileNetV2). Rows of half a vector
    or less (7x7) lost this way on Zen 4 (960x7x7 38 -> 42 us); on the
    Xeon, each channel's sums reading the phases copied a channel before
    (see :func:`_pipelined`), they gain (45-53 -> 33-37 us, 1152x7x7 +
    SiLU 79 -> 66-69 us); there a window of up to 9 taps whose output is
    the input's size (``same`` padding) takes :func:`_flat_same` instead
    (960x7x7 3x3 44 -> 39 us). Windows of up to :data:`FLAT_PLANE_TAPS` taps:
    5x5 lost on Zen 4 (240x14x14 5x5 48 -> 60 us) but gains on the Xeon
    (240x14x14 5x5 + hardswish 61-64 -> 57-58 us, 480x14x14 5x5 + SiLU
    145-152 -> 133-135, 672x14x14 5x5 + SiLU 218-228 -> 188-191). Where
    32 vector registers hold a block of rows beside the weights, the 3x3 and
    5x5 rows of more than half a vector up to two vectors (not whole ones)
    take :mod:`conv_depthwise_blocked` ahead of this in the table (one or
    two vectors a row, several rows a loop)."""
    dims = w.depthwise_dims()
    if dims is None or tuple(w.strides) != (1, 1):
        return None
    n, c, H, W, KH, KW, OH, OW = dims
    lanes = tuning.host_tuning().lanes(int(w.data.dtype[5:]))
    xeon = tuning.host_tuning().depthwise_narrow_plane  # (measured on each: see above)
    if (lanes > OW if xeon else 2 * OW > lanes > OW) and OH >= 2 \
            and 1 < KH * KW <= (FLAT_PLANE_TAPS if xeon else ROW_BUFFER_TAPS):
        # rows under a vector (more than half a vector), 3x3 or 5x5 (3x3);
        # a "same" 3x3 over rows of up to half a vector: the plane copied flat
        if (H, W) == (OH, OW) and 2 * OW <= lanes <= OH * OW and KH * KW <= ROW_BUFFER_TAPS:
            return _flat_same(w, n, c, (H, W), (KH, KW), lanes)
        return _phased(w, n, c, (H, W), (OH, OW), (KH, KW), lanes)
    if OW <= lanes or OH < 2 or _row_waste(OW, lanes):
        return None
    return _phased(w, n, c, (H, W), (OH, OW), (KH, KW), lanes, rows_out=True)


def _row_waste(OW: int, lanes: int) -> bool:
    """Whether a row of ``OW`` columns in whole vectors computes more than
    a quarter more columns than it keeps (20 of 32; 28 or 56 of 32 or 64
    do not): there the flat rows, a few dropped columns a row, cost less."""
    return -(-OW // lanes) * lanes * 4 > OW * 5


def _phased(w: ConvWorkload, n: int, c: int, hw: tuple[int, int], out_hw: tuple[int, int],
            window: tuple[int, int], lanes: int, rows_out: bool = False) -> Tensor:
    (sh, sw), (dh, dw), dt = w.strides, w.dilation, w.data.dtype
    KH, KW = window
    OH, OW = out_hw
    geo = PhaseGeometry.of(hw, out_hw, window, (sh, sw), (dh, dw),
                           (w.padding[0], w.padding[1]), lanes,
                           lanes if rows_out and OW >= 2 * lanes else 1)
    V, columns, length = geo.V, geo.columns, geo.length
    rows_in = max(0, min(hw[0], geo.U * sh - w.padding[0]))  # input rows copied
    # a ring of phase rows (rows of two vectors or more), see _ring_rows
    whole_bytes = sh * sw * length * np.dtype(str(dt)).itemsize
    ring = _ring_rows(geo, OH, window, dh, rows_in) \
        if rows_out and geo.shifts and whole_bytes > RING_MIN_BYTES else 0
    if ring:
        length = -(-(ring * V + max(geo.shifts)) // lanes) * lanes
    Store = Callable[[PrimExpr, tuple[PrimExpr, ...]], Stmt]

    def build(bufs: list[Buffer], out: Buffer, store: Store | None = None) -> Stmt:
        x, weight = bufs
        b, ch = Var("b", "int64"), Var("ch", "int64")
        # one channel's phases at a time, in a buffer of its own (see the
        # module docstring); a pipelined flat form keeps two, see _pipelined
        phase_len = sh * sw * length
        pipeline = not rows_out and 2 * OW <= lanes
        phases = Buffer("stride_phases", (i64(phase_len * (2 if pipeline else 1)),), dt)

        def taps(index: Callable[[int, int], PrimExpr], ch: PrimExpr = ch) -> PrimExpr:
            # the window's products, tap (r0, r1) reading phases[index(r0, r1)]
            terms: list[PrimExpr] = []
            for r0 in range(KH):      # the direct convolution's tap order
                for r1 in range(KW):
                    terms.append(BufferLoad(phases, (index(r0, r1),))
                                 * BufferLoad(weight, (ch, i64(0), i64(r0), i64(r1))))
            acc = terms[0]
            for term in terms[1:]:
                acc = acc + term
            return acc

        def in_row(r0: int, r1: int) -> int:
            # tap (r0, r1)'s phase, and its column in the phase row
            y_tap, x_tap = r0 * dh, r1 * dw
            return ((y_tap % sh) * sw + x_tap % sw) * length + x_tap // sw \
                + geo.shift(x_tap % sw)

        def window_sum(p: PrimExpr, ch: PrimExpr = ch, base: PrimExpr | None = None
                       ) -> PrimExpr:
            start = p if base is None else base + p
            return taps(lambda r0, r1: start + i64(in_row(r0, r1) + r0 * dh // sh * V), ch)

        def row_sum(y: PrimExpr, x: PrimExpr) -> PrimExpr:
            if not ring:
                return window_sum(y * V + x)
            return taps(lambda r0, r1: ((y + r0 * dh // sh) % ring) * V + x
                        + i64(in_row(r0, r1)))
        work = n * c * (sh * sw * length + columns * KH * KW)
        par = c > 1 and work >= tuning.host_tuning().parallel_min_work
        if not rows_out:
            def at(slot: PrimExpr) -> Callable[[PrimExpr, PrimExpr], tuple[Buffer, PrimExpr]]:
                return lambda f, q: (phases, slot * phase_len + f * length + q)

            def fill(slot: PrimExpr) -> Stmt:
                # the fills of the phase rows no input lands in: once a slot
                # (no channel's rows write there), see _pipelined
                return seq(geo.copy_by_rows(x, b, i64(0), te.const(0, dt), at(slot), lanes)[0])

            def copy(c_: PrimExpr, slot: PrimExpr) -> Stmt:
                return _copy_rows(geo, x, b, c_, te.const(0, dt), at(slot), lanes,
                                  _block(c, pipeline) > 1)

            def sums(c_: PrimExpr, slot: PrimExpr) -> Stmt:
                p = Var("p", "int64")
                return For(p, i64(0), i64(columns), "vectorized", BufferStore(
                    out, window_sum(p, c_, slot * phase_len), (b, c_, p)))
            return For(b, i64(0), i64(n), "serial",
                       _pipelined(c, pipeline, par, phases, fill, copy, sums))

        def into_phases(f: PrimExpr, q: PrimExpr) -> tuple[Buffer, PrimExpr]:
            return phases, f * length + q
        stmts, rows, copy_row = geo.copy_by_rows(x, b, ch, te.const(0, dt), into_phases,
                                                 lanes, ring)
        assert not ring or rows == rows_in  # (the order _ring_rows simulated)
        below = geo.fill_rows(geo.padding_rows()[1], te.const(0, dt), into_phases, ring) \
            if ring else []

        def put(value: PrimExpr, idx: tuple[PrimExpr, ...]) -> Stmt:
            return BufferStore(out, value, idx) if store is None else store(value, idx)
        # a slot of whole vectors each (overlapping, the last vector's load
        # would span two stores, which the store buffer cannot forward)
        row_len = -(-OW // lanes) * lanes
        sums = Buffer("row_sums", (i64(OH * row_len),), dt) \
            if KH * KW > ROW_BUFFER_TAPS \
            else None
        row, epilogue = _row(b, ch, OW, lanes, row_sum, put, sums)
        stmts += _rows_as_read(OH, sh, (KH - 1) * dh // sh, w.padding[0], rows, row,
                               copy_row, below)
        if sums is not None:
            y3 = Var("y3", "int64")
            stmts.append(For(y3, i64(0), i64(OH), "serial", epilogue(y3)))
            stmts = [Allocate(sums, seq(stmts))]
        return For(b, i64(0), i64(n), "serial", For(
            ch, i64(0), i64(c), "parallel" if par else "serial", Allocate(phases, seq(stmts))))
    if rows_out:
        # the epilogue (bias, activation) applied before each store
        return te.extern((i64(n), i64(c), i64(OH), i64(OW)), dt, [w.data, w.weight], build,
                         name="T_conv2d", store_through=build)
    flat = te.extern((i64(n), i64(c), i64(columns)), dt, [w.data, w.weight], build,
                     name="T_conv2d_flat")
    # inlined: the epilogue (bias, activation) reads the flat plane's rows,
    # contiguous, with no copy between
    return te.compute(w.out_shape, lambda b, ch, y, x: flat[b, ch, y * V + x], name="T_conv2d")


def _uflat(start: int, j: PrimExpr, width: int) -> tuple[PrimExpr, PrimExpr]:
    """``(q // width, q % width)`` of ``q = start + j`` (``j >= 0`` a vector's
    lane), unsigned and with the whole rows of ``start`` outside the
    division: LLVM's scalar evolution sees the row-major address of the
    pair as ``q`` (contiguous lanes), as it does for ``GemmPlan.flat``'s
    columns. Divided whole, ``(start + j) /u width`` with ``start`` not 0
    became a scatter (three of the four vectors of a 7x7 plane: 1152x7x7 +
    SiLU 61 -> 52 us, 960x7x7 29 -> 27 us written this way)."""
    row, col = row_col(i64(start % width) + j, width)
    return (i64(start // width) + row if start >= width else row, col)


def _flat_same(w: ConvWorkload, n: int, c: int, hw: tuple[int, int],
               window: tuple[int, int], lanes: int) -> Tensor:
    """A stride-1 depthwise convolution whose output is its input's size
    (``same`` padding), rows narrower than a vector: per channel, its plane
    copied whole and contiguous between runs of zeros (the padding rows
    above and below), then every output ``p = y*W + x`` summed in whole
    vectors of ``p`` (the last overlapping), tap ``(r0, r1)`` reading the
    copy at ``p + (r0*dh - top)*W + r1*dw - left``: no padded rows, no
    dropped columns. A tap whose column falls outside the row
    (``x + r1*dw - left`` not in ``[0, W)``) would read the neighbouring
    row's end: it reads a zero instead (a select on a mask of the row's
    columns, kept after the slots), so each product, and the sum in the
    direct convolution's tap order, is the padded convolution's. The sums
    are stored through the epilogue at ``(p // W, p % W)`` (contiguous: one
    vector store), channels pipelined as the flat form's (see
    :func:`_pipelined`). Against that flat form (rows of ``W + KW - 1``,
    row by row copies, the epilogue over 7-wide rows), alone at one thread
    on the Intel Xeon: 960x7x7 3x3 + ReLU6 44 -> 39 us, 1152x7x7 3x3 +
    SiLU 76 -> 68 us; inside MobileNetV2 the three 960x7x7 layers 111 -> 77
    us, inside EfficientNet-B0 the 1152x7x7 + SiLU 80 -> 64 us. Over 14x14
    (rows of more than half a vector, each channel's copy then its sums)
    it lost: 576x14x14 3x3 54 -> 59 us, 384x14x14 51 -> 56, 672x14x14 5x5
    + SiLU 205 -> 260 (a 5x5 window masks 20 of its 25 taps)."""
    (dh, dw), dt = w.dilation, w.data.dtype
    H, W = hw
    KH, KW = window
    top, left = w.padding[0], w.padding[1]
    P = H * W
    lead = top * W + left                               # zeros before the plane
    reach = ((KH - 1) * dh - top) * W + (KW - 1) * dw - left
    slot_len = -(-(lead + P + max(reach, 0)) // lanes) * lanes
    edges = [r1 for r1 in range(KW) if r1 * dw != left]  # the taps that leave a row
    masks = {r1: k for k, r1 in enumerate(edges)}       # mask rows after the two slots
    mask_at = 2 * slot_len
    total = mask_at + len(edges) * P
    starts = list(range(0, P - lanes + 1, lanes))
    if starts[-1] + lanes < P:
        starts.append(P - lanes)
    zero = te.const(0, dt)
    Store = Callable[[PrimExpr, tuple[PrimExpr, ...]], Stmt]

    def build(bufs: list[Buffer], out: Buffer, store: Store | None = None) -> Stmt:
        x, weight = bufs
        b = Var("b", "int64")
        buf = Buffer("same_plane", (i64(total),), dt)

        def put(value: PrimExpr, idx: tuple[PrimExpr, ...]) -> Stmt:
            return BufferStore(out, value, idx) if store is None else store(value, idx)

        def fill(slot: PrimExpr) -> Stmt:
            # the zeros around the plane: once a slot (no copy writes there);
            # the column masks with the first slot
            stmts = []
            for lo, hi in ((0, lead), (lead + P, slot_len)):
                q = Var("q", "int64")
                if hi > lo:
                    stmts.append(For(q, i64(lo), i64(hi - lo), "serial",
                                     BufferStore(buf, zero, (slot * slot_len + q,))))
            if isinstance(slot, IntImm) and slot.value == 0:
                stmts += [column_mask(buf, mask_at + k * P, P, W, r1 * dw - left)
                          for r1, k in masks.items()]
            return seq(stmts)

        def vectors(one: Callable[[int, Var], Stmt]) -> Stmt:
            # one(start, j) over every output position start + j in whole
            # vectors, the last overlapping the one before
            loops = []
            for start in starts:
                j = Var("j", "int64")
                loops.append(For(j, i64(0), i64(lanes), "vectorized", one(start, j)))
            return seq(loops)

        def copy(c_: PrimExpr, slot: PrimExpr) -> Stmt:
            return vectors(lambda start, j: BufferStore(
                buf, BufferLoad(x, (b, c_, *_uflat(start, j, W))),
                (slot * slot_len + i64(lead + start) + j,)))

        def total_at(c_: PrimExpr, slot: PrimExpr, p: PrimExpr) -> PrimExpr:
            def tap(r0: int, r1: int) -> PrimExpr:
                off = (r0 * dh - top) * W + r1 * dw - left
                return BufferLoad(buf, (slot * slot_len + p + i64(lead + off),))
            return masked_taps((KH, KW), tap, buf, {r1: mask_at + k * P for r1, k in masks.items()},
                               p, weight, c_)

        def sums(c_: PrimExpr, slot: PrimExpr) -> Stmt:
            return vectors(lambda start, j: put(total_at(c_, slot, i64(start) + j),
                                                (b, c_, *_uflat(start, j, W))))
        work = n * c * (slot_len + P * KH * KW)
        par = c > 1 and work >= tuning.host_tuning().parallel_min_work
        body = _pipelined(c, True, par, buf, fill, copy, sums)
        return For(b, i64(0), i64(n), "serial", body)
    return te.extern((i64(n), i64(c), i64(H), i64(W)), dt, [w.data, w.weight], build,
                     name="T_conv2d", store_through=build)


def column_mask(buf: Buffer, at: int, P: int, W: int, shift: int) -> Stmt:
    """The mask of a tap whose column is ``shift`` from its output's, over
    ``P`` flat outputs of rows ``W`` wide, stored in ``buf`` from ``at``:
    1.0 where the tap's column stays in the row, else 0.0."""
    m = Var("m", "int64")
    col = m % W + shift
    inside = BinaryOp("and", BinaryOp(">=", col, i64(0)), BinaryOp("<", col, i64(W)))
    one, zero = te.const(1, buf.dtype), te.const(0, buf.dtype)
    return For(m, i64(0), i64(P), "serial",
               BufferStore(buf, Select(inside, one, zero), (i64(at) + m,)))


def masked_taps(window: tuple[int, int], tap: Callable[[int, int], PrimExpr], buf: Buffer,
                masks: dict[int, int], p: PrimExpr, weight: Buffer, ch: PrimExpr) -> PrimExpr:
    """The window's sum of products at flat output ``p``, in the direct
    convolution's tap order, tap ``(r0, r1)`` reading ``tap(r0, r1)``, or
    0.0 where its column's mask (:func:`column_mask`, in ``buf`` at
    ``masks[r1]``) is 0.0: a select, so that a value read past the row
    (an infinity) reaches no other output."""
    zero = te.const(0, buf.dtype)
    acc: PrimExpr | None = None
    for r0 in range(window[0]):
        for r1 in range(window[1]):
            v = tap(r0, r1)
            if r1 in masks:
                m = BufferLoad(buf, (p + i64(masks[r1]),))
                v = Select(BinaryOp("!=", m, zero), v, zero)
            term = v * BufferLoad(weight, (ch, i64(0), i64(r0), i64(r1)))
            acc = term if acc is None else acc + term
    assert acc is not None
    return acc


#: channels a block of the flat form's pipeline takes at most (see _pipelined)
PIPELINE_CHANNELS = 16


def _pipelined(c: int, pipeline: bool, parallel: bool, phases: Buffer,
               fill: Callable[[PrimExpr], Stmt],
               copy: Callable[[PrimExpr, PrimExpr], Stmt],
               sums: Callable[[PrimExpr, PrimExpr], Stmt]) -> Stmt:
    """The ``c`` channels of the flat form in blocks of ``B`` (with
    ``pipeline``, the largest even divisor of ``c`` up to
    :data:`PIPELINE_CHANNELS`; else, or for an odd ``c``, 1: each channel's
    copy then its sums), the blocks ``parallel`` or not: in a block,
    channel ``j + 1`` is copied into its phases (``copy(channel, slot)``,
    slot ``(j + 1) % 2`` of two) before channel ``j``'s sums
    (``sums(channel, slot)``) read the other slot, two channels an
    iteration so that the slots are constants.
    Read right after the copy, the sums' whole-vector loads each spanned
    several of the copy's narrower stores still in flight, which the store
    buffer cannot forward: every load waited for them to reach the cache
    (Intel Xeon, one thread: 960x7x7 3x3 45-53 -> 33-37 us, 576x14x14
    3x3/2 62-69 -> 43 us). Only for output rows of up to half a vector (a
    channel's sums a few dozen FMAs, no more than its copy): over 14x14
    outputs it lost (384x14x14 3x3 32 -> 43 us, 192x28x28 3x3/2 37 -> 42-53
    us). Each channel's sums are those of the copy before: the values are
    unchanged."""
    B = _block(c, pipeline)
    blk, k = Var("blk", "int64"), Var("k", "int64")
    first = blk * B
    fills = [fill(i64(0))] + ([fill(i64(1))] if B > 1 else [])
    if B == 1:
        body = [copy(first, i64(0)), sums(first, i64(0))]
    else:
        def pair(at: PrimExpr, last: bool) -> list[Stmt]:
            # channels at, at + 1 (slots 0, 1), at + 2 copied unless last
            return [copy(at + 1, i64(1)), sums(at, i64(0)),
                    *([] if last else [copy(at + 2, i64(0))]), sums(at + 1, i64(1))]
        body = [copy(first, i64(0))]
        if B > 2:
            body.append(For(k, i64(0), i64(B // 2 - 1), "serial", seq(pair(first + 2 * k,
                                                                             False))))
        body += pair(first + (B - 2), True)
    return For(blk, i64(0), i64(c // B), "parallel" if parallel else "serial",
               Allocate(phases, seq(fills + body)))


def _copy_rows(geo: PhaseGeometry, x: Buffer, b: PrimExpr, ch: PrimExpr, fill: PrimExpr,
               at: Callable[[PrimExpr, PrimExpr], tuple[Buffer, PrimExpr]], lanes: int,
               whole: bool) -> Stmt:
    """The input rows of channel ``(b, ch)`` into its phases (the flat form,
    an unaligned geometry; the fills of the rows no input lands in are the
    caller's): each whole phase row read from the channel's plane as if
    flat, ``x[g // W, g % W]`` for ``g = y*W + v*sw + e - left`` over every
    phase column ``v`` (one interleaved group of ``sw`` loads a vector of
    ``v``, in vectors of the largest power of two up to the row, the last
    overlapping), then ``fill`` stored over the few columns past the row's
    ends (there the loads read the neighbouring rows' elements). The rows
    whose group would read before the plane or past it take
    ``PhaseGeometry.copy_by_rows``' row (the groups within the row, each
    border column one by one: 576x14x14 3x3/2, two 4-lane groups and four
    single columns a row). Each phase element holds what that row copy
    stores: the values are unchanged."""
    _, rows, geo_row = geo.copy_by_rows(x, b, ch, fill, at, lanes)
    (sh, sw), (top, left), V, W = geo.strides, geo.lead, geo.V, geo.W
    reach = V * sw - 1 - left                         # the last column a row's group reads
    first = min(rows, -(-left // W))                  # rows whose groups start in the plane
    stop = max(first, min(rows, (geo.H * W - 1 - reach) // W + 1))  # ... and end in it
    width = 1 << (V.bit_length() - 1)
    y = Var("y", "int64")
    if not whole or V < 4 or stop <= first or sw < 2:
        return For(y, i64(0), i64(rows), "serial", geo_row(y)) if rows > 0 else seq([])
    a, u = (y + top) % sh, (y + top) // sh

    def group(start: int) -> Stmt:
        j = Var("j", "int64")
        stores = []
        for e in range(sw):
            g = y * W + ((start + j) * sw + (e - left))
            where = at(a * sw + e, u * V + (start + j))
            stores.append(BufferStore(where[0], BufferLoad(x, (b, ch, g // W, g % W)),
                                      where[1:]))
        return For(j, i64(0), i64(width), "vectorized", seq(stores))
    starts = list(range(0, V - width + 1, width))
    if starts[-1] + width < V:
        starts.append(V - width)
    body = [group(start) for start in starts]
    for e in range(sw):                               # past the row's ends: the fill
        for col in range(V):
            if not 0 <= col * sw + e - left < W:
                where = at(a * sw + e, u * V + i64(col))
                body.append(BufferStore(where[0], fill, where[1:]))
    loops = []
    y0, y1 = Var("y0", "int64"), Var("y1", "int64")
    if first:
        loops.append(For(y0, i64(0), i64(first), "serial", geo_row(y0)))
    loops.append(For(y, i64(first), i64(stop - first), "serial", seq(body)))
    if stop < rows:
        loops.append(For(y1, i64(stop), i64(rows - stop), "serial", geo_row(y1)))
    return seq(loops)


def _block(c: int, pipeline: bool) -> int:
    """The channels of a block of :func:`_pipelined`."""
    evens = [d for d in range(2, min(c, PIPELINE_CHANNELS) + 1, 2) if c % d == 0]
    return max(evens, default=1) if pipeline else 1


def _segments(OH: int, sh: int, reach: int, top: int, rows: int) -> tuple[int, int] | None:
    """``(ahead, steady)`` of :func:`_rows_as_read`'s order: the input rows
    copied first, then output rows ``[0, steady)`` each followed by the
    copies of the ``sh`` input rows the next one reads, the rest of the
    input rows, the rest of the output rows; None when every input row is
    copied before the first output row."""
    ahead = (reach + 1 + COPY_LEAD) * sh - top
    if not 0 < ahead < rows:  # (the padding takes the first rows, or none is left)
        return None
    return ahead, max(0, min(OH, (rows - ahead - sh) // sh + 1))


def _rows_as_read(OH: int, sh: int, reach: int, top: int, rows: int,
                  row: Callable[[Var], Stmt], copy_row: Callable[..., Stmt],
                  below: list[Stmt]) -> list[Stmt]:
    """The output rows, each input row copied into the phases just before
    the first output row that reads it (``copy_row(y, (phase, phase row))``:
    the copy's loads from memory run beside the sums, whose input rows are
    still in the L1 cache): output row ``y`` reads the phase rows up to
    ``y + reach``, so the input rows below ``(y + reach + 1)*sh - top``,
    copied :data:`COPY_LEAD` output rows early. The rows whose
    copy would need a test (past the input's last row) are copied before
    the last output rows, in one loop, then ``below`` (the fills of a
    ring's phase rows below the input, see :func:`_ring_rows`)."""
    out: list[Stmt] = []
    y0, y, y1, y2 = (Var(v, "int64") for v in ("y0", "y", "y1", "y2"))
    order = _segments(OH, sh, reach, top, rows)
    if order is None:
        if rows:
            out.append(For(y0, i64(0), i64(rows), "serial", copy_row(y0)))
        out += below
        out.append(For(y, i64(0), i64(OH), "serial", row(y)))
        return out
    ahead, steady = order
    out.append(For(y0, i64(0), i64(ahead), "serial", copy_row(y0)))
    # output rows [0, steady) each copy the sh whole input rows the next one reads
    if steady:
        copies = [copy_row(i64(ahead + t) + y * sh,
                           (i64((ahead + t + top) % sh), y + (ahead + t + top) // sh))
                  for t in range(sh)]
        out.append(For(y, i64(0), i64(steady), "serial", seq([row(y), *copies])))
    left = ahead + steady * sh
    if left < rows:
        out.append(For(y1, i64(left), i64(rows - left), "serial", copy_row(y1)))
    out += below
    if steady < OH:
        out.append(For(y2, i64(steady), i64(OH - steady), "serial", row(y2)))
    return out


#: the ring sizes (phase rows a phase) :func:`_ring_rows` tries, smallest first
#: (8 measured as 16 at stride 2, slower at stride 1: 32x112x112 3x3 126-128
#: against 138-165 us)
RING_ROWS = (16, 32, 64)
#: a channel's phases of more bytes than this take a ring of phase rows (a
#: ring of 144x56x56 3x3's 15 KB, in the L1 cache either way, measured
#: 186-214 -> 201-235 us: the slots' indices cost)
RING_MIN_BYTES = 32 * 1024


def _ring_rows(geo: PhaseGeometry, OH: int, window: tuple[int, int], dh: int, rows: int
               ) -> int:
    """The fewest phase rows (of :data:`RING_ROWS`, fewer than the phase's
    ``U``) a ring of which holds every phase row an output row reads when
    it reads it, in :func:`_rows_as_read`'s order (the rows above the input
    filled first, those below after the last copy); 0 for none. Simulated
    here, slot by slot. A channel's phases over 112-wide rows at stride 2
    are 58 KB, past a 48 KB L1: written out to L2 and read back, where a
    ring of 16 rows a phase is 16 KB (alone, one thread: 16x112x112 3x3/2 +
    ReLU 46 -> 29-30 us, 96x112x112 3x3/2 + ReLU6 317 -> 264-268 us, +
    SiLU 388-416 -> 275-277 us, 32x112x112 3x3 143 -> 137-139 us)."""
    (sh, _), top = geo.strides, geo.lead[0]
    reach = (window[0] - 1) * dh // sh
    above, below = geo.padding_rows()
    order = _segments(OH, sh, reach, top, rows)
    events: list[tuple[str, int]] = []
    if order is None:
        events += [("copy", r) for r in range(rows)] + [("below", 0)]
        events += [("row", y) for y in range(OH)]
    else:
        ahead, steady = order
        events += [("copy", r) for r in range(ahead)]
        for y in range(steady):
            events += [("row", y)] + [("copy", ahead + t + y * sh) for t in range(sh)]
        events += [("copy", r) for r in range(ahead + steady * sh, rows)] + [("below", 0)]
        events += [("row", y) for y in range(steady, OH)]
    reads = [(r0 * dh % sh, r0 * dh // sh) for r0 in range(window[0])]
    for ring in RING_ROWS:
        if ring >= geo.U:
            return 0
        held = {(a, u % ring): u for a, u in above}
        fits = True
        for kind, k in events:
            if kind == "copy":
                a, u = (k + top) % sh, (k + top) // sh
                held[(a, u % ring)] = u
            elif kind == "below":
                held.update({(a, u % ring): u for a, u in below})
            elif any(held.get((a, (k + du) % ring)) != k + du for a, du in reads):
                fits = False
                break
        if fits:
            return ring
    return 0


def _row(b: Var, ch: Var, OW: int, lanes: int,
         window_sum: Callable[[PrimExpr, PrimExpr], PrimExpr],
         put: Callable[[PrimExpr, tuple[PrimExpr, ...]], Stmt], sums: Buffer | None
         ) -> tuple[Callable[[Var], Stmt], Callable[[Var], Stmt]]:
    """``(row, epilogue)``: output row ``y`` (``OW >= lanes`` wide) in whole
    vectors, the last one overlapping the one before (the same values
    stored twice) when the row is not whole vectors; output ``(y, x)`` is
    ``window_sum(y, x)`` (its sum over the phases). Without
    ``sums``, ``row(y)`` stores through ``put`` (``epilogue`` is not used).
    With ``sums`` (the channel's plane of rows of whole vectors), ``row(y)``
    stores its sums there and ``epilogue(y)`` puts row ``y`` of them through
    ``put``, in a loop of its own after the sums: the sums keep a 5x5
    window's 25 weights in registers, the epilogue a SiLU's constants. (A
    row buffer used right after its row was one row's registers to LLVM,
    which spilled the weights and the constants in one loop: 144x56x56
    5x5/2 + SiLU.)"""
    row_len = -(-OW // lanes) * lanes

    def vectors(one: Callable[[PrimExpr, PrimExpr, Var], Stmt]) -> list[Stmt]:
        # one(start column, slot of the row in the sums, lane variable):
        # fresh loop variables for each loop
        k, j = Var("k", "int64"), Var("j", "int64")
        whole = OW // lanes
        row = [one(i64(0), i64(0), j) if whole == 1 else For(
            k, i64(0), i64(whole), "serial", one(k * lanes, k * lanes, j))]
        if OW % lanes:
            row.append(one(i64(OW - lanes), i64(whole * lanes), j))
        return row

    def row(y: Var) -> Stmt:
        if sums is None:
            return seq(vectors(lambda start, _, j: For(
                j, i64(0), i64(lanes), "vectorized",
                put(window_sum(y, start + j), (b, ch, y, start + j)))))
        return seq(vectors(lambda start, slot, j: For(
            j, i64(0), i64(lanes), "vectorized",
            BufferStore(sums, window_sum(y, start + j), (y * row_len + slot + j,)))))

    def epilogue(y: Var) -> Stmt:
        assert sums is not None
        return seq(vectors(lambda start, slot, j: For(
            j, i64(0), i64(lanes), "vectorized",
            put(BufferLoad(sums, (y * row_len + slot + j,)), (b, ch, y, start + j)))))
    return row, epilogue


def _wide(w: ConvWorkload, n: int, c: int, OH: int, OW: int, KH: int, KW: int) -> Tensor:
    (sh, sw), (dh, dw), weight = w.strides, w.dilation, w.weight
    top, left = w.padding[0], w.padding[1]
    columns = OW * sw
    # the padded copy reaches the last column the extra columns' taps read
    # (input coordinates, exclusive), and the last row the kept rows' taps read
    reach = [(OH - 1) * sh + (KH - 1) * dh - top + 1, columns + (KW - 1) * dw - left]
    zero = te.const(0, w.data.dtype)
    padded = padded_input(w.data, w.padding, 2, zero, reach)
    if padded is None:  # no padding: pad anyway on the right for the extra columns
        padded = padded_input(w.data, [0, 0, 0, 1], 2, zero, reach)
    ry, rx = te.reduce_axis(KH, "r0"), te.reduce_axis(KW, "r1")
    wide = te.compute(
        (i64(n), i64(c), i64(OH), i64(columns)),
        lambda b, ch, y, x: te.sum(
            padded[b, ch, y * sh + ry.var * dh, x + rx.var * dw] * weight[ch, 0, ry.var, rx.var],
            axis=[ry, rx]),
        name="T_conv2d_wide", tag="conv2d")
    # kept columns in a buffer of their own: read every sw-th element, the
    # epilogue's loads would be a gather or half scalar (a SiLU's exp too)
    return te.compute(w.out_shape, lambda b, ch, y, x: wide[b, ch, y, x * sw], name="T_conv2d",
                      inline=False, attrs={OWN_NEST: True})

"""A depthwise NCHW conv2d at stride 2 along its rows whose output rows are
at most half a vector (MobileNetV2's 576x14x14 3x3/2: 7x7 outputs), summed
over the output's own flat positions.

:mod:`conv_depthwise_strided`'s flat form keeps its phase rows ``OW +
(KW-1)*dw // sw`` wide (8 for 7 outputs): the sums run over ``OH*V`` flat
columns, go to a plane of the whole tensor and come back for the epilogue,
7-wide rows at a time. Here each phase row is exactly ``OW`` wide, so that
output ``p = y*OW + x`` is contiguous in the phases as in the output:

* **Phases.** Phase ``(a, b)`` row ``i`` column ``j`` holds input ``(i*sh +
  a, j*2 + b)`` (zero past the input), rows ``i`` from the first a tap
  reaches (``-1`` under a top pad of 1) to the last. Tap ``(r0, r1)`` with
  ``r0*dh - top = di*sh + a`` and ``r1*dw - left = dj*2 + b`` reads phase
  ``(a, b)`` at ``p + di*OW + dj``, contiguous in ``p``. Where ``x + dj``
  leaves ``[0, OW)`` the read lands in a neighbouring row: taken only when
  every such tap is padding (a left pad of 1: ``dj = -1`` at ``x = 0``),
  and there a select on a mask of the row's columns reads 0.0 instead, as
  in :func:`conv_depthwise_strided._flat_same`: each product and the sum in
  the direct convolution's tap order are the padded convolution's
  (infinities and NaN included).
* **The copy.** Each input row whose whole vector (``2E`` columns, ``E =
  lanes // 2``) stays inside the plane is read as one vector through the
  unsigned flat pair and de-interleaved into its two column phases, ``E``
  elements each: the ``E - OW`` past a phase row land at the next row's
  start (copied after it, in row order) or in the phase's tail, never read
  unmasked. The plane's last rows are copied element by element, the
  columns past the input and the phase rows below it stored as zeros after
  the rows, each channel; the rows above it, the leads and tails, once a
  slot.
* **Sums** in whole vectors of ``p`` (the last overlapping), stored through
  the epilogue at ``(p // OW, p % OW)`` (one vector store, no plane of the
  tensor), channels pipelined as the flat form's (each channel's sums read
  the phases copied a channel before: :func:`conv_depthwise_strided.
  _pipelined`).

Each output is the same sum of the same products, in the same order, as
the phases' flat form's. One thread, Intel Xeon: 576x14x14 3x3/2 alone
38 -> 24 us (ORT 43 with its reorders), inside MobileNetV2 54 -> 24 us
(ORT's NCHWc node 19). The copy's row vector is a buffer of its own: its
rows unrolled into constants, or read into the phases' buffer, LLVM made
the loads 8-lane gathers or the de-interleave a trip through memory
(bench/README.md). Rows of a quarter of a vector or less keep the wide
form, other hosts the phases (measured on the Xeon only).
"""

from __future__ import annotations

from collections.abc import Callable

from phasec.ir.tir import (
    Allocate, Buffer, BufferLoad, BufferStore, For, IntImm, PrimExpr, Stmt, Var,
)
from phasec.target import tuning
from phasec.te import operation as te
from phasec.te.operation import i64, row_col
from phasec.te.schedules.conv_depthwise_strided import (
    ROW_BUFFER_TAPS, _pipelined, _uflat, column_mask, masked_taps,
)
from phasec.te.schedules.workloads import ConvWorkload
from phasec.te.stmt import seq
from phasec.te.tensor import Tensor

__all__ = ["schedule"]


def schedule(w: ConvWorkload) -> Tensor | None:
    """The depthwise convolution ``w`` (NCHW float conv2d, static sizes)
    summed over its output's flat positions from phase rows ``OW`` wide (see
    the module docstring); None unless the host's tuning has
    ``depthwise_narrow_plane`` (the Xeon), its rows are strided by 2, its
    output rows more than a quarter of a vector and at most half (narrower
    ones keep :mod:`conv_depthwise_strided`'s wide form) and its outputs at
    least a vector, a window of 2 to :data:`ROW_BUFFER_TAPS` taps, and every
    tap that would leave its phase row reads padding."""
    dims = w.depthwise_dims()
    if dims is None:
        return None
    n, c, H, W, KH, KW, OH, OW = dims
    (sh, sw), (dh, dw) = w.strides, w.dilation
    top, left = w.padding[0], w.padding[1]
    target = tuning.host_tuning()
    lanes = target.lanes(int(w.data.dtype[5:]))
    # (rows of a quarter of a vector or less keep conv_depthwise_strided's
    # wide form: measured on the Xeon only, depthwise_narrow_plane)
    if not (target.depthwise_narrow_plane and sw == 2 and 4 * OW > lanes
            and 2 * OW <= lanes <= OH * OW and 1 < KH * KW <= ROW_BUFFER_TAPS):
        return None
    E = lanes // 2                       # a copied row's elements a column phase
    rows = [divmod(r0 * dh - top, sh) for r0 in range(KH)]   # (di, a) of each tap row
    cols = [divmod(r1 * dw - left, 2) for r1 in range(KW)]   # (dj, b) of each tap column
    edges = {}                           # tap column -> whether it leaves the row somewhere
    for r1, (dj, b) in enumerate(cols):
        leaves = [x for x in range(OW) if not 0 <= x + dj < OW]
        if any(0 <= (x + dj) * 2 + b < W for x in leaves):
            return None                  # it would leave the row for a real input column
        if leaves:
            edges[r1] = len(edges)
    di_lo = min(di for di, _ in rows)
    NR = OH + max(di for di, _ in rows) - di_lo          # phase rows a phase
    lead = max(0, -min(dj for dj, _ in cols))
    L = lead + NR * OW + max(E - OW, max(dj for dj, _ in cols), 0)  # a phase's length
    slot_len = -(-2 * sh * L // lanes) * lanes
    P = OH * OW
    mask_at = 2 * slot_len
    total = mask_at + len(edges) * P
    starts = list(range(0, P - lanes + 1, lanes))
    if starts[-1] + lanes < P:
        starts.append(P - lanes)
    dt = w.data.dtype
    zero = te.const(0, dt)
    # every phase row i in [di_lo, di_lo + NR) of row phase a: input row
    # i*sh + a, or none (zero rows: above the input once a slot, below it
    # each channel, where the last copied row's spill lands)
    above = [(a, i) for a in range(sh) for i in range(di_lo, di_lo + NR) if i * sh + a < 0]
    below = [(a, i) for a in range(sh) for i in range(di_lo, di_lo + NR) if i * sh + a >= H]
    copied = [r for r in range(H) if di_lo <= r // sh < di_lo + NR]
    Store = Callable[[PrimExpr, tuple[PrimExpr, ...]], Stmt]

    def at(slot: PrimExpr, a: int, b: int, i: int, j: PrimExpr) -> PrimExpr:
        return slot * slot_len + i64((a * 2 + b) * L + lead + (i - di_lo) * OW) + j

    def build(bufs: list[Buffer], out: Buffer, store: Store | None = None) -> Stmt:
        x, weight = bufs
        bn = Var("b", "int64")
        buf = Buffer("phase_plane", (i64(total),), dt)

        def put(value: PrimExpr, idx: tuple[PrimExpr, ...]) -> Stmt:
            return BufferStore(out, value, idx) if store is None else store(value, idx)

        def zeros(start: PrimExpr, count: int) -> list[Stmt]:
            if count <= 0:
                return []
            q = Var("q", "int64")
            return [For(q, i64(0), i64(count), "serial", BufferStore(buf, zero, (start + q,)))]

        def fill(slot: PrimExpr) -> Stmt:
            stmts: list[Stmt] = []
            for f in range(2 * sh):      # each phase's lead and tail
                stmts += zeros(slot * slot_len + i64(f * L), lead)
                stmts += zeros(slot * slot_len + i64(f * L + lead + NR * OW),
                               L - lead - NR * OW)
            for a, i in above:
                for b in range(2):
                    stmts += zeros(at(slot, a, b, i, i64(0)), OW)
            if isinstance(slot, IntImm) and slot.value == 0:   # the masks, with slot 0
                stmts += [column_mask(buf, mask_at + k * P, P, OW, cols[r1][0])
                          for r1, k in edges.items()]
            return seq(stmts)

        def copy(c_: PrimExpr, slot: PrimExpr) -> Stmt:
            stmts: list[Stmt] = []
            real = [min(OW, (W - b + 1) // 2) for b in range(2)]  # columns inside the input
            for a in range(sh):
                # phase rows i of row phase a copied, in order: those whose
                # vector stays inside the plane as one loop over i (rows
                # unrolled into constants, LLVM made each load a gather)
                mine = [r // sh for r in copied if r % sh == a]
                fast = [i for i in mine if (i * sh + a) * W + 2 * E <= H * W]
                if fast:
                    i, j, q = Var("i", "int64"), Var("j", "int64"), Var("q", "int64")
                    # (in a buffer of its own, which LLVM keeps in registers:
                    # in the phases' buffer, 576x14x14 3x3/2 14 -> 18 us)
                    tmp = Buffer("plane_row", (i64(2 * E),), dt)
                    row, col = row_col(q, W)
                    load = For(q, i64(0), i64(2 * E), "vectorized", BufferStore(
                        tmp, BufferLoad(x, (bn, c_, i * sh + i64(a) + row, col)), (q,)))
                    split = [BufferStore(buf, BufferLoad(tmp, (j * 2 + b,)),
                                         (at(slot, a, b, di_lo, j) + (i - i64(di_lo)) * OW,))
                             for b in range(2)]
                    rows_loop = For(i, i64(fast[0]), i64(len(fast)), "serial", seq([
                        load, For(j, i64(0), i64(E), "vectorized", seq(split))]))
                    stmts.append(Allocate(tmp, rows_loop))
                for i in mine:
                    if i not in fast:       # element by element
                        for b in range(2):
                            jb = Var("j", "int64")
                            stmts.append(For(jb, i64(0), i64(real[b]), "serial", BufferStore(
                                buf, BufferLoad(x, (bn, c_, i64(i * sh + a), jb * 2 + b)),
                                (at(slot, a, b, i, jb),))))
                    for b in range(2):       # the columns past the input
                        stmts += zeros(at(slot, a, b, i, i64(real[b])), OW - real[b])
            for a, i in below:
                for b in range(2):
                    stmts += zeros(at(slot, a, b, i, i64(0)), OW)
            return seq(stmts)

        def total_at(c_: PrimExpr, slot: PrimExpr, p: PrimExpr) -> PrimExpr:
            def tap(r0: int, r1: int) -> PrimExpr:
                (di, a), (dj, b) = rows[r0], cols[r1]
                return BufferLoad(buf, (at(slot, a, b, di, p + i64(dj)),))
            return masked_taps((KH, KW), tap, buf,
                               {r1: mask_at + k * P for r1, k in edges.items()}, p, weight, c_)

        def sums(c_: PrimExpr, slot: PrimExpr) -> Stmt:
            loops = []
            for start in starts:
                j = Var("j", "int64")
                loops.append(For(j, i64(0), i64(lanes), "vectorized", put(
                    total_at(c_, slot, i64(start) + j), (bn, c_, *_uflat(start, j, OW)))))
            return seq(loops)
        work = n * c * (slot_len + P * KH * KW)
        par = c > 1 and work >= tuning.host_tuning().parallel_min_work
        return For(bn, i64(0), i64(n), "serial", _pipelined(c, True, par, buf, fill, copy, sums))
    return te.extern((i64(n), i64(c), i64(OH), i64(OW)), dt, [w.data, w.weight], build,
                     name="T_conv2d", store_through=build)

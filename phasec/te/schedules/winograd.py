"""Winograd convolution F(m x m, 3 x 3) for stride-1 NCHW conv2d (Lavin and
Gray, "Fast Algorithms for Convolutional Neural Networks", 2016).

A 3x3 convolution computes each ``m x m`` tile of an output channel from an
``a x a`` tile of each input channel (``a = m + 2``, tiles overlapping by
two). In the Winograd domain that is an elementwise product, so over all
channels it becomes ``a * a`` independent matrix products::

    U[e, k, c] = (G  w[k, c]  G^T)[e]          weight transform (a x a per k, c)
    V[e, c, p] = (B^T d[c, tile p]  B)[e]      input transform (a x a per c, tile)
    M[e, k, p] = sum_c U[e, k, c] * V[e, c, p] a x a GEMMs (the GEMM schedule)
    y[k, tile p] = A^T M[:, k, p] A            output transform (m x m per k, tile)

F(4x4, 3x3) does 36 multiply-adds per 16 outputs and input channel where
the direct convolution does 144: the GEMMs are a quarter of the direct
convolution's work, and the transforms are cheap additions with small
constants (measurements: bench/README.md, "Schedule notes moved from
docstrings").

The price is rounding: the transforms scale values by up to 5 (B), 8 (A)
and 1/24 (G), so the result differs from the direct convolution's by a few
float32 ulps of the output's magnitude (measured below 2e-6 relative to the
largest output on random data, 64 to 512 channels; the direct sum's own
rounding is about a third of that). A target's
``TargetTuning.winograd_tile`` (0: never) and ``winograd_min_channels``
choose when it is used; ``PHASEC_WINOGRAD=0`` turns it off on the host.

The weight transform is a nest of its own marked
``AttrStmt(WINOGRAD_MARK, m, nest)``: when the weight is a constant of the
module, :class:`phasec.passes.pack_constant_weights.PackConstantWeights` computes
``U`` once at build time (:func:`transform_weight`, declared as
``WEIGHT_TRANSFORM``) and the kernel reads it as a parameter instead. The
transforms are written as TIR (``te.extern``) with the constants folded in,
zero terms skipped and contiguous innermost loops: the input tile rows are first copied into a small buffer
de-interleaved by ``x mod m``, so that both passes of ``B^T d B`` (rows,
then columns) read consecutive elements.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction as F

import numpy as np

from phasec import arith
from phasec.ir import tir
from phasec.ir.tir import Buffer, For, IfThenElse, PrimExpr, Stmt, Var, seq
from phasec.target import tuning
from phasec.te import operation as te
from phasec.te.operation import i64
from phasec.te.schedules.build_time import (
    WeightPlan, WeightTransform, ir_nodes, static_dims, statements, stored_buffer,
)
from phasec.te.schedules.workloads import ConvWorkload
from phasec.te.stmt import kept_loop
from phasec.te.tensor import Tensor

__all__ = ["WINOGRAD_MARK", "WEIGHT_TRANSFORM", "winograd_matrices", "transform_weight", "estimate_ns",
           "winograd_conv2d", "schedule"]

#: the key of the AttrStmt around a kernel's weight transform (value: m)
WINOGRAD_MARK = "phasec.winograd_weight"

_Matrix = tuple[tuple[F, ...], ...]

# (A^T: m x a, G: a x 3, B^T: a x a) for the interpolation points
# 0, 1, -1 (m = 2) and 0, 1, -1, 2, -2 (m = 4), and infinity.
_MATRICES: dict[int, tuple[_Matrix, _Matrix, _Matrix]] = {
    2: (
        ((F(1), F(1), F(1), F(0)),
         (F(0), F(1), F(-1), F(-1))),
        ((F(1), F(0), F(0)),
         (F(1, 2), F(1, 2), F(1, 2)),
         (F(1, 2), F(-1, 2), F(1, 2)),
         (F(0), F(0), F(1))),
        ((F(1), F(0), F(-1), F(0)),
         (F(0), F(1), F(1), F(0)),
         (F(0), F(-1), F(1), F(0)),
         (F(0), F(1), F(0), F(-1))),
    ),
    4: (
        ((F(1), F(1), F(1), F(1), F(1), F(0)),
         (F(0), F(1), F(-1), F(2), F(-2), F(0)),
         (F(0), F(1), F(1), F(4), F(4), F(0)),
         (F(0), F(1), F(-1), F(8), F(-8), F(1))),
        ((F(1, 4), F(0), F(0)),
         (F(-1, 6), F(-1, 6), F(-1, 6)),
         (F(-1, 6), F(1, 6), F(-1, 6)),
         (F(1, 24), F(1, 12), F(1, 6)),
         (F(1, 24), F(-1, 12), F(1, 6)),
         (F(0), F(0), F(1))),
        ((F(4), F(0), F(-5), F(0), F(1), F(0)),
         (F(0), F(-4), F(-4), F(1), F(1), F(0)),
         (F(0), F(4), F(-4), F(-1), F(1), F(0)),
         (F(0), F(-2), F(-1), F(2), F(1), F(0)),
         (F(0), F(2), F(-1), F(-2), F(1), F(0)),
         (F(0), F(4), F(0), F(-5), F(0), F(1))),
    ),
}


def winograd_matrices(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A^T, G, B^T) of F(m, 3) as float64 arrays (m = 2 or 4)."""
    if m not in _MATRICES:
        raise ValueError(f"Winograd tiles of {m} outputs are not provided (2 or 4)")
    return tuple(np.array(x, dtype=np.float64) for x in _MATRICES[m])  # type: ignore[return-value]


def transform_weight(w: np.ndarray, m: int) -> np.ndarray:
    """``U[e1 * a + e2, k, c] = (G w[k, c] G^T)[e1, e2]`` for an OIHW 3x3
    weight, computed in float64 and rounded once to ``w``'s dtype."""
    _, g, _ = winograd_matrices(m)
    a = m + 2
    # (two batched matrix products: a three-operand einsum sums all nine
    # terms of each of the a*a outputs at once, 2-4x slower: 0.2 s for a
    # 512x512 weight, ResNet-50's build spent 0.5 s here)
    u = np.matmul(np.matmul(g, w.astype(np.float64)), g.T)  # (k, c, a, a)
    u = u.reshape(*w.shape[:2], a * a).transpose(2, 0, 1)
    return np.ascontiguousarray(u.astype(w.dtype))


def _combine(terms: Sequence[tuple[F, PrimExpr]], dtype: str) -> PrimExpr:
    """``sum(coef * value)`` with zero terms skipped and unit ones
    unmultiplied, summed left to right from a positive term."""
    out: PrimExpr | None = None
    # a positive term first: a negative one would start from ``0 - term``, a
    # subtraction more (float: LLVM may not fold ``0 - x`` into ``-x``);
    # half the rows of B^T start negative (28x28 64 -> 96: -2% a call)
    first = next((t for t in terms if t[0] > 0), None)
    if first is not None:
        terms = [first, *(t for t in terms if t is not first)]
    for coef, value in terms:
        if coef == 0:
            continue
        neg = coef < 0
        mag = -coef if neg else coef
        term = value if mag == 1 else te.const(float(mag), dtype) * value
        if out is None:
            out = te.const(0.0, dtype) - term if neg else term
        else:
            out = out - term if neg else out + term
    return te.const(0.0, dtype) if out is None else out


def _seq(*stmts: Stmt) -> Stmt:
    """The statements in sequence (:func:`phasec.ir.tir.seq`)."""
    return seq(stmts)


def _loop(extent: int | PrimExpr, body, kind: str = "serial", name: str = "i") -> Stmt:
    v = Var(name, "int64")
    return For(v, i64(0), i64(extent) if isinstance(extent, int) else extent, kind, body(v))


def _add(*xs: PrimExpr | int) -> PrimExpr:
    out: PrimExpr | None = None
    for x in xs:
        if isinstance(x, int):
            if x == 0:
                continue
            x = i64(x)
        out = x if out is None else out + x
    return i64(0) if out is None else out


def _mul(x: PrimExpr, c: int) -> PrimExpr:
    return x if c == 1 else x * c


def _round_up(x: int, step: int) -> int:
    return -(-x // step) * step


#: a Winograd GEMM's columns per image are rounded up to whole vectors when
#: that adds at most 1/ALIGN_MAX_SPARE of them (see _Plan)
ALIGN_MAX_SPARE = 8


class _Plan:
    """The static sizes of one Winograd convolution.

    The loops over a row of tiles run over ``twv`` (the tiles of a row
    rounded up to whole vectors of ``lanes``) so that each is whole vectors:
    the GEMM's columns are laid out image after image, ``stride`` apart,
    each image's ``th * tw`` tiles followed by ``twv - tw`` spare columns
    that the last row of tiles spills into (and the first reads back from),
    then, where ``stride`` is rounded up to whole vectors, zeros.
    """

    def __init__(self, m: int, n: int | PrimExpr, c: int, k: int, h: int, w: int, oh: int,
                 ow: int, top: int, left: int, dtype: str, lanes: int) -> None:
        self.m, self.a = m, m + 2
        self.n, self.c, self.k, self.h, self.w = n, c, k, h, w
        self.oh, self.ow, self.top, self.left, self.dtype = oh, ow, top, left, dtype
        self.th, self.tw = -(-oh // m), -(-ow // m)          # tiles per column, per row
        # whole vectors, or one short one (a power of two) for a narrow image
        self.twv = _round_up(self.tw, min(lanes, 1 << max(2, (self.tw - 1).bit_length())))
        # the columns the input transform writes per image
        self.written = self.th * self.tw + self.twv - self.tw
        # GEMM columns per image: rounded up to whole vectors (zeros after
        # the written ones) when that adds at most an eighth. Each image's
        # rows of V and M then start on a vector: over 56x56 F(4x4)'s 198
        # columns took loads split across two cache lines, its GEMMs (36 x
        # 192x64 @ 64x198) ran 1.65 ms where 208 columns ran 1.46
        spare = _round_up(self.written, lanes) - self.written
        self.stride = self.written + (spare if spare * ALIGN_MAX_SPARE <= self.written else 0)
        self.p = n * self.stride                             # the GEMM's columns
        # A symbolic batch: one GEMM per image, batched (the GEMM schedule
        # needs a static number of columns), V and M laid out [n, e, c, col]
        self.batched = not isinstance(n, int)
        # a de-interleaved row: the tiles' columns, the two they share with
        # the next tile, rounded up to vectors
        self.q = _round_up(self.twv + -(-2 // m), lanes)
        self.lanes = lanes
        self.at, self.g, self.bt = _MATRICES[m]

    def batch(self, image: Buffer) -> int | PrimExpr:
        """The number of images: static, or the kernel's own dimension of the
        NCHW ``image`` buffer (the plan's symbolic ``n`` is the TE graph's)."""
        return self.n if isinstance(self.n, int) else image.shape[0]

    def first_column(self, n: PrimExpr, ty: PrimExpr) -> PrimExpr:
        """The GEMM column of tile (ty, 0) of image n."""
        return _add(_mul(n, self.stride), _mul(ty, self.tw))

    def gemm_index(self, n: PrimExpr, row: PrimExpr, channel: PrimExpr, ty: PrimExpr,
                   tx: PrimExpr) -> tuple[PrimExpr, ...]:
        """Where V and M hold Winograd row ``row`` of tile (ty, tx) of image
        ``n`` and ``channel``."""
        if self.batched:
            return (n, row, channel, _add(_mul(ty, self.tw), tx))
        return (row, channel, _add(self.first_column(n, ty), tx))

    def gemm_shape(self, channels: int) -> tuple[int | PrimExpr, ...]:
        e = self.a * self.a
        return (self.n, e, channels, self.stride) if self.batched else (e, channels, self.p)


def _weight_nest(plan: _Plan, w: Buffer, u: Buffer) -> Stmt:
    """U = G w G^T for every (k, c), vectorized over c: nine loads, the
    products in registers, a contiguous store per element of the tile."""
    a, dt = plan.a, plan.dtype

    def body(k: Var, c: Var) -> Stmt:
        loads = [[w[k, c, i64(r), i64(s)] for s in range(3)] for r in range(3)]
        lets: list[tuple[Var, PrimExpr]] = []
        t = []  # G w (a x 3), bound once each: every row of U reuses them
        for e in range(a):
            row = []
            for s in range(3):
                var = Var(f"wt{e}_{s}", dt)
                lets.append((var, _combine([(plan.g[e][r], loads[r][s]) for r in range(3)], dt)))
                row.append(var)
            t.append(row)
        stmt: Stmt = _seq(*[tir.BufferStore(
            u, _combine([(plan.g[f][s], t[e][s]) for s in range(3)], dt), (i64(e * a + f), k, c))
            for e in range(a) for f in range(a)])
        for var, value in reversed(lets):
            stmt = tir.LetStmt(var, value, stmt)
        return stmt
    nest = _loop(plan.k, lambda k: _loop(plan.c, lambda c: body(k, c), "vectorized", "c"),
                 "parallel", "k")
    return tir.AttrStmt(WINOGRAD_MARK, i64(plan.m), nest)


def _image_channel(index: Var, channels: int, n: Var, c: Var, body: Stmt,
                   channel_first: bool) -> Stmt:
    """``body`` with ``n`` and ``c`` bound once to the image and channel of
    the parallel ``index`` (``index // channels``, ``index % channels``):
    written into every access instead, each was a floor division that LLVM
    had to merge again (92 in SqueezeNet's 55x55 output transform, half its
    IR). Bound in the order the nest's first access uses them, the order
    LLVM met them in before: the machine code is the same."""
    image, channel = (n, index // channels), (c, index % channels)
    first, second = (channel, image) if channel_first else (image, channel)
    return tir.LetStmt(*first, tir.LetStmt(*second, body))


def _input_nest(plan: _Plan, d: Buffer, v: Buffer) -> Stmt:
    """V = B^T d B for every (channel, tile), a row of tiles at a time: each
    of the a input rows copied into a zero-padded row and from there
    de-interleaved (``rows[r, x % m, x // m]``), their row transform
    ``t = B^T rows``, then the column transform of each tile; every
    innermost loop is contiguous (the de-interleaving one an interleaved
    group LLVM vectorizes with shuffles)."""
    m, a, q, dt = plan.m, plan.a, plan.q, plan.dtype
    padded = Buffer("wino_pad", (i64(q * m),), dt)
    rows = Buffer("wino_rows", (i64(a), i64(m), i64(q)), dt)
    tb = Buffer("wino_t", (i64(a), i64(m), i64(q)), dt)
    zero = te.const(0.0, dt)
    inner = min(plan.w, q * m - plan.left)  # image columns that land in the padded row

    def zeros(lo: int, hi: int) -> list[Stmt]:
        if hi <= lo:
            return []
        return [_loop(hi - lo, lambda x: tir.BufferStore(padded, zero, (_add(x, lo),)),
                      "vectorized", "x")]

    def per_channel(nc: Var) -> Stmt:
        n, c = Var("n", "int64"), Var("c", "int64")

        def per_row(ty: Var) -> Stmt:
            def fill(r: Var) -> Stmt:
                y = _add(_mul(ty, m), r, -plan.top)
                in_y = te.in_range(y, 0, plan.h)
                copy = _loop(inner, lambda x: tir.BufferStore(
                    padded, d[n, c, y, x], (_add(x, plan.left),)), "vectorized", "x")
                row = IfThenElse(in_y, _seq(*zeros(0, plan.left), copy,
                                           *zeros(plan.left + inner, q * m)),
                                 _seq(*zeros(0, q * m)))
                spread = _loop(q, lambda x_q: _seq(*[tir.BufferStore(
                    rows, padded[_add(_mul(x_q, m), ph)], (r, i64(ph), x_q))
                    for ph in range(m)]), "vectorized", "xq")
                return _seq(row, spread)

            def row_t(e: int, ph: PrimExpr) -> Callable[[Var], Stmt]:
                return lambda x_q: tir.BufferStore(tb, _combine(
                    [(plan.bt[e][r], rows[i64(r), ph, x_q]) for r in range(a)], dt),
                    (i64(e), ph, x_q))
            if q > plan.lanes:
                # Rows of several vectors: per phase, one loop computing
                # every row of t (its a input rows loaded once), a loop
                # that stays a loop. Written out per row and phase, these
                # were 6 x 4 loops of several vectors each: SqueezeNet's 16
                # -> 64 over 55x55 (rows of 32) 270 -> 200 ms of LLVM, run
                # time the same (bench/README.md, issue 29, round 18).
                row_ts = [kept_loop(_loop(m, lambda ph: _loop(q, lambda x_q: _seq(
                    *[row_t(e, ph)(x_q) for e in range(a)]), "vectorized", "xq"), "serial", "ph"))]
            else:
                row_ts = [_loop(q, row_t(e, i64(ph)), "vectorized", "xq")
                          for e in range(a) for ph in range(m)]

            def col(e: Var) -> Stmt:  # the coefficients depend on f only
                return _seq(*[_loop(plan.twv, lambda tx, f=f: tir.BufferStore(v, _combine(
                    [(plan.bt[f][s], tb[e, i64(s % m), _add(tx, s // m)]) for s in range(a)],
                    dt), plan.gemm_index(n, _add(_mul(e, a), f), c, ty, tx)), "vectorized", "tx")
                    for f in range(a)])
            # The a input rows' copy and de-interleaving stay a loop: unrolled
            # by LLVM, each of their loops was vectorized a times over, 7-14%
            # of the kernel's LLVM time and no run time (bench/README.md,
            # "coldbuild"). (Not the column transform's loops over e and f,
            # nor the row transform's of one vector: unrolled, their rows
            # stay in registers, 3-5% faster.)
            return _seq(kept_loop(_loop(a, fill, "serial", "r")), *row_ts,
                        _loop(a, col, "serial", "e"))
        body = _loop(plan.th, per_row, "serial", "ty")
        if plan.stride > plan.written:  # the columns that round a row up: zeros
            body = _seq(body, _loop(a * a, lambda e: _loop(
                plan.stride - plan.written, lambda x: tir.BufferStore(
                    v, zero, plan.gemm_index(n, e, c, i64(0), _add(x, plan.written))),
                "vectorized", "x"), "serial", "e"))
        return _image_channel(nc, plan.c, n, c, tir.Allocate(padded, tir.Allocate(
            rows, tir.Allocate(tb, body))), channel_first=False)
    return _loop(plan.batch(d) * plan.c, per_channel, "parallel", "nc")


def _output_nest(plan: _Plan, mb: Buffer, out: Buffer,
                 put: Callable[[PrimExpr, tuple[PrimExpr, ...]], Stmt] | None = None) -> Stmt:
    """y = A^T M A for every (output channel, tile), a row of tiles at a time:
    the column transform into ``o1[i, f, tx]``, the row transform into
    ``r[i, j, tx]`` (both contiguous in ``tx``), then the m output rows
    gathered from ``r`` (``y[x] = r[i, x % m, x // m]``), each element
    stored once, through ``put`` when given (the extern's
    ``store_through``: the epilogue applied in registers before the store)."""
    m, a, dt = plan.m, plan.a, plan.dtype
    if put is None:
        def put(value: PrimExpr, idx: tuple[PrimExpr, ...]) -> Stmt:
            return tir.BufferStore(out, value, idx)
    o1 = Buffer("wino_o1", (i64(m), i64(a), i64(plan.twv)), dt)
    rb = Buffer("wino_r", (i64(m), i64(m), i64(plan.twv)), dt)

    def per_channel(nk: Var) -> Stmt:
        n, k = Var("n", "int64"), Var("k", "int64")

        def per_row(ty: Var) -> Stmt:
            # the coefficients depend on i (first) and j (second) only
            first = _loop(a, lambda f: _seq(*[_loop(plan.twv, lambda tx, i=i: tir.BufferStore(
                o1, _combine([(plan.at[i][e], mb[plan.gemm_index(n, _add(i64(e * a), f), k, ty,
                                                                 tx)])
                              for e in range(a)], dt), (i64(i), f, tx)), "vectorized", "tx")
                for i in range(m)]), "serial", "f")
            second = _loop(m, lambda i: _seq(*[_loop(plan.twv, lambda tx, j=j: tir.BufferStore(
                rb, _combine([(plan.at[j][f], o1[i, i64(f), tx]) for f in range(a)], dt),
                (i, i64(j), tx)), "vectorized", "tx") for j in range(m)]), "serial", "i")

            def out_row(i: PrimExpr) -> Stmt:
                # whole tiles as interleaved groups of m stores, then the
                # columns of a last partial tile
                y = _add(_mul(ty, m), i)
                full, rest = divmod(plan.ow, m)
                parts = [] if not full else [_loop(full, lambda tx: _seq(*[put(
                    rb[i, i64(j), tx], (n, k, y, _add(_mul(tx, m), j)))
                    for j in range(m)]), "vectorized", "tx")]
                parts += [put(rb[i, i64(j), i64(full)], (n, k, y, i64(full * m + j)))
                          for j in range(rest)]
                store = _seq(*parts)
                if plan.oh % m == 0:
                    return store
                return IfThenElse(te.lt(y, plan.oh), store)
            # The m output rows in one loop that stays a loop: written out m
            # times, each row's interleaved stores were vectorized m times
            # over (14-19% of the kernel's LLVM time, no run time:
            # bench/README.md, "coldbuild")
            return _seq(first, second, kept_loop(_loop(m, out_row, "serial", "i")))
        return _image_channel(nk, plan.k, n, k, tir.Allocate(o1, tir.Allocate(
            rb, _loop(plan.th, per_row, "serial", "ty"))), channel_first=True)
    return _loop(plan.batch(out) * plan.k, per_channel, "parallel", "nk")


def winograd_conv2d(data: Tensor, weight: Tensor, out_shape: Sequence[PrimExpr],
                    padding: Sequence[int], dtype: str, max_tile: int,
                    lanes: int, weight_per_call: bool = False,
                    min_tile_vectors: int = 1, narrow_max_weight_bytes: int = 0) -> Tensor | None:
    """The conv2d of NCHW ``data`` and OIHW 3x3 ``weight`` (stride 1,
    dilation 1, one group, ``padding`` top, left, bottom, right) by
    F(m x m, 3 x 3), its loops in vectors of ``lanes``, or None when a shape
    other than the batch is not static or the image too small. (A symbolic
    batch runs one GEMM per image; ``m`` is then chosen as for one image.)

    ``m`` is the largest of ``max_tile`` and 2 that gives the GEMMs at least
    a vector of columns (tiles): a 7x7 image has 4 tiles of 4x4 and 16 of
    2x2, and F(2x2) is there much faster than F(4x4). A smaller image keeps
    the direct convolution. With ``min_tile_vectors`` above 1, the largest
    ``m`` whose tiles fill that many vectors comes first (14x14: F(2x2)'s 49
    tiles before F(4x4)'s 16, which make one-vector GEMM tiles).
    ``narrow_max_weight_bytes`` (0: no limit) drops, for a constant weight,
    a plan whose tiles fill
    fewer than ``min_tile_vectors`` vectors when its transformed weight ``U``
    has more bytes: such GEMMs read each element of ``U`` for a vector of
    tiles or less, and ``U`` (16/9 of the weight for F(2x2)) streams from
    memory in a model, where the direct convolution streams the weight
    itself (512 channels over 7x7).

    ``weight_per_call``: the weight is a parameter, so ``U = G w G^T`` runs
    on every call; then the plan is the one of least estimated per-call cost
    (:func:`estimate_ns`), and None (the direct convolution) when that is
    more than the direct convolution's."""
    dims = [arith.const_int(x) for x in (*data.shape, *weight.shape, *out_shape)]
    n, c, h, w, k, _, kh, kw, _, _, oh, ow = dims
    # the batch may be symbolic (a model exported with a dynamic batch axis)
    if any(x is None for x in dims[1:8] + dims[9:]) or (
            n is None and not arith.prove_equal(data.shape[0], out_shape[0])):
        return None
    if (kh, kw) != (3, 3) or min(n or 1, c, k, oh, ow) < 1:
        return None
    batch = data.shape[0] if n is None else n
    plans = [_Plan(m, batch, c, k, h, w, oh, ow, padding[0], padding[1], dtype, lanes)
             for m in sorted(_MATRICES, reverse=True) if m <= max_tile]
    # (a symbolic batch: the tiles of one image decide, as for a batch of 1)
    plans = [p for p in plans if (n or 1) * p.th * p.tw >= lanes]
    if narrow_max_weight_bytes and not weight_per_call:
        # (a weight passed per call is weighed by estimate_ns below: not measured)
        size = np.dtype(dtype).itemsize * k * c
        plans = [p for p in plans if (n or 1) * p.th * p.tw >= min_tile_vectors * lanes
                 or p.a * p.a * size <= narrow_max_weight_bytes]
    if not plans:
        return None
    plans.sort(key=lambda p: (n or 1) * p.th * p.tw < min_tile_vectors * lanes)  # (stable)
    plan = plans[0]
    if weight_per_call:
        costs = {id(p): estimate_ns(n or 1, c, k, oh, ow, p.m, weight_per_call=True)
                 for p in plans}
        plan = min(plans, key=lambda p: costs[id(p)][0])
        if costs[id(plan)][0] > costs[id(plan)][1]:
            return None
    e = plan.a * plan.a
    u = te.extern((e, k, c), dtype, [weight], lambda ins, o: _weight_nest(plan, ins[0], o),
                  name="T_winograd_weight")
    v = te.extern(plan.gemm_shape(c), dtype, [data], lambda ins, o: _input_nest(plan, ins[0], o),
                  name="T_winograd_input")
    rc = te.reduce_axis(c, "rc")
    if plan.batched:
        prod = te.compute(plan.gemm_shape(k), lambda nb, b, i, j: te.sum(
            u[b, i, rc.var] * v[nb, b, rc.var, j], axis=[rc]), name="T_winograd_gemm", tag="matmul")
    else:
        prod = te.compute((e, k, plan.p), lambda b, i, j: te.sum(
            u[b, i, rc.var] * v[b, rc.var, j], axis=[rc]), name="T_winograd_gemm", tag="matmul")
    # the epilogue (bias, batch norm, activation, a residual) applied to each
    # output element in registers before its one store: no output-sized
    # intermediate written and read back by a nest of its own
    return te.extern(tuple(out_shape), dtype, [prod], lambda ins, o: _output_nest(plan, ins[0], o),
                     name="T_conv2d_winograd",
                     store_through=lambda ins, o, put: _output_nest(plan, ins[0], o, put))


#: the per-call cost estimate (:func:`estimate_ns`), nanoseconds on one
#: core, fitted to single kernels on the AVX-512 host (bench/README.md,
#: "Schedule choice by cost"): a multiply-add of the direct convolution or
#: of Winograd's GEMMs (49 per ns), an element of the input and output
#: transforms (V and M), an element of the weight transform (U)
NS_PER_MULTIPLY_ADD = 1 / 49
NS_PER_TRANSFORMED = 0.5
NS_PER_WEIGHT_TRANSFORMED = 0.25


def estimate_ns(n: int, c: int, k: int, oh: int, ow: int, m: int,
                weight_per_call: bool) -> tuple[float, float]:
    """The estimated time of one call (ns) of a 3x3 stride-1 convolution of
    ``n`` images, ``c`` -> ``k`` channels, ``oh x ow`` outputs: by
    F(m x m, 3 x 3), with ``U = G w G^T`` counted when ``weight_per_call``
    (a constant's runs once at build time), and directly. A model, not a
    measurement: what decides between the two when the weight transform
    is not free."""
    e, tiles = (m + 2) ** 2, n * -(-oh // m) * -(-ow // m)
    winograd = (e * k * c * tiles * NS_PER_MULTIPLY_ADD
                + (c + k) * tiles * e * NS_PER_TRANSFORMED
                + (k * c * e * NS_PER_WEIGHT_TRANSFORMED if weight_per_call else 0.0))
    return winograd, n * k * c * oh * ow * 9 * NS_PER_MULTIPLY_ADD


def schedule(w: ConvWorkload) -> Tensor | None:
    """The convolution of ``w`` (an NCHW float conv2d) by Winograd's
    F(m x m, 3 x 3), or None when it is not a one-group 3x3 stride-1
    convolution of enough channels (``m`` and the channel threshold from the
    host's :class:`~phasec.target.tuning.TargetTuning`); when the weight is
    a parameter, only where the estimate with its transform on every call is
    below the direct convolution's (:func:`estimate_ns`)."""
    host = tuning.host_tuning()
    if (not host.winograd_tile or w.groups != 1 or tuple(w.strides) != (1, 1)
            or tuple(w.dilation) != (1, 1)):
        return None
    channels = [arith.const_int(x) for x in (w.data.shape[1], w.weight.shape[0])]
    if any(x is None or x < host.winograd_min_channels for x in channels):
        return None
    return winograd_conv2d(w.data, w.weight, w.out_shape, w.padding, w.dtype,
                           host.winograd_tile, w.lanes, weight_per_call=not w.weight_is_constant,
                           min_tile_vectors=host.winograd_min_tile_vectors,
                           narrow_max_weight_bytes=host.winograd_narrow_max_weight_bytes)


def _transformed_weight(func: tir.PrimFunc) -> WeightPlan | None:
    """The weight transform ``func`` marks (one ``WINOGRAD_MARK`` nest that
    reads one parameter and writes a buffer of static shape), or None."""
    marks = [s for s in statements(func.body)
             if type(s) is tir.AttrStmt and s.key == WINOGRAD_MARK]
    if len(marks) != 1 or not isinstance(marks[0].value, tir.IntImm):
        return None
    m = marks[0].value.value
    params = {id(p): i for i, p in enumerate(func.params) if isinstance(p, tir.Buffer)}
    read = {id(n.buffer) for n in ir_nodes(marks[0].body) if type(n) is tir.BufferLoad}
    weights = [params[b] for b in read if b in params]
    target = stored_buffer(marks[0].body)
    if len(weights) != 1 or len(read) != 1 or target is None or static_dims(target) is None:
        return None
    index = weights[0]
    weight = func.params[index]
    transformed = tir.Buffer(weight.name + "_winograd", target.shape, target.dtype)
    return WeightPlan(index, transformed, WINOGRAD_MARK, lambda mark: i64(0),
                      dict(func.attrs or {}), lambda data: transform_weight(data, m))


#: ``U = G w G^T`` of a constant weight (:func:`transform_weight`, in float64
#: rounded once, where the kernel's own transform rounds at each step: the
#: values may differ in the last bit)
WEIGHT_TRANSFORM = WeightTransform("Winograd weight transform", _transformed_weight)

"""The TIR time loop of ``nn.lstm`` / ``nn.gru`` / ``nn.rnn`` (the statement
their ``te.extern`` builds; :mod:`.rnn` holds the operators).

Inputs: the data ``x`` (T, N, I), the weights ``w`` (D, G*H, I), the
recurrence weights ``r`` (D, G*H, H), the bias (D, 2*G*H), the
initial states (D, N, H), the peepholes (D, 3*H) and the lengths (N,).
Output: one packed (T + 1 or 2, D, N, H) buffer: Y, then Y_h (and Y_c).

The time loop is outermost; each step runs the batch entries still inside
their sequence (each at its own position: lengths differ, and the reverse
direction reads an entry from its own last step), their state, gates and
``r*h`` in rows of buffers the kernel allocates. A step computes the input
projection and the recurrence products as dot products along the
contiguous rows of W and R, four rows at a time for the whole batch (a
block of rows is read once a step, not once an entry), each summed in a
vector of partial sums; then the cell's update. No copy of the weights and
no buffer of every step's projection: a per-call copy cost more than a
short sequence's whole loop.

The products read ``W`` and ``R`` transposed where their shapes are static
(``W^T``, ``R^T``: :mod:`phasec.te.schedules.transposed_weights`, made
once per build for a constant weight, else by a nest at the kernel's
start): ``x[k]`` or ``h[k]`` broadcast times a row of the transpose added
into :data:`TILE_VECTORS` vectors of gates kept in registers over the ``k``
loop, with no horizontal sum per gate row (as dot products along ``R``'s
rows of 64, the sums took as many vector operations as the products).

A weight ``W`` too large to stay in L1 between steps
(:data:`HOIST_MIN_BYTES`) makes the input projection of every step one
pass before the time loop instead: each block of W's rows meets every
step's input while it is in L1, into a (T * N, G*H) buffer the steps read
(W was streamed from L2 or L3 once a step: ddddocr's bidirectional
512-unit LSTM over 16 steps, 2 x 16 reads of a 4 MB W).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from phasec import arith
from phasec import te
from phasec.ir import tir
from phasec.ir.tir import (
    Allocate, BinaryOp, Buffer, BufferStore, For, IfThenElse, LetStmt, PrimExpr, Stmt, Var,
)
from phasec.op._lowering import _const
from phasec.op._tirgen import i64, seq
from phasec.target.tuning import host_tuning
from phasec.te.schedules.transposed_weights import INPUT_MARK, RECURRENCE_MARK

__all__: list[str] = []

#: gate rows whose dot products run together (independent accumulators;
#: each in a vector of partial sums)
ROWS = 4
#: vectors of gates a product from a transposed weight accumulates at once
TILE_VECTORS = 4
#: the most rows of the hoisted projection computed together from W^T,
#: each TILE_VECTORS vectors in registers (24 of AVX-512's 32; fewer rows
#: on a host of fewer registers: see TimeLoop.projection_rows)
PROJECTION_ROWS = 6
#: a direction's W of at least this many bytes has its input projection
#: hoisted out of the time loop (see the module docstring)
HOIST_MIN_BYTES = 64 * 1024
_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}


def tir_activation(name: str, alpha: float, beta: float, x: PrimExpr) -> PrimExpr:
    """ONNX's recurrent activation ``name`` of ``x``."""
    dt = x.dtype

    def c(v: float) -> PrimExpr:
        return _const(v, dt)
    zero, one = c(0.0), c(1.0)
    if name == "Relu":
        return BinaryOp("max", x, zero)
    if name == "Tanh":
        return te.call("tanh", x)
    if name == "Sigmoid":
        return te.call("sigmoid", x)
    if name == "Affine":
        return c(alpha) * x + c(beta)
    if name == "LeakyRelu":
        return tir.Select(BinaryOp(">=", x, zero), x, c(alpha) * x)
    if name == "ThresholdedRelu":
        return tir.Select(BinaryOp(">", x, c(alpha)), x, zero)
    if name == "ScaledTanh":
        return c(alpha) * te.call("tanh", c(beta) * x)
    if name == "HardSigmoid":
        return BinaryOp("min", BinaryOp("max", c(alpha) * x + c(beta), zero), one)
    if name == "Elu":
        neg = c(alpha) * (te.call("exp", BinaryOp("min", x, zero)) - one)
        return tir.Select(BinaryOp(">=", x, zero), x, neg)
    if name == "Softsign":
        return x / (one + te.call("fabs", x))
    # Softplus, without overflow: max(x, 0) + log(1 + exp(-|x|))
    return BinaryOp("max", x, zero) + te.call("log", one + te.call("exp", zero - te.call(
        "fabs", x)))


def _panels_buffer(name: str, m: Buffer, dtype: str, width: int) -> Buffer | None:
    """A buffer for ``M^T`` in panels of ``width`` gate rows (``(D, G*H, K)
    -> (D, ceil(G*H / width), K, width)``) of a static ``M``."""
    dims = [arith.const_int(e) for e in m.shape]
    if None in dims:
        return None
    return Buffer(name, tuple(i64(v) for v in (dims[0], -(-dims[1] // width), dims[2], width)),
                  dtype)


def _loop(extent: Any, body: Callable[[Var], Stmt], name: str, kind: str = "serial") -> Stmt:
    v = Var(name, "int64")
    return For(v, i64(0), tir.as_prim_expr(extent), kind, body(v))


class TimeLoop:
    """The statement of one call's kernel (see the module docstring).

    ``gates`` is the cell's G; ``acts[k]`` (name, alpha, beta) of activation
    ``k``, ``per`` of them a direction; ``attrs`` the call's attributes."""

    def __init__(self, cell: str, gates: int, attrs: dict[str, Any],
                 acts: list[tuple[str, float, float]], per: int, ins: list[Buffer], out: Buffer,
                 has_lens: bool) -> None:
        self.cell, self.gates, self.a, self.acts, self.per = cell, gates, attrs, acts, per
        #: which direction's activations the statements being built use
        self.acts_of = 0
        self.x, self.w, self.r, self.bias, self.h0 = ins[:5]
        self.c0 = ins[5] if cell == "lstm" else None
        self.p = ins[6] if cell == "lstm" else None
        self.lens = ins[-1] if has_lens else None
        self.out, self.dt = out, out.dtype
        self.t_len, self.batch, _ = self.x.shape
        self.gh, self.hid = self.r.shape[1], self.r.shape[2]
        dt, n = self.dt, self.batch
        #: the host's vector of the dtype: a dot product's partial sums
        self.lanes = host_tuning().lanes(8 * _BYTES.get(dt, 4))
        #: partial sums of the dot products (ROWS vectors of them)
        self.part = Buffer("rnn_part", (n, i64(self.lanes * ROWS)), dt)
        #: each entry's length, and its position in its sequence at the current step
        self.lenb = Buffer("rnn_len", (n,), "int64")
        self.tpos = Buffer("rnn_pos", (n,), "int64")
        #: the step being built (the time loop's variable)
        self.s: PrimExpr = i64(0)
        self.h = Buffer("rnn_h", (n, self.hid), dt)
        self.c = Buffer("rnn_c", (n, self.hid), dt)
        self.acc = Buffer("rnn_gates", (n, self.gh), dt)
        self.rh = Buffer("rnn_rh", (n, self.hid), dt)
        #: every step's input projection (row ``t * N + b``), or None: each
        #: step computes its own
        self.xp: Buffer | None = None
        w_elems = arith.const_int(arith.simplify(self.gh * self.w.shape[2]))
        if (arith.const_int(self.t_len) != 1 and w_elems is not None
                and w_elems * _BYTES.get(dt, 4) >= HOIST_MIN_BYTES):
            self.xp = Buffer("rnn_xp", (arith.simplify(self.t_len * n), self.gh), dt)
        #: W^T and R^T in panels of ``tile`` gate rows (D, panels, I or H,
        #: tile) when the weight's shape is static, else None: dot products
        #: along its rows
        self.tile = TILE_VECTORS * self.lanes
        #: rows of the hoisted projection computed together (their
        #: accumulators in registers beside a loaded panel row)
        self.projection_rows = max(1, min(PROJECTION_ROWS, (
            host_tuning().vector_registers - TILE_VECTORS) // TILE_VECTORS))
        self.wt, self.rt = (_panels_buffer(name, m, dt, self.tile)
                            for name, m in (("rnn_wt", self.w), ("rnn_rt", self.r)))

    def act(self, k: int, x: PrimExpr, clipped: bool = True) -> PrimExpr:
        """Activation ``k`` of the direction being built, its input clipped."""
        clip = self.a["clip"]
        if clip is not None and clipped:
            x = BinaryOp("min", BinaryOp("max", x, _const(-clip, self.dt)), _const(clip, self.dt))
        return tir_activation(*self.acts[self.acts_of * self.per + k], x)

    def off(self, g: int, j: PrimExpr) -> PrimExpr:
        """Gate row ``g * H + j``."""
        return arith.simplify(tir.as_prim_expr(g) * self.hid + j) if g else j

    def dots(self, weight: Buffer, d: PrimExpr, rows: tuple[int, int],
             src: Callable[[PrimExpr, PrimExpr], PrimExpr],
             init: Callable[[PrimExpr, PrimExpr], PrimExpr], out: Buffer | None = None,
             each: Callable[[Callable[[Var], Stmt]], Stmt] | None = None,
             out_row: Callable[[PrimExpr], PrimExpr] | None = None) -> Stmt:
        """``out[b, g - first] = init(b, g) + sum_k src(b, k) * weight[d, g, k]``
        for the gate rows ``rows`` (in units of H; ``out`` None: ``acc[b, g]``)
        of every live batch entry ``b``: dot products along the weight's
        contiguous rows, ``ROWS`` rows at a time (each block of rows read once
        for the whole batch), each in a vector of partial sums (
        independent accumulators, not one chain of dependent adds). ``each``
        replaces :meth:`each` (the entries ``b`` the products run for),
        ``out_row(b)`` the row of ``out`` entry ``b`` stores to (``b``)."""
        each = each or self.each
        lo = arith.simplify(tir.as_prim_expr(rows[0]) * self.hid)
        count = arith.simplify(tir.as_prim_expr(rows[1] - rows[0]) * self.hid)
        length = weight.shape[2]

        def for_entry(b: PrimExpr):
            def store(g: PrimExpr, value: PrimExpr) -> Stmt:
                if out is None:
                    return BufferStore(self.acc, value, (b, g))
                row = b if out_row is None else out_row(b)
                return BufferStore(out, value, (row, arith.simplify(g - lo)))

            def term(g: PrimExpr, k: PrimExpr) -> PrimExpr:
                return src(b, k) * weight[d, g, k]
            return store, term, (lambda g: init(b, g))
        lanes = self.lanes_for(length)
        if lanes == 1:  # shorter than a vector: one sum per row
            def scalar(gg: Var) -> Stmt:
                return each(lambda b: self._scalar_row(
                    b, arith.simplify(gg + lo), length, *for_entry(b)))
            return _loop(count, scalar, "g")

        def block(g0: PrimExpr, nrows: int) -> Stmt:
            return each(lambda b: self._block(b, g0, nrows, length, lanes, *for_entry(b)))
        blocks = arith.simplify(BinaryOp("//", count, i64(ROWS)))
        first_rest = arith.simplify(lo + blocks * ROWS)
        whole = _loop(blocks, lambda gb: block(arith.simplify(lo + gb * ROWS), ROWS), "gb")
        rest = _loop(arith.simplify(count - blocks * ROWS),
                     lambda gr: block(arith.simplify(first_rest + gr), 1), "gr")
        return seq(whole, rest)

    def columns(self, wt: Buffer, d: PrimExpr, rows: tuple[int, int],
                src: Callable[[PrimExpr, PrimExpr], PrimExpr],
                init: Callable[[PrimExpr, PrimExpr], PrimExpr], out: Buffer | None = None,
                groups: Callable[[Callable[[list[PrimExpr]], Stmt]], Stmt] | None = None,
                out_row: Callable[[PrimExpr], PrimExpr] | None = None) -> Stmt:
        """:meth:`dots` (same arguments) from the weight read transposed in
        panels, ``wt`` (D, panels, K, tile): a panel's gates at a time (the
        panel loop outermost: the panel, read in order, stays in the cache
        over the entries), set to ``init`` and then accumulating ``src(b,
        k) * wt[d, panel, k, gi]`` over ``k`` in registers (one address per
        vector), for the entries ``groups`` gives together (default: each
        live entry alone; a group shares each panel row it loads)."""
        groups = groups or (lambda body: self.each(lambda b: body([b])))
        hid, length, tile = arith.const_int(self.hid), wt.shape[2], self.tile
        lo, hi = rows[0] * hid, rows[1] * hid
        dst = self.acc if out is None else out

        def span(panel: PrimExpr, first: int, width: int) -> Stmt:
            """Gates ``panel * tile + first ...`` (``width`` of them)."""
            def gate(gi: PrimExpr) -> PrimExpr:
                return arith.simplify(panel * tile + first + gi)

            def at(b: PrimExpr, gi: PrimExpr) -> tuple[PrimExpr, PrimExpr]:
                row = b if out_row is None else out_row(b)
                return (b, gate(gi)) if out is None else (row, arith.simplify(gate(gi) - lo))

            def for_group(entries: list[PrimExpr]) -> Stmt:
                start = [_loop(width, lambda gi, b=b: BufferStore(dst, init(b, gate(gi)),
                                                                  at(b, gi)), "gi", "vectorized")
                         for b in entries]
                terms = _loop(length, lambda k: seq(*[_loop(width, lambda gi, b=b: BufferStore(
                    dst, dst[at(b, gi)] + src(b, k) * wt[d, panel, k, arith.simplify(gi + first)],
                    at(b, gi)), "gi", "vectorized") for b in entries]), "k")
                return seq(*start, terms)
            return groups(for_group)
        # the panels the rows cover: a partial one at either end, whole ones between
        parts = []
        p0, p1 = -(-lo // tile), hi // tile
        if lo % tile:
            end = min(hi, (lo // tile + 1) * tile)
            parts.append(span(i64(lo // tile), lo % tile, end - lo))
        if p1 > p0:
            parts.append(_loop(p1 - p0, lambda p: span(arith.simplify(p + p0), 0, tile), "gt"))
        if hi % tile and hi // tile >= p0:
            parts.append(span(i64(hi // tile), 0, hi % tile))
        return seq(*parts)

    def recurrence(self, d: PrimExpr, rows: tuple[int, int],
                   src: Callable[[PrimExpr, PrimExpr], PrimExpr],
                   init: Callable[[PrimExpr, PrimExpr], PrimExpr],
                   out: Buffer | None = None) -> Stmt:
        """The products of ``R`` (:meth:`dots`' arguments): from ``R^T`` when
        the kernel has it (:meth:`columns`)."""
        if self.rt is None:
            return self.dots(self.r, d, rows, src, init, out)
        return self.columns(self.rt, d, rows, src, init, out)

    def projection(self, d: PrimExpr, src: Callable[[PrimExpr, PrimExpr], PrimExpr]) -> Stmt:
        """A step's input projection of every gate row with the input biases
        (:meth:`dots`' arguments): from ``W^T`` when the kernel has it."""
        def bias(b: PrimExpr, g: PrimExpr) -> PrimExpr:
            return self.bias[d, g]
        if self.wt is None:
            return self.dots(self.w, d, (0, self.gates), src, bias)
        return self.columns(self.wt, d, (0, self.gates), src, bias)

    def transposed(self) -> list[Stmt]:
        """``W^T`` and ``R^T`` of the kernel in panels (``T[d, p, k, gi] =
        M[d, p * tile + gi, k]``, zero past the gates), each nest marked: once
        per build when the weight is a constant
        (:mod:`phasec.te.schedules.transposed_weights`)."""
        out = []
        for t, m, mark in ((self.wt, self.w, INPUT_MARK), (self.rt, self.r, RECURRENCE_MARK)):
            if t is None:
                continue
            rows = arith.const_int(m.shape[1])

            def store(d: Var, p: Var, k: Var, gi: Var, t: Buffer = t, m: Buffer = m) -> Stmt:
                g = arith.simplify(p * self.tile + gi)
                value = (m[d, g, k] if rows % self.tile == 0 else tir.Select(
                    BinaryOp("<", g, i64(rows)),
                    m[d, BinaryOp("min", g, i64(rows - 1)), k], _const(0.0, self.dt)))
                return BufferStore(t, value, (d, p, k, gi))
            out.append(tir.AttrStmt(mark, i64(0), _loop(t.shape[0], lambda d: _loop(
                t.shape[1], lambda p: _loop(t.shape[2], lambda k: _loop(
                    self.tile, lambda gi: store(d, p, k, gi), "gi"), "k"), "p"), "d")))
        return out

    def each(self, body: Callable[[Var], Stmt]) -> Stmt:
        """``body(b)`` for every batch entry still inside its sequence at the
        current step."""
        return _loop(self.batch, lambda b: IfThenElse(BinaryOp("<", self.s, self.lenb[b]),
                                                      body(b)), "b")

    def lanes_for(self, length: PrimExpr) -> int:
        """Partial sums of a dot product of ``length`` terms: a vector of them
        unless the length is known to be under one."""
        n = arith.const_int(length)
        return self.lanes if n is None or n >= self.lanes else 1

    def _scalar_row(self, b: PrimExpr, g: PrimExpr, length: PrimExpr, store, term,
                    init) -> Stmt:
        """One row's dot product, term after term, in the part buffer's first lane."""
        first = BufferStore(self.part, init(g), (b, i64(0)))
        add = _loop(length, lambda k: BufferStore(self.part, self.part[b, i64(0)] + term(g, k),
                                                  (b, i64(0))), "k")
        return seq(first, add, store(g, self.part[b, i64(0)]))

    def _block(self, b: PrimExpr, g0: PrimExpr, nrows: int, length: PrimExpr, lanes: int,
               store, term, init) -> Stmt:
        """Rows ``g0 .. g0 + nrows - 1``, their partial sums in
        ``part[b, r * lanes + lane]``."""
        part = self.part
        chunks = arith.simplify(BinaryOp("//", length, i64(lanes)))
        done = arith.simplify(chunks * lanes)

        def at(r: PrimExpr, ln: PrimExpr) -> tuple[PrimExpr, PrimExpr]:
            return (b, arith.simplify(r * lanes + ln))

        def g(r: PrimExpr) -> PrimExpr:
            return arith.simplify(g0 + r)

        def rows(body: Callable[[Var], Stmt]) -> Stmt:
            return _loop(nrows, body, "r", "unroll" if nrows > 1 else "serial")
        zero = _loop(nrows * lanes, lambda ln: BufferStore(part, _const(0.0, self.dt), (b, ln)),
                     "l", "vectorized")

        def chunk(kc: Var) -> Stmt:
            return rows(lambda r: _loop(lanes, lambda ln: BufferStore(
                part, part[at(r, ln)] + term(g(r), kc * lanes + ln), at(r, ln)), "l",
                "vectorized"))
        tail = _loop(arith.simplify(length - done), lambda kk: rows(lambda r: BufferStore(
            part, part[at(r, i64(0))] + term(g(r), kk + done), at(r, i64(0)))), "k")
        folds = []
        width = lanes // 2
        while width >= 1:
            folds.append(rows(lambda r, w=width: _loop(w, lambda ln: BufferStore(
                part, part[at(r, ln)] + part[at(r, ln + w)], at(r, ln)), "l",
                "vectorized" if w >= 4 else "unroll")))
            width //= 2
        totals = rows(lambda r: store(g(r), init(g(r)) + part[at(r, i64(0))]))
        return seq(zero, _loop(chunks, chunk, "kc"), tail, *folds, totals)

    def step(self, d: PrimExpr) -> Stmt:
        """Step ``self.s`` of every live batch entry in direction ``d`` (entry
        ``b`` at its position ``tpos[b]``); stores Y."""
        gh = self.gh

        def rb(g: PrimExpr) -> PrimExpr:
            return self.bias[d, arith.simplify(gh + g)]

        def hprev(b: PrimExpr, k: PrimExpr) -> PrimExpr:
            return self.h[b, k]

        def acc_rb(b: PrimExpr, g: PrimExpr) -> PrimExpr:
            return self.acc[b, g] + rb(g)
        # the input projection of every gate row, with the input biases
        if self.xp is not None:  # computed before the time loop (hoisted)
            xp = self.xp
            proj = self.each(lambda b: _loop(gh, lambda g: BufferStore(
                self.acc, xp[arith.simplify(self.tpos[b] * self.batch + b), g], (b, g)), "g"))
        else:
            proj = self.projection(d, lambda b, k: self.x[self.tpos[b], b, k])
        store_y = self.each(lambda b: _loop(self.hid, lambda j: BufferStore(
            self.out, self.h[b, j], (self.tpos[b], d, b, j)), "j"))
        if self.cell == "rnn":
            upd = self.each(lambda b: _loop(self.hid, lambda j: BufferStore(
                self.h, self.act(0, self.acc[b, j]), (b, j)), "j"))
            return seq(proj, self.recurrence(d, (0, 1), hprev, acc_rb), upd, store_y)
        if self.cell == "lstm":
            return seq(proj, self.recurrence(d, (0, 4), hprev, acc_rb),
                       self.each(lambda b: self._lstm_update(d, b)), store_y)
        return seq(proj, *self._gru(d, hprev, acc_rb), store_y)

    def hoisted_projection(self, d: PrimExpr) -> Stmt:
        """``xp[t * N + b, g] = bias[d, g] + sum_k x[t, b, k] * w[d, g, k]``
        for every step ``t`` and entry ``b`` (past an entry's length too: x
        is defined there): each block of W's rows over all of them; from
        ``W^T``, :attr:`projection_rows` rows of xp at a time, each panel row
        loaded once for all of them."""
        n = self.batch

        def bias(_: PrimExpr, g: PrimExpr) -> PrimExpr:
            return self.bias[d, g]
        if self.wt is None:
            step: list[PrimExpr] = [i64(0)]  # the step loop's variable, for src

            def every_step(body: Callable[[Var], Stmt]) -> Stmt:
                def at_step(t: Var) -> Stmt:
                    step[0] = t
                    return _loop(n, body, "b")
                return _loop(self.t_len, at_step, "t")
            return self.dots(self.w, d, (0, self.gates), lambda b, k: self.x[step[0], b, k],
                             bias, self.xp, every_step,
                             lambda b: arith.simplify(step[0] * n + b))
        rows = arith.simplify(self.t_len * n)
        per = self.projection_rows
        whole = arith.simplify(BinaryOp("//", rows, i64(per)))

        def blocks(body: Callable[[list[PrimExpr]], Stmt]) -> Stmt:
            first = _loop(whole, lambda rb: body(
                [arith.simplify(rb * per + i) for i in range(per)]), "rb")
            done = arith.simplify(whole * per)
            rest = _loop(arith.simplify(rows - done),
                         lambda r: body([arith.simplify(done + r)]), "rr")
            return seq(first, rest)

        def x_row(r: PrimExpr, k: PrimExpr) -> PrimExpr:
            return self.x[arith.simplify(BinaryOp("//", r, n)),
                          arith.simplify(BinaryOp("%", r, n)), k]
        return self.columns(self.wt, d, (0, self.gates), x_row, bias, self.xp, blocks,
                            lambda r: r)

    def _lstm_update(self, d: PrimExpr, b: PrimExpr) -> Stmt:
        dt = self.dt

        def body(j: Var) -> Stmt:
            cp = self.c[b, j]
            pi, po, pf = (self.p[d, self.off(k, j)] for k in range(3))
            iv, fv, cv = Var("lstm_i", dt), Var("lstm_f", dt), Var("lstm_c", dt)
            i_e = self.act(0, self.acc[b, j] + pi * cp)
            f_e = (_const(1.0, dt) - iv if self.a["input_forget"]
                   else self.act(0, self.acc[b, self.off(2, j)] + pf * cp))
            c_e = fv * cp + iv * self.act(1, self.acc[b, self.off(3, j)])
            o_e = self.act(0, self.acc[b, self.off(1, j)] + po * cv)
            # the cell state itself is not clipped (ONNX Runtime's rule)
            stores = seq(BufferStore(self.c, cv, (b, j)),
                         BufferStore(self.h, o_e * self.act(2, cv, clipped=False), (b, j)))
            return LetStmt(iv, i_e, LetStmt(fv, f_e, LetStmt(cv, c_e, stores)))
        return _loop(self.hid, body, "j")

    def _gru(self, d: PrimExpr, hprev, acc_rb) -> list[Stmt]:
        dt, hid, gh = self.dt, self.hid, self.gh

        def rb(b: PrimExpr, g: PrimExpr) -> PrimExpr:
            return self.bias[d, arith.simplify(gh + g)]
        stmts = [self.recurrence(d, (0, 2), hprev, acc_rb),
                 # z and r activated in place
                 self.each(lambda b: _loop(arith.simplify(2 * hid), lambda g: BufferStore(
                     self.acc, self.act(0, self.acc[b, g]), (b, g)), "g"))]
        if self.a["linear_before_reset"]:
            # rh = h Rh + Rbh; h~ = g(x Wh + Wbh + r * rh)
            stmts.append(self.recurrence(d, (2, 3), hprev, rb, out=self.rh))

            def pre(b: PrimExpr, j: PrimExpr) -> PrimExpr:
                return self.acc[b, self.off(2, j)] + self.acc[b, self.off(1, j)] * self.rh[b, j]
        else:
            # (r * h) first: the product reads every r
            stmts.append(self.each(lambda b: _loop(hid, lambda k: BufferStore(
                self.rh, self.acc[b, self.off(1, k)] * self.h[b, k], (b, k)), "k")))
            stmts.append(self.recurrence(d, (2, 3), lambda b, k: self.rh[b, k], acc_rb))

            def pre(b: PrimExpr, j: PrimExpr) -> PrimExpr:
                return self.acc[b, self.off(2, j)]

        def upd(b: Var) -> Stmt:
            def one(j: Var) -> Stmt:
                z = self.acc[b, j]
                new = (_const(1.0, dt) - z) * self.act(1, pre(b, j)) + z * self.h[b, j]
                return BufferStore(self.h, new, (b, j))
            return _loop(hid, one, "j")
        stmts.append(self.each(upd))
        return stmts

    def length(self, b: PrimExpr) -> PrimExpr:
        """Entry ``b``'s length, clamped to [0, T]."""
        if self.lens is None:
            return self.t_len
        v = self.lens[b]
        v = v if v.dtype == "int64" else tir.Cast("int64", v)
        return BinaryOp("min", BinaryOp("max", v, i64(0)), self.t_len)

    def direction(self, d: PrimExpr, reverse: PrimExpr | bool) -> Stmt:
        """The whole sequence in direction ``d`` (a constant, or the loop
        variable over both directions: ``reverse`` is then an expression)."""
        hid, n = self.hid, self.batch

        def init(b: Var) -> Stmt:
            def one(j: Var) -> Stmt:
                stores = [BufferStore(self.h, self.h0[d, b, j], (b, j))]
                if self.c0 is not None:
                    stores.append(BufferStore(self.c, self.c0[d, b, j], (b, j)))
                return seq(*stores)
            return seq(BufferStore(self.lenb, self.length(b), (b,)), _loop(hid, one, "i"))

        def per_step(s: Var) -> Stmt:
            self.s = s

            def position(b: Var) -> Stmt:
                back = BinaryOp("-", BinaryOp("-", self.lenb[b], i64(1)), s)
                t = (tir.Select(reverse, back, s) if isinstance(reverse, PrimExpr)
                     else back if reverse else s)
                return BufferStore(self.tpos, t, (b,))

            def pad(b: Var) -> Stmt:  # Y is 0 past an entry's length
                return IfThenElse(BinaryOp(">=", s, self.lenb[b]), _loop(hid, lambda j: BufferStore(
                    self.out, _const(0.0, self.dt), (s, d, b, j)), "j"))
            return seq(self.each(position), self.step(d), _loop(n, pad, "b"))

        def final(b: Var) -> Stmt:
            ran = BinaryOp(">", self.lenb[b], i64(0))  # no step: zeros, not the initial state

            def one(j: Var) -> Stmt:
                def state(buf: Buffer) -> PrimExpr:
                    return tir.Select(ran, buf[b, j], _const(0.0, self.dt))
                stores = [BufferStore(self.out, state(self.h), (self.t_len, d, b, j))]
                if self.c0 is not None:
                    stores.append(BufferStore(self.out, state(self.c),
                                              (arith.simplify(self.t_len + 1), d, b, j)))
                return seq(*stores)
            return _loop(hid, one, "o")
        hoisted = [] if self.xp is None else [self.hoisted_projection(d)]
        return seq(_loop(n, init, "b"), *hoisted, _loop(self.t_len, per_step, "s"),
                   _loop(n, final, "b"))

    def build(self) -> Stmt:
        """The kernel's statement, its buffers allocated."""
        per = self.per
        if self.a["direction"] != "bidirectional":
            body = self.direction(i64(0), self.a["direction"] == "reverse")
        elif self.acts[:per] == self.acts[per:]:
            # one loop over both directions (half the code to compile)
            body = _loop(2, lambda d: self.direction(d, BinaryOp("==", d, i64(1))), "d")
        else:  # activations differ by direction: one copy of the loop each
            parts = []
            for d in range(2):
                self.acts_of = d
                parts.append(self.direction(i64(d), d == 1))
            body = seq(*parts)
        body = seq(*self.transposed(), body)
        for buf in (self.tpos, self.lenb, self.part, self.rh, self.acc, self.c, self.h, self.xp,
                    self.rt, self.wt):
            if (buf is None or buf is self.c and self.c0 is None
                    or buf is self.rh and self.cell != "gru"):
                continue
            body = Allocate(buf, body)
        return body

"""Loops in LLVM IR: serial loops, outlined parallel loops, and the polls of
the cancel flag that make a running kernel interruptible.

Every loop whose body holds another loop checks the process-wide flag
``phasec_rt_cancel`` once per iteration; an innermost loop that may run long
(a symbolic or large extent) is strip-mined into chunks of POLL_EVERY
iterations with one check per chunk, so the inner loop stays a plain counted
loop LLVM vectorizes. When the flag is set the kernel frees its live heap
buffers and returns RC_CANCELLED; :mod:`phasec.backend.interrupt` sets it
when SIGINT or SIGTERM arrives while a kernel runs.

A ``parallel`` loop's body becomes a function of its own over an iteration
chunk ``[begin, end)`` (keeping ``noalias`` on its buffer parameters), with
a trampoline that unpacks a context struct; ``phasec_rt_parallel_for`` (the
process-wide thread pool, see irlib) runs the chunks on all cores. The body
function is emitted by a fresh set of emitters (``outline``, see
:mod:`.kernel`); nested parallel loops run serially, small loops too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from phasec.ir import tir
from phasec.ir.intrinsics import C_MATH, INTRINSIC_TABLE
from phasec.backend.llvm.abi import CANCEL_FLAG, RC_CANCELLED, RC_OK, walk
from phasec.backend.llvm.context import BufferInfo, KernelContext
from phasec.backend.llvm.conversions import Conversions
from phasec.backend.llvm.expressions import ExpressionEmitter
from phasec.backend.llvm.fpenv import kernel_env_call
from phasec.backend.llvm.irtext import (
    BITS, LLVM_TYPE, FunctionText, is_intlike, is_signed, quote, sanitize,
)
from phasec.backend.llvm.vectors import VectorLoops, small_local
from phasec.backend.llvm.work import estimate_work

__all__ = ["LoopEmitter", "OutlinedFunction", "POLL_EVERY", "poll_mode"]

#: how many iterations an innermost loop runs between two looks at the cancel flag
POLL_EVERY = 1 << 16

#: a serial loop of at most COPY_LOOP_TRIPS iterations (one LLVM would
#: unroll fully) around a vectorized copy of at least COPY_LOOP_ELEMENTS
#: elements an iteration from a parameter or from a local buffer of at
#: least LARGE_SOURCE_ELEMENTS is not unrolled (see LoopEmitter._loop_md)
COPY_LOOP_TRIPS = 32
COPY_LOOP_ELEMENTS = 32
LARGE_SOURCE_ELEMENTS = 4096

#: a loop of at most this many iterations around a register tile of vector
#: instructions is left to LLVM's unroller (see LoopEmitter.emit_for)
TILE_LOOP_UNROLLED = 8

#: a loop body whose loops run at most this many iterations in all (constant
#: extents) is treated as straight-line code when placing cancel polls
SHORT_BODY_TRIPS = 1 << 12


def _stores_only(body: tir.Stmt, params: tuple) -> bool:
    """Whether every store in ``body`` (a straight-line body) writes one of
    the buffers ``params`` (the kernel's parameters, not a local buffer)."""
    stack: list[tir.Stmt] = [body]
    while stack:
        s = stack.pop()
        if type(s) is tir.BufferStore and not any(s.buffer is p for p in params):
            return False
        stack.extend(tir.stmt_children(s))
    return True


def _straight_line_body(body: tir.Stmt) -> bool:
    """No branch, no loop, and no address computed from data (a load or a
    checked index inside an index) in ``body``."""
    stack: list[tir.Stmt] = [body]
    exprs: list[tir.PrimExpr] = []
    while stack:
        s = stack.pop()
        t = type(s)
        if t is tir.IfThenElse or t is tir.For or t is tir.While:
            return False
        if t is tir.BufferStore:
            exprs += [s.value, *s.indices]
            if any(_reads_data(i) for i in s.indices):
                return False
        elif t is tir.LetStmt or t is tir.Evaluate:
            exprs.append(s.value)
        stack.extend(tir.stmt_children(s))
    while exprs:
        e = exprs.pop()
        if type(e) is tir.BufferLoad and any(_reads_data(i) for i in e.indices):
            return False
        exprs.extend(tir.expr_children(e))
    return True


def _cannot_vectorize(body: tir.Stmt, is_checked: Callable[[Any, int], bool]) -> bool:
    """Whether ``body`` holds what LLVM's loop vectorizer never handles: a
    C math library call (``T.atanh``...: no vector form) or an early exit
    (a run-time bounds check, ``is_checked``, or a checked data index). (A
    test of an integer divisor is no exit: it sets a flag the loop's exit
    reads, see KernelContext.note_zero_divisor.)"""
    for node in walk(body):
        t = type(node)
        if t is tir.Call:
            spec = INTRINSIC_TABLE.get(node.name)
            if node.name == "checked_index" or (spec is not None and spec.lowering == C_MATH):
                return True
        elif (t is tir.BufferLoad or t is tir.BufferStore) and any(
                is_checked(node, d) for d in range(len(node.indices))):
            return True
    return False


def _copy_nest(body: tir.Stmt, params: tuple) -> int:
    """The elements ``body`` copies when it is a perfect loop nest (constant
    extents) around one store of one load, cast or not, with a vectorized
    innermost loop, reading a parameter or a large buffer (a packing copy,
    such as a convolution's gathering of input columns into a tile); 0 for
    any other body, and for a copy out of a small local buffer, which may be
    a register tile that only a fully unrolled copy keeps in registers."""
    s, vectorized, elements = body, False, 1
    while True:
        t = type(s)
        if t is tir.For:
            if s.kind == "parallel" or not isinstance(s.extent, tir.IntImm):
                return 0
            vectorized = s.kind == "vectorized"
            elements *= s.extent.value
            s = s.body
        elif t is tir.Block and s.init is None:
            s = s.body
        else:
            break
    if type(s) is not tir.BufferStore or not vectorized:
        return 0
    value = s.value.value if type(s.value) is tir.Cast else s.value
    if type(value) is not tir.BufferLoad:
        return 0
    source = value.buffer
    if not any(source is p for p in params):
        size = 1
        for d in source.shape:
            if not isinstance(d, tir.IntImm):
                return 0
            size *= d.value
        if size < LARGE_SOURCE_ELEMENTS:
            return 0
    return elements


def _reads_data(e: tir.PrimExpr) -> bool:
    """Whether an index expression loads from a buffer or checks a data index."""
    stack = [e]
    while stack:
        x = stack.pop()
        if type(x) is tir.BufferLoad or (type(x) is tir.Call and x.name == "checked_index"):
            return True
        stack.extend(tir.expr_children(x))
    return False


def _uses(e: tir.PrimExpr, var: tir.Var) -> bool:
    return any(x is var for x in walk(e))


def _contiguous_in(body: tir.Stmt, var: tir.Var) -> bool:
    """Whether every buffer access of ``body`` steps by one element, or not
    at all, as ``var`` steps by one: ``var`` only in the last index, there as
    ``var`` plus or minus terms without it (a masked full-width vector of a
    strided access is a masked gather)."""
    def unit(e: tir.PrimExpr) -> bool:
        while e is not var:
            if type(e) is tir.BinaryOp and e.op == "+" and not _uses(e.lhs, var):
                e = e.rhs
            elif type(e) is tir.BinaryOp and e.op in "+-" and not _uses(e.rhs, var):
                e = e.lhs
            else:
                return not _uses(e, var)
        return True
    for node in walk(body):
        if type(node) in (tir.BufferLoad, tir.BufferStore) and node.indices:
            *lead, last = node.indices
            if any(_uses(i, var) for i in lead) or not unit(last):
                return False
    return True


def _trip_children(s: tir.Stmt) -> list[tir.Stmt]:
    """The statements whose loops :func:`_const_trips` adds up under ``s``."""
    t = type(s)
    if t is tir.For:
        return [s.body]
    if t is tir.SeqStmt:
        return list(s.stmts)
    if t is tir.IfThenElse:
        return [s.then_case] + ([] if s.else_case is None else [s.else_case])
    if t is tir.Block:
        return [s.body] + ([] if s.init is None else [s.init])
    return []


def _const_trips(root: tir.Stmt) -> int | None:
    """Iterations of all the loops in ``root`` (0: none; None: some extent is
    not a constant). With an explicit stack, not recursion: a max pool's
    13 x 13 border windows are let chains, one inside the other, ~1000 deep
    (ddddocr's detector)."""
    values: list[int | None] = []
    work: list[tuple[tir.Stmt, bool]] = [(root, False)]
    while work:
        s, ready = work.pop()
        if ready:  # its children's values are the last on ``values``
            n = len(_trip_children(s))
            inner = values[len(values) - n:]
            del values[len(values) - n:]
            if None in inner:
                values.append(None)
            elif type(s) is tir.For:
                values.append(s.extent.value * max(inner[0], 1))
            else:
                values.append(sum(inner))  # (type: every value is an int here)
            continue
        while type(s) in (tir.Allocate, tir.LetStmt, tir.AttrStmt):
            s = s.body
        t = type(s)
        if t is tir.While or (t is tir.For and not isinstance(s.extent, tir.IntImm)):
            values.append(None)  # as many iterations as the data decides, or unknown
            continue
        kids = _trip_children(s)
        if not kids:
            values.append(0)
            continue
        work.append((s, True))
        work.extend((k, False) for k in kids)
    return values[0]


def _indexes_tile(body: tir.Stmt, var: tir.Var, params: tuple) -> bool:
    """Whether ``body`` indexes a small local buffer (a register tile, see
    :func:`.vectors.small_local`) with ``var``, directly or through a block axis
    bound to it."""
    dependent = {id(var)}

    def uses(e: Any) -> bool:
        return any(type(n) is tir.Var and id(n) in dependent for n in walk(e))

    for node in walk(body):
        t = type(node)
        if t is tir.Block:
            for iv, value in zip(node.iter_vars, node.iter_values):
                if uses(value):
                    dependent.add(id(iv.var))
        elif (t is tir.BufferLoad or t is tir.BufferStore) and small_local(
                node.buffer, params) and any(uses(i) for i in node.indices):
            return True
    return False


def _is_one(extent: Any) -> bool:
    return isinstance(extent, tir.IntImm) and extent.value == 1


def poll_mode(body: tir.Stmt, dt: str, extent: Any) -> str | None:
    """Where a loop checks the cancel flag: ``"each"`` iteration when its
    body holds a loop that may run long (one load per iteration of an
    outer loop costs nothing), ``"strip"`` (once per POLL_EVERY
    iterations, the loop strip-mined so the inner part still vectorizes)
    for an innermost loop that may run long, None for one that cannot (a
    constant extent up to POLL_EVERY, or a loop variable narrower than 32
    bits). A loop whose body only holds loops of a few constant
    iterations (a register tile's unrolled and vectorized loops) counts
    as innermost: a poll inside its body would sit between the tile's
    instructions."""
    inner = _const_trips(body)
    if inner is None or inner > SHORT_BODY_TRIPS:
        return "each"
    if BITS[dt] < 32 or (isinstance(extent, tir.IntImm)
                          and extent.value * max(inner, 1) <= POLL_EVERY):
        return None
    return "strip"


class OutlinedFunction(Protocol):
    """The emitters of an outlined parallel loop body (:class:`.kernel.FunctionEmitters`)."""

    loops: LoopEmitter
    conversions: Conversions

    def emit_stmt(self, s: tir.Stmt) -> None:
        """Emit ``s`` into the outlined function."""


class LoopEmitter:
    """Emits the loops of a kernel into ``ctx``'s function; ``outline`` makes
    the emitters of a parallel loop's body function from its context."""

    def __init__(self, ctx: KernelContext, expressions: ExpressionEmitter,
                 conversions: Conversions,
                 outline: Callable[[KernelContext], OutlinedFunction],
                 vectors: VectorLoops | None = None) -> None:
        self.ctx = ctx
        self.expressions = expressions
        self.conversions = conversions
        self.outline = outline
        self.vectors = vectors
        #: loops emitted as LLVM loops (all but vector instructions and
        #: ``unroll`` loops, which LLVM unrolls fully), so far
        self.loops_opened = 0
        #: the serial loops a schedule marked ``tir.KEEP_LOOP_ATTR`` (by ``id``:
        #: the nodes live in the function being emitted), with the copies of
        #: the body LLVM may make
        self._kept: dict[int, int] = {}

    def keep(self, s: tir.For, copies: int = 1) -> None:
        """Emit the loop ``s`` (when serial) as a loop LLVM does not unroll,
        or unrolls ``copies`` times only (``tir.KEEP_LOOP_ATTR``)."""
        self._kept[id(s)] = max(1, copies)

    def _loop_bounds(self, s: tir.For) -> tuple[str, str, str]:
        v = s.loop_var
        dt = self.ctx.check_dtype(v.dtype, f"loop variable '{v.name}'", s)
        if not is_intlike(dt) or dt == "bool":
            raise self.ctx.error(f"loop variable '{v.name}' must have an integer dtype, "
                                 f"not {dt}", s)
        lo = self.expressions.emit_value_as(s.min, dt, f"the start of loop '{v.name}'")
        ext = self.expressions.emit_value_as(s.extent, dt, f"the extent of loop '{v.name}'")
        return dt, lo, ext

    def emit_for(self, s: tir.For, tasks: list[Any]) -> None:
        """A ``for`` loop (its body is pushed on ``tasks``, then its closing)."""
        if s.kind == "thread_binding":
            # A GPU kernel: run serially, a kernel whose threads synchronize or
            # share memory would compute something else, so it is refused.
            raise self.ctx.error(f"loop '{s.loop_var.name}' is bound to the GPU thread axis "
                                 f"{s.thread!r} (T.thread_binding); the LLVM backend compiles "
                                 f"for the host CPU and does not run GPU-scheduled kernels", s)
        if s.kind == "vectorized" and self.vectors is not None and self.vectors.try_emit(s):
            return  # one vector: vector instructions, no loop (see .vectors)
        if s.kind != "unroll" and not _is_one(s.extent):
            self.loops_opened += 1
        if s.kind == "parallel" and self.ctx.allow_parallel:
            self._parallel_for(s, tasks)
            return
        fn = self.ctx.fn
        dt, lo, ext = self._loop_bounds(s)
        ty = LLVM_TYPE[dt]
        signed = is_signed(dt)
        end = fn.tmp("end")
        fn.emit(f"{end} = add {'nsw ' if signed else ''}{ty} {lo}, {ext}")
        mode = poll_mode(s.body, dt, s.extent)
        iv, close_loop = self.open_loop(ty, signed, lo, end, mode, sanitize(s.loop_var.name))
        prev = self.ctx.bind_var(s.loop_var, iv)
        md = self._loop_md(s)
        opened = self.loops_opened
        vectors = self.vectors.emitted if self.vectors is not None else 0

        def close() -> None:
            self.ctx.unbind_var(s.loop_var, prev)
            if (s.kind == "serial" and md is None and not (
                    isinstance(s.extent, tir.IntImm) and s.extent.value <= TILE_LOOP_UNROLLED)
                    and self.loops_opened == opened
                    and self.vectors is not None and self.vectors.emitted > vectors
                    and not _indexes_tile(s.body, s.loop_var, self.ctx.func.params)):
                # The innermost loop around a register tile of vector
                # instructions, not indexing the tile (a reduction into it):
                # with the tile in registers from the start, LLVM unrolled
                # such a loop by 2, which it did not when its vectorizer
                # made the vectors late (and the unrolled 1x1 convolutions
                # spilled address registers). Kept a loop, as before; a
                # loop over the tile's rows (its write-back) and a short one
                # (a 3x3 window's 3 columns) are left to LLVM.
                close_loop(self.ctx.mod.loop_metadata(['!"llvm.loop.unroll.disable"']))
            else:
                close_loop(md)
            self.ctx.raise_zero_divisor()  # a zero divisor the loop met: out of the loop

        tasks.append(close)
        tasks.append(s.body)

    def emit_while(self, s: tir.While, tasks: list[Any]) -> None:
        """``while cond: body``: the condition is tested at the head of every
        iteration, which also polls the cancel flag (the trip count is the
        data's)."""
        fn = self.ctx.fn
        head, body, done = fn.label("while.head"), fn.label("while.body"), fn.label("while.end")
        fn.emit(f"br label %{head}")
        fn.start(head)
        self._poll()
        c = self.expressions.emit_cond(s.condition)
        fn.emit(f"br i1 {c}, label %{body}, label %{done}")
        fn.start(body)

        def close() -> None:
            self.ctx.raise_zero_divisor()  # each iteration (the data decides how many)
            fn.emit(f"br label %{head}")
            fn.start(done)

        tasks.append(close)
        tasks.append(s.body)

    # -- cancellation ----------------------------------------------------------
    def _poll(self) -> None:
        """Return RC_CANCELLED if the cancel flag is set (see :mod:`phasec.backend.interrupt`)."""
        fn = self.ctx.fn
        flag, stop = fn.tmp("cancel"), fn.tmp("cancel.set")
        fn.emit(f"{flag} = load volatile i32, ptr @{CANCEL_FLAG}, align 4")
        fn.emit(f"{stop} = icmp ne i32 {flag}, 0")
        bad, go = fn.label("cancel"), fn.label("go")
        fn.emit(f"br i1 {stop}, label %{bad}, label %{go}, !prof {self.ctx.mod.unlikely_md()}")
        fn.start(bad)
        self.ctx.error_return(str(RC_CANCELLED))
        fn.start(go)

    def open_loop(self, ty: str, signed: bool, lo: str, end: str, mode: str | None,
                  name: str) -> tuple[str, Callable[[str | None], None]]:
        """Emit the head of ``for iv in [lo, end)`` (polling as ``mode`` says);
        returns ``iv`` and the function that closes the loop, given its loop
        metadata, once the body is emitted."""
        fn = self.ctx.fn
        lt = "slt" if signed else "ult"
        exit_ = fn.label("for.exit")
        inner_lo, inner_end, inner_exit = lo, end, exit_
        if mode == "strip":
            chdr, cbody, clatch = (fn.label(x) for x in ("strip.hdr", "strip.body", "strip.latch"))
            c, cend = fn.tmp(name + ".strip"), fn.tmp(name + ".strip.end")
            pre = fn.block
            fn.emit(f"br label %{chdr}")
            fn.start(chdr)
            fn.emit(f"{c} = phi {ty} [ {lo}, %{pre} ], [ {cend}, %{clatch} ]")
            more = fn.tmp("strip.more")
            fn.emit(f"{more} = icmp {lt} {ty} {c}, {end}")
            fn.emit(f"br i1 {more}, label %{cbody}, label %{exit_}")
            fn.start(cbody)
            self._poll()
            rem, big, step = fn.tmp("strip.rem"), fn.tmp("strip.big"), fn.tmp("strip.step")
            fn.emit(f"{rem} = sub {ty} {end}, {c}")  # > 0 here: c < end
            fn.emit(f"{big} = icmp ugt {ty} {rem}, {POLL_EVERY}")
            fn.emit(f"{step} = add {ty} {c}, {POLL_EVERY}")  # only used when it does not wrap
            fn.emit(f"{cend} = select i1 {big}, {ty} {step}, {ty} {end}")
            inner_lo, inner_end, inner_exit = c, cend, clatch
        hdr, body, latch = (fn.label(x) for x in ("for.hdr", "for.body", "for.latch"))
        iv, nxt = fn.tmp(name), fn.tmp(name + ".next")
        pre = fn.block
        fn.emit(f"br label %{hdr}")
        fn.start(hdr)
        fn.emit(f"{iv} = phi {ty} [ {inner_lo}, %{pre} ], [ {nxt}, %{latch} ]")
        cond = fn.tmp("cond")
        fn.emit(f"{cond} = icmp {lt} {ty} {iv}, {inner_end}")
        fn.emit(f"br i1 {cond}, label %{body}, label %{inner_exit}")
        fn.start(body)
        if mode == "each":
            self._poll()

        def close(md: str | None) -> None:
            fn.emit(f"br label %{latch}")
            fn.start(latch)
            fn.emit(f"{nxt} = add {'nsw ' if signed else ''}{ty} {iv}, 1")
            fn.emit(f"br label %{hdr}" + (f", !llvm.loop {md}" if md else ""))
            if mode == "strip":
                fn.start(inner_exit)
                fn.emit(f"br label %{chdr}")
            fn.start(exit_)

        return iv, close

    def _loop_md(self, s: tir.For) -> str | None:
        copies = self._kept.get(id(s)) if s.kind == "serial" else None
        if copies == 1:
            return self.ctx.mod.loop_metadata(['!"llvm.loop.unroll.disable"'])
        if copies is not None:
            return self.ctx.mod.loop_metadata([f'!"llvm.loop.unroll.count", i32 {copies}'])
        if s.kind == "vectorized" and not _cannot_vectorize(
                s.body, self.expressions.access.is_checked):
            # (Such a loop stays a scalar loop: told to vectorize, LLVM would
            # fail and print a warning for every one of them.)
            props = ['!"llvm.loop.vectorize.enable", i1 true']
            width = self.ctx.options.prefer_vector_width or 128
            # Up to four vectors when the loop only writes the kernel's outputs
            # (an elementwise nest): fully unrolled first, its outer loop
            # would be the one vectorized, through gathers and scatters (a
            # squeeze-excite's x * s over 32-wide rows: 10x slower). Not for
            # a tile's local accumulators, which unrolled stay in registers.
            most = lanes = width // 32
            stores_only = _stores_only(s.body, self.ctx.func.params)
            if stores_only:
                most *= 4
            if (isinstance(s.extent, tir.IntImm) and 4 <= s.extent.value <= most
                    and _straight_line_body(s.body)):
                # At most one vector of float32: vectorized, no loop is left.
                # Unrolled first (LLVM fully unrolls short loops before it
                # vectorizes), it would become scalars that the SLP vectorizer
                # must regroup, slower to compile, and a register tile indexed
                # by it could stay in memory.
                props.append('!"llvm.loop.unroll.disable"')
                if (stores_only and s.extent.value < lanes and s.extent.value % 4
                        and _contiguous_in(s.body, s.loop_var)):
                    # Part of one vector (a 14- or 7-wide output row, the
                    # epilogue of a conv over flat rows): one full-width
                    # vector under a constant mask. Left to its cost model,
                    # LLVM took 4 lanes and a scalar remainder (a 14x14
                    # depthwise conv + SiLU: 292 -> 163 us, bench/README.md).
                    # Not over several vectors: a mask computed at every
                    # step, and a 56-wide row of a register tile stored in
                    # 8-lane halves and read back in 16 (a forwarding stall
                    # each: a 56x56 depthwise conv, 245 -> 304 us). Not in a
                    # register tile either: its accumulators stay unmasked.
                    # Nor a row of 4, 8 or 12: whole 4-lane vectors, no
                    # remainder to save (MobileNetV3 at 64x64, whose rows
                    # are 4 and 8 wide: 233 us masked, 225-227 us not, at
                    # the edge of the noise). Nor a strided access (a max
                    # pool's columns at stride 2: masked gathers, 256x27x27
                    # 3x3/2 31 -> 119 us).
                    props.append('!"llvm.loop.vectorize.predicate.enable", i1 true')
                    props.append(f'!"llvm.loop.vectorize.width", i32 {lanes}')
                # (Only on a straight-line body with data-independent
                # addresses: a loop LLVM then fails to vectorize, a gather or
                # a scatter, would stay a loop and LLVM would warn on stderr
                # that the vectorization it was told to do did not happen.
                # Nor on 2-3 iterations: LLVM does not vectorize the last
                # steps of a partial-sum tree fold, part[l] += part[l + 2],
                # and warns the same way; unrolled they cost nothing.)
            if not isinstance(s.extent, tir.IntImm):
                # One vector per iteration: interleaved, a loop of symbolic
                # extent needs several vectors' worth of iterations before
                # its vector body runs at all (a 16-wide softmax row stayed
                # scalar).
                props.append('!"llvm.loop.interleave.count", i32 1')
            return self.ctx.mod.loop_metadata(props)
        if (s.kind == "serial" and isinstance(s.extent, tir.IntImm)
                and s.extent.value <= COPY_LOOP_TRIPS
                and _copy_nest(s.body, self.ctx.func.params) >= COPY_LOOP_ELEMENTS):
            # The loops around a vectorized copy stay loops: LLVM would
            # unroll them fully (a 3x3x3x3 nest around a 32-wide strided
            # gather: 81 copies of it), which costs compile time (SqueezeNet's
            # first convolution: 0.75 -> 0.35 s) and no run time (a copy is
            # a few percent of the tile it feeds). Not around short copies
            # (a 13-wide row of a pooled image), where the loop's own work
            # would show, nor out of a small local buffer: a GEMM tile's
            # write-back kept as a loop kept the tile in memory (ResNet-50's
            # Winograd convolution 1.13x slower).
            return self.ctx.mod.loop_metadata(['!"llvm.loop.unroll.disable"'])
        if s.kind == "unroll":
            if isinstance(s.extent, tir.IntImm) and s.extent.value <= 256:
                return self.ctx.mod.loop_metadata(['!"llvm.loop.unroll.full"'])
            return self.ctx.mod.loop_metadata(['!"llvm.loop.unroll.enable"'])
        return None

    def _parallel_for(self, s: tir.For, tasks: list[Any]) -> None:
        """Outline the loop body; run it through ``phasec_rt_parallel_for``."""
        ctx = self.ctx
        fn = ctx.fn
        dt, lo, ext = self._loop_bounds(s)
        ext64 = self.conversions.to_i64(ext, dt)

        # What the body uses from the enclosing scope.
        cap_bufs: list[BufferInfo] = []
        cap_vars: list[tuple[tir.Var, str, str]] = []
        seen: set[int] = set()
        for n in walk(s.body):
            if id(n) in seen:
                continue
            seen.add(id(n))
            if isinstance(n, tir.Buffer):
                info = ctx.bufs.get(id(n))
                if info is not None:
                    cap_bufs.append(info)
            elif isinstance(n, tir.Var) and n is not s.loop_var:
                b = ctx.vars.get(id(n))
                if b is not None:
                    cap_vars.append((n, b[0], b[1]))
        # Values to pass: buffer pointers, non-constant dims, scalar variables.
        fields: list[tuple[str, str]] = []  # (llvm type, operand in the caller)
        for info in cap_bufs:
            fields.append(("ptr", info.ptr))
            fields.extend(("i64", d) for d in info.dims if d.startswith("%"))
        for v, op, vdt in cap_vars:
            fields.append((LLVM_TYPE[vdt], op))
        fields.append((LLVM_TYPE[dt], lo))

        ctx.n_parallel += 1
        body_sym = f"{ctx.symbol}.par{ctx.n_parallel}"
        tramp_sym = body_sym + ".tramp"

        # 1. The body function over [begin, end) with noalias buffers.
        params: list[str] = []
        child_bufs: list[BufferInfo] = []
        child_vars: list[tuple[tir.Var, str, str]] = []
        k = 0
        for info in cap_bufs:
            p = f"%c{k}"
            k += 1
            params.append(f"ptr noalias {p}")
            dims = []
            for d in info.dims:
                if d.startswith("%"):
                    dp = f"%c{k}"
                    k += 1
                    params.append(f"i64 {dp}")
                    dims.append(dp)
                else:
                    dims.append(d)
            child_bufs.append(BufferInfo(info.buffer, p, dims))
        for v, _op, vdt in cap_vars:
            p = f"%c{k}"
            k += 1
            params.append(f"{LLVM_TYPE[vdt]} {p}")
            child_vars.append((v, p, vdt))
        lo_param = f"%c{k}"
        params.append(f"{LLVM_TYPE[dt]} {lo_param}")
        params += ["i64 %begin", "i64 %end"]
        cfn = FunctionText(f"define internal i32 {quote(body_sym)}({', '.join(params)}) #0")
        child = KernelContext(ctx.mod, ctx.name, ctx.func, cfn, body_sym, allow_parallel=False)
        for info in child_bufs:
            child.bufs[id(info.buffer)] = info
        for v, p, vdt in child_vars:
            child.vars[id(v)] = (p, vdt)
            child.var_objs[id(v)] = v
        inner = self.outline(child)
        idx, close_loop = inner.loops.open_loop("i64", True, "%begin", "%end",
                                                poll_mode(s.body, "int64", None), "idx")
        ity = LLVM_TYPE[dt]
        idx_t = idx if dt in ("int64", "uint64") else inner.conversions.convert(idx, "int64", dt)
        iv = cfn.tmp(sanitize(s.loop_var.name))
        cfn.emit(f"{iv} = add {ity} {lo_param}, {idx_t}")
        child.bind_var(s.loop_var, iv)
        inner.emit_stmt(s.body)
        close_loop(None)
        child.raise_zero_divisor()
        cfn.emit(f"ret i32 {RC_OK}")
        child.finish_function()

        # 2. The trampoline unpacking the context struct.
        struct_ty = "{ " + ", ".join(t for t, _ in fields) + " }"
        lines = [f"define internal i32 {quote(tramp_sym)}(ptr %ctx, i64 %begin, i64 %end) #0 {{",
                 "entry:"]
        args = []
        for i, (t, _) in enumerate(fields):
            lines.append(f"  %f{i}.p = getelementptr inbounds {struct_ty}, ptr %ctx, i32 0, i32 {i}")
            lines.append(f"  %f{i} = load {t}, ptr %f{i}.p")
            args.append(f"{t} %f{i}")
        args += ["i64 %begin", "i64 %end"]
        # (a chunk runs on a pool thread: the kernels' floating-point environment there too)
        lines += kernel_env_call(f"call i32 {quote(body_sym)}({', '.join(args)})",
                                 ctx.mod.options.flush_subnormals, ctx.mod.declare)
        lines += ["  ret i32 %rc", "}", ""]
        ctx.mod.functions.append("\n".join(lines))

        # 3. The call site.
        ctx_ptr = fn.tmp("ctx")
        fn.allocas.append(f"  {ctx_ptr} = alloca {struct_ty}, align 16")
        for i, (t, op) in enumerate(fields):
            fp = fn.tmp("ctx.f")
            fn.emit(f"{fp} = getelementptr inbounds {struct_ty}, ptr {ctx_ptr}, i32 0, i32 {i}")
            fn.emit(f"store {t} {op}, ptr {fp}")
        rc = fn.tmp("rc")
        cost = estimate_work(s.body)
        fn.emit(f"{rc} = call i32 @phasec_rt_parallel_for(ptr {quote(tramp_sym)}, ptr {ctx_ptr}, "
                f"i64 {ext64}, i64 {cost})")
        bad = fn.tmp("fail")
        fn.emit(f"{bad} = icmp ne i32 {rc}, 0")
        ok, failed = fn.label("par.done"), fn.label("par.failed")
        fn.emit(f"br i1 {bad}, label %{failed}, label %{ok}")
        fn.start(failed)
        ctx.error_return(rc)  # what the failing chunk returned (out of memory, bad index, cancel)
        fn.start(ok)


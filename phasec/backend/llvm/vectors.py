"""Loops of exactly one vector emitted as vector instructions.

A schedule's register tile is a few fully unrolled loops around loops of
one vector (``T.vectorized(16)`` over float32 at 512 bits): unrolled, one
3x3 convolution of SqueezeNet holds hundreds of them, and LLVM's loop
vectorizer turned each into a vector body with a remainder loop that later
passes deleted again (890 loops vectorized over SqueezeNet's library, a
fifth of LLVM's time, and the clean-up after them). Such a loop is emitted
here as the vector instructions LLVM would have produced: the loop variable
at its first value gives the address of lane 0, a contiguous access is one
vector load or store, a value the loop does not change is computed once
and broadcast.

Only what is certainly the same computation is emitted this way, anything
else keeps the scalar loop LLVM vectorizes (:meth:`VectorLoops.try_emit`
returns False and has emitted nothing): a float32 store (in a block or not,
without init) of ``+ - * min max`` of float32 loads and values the loop does
not change, after float32 or bool lets of the same (a max pool's taps,
maxima and NaN test, :func:`.pool_window.nan_propagating_max`: LLVM's
vectorizer and the unrolling after it were ~60% of each pool's LLVM time);
compares of float32 values (``fcmp``, as the scalar emitter's),
``and``/``or`` of bools and selects whose arms cannot fail (the scalar
emitter branches around an arm that may: a vector evaluates every lane);
float arithmetic a comparison decides without ``contract`` (:mod:`.exact`),
as in the scalar code; no let in an index; every access in bounds without a
run-time check; an access the loop changes is contiguous (the loop variable,
coefficient 1, in its last index only, or a row-major address that
simplifies to one growing by 1 a lane: a flat index's row and column); the
stored buffer is read only at the very element each lane writes (no lane
reads what another wrote); 4 to 16 lanes, a power of two. The integer GEMM's
tile rows too: an int32 store of a constant (the accumulators' zeroing) or
of ``acc + T.dot4_u8s8(a, b)`` (:mod:`.intdot`) with ``acc`` the stored
element and ``a``, ``b`` int32 contiguous loads or values the loop does not
change, one call of the helper's vector variant. Left to LLVM, each of them
was a loop vectorized in a function that full unrolling had made huge: a 5x5
int8 convolution's kernel took 12 s of LLVM, 9 s of it in the loop
vectorizer. A register tile one of whose accumulation rows cannot be one
vector of at least TILE_MIN_LANES lanes is left to LLVM whole
(:meth:`VectorLoops.blocked_tiles`): a tile part vector instructions, part
loops, ran slower. The code LLVM makes of the result was compared kernel by
kernel with what it made of the loops (the same instructions in the 1x1
convolutions; the Winograd ones 5-12% faster), and the run time of every
kernel of ResNet-50, SqueezeNet, GoogLeNet and ShuffleNet measured both ways
(bench/README.md, issue 29 round 3).
"""

from __future__ import annotations

from typing import Any

from phasec.arith import simplify, substitute
from phasec.ir import tir
from phasec.backend.llvm.abi import body_walk, walk
from phasec.backend.llvm.access import BufferAccess
from phasec.backend.llvm.context import KernelContext
from phasec.backend.llvm.expressions import ExpressionEmitter, dot4_term
from phasec.backend.llvm.exprtypes import ExprTypes
from phasec.backend.llvm.intdot import DOT4_FUNCTION
from phasec.backend.llvm.irtext import (
    FCMP, FLOAT_SUFFIX, LLVM_TYPE, elem_bytes, float_literal, int_literal,
)

__all__ = ["VectorLoops", "index_step", "small_local", "SMALL_LOCAL_ELEMENTS"]

_DTYPE = "float32"
#: the integer GEMM's accumulators (module docstring)
_INT = "int32"
#: the narrowest loop emitted as one vector
MIN_LANES = 4
#: a register tile with a narrower row of accumulation is left to LLVM
#: whole: with its 4-wide row one vector, a tile of 16 + 8 + 4 + 1 wide rows
#: (GoogLeNet's 5x5 convolution over 13x13 images) ran 1.10x slower
TILE_MIN_LANES = 8
#: a local buffer of constant shape with fewer elements is a register tile
SMALL_LOCAL_ELEMENTS = 4096
_ARITH = {"+": "fadd", "-": "fsub", "*": "fmul"}
_MINMAX = {"min": "minimum", "max": "maximum"}
_BOOL = "bool"


def index_step(e: Any, steps: dict[int, int]) -> int | None:
    """How much integer index ``e`` grows from one lane to the next, given
    the step of each variable that changes (``steps``, by ``id``); None
    when it is not affine in them (a product of two changing values, a
    division or a load of a changing value)."""
    t = type(e)
    if t is tir.Var:
        return steps.get(id(e), 0)
    if t is tir.IntImm:
        return 0
    if t is tir.BinaryOp and e.op in ("+", "-"):
        a, b = index_step(e.lhs, steps), index_step(e.rhs, steps)
        if a is None or b is None:
            return None
        return a + b if e.op == "+" else a - b
    if t is tir.BinaryOp and e.op == "*":
        a, b = index_step(e.lhs, steps), index_step(e.rhs, steps)
        if a is None or b is None:
            return None
        if a == 0 and b == 0:
            return 0
        if a == 0 and type(e.lhs) is tir.IntImm:
            return int(e.lhs.value) * b
        if b == 0 and type(e.rhs) is tir.IntImm:
            return int(e.rhs.value) * a
        return None
    return 0 if not _changes(e, steps) else None


def _changes(e: Any, steps: dict[int, int]) -> bool:
    """Whether ``e`` reads a variable that changes from lane to lane."""
    stack = [e]
    while stack:
        n = stack.pop()
        if type(n) is tir.Var and steps.get(id(n), 0) != 0:
            return True
        stack.extend(tir.expr_children(n))
    return False


def _divides(e: Any) -> bool:
    """Whether ``e`` holds a ``//`` or ``%`` (only then can an index that is
    not affine in the lanes be part of a contiguous flat address)."""
    stack = [e]
    while stack:
        n = stack.pop()
        if type(n) is tir.BinaryOp and n.op in ("//", "%"):
            return True
        stack.extend(tir.expr_children(n))
    return False


def small_local(buf: tir.Buffer, params: tuple) -> bool:
    """A local buffer of constant shape under SMALL_LOCAL_ELEMENTS elements
    (a register tile, not a packed copy of an input)."""
    if any(buf is p for p in params):
        return False
    size = 1
    for d in buf.shape:
        if not isinstance(d, tir.IntImm):
            return False
        size *= d.value
    return size < SMALL_LOCAL_ELEMENTS


def _accesses(body: tir.Stmt) -> list[Any]:
    return [n for n in walk(body) if type(n) is tir.BufferLoad or type(n) is tir.BufferStore]


def _accumulates(loop: tir.For) -> bool:
    """A loop over a block with a reduction axis (a tile's update row)."""
    return type(loop.body) is tir.Block and any(iv.kind == "R" for iv in loop.body.iter_vars)


def _same_buffer(a: Any, b: Any) -> bool:
    """The same memory, as far as the TIR alone tells (before buffers are bound)."""
    return a.buffer is b.buffer


def _same(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are the same index: the same variables (by identity),
    constants and operators (anything else counts as different)."""
    ta = type(a)
    if ta is not type(b):
        return False
    if ta is tir.Var:
        return a is b
    if ta is tir.IntImm:
        return a.value == b.value and a.dtype == b.dtype
    if ta is tir.BinaryOp:
        return a.op == b.op and _same(a.lhs, b.lhs) and _same(a.rhs, b.rhs)
    return False


class VectorLoops:
    """Emits loops of one vector as vector instructions (module docstring)."""

    def __init__(self, ctx: KernelContext, types: ExprTypes, expressions: ExpressionEmitter,
                 access: BufferAccess, blocked: set[int] | None = None) -> None:
        self.ctx = ctx
        self.types = types
        self.expressions = expressions
        self.access = access
        #: loops emitted as vector instructions so far
        self.emitted = 0
        self._blocked = blocked  # (see blocked_tiles; shared by a kernel's functions)
        #: the vector of each let variable of the loop being emitted (by id)
        self._lets: dict[int, str] = {}
        #: the block axes of the loop being planned bound to a value that is
        #: not affine in the lanes (a flat index's row or column): var -> value
        self._pairs: dict[tir.Var, Any] = {}

    def lanes(self) -> int:
        """float32 lanes of one vector of the target's preferred width."""
        return (self.ctx.options.prefer_vector_width or 128) // 32

    def try_emit(self, s: tir.For) -> bool:
        """Emit ``s`` (a ``vectorized`` loop) as vector instructions and
        return True, or emit nothing and return False."""
        plan = self._plan(s, self._same_memory)
        blocked = self.blocked_tiles()
        if plan is None or any(id(n.buffer) in blocked for n in _accesses(s.body)):
            return False
        block, lets, body, steps, lanes = plan
        self._emit(s, block, lets, body, steps, lanes)
        self.emitted += 1
        return True

    def blocked_tiles(self) -> set[int]:
        """The small local buffers (register tiles) that an accumulation
        loop of the kernel that is not one vector of at least TILE_MIN_LANES
        accesses (a 16 + 8 + 3 wide tile's 3-wide edge, or a scalar column
        as a serial loop: 16 + 16 + 1): all their loops are left to LLVM. A tile part
        vector instructions, part a loop indexing it, stayed in memory
        (GoogLeNet's 5x5 convolutions over 27-wide rows 1.16x slower).
        Computed once per kernel (its parallel loops' functions share it)."""
        if self._blocked is not None:
            return self._blocked
        blocked: set[int] = set()
        params = self.ctx.func.params
        for node in body_walk(self.ctx.func):
            if type(node) is tir.For and _accumulates(node) and (
                    node.kind != "vectorized" or self._plan(node, _same_buffer) is None
                    or node.extent.value < TILE_MIN_LANES):
                blocked.update(id(n.buffer) for n in _accesses(node.body)
                               if small_local(n.buffer, params))
        self._blocked = blocked
        return blocked

    def _plan(self, s: tir.For, same_memory: Any) -> tuple[Any, ...] | None:
        """(block or None, lets, store, steps, lanes) of a loop that can be
        one vector, else None."""
        if not isinstance(s.extent, tir.IntImm):
            return None
        lanes = int(s.extent.value)
        if lanes < MIN_LANES or lanes > self.lanes() or lanes & (lanes - 1):
            return None
        body, block = s.body, None
        if type(body) is tir.Block:
            if body.init is not None:
                return None
            block, body = body, body.body
        lets: list[tir.LetStmt] = []  # (a max pool's taps, maxima and NaN test)
        while type(body) is tir.LetStmt:
            lets.append(body)
            body = body.body
        if type(body) is not tir.BufferStore:
            return None
        steps = {id(s.loop_var): 1}
        self._pairs = {}
        if block is not None:
            for iv, value in zip(block.iter_vars, block.iter_values):
                step = index_step(value, steps)
                if step is None:
                    if not _divides(value):
                        return None  # (not a flat index's row or column)
                    self._pairs[iv.var] = value
                    # (changing, and not affine: a use of the axis is
                    # contiguous only as part of a flat address, see _flat_run)
                    steps[id(iv.var)] = None  # type: ignore[assignment]
                    continue
                if step:
                    steps[id(iv.var)] = step
        for let in lets:
            # a lane's own value (one vector), never an index: an index
            # reading it is not affine (index_step None), so refused
            steps[id(let.var)] = None  # type: ignore[assignment]
        if body.buffer.dtype == _INT:
            if lets or not self._int_vectorizable(body, steps, same_memory):
                return None
        elif not self._vectorizable(body, lets, steps, same_memory):
            return None
        return block, lets, body, steps, lanes

    def _same_memory(self, a: tir.BufferLoad | tir.BufferStore,
                     b: tir.BufferLoad | tir.BufferStore) -> bool:
        return self.ctx.lookup_buffer(a.buffer, a).ptr == self.ctx.lookup_buffer(b.buffer, b).ptr

    # -- the checks ------------------------------------------------------------
    def _access_kind(self, node: tir.BufferLoad | tir.BufferStore,
                     steps: dict[int, int], dtype: str = _DTYPE) -> str | None:
        """``"uniform"`` (the same element in every lane), ``"contiguous"``
        (consecutive elements) or None (anything else, another dtype than
        ``dtype``, or checked)."""
        if node.buffer.dtype != dtype:
            return None
        if any(self.access.is_checked(node, d) for d in range(len(node.indices))):
            return None
        idx = [index_step(i, steps) for i in node.indices]
        if any(i is None for i in idx) or not idx:
            return "contiguous" if idx and (self._pairs or any(map(_divides, node.indices))) \
                and self._flat_run(node, steps) else None
        if all(i == 0 for i in idx):
            return "uniform"
        if idx[-1] == 1 and all(i == 0 for i in idx[:-1]):
            return "contiguous"
        return None

    def _flat_run(self, node: tir.BufferLoad | tir.BufferStore, steps: dict[int, int]) -> bool:
        """Whether ``node``'s row-major address (its block axes replaced by
        their values) simplifies to one growing by 1 a lane, though its
        indices are not each affine: a flat index's row and column,
        ``(j // W, j % W)`` with ``W`` the last axis's length (a GEMM's
        columns over a whole image, ``GemmPlan.flat``), is ``j`` again
        (:func:`phasec.arith.simplify` folds ``(j // W) * W + j % W``):
        consecutive elements even where the lanes cross a row."""
        idx, dims = node.indices, node.buffer.shape
        first = 0  # (the leading indices the same in every lane: an offset)
        while first < len(idx) - 1 and index_step(idx[first], steps) == 0:
            first += 1
        flat = substitute(idx[first], self._pairs)
        for i, dim in zip(idx[first + 1:], dims[first + 1:]):
            flat = flat * dim + substitute(i, self._pairs)
        return index_step(simplify(flat), steps) == 1

    def _vectorizable(self, store: tir.BufferStore, lets: list[tir.LetStmt],
                      steps: dict[int, int], same_memory: Any) -> bool:
        """The store is contiguous, and its value and the lets' values are
        float32 (bool for a bool let) of what :meth:`_value` emits."""
        if self._access_kind(store, steps) != "contiguous":
            return False
        kinds = {id(let.var): let.var.dtype for let in lets}
        if any(k not in (_DTYPE, _BOOL) for k in kinds.values()):
            return False
        stack: list[tuple[Any, str]] = [(let.value, let.var.dtype) for let in lets]
        stack.append((store.value, _DTYPE))
        while stack:
            e, want = stack.pop()
            t = type(e)
            if self.types.dtype_of(e) != want:
                return False
            if t is tir.Var and id(e) in kinds:
                continue  # (a let's vector)
            if want == _BOOL:
                # a compare of float32 values (LLVM's fcmp, as the scalar
                # emitter's), or and/or of bools (every lane evaluated: nothing
                # that may fail, which the scalar emitter would branch around)
                if t is not tir.BinaryOp:
                    return False
                if e.op in tir.LOGIC_OPS:
                    if self.types.may_fail(e.rhs):
                        return False
                    stack += [(e.lhs, _BOOL), (e.rhs, _BOOL)]
                    continue
                if e.op not in tir.COMPARE_OPS or self.types.optypes.get(id(e)) != _DTYPE:
                    return False
                stack += [(e.lhs, _DTYPE), (e.rhs, _DTYPE)]
                continue
            if t is tir.BufferLoad:
                kind = self._access_kind(e, steps)
                if kind is None:
                    return False
                if same_memory(e, store) and not (
                        e.buffer is store.buffer
                        and all(_same(a, b) for a, b in zip(e.indices, store.indices))):
                    return False  # a lane could read what another lane wrote
                continue
            if not _changes(e, steps) and t is not tir.BinaryOp:
                continue  # (computed once, broadcast)
            if t is tir.Select:
                # both arms in every lane: only where the scalar emitter
                # would not branch (neither arm may fail)
                if self.types.may_fail(e.true_value) or self.types.may_fail(e.false_value):
                    return False
                stack += [(e.condition, _BOOL), (e.true_value, _DTYPE), (e.false_value, _DTYPE)]
                continue
            if t is not tir.BinaryOp or (e.op not in _ARITH and e.op not in _MINMAX):
                return False
            if any(self.types.dtype_of(x) != _DTYPE for x in (e.lhs, e.rhs)) \
                    or self.types.optypes.get(id(e)) != _DTYPE:
                return False
            stack += [(e.lhs, _DTYPE), (e.rhs, _DTYPE)]
        return True

    def _int_vectorizable(self, store: tir.BufferStore, steps: dict[int, int],
                          same_memory: Any) -> bool:
        """An int32 store of a constant, or of ``acc + T.dot4_u8s8(a, b)``
        with ``acc`` the stored element and ``a``, ``b`` int32 contiguous
        loads or values the loop does not change (module docstring)."""
        if self._access_kind(store, steps, _INT) != "contiguous":
            return False
        e = store.value
        if type(e) is tir.IntImm:
            return e.dtype == _INT
        term = dot4_term(e) if type(e) is tir.BinaryOp and e.op == "+" else None
        if term is None:
            return False
        acc, dot = term
        if type(acc) is not tir.BufferLoad or acc.buffer is not store.buffer \
                or not all(_same(a, b) for a, b in zip(acc.indices, store.indices)) \
                or self._access_kind(acc, steps, _INT) != "contiguous":
            return False
        for x in dot.args:
            if self.types.dtype_of(x) != _INT:
                return False
            if type(x) is tir.BufferLoad:
                if self._access_kind(x, steps, _INT) is None or same_memory(x, store):
                    return False
            elif _changes(x, steps):
                return False
        return True

    # -- emission --------------------------------------------------------------
    def _emit(self, s: tir.For, block: tir.Block | None, lets: list[tir.LetStmt],
              store: tir.BufferStore, steps: dict[int, int], lanes: int) -> None:
        ctx = self.ctx
        v = s.loop_var
        first = self.expressions.emit_value_as(s.min, v.dtype, f"the start of loop '{v.name}'")
        bound = [(v, ctx.bind_var(v, first))]
        if block is not None:
            for iv, value in zip(block.iter_vars, block.iter_values):
                op = self.expressions.emit_value_as(value, iv.var.dtype,
                                                    f"the binding of block axis '{iv.var.name}'")
                bound.append((iv.var, ctx.bind_var(iv.var, op)))
        dtype = store.buffer.dtype
        if dtype == _INT:
            value = self._int_value(store.value, steps, lanes)
        else:
            self._lets = {}
            for let in lets:
                self._lets[id(let.var)] = self._value(let.value, steps, lanes)
            value = self._value(store.value, steps, lanes)
            self._lets = {}
        p = self._lane0_ptr(store)
        ctx.fn.emit(f"store <{lanes} x {LLVM_TYPE[dtype]}> {value}, ptr {p}, "
                    f"align {elem_bytes(dtype)}")
        for var, prev in reversed(bound):
            ctx.unbind_var(var, prev)

    def _lane0_ptr(self, node: tir.BufferLoad | tir.BufferStore) -> str:
        ops = [self.expressions.emit_expr(i) for i in node.indices]
        return self.access.element_ptr(node.buffer, node.indices, ops, node)[1]

    def _value(self, e: Any, steps: dict[int, int], lanes: int) -> str:
        """The vector of ``e`` (``<lanes x float>``, ``<lanes x i1>`` for a
        bool), as :meth:`_vectorizable` accepted it: each lane's operation
        the one the scalar emitter gives a lane."""
        fn = self.ctx.fn
        vty = f"<{lanes} x float>"
        t = type(e)
        if t is tir.Var and id(e) in self._lets:
            return self._lets[id(e)]
        if t is tir.BufferLoad and self._access_kind(e, steps) == "contiguous":
            p = self._lane0_ptr(e)
            r = fn.tmp("vl")
            fn.emit(f"{r} = load {vty}, ptr {p}, align {elem_bytes(_DTYPE)}")
            return r
        if t is tir.FloatImm:
            lit = float_literal(float(e.value), _DTYPE)
            return "<" + ", ".join([f"float {lit}"] * lanes) + ">"
        if not _changes(e, steps) and t is not tir.BinaryOp or t is tir.BufferLoad:
            x = self.expressions.emit_expr(e)
            one, r = fn.tmp("vb"), fn.tmp("vb")
            fn.emit(f"{one} = insertelement {vty} poison, float {x}, i64 0")
            fn.emit(f"{r} = shufflevector {vty} {one}, {vty} poison, "
                    f"<{lanes} x i32> zeroinitializer")
            return r
        if t is tir.Select:
            c = self._value(e.condition, steps, lanes)
            a = self._value(e.true_value, steps, lanes)
            b = self._value(e.false_value, steps, lanes)
            r = fn.tmp("vs")
            fn.emit(f"{r} = select <{lanes} x i1> {c}, {vty} {a}, {vty} {b}")
            return r
        a = self._value(e.lhs, steps, lanes)
        b = self._value(e.rhs, steps, lanes)
        r = fn.tmp("vf")
        if e.op in tir.LOGIC_OPS:
            fn.emit(f"{r} = {e.op} <{lanes} x i1> {a}, {b}")
        elif e.op in tir.COMPARE_OPS:
            fn.emit(f"{r} = fcmp {FCMP[e.op]} {vty} {a}, {b}")
        elif e.op in _ARITH:
            fn.emit(f"{r} = {_ARITH[e.op]} {self.expressions.float_flags(e)}{vty} {a}, {b}")
        else:
            name = f"llvm.{_MINMAX[e.op]}.v{lanes}{FLOAT_SUFFIX[_DTYPE]}"
            callee = self.ctx.mod.intrinsic(name, vty, [vty, vty])
            fn.emit(f"{r} = call {vty} {callee}({vty} {a}, {vty} {b})")
        return r

    def _int_value(self, e: Any, steps: dict[int, int], lanes: int) -> str:
        """The ``<lanes x i32>`` of an int32 store's value that
        :meth:`_int_vectorizable` accepted: a constant, or one call of the
        dot4 helper's vector variant."""
        if type(e) is tir.IntImm:
            return "<" + ", ".join([f"i32 {int_literal(int(e.value), _INT)}"] * lanes) + ">"
        acc, dot = dot4_term(e)
        ops = [self._int_operand(x, steps, lanes) for x in (acc, *dot.args)]
        self.ctx.mod.use_math(DOT4_FUNCTION)  # (defines the helper and its variants)
        vty = f"<{lanes} x i32>"
        r = self.ctx.fn.tmp("vdot")
        self.ctx.fn.emit(f"{r} = call {vty} @{DOT4_FUNCTION}.v{lanes}("
                         + ", ".join(f"{vty} {x}" for x in ops) + ")")
        return r

    def _int_operand(self, e: Any, steps: dict[int, int], lanes: int) -> str:
        """A contiguous int32 load as one vector load; anything else (the
        same in every lane) computed once and broadcast."""
        fn = self.ctx.fn
        vty = f"<{lanes} x i32>"
        if type(e) is tir.BufferLoad and self._access_kind(e, steps, _INT) == "contiguous":
            r = fn.tmp("vl")
            fn.emit(f"{r} = load {vty}, ptr {self._lane0_ptr(e)}, align {elem_bytes(_INT)}")
            return r
        x = self.expressions.emit_expr(e)
        one, r = fn.tmp("vb"), fn.tmp("vb")
        fn.emit(f"{one} = insertelement {vty} poison, i32 {x}, i64 0")
        fn.emit(f"{r} = shufflevector {vty} {one}, {vty} poison, <{lanes} x i32> zeroinitializer")
        return r

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
returns False and has emitted nothing): a float32 store (in a block or
not, without init) of ``+ - * min max`` of float32 loads and values the
loop does not change; every access in bounds without a run-time check;
an access the loop changes is contiguous (the loop variable, coefficient
1, in its last index only); the stored buffer is read only at the very
element each lane writes (no lane reads what another wrote).
"""

from __future__ import annotations

from typing import Any

from phasec.ir import tir
from phasec.backend.llvm.access import BufferAccess
from phasec.backend.llvm.context import KernelContext
from phasec.backend.llvm.expressions import ExpressionEmitter
from phasec.backend.llvm.exprtypes import ExprTypes
from phasec.backend.llvm.irtext import FLOAT_SUFFIX, elem_bytes, float_literal

__all__ = ["VectorLoops", "index_step"]

_DTYPE = "float32"
_ARITH = {"+": "fadd", "-": "fsub", "*": "fmul"}
_MINMAX = {"min": "minimum", "max": "maximum"}


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
                 access: BufferAccess) -> None:
        self.ctx = ctx
        self.types = types
        self.expressions = expressions
        self.access = access
        #: loops emitted as vector instructions so far
        self.emitted = 0

    def lanes(self) -> int:
        """float32 lanes of one vector of the target's preferred width."""
        return (self.ctx.options.prefer_vector_width or 128) // 32

    def try_emit(self, s: tir.For) -> bool:
        """Emit ``s`` (a ``vectorized`` loop) as vector instructions and
        return True, or emit nothing and return False."""
        if not isinstance(s.extent, tir.IntImm):
            return False
        lanes = int(s.extent.value)
        if lanes < 4 or lanes > self.lanes() or lanes & (lanes - 1):
            return False
        body, block = s.body, None
        if type(body) is tir.Block:
            if body.init is not None:
                return False
            block, body = body, body.body
        if type(body) is not tir.BufferStore:
            return False
        steps = {id(s.loop_var): 1}
        if block is not None:
            for iv, value in zip(block.iter_vars, block.iter_values):
                step = index_step(value, steps)
                if step is None:
                    return False
                if step:
                    steps[id(iv.var)] = step
        if not self._vectorizable(body, steps):
            return False
        self._emit(s, block, body, steps, lanes)
        self.emitted += 1
        return True

    # -- the checks ------------------------------------------------------------
    def _access_kind(self, node: tir.BufferLoad | tir.BufferStore,
                     steps: dict[int, int]) -> str | None:
        """``"uniform"`` (the same element in every lane), ``"contiguous"``
        (consecutive elements) or None (anything else, or checked)."""
        if node.buffer.dtype != _DTYPE:
            return None
        if any(self.access.is_checked(node, d) for d in range(len(node.indices))):
            return None
        idx = [index_step(i, steps) for i in node.indices]
        if any(i is None for i in idx) or not idx:
            return None
        if all(i == 0 for i in idx):
            return "uniform"
        if idx[-1] == 1 and all(i == 0 for i in idx[:-1]):
            return "contiguous"
        return None

    def _vectorizable(self, store: tir.BufferStore, steps: dict[int, int]) -> bool:
        if self._access_kind(store, steps) != "contiguous":
            return False
        target = self.ctx.lookup_buffer(store.buffer, store).ptr
        stack: list[Any] = [store.value]
        while stack:
            e = stack.pop()
            t = type(e)
            if t is tir.BufferLoad:
                kind = self._access_kind(e, steps)
                if kind is None:
                    return False
                if self.ctx.lookup_buffer(e.buffer, e).ptr == target and not (
                        e.buffer is store.buffer
                        and all(_same(a, b) for a, b in zip(e.indices, store.indices))):
                    return False  # a lane could read what another lane wrote
                continue
            if not _changes(e, steps) and t is not tir.BinaryOp:
                if self.types.dtype_of(e) != _DTYPE:
                    return False
                continue  # (computed once, broadcast)
            if t is not tir.BinaryOp or (e.op not in _ARITH and e.op not in _MINMAX):
                return False
            if any(self.types.dtype_of(x) != _DTYPE for x in (e, e.lhs, e.rhs)) \
                    or self.types.optypes.get(id(e)) != _DTYPE:
                return False
            stack += [e.lhs, e.rhs]
        return True

    # -- emission --------------------------------------------------------------
    def _emit(self, s: tir.For, block: tir.Block | None, store: tir.BufferStore,
              steps: dict[int, int], lanes: int) -> None:
        ctx = self.ctx
        v = s.loop_var
        first = self.expressions.emit_value_as(s.min, v.dtype, f"the start of loop '{v.name}'")
        bound = [(v, ctx.bind_var(v, first))]
        if block is not None:
            for iv, value in zip(block.iter_vars, block.iter_values):
                op = self.expressions.emit_value_as(value, iv.var.dtype,
                                                    f"the binding of block axis '{iv.var.name}'")
                bound.append((iv.var, ctx.bind_var(iv.var, op)))
        value = self._value(store.value, steps, lanes)
        p = self._lane0_ptr(store)
        ctx.fn.emit(f"store <{lanes} x float> {value}, ptr {p}, align {elem_bytes(_DTYPE)}")
        for var, prev in reversed(bound):
            ctx.unbind_var(var, prev)

    def _lane0_ptr(self, node: tir.BufferLoad | tir.BufferStore) -> str:
        ops = [self.expressions.emit_expr(i) for i in node.indices]
        return self.access.element_ptr(node.buffer, node.indices, ops, node)[1]

    def _value(self, e: Any, steps: dict[int, int], lanes: int) -> str:
        fn = self.ctx.fn
        vty = f"<{lanes} x float>"
        t = type(e)
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
        a = self._value(e.lhs, steps, lanes)
        b = self._value(e.rhs, steps, lanes)
        r = fn.tmp("vf")
        if e.op in _ARITH:
            fn.emit(f"{r} = {_ARITH[e.op]} {self.ctx.options.float_flags}{vty} {a}, {b}")
        else:
            name = f"llvm.{_MINMAX[e.op]}.v{lanes}{FLOAT_SUFFIX[_DTYPE]}"
            callee = self.ctx.mod.intrinsic(name, vty, [vty, vty])
            fn.emit(f"{r} = call {vty} {callee}({vty} {a}, {vty} {b})")
        return r

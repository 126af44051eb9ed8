"""Buffer accesses that certainly go out of bounds (:func:`find_out_of_bounds`).

A kernel whose loop certainly runs past its buffer is a bug to report before
anything runs: the LLVM code generator refuses to compile it, and the
verifier reports it (WF504), so ``phasec-check`` says what the compiler will
refuse. (Accesses that *may* go out of bounds are checked at run time
unless :mod:`.inbounds` proves them in bounds.)

"Provably": the check must never reject a correct kernel, so it only looks
at accesses it can decide exactly —

* the buffer's dimension is a constant;
* the index is an affine function (``c0 + c1*i + c2*j ...``) of loop
  variables whose loops have constant bounds (block axes and let-bound
  variables are replaced by their affine bindings);
* the access is not under an ``if``, a ``T.Select``/``T.if_then_else``
  branch, the right operand of ``and``/``or`` or a block's ``T.init``
  (conditions the check does not evaluate), and every enclosing loop has a
  constant, positive extent, so the access does run.

The loop variables of an affine index vary independently over their whole
ranges, so the extreme values the check computes are reached: an index
outside ``[0, extent)`` is a certain out-of-bounds access. Everything else
(symbolic shapes, data-dependent indices, guarded accesses) is left to the
kernel's author, as in TVM.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Union

import numpy as np

from phasec.ir import tir
from phasec.runtime.binary_ops import SCALAR_BINARY

__all__ = ["find_out_of_bounds", "OutOfBounds"]

#: An affine form: loop-variable id -> coefficient; the key None holds the constant.
Affine = dict[Union[int, None], int]


@dataclass(frozen=True, eq=False)
class OutOfBounds:
    """One provably out-of-bounds access (for the error message)."""

    buffer: tir.Buffer
    dim: int
    extent: int
    lo: int
    hi: int
    node: Any
    index: tir.PrimExpr

    @property
    def message(self) -> str:
        access = "write to" if isinstance(self.node, tir.BufferStore) else "read of"
        values = f"{self.lo}" if self.lo == self.hi else f"{self.lo}..{self.hi}"
        return (f"out-of-bounds {access} buffer '{self.buffer.name}': its index in dimension "
                f"{self.dim} takes the values {values}, but that dimension has extent "
                f"{self.extent} (valid indices 0..{self.extent - 1}); check the loop bounds")


def _fold(op: str) -> Callable[[int, int], int | None]:
    """TIR's ``op`` on constants (phasec.runtime.binary_ops); None: not folded
    (a zero divisor, or a negative power, which the kernels compute as 0)."""
    f = SCALAR_BINARY[op]

    def fold(a: int, b: int) -> int | None:
        if op == "pow" and b < 0:
            return None
        try:
            return f(a, b)
        except ZeroDivisionError:
            return None
    return fold


#: the operators folded on constants (the kernels' integer power wraps: 64-bit
#: multiplications, then the dtype)
_FOLD = {op: _fold(op) for op in ("//", "%", "min", "max", "pow")}


def _out_of_range(value: int, dtype: str) -> str | None:
    """Why ``value`` cannot be held by integer ``dtype``, or None."""
    limits = _int_limits(dtype)
    if limits is None:
        return None
    return None if limits[0] <= value <= limits[1] else f"{value} does not fit in {dtype}"


@functools.lru_cache(maxsize=64)
def _int_limits(dtype: str) -> tuple[int, int] | None:
    """``(min, max)`` of an integer or bool ``dtype``, None for another
    (``np.iinfo`` costs ~1.3 us a call: once per constant folded)."""
    if dtype == "bool":
        return 0, 1
    if tir.is_int(dtype):
        info = np.iinfo(dtype)
        return int(info.min), int(info.max)
    return None


def _wrap(value: int, dtype: str) -> int:
    """``value`` reduced to ``dtype``'s width, as the machine holds it."""
    bits = np.iinfo(dtype).bits
    value &= (1 << bits) - 1
    if dtype.startswith("int") and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


class _Checker:
    def __init__(self) -> None:
        self.ranges: dict[int, tuple[int, int]] = {}  # loop var id -> (first, last)
        self.bound: dict[int, Affine | None] = {}  # block axis / let var id -> binding

    # -- affine forms -----------------------------------------------------
    def affine(self, e: tir.PrimExpr, depth: int = 0) -> Affine | None:
        if depth > 64:  # deep index expressions are not worth deciding
            return None
        t = type(e)
        if t is tir.IntImm:
            return None if e.dtype == "bool" else {None: e.value}
        if t is tir.Var:
            if id(e) in self.ranges:
                return {id(e): 1}
            return self.bound.get(id(e))
        if t is tir.Cast:
            # a widening integer cast keeps the value; anything else may not
            if e.dtype == "int64" and tir.is_int(e.value.dtype):
                return self.affine(e.value, depth + 1)
            return None
        if t is tir.BinaryOp and e.op in ("+", "-", "*", *_FOLD):
            a = self.affine(e.lhs, depth + 1)
            b = self.affine(e.rhs, depth + 1) if a is not None else None
            if a is None or b is None:
                return None
            if e.op in _FOLD:  # folded when both operands are constants
                ca, cb = _only_const(a), _only_const(b)
                value = _FOLD[e.op](ca, cb) if ca is not None and cb is not None else None
                if value is not None and e.op == "pow" and tir.is_int(e.dtype):
                    value = _wrap(value, e.dtype)
                if value is None or _out_of_range(value, e.dtype) is not None:
                    return None  # not constant, or it would wrap at run time
                return {None: value}
            if e.op == "*":
                ca, cb = _only_const(a), _only_const(b)
                if ca is None and cb is None:
                    return None  # a product of variables is not affine
                scale, form = (ca, b) if ca is not None else (cb, a)
                return {k: v * scale for k, v in form.items()}
            sign = 1 if e.op == "+" else -1
            out = dict(a)
            for k, v in b.items():
                out[k] = out.get(k, 0) + sign * v
            return out
        return None

    def const(self, e: tir.PrimExpr) -> int | None:
        """The value of a constant integer expression (folded), else None."""
        form = self.affine(e)
        if form is None or not tir.is_int(e.dtype):
            return None
        value = _only_const(form)
        if value is None or _out_of_range(value, e.dtype) is not None:
            return None
        return value

    def span_of(self, form: Affine) -> tuple[int, int]:
        lo = hi = form.get(None, 0)
        for k, c in form.items():
            if k is None or c == 0:
                continue
            first, last = self.ranges[k]
            a, b = c * first, c * last
            lo += min(a, b)
            hi += max(a, b)
        return lo, hi

    # -- accesses ------------------------------------------------------------
    def check_access(self, buf: tir.Buffer, indices: tuple, node: Any) -> OutOfBounds | None:
        if len(indices) != len(buf.shape):
            return None  # the code generator reports the rank mismatch itself
        for d, (index, dim) in enumerate(zip(indices, buf.shape)):
            extent = self.const(dim)
            if extent is None:
                continue
            form = self.affine(index)
            if form is None:
                continue
            lo, hi = self.span_of(form)
            if not tir.is_int(index.dtype) or _out_of_range(lo, index.dtype) \
                    or _out_of_range(hi, index.dtype):
                continue  # the machine value would wrap: not decidable here
            if lo < 0 or hi >= extent:
                return OutOfBounds(buf, d, extent, lo, hi, node, index)
        return None

    def loads(self, e: tir.PrimExpr) -> Iterator[tir.BufferLoad]:
        """The buffer reads of ``e`` that certainly run when ``e`` is evaluated."""
        stack = [e]
        while stack:
            n = stack.pop()
            t = type(n)
            if t is tir.BufferLoad:
                yield n
                stack.extend(n.indices)
            elif t is tir.BinaryOp:
                # and/or evaluate their right operand only sometimes
                stack.extend((n.lhs,) if n.op in tir.LOGIC_OPS else (n.lhs, n.rhs))
            elif t is tir.Select:
                stack.append(n.condition)  # only one branch runs
            elif t is tir.Not or t is tir.Cast:
                stack.append(n.value)
            elif t is tir.Call:
                stack.extend(n.args)

    def check_expr(self, e: tir.PrimExpr) -> OutOfBounds | None:
        for load in self.loads(e):
            found = self.check_access(load.buffer, load.indices, load)
            if found is not None:
                return found
        return None

    # -- statements ------------------------------------------------------------
    def run(self, body: tir.Stmt) -> OutOfBounds | None:
        # (statement, scope entries to undo afterwards); None marks "undo"
        stack: list[Any] = [body]
        while stack:
            s = stack.pop()
            if isinstance(s, tuple):  # leaving a scope
                kind, key, old = s
                table = self.ranges if kind == "range" else self.bound
                if old is _ABSENT:
                    table.pop(key, None)
                else:
                    table[key] = old
                continue
            t = type(s)
            found = None
            if t is tir.SeqStmt:
                stack.extend(reversed(s.stmts))
            elif t is tir.BufferStore:
                found = self.check_expr(s.value)
                for i in s.indices:
                    found = found or self.check_expr(i)
                found = found or self.check_access(s.buffer, s.indices, s)
            elif t is tir.For:
                found = self.check_expr(s.min) or self.check_expr(s.extent)
                first, extent = self.const(s.min), self.const(s.extent)
                if extent is not None and extent <= 0:
                    continue  # the body never runs
                if first is None or extent is None:
                    # unknown bounds: the body may never run, so nothing in it is certain
                    continue
                key = id(s.loop_var)
                stack.append(("range", key, self.ranges.get(key, _ABSENT)))
                self.ranges[key] = (first, first + extent - 1)
                stack.append(s.body)
            elif t is tir.LetStmt:
                found = self.check_expr(s.value)
                key = id(s.var)
                stack.append(("bound", key, self.bound.get(key, _ABSENT)))
                self.bound[key] = self.affine(s.value)
                stack.append(s.body)
            elif t is tir.Allocate or t is tir.AttrStmt:
                stack.append(s.body)
            elif t is tir.Evaluate:
                found = self.check_expr(s.value)
            elif t is tir.IfThenElse or t is tir.While:
                found = self.check_expr(s.condition)  # the branches are conditional
            elif t is tir.Block:
                for iv, value in zip(s.iter_vars, s.iter_values):
                    found = found or self.check_expr(value)
                    key = id(iv.var)
                    stack.append(("bound", key, self.bound.get(key, _ABSENT)))
                    self.bound[key] = self.affine(value)
                stack.append(s.body)  # (the init runs conditionally: not checked)
            if found is not None:
                return found
        return None


_ABSENT = object()


def _only_const(form: Affine) -> int | None:
    if all(k is None or c == 0 for k, c in form.items()):
        return form.get(None, 0)
    return None


def find_out_of_bounds(func: tir.PrimFunc) -> OutOfBounds | None:
    """The first buffer access of ``func`` that certainly goes out of bounds
    when the kernel runs, or None (see the module doc for what is decided)."""
    return _Checker().run(func.body)

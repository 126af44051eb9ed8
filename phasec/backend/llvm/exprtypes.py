"""The dtypes of a kernel's scalar expressions, as the code generator
computes them: C-like promotion of mixed integer operands, literals adopting
their partner's type, the result types of the intrinsics, and an error for
anything else (a float meeting an integer needs a Cast); which integer
divisions test their divisor for 0, and which expressions may fail (read
memory, or divide by a divisor that may be 0). Memoized per expression
object and shared by a kernel and its outlined parallel bodies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from phasec.arith.inbounds import AccessProofs
from phasec.errors import counted
from phasec.ir import tir
from phasec.ir.intrinsics import BIT, INDEX, INTRINSIC_TABLE, MATH
from phasec.backend.llvm.abi import walk
from phasec.backend.llvm.context import KernelContext
from phasec.backend.llvm.irtext import BITS, is_float, is_intlike, is_signed

__all__ = ["ExprTypes", "bad_index", "has_variable_division"]

#: the integer division operators (TIR ``/`` truncates, ``//`` and ``%`` floor)
_DIVISIONS = frozenset({"/", "//", "%"})


def bad_index(buffer: str, dtype: str) -> str:
    """The message of an index of a non-integer dtype."""
    kind = "float dtype" if is_float(dtype) else "dtype"
    return f"index into buffer '{buffer}' has {kind} {dtype}; indices must be integers"


def has_variable_division(func: tir.PrimFunc) -> bool:
    """Does ``func`` divide (``/``, ``//``, ``%``) by anything but a constant?
    (Then the divisor proofs are worth computing.)"""
    return any(type(n) is tir.BinaryOp and n.op in _DIVISIONS
               and type(n.rhs) is not tir.IntImm and type(n.rhs) is not tir.FloatImm
               for n in walk(func.body))


class ExprTypes:
    """The dtype of every scalar expression of one kernel (checked), the
    operand dtype of each BinaryOp, which expressions read memory, which
    integer divisions check their divisor, and which expressions may fail.

    ``ctx`` (the kernel's first function) names the kernel in errors;
    ``proofs`` (if computed) says which divisors are proven non-zero.
    """

    def __init__(self, ctx: KernelContext, proofs: AccessProofs | None = None) -> None:
        self.ctx = ctx
        self.proofs = proofs
        self.types: dict[int, str] = {}  # expression -> dtype of its value
        self.optypes: dict[int, str] = {}  # BinaryOp -> dtype of its operands
        self.loads: dict[int, bool] = {}  # expression -> reads a buffer
        self.fails: dict[int, bool] = {}  # expression -> may end the kernel with an error

    def dtype_of(self, e: Any) -> str:
        """The dtype of the value the codegen produces for ``e`` (checked)."""
        return self._memoized(e, self.types, self._infer_one)

    def _memoized(self, e: Any, memo: dict[int, Any], compute: Callable[[Any], Any]) -> Any:
        """``compute(n)`` for ``e`` and each of its sub-expressions not in
        ``memo`` yet, children first; iterative (no Python recursion on deep
        trees)."""
        r = memo.get(id(e))
        if r is not None:
            return r
        stack: list[tuple[Any, bool]] = [(e, False)]
        while stack:
            n, ready = stack.pop()
            if id(n) in memo:
                continue
            if ready:
                memo[id(n)] = compute(n)
                continue
            if not isinstance(n, tir.PrimExpr):
                raise self.ctx.error(f"expected a scalar expression, got {type(n).__name__}", n)
            stack.append((n, True))
            stack.extend((k, False) for k in tir.expr_children(n) if id(k) not in memo)
        return memo[id(e)]

    def _infer_one(self, n: tir.PrimExpr) -> str:
        t = type(n)
        memo = self.types
        if t is tir.IntImm or t is tir.FloatImm or t is tir.Var:
            what = f"{t.__name__} {getattr(n, 'name', '')}".strip()
            return self.ctx.check_dtype(n.dtype, what, n)
        if t is tir.BufferLoad:
            for i in n.indices:
                if is_float(memo[id(i)]) or memo[id(i)] == "bool":
                    raise self.ctx.error(bad_index(n.buffer.name, memo[id(i)]), n)
            return self.ctx.check_dtype(n.buffer.dtype, f"buffer '{n.buffer.name}'", n)
        if t is tir.BinaryOp:
            lt, rt = memo[id(n.lhs)], memo[id(n.rhs)]
            if n.op in tir.LOGIC_OPS:
                return "bool"
            ot = self._unify(n.lhs, lt, n.rhs, rt, n)
            if n.op in tir.ARITH_OPS and ot == "bool":
                ot = "int32"  # C-style promotion of bool arithmetic
            self.optypes[id(n)] = ot
            return "bool" if n.op in tir.COMPARE_OPS else ot
        if t is tir.Not:
            return "bool"
        if t is tir.Cast:
            return self.ctx.check_dtype(n.dtype, "cast target", n)
        if t is tir.Select:
            return self._unify(n.true_value, memo[id(n.true_value)], n.false_value,
                               memo[id(n.false_value)], n)
        if t is tir.Call:
            spec = INTRINSIC_TABLE.get(n.name)
            if spec is None:
                raise self.ctx.error(f"unknown intrinsic '{n.name}' (known: "
                                     f"{', '.join(sorted(INTRINSIC_TABLE))})", n)
            if len(n.args) != spec.arity:
                raise self.ctx.error(f"intrinsic '{n.name}' takes {counted(spec.arity, 'argument')}, "
                                     f"got {len(n.args)}", n)
            at = memo[id(n.args[0])]
            if spec.result == "bool":
                return "bool"
            if spec.kind == BIT:
                types = [memo[id(a)] for a in n.args]
                if not all(is_intlike(t) for t in types):
                    raise self.ctx.error(f"{n.name} needs integer or bool arguments, got "
                                         f"{', '.join(types)}", n)
                if len(types) == 1:
                    return types[0]
                return self._unify(n.args[0], types[0], n.args[1], types[1], n)
            if spec.kind == MATH and spec.arity == 2:
                bt = memo[id(n.args[1])]
                if not (is_float(at) and is_float(bt)):
                    raise self.ctx.error(f"{n.name} needs float arguments; insert a Cast", n)
                return self._unify(n.args[0], at, n.args[1], bt, n)
            if spec.kind == INDEX:
                for a in n.args:
                    if not is_intlike(memo[id(a)]):
                        raise self.ctx.error("checked_index takes integer index and extent", n)
                return "int64"
            if is_float(at):
                if n.dtype and n.dtype != at:
                    self.ctx.check_dtype(n.dtype, f"result of '{n.name}'", n)
                    if not is_float(n.dtype):
                        raise self.ctx.error(f"intrinsic '{n.name}' on {at} cannot produce "
                                             f"{n.dtype}", n)
                    return n.dtype
                return at
            if spec.exact_on_integers:
                return "int32" if at == "bool" else at
            raise self.ctx.error(f"intrinsic '{n.name}' needs a float argument, got {at}; "
                                 "insert a Cast", n)
        raise self.ctx.error(f"unsupported expression node {t.__name__}", n)

    def _unify(self, a: Any, ta: str, b: Any, tb: str, where: Any) -> str:
        if ta == tb:
            return ta
        if is_intlike(ta) and is_intlike(tb):
            if ta == "bool":
                return tb
            if tb == "bool":
                return ta
            wa, wb = BITS[ta], BITS[tb]
            if wa != wb:
                return ta if wa > wb else tb
            return ta if not is_signed(ta) else tb  # same width: unsigned wins, as in C
        a_imm = isinstance(a, (tir.IntImm, tir.FloatImm))
        b_imm = isinstance(b, (tir.IntImm, tir.FloatImm))
        if a_imm and not b_imm:
            return tb
        if b_imm and not a_imm:
            return ta
        if a_imm and b_imm:
            if is_float(ta) and is_float(tb):
                return ta if BITS[ta] >= BITS[tb] else tb
            return ta if is_float(ta) else tb
        what = getattr(where, "op", None) or type(where).__name__
        raise self.ctx.error(f"dtype mismatch in '{what}': {ta} and {tb}; insert a Cast", where)

    def reads_memory(self, e: Any) -> bool:
        """Does evaluating ``e`` load from a buffer?"""
        memo = self.loads
        return self._memoized(e, memo, lambda n: type(n) is tir.BufferLoad or any(
            memo[id(k)] for k in tir.expr_children(n)))

    def checks_divisor(self, n: Any) -> bool:
        """Does ``n``, if an integer ``/``, ``//`` or ``%``, test its divisor
        for 0 at run time (a DivisionByZeroError)? Not when the divisor is a
        constant that is non-zero in the operands' type, nor when
        :class:`~phasec.arith.inbounds.AccessProofs` proved it non-zero."""
        if type(n) is not tir.BinaryOp or n.op not in _DIVISIONS:
            return False
        self.dtype_of(n)
        ot = self.optypes[id(n)]
        if is_float(ot):
            return False
        d = n.rhs
        if type(d) is tir.IntImm or type(d) is tir.FloatImm:
            return int(d.value) % (1 << BITS[ot]) == 0  # (a literal takes the operands' type)
        return self.proofs is None or not self.proofs.divisor_proven(n)

    def may_fail(self, e: Any) -> bool:
        """Can evaluating ``e`` end the kernel with an error: a buffer read
        (checked, or guarded by a condition), or a checked division? Such an
        operand of ``Select`` or ``and``/``or`` is evaluated only when needed."""
        memo = self.fails
        return self._memoized(e, memo, lambda n: type(n) is tir.BufferLoad
                              or self.checks_divisor(n)
                              or any(memo[id(k)] for k in tir.expr_children(n)))

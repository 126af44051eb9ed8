"""Symbolic integer arithmetic on TIR ``PrimExpr``s, for shapes.

Shapes hold symbolic dimensions (``n``, ``n * 4``, ``(n + 1) // 2``), and
struct-info inference must decide things like "is ``4 * n`` the same dimension
as ``n * 4``". This module canonicalizes integer expressions as polynomials
with integer coefficients over *atoms* (variables, and subexpressions it
cannot expand such as ``n // m`` or ``T.max(a, b)``):

* :func:`simplify` folds constants and rewrites ``+ - *`` into a canonical sum
  of monomials; ``//`` and ``%`` by a single term ``c * m`` (a constant, or
  a constant times variables, taken to be non-zero as a divisor) are
  resolved when exact (every term holds ``m`` and ``c`` divides it).
* :func:`prove_equal` is True only when the difference simplifies to ``0``.
* :func:`const_int` is the value of an expression that simplifies to a constant.

Everything is iterative and linear in the size of the expression (products
of large sums are kept as opaque atoms instead of being expanded).
"""

from __future__ import annotations

from collections.abc import Mapping

from . import tir
from .tir import BinaryOp, Cast, FloatImm, IntImm, Not, PrimExpr, Select

__all__ = ["simplify", "prove_equal", "prove_not_equal", "const_int", "substitute", "free_vars"]

# A monomial is a sorted tuple of atom indices (repeated for powers); a
# polynomial maps monomials to non-zero integer coefficients; () is the constant.
Monomial = tuple
Poly = dict

# Products whose expansion would exceed this many terms stay unexpanded.
_MAX_TERMS = 64


def _is_int_dtype(dtype: str) -> bool:
    return dtype.startswith("int") or dtype.startswith("uint")


def _floordiv(a: int, b: int) -> int:
    return a // b


def _truncdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _truncmod(a: int, b: int) -> int:
    return a - b * _truncdiv(a, b)


_CONST_FOLD = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "//": _floordiv,
    "%": lambda a, b: a % b,
    "/": _truncdiv,  # integer "/" in TIR truncates toward zero
    "min": min,
    "max": max,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "and": lambda a, b: bool(a) and bool(b),
    "or": lambda a, b: bool(a) or bool(b),
}


class _Canonicalizer:
    """One simplification session: atoms are numbered in order of appearance."""

    def __init__(self) -> None:
        self.atom_index: dict[object, int] = {}
        self.atoms: list[PrimExpr] = []

    # -- atoms ---------------------------------------------------------------
    def atom(self, key: object, expr: PrimExpr) -> Poly:
        idx = self.atom_index.get(key)
        if idx is None:
            idx = len(self.atoms)
            self.atom_index[key] = idx
            self.atoms.append(expr)
        return {(idx,): 1}

    @staticmethod
    def key_of(poly: Poly) -> tuple:
        return tuple(sorted(poly.items()))

    # -- polynomial algebra ----------------------------------------------------
    @staticmethod
    def add(a: Poly, b: Poly, sign: int = 1) -> Poly:
        out = dict(a)
        for mono, c in b.items():
            v = out.get(mono, 0) + sign * c
            if v:
                out[mono] = v
            else:
                out.pop(mono, None)
        return out

    def mul(self, a: Poly, b: Poly, a_expr: PrimExpr, b_expr: PrimExpr) -> Poly:
        if len(a) * len(b) > _MAX_TERMS:
            # Keep the product opaque rather than expanding quadratically.
            return self.atom(("*", self.key_of(a), self.key_of(b)), BinaryOp("*", a_expr, b_expr))
        out: Poly = {}
        for ma, ca in a.items():
            for mb, cb in b.items():
                mono = tuple(sorted(ma + mb))
                v = out.get(mono, 0) + ca * cb
                if v:
                    out[mono] = v
                else:
                    out.pop(mono, None)
        return out

    # -- conversion back to expressions ---------------------------------------
    def to_expr(self, poly: Poly, dtype: str) -> PrimExpr:
        const = poly.get((), 0)
        terms = [(m, c) for m, c in poly.items() if m != ()]
        # Deterministic order: by atom indices (order of first appearance).
        terms.sort(key=lambda mc: mc[0])
        if not terms:
            return IntImm(const, dtype)
        acc: PrimExpr | None = None
        for mono, c in terms:
            prod: PrimExpr = self.atoms[mono[0]]
            for i in mono[1:]:
                prod = BinaryOp("*", prod, self.atoms[i])
            if acc is None:
                acc = prod if c == 1 else BinaryOp("*", prod, IntImm(c, dtype))
            elif c > 0:
                acc = BinaryOp("+", acc, prod if c == 1 else BinaryOp("*", prod, IntImm(c, dtype)))
            else:
                acc = BinaryOp("-", acc, prod if c == -1 else BinaryOp("*", prod, IntImm(-c, dtype)))
        assert acc is not None
        if const > 0:
            acc = BinaryOp("+", acc, IntImm(const, dtype))
        elif const < 0:
            acc = BinaryOp("-", acc, IntImm(-const, dtype))
        return acc

    # -- the main walk ------------------------------------------------------------
    def canon(self, root: PrimExpr) -> tuple[Poly | None, PrimExpr]:
        """Return (polynomial or None for non-integer results, simplified expr).

        Post-order over the expression with an explicit stack; results are
        memoized by node identity, so shared subexpressions cost once.
        """
        memo: dict[int, tuple[Poly | None, PrimExpr]] = {}
        stack: list[tuple[PrimExpr, bool]] = [(root, False)]
        while stack:
            e, ready = stack.pop()
            if id(e) in memo:
                continue
            children = _children(e)
            if not ready and children:
                stack.append((e, True))
                # reversed: the left operand is visited (and numbered) first
                for c in reversed(children):
                    if id(c) not in memo:
                        stack.append((c, False))
                continue
            memo[id(e)] = self.visit(e, memo)
        return memo[id(root)]

    def visit(self, e: PrimExpr, memo: dict) -> tuple[Poly | None, PrimExpr]:
        int_result = _is_int_dtype(e.dtype)
        if isinstance(e, IntImm):
            if int_result:
                return ({(): e.value} if e.value else {}), e
            return None, e
        if isinstance(e, tir.Var):
            if int_result:
                return self.atom(("var", id(e)), e), e
            return None, e
        if isinstance(e, BinaryOp):
            (pa, ea), (pb, eb) = memo[id(e.lhs)], memo[id(e.rhs)]
            return self.visit_binary(e, pa, ea, pb, eb)
        if isinstance(e, Cast):
            pv, ev = memo[id(e.value)]
            if isinstance(ev, IntImm) and int_result:
                return self.visit(IntImm(ev.value, e.dtype), memo)
            if pv is not None and int_result and _is_int_dtype(ev.dtype):
                # int -> int casts of shape arithmetic are value-preserving.
                return pv, self.to_expr(pv, e.dtype) if pv else IntImm(0, e.dtype)
            new = e if ev is e.value else Cast(e.dtype, ev)
            return self.opaque(new, ("cast", e.dtype, _key(pv, ev)))
        if isinstance(e, Select):
            (pc, ec), (pt, et), (pf, ef) = (memo[id(e.condition)], memo[id(e.true_value)],
                                            memo[id(e.false_value)])
            if isinstance(ec, IntImm):
                return (pt, et) if ec.value else (pf, ef)
            new = e if (ec is e.condition and et is e.true_value and ef is e.false_value) \
                else Select(ec, et, ef)
            return self.opaque(new, ("select", _key(pc, ec), _key(pt, et), _key(pf, ef)))
        if isinstance(e, Not):
            pv, ev = memo[id(e.value)]
            if isinstance(ev, IntImm):
                return None, IntImm(int(not ev.value), "bool")
            return None, (e if ev is e.value else Not(ev))
        if isinstance(e, tir.Call):
            args = [memo[id(a)] for a in e.args]
            new = e if all(ea is a for (_, ea), a in zip(args, e.args)) \
                else tir.Call(e.name, tuple(ea for _, ea in args), e.dtype)
            return self.opaque(new, ("call", e.name, e.dtype, *(_key(p, x) for p, x in args)))
        # Loads and anything else: only identical objects are known equal.
        return self.opaque(e, ("id", id(e)))

    def opaque(self, e: PrimExpr, key: tuple) -> tuple[Poly | None, PrimExpr]:
        if _is_int_dtype(e.dtype):
            return self.atom(key, e), e
        return None, e

    def visit_binary(self, e: BinaryOp, pa, ea, pb, eb) -> tuple[Poly | None, PrimExpr]:
        op = e.op
        dtype = e.dtype
        # Constant folding for any integer/bool operands.
        if isinstance(ea, IntImm) and isinstance(eb, IntImm) and op in _CONST_FOLD:
            if op in ("//", "%", "/") and eb.value == 0:
                return self.opaque(_rebuild(e, ea, eb), (op, ea.value, 0))
            value = _CONST_FOLD[op](ea.value, eb.value)
            if isinstance(value, bool):
                return None, IntImm(int(value), "bool")
            return ({(): value} if value else {}), IntImm(value, dtype)
        if isinstance(ea, FloatImm) and isinstance(eb, FloatImm) and op in ("+", "-", "*"):
            return None, FloatImm(_CONST_FOLD[op](ea.value, eb.value), dtype)
        if pa is None or pb is None or not _is_int_dtype(dtype):
            if op in ("==", "!=", "<", "<=", ">", ">=") and pa is not None and pb is not None:
                diff = self.add(pa, pb, -1)
                if not diff or list(diff) == [()]:
                    d = diff.get((), 0)
                    return None, IntImm(int(_CONST_FOLD[op](d, 0)), "bool")
            return None, _rebuild(e, ea, eb)
        if op == "+":
            return self.poly_result(self.add(pa, pb), dtype)
        if op == "-":
            return self.poly_result(self.add(pa, pb, -1), dtype)
        if op == "*":
            return self.poly_result(self.mul(pa, pb, ea, eb), dtype)
        if op in ("//", "%") and isinstance(eb, IntImm) and eb.value != 0:
            c = eb.value
            if c == 1:
                return self.poly_result(pa if op == "//" else {}, dtype)
            if all(coef % c == 0 for coef in pa.values()):
                if op == "//":
                    return self.poly_result({m: coef // c for m, coef in pa.items()}, dtype)
                return self.poly_result({}, dtype)
        if op in ("//", "%") and len(pb) == 1:
            # Division by a single term c * m (a monomial m, non-zero as a
            # divisor): exact when every term holds m and c divides it.
            ((mono, c),) = pb.items()
            quotient = _divide_exact(pa, mono, c)
            if quotient is not None:
                return self.poly_result(quotient if op == "//" else {}, dtype)
        if op in ("min", "max"):
            diff = self.add(pa, pb, -1)
            if not diff:
                return pa, ea
            if list(diff) == [()]:
                take_a = (diff[()] < 0) == (op == "min")
                return (pa, ea) if take_a else (pb, eb)
        return self.opaque(_rebuild(e, ea, eb), (op, self.key_of(pa), self.key_of(pb)))

    def poly_result(self, poly: Poly, dtype: str) -> tuple[Poly, PrimExpr]:
        return poly, self.to_expr(poly, dtype)


def _divide_exact(poly: Poly, mono: Monomial, c: int) -> Poly | None:
    """``poly / (c * mono)`` when every term divides exactly, else None."""
    out: Poly = {}
    for m, coef in poly.items():
        if coef % c:
            return None
        rest = list(m)
        for atom in mono:
            try:
                rest.remove(atom)
            except ValueError:
                return None
        out[tuple(rest)] = coef // c
    return out


def _key(poly: Poly | None, expr: PrimExpr) -> object:
    if poly is not None:
        return ("p", tuple(sorted(poly.items())))
    if isinstance(expr, (IntImm, FloatImm)):
        return ("c", expr.dtype, expr.value)
    return ("id", id(expr))


def _rebuild(e: BinaryOp, a: PrimExpr, b: PrimExpr) -> BinaryOp:
    if a is e.lhs and b is e.rhs:
        return e
    return BinaryOp(e.op, a, b, e.dtype)


def _children(e: PrimExpr) -> tuple[PrimExpr, ...]:
    if isinstance(e, BinaryOp):
        return (e.lhs, e.rhs)
    if isinstance(e, (Cast, Not)):
        return (e.value,)
    if isinstance(e, Select):
        return (e.condition, e.true_value, e.false_value)
    if isinstance(e, tir.Call):
        return tuple(e.args)
    return ()


def simplify(expr: PrimExpr | int) -> PrimExpr:
    """A canonical, constant-folded form of ``expr``.

    Integer ``+ - *`` become a sum of monomials (in order of first appearance
    of their variables, constant last); ``//``/``%`` by a constant divide
    exactly when every coefficient is divisible; comparisons with a constant
    difference fold to ``T.bool``. Unchanged when nothing simplifies.
    """
    expr = tir.as_prim_expr(expr)
    if isinstance(expr, (IntImm, FloatImm, tir.Var)):
        return expr
    return _Canonicalizer().canon(expr)[1]


def prove_equal(a: PrimExpr | int, b: PrimExpr | int) -> bool:
    """True only when ``a == b`` holds for every value of the variables.

    False means "not provable" (e.g. ``n`` vs ``m``), not "provably different".
    """
    if a is b:
        return True
    a, b = tir.as_prim_expr(a), tir.as_prim_expr(b)
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return a.value == b.value
    canon = _Canonicalizer()
    pa, _ = canon.canon(a)
    pb, _ = canon.canon(b)
    if pa is None or pb is None:
        return False
    return not canon.add(pa, pb, -1)


def const_int(expr: PrimExpr | int | None) -> int | None:
    """The integer value of ``expr`` if it simplifies to a constant, else None."""
    if expr is None:
        return None
    if isinstance(expr, int):
        return int(expr)
    if isinstance(expr, IntImm):
        return expr.value
    if isinstance(expr, tir.Var):
        return None
    s = simplify(expr)
    return s.value if isinstance(s, IntImm) else None


def prove_not_equal(a: PrimExpr | int, b: PrimExpr | int) -> bool:
    """True when ``a - b`` simplifies to a non-zero constant (provably different)."""
    diff = const_int(BinaryOp("-", tir.as_prim_expr(a), tir.as_prim_expr(b)))
    return diff is not None and diff != 0


def free_vars(expr: PrimExpr) -> list[tir.Var]:
    """The TIR variables in ``expr``, each once, in order of first appearance."""
    out: list[tir.Var] = []
    seen: set[int] = set()
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, tir.Var):
            if id(e) not in seen:
                seen.add(id(e))
                out.append(e)
            continue
        stack.extend(reversed(_children(e)))
    return out


def substitute(expr: PrimExpr, vmap: Mapping[tir.Var, PrimExpr]) -> PrimExpr:
    """Replace variables by expressions (keys are Vars, matched by identity).

    Returns ``expr`` itself when no variable in it is replaced.
    """
    if not vmap:
        return expr
    memo: dict[int, PrimExpr] = {}
    stack: list[tuple[PrimExpr, bool]] = [(expr, False)]
    while stack:
        e, ready = stack.pop()
        if id(e) in memo:
            continue
        if isinstance(e, tir.Var):
            memo[id(e)] = vmap.get(e, e)
            continue
        children = _children(e)
        if not ready and children:
            stack.append((e, True))
            stack.extend((c, False) for c in children)
            continue
        new = [memo[id(c)] for c in children]
        if all(n is c for n, c in zip(new, children)):
            memo[id(e)] = e
        elif isinstance(e, BinaryOp):
            memo[id(e)] = BinaryOp(e.op, new[0], new[1], e.dtype)
        elif isinstance(e, Cast):
            memo[id(e)] = Cast(e.dtype, new[0])
        elif isinstance(e, Not):
            memo[id(e)] = Not(new[0])
        elif isinstance(e, Select):
            memo[id(e)] = Select(new[0], new[1], new[2])
        elif isinstance(e, tir.Call):
            memo[id(e)] = tir.Call(e.name, tuple(new), e.dtype)
        else:
            memo[id(e)] = e
    return memo[id(expr)]

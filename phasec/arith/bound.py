"""Index simplification that knows the ranges of the loop variables.

:func:`phasec.arith.simplify` knows nothing about the values of the
variables, so it cannot resolve ``(c * 196 + h * 14 + w) // 196`` to ``c``:
that needs ``0 <= h * 14 + w < 196``. Index expressions of fused layout
operators are full of such quotients and remainders. A channel shuffle,
``reshape -> permute_dims -> reshape`` of an NCHW tensor, composes three
flat-index round trips; left alone, every element of the kernel does a dozen
divisions and the load is a gather. With the loop ranges
(:func:`simplify_bounded`), the same index is ``x[0, c % g * (C // g) + c // g,
h, w]``: the innermost loop reads contiguously again and vectorizes.

The rules, for a divisor ``d > 0`` and a numerator written as a linear sum
``N = k * Q + r`` where ``k`` divides ``d`` (``m = d // k``), every term of
``Q`` is an integer, and the range of ``r`` is known to lie in ``[0, k)``:

* ``N // d = Q // m`` (``Q`` when ``m == 1``), since ``(k*Q + r) / (k*m)``
  and ``Q / m`` have the same floor;
* ``N % d = k * (Q % m) + r`` (``r`` when ``m == 1``), and terms whose
  coefficient ``d`` divides are dropped from ``N`` first.

``//`` and ``%`` are TIR's floor division and modulo, so the rules hold for
negative ``Q`` as well; only ``r``'s range must be known. Everything else is
rebuilt as it was. Ranges come from the caller's loop bounds and propagate
through ``+ - * // % min max``.
"""

from __future__ import annotations

from collections.abc import Mapping

from phasec.ir import tir
from phasec.ir.tir import BinaryOp, IntImm, PrimExpr, Var

__all__ = ["simplify_bounded", "prove_bounded"]

Interval = tuple  # (lo, hi), inclusive, or None when unknown


def _children(e: PrimExpr) -> tuple[PrimExpr, ...]:
    """The operands this simplifier rewrites: only integer operators'; any
    other node is an atom (see :func:`simplify_bounded`)."""
    if type(e) is BinaryOp:
        return (e.lhs, e.rhs)
    return ()


def simplify_bounded(expr: PrimExpr, bounds: Mapping[int, tuple[int, int]]) -> PrimExpr:
    """``expr`` with floor divisions and remainders resolved where the ranges
    of its variables allow; ``bounds`` maps ``id(var)`` to its inclusive
    ``(lo, hi)``. Only integer ``BinaryOp`` nodes are rewritten; anything else
    (calls, casts, selects) is an opaque atom whose range is unknown."""
    return _Simplifier(bounds).run(expr)


def prove_bounded(cond: PrimExpr, bounds: Mapping[int, tuple[int, int]]) -> bool | None:
    """True or False when the ranges decide the integer condition ``cond``
    (comparisons joined by ``and`` / ``or``), else None (not known)."""
    return _Simplifier(bounds).truth(cond)


class _Simplifier:
    def __init__(self, bounds: Mapping[int, tuple[int, int]]) -> None:
        self.bounds = bounds
        self.ival: dict[int, Interval | None] = {}  # id(new node) -> its range
        self.keep: list[PrimExpr] = []               # keeps the ids above alive
        self.keys: dict[int, object] = {}

    # -- traversal -----------------------------------------------------------------
    def run(self, root: PrimExpr) -> PrimExpr:
        memo: dict[int, PrimExpr] = {}
        stack: list[tuple[PrimExpr, bool]] = [(root, False)]
        while stack:
            e, done = stack.pop()
            if id(e) in memo:
                continue
            kids = _children(e)
            if not done and kids:
                stack.append((e, True))
                stack.extend((c, False) for c in kids if id(c) not in memo)
                continue
            memo[id(e)] = self.visit(e, [memo[id(c)] for c in kids])
        return memo[id(root)]

    def note(self, e: PrimExpr, iv: Interval | None) -> PrimExpr:
        self.ival[id(e)] = iv
        self.keep.append(e)
        return e

    def interval(self, e: PrimExpr) -> Interval | None:
        if type(e) is IntImm:
            return (e.value, e.value)
        if id(e) in self.ival:
            return self.ival[id(e)]
        if type(e) is Var:
            return self.bounds.get(id(e))
        return None

    def visit(self, e: PrimExpr, kids: list[PrimExpr]) -> PrimExpr:
        if type(e) is not BinaryOp:
            return self.note(e, self.interval(e))
        a, b = kids
        if not (tir.is_int(e.dtype) and tir.is_int(a.dtype) and tir.is_int(b.dtype)):
            return self.note(e if (a is e.lhs and b is e.rhs) else BinaryOp(e.op, a, b, e.dtype),
                             None)
        if e.op in ("//", "%") and type(b) is IntImm and b.value > 0:
            return (self.div if e.op == "//" else self.mod)(a, b.value, e.dtype)
        if e.op in ("min", "max"):
            ia, ib = self.interval(a), self.interval(b)
            if ia is not None and ib is not None:  # a clamp that never clamps
                if ia[1] <= ib[0]:
                    return a if e.op == "min" else b
                if ib[1] <= ia[0]:
                    return b if e.op == "min" else a
        new = e if (a is e.lhs and b is e.rhs) else BinaryOp(e.op, a, b, e.dtype)
        return self.note(new, _combine(e.op, self.interval(a), self.interval(b)))

    # -- conditions -----------------------------------------------------------------
    def truth(self, c: PrimExpr) -> bool | None:
        if type(c) is not BinaryOp:
            return None
        if c.op in ("and", "or"):
            a, b = self.truth(c.lhs), self.truth(c.rhs)
            if c.op == "and":
                return False if False in (a, b) else (True if a is True and b is True else None)
            return True if True in (a, b) else (False if a is False and b is False else None)
        if c.op not in ("<", "<=", ">", ">=", "==", "!=") or not (
                tir.is_int(c.lhs.dtype) and tir.is_int(c.rhs.dtype)):
            return None
        # the range of lhs - rhs as one linear sum (so that x - x cancels)
        terms, const = self.linear(self.run(BinaryOp("-", c.lhs, c.rhs, c.lhs.dtype)))
        iv = self.interval(self.build(list(terms.values()), const, c.lhs.dtype))
        if iv is None:
            return None
        lo, hi = iv
        if c.op == "<":
            return True if hi < 0 else (False if lo >= 0 else None)
        if c.op == "<=":
            return True if hi <= 0 else (False if lo > 0 else None)
        if c.op == ">":
            return True if lo > 0 else (False if hi <= 0 else None)
        if c.op == ">=":
            return True if lo >= 0 else (False if hi < 0 else None)
        if c.op == "==":
            return True if lo == hi == 0 else (False if lo > 0 or hi < 0 else None)
        return True if lo > 0 or hi < 0 else (False if lo == hi == 0 else None)

    # -- linear sums ---------------------------------------------------------------
    def key(self, e: PrimExpr) -> object:
        """A structural key (variables by identity)."""
        k = self.keys.get(id(e))
        if k is None:
            if type(e) is Var:
                k = ("v", id(e))
            elif type(e) is IntImm:
                k = ("c", e.value)
            elif type(e) is BinaryOp:
                k = ("b", e.op, self.key(e.lhs), self.key(e.rhs))
            else:
                k = ("o", id(e))
            self.keys[id(e)] = k
            self.keep.append(e)
        return k

    def linear(self, e: PrimExpr) -> tuple[dict[object, list], int]:
        """``e`` as ``{key: [atom, coefficient]}`` plus a constant."""
        terms: dict[object, list] = {}
        const = 0
        stack: list[tuple[PrimExpr, int]] = [(e, 1)]
        while stack:
            x, c = stack.pop()
            if type(x) is IntImm:
                const += c * x.value
            elif type(x) is BinaryOp and x.op == "+":
                stack += [(x.lhs, c), (x.rhs, c)]
            elif type(x) is BinaryOp and x.op == "-":
                stack += [(x.lhs, c), (x.rhs, -c)]
            elif type(x) is BinaryOp and x.op == "*" and type(x.rhs) is IntImm:
                stack.append((x.lhs, c * x.rhs.value))
            elif type(x) is BinaryOp and x.op == "*" and type(x.lhs) is IntImm:
                stack.append((x.rhs, c * x.lhs.value))
            else:
                k = self.key(x)
                if k in terms:
                    terms[k][1] += c
                else:
                    terms[k] = [x, c]
        return {k: t for k, t in terms.items() if t[1] != 0}, const

    def build(self, terms: list[tuple[PrimExpr, int]], const: int, dtype: str) -> PrimExpr:
        """``sum(c * atom) + const``, with its range."""
        out: PrimExpr | None = None
        iv: Interval | None = (const, const)
        for atom, c in terms:
            t = atom if c == 1 else BinaryOp("*", atom, IntImm(c, dtype), dtype)
            out = t if out is None else BinaryOp("+", out, t, dtype)
            iv = _combine("+", iv, _combine("*", self.interval(atom), (c, c)))
        if out is None:
            return IntImm(const, dtype)
        if const:
            out = BinaryOp("+", out, IntImm(const, dtype), dtype)
        return self.note(out, iv)

    def split(self, terms: dict[object, list], const: int, k: int, dtype: str
              ) -> tuple[list, int, PrimExpr] | None:
        """``k * Q + r`` with ``r`` in ``[0, k)``: (Q's terms, Q's constant, r), or None."""
        q_terms = [(a, c // k) for a, c in terms.values() if c % k == 0]
        r_terms = [(a, c) for a, c in terms.values() if c % k != 0]
        q_const, r_const = divmod(const, k)
        r = self.build(r_terms, r_const, dtype)
        iv = self.interval(r)
        if iv is None or iv[0] < 0 or iv[1] >= k:
            return None
        return q_terms, q_const, r

    def divisors(self, terms: dict[object, list], d: int) -> list[int]:
        """Candidate ``k``: ``d`` and the coefficients that divide it, largest first."""
        ks = {d} | {abs(c) for _, c in terms.values() if c and d % abs(c) == 0}
        return sorted(ks, reverse=True)

    # -- // and % ------------------------------------------------------------------
    def div(self, n: PrimExpr, d: int, dtype: str) -> PrimExpr:
        if d == 1:
            return n
        terms, const = self.linear(n)
        for k in self.divisors(terms, d):
            got = self.split(terms, const, k, dtype)
            if got is None:
                continue
            q_terms, q_const, _ = got
            q = self.build(q_terms, q_const, dtype)
            m = d // k
            if m == 1:
                return q
            return self.floordiv(q, m, dtype)
        return self.floordiv(n, d, dtype)

    def floordiv(self, q: PrimExpr, m: int, dtype: str) -> PrimExpr:
        iv = self.interval(q)
        if iv is not None and iv[0] // m == iv[1] // m:
            return IntImm(iv[0] // m, dtype)
        return self.note(BinaryOp("//", q, IntImm(m, dtype), dtype),
                         None if iv is None else (iv[0] // m, iv[1] // m))

    def mod(self, n: PrimExpr, d: int, dtype: str) -> PrimExpr:
        if d == 1:
            return IntImm(0, dtype)
        terms, const = self.linear(n)
        kept = {key: t for key, t in terms.items() if t[1] % d != 0}
        const %= d
        for k in self.divisors(kept, d):
            got = self.split(kept, const, k, dtype)
            if got is None:
                continue
            r = got[2]
            if k == d:
                return r
            break  # k * (Q % m) + r is no simpler than what we have
        if len(kept) == len(terms) and type(n) is not IntImm:
            base = n
        else:
            base = self.build([(a, c) for a, c in kept.values()], const, dtype)
        iv = self.interval(base)
        if iv is not None and 0 <= iv[0] and iv[1] < d:
            return base
        return self.note(BinaryOp("%", base, IntImm(d, dtype), dtype), (0, d - 1))


def _combine(op: str, a: Interval | None, b: Interval | None) -> Interval | None:
    if a is None or b is None:
        return None
    if op == "+":
        return (a[0] + b[0], a[1] + b[1])
    if op == "-":
        return (a[0] - b[1], a[1] - b[0])
    if op == "*":
        p = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
        return (min(p), max(p))
    if op == "min":
        return (min(a[0], b[0]), min(a[1], b[1]))
    if op == "max":
        return (max(a[0], b[0]), max(a[1], b[1]))
    if op == "//" and b[0] == b[1] and b[0] > 0:
        return (a[0] // b[0], a[1] // b[0])
    if op == "%" and b[0] == b[1] and b[0] > 0:
        return (0, b[0] - 1)
    return None

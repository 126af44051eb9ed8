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
* a sum holding ``k * M * (p // d) * d`` and ``k * M * (p % d)`` (``d`` any
  non-zero divisor, ``M`` any monomial) has the pair replaced by ``k * M * p``:
  with floor division and modulo (TIR's ``//`` and ``%``; unsigned ones
  alike) ``(p // d) * d + p % d == p`` for every integer ``p``, negative
  ones included, so a row-major address of a flat index's row and column
  is the flat index again.
* :func:`prove_equal` is True only when the difference simplifies to ``0``.
* :func:`const_int` is the value of an expression that simplifies to a constant.

Everything is iterative and linear in the size of the expression (products
of large sums are kept as opaque atoms instead of being expanded).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from phasec.ir import tir
from phasec.ir.tir import BinaryOp, Cast, FloatImm, IntImm, Not, PrimExpr, Select
from phasec.runtime.binary_ops import SCALAR_BINARY, truncdiv  # noqa: F401 - truncdiv: arith's API

__all__ = ["simplify", "prove_equal", "prove_not_equal", "const_int", "substitute", "free_vars"]

# A monomial is a sorted tuple of atom indices (repeated for powers); a
# polynomial maps monomials to non-zero integer coefficients; () is the constant.
Monomial = tuple
Poly = dict

# Products whose expansion would exceed this many terms stay unexpanded.
_MAX_TERMS = 64


def _is_int_dtype(dtype: str) -> bool:
    return dtype.startswith("int") or dtype.startswith("uint")


#: Constant folding: TIR's operators on Python numbers (phasec.runtime.binary_ops),
#: all but ``pow`` (a power of constants stays as written).
CONST_FOLD = {op: f for op, f in SCALAR_BINARY.items() if op != "pow"}


class _Entry:
    """The simplified form of one node: an integer polynomial (``poly``, None
    for non-integer results) and/or the simplified expression (``expr``,
    built lazily from ``poly`` only when someone needs it)."""

    __slots__ = ("poly", "expr", "dtype", "owned")

    def __init__(self, poly: Poly | None, expr: PrimExpr | None, dtype: str) -> None:
        self.poly = poly
        self.expr = expr
        self.dtype = dtype
        self.owned = False  # True: the single consumer may update ``poly`` in place


def _poly_const(poly: Poly) -> int | None:
    if not poly:
        return 0
    if len(poly) == 1 and () in poly:
        return poly[()]
    return None


def add_terms(a: dict, b: dict, scale: Any = 1, in_place: bool = False) -> dict:
    """``a + scale * b`` for sums kept as term -> non-zero coefficient (the
    polynomials here, the affine forms of :mod:`.inbounds`); zero terms dropped."""
    out = a if in_place else dict(a)
    for term, c in b.items():
        v = out.get(term, 0) + scale * c
        if v:
            out[term] = v
        else:
            out.pop(term, None)
    return out


class _Canonicalizer:
    """One simplification session: atoms are numbered in order of appearance."""

    def __init__(self) -> None:
        self.atom_index: dict[object, int] = {}
        self.atoms: list[PrimExpr] = []
        #: the atoms that are ``p // d`` or ``p % d`` (d not zero): index ->
        #: (operator, key of p's polynomial, key of d's)
        self.divmod: dict[int, tuple[str, tuple, tuple]] = {}

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

    def mul(self, a: _Entry, b: _Entry) -> Poly:
        pa, pb = a.poly, b.poly
        if len(pa) * len(pb) > _MAX_TERMS:
            # Keep the product opaque rather than expanding quadratically.
            return self.atom(("*", self.key_of(pa), self.key_of(pb)),
                             BinaryOp("*", self.expr_of(a), self.expr_of(b)))
        out: Poly = {}
        for ma, ca in pa.items():
            for mb, cb in pb.items():
                mono = tuple(sorted(ma + mb))
                v = out.get(mono, 0) + ca * cb
                if v:
                    out[mono] = v
                else:
                    out.pop(mono, None)
        return out

    # -- conversion back to expressions ---------------------------------------
    def expr_of(self, entry: _Entry) -> PrimExpr:
        if entry.expr is None:
            entry.expr = self.to_expr(entry.poly, entry.dtype)
        return entry.expr

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
    def canon(self, root: PrimExpr) -> _Entry:
        """The simplified form of ``root``.

        Post-order over the expression with an explicit stack; results are
        memoized by node identity, so shared subexpressions cost once. A
        node's polynomial is updated in place by its parent when that parent
        is its only user, so long sums stay linear.
        """
        # Pass 1: how many parents use each node (a DAG may share subterms).
        users: dict[int, int] = {}
        seen = {id(root)}
        todo = [root]
        while todo:
            for c in _children(todo.pop()):
                users[id(c)] = users.get(id(c), 0) + 1
                if id(c) not in seen:
                    seen.add(id(c))
                    todo.append(c)
        # Pass 2: post-order simplification.
        memo: dict[int, _Entry] = {}
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
            for c in children:
                memo[id(c)].owned = users[id(c)] == 1
            memo[id(e)] = self.visit(e, memo)
        return memo[id(root)]

    def visit(self, e: PrimExpr, memo: dict[int, _Entry]) -> _Entry:
        dtype = e.dtype
        int_result = _is_int_dtype(dtype)
        if isinstance(e, IntImm):
            return _Entry(({(): e.value} if e.value else {}) if int_result else None, e, dtype)
        if isinstance(e, tir.Var):
            return _Entry(self.atom(("var", id(e)), e) if int_result else None, e, dtype)
        if isinstance(e, BinaryOp):
            return self.visit_binary(e, memo[id(e.lhs)], memo[id(e.rhs)])
        if isinstance(e, Cast):
            v = memo[id(e.value)]
            if v.poly is not None and int_result:
                # int -> int casts of shape arithmetic are value-preserving.
                return _Entry(v.poly if v.owned else dict(v.poly), None, dtype)
            ev = self.expr_of(v) if v.poly is not None else v.expr
            new = e if ev is e.value else Cast(dtype, ev)
            return self.opaque(new, ("cast", dtype, self._key(v)))
        if isinstance(e, Select):
            c, t, f = memo[id(e.condition)], memo[id(e.true_value)], memo[id(e.false_value)]
            cond = self._const(c)
            if cond is not None:
                chosen = t if cond else f
                return _Entry(None if chosen.poly is None else dict(chosen.poly),
                              chosen.expr, chosen.dtype)
            ec, et, ef = self.expr_of(c), self.expr_of(t), self.expr_of(f)
            new = e if (ec is e.condition and et is e.true_value and ef is e.false_value) \
                else Select(ec, et, ef)
            return self.opaque(new, ("select", self._key(c), self._key(t), self._key(f)))
        if isinstance(e, Not):
            v = memo[id(e.value)]
            value = self._const(v)
            if value is not None:
                return _Entry(None, IntImm(int(not value), "bool"), "bool")
            ev = self.expr_of(v)
            return _Entry(None, e if ev is e.value else Not(ev), "bool")
        if isinstance(e, tir.Call):
            args = [memo[id(a)] for a in e.args]
            exprs = [self.expr_of(a) for a in args]
            new = e if all(x is a for x, a in zip(exprs, e.args)) \
                else tir.Call(e.name, tuple(exprs), dtype)
            return self.opaque(new, ("call", e.name, dtype, *(self._key(a) for a in args)))
        # Loads and anything else: only identical objects are known equal.
        return self.opaque(e, ("id", id(e)))

    def _const(self, entry: _Entry) -> int | None:
        if entry.poly is not None:
            return _poly_const(entry.poly)
        if isinstance(entry.expr, IntImm):
            return entry.expr.value
        return None

    def _key(self, entry: _Entry) -> object:
        if entry.poly is not None:
            return ("p", self.key_of(entry.poly))
        if isinstance(entry.expr, (IntImm, FloatImm)):
            return ("c", entry.expr.dtype, entry.expr.value)
        return ("id", id(entry.expr))

    def opaque(self, e: PrimExpr, key: tuple) -> _Entry:
        if _is_int_dtype(e.dtype):
            return _Entry(self.atom(key, e), e, e.dtype)
        return _Entry(None, e, e.dtype)

    def visit_binary(self, e: BinaryOp, a: _Entry, b: _Entry) -> _Entry:
        op = e.op
        dtype = e.dtype
        ca, cb = self._const(a), self._const(b)
        # Constant folding for any integer/bool operands.
        if ca is not None and cb is not None and op in CONST_FOLD and _is_foldable(a, b):
            if op in ("//", "%", "/") and cb == 0:
                return self.opaque(self._rebuild(e, a, b), (op, ca, 0))
            value = CONST_FOLD[op](ca, cb)
            if isinstance(value, bool) or dtype == "bool":
                return _Entry(None, IntImm(int(value), "bool"), "bool")
            return _Entry({(): value} if value else {}, None, dtype)
        if isinstance(a.expr, FloatImm) and isinstance(b.expr, FloatImm) and op in ("+", "-", "*"):
            return _Entry(None, FloatImm(CONST_FOLD[op](a.expr.value, b.expr.value), dtype), dtype)
        pa, pb = a.poly, b.poly
        if pa is None or pb is None or not _is_int_dtype(dtype):
            if op in ("==", "!=", "<", "<=", ">", ">=") and pa is not None and pb is not None:
                d = _poly_const(add_terms(pa, pb, -1))
                if d is not None:
                    return _Entry(None, IntImm(int(CONST_FOLD[op](d, 0)), "bool"), "bool")
            return _Entry(None, self._rebuild(e, a, b), dtype)
        if op == "+" or op == "-":
            sign = 1 if op == "+" else -1
            if a.owned and pa is not pb:
                out, added = add_terms(pa, pb, sign, in_place=True), pb
            elif op == "+" and b.owned and pa is not pb:
                out, added = add_terms(pb, pa, 1, in_place=True), pa
            else:
                out, added = add_terms(pa, pb, sign), pb
            if self.divmod:
                self._fold_divmod(out, list(added))
            return _Entry(out, None, dtype)
        if op == "*":
            return _Entry(self.mul(a, b), None, dtype)
        if op in ("//", "%") and len(pb) <= 1 and cb != 0:
            # Division by a single term c * m (a constant, or a monomial m that
            # is non-zero as a divisor): exact when every term holds m and c
            # divides its coefficient.
            ((mono, c),) = pb.items()
            quotient = _divide_exact(pa, mono, c)
            if quotient is not None:
                return _Entry(quotient if op == "//" else {}, None, dtype)
        if op in ("//", "%") and pa and pb:
            key = (op, self.key_of(pa), self.key_of(pb))
            entry = self.opaque(self._rebuild(e, a, b), key)
            self.divmod[self.atom_index[key]] = key
            return entry
        if op in ("min", "max"):
            d = _poly_const(add_terms(pa, pb, -1))
            if d is not None:
                take_a = (d <= 0) == (op == "min")
                chosen = a if take_a else b
                return _Entry(dict(chosen.poly), chosen.expr, dtype)
        return self.opaque(self._rebuild(e, a, b), (op, self.key_of(pa), self.key_of(pb)))

    def _fold_divmod(self, poly: Poly, monos: list[Monomial]) -> None:
        """Replace, in place, each ``k * M * ((p // d) * d + p % d)`` in the
        sum ``poly`` by ``k * M * p`` (floor semantics: equal for every
        ``p``), looking only at pairs that one of ``monos`` (the terms just
        added) takes part in, and at the terms each fold adds."""
        divmod, atom_index = self.divmod, self.atom_index
        while monos:
            mono = monos.pop()
            for pos, atom in enumerate(mono):
                info = divmod.get(atom)
                if info is None or (pos and mono[pos - 1] == atom):
                    continue
                op, kp, kd = info
                rest = mono[:pos] + mono[pos + 1:]
                if op == "%":
                    q = atom_index.get(("//", kp, kd))
                    r, outers = atom, [rest]
                else:
                    q, r = atom, atom_index.get(("%", kp, kd))
                    outers = [m for m in (_remove(rest, dm) for dm, _ in kd) if m is not None]
                if q is None or r is None:
                    continue
                for outer in outers:
                    added = self._fold_pair(poly, outer, q, r, kp, kd)
                    if added:
                        monos.extend(added)
                        break

    @staticmethod
    def _fold_pair(poly: Poly, outer: Monomial, q: int, r: int, kp: tuple,
                   kd: tuple) -> list[Monomial]:
        """``k * outer * ((p // d) * d + p % d)`` -> ``k * outer * p`` in
        ``poly`` when all of its terms are there with the same ``k``: the
        terms added, else []."""
        r_mono = tuple(sorted(outer + (r,)))
        k = poly.get(r_mono)
        if not k:
            return []
        q_terms = [(tuple(sorted(outer + (q,) + dm)), k * c) for dm, c in kd]
        if any(poly.get(m) != v for m, v in q_terms):
            return []
        del poly[r_mono]
        for m, _ in q_terms:
            del poly[m]
        p_terms = {tuple(sorted(outer + pm)): k * c for pm, c in kp}
        add_terms(poly, p_terms, in_place=True)
        return list(p_terms)

    def _rebuild(self, e: BinaryOp, a: _Entry, b: _Entry) -> BinaryOp:
        ea = self.expr_of(a) if a.poly is not None or a.expr is None else a.expr
        eb = self.expr_of(b) if b.poly is not None or b.expr is None else b.expr
        if ea is e.lhs and eb is e.rhs:
            return e
        return BinaryOp(e.op, ea, eb, e.dtype)


def _is_foldable(a: _Entry, b: _Entry) -> bool:
    """Both operands are integer/bool constants (not floats)."""
    return all(x.poly is not None or isinstance(x.expr, IntImm) for x in (a, b))


def _divide_exact(poly: Poly, mono: Monomial, c: int) -> Poly | None:
    """``poly / (c * mono)`` when every term divides exactly, else None."""
    out: Poly = {}
    for m, coef in poly.items():
        if coef % c:
            return None
        rest = _remove(m, mono)
        if rest is None:
            return None
        out[rest] = coef // c
    return out


def _remove(mono: Monomial, part: Monomial) -> Monomial | None:
    """``mono`` without the atoms of ``part`` (each once), or None when it
    does not hold them all."""
    rest = list(mono)
    for atom in part:
        try:
            rest.remove(atom)
        except ValueError:
            return None
    return tuple(rest)


def _children(e: PrimExpr) -> tuple[PrimExpr, ...]:
    """The operands arithmetic looks into: those of operators, casts, selects
    and calls. Unlike :func:`phasec.ir.tir.expr_children`, a load (or any
    other node, such as a TE tensor read) is an atom whose indices are not
    walked: its value is unknown whatever they are."""
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
    of their variables, constant last); ``//``/``%`` by a single term divide
    exactly when possible; comparisons with a constant difference fold to
    ``T.bool``. Unchanged when nothing simplifies.
    """
    expr = tir.as_prim_expr(expr)
    if isinstance(expr, (IntImm, FloatImm, tir.Var)):
        return expr
    value = _fold_constants(expr)
    if value is not None:
        return IntImm(value, expr.dtype)
    canon = _Canonicalizer()
    return canon.expr_of(canon.canon(expr))


#: the integer operators folded without the canonicalizer (see _fold_constants)
_INT_FOLD = {op: CONST_FOLD[op] for op in ("+", "-", "*", "//", "%", "min", "max")}


def _fold_constants(expr: PrimExpr) -> int | None:
    """The value of an integer expression whose leaves are all integer
    constants (a static shape's arithmetic: ``(56 + 2) - (1 * (3 - 1) + 1)``),
    folded as the canonicalizer folds it, without building its polynomials;
    None for anything else (a variable, a float, another operator, a
    division by zero)."""
    t = type(expr)
    if t is IntImm:
        return expr.value if _is_int_dtype(expr.dtype) else None
    if t is not BinaryOp or not _is_int_dtype(expr.dtype):
        return None
    fold = _INT_FOLD.get(expr.op)
    if fold is None:
        return None
    try:
        a = _fold_constants(expr.lhs)
        b = None if a is None else _fold_constants(expr.rhs)
    except RecursionError:
        return None
    if b is None or (b == 0 and expr.op in ("//", "%")):
        return None
    return fold(a, b)


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
    pa = canon.canon(a).poly
    pb = canon.canon(b).poly
    if pa is None or pb is None:
        return False
    return not add_terms(pa, pb, -1)


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
    value = _fold_constants(expr)
    if value is not None:
        return value
    canon = _Canonicalizer()
    return canon._const(canon.canon(expr))


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
    """Replace variables by expressions (keys are Vars, matched by identity),
    buffer indices included.

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
        children = e.indices if isinstance(e, tir.BufferLoad) else _children(e)
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
        elif isinstance(e, tir.BufferLoad):
            memo[id(e)] = tir.BufferLoad(e.buffer, tuple(new), e.dtype)
        else:
            memo[id(e)] = e
    return memo[id(expr)]

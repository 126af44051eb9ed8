"""Which buffer accesses of a kernel are *proven* in bounds, and which
integer divisions have a divisor proven non-zero.

Kernels are compiled "checked unless proven" (see
``phasec.backend.llvm.options.CodegenOptions.check_bounds``): every index of
every buffer load and store is compared with its dimension at run time,
except where this module proves ``0 <= index < extent`` for every execution
of the access. :func:`prove_accesses` walks a PrimFunc and answers, per
access and per dimension, "proven" or "not proven"; anything it cannot
decide is "not proven", which only costs a run-time check.

Integer division by zero is a run-time error (phasec's rule, see
:class:`~phasec.errors.DivisionByZeroError`): a compiled kernel tests each
integer ``/``, ``//``, ``%`` divisor that is not a non-zero constant, except
where the same walk proves ``divisor >= 1`` or ``divisor <= -1`` at that
point (a divisor that is a loop's symbolic extent, inside that loop, is
non-zero: the body runs only when ``extent >= 1``).

What a proof may use, at the point of the access:

* the ranges of the enclosing loops, ``min <= i <= min + extent - 1`` with
  constant or symbolic bounds (and ``extent >= 1``: the body runs);
* block axes and let variables, replaced by their bindings;
* the conditions of the enclosing ``if`` / ``while`` statements, of a
  ``Select`` / ``if_then_else`` branch and of the left operand of
  ``and``/``or`` (the code generator evaluates a branch that reads memory
  only when its condition holds), as long as the condition reads no memory
  (a buffer may change between the test and the access);
* ``min``/``max`` clamps, ``//`` and ``%`` by a positive constant,
  ``T.checked_index(i, n)`` (in ``[0, n)``), narrow integer types (a
  ``uint8`` value is in ``[0, 255]``);
* symbolic dimensions of the kernel's buffer parameters are ``>= 0``
  (the run time binds them from array shapes and checks every shape).

The method: an integer expression is an affine *form* over atoms (loop
variables, symbols, and opaque subexpressions such as ``min(a, b)``), with
rational coefficients. The largest value of a form is found by eliminating
its atoms, innermost first (an atom's bounds only mention atoms bound further
out), each replaced by its upper or lower bound according to its
coefficient's sign; ``min``/``max`` atoms branch over their operands. A
guard ``F <= 0`` proves ``D <= c`` when the largest value of ``D - F`` is at
most ``c``. A form's value is an integer, so a rational bound ``v`` proves
``<= floor(v)``.

Overflow: int64 ``+ - *`` are exact modulo 2**64, so an index built from
them alone is exact whenever its true value is in bounds. Where the proof
reasons about an intermediate value -- an operand of ``min``/``max``/``//``
/``%`` or of a guard's comparison, a ``Select`` branch, a loop's bounds --
that value must be the true one: the prover uses such a form only when its
bounds prove it within int64 (or it is a single variable, a value as the
hardware holds it); otherwise it is an opaque atom, or no guard. Those
bounds need every symbolic buffer dimension below :data:`DIM_LIMIT`
(``2**40``), which the run time makes true: a kernel call with a larger
dimension is refused (a zero-size array can carry any, numpy accepts shape
``(0, 2**62)``). Narrower integer arithmetic is not
assumed exact: a non-int64 operation is taken as written only when constant
bounds of its value fit its type, otherwise it is an opaque atom ranging
over its whole type. Scalar parameters that are not buffer dimensions are unbounded
(an attacker chooses them), as are values loaded from memory.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from fractions import Fraction
from typing import Any

import numpy as np

from phasec.arith import add_terms
from phasec.ir import tir

__all__ = ["AccessProofs", "prove_accesses", "DIM_LIMIT"]

#: Every symbolic buffer dimension of a kernel call is below this (the run
#: time refuses the call otherwise): what keeps the proofs' int64 values exact.
DIM_LIMIT = 1 << 40
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

#: A form: atom key -> coefficient; the key "" holds the constant.
Form = dict
_CONST = ""
#: the elimination steps one proof may take (then: not proven)
_BUDGET = 400
#: how many alternatives of a min/max bound are tried
_MAX_ALTS = 4
#: guards tried alone, and in pairs when there are at most this many
_MAX_PAIR_FACTS = 6


class AccessProofs:
    """The result of :func:`prove_accesses`: for each buffer access node
    (``BufferLoad``/``BufferStore``, by identity), whether each of its
    indices is proven in bounds. A node the walk never reached is unproven."""

    def __init__(self) -> None:
        self._dims: dict[int, list[bool]] = {}
        self._divisors: dict[int, bool] = {}  # integer division -> divisor proven non-zero
        self._nodes: list[Any] = []  # keeps the ids above valid

    def record(self, node: Any, dim: int, ok: bool) -> None:
        dims = self._dims.get(id(node))
        if dims is None:
            dims = self._dims[id(node)] = [True] * len(node.indices)
            self._nodes.append(node)
        dims[dim] = dims[dim] and ok  # a node reached twice: proven at both places

    def record_divisor(self, node: Any, ok: bool) -> None:
        known = self._divisors.get(id(node))
        if known is None:
            self._nodes.append(node)
        self._divisors[id(node)] = ok and known is not False  # reached twice: proven at both

    def divisor_proven(self, node: Any) -> bool:
        """Is the divisor of integer division ``node`` non-zero wherever it runs?"""
        return self._divisors.get(id(node), False)

    def proven(self, node: Any, dim: int) -> bool:
        """Is index ``dim`` of access ``node`` in bounds wherever it runs?"""
        dims = self._dims.get(id(node))
        return dims is not None and dim < len(dims) and dims[dim]

    def counts(self) -> tuple[int, int]:
        """(accesses with every index proven, accesses with some index unproven)."""
        proven = sum(1 for dims in self._dims.values() if all(dims))
        return proven, len(self._dims) - proven

    def unproven(self) -> list[Any]:
        """The access nodes with an unproven index, in walk order."""
        return [n for n in self._nodes if id(n) in self._dims and not all(self._dims[id(n)])]


def prove_accesses(func: tir.PrimFunc) -> AccessProofs:
    """Prove what can be proven about every buffer access of ``func``."""
    return _Prover(func).run()


def _const(value: Any) -> Form:
    return {_CONST: value} if value else {}


def _div(v: Fraction | int, d: int) -> Fraction | int:
    """``v / d``, an int when exact (ints are much faster than Fractions)."""
    q = Fraction(v, d) if type(v) is int else v / d
    return q.numerator if q.denominator == 1 else q


def _canon(form: Form) -> frozenset:
    """A hashable key of ``form`` (structurally equal forms, equal keys)."""
    return frozenset(form.items())


def _type_range(dtype: str) -> tuple[int, int] | None:
    if dtype == "bool":
        return (0, 1)
    if tir.is_int(dtype) and dtype != "int64" and dtype != "uint64":
        info = np.iinfo(dtype)
        return (int(info.min), int(info.max))
    return None


#: the 64-bit types' ranges, for the casts and unsigned arithmetic of
#: bounded values (:meth:`Prover.form`)
_INT64_RANGES = {"int64": (-(1 << 63), (1 << 63) - 1), "uint64": (0, (1 << 64) - 1)}


class _Atom:
    """An atom's bounds: ``hi`` is the least of its alternatives, each the
    greatest of its forms; ``lo`` the greatest of its alternatives, each the
    least of its forms. ``deps``: the atoms its bounds mention."""

    __slots__ = ("lo", "hi", "pure", "deps", "rank")

    def __init__(self, lo: list[list[Form]], hi: list[list[Form]], pure: bool) -> None:
        self.lo = lo
        self.hi = hi
        self.pure = pure  # no memory read inside: a guard about it stays true
        self.deps = {k for alts in (lo, hi) for alt in alts for f in alt for k in f if k}
        self.rank = -1


class _Prover:
    def __init__(self, func: tir.PrimFunc) -> None:
        self.func = func
        self.proofs = AccessProofs()
        self.atoms: dict[Any, _Atom] = {}
        self.var_key: dict[int, Any] = {}      # id(loop var / symbol) -> its atom key
        self.subst: dict[int, Form] = {}       # id(let var / block axis) -> its binding
        self.facts: list[Form] = []            # guards in scope, each ``form <= 0``
        self.fresh = 0
        self.steps = 0
        self.goal = 0  # the bound the current proof wants (sup_facts stops there)
        self.exact_memo: dict[frozenset, bool] = {}
        dims = {id(d) for p in func.params if isinstance(p, tir.Buffer)
                for d in p.shape if type(d) is tir.Var}
        for p in func.params:
            if isinstance(p, tir.Buffer):
                for d in p.shape:
                    for n in _walk_vars(d):
                        if id(n) not in self.var_key:
                            self.bind_symbol(n, nonneg=id(n) in dims)
        for p in func.params:
            if isinstance(p, tir.Var) and id(p) not in self.var_key:
                self.bind_symbol(p, nonneg=False)
        for p in func.params:  # a composite dimension (n * 2) is >= 0 too
            if isinstance(p, tir.Buffer):
                for d in p.shape:
                    if type(d) is not tir.Var and type(d) is not tir.IntImm:
                        self.facts.append(add_terms({}, self.form(d), -1))

    # -- atoms ---------------------------------------------------------------
    def new_key(self, name: str) -> Any:
        self.fresh += 1
        return ("v", name, self.fresh)

    def bind_symbol(self, v: tir.Var, nonneg: bool) -> None:
        key = self.new_key(v.name)
        self.var_key[id(v)] = key
        rng = _type_range(v.dtype)
        lo = [[_const(0)]] if nonneg else ([[_const(rng[0])]] if rng else [])
        hi = [[_const(DIM_LIMIT - 1)]] if nonneg else ([[_const(rng[1])]] if rng else [])
        self.atoms[key] = _Atom(lo, hi, True)

    def atom(self, key: Any, lo: list[list[Form]], hi: list[list[Form]], pure: bool) -> Form:
        if key not in self.atoms:
            self.atoms[key] = _Atom(lo, hi, pure)
        return {key: 1}

    def opaque(self, e: tir.PrimExpr) -> Form:
        """``e`` as an atom known only by its type's range. Each call makes a
        new atom: the same node evaluated elsewhere (after a store, or with a
        shadowed variable) may have another value."""
        rng = _type_range(e.dtype)
        bounds = ([[_const(rng[0])]], [[_const(rng[1])]]) if rng else ([], [])
        return self.atom(self.new_key("?"), bounds[0], bounds[1], False)

    def fits(self, f: Form, dtype: str) -> bool:
        """Whether the constant bounds of ``f`` lie within ``dtype``'s range
        (an integer type, 64-bit ones included): a value that cannot wrap."""
        rng = _INT64_RANGES.get(dtype) or _type_range(dtype)
        if rng is None:
            return False
        most, least = self.constant_sup(f), self.constant_sup(add_terms({}, f, -1))
        return most is not None and least is not None and most <= rng[1] and -least >= rng[0]

    # -- forms -----------------------------------------------------------------
    def form(self, e: tir.PrimExpr, depth: int = 0) -> Form:
        """``e`` (an integer expression) as a form; never fails (opaque atoms)."""
        t = type(e)
        if t is tir.IntImm:
            return _const(e.value)
        if not tir.is_int(e.dtype) or depth > 48:
            return self.opaque(e)
        if t is tir.Var:
            if id(e) in self.subst:
                return self.subst[id(e)]
            key = self.var_key.get(id(e))
            return {key: 1} if key is not None else self.opaque(e)
        if t is tir.Cast:
            inner = e.value
            if tir.is_int(inner.dtype) and inner.dtype != "uint64" and e.dtype == "int64":
                return self.form(inner, depth + 1)  # widening keeps the value
            if tir.is_int(inner.dtype):
                # so does any integer cast of a value whose constant bounds
                # fit the new type (int64 <-> uint64 of a flat index)
                f = self.form(inner, depth + 1)
                if self.fits(f, e.dtype):
                    return f
            return self.opaque(e)
        if e.dtype != "int64":
            # narrow arithmetic may wrap: taken as it is only when its range,
            # from constant bounds, fits the type (else any value of the type)
            if t is tir.BinaryOp:
                f = self.binary(e, depth)
                if self.fits(f, e.dtype):
                    return f
            return self.opaque(e)
        if t is tir.BinaryOp:
            return self.binary(e, depth)
        if t is tir.Call and e.name == "checked_index" and len(e.args) == 2:
            n = self.form(e.args[1], depth + 1)
            if not self.exact(n):  # in [0, n) for the n the hardware has
                return self.atom(self.new_key("ci"), [[_const(0)]], [], False)
            pure = self.is_pure(n)
            key = ("ci", _canon(n)) if pure else self.new_key("ci")
            return self.atom(key, [[_const(0)]], [[add_terms(n, _const(-1))]], pure)
        if t is tir.Select:
            a, b = self.form(e.true_value, depth + 1), self.form(e.false_value, depth + 1)
            if not (self.exact(a) and self.exact(b)):
                return self.opaque(e)
            return self.atom(self.new_key("sel"), [[a, b]], [[a, b]], False)
        return self.opaque(e)

    def binary(self, e: tir.BinaryOp, depth: int) -> Form:
        op = e.op
        if op not in ("+", "-", "*", "//", "%", "min", "max"):
            return self.opaque(e)
        a, b = self.form(e.lhs, depth + 1), self.form(e.rhs, depth + 1)
        if op == "+":
            return add_terms(a, b)
        if op == "-":
            return add_terms(a, b, -1)
        ca, cb = _only_const(a), _only_const(b)
        if op == "*":
            if ca is not None:
                return {k: v * ca for k, v in b.items()} if ca else {}
            if cb is not None:
                return {k: v * cb for k, v in a.items()} if cb else {}
            return self.opaque(e)
        if op in ("//", "%"):
            if type(cb) is not int or cb <= 0:
                return self.opaque(e)
            d = cb
            if type(ca) is int:
                return _const(ca // d if op == "//" else ca % d)
            if not self.exact(a):
                return self.opaque(e)
            pure = self.is_pure(a)
            key = ("//", _canon(a), d) if pure else self.new_key("//")
            # (a - d + 1) / d <= a // d <= a / d
            lo = [[{k: _div(v, d) for k, v in add_terms(a, _const(1 - d)).items()}]]
            hi = [[{k: _div(v, d) for k, v in a.items()}]]
            if key not in self.atoms:  # and floor(inf(a) / d) <= a // d <= floor(sup(a) / d)
                least, most = self.constant_sup(add_terms({}, a, -1)), self.constant_sup(a)
                if least is not None:  # (a is an integer: a >= ceil(inf(a)))
                    lo.append([_const(math.ceil(-least) // d)])
                if most is not None:
                    hi.append([_const(math.floor(most) // d)])
            q = self.atom(key, lo, hi, pure)
            # a % d is a - d * (a // d) exactly (floor semantics, d > 0): the
            # bounds of the quotient give 0 <= a % d <= d - 1, and a remainder
            # loop over a % d after a main loop over a // d tiles adds up to a
            return q if op == "//" else add_terms(a, q, -d)
        # min / max
        if not (self.exact(a) and self.exact(b)):
            return self.opaque(e)
        pure = self.is_pure(a) and self.is_pure(b)
        key = (op, _canon(a), _canon(b)) if pure else self.new_key(op)
        if op == "min":
            return self.atom(key, [[a, b]], [[a], [b]], pure)
        return self.atom(key, [[a], [b]], [[a, b]], pure)

    def exact(self, form: Form) -> bool:
        """Is the value the hardware computes for ``form`` its true value? A
        constant or a single variable is; otherwise its bounds (guards
        aside) must lie within int64 (``+ - *`` are exact modulo 2**64)."""
        keys = [k for k in form if k]
        if not keys or (len(form) == 1 and form[keys[0]] == 1):
            return True
        key = _canon(form)  # (an atom's bounds never change: the answer neither)
        known = self.exact_memo.get(key)
        if known is None:
            most = self.constant_sup(form)
            least = self.constant_sup(add_terms({}, form, -1))
            known = self.exact_memo[key] = most is not None and least is not None \
                and most <= _INT64_MAX and -least >= _INT64_MIN
        return known

    def is_pure(self, form: Form) -> bool:
        return all(not k or self.atoms[k].pure for k in form)

    # -- bounds ------------------------------------------------------------------
    def rank(self, key: Any) -> int:
        atom = self.atoms[key]
        if atom.rank < 0:
            atom.rank = 0  # (guards against a cycle, which forms cannot build)
            atom.rank = 1 + max((self.rank(k) for k in atom.deps), default=0)
        return atom.rank

    def sup(self, form: Form, memo: dict[Any, Any]) -> Fraction | int | None:
        """The greatest value of ``form`` (None: unbounded or undecided)."""
        top = None
        for k, c in form.items():
            if k and (top is None or self.rank(k) > self.rank(top)):
                top = k
        if top is None:
            return form.get(_CONST, 0)
        key = frozenset(form.items())
        if key in memo:
            return memo[key]
        self.steps += 1
        if self.steps > _BUDGET:
            return None
        c = form[top]
        atom = self.atoms[top]
        rest = dict(form)
        del rest[top]
        best = None
        for alt in (atom.hi if c > 0 else atom.lo)[:_MAX_ALTS]:
            worst: Fraction | int | None = 0
            first = True
            for f in alt:
                # a max (upper) / min (lower) bound splits the goal: each part
                # may hold for its own reason (the guard of a clamp's operand)
                v = (self.sup_facts if len(alt) > 1 else self.sup)(add_terms(rest, f, c), memo)
                if v is None:
                    worst = None
                    break
                worst = v if first else max(worst, v)
                first = False
            if worst is not None and (best is None or worst < best):
                best = worst
        memo[key] = best
        return best

    def constant_sup(self, form: Form) -> Fraction | int | None:
        """:meth:`sup` without the guards (true wherever the atoms exist)."""
        facts, steps = self.facts, self.steps
        self.facts, self.steps = [], 0
        try:
            return self.sup(form, {})
        finally:
            self.facts, self.steps = facts, steps

    def sup_facts(self, form: Form, memo: dict[Any, Any]) -> Fraction | int | None:
        """:meth:`sup`, or less with a guard ``F <= 0``: ``form <= sup(form - F)``
        (the first that meets the goal of the current proof, else the least)."""
        best = None
        for f in [None] + self.facts:
            v = self.sup(form if f is None else add_terms(form, f, -1), memo)
            if v is not None and (best is None or v < best):
                best = v
                if math.floor(v) <= self.goal:
                    break
        return best

    def prove_le(self, form: Form, bound: int) -> bool:
        """``form <= bound`` wherever the current scope runs?"""
        self.steps, self.goal = 0, bound
        memo: dict[Any, Any] = {}
        facts = self.facts

        def candidates() -> Iterator[Form]:
            yield form
            for f in facts:
                yield add_terms(form, f, -1)
            if 1 < len(facts) <= _MAX_PAIR_FACTS:
                for i, f in enumerate(facts):
                    for g in facts[i + 1:]:
                        yield add_terms(add_terms(form, f, -1), g, -1)
        for cand in candidates():
            v = self.sup(cand, memo)
            if v is not None and math.floor(v) <= bound:
                return True
            if self.steps > _BUDGET:
                return False
        return False

    # -- guards -------------------------------------------------------------------
    def guards(self, cond: tir.PrimExpr, holds: bool) -> list[Form]:
        """Facts ``form <= 0`` that follow from ``cond`` being ``holds``."""
        t = type(cond)
        if t is tir.Not:
            return self.guards(cond.value, not holds)
        if t is not tir.BinaryOp:
            return []
        op = cond.op
        if op in ("and", "or"):
            if (op == "and") == holds:  # both operands have that truth value
                return self.guards(cond.lhs, holds) + self.guards(cond.rhs, holds)
            return []
        if op not in tir.COMPARE_OPS or not (tir.is_int(cond.lhs.dtype)
                                            and tir.is_int(cond.rhs.dtype)):
            return []
        if not holds:
            op = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}[op]
        a, b = self.form(cond.lhs), self.form(cond.rhs)
        if not (self.is_pure(a) and self.is_pure(b) and self.exact(a) and self.exact(b)):
            return []
        d = add_terms(a, b, -1)  # a - b
        if op == "<":
            return [add_terms(d, _const(1))]
        if op == "<=":
            return [d]
        if op == ">":
            return [add_terms(add_terms({}, d, -1), _const(1))]
        if op == ">=":
            return [add_terms({}, d, -1)]
        if op == "==":
            return [d, add_terms({}, d, -1)]
        return []

    def nonzero(self, divisor: tir.PrimExpr) -> bool:
        """``divisor >= 1`` or ``divisor <= -1`` wherever the current scope runs?
        (Its form must be the value the hardware computes: exact.)"""
        d = self.form(divisor)
        if not self.exact(d):
            return False
        return self.prove_le(add_terms({}, d, -1), -1) or self.prove_le(d, -1)

    # -- the walk ------------------------------------------------------------------
    def access(self, buf: tir.Buffer, indices: tuple, node: Any) -> None:
        if len(indices) != len(buf.shape):
            for d in range(len(indices)):
                self.proofs.record(node, d, False)
            return
        for d, (index, dim) in enumerate(zip(indices, buf.shape)):
            ok = False
            if tir.is_int(index.dtype) and tir.is_int(dim.dtype):
                i, n = self.form(index), self.form(dim)
                ok = self.prove_le(add_terms({}, i, -1), 0) and self.prove_le(add_terms(i, n, -1), -1)
            self.proofs.record(node, d, ok)

    def expr(self, root: tir.PrimExpr) -> None:
        """Record the accesses of ``root``, each under the guards of its branch."""
        stack: list[Any] = [root]
        while stack:
            e = stack.pop()
            if type(e) is tuple:  # leave a branch: restore the facts
                self.facts = e[1]
                continue
            t = type(e)
            if t is tir.BufferLoad:
                self.access(e.buffer, e.indices, e)
                stack.extend(e.indices)
            elif t is tir.Select:
                stack.append(e.condition)
                self.branch(stack, e.condition, True, e.true_value)
                self.branch(stack, e.condition, False, e.false_value)
            elif t is tir.BinaryOp and e.op in tir.LOGIC_OPS:
                stack.append(e.lhs)
                self.branch(stack, e.lhs, e.op == "and", e.rhs)
            else:
                if t is tir.BinaryOp and e.op in _DIVISIONS and tir.is_int(e.dtype):
                    self.proofs.record_divisor(e, self.nonzero(e.rhs))
                stack.extend(tir.expr_children(e))

    def branch(self, stack: list[Any], cond: tir.PrimExpr, holds: bool,
               body: tir.PrimExpr) -> None:
        """Push ``body`` to be walked with the facts of ``cond`` being ``holds``."""
        facts = self.facts
        # (pushed in reverse: set the facts, walk body, restore them)
        stack.append(("restore", facts))
        stack.append(body)
        stack.append(("restore", facts + self.guards(cond, holds)))

    def run(self) -> AccessProofs:
        stack: list[Any] = [self.func.body]
        while stack:
            s = stack.pop()
            if callable(s):
                s()
                continue
            t = type(s)
            if t is tir.SeqStmt:
                stack.extend(reversed(s.stmts))
            elif t is tir.BufferStore:
                self.expr(s.value)
                for i in s.indices:
                    self.expr(i)
                self.access(s.buffer, s.indices, s)
            elif t is tir.For:
                self.expr(s.min)
                self.expr(s.extent)
                self.enter_loop(s, stack)
            elif t is tir.IfThenElse:
                self.expr(s.condition)
                self.scoped(stack, s.then_case, self.guards(s.condition, True))
                if s.else_case is not None:
                    self.scoped(stack, s.else_case, self.guards(s.condition, False))
            elif t is tir.While:
                self.expr(s.condition)
                self.scoped(stack, s.body, self.guards(s.condition, True))
            elif t is tir.LetStmt:
                self.expr(s.value)
                self.let(s.var, s.value, stack)
                stack.append(s.body)
            elif t is tir.Block:
                for value in s.iter_values:
                    self.expr(value)
                for iv, value in zip(s.iter_vars, s.iter_values):
                    self.let(iv.var, value, stack)
                stack.append(s.body)
                if s.init is not None:
                    stack.append(s.init)
            elif t is tir.Allocate:
                for d in s.buffer.shape:
                    self.expr(d)
                stack.append(s.body)
            elif t is tir.AttrStmt:
                if isinstance(s.value, tir.PrimExpr):
                    self.expr(s.value)
                stack.append(s.body)
            elif t is tir.Evaluate:
                self.expr(s.value)
        return self.proofs

    def scoped(self, stack: list[Any], body: tir.Stmt, facts: list[Form]) -> None:
        old = self.facts

        def enter() -> None:
            self.facts = old + facts

        def leave() -> None:
            self.facts = old
        stack.extend([leave, body, enter])

    def let(self, v: tir.Var, value: tir.PrimExpr, stack: list[Any]) -> None:
        """Bind ``v`` to ``value``'s form until the enclosing statement ends."""
        form = self.form(value) if value.dtype == v.dtype and tir.is_int(v.dtype) \
            else self.opaque(v)  # a conversion may change the value
        old = self.subst.get(id(v), _ABSENT)
        self.subst[id(v)] = form

        def restore() -> None:
            if old is _ABSENT:
                self.subst.pop(id(v), None)
            else:
                self.subst[id(v)] = old
        # the caller pushes the body after this: restore runs after it
        stack.append(restore)

    def enter_loop(self, s: tir.For, stack: list[Any]) -> None:
        v = s.loop_var
        lo = self.form(s.min)
        ext = self.form(s.extent)
        key = self.new_key(v.name)
        end = add_terms(lo, ext)
        # (bounds the hardware may not have, past int64: none)
        known = self.exact(lo) and self.exact(ext) and self.exact(end)
        # (the variable itself never changes, whatever its bounds read)
        self.atoms[key] = _Atom([[lo]] if known else [],
                                [[add_terms(end, _const(-1))]] if known else [], True)
        # the body runs only when extent >= 1; so every factor of a product
        # extent is non-zero (a zero factor makes the product 0, wrapped or
        # not), and one known >= 0 is >= 1 (a symbolic dimension of a reshape)
        facts = [add_terms(_const(1), ext, -1)] if known and self.is_pure(ext) else []
        factors = _factors(s.extent)
        if len(factors) > 1:
            for f in factors:
                ff = self.form(f)
                if self.exact(ff) and self.is_pure(ff) and self.prove_le(add_terms({}, ff, -1), 0):
                    facts.append(add_terms(_const(1), ff, -1))
        old_key, old_facts, old_subst = self.var_key.get(id(v)), self.facts, \
            self.subst.pop(id(v), _ABSENT)
        self.var_key[id(v)] = key
        self.facts = old_facts + facts

        def leave() -> None:
            if old_key is None:
                self.var_key.pop(id(v), None)
            else:
                self.var_key[id(v)] = old_key
            if old_subst is not _ABSENT:
                self.subst[id(v)] = old_subst
            self.facts = old_facts
        stack.extend([leave, s.body])


_ABSENT = object()
#: the integer division operators (TIR ``/`` truncates, ``//`` and ``%`` floor)
_DIVISIONS = frozenset({"/", "//", "%"})


def _factors(e: tir.PrimExpr) -> list[tir.PrimExpr]:
    """The operands of a product ``a * b * ...`` (``[e]`` for anything else)."""
    out, stack = [], [e]
    while stack:
        x = stack.pop()
        if type(x) is tir.BinaryOp and x.op == "*" and len(out) + len(stack) < 8:
            stack += [x.rhs, x.lhs]
        else:
            out.append(x)
    return out


def _only_const(form: Form) -> Fraction | int | None:
    if all(k == _CONST for k in form):
        return form.get(_CONST, 0)
    return None


def _walk_vars(e: tir.PrimExpr) -> Iterable[tir.Var]:
    stack = [e]
    while stack:
        n = stack.pop()
        if type(n) is tir.Var:
            yield n
        stack.extend(tir.expr_children(n))

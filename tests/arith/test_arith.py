"""Symbolic shape arithmetic: simplify, prove_equal, const_int, substitute."""

import operator

from hypothesis import given, strategies as st

from phasec.ir import tir
from phasec.arith import (
    const_int, free_vars, prove_equal, prove_not_equal, simplify, substitute,
)
from phasec.ir.text import prim_expr_to_str
from phasec.ir.tir import BinaryOp, IntImm

n = tir.Var("n")
m = tir.Var("m")


def s(e):
    return prim_expr_to_str(simplify(e))


def test_constant_folding():
    assert const_int(IntImm(3) + 4) == 7
    assert const_int((IntImm(7) - 9) * 2) == -4
    assert const_int(BinaryOp("//", IntImm(-7), IntImm(2))) == -4  # floor division
    assert const_int(BinaryOp("%", IntImm(-7), IntImm(2))) == 1  # floor modulo
    assert const_int(BinaryOp("/", IntImm(-7), IntImm(2))) == -3  # truncating division
    assert const_int(BinaryOp("min", IntImm(3), IntImm(5))) == 3
    assert const_int(BinaryOp("max", IntImm(3), IntImm(5))) == 5
    assert const_int(5) == 5
    assert const_int(n) is None
    assert const_int(None) is None


def test_canonical_forms():
    assert prove_equal(n * 4, 4 * n)
    assert prove_equal((n + 1) - 1, n)
    assert prove_equal((n + m) * 2, m * 2 + n + n)
    assert prove_equal((n + 1) * (n - 1), n * n - 1)
    assert not prove_equal(n, m)
    assert not prove_equal(n + 1, n)
    assert s((n + 1) - 1) == "n"
    assert s(n * 4 + n * 2 - 3) == "n * 6 - 3"
    assert s(0 - n) == "n * -1"
    assert s(n - n) == "0"
    # dtype of the result follows the expression
    assert simplify(n - n).dtype == "int64"


def test_division_by_constants():
    assert s(BinaryOp("//", n * 4 + 8, IntImm(4))) == "n + 2"
    assert const_int(BinaryOp("%", n * 6, IntImm(3))) == 0
    assert s(BinaryOp("//", n, IntImm(1))) == "n"
    # not exact: stays a floordiv atom, but equal atoms still cancel
    a = BinaryOp("//", n + 1, IntImm(2))
    b = BinaryOp("//", 1 + n, IntImm(2))
    assert prove_equal(a, b)
    assert prove_equal(a + n, n + b)
    assert not prove_equal(a, n)
    # symbolic divisor: opaque, but syntactically equal terms compare equal
    assert prove_equal(BinaryOp("//", n, m) * 2, BinaryOp("//", n, m) + BinaryOp("//", n, m))


def test_division_by_zero_is_not_folded():
    e = BinaryOp("//", IntImm(4), IntImm(0))
    assert const_int(e) is None


def test_min_max_and_comparisons():
    assert s(BinaryOp("max", n, n)) == "n"
    assert s(BinaryOp("min", n + 1, n)) == "n"
    assert s(BinaryOp("max", n + 1, n)) == "n + 1"
    assert isinstance(simplify(BinaryOp("==", n * 2, n + n)), IntImm)
    assert simplify(BinaryOp("==", n * 2, n + n)).value == 1
    assert simplify(BinaryOp("<", n, n + 1)).value == 1
    assert not isinstance(simplify(BinaryOp("<", n, m)), IntImm)


def test_prove_not_equal():
    assert prove_not_equal(n + 1, n)
    assert prove_not_equal(3, 4)
    assert not prove_not_equal(n, m)
    assert not prove_not_equal(n * 2, n + n)


def test_substitute_and_free_vars():
    e = n * 4 + m
    assert free_vars(e) == [n, m]
    r = substitute(e, {n: IntImm(3)})
    assert const_int(r - m) == 12
    assert substitute(e, {}) is e
    assert substitute(e, {tir.Var("k"): IntImm(1)}) is e


def test_deep_expressions_are_linear_and_iterative():
    e = n
    for _ in range(20000):
        e = e + 1
    assert prove_equal(e, n + 20000)
    assert s(e) == "n + 20000"


def test_products_of_sums_do_not_blow_up():
    vs = [tir.Var(f"v{i}") for i in range(40)]
    e = IntImm(1)
    for v in vs:
        e = e * (v + 1)  # fully expanded this would have 2**40 terms
    assert prove_equal(e, e)  # would never finish if it expanded the product


def _divmod_pair(p, c, k):
    """``k * (p // c) * c + k * (p % c)`` (which is ``k * p``), in one of the
    shapes a flattened address takes."""
    c = IntImm(c)
    return BinaryOp("//", p, c) * c * k + BinaryOp("%", p, c) * k


_atoms = st.sampled_from([n, m, IntImm(0), IntImm(1), IntImm(2), IntImm(-3), IntImm(7)])


def _exprs():
    return st.recursive(
        _atoms,
        lambda sub: st.builds(lambda op, a, b: BinaryOp(op, a, b),
                              st.sampled_from(["+", "-", "*", "min", "max"]), sub, sub)
        | st.builds(lambda op, a, c: BinaryOp(op, a, IntImm(c)),
                    st.sampled_from(["//", "%"]), sub, st.integers(1, 5))
        | st.builds(_divmod_pair, sub, st.sampled_from([-3, -1, 1, 2, 7]), _atoms),
        max_leaves=12)


def _evaluate(e, env):
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, tir.Var):
        return env[e.name]
    a, b = _evaluate(e.lhs, env), _evaluate(e.rhs, env)
    return {"+": a + b, "-": a - b, "*": a * b, "//": a // b if b else 0,
            "%": a % b if b else 0, "min": min(a, b), "max": max(a, b)}[e.op]


@given(_exprs(), st.integers(-20, 20), st.integers(-20, 20))
def test_simplify_preserves_values(e, nv, mv):
    env = {"n": nv, "m": mv}
    assert _evaluate(simplify(e), env) == _evaluate(e, env)
    # idempotent
    once = simplify(e)
    assert prim_expr_to_str(simplify(once)) == prim_expr_to_str(once)


@given(_exprs(), _exprs(), st.lists(st.tuples(st.integers(-9, 9), st.integers(-9, 9)),
                                   min_size=3, max_size=3))
def test_prove_equal_is_sound(a, b, envs):
    if prove_equal(a, b):
        for nv, mv in envs:
            env = {"n": nv, "m": mv}
            assert _evaluate(a, env) == _evaluate(b, env)


def test_shared_subexpressions_are_not_corrupted():
    e = n + 1
    f = e * e + e - e  # the same node used four times
    assert prove_equal(f, n * n + n * 2 + 1)
    g = (n + 1) * (n - 1)
    assert prove_equal(g, n * n - 1)
    h = e + e
    assert s(h + h) == "n * 4 + 4"
    assert s(e) == "n + 1"  # simplifying a parent never changes the child


def test_long_sums_of_distinct_variables_are_linear():
    vs = [tir.Var(f"v{i}") for i in range(20000)]
    e = vs[0]
    for v in vs[1:]:
        e = e + v
    assert prove_equal(e - vs[-1], simplify(e) - vs[-1])


def _fold_cases():
    """(expression, what it folds to) for ``(p // d) * d + p % d`` forms."""
    p, c, k = tir.Var("p"), tir.Var("c"), tir.Var("k")
    seven = IntImm(7)
    q, r = BinaryOp("//", p, seven), BinaryOp("%", p, seven)
    q4 = BinaryOp("//", p, IntImm(4))
    return [
        (q * 7 + r, p),
        (r + q * 7, p),  # either order
        (q * seven * 7 + r * 7, p * 7),  # multiplied out
        ((q * 7 + r) * k + n, p * k + n),  # multiplied by a symbol
        (q * 14 + r * 2 - m, p * 2 - m),
        (BinaryOp("//", p, c) * c + BinaryOp("%", p, c), p),  # symbolic divisor
        (BinaryOp("//", p, c * 3) * (c * 3) + BinaryOp("%", p, c * 3), p),
        (BinaryOp("//", p, n + 1) * (n + 1) + BinaryOp("%", p, n + 1), p),  # a sum as divisor
        (BinaryOp("//", p, IntImm(-3)) * -3 + BinaryOp("%", p, IntImm(-3)), p),  # negative divisor
        # nested: the row-major address of (p // 12, p // 4 % 3, p % 4)
        ((BinaryOp("//", q4, IntImm(3)) * 3 + BinaryOp("%", q4, IntImm(3))) * 4
         + BinaryOp("%", p, IntImm(4)), p),
        ((BinaryOp("//", p, IntImm(12)) * 3 + BinaryOp("%", q4, IntImm(3))) * 4
         + BinaryOp("%", p, IntImm(4)), None),  # p // 12 is (p // 4) // 3 but not the same atom
        # a flat address over (n, c, y, x): ((n * 5 + c) * 3 + (y*7+p) // 7) * 7 + (y*7+p) % 7
        (((n * 5 + c) * 3 + BinaryOp("//", k * 7 + p, seven)) * 7 + BinaryOp("%", k * 7 + p, seven),
         n * 105 + c * 21 + k * 7 + p),
        # unsigned pair (GemmPlan.flat's columns)
        (tir.Cast("int64", BinaryOp("//", tir.Cast("uint64", p), IntImm(7, "uint64"), "uint64")) * 7
         + tir.Cast("int64", BinaryOp("%", tir.Cast("uint64", p), IntImm(7, "uint64"), "uint64")), p),
        # not the pair: other coefficients, other divisors, other dividends
        (q * 14 + r, None),
        (q * 7 + BinaryOp("%", p, IntImm(5)), None),
        (q * 7 + BinaryOp("%", p + 1, seven), None),
    ]


_PYTHON_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul,
               "//": operator.floordiv, "%": operator.mod}


def _value(e, env):
    """``e``'s value in Python's integer arithmetic (floor division and modulo)."""
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, tir.Var):
        return env[e.name]
    if isinstance(e, tir.Cast):
        return _value(e.value, env)
    a, b = _value(e.lhs, env), _value(e.rhs, env)
    return _PYTHON_OPS[e.op](a, b)


def test_flat_index_pairs_fold():
    """``(p // d) * d + p % d`` is ``p`` for every integer ``p`` (floor
    semantics), negative values and symbolic divisors included; checked
    against Python's integers at every point of a grid."""
    envs = [dict(p=p, c=c, k=k, n=nv, m=-4)
            for p in range(-30, 31, 7) for c in (-5, -1, 2, 3) for k in (-2, 3) for nv in (-3, 0, 4)]
    for e, folded in _fold_cases():
        got = simplify(e)
        if folded is not None:
            assert prove_equal(got, folded), prim_expr_to_str(got)
            assert "//" not in prim_expr_to_str(got) and "%" not in prim_expr_to_str(got)
        else:
            assert "%" in prim_expr_to_str(got)
        for env in envs:
            assert _value(got, env) == _value(e, env)
        assert prim_expr_to_str(simplify(got)) == prim_expr_to_str(got)
    # a division by zero is not a pair: p % 0 stays (and traps where it did)
    p = tir.Var("p")
    assert s(BinaryOp("//", p, IntImm(0)) * 0 + BinaryOp("%", p, IntImm(0))) == "p % 0"

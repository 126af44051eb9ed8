"""Integer expressions of constants only (a static shape's arithmetic) are
folded without the canonicalizer (``arith._fold_constants``): the same value
and dtype as the canonicalizer's on random trees of every folded operator,
negative operands and zero divisors included; what it does not fold
(variables, floats, other operators, a division by zero) is left to it."""

from __future__ import annotations

import random

from phasec import arith
from phasec.arith import _Canonicalizer, _fold_constants
from phasec.ir import tir

OPS = ["+", "-", "*", "//", "%", "min", "max"]


def _tree(rng: random.Random, depth: int, dtype: str) -> tir.PrimExpr:
    if depth == 0 or rng.random() < 0.3:
        return tir.IntImm(rng.randint(-20, 20), dtype)
    return tir.BinaryOp(rng.choice(OPS), _tree(rng, depth - 1, dtype),
                        _tree(rng, depth - 1, dtype))


def test_the_fold_agrees_with_the_canonicalizer():
    rng = random.Random(11)
    folded = 0
    for k in range(3000):
        e = _tree(rng, 4, "int64" if k % 2 else "int32")
        canon = _Canonicalizer()
        slow = canon.expr_of(canon.canon(e))
        fast = _fold_constants(e)
        if fast is None:  # a division by zero somewhere: the canonicalizer's alone
            continue
        folded += 1
        assert type(slow) is tir.IntImm and (slow.value, slow.dtype) == (fast, e.dtype), e
        assert arith.const_int(e) == fast
        assert (arith.simplify(e).value, arith.simplify(e).dtype) == (fast, e.dtype)
    assert folded > 2000


def test_what_the_fold_leaves_to_the_canonicalizer():
    n = tir.Var("n", "int64")
    two = tir.IntImm(2, "int64")
    assert _fold_constants(tir.BinaryOp("+", n, two)) is None
    assert _fold_constants(tir.BinaryOp("//", two, tir.IntImm(0, "int64"))) is None
    assert _fold_constants(tir.BinaryOp("<", two, two)) is None
    assert _fold_constants(tir.BinaryOp("+", tir.FloatImm(1.0, "float32"),
                                        tir.FloatImm(2.0, "float32"))) is None
    assert arith.const_int(tir.BinaryOp("-", tir.BinaryOp("+", n, two), n)) == 2

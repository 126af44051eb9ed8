"""phasec/te/blocks.py: a block that reads an enclosing loop's variable gets
an axis bound to it, however deep the statements between them nest (a fused
kernel of many stages nests its allocations and lets hundreds deep: the
rewrite walks with an explicit stack, not Python's recursion)."""

from __future__ import annotations

import numpy as np

from phasec.interp.tir import run_prim_func
from phasec.ir import tir
from phasec.te.blocks import bind_loop_vars_in_blocks

I64 = "int64"


def _deep_kernel(depth: int, n: int) -> tuple[tir.PrimFunc, tir.Block]:
    """``for i < n: let x1 = i + 1 .. let x_depth = x_{depth-1} + 1:
    (a block) out[i] = x_depth * 3 + i``, every other let under an
    IfThenElse beside a sequence (the shapes the rewrite walks)."""
    out = tir.Buffer("out", (tir.IntImm(n, I64),), I64)
    i = tir.Var("i", I64)
    lets = [tir.Var(f"x{k}", I64) for k in range(depth + 1)]
    block = tir.Block("store", (), (), tir.BufferStore(
        out, lets[depth] * tir.IntImm(3, I64) + i, (i,)))
    body: tir.Stmt = block
    for k in range(depth, 0, -1):
        body = tir.LetStmt(lets[k], lets[k - 1] + tir.IntImm(1, I64), body)
        if k % 2 == 0:
            body = tir.SeqStmt((tir.Evaluate(tir.IntImm(0, "int32")),
                                tir.IfThenElse(tir.BinaryOp(">=", i, tir.IntImm(0, I64)),
                                               body)))
    body = tir.LetStmt(lets[0], i, body)
    loop = tir.For(i, tir.IntImm(0, I64), tir.IntImm(n, I64), "serial", body)
    return tir.PrimFunc((out,), loop), block


def _blocks(s: tir.Stmt) -> list[tir.Block]:
    found, stack = [], [s]
    while stack:
        x = stack.pop()
        if isinstance(x, tir.Block):
            found.append(x)
        elif isinstance(x, tir.Stmt):
            stack.extend(tir.stmt_children(x))
    return found


def test_deep_nest_binds_the_loop_variable_and_keeps_values():
    depth, n = 3000, 7  # deeper than Python's recursion limit
    func, block = _deep_kernel(depth, n)
    body = bind_loop_vars_in_blocks(func.body)
    (bound,) = _blocks(body)
    assert bound is not block
    assert len(bound.iter_vars) == 1 and bound.iter_values[0] is func.body.loop_var
    got = np.zeros(n, np.int64)
    run_prim_func(tir.PrimFunc(func.params, body), [got])
    i = np.arange(n)
    np.testing.assert_array_equal(got, (i + depth) * 3 + i)


def test_nothing_to_bind_returns_the_same_statement():
    out = tir.Buffer("out", (tir.IntImm(4, I64),), I64)
    i = tir.Var("i", I64)
    inner = tir.Block("b", (), (), tir.Evaluate(tir.IntImm(0, "int32")))
    stmt = tir.For(i, tir.IntImm(0, I64), tir.IntImm(4, I64), "serial",
                   tir.SeqStmt((inner, tir.BufferStore(out, i, (i,)))))
    assert bind_loop_vars_in_blocks(stmt) is stmt

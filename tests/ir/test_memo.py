"""The identity memo of analyses of immutable IR (phasec.ir.memo)."""

from __future__ import annotations

import pytest

from phasec.ir import tir
from phasec.ir.memo import BoundedMemo, remembered


def _count_vars(calls: list[object]):
    def analysis(node: tir.PrimExpr) -> int:
        calls.append(node)
        return len(tir.expr_children(node))
    return analysis


def test_remembered_runs_an_analysis_once_per_node_object():
    calls: list[object] = []
    analysis = _count_vars(calls)
    x, y = tir.Var("x"), tir.Var("y")
    e = tir.BinaryOp("+", x, y)
    same = tir.BinaryOp("+", x, y)  # structurally equal, another object
    assert remembered(analysis, e) == 2 and remembered(analysis, e) == 2
    assert calls == [e]
    assert remembered(analysis, same) == 2
    assert len(calls) == 2 and calls[1] is same
    # another analysis of the same node is its own entry
    assert remembered(tir.expr_children, e) == (x, y)


def test_remembered_does_not_keep_a_failure():
    calls: list[int] = []

    def fails_once(node: tir.PrimExpr) -> str:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("first call")
        return "ok"

    e = tir.Var("z")
    with pytest.raises(ValueError):
        remembered(fails_once, e)
    assert remembered(fails_once, e) == "ok" and remembered(fails_once, e) == "ok"
    assert len(calls) == 2


def test_bounded_memo_drops_the_least_recently_used():
    m = BoundedMemo(2)
    m.put("a", 1)
    m.put("b", 2)
    assert m.get("a") == 1  # "a" is now the most recent
    m.put("c", 3)
    assert m.get("b") is None and m.get("a") == 1 and m.get("c") == 3
    assert m.values() == [1, 3]


def test_remembered_keeps_each_set_of_arguments_apart():
    calls: list[tuple] = []

    def scaled(node: tir.PrimExpr, factor: int) -> int:
        calls.append((node, factor))
        return factor * len(tir.expr_children(node))

    e = tir.BinaryOp("*", tir.Var("a"), tir.Var("b"))
    assert remembered(scaled, e, 3) == 6 and remembered(scaled, e, 5) == 10
    assert remembered(scaled, e, 3) == 6
    assert calls == [(e, 3), (e, 5)]

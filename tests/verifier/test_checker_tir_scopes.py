"""TIR variable scopes in every statement and expression position the checker walks.

WF501 (a TIR variable used outside its scope) must be reported wherever the
variable is read: a loop's min and extent, an AttrStmt's value and body, a
LetStmt's value, a compound index, a block's iter values, an if condition,
a composite dimension of a buffer parameter. And a loop variable that
shadows an enclosing one (WF503) leaves the enclosing one in scope after
the inner loop. Found by mutation testing of the checker
(``bench/bench_core_mutation.py --files verifier/checker.py``).
"""

from __future__ import annotations

import pytest

from phasec import verifier
from phasec.ir import IRModule, tir

A, B = tir.Buffer("A", (4,)), tir.Buffer("B", (4,))
U, I = tir.Var("u", "int64"), tir.Var("i", "int64")
ZERO = tir.IntImm(0, "int64")


def kernel(body: tir.Stmt, params: list | None = None) -> IRModule:
    return IRModule({"k": tir.PrimFunc(params or [A, B], body)})


def codes(mod: IRModule) -> list[str]:
    return [d.code for d in verifier.check(mod) if d.severity == "error"]


def store(index) -> tir.Stmt:
    return tir.BufferStore(B, A[index], (index,))


def plus_one(v) -> tir.PrimExpr:
    return tir.BinaryOp("+", v, tir.IntImm(1, "int64"))


# each: (a statement reading `v` there, how many reads)
POSITIONS = {
    "loop extent": (lambda v: tir.For(I, 0, v, "serial", store(I)), 1),
    "loop min": (lambda v: tir.For(I, v, 4, "serial", store(I)), 1),
    "AttrStmt value": (lambda v: tir.AttrStmt("pragma", v, store(ZERO)), 1),
    "AttrStmt body": (lambda v: tir.AttrStmt("pragma", ZERO, store(v)), 2),
    "LetStmt value": (lambda v: tir.LetStmt(I, v, store(I)), 1),
    "compound index": (lambda v: tir.For(I, 0, 3, "serial",
                                         tir.BufferStore(B, A[plus_one(v)], (I,))), 1),
    "block iter value": (lambda v: tir.Block("b", (tir.IterVar(tir.Var("vi", "int64"), 4),),
                                             (v,), store(ZERO)), 1),
    "if condition": (lambda v: tir.IfThenElse(tir.BinaryOp("<", v, tir.IntImm(2, "int64")),
                                              store(ZERO)), 1),
    "while condition": (lambda v: tir.While(tir.BinaryOp("<", v, tir.IntImm(2, "int64")),
                                            store(ZERO)), 1),
    "then branch": (lambda v: tir.IfThenElse(tir.BinaryOp("<", ZERO, ZERO), store(v)), 2),
    "else branch": (lambda v: tir.IfThenElse(tir.BinaryOp("<", ZERO, ZERO), store(ZERO),
                                             store(v)), 2),
    "while body": (lambda v: tir.While(tir.BinaryOp("<", ZERO, ZERO), store(v)), 2),
    "Evaluate": (lambda v: tir.Evaluate(plus_one(v)), 1),
    "right operand": (lambda v: tir.Evaluate(tir.BinaryOp("+", ZERO, v)), 1),
    "iter var min": (lambda v: tir.Block("b", (tir.IterVar(tir.Var("vi", "int64"), 4, min=v),),
                                         (ZERO,), store(ZERO)), 1),
    "iter var extent": (lambda v: tir.Block("b", (tir.IterVar(tir.Var("vi", "int64"), v),),
                                            (ZERO,), store(ZERO)), 1),
    "block init": (lambda v: tir.Block("b", (), (), store(ZERO), init=store(v)), 2),
    "read region extent": (lambda v: tir.Block("b", (), (), store(ZERO),
                                               reads=(tir.BufferRegion(A, ((ZERO, v),)),)), 1),
    "read region min": (lambda v: tir.Block("b", (), (), store(ZERO),
                                            reads=(tir.BufferRegion(A, ((v, 1),)),)), 1),
    "Select": (lambda v: tir.Evaluate(tir.Select(tir.BinaryOp("<", ZERO, ZERO), v, ZERO)), 1),
    "Cast": (lambda v: tir.Evaluate(tir.Cast("int32", v)), 1),
    "intrinsic argument": (lambda v: tir.Evaluate(tir.Call("max", (ZERO, v), "int64")), 1),
    "allocation extent": (lambda v: tir.Allocate(tir.Buffer("T", (v,)), store(ZERO)), 1),
}


@pytest.mark.parametrize("position", list(POSITIONS))
def test_undefined_tir_variable_in_every_position(position):
    make, reads = POSITIONS[position]
    assert codes(kernel(make(U))) == ["WF501"] * reads
    # the twin reads a loop variable in scope
    j = tir.Var("j", "int64")
    assert codes(kernel(tir.For(j, 0, 2, "serial", make(j)))) == []


def test_undefined_variable_in_a_composite_buffer_dimension():
    doubled = tir.Buffer("C", (tir.BinaryOp("*", U, tir.IntImm(2, "int64")),))
    assert codes(kernel(store(ZERO), [A, B, doubled])) == ["WF501"]
    n = tir.Var("n", "int64")
    sized, twice = tir.Buffer("S", (n,)), tir.Buffer("D", (tir.BinaryOp("*", n, 2),))
    assert codes(kernel(store(ZERO), [A, B, sized, twice])) == []


def test_a_shadowing_loop_leaves_the_outer_variable_in_scope():
    inner = tir.For(I, 0, 2, "serial", store(I))
    assert codes(kernel(tir.For(I, 0, 4, "serial", tir.SeqStmt((inner, store(I)))))) == ["WF503"]


def test_a_let_variable_is_out_of_scope_after_its_let():
    let = tir.Var("l", "int64")
    inside = tir.LetStmt(let, ZERO, store(let))
    assert codes(kernel(inside)) == []
    assert codes(kernel(tir.SeqStmt((inside, store(let))))) == ["WF501", "WF501"]


def test_a_buffer_in_a_read_region_after_its_allocate():
    tmp = tir.Buffer("tmp", (4,))
    block = tir.Block("b", (), (), store(ZERO), reads=(tir.BufferRegion(tmp, ((ZERO, 4),)),))
    assert codes(kernel(tir.Allocate(tmp, block))) == []
    after = tir.SeqStmt((tir.Allocate(tmp, store(ZERO)), block))
    assert codes(kernel(after)) == ["WF502"]


def test_block_annotations_are_uses():
    # a schedule hint names a variable or a buffer: it must be in scope, in a
    # list or a mapping too
    for hint in (U, [ZERO, U], {"at": U}):
        block = tir.Block("b", (), (), store(ZERO), annotations={"hint": hint})
        assert codes(kernel(block)) == ["WF501"], hint
    tmp = tir.Buffer("tmp", (4,))
    block = tir.Block("b", (), (), store(ZERO), annotations={"cache": tmp})
    assert codes(kernel(tir.Allocate(tmp, block))) == []
    assert codes(kernel(tir.SeqStmt((tir.Allocate(tmp, store(ZERO)), block)))) == ["WF502"]


def test_a_buffer_data_pointer_is_a_use_of_the_buffer():
    tmp = tir.Buffer("tmp", (4,))
    pass_pointer = tir.Evaluate(tir.Call("my_extern", (tir.BufferData(tmp),), "int32"))
    assert codes(kernel(tir.Allocate(tmp, pass_pointer))) == []
    after = tir.SeqStmt((tir.Allocate(tmp, store(ZERO)), pass_pointer))
    assert codes(kernel(after)) == ["WF502"]


# ---------------------------------------------------------------------------
# A kernel walked clean is not walked again (verification after each pass)
# ---------------------------------------------------------------------------

def test_a_kernel_walked_clean_is_skipped_but_a_faulty_one_is_reported_every_time():
    clean = tir.PrimFunc([A, B], tir.For(I, 0, 4, "serial", store(I)))
    faulty = tir.PrimFunc([A, B], tir.For(I, 0, 4, "serial", store(U)))
    for _ in range(3):  # (the same objects each time, as after passes that keep them)
        assert codes(IRModule({"k": clean})) == []
        assert codes(IRModule({"k": faulty})) == ["WF501", "WF501"]
        # the clean kernel beside the faulty one, under another name: each its own verdict
        both = verifier.check(IRModule({"k": clean, "bad": faulty}))
        assert {(d.code, d.function) for d in both if d.severity == "error"} == {("WF501", "bad")}
    from phasec.verifier.checker import _CLEAN_WALKS
    kept = list(_CLEAN_WALKS.values())
    assert any(f is clean for f in kept) and not any(f is faulty for f in kept)


def test_a_rule_of_ones_own_on_the_kernel_walk_sees_every_kernel_every_time():
    from phasec.ir import Phase
    from phasec.verifier.checker import Checker, _Dispatch
    from phasec.verifier.rules import Rule, all_rules

    seen: list[str] = []

    class CountUses(Rule):  # not registered: only this checker's dispatch has it
        code, title, explanation = "X901", "count uses", "test rule"

        def tir_var_use(self, ctx, var) -> None:
            seen.append(var.name)

    func = tir.PrimFunc([A, B], tir.For(I, 0, 4, "serial", store(I)))
    mod = IRModule({"k": func})
    assert codes(mod) == []  # walked clean with the built-in rules: skipped from now on
    for round_ in range(1, 3):
        checker = Checker(mod, Phase.INGESTION)
        checker.d = _Dispatch([*all_rules(), CountUses()])
        assert not checker.d.pure_tir_walk
        assert [d.code for d in checker.run() if d.severity == "error"] == []
        assert seen == ["i", "i"] * round_  # the index of A and of B, each round

"""Malformed IR built by hand gets diagnostics from the checker, never a traceback.

A pass written against the Python API can put anything in a field: an int
where a binding belongs, a Constant as a parameter, a Var as a function
body. The checker reports a node of an unexpected kind as WF100, a
non-leaf where A-normal form wants a leaf as WF101, and still reports the
variable uses inside a non-leaf operand (WF001, WF006, WF301): the
documentation of those rules (``phasec explain WF100`` ...). Found by
mutation testing of the checker (``bench/bench_core_mutation.py --files
verifier/checker.py``): these paths had no test.
"""

from __future__ import annotations

import gc
import sys

import numpy as np
import pytest

from phasec import verifier
from phasec.errors import WellFormedError
from phasec.ir import (
    BindingBlock, Call, Function, IRModule, Op, SeqExpr, TensorStructInfo, Var, VarBinding, tir,
)
from phasec.ir.expr import Constant, GlobalVar, If, PrimValue, ShapeExpr, Tuple, TupleGetItem
from phasec.ir.struct_info import TupleStructInfo

T4 = TensorStructInfo((4,), "float32")
BOOL = TensorStructInfo((), "bool")


def add(a, b) -> Call:
    return Call(Op("relax.add"), [a, b], struct_info=T4)


def codes(mod: IRModule) -> list[str]:
    return [d.code for d in verifier.check(mod) if d.severity == "error"]


def module(params: list, blocks: list, result) -> IRModule:
    return IRModule({"main": Function(params, SeqExpr(blocks, result),
                                      attrs={"global_symbol": "main"})})


def test_nodes_of_an_unexpected_kind_are_wf100():
    x, w = Var("x", T4), Var("w", T4)
    c = Constant(np.zeros(4, "float32"))
    as_param = IRModule({"main": Function([c], SeqExpr([], c), attrs={"global_symbol": "main"})})
    assert codes(as_param) == ["WF100"]
    assert codes(module([x], [BindingBlock([42])], x)) == ["WF100"]
    assert codes(module([x], [BindingBlock([VarBinding(w, 42)])], x)) == ["WF100"]
    operand = Call(Op("relax.add"), [x, 3], struct_info=T4)
    assert codes(module([x], [BindingBlock([VarBinding(w, operand)])], w)) == ["WF100"]
    # a binding whose variable is not a Var: reported, the rest of the module still checked
    bad_var = VarBinding("w", add(x, x))
    assert codes(module([x], [BindingBlock([bad_var])], x)) == ["WF100"]


def test_tir_nodes_of_an_unexpected_kind_are_wf100():
    a = tir.Buffer("A", (4,))
    assert codes(IRModule({"k": tir.PrimFunc([a, 3], tir.Evaluate(tir.IntImm(0, "int32")))})) \
        == ["WF100"]
    assert codes(IRModule({"k": tir.PrimFunc([a], "not a statement")})) == ["WF100"]


def test_non_leaves_where_a_seq_or_a_leaf_belongs_are_wf101():
    x, w, c = Var("x", T4), Var("w", T4), Var("c", BOOL)
    body_not_seq = IRModule({"main": Function([x], x, attrs={"global_symbol": "main"})})
    assert codes(body_not_seq) == ["WF101"]
    branches_not_seq = module([x, c], [BindingBlock([VarBinding(w, If(c, x, x,
                                                                       struct_info=T4))])], w)
    assert codes(branches_not_seq) == ["WF101", "WF101"]
    callee = module([x], [BindingBlock([VarBinding(w, Call(add(x, x), [x],
                                                            struct_info=T4))])], w)
    assert codes(callee) == ["WF101"]


def test_uses_inside_a_non_leaf_operand_are_still_checked():
    x, w, u = Var("x", T4), Var("w", T4), Var("u", T4)
    n = tir.Var("n", "int64")

    def nested(operand) -> list[str]:
        return sorted(codes(module([x], [BindingBlock([VarBinding(w, add(operand, x))])], w)))

    assert nested(TupleGetItem(Tuple([u, x]), 0)) == ["WF001", "WF101"]
    cond = If(Var("cc", BOOL), SeqExpr([], x), SeqExpr([], x), struct_info=T4)
    assert nested(cond) == ["WF001", "WF101"]
    reshape = Call(Op("relax.reshape"), [x, ShapeExpr([n])], struct_info=T4)
    assert nested(reshape) == ["WF006", "WF101"]
    full = Call(Op("relax.full"), [ShapeExpr([4]), PrimValue(n)], struct_info=T4)
    assert nested(full) == ["WF006", "WF101"]
    assert nested(Call(GlobalVar("nothere"), [x], struct_info=T4)) == ["WF101", "WF301"]


def test_a_malformed_function_does_not_stop_the_next_one():
    x, y, u = Var("x", T4), Var("y", T4), Var("u", T4)
    mod = IRModule({"a": Function([x], x),
                    "main": Function([y], SeqExpr([], u), attrs={"global_symbol": "main"})})
    assert codes(mod) == ["WF101", "WF001"]


def test_check_leaves_the_garbage_collector_as_it_found_it():
    # the checker pauses the cyclic collector during its walk (speed); the
    # process's setting must be back afterwards, enabled or not, even when
    # the module is malformed

    x = Var("x", T4)
    mod = module([x], [BindingBlock([42])], x)
    assert gc.isenabled()
    verifier.check(mod)
    assert gc.isenabled()
    gc.disable()
    try:
        verifier.check(mod)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_binding_whose_variable_is_not_a_var():
    x = Var("x", T4)
    mod = module([x], [BindingBlock([VarBinding("w", Tuple([x]))])], x)
    assert [(d.code, d.message) for d in verifier.check(mod)] == [
        ("WF100", "unexpected str here: not a node of the expected kind")]


def test_a_seq_expr_as_a_call_argument_and_a_body_that_is_no_node():
    x, w = Var("x", T4), Var("w", T4)
    seq_arg = module([x], [BindingBlock([VarBinding(w, add(SeqExpr([], x), x))])], w)
    assert codes(seq_arg) == ["WF102"]
    no_node = IRModule({"main": Function([x], 42, T4, attrs={"global_symbol": "main"})})
    assert codes(no_node) == ["WF100"]


def test_struct_info_nested_beyond_the_recursion_limit_is_wf100_not_a_crash():
    # The walk is iterative, but a call's key hashes its sinfo_args
    # recursively (verifier/keys.py): a pass that nests a Tuple struct info
    # deeper than Python's recursion limit gets WF100 "nested too deeply"
    # for that function, and the next function is still checked.
    x, w, y, u = Var("x", T4), Var("w", T4), Var("y", T4), Var("u", T4)
    deep = T4
    for _ in range(sys.getrecursionlimit() + 100):  # each level is at least one frame
        deep = TupleStructInfo([deep])
    call = Call(Op("relax.add"), [x, x], struct_info=T4, sinfo_args=[deep])
    mod = IRModule({
        "deep": Function([x], SeqExpr([BindingBlock([VarBinding(w, call)])], w)),
        "main": Function([y], SeqExpr([], u), attrs={"global_symbol": "main"})})
    diagnostics = [(d.code, d.message) for d in verifier.check(mod) if d.severity == "error"]
    assert diagnostics[0] == (
        "WF100", "function 'deep' could not be analysed completely (the IR is nested too "
        "deeply to analyse); it contains a node of an unexpected kind or shape")
    assert [code for code, _ in diagnostics[1:]] == ["WF001"]
    with pytest.raises(WellFormedError, match="nested too deeply"):
        verifier.verify(mod)

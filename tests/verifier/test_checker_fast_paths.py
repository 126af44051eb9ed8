"""The checker's shortcuts never hide a violation.

``verifier/checker.py`` decides most variable uses and definitions inline
(a use of a variable defined in an open scope, a definition of a fresh
variable with struct info) and skips the ``call_keyed`` rules for a call
shape they already passed. Each shortcut has its own copy of the condition,
in each position an operand can take (call argument, binding value, tuple
field, nested tuple field, non-leaf operand, tuple_getitem operand, result).
These tests put each scope violation in each position, and each definition
and call violation where a shortcut would be taken for a conforming twin,
and expect the rule the verifier's documentation names (WF001: undefined,
WF003: a dataflow variable outside its block, WF005: bound in an if-branch
and used after it...). Found by mutation testing of the checker
(``bench/bench_core_mutation.py --files verifier/checker.py``).
"""

from __future__ import annotations

import numpy as np
import pytest

from phasec import verifier
from phasec.ir import (
    BindingBlock, Call, DataflowBlock, DataflowVar, Function, IRModule, Op, SeqExpr,
    TensorStructInfo, Var, VarBinding,
)
from phasec.ir import Phase, tir
from phasec.ir.expr import (
    Constant, ExternFunc, If, MatchCast, PrimValue, ShapeExpr, Tuple, TupleGetItem,
)
from phasec.ir.struct_info import PrimStructInfo, ShapeStructInfo, TupleStructInfo

T4 = TensorStructInfo((4,), "float32")
T3 = TensorStructInfo((3,), "float32")
PAIR = TupleStructInfo([T4, T4])


def add(a, b) -> Call:
    return Call(Op("relax.add"), [a, b], struct_info=T4)


def errors(mod: IRModule) -> list[str]:
    return sorted({d.code for d in verifier.check(mod) if d.severity == "error"})


def module(params: list, blocks: list, result, **funcs: Function) -> IRModule:
    main = Function(params, SeqExpr(blocks, result), attrs={"global_symbol": "main"})
    return IRModule({"main": main, **funcs})


def positions(v, x) -> dict[str, tuple[list, object]]:
    """Position name -> (bindings that use ``v`` there, the result)."""
    w = Var("w", T4)
    return {
        "call argument": ([VarBinding(w, add(x, v))], w),
        "binding value": ([VarBinding(w, v)], w),
        "tuple field": ([VarBinding(Var("t", PAIR), Tuple([x, v]))], x),
        "nested tuple field": ([VarBinding(Var("t", TupleStructInfo([PAIR, T4])),
                                           Tuple([Tuple([x, v]), x]))], x),
        "non-leaf operand": ([VarBinding(w, add(add(v, x), x))], w),
        "tuple_getitem operand": ([VarBinding(w, TupleGetItem(Tuple([v, x]), 0))], w),
        "result": ([], v),
    }


POSITIONS = list(positions(Var("v", T4), Var("x", T4)))
# a call nested as an operand is also a normal-form violation (WF101)
NON_LEAF = {"non-leaf operand"}


def expected(code: str, position: str) -> list[str]:
    return sorted({code} | ({"WF101"} if position in NON_LEAF else set()))


def use_after(prelude: list, v, x, position: str, params: list) -> IRModule:
    binds, result = positions(v, x)[position]
    return module(params, [*prelude, BindingBlock(binds)] if binds else prelude, result)


@pytest.mark.parametrize("position", POSITIONS)
def test_undefined_variable_in_every_position(position):
    x, v = Var("x", T4), Var("v", T4)
    bad = use_after([], v, x, position, [x])
    assert errors(bad) == expected("WF001", position)
    # the twin: the same use of a parameter
    ok = use_after([], x, x, position, [x])
    assert errors(ok) == sorted(set(expected("WF001", position)) - {"WF001"})


@pytest.mark.parametrize("position", POSITIONS)
def test_variable_of_an_if_branch_used_after_it_in_every_position(position):
    x, c = Var("x", T4), Var("c", TensorStructInfo((), "bool"))
    inner, r = Var("inner", T4), Var("r", T4)
    branch = If(c, SeqExpr([BindingBlock([VarBinding(inner, add(x, x))])], inner),
                SeqExpr([], x), struct_info=T4)
    prelude = [BindingBlock([VarBinding(r, branch)])]
    bad = use_after(prelude, inner, x, position, [x, c])
    assert errors(bad) == expected("WF005", position)
    ok = use_after(prelude, r, x, position, [x, c])  # the if's own result is in scope
    assert "WF005" not in errors(ok)


@pytest.mark.parametrize("position", POSITIONS)
def test_dataflow_variable_after_its_block_in_every_position(position):
    x, lv, g = Var("x", T4), DataflowVar("lv", T4), Var("g", T4)
    prelude = [DataflowBlock([VarBinding(lv, add(x, x)), VarBinding(g, lv)])]
    bad = use_after(prelude, lv, x, position, [x])
    assert errors(bad) == expected("WF003", position)
    ok = use_after(prelude, g, x, position, [x])  # the block's output
    assert "WF003" not in errors(ok)


@pytest.mark.parametrize("position", POSITIONS)
def test_dataflow_variable_inside_a_nested_function_in_every_position(position):
    # the nested function sits inside the block (the block's scope is still
    # open) but is not the block: its uses of lv are WF003
    x, y, lv = Var("x", T4), Var("y", T4), DataflowVar("lv", T4)
    binds, result = positions(lv, y)[position]
    inner = Function([y], SeqExpr([BindingBlock(binds)] if binds else [], result))
    f, out = Var("inner", inner.struct_info), Var("out", T4)
    bad = module([x], [DataflowBlock([VarBinding(lv, add(x, x)), VarBinding(f, inner),
                                      VarBinding(out, lv)])], out)
    assert "WF003" in errors(bad)
    twin_binds, twin_result = positions(y, y)[position]
    twin = Function([y], SeqExpr([BindingBlock(twin_binds)] if twin_binds else [],
                                 twin_result))
    g = Var("inner", twin.struct_info)
    ok = module([x], [DataflowBlock([VarBinding(lv, add(x, x)), VarBinding(g, twin),
                                     VarBinding(out, lv)])], out)
    assert "WF003" not in errors(ok)


def test_undefined_callee_variable():
    x, w = Var("x", T4), Var("w", T4)
    inner = Function([Var("y", T4)], SeqExpr([], x))
    f = Var("f", inner.struct_info)
    bad = module([x], [BindingBlock([VarBinding(w, Call(f, [x], struct_info=T4))])], w)
    assert errors(bad) == ["WF001"]
    ok = module([x], [BindingBlock([VarBinding(f, Function([(y := Var("y", T4))],
                                                              SeqExpr([], y))),
                                    VarBinding(w, Call(f, [x], struct_info=T4))])], w)
    assert errors(ok) == []


# -- definitions: the fast path takes a fresh variable with struct info -------------------
def test_variable_bound_twice():
    x, w = Var("x", T4), Var("w", T4)
    bad = module([x], [BindingBlock([VarBinding(w, add(x, x)), VarBinding(w, add(w, x))])], w)
    assert errors(bad) == ["WF002"]


def test_parameter_rebound_in_the_body():
    x = Var("x", T4)
    bad = module([x], [BindingBlock([VarBinding(x, add(x, x))])], x)
    assert errors(bad) == ["WF002"]


def test_binding_without_struct_info():
    x, w = Var("x", T4), Var("w")
    bad = module([x], [BindingBlock([VarBinding(w, add(x, x))])], x)
    assert "WF401" in errors(bad)


def test_dataflow_variable_bound_in_a_nested_function_of_a_dataflow_block():
    x, y, lv, out = Var("x", T4), Var("y", T4), DataflowVar("lv", T4), Var("out", T4)
    inner = Function([y], SeqExpr([BindingBlock([VarBinding(lv, add(y, y))])], y))
    f = Var("inner", inner.struct_info)
    bad = module([x], [DataflowBlock([VarBinding(f, inner), VarBinding(out, x)])], out)
    assert errors(bad) == ["WF004"]


def test_parameter_shared_between_functions_and_a_dataflow_parameter():
    x, w = Var("x", T4), Var("w", T4)
    other = Function([x], SeqExpr([], x))
    shared = module([x], [BindingBlock([VarBinding(w, add(x, x))])], w, other=other)
    assert errors(shared) == ["WF008"]
    lv = DataflowVar("lv", T4)
    assert errors(module([lv], [], lv)) == ["WF004"]


# -- calls: a clean call shape is not re-checked, but only in the same context ----------
def test_same_call_with_another_annotation_is_checked_again():
    x, a, b = Var("x", T4), Var("a", T4), Var("b", T3)
    call = add(x, x)
    mod = module([x], [BindingBlock([VarBinding(a, call), VarBinding(b, add(x, x))])], a)
    assert errors(mod) == ["WF402"]


def test_same_impure_call_in_a_dataflow_block_is_checked_again():
    x, a, b, out = Var("x", T4), Var("a", T4), DataflowVar("b", T4), Var("out", T4)

    def impure() -> Call:
        return Call(ExternFunc("my.func"), [x], sinfo_args=[T4], struct_info=T4)

    main = Function([x], SeqExpr([BindingBlock([VarBinding(a, impure())]),
                                  DataflowBlock([VarBinding(b, impure()),
                                                 VarBinding(out, b)])], out),
                    is_pure=False, attrs={"global_symbol": "main"})
    assert errors(IRModule({"main": main})) == ["WF201"]


def test_same_impure_call_in_a_pure_function_is_checked_again():
    x, a = Var("x", T4), Var("a", T4)
    y, c = Var("y", T4), Var("c", T4)

    def impure(arg) -> Call:
        return Call(ExternFunc("my.func"), [arg], sinfo_args=[T4], struct_info=T4)

    impure_main = Function([x], SeqExpr([BindingBlock([VarBinding(a, impure(x))])], a),
                           is_pure=False, attrs={"global_symbol": "main"})
    pure_helper = Function([y], SeqExpr([BindingBlock([VarBinding(c, impure(y))])], c))
    assert errors(IRModule({"main": impure_main, "helper": pure_helper})) == ["WF202"]


def test_same_call_as_match_cast_then_as_binding():
    # the match_cast to (3,) of a (4,) value is WF404; the same call bound to a
    # (3,) variable is WF402 (its annotation contradicts the call), though the
    # call and the annotation are those the match_cast had
    x, a, b = Var("x", T4), Var("a", T3), Var("b", T3)
    mod = module([x], [BindingBlock([MatchCast(b, add(x, x), T3), VarBinding(a, add(x, x))])],
                 x)
    assert errors(mod) == ["WF402", "WF404"]


def test_shared_parameter_names_the_function_that_owns_it():
    x, w = Var("x", T4), Var("w", T4)
    other = Function([x], SeqExpr([], x))
    shared = module([x], [BindingBlock([VarBinding(w, add(x, x))])], w, other=other)
    [diag] = verifier.check(shared)
    assert (diag.code, diag.message) == \
        ("WF008", "parameter 'x' is also a parameter of function 'main'")


def test_undefined_symbolic_variable_in_the_return_annotation():
    x, k = Var("x", T4), tir.Var("k", "int64")
    main = Function([x], SeqExpr([], x), TensorStructInfo((k,), "float32"),
                    attrs={"global_symbol": "main"})
    found = [(d.code, d.message) for d in verifier.check(IRModule({"main": main}))]
    assert ("WF006", "symbolic variable 'k' is used before it is defined") in found


def test_each_repeated_call_gets_the_unkeyed_rules():
    # a clean call shape skips only the call_keyed rules the next time; the
    # phase rule (PH202: no high-level operator from lowering on) reports
    # every call
    x, a, b = Var("x", T4), Var("a", T4), Var("b", T4)
    mod = module([x], [BindingBlock([VarBinding(a, add(x, x)), VarBinding(b, add(x, x))])], b)
    assert [d.code for d in verifier.check(mod, Phase.LOWERING)] == ["PH202", "PH202"]


def test_a_malformed_parameter_shared_by_two_functions_is_only_malformed():
    # a Constant as a parameter is WF100; it is not also a shared parameter (WF008)
    x = Var("x", T4)
    c = Constant(np.zeros(4, "float32"))
    mod = IRModule({"main": Function([c, x], SeqExpr([], x), attrs={"global_symbol": "main"}),
                    "g": Function([c], SeqExpr([], c))})
    assert [d.code for d in verifier.check(mod)] == ["WF100", "WF100"]


def test_variable_of_a_nested_function_names_the_function_it_is_in():
    x, y, z, w = Var("x", T4), Var("y", T4), Var("z", T4), Var("w", T4)
    inner = Function([y], SeqExpr([BindingBlock([VarBinding(z, add(y, y))])], z))
    f = Var("inner", inner.struct_info)
    bad = module([x], [BindingBlock([VarBinding(f, inner), VarBinding(w, add(z, x))])], w)
    [diag] = verifier.check(bad)
    assert diag.code == "WF001" and diag.message.endswith(
        "defined inside another function (function of 'main')")


def test_local_function_bound_to_a_contradicting_annotation():
    # after walking the nested function, its binding is checked like any
    # other: a tensor annotation contradicts a function value (WF404)
    x, y, w = Var("x", T4), Var("y", T4), Var("w", T4)
    inner = Function([y], SeqExpr([], y))
    f = Var("f", T4)
    mod = module([x], [BindingBlock([VarBinding(f, inner), VarBinding(w, add(x, x))])], w)
    assert [d.code for d in verifier.check(mod)] == ["WF404"]


# -- symbolic variables the checker finds outside struct info annotations -------------
V1 = TensorStructInfo(None, "float32", 1)


def test_undefined_symbolic_variable_in_sinfo_args():
    x, w, k = Var("x", T4), Var("w", V1), tir.Var("k", "int64")
    call = Call(ExternFunc("my.func"), [x], sinfo_args=[TensorStructInfo((k,), "float32")],
                struct_info=V1)
    main = Function([x], SeqExpr([BindingBlock([VarBinding(w, call)])], x), is_pure=False,
                    attrs={"global_symbol": "main"})
    assert [(d.code, d.message) for d in verifier.check(IRModule({"main": main}))] == \
        [("WF006", "symbolic variable 'k' is used before it is defined")]


def test_undefined_symbolic_variable_in_strided_slice_bounds():
    x, w, k = Var("x", T4), Var("w", V1), tir.Var("k", "int64")
    attrs = {"axes": (0,), "begin": (k,), "end": (4,), "strides": None,
             "assume_inbound": False}
    sliced = Call(Op("relax.strided_slice"), [x], attrs=attrs, struct_info=V1)
    mod = module([x], [BindingBlock([VarBinding(w, sliced)])], x)
    assert [(d.code, d.message) for d in verifier.check(mod)] == \
        [("WF006", "symbolic variable 'k' is used before it is defined")]


def test_calls_that_cannot_be_keyed_are_each_checked():
    # attributes given as lists (unhashable) give a call no key: a second such
    # call in the same binding context is checked in full, not skipped
    x, a, b = Var("x", T4), Var("a", T3), Var("b", T3)

    def sliced(axes: list) -> Call:
        attrs = {"axes": axes, "begin": [1], "end": [4], "strides": None,
                 "assume_inbound": False}
        return Call(Op("relax.strided_slice"), [x], attrs=attrs, struct_info=T3)

    mod = module([x], [BindingBlock([VarBinding(a, sliced([0])), VarBinding(b, sliced([5]))])],
                 x)
    assert [d.code for d in verifier.check(mod)] == ["WF405"]


def test_undefined_symbolic_variable_in_a_prim_value_and_in_nested_annotations():
    x, k = Var("x", T4), tir.Var("k", "int64")
    message = ("WF006", "symbolic variable 'k' is used before it is defined")
    prim = module([x], [BindingBlock([VarBinding(Var("p", PrimStructInfo("int64")),
                                                 PrimValue(k))])], x)
    assert [(d.code, d.message) for d in verifier.check(prim)] == [message]
    # the variable in a tuple's field, and as the value of a PrimStructInfo (a
    # binding does not define it: only parameters and match_cast do)
    in_tuple = TupleStructInfo([TensorStructInfo((k,), "float32")])
    in_prim = PrimStructInfo("int64", value=k)
    for annotation, value in ((in_tuple, Tuple([x])),
                              (in_prim, PrimValue(tir.IntImm(3, "int64")))):
        mod = module([x], [BindingBlock([VarBinding(Var("w", annotation), value)])], x)
        assert message in [(d.code, d.message) for d in verifier.check(mod)], annotation


def test_a_call_as_a_tuple_field_is_not_a_leaf():
    x = Var("x", T4)
    mod = module([x], [BindingBlock([VarBinding(Var("t", PAIR), Tuple([x, add(x, x)]))])], x)
    assert [(d.code, d.message) for d in verifier.check(mod)] == [
        ("WF101", "Call used as tuple field: A-normal form requires a leaf (a variable, "
                  "constant or other leaf expression) here")]


def test_undefined_symbolic_variable_in_a_shape_value():
    x, k = Var("x", T4), tir.Var("k", "int64")
    mod = module([x], [BindingBlock([VarBinding(Var("s", ShapeStructInfo(ndim=1)),
                                                ShapeExpr([k]))])], x)
    assert ("WF006", "symbolic variable 'k' is used before it is defined") in \
        [(d.code, d.message) for d in verifier.check(mod)]


def test_symbolic_variable_used_in_one_function_and_defined_in_another():
    # a use records the function too: `k`, used (undefined) in a's return
    # annotation, is WF007 where main defines it
    k = tir.Var("k", "int64")
    x, y = Var("x", T4), Var("y", TensorStructInfo((k,), "float32"))
    a = Function([x], SeqExpr([], x), TensorStructInfo((k,), "float32"))
    main = Function([y], SeqExpr([], y), attrs={"global_symbol": "main"})
    found = [(d.code, d.message) for d in verifier.check(IRModule({"a": a, "main": main}))]
    assert ("WF007", "symbolic variable 'k' is also used in function 'a'") in found


def test_inference_kept_across_checks_never_answers_for_another_module():
    x = Var("x", T4)
    y = Var("y", T4)

    def callee(ret) -> Function:
        p = Var("p", T4)
        r = Var("r", ret)
        return Function([p], SeqExpr([BindingBlock([VarBinding(r, Call(
            Op("relax.nn.relu"), [p], struct_info=ret) if ret is T4 else Call(
            Op("relax.strided_slice"), [p], attrs={"axes": (0,), "begin": (0,), "end": (3,)},
            struct_info=ret))])], r), ret_struct_info=ret)

    from phasec.ir import GlobalVar
    for _ in range(2):  # the second round finds the first one's inferences kept
        # an operator call: the same shape infers the same everywhere
        assert errors(module([x], [BindingBlock([VarBinding(y, add(x, x))])], y)) == []
        wrong = Var("w", TensorStructInfo((4,), "int32"))
        assert "WF402" in errors(module([x], [BindingBlock([VarBinding(wrong, add(x, x))])],
                                        wrong))
        # a call of a module's function by name: what it returns is that module's
        call = Call(GlobalVar("f"), [x], struct_info=T4)
        assert errors(module([x], [BindingBlock([VarBinding(y, call)])], y, f=callee(T4))) == []
        assert "WF402" in errors(module([x], [BindingBlock([VarBinding(y, call)])], y,
                                        f=callee(T3)))

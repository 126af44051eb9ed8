"""Normalize: A-normal form and struct info, idempotent, identity on normal input.

Non-normal IR cannot be written in TVMScript (the parser normalizes), so the
inputs here are built with the IR constructors; the expected results are
TVMScript. Normalize declares ``verify_input=False``, so these run under the
default ``verify="each"``: the non-normal input is not rejected, the output is
verified.
"""

from __future__ import annotations

import numpy as np
import pytest

from phasec import PassError, PhaseError, parse
from phasec.ir import (
    BindingBlock, Call, DataflowBlock, DataflowVar, Function, GlobalVar, If, IRModule, Phase,
    SeqExpr, TensorStructInfo, Tuple, TupleGetItem, Var, VarBinding,
)
from phasec.op import call_op, op_expr
from phasec.transform import PassContext, get_pass

from helpers.pass_cases import check_pass

T23 = TensorStructInfo((2, 3), "float32")


def normalize() -> object:
    return get_pass("Normalize")


def module(*funcs: tuple[str, Function], phase: Phase = Phase.INGESTION) -> IRModule:
    mod = IRModule(dict(funcs))
    return mod if phase == Phase.INGESTION else mod.with_phase(phase)


def entry(params, blocks, body, **kw) -> Function:
    return Function(params, SeqExpr(blocks, body), attrs={"global_symbol": "main"}, **kw)


def test_nested_calls_are_bound_to_fresh_variables():
    x, y = Var("x", T23), Var("y", T23)
    r = Var("r")  # no struct info: filled in by inference
    value = call_op("multiply", call_op("add", x, call_op("exp", y)), call_op("exp", y))
    mod = module(("main", entry([x, y], [BindingBlock([VarBinding(r, value)])], r)))
    check_pass(normalize(), mod, """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        lv = R.exp(y)
        lv1 = R.add(x, lv)
        lv2 = R.exp(y)
        r = R.multiply(lv1, lv2)
        return r
""", idempotent=True)


def test_dataflow_block_gets_dataflow_vars_and_body_is_bound():
    x = Var("x", T23)
    gv = Var("gv", T23)
    block = DataflowBlock([VarBinding(gv, call_op("negative", call_op("abs", x)))])
    # The result is a tuple of calls: it is bound after the block.
    body = Tuple([call_op("sum", gv, axis=[1]), gv])
    mod = module(("main", entry([x], [block], body)))
    out = check_pass(normalize(), mod, """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tuple(R.Tensor((2,), "float32"), R.Tensor((2, 3), "float32")):
        with R.dataflow():
            lv = R.abs(x)
            gv = R.negative(lv)
            R.output(gv)
        lv1 = R.sum(gv, axis=[1])
        return (lv1, gv)
""", idempotent=True)
    inner = out["main"].body.blocks[0].bindings[0].var
    assert type(inner) is DataflowVar


def test_if_branches_become_seq_exprs_and_tuple_items_are_normalized():
    x = Var("x", T23)
    c = Var("c", TensorStructInfo((), "bool"))
    t = Var("t")
    branch = If(c, call_op("exp", x), call_op("negative", call_op("abs", x)))
    picked = TupleGetItem(Tuple([call_op("add", x, x), x]), 0)
    y = Var("y")
    mod = module(("main", entry([x, c], [BindingBlock([VarBinding(t, branch),
                                                         VarBinding(y, picked)])],
                                Call(op_expr("add"), [t, y]))))
    check_pass(normalize(), mod, """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), c: R.Tensor((), "bool")) -> R.Tensor((2, 3), "float32"):
        if c:
            lv = R.exp(x)
            t = lv
        else:
            lv1 = R.abs(x)
            lv2 = R.negative(lv1)
            t = lv2
        lv3 = R.add(x, x)
        y = (lv3, x)[0]
        lv4 = R.add(t, y)
        return lv4
""", idempotent=True, verify="off", results=False)  # the input's bare branches cannot run


def test_callees_without_signature_are_normalized_first():
    # helper has no return annotation and a body without struct info: main's
    # call of it can only be inferred once helper is normalized.
    a = Var("a", T23)
    exp = op_expr("exp")
    helper = Function([a], SeqExpr([], Call(exp, [Call(exp, [a])])),
                      attrs={"global_symbol": "helper"})
    assert helper.struct_info is None
    x, r = Var("x", T23), Var("r")
    main = entry([x], [BindingBlock([VarBinding(r, Call(GlobalVar("helper"), [x]))])], r)
    out = check_pass(normalize(), module(("main", main), ("helper", helper)), """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        r = cls.helper(x)
        return r

    @R.function
    def helper(a: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        lv = R.exp(a)
        lv1 = R.exp(lv)
        return lv1
""", idempotent=True)
    assert out["main"].body.blocks[0].bindings[0].var.struct_info is not None


def test_nested_function_bodies_are_normalized():
    x, a = Var("x", T23), Var("a", T23)
    inner = Function([a], SeqExpr([], call_op("add", call_op("exp", a), x)))
    f, r = Var("f"), Var("r")
    main = entry([x], [BindingBlock([VarBinding(f, inner), VarBinding(r, Call(f, [x]))])], r)
    check_pass(normalize(), module(("main", main)), """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        @R.function
        def f(a: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
            lv = R.exp(a)
            lv1 = R.add(lv, x)
            return lv1
        r = f(x)
        return r
""", idempotent=True)


def test_fresh_names_do_not_collide_with_existing_ones():
    x = Var("x", T23)
    lv, r = Var("lv", T23), Var("r")
    blocks = [BindingBlock([VarBinding(lv, call_op("exp", x)),
                            VarBinding(r, call_op("add", call_op("abs", lv), lv))])]
    out = check_pass(normalize(), module(("main", entry([x], blocks, r))))
    names = [b.var.name_hint for b in out["main"].body.blocks[0].bindings]
    assert names == ["lv", "lv1", "r"]


def test_normal_module_is_returned_unchanged():
    mod = parse("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        with R.dataflow():
            y = R.exp(R.add(x, x))
            R.output(y)
        return y
""")
    out = check_pass(normalize(), mod, idempotent=True)
    assert out is mod


def test_accepts_ingestion_and_optimization_only():
    info = normalize().info
    assert info.phases == {Phase.INGESTION, Phase.OPTIMIZATION}
    assert info.opt_level == 0 and info.transition_to is None
    x = Var("x", T23)
    mod = module(("main", entry([x], [], x)), phase=Phase.OPTIMIZATION)
    assert normalize()(mod) is mod
    with pytest.raises(PhaseError, match="Normalize expects phase ingestion or optimization"):
        normalize()(mod.with_phase(Phase.LOWERING))


def test_parameter_without_struct_info_is_a_clear_error():
    x = Var("x")  # no struct info
    mod = module(("main", entry([x], [], x)))
    with pytest.raises(PassError) as err:
        normalize()(mod)
    assert "Normalize" in str(err.value) and "parameter x" in str(err.value)


def test_results_unchanged_on_a_long_function():
    # 20k nested-call bindings: normalization is iterative over bindings.
    t4 = TensorStructInfo((4,), "float32")
    x = Var("x", t4)
    bindings, prev = [], x
    for i in range(10_000):
        v = Var(f"v{i}", t4)
        bindings.append(VarBinding(v, call_op("add", call_op("multiply", prev, x), x)))
        prev = v
    mod = module(("main", entry([x], [BindingBlock(bindings)], prev)))
    out = normalize()(mod)  # verified on the way out (verify-each)
    assert len(out["main"].body.blocks[0].bindings) == 20_000
    arg = np.full(4, 0.5, "float32")
    from helpers.pass_cases import assert_same_results
    assert_same_results(mod, out, args=[arg])

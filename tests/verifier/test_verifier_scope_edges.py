"""Scopes the verifier must close and open exactly: a variable of a nested
function seen outside it, a closure reading what its function binds later, a
dataflow variable reaching a nested function after its block, a symbolic
variable used only in call_tir's out_sinfo, a TIR buffer used after its
Allocate, a block axis used after its block.

Each violation has a conforming twin, so a verifier that reports everything
fails as surely as one that reports nothing. (Found by mutation testing of
the verifier, bench/bench_core_mutation.py: these mutants survived.)
"""

from __future__ import annotations

import dataclasses

import phasec
from phasec import verifier
from phasec.ir import (
    BindingBlock, Call, DataflowBlock, DataflowVar, Function, IRModule, Op, SeqExpr,
    TensorStructInfo, Var, VarBinding, tir,
)

T4 = TensorStructInfo((4,), "float32")


def add(a: Var, b: Var) -> Call:
    return Call(Op("relax.add"), [a, b], struct_info=T4)


def found(mod: IRModule) -> list[tuple[str, str]]:
    return [(d.code, d.message) for d in verifier.check(mod) if d.severity == "error"]


def main_module(params: list[Var], blocks: list, result: Var) -> IRModule:
    main = Function(params, SeqExpr(blocks, result), attrs={"global_symbol": "main"})
    return IRModule({"main": main})


# -- Relax: nested functions and closures ----------------------------------------
def test_variable_of_a_nested_function_is_not_visible_after_it():
    x, y, z, w = Var("x", T4), Var("y", T4), Var("z", T4), Var("w", T4)
    inner = Function([y], SeqExpr([BindingBlock([VarBinding(z, add(y, y))])], z))
    f = Var("inner", inner.struct_info)
    bad = main_module([x], [BindingBlock([VarBinding(f, inner), VarBinding(w, add(z, x))])], w)
    [(code, message)] = found(bad)
    assert code == "WF001" and "'z'" in message and "inside another function" in message
    # its twin uses the nested function's parameter inside it only
    ok = main_module([x], [BindingBlock([VarBinding(f, inner), VarBinding(w, add(x, x))])], w)
    assert found(ok) == []


def test_closure_reading_a_variable_bound_after_it():
    x, y, z, w = Var("x", T4), Var("y", T4), Var("z", T4), Var("w", T4)
    inner = Function([y], SeqExpr([BindingBlock([VarBinding(z, add(y, w))])], z))
    f = Var("inner", inner.struct_info)
    late = main_module([x], [BindingBlock([VarBinding(f, inner), VarBinding(w, add(x, x))])], w)
    [(code, message)] = found(late)
    assert code == "WF001" and "'w'" in message and "before it is defined" in message
    early = main_module([x], [BindingBlock([VarBinding(w, add(x, x)), VarBinding(f, inner)])], w)
    assert found(early) == []  # a closure captures what is bound before it


def test_dataflow_variable_reaching_a_nested_function():
    x, y, z, w = Var("x", T4), Var("y", T4), Var("z", T4), Var("w", T4)
    lv = DataflowVar("lv", T4)
    inner = Function([y], SeqExpr([BindingBlock([VarBinding(z, add(y, lv))])], z))
    f = Var("inner", inner.struct_info)
    after_block = main_module([x], [
        DataflowBlock([VarBinding(lv, add(x, x)), VarBinding(w, add(lv, x))]),
        BindingBlock([VarBinding(f, inner)])], w)
    [(code, message)] = found(after_block)
    assert code == "WF003" and "'lv'" in message and "after the end of its dataflow block" \
        in message
    # defined inside the block, the nested function still is not the block
    g = Var("inner", inner.struct_info)
    inside_block = main_module([x], [
        DataflowBlock([VarBinding(lv, add(x, x)), VarBinding(g, inner),
                       VarBinding(w, add(lv, x))])], w)
    [(code, message)] = found(inside_block)
    assert code == "WF003" and "inside a nested function" in message


CALL_TIR = """
@I.ir_module
class Module:
    @T.prim_func
    def copy(A: T.handle, B: T.handle):
        n = T.int64()
        a = T.match_buffer(A, (n,), "float32")
        b = T.match_buffer(B, (n,), "float32")
        for i in range(n):
            with T.block("c"):
                vi = T.axis.spatial(n, i)
                b[vi] = a[vi]

    @R.function
    def main(x: R.Tensor(("m",), "float32")) -> R.Tensor(("m",), "float32"):
        m = T.int64()
        k = T.int64()
        y = R.call_tir(Module.copy, (x,), out_sinfo=R.Tensor((OUT,), "float32"))
        return x
"""


def test_symbolic_variable_used_only_in_call_tir_out_sinfo():
    bad = phasec.parse(CALL_TIR.replace("OUT", "k"), "calltir.py")
    codes = {(d.code, d.span.line if d.span else None) for d in verifier.check(bad)}
    line = CALL_TIR.splitlines().index(
        "        y = R.call_tir(Module.copy, (x,), out_sinfo=R.Tensor((OUT,), \"float32\"))") + 1
    assert codes == {("WF006", line)}
    assert all("'k'" in d.message for d in verifier.check(bad))
    ok = phasec.parse(CALL_TIR.replace("OUT", "m"), "calltir.py")
    assert verifier.check(ok) == []


# -- TIR: allocations and block axes ----------------------------------------------
A, B = tir.Buffer("A", (4,)), tir.Buffer("B", (4,))


def kernel(body: tir.Stmt) -> IRModule:
    return IRModule({"k": tir.PrimFunc([A, B], body)})


def test_buffer_used_after_its_allocate():
    tmp = tir.Buffer("tmp", (4,))
    i, j = tir.Var("i"), tir.Var("j")
    fill = tir.For(i, 0, 4, "serial", tir.BufferStore(tmp, A[i], (i,)))
    read = tir.For(j, 0, 4, "serial", tir.BufferStore(B, tmp[j], (j,)))
    after = kernel(tir.SeqStmt((tir.Allocate(tmp, fill), read)))
    [(code, message)] = found(after)
    assert code == "WF502" and "'tmp'" in message
    inside = kernel(tir.Allocate(tmp, tir.SeqStmt((fill, read))))
    assert found(inside) == []


def test_block_axis_used_after_its_block():
    vi, k = tir.Var("vi"), tir.Var("k")
    block = tir.Block("c", (tir.IterVar(vi, 4),), (k,), tir.BufferStore(B, A[vi], (vi,)))
    after = kernel(tir.For(k, 0, 4, "serial",
                           tir.SeqStmt((block, tir.BufferStore(B, A[k], (vi,))))))
    [(code, message)] = found(after)
    assert code == "WF501" and "'vi'" in message
    assert found(kernel(tir.For(k, 0, 4, "serial", block))) == []


# -- what the messages say ----------------------------------------------------------
def test_dataflow_variable_outside_a_block_says_where():
    x, w = Var("x", T4), Var("w", T4)
    lv = DataflowVar("lv", T4)
    as_param = main_module([lv], [BindingBlock([VarBinding(w, add(lv, lv))])], w)
    [(code, message)] = found(as_param)
    assert code == "WF004" and message == "dataflow variable 'lv' is defined as a function parameter"
    bound = main_module([x], [BindingBlock([VarBinding(lv, add(x, x))])], x)
    [(code, message)] = found(bound)
    assert code == "WF004" and message == "dataflow variable 'lv' is defined outside a dataflow block"


def test_nested_function_after_lambda_lifting_is_named():
    x, y = Var("x", T4), Var("y", T4)
    inner = Function([y], SeqExpr([], y))
    f = Var("helper", inner.struct_info)
    mod = main_module([x], [BindingBlock([VarBinding(f, inner)])], x).with_phase("optimization")
    [(code, message)] = found(mod)
    assert code == "PH101"
    assert message.startswith("nested function 'helper' in phase optimization")
    [diag] = verifier.check(mod)
    assert diag.help == ("run LambdaLifting to lift nested functions (or declare phase "
                         "'ingestion': I.module_attrs({\"phase\": \"ingestion\"}) in the "
                         "module class)")
    # with a Codegen attribute it is a BYOC region and stays where it is
    byoc = Function([y], SeqExpr([], y), attrs={"Codegen": "dnnl"})
    g = Var("helper", byoc.struct_info)
    ok = main_module([x], [BindingBlock([VarBinding(g, byoc)])], x).with_phase("optimization")
    assert found(ok) == []


LOWERED_DATAFLOW = """
@I.ir_module
class Module:
    I.module_attrs({"phase": "lowering"})

    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        with R.dataflow():
            a = x
            b = a
            R.output(b)
        return b
"""


def test_dataflow_block_without_a_span_is_reported_at_its_first_binding():
    mod = phasec.parse(LOWERED_DATAFLOW, "lowered.py")
    lines = LOWERED_DATAFLOW.splitlines()
    at_with = lines.index("        with R.dataflow():") + 1
    assert [(d.code, d.span.line) for d in verifier.check(mod)] == [("PH201", at_with)]
    # a pass that rebuilds the block (no span of its own) keeps the bindings' spans
    func = mod["main"]
    block = dataclasses.replace(func.body.blocks[0], span=None)
    rebuilt = mod.update({"main": dataclasses.replace(
        func, body=dataclasses.replace(func.body, blocks=(block,)))})
    assert [(d.code, d.span.line) for d in verifier.check(rebuilt)] == [
        ("PH201", lines.index("            a = x") + 1)]


def test_a_tir_value_bound_as_a_relax_value_is_named():
    x, bad = Var("x", T4), Var("bad", T4)
    mod = main_module([x], [BindingBlock([VarBinding(bad, tir.IntImm(1))])], x)
    [(code, message)] = found(mod)
    assert code == "WF100"
    assert message == "unexpected IntImm here: not a node of the expected kind"

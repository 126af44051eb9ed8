"""Phase invariants: the acceptance examples, cumulative rules, infer_phase,
the phase argument, and scale (long and deeply nested programs)."""

from __future__ import annotations

import re

import pytest

import phasec
from phasec import verifier
from phasec.errors import WellFormedError
from phasec.ir import (
    BindingBlock, Call, DataflowBlock, DataflowVar, Function, GlobalVar, If, IRModule, Op,
    PrimStructInfo, SeqExpr, TensorStructInfo, Tuple, Var, VarBinding, tir,
)
from phasec.ir.phase import Phase

from helpers.paths import VERIFIER_CASES

CASES = VERIFIER_CASES
HEAD = """# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tir as T

@I.ir_module
class Module:
"""


def declare(text: str, phase: str) -> str:
    """The module text with its declared phase replaced (or added)."""
    attrs = f'    I.module_attrs({{"phase": "{phase}"}})\n'
    if "I.module_attrs" in text:
        return re.sub(r"    I\.module_attrs\(.*\)\n", attrs, text)
    return text.replace("class Module:\n", "class Module:\n" + attrs + "\n")


def codes(text: str, phase: str | None = None) -> list[str]:
    mod = phasec.parse(declare(text, phase) if phase else text, "case.py")
    return [d.code for d in verifier.check(mod) if d.severity == "error"]


def case(name: str) -> str:
    return (CASES / name).read_text()


# ---------------------------------------------------------------------------
# The acceptance examples
# ---------------------------------------------------------------------------

NESTED = HEAD + """    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        @R.function
        def inner(y: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
            ATTRS
            z = R.add(y, y)
            return z
        w = inner(x)
        return w
"""


@pytest.mark.parametrize("attrs, phase, expected", [
    ("", "ingestion", []),
    ("", "optimization", ["PH101"]),
    ('R.func_attr({"Codegen": "dnnl"})', "optimization", []),
    ('R.func_attr({"Composite": "dnnl.conv2d_relu"})', "optimization", []),
])
def test_nested_function(attrs: str, phase: str, expected: list[str]) -> None:
    text = NESTED.replace("ATTRS", attrs) if attrs else NESTED.replace("            ATTRS\n", "")
    assert codes(text, phase) == expected


def test_dataflow_block_fine_in_optimization_error_in_lowering() -> None:
    text = case("ph201_bad.py")
    assert "with R.dataflow():" in text
    assert codes(text, "optimization") == []
    assert codes(text, "lowering") == ["PH201"]


def test_high_level_op_fine_in_optimization_error_in_lowering() -> None:
    text = case("ph202_bad.py")
    assert codes(text, "optimization") == []
    assert codes(text, "lowering") == ["PH202", "PH202"]


def test_call_tir_fine_in_lowering_error_in_build() -> None:
    text = HEAD + """    @T.prim_func(private=True)
    def add(A: T.Buffer((T.int64(2), T.int64(3)), "float32"), B: T.Buffer((T.int64(2), T.int64(3)), "float32"), C: T.Buffer((T.int64(2), T.int64(3)), "float32")):
        for i, j in T.grid(T.int64(2), T.int64(3)):
            C[i, j] = A[i, j] + B[i, j]

    @R.function(pure=False)
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        y = R.call_tir(cls.add, (x, x), out_sinfo=R.Tensor((2, 3), "float32"))
        return y
"""
    assert codes(text, "lowering") == []
    assert codes(text, "build") == ["PH303"]


def test_pure_function_is_an_error_in_build() -> None:
    text = HEAD + """    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        return x
"""
    assert codes(text, "lowering") == []
    assert codes(text, "build") == ["PH301"]
    assert codes(text.replace("@R.function\n", "@R.function(pure=False)\n"), "build") == []
    forced = text.replace("-> R.Tensor((2, 3), \"float32\"):\n",
                          "-> R.Tensor((2, 3), \"float32\"):\n"
                          "        R.func_attr({\"relax.force_pure\": True})\n")
    assert codes(forced, "build") == []


def test_diagnostic_help_names_the_pass_and_the_phase() -> None:
    text = declare(NESTED.replace("            ATTRS\n", ""), "optimization")
    [diag] = verifier.check(phasec.parse(text, "case.py"))
    assert diag.help == ("run LambdaLifting to lift nested functions (or declare phase "
                         "'ingestion': I.module_attrs({\"phase\": \"ingestion\"}) in the module "
                         "class)")
    assert diag.binding == "inner" and diag.function == "main"
    assert text.splitlines()[diag.span.line - 1].strip().startswith("def inner(")


# ---------------------------------------------------------------------------
# Cumulative rules, the phase argument
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name, first", [
    ("ph101_bad.py", Phase.OPTIMIZATION), ("ph201_bad.py", Phase.LOWERING),
    ("ph202_bad.py", Phase.LOWERING), ("ph303_bad.py", Phase.BUILD),
])
def test_phase_rules_apply_from_their_phase_on(name: str, first: Phase) -> None:
    mod = phasec.parse(case(name), name)
    code = name[:5].upper()
    for phase in Phase:
        found = code in {d.code for d in verifier.check(mod, phase)}
        assert found == (phase >= first), (code, phase)


def test_phase_argument_forms_and_default() -> None:
    mod = phasec.parse(case("ph201_bad.py"), "ph201_bad.py")
    assert mod.phase == Phase.LOWERING
    default = [d.code for d in verifier.check(mod)]
    assert default == ["PH201"]
    for form in (Phase.LOWERING, 2, "lowering", "LOWERING", "2"):
        assert [d.code for d in verifier.check(mod, form)] == default
    assert verifier.check(mod, "optimization") == []
    with pytest.raises(ValueError, match="invalid phase"):
        verifier.check(mod, "linking")
    with pytest.raises(TypeError):
        verifier.check(mod["main"])  # type: ignore[arg-type]


def test_verify_uses_the_phase_given() -> None:
    mod = phasec.parse(case("ph201_bad.py"), "ph201_bad.py")
    verifier.verify(mod, Phase.OPTIMIZATION)
    with pytest.raises(WellFormedError, match="phase lowering"):
        verifier.verify(mod)


# ---------------------------------------------------------------------------
# infer_phase
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name, expected", [
    ("ph101_bad.py", Phase.INGESTION),
    ("ph101_good.py", Phase.OPTIMIZATION),   # nested BYOC function, dataflow-free, R.add
    ("wf104_good.py", Phase.OPTIMIZATION),   # dataflow block
    ("ph201_good.py", Phase.LOWERING),
    ("ph202_good.py", Phase.LOWERING),
    ("ph303_good.py", Phase.BUILD),
    ("ph302_good.py", Phase.BUILD),
])
def test_infer_phase(name: str, expected: Phase) -> None:
    mod = phasec.parse(case(name), name)
    assert verifier.infer_phase(mod) == expected


def test_infer_phase_is_independent_of_the_declared_phase() -> None:
    text = case("ph201_good.py")
    for phase in ("ingestion", "build"):
        assert verifier.infer_phase(phasec.parse(declare(text, phase), "x.py")) == Phase.LOWERING


def test_infer_phase_of_an_ill_formed_module_raises() -> None:
    mod = phasec.parse(case("wf402_bad.py"), "wf402_bad.py")
    with pytest.raises(WellFormedError, match="not well-formed at any phase") as info:
        verifier.infer_phase(mod)
    assert {d.code for d in info.value.diagnostics} == {"WF402"}


# ---------------------------------------------------------------------------
# Lowered programs built by hand: many call_tir bindings and PrimFuncs
# ---------------------------------------------------------------------------

F32 = "float32"


def _kernel(name: str) -> tir.PrimFunc:
    m = tir.Var("m")
    a, b, c = (tir.Buffer(n, (m, 4), F32) for n in "ABC")
    i, j = tir.Var("i"), tir.Var("j")
    body = tir.For(i, 0, m, "parallel", tir.For(j, 0, 4, "vectorized",
                                                 tir.BufferStore(c, a[i, j] + b[i, j], (i, j))))
    return tir.PrimFunc([a, b, c], body, {"global_symbol": name})


def lowered_chain(n_bindings: int, n_kernels: int, phase: str = "lowering") -> IRModule:
    n = tir.Var("n")
    x = Var("x", TensorStructInfo((n, 4), F32))
    cur, bindings, funcs = x, [], {}
    for k in range(n_bindings):
        name = f"add{k % n_kernels}"
        funcs.setdefault(name, _kernel(name))
        v = Var(f"lv{k}", TensorStructInfo((n, 4), F32))
        bindings.append(VarBinding(v, Call(Op("relax.call_tir"), [GlobalVar(name), Tuple([cur, x])],
                                           sinfo_args=[TensorStructInfo((n, 4), F32)])))
        cur = v
    funcs["main"] = Function([x], SeqExpr([BindingBlock(bindings)], cur),
                             TensorStructInfo((n, 4), F32), attrs={"global_symbol": "main"})
    return IRModule(funcs, {"phase": phase})


def test_lowered_program_with_symbolic_kernels_is_clean() -> None:
    mod = lowered_chain(50, 7)
    assert verifier.check(mod) == []
    assert verifier.infer_phase(mod) == Phase.LOWERING
    build = [d.code for d in verifier.check(mod, "build")]
    assert build == ["PH301"] + ["PH303"] * 50


def test_call_tir_symbolic_extent_must_be_consistent() -> None:
    n, k = tir.Var("n"), tir.Var("k")
    x = Var("x", TensorStructInfo((n, 4), F32))
    y = Var("y", TensorStructInfo((k, 4), F32))
    z = Var("z", TensorStructInfo((3, 4), F32))
    w = Var("w", TensorStructInfo((5, 4), F32))
    calls = [(x, y), (z, w)]  # n vs k: unprovable (fine); 3 vs 5: provably different
    bindings = [VarBinding(Var(f"o{i}", TensorStructInfo((a.struct_info.shape[0], 4), F32)),
                           Call(Op("relax.call_tir"), [GlobalVar("add"), Tuple([a, b])],
                                sinfo_args=[TensorStructInfo((a.struct_info.shape[0], 4), F32)]))
                for i, (a, b) in enumerate(calls)]
    main = Function([x, y, z, w], SeqExpr([BindingBlock(bindings)], x), x.struct_info)
    mod = IRModule({"main": main, "add": _kernel("add")}, {"phase": "lowering"})
    [diag] = verifier.check(mod)
    assert diag.code == "WF406" and diag.binding == "o1"
    assert "m = 5" in diag.message and "m = 3" in diag.message


# ---------------------------------------------------------------------------
# Scale: long programs, deep nesting
# ---------------------------------------------------------------------------

def _chain(n_bindings: int, dataflow: bool) -> IRModule:
    n = tir.Var("n")
    x = Var("x", TensorStructInfo((n, 4), F32))
    cur, bindings = x, []
    for k in range(n_bindings):
        last = k == n_bindings - 1
        cls = Var if (last or not dataflow) else DataflowVar
        v = cls(f"v{k}", TensorStructInfo((n, 4), F32))
        bindings.append(VarBinding(v, Call(Op("relax.add"), [cur, x])))
        cur = v
    block = DataflowBlock(bindings) if dataflow else BindingBlock(bindings)
    return IRModule({"main": Function([x], SeqExpr([block], cur), x.struct_info)})


def test_long_chain_is_checked_without_recursion() -> None:
    mod = _chain(20_000, dataflow=True)
    assert verifier.check(mod) == []
    assert verifier.check(mod, "lowering")[0].code == "PH201"


def test_errors_in_a_long_program_are_all_reported() -> None:
    mod = _chain(5_000, dataflow=False)
    assert len([d for d in verifier.check(mod, "lowering") if d.code == "PH202"]) == 5_000


def test_deeply_nested_branches_and_functions() -> None:
    depth = 3_000
    c = Var("c", PrimStructInfo("bool"))
    x = Var("x", TensorStructInfo((2,), F32))
    # if c: (if c: (... x ...)) else x, nested `depth` times
    inner: SeqExpr = SeqExpr([], x)
    for k in range(depth):
        r = Var(f"r{k}", x.struct_info)
        inner = SeqExpr([BindingBlock([VarBinding(r, If(c, inner, SeqExpr([], x)))])], r)
    mod = IRModule({"main": Function([c, x], inner, x.struct_info)})
    assert verifier.check(mod) == []
    # functions nested `depth` times, each returning the next
    body: SeqExpr = SeqExpr([], x)
    for k in range(depth):
        fn = Function([], body, x.struct_info)
        f = Var(f"f{k}", fn.struct_info)
        body = SeqExpr([BindingBlock([VarBinding(f, fn)])], x)
    mod = IRModule({"main": Function([x], body, x.struct_info)})
    assert verifier.check(mod) == []
    assert [d.code for d in verifier.check(mod, "optimization")] == ["PH101"] * depth


def test_deep_tir_let_chain() -> None:
    a = tir.Buffer("A", (1,), F32)
    vars_ = [tir.Var(f"t{k}", "float32") for k in range(20_000)]
    body: tir.Stmt = tir.BufferStore(a, vars_[-1], (0,))
    for k in range(len(vars_) - 1, -1, -1):
        value = tir.FloatImm(0.0) if k == 0 else vars_[k - 1] + tir.FloatImm(1.0)
        body = tir.LetStmt(vars_[k], value, body)
    mod = IRModule({"k": tir.PrimFunc([a], body)})
    assert verifier.check(mod) == []


def test_recursive_local_function_and_closures_are_well_formed() -> None:
    text = HEAD + """    @R.function(pure=False)
    def main(x: R.Tensor((2, 3), "float32"), c: R.Prim("bool")) -> R.Tensor((2, 3), "float32"):
        @R.function
        def loop(y: R.Tensor((2, 3), "float32"), d: R.Prim("bool")) -> R.Tensor((2, 3), "float32"):
            if d:
                z = loop(y, d)
            else:
                z = R.add(y, x)
            return z
        w = loop(x, c)
        clo = R.make_closure(cls.helper, (x,))
        v = R.invoke_closure(clo, (w,), sinfo_args=R.Tensor((2, 3), "float32"))
        return v

    @R.function(private=True)
    def helper(a: R.Tensor((2, 3), "float32"), b: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        s = R.add(a, b)
        return s
"""
    mod = phasec.parse(text, "rec.py")
    assert verifier.check(mod) == []
    assert verifier.infer_phase(mod) == Phase.INGESTION  # the nested function
    # the pure variant: invoke_closure has side effects
    pure = phasec.parse(text.replace("@R.function(pure=False)", "@R.function"), "rec.py")
    assert [d.code for d in verifier.check(pure)] == ["WF202"]

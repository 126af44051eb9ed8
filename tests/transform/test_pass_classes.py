"""The pass base classes used directly: what a pass class must define, what
the decorators do with a class that already is a pass, and how errors of a
pass called inside another pass surface. Also Pipeline.copy and repr.

(Found by mutation testing of the pass infrastructure,
bench/bench_core_mutation.py: no test reached these lines.)
"""

from __future__ import annotations

import pytest

from phasec import PassError
from phasec.ir import Function, IRModule, Phase, SeqExpr, TensorStructInfo, Var, tir
from phasec.transform import (
    ALL_PHASES, FunctionPass, ModulePass, PassConfigError, PassInfo, Pipeline, PrimFuncPass,
    function_pass, module_pass, prim_func_pass,
)
from phasec.transform.pass_infra import Pass

T4 = TensorStructInfo((4,), "float32")


def make_module() -> IRModule:
    x = Var("x", T4)
    return IRModule({"main": Function([x], SeqExpr([], x), attrs={"global_symbol": "main"})})


def test_the_base_pass_cannot_run():
    with pytest.raises(NotImplementedError):
        Pass()(make_module())


def test_a_pass_class_without_pass_info_is_refused():
    class Undeclared(ModulePass):
        def transform_module(self, mod, ctx):
            return mod
    with pytest.raises(PassConfigError, match="Undeclared has no PassInfo: decorate it"):
        Undeclared()(make_module())


@pytest.mark.parametrize("base, method", [(ModulePass, "transform_module"),
                                          (FunctionPass, "transform_function"),
                                          (PrimFuncPass, "transform_function")])
def test_a_pass_class_without_its_method_fails_naming_it(base, method):
    forgetful = type("Forgetful", (base,), {"info": PassInfo("Forgetful", 0, ALL_PHASES)})
    mod = make_module()
    if base is PrimFuncPass:  # it needs a PrimFunc to call its method on
        a = tir.Buffer("A", (4,))
        i = tir.Var("i")
        mod = mod.update({"k": tir.PrimFunc([a], tir.For(i, 0, 4, "serial",
                                                         tir.BufferStore(a, a[i], (i,))))})
    with pytest.raises(PassError, match=f"Forgetful must define {method}"):
        forgetful()(mod)


def test_decorating_a_class_that_already_is_a_pass():
    @module_pass(phases="all", name="Mine")
    class Mine(ModulePass):
        def transform_module(self, mod, ctx):
            return mod
    assert issubclass(Mine, ModulePass) and Mine.info.name == "Mine"
    assert Mine()(make_module()).phase == Phase.INGESTION
    with pytest.raises(PassConfigError, match="Wrong is a FunctionPass, not a ModulePass"):
        @module_pass(phases="all")
        class Wrong(FunctionPass):
            def transform_module(self, mod, ctx):
                return mod


def test_info_is_not_an_option_name():
    with pytest.raises(PassConfigError, match="'info' is reserved for the PassInfo"):
        @module_pass(phases="all")
        class Clash:
            info: int = 0

            def transform_module(self, mod, ctx):
                return mod


def test_function_form_repr():
    @function_pass(phases="all", name="Keep")
    def keep(func, mod, ctx):
        return func
    assert repr(keep) == "<FunctionPass Keep>"


def test_a_failing_pass_called_inside_another_is_the_one_named():
    @module_pass(phases="all", name="Inner")
    def inner(mod, ctx):
        raise ValueError("inner broke")

    @module_pass(phases="all", name="Outer")
    def outer(mod, ctx):
        return inner(mod)
    with pytest.raises(PassError) as err:
        outer(make_module())
    assert err.value.pass_name == "Inner"
    assert str(err.value).startswith("Inner failed in phase ingestion: ValueError: inner broke")


def test_a_failing_pass_called_inside_a_function_pass_is_the_one_named():
    # the same through a function pass's per-function loop, which otherwise
    # names the function it failed on
    @module_pass(phases="all", name="Inner")
    def inner(mod, ctx):
        raise ValueError("inner broke")

    @function_pass(phases="all", name="PerFunction")
    def per_function(func, mod, ctx):
        inner(mod)
        return func
    with pytest.raises(PassError) as err:
        per_function(make_module())
    assert err.value.pass_name == "Inner"
    assert str(err.value).startswith("Inner failed in phase ingestion: ValueError: inner broke")


def test_a_prim_func_pass_in_function_form_runs_on_each_prim_func():
    a = tir.Buffer("A", (4,))
    kernel = tir.PrimFunc([a], tir.Evaluate(tir.IntImm(0, "int32")))
    mod = make_module().update({"kernel": kernel})

    @prim_func_pass(phases="all", name="Tag")
    def tag(func, mod, ctx):
        return func.with_attr("tag", "seen")
    out = tag(mod)
    assert out["kernel"].attrs["tag"] == "seen"
    assert out["main"] is mod["main"] and "tag" not in kernel.attrs


def test_pipeline_copy_and_repr():
    first = module_pass(lambda mod, ctx: mod, phases=Phase.OPTIMIZATION, name="First")
    second = module_pass(lambda mod, ctx: mod, phases="all", name="Second")
    pipeline = Pipeline([first], start_phase="optimization", name="mine")
    copy = pipeline.copy()
    assert copy is not pipeline and copy.passes == (first,)
    assert copy.start_phase == Phase.OPTIMIZATION and copy.name == "mine"
    copy.insert(Phase.OPTIMIZATION, [second])
    assert pipeline.passes == (first,)  # the copy is independent
    assert repr(copy) == "Pipeline('First,Second', start_phase=optimization)"

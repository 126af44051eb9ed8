"""Static validation where the phase walk is easiest to get wrong: a
misordered pass inside a nested Sequential, the context a Pipeline is
validated under, a required pass that is listed but skipped by opt_level,
and how a pass's declaration defaults apply.

(Found by mutation testing of the pass infrastructure,
bench/bench_core_mutation.py: each test kills mutants that survived.)
"""

from __future__ import annotations

import types
from functools import partial

import pytest

from phasec import PhaseError
from phasec.ir import Function, IRModule, Phase, SeqExpr, TensorStructInfo, Var

from phasec.transform import (
    REGISTRY, PassConfigError, PassContext, PassTrace, Pipeline, PrintIR, Sequential,
    function_pass, get_pass, module_pass, prim_func_pass, register_pass,
)

T4 = TensorStructInfo((4,), "float32")


def make_module() -> IRModule:
    x = Var("x", T4)
    return IRModule({"main": Function([x], SeqExpr([], x), attrs={"global_symbol": "main"})})


class Ran:
    """The names of the passes that ran, in order."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def pass_(self, name: str, **decl):
        @module_pass(name=name, **decl)
        def body(mod, ctx):
            self.names.append(name)
            return mod
        return body


@pytest.fixture
def ran():
    return Ran()


@pytest.fixture
def registry():
    with REGISTRY.scope() as reg:
        yield reg


def lift(ran: Ran, opt_level: int = 0):
    return ran.pass_("Lift", phases=Phase.INGESTION, transition_to=Phase.OPTIMIZATION,
                     opt_level=opt_level)


def test_misordered_pass_inside_a_nested_sequential_is_refused_statically(ran):
    inner = Sequential([ran.pass_("OptOnly", phases=Phase.OPTIMIZATION)], name="inner")
    outer = Sequential([ran.pass_("First", phases=Phase.INGESTION), inner], name="outer")
    with pytest.raises(PhaseError) as err:
        outer.validate(Phase.INGESTION)
    assert err.value.position == "2.1" and err.value.pass_name == "OptOnly"
    assert "OptOnly at position 2.1 cannot run" in str(err.value)
    assert "would be in ingestion" in str(err.value)
    with pytest.raises(PhaseError, match="position 2.1"):
        Pipeline([ran.pass_("First", phases=Phase.INGESTION), inner])
    with pytest.raises(PhaseError, match="position 2.1"):
        outer(make_module())
    assert ran.names == []  # refused before anything ran
    # no start phase suits the whole: First needs ingestion, OptOnly optimization
    assert outer.info.phases == frozenset()
    # the same inner Sequential after a transition is fine
    fixed = Sequential([Sequential([lift(ran)], name="a"), inner])
    assert fixed.validate(Phase.INGESTION) == Phase.OPTIMIZATION
    assert fixed.info.phases == {Phase.INGESTION}
    assert fixed.info.transition_to == Phase.OPTIMIZATION


def test_pipeline_validate_uses_the_context_it_is_given(ran):
    pipeline = Pipeline([ran.pass_("Early", phases="all", opt_level=2), lift(ran),
                         ran.pass_("Late", phases=Phase.OPTIMIZATION)])
    assert pipeline.validate() == Phase.OPTIMIZATION
    # a context that disables the transition makes the pipeline invalid ...
    with pytest.raises(PhaseError, match="Lift at position 2 is a transition pass.*"
                                         "cannot be disabled"):
        pipeline.validate(PassContext(disabled_pass=["Lift"]))
    # ... and one that only skips an ordinary pass does not
    assert pipeline.validate(PassContext(opt_level=0, disabled_pass=["Early"])) \
        == Phase.OPTIMIZATION
    # without a context nothing counts as skipped, whatever the current one says
    with PassContext(disabled_pass=["Lift"]):
        assert pipeline.validate() == Phase.OPTIMIZATION


def test_required_pass_listed_but_skipped_by_opt_level_still_runs_first(ran, registry):
    register_pass(ran.pass_("Prep", phases="all", opt_level=3))
    user = ran.pass_("User", phases="all", required=["Prep"])
    seq = Sequential([get_pass("Prep"), user])
    trace = PassTrace()
    with PassContext(opt_level=0, instruments=[trace]):
        seq(make_module())
    # the listed Prep is skipped (opt_level 3 > 0), so User's requirement runs it
    assert ran.names == ["Prep", "User"]
    steps = seq.plan(Phase.INGESTION, PassContext(opt_level=0))
    assert [(s.position, s.pass_.info.name, s.runs,
             s.required_by.name if s.required_by else None) for s in steps] == [
        ("1", "Prep", False, None), ("2", "Prep", True, "User"), ("2", "User", True, None)]
    assert trace.skipped() == [("Prep", "opt_level 3 is above the context's opt_level 0")]
    # at opt_level 3 the listed Prep runs, and it still holds for User
    ran.names.clear()
    with PassContext(opt_level=3):
        seq(make_module())
    assert ran.names == ["Prep", "User"]
    assert [s.required_by for s in seq.plan(Phase.INGESTION, PassContext(opt_level=3))] \
        == [None, None]


def test_declaration_defaults(ran):
    p = ran.pass_("Plain", phases="all")
    assert p.info.opt_level == 0 and p.info.verify_input is True
    assert p.info.transition_to is None and p.info.required == ()
    for decorator in (function_pass, prim_func_pass):
        info = decorator(lambda func, mod, ctx: func, phases="all", name="F").info
        assert info.opt_level == 0 and info.verify_input is True, decorator.__name__
    assert PrintIR().info.opt_level == 0 and PrintIR().info.verify_input is True
    # opt_level 0 passes run at the lowest context opt_level
    with PassContext(opt_level=0):
        Sequential([p])(make_module())
    assert ran.names == ["Plain"]


def test_decorators_refuse_what_is_neither_a_function_nor_a_class():
    def body(mod, ctx):
        return mod
    # a module has a __name__ but cannot be called; a partial can be called
    # but has no __name__
    for target, kind in ((types.ModuleType("mine"), "module"), (partial(body), "partial")):
        with pytest.raises(PassConfigError, match=f"decorates a function or a class, not {kind}"):
            module_pass(phases="all")(target)


def test_print_ir_runs_at_every_opt_level(capsys):
    with PassContext(opt_level=0):
        Sequential([PrintIR(header="here")])(make_module())
    assert "# PrintIR here (phase ingestion)" in capsys.readouterr().err


def test_a_pipeline_nested_as_a_sequential_runs_at_every_opt_level(ran):
    pipeline = Pipeline([lift(ran), ran.pass_("Opt", phases=Phase.OPTIMIZATION)])
    nested = pipeline.to_sequential()
    assert nested.info.opt_level == 0
    with PassContext(opt_level=0):
        out = Sequential([nested])(make_module())
    assert ran.names == ["Lift", "Opt"] and out.phase == Phase.OPTIMIZATION


def test_to_sequential_keeps_the_name_and_takes_an_opt_level(ran):
    pipeline = Pipeline([lift(ran), ran.pass_("Opt", phases=Phase.OPTIMIZATION)], name="mine")
    assert pipeline.to_sequential().name == "mine"
    nested = pipeline.to_sequential(opt_level=2)
    assert nested.info.opt_level == 2
    with PassContext(opt_level=1):
        Sequential([nested])(make_module())
    assert ran.names == ["Lift"]  # the transition runs whatever the opt_level; Opt does not
    bad = Pipeline([ran.pass_("Opt", phases=Phase.OPTIMIZATION)], start_phase="optimization",
                   name="mine")
    with pytest.raises(PhaseError, match="in Sequential 'mine'"):
        bad.to_sequential().validate(Phase.INGESTION)

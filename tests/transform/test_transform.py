"""The pass protocol: phase checks, transitions, verification, errors,
Sequential validation and skipping, required passes, pipeline windows.

Passes here are test-local dummies; the "every registered pass" tests
iterate the registry, so they cover the real passes once they exist.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from phasec import PassError, PhaseError, WellFormedError
from phasec.ir import (
    BindingBlock, Function, IRModule, Phase, SeqExpr, TensorStructInfo, Var, VarBinding,
    structural_hash, tir,
)
from phasec.transform import (
    REGISTRY, PassConfigError, PassContext, PassInfo, PassTrace, Pipeline, PrintIR, Sequential,
    function_pass, get_pass, module_pass, pass_entries, prim_func_pass, register_pass,
    verification,
)

T4 = TensorStructInfo((4,), "float32")


# -- modules ----------------------------------------------------------------------
def make_function(name: str, phase: Phase = Phase.INGESTION) -> Function:
    x = Var("x", T4)
    return Function([x], SeqExpr([], x), attrs={"global_symbol": name},
                    is_pure=phase < Phase.BUILD)


def make_prim_func() -> tir.PrimFunc:
    a, b = tir.Buffer("A", (4,)), tir.Buffer("B", (4,))
    i = tir.Var("i")
    return tir.PrimFunc([a, b], tir.For(i, 0, 4, "serial", tir.BufferStore(b, a[i], (i,))))


def make_module(phase: Phase = Phase.INGESTION) -> IRModule:
    """A small well-formed module valid in ``phase``."""
    mod = IRModule({"main": make_function("main", phase), "aux": make_function("aux", phase)})
    return mod.with_phase(phase)


def nested_module() -> IRModule:
    """Well-formed in ingestion; a nested function breaks optimization's rule."""
    x, y = Var("x", T4), Var("y", T4)
    inner = Function([y], SeqExpr([], y))
    f = Var("f", inner.struct_info)
    main = Function([x], SeqExpr([BindingBlock([VarBinding(f, inner)])], x),
                    attrs={"global_symbol": "main"})
    return IRModule({"main": main})


@pytest.fixture
def registry():
    """Registrations made by a test are undone after it."""
    with REGISTRY.scope() as reg:
        yield reg


class FakeVerifier:
    """Counts calls; flags modules whose attrs say ``broken`` as ill-formed."""

    def __init__(self) -> None:
        self.calls: list[tuple[IRModule, Phase, str | None]] = []

    def __call__(self, mod, phase=None, pass_name=None):
        self.calls.append((mod, phase, pass_name))
        if mod.attrs.get("broken"):
            raise WellFormedError(f"broken module after {pass_name}", ["diag"], pass_name)


@pytest.fixture
def fake_verifier(monkeypatch):
    fake = FakeVerifier()
    monkeypatch.setattr(verification, "load_verifier", lambda: fake)
    verification.forget_verified()
    yield fake
    verification.forget_verified()


# -- dummy passes -----------------------------------------------------------------
@module_pass(phases=Phase.INGESTION, transition_to=Phase.OPTIMIZATION, name="FakeLift")
def fake_lift(mod, ctx):
    """Claims ingestion -> optimization but lifts nothing."""
    return mod


@module_pass(opt_level=1, phases=Phase.OPTIMIZATION, transition_to=Phase.LOWERING,
             name="FakeLegalize")
def fake_legalize(mod, ctx):
    return mod


@module_pass(opt_level=1, phases=[Phase.INGESTION, Phase.OPTIMIZATION], name="Rename")
def rename(mod, ctx):
    """Rebuilds every function (a new module with new function objects)."""
    return mod.with_functions({k: dataclasses.replace(f) for k, f in mod.functions.items()})


@module_pass(opt_level=3, phases=Phase.OPTIMIZATION, name="Expensive")
def expensive(mod, ctx):
    return mod


# -- single pass calls ------------------------------------------------------------
def test_wrong_phase_names_pass_phases_and_what_to_run():
    mod = make_module(Phase.INGESTION)
    with pytest.raises(PhaseError) as err:
        fake_legalize(mod)
    msg = str(err.value)
    assert msg == ("FakeLegalize expects phase optimization, but the module is in ingestion: "
                   "run LambdaLifting first")
    assert err.value.pass_name == "FakeLegalize"


def test_wrong_phase_several_transitions_and_backwards():
    needs_lowering = module_pass(lambda mod, ctx: mod, phases=Phase.LOWERING, name="Low")
    with pytest.raises(PhaseError, match="run LambdaLifting, then LegalizeOps first"):
        needs_lowering(make_module(Phase.INGESTION))
    with pytest.raises(PhaseError) as err:
        rename(make_module(Phase.LOWERING))
    assert "Rename expects phase ingestion or optimization, but the module is in lowering" \
        in str(err.value)
    assert "phases only move forward, so Rename must run before LegalizeOps" in str(err.value)


def test_transition_sets_phase_and_input_untouched(fake_verifier):
    mod = make_module()
    before = structural_hash(mod)
    funcs = dict(mod.functions)
    out = fake_lift(mod)
    assert out.phase == Phase.OPTIMIZATION
    assert mod.phase == Phase.INGESTION
    assert structural_hash(mod) == before
    assert all(mod.functions[k] is f for k, f in funcs.items())


def test_body_may_not_set_phase(fake_verifier):
    @module_pass(phases=Phase.INGESTION, name="Sneaky")
    def sneaky(mod, ctx):
        return mod.with_phase(Phase.OPTIMIZATION)

    with pytest.raises(PassError, match="pass bodies never set the phase"):
        sneaky(make_module())


def test_exception_is_wrapped_in_pass_error(fake_verifier):
    @module_pass(phases="all", name="Boom")
    def boom(mod, ctx):
        raise KeyError("missing thing")

    mod = make_module(Phase.OPTIMIZATION)
    before = structural_hash(mod)
    with pytest.raises(PassError) as err:
        boom(mod)
    assert err.value.pass_name == "Boom"
    assert err.value.phase == Phase.OPTIMIZATION
    assert isinstance(err.value.__cause__, KeyError)
    assert "Boom failed in phase optimization: KeyError" in str(err.value)
    assert structural_hash(mod) == before


def test_bad_return_and_bad_argument(fake_verifier):
    @module_pass(phases="all", name="ReturnsNone")
    def returns_none(mod, ctx):
        return None

    with pytest.raises(PassError, match="returned NoneType instead of an IRModule"):
        returns_none(make_module())
    with pytest.raises(PassError, match="must be called on an IRModule, not str"):
        returns_none("not a module")


def test_function_pass_visits_relax_functions_only(fake_verifier):
    seen = []

    @function_pass(phases="all", name="Visit")
    def visit(func, mod, ctx):
        seen.append(func.attrs.get("global_symbol"))
        return func

    external = make_function("ext").with_attr("Codegen", "cutlass")
    mod = make_module().update({"ext": external, "kernel": make_prim_func()})
    assert visit(mod) is mod  # nothing changed: the same module
    assert sorted(seen) == ["aux", "main"]


def test_function_pass_errors_name_the_function(fake_verifier):
    @function_pass(phases="all", name="Picky")
    def picky(func, mod, ctx):
        if func.attrs["global_symbol"] == "aux":
            raise ValueError("cannot handle")
        return func

    with pytest.raises(PassError, match="Picky failed on function 'aux' in phase ingestion"):
        picky(make_module())

    @function_pass(phases="all", name="WrongType")
    def wrong(func, mod, ctx):
        return 3

    with pytest.raises(PassError, match="returned int, not a Function"):
        wrong(make_module())


def test_prim_func_pass_and_class_form(fake_verifier):
    @prim_func_pass(phases=Phase.LOWERING, name="TagKernels")
    class TagKernels:
        tag: str = "x"

        def transform_function(self, func, mod, ctx):
            return func.with_attr("tag", self.tag)

    mod = make_module(Phase.LOWERING).update({"kernel": make_prim_func()})
    out = TagKernels(tag="fast")(mod)
    assert out["kernel"].attrs["tag"] == "fast"
    assert out["main"] is mod["main"]
    assert "tag" not in mod["kernel"].attrs


def test_class_form_is_a_frozen_value():
    @module_pass(opt_level=2, phases=Phase.OPTIMIZATION)
    class Fuse:
        """Fuse things."""

        fuse_opt_level: int = -1

        def transform_module(self, mod, ctx):
            return mod

    p = Fuse(fuse_opt_level=2)
    assert p == Fuse(fuse_opt_level=2) and p != Fuse()
    assert hash(p) == hash(Fuse(fuse_opt_level=2))
    assert repr(p).endswith("Fuse(fuse_opt_level=2)")
    assert p.info == PassInfo("Fuse", 2, frozenset({Phase.OPTIMIZATION}))
    assert p.options() == {"fuse_opt_level": 2}
    assert Fuse.__doc__ == "Fuse things."
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.fuse_opt_level = 3


def test_tvm_style_class_with_init():
    @module_pass(phases="all", name="Scale")
    class Scale:
        def __init__(self, factor: int = 2):
            self.factor = factor

        def transform_module(self, mod, ctx):
            return mod

    assert Scale(factor=3).options() == {"factor": 3}
    assert Scale(3).spec() == "Scale{factor=3}"


@pytest.mark.parametrize("kwargs, match", [
    ({}, "must declare the phases it accepts"),
    ({"phases": []}, "at least one phase"),
    ({"phases": Phase.LOWERING, "transition_to": Phase.OPTIMIZATION}, "only move forward"),
    ({"phases": "nonsense"}, "invalid phase"),
    ({"phases": "all", "name": "has space"}, "invalid pass name"),
    ({"phases": "all", "opt_level": -1}, "opt_level"),
])
def test_bad_declarations(kwargs, match):
    def body(mod, ctx):
        return mod

    with pytest.raises(PassConfigError, match=match):
        module_pass(body, **kwargs)
    with pytest.raises(PassConfigError, match="lambda needs name"):
        module_pass(lambda mod, ctx: mod, phases="all")


def test_bad_pass_classes():
    with pytest.raises(PassConfigError, match="must define transform_module"):
        module_pass(phases="all")(type("NoBody", (), {}))

    with pytest.raises(PassConfigError, match="defines __call__"):
        @module_pass(phases="all")
        class Calls:
            def __call__(self, mod):
                return mod

            def transform_module(self, mod, ctx):
                return mod

    with pytest.raises(PassConfigError, match="frozen dataclass"):
        @module_pass(phases="all")
        @dataclasses.dataclass
        class Mutable:
            x: int = 0

            def transform_module(self, mod, ctx):
                return mod


def test_instrument_should_run_cannot_skip_transition(fake_verifier):
    from phasec.transform import PassInstrument

    class SkipAll(PassInstrument):
        def should_run(self, mod, info):
            return False

    trace = PassTrace()
    mod = make_module()
    with PassContext(instruments=[SkipAll(), trace]):
        assert rename(mod) is mod
        with pytest.raises(PhaseError, match="transition passes cannot be skipped"):
            fake_lift(mod)
    assert trace.skipped() == [("Rename", "SkipAll.should_run returned False")]
    assert fake_verifier.calls == []


# -- verification -----------------------------------------------------------------
def test_verify_each_names_the_culprit_real_verifier():
    verification.forget_verified()
    mod = nested_module()
    before = structural_hash(mod)
    with PassContext(verify="each"):
        with pytest.raises(WellFormedError) as err:
            fake_lift(mod)
    assert err.value.pass_name == "FakeLift"
    assert "FakeLift" in str(err.value)
    assert [d.code for d in err.value.diagnostics] == ["PH101"]
    assert structural_hash(mod) == before and mod.phase == Phase.INGESTION
    with PassContext(verify="off"):
        assert fake_lift(mod).phase == Phase.OPTIMIZATION  # not caught when off


def test_verify_each_in_sequential_names_culprit_not_first_pass():
    verification.forget_verified()
    seq = Sequential([rename, fake_lift, fake_legalize])
    with pytest.raises(WellFormedError) as err:
        seq(nested_module())
    assert err.value.pass_name == "FakeLift"


def test_verify_modes(fake_verifier):
    seq = Sequential([rename, fake_lift, fake_legalize])
    with PassContext(verify="off"):
        seq(make_module())
    assert fake_verifier.calls == []
    with PassContext(verify="transitions"):
        seq(make_module())
    assert [c[2] for c in fake_verifier.calls] == ["FakeLift", "FakeLegalize"]
    fake_verifier.calls.clear()
    with PassContext(verify="each"):
        seq(make_module())
    # the fresh input once (blaming nobody), then every result
    assert [c[2] for c in fake_verifier.calls] == [None, "Rename", "FakeLift", "FakeLegalize"]
    assert [c[1] for c in fake_verifier.calls] == [Phase.INGESTION, Phase.INGESTION,
                                                   Phase.OPTIMIZATION, Phase.LOWERING]


def test_ill_formed_input_is_not_blamed_on_the_pass(fake_verifier):
    mod = make_module().with_attr("broken", True)
    with pytest.raises(WellFormedError) as err:
        rename(mod)
    assert err.value.pass_name is None
    assert "not to blame" in str(err.value)


def test_violation_produced_by_pass(fake_verifier):
    @module_pass(phases="all", name="Breaker")
    def breaker(mod, ctx):
        return mod.with_attr("broken", True)

    with pytest.raises(WellFormedError) as err:
        breaker(make_module())
    assert err.value.pass_name == "Breaker"
    assert err.value.diagnostics == ["diag"]


def test_verified_modules_are_not_verified_twice(fake_verifier):
    @module_pass(phases="all", name="Same")
    def same(mod, ctx):
        return mod

    mod = make_module()
    Sequential([same, same, same])(mod)
    assert len(fake_verifier.calls) == 1  # the input; identical results are cached


# -- Sequential -------------------------------------------------------------------
class Counter:
    def __init__(self):
        self.names = []


def counting(name, counter, **decl):
    @module_pass(name=name, **decl)
    def body(mod, ctx):
        counter.names.append(name)
        return mod
    return body


def test_misordered_sequential_rejected_before_anything_runs(fake_verifier):
    c = Counter()
    a = counting("A", c, phases=Phase.INGESTION)
    seq = Sequential([a, fake_lift, fake_legalize, counting("Late", c, phases=Phase.OPTIMIZATION)],
                     name="mine")
    trace = PassTrace()
    with PassContext(instruments=[trace]):
        with pytest.raises(PhaseError) as err:
            seq(make_module())
    assert c.names == [] and trace.entries == [] and fake_verifier.calls == []
    msg = str(err.value)
    assert "misordered passes in Sequential 'mine': Late at position 4 cannot run" in msg
    assert "Late expects phase optimization, but the module would be in lowering" in msg
    assert "after FakeLegalize at position 3" in msg
    assert "must run before LegalizeOps" in msg
    assert err.value.position == "4" and err.value.pass_name == "Late"


def test_sequential_checks_the_input_phase(fake_verifier):
    with pytest.raises(PhaseError, match="position 1.*FakeLegalize expects phase optimization"):
        Sequential([fake_legalize])(make_module())


def test_transitions_never_skipped_by_opt_level(fake_verifier):
    heavy_lift = module_pass(lambda mod, ctx: mod, opt_level=4, phases=Phase.INGESTION,
                             transition_to=Phase.OPTIMIZATION, name="HeavyLift")
    trace = PassTrace()
    with PassContext(opt_level=0, instruments=[trace]):
        out = Sequential([rename, heavy_lift, fake_legalize])(make_module())
    assert out.phase == Phase.LOWERING
    assert trace.ran() == ["HeavyLift", "FakeLegalize"]
    assert trace.skipped() == [
        ("Rename", "opt_level 1 is above the context's opt_level 0")]


def test_disabling_a_transition_is_a_validation_error(fake_verifier):
    c = Counter()
    seq = Sequential([counting("First", c, phases=Phase.INGESTION), fake_lift])
    with PassContext(disabled_pass=["FakeLift"]):
        with pytest.raises(PhaseError, match="FakeLift at position 2 is a transition pass.*"
                                             "cannot be disabled"):
            seq(make_module())
    assert c.names == []


def test_disabled_pass_and_opt_level_as_in_tvm(fake_verifier):
    c = Counter()
    p1 = counting("P1", c, phases="all", opt_level=1)
    p2 = counting("P2", c, phases="all", opt_level=2)
    p3 = counting("P3", c, phases="all", opt_level=3)
    seq = Sequential([p1, p2, p3])
    with PassContext(opt_level=2):
        seq(make_module())
    assert c.names == ["P1", "P2"]
    c.names.clear()
    trace = PassTrace()
    with PassContext(opt_level=3, disabled_pass=["P2"], instruments=[trace]):
        seq(make_module())
    assert c.names == ["P1", "P3"]
    assert trace.skipped() == [("P2", "disabled by PassContext(disabled_pass=...)")]
    c.names.clear()
    with PassContext(opt_level=0, required_pass=["P3"]):
        seq(make_module())
    assert c.names == ["P3"]
    c.names.clear()
    p3(make_module())  # called directly, opt_level does not apply (as in TVM)
    assert c.names == ["P3"]


def test_nested_sequential_positions_and_opt_level(fake_verifier):
    c = Counter()
    inner = Sequential([counting("I1", c, phases="all"), fake_lift], name="inner", opt_level=3)
    outer = Sequential([counting("O1", c, phases="all"), inner, fake_legalize])
    with PassContext(opt_level=2):
        out = outer(make_module())
    # the inner Sequential is above opt_level: its passes are skipped but the transition runs
    assert c.names == ["O1"] and out.phase == Phase.LOWERING
    steps = outer.plan(Phase.INGESTION, PassContext(opt_level=2))
    assert [(s.position, s.pass_.info.name, s.runs) for s in steps] == [
        ("1", "O1", True), ("2.1", "I1", False), ("2.2", "FakeLift", True),
        ("3", "FakeLegalize", True)]
    assert outer.info.phases == {Phase.INGESTION}
    assert outer.info.transition_to == Phase.LOWERING
    assert outer.spec() == "O1,I1,FakeLift,FakeLegalize"


def test_sequential_info_phases():
    assert Sequential([rename]).info.phases == {Phase.INGESTION, Phase.OPTIMIZATION}
    assert Sequential([rename]).info.transition_to is None
    assert Sequential([]).info.phases == set(Phase)
    assert Sequential([fake_legalize, rename]).info.phases == frozenset()


def test_sequential_rejects_non_passes():
    with pytest.raises(PassConfigError, match="item 2 is int"):
        Sequential([rename, 3])
    with pytest.raises(PassConfigError, match="takes a list of passes"):
        Sequential(3)
    with pytest.raises(PassConfigError, match="a pass class: instantiate it"):
        Sequential([PrintIR])
    assert Sequential(rename).passes == (rename,)


def test_required_passes_run_first_and_are_traced(registry, fake_verifier):
    c = Counter()
    register_pass(counting("Prep", c, phases="all"))
    register_pass(counting("Canon", c, phases="all", required=["Prep"]))
    main = counting("Main", c, phases=Phase.OPTIMIZATION, required=["Canon"])
    trace = PassTrace()
    with PassContext(instruments=[trace]):
        Sequential([fake_lift, main])(make_module())
    assert c.names == ["Prep", "Canon", "Main"]
    by_name = {e.name: e for e in trace.entries}
    assert by_name["Prep"].required_by == "Canon"
    assert by_name["Canon"].required_by == "Main"
    assert by_name["Main"].required_by is None
    assert "required by Main" in trace.render()
    c.names.clear()
    inner = Sequential([counting("Body", c, phases="all")], name="inner", required=["Prep"])
    Sequential([inner])(make_module())
    assert c.names == ["Prep", "Body"]


def test_required_pass_is_rerun_only_when_something_came_between(registry, fake_verifier):
    c = Counter()
    register_pass(counting("Prep", c, phases="all"))
    other = counting("Other", c, phases="all")
    first = counting("First", c, phases="all", required=["Prep"])
    Sequential([get_pass("Prep"), first])(make_module())
    assert c.names == ["Prep", "First"]  # still in effect: not run again
    c.names.clear()
    Sequential([get_pass("Prep"), other, first])(make_module())
    assert c.names == ["Prep", "Other", "Prep", "First"]  # Other may have undone it


def test_required_pass_problems(registry):
    c = Counter()
    missing = counting("NeedsGhost", c, phases="all", required=["Ghost"])
    with pytest.raises(PassConfigError, match="NeedsGhost requires 'Ghost'.*unknown pass"):
        Sequential([missing]).plan()
    register_pass(counting("CycA", c, phases="all", required=["CycB"]))
    register_pass(counting("CycB", c, phases="all", required=["CycA"]))
    with pytest.raises(PassConfigError, match="cycle: CycA -> CycB -> CycA"):
        Sequential([get_pass("CycA")]).plan()
    register_pass(counting("LowOnly", c, phases=Phase.LOWERING))
    needs_low = counting("NeedsLow", c, phases=Phase.INGESTION, required=["LowOnly"])
    with pytest.raises(PhaseError, match="NeedsLow requires LowOnly, which cannot run there: LowOnly expects phase lowering"):
        Sequential([needs_low]).plan()


# -- every registered pass ----------------------------------------------------------
def _sample_module(phase: Phase) -> IRModule:
    return make_module(phase).update({"kernel": make_prim_func()}) if phase >= Phase.LOWERING \
        else make_module(phase)


@pytest.fixture
def printable(monkeypatch):
    """PrintIR and friends need the printer; stub it if it is not there yet."""
    try:
        import phasec.script.printer  # noqa: F401
    except ImportError:
        monkeypatch.setattr(IRModule, "script", lambda self: repr(self))


@pytest.mark.parametrize("entry", pass_entries(), ids=lambda e: e.name)
def test_every_registered_pass_rejects_wrong_phases(entry):
    p = entry.create()
    wrong = [ph for ph in Phase if ph not in p.info.phases]
    for phase in wrong:
        mod = make_module(phase)
        with pytest.raises(PhaseError) as err:
            p(mod)
        msg = str(err.value)
        assert p.info.name in msg and phase.label in msg
        for accepted in p.info.phases:
            assert accepted.label in msg


@pytest.mark.parametrize("entry", pass_entries(), ids=lambda e: e.name)
def test_no_registered_pass_modifies_its_input(entry, printable, capsys):
    p = entry.create()
    for phase in sorted(p.info.phases):
        mod = _sample_module(phase)
        before = structural_hash(mod)
        funcs = dict(mod.functions)
        attrs = dict(mod.attrs)
        with PassContext(verify="off"):
            try:
                p(mod)
            except (PassError, PhaseError):
                pass  # the property is about the input, whatever the pass thinks of it
        assert structural_hash(mod) == before, f"{entry.name} modified its input in {phase}"
        assert dict(mod.attrs) == attrs
        assert all(mod.functions[k] is f for k, f in funcs.items())


def test_registry_contains_the_builtin_print_ir():
    assert get_pass("PrintIR").info.phases == set(Phase)


def test_importing_transform_does_not_import_passes():
    code = ("import sys, phasec.transform; "
            "assert 'phasec.passes' not in sys.modules, 'passes imported'; "
            "assert 'phasec.verifier' not in sys.modules, 'verifier imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


# -- pipelines with phase windows --------------------------------------------------------
def pipeline():
    return Pipeline([rename, fake_lift, expensive, fake_legalize], name="test")


def test_pipeline_windows():
    assert pipeline().windows() == {Phase.INGESTION: (0, 1), Phase.OPTIMIZATION: (2, 3),
                                    Phase.LOWERING: (4, 4)}


def test_pipeline_insert_start_and_end(fake_verifier):
    c = Counter()
    pl = pipeline()
    pl.insert(Phase.OPTIMIZATION, passes=[counting("OptEnd", c, phases=Phase.OPTIMIZATION)])
    pl.insert(Phase.OPTIMIZATION, passes=[counting("OptStart", c, phases="all")], at="start")
    pl.insert(Phase.LOWERING, passes=[counting("LowEnd", c, phases=Phase.LOWERING)], at="end")
    assert [p.info.name for p in pl.passes] == [
        "Rename", "FakeLift", "OptStart", "Expensive", "OptEnd", "FakeLegalize", "LowEnd"]
    with PassContext(opt_level=3):
        out = pl(make_module())
    assert out.phase == Phase.LOWERING and c.names == ["OptStart", "OptEnd", "LowEnd"]


def test_pipeline_rejects_misfits():
    c = Counter()
    pl = pipeline()
    before = pl.passes
    with pytest.raises(PhaseError, match="accepts optimization"):
        pl.insert(Phase.LOWERING, passes=[counting("OptOnly", c, phases=Phase.OPTIMIZATION)])
    with pytest.raises(PhaseError, match="transition pass"):
        pl.insert(Phase.OPTIMIZATION, passes=[fake_legalize])
    with pytest.raises(PhaseError, match="never has the module in phase build"):
        pl.insert(Phase.BUILD, passes=[counting("B", c, phases="all")])
    with pytest.raises(PassConfigError, match="expected 'start' or 'end'"):
        pl.insert(Phase.LOWERING, passes=[], at="middle")
    assert pl.passes == before


def test_pipeline_rejects_required_misfit(registry):
    c = Counter()
    register_pass(counting("LowOnly2", c, phases=Phase.LOWERING))
    pl = pipeline()
    with pytest.raises(PhaseError, match="LowOnly2"):
        pl.insert(Phase.OPTIMIZATION,
                  passes=[counting("Needs", c, phases="all", required=["LowOnly2"])])
    assert len(pl.passes) == 4


def test_pipeline_constructor_validates():
    with pytest.raises(PhaseError, match="misordered passes.*FakeLegalize at position 1"):
        Pipeline([fake_legalize, fake_lift])


def test_violation_inherited_by_a_repair_pass_is_blamed_on_its_input():
    # A pass declared verify_input=False is not checked on the way in; when its
    # output breaks a rule its input already broke, the input is to blame.
    @module_pass(phases="all", name="LeaveAsIs", verify_input=False)
    def leave_as_is(mod, ctx):
        return mod

    verification.forget_verified()
    broken = nested_module().with_phase(Phase.OPTIMIZATION)  # PH101 already
    with pytest.raises(WellFormedError) as err:
        leave_as_is(broken)
    assert err.value.pass_name is None
    assert "given to LeaveAsIs" in str(err.value)

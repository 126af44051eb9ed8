"""check_pass catches planted faults in passes written with the public decorators."""

import pytest

import phasec
from phasec import transform as T
from phasec.ir import Call, Op, Phase
from phasec.ir.visitor import ExprMutator
from phasec.testing import CheckPassReport, PassCheckFailure, check_pass

MAX = 100  # examples per phase: each fault is found within a few dozen


# -- fault 1: crashes on modules with more than one function ----------------------

@T.module_pass(phases=[Phase.INGESTION, Phase.OPTIMIZATION], name="CrashOnManyFunctions")
def crash_on_many_functions(mod, ctx):
    if len(mod.functions) > 1:
        raise RuntimeError("this pass only handles single-function modules")
    return mod


# -- fault 2: claims the 0 -> 1 transition but leaves nested functions -------------

@T.module_pass(phases=Phase.INGESTION, transition_to=Phase.OPTIMIZATION, name="FakeLambdaLifting")
def fake_lambda_lifting(mod, ctx):
    return mod


# -- fault 3: rewrites multiply into add --------------------------------------------

class _MultiplyToAdd(ExprMutator):
    def visit_call_(self, call):
        call = super().visit_call_(call)
        if isinstance(call.op, Op) and call.op.name == "relax.multiply":
            return Call(Op("relax.add"), call.args, call.attrs, call.sinfo_args,
                        struct_info=call.struct_info, span=call.span)
        return call


@T.function_pass(phases=[Phase.INGESTION, Phase.OPTIMIZATION], name="MultiplyToAdd")
def multiply_to_add(func, mod, ctx):
    return _MultiplyToAdd().visit_expr(func)


def failure_of(p, **kw):
    # Derandomized: the assertions below are about how far hypothesis shrinks,
    # which must not depend on the run's random seed.
    kw.setdefault("derandomize", True)
    with pytest.raises(PassCheckFailure) as info:
        check_pass(p, max_examples=MAX, **kw)
    return info.value


def test_catches_crash_on_modules_with_several_functions():
    # a fault of no operator: the probe (tested in test_check_pass_steering) would
    # only cost time here
    err = failure_of(crash_on_many_functions, probe=False)
    assert err.kind == "crash"
    assert err.phase == Phase.INGESTION
    assert len(err.module.functions) == 2  # the minimal reproducer: main and one helper
    report = str(err)
    assert "CrashOnManyFunctions" in report
    assert "RuntimeError: this pass only handles single-function modules" in report
    assert "def main(" in report and "@I.ir_module" in report
    assert "Inputs of main:" in report and "np.array(" in report
    # the reproducer is real: parsing it and running the pass crashes again
    with pytest.raises(phasec.PassError):
        crash_on_many_functions(phasec.parse(err.module.script()))


def test_catches_fake_transition_leaving_nested_functions():
    err = failure_of(fake_lambda_lifting, probe=False)  # no operator involved either
    assert err.kind == "invariant"
    assert err.output.phase == Phase.OPTIMIZATION
    assert "PH101" in str(err) and "nested function" in str(err)
    assert "        @R.function" in err.module.script()  # a nested function
    assert list(err.module.functions) == ["main"]  # shrunk: one function,
    assert err.module.script().count(" = ") <= 12  # a closure or a small recursive loop


def test_catches_multiply_rewritten_into_add():
    err = failure_of(multiply_to_add)
    assert err.kind == "results"
    text = err.module.script()
    assert "R.multiply(" in text and text.count(" = ") <= 2  # minimal: one multiply
    assert "R.add(" in err.output.script()
    assert "the results changed" in str(err)
    before = phasec.interp.run(err.module, *err.inputs)
    after = phasec.interp.run(err.output, *err.inputs)
    assert not (before == after).all()


def test_a_correct_pass_passes():
    @T.function_pass(phases=[Phase.INGESTION, Phase.OPTIMIZATION], name="Identity")
    def identity(func, mod, ctx):
        return func

    report = check_pass(identity, max_examples=20)
    assert isinstance(report, CheckPassReport)
    assert report.phases == [Phase.INGESTION, Phase.OPTIMIZATION]
    assert all(n > 0 for n in report.examples.values())
    assert "no failure" in str(report)


def test_registered_passes_by_name_and_phase_selection():
    report = check_pass("DeadCodeElimination", max_examples=10)
    assert report.phases == [Phase.OPTIMIZATION]
    report = check_pass("LegalizeOps", max_examples=5, module_options={"max_bindings": 3})
    assert report.phases == [Phase.OPTIMIZATION]
    with pytest.raises(ValueError, match="does not accept phase"):
        check_pass("DeadCodeElimination", phases=[Phase.LOWERING])
    with pytest.raises(TypeError, match="check_pass takes a pass"):
        check_pass(42)


def test_lowering_phase_pass_is_checked_on_lowered_modules():
    seen = []

    @T.module_pass(phases=Phase.LOWERING, name="WatchLowering")
    def watch(mod, ctx):
        seen.append(mod.phase)
        return mod

    check_pass(watch, max_examples=5, module_options={"max_bindings": 3})
    assert seen and set(seen) == {Phase.LOWERING}

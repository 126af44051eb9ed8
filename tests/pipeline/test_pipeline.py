"""The default pipeline (phasec.pipeline.default_pipeline) and phasec.build.

Static validation and phase windows, user passes inserted into windows,
required passes run once, modules entering in every phase, the context build
runs in, and small end-to-end builds compared with the reference
interpreter (the bundled example models are in test_examples_e2e.py).
"""

from __future__ import annotations

import numpy as np
import pytest

import phasec
from phasec import PhaseError, parse
from phasec.backend.vm import Executable, VirtualMachine
from phasec.interp import run as interpret
from phasec.ir import IRModule, Phase, structural_equal
from phasec.pipeline import build, default_pipeline, lower, pipeline_from, run_pipeline
from phasec.transform import (
    PassConfigError, PassContext, PassTrace, Pipeline, get_pass, module_pass, parse_pipeline,
)

SMALL = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), dtype="float32"), w: R.Tensor((8, 8), dtype="float32"),
             b: R.Tensor((8,), dtype="float32")) -> R.Tensor((4, 8), dtype="float32"):
        with R.dataflow():
            y = R.matmul(x, w)
            z = R.nn.relu(R.add(y, b))
            c = R.add(R.const(1.0, "float32"), R.const(2.0, "float32"))
            out = R.multiply(z, c)
            R.output(out)
        return out
"""

ALL_NAMES = ("Normalize", "LambdaLifting", "ConvertToDataflow", "CanonicalizeBindings",
             "FoldConstant", "FuseQDQMatmul", "BatchTakenMatmuls", "EliminateCommonSubexpr",
             "DeadCodeElimination", "FuseOps",
             "ToNonDataflow", "LegalizeOps", "PackConstantWeights", "RemovePurityChecking",
             "CallTIRRewrite", "StaticPlanBlockMemory", "VMBuiltinLower")


def small_inputs():
    rng = np.random.default_rng(1)
    return [rng.standard_normal((4, 8)).astype("float32"),
            (rng.standard_normal((8, 8)) / np.sqrt(8)).astype("float32"),
            rng.standard_normal(8).astype("float32")]


@pytest.fixture(scope="module")
def small():
    return parse(SMALL)


def names(pipeline: Pipeline) -> list[str]:
    return [p.info.name for p in pipeline.passes]


# ---------------------------------------------------------------------------
# The pipeline, statically
# ---------------------------------------------------------------------------

def test_default_pipeline_validates_to_build():
    pipeline = default_pipeline()
    assert isinstance(pipeline, Pipeline)
    assert pipeline.start_phase == Phase.INGESTION
    assert pipeline.validate() == Phase.BUILD
    assert names(pipeline) == [n for n in ALL_NAMES if n != "EliminateCommonSubexpr"]
    # The phase windows: one per phase, split by the three transitions.
    windows = pipeline.windows()
    assert list(windows) == list(Phase)
    by_phase = {ph: names(pipeline)[s:e] for ph, (s, e) in windows.items()}
    assert by_phase[Phase.INGESTION] == ["Normalize"]
    assert by_phase[Phase.OPTIMIZATION][0] == "ConvertToDataflow"
    assert by_phase[Phase.OPTIMIZATION][-1] == "ToNonDataflow"
    assert by_phase[Phase.LOWERING] == ["PackConstantWeights", "RemovePurityChecking",
                                        "CallTIRRewrite", "StaticPlanBlockMemory"]
    assert by_phase[Phase.BUILD] == []


@pytest.mark.parametrize("opt_level", [0, 1, 2, 3])
def test_default_pipeline_by_opt_level(opt_level):
    pipeline = default_pipeline(opt_level)
    assert pipeline.validate() == Phase.BUILD
    assert f"FuseOps{{fuse_opt_level={opt_level}}}" in pipeline.spec()
    for p in pipeline.passes:  # nothing above the level, transitions always in
        assert p.info.opt_level <= opt_level or p.info.is_transition
    assert ("EliminateCommonSubexpr" in names(pipeline)) == (opt_level >= 3)
    assert ("DeadCodeElimination" in names(pipeline)) == (opt_level >= 1)
    # The spec round-trips through the textual pipeline parser.
    assert parse_pipeline(pipeline.spec()).spec() == pipeline.spec()


def test_default_pipeline_rejects_bad_opt_level():
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(PassConfigError, match="opt_level"):
            default_pipeline(bad)


def test_each_call_gives_a_new_pipeline():
    a, b = default_pipeline(), default_pipeline()
    a.insert(Phase.OPTIMIZATION, [get_pass("Normalize")], at="end")
    assert len(a.passes) == len(b.passes) + 1


# ---------------------------------------------------------------------------
# Inserting user passes into phase windows
# ---------------------------------------------------------------------------

HOOK_SEEN: list[Phase] = []


@module_pass(opt_level=0, phases=Phase.LOWERING, name="TestLoweringHook")
def lowering_hook(mod, ctx):
    """Records the phase of the module it is given."""
    HOOK_SEEN.append(mod.phase)
    return mod


@module_pass(opt_level=0, phases=Phase.OPTIMIZATION, name="TestOptHook")
def opt_hook(mod, ctx):
    return mod


def test_insert_at_end_of_lowering_runs_before_vm_builtin_lower(small):
    pipeline = default_pipeline().insert(Phase.LOWERING, passes=[lowering_hook], at="end")
    assert names(pipeline)[-2:] == ["TestLoweringHook", "VMBuiltinLower"]
    assert pipeline.validate() == Phase.BUILD
    trace = PassTrace()
    HOOK_SEEN.clear()
    exe = build(small, pipeline=pipeline, instruments=[trace], kernels="none")
    assert HOOK_SEEN == [Phase.LOWERING]
    ran = trace.ran()
    hook = ran.index("TestLoweringHook")
    # After memory planning, right before the transition to build.
    assert ran[hook - 1] == "StaticPlanBlockMemory"
    # The hook may have undone VMBuiltinLower's requirements: they run again.
    assert ran[hook + 1:] == ["RemovePurityChecking", "CallTIRRewrite", "StaticPlanBlockMemory",
                              "VMBuiltinLower"]
    assert isinstance(exe, Executable)


def test_insert_at_start_of_optimization(small):
    pipeline = default_pipeline().insert(Phase.OPTIMIZATION, passes=[opt_hook], at="start")
    assert names(pipeline)[1:3] == ["LambdaLifting", "TestOptHook"]
    trace = PassTrace()
    with PassContext(instruments=[trace]):
        out = run_pipeline(pipeline, small)
    assert out.phase == Phase.BUILD
    assert trace.ran()[2] == "TestOptHook"


def test_insert_rejects_misfits_and_leaves_pipeline_unchanged():
    pipeline = default_pipeline()
    before = pipeline.spec()
    with pytest.raises(PhaseError, match="TestOptHook.*lowering window.*accepts optimization"):
        pipeline.insert(Phase.LOWERING, [opt_hook])
    with pytest.raises(PhaseError, match="transition pass"):
        pipeline.insert(Phase.OPTIMIZATION, [get_pass("LegalizeOps")])
    with pytest.raises(PassConfigError, match="'start' or 'end'"):
        pipeline.insert(Phase.LOWERING, [lowering_hook], at="middle")
    with pytest.raises(PassConfigError, match=r"insert\(passes=...\): item 2 is int"):
        pipeline.insert(Phase.LOWERING, [lowering_hook, 3])
    assert pipeline.spec() == before


# ---------------------------------------------------------------------------
# Running: required passes once, phase entry points, validation first
# ---------------------------------------------------------------------------

def test_build_runs_each_pass_once(small):
    trace = PassTrace()
    build(small, instruments=[trace], kernels="none")
    ran = trace.ran()
    assert ran == names(default_pipeline())
    assert len(ran) == len(set(ran))  # requirements already satisfied are not re-run
    assert [(e.name, e.reason) for e in trace.entries if e.status == "skipped"] == []


def test_required_pass_runs_once_when_not_listed(small):
    # LegalizeOps requires ToNonDataflow: the Sequential runs it first, once.
    trace = PassTrace()
    with PassContext(instruments=[trace]):
        out = run_pipeline(parse_pipeline("LambdaLifting,LegalizeOps"), small)
    assert out.phase == Phase.LOWERING
    assert trace.ran() == ["LambdaLifting", "ToNonDataflow", "LegalizeOps"]
    assert trace.entries[1].required_by == "LegalizeOps"


def test_build_skips_above_opt_level_and_runs_cse_at_3(small):
    trace = PassTrace()
    build(small, opt_level=3, instruments=[trace], kernels="none")
    assert "EliminateCommonSubexpr" in trace.ran()
    # A user pipeline with CSE, built at opt_level 2: skipped, with the reason.
    trace2 = PassTrace()
    build(small, opt_level=2, pipeline=default_pipeline(3), instruments=[trace2], kernels="none")
    skipped = dict(trace2.skipped())
    assert "opt_level 3" in skipped["EliminateCommonSubexpr"]


@pytest.mark.parametrize("steps, expected_first", [
    ("", "Normalize"),                                   # ingestion
    ("LambdaLifting", "ConvertToDataflow"),              # optimization
    ("LambdaLifting,LegalizeOps", "PackConstantWeights"),  # lowering
    ("LambdaLifting,LegalizeOps,VMBuiltinLower", None),     # build: codegen only
])
def test_build_starts_at_the_module_phase(small, steps, expected_first):
    mod = parse_pipeline(steps)(small) if steps else small
    trace = PassTrace()
    exe = build(mod, instruments=[trace], kernels="interp")
    ran = trace.ran()
    assert (ran[0] if ran else None) == expected_first
    args = small_inputs()
    np.testing.assert_allclose(VirtualMachine(exe, kernels="interp")["main"](*args),
                               interpret(small, *args), rtol=1e-5, atol=1e-6)


def test_lower_returns_a_verified_build_module(small):
    out = lower(small)
    assert out.phase == Phase.BUILD
    from phasec import verifier

    verifier.verify(out, Phase.BUILD)


def test_misordered_pipeline_fails_before_anything_runs(small):
    trace = PassTrace()
    spec = "LambdaLifting,LegalizeOps,FoldConstant,VMBuiltinLower"
    with pytest.raises(PhaseError, match="position 3.*FoldConstant expects phase optimization.*"
                                         "must run before LegalizeOps") as info:
        build(small, pipeline=spec, instruments=[trace])
    assert "Nothing has run" in str(info.value)
    assert trace.entries == []


def test_pipeline_that_stops_early_is_rejected_up_front(small):
    trace = PassTrace()
    with pytest.raises(PhaseError, match="leaves the module in phase lowering.*VMBuiltinLower"):
        build(small, pipeline="LambdaLifting,LegalizeOps", instruments=[trace])
    assert trace.entries == []


def test_module_in_a_phase_the_pipeline_never_reaches(small):
    lowered = parse_pipeline("LambdaLifting,LegalizeOps")(small)
    pipeline = Pipeline([get_pass("LambdaLifting")])  # ingestion -> optimization only
    with pytest.raises(PhaseError, match="never has a module in that phase"):
        build(lowered, pipeline=pipeline)


def test_pipeline_from_accepts_the_usual_forms():
    seq = parse_pipeline("LambdaLifting,FoldConstant")
    for form in (seq, list(seq.passes), "LambdaLifting,FoldConstant"):
        assert [p.info.name for p in pipeline_from(form).passes] == ["LambdaLifting",
                                                                     "FoldConstant"]
    assert pipeline_from(None, 3).spec() == default_pipeline(3).spec()
    with pytest.raises(PassConfigError):
        pipeline_from(42)


def test_build_argument_errors(small):
    with pytest.raises(PassConfigError, match="kernels"):
        build(small, kernels="gpu")
    with pytest.raises(PassConfigError, match="opt_level"):
        build(small, opt_level=-1)
    with pytest.raises(PassConfigError, match="verify"):
        build(small, verify="sometimes")
    with pytest.raises(TypeError, match="IRModule"):
        build("not a module")


# ---------------------------------------------------------------------------
# The context build runs in
# ---------------------------------------------------------------------------

def test_build_sees_the_enclosing_context(small):
    outer = PassTrace()
    with PassContext(instruments=[outer], disabled_pass=["FoldConstant"]):
        build(small, kernels="none")
    assert "FoldConstant" in dict(outer.skipped())
    assert outer.ran()[-1] == "VMBuiltinLower"
    # The outer trace was not reset by build's own context.
    with PassContext(instruments=[outer]):
        get_pass("Normalize")(small)
        build(small, kernels="none")
    assert outer.ran()[0] == "Normalize" and outer.ran()[1] == "Normalize"


@pytest.mark.parametrize("verify", ["each", "transitions", "off"])
def test_verify_modes(small, verify):
    exe = build(small, verify=verify, kernels="interp")
    args = small_inputs()
    np.testing.assert_allclose(VirtualMachine(exe, kernels="interp")["main"](*args),
                               interpret(small, *args), rtol=1e-5, atol=1e-6)


def test_build_does_not_modify_its_input(small):
    text = small.script()
    copy = parse(SMALL)
    build(small, kernels="none")
    assert small.script() == text and structural_equal(small, copy)
    assert small.phase == Phase.INGESTION


# ---------------------------------------------------------------------------
# End to end, small
# ---------------------------------------------------------------------------

def test_build_llvm_matches_interpreter_and_numpy(small):
    exe = phasec.build(small)  # the lazy top-level export
    args = small_inputs()
    out = VirtualMachine(exe)["main"](*args)
    ref = interpret(small, *args)
    x, w, b = (a.astype(np.float64) for a in args)
    expected = np.maximum(x @ w + b, 0) * 3.0
    # K = 8 products per element: float32 rounding stays far below 1e-5.
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_fusion_level_changes_the_kernels(small):
    fused = build(small, opt_level=2, kernels="none")
    unfused = build(small, opt_level=0, kernels="none")
    # matmul + add + relu + multiply: one fused kernel at 2, one per op at 0
    # (the constant addition is folded at every level).
    assert len(fused.prim_funcs) == 1
    assert len(unfused.prim_funcs) == 4
    args = small_inputs()
    np.testing.assert_allclose(VirtualMachine(unfused, kernels="interp")["main"](*args),
                               interpret(small, *args), rtol=1e-5, atol=1e-6)


def test_executable_save_load(small, tmp_path):
    exe = build(small)
    path = tmp_path / "small.pvm"
    exe.save(path)
    loaded = Executable.load(path)
    args = small_inputs()
    np.testing.assert_array_equal(VirtualMachine(loaded)["main"](*args),
                                  VirtualMachine(exe)["main"](*args))


def test_module_without_dataflow_blocks_is_fused(small):
    # ConvertToDataflow (opt_level 1) gives FuseOps the blocks it needs.
    text = "\n".join(line for line in SMALL.splitlines() if "R.dataflow" not in line
                     and "R.output" not in line)
    text = text.replace("            ", "        ")
    mod = parse(text)
    assert isinstance(mod, IRModule)
    exe = build(mod, kernels="none")
    assert len(exe.prim_funcs) == 1

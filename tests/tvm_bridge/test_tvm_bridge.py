"""phasec.tvm: conversion to and from TVM 0.27, and PhaseCheck on TVM's own
pipeline. TVM (installed by the test extra) is the reference: its structural
equality, its parser and its passes."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import tvm
from tvm import relax

import phasec
from phasec.ir import IRModule, Phase, assert_structural_equal
from phasec.pipeline import lower
from phasec.errors import WellFormedError
from phasec.tvm import PhaseCheck, TVMNotAvailableError, from_tvm, to_tvm

EXAMPLES = sorted((Path(phasec.__file__).parent / "examples").glob("*.py"))


def _trip(mod: IRModule) -> IRModule:
    tvm_mod = to_tvm(mod)
    assert str(tvm_mod.attrs["phase"]) == mod.phase.label
    back = from_tvm(tvm_mod)
    assert back.phase == mod.phase
    return back


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_round_trip_through_tvm_keeps_the_module_and_its_phase(example: Path) -> None:
    mod = phasec.load(str(example))
    assert_structural_equal(IRModule(_trip(mod).functions), IRModule(mod.functions))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_round_trip_of_lowered_kernels_computes_the_same(example: Path) -> None:
    """TVM's parser folds constants in kernels (``T.Cast("float32", 1.0)``
    becomes ``T.float32(1.0)``), so a lowered module comes back simplified:
    after one trip it is a fixed point, and it computes the same results."""
    low = lower(phasec.load(str(example)))
    once = _trip(low)
    assert_structural_equal(_trip(once), once)
    exe_a, exe_b = phasec.build(low), phasec.build(once)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal([int(d.value) if hasattr(d, "value") else 3 for d in p.struct_info.shape],
                                dtype="float32") for p in low["main"].params]
    want = phasec.VirtualMachine(exe_a)["main"](*args)
    got = phasec.VirtualMachine(exe_b)["main"](*args)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)


SOFTMAX_MATMUL = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), w: R.Tensor((4, 4), "float32")):
        with R.dataflow():
            y = R.matmul(x, w)
            z = R.nn.softmax(y, axis=-1)
            R.output(z)
        return z
"""

NESTED = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        @R.function
        def inner(y: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
            z = R.add(y, y)
            return z

        r = inner(x)
        return r
"""


def test_tvm_module_survives_a_trip_through_phasec_by_tvms_own_equality() -> None:
    module = tvm.script.from_source(SOFTMAX_MATMUL)
    for stage in (module, relax.transform.LegalizeOps()(module)):
        again = to_tvm(from_tvm(stage))
        tvm.ir.assert_structural_equal(again.without_attr("phase"), stage)


def test_phase_check_follows_tvm_compile_and_reports_its_findings() -> None:
    mod = to_tvm(phasec.load(str(EXAMPLES[0])))
    check = PhaseCheck(allow_documented=False)  # (documented deviations: test_tvm_phase_check.py)
    with tvm.transform.PassContext(opt_level=3, instruments=[check.instrument()]):
        tvm.compile(mod, target="llvm")
    verdicts = {v.pass_name: v for v in check.verdicts}
    # TVM's default pipeline never lambda-lifts: LegalizeOps runs in ingestion.
    first = check.first_violation
    assert first is not None and first.pass_name == "LegalizeOps"
    assert "ran in phase ingestion" in first.order_error
    assert "PH201" in {d.code for d in first.diagnostics}  # dataflow kept past legalization
    assert verdicts["ToNonDataflow"].phase == Phase.LOWERING
    # From LowerRuntimeBuiltin (phasec's VMBuiltinLower) on, TVM's modules
    # are in the build phase and satisfy every one of its invariants.
    for name in ("LowerRuntimeBuiltin", "VMShapeLower", "AttachGlobalSymbol"):
        assert verdicts[name].phase == Phase.BUILD and verdicts[name].ok, verdicts[name].describe()
    report = check.report()
    assert "LegalizeOps" in report and "VIOLATION" in report


CONSTANTS = """
@I.ir_module
class Module:
    @R.function
    def helper(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        y = R.multiply(x, R.const([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], "float32"))
        return y

    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 2), "float32"):
        cls = Module
        a = R.add(x, R.const([10.0, 20.0, 30.0], "float32"))
        b = cls.helper(a)
        c = R.subtract(b, R.const(0.5, "float32"))
        d = R.matmul(c, R.const([[1.0, 0.0], [0.0, 1.0], [2.0, -1.0]], "float32"))
        e = R.add(d, R.astype(R.const([7, 8], "int32"), "float32"))
        return e
"""


def _constants_formula(x: np.ndarray) -> np.ndarray:
    """CONSTANTS' main as a numpy formula."""
    a = x + np.array([10, 20, 30], "float32")
    c = a * np.array([[1, 2, 3], [4, 5, 6]], "float32") - 0.5
    return c @ np.array([[1, 0], [0, 1], [2, -1]], "float32") + np.array([7, 8], "float32")


def test_tensor_constants_come_back_from_tvm_with_their_values() -> None:
    """TVM prints tensor constants as metadata["ir.GenericConst"][i] and
    crashes printing the metadata section itself (TVM 0.27); the bridge
    takes the values from the module, in TVM's numbering."""
    mod = phasec.parse(CONSTANTS)
    back = _trip(mod)
    assert_structural_equal(IRModule(back.functions), IRModule(mod.functions))
    x = np.random.default_rng(1).standard_normal((2, 3)).astype("float32")
    got = phasec.VirtualMachine(phasec.build(lower(back)))["main"](x)
    np.testing.assert_allclose(np.asarray(got), _constants_formula(x), rtol=1e-5)


def test_phase_check_reads_every_stage_of_a_module_with_constants() -> None:
    """The constants survive TVM's whole pipeline: each stage is read (none
    unreadable) and the built module keeps every invariant."""
    check = PhaseCheck()
    with tvm.transform.PassContext(opt_level=3, instruments=[check.instrument()]):
        tvm.compile(to_tvm(phasec.parse(CONSTANTS)), target="llvm")
    assert check.verdicts and all(v.unreadable is None for v in check.verdicts), check.report()
    last = check.verdicts[-1]
    assert last.phase == Phase.BUILD and last.ok, last.describe()


def test_phase_check_is_quiet_on_a_pipeline_in_phasec_order() -> None:
    module = tvm.script.from_source(NESTED)
    check = PhaseCheck()
    seq = tvm.transform.Sequential([relax.transform.LambdaLift(),
                                    relax.transform.LegalizeOps()])
    with tvm.transform.PassContext(instruments=[check.instrument()]):
        seq(module)
    lifted = {v.pass_name: v for v in check.verdicts}["LambdaLift"]
    assert lifted.phase == Phase.OPTIMIZATION and lifted.ok
    assert check.first_violation is None or check.first_violation.pass_name != "LambdaLift"


def test_phase_check_can_stop_the_pipeline_at_the_first_violation() -> None:
    mod = to_tvm(phasec.load(str(EXAMPLES[0])))
    check = PhaseCheck(raise_on_violation=True, allow_documented=False)
    with pytest.raises(WellFormedError, match="phase check after TVM pass LegalizeOps"):
        with tvm.transform.PassContext(opt_level=3, instruments=[check.instrument()]):
            tvm.compile(mod, target="llvm")


def test_without_tvm_the_bridge_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tvm", None)  # import tvm now raises ImportError
    with pytest.raises(TVMNotAvailableError, match=r'pip install "phasec\[tvm\]"'):
        to_tvm(phasec.load(str(EXAMPLES[0])))


def test_importing_phasec_does_not_import_tvm() -> None:
    import subprocess

    code = "import phasec, phasec.tvm, sys; print('tvm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"


def test_phasec_check_reports_tvm_dumpir_files_with_their_phase(tmp_path: Path) -> None:
    import subprocess

    dump = tmp_path / "dump"
    mod = to_tvm(phasec.load(str(next(p for p in EXAMPLES if p.stem == "mlp"))))
    with tvm.transform.PassContext(opt_level=3, instruments=[tvm.ir.instrument.DumpIR(dump)]):
        tvm.compile(mod, target="llvm")
    proc = subprocess.run([sys.executable, "-m", "phasec.verifier.cli", str(dump)], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    phases = dict(line.split(": ", 1) for line in proc.stdout.splitlines()
                  if line.startswith(str(dump)))
    by_pass = {Path(path).stem.split("_", 1)[1]: label.split()[0] for path, label in phases.items()}
    assert by_pass["LegalizeOps"] == "optimization"  # dataflow blocks remain
    assert by_pass["ToNonDataflow"] == "lowering"
    assert by_pass["LowerRuntimeBuiltin"] == "build"
    tir_files = [p for p in dump.iterdir() if "@R.function" not in p.read_text()]
    assert tir_files and f"skipped {len(tir_files)} DumpIR files" in proc.stderr + proc.stdout


def test_phase_check_verifies_again_after_a_transition_that_changes_no_text() -> None:
    """TVM 0.27's LegalizeOps leaves R.ewise_fma as it is (no lowering): the
    text is unchanged, but the module is now in the lowering phase, where a
    high-level operator is a PH202 violation (phasec fuzz --against tvm found
    PhaseCheck reusing the optimization-phase verdict of the same text)."""
    module = tvm.script.from_source("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1,), dtype="float32")) -> R.Tensor((1,), dtype="float32"):
        v: R.Tensor((1,), dtype="float32") = R.ewise_fma(x, x, x)
        return v
""")
    check = PhaseCheck()
    seq = tvm.transform.Sequential([relax.transform.LambdaLift(),
                                    relax.transform.LegalizeOps()])
    with tvm.transform.PassContext(instruments=[check.instrument()]):
        seq(module)
    verdicts = {v.pass_name: v for v in check.verdicts}
    assert verdicts["LambdaLift"].ok
    legalized = verdicts["LegalizeOps"]
    assert legalized.phase == Phase.LOWERING and not legalized.ok
    assert {d.code for d in legalized.diagnostics} == {"PH202"}


_STOP_FUSION = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        a = R.add(x, x)
        b = R.stop_fusion(a)
        c = R.multiply(b, x)
        return c
'''


def test_stop_fusion_is_a_packed_call_tvm_parses_fuses_around_and_runs() -> None:
    # TVM 0.27 has no stop_fusion operator: phasec spells it as the pure packed
    # call phasec.stop_fusion, which the bridge registers with TVM (identity)
    mod = phasec.parse(_STOP_FUSION)
    text = mod.script()
    assert 'R.call_pure_packed("phasec.stop_fusion", a, ty_args=' in text
    assert "R.stop_fusion(a)" in mod.script(syntax="legacy")
    tvm_mod = to_tvm(mod)
    assert relax.analysis.check_well_formed(tvm_mod)
    back = from_tvm(tvm_mod)
    assert [b.value.op.name for b in back["main"].body.blocks[0].bindings] == [
        "relax.add", "relax.stop_fusion", "relax.multiply"]
    # TVM's FuseOps does not fuse across the barrier: add and multiply stay apart
    fused = relax.transform.FuseOps()(relax.transform.LegalizeOps()(tvm_mod))
    assert "phasec.stop_fusion" in fused.script()
    x = np.random.default_rng(0).random((2, 3), dtype=np.float32)
    vm = relax.VirtualMachine(tvm.compile(tvm_mod, target="llvm"), tvm.cpu())
    np.testing.assert_allclose(vm["main"](tvm.runtime.tensor(x)).numpy(), (x + x) * x,
                               rtol=1e-6)


def test_tvm_type_defects_are_named() -> None:
    # what TVM 0.27 infers for these (its defects, PHASES.md) against numpy
    from phasec.testing.against_tvm import tvm_can_read, tvm_type_defect

    bb = relax.BlockBuilder()
    assert bb.normalize(relax.op.arange(1, -2, -1, dtype="int64")).ty.shape[0] == 5
    assert len(np.arange(1, -2, -1)) == 3
    x = relax.Var("x", relax.TensorType((2,), "float32"))
    y = relax.Var("y", relax.TensorType((3,), "float32"))
    grid = bb.normalize(relax.op.meshgrid(relax.Tuple([x, y]), indexing="xy"))
    assert [int(d) for d in grid.ty.fields[0].shape] == [2, 3]
    assert np.meshgrid(np.zeros(2), np.zeros(3), indexing="xy")[0].shape == (3, 2)
    neg = phasec.parse('''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((2,), "float32"), y: R.Tensor((3,), "float32")):
        a = R.arange(1, -2, -1, dtype="int64")
        b = R.arange(0, 3, 1, dtype="int64")
        g = R.meshgrid((x, y), indexing="xy")
        h = R.meshgrid((x, y), indexing="ij")
        k = R.meshgrid((x, x, y), indexing="xy")
        return (a, b, g, h, k)
''')
    main = neg["main"]

    def only(name):
        binding = next(b for blk in main.body.blocks for b in blk.bindings
                       if b.var.name_hint == name)
        fn = phasec.ir.Function(main.params, phasec.ir.SeqExpr(
            [phasec.ir.BindingBlock([binding])], binding.var))
        return IRModule({"main": fn})

    assert "negative step" in tvm_type_defect(only("a"))
    assert tvm_type_defect(only("b")) is None
    assert "indexing" in tvm_type_defect(only("g"))
    assert tvm_type_defect(only("h")) is None
    assert tvm_type_defect(only("k")) is None  # the first two inputs have one length
    for name, refused in (("a", True), ("b", False), ("g", True), ("h", False), ("k", False)):
        m = only(name)
        assert (tvm_can_read(m) is not None) == refused
        try:
            accepted = bool(relax.analysis.check_well_formed(tvm.script.from_source(m.script())))
        except Exception:  # noqa: BLE001 - TVM's parser refuses it as not well-formed
            accepted = False
        assert accepted != refused, (name, m.script())


def test_phase_check_reads_tvms_kept_stop_fusion_as_the_packed_call_it_is() -> None:
    # TVM's LegalizeOps keeps the packed call phasec.stop_fusion (TVM runs it);
    # PhaseCheck must not report it as a high-level operator left in lowering
    check = PhaseCheck()
    with tvm.transform.PassContext(opt_level=3, instruments=[check.instrument()]):
        tvm.compile(to_tvm(phasec.parse(_STOP_FUSION)), target="llvm")
    bad = [v for v in check.verdicts if not v.ok]
    assert [v.pass_name for v in bad] == ["LegalizeOps"]  # the documented order finding only
    assert bad[0].diagnostics == () and "LambdaLifting first" in bad[0].order_error
    lowered = [v for v in check.verdicts if v.phase >= Phase.LOWERING and v.inferred is not None]
    assert lowered and all(v.inferred >= Phase.LOWERING for v in lowered)

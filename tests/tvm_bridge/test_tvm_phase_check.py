"""PhaseCheck's documented deviations and its error: TVM's own pipeline
passes with the deviations PHASES.md documents allowed (the default), and a
real violation comes out of TVM as phasec's WellFormedError, not as TVM's
RuntimeError."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import tvm
from tvm import relax

import phasec
from phasec.errors import WellFormedError
from phasec.ir import Phase
from phasec.tvm import (
    TVM_DOCUMENTED_DEVIATIONS, PassVerdict, PhaseCheck, PhaseCheckError, documented_deviation,
    to_tvm,
)

MLP = Path(phasec.__file__).parent / "examples" / "mlp.py"

FMA = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1,), dtype="float32")) -> R.Tensor((1,), dtype="float32"):
        v: R.Tensor((1,), dtype="float32") = R.ewise_fma(x, x, x)
        return v
"""


def test_tvm_compile_passes_with_documented_deviations_allowed() -> None:
    check = PhaseCheck(raise_on_violation=True)  # allow_documented is the default
    with tvm.transform.PassContext(opt_level=3, instruments=[check.instrument()]):
        tvm.compile(to_tvm(phasec.load(str(MLP))), target="llvm")
    assert check.first_violation is None and check.violations == []
    legalized = next(v for v in check.verdicts if v.pass_name == "LegalizeOps")
    # the finding is still there, marked: LegalizeOps ran from ingestion, and
    # the dataflow blocks stay until ToNonDataflow
    assert not legalized.ok and legalized.documented
    assert "ran in phase ingestion" in legalized.order_error
    assert {d.code for d in legalized.diagnostics} == {"PH201"}
    report = check.report()
    assert "documented" in report and "VIOLATION" not in report
    assert "no phase violations" in report


def test_a_real_violation_leaves_tvm_as_a_well_formed_error() -> None:
    """R.ewise_fma has no legalization in TVM: after LegalizeOps a high-level
    operator remains in the lowering phase (PH202), no documented deviation."""
    check = PhaseCheck(raise_on_violation=True)
    seq = tvm.transform.Sequential([relax.transform.LambdaLift(), relax.transform.LegalizeOps()])
    with pytest.raises(WellFormedError) as info:
        with tvm.transform.PassContext(instruments=[check.instrument()]):
            seq(tvm.script.from_source(FMA))
    err = info.value
    assert isinstance(err, PhaseCheckError) and not isinstance(err, RuntimeError)
    assert err.pass_name == "LegalizeOps"
    assert {d.code for d in err.diagnostics} == {"PH202"}
    assert "phase check after TVM pass LegalizeOps" in str(err)
    assert err.verdict is not None and err.verdict.phase == Phase.LOWERING


def _verdict(pass_name: str, codes: dict[str, str], order_error: str | None = None,
             inferred: Phase | None = Phase.OPTIMIZATION) -> PassVerdict:
    diags = tuple(SimpleNamespace(code=c, message=m) for c, m in codes.items())
    return PassVerdict(0, pass_name, Phase.LOWERING, inferred, diags, order_error)


def test_documented_deviations_are_exactly_those_of_phases_md() -> None:
    assert set(TVM_DOCUMENTED_DEVIATIONS) == {"legalize-without-lambda-lift",
                                              "dataflow-after-legalize",
                                              "reshape-after-legalize"}
    tvm_default = ["NormalizeGlobalVar", "LegalizeOps"]
    order = "LegalizeOps moves a module ... but it ran in phase ingestion"
    # TVM's default pipeline: LegalizeOps straight from ingestion, dataflow kept
    assert documented_deviation(_verdict("LegalizeOps", {"PH201": "dataflow"}, order),
                                tvm_default)
    # ... but not when there was something to lift (the module is not optimization-clean)
    assert not documented_deviation(
        _verdict("LegalizeOps", {"PH201": "dataflow"}, order, inferred=Phase.INGESTION),
        tvm_default)
    # R.reshape back until LowerRuntimeBuiltin; any other high-level operator is a finding
    ran = [*tvm_default, "RewriteDataflowReshape"]
    assert documented_deviation(_verdict("RewriteDataflowReshape",
                                         {"PH202": "R.reshape in lowering"}), ran)
    assert not documented_deviation(_verdict("RewriteDataflowReshape",
                                             {"PH202": "R.ewise_fma in lowering"}), ran)
    assert not documented_deviation(_verdict("VMShapeLower", {"PH202": "R.reshape"}),
                                    [*ran, "LowerRuntimeBuiltin", "VMShapeLower"])
    assert not documented_deviation(_verdict("X", {"PH201": "dataflow"}),
                                    [*ran, "ToNonDataflow", "X"])


def test_from_tvm_infers_the_phase_of_a_lowered_module() -> None:
    """A module TVM lowered, without phasec's phase attribute: ingestion by
    default, its phase with phase="infer" (the verifier's answer, which must
    agree with phasec's own pipeline on the same module)."""
    from phasec.pipeline import lower
    from phasec.tvm import from_tvm

    lowered = lower(phasec.load(str(MLP)))
    assert lowered.phase == Phase.BUILD
    tvm_mod = to_tvm(lowered).without_attr("phase")
    assert from_tvm(tvm_mod).phase == Phase.INGESTION
    assert from_tvm(tvm_mod, phase="infer").phase == Phase.BUILD
    assert from_tvm(tvm_mod, phase="lowering").phase == Phase.LOWERING
    # a phase the module states is kept
    assert from_tvm(to_tvm(lowered), phase="infer").phase == Phase.BUILD

"""Pipeline reports (issue 19): the JSON document against its schema (checked
by jsonschema), agreement with PassTrace and PassTiming run on the same
pipeline, reports of failing pipelines, bad report paths, large modules."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import jsonschema
import pytest

import phasec
from phasec.cli import main
from phasec.explorer import report, report_json_schema
from phasec.ir import BindingBlock, Function, SeqExpr, Var, VarBinding
from phasec.op import call_op
from phasec.transform import PassTiming, PassTrace, parse_pipeline

from helpers.sample_modules import add_chain_module

EXAMPLES = Path(phasec.__file__).parent / "examples"
SPEC = "LambdaLifting,ConvertToDataflow,FoldConstant,FuseOps,ToNonDataflow,LegalizeOps"
LOWERING_WITH_DATAFLOW = '''
@I.ir_module
class Module:
    I.module_attrs({"phase": "lowering"})
    @R.function
    def main(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        with R.dataflow():
            y = R.add(x, x)
            R.output(y)
        return y
'''


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = report_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _doc(rep) -> dict:
    return json.loads(rep.to_json())


@pytest.mark.parametrize("name", ["mlp", "cnn", "transformer"])
def test_report_validates_and_agrees_with_trace_and_timing(validator, name):
    mod = phasec.load(EXAMPLES / f"{name}.py")
    doc = _doc(report(mod, title=name))
    assert list(validator.iter_errors(doc)) == []
    # The same pipeline under PassTrace and PassTiming.
    from phasec.pipeline import lower

    trace, timing = PassTrace(), PassTiming()
    lower(mod, instruments=[trace, timing])
    steps = doc["steps"]
    assert [(s["pass"], s["status"], s["phase_before"], s["phase_after"]) for s in steps] == \
        [(e.name, e.status, e.phase_before.label, e.phase_after.label) for e in trace.entries]
    assert Counter(s["pass"] for s in steps if s["status"] == "ran") == \
        {row.name: row.calls for row in timing.rows()}
    assert doc["summary"]["final_phase"] == "build"
    assert doc["summary"]["phases_reached"] == ["ingestion", "optimization", "lowering", "build"]
    assert doc["summary"]["passes_run"] == len(trace.entries)
    # Every distinct IR text is stored once, and each step's texts are the
    # modules printed independently.
    assert len(doc["texts"]) == len(set(doc["texts"]))
    assert doc["texts"][steps[0]["before"]] == mod.script()
    # A step changed the module exactly when its input and output texts differ.
    for s in steps:
        assert s["changed"] == (doc["texts"][s["before"]] != doc["texts"][s["after"]])
        assert bool(s["diff"]) == s["changed"]


def test_diff_shows_the_changed_bindings():
    mod = phasec.load(EXAMPLES / "mlp.py")
    doc = _doc(report(mod, SPEC))
    by_pass = {s["pass"]: s for s in doc["steps"]}
    legalize = by_pass["LegalizeOps"]
    added = [l for fd in legalize["diff"] for l in fd["lines"] if l.startswith("+")]
    assert any("R.call_tir(" in l for l in added)
    fuse = by_pass["FuseOps"]
    assert any(fd["function"].startswith("fused_") for fd in fuse["diff"])
    fold = by_pass["FoldConstant"]
    assert fold["changed"] is False and fold["diff"] == []


def test_failing_pipeline_reports_up_to_the_failure(validator):
    bad = phasec.parse(LOWERING_WITH_DATAFLOW)
    doc = _doc(report(bad))
    assert list(validator.iter_errors(doc)) == []
    err = doc["error"]
    assert err["kind"] == "WellFormedError"
    assert {d["code"] for d in err["diagnostics"]} == {"PH201", "PH202"}
    # The diagnostic points at the binding in the printed module it is about.
    ph202 = next(d for d in err["diagnostics"] if d["code"] == "PH202")
    line = doc["texts"][ph202["text"]].splitlines()[ph202["line"] - 1]
    assert line.strip().startswith("y:") and "R.add(x, x)" in line
    # A phase error: the failing pass, the phase it needs and the fix.
    mod = phasec.load(EXAMPLES / "mlp.py")
    doc = _doc(report(mod, "LambdaLifting,FoldConstant,LegalizeOps,LambdaLifting"))
    err = doc["error"]
    assert err["kind"] == "PhaseError" and err["pass"] == "LambdaLifting"
    assert err["phase_needed"] == ["ingestion"]
    assert "remove this LambdaLifting" in err["fix"]


def test_a_pass_that_breaks_an_invariant_is_shown_with_its_diagnostics():
    from phasec.ir import Phase
    from phasec.transform import module_pass

    @module_pass(phases=Phase.OPTIMIZATION, name="DropStructInfo")
    class DropStructInfo:
        def transform_module(self, mod, ctx):
            func = mod.functions["main"]
            x = func.params[0]
            y = Var("y", None)
            body = SeqExpr([BindingBlock([VarBinding(y, call_op("add", x, x))])], x)
            return mod.with_functions({**mod.functions, "main": Function(
                func.params, body, func.ret_struct_info, attrs=func.attrs)})

    mod = phasec.load(EXAMPLES / "mlp.py")
    rep = report(mod, [parse_pipeline("LambdaLifting"), DropStructInfo()])
    doc = _doc(rep)
    failed = doc["steps"][-1]
    assert failed["pass"] == "DropStructInfo" and failed["status"] == "failed"
    assert "WF401" in [d["code"] for d in failed["diagnostics"]]
    assert failed["diagnostics"][0]["binding"] == "y"
    assert doc["error"]["kind"] == "WellFormedError"


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_unwritable_report_path_fails_before_anything_runs(capsys, tmp_path):
    # The input does not exist either: the report path is checked first, so
    # the error is about it, before the module is even read.
    missing_input = tmp_path / "no_such_module.py"
    for path, message in [(tmp_path / "missing" / "r.html", "no directory"),
                          (tmp_path / "r.txt", "unknown type '.txt'"),
                          (tmp_path, "unknown type")]:
        for command in (["opt", missing_input], ["build", missing_input],
                        ["run", missing_input]):
            code, out, err = run_cli(capsys, *command, "--report", path)
            assert code == 2 and message in err and "no_such_module" not in err, err


def test_cli_report_of_a_failing_pipeline_is_written(capsys, tmp_path, validator):
    out_json = tmp_path / "r.json"
    code, _, err = run_cli(capsys, "opt", EXAMPLES / "mlp.py", "--passes",
                           "LambdaLifting,FuseOps,LambdaLifting", "--report", out_json)
    assert code == 1 and f"report: {out_json}" in err
    doc = json.loads(out_json.read_text())
    assert list(validator.iter_errors(doc)) == []
    assert doc["error"]["kind"] == "PhaseError"
    assert (tmp_path / "r.json").stat().st_mode & 0o777 != 0o600  # a normal file mode
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left


@pytest.mark.parametrize("argv", [
    ["run", "--repeat", "1", "-q"],
    ["build", EXAMPLES / "mlp.py", "-o", "{tmp}/m.pvm"],
])
def test_run_and_build_write_reports(capsys, tmp_path, argv, validator):
    path = tmp_path / "r.json"
    argv = [str(a).replace("{tmp}", str(tmp_path)) for a in argv]
    code, _, err = run_cli(capsys, *argv, "--report", path)
    assert code == 0, err
    doc = json.loads(path.read_text())
    assert list(validator.iter_errors(doc)) == []
    assert doc["summary"]["final_phase"] == "build" and doc["summary"]["kernels"] >= 1


REPRODUCER = """# phasec fuzz reproducer
# sequence: {sequence}
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        y = R.multiply(x, x)
        z = R.add(y, x)
        return z
"""


def test_fuzz_replay_reports_the_reproducers_sequence(capsys, tmp_path, validator):
    repro = tmp_path / "repro.py"
    repro.write_text(REPRODUCER.format(sequence="LambdaLifting, ConvertToDataflow, FuseOps"))
    path = tmp_path / "r.json"
    code, _, err = run_cli(capsys, "fuzz", "--replay", repro, "--kernels", "interp",
                           "--report", path)
    assert code == 0 and f"report: {path}" in err
    doc = json.loads(path.read_text())
    assert list(validator.iter_errors(doc)) == []
    assert [s["pass"] for s in doc["steps"]] == ["LambdaLifting", "ConvertToDataflow", "FuseOps"]
    fused = doc["steps"][-1]
    assert fused["changed"] and any(fd["function"].startswith("fused_") for fd in fused["diff"])
    # A reproducer whose sequence breaks the phase order: the report shows the
    # PhaseError with the pass that raised it (the replay itself counts a
    # phase refusal as the infrastructure working, not as a compiler failure).
    repro.write_text(REPRODUCER.format(sequence="LambdaLifting, ToNonDataflow, LambdaLifting"))
    code, _, err = run_cli(capsys, "fuzz", "--replay", repro, "--kernels", "interp",
                             "--report", path)
    assert code == 0 and f"report: {path}" in err
    doc = json.loads(path.read_text())
    assert doc["error"]["kind"] == "PhaseError" and doc["error"]["pass"] == "LambdaLifting"
    assert "--report goes with --replay" in run_cli(capsys, "fuzz", "--seconds", "1",
                                                   "--report", path)[2]


def test_schema_command_prints_the_report_schema(capsys):
    code, out, _ = run_cli(capsys, "schema", "--report")
    assert code == 0 and json.loads(out) == report_json_schema()


def test_large_module_stores_each_text_once():
    mod = add_chain_module(10_000)
    doc = _doc(report(mod, "Normalize,LambdaLifting,CanonicalizeBindings,FoldConstant"))
    texts = doc["texts"]
    assert len(texts) == len(set(texts))
    # Normalize, CanonicalizeBindings and FoldConstant change nothing here:
    # three texts would be stored without deduplication... only two are.
    assert len(texts) == 2
    assert sum(s["changed"] for s in doc["steps"]) == 1

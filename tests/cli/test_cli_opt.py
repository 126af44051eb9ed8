"""``phasec opt`` and ``phasec passes``, through phasec.cli.main with capsys."""

from __future__ import annotations

import io
import json

import pytest

import phasec
from phasec.cli import main
from phasec.ir import Phase, structural_equal
from phasec.transform import list_passes, parse_pipeline

MODULE = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), dtype="float32"), w: R.Tensor((8, 8), dtype="float32")) -> R.Tensor((4, 8), dtype="float32"):
        with R.dataflow():
            y = R.matmul(x, w)
            z = R.nn.relu(R.add(y, R.add(R.const(1.0, "float32"), R.const(2.0, "float32"))))
            a = R.add(z, x)
            b = R.add(z, x)
            out = R.multiply(a, b)
            R.output(out)
        return out
"""

# Declares the optimization phase but holds a nested function: not well formed.
ILL_FORMED = """
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        @R.function
        def inner(y: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
            return y

        z = inner(x)
        return z
"""


@pytest.fixture
def module_file(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(MODULE)
    return str(path)


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


# ---------------------------------------------------------------------------
# Running pipelines
# ---------------------------------------------------------------------------

def test_opt_runs_a_spec_and_prints_tvmscript(capsys, module_file):
    spec = "LambdaLifting,FoldConstant,FuseOps{fuse_opt_level=2}"
    code, out, err = run_cli(capsys, "opt", module_file, "--passes", spec)
    assert code == 0 and err == ""
    result = phasec.parse(out)
    assert result.phase == Phase.OPTIMIZATION
    assert '"phase": "optimization"' in out
    # The same as running the pipeline in Python.
    expected = parse_pipeline(spec)(phasec.load(module_file))
    assert structural_equal(result, expected)
    assert any(name.startswith("fused_") for name in result.functions)


@pytest.mark.parametrize("suffix", [".json", ".py"])
def test_opt_writes_output_by_suffix(capsys, module_file, tmp_path, suffix):
    target = tmp_path / f"out{suffix}"
    code, out, err = run_cli(capsys, "opt", module_file, "--passes", "LambdaLifting",
                             "-o", str(target))
    assert code == 0 and out == ""
    text = target.read_text()
    if suffix == ".json":
        assert json.loads(text)["phase"] == "optimization"
    else:
        assert text.lstrip().startswith("#") or "@I.ir_module" in text
    loaded = phasec.load(target)
    assert structural_equal(loaded, parse_pipeline("LambdaLifting")(phasec.load(module_file)))


def test_opt_reads_json_and_stdin(capsys, module_file, tmp_path, monkeypatch):
    json_file = tmp_path / "model.json"
    json_file.write_text(phasec.to_json(phasec.load(module_file)))
    code, from_json, _ = run_cli(capsys, "opt", str(json_file), "--passes", "Normalize")
    assert code == 0
    monkeypatch.setattr("sys.stdin", io.StringIO(MODULE))
    code, from_stdin, _ = run_cli(capsys, "opt", "-", "--passes", "Normalize")
    assert code == 0
    monkeypatch.setattr("sys.stdin", io.StringIO(json_file.read_text()))
    code, from_json_stdin, _ = run_cli(capsys, "opt", "-", "--passes", "Normalize")
    assert code == 0
    assert structural_equal(phasec.parse(from_json), phasec.parse(from_stdin))
    assert structural_equal(phasec.parse(from_json), phasec.parse(from_json_stdin))


def test_opt_without_passes_runs_the_default_pipeline(capsys, module_file):
    code, out, err = run_cli(capsys, "opt", module_file)
    assert code == 0
    result = phasec.parse(out)
    assert result.phase == Phase.BUILD
    assert list(result.prim_funcs())


def test_opt_level_controls_cse(capsys, module_file):
    spec = "LambdaLifting,EliminateCommonSubexpr,DeadCodeElimination"
    code, out2, err2 = run_cli(capsys, "opt", module_file, "--passes", spec)
    assert code == 0
    assert "note: EliminateCommonSubexpr skipped: opt_level 3" in err2
    assert "--opt-level" in err2
    code, out3, err3 = run_cli(capsys, "opt", module_file, "--passes", spec, "--opt-level", "3")
    assert code == 0 and "skipped" not in err3
    # The two identical adds (a, b) are merged at opt_level 3 only.
    assert "R.add(z, x)" in out2 and out2.count("R.add(z, x)") == 2
    assert out3.count("R.add(z, x)") == 1


def test_print_after_all_goes_to_stderr(capsys, module_file):
    code, out, err = run_cli(capsys, "opt", module_file, "--passes",
                             "Normalize,LambdaLifting,FoldConstant", "--print-after-all")
    assert code == 0
    headers = [line for line in err.splitlines() if line.startswith("# After")]
    assert headers == ["# After Normalize (phase ingestion)",
                       "# After LambdaLifting (phase optimization)",
                       "# After FoldConstant (phase optimization)"]
    assert err.count("@I.ir_module") == 3
    assert "# After" not in out and phasec.parse(out).phase == Phase.OPTIMIZATION


def test_print_before_named_pass(capsys, module_file):
    code, out, err = run_cli(capsys, "opt", module_file, "--passes",
                             "LambdaLifting,FoldConstant", "--print-before", "FoldConstant")
    assert code == 0
    assert err.startswith("# Before FoldConstant (phase optimization)")
    assert err.count("@I.ir_module") == 1


def test_timing_and_trace(capsys, module_file):
    code, out, err = run_cli(capsys, "opt", module_file, "--passes",
                             "LambdaLifting,LegalizeOps", "--timing", "--trace")
    assert code == 0
    assert "pass trace:" in err
    assert "LambdaLifting" in err and "ingestion -> optimization" in err
    assert "ToNonDataflow" in err and "required by LegalizeOps" in err
    assert "optimization -> lowering" in err
    assert "verification:" in err and "time (ms)" in err


@pytest.mark.parametrize("mode", ["each", "transitions", "off"])
def test_verify_modes(capsys, module_file, mode):
    code, out, _ = run_cli(capsys, "opt", module_file, "--passes", "LambdaLifting",
                           "--verify", mode)
    assert code == 0 and phasec.parse(out).phase == Phase.OPTIMIZATION


# ---------------------------------------------------------------------------
# Errors: one line on stderr, status 1, no traceback
# ---------------------------------------------------------------------------

def test_phase_error(capsys, module_file):
    code, out, err = run_cli(capsys, "opt", module_file, "--passes", "LegalizeOps")
    assert code == 1 and out == ""
    assert err.startswith("phasec opt: error:")
    assert "expects phase optimization, but the module would be in ingestion" in err
    assert "run LambdaLifting first" in err


def test_phase_error_for_passes_in_the_wrong_order(capsys, module_file):
    code, out, err = run_cli(capsys, "opt", module_file, "--passes",
                             "LambdaLifting,LegalizeOps,FoldConstant")
    assert code == 1
    assert "FoldConstant expects phase optimization" in err
    assert "must run before LegalizeOps" in err and "Nothing has run" in err


@pytest.mark.parametrize("spec, expected", [
    # A pass whose required pass cannot run is reported as the user wrote it:
    # no internal Sequential name, no pass the user never named.
    ("LegalizeOps", "misordered passes: LegalizeOps at position 1 cannot run. LegalizeOps "
                    "expects phase optimization, but the module would be in ingestion"),
    # A transition that already happened: remove it, not "run it before itself".
    ("LambdaLifting,LambdaLifting", "LambdaLifting at position 2 cannot run. LambdaLifting "
                                    "expects phase ingestion, but the module would be in "
                                    "optimization"),
])
def test_misordering_names_the_users_pass(capsys, module_file, spec, expected):
    code, out, err = run_cli(capsys, "opt", module_file, "--passes", spec)
    assert code == 1
    assert expected in err
    for internal in ("Sequential 'opt'", "ToNonDataflow", ", (", "must run before LambdaLifting"):
        assert internal not in err
    if spec == "LegalizeOps":
        assert "run LambdaLifting first" in err
    else:
        assert "remove this LambdaLifting" in err


def test_verifier_error(capsys, tmp_path):
    path = tmp_path / "bad_phase.py"
    path.write_text(ILL_FORMED)
    code, out, err = run_cli(capsys, "opt", str(path), "--passes", "Normalize")
    assert code == 1 and out == ""
    assert "not well-formed" in err and "phase optimization" in err
    assert "nested function 'inner'" in err and "LambdaLifting" in err  # the rule's hint


@pytest.mark.parametrize("spec, message", [
    ("Lambdalifting", "did you mean LambdaLifting"),
    ("FuseOps{fuse_level=2}", "no option 'fuse_level'"),
    ("FuseOps{fuse_opt_level=two}", "expects an integer"),
    ("LambdaLifting,,FoldConstant", "expected a pass name"),
])
def test_bad_pipeline_spec(capsys, module_file, spec, message):
    code, out, err = run_cli(capsys, "opt", module_file, "--passes", spec)
    assert code == 2 and message in err


def test_unknown_print_before_pass(capsys, module_file):
    code, _, err = run_cli(capsys, "opt", module_file, "--passes", "LambdaLifting",
                           "--print-before", "FoldConstnt")
    assert code == 2 and "unknown pass 'FoldConstnt'" in err and "FoldConstant" in err


@pytest.mark.parametrize("content, suffix, message", [
    (None, ".py", "no such file"),
    ("def broken(:\n", ".py", "invalid Python syntax"),
    ('{"format": "nope"}', ".json", ""),
    ("\x00\x01binary", ".py", "NUL bytes"),
    ("x = 1\n", ".txt", "unknown file type"),
])
def test_bad_input_files(capsys, tmp_path, content, suffix, message):
    path = tmp_path / f"input{suffix}"
    if content is not None:
        path.write_text(content)
    code, out, err = run_cli(capsys, "opt", str(path), "--passes", "Normalize")
    assert code != 0 and out == ""
    assert err.startswith("phasec opt: error:") and message in err
    assert len(err.strip().splitlines()) <= 3


def test_unknown_output_suffix(capsys, module_file, tmp_path):
    code, _, err = run_cli(capsys, "opt", module_file, "--passes", "Normalize",
                           "-o", str(tmp_path / "out.txt"))
    assert code == 2 and "unknown output type '.txt'" in err
    assert not (tmp_path / "out.txt").exists()


# ---------------------------------------------------------------------------
# phasec passes
# ---------------------------------------------------------------------------

def test_passes_lists_every_registered_pass(capsys):
    code, out, err = run_cli(capsys, "passes")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["PASS", "PHASES", "TRANSITION", "OPT_LEVEL", "REQUIRES"]
    assert max(map(len, lines)) <= 100  # readable in a 100-column terminal
    rows: dict[str, str] = {}
    for line in lines[2:]:
        if line and not line.startswith(" ") and line.split()[0] in list_passes():
            current = line.split()[0]
            rows[current] = line
        elif line.startswith(" ") and rows:  # a wrapped REQUIRES cell
            rows[current] += " " + line.strip()
    assert set(rows) == set(list_passes())
    assert "-> optimization" in rows["LambdaLifting"]
    assert "-> lowering" in rows["LegalizeOps"] and "ToNonDataflow" in rows["LegalizeOps"]
    assert "-> build" in rows["VMBuiltinLower"]
    for req in ("RemovePurityChecking", "CallTIRRewrite", "StaticPlanBlockMemory"):
        assert req in rows["VMBuiltinLower"]
    assert rows["EliminateCommonSubexpr"].split()[1:] == ["optimization", "-", "3", "-"]


def test_passes_verbose_and_json(capsys):
    code, out, _ = run_cli(capsys, "passes", "--verbose")
    assert code == 0 and "fuse_opt_level=-1" in out and "description: " in out
    assert max(map(len, out.splitlines())) <= 100
    code, out, _ = run_cli(capsys, "passes", "--json")
    rows = json.loads(out)
    by_name = {r["pass"]: r for r in rows}
    assert set(by_name) == set(list_passes())
    # Typed values, not table strings (issue 18 #6).
    assert by_name["LambdaLifting"] == {"pass": "LambdaLifting", "phases": ["ingestion"],
                                        "transition": "optimization", "opt_level": 0,
                                        "requires": []}
    assert by_name["EliminateCommonSubexpr"]["opt_level"] == 3
    assert by_name["EliminateCommonSubexpr"]["transition"] is None
    assert "ToNonDataflow" in by_name["LegalizeOps"]["requires"]
    code, out, _ = run_cli(capsys, "passes", "--json", "--verbose")
    verbose = {r["pass"]: r for r in json.loads(out)}
    assert verbose["FuseOps"]["options"]["fuse_opt_level"] == -1


def test_print_ir_dumps_to_stderr_so_stdout_stays_one_module(capsys, module_file):
    # `phasec opt m.py --passes LambdaLifting,PrintIR | phasec-check -` must work:
    # stdout holds the result alone (issue 18 #2).
    code, out, err = run_cli(capsys, "opt", module_file, "--passes", "LambdaLifting,PrintIR")
    assert code == 0
    assert out.count("@I.ir_module") == 1
    assert phasec.parse(out).phase == Phase.OPTIMIZATION
    assert "# PrintIR" in err and "@I.ir_module" in err


@pytest.mark.parametrize("spec, expected", [
    ("FuseOps{fuse_opt_level=99}", "must be an int from -1 to 4"),
    ("LambdaLifting,DeadCodeElimination{entry_functions=[nope]}",
     "names 'nope', which the module does not define; its functions are main"),
])
def test_pass_options_are_validated(capsys, module_file, spec, expected):
    # Issue 18 #11: values that mean nothing are refused, saying what is allowed.
    code, out, err = run_cli(capsys, "opt", module_file, "--passes", spec)
    assert code != 0 and out == ""
    assert expected in err


def test_unknown_parallel_runtime_is_refused():
    import subprocess
    import sys

    code = ("from phasec.backend.llvm.jit import host_target\n"
            "try:\n    host_target()\nexcept Exception as e:\n    print(type(e).__name__, e)\n")
    env = {**__import__("os").environ, "PHASEC_PARALLEL_RUNTIME": "bogus"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    # an InputError (exit 2 from the CLI), as for every PHASEC_* variable (issue 27)
    assert "InputError the environment variable PHASEC_PARALLEL_RUNTIME must be 'pool' " \
           "(the default) or 'spawn', not 'bogus'" in out.stdout


@pytest.mark.parametrize("argv, expected", [
    (["-m", "phasec", "--version"], f"phasec {phasec.__version__}"),
    (["-m", "phasec.verifier.cli", "--version"], f"phasec-check {phasec.__version__}"),
    (["-m", "phasec", "passes"], "LambdaLifting"),
])
def test_version_and_python_dash_m(argv, expected):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert expected in proc.stdout


@pytest.mark.parametrize("argv, status", [
    # one convention for every subcommand: input or usage errors 2, failed checks 1
    (["run", "missing.py"], 2),
    (["opt", "missing.py", "--passes", "Normalize"], 2),
    (["build", "missing.py", "-o", "x.pvm"], 2),
    (["fuzz", "--replay", "missing.py"], 2),
    (["run", "--exmaple", "cnn"], 2),
])
def test_exit_status_convention(capsys, argv, status):
    code, out, err = run_cli(capsys, *argv)
    assert code == status, err
    assert err.count("error") >= 1


def test_misspelled_option_suggests_the_right_one_with_the_subcommand_usage(capsys):
    code, _, err = run_cli(capsys, "run", "--exmaple", "cnn")
    assert code == 2
    assert err.startswith("usage: phasec run")
    assert "did you mean --example?" in err


def test_directory_input_says_it_is_a_directory(capsys, tmp_path):
    code, _, err = run_cli(capsys, "run", str(tmp_path))
    assert code == 2 and "it is a directory, not a module file" in err
    assert "unknown file type" not in err


def test_parse_error_shows_source_line_and_caret(capsys, tmp_path):
    path = tmp_path / "bad.py"
    path.write_text('@I.ir_module\nclass M:\n    @R.function\n'
                    '    def main(x: R.Tensor((2,), "float32")):\n        return R.foo(x)\n')
    code, _, err = run_cli(capsys, "run", str(path))
    assert code == 2
    lines = err.splitlines()
    assert lines[0].endswith("unknown operator R.foo (did you mean R.floor?)")
    assert lines[1].strip() == "return R.foo(x)"
    assert lines[2].strip().startswith("^")
    assert lines[2].index("^") == lines[1].index("R.foo")


def test_print_after_a_named_pass_and_after_changes(capsys, module_file):
    spec = "LambdaLifting,FoldConstant,CanonicalizeBindings,FuseOps"
    code, out, err = run_cli(capsys, "opt", module_file, "--passes", spec,
                             "--print-after", "FoldConstant")
    assert code == 0
    assert err.count("# After ") == 1 and "# After FoldConstant (phase optimization)" in err
    code, out, err = run_cli(capsys, "opt", module_file, "--passes", spec, "--print-after-change")
    dumped = [line.split()[2] for line in err.splitlines() if line.startswith("# After ")]
    # LambdaLifting changes the phase; every dumped pass changed the module,
    # checked independently by running the passes one at a time.
    mod = phasec.load(module_file)
    changed = []
    for name in spec.split(","):
        after = parse_pipeline(name)(mod)
        if not structural_equal(after, mod):
            changed.append(name)
        mod = after
    assert dumped == changed and "LambdaLifting" in dumped
    code, _, err = run_cli(capsys, "opt", module_file, "--passes", spec,
                           "--print-after", "FoldConstnt")
    assert code == 2 and "--print-after: unknown pass 'FoldConstnt'" in err

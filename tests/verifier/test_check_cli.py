"""The ``phasec-check`` command line: formats, exit codes, directories,
--explain, --infer-phase, --phase, and bad input (exit 2, no traceback)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import phasec
from phasec.verifier.cli import main
from phasec.verifier.report import CheckReport

from helpers.paths import VERIFIER_CASES

CASES = VERIFIER_CASES


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(args), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def good(tmp_path: Path) -> Path:
    path = tmp_path / "good.py"
    shutil.copy(CASES / "ph202_good.py", path)
    return path


@pytest.fixture
def bad(tmp_path: Path) -> Path:
    path = tmp_path / "bad.py"
    shutil.copy(CASES / "ph202_bad.py", path)
    return path


def _marked_line(path: Path) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if "# <-" in line)


# ---------------------------------------------------------------------------
# Exit codes and text output
# ---------------------------------------------------------------------------

def test_clean_file_exits_0(good: Path) -> None:
    status, out, err = run(str(good))
    assert status == 0, out + err
    assert "0 errors" in out and err == ""


def test_violations_exit_1_with_location_source_caret_and_help(bad: Path) -> None:
    status, out, _ = run(str(bad))
    assert status == 1
    line = _marked_line(bad)
    source = bad.read_text().splitlines()[line - 1]
    col = source.index("R.add") + 1
    lines = out.splitlines()
    first = lines.index(next(l for l in lines if l.startswith(f"{bad}:{line}:")))
    assert lines[first] == (f"{bad}:{line}:{col}: error[PH202]: high-level operator R.add in "
                            "phase lowering (in function 'main', binding 'y')")
    assert lines[first + 1] == "  " + source
    caret = lines[first + 2]
    assert caret.index("^") == 2 + col - 1 and caret.strip().startswith("^~")
    assert lines[first + 3].startswith("  help: run LegalizeOps")
    assert out.count("error[PH202]") == 2
    assert "2 errors" in lines[-1]


def test_phase_option_overrides_the_declared_phase(bad: Path, good: Path) -> None:
    assert run("--phase", "optimization", str(bad))[0] == 0
    assert run("--phase", "1", str(bad))[0] == 0
    status, out, _ = run("--phase", "build", str(good))
    assert status == 1 and "error[PH301]" in out and "error[PH303]" in out


def test_warnings_alone_exit_0(tmp_path: Path) -> None:
    path = tmp_path / "warn.py"
    path.write_text((CASES / "wf006_good.py").read_text().replace(
        'z: R.Tensor((m, 3), "float32") = R.add(y, y)',
        'z: R.Tensor((5, 3), "float32") = R.add(y, y)'))
    status, out, _ = run(str(path))
    assert status == 0 and "warning[WF402]" in out and "0 errors, 1 warning" in out


# ---------------------------------------------------------------------------
# Formats
# ---------------------------------------------------------------------------

def test_json_format(bad: Path, good: Path) -> None:
    status, out, err = run("--format", "json", str(bad), str(good))
    assert status == 1 and err == ""
    report = CheckReport.model_validate_json(out)
    assert report.exit_code == 1 and report.errors == 2 and report.input_errors == 0
    by_path = {f.path: f for f in report.files}
    assert by_path[str(good)].status == "ok" and by_path[str(good)].diagnostics == []
    entry = by_path[str(bad)]
    assert entry.status == "violations"
    assert entry.declared_phase == entry.checked_phase == "lowering"
    first = entry.diagnostics[0]
    assert first.code == "PH202" and first.severity == "error"
    assert first.title.startswith("High-level operator")
    assert first.file == str(bad) and first.line == _marked_line(bad)
    assert first.column >= 1 and first.function == "main" and first.binding == "y"
    assert "LegalizeOps" in first.help


def test_github_format(bad: Path) -> None:
    status, out, err = run("--format", "github", str(bad))
    assert status == 1
    lines = out.splitlines()
    assert len(lines) == 2
    line = _marked_line(bad)
    col = bad.read_text().splitlines()[line - 1].index("R.add") + 1
    assert lines[0].startswith(f"::error file={bad},line={line},col={col},")
    assert ",title=PH202::high-level operator R.add in phase lowering%0Ahelp: run LegalizeOps" \
        in lines[0]
    assert "2 errors" in err  # the summary stays off stdout


def test_github_format_escapes_properties(tmp_path: Path) -> None:
    path = tmp_path / "a,b:c.py"
    shutil.copy(CASES / "ph202_bad.py", path)
    _, out, _ = run("--format", "github", str(path))
    assert "a%2Cb%3Ac.py" in out.splitlines()[0]


# ---------------------------------------------------------------------------
# Directories, JSON modules
# ---------------------------------------------------------------------------

def test_directory_is_searched_recursively(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / ".hidden").mkdir()
    shutil.copy(CASES / "ph202_good.py", tmp_path / "a.py")
    shutil.copy(CASES / "wf104_good.py", tmp_path / "sub" / "b.py")
    (tmp_path / "sub" / "notes.txt").write_text("not a module")
    (tmp_path / ".hidden" / "broken.py").write_text("this is not a module")
    status, out, _ = run("--format", "json", str(tmp_path))
    assert status == 0
    report = CheckReport.model_validate_json(out)
    assert [Path(f.path).name for f in report.files] == ["a.py", "b.py"]


def test_fixture_directory_reports_every_bad_file() -> None:
    status, out, _ = run("--format", "json", str(CASES))
    assert status == 1
    report = CheckReport.model_validate_json(out)
    for f in report.files:
        assert f.status == ("violations" if f.path.endswith("_bad.py") else "ok"), f.path


def test_json_module_file(tmp_path: Path) -> None:
    mod = phasec.parse((CASES / "ph201_bad.py").read_text(), "ph201_bad.py")
    path = tmp_path / "module.json"
    path.write_text(phasec.to_json(mod))
    status, out, _ = run(str(path))
    assert status == 1 and "error[PH201]" in out
    # spans in the JSON name the original TVMScript file
    assert "ph201_bad.py:" in out
    assert run("--phase", "optimization", str(path))[0] == 0


# ---------------------------------------------------------------------------
# --explain, --list-rules, --infer-phase
# ---------------------------------------------------------------------------

def test_explain() -> None:
    status, out, _ = run("--explain", "wf003")
    assert status == 0
    assert out.startswith("WF003: Dataflow variable used outside its dataflow block")
    assert "R.output" in out and "How to fix:" in out


def test_explain_unknown_code_exits_2() -> None:
    status, out, err = run("--explain", "WF999")
    assert status == 2 and out == ""
    assert "unknown rule code 'WF999'" in err


def test_list_rules() -> None:
    status, out, _ = run("--list-rules")
    assert status == 0
    assert out.splitlines()[0].startswith("WF001  ingestion")
    assert any(l.startswith("PH303  build") for l in out.splitlines())


def test_infer_phase(tmp_path: Path) -> None:
    status, out, _ = run("--infer-phase", str(CASES / "ph201_bad.py"),
                         str(CASES / "ph303_good.py"))
    assert status == 0
    assert f"{CASES / 'ph201_bad.py'}: optimization (declared: lowering)" in out
    assert f"{CASES / 'ph303_good.py'}: build (declared: build)" in out
    status, out, _ = run("--infer-phase", "--format", "json", str(CASES / "ph101_bad.py"))
    assert status == 0
    assert CheckReport.model_validate_json(out).files[0].inferred_phase == "ingestion"


def test_infer_phase_of_ill_formed_module_exits_1() -> None:
    status, out, _ = run("--infer-phase", str(CASES / "wf402_bad.py"))
    assert status == 1
    assert "not well-formed at any phase" in out and "error[WF402]" in out


def test_infer_phase_with_phase_is_a_usage_error(good: Path) -> None:
    status, _, err = run("--infer-phase", "--phase", "build", str(good))
    assert status == 2 and "cannot be used together" in err


# ---------------------------------------------------------------------------
# Bad input: exit 2, a clear message, no traceback
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name, content, message", [
    ("syntax.py", "@I.ir_module\nclass M:\n    def f(:\n", "syntax"),
    ("empty.py", "", "empty"),
    ("binary.py", b"\x7fELF\x00\x01\x02\x03", "binary"),
    ("latin1.py", b"# caf\xe9\n", "UTF-8"),
    ("schema.json", '{"format": "phasec.ir_module", "version": 1, '
                    '"functions": {"main": {"node": "Function"}}}', "functions.main"),
    ("garbage.json", "{not json", "JSON"),
    ("code.py", 'open("PWNED", "w").write("x")\n', "module"),
])
def test_bad_input_exits_2(tmp_path: Path, name: str, content: str | bytes, message: str) -> None:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    status, out, err = run(str(path))
    assert status == 2
    first = out.splitlines()[0]
    assert first.startswith(f"{path}") and ": error[IN0" in first
    assert message.lower() in out.lower()
    assert "Traceback" not in out + err
    assert not (tmp_path / "PWNED").exists() and not Path("PWNED").exists()


def test_parse_error_shows_line_column_and_caret(tmp_path: Path) -> None:
    path = tmp_path / "typo.py"
    path.write_text((CASES / "ph202_bad.py").read_text().replace("R.nn.relu(y)", "R.nn.reluu(y)"))
    status, out, _ = run(str(path))
    assert status == 2
    line = next(i for i, l in enumerate(path.read_text().splitlines(), 1) if "reluu" in l)
    lines = out.splitlines()
    assert lines[0].startswith(f"{path}:{line}:") and "reluu" in lines[0]
    assert "reluu" in lines[1] and lines[2].strip().startswith("^")


def test_input_errors_dominate_violations(tmp_path: Path, bad: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("x = (\n")
    status, out, _ = run(str(bad), str(broken))
    assert status == 2
    assert "error[PH202]" in out and f"{broken}:" in out


@pytest.mark.parametrize("args, message", [
    ((), "no PATH"),
    (("--phase", "linking", "x.py"), "invalid phase"),
    (("--format", "xml", "x.py"), "invalid choice"),
    (("--bogus", "x.py"), "unrecognized arguments"),
])
def test_usage_errors_exit_2(args: tuple[str, ...], message: str) -> None:
    status, out, err = run(*args)
    assert status == 2 and out == ""
    assert "usage: phasec-check" in err and message in err


def test_missing_path_and_empty_directory_exit_2(tmp_path: Path) -> None:
    status, out, _ = run(str(tmp_path / "nope.py"))
    assert status == 2 and "no such file or directory" in out
    (tmp_path / "empty").mkdir()
    status, out, _ = run(str(tmp_path / "empty"))
    assert status == 2 and "no TVMScript (.py) or JSON (.json) module files" in out


def test_an_onnx_model_points_to_phasec_import(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = tmp_path / "model.onnx"
    onnx.save(helper.make_model(graph), model)
    status, out, _ = run(str(model))
    assert status == 2 and "an ONNX model" in out and "phasec import MODEL.onnx" in out, out


def test_console_script_process(tmp_path: Path) -> None:
    """The real process: exit status, and no traceback for a binary file."""
    binary = tmp_path / "bin.json"
    binary.write_bytes(bytes(range(256)))
    env = dict(os.environ)
    proc = subprocess.run([sys.executable, "-m", "phasec.verifier.cli", str(binary),
                           str(CASES / "ph202_good.py")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "binary" in proc.stdout and "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "phasec.verifier.cli", "--explain", "PH303"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("PH303: ")

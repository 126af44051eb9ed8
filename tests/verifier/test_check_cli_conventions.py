"""phasec-check in CI and pre-commit (issue 18): JSON for --list-rules and
--explain, SARIF output, --exclude, skipping files that are not modules, IN
codes for unreadable inputs, colour rules, option suggestions, the shipped
pre-commit hook."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from phasec.verifier.cli import main
from phasec.verifier.input_codes import INPUT_CODES
from phasec.verifier.rules import all_rules

from helpers.paths import REPO, VERIFIER_CASES

CASES = VERIFIER_CASES


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def run(*args: str, stdout: io.StringIO | None = None) -> tuple[int, str, str]:
    out, err = stdout or io.StringIO(), io.StringIO()
    status = main(list(args), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A source tree: one bad module, one good, ordinary Python, a package.json."""
    shutil.copy(CASES / "ph202_bad.py", tmp_path / "bad.py")
    shutil.copy(CASES / "ph202_good.py", tmp_path / "good.py")
    (tmp_path / "helper.py").write_text("def f(x):\n    return x + 1\n")
    (tmp_path / "package.json").write_text('{"name": "web"}\n')
    (tmp_path / "broken.py").write_text("@I.ir_module\nclass M:\n    def (\n")
    return tmp_path


def test_list_rules_and_explain_as_json():
    status, out, _ = run("--list-rules", "--format", "json")
    records = json.loads(out)
    assert status == 0
    codes = [r["code"] for r in records]
    assert codes[:len(all_rules())] == [r.code for r in all_rules()]
    assert set(INPUT_CODES) <= set(codes)
    assert {"code", "phase", "title", "severity"} == set(records[0])
    status, out, _ = run("--explain", "ph201", "--format", "json")
    doc = json.loads(out)
    assert status == 0 and doc["code"] == "PH201" and doc["phase"] == "lowering"
    assert doc["explanation"] and doc["help"]
    status, out, _ = run("--explain", "IN002")
    assert status == 0 and out.startswith("IN002: TVMScript syntax error")


def test_explain_with_a_file_is_a_usage_error(tree: Path):
    status, out, err = run("--explain", "PH201", str(tree / "bad.py"))
    assert status == 2 and out == ""
    assert "--explain takes no PATH" in err


def test_files_that_are_not_modules_are_skipped_not_unreadable(tree: Path):
    status, out, _ = run(str(tree))
    assert status == 2  # broken.py is a module file with a syntax error
    assert "helper.py" not in out and "package.json" not in out
    assert "broken.py:3:" in out and "error[IN002]" in out
    assert "(skipped 2 files that are not a module)" in out
    assert "2 modules" in out or "checked 2 modules" in out


def test_exclude_glob(tree: Path):
    status, out, _ = run("--exclude", "broken.py", "--exclude", "*/bad.py", str(tree))
    assert status == 0, out
    assert "checked 1 module: 0 errors" in out


def test_sarif_output(tree: Path):
    status, out, _ = run("--format", "sarif", str(tree))
    log = json.loads(out)
    # The fields SARIF 2.1.0 requires of a log, a run, a tool and a result.
    assert log["version"] == "2.1.0" and len(log["runs"]) == 1
    run0 = log["runs"][0]
    driver = run0["tool"]["driver"]
    assert driver["name"] == "phasec-check"
    rule_ids = [r["id"] for r in driver["rules"]]
    assert "PH202" in rule_ids and "IN002" in rule_ids
    by_rule: dict[str, dict] = {}
    for result in run0["results"]:
        by_rule.setdefault(result["ruleId"], result)  # the first of each rule
    ph202 = by_rule["PH202"]
    assert ph202["level"] == "error" and ph202["message"]["text"]
    assert rule_ids[ph202["ruleIndex"]] == "PH202"
    loc = ph202["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"].endswith("bad.py")
    marked = next(i for i, line in enumerate((tree / "bad.py").read_text().splitlines(), 1)
                  if "# <-" in line)
    assert loc["region"]["startLine"] == marked and loc["region"]["startColumn"] >= 1
    assert by_rule["IN002"]["locations"][0]["physicalLocation"]["region"]["startLine"] == 3
    assert status == 2


def test_colour_only_on_a_terminal_and_never_with_no_color(tree: Path, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    _, out, _ = run(str(tree / "bad.py"), stdout=_Tty())
    assert "\033[1;31merror[PH202]\033[0m" in out
    _, plain, _ = run(str(tree / "bad.py"))
    assert "\033[" not in plain
    monkeypatch.setenv("NO_COLOR", "1")
    _, out, _ = run(str(tree / "bad.py"), stdout=_Tty())
    assert "\033[" not in out


def test_misspelled_option_suggests_the_right_one(tree: Path):
    status, _, err = run("--fromat", "json", str(tree))
    assert status == 2 and "did you mean --format?" in err


def test_pre_commit_hook_is_shipped():
    text = (REPO / ".pre-commit-hooks.yaml").read_text()
    assert "id: phasec-check" in text and "entry: phasec-check" in text
    assert "language: python" in text


def test_named_files_are_checked_unless_skip_non_modules(tree: Path):
    # A file named on the command line is checked whatever it holds...
    status, out, _ = run(str(tree / "helper.py"))
    assert status == 2 and "error[IN002]" in out
    # ...unless the pre-commit hook's --skip-non-modules says otherwise.
    status, out, _ = run("--skip-non-modules", str(tree / "helper.py"), str(tree / "good.py"))
    assert status == 0 and "checked 1 module: 0 errors" in out and "skipped 1 file" in out

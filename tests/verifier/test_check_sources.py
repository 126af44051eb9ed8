"""phasec-check as a newcomer meets it (issue 32): the pre-commit hook on
ordinary Python files (item 3), ``--exclude`` as ruff and flake8 users expect
it (item 4), and directories that hold no module (item 12)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from phasec.verifier.cli import main
from phasec.verifier.sources import find_modules

from helpers.paths import REPO

GOOD_CLASS = '''\
@I.ir_module
class {name}:
    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        y = R.add(x, x)
        return y
'''

#: WF405: the operands cannot broadcast (the marked line, column of ``R.add``)
BAD_CLASS = '''\
@I.ir_module
class {name}:
    @R.function
    def main(x: R.Tensor((4,), "float32"), z: R.Tensor((3,), "float32")) -> R.Tensor((4,), "float32"):
        y = R.add(x, z)  # <- WF405
        return y
'''

HEADER = "from tvm.script import ir as I\nfrom tvm.script import relax as R\n\n\n"


def indent(text: str, by: int) -> str:
    return "".join(" " * by + line if line.strip() else line
                   for line in text.splitlines(keepends=True))


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(args), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def hook(*paths: Path) -> tuple[int, str, str]:
    """What the shipped pre-commit hook runs."""
    return run("--skip-non-modules", *map(str, paths))


def marked(path: Path, mark: str = "# <-") -> tuple[int, int]:
    """(line, 1-based column of ``R.add``) of the marked line."""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if mark in line:
            return number, line.index("R.add") + 1
    raise AssertionError("no marked line")


def test_the_hook_entry_is_the_one_tested():
    text = (REPO / ".pre-commit-hooks.yaml").read_text()
    assert "entry: phasec-check --skip-non-modules" in text


# ---------------------------------------------------------------------------
# Item 3: the pre-commit hook on ordinary Python files
# ---------------------------------------------------------------------------

def test_module_inside_a_test_function_is_checked(tmp_path: Path):
    path = tmp_path / "test_fuse.py"
    path.write_text("import tvm\n" + HEADER + "def test_add():\n"
                    + indent(GOOD_CLASS.format(name="Before"), 4)
                    + "    assert Before is not None\n")
    status, out, _ = hook(path)
    assert status == 0, out
    assert "checked 1 module: 0 errors" in out


def test_model_file_with_a_main_block_is_checked(tmp_path: Path):
    path = tmp_path / "model.py"
    path.write_text(HEADER + GOOD_CLASS.format(name="Model")
                    + '\n\nif __name__ == "__main__":\n    print(Model)\n')
    status, out, _ = hook(path)
    assert status == 0, out
    assert "checked 1 module: 0 errors" in out


def test_phasec_own_sources_pass_the_hook():
    # verifier/injection.py (once phasec/testing/mutations.py) holds TVMScript
    # in strings; no file of phasec is an ill-formed module.
    files = sorted(str(p) for folder in ("phasec", "verifier", "passes")
                   for p in (REPO / folder).rglob("*.py"))
    assert any(f.endswith(os.path.join("verifier", "injection.py")) for f in files)
    status, out, _ = run("--skip-non-modules", *files)
    assert status == 0, out
    assert "error" not in out.split("checked")[0]


def test_a_decorator_in_a_string_or_comment_is_no_module(tmp_path: Path):
    path = tmp_path / "strings.py"
    path.write_text('DOC = """\n@I.ir_module\nclass NotReal:\n    pass\n"""\n'
                    "# @I.ir_module\n"
                    "TEMPLATE = '''\n    @I.ir_module\n    class Nested:\n        x = (\n'''\n")
    status, out, _ = hook(path)
    assert status == 0, out
    assert "checked 0 modules" in out and "skipped 1 file that is not a module" in out
    assert find_modules(path.read_text()) == []


def test_violation_in_a_nested_module_points_into_the_file(tmp_path: Path):
    path = tmp_path / "test_bad.py"
    path.write_text(HEADER + "class TestThings:\n    def test_it(self):\n"
                    + indent(BAD_CLASS.format(name="Bad"), 8) + "        assert Bad\n")
    status, out, _ = hook(path)
    assert status == 1, out
    line, col = marked(path)
    first = out.splitlines()[0]
    assert first.startswith(f"{path}:{line}:{col}: error[WF405]"), out
    # the source line and the caret are the file's own, at the original indentation
    source, caret = out.splitlines()[1:3]
    assert source == "  " + path.read_text().splitlines()[line - 1]
    assert caret.index("^") == source.index("R.add")
    report = json.loads(run("--format", "json", str(path))[1])
    assert [(f["module"], f["status"]) for f in report["files"]] == [("Bad", "violations")]
    assert report["files"][0]["diagnostics"][0]["column"] == col


def test_parse_error_in_a_nested_module_points_into_the_file(tmp_path: Path):
    path = tmp_path / "test_typo.py"
    body = indent(GOOD_CLASS.format(name="Typo").replace("R.add(x, x)", "R.addd(x, x)"), 4)
    path.write_text(HEADER + "def test_typo():\n" + body)
    status, out, _ = hook(path)
    assert status == 2
    line = next(i for i, l in enumerate(path.read_text().splitlines(), 1) if "R.addd" in l)
    col = path.read_text().splitlines()[line - 1].index("R.addd") + 1
    assert out.startswith(f"{path}:{line}:{col}: error[IN002]: unknown operator R.addd"), out


def test_every_module_of_a_file_is_checked_with_its_imports_in_scope(tmp_path: Path):
    path = tmp_path / "test_many.py"
    path.write_text(
        "import pytest\n\n"
        "def test_aliases():\n"
        "    from tvm.script import ir as IR, relax as RX\n\n"
        + indent(GOOD_CLASS.format(name="First").replace("R.", "RX.").replace("@I.", "@IR."), 4)
        + "\n\nclass TestMore:\n"
        "    def test_good(self):\n"
        "        from tvm.script import ir as I, relax as R\n"
        + indent(GOOD_CLASS.format(name="Second"), 8)
        + "\n    def test_bad(self):\n"
        "        from tvm.script import ir as I, relax as R\n"
        + indent(BAD_CLASS.format(name="Third"), 8))
    status, out, _ = run("--format", "json", "--skip-non-modules", str(path))
    report = json.loads(out)
    assert [(f["module"], f["status"]) for f in report["files"]] == [
        ("First", "ok"), ("Second", "ok"), ("Third", "violations")]
    assert status == 1
    line, col = marked(path)
    diag = report["files"][2]["diagnostics"][0]
    assert (diag["code"], diag["line"], diag["column"]) == ("WF405", line, col)
    status, out, _ = run("--infer-phase", str(path))
    assert f"{path} (class First): optimization (declared: ingestion)" in out


def test_modules_marked_ill_formed_on_purpose_are_skipped(tmp_path: Path):
    path = tmp_path / "test_wf.py"
    bad = BAD_CLASS.format(name="Bad").replace("@I.ir_module", "@I.ir_module(check_well_formed=False)")
    path.write_text(HEADER + "def test_wf():\n" + indent(bad, 4)
                    + "\n\ndef test_ok():\n" + indent(GOOD_CLASS.format(name="Ok"), 4))
    status, out, _ = hook(path)
    assert status == 0, out
    assert "checked 1 module: 0 errors" in out
    assert "skipped 1 module declared @I.ir_module(check_well_formed=False)" in out


def test_module_files_are_still_parsed_whole(tmp_path: Path):
    path = tmp_path / "module.py"
    path.write_text(HEADER + BAD_CLASS.format(name="Module"))
    [source] = find_modules(path.read_text())
    assert source.name is None and source.text == path.read_text()
    status, out, _ = hook(path)
    line, col = marked(path)
    assert status == 1 and out.startswith(f"{path}:{line}:{col}: error[WF405]")


def test_files_that_are_not_python(tmp_path: Path):
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n    pass\n")
    status, out, _ = hook(broken)
    assert status == 0 and "skipped 1 file" in out  # not ours to report
    broken.write_text("@I.ir_module\nclass M:\n    def (\n")
    status, out, _ = hook(broken)
    assert status == 2 and f"{broken}:3:" in out and "error[IN002]" in out


def test_hook_in_a_real_git_commit_flow(tmp_path: Path):
    """The console script, as pre-commit calls it: relative paths, several files."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text(
        HEADER + "def test_a():\n" + indent(GOOD_CLASS.format(name="A"), 4))
    (tmp_path / "model.py").write_text(HEADER + GOOD_CLASS.format(name="M")
                                       + '\nif __name__ == "__main__":\n    pass\n')
    (tmp_path / "util.py").write_text("def helper():\n    return '@I.ir_module'\n")
    proc = subprocess.run([sys.executable, "-m", "phasec.verifier.cli", "--skip-non-modules", "tests/test_a.py", "model.py",
                           "util.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "checked 2 modules: 0 errors" in proc.stdout
    assert "skipped 1 file that is not a module" in proc.stdout


# ---------------------------------------------------------------------------
# Item 4: --exclude
# ---------------------------------------------------------------------------

@pytest.fixture
def src(tmp_path: Path) -> Path:
    """src/pkg/model.py (good), src/build/gen.py and src/pkg/build/deep/gen.py (bad)."""
    root = tmp_path / "src"
    for sub in ("pkg", "build", "pkg/build/deep"):
        (root / sub).mkdir(parents=True)
    (root / "pkg" / "model.py").write_text(HEADER + GOOD_CLASS.format(name="Model"))
    (root / "build" / "gen.py").write_text(HEADER + BAD_CLASS.format(name="Gen"))
    (root / "pkg" / "build" / "deep" / "gen.py").write_text(HEADER + BAD_CLASS.format(name="G"))
    return root


def test_readme_exclude_example_excludes(src: Path, monkeypatch):
    monkeypatch.chdir(src.parent)
    status, out, _ = run("--exclude", "build/*", "src/")
    assert "src/build/gen.py" not in out
    # 'build/*' is relative to the directory given: src/pkg/build is another one
    assert status == 1 and "src/pkg/build/deep/gen.py" in out
    status, out, _ = run("--exclude", "src/build/*", "src/")  # the path as written
    assert "src/build/gen.py" not in out and status == 1


@pytest.mark.parametrize("pattern", ["build", "build/", "b*d"])
def test_exclude_a_name_prunes_every_such_directory(src: Path, pattern: str, monkeypatch):
    scanned: list[str] = []
    real_scandir = os.scandir

    def spy(path="."):
        scanned.append(os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", spy)
    status, out, _ = run("--exclude", pattern, str(src))
    assert status == 0, out
    assert "checked 1 module: 0 errors" in out
    assert scanned and not any("build" in Path(p).parts for p in scanned), scanned


def test_exclude_applies_to_named_files_as_pre_commit_passes_them(src: Path, monkeypatch):
    monkeypatch.chdir(src)
    status, out, _ = run("--skip-non-modules", "--exclude", "build",
                         "build/gen.py", "pkg/build/deep/gen.py", "pkg/model.py")
    assert status == 0, out
    assert "checked 1 module: 0 errors" in out


def test_exclude_file_name_glob(src: Path):
    status, out, _ = run("--exclude", "gen.py", str(src))
    assert status == 0 and "checked 1 module" in out
    status, out, _ = run("--exclude", "*.py", str(src / "pkg"))
    assert status == 2 and "no TVMScript (.py) or JSON (.json) module files" in out


def test_exclude_is_documented_in_help(capsys):
    status, _, _ = run("--help")  # argparse prints --help to sys.stdout
    assert status == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "matches any one component of a path" in text
    assert "relative to the directory given ('build/*')" in text
    assert "a matching directory is not searched" in text
    readme = (REPO / "README.md").read_text()
    assert "phasec-check --exclude build src/" in readme
    assert "a matching directory is not searched" in " ".join(readme.split())


# ---------------------------------------------------------------------------
# Item 12: a directory with nothing to check
# ---------------------------------------------------------------------------

def test_directory_without_modules_is_an_input_error_like_an_empty_one(tmp_path: Path):
    empty = tmp_path / "empty"
    empty.mkdir()
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "helper.py").write_text("def f(x):\n    return x + 1\n")
    (plain / "package.json").write_text('{"name": "web"}\n')
    status_empty, out_empty, _ = run(str(empty))
    status_plain, out_plain, _ = run(str(plain))
    assert status_empty == status_plain == 2
    assert f"{plain}: error[IN001]: directory holds no module" in out_plain
    assert "none of its 2 .py/.json files" in out_plain
    # a directory with a module beside it is fine, and so is one that has any
    (plain / "model.py").write_text(HEADER + GOOD_CLASS.format(name="M"))
    status, out, _ = run(str(plain))
    assert status == 0 and "skipped 2 files that are not a module" in out


def test_directory_rule_is_documented():
    from phasec.verifier import cli

    assert "holds no module at all is an input error" in " ".join(cli.__doc__.split())

"""Mutation testing of phasec's own core: how many planted bugs its tests kill.

    python bench/bench_core_mutation.py                  # every mutant of the core modules
    python bench/bench_core_mutation.py --files phasec/ir/phase.py
    python bench/bench_core_mutation.py --quick          # a smoke run: phase.py only

Each mutant (an ``ast`` mutation, see ``bench/_core_mutants.py``) is run
against only the tests that execute its line, fastest first, stopping at the
first failure. Per-test line coverage is collected once (coverage.py, with
each test as a context, subprocesses included) and cached under ``--work``;
the memo tables in :data:`MEMOS` are emptied before each test, so the code
that fills them is credited to every test that uses them, not only to the
first (``--recollect`` after changing them).

How a mutant runs, without ever writing the module file: a server process
imports pytest, the tests' conftest and phasec once, then forks a child per
mutant, which swaps the code object of the function holding the mutation
(every live function with that code: methods, closures, decorated
functions) and runs ``pytest.main`` on the selected tests; the tests'
subprocesses (CLI tests) import the mutated module through an import hook
(``bench/_mutant_hook/sitecustomize.py``). A mutation at module or class
level, or one that changes a function's closure, runs the tests in a fresh
interpreter with the import hook alone. Each test in a child has a time limit
(``--timeout-factor`` times its measured time, plus 10 s), and each child
one for all its tests (the same factor times their sum, plus 20 s); a child
that exceeds it is killed with its process group.

Verdicts: *killed* (a test failed), *survived*, *timeout* (counted as
killed: the mutant made a test hang), *uncovered* (no test executes the
line; counted as survived) and *equivalent* (listed in
``bench/core_mutation_equivalent.txt`` with the reason; excluded from the
score). Score = (killed + timeout) / (all - equivalent).

Needs coverage.py in the environment (a benchmark dependency, not one of
phasec's: ``pip install coverage``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import sys
import time
import types
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_BENCH = Path(__file__).resolve().parent
_ROOT = _BENCH.parent
sys.path.insert(0, str(_BENCH))
import _core_mutants  # noqa: E402  (bench/ on sys.path first)

_HOOK = _BENCH / "_mutant_hook"
EQUIVALENT_FILE = _BENCH / "core_mutation_equivalent.txt"

#: module file -> the functions (qualname prefixes) to mutate; None: all of it
DEFAULT_TARGETS: dict[str, tuple[str, ...] | None] = {
    "phasec/ir/phase.py": None,
    "phasec/transform/pass_infra.py": None,
    "phasec/transform/phase_pipeline.py": None,
    "verifier/rules/phase.py": None,
    "verifier/rules/scope.py": None,
    "verifier/rules/normal_form.py": None,
    "verifier/rules/module.py": None,
    "verifier/checker.py": None,
    # only the build-phase check of VM codegen, not the code generator
    "phasec/backend/vm/codegen.py": ("codegen", "_verify"),
}
DEFAULT_TESTS = ("tests/ir", "tests/transform", "tests/verifier", "tests/backend/vm",
                 "tests/pipeline", "tests/testing/test_mutations.py",
                 "tests/testing/test_mutation_choices.py")
#: module-level memo tables that the code under test fills on first use. Two
#: runs would otherwise misjudge the code that fills them: (1) coverage
#: would credit that code to the first test that filled the table only (the
#: checker's dispatch tables: 6 tests, none of which notices a wrong table),
#: so a mutant of it would run against those few tests; (2) a forked child
#: would inherit a table the parent filled and never run the mutated code.
#: So the coverage run empties them before every test, and the child empties
#: them once the mutant's code is swapped in.
MEMOS: dict[str, tuple[str, ...]] = {"verifier/checker.py": ("_DISPATCH",)}
#: installed module name of a repository file (verifier/ installs as phasec.verifier)
_PACKAGE_DIRS = {"verifier": "phasec.verifier", "passes": "phasec.passes"}
#: the coverage context of code run when the modules are imported
IMPORT_TIME = "<import>"


def module_name(path: str) -> str:
    parts = list(Path(path).with_suffix("").parts)
    if parts[0] in _PACKAGE_DIRS:
        parts[0] = _PACKAGE_DIRS[parts[0]]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def clear_memos(files: list[str]) -> None:
    """Empty the :data:`MEMOS` tables of those ``files`` already imported."""
    for f in files:
        module = sys.modules.get(module_name(f))
        for memo in MEMOS.get(f, ()) if module is not None else ():
            getattr(module, memo).clear()


# -- coverage: which tests execute which line -------------------------------------
class _CoveragePlugin:
    """Per-test contexts and durations, and which tests fail unmutated."""

    def __init__(self, cov: Any, files: list[str]) -> None:
        self.cov = cov
        self.files = files
        self.tests: dict[str, dict[str, Any]] = {}

    def pytest_runtest_protocol(self, item: Any, nextitem: Any) -> None:
        # every test that uses a memo table is credited with filling it
        clear_memos(self.files)
        self.cov.switch_context(item.nodeid)
        os.environ["PHASEC_CORE_CONTEXT"] = item.nodeid
        self.tests[item.nodeid] = {"duration": 0.0, "passed": True}

    def pytest_runtest_logreport(self, report: Any) -> None:
        entry = self.tests.setdefault(report.nodeid, {"duration": 0.0, "passed": True})
        entry["duration"] += report.duration
        if report.failed or report.skipped:
            entry["passed"] = False


def collect_coverage(files: list[str], tests: list[str], out: Path) -> None:
    """Run ``tests`` once under coverage (this process and its subprocesses)
    and write {tests: {nodeid: {duration, passed}}, lines: {file: {line: [nodeid]}}}."""
    import coverage
    import pytest

    data_file = str(out.with_suffix(".coverage"))
    include = [str(_ROOT / f) for f in files]
    os.environ["PHASEC_CORE_COVERAGE"] = f"{data_file}:{','.join(include)}"
    os.environ["PYTHONPATH"] = os.pathsep.join([str(_HOOK), os.environ.get("PYTHONPATH", "")])
    cov = coverage.Coverage(data_file=data_file, data_suffix=True, include=include)
    cov.start()
    plugin = _CoveragePlugin(cov, files)
    try:
        pytest.main(["-q", "-p", "no:cacheprovider", "-n", "0", *tests], plugins=[plugin])
    finally:
        cov.stop()
        cov.save()
    combined = coverage.Coverage(data_file=data_file)
    combined.combine(keep=False)
    data = combined.get_data()
    lines: dict[str, dict[str, list[str]]] = {}
    for f in files:
        by_line = data.contexts_by_lineno(str(_ROOT / f))
        # "" is the context outside every test: the imports (collection)
        lines[f] = {str(n): sorted(c or IMPORT_TIME for c in ctxs)
                    for n, ctxs in by_line.items()}
    out.write_text(json.dumps({"tests": plugin.tests, "lines": lines}))


# -- running one mutant ----------------------------------------------------------
@dataclass
class Outcome:
    mutant: _core_mutants.Mutant
    file: str
    verdict: str  # killed / survived / timeout / uncovered / equivalent
    tests_run: int = 0
    seconds: float = 0.0
    how: str = ""  # fork (code swap) or fresh (import hook in a new interpreter)
    reason: str = ""


def _code_path(code: types.CodeType, scopes: tuple[tuple[str, str, int], ...]) -> list[types.CodeType]:
    """The code objects of ``scopes`` (outermost first) inside module code ``code``."""
    found = []
    for _, name, line in scopes:
        matches = [c for c in code.co_consts if isinstance(c, types.CodeType)
                   and c.co_name == name and c.co_firstlineno == line]
        if len(matches) != 1:
            return []
        code = matches[0]
        found.append(code)
    return found


def _live_functions(path: str) -> dict[tuple[str, int], list[types.FunctionType]]:
    """Every function object of file ``path`` in this process, by (qualname, line)."""
    out: dict[tuple[str, int], list[types.FunctionType]] = {}
    for obj in gc.get_objects():
        if type(obj) is types.FunctionType and obj.__code__.co_filename == path:
            code = obj.__code__
            out.setdefault((code.co_qualname, code.co_firstlineno), []).append(obj)
    return out


def _swap_code(path: str, source: str, mutant: _core_mutants.Mutant,
               live: dict[tuple[str, int], list[types.FunctionType]], at_import: bool) -> bool:
    """Give the live functions around ``mutant`` the mutated code; False when
    it cannot be done in place: module or class level, a changed closure, or
    a line that runs at import (what it computed then is already in use)."""
    if at_import or not mutant.scopes or mutant.scopes[-1][0] == "class":
        return False
    module_code = compile(_core_mutants.mutate(source, mutant.index, path), path, "exec")
    codes = _code_path(module_code, mutant.scopes)
    if len(codes) != len(mutant.scopes):
        return False
    patched = 0
    for (kind, _, _), code in zip(mutant.scopes, codes):
        if kind == "class":
            continue
        for func in live.get((code.co_qualname, code.co_firstlineno), []):
            if len(func.__code__.co_freevars) != len(code.co_freevars) \
                    or func.__code__.co_freevars != code.co_freevars:
                return False
            func.__code__ = code
            patched += 1
    # the innermost scope must be reachable: a live function or one created
    # at each call of a live enclosing function
    return patched > 0


def _select(lines: dict[str, list[str]], tests: dict[str, dict[str, Any]],
            mutant: _core_mutants.Mutant, budget: float) -> list[str]:
    """The tests that cover the mutant's line and pass unmutated, fastest first,
    up to ``budget`` seconds of measured time (0: all of them)."""
    covering = lines.get(str(mutant.lineno), [])
    others: set[str] = set()
    if not mutant.scopes or mutant.scopes[-1][0] == "class" or IMPORT_TIME in covering:
        # runs at import: every test that runs any of the module's code too
        others = {t for ids in lines.values() for t in ids} - set(covering)

    def fastest(names: Any) -> list[str]:
        return sorted((t for t in names if tests.get(t, {}).get("passed")),
                      key=lambda t: tests[t]["duration"])
    ids = fastest(covering) + fastest(others)
    if budget <= 0:
        return ids
    chosen, total = [], 0.0
    for t in ids:
        if chosen and total + tests[t]["duration"] > budget:
            break
        chosen.append(t)
        total += tests[t]["duration"]
    return chosen


def _wait(pid: int, timeout: float) -> tuple[str, int]:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return "exited", os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            for target in (-pid, pid):
                try:
                    os.kill(target, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            os.waitpid(pid, 0)
            return "timeout", -1
        time.sleep(0.05)


#: exit status of a child whose test overran its own limit
_TEST_TIMEOUT_EXIT = 124


def _overran(signum: int, frame: Any) -> None:
    os._exit(_TEST_TIMEOUT_EXIT)


def run_mutant(file: str, source: str, mutant: _core_mutants.Mutant, items: list[Any],
               timeout: float, live: dict, log: Path, at_import: bool,
               limits: list[float] | None = None) -> tuple[str, str]:
    """Fork a child that runs the collected test ``items`` against the mutant,
    stopping at the first failure; returns (verdict, how). ``limits`` are
    per-test time limits (a hanging mutant is caught at its first test, not
    after the whole ``timeout``)."""
    from _pytest.runner import runtestprotocol

    path = str(_ROOT / file)
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 3
        try:
            os.setpgid(0, 0)
            fd = os.open(str(log), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.environ["PHASEC_CORE_MUTANT"] = f"{module_name(file)}:{path}:{mutant.index}"
            if _swap_code(path, source, mutant, live, at_import):
                print(f"fork: code swapped for mutant {mutant.index}", flush=True)
                clear_memos([file])
                code = 0
                signal.signal(signal.SIGALRM, _overran)
                for i, item in enumerate(items):
                    nxt = items[i + 1] if i + 1 < len(items) else None
                    if limits:
                        signal.setitimer(signal.ITIMER_REAL, limits[i])
                    reports = runtestprotocol(item, nextitem=nxt, log=False)
                    signal.setitimer(signal.ITIMER_REAL, 0)
                    failed = [r for r in reports if r.failed]
                    if failed:
                        print(f"killed by {item.nodeid}:\n{failed[0].longreprtext[-3000:]}",
                              flush=True)
                        code = 1
                        break
            else:
                print(f"fresh interpreter for mutant {mutant.index}", flush=True)
                os.execv(sys.executable, [sys.executable, "-m", "pytest", "-x", "-q", "-n", "0",
                                          "-p", "no:cacheprovider",
                                          *[item.nodeid for item in items]])
        except BaseException as exc:  # noqa: BLE001 - report and leave the child
            print(f"mutant child failed: {exc!r}", flush=True)
        finally:
            os._exit(code)
    state, code = _wait(pid, timeout)
    how = "fork" if log.read_text(errors="replace").startswith("fork:") else "fresh"
    if state == "timeout" or code == _TEST_TIMEOUT_EXIT:
        return "timeout", how
    if code == 0:
        return "survived", how
    if code == 5:
        return "error (no tests collected)", how
    # 1: a test failed; 2 and 4: the tests could not even be collected (the
    # mutant breaks an import); 3: it broke pytest itself
    return "killed", how


class _MutationLoop:
    """Replaces pytest's test loop: every test is collected once, then each
    mutant runs in a forked child (see :func:`run_mutant`)."""

    def __init__(self, run: Any) -> None:
        self.run = run

    def pytest_runtestloop(self, session: Any) -> bool:
        self.run({item.nodeid: item for item in session.items})
        return True


# -- equivalent mutants ------------------------------------------------------------
def load_equivalent() -> dict[tuple[str, str, str], str]:
    """(file, source line text, mutation) -> why the mutant is equivalent.

    File format: blocks of ``file | source line, stripped | mutation`` (or
    ``file:LINE | ...`` for one line of several with the same text) and an
    indented reason on the next line; ``#`` starts a comment line.
    ``file:LINE:COLUMN`` pins an entry to one of several mutants with the
    same description on one line (the column ``--list`` prints)."""
    out: dict[tuple[str, str, str], str] = {}
    if not EQUIVALENT_FILE.exists():
        return out
    key = None
    for raw in EQUIVALENT_FILE.read_text().splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        if raw.startswith((" ", "\t")) and key is not None:
            out[key] = (out.get(key, "") + " " + raw.strip()).strip()
        else:
            # the source line may hold " | " itself: the file is before the
            # first separator, the mutation after the last
            first, rest = raw.split(" | ", 1) if " | " in raw else (raw, "")
            middle, _, mutation = rest.rpartition(" | ")
            # "file:LINE" pins an entry to one line when the same text occurs
            # twice, "file:LINE:COLUMN" to one mutant of several on a line
            key = (first.strip(), middle.strip(), mutation.strip()) if middle else None
    return out


def _previous_kills(path: Path, sources: dict[str, str]) -> set[tuple[str, str, str]]:
    """(file, source line, mutation) of the mutants a previous run killed."""
    out = set()
    for o in json.loads(path.read_text()):
        if o["verdict"] in ("killed", "timeout") and o["file"] in sources:
            text = o.get("source") or sources[o["file"]].splitlines()[o["line"] - 1]
            out.add((o["file"], text.strip(), o["mutation"]))
    return out


def _in_targets(m: _core_mutants.Mutant, prefixes: tuple[str, ...] | None) -> bool:
    if prefixes is None:
        return True
    return bool(m.scopes) and m.scopes[0][0] == "def" and m.scopes[0][1] in prefixes


# -- the table -------------------------------------------------------------------
def report(outcomes: list[Outcome], files: list[str]) -> str:
    rows = ["| module | mutants | killed | timeout | survived | uncovered | equivalent "
            "| score |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    total: Counter = Counter()
    for f in files:
        c = Counter(o.verdict for o in outcomes if o.file == f)
        n = sum(c.values())
        total.update(c)
        rows.append(_row(f, n, c))
    rows.append(_row("**all**", sum(total.values()), total))
    lines = ["\n".join(rows), ""]
    bad = [o for o in outcomes if o.verdict in ("survived", "uncovered") or
           o.verdict.startswith("error")]
    lines.append(f"survivors ({len(bad)}):" if bad else "no survivors")
    for o in bad:
        lines.append(f"  {o.file}:{o.mutant.lineno}: {o.mutant.description} "
                     f"[{o.verdict}, {o.tests_run} tests] | {_line_text(o)}")
    eq = [o for o in outcomes if o.verdict == "equivalent"]
    if eq:
        lines.append(f"equivalent ({len(eq)}):")
        for o in eq:
            lines.append(f"  {o.file}:{o.mutant.lineno}: {o.mutant.description} -- {o.reason}")
    return "\n".join(lines)


def _row(name: str, n: int, c: Counter) -> str:
    live = n - c["equivalent"]
    dead = c["killed"] + c["timeout"]
    score = f"{100 * dead / live:.1f}%" if live else "-"
    return (f"| {name} | {n} | {c['killed']} | {c['timeout']} | {c['survived']} | "
            f"{c['uncovered']} | {c['equivalent']} | {score} |")


_SOURCES: dict[str, list[str]] = {}


def _line_text(o: Outcome) -> str:
    if o.file not in _SOURCES:
        _SOURCES[o.file] = (_ROOT / o.file).read_text().splitlines()
    return _SOURCES[o.file][o.mutant.lineno - 1].strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", nargs="*", help="module files (default: the core modules)")
    ap.add_argument("--tests", nargs="*", default=list(DEFAULT_TESTS),
                    help="test paths whose coverage selects the tests of each mutant")
    ap.add_argument("--work", default=str(Path(os.environ.get("TMPDIR", "/tmp")) /
                                          "phasec-core-mutation"),
                    help="cache of coverage and logs")
    ap.add_argument("--recollect", action="store_true", help="collect coverage again")
    ap.add_argument("--budget", type=float, default=60.0,
                    help="seconds of measured test time per mutant, fastest tests first "
                         "(0: every covering test)")
    ap.add_argument("--timeout-factor", type=float, default=4.0)
    ap.add_argument("--only", nargs="*", type=int, help="mutant indices (with one --files)")
    ap.add_argument("--list", action="store_true", help="list the mutants and stop")
    ap.add_argument("--json", help="write every outcome to this file")
    ap.add_argument("--rerun", metavar="PREVIOUS_JSON",
                    help="run only the mutants a previous --json run did not kill (matched "
                         "by file, source line and mutation); keep the others' verdicts")
    ap.add_argument("--quick", action="store_true", help="phasec/ir/phase.py only")
    ap.add_argument("--collect-only", dest="collect_only", metavar="OUT",
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    os.chdir(_ROOT)
    targets = dict(DEFAULT_TARGETS)
    files = args.files or (["phasec/ir/phase.py"] if args.quick else list(targets))
    if args.collect_only:
        collect_coverage(files, args.tests, Path(args.collect_only))
        return 0
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)

    sources = {f: (_ROOT / f).read_text() for f in files}
    selected = {f: [m for m in _core_mutants.mutants(sources[f], f)
                    if _in_targets(m, targets.get(f)) and (not args.only or m.index in args.only)]
                for f in files}
    if args.list:
        for f in files:
            for m in selected[f]:
                print(f"{f}:{m.lineno}:{m.col}: #{m.index} {m.description}")
        return 0

    cov_file = work / ("coverage-" + "-".join(Path(t).stem for t in args.tests)[:80] + ".json")
    if args.recollect or not cov_file.exists():
        import subprocess
        print(f"collecting per-test coverage of {len(args.tests)} test path(s) ...", flush=True)
        t0 = time.monotonic()
        every = list(DEFAULT_TARGETS) + [f for f in files if f not in DEFAULT_TARGETS]
        subprocess.run([sys.executable, __file__, "--collect-only", str(cov_file), "--files",
                        *every, "--tests", *args.tests], check=False,
                       stdout=subprocess.DEVNULL)
        print(f"  {time.monotonic() - t0:.0f} s", flush=True)
    coverage_data = json.loads(cov_file.read_text())
    tests, lines = coverage_data["tests"], coverage_data["lines"]

    # the server: every test collected and phasec imported once, a fork per mutant
    os.environ["PYTHONPATH"] = os.pathsep.join([str(_HOOK), os.environ.get("PYTHONPATH", "")])
    import importlib

    import pytest

    for f in files:
        importlib.import_module(module_name(f))
    equivalent = load_equivalent()
    previous = _previous_kills(Path(args.rerun), sources) if args.rerun else set()
    outcomes: list[Outcome] = []

    def run_all(items: dict[str, Any]) -> None:
        for f in files:
            live = _live_functions(str(_ROOT / f))
            src_lines = sources[f].splitlines()
            t_file = time.monotonic()
            for m in selected[f]:
                text = src_lines[m.lineno - 1].strip()
                reason = equivalent.get((f"{f}:{m.lineno}:{m.col}", text, m.description)) \
                    or equivalent.get((f"{f}:{m.lineno}", text, m.description)) \
                    or equivalent.get((f, text, m.description))
                if reason:
                    outcomes.append(Outcome(m, f, "equivalent", reason=reason))
                    continue
                if (f, src_lines[m.lineno - 1].strip(), m.description) in previous:
                    outcomes.append(Outcome(m, f, "killed", how="previous run"))
                    continue
                ids = [t for t in _select(lines.get(f, {}), tests, m, args.budget) if t in items]
                if not ids:
                    outcomes.append(Outcome(m, f, "uncovered"))
                    continue
                timeout = args.timeout_factor * sum(tests[t]["duration"] for t in ids) + 20
                t0 = time.monotonic()
                at_import = IMPORT_TIME in lines.get(f, {}).get(str(m.lineno), ())
                verdict, how = run_mutant(f, sources[f], m, [items[t] for t in ids], timeout,
                                          live, work / f"mutant-{Path(f).stem}-{m.index}.log",
                                          at_import, [args.timeout_factor * tests[t]["duration"]
                                                      + 10 for t in ids])
                outcomes.append(Outcome(m, f, verdict, len(ids), time.monotonic() - t0, how))
                print(f"{f}:{m.lineno} #{m.index} {m.description}: {verdict} "
                      f"({len(ids)} tests, {time.monotonic() - t0:.1f} s, {how})", flush=True)
            print(f"-- {f}: {time.monotonic() - t_file:.0f} s", flush=True)

    pytest.main(["-q", "-s", "-n", "0", "-p", "no:cacheprovider", *args.tests],
                plugins=[_MutationLoop(run_all)])
    print()
    print(report(outcomes, files))
    if args.json:
        Path(args.json).write_text(json.dumps([
            {"file": o.file, "line": o.mutant.lineno, "index": o.mutant.index,
             "source": _line_text(o),
             "mutation": o.mutant.description, "verdict": o.verdict, "tests": o.tests_run,
             "seconds": round(o.seconds, 2), "how": o.how, "reason": o.reason}
            for o in outcomes], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

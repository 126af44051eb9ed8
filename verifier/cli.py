"""``phasec-check``: verify TVMScript and JSON module files against their phase.

Usage::

    phasec-check [--phase NAME] [--format text|json|github|sarif] [--infer-phase]
                 [--exclude GLOB]... PATH...
    phasec-check --explain CODE [--format text|json]
    phasec-check --list-rules [--format text|json]

PATHs are files or directories (searched recursively for ``.py`` and
``.json``); ``-`` reads one module from standard input (JSON when it starts
with ``{``, TVMScript otherwise), reported as ``<stdin>``. A Python file
may hold its modules among other code: every ``@I.ir_module`` class in it
is checked, wherever it is (module level, inside a test function, under
``if __name__ == "__main__":``), found by parsing (:mod:`verifier.sources`);
one declared ``@I.ir_module(check_well_formed=False)`` among other code is
skipped, as TVM skips it (test files mark modules ill-formed on purpose so).
Files found in a directory that are not modules at all (a ``.py`` file with
no ``@I.ir_module`` class, a ``.json`` document that is not a phasec module)
are skipped and counted, so the command can run over a source tree; a file
named on the command line is checked whatever it holds, unless
``--skip-non-modules`` (what the pre-commit hook passes). A directory named
on the command line that holds no module at all is an input error, as an
empty one is: nothing would be checked. ``--exclude GLOB`` drops the files
and prunes the directories it matches: a glob matches any one component of
a path (``--exclude build``, ``--exclude 'test_*.py'``), the path relative
to the directory named on the command line (``--exclude 'build/*'``), or
the path as written.
The per-pass files of TVM's ``DumpIR`` instrument (``NNN_PassName.py``) found
in a directory are reported with the phase each reaches (as ``--infer-phase``
does); those of TVM's TIR pipeline, which follows VM codegen and holds no
Relax function, are skipped and counted. Exit status: 0 when every module is clean, 1
when there are violations, 2 for input or usage errors (unreadable file,
syntax error, schema violation, unknown option); every input error has an
``IN`` code (:mod:`verifier.input_codes`). Inputs are parsed, never
executed; only regular files are read (a FIFO or device named on the
command line is an input error, never a hang), and a file or standard
input larger than ``--max-input-size`` (default 4G, or
``$PHASEC_MAX_INPUT_SIZE``) is refused.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any, TextIO

from phasec import __version__
from phasec.errors import (
    FileAccessError, InputError, MessageStream, ParseError, PhasecError, SchemaError, WellFormedError,
)
from phasec.fileio import (
    check_regular, input_limit_scope, max_input_bytes, parse_size, read_bytes, read_stream,
    set_max_input_bytes,
)
from phasec.interrupts import interrupted_exit, signals_as_exceptions
from phasec.ir.node import Span
from phasec.ir.phase import Phase

from phasec.verifier.checker import check, infer_phase
from phasec.verifier.diagnostics import ERROR, Diagnostic, format_diagnostic, source_excerpt
from phasec.verifier.input_codes import INPUT_CODES, explain_input_code, input_code_for
from phasec.verifier.rules import all_rules, explain, get_rule
from phasec.verifier.sources import (
    ModuleSource, excluded, find_modules, looks_like_module, walk_module_files,
)

__all__ = ["main"]

EXIT_OK, EXIT_VIOLATIONS, EXIT_INPUT = 0, 1, 2
#: the PATH that means standard input, and the name it is reported under
STDIN_PATH, STDIN_NAME = "-", "<stdin>"


class _UsageError(Exception):
    pass


class _ArgParser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so ``main`` returns a status."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(message + _option_suggestion(self, message))


def _option_suggestion(parser: argparse.ArgumentParser, message: str) -> str:
    """``; did you mean --format?`` for a misspelled option, else empty."""
    match = re.search(r"unrecognized arguments: (\S+)", message)
    if not match or not match.group(1).startswith("-"):
        return ""
    wrong = match.group(1).split("=", 1)[0]
    known = [s for a in parser._actions for s in a.option_strings]
    close = difflib.get_close_matches(wrong, known, n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def _arg_parser() -> _ArgParser:
    p = _ArgParser(
        prog="phasec-check",
        description="Check phasec modules (TVMScript .py or JSON) for well-formedness and "
                    "the invariants of their phase. Inputs are parsed, never executed.",
        epilog="exit status: 0 clean, 1 violations, 2 input or usage error")
    p.add_argument("--version", action="version", version=f"phasec-check {__version__}")
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="module files or directories (searched for .py and .json); "
                        "- reads a module from standard input")
    p.add_argument("--phase", metavar="NAME",
                   help="check against this phase instead of the module's declared phase "
                        "(ingestion, optimization, lowering, build or 0-3)")
    p.add_argument("--format", choices=("text", "json", "github", "sarif"), default="text",
                   help="output format (default: text; sarif: SARIF 2.1.0 for code-scanning "
                        "tools; --explain and --list-rules take text or json)")
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                   help="skip the files and directories GLOB matches (repeatable): a GLOB "
                        "matches any one component of a path ('build', 'test_*.py'), the path "
                        "relative to the directory given ('build/*'), or the path as written; "
                        "a matching directory is not searched")
    p.add_argument("--skip-non-modules", action="store_true",
                   help="skip named files that hold no module (no @I.ir_module class, not a "
                        "phasec JSON module), as files found in directories always are; "
                        "for pre-commit hooks. The @I.ir_module classes of any Python file are "
                        "checked wherever they are; a decorator in a string is not one")
    p.add_argument("--max-input-size", metavar="SIZE", default=None,
                   help="refuse inputs larger than SIZE (e.g. 512M, 8G; default 4G or "
                        "$PHASEC_MAX_INPUT_SIZE)")
    p.add_argument("--explain", metavar="CODE", help="print the documentation of a rule")
    p.add_argument("--infer-phase", action="store_true",
                   help="print the highest phase each module satisfies")
    p.add_argument("--list-rules", action="store_true", help="list every rule and exit")
    return p


# ---------------------------------------------------------------------------
# Input
# ---------------------------------------------------------------------------

@dataclass
class _InputError:
    message: str
    kind: str
    span: Span | None = None

    @property
    def code(self) -> str:
        """The stable ``IN`` code of this kind of input error."""
        return input_code_for(self.kind)


@dataclass
class _Result:
    path: str
    source_lines: list[str] | None = None
    module: Any = None
    declared: Phase | None = None
    checked: Phase | None = None
    inferred: Phase | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    error: _InputError | None = None
    not_a_module: bool = False  # skipped: the file holds no module at all
    #: the @I.ir_module class, when the module was found among other Python code
    module_name: str | None = None
    #: skipped: a class found among other Python code, declared check_well_formed=False
    unchecked: bool = False
    dump_stage: bool = False  # a per-pass file of TVM's DumpIR: reported with its inferred phase
    tir_stage: bool = False  # skipped: a DumpIR file of TVM's TIR pipeline (no Relax function)


def _collect(paths: Sequence[str], exclude: Sequence[str] = ()
             ) -> tuple[list[str], dict[str, list[str]], list[_Result]]:
    """Module files named by ``paths`` (directories searched, sorted, minus
    what ``exclude`` matches), the files found in each directory named, and
    results for paths that could not be used."""
    files: list[str] = []
    searched: dict[str, list[str]] = {}
    bad: list[_Result] = []
    for path in paths:
        if path != STDIN_PATH and excluded(path, exclude, is_dir=os.path.isdir(path)):
            continue
        if path == STDIN_PATH:
            if STDIN_NAME not in files:  # standard input can be read once
                files.append(STDIN_NAME)
        elif os.path.isdir(path):
            found = list(walk_module_files(path, exclude))
            if not found:
                bad.append(_Result(path, error=_InputError(
                    "directory contains no TVMScript (.py) or JSON (.json) module files",
                    "OSError")))
            files.extend(found)
            searched.setdefault(path, []).extend(found)
        elif os.path.exists(path):
            files.append(path)
        else:
            bad.append(_Result(path, error=_InputError("no such file or directory", "OSError")))
    return files, searched, bad


def _moduleless_directories(searched: dict[str, list[str]], results: Sequence[_Result]
                            ) -> list[_Result]:
    """An input error for each directory named on the command line in which
    no module was found (as for an empty one: nothing would be checked)."""
    checked = {r.path for r in results if not r.not_a_module}
    out = []
    for directory, found in searched.items():
        if found and not any(f in checked for f in found):
            which = "its one .py/.json file" if len(found) == 1 else \
                f"none of its {len(found)} .py/.json files"
            out.append(_Result(directory, error=_InputError(
                f"directory holds no module: {which} has "
                f"{'no' if len(found) == 1 else 'an'} @I.ir_module class "
                f"{'and is not' if len(found) == 1 else 'or is'} a phasec JSON module",
                "OSError")))
    return out


def _read(path: str, stdin: IO[Any] | None = None) -> tuple[str | None, _InputError | None]:
    # Regular files only (a FIFO or /dev/zero would block or never end), and
    # standard input too is capped: phasec.fileio.max_input_bytes().
    try:
        if path == STDIN_NAME:
            data = _read_stdin(stdin)
        elif os.fspath(path).lower().endswith(".onnx"):
            check_regular(path)  # (refused by its name: a model is never read in full)
            return None, _InputError("an ONNX model, not a TVMScript or JSON module: import "
                                     "it first (phasec import MODEL.onnx -o model.py), then "
                                     "check model.py", "OSError")
        else:
            data = read_bytes(path)
    except FileAccessError as exc:
        return None, _InputError(exc.reason, "OSError")
    except OSError as exc:
        return None, _InputError(exc.strerror or str(exc), "OSError")
    if isinstance(data, str):  # a text stream given to main()
        data = data.encode("utf-8", "surrogateescape")
    if b"\0" in data:
        return None, _InputError("binary file, not a TVMScript or JSON module", "OSError")
    try:
        return data.decode("utf-8-sig"), None  # a BOM is fine
    except UnicodeDecodeError as exc:
        return None, _InputError(f"not UTF-8 text (invalid byte at offset {exc.start}); "
                                 "expected a TVMScript or JSON module", "OSError")


def _read_stdin(stdin: IO[Any] | None) -> bytes | str:
    stream = stdin if stdin is not None else sys.stdin
    if stream is None:
        raise OSError("standard input is closed")
    return read_stream(stream)


#: The per-pass files TVM's ``tvm.ir.instrument.DumpIR`` writes: ``012_LegalizeOps.py``.
_DUMPIR_NAME = re.compile(r"^\d{3}_.+\.py$")
#: A Relax function in TVMScript text (TVM's TIR pipeline leaves none).
_RELAX_FUNCTION = re.compile(r"^[ \t]*@R\.function\b", re.MULTILINE)

def _is_json_module_text(text: str) -> bool:
    """A cheap look before parsing: JSON modules name the ``phasec.ir_module``
    format; any other JSON document (package.json...) is no module."""
    return "phasec.ir_module" in text


def _is_json(path: str, text: str) -> bool:
    if path == STDIN_NAME:  # no suffix: JSON documents start with an object
        return text.lstrip(" \t\r\n").startswith("{")
    return path.lower().endswith(".json")


def _load(path: str, text: str) -> tuple[Any, _InputError | None]:
    """Parse (never execute) one module file."""
    # The readers are imported when a file needs one: the JSON reader alone
    # costs ~0.5 s of start-up, which --explain and --list-rules never need.
    try:
        if _is_json(path, text):
            from phasec.script.json_format import from_json

            return from_json(text), None
        from phasec.script.parser import parse

        return parse(text, path), None
    except ParseError as exc:
        return None, _InputError(exc.message, "ParseError", exc.span)
    except SchemaError as exc:
        return None, _InputError(str(exc), "SchemaError")
    except PhasecError as exc:
        return None, _InputError(str(getattr(exc, "message", exc)), type(exc).__name__,
                                 getattr(exc, "span", None))
    except RecursionError:
        return None, _InputError("input is nested too deeply", "ParseError")
    except (ValueError, TypeError, KeyError) as exc:  # loaders should raise ParseError/SchemaError
        return None, _InputError(f"invalid module: {exc}", type(exc).__name__)


def _run_one(path: str, phase: Phase | None, want_inferred: bool,
             stdin: IO[Any] | None = None, skip_non_module: bool = False) -> list[_Result]:
    """The results of one file: one per module it holds (none found: one
    result, skipped or an input error)."""
    result = _Result(path)
    text, error = _read(path, stdin)
    if error is not None:
        result.error = error
        return [result]
    assert text is not None
    skip = skip_non_module and path != STDIN_NAME  # standard input always holds a module
    if _is_json(path, text):
        if skip and not _is_json_module_text(text):
            result.not_a_module = True
            return [result]
        return [_check_text(result, text, ModuleSource(text), phase, want_inferred)]
    sources = find_modules(text, path)
    if not sources:  # not Python, or no @I.ir_module class
        if skip and (sources is not None or not looks_like_module(text)):
            result.not_a_module = True
            return [result]
        # the parser says what is wrong: the syntax error, or no module class
        return [_check_text(result, text, ModuleSource(text), phase, want_inferred)]
    if len(sources) == 1 and sources[0].name is None:  # the file is a module
        if skip and _DUMPIR_NAME.match(os.path.basename(path)):
            # A file of TVM's DumpIR found in a directory: the module after one
            # TVM pass, reported with the phase it reaches. After VM codegen TVM
            # goes on with TIR-only modules, outside phasec's phases.
            if _RELAX_FUNCTION.search(text) is None:
                result.tir_stage = True
                return [result]
            result.dump_stage = want_inferred = True
        return [_check_text(result, text, sources[0], phase, want_inferred)]
    return [_Result(path, module_name=source.name, unchecked=True) if source.unchecked
            else _check_text(_Result(path, module_name=source.name), text, source, phase,
                             want_inferred) for source in sources]


def _check_text(result: _Result, text: str, source: ModuleSource, phase: Phase | None,
                want_inferred: bool) -> _Result:
    """Parse and check one module of the file ``result.path`` (whose text is ``text``)."""
    result.source_lines = text.splitlines()
    result.module, error = _load(result.path, source.text)
    if error is not None:
        error.span = source.to_file(error.span)
        result.error = error
        return result
    mod = result.module
    result.declared = mod.phase
    if want_inferred:
        try:
            result.inferred = infer_phase(mod)
        except WellFormedError as exc:
            result.diagnostics = _in_file(exc.diagnostics, source)
        return result
    result.checked = phase if phase is not None else mod.phase
    result.diagnostics = _in_file(check(mod, result.checked), source)
    return result


def _in_file(diagnostics: Sequence[Diagnostic], source: ModuleSource) -> list[Diagnostic]:
    """``diagnostics`` with their locations in the file the module was cut out of."""
    if not source.indent:
        return list(diagnostics)
    return [d if d.span is None else dataclasses.replace(d, span=source.to_file(d.span))
            for d in diagnostics]


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------

def _excerpt_lines(result: _Result, span: Span | None) -> list[str] | None:
    """The file's lines when ``span`` points into this file."""
    if span is None or result.source_lines is None:
        return None
    if os.path.normpath(span.file) != os.path.normpath(result.path):
        return None
    return result.source_lines


def _input_error_text(result: _Result) -> str:
    err = result.error
    assert err is not None
    if err.span is not None:
        loc = f"{result.path}:{err.span.line}:{err.span.col + 1}"
    else:
        loc = result.path
    text = f"{loc}: error[{err.code}]: {err.message}"
    if err.span is not None and result.source_lines is not None:
        text = "\n".join([text, *source_excerpt(result.source_lines, err.span)])
    return text


def _use_colour(out: TextIO) -> bool:
    """Colour on a terminal, unless NO_COLOR is set (https://no-color.org) or TERM=dumb."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(out, "isatty", None)
    return bool(isatty and isatty())


_SEVERITY_TAG = re.compile(r"^(\S.*?: )(error|warning)(\[\w+\])(: )", re.MULTILINE)
_COLOURS = {"error": "\033[1;31m", "warning": "\033[1;33m"}


def _paint(text: str) -> str:
    """``error[CODE]`` in bold red, ``warning[CODE]`` in bold yellow."""
    return _SEVERITY_TAG.sub(
        lambda m: f"{m[1]}{_COLOURS[m[2]]}{m[2]}{m[3]}\033[0m{m[4]}", text)


def _print_text(results: Sequence[_Result], out: TextIO, infer: bool,
                colour: bool = False) -> None:
    def show(text: str) -> None:
        if colour and isinstance(out, MessageStream):  # escape first, then paint
            out.write_styled(text + "\n", _paint)
        else:
            print(_paint(text) if colour else text, file=out)

    for r in results:
        if r.error is not None:
            show(_input_error_text(r))
            continue
        where = r.path if r.module_name is None else f"{r.path} (class {r.module_name})"
        if (infer or r.dump_stage) and r.inferred is not None:
            note = f" (declared: {r.declared.label})" if r.declared is not None else ""
            print(f"{where}: {r.inferred.label}{note}", file=out)
        elif infer or r.dump_stage:
            print(f"{where}: not well-formed at any phase", file=out)
        for d in r.diagnostics:
            show(format_diagnostic(d, _excerpt_lines(r, d.span), default_file=r.path))


def _gh_escape(text: str, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def _gh_line(kind: str, file: str, span: Span | None, title: str, message: str) -> str:
    props = [f"file={_gh_escape(file, True)}"]
    if span is not None:
        props.append(f"line={span.line}")
        props.append(f"col={span.col + 1}")
        if span.end_line is not None:
            props.append(f"endLine={span.end_line}")
    props.append(f"title={_gh_escape(title, True)}")
    return f"::{kind} {','.join(props)}::{_gh_escape(message)}"


def _print_github(results: Sequence[_Result], out: TextIO, infer: bool) -> None:
    for r in results:
        if r.error is not None:
            print(_gh_line("error", r.path, r.error.span, r.error.code, r.error.message), file=out)
            continue
        if infer and r.inferred is not None:
            print(_gh_line("notice", r.path, None, "phase",
                           f"highest phase satisfied: {r.inferred.label}"), file=out)
        for d in r.diagnostics:
            message = d.message + (f"\nhelp: {d.help}" if d.help else "")
            file = d.span.file if d.span is not None else r.path
            print(_gh_line("error" if d.severity == ERROR else "warning", file, d.span, d.code,
                           message), file=out)


def _print_json(results: Sequence[_Result], out: TextIO, status: int) -> None:
    # (lazy, as for SARIF below: the report's pydantic models cost ~0.15 s to import)
    from phasec.verifier.report import CheckReport, FileReport, InputErrorModel, diagnostic_model

    files = []
    for r in results:
        if r.error is not None:
            span = r.error.span
            problem = InputErrorModel(
                message=r.error.message, kind=r.error.kind, code=r.error.code,
                line=span.line if span else None, column=span.col + 1 if span else None)
            files.append(FileReport(path=r.path, module=r.module_name, status="input-error",
                                    input_error=problem))
            continue
        has_errors = any(d.severity == ERROR for d in r.diagnostics)
        files.append(FileReport(
            path=r.path, module=r.module_name, status="violations" if has_errors else "ok",
            declared_phase=r.declared.label if r.declared is not None else None,
            checked_phase=r.checked.label if r.checked is not None else None,
            inferred_phase=r.inferred.label if r.inferred is not None else None,
            diagnostics=[diagnostic_model(d) for d in r.diagnostics]))
    errors, warnings, inputs = _counts(results)
    report = CheckReport(files=files, errors=errors, warnings=warnings, input_errors=inputs,
                         exit_code=status)
    print(report.model_dump_json(indent=2), file=out)


def _counts(results: Sequence[_Result]) -> tuple[int, int, int]:
    errors = sum(1 for r in results for d in r.diagnostics if d.severity == ERROR)
    warnings = sum(1 for r in results for d in r.diagnostics if d.severity != ERROR)
    inputs = sum(1 for r in results if r.error is not None)
    return errors, warnings, inputs


def _modules(results: Sequence[_Result]) -> list[_Result]:
    """The results of files that hold a module (or could not be read)."""
    return [r for r in results if not r.not_a_module and not r.tir_stage and not r.unchecked]


def _summary(all_results: Sequence[_Result]) -> str:
    results = _modules(all_results)
    tir_stages = sum(r.tir_stage for r in all_results)
    unchecked = sum(r.unchecked for r in all_results)
    skipped = len(all_results) - len(results) - tir_stages - unchecked
    errors, warnings, inputs = _counts(results)
    checked = len(results) - inputs
    parts = [f"{errors} error{'s' if errors != 1 else ''}",
             f"{warnings} warning{'s' if warnings != 1 else ''}"]
    if inputs:
        parts.append(f"{inputs} unreadable input{'s' if inputs != 1 else ''}")
    text = f"checked {checked} module{'s' if checked != 1 else ''}: {', '.join(parts)}"
    notes = []
    if skipped:
        notes.append(f"skipped {skipped} file{'s' if skipped != 1 else ''} that "
                     f"{'are' if skipped != 1 else 'is'} not a module")
    if unchecked:
        notes.append(f"skipped {unchecked} module{'s' if unchecked != 1 else ''} declared "
                     "@I.ir_module(check_well_formed=False)")
    if tir_stages:
        notes.append(f"skipped {tir_stages} DumpIR file{'s' if tir_stages != 1 else ''} of TVM's "
                     f"TIR pipeline, which hold no Relax function")
    return text + (f" ({'; '.join(notes)})" if notes else "")


def _rule_records() -> list[dict[str, str]]:
    """Every rule, then every input code: code, phase it applies from, title."""
    records = [{"code": r.code, "phase": r.since.label, "title": r.title,
                "severity": r.severity} for r in all_rules()]
    records += [{"code": c.code, "phase": "input", "title": c.title, "severity": ERROR}
                for c in INPUT_CODES.values()]
    return records


def _list_rules(out: TextIO, fmt: str) -> None:
    records = _rule_records()
    if fmt == "json":
        print(json.dumps(records, indent=2), file=out)
        return
    for r in records:
        print(f"{r['code']}  {r['phase']:<12}  {r['title']}", file=out)


def _explain(code: str, fmt: str) -> str:
    """The documentation of a rule or input code (KeyError when unknown)."""
    key = code.strip().upper()
    if key in INPUT_CODES:
        entry = INPUT_CODES[key]
        if fmt == "json":
            return json.dumps({"code": entry.code, "title": entry.title, "phase": "input",
                               "severity": ERROR, "explanation": entry.explanation,
                               "help": ""}, indent=2) + "\n"
        return explain_input_code(key)
    if fmt != "json":
        return explain(code)
    rule = get_rule(code)
    return json.dumps({"code": rule.code, "title": rule.title, "phase": rule.since.label,
                       "severity": rule.severity,
                       "explanation": " ".join(rule.explanation.split()),
                       "help": rule.help}, indent=2) + "\n"


# ---------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None,
         stderr: TextIO | None = None, stdin: IO[Any] | None = None) -> int:
    """Run ``phasec-check``; returns the exit status (0, 1 or 2). ``stdin``
    (default ``sys.stdin``) is what the PATH ``-`` reads. What it prints is
    escaped (:class:`~phasec.errors.MessageStream`): names from the input
    cannot send control sequences to the terminal."""
    stdout = MessageStream(stdout or sys.stdout, data=True)
    stderr = MessageStream(stderr or sys.stderr)
    # (SIGTERM too: exit 143 like Ctrl-C's 130; the input cap is restored afterwards)
    with signals_as_exceptions() as stopper, input_limit_scope():
        try:
            return _main(argv, stdout, stderr, stdin)
        except BrokenPipeError:  # --explain / --list-rules piped into `head`
            _silence_stdout()
            return EXIT_OK
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Terminated)
            stopper.done.set()
            status, word = interrupted_exit(exc)
            print(f"phasec-check: {word}", file=stderr or sys.stderr)
            return status
        except Exception as exc:  # noqa: BLE001 - last resort: a bug, never a traceback
            detail = " ".join(f"{type(exc).__name__}: {exc}".split())
            print(f"phasec-check: internal error, please report: {detail[:500]}",
                  file=stderr or sys.stderr)
            return EXIT_INPUT


def _silence_stdout() -> None:
    """After a broken pipe, keep the interpreter's final flush from failing."""
    try:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    except OSError:
        pass


def _main(argv: Sequence[str] | None, stdout: TextIO | None, stderr: TextIO | None,
          stdin: IO[Any] | None = None) -> int:
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    parser = _arg_parser()
    try:
        args = parser.parse_args(argv)
        phase = None
        if args.phase is not None:
            try:
                phase = Phase.parse(args.phase)
            except ValueError as exc:
                raise _UsageError(f"--phase: {exc}") from None
        if args.explain is not None or args.list_rules:
            if args.paths:
                option = "--explain" if args.explain is not None else "--list-rules"
                raise _UsageError(f"{option} takes no PATH (got {args.paths[0]!r}); run the "
                                  "check and the explanation as two commands")
            if args.format not in ("text", "json"):
                raise _UsageError("--explain and --list-rules print text or json")
        else:
            if not args.paths:
                raise _UsageError("no PATH given (a module file or a directory)")
            if args.infer_phase and phase is not None:
                raise _UsageError("--infer-phase and --phase cannot be used together")
        set_max_input_bytes(None)  # each invocation starts from the environment
        try:
            if args.max_input_size is not None:
                set_max_input_bytes(parse_size(args.max_input_size, "--max-input-size"))
            else:
                max_input_bytes()  # a bad $PHASEC_MAX_INPUT_SIZE is a usage error now
        except InputError as exc:
            raise _UsageError(str(exc)) from None
    except _UsageError as exc:
        print(parser.format_usage().rstrip(), file=err)
        print(f"phasec-check: error: {exc}", file=err)
        return EXIT_INPUT
    except SystemExit as exc:  # --help
        return int(exc.code or 0)

    if args.explain is not None:
        try:
            print(_explain(args.explain, args.format), file=out, end="")
        except KeyError as exc:
            print(f"phasec-check: error: {exc.args[0]}", file=err)
            return EXIT_INPUT
        return EXIT_OK
    if args.list_rules:
        _list_rules(out, args.format)
        return EXIT_OK

    files, searched, results = _collect(args.paths, args.exclude)
    found_in_directories = {f for found in searched.values() for f in found}
    for path in files:
        try:
            skip = args.skip_non_modules or path in found_in_directories
            results.extend(_run_one(path, phase, args.infer_phase, stdin, skip))
        except Exception as exc:  # never a traceback for a user's file
            results.append(_Result(path, error=_InputError(
                f"internal error while checking this file ({type(exc).__name__}: {exc})",
                "InternalError")))
    results.extend(_moduleless_directories(searched, results))
    results.sort(key=lambda r: r.path)  # stable: a file's modules stay in source order
    all_results, results = results, _modules(results)

    errors, _, inputs = _counts(results)
    unsatisfied = any(r.inferred is None and r.error is None for r in results) if args.infer_phase \
        else False
    status = EXIT_INPUT if inputs else (EXIT_VIOLATIONS if errors or unsatisfied else EXIT_OK)
    try:
        if args.format == "json":
            _print_json(results, out, status)
        elif args.format == "github":
            _print_github(results, out, args.infer_phase)
            print(_summary(all_results), file=err)
        elif args.format == "sarif":
            from phasec.verifier.report import sarif_log

            print(json.dumps(sarif_log(results), indent=2), file=out)
            print(_summary(all_results), file=err)
        else:
            _print_text(results, out, args.infer_phase, _use_colour(out))
            print(_summary(all_results), file=out)
    except BrokenPipeError:  # piped into `head`: the status still tells the truth
        _silence_stdout()
    return status


if __name__ == "__main__":  # pragma: no cover - ``python -m verifier.cli``
    sys.exit(main())

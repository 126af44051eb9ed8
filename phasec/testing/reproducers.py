"""Reproducer files of ``phasec fuzz``: write, read back, replay.

A reproducer is the failing module as TVMScript behind a comment header
giving the kind of failure, the pass sequence (``# sequence:``, replayable
with ``phasec opt FILE --passes SPEC``), the passes added to reach a named
pass's phase (``# reach:``), and the inputs file (``.npz``).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from phasec.fileio import read_bytes, read_npz, write_atomic
from phasec.ir.module import IRModule
from phasec.testing.properties import FAILURE_KINDS, Failure, check_sequence, reference_results
from phasec.errors import InputError
from phasec.script.loader import load
from phasec.testing.against_tvm import TVMSequence, check_against_tvm
from phasec.transform import loaded_plugins, parse_pipeline

__all__ = ["SavedFailure", "save_reproducer", "Reproducer", "read_reproducer", "replay"]


def _loads() -> str:
    """`` --load PLUGIN`` for each pass plugin in effect: a printed replay
    command finds the user's passes too."""
    return "".join(f" --load {shlex.quote(p)}" for p in loaded_plugins())


@dataclass
class SavedFailure:
    """A new failure and the reproducer files written for it."""

    failure: Failure
    path: Path
    direct_path: Path | None
    sequence: str
    reach: tuple[str, ...] = ()  # passes added to reach a named pass's phase


# ---------------------------------------------------------------------------
# Reproducer files
# ---------------------------------------------------------------------------

def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")[:40] or "sequence"


def _comment(text: str) -> list[str]:
    return ["#   " + line for line in text.splitlines()] or ["#"]


def save_reproducer(folder: Path, number: int, failure: Failure, mod: IRModule | None,
                    seq: Any, args: Sequence[Any], prefix: str = "") -> SavedFailure:
    """Write ``NNN-kind-pass.py`` (the generated module, replayable with
    ``phasec opt FILE --passes SPEC``), its inputs as ``.npz`` and, when one
    pass is to blame, ``NNN-kind-pass-direct.py`` (the module that pass ran on,
    with just that pass). A generator failure (no module) is saved as
    ``NNN-generator.txt`` with its traceback."""
    folder.mkdir(parents=True, exist_ok=True)
    if mod is None:
        path = folder / f"{prefix}{number:03d}-{failure.kind}.txt"
        write_atomic(path, f"phasec fuzz: {FAILURE_KINDS.get(failure.kind, '')}\n"
                           f"{failure.message}\n\n{failure.detail}", what="reproducer")
        return SavedFailure(failure, path, None, "")
    sequence = seq.spec()
    reach = tuple(getattr(seq, "reach_notes", ()))
    name = (failure.pass_spec or sequence).split("{")[0]
    stem = f"{prefix}{number:03d}-{failure.kind}-{_slug(name)}"
    path = folder / f"{stem}.py"
    inputs_path = folder / f"{stem}.npz"
    params = [p.name_hint for p in mod["main"].params] if "main" in mod else []
    arrays = {(params[i] if i < len(params) else f"arg{i}"): np.asarray(a)
              for i, a in enumerate(args) if isinstance(a, (np.ndarray, np.generic))}
    write_atomic(inputs_path, lambda fh: np.savez(fh, **arrays), what="reproducer inputs")
    if sequence.startswith("tvm:"):
        return _save_tvm_reproducer(path, inputs_path, failure, mod, sequence)
    header = [
        "# phasec fuzz reproducer",
        f"# kind: {failure.kind} ({FAILURE_KINDS.get(failure.kind, '')})",
        f"# failing pass: {failure.pass_spec or '(the sequence as a whole)'}"
        + (f" (step {failure.position + 1})" if failure.position is not None else ""),
        "# problem:",
        *_comment(failure.message),
        f"# sequence: {sequence}",
        *[f"# reach: {note}" for note in reach],
        f"# inputs: {inputs_path.name} (arrays by parameter name)",
        "# replay the passes:",
        f"#   phasec opt {path}{_loads()} --passes '{sequence}' --opt-level 3",
        "# re-check every property (results included):",
        f"#   phasec fuzz{_loads()} --replay {path}",
        f"# signature: {json.dumps(list(failure.signature))}",
        "# (the program may call phasec.testing.* packed functions: import phasec.testing",
        "#  before running it with phasec.interp.run or the VM)",
        "",
    ]
    write_atomic(path, "\n".join(header) + mod.script(), what="reproducer")
    direct_path = None
    if failure.pass_spec and failure.before is not None and failure.before is not mod:
        direct_path = folder / f"{stem}-direct.py"
        direct = [
            "# phasec fuzz reproducer (direct): the module the failing pass ran on",
            f"# kind: {failure.kind}",
            f"# sequence: {failure.pass_spec}",
            f"# inputs: {inputs_path.name}",
            f"#   phasec opt {direct_path}{_loads()} --passes '{failure.pass_spec}' --opt-level 3",
            f"#   phasec fuzz{_loads()} --replay {direct_path}",
            "",
        ]
        write_atomic(direct_path, "\n".join(direct) + failure.before.script(), what="reproducer")
    return SavedFailure(failure, path, direct_path, sequence, reach)


def _save_tvm_reproducer(path: Path, inputs_path: Path, failure: Failure, mod: IRModule,
                         sequence: str) -> SavedFailure:
    """A finding of ``phasec fuzz --against tvm``: the module in TVM's syntax
    (``tvm.script.from_source`` reads the file as it is), what TVM ran on it."""
    header = [
        "# phasec fuzz reproducer (against TVM 0.27)",
        f"# kind: {failure.kind} ({FAILURE_KINDS.get(failure.kind, '')})",
        f"# TVM pass: {failure.pass_spec or '(the sequence as a whole)'}",
        "# problem:",
        *_comment(failure.message),
        f"# sequence: {sequence}",
        "#   (LambdaLift first when the module is in ingestion; tvm.compile: its default",
        "#    pipeline for target llvm, then TVM's VM against phasec's interpreter)",
        f"# inputs: {inputs_path.name} (arrays by parameter name)",
        "# check it again (TVM's verdict, its passes under phasec.tvm.PhaseCheck, results):",
        f"#   phasec fuzz{_loads()} --replay {path}",
        f"# signature: {json.dumps(list(failure.signature))}",
        "",
    ]
    write_atomic(path, "\n".join(header) + mod.script(syntax="tvm"), what="reproducer")
    return SavedFailure(failure, path, None, sequence)


@dataclass
class Reproducer:
    """A reproducer file read back."""

    module: IRModule
    sequence: str
    inputs: tuple


def read_reproducer(path: str | Path) -> Reproducer:
    """The module, pass sequence and inputs of a reproducer file."""
    path = Path(path)
    text = read_bytes(path, "reproducer").decode("utf-8", "replace")
    match = re.search(r"^# sequence: (.*)$", text, re.M)
    if match is None:
        raise InputError(f"{path}: not a phasec fuzz reproducer (no '# sequence:' line)")
    mod = load(path)
    inputs: tuple = ()
    m = re.search(r"^# inputs: (\S+)", text, re.M)
    if m is not None and (path.parent / m.group(1)).exists():
        by_name = read_npz(path.parent / m.group(1), "reproducer inputs")
        names = [p.name_hint for p in mod["main"].params] if "main" in mod else []
        inputs = tuple(by_name[n] for n in names if n in by_name)
        if len(inputs) != len(names):
            inputs = ()
    return Reproducer(mod, match.group(1).strip(), inputs)


def replay(path: str | Path, *, kernels: str = "llvm", roundtrip: bool = True) -> list[Failure]:
    """Check a reproducer again; the failures it still shows (empty: fixed)."""
    rep = read_reproducer(path)
    if rep.sequence.startswith("tvm:"):
        try:
            expected = reference_results(rep.module, rep.inputs) if rep.inputs else None
        except Exception:  # noqa: BLE001 - results are then not compared
            expected = None
        return check_against_tvm(rep.module, TVMSequence.parse(rep.sequence),
                                 rep.inputs or None, expected).failures
    seq = parse_pipeline(rep.sequence) if rep.sequence else []
    report = check_sequence(rep.module, seq, rep.inputs or None, kernels=kernels,
                            roundtrip=roundtrip)
    return report.failures

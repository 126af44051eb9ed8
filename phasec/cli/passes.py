"""``phasec passes``: list every registered pass with its phase declaration.

One row per pass: the phases it accepts, its transition (if any), its
``opt_level`` and the passes it requires; ``--verbose`` adds its options
(with defaults) and the first line of its docstring; ``--json`` prints the
same as a JSON list of typed records for tools (see :func:`pass_records`).
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
from typing import Any

from phasec.errors import InputError
from phasec.transform import MISSING, describe_phases, format_value, load_plugins, pass_entries


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="also show each pass's options and description")
    parser.add_argument("--format", choices=("table", "json"), default=None,
                        help="a table (the default) or a JSON list, as every command's "
                             "--format")
    parser.add_argument("--json", action="store_true", help="the same as --format json")


def _options_text(defaults: dict[str, Any]) -> str:
    parts = []
    for key, value in defaults.items():
        try:
            shown = "<required>" if value is MISSING else format_value(value)
        except ValueError:  # a default with no textual form (e.g. an object)
            shown = f"<{type(value).__name__}>"
        parts.append(f"{key}={shown}")
    return ", ".join(parts) or "-"


def pass_records(verbose: bool = False) -> list[dict[str, Any]]:
    """One typed record per registered pass (sorted by name), for ``--json``.

    ``phases``: the accepted phase labels in order; ``transition``: the phase a
    transition pass moves to, else null; ``opt_level``: an int; ``requires``:
    a list of pass names; with ``verbose``, ``options`` (name -> default, null
    for a required option or a default with no JSON form) and ``description``.
    """
    records = []
    for entry in pass_entries():
        info = entry.info
        record: dict[str, Any] = {
            "pass": entry.name,
            "phases": [p.label for p in sorted(info.phases)],
            "transition": info.transition_to.label if info.transition_to is not None else None,
            "opt_level": info.opt_level,
            "requires": list(info.required),
        }
        if verbose:
            record["options"] = {k: _json_default(v) for k, v in entry.option_defaults.items()}
            record["description"] = description(entry)
        records.append(record)
    return records


def description(entry: Any) -> str:
    """What a pass does: the first paragraph of its docstring (a whole
    sentence, where the registry's ``doc`` is the first line only), as plain
    text."""
    text = inspect.getdoc(entry.factory) or ""
    paragraph = text.strip().split("\n\n", 1)[0]
    return plain_text(" ".join(paragraph.split()))


def plain_text(doc: str | None) -> str:
    """A docstring's text as a terminal shows it: reST's ``literal`` and
    :role:`target` markup become `literal` and `target`."""
    if not doc:
        return ""
    text = re.sub(r":[\w:]+:`~?([^`]+)`", r"`\1`", doc)
    return text.replace("``", "`")


def _json_default(value: Any) -> Any:
    if value is MISSING:
        return None
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return None
    return value


def pass_rows(verbose: bool = False) -> list[dict[str, str]]:
    """One dict per registered pass (sorted by name): the table's cells."""
    rows = []
    for entry in pass_entries():
        info = entry.info
        row = {
            "pass": entry.name,
            "phases": describe_phases(info.phases),
            "transition": (f"-> {info.transition_to.label}" if info.transition_to is not None
                           else "-"),
            "opt_level": str(info.opt_level),
            "requires": ", ".join(info.required) or "-",
        }
        if verbose:
            row["options"] = _options_text(entry.option_defaults)
            row["description"] = description(entry) or "-"
        rows.append(row)
    return rows


#: long cells (options, description) go on indented lines wrapped to this width
COLUMNS = 100
_WRAPPED = ("options", "description")


def render_table(rows: list[dict[str, str]]) -> str:
    """The table; with ``--verbose`` each pass's options and description follow
    its row on indented lines, so the output stays within :data:`COLUMNS`."""
    if not rows:
        return "(no passes registered)"
    import textwrap

    header = [h for h in rows[0] if h not in _WRAPPED]
    widths = {h: max(len(h), *(len(r[h]) for r in rows)) for h in header}
    # The last column (requires) takes what is left of the width, wrapping
    # onto continuation lines aligned under it.
    last = header[-1]
    start = sum(widths[h] + 2 for h in header[:-1])
    widths[last] = max(len(last), min(widths[last], COLUMNS - start))
    lines = ["  ".join(h.upper().ljust(widths[h]) for h in header).rstrip()]
    lines.append("  ".join("-" * widths[h] for h in header))
    for r in rows:
        cell = textwrap.wrap(r[last], width=widths[last], break_on_hyphens=False) or [""]
        lines.append("  ".join([*(r[h].ljust(widths[h]) for h in header[:-1]), cell[0]])
                     .rstrip())
        lines.extend(" " * start + more for more in cell[1:])
        for key in _WRAPPED:
            if key in r and r[key] != "-":
                lines.extend(textwrap.wrap(f"{key}: {r[key]}", width=COLUMNS,
                                           initial_indent="    ", subsequent_indent="      "))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    load_plugins(args.load)
    if args.json and args.format == "table":
        raise InputError("--json and --format table contradict each other: give one")
    if args.json or args.format == "json":
        print(json.dumps(pass_records(verbose=args.verbose), indent=2))
    else:
        rows = pass_rows(verbose=args.verbose)
        print(render_table(rows))
        print(f"\n{len(rows)} passes. Phases: ingestion (0) -> optimization (1) -> "
              "lowering (2) -> build (3);\na pass runs only in the phases it accepts.")
    return 0

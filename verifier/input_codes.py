"""Codes for inputs that are not modules at all (``phasec-check``).

The verifier's rules (``WF``/``PH`` codes) describe modules; these ``IN``
codes describe why a file could not be read as a module, so that every
problem ``phasec-check`` reports carries a stable code that CI filters,
SARIF viewers and ``--explain`` understand.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

__all__ = ["InputCode", "INPUT_CODES", "input_code_for", "explain_input_code"]


@dataclass(frozen=True)
class InputCode:
    """One kind of unusable input: its code, title and explanation."""

    code: str
    title: str
    explanation: str


INPUT_CODES: dict[str, InputCode] = {c.code: c for c in (
    InputCode("IN001", "unreadable input",
              "The path could not be read as a text module: it does not exist, it is a "
              "device, FIFO or socket, it is binary or not UTF-8, or it is larger than the "
              "size limit. Check the path; phasec-check reads regular files and '-' "
              "(standard input) only."),
    InputCode("IN002", "TVMScript syntax error",
              "The file is not TVMScript that phasec can parse: a Python syntax error, a "
              "construct outside the TVMScript subset phasec reads, or an unknown operator. "
              "The message gives the line and column. The file is parsed, never executed."),
    InputCode("IN003", "invalid JSON module",
              "The JSON document does not fit the module format: the message lists the path "
              "of each offending field. `phasec schema` prints the JSON Schema."),
    InputCode("IN004", "module cannot be built",
              "The text parsed, but describes IR that cannot be built: struct info that does "
              "not infer, a value out of range, or a malformed node. The message names the "
              "construct and where it is."),
    InputCode("IN005", "internal error",
              "phasec-check itself failed on this file: this is a bug in phasec. Please "
              "report it with the file."),
)}

_BY_KIND = {"OSError": "IN001", "ParseError": "IN002", "SchemaError": "IN003",
            "InternalError": "IN005"}


def input_code_for(kind: str) -> str:
    """The code for an input error of ``kind`` (an exception class name)."""
    return _BY_KIND.get(kind, "IN004")


def explain_input_code(code: str) -> str:
    """The documentation of an input code, in the layout of a rule's; KeyError if unknown."""
    entry = INPUT_CODES[code.upper()]
    body = textwrap.fill(" ".join(entry.explanation.split()), width=78)
    return (f"{entry.code}: {entry.title}\n\nApplies to: files that cannot be read as a module "
            f"(exit status 2).\n\n{body}\n")

"""Pass options: where a pass's options come from and how they are spelled.

The options of a configurable pass are the fields of its frozen dataclass
(or the parameters of its factory): :func:`signature_defaults` reads them.
Their textual form is the one of pipeline specs, ``FuseOps{fuse_opt_level=2}``:
:func:`format_value` spells one value and :func:`options_spec` the braces;
:mod:`phasec.transform.spec` parses them back.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
from collections.abc import Mapping
from typing import Any

from phasec.ir import Phase
from phasec.transform.info import PassConfigError

__all__ = ["MISSING", "SPEC_KEYWORDS", "signature_defaults", "format_value", "options_spec"]

#: Marks an option without a default in :meth:`Pass.option_defaults`.
MISSING: Any = dataclasses.MISSING

#: Words a pipeline spec reads as values (any other bare word is a string).
SPEC_KEYWORDS: dict[str, Any] = {"true": True, "false": False, "none": None}

_BARE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")


def signature_defaults(target: Any) -> dict[str, Any]:
    """Options of a pass class or factory: its dataclass fields or parameters,
    each with its default (:data:`MISSING` when it has none)."""
    if isinstance(target, type) and dataclasses.is_dataclass(target):
        out = {}
        for f in dataclasses.fields(target):
            if not f.init:
                continue
            if f.default is not dataclasses.MISSING:
                out[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                out[f.name] = f.default_factory()
            else:
                out[f.name] = MISSING
        return out
    if isinstance(target, type) and target.__init__ is object.__init__:
        return {}
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return {}
    return {name: (MISSING if p.default is inspect.Parameter.empty else p.default)
            for name, p in sig.parameters.items()
            if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)}


def format_value(value: Any) -> str:
    """The spec spelling of an option value (inverse of the parser)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Phase):
        return value.label
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        if _BARE_WORD.match(value) and value.lower() not in SPEC_KEYWORDS:
            return value
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(value, (tuple, list, frozenset)):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    raise PassConfigError(f"option value {value!r} ({type(value).__name__}) has no textual form")


def options_spec(options: Mapping[str, Any], defaults: Mapping[str, Any]) -> str:
    """``{opt=value,...}`` for the options that differ from their defaults;
    empty when none does."""
    parts = []
    for key, value in options.items():
        default = defaults.get(key, MISSING)
        if default is not MISSING and _same(value, default):
            continue
        parts.append(f"{key}={format_value(value)}")
    return "{" + ",".join(parts) + "}" if parts else ""


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # values without a usable ==
        return a is b

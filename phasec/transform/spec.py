"""Textual pipelines: ``"LambdaLifting,FoldConstant,FuseOps{fuse_opt_level=2}"``.

Grammar (whitespace is ignored between tokens)::

    pipeline := [ item ( "," item )* ]
    item     := NAME [ "{" [ option ( "," option )* ] "}" ]
    option   := KEY "=" value
    value    := INT | FLOAT | "true" | "false" | "none" | STRING | WORD
              | "[" [ value ( "," value )* ] "]"

``NAME`` is a registered pass name; ``STRING`` is single- or double-quoted
with backslash escapes; a bare ``WORD`` is a string. Values are converted to
the type of the option's default (an int default takes ints, a float default
ints or floats, a tuple default a list, a Phase default a phase name...).

Errors are :class:`PassConfigError` (a ``ValueError``) with the column and
a caret under the offending text, listing the known passes or options.
"""

from __future__ import annotations

import enum
import re
from typing import Any

from phasec.ir import Phase
from phasec.transform.info import PassConfigError
from phasec.transform.options import MISSING, SPEC_KEYWORDS, format_value
from phasec.transform.pass_infra import Pass
from phasec.transform.registry import REGISTRY, PassRegistry
from phasec.transform.sequential import Sequential

__all__ = ["parse_pipeline", "pass_spec", "format_value"]

_TOKEN_RE = re.compile(r"""
    (?P<ws>\s+)
  | (?P<punct>[,{}=\[\]])
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<number>[+-]?(?:\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+)(?![A-Za-z_.]))
  | (?P<word>[A-Za-z_][A-Za-z0-9_.\-]*)
""", re.VERBOSE)



class _Tok:
    __slots__ = ("kind", "text", "value", "col")

    def __init__(self, kind: str, text: str, value: Any, col: int) -> None:
        self.kind, self.text, self.value, self.col = kind, text, value, col


def _unescape(body: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = self._lex(text)
        self.i = 0

    def error(self, message: str, col: int | None = None) -> PassConfigError:
        if col is None:
            col = self.toks[self.i].col if self.i < len(self.toks) else len(self.text)
        caret = " " * col + "^"
        return PassConfigError(f"pipeline spec, column {col + 1}: {message}\n  {self.text}\n  {caret}")

    def _lex(self, text: str) -> list[_Tok]:
        toks: list[_Tok] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN_RE.match(text, pos)
            if m is None:
                self.toks = []
                raise self.error(f"unexpected character {text[pos]!r}", pos)
            kind = m.lastgroup
            tok = m.group()
            if kind == "string":
                toks.append(_Tok("string", tok, _unescape(tok[1:-1]), pos))
            elif kind == "number":
                value = float(tok) if any(c in tok for c in ".eE") else int(tok)
                toks.append(_Tok("number", tok, value, pos))
            elif kind in ("word", "punct"):
                toks.append(_Tok(kind, tok, tok, pos))
            pos = m.end()
        return toks

    def peek(self, text: str | None = None) -> _Tok | None:
        if self.i >= len(self.toks):
            return None
        tok = self.toks[self.i]
        if text is not None and not (tok.kind == "punct" and tok.text == text):
            return None
        return tok

    def expect(self, text: str, what: str) -> _Tok:
        tok = self.peek(text)
        if tok is None:
            found = self.toks[self.i].text if self.i < len(self.toks) else "end of text"
            raise self.error(f"expected {what}, found {found!r}")
        self.i += 1
        return tok

    def word(self, what: str) -> _Tok:
        if self.i < len(self.toks) and self.toks[self.i].kind == "word":
            self.i += 1
            return self.toks[self.i - 1]
        found = self.toks[self.i].text if self.i < len(self.toks) else "end of text"
        raise self.error(f"expected {what}, found {found!r}")

    def value(self) -> tuple[Any, int]:
        if self.i >= len(self.toks):
            raise self.error("expected a value, found end of text")
        tok = self.toks[self.i]
        if tok.kind == "punct" and tok.text == "[":
            self.i += 1
            items = []
            if self.peek("]") is None:
                items.append(self.value()[0])
                while self.peek(","):
                    self.i += 1
                    items.append(self.value()[0])
            self.expect("]", "',' or ']' in a list")
            return items, tok.col
        if tok.kind == "punct":
            raise self.error(f"expected a value, found {tok.text!r}")
        self.i += 1
        if tok.kind == "word" and tok.text.lower() in SPEC_KEYWORDS:
            return SPEC_KEYWORDS[tok.text.lower()], tok.col
        return tok.value, tok.col


def _coerce(value: Any, default: Any, pass_name: str, key: str) -> Any:
    """Convert a parsed value to the type of the option's default."""
    def bad(expected: str) -> PassConfigError:
        return PassConfigError(f"option {key} of {pass_name} expects {expected}, "
                               f"got {format_value(value)}")

    if default is MISSING or default is None:
        return tuple(value) if isinstance(value, list) else value
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if isinstance(default, Phase):
        try:
            return Phase.parse(value)
        except ValueError:
            raise bad(f"a phase ({Phase.choices()})") from None
    if isinstance(default, enum.Enum):
        members = type(default).__members__
        if isinstance(value, str) and value in members:
            return members[value]
        raise bad("one of " + ", ".join(members))
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("an integer")
        return value
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad("a number")
        return float(value)
    if isinstance(default, str):
        if not isinstance(value, str):
            raise bad("a string")
        return value
    if isinstance(default, (tuple, list, frozenset)):
        if not isinstance(value, list):
            raise bad("a list [...]")
        return type(default)(value)
    return value


def parse_pipeline(text: str, *, name: str = "sequential", opt_level: int = 0,
                   registry: PassRegistry | None = None) -> Sequential:
    """Parse a textual pipeline into a :class:`Sequential` of registered passes.

    ``Sequential.spec()`` prints it back. Raises :class:`PassConfigError`
    for a syntax error, an unknown pass (listing the known ones) or an
    unknown or ill-typed option (listing the pass's options).
    """
    if not isinstance(text, str):
        raise PassConfigError(f"a pipeline spec is a string, not {type(text).__name__}")
    reg = registry if registry is not None else REGISTRY
    parser = _Parser(text)
    passes: list[Pass] = []
    if parser.toks:
        while True:
            tok = parser.word("a pass name")
            if tok.text not in reg:
                raise parser.error(reg.unknown_message(tok.text), tok.col)
            entry = reg.entry(tok.text)
            defaults = entry.option_defaults
            options: dict[str, Any] = {}
            if parser.peek("{"):
                parser.i += 1
                if parser.peek("}") is None:
                    while True:
                        key = parser.word(f"an option name of {tok.text}")
                        if key.text not in defaults:
                            known = ", ".join(f"{k}={'<required>' if v is MISSING else format_value(v)}"
                                              for k, v in defaults.items()) or "(none)"
                            raise parser.error(f"pass {tok.text} has no option {key.text!r}; "
                                               f"its options: {known}", key.col)
                        if key.text in options:
                            raise parser.error(f"option {key.text!r} given twice", key.col)
                        parser.expect("=", f"'=' after option {key.text}")
                        raw, col = parser.value()
                        try:
                            options[key.text] = _coerce(raw, defaults[key.text], tok.text,
                                                        key.text)
                        except PassConfigError as exc:
                            raise parser.error(str(exc), col) from None
                        if not parser.peek(","):
                            break
                        parser.i += 1
                parser.expect("}", "',' or '}' after an option")
            try:
                passes.append(entry.create(**options))
            except PassConfigError as exc:
                raise parser.error(str(exc), tok.col) from None
            if parser.peek() is None:
                break
            parser.expect(",", "',' between passes")
    return Sequential(passes, opt_level=opt_level, name=name)


def pass_spec(p: Pass) -> str:
    """``Name`` or ``Name{opt=value,...}`` listing options that differ from
    their defaults; a Sequential prints its passes, comma-separated
    (:meth:`Pass.spec`)."""
    return p.spec()

"""The table of ONNX operator converters.

A converter is a function ``fn(ctx: NodeContext) -> value | list[value]``
registered for one or more ONNX ``op_type``\\ s of the default domain (or of
another domain, ``domain="com.microsoft"``: keyed ``"com.microsoft:QLinearAdd"``). It
emits phasec operator calls through ``ctx.emit`` (one ONNX op may become
several phasec ops: composite ops are decomposed) and returns the node's
output value(s); ``None`` for an optional output it does not produce. A
case outside what it supports raises :class:`~._context.Unsupported` with
the reason.

The table is filled by importing the families (``ops_*.py``), which the
graph walk (:mod:`._importer`) does: it sits above them, this module below.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Converter", "CONVERTERS", "converter", "converter_key"]


@dataclass(frozen=True)
class Converter:
    op_type: str
    fn: Callable[[Any], Any]
    #: the oldest opset version whose semantics the converter implements
    since: int = 1


CONVERTERS: dict[str, Converter] = {}


def converter_key(domain: str, op_type: str) -> str:
    """The table's key of ``op_type`` in ``domain`` ("" or "ai.onnx": the default)."""
    return op_type if domain in ("", "ai.onnx") else f"{domain}:{op_type}"


def converter(*op_types: str, since: int = 1, domain: str = "") -> Callable[[Callable], Callable]:
    """Register ``fn`` as the converter of every name in ``op_types`` (of ``domain``;
    ``since`` counts in that domain's opset versions)."""
    def wrap(fn: Callable) -> Callable:
        for t in (converter_key(domain, op) for op in op_types):
            if t in CONVERTERS:
                raise ValueError(f"ONNX operator {t} has two converters")
            CONVERTERS[t] = Converter(t, fn, since)
        return fn
    return wrap

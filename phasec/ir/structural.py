"""Structural equality and hashing of IR (modules, functions, expressions).

Two programs are structurally equal when they have the same shape and their
variables correspond one-to-one (alpha-equivalence): relax ``Var``s, TIR
``Var``s and ``Buffer``s are matched by a bijection built in traversal order.
``GlobalVar``s compare by name; spans and derived struct info are ignored.

Both functions use an explicit stack, so program size never meets Python's
recursion limit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from . import tir
from .expr import GlobalVar, Var
from .module import IRModule
from .node import Node

__all__ = ["structural_equal", "structural_hash", "assert_structural_equal",
           "StructuralMismatch"]

_BOUND = (Var, tir.Var, tir.Buffer)


class StructuralMismatch(AssertionError):
    """Raised by :func:`assert_structural_equal`; says where the two differ."""


def _module_view(m: Any) -> Any:
    if isinstance(m, IRModule):
        return ("IRModule", tuple(sorted(m.functions.items(), key=lambda kv: kv[0])),
                dict(m.attrs), dict(m.global_infos))
    return m


def _first_mismatch(lhs: Any, rhs: Any) -> str | None:
    """Return None when equal, else a path describing the first difference."""
    var_map: dict[int, Any] = {}
    rev_map: dict[int, Any] = {}
    # Each entry: (a, b, path) where path is a (parent, key) linked list.
    stack: list[tuple[Any, Any, Any]] = [(_module_view(lhs), _module_view(rhs), None)]
    while stack:
        a, b, path = stack.pop()
        ta = type(a)
        if ta is not type(b):
            return _fmt(path, f"{ta.__name__} vs {type(b).__name__}")
        if isinstance(a, Node):
            if isinstance(a, _BOUND):
                mapped = var_map.get(id(a))
                if mapped is not None:
                    if mapped is not b:
                        return _fmt(path, f"variable {_name(a)} corresponds to two variables")
                    continue
                if id(b) in rev_map:
                    return _fmt(path, f"variable {_name(b)} corresponds to two variables")
                var_map[id(a)] = b
                rev_map[id(b)] = a
            elif isinstance(a, GlobalVar):
                if a.name_hint != b.name_hint:
                    return _fmt(path, f"global {a.name_hint} vs {b.name_hint}")
                continue
            fields = ta._fields
            for name in reversed(fields):
                if name == "name_hint" or (name == "name" and isinstance(a, _BOUND)):
                    continue  # variable names are hints, not identity
                stack.append((getattr(a, name), getattr(b, name), (path, name)))
        elif isinstance(a, (tuple, list)):
            if len(a) != len(b):
                return _fmt(path, f"length {len(a)} vs {len(b)}")
            for i in range(len(a) - 1, -1, -1):
                stack.append((a[i], b[i], (path, i)))
        elif isinstance(a, Mapping):
            if set(a) != set(b):
                return _fmt(path, f"keys {sorted(map(str, a))} vs {sorted(map(str, b))}")
            for k in reversed(list(a)):
                stack.append((a[k], b[k], (path, k)))
        elif isinstance(a, np.ndarray):
            if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
                return _fmt(path, "constant data differs")
        elif isinstance(a, float):
            if not (a == b or (math.isnan(a) and math.isnan(b))):
                return _fmt(path, f"{a!r} vs {b!r}")
        elif a != b:
            return _fmt(path, f"{a!r} vs {b!r}")
    return None


def _name(v: Any) -> str:
    return getattr(v, "name_hint", None) or getattr(v, "name", "?")


def _fmt(path: Any, what: str) -> str:
    keys = []
    while path is not None:
        path, key = path
        keys.append(f"[{key}]" if isinstance(key, int) else f".{key}")
    return "".join(reversed(keys)).lstrip(".") + ": " + what


def structural_equal(lhs: Any, rhs: Any) -> bool:
    """True when ``lhs`` and ``rhs`` are equal up to renaming of variables."""
    return _first_mismatch(lhs, rhs) is None


def assert_structural_equal(lhs: Any, rhs: Any) -> None:
    """Raise :class:`StructuralMismatch` naming the first difference."""
    where = _first_mismatch(lhs, rhs)
    if where is not None:
        raise StructuralMismatch(f"not structurally equal at {where}")


def structural_hash(value: Any) -> int:
    """A hash consistent with :func:`structural_equal`."""
    tokens: list[Any] = []
    var_index: dict[int, int] = {}
    stack: list[Any] = [_module_view(value)]
    while stack:
        a = stack.pop()
        ta = type(a)
        if isinstance(a, Node):
            if isinstance(a, _BOUND):
                idx = var_index.get(id(a))
                if idx is not None:
                    tokens.append(("v", idx))
                    continue
                var_index[id(a)] = len(var_index)
            elif isinstance(a, GlobalVar):
                tokens.append(("g", a.name_hint))
                continue
            tokens.append(ta.__name__)
            for name in reversed(ta._fields):
                if name == "name_hint" or (name == "name" and isinstance(a, _BOUND)):
                    continue
                stack.append(getattr(a, name))
        elif isinstance(a, (tuple, list)):
            tokens.append(("t", len(a)))
            stack.extend(reversed(a))
        elif isinstance(a, Mapping):
            keys = sorted(a, key=str)
            tokens.append(("m", tuple(keys)))
            stack.extend(a[k] for k in reversed(keys))
        elif isinstance(a, np.ndarray):
            tokens.append((str(a.dtype), a.shape, a.tobytes()))
        elif isinstance(a, float) and math.isnan(a):
            tokens.append("nan")
        else:
            tokens.append(a)
    return hash(tuple(tokens))

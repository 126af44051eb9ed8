"""Structural equality and hashing of IR (modules, functions, expressions).

Two programs are structurally equal when they have the same shape and their
variables correspond one-to-one (alpha-equivalence): relax ``Var``s, TIR
``Var``s and ``Buffer``s are matched by a bijection built in traversal order.
``GlobalVar``s compare by name; spans and derived struct info are ignored.

Both functions use an explicit stack, so program size never meets Python's
recursion limit.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np

from phasec.ir import tir
from phasec.ir.expr import GlobalVar, Var
from phasec.ir.module import IRModule
from phasec.ir.node import Node

__all__ = ["structural_equal", "structural_hash", "assert_structural_equal",
           "first_mismatch", "StructuralMismatch", "exact_fingerprint"]

_BOUND = (Var, tir.Var, tir.Buffer)


class StructuralMismatch(AssertionError):
    """Raised by :func:`assert_structural_equal`; says where the two differ."""


def _module_view(m: Any) -> Any:
    if isinstance(m, IRModule):
        return ("IRModule", tuple(sorted(m.functions.items(), key=lambda kv: kv[0])),
                dict(m.attrs), dict(m.global_infos))
    return m


def first_mismatch(lhs: Any, rhs: Any) -> str | None:
    """None when ``lhs`` and ``rhs`` are structurally equal, else where they
    first differ: a path and what differs there (``body.stmts[2].value: 1 vs
    2``)."""
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
    return first_mismatch(lhs, rhs) is None


def assert_structural_equal(lhs: Any, rhs: Any) -> None:
    """Raise :class:`StructuralMismatch` naming the first difference."""
    where = first_mismatch(lhs, rhs)
    if where is not None:
        raise StructuralMismatch(f"not structurally equal at {where}")


# A PrimFunc is immutable, and a build hashes each kernel several times
# (LegalizeOps deduplicating kernels, the kernel cache keying a library):
# its walk is remembered by identity, and the exact fingerprint the disk
# cache needs comes from the same walk. Strong references keep ids unique.
class _Walked:
    __slots__ = ("func", "hash", "tokens", "names", "exact", "fingerprint")

    def __init__(self, func: Any, tokens: list[Any], names: list[str], exact: bool) -> None:
        self.func = func
        self.hash = hash(tuple(tokens))
        self.tokens: list[Any] | None = tokens  # dropped once fingerprinted
        self.names = names
        self.exact = exact
        self.fingerprint: str | None = None


_WALKED: dict[int, _Walked] = {}
_WALKED_MAX = 512
_walked_lock = threading.Lock()


def structural_hash(value: Any) -> int:
    """A hash consistent with :func:`structural_equal`.

    A PrimFunc's hash is computed once per object; a mapping of names to
    PrimFuncs (a kernel library) combines its functions' hashes (equal
    mappings have pairwise equal functions, so this stays consistent).
    """
    if isinstance(value, tir.PrimFunc):
        return _walked(value).hash
    if _is_library(value):
        return hash(("prim_funcs", tuple((k, _walked(value[k]).hash) for k in sorted(value))))
    return hash(tuple(_tokens(value)[0]))


def exact_fingerprint(value: Any) -> str | None:
    """A SHA-256 hex digest of a PrimFunc, or of a mapping of names to
    PrimFuncs, stable across processes: the walk of :func:`structural_hash`
    plus the variables' and buffers' names (derived fields such as an
    expression's dtype follow from the rest; spans are left out). Equal
    fingerprints mean the same program, names included, which is what a
    persistent cache may key generated code by.

    None when the program holds a leaf value this function cannot write out
    exactly (anything but str, int, float, bool, None, bytes, numpy arrays,
    nodes and containers of them) or is not such a mapping.
    """
    if isinstance(value, tir.PrimFunc):
        return _fingerprint(_walked(value))
    if not _is_library(value):
        return None
    parts = []
    for k in sorted(value):
        fp = _fingerprint(_walked(value[k]))
        if fp is None:
            return None
        parts.append((k, fp))
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def _is_library(value: Any) -> bool:
    return (isinstance(value, Mapping) and not isinstance(value, IRModule) and bool(value)
            and all(isinstance(k, str) and isinstance(v, tir.PrimFunc)
                    for k, v in value.items()))


def _walked(func: tir.PrimFunc) -> _Walked:
    hit = _WALKED.get(id(func))
    if hit is not None and hit.func is func:
        return hit
    w = _Walked(func, *_tokens(func))
    with _walked_lock:
        if len(_WALKED) >= _WALKED_MAX:
            _WALKED.pop(next(iter(_WALKED)))
        _WALKED[id(func)] = w
    return w


def _fingerprint(w: _Walked) -> str | None:
    if w.fingerprint is None and w.exact:
        h = hashlib.sha256(repr(w.tokens).encode())
        h.update(b"\0names")
        h.update(repr(w.names).encode())
        w.fingerprint = h.hexdigest()
        w.tokens = None
    return w.fingerprint


_EXACT_LEAVES = frozenset((str, int, float, bool, type(None), bytes))


# Per node class: (kind, field names walked, last first). kind 0: a plain
# node, 1: a bound variable (names left out), 2: a GlobalVar (its name only).
_NODE_PLAN: dict[type, tuple[int, tuple[str, ...]]] = {}
_SCALARS = frozenset((str, int, bool, type(None), bytes))


def _node_plan(t: type) -> tuple[int, tuple[str, ...]]:
    plan = _NODE_PLAN.get(t)
    if plan is None:
        bound = issubclass(t, _BOUND)
        kind = 1 if bound else 2 if issubclass(t, GlobalVar) else 0
        fields = tuple(f for f in reversed(t._fields)
                       if not (f == "name_hint" or (f == "name" and bound)))
        plan = _NODE_PLAN[t] = (kind, fields)
    return plan


def _tokens(value: Any) -> tuple[list[Any], list[str], bool]:
    """The structural walk: (tokens, names of the bound variables in order of
    first appearance, whether every leaf has an exact repr). Dispatches on the
    exact type first: this walk is most of what a warm build spends on kernels."""
    tokens: list[Any] = []
    append = tokens.append
    names: list[str] = []
    exact = True
    var_index: dict[int, int] = {}
    stack: list[Any] = [_module_view(value)]
    pop, push, extend = stack.pop, stack.append, stack.extend
    plans = _NODE_PLAN
    while stack:
        a = pop()
        ta = type(a)
        if ta in _SCALARS:
            append(a)
            continue
        plan = plans.get(ta)
        if plan is None and isinstance(a, Node):
            plan = _node_plan(ta)
        if plan is not None:
            kind, fields = plan
            if kind == 1:
                idx = var_index.get(id(a))
                if idx is not None:
                    append(("v", idx))
                    continue
                var_index[id(a)] = len(var_index)
                names.append(_name(a))
            elif kind == 2:
                append(("g", a.name_hint))
                continue
            append(ta)  # the class: its repr cannot be mistaken for a str leaf's
            for name in fields:
                push(getattr(a, name))
        elif ta is tuple or ta is list:
            append(("t", len(a)))
            extend(reversed(a))
        elif ta is float:
            append(("nan",) if a != a else a)
        elif isinstance(a, (tuple, list)):
            append(("t", len(a)))
            extend(reversed(a))
        elif isinstance(a, Mapping):
            keys = sorted(a, key=str)
            if exact and not all(type(k) is str for k in keys):
                exact = False
            append(("m", tuple(keys)))
            extend(a[k] for k in reversed(keys))
        elif isinstance(a, np.ndarray):
            append((str(a.dtype), a.shape, a.tobytes()))
        elif isinstance(a, float) and math.isnan(a):
            append(("nan",))
        else:
            if ta not in _EXACT_LEAVES:
                exact = False
            append(a)
    return tokens, names, exact

"""Shared pieces of the TVMScript printer: the spelling in use, literals,
unique names, scalar (PrimExpr) expressions and attribute values.

The Relax printer (``_print_relax``) and the TIR printer (``_print_tir``) build
on these; :mod:`phasec.script.printer` is the public API.
"""

from __future__ import annotations

import contextlib
import hashlib
import keyword
import math
import re
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from enum import Enum
from typing import Any

import numpy as np

from phasec.ir import tir
from phasec.ir.expr import Expr
from phasec.ir.module import Target, VDevice
from phasec.ir.node import Node
from phasec.ir.phase import Phase
from phasec.ir.struct_info import StructInfo
from phasec.ir.tir_visitor import walk

INDENT = "    "

# ---------------------------------------------------------------------------
# Spelling
# ---------------------------------------------------------------------------

#: The spellings the printer knows: ``"tvm"`` is what TVM 0.27 prints and
#: parses (``tirx``, ``T.sblock``, ``out_ty=``, ``out_dtype=None``);
#: ``"legacy"`` is the spelling of TVM releases before 0.27 (``tir``,
#: ``T.block``, ``out_sinfo=``, ``out_dtype="void"``). The parser reads both.
SYNTAXES = ("tvm", "legacy")

_SYNTAX: ContextVar[str] = ContextVar("phasec_script_syntax", default="tvm")


def check_syntax(name: str) -> str:
    """``name`` if it is a known spelling, else a ValueError listing them."""
    if name not in SYNTAXES:
        raise ValueError(f"unknown TVMScript syntax {name!r}: expected one of "
                         f"{', '.join(SYNTAXES)}")
    return name


@contextlib.contextmanager
def syntax(name: str) -> Iterator[None]:
    """Print in spelling ``name`` (one of :data:`SYNTAXES`) within the block."""
    token = _SYNTAX.set(check_syntax(name))
    try:
        yield
    finally:
        _SYNTAX.reset(token)


def legacy() -> bool:
    """True when printing the pre-0.27 spelling."""
    return _SYNTAX.get() == "legacy"


# ---------------------------------------------------------------------------
# Large constants as metadata references
# ---------------------------------------------------------------------------

#: the metadata table TVM prints Relax constants under (``show_meta=False``)
METADATA_KEY = "relax.expr.Constant"


class ConstantElision:
    """Print Relax constants of more than ``max_elements`` elements as TVM
    does without its metadata section: ``metadata["relax.expr.Constant"][i]``.

    A value gets one index for as long as this object is used (values are
    told apart by a digest of dtype, shape and bytes), so a weight has the
    same reference in every module printed with it and a diff shows only
    real changes. ``entries[i]`` is ``(dtype, shape, digest, nbytes)`` and
    ``values[i]`` the array; ``used`` collects the indices printed since it
    was last cleared. :meth:`legend` writes comment lines naming them. The
    text reads back only with the values (``parse(text, metadata=
    {"relax.expr.Constant": elision.values})``): for reports and messages,
    not for saving modules."""

    def __init__(self, max_elements: int = 1024) -> None:
        self.max_elements = max_elements
        self.entries: list[tuple[str, tuple[int, ...], str, int]] = []
        self.values: list[np.ndarray] = []
        self.used: set[int] = set()
        self._by_digest: dict[str, int] = {}
        self._by_id: dict[int, tuple[Any, int]] = {}  # id(array) -> (array, index)

    def reference(self, arr: np.ndarray) -> str | None:
        """The reference ``arr`` prints as, or None when it is small enough to print."""
        if arr.size <= self.max_elements:
            return None
        known = self._by_id.get(id(arr))
        if known is not None and known[0] is arr:
            index = known[1]
        else:
            h = hashlib.sha256(f"{arr.dtype}{arr.shape}".encode())
            h.update(np.ascontiguousarray(arr).tobytes())
            digest = h.hexdigest()[:12]
            index = self._by_digest.get(digest)
            if index is None:
                index = self._by_digest[digest] = len(self.entries)
                self.entries.append((str(arr.dtype), tuple(arr.shape), digest, int(arr.nbytes)))
                self.values.append(arr)
            self._by_id[id(arr)] = (arr, index)
        self.used.add(index)
        return f"metadata[{quote_str(METADATA_KEY)}][{index}]"

    def legend(self, indices: Iterator[int] | list[int] | set[int]) -> list[str]:
        """Comment lines describing the constants ``indices`` (shape, dtype,
        size, a short sha256 digest of the value)."""
        indices = sorted(indices)
        if not indices:
            return []
        total = sum(self.entries[i][3] for i in indices)
        lines = [f"# {len(indices)} constant{'s' if len(indices) != 1 else ''} of more than "
                 f"{self.max_elements} elements ({_size_text(total)}) printed as "
                 f"metadata[{quote_str(METADATA_KEY)}][i] (values omitted):"]
        for i in indices:
            dtype, shape, digest, nbytes = self.entries[i]
            lines.append(f"#   [{i}] R.Tensor({shape!r}, {quote_str(dtype)}), "
                         f"{_size_text(nbytes)}, sha256 {digest}")
        return lines


def _size_text(nbytes: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if nbytes >= size:
            return f"{nbytes / size:.1f} {unit}"
    return f"{nbytes} B"


_ELISION: ContextVar[ConstantElision | None] = ContextVar("phasec_constant_elision",
                                                            default=None)


@contextlib.contextmanager
def elide_constants(elision: ConstantElision) -> Iterator[ConstantElision]:
    """Within the block, large constants print as metadata references (see
    :class:`ConstantElision`)."""
    token = _ELISION.set(elision)
    try:
        yield elision
    finally:
        _ELISION.reset(token)


def constant_elision() -> ConstantElision | None:
    """The elision in force (:func:`elide_constants`), or None."""
    return _ELISION.get()


#: PrimFunc attribute keys printed in their pre-0.27 spelling (canonical -> legacy).
LEGACY_ATTR_KEYS = {new: old for old, new in tir.LEGACY_ATTR_KEYS.items()}

# Names a variable must never print as: Python keywords, the dialect aliases,
# the module class alias and the builtins that printed text uses.
RESERVED = frozenset(keyword.kwlist) | {"I", "R", "T", "cls", "range", "float"}

_NON_IDENT = re.compile(r"[^0-9A-Za-z_]")


# ---------------------------------------------------------------------------
# Literals
# ---------------------------------------------------------------------------

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def quote_str(s: str) -> str:
    """A double-quoted Python string literal for ``s``."""
    if s.isprintable() and '"' not in s and "\\" not in s:
        return '"' + s + '"'
    out = []
    for ch in s:
        esc = _ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(repr(ch)[1:-1])  # \x00, \u200b, lone surrogates...
    return '"' + "".join(out) + '"'


def float_lit(v: float) -> str:
    """A Python float literal that reads back as exactly ``v``."""
    v = float(v)
    if math.isnan(v):
        return 'float("nan")'
    if math.isinf(v):
        return 'float("inf")' if v > 0 else '-float("inf")'
    return repr(v)


def tuple_text(items: list[str]) -> str:
    if len(items) == 1:
        return "(" + items[0] + ",)"
    return "(" + ", ".join(items) + ")"


def sanitize(hint: str) -> str:
    name = _NON_IDENT.sub("_", hint or "")
    if not name:
        return "v"
    if name[0].isdigit():
        return "v_" + name
    return name


class Namer:
    """Unique, valid identifiers for the variables of one function."""

    __slots__ = ("_by_obj", "_used", "_next", "_alive")

    def __init__(self) -> None:
        self._by_obj: dict[int, str] = {}
        self._used: set[str] = set(RESERVED)
        self._next: dict[str, int] = {}
        self._alive: list[Any] = []  # keeps ids stable for the namer's lifetime

    def get(self, obj: Any, hint: str) -> str:
        name = self._by_obj.get(id(obj))
        if name is None:
            name = self.fresh(hint)
            self._by_obj[id(obj)] = name
            self._alive.append(obj)
        return name

    def known(self, obj: Any) -> bool:
        return id(obj) in self._by_obj

    def fresh(self, hint: str) -> str:
        base = sanitize(hint)
        if base not in self._used:
            self._used.add(base)
            return base
        k = self._next.get(base, 1)
        while f"{base}_{k}" in self._used:
            k += 1
        self._next[base] = k + 1
        name = f"{base}_{k}"
        self._used.add(name)
        return name


# ---------------------------------------------------------------------------
# Scalar (TIR) expressions, shared by the Relax and TIR printers
# ---------------------------------------------------------------------------

# Python operator precedence (higher binds tighter).
_P_OR, _P_AND, _P_NOT, _P_CMP, _P_ADD, _P_MUL, _P_UNARY, _P_ATOM = 1, 2, 3, 4, 6, 7, 8, 10
_BIN_PREC = {
    "or": _P_OR, "and": _P_AND,
    "==": _P_CMP, "!=": _P_CMP, "<": _P_CMP, "<=": _P_CMP, ">": _P_CMP, ">=": _P_CMP,
    "+": _P_ADD, "-": _P_ADD, "*": _P_MUL, "/": _P_MUL, "//": _P_MUL, "%": _P_MUL,
}


class PrimPrinter:
    """Prints PrimExprs; ``int_dtype`` is the dtype a bare integer literal has.

    In Relax code a bare integer is int64 (shape dimensions); in TIR it is
    int32 (as in TVM), so ``T.int64(4)`` is spelt out there.
    """

    def __init__(self, namer: Namer, int_dtype: str) -> None:
        self.namer = namer
        self.int_dtype = int_dtype
        #: TIR vars in order of first appearance (for declarations).
        self.tir_vars: list[tir.Var] = []
        self._tir_seen: set[int] = set()

    # -- names ------------------------------------------------------------
    def tvar(self, v: tir.Var) -> str:
        if id(v) not in self._tir_seen:
            self._tir_seen.add(id(v))
            self.tir_vars.append(v)
        return self.namer.get(v, v.name)

    def buffer_name(self, b: tir.Buffer) -> str:
        return self.namer.get(b, b.name)

    # -- expressions ------------------------------------------------------
    # A bare integer literal is "weak" when read back: next to a typed operand
    # (``i + 1``), or where the context has a dtype (a store into a float16
    # buffer), it takes that dtype, as in TVM. ``hint`` is the dtype a bare
    # literal would take at the position being printed (None: its own);
    # literals that would change dtype are spelt out (``T.int32(1)``).
    def prim(self, e: tir.PrimExpr, hint: str | None = None) -> str:
        return self._prim(e, hint)[0]

    def _weak(self, e: Any) -> bool:
        return type(e) is tir.IntImm and e.dtype == self.int_dtype

    def _pair_hints(self, a: Any, b: Any) -> tuple[str | None, str | None]:
        """Two operands read back together: a bare literal adopts the other's dtype."""
        aw, bw = self._weak(a), self._weak(b)
        return (b.dtype if aw and not bw else None), (a.dtype if bw and not aw else None)

    def pair(self, a: tir.PrimExpr, b: tir.PrimExpr) -> tuple[tuple[str, int], tuple[str, int]]:
        ha, hb = self._pair_hints(a, b)
        return self._prim(a, ha), self._prim(b, hb)

    @staticmethod
    def _paren(operand: tuple[str, int], min_prec: int) -> str:
        text, prec = operand
        return text if prec >= min_prec else "(" + text + ")"

    def int_lit(self, value: int, dtype: str, hint: str | None = None) -> tuple[str, int]:
        if dtype == "bool":
            return f"T.bool({bool(value)})", _P_ATOM
        if dtype == self.int_dtype and (hint is None or hint == dtype):
            return str(value), (_P_UNARY if value < 0 else _P_ATOM)
        return f"T.{dtype}({value})", _P_ATOM

    def _prim(self, root: Any, hint: str | None = None) -> tuple[str, int]:
        """(text, precedence) of ``root``; an explicit stack, not recursion, so
        long operator chains (``a0 + a1 + ... + a9999``) print too."""
        if type(root) not in _COMPOSITE:
            return self._leaf(root, hint)
        # Name variables and buffers in textual order first.
        stack = [root]
        while stack:
            e = stack.pop()
            t = type(e)
            if t is tir.Var:
                self.tvar(e)
            elif t in _COMPOSITE:
                if t is tir.BufferLoad:
                    self.buffer_name(e.buffer)
                stack.extend(reversed(tir.expr_children(e)))
        # Then compose the text bottom-up.
        memo: dict[int, tuple[str, int]] = {}
        todo: list[tuple[Any, bool]] = [(root, False)]
        while todo:
            e, ready = todo.pop()
            if id(e) in memo:
                continue
            if ready:
                memo[id(e)] = self._compose(e, memo)
                continue
            todo.append((e, True))
            todo.extend((c, False) for c in tir.expr_children(e) if type(c) in _COMPOSITE)
        return memo[id(root)]

    def _leaf(self, e: Any, hint: str | None) -> tuple[str, int]:
        t = type(e)
        if t is tir.Var:
            return self.tvar(e), _P_ATOM
        if t is tir.IntImm:
            return self.int_lit(e.value, e.dtype, hint)
        if t is tir.FloatImm:
            return f"T.{e.dtype}({float_lit(e.value)})", _P_ATOM
        if t is tir.StringImm:  # operands of host calls
            return quote_str(e.value), _P_ATOM
        if t is tir.BufferData:
            return f"{self.buffer_name(e.buffer)}.data", _P_ATOM
        if isinstance(e, (bool, int, float, np.generic)):  # tolerate raw Python scalars
            return self._leaf(tir.as_prim_expr(e), hint)
        return f"<unprintable {t.__name__}>", _P_ATOM

    def _compose(self, e: Any, memo: dict[int, tuple[str, int]]) -> tuple[str, int]:
        """The text of a composite node whose composite children are in ``memo``."""

        def sub(c: Any, hint: str | None = None) -> tuple[str, int]:
            return memo[id(c)] if type(c) in _COMPOSITE else self._leaf(c, hint)

        def pair(a: Any, b: Any) -> tuple[tuple[str, int], tuple[str, int]]:
            ha, hb = self._pair_hints(a, b)
            return sub(a, ha), sub(b, hb)

        t = type(e)
        if t is tir.BinaryOp:
            op = e.op
            lhs, rhs = pair(e.lhs, e.rhs)
            if op in ("min", "max", "pow"):
                return f"T.{op}({lhs[0]}, {rhs[0]})", _P_ATOM
            if op == "/" and tir.is_int(e.dtype) and not legacy():
                # TVM 0.27 reads no integer `/` (it asks which division is meant)
                return f"T.truncdiv({lhs[0]}, {rhs[0]})", _P_ATOM
            prec = _BIN_PREC[op]
            # Comparisons do not chain in our semantics: parenthesize both sides.
            left = self._paren(lhs, prec + 1 if prec == _P_CMP else prec)
            return f"{left} {op} {self._paren(rhs, prec + 1)}", prec
        if t is tir.Not:
            return "not " + self._paren(sub(e.value), _P_NOT), _P_NOT
        if t is tir.Cast:
            return f"T.Cast({quote_str(e.dtype)}, {sub(e.value)[0]})", _P_ATOM
        if t is tir.Select:
            a, b = pair(e.true_value, e.false_value)
            return f"T.Select({sub(e.condition)[0]}, {a[0]}, {b[0]})", _P_ATOM
        if t is tir.Call:
            args = ", ".join(sub(a)[0] for a in e.args)
            if e.name == "checked_index" and not legacy():
                # TVM has no such intrinsic: spelt as the external function
                # phasec's kernels call, which TVM reads and checks as any other
                return f'T.call_pure_extern("int64", "{tir.CHECKED_INDEX_EXTERN}", {args})', _P_ATOM
            if e.name.startswith(tir.PRIM_FUNC_CALL):  # another PrimFunc, as TVM prints it
                return f"Module.{e.name[len(tir.PRIM_FUNC_CALL):]}({args})", _P_ATOM
            if e.name == "tvm_struct_get":  # its dtype is an operand, as TVM prints it
                return f"T.tvm_struct_get({args}, {quote_str(e.dtype)})", _P_ATOM
            return f"T.{e.name}({args})", _P_ATOM
        # BufferLoad
        idx = e.indices
        inner = ", ".join(sub(i)[0] for i in idx) if idx else "()"
        return f"{self.buffer_name(e.buffer)}[{inner}]", _P_ATOM

    def indices(self, idx: tuple) -> str:
        if not idx:
            return "[()]"
        return "[" + ", ".join(self.prim(i) for i in idx) + "]"


_COMPOSITE = frozenset({tir.BinaryOp, tir.Not, tir.Cast, tir.Select, tir.Call, tir.BufferLoad})




def has_tir_var(e: Any) -> bool:
    """True when the PrimExpr mentions a variable (a loaded buffer's shape
    included)."""
    return isinstance(e, Node) and any(type(x) is tir.Var for x in walk(e))


def is_zero(e: tir.PrimExpr) -> bool:
    return type(e) is tir.IntImm and e.value == 0


def end_of(lo: tir.PrimExpr, extent: tir.PrimExpr) -> tir.PrimExpr:
    """``lo + extent``, folded the way the parser unfolds ``lo:end``/``range(lo, end)``."""
    if is_zero(lo):
        return extent
    if type(lo) is tir.IntImm and type(extent) is tir.IntImm and lo.dtype == extent.dtype:
        return tir.IntImm(lo.value + extent.value, extent.dtype)
    return tir.BinaryOp("+", lo, extent)


# ---------------------------------------------------------------------------
# Attribute values (function, module and call attributes)
# ---------------------------------------------------------------------------

def attr_text(p: Any, v: Any) -> str:
    """The TVMScript text of attribute value ``v`` (``p``: the printer in use)."""
    if v is None:
        return "None"
    if isinstance(v, Phase):
        return quote_str(v.label)
    if isinstance(v, Enum):
        return attr_text(p, v.value)
    if isinstance(v, (bool, np.bool_)):
        return "True" if v else "False"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return float_lit(v)
    if isinstance(v, str):
        return quote_str(v)
    if isinstance(v, (tuple, list)):
        return tuple_text([attr_text(p, x) for x in v])
    if isinstance(v, Mapping):
        keys = sorted(v, key=str)
        return "{" + ", ".join(f"{attr_text(p, k)}: {attr_text(p, v[k])}" for k in keys) + "}"
    if isinstance(v, np.ndarray):
        return attr_text(p, v.tolist())
    if isinstance(v, tir.PrimExpr):
        return p.prim(v)
    if isinstance(v, tir.Buffer) and hasattr(p, "buffer_name"):
        return p.buffer_name(v)  # a buffer named in a block annotation
    if isinstance(v, StructInfo) and hasattr(p, "sinfo"):
        return p.sinfo(v)
    if isinstance(v, VDevice):
        return vdevice_text(v)
    if isinstance(v, Target):
        return f"T.target({_target_literal(v.target)})"
    if isinstance(v, Expr) and hasattr(p, "sinfo"):
        return p.expr(v)
    return quote_str(repr(v))


def vdevice_text(d: VDevice) -> str:
    """``I.vdevice(target, id, scope)``, the target as written."""
    return f"I.vdevice({_target_literal(d.target)}, {d.vdevice_id}, {quote_str(d.memory_scope)})"


def _target_literal(v: object) -> str:
    """A target value: strings, numbers, booleans, lists and dictionaries."""
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{quote_str(str(k))}: {_target_literal(x)}"
                               for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_target_literal(x) for x in v) + "]"
    if isinstance(v, str):
        return quote_str(v)
    return repr(v)  # bool, int, float, None: Python's spelling is TVMScript's


def attrs_dict_text(p: Any, attrs: Mapping[str, Any]) -> str:
    return attr_text(p, dict(attrs))

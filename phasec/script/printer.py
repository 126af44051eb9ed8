"""TVMScript printer: IR -> text in TVM 0.27 spelling.

The output is the TVMScript subset described in the design (``@I.ir_module``,
``@R.function``, ``@T.prim_func`` ...), so that both phasec's parser and TVM
0.27 can read it back. The printer is deterministic and stable: printing the
parse of a printed module gives the same text.

Naming: every variable is printed by its name hint, made unique within a
function (a second distinct variable hinted ``x`` prints as ``x_1``) and
turned into a valid Python identifier. Relax variables, symbolic shape
variables, TIR variables and buffers share one namespace per module-level
function (its nested functions included), so the text re-parses to a
structurally equal module. A nested function shares the symbolic variables
of the functions around it (as in TVM): each symbolic variable is declared
once, by the innermost function enclosing all its uses.

Printing is linear in program size: binding lists, statement sequences,
``LetStmt``/``Allocate`` chains and TIR expressions are walked with loops;
recursion depth is bounded by the nesting of Relax expressions, branches,
functions and loops.

``parse(print(m))`` is structurally equal to ``m`` for modules in the form the
parser produces (A-normal form). Forms the text cannot express come back
normalized: nested calls (printed inline) become separate bindings; adjacent
binding blocks merge and empty ones vanish; a nested ``SeqStmt`` is
flattened; attribute lists become tuples; a symbolic variable shared by two
module-level functions becomes one per function; a zero-size constant of
rank > 1 prints as ``R.const([], ...)``. ``If``/``SeqExpr``/``Function``
found in expression position are printed as statements before their use.

Scoped TIR statements (``Allocate``, ``LetStmt``) are printed the way TVM's
printer does ("concise scoping"): when nothing follows the statement in its
printed statement list, as an assignment, ``buf = T.alloc_buffer(shape,
dtype)`` / ``v: T.int64 = value``, whose scope is the rest of the list; when
statements outside its scope follow it (``SeqStmt[Allocate(buf, body),
more]``), as a ``with`` block holding exactly its body: ``with
T.decl_buffer(shape, dtype) as buf:`` / ``with T.LetStmt(value) as v:``
(``T.LetStmt(value, T.<dtype>)`` when the variable's dtype is not the
value's). Both are spellings TVM's TVMScript reads (``T.decl_buffer`` is
TVM's allocate-and-declare form, the counterpart of phasec's ``Allocate``);
flattening the scoped form instead would read back with a wider scope. So
the text round trip of a TIR statement is exact, and the kernels phasec
generates (which keep their allocations at the end of statement lists) print
with the familiar ``T.alloc_buffer``. The JSON format is the exact
serialization of everything, nested ``SeqStmt`` included.

Public helpers for diagnostics: :func:`print_module`, :func:`print_function`,
:func:`print_prim_func`, :func:`print_expr`, :func:`print_binding`,
:func:`print_sinfo`, :func:`print_sinfos`, :func:`print_prim_expr`, :func:`print_stmt`.
"""

from __future__ import annotations

import keyword
import math
import re
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

import numpy as np

from ..ir import tir
from ..ir.expr import (
    Binding, BindingBlock, Call, Constant, DataflowBlock, DataflowVar, DataTypeImm, Expr,
    ExternFunc, Function, GlobalVar, If, MatchCast, Op, PrimValue, SeqExpr, ShapeExpr,
    StringImm, Tuple, TupleGetItem, Var,
)
from ..ir.module import IRModule
from ..ir.node import Node
from ..ir.phase import Phase
from ..ir.struct_info import (
    FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
    TensorStructInfo, TupleStructInfo,
)

__all__ = [
    "print_module", "print_function", "print_prim_func", "print_expr", "print_binding",
    "print_sinfo", "print_sinfos", "print_prim_expr", "print_stmt", "quote_str",
]

_INDENT = "    "

HEADER = (
    "# from tvm.script import ir as I",
    "# from tvm.script import relax as R",
    "# from tvm.script import tir as T",
)

# Names a variable must never print as: Python keywords, the dialect aliases,
# the module class alias and the builtins that printed text uses.
_RESERVED = frozenset(keyword.kwlist) | {"I", "R", "T", "cls", "range", "float"}

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


def _float_lit(v: float) -> str:
    """A Python float literal that reads back as exactly ``v``."""
    v = float(v)
    if math.isnan(v):
        return 'float("nan")'
    if math.isinf(v):
        return 'float("inf")' if v > 0 else '-float("inf")'
    return repr(v)


def _tuple_text(items: list[str]) -> str:
    if len(items) == 1:
        return "(" + items[0] + ",)"
    return "(" + ", ".join(items) + ")"


def _sanitize(hint: str) -> str:
    name = _NON_IDENT.sub("_", hint or "")
    if not name:
        return "v"
    if name[0].isdigit():
        return "v_" + name
    return name


class _Namer:
    """Unique, valid identifiers for the variables of one function."""

    __slots__ = ("_by_obj", "_used", "_next", "_alive")

    def __init__(self) -> None:
        self._by_obj: dict[int, str] = {}
        self._used: set[str] = set(_RESERVED)
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
        base = _sanitize(hint)
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


class _PrimPrinter:
    """Prints PrimExprs; ``int_dtype`` is the dtype a bare integer literal has.

    In Relax code a bare integer is int64 (shape dimensions); in TIR it is
    int32 (as in TVM), so ``T.int64(4)`` is spelt out there.
    """

    def __init__(self, namer: _Namer, int_dtype: str) -> None:
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
                stack.extend(reversed(_children(e)))
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
            todo.extend((c, False) for c in _children(e) if type(c) in _COMPOSITE)
        return memo[id(root)]

    def _leaf(self, e: Any, hint: str | None) -> tuple[str, int]:
        t = type(e)
        if t is tir.Var:
            return self.tvar(e), _P_ATOM
        if t is tir.IntImm:
            return self.int_lit(e.value, e.dtype, hint)
        if t is tir.FloatImm:
            return f"T.{e.dtype}({_float_lit(e.value)})", _P_ATOM
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
            return f"T.{e.name}({', '.join(sub(a)[0] for a in e.args)})", _P_ATOM
        # BufferLoad
        idx = e.indices
        inner = ", ".join(sub(i)[0] for i in idx) if idx else "()"
        return f"{self.buffer_name(e.buffer)}[{inner}]", _P_ATOM

    def indices(self, idx: tuple) -> str:
        if not idx:
            return "[()]"
        return "[" + ", ".join(self.prim(i) for i in idx) + "]"


_COMPOSITE = frozenset({tir.BinaryOp, tir.Not, tir.Cast, tir.Select, tir.Call, tir.BufferLoad})


def _children(e: Any) -> tuple:
    t = type(e)
    if t is tir.BinaryOp:
        return (e.lhs, e.rhs)
    if t is tir.Not or t is tir.Cast:
        return (e.value,)
    if t is tir.Select:
        return (e.condition, e.true_value, e.false_value)
    if t is tir.Call:
        return e.args
    if t is tir.BufferLoad:
        return e.indices
    return ()


def _has_tir_var(e: Any) -> bool:
    """True when the PrimExpr mentions a variable (iterative walk)."""
    stack = [e]
    while stack:
        x = stack.pop()
        if type(x) is tir.Var:
            return True
        if isinstance(x, Node):
            for name in type(x)._fields:
                v = getattr(x, name)
                if isinstance(v, Node):
                    stack.append(v)
                elif isinstance(v, tuple):
                    stack.extend(i for i in v if isinstance(i, Node))
    return False


def _is_zero(e: tir.PrimExpr) -> bool:
    return type(e) is tir.IntImm and e.value == 0


def _end_of(lo: tir.PrimExpr, extent: tir.PrimExpr) -> tir.PrimExpr:
    """``lo + extent``, folded the way the parser unfolds ``lo:end``/``range(lo, end)``."""
    if _is_zero(lo):
        return extent
    if type(lo) is tir.IntImm and type(extent) is tir.IntImm and lo.dtype == extent.dtype:
        return tir.IntImm(lo.value + extent.value, extent.dtype)
    return tir.BinaryOp("+", lo, extent)


# ---------------------------------------------------------------------------
# Attribute values (function, module and call attributes)
# ---------------------------------------------------------------------------

def _attr_text(p: "_RelaxPrinter | _TirPrinter", v: Any) -> str:
    if v is None:
        return "None"
    if isinstance(v, Phase):
        return quote_str(v.label)
    if isinstance(v, Enum):
        return _attr_text(p, v.value)
    if isinstance(v, (bool, np.bool_)):
        return "True" if v else "False"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return _float_lit(v)
    if isinstance(v, str):
        return quote_str(v)
    if isinstance(v, (tuple, list)):
        return _tuple_text([_attr_text(p, x) for x in v])
    if isinstance(v, Mapping):
        keys = sorted(v, key=str)
        return "{" + ", ".join(f"{_attr_text(p, k)}: {_attr_text(p, v[k])}" for k in keys) + "}"
    if isinstance(v, np.ndarray):
        return _attr_text(p, v.tolist())
    if isinstance(v, tir.PrimExpr):
        return p.prim(v)
    if isinstance(v, StructInfo) and isinstance(p, _RelaxPrinter):
        return p.sinfo(v)
    if isinstance(v, Expr) and isinstance(p, _RelaxPrinter):
        return p.expr(v)
    return quote_str(repr(v))


def _attrs_dict_text(p: Any, attrs: Mapping[str, Any]) -> str:
    return _attr_text(p, dict(attrs))


# ---------------------------------------------------------------------------
# Relax
# ---------------------------------------------------------------------------

_CALL_DPS = ("relax.call_tir", "relax.call_dps_packed")


class _RelaxPrinter(_PrimPrinter):
    """Prints one Relax function (with any nested functions) into ``lines``."""

    def __init__(self, namer: _Namer | None = None) -> None:
        super().__init__(namer or _Namer(), "int64")
        self.lines: list[str] = []
        self.indent = ""  # indent of the statement being printed (for hoisting)
        self.sig_mode = False  # printing a function signature: dims as strings
        self._sinfo_cache: dict[int, tuple[StructInfo, str]] = {}
        # Symbolic variable declarations (see ``function``): the functions being
        # printed, innermost last, as indices into ``_scopes`` ((line where the
        # declarations go, indent) per function); per variable, the innermost
        # function enclosing all its mentions, as a path of indices.
        self._func_stack: list[int] = []
        self._scopes: list[tuple[int, str]] = []
        self._sym_path: dict[int, tuple[tir.Var, tuple[int, ...]]] = {}

    def tvar(self, v: tir.Var) -> str:
        stack = self._func_stack
        if stack:
            entry = self._sym_path.get(id(v))
            if entry is None:
                self._sym_path[id(v)] = (v, tuple(stack))
            else:
                path = entry[1]
                # A scope index determines its ancestors, so ``path`` is a
                # prefix of ``stack`` iff their last common position agrees.
                if not (len(path) <= len(stack) and stack[len(path) - 1] == path[-1]):
                    i = 0
                    while i < len(path) and i < len(stack) and path[i] == stack[i]:
                        i += 1
                    self._sym_path[id(v)] = (v, path[:i])
        return self.namer.get(v, v.name)

    # -- struct info ------------------------------------------------------
    def dim(self, e: tir.PrimExpr) -> str:
        if self.sig_mode and _has_tir_var(e):
            return quote_str(self.prim(e))
        return self.prim(e)

    def sinfo(self, s: StructInfo) -> str:
        if self.sig_mode:
            return self._sinfo(s)
        hit = self._sinfo_cache.get(id(s))
        if hit is not None and hit[0] is s:
            return hit[1]
        text = self._sinfo(s)
        self._sinfo_cache[id(s)] = (s, text)
        return text

    def _sinfo(self, s: StructInfo) -> str:
        t = type(s)
        if t is TensorStructInfo:
            args = []
            if s.shape is not None:
                args.append(_tuple_text([self.dim(d) for d in s.shape]))
            if s.dtype != "void":
                args.append(f"dtype={quote_str(s.dtype)}")
            if s.shape is None and s.ndim != -1:
                args.append(f"ndim={s.ndim}")
            return "R.Tensor(" + ", ".join(args) + ")" if args else "R.Tensor"
        if t is ObjectStructInfo:
            return "R.Object"
        if t is PrimStructInfo:
            if s.value is None:
                return f"R.Prim({quote_str(s.dtype)})"
            if s.value.dtype == s.dtype:
                return f"R.Prim(value={self.dim(s.value)})"
            return f"R.Prim({quote_str(s.dtype)}, value={self.dim(s.value)})"
        if t is ShapeStructInfo:
            if s.values is None:
                return f"R.Shape(ndim={s.ndim})"
            return "R.Shape([" + ", ".join(self.dim(d) for d in s.values) + "])"
        if t is TupleStructInfo:
            return "R.Tuple(" + ", ".join(self.sinfo(f) for f in s.fields) + ")"
        if t is FuncStructInfo:
            purity = "True" if s.purity else "False"
            if s.params is None:
                if type(s.ret) is ObjectStructInfo and s.purity:
                    return "R.Callable()"
                return f"R.Callable(ret={self.sinfo(s.ret)}, purity={purity})"
            params = _tuple_text([self.sinfo(x) for x in s.params])
            return f"R.Callable({params}, {self.sinfo(s.ret)}, purity={purity})"
        return f"<unprintable {t.__name__}>"

    def sinfo_args(self, sinfos: tuple[StructInfo, ...]) -> str:
        if len(sinfos) == 1:
            return self.sinfo(sinfos[0])
        return _tuple_text([self.sinfo(s) for s in sinfos])

    # -- expressions ------------------------------------------------------
    def var(self, v: Var) -> str:
        return self.namer.get(v, v.name_hint)

    def expr(self, e: Expr) -> str:
        t = type(e)
        if t is Var or t is DataflowVar:
            return self.namer.get(e, e.name_hint)
        if t is Call:
            return self.call(e)
        if t is Constant:
            return self.constant(e)
        if t is Tuple:
            return _tuple_text([self.expr(f) for f in e.fields]) if e.fields else "()"
        if t is TupleGetItem:
            return f"{self.expr(e.tuple_value)}[{e.index}]"
        if t is GlobalVar:
            return "cls." + e.name_hint
        if t is ShapeExpr:
            return "R.shape([" + ", ".join(self.dim(d) for d in e.values) + "])"
        if t is PrimValue:
            return f"R.prim_value({self.prim(e.value)})"
        if t is StringImm:
            return f"R.str({quote_str(e.value)})"
        if t is DataTypeImm:
            return f"R.dtype({quote_str(e.value)})"
        if t is ExternFunc:
            return f"R.ExternFunc({quote_str(e.global_symbol)})"
        if t is Op:
            return _op_script_name(e.name)
        if t in (If, SeqExpr, Function):
            return self.hoist(e)
        return f"<unprintable {t.__name__}>"

    def hoist(self, e: Expr) -> str:
        """Print a statement-only expression (If, SeqExpr, Function) found in
        expression position as statements before the current one; return the
        name that holds its value. Only non-normalized IR needs this."""
        if type(e) is SeqExpr:
            self.seq_blocks(e.blocks, self.indent)
            return self.expr(e.body)
        name = self.namer.fresh("f" if type(e) is Function else "v")
        if type(e) is Function:
            self.function(name, e, self.indent, top=False)
        else:
            self.if_stmt(e, name, None, self.indent)
        return name

    def constant(self, c: Constant) -> str:
        arr = c.data
        dtype = str(arr.dtype)
        if arr.ndim == 0:
            value = _scalar_text(arr.item())
        else:
            value = _nested_text(arr.tolist())
        return f"R.const({value}, {quote_str(dtype)})"

    def call(self, c: Call) -> str:
        op = c.op
        t = type(op)
        args = c.args
        if t is Op:
            name = op.name
            if name in _CALL_DPS and len(c.sinfo_args) == 1 and not c.attrs and (
                    2 <= len(args) <= (3 if name == "relax.call_tir" else 2)) and type(args[1]) is Tuple:
                parts = [self._callee(args[0]), self.expr(args[1])]
                out = c.sinfo_args[0]
                if type(out) is TupleStructInfo:
                    parts.append("out_sinfo=[" + ", ".join(self.sinfo(f) for f in out.fields) + "]")
                else:
                    parts.append("out_sinfo=" + self.sinfo(out))
                if len(args) == 3:
                    parts.append("tir_vars=" + self.expr(args[2]))
                return f"{_op_script_name(name)}({', '.join(parts)})"
            parts = []
            for i, a in enumerate(args):
                if i == 0 and name == "relax.call_pure_packed":
                    parts.append(self._callee(a))
                else:
                    parts.append(self.expr(a))
            head, order = _op_info(name)
        elif t is ExternFunc:
            head = "R.call_packed"
            parts = [quote_str(op.global_symbol)] + [self.expr(a) for a in args]
            order = ()
        else:
            head = "cls." + op.name_hint if t is GlobalVar else self.expr(op)
            parts = [self.expr(a) for a in args]
            order = ()
        if c.attrs:
            keys = [k for k in order if k in c.attrs]
            keys += sorted((k for k in c.attrs if k not in order), key=str)
            parts += [f"{k}={_attr_text(self, c.attrs[k])}" for k in keys]
        if c.sinfo_args:
            parts.append("sinfo_args=" + self.sinfo_args(c.sinfo_args))
        return f"{head}({', '.join(parts)})"

    def _callee(self, e: Expr) -> str:
        if type(e) is ExternFunc:
            return quote_str(e.global_symbol)
        return self.expr(e)

    # -- statements -------------------------------------------------------
    def emit(self, indent: str, text: str) -> None:
        self.lines.append(indent + text)

    def seq_blocks(self, blocks: tuple[BindingBlock, ...], indent: str) -> None:
        for block in blocks:
            if isinstance(block, DataflowBlock):
                self.emit(indent, "with R.dataflow():")
                inner = indent + _INDENT
                outputs = []
                for b in block.bindings:
                    self.binding(b, inner)
                    if type(b.var) is not DataflowVar:
                        outputs.append(self.var(b.var))
                self.emit(inner, "R.output(" + ", ".join(outputs) + ")")
            else:
                for b in block.bindings:
                    self.binding(b, indent)

    def _annotation(self, v: Var) -> str:
        return "" if v.struct_info is None else ": " + self.sinfo(v.struct_info)

    def binding(self, b: Binding, indent: str) -> None:
        value = b.value
        if type(b) is MatchCast:
            self.indent = indent
            rhs = f"R.match_cast({self.expr(value)}, {self.sinfo(b.struct_info)})"
            self.emit(indent, f"{self.var(b.var)}{self._annotation(b.var)} = {rhs}")
            return
        tv = type(value)
        if tv is If:
            name = self.var(b.var)
            self.if_stmt(value, name, self._annotation(b.var), indent)
        elif tv is Function:
            self.function(self.var(b.var), value, indent, top=False)
        else:
            self.indent = indent
            rhs = self.expr(value)
            self.emit(indent, f"{self.var(b.var)}{self._annotation(b.var)} = {rhs}")

    def if_stmt(self, e: If, name: str, ann: str | None, indent: str) -> None:
        self.indent = indent
        self.emit(indent, f"if {self.expr(e.cond)}:")
        inner = indent + _INDENT
        for kw, branch in ((None, e.true_branch), ("else:", e.false_branch)):
            if kw:
                self.emit(indent, kw)
            if type(branch) is SeqExpr:
                self.seq_blocks(branch.blocks, inner)
                body = branch.body
            else:  # not normalized: a bare expression as branch
                body = branch
            self.indent = inner
            rhs = self.expr(body)
            self.emit(inner, f"{name}{ann or ''} = {rhs}")

    def function(self, name: str, f: Function, indent: str, top: bool) -> None:
        """Print ``f`` as ``def name`` (a module function when ``top``).

        Every symbolic variable is declared (``n = T.int64()``) once, at the
        top of the body of the innermost function that encloses all its
        mentions: a nested function sees (and shares) the symbolic variables
        of the functions around it, as the parser reads them, so it does not
        declare the ones an enclosing function mentions. Names are unique in
        a module-level function, so a name never hides another variable.
        """
        attrs = dict(f.attrs)
        if top and attrs.get("global_symbol") == name:
            del attrs["global_symbol"]
        deco = []
        if not f.is_pure:
            deco.append("pure=False")
        if top and "global_symbol" not in f.attrs:
            deco.append("private=True")
        outermost = not self._func_stack
        if outermost:
            self._scopes, self._sym_path = [], {}
        scope = len(self._scopes)
        self._scopes.append((-1, ""))  # set once the signature is printed
        self._func_stack.append(scope)
        outer_cache, self._sinfo_cache = self._sinfo_cache, {}
        try:
            self.emit(indent, "@R.function" + (f"({', '.join(deco)})" if deco else ""))
            # Signature: symbolic dims as strings (TVM's convention).
            self.sig_mode = True
            params = [f"{self.var(p)}{self._annotation(p)}" for p in f.params]
            ret = "" if f.ret_struct_info is None else " -> " + self.sinfo(f.ret_struct_info)
            self.sig_mode = False
            self.emit(indent, f"def {name}({', '.join(params)}){ret}:")
            inner = indent + _INDENT
            if attrs:
                self.emit(inner, "R.func_attr(" + _attrs_dict_text(self, attrs) + ")")
            self._scopes[scope] = (len(self.lines), inner)
            body = f.body
            if type(body) is SeqExpr:
                self.seq_blocks(body.blocks, inner)
                result = body.body
            else:
                result = body
            self.indent = inner
            self.emit(inner, "return " + self.expr(result))
        finally:
            self.sig_mode = False
            self._func_stack.pop()
            self._sinfo_cache = outer_cache
        if outermost:
            self._declare_syms()

    def _declare_syms(self) -> None:
        """Insert the symbolic variable declarations of the functions just printed."""
        by_scope: dict[int, list[str]] = {}
        for v, path in self._sym_path.values():  # in order of first mention
            by_scope.setdefault(path[-1], []).append(
                f"{self.namer.get(v, v.name)} = T.{v.dtype}()")
        # Bottom up, so the line numbers of the earlier functions stay valid.
        for scope in sorted(by_scope, key=lambda k: self._scopes[k][0], reverse=True):
            at, inner = self._scopes[scope]
            self.lines[at:at] = [inner + d for d in by_scope[scope]]


_OP_INFO: dict[str, tuple[str, tuple[str, ...]]] = {}


def _op_info(name: str) -> tuple[str, tuple[str, ...]]:
    """(TVMScript spelling, attribute order) of the operator ``name``, from the
    registry; an unregistered name is printed as ``R.<name>`` with its
    attributes sorted."""
    info = _OP_INFO.get(name)
    if info is None:
        from ..ir.op.registry import find_op

        opdef = find_op(name)
        if opdef is None:
            return "R." + name.removeprefix("relax."), ()
        info = _OP_INFO[name] = (opdef.script_name, tuple(opdef.attrs))
    return info


def _op_script_name(name: str) -> str:
    return _op_info(name)[0]


def _scalar_text(x: Any) -> str:
    if isinstance(x, bool):
        return "True" if x else "False"
    if isinstance(x, float):
        return _float_lit(x)
    if isinstance(x, complex):
        return f"complex({_float_lit(x.real)}, {_float_lit(x.imag)})"
    return str(x)


def _nested_text(values: list) -> str:
    if values and isinstance(values[0], list):
        return "[" + ", ".join(_nested_text(v) for v in values) + "]"
    return "[" + ", ".join(_scalar_text(v) for v in values) + "]"


# ---------------------------------------------------------------------------
# TIR
# ---------------------------------------------------------------------------

class _TirPrinter(_PrimPrinter):
    """Prints one PrimFunc (or a statement) into ``lines``."""

    def __init__(self, namer: _Namer | None = None) -> None:
        super().__init__(namer or _Namer(), "int32")
        self.lines: list[str] = []
        self.bound: set[int] = set()  # ids of TIR vars bound by params, loops, lets, axes
        self.loops: dict[int, tir.For] = {}  # loop var id -> enclosing For (for remap)

    def bind(self, v: tir.Var) -> str:
        self.bound.add(id(v))
        return self.tvar(v)

    def emit(self, indent: str, text: str) -> None:
        self.lines.append(indent + text)

    def shape(self, dims: tuple) -> str:
        return _tuple_text([self.prim(d) for d in dims]) if dims else "()"

    def prim_func(self, name: str, f: tir.PrimFunc, indent: str = "") -> None:
        attrs = dict(f.attrs)
        if attrs.get("global_symbol") == name:
            del attrs["global_symbol"]
        private = "global_symbol" not in f.attrs
        # Name every parameter before anything else so they keep their hints.
        for p in f.params:
            if isinstance(p, tir.Buffer):
                self.buffer_name(p)
            else:
                self.bind(p)
        params: list[str] = []
        matches: list[str] = []
        for p in f.params:
            if isinstance(p, tir.Buffer):
                bname = self.buffer_name(p)
                if all(type(d) is tir.IntImm for d in p.shape):
                    params.append(f"{bname}: T.Buffer({self.shape(p.shape)}, {quote_str(p.dtype)})")
                else:
                    handle = self.namer.fresh(bname.lower() if bname.lower() != bname else "var_" + bname)
                    params.append(f"{handle}: T.handle")
                    dtype = "" if p.dtype == "float32" else ", " + quote_str(p.dtype)
                    matches.append(f"{bname} = T.match_buffer({handle}, {self.shape(p.shape)}{dtype})")
            else:
                params.append(f"{self.tvar(p)}: T.{p.dtype}")
        inner = indent + _INDENT
        self.emit(indent, "@T.prim_func" + ("(private=True)" if private else ""))
        self.emit(indent, f"def {name}({', '.join(params)}):")
        if attrs:
            self.emit(inner, "T.func_attr(" + _attrs_dict_text(self, attrs) + ")")
        decl_at = len(self.lines)
        for m in matches:
            self.emit(inner, m)
        self.stmt(f.body, inner)
        decls = [f"{self.tvar(v)} = T.{v.dtype}()" for v in self.tir_vars
                 if id(v) not in self.bound]
        self.lines[decl_at:decl_at] = [inner + d for d in decls]

    # -- statements -------------------------------------------------------
    def stmt(self, s: tir.Stmt, indent: str, last: bool = True) -> None:
        """Print ``s`` at ``indent``. ``last``: nothing follows ``s`` in the
        printed statement list, so a let or allocation may take the concise
        spelling, whose scope is the rest of the list (see the module doc)."""
        # LetStmt / Allocate chains are printed with a loop: flat while they
        # end the list, as `with` scopes (one more indent each) otherwise.
        while True:
            t = type(s)
            if t is tir.LetStmt:
                var = s.var
                if last:
                    value = self.prim(s.value, var.dtype)
                    self.emit(indent, f"{self.bind(var)}: T.{var.dtype} = {value}")
                elif var.dtype == s.value.dtype:
                    self.emit(indent, f"with T.LetStmt({self.prim(s.value)}) as {self.bind(var)}:")
                    indent, last = indent + _INDENT, True
                else:  # the annotation gives the variable's dtype (and the literals')
                    value = self.prim(s.value, var.dtype)
                    self.emit(indent, f"with T.LetStmt({value}, T.{var.dtype}) as "
                                      f"{self.bind(var)}:")
                    indent, last = indent + _INDENT, True
                s = s.body
                continue
            if t is tir.Allocate:
                b = s.buffer
                args = f"{self.shape(b.shape)}, {quote_str(b.dtype)}"
                if last:
                    self.emit(indent, f"{self.buffer_name(b)} = T.alloc_buffer({args})")
                else:
                    self.emit(indent, f"with T.decl_buffer({args}) as {self.buffer_name(b)}:")
                    indent, last = indent + _INDENT, True
                s = s.body
                continue
            break
        if t is tir.SeqStmt:
            if not s.stmts:
                self.emit(indent, "pass")
            end = len(s.stmts) - 1
            for i, x in enumerate(s.stmts):
                self.stmt(x, indent, last and i == end)
        elif t is tir.BufferStore:
            value = self.prim(s.value, s.buffer.dtype)
            self.emit(indent, f"{self.buffer_name(s.buffer)}{self.indices(s.indices)} = {value}")
        elif t is tir.For:
            self.for_stmt(s, indent)
        elif t is tir.Block:
            self.block(s, indent)
        elif t is tir.IfThenElse:
            self.emit(indent, f"if {self.prim(s.condition)}:")
            self.stmt(s.then_case, indent + _INDENT)
            if s.else_case is not None:
                self.emit(indent, "else:")
                self.stmt(s.else_case, indent + _INDENT)
        elif t is tir.Evaluate:
            self.emit(indent, f"T.evaluate({self.prim(s.value)})")
        else:
            self.emit(indent, f"<unprintable {t.__name__}>")

    def _range(self, loop: tir.For) -> str:
        if _is_zero(loop.min) and loop.min.dtype == loop.extent.dtype:
            return self.prim(loop.extent)
        lo, end = self.pair(loop.min, _end_of(loop.min, loop.extent))
        return f"{lo[0]}, {end[0]}"

    def for_stmt(self, loop: tir.For, indent: str) -> None:
        chain = [loop]
        if loop.kind == "serial":
            while True:
                cur = chain[-1]
                nxt = cur.body
                if not (_is_zero(cur.min) and cur.min.dtype == cur.extent.dtype):
                    break
                if type(nxt) is tir.For and nxt.kind == "serial" and _is_zero(nxt.min) \
                        and nxt.min.dtype == nxt.extent.dtype:
                    chain.append(nxt)
                else:
                    break
        names = [self.bind(f.loop_var) for f in chain]
        if len(chain) > 1:
            extents = ", ".join(self.prim(f.extent) for f in chain)
            self.emit(indent, f"for {', '.join(names)} in T.grid({extents}):")
        else:
            head = "range" if loop.kind == "serial" else "T." + loop.kind
            self.emit(indent, f"for {names[0]} in {head}({self._range(loop)}):")
        for f in chain:
            self.loops[id(f.loop_var)] = f
        self.stmt(chain[-1].body, indent + _INDENT)
        for f in chain:
            self.loops.pop(id(f.loop_var), None)

    def _remappable(self, blk: tir.Block) -> bool:
        from ..ir.structural import structural_equal

        if len(blk.iter_vars) < 2:
            return False
        for iv, val in zip(blk.iter_vars, blk.iter_values):
            if type(val) is not tir.Var or iv.var.dtype != val.dtype:
                return False
            loop = self.loops.get(id(val))
            if loop is None or not _is_zero(loop.min):
                return False
            if iv.extent is not loop.extent and not structural_equal(iv.extent, loop.extent):
                return False
        return True

    def region(self, r: tir.BufferRegion) -> str:
        dims = []
        for lo, ext in r.region:
            if type(ext) is tir.IntImm and ext.value == 1 and ext.dtype == lo.dtype:
                dims.append(self.prim(lo))
            else:
                a, b = self.pair(lo, _end_of(lo, ext))
                dims.append(f"{a[0]}:{b[0]}")
        return self.buffer_name(r.buffer) + ("[" + ", ".join(dims) + "]" if dims else "[()]")

    def block(self, blk: tir.Block, indent: str) -> None:
        self.emit(indent, f"with T.block({quote_str(blk.name)}):")
        inner = indent + _INDENT
        if self._remappable(blk):
            names = [self.bind(iv.var) for iv in blk.iter_vars]
            kinds = "".join(iv.kind for iv in blk.iter_vars)
            values = ", ".join(self.prim(v) for v in blk.iter_values)
            self.emit(inner, f"{', '.join(names)} = T.axis.remap({quote_str(kinds)}, [{values}])")
        else:
            for iv, val in zip(blk.iter_vars, blk.iter_values):
                kind = "spatial" if iv.kind == "S" else "reduce"
                extent, value = self.prim(iv.extent, val.dtype), self.prim(val)
                self.emit(inner, f"{self.bind(iv.var)} = T.axis.{kind}({extent}, {value})")
        self.emit(inner, "T.reads(" + ", ".join(self.region(r) for r in blk.reads) + ")")
        self.emit(inner, "T.writes(" + ", ".join(self.region(r) for r in blk.writes) + ")")
        if blk.init is not None:
            self.emit(inner, "with T.init():")
            self.stmt(blk.init, inner + _INDENT)
        self.stmt(blk.body, inner)


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------

def print_module(mod: IRModule) -> str:
    """The module as TVMScript text (TVM 0.27 spelling), ending in a newline.

    Functions are printed sorted by name, so equal modules print equally.
    """
    lines = [*HEADER, "", "@I.ir_module", "class Module:"]
    has_body = False
    if mod.attrs:
        lines.append(_INDENT + "I.module_attrs(" + _attrs_dict_text(_TirPrinter(), mod.attrs) + ")")
        has_body = True
    for name in sorted(mod.functions):
        if has_body:
            lines.append("")  # a blank line between module-level items
        lines.extend(_function_lines(name, mod.functions[name], _INDENT))
        has_body = True
    if not has_body:
        # A class needs a body; an empty attribute dict reads back as no attributes.
        lines.append(_INDENT + "I.module_attrs({})")
    return "\n".join(lines) + "\n"


def _function_lines(name: str, func: Function | tir.PrimFunc, indent: str) -> list[str]:
    if isinstance(func, tir.PrimFunc):
        tp = _TirPrinter()
        tp.prim_func(name, func, indent)
        return tp.lines
    rp = _RelaxPrinter()
    rp.function(name, func, indent, top=True)
    return rp.lines


def print_function(name: str, func: Function | tir.PrimFunc) -> str:
    """One module-level function (Relax or TIR) as TVMScript."""
    return "\n".join(_function_lines(name, func, "")) + "\n"


def print_prim_func(name: str, func: tir.PrimFunc) -> str:
    """A PrimFunc as ``@T.prim_func def name(...)``."""
    return print_function(name, func)


def print_expr(expr: Expr) -> str:
    """A Relax expression as TVMScript (for messages).

    Leaf and call expressions give one line. Functions print as a ``def``;
    sequences and branches print their statements, with ``return``/a bare
    last line giving the result.
    """
    p = _RelaxPrinter()
    t = type(expr)
    if t is Function:
        p.function(_sanitize(str(expr.attrs.get("global_symbol", "f"))), expr, "", top=False)
        return "\n".join(p.lines)
    if t is SeqExpr:
        p.seq_blocks(expr.blocks, "")
        p.indent = ""
        p.emit("", "return " + p.expr(expr.body))
        return "\n".join(p.lines)
    if t is If:
        p.if_stmt(expr, p.namer.fresh("v"), None, "")
        return "\n".join(p.lines)
    text = p.expr(expr)
    return "\n".join([*p.lines, text]) if p.lines else text


def print_binding(binding: Binding) -> str:
    """One binding as a TVMScript statement (several lines for ``if``/``def``)."""
    p = _RelaxPrinter()
    p.binding(binding, "")
    return "\n".join(p.lines)


def print_sinfo(sinfo: StructInfo | None) -> str:
    """Struct info as its TVMScript annotation (``R.Tensor((n, 4), dtype="float32")``);
    ``None`` (unknown) prints as ``None``."""
    if sinfo is None:
        return "None"
    return _RelaxPrinter().sinfo(sinfo)


def print_sinfos(sinfos: Sequence[StructInfo | None]) -> list[str]:
    """Several struct infos (a signature) as annotations, one text each, with
    one naming: a symbolic variable has the same name in every text and
    distinct variables have distinct names, so
    :func:`phasec.script.parser.parse_struct_info` with one shared ``syms``
    dict reads them back with the same sharing. ``None`` prints as ``None``."""
    p = _RelaxPrinter()
    return ["None" if s is None else p.sinfo(s) for s in sinfos]


def print_prim_expr(expr: tir.PrimExpr, *, tir_context: bool = True) -> str:
    """A scalar expression. In TIR context bare integers are int32 (``T.int64(4)``
    spelt out); otherwise (Relax shapes) bare integers are int64."""
    p = _TirPrinter() if tir_context else _RelaxPrinter()
    return p.prim(expr)


def print_stmt(stmt: tir.Stmt) -> str:
    """A TIR statement (and its body) as TVMScript lines."""
    p = _TirPrinter()
    p.stmt(stmt, "")
    return "\n".join(p.lines)

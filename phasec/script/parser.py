"""TVMScript parser: text -> :class:`~phasec.ir.IRModule`, without running anything.

The input is untrusted data. It is read with Python's :mod:`ast` module only:
nothing in it is executed, evaluated, compiled or imported. Every construct is
matched against the TVMScript subset phasec understands (see the printer for
the canonical spelling), and anything else is a :class:`~phasec.errors.ParseError`
carrying the file, line and column.

Structure:

* :func:`parse` and :class:`_ModuleParser` — the module-level driver: dialect
  aliases from the imports, the ``@I.ir_module`` class, ``I.module_attrs``,
  every function's signature first (so functions may call each other in any
  order), then the bodies.
* :class:`_SinfoParser` — struct-info annotations (``R.Tensor((n, 4), "float32")``...).
* :class:`_PrimExprParser` — scalar TIR expressions; also the symbolic
  dimensions of Relax shapes.
* :class:`_RelaxFunctionParser` — ``@R.function`` bodies: bindings in
  A-normal form, dataflow blocks, ``if``/``else``, nested functions. A
  nested function sees the enclosing functions' Relax variables and symbolic
  shape variables (the same objects, as in TVM); a symbolic variable it
  declares itself is its own.
  :data:`_RELAX_CALLS` is the table of Relax dialect calls (``R.const``,
  ``R.call_tir``...); every other ``R.<name>(...)`` is a registered operator.
* :class:`_PrimFuncParser` — ``@T.prim_func`` kernels.
* :func:`parse_struct_info` — one struct info annotation on its own (the
  signatures saved in VM executables).

Semantic problems (operand struct info that does not fit an operator, a call
with the wrong number of arguments for a function...) are not parse errors:
struct-info inference failures leave ``struct_info`` None and the verifier
reports them with rule codes.
"""

from __future__ import annotations

import ast
import difflib
import re
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import ParseError
from ..ir import expr as rx
from ..ir import tir
from ..ir.module import IRModule
from ..ir.node import Span
from ..ir.op.registry import REQUIRED, InferContext, OpDef, find_op, list_ops
from ..ir.phase import Phase
from ..ir.struct_info import (
    FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
    TensorStructInfo, TupleStructInfo,
)
from ._checks import dim_problem, int_range_problem

__all__ = ["parse", "parse_struct_info", "decode_source"]

_IGNORED_FLAGS = ("s_tir", "check_well_formed")
_DEFAULT_ALIASES = {"ir": "I", "relax": "R", "tir": "T"}
_SCRIPT_MODULES = {"tvm.script", "tvm.script.parser"}
_DIALECT_OF_MODULE = {"ir": "ir", "relax": "relax", "tir": "tir", "tirx": "tir"}

#: Python statement kinds, as named in messages.
_STMT_NAMES: dict[type, str] = {
    ast.While: "while", ast.For: "for", ast.AsyncFor: "async for", ast.Try: "try",
    ast.With: "with", ast.AsyncWith: "async with", ast.Raise: "raise", ast.Assert: "assert",
    ast.Delete: "del", ast.Global: "global", ast.Nonlocal: "nonlocal", ast.Import: "import",
    ast.ImportFrom: "import", ast.ClassDef: "class", ast.FunctionDef: "def",
    ast.AsyncFunctionDef: "async def", ast.AugAssign: "augmented assignment", ast.Pass: "pass",
    ast.Break: "break", ast.Continue: "continue", ast.Return: "return", ast.If: "if",
    ast.Assign: "assignment", ast.AnnAssign: "annotated assignment", ast.Expr: "expression",
    ast.Match: "match",
}
if hasattr(ast, "TryStar"):
    _STMT_NAMES[ast.TryStar] = "try"

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
           ast.Mod: "%", ast.Pow: "pow"}
_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_PY_OP_SPELLING = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
                   ast.Mod: "%", ast.Pow: "**", ast.MatMult: "@", ast.BitAnd: "&",
                   ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}
_RELAX_OP_FOR = {ast.Add: "R.add", ast.Sub: "R.subtract", ast.Mult: "R.multiply",
                 ast.Div: "R.divide", ast.FloorDiv: "R.floor_divide", ast.Pow: "R.power",
                 ast.MatMult: "R.matmul"}

_FRESH_NAME_RE = re.compile(r"\blv\d*\b")
_INT_DTYPES = tuple(d for d in tir.DTYPES if tir.is_int(d))
_LOOP_KINDS = tir.FOR_KINDS  # serial, parallel, vectorized, unroll
_TIR_BINARY_FUNCS = {"min": "min", "max": "max", "pow": "pow", "floordiv": "//", "floormod": "%"}
_TIR_FUNCS = ("Cast", "cast", "Select", "if_then_else", "And", "Or", "Not", *_TIR_BINARY_FUNCS,
              *tir.INTRINSICS, *tir.DTYPES)
_SINFO_KINDS = ("Tensor", "Tuple", "Shape", "Prim", "Object", "Any", "Callable")


def _dotted(node: ast.AST) -> tuple[str, ...] | None:
    """``R.nn.relu`` -> ("R", "nn", "relu"); None when not a dotted name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    parts.reverse()
    return tuple(parts)


def _stmt_kind(stmt: ast.AST) -> str:
    return _STMT_NAMES.get(type(stmt), type(stmt).__name__)


def _is_docstring(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str))


def _to_tuple(value: Any) -> Any:
    """Attribute normalization: lists become tuples, recursively."""
    if isinstance(value, (list, tuple)):
        return tuple(_to_tuple(v) for v in value)
    return value


def decode_source(data: bytes, filename: str) -> str:
    """Decode file contents as UTF-8 (BOM allowed); a ParseError otherwise."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1)
        raise ParseError(
            f"the file is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            f"is it a binary file?", Span(filename, line, col)) from None


def parse(text: str | bytes, filename: str = "<string>") -> IRModule:
    """Parse TVMScript text into an IRModule.

    ``text`` is a ``@I.ir_module`` class in the TVMScript subset phasec reads
    (TVM 0.27 spelling). Nothing in it is executed. Any problem with the text
    is a :class:`~phasec.errors.ParseError` naming the file, line and column
    and what was not understood.
    """
    if isinstance(text, (bytes, bytearray)):
        text = decode_source(bytes(text), filename)
    if not isinstance(text, str):
        raise TypeError(f"parse() expects TVMScript text (str), not {type(text).__name__}")
    return _ModuleParser(text, filename).run()


def parse_struct_info(text: str, filename: str = "<sinfo>", *,
                      syms: dict[str, tir.Var] | None = None) -> StructInfo:
    """Parse one struct info annotation, e.g. ``R.Tensor((n, 4), dtype="float32")``
    (the text :func:`phasec.script.printer.print_sinfo` prints).

    A dimension name (bare, ``n``, or quoted, ``"n"``) is a symbolic variable:
    an int64 ``tir.Var``, one per name, as in a function signature. Pass a
    dict as ``syms`` to share the variables between calls: names it holds
    resolve to its variables, new names are added to it. Nothing is
    executed; bad text is a :class:`~phasec.errors.ParseError` whose location
    is in ``filename``.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse_struct_info() expects text (str), not {type(text).__name__}")
    text = text.strip()
    mp = _ModuleParser(text, filename)
    mp.aliases.update(_DEFAULT_ALIASES)  # R.Tensor, T.int64...
    if "\x00" in text:
        raise ParseError("struct info text contains NUL bytes", Span(filename, 1, 0))
    if not text:
        raise ParseError("empty struct info; expected an annotation such as "
                         "R.Tensor((n, 4), \"float32\")", Span(filename, 1, 0))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            node = ast.parse(text, filename=filename, mode="eval").body
    except SyntaxError as exc:
        col = max((exc.offset or 1) - 1, 0)
        raise ParseError(f"invalid struct info syntax: {exc.msg}",
                         Span(filename, exc.lineno or 1, col)) from None
    except (RecursionError, MemoryError):
        raise ParseError("struct info nested too deeply", Span(filename, 1, 0)) from None
    except ValueError as exc:
        raise ParseError(f"cannot parse struct info: {exc}", Span(filename, 1, 0)) from None
    table = syms if syms is not None else {}
    sp = _SinfoParser(mp, _PrimExprParser(mp, "int64", _signature_resolver(mp, table)))
    try:
        return sp.parse(node)
    except ParseError:
        raise
    except (RecursionError, MemoryError):
        raise ParseError("struct info nested too deeply", Span(filename, 1, 0)) from None
    except Exception as exc:  # noqa: BLE001 - never a raw traceback for bad text
        raise ParseError(f"cannot read struct info {mp.src(node)!r} "
                         f"({type(exc).__name__}: {exc})", mp.span(node)) from exc


# ---------------------------------------------------------------------------
# Module-level driver
# ---------------------------------------------------------------------------

class _Signature:
    """A function's parsed signature, shared by the global pass and its body."""

    __slots__ = ("name", "node", "params", "ret", "syms", "is_pure", "private")

    def __init__(self, name: str, node: ast.FunctionDef, params: list[rx.Var],
                 ret: StructInfo | None, syms: dict[str, tir.Var], is_pure: bool,
                 private: bool) -> None:
        self.name = name
        self.node = node
        self.params = params
        self.ret = ret
        self.syms = syms
        self.is_pure = is_pure
        self.private = private

    def struct_info(self) -> FuncStructInfo | None:
        if self.ret is None:
            return None
        return FuncStructInfo([p.struct_info for p in self.params], self.ret, self.is_pure)


class _ModuleParser:
    """Parses one file: the imports and the single ``@I.ir_module`` class."""

    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.filename = filename
        self.aliases: dict[str, str] = {}
        self.where: ast.AST | None = None  # innermost statement being parsed
        self.class_names: set[str] = {"cls"}
        self.function_kinds: dict[str, str] = {}  # name -> "relax" | "prim"
        self.globals: dict[str, StructInfo] = {}
        self.ctx = InferContext(globals=self.globals)
        self.used_names: set[str] = set()
        self._fresh_counter = 0
        self._infer: Callable[..., StructInfo] | None = None
        self._op_suggestions: list[str] | None = None

    # -- helpers shared by every sub-parser ---------------------------------
    def span(self, node: ast.AST) -> Span:
        return Span(self.filename, getattr(node, "lineno", 1), getattr(node, "col_offset", 0),
                    getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None))

    def error(self, message: str, node: ast.AST | None) -> ParseError:
        return ParseError(message, self.span(node) if node is not None else Span(self.filename, 1, 0))

    def src(self, node: ast.AST, limit: int = 60) -> str:
        """The source text of ``node`` (shortened) for messages."""
        text = ast.get_source_segment(self.text, node) or type(node).__name__
        text = " ".join(text.split())
        return text if len(text) <= limit else text[: limit - 3] + "..."

    @property
    def R(self) -> str:  # noqa: N802 - the dialect's conventional name
        return self.aliases["relax"]

    @property
    def T(self) -> str:  # noqa: N802
        return self.aliases["tir"]

    @property
    def I(self) -> str:  # noqa: N802,E743
        return self.aliases["ir"]

    def fresh_name(self) -> str:
        """A name for a temporary binding that no identifier of the file uses."""
        while True:
            k = self._fresh_counter
            self._fresh_counter += 1
            name = "lv" if k == 0 else f"lv{k}"
            if name not in self.used_names:
                return name

    def infer(self, expr: rx.Expr) -> StructInfo | None:
        """Struct info of ``expr``, or None when inference fails (a semantic
        problem the verifier reports, not a parse error)."""
        if self._infer is None:
            from ..ir.infer import infer_struct_info

            self._infer = infer_struct_info
        try:
            return self._infer(expr, self.ctx)
        except RecursionError:
            raise
        except Exception:  # noqa: BLE001 - any inference failure means "unknown"
            return None

    def op_suggestion(self, name: str) -> str:
        if self._op_suggestions is None:
            self._op_suggestions = sorted(
                {o.script_name for o in list_ops()} | {"R." + k for k in _RELAX_CALLS}
                | {"R." + k for k in _RELAX_STATEMENT_ONLY})
        close = difflib.get_close_matches(name, self._op_suggestions, n=1)
        return f" (did you mean {close[0]}?)" if close else ""

    def literal(self, node: ast.AST) -> Any:
        """A Python literal: number, str, bool, None, list/tuple (-> tuple), dict."""
        if isinstance(node, ast.Constant):
            if node.value is None or isinstance(node.value, (bool, int, float, str)):
                return node.value
            raise self.error(f"unsupported literal {self.src(node)}", node)
        number = self.number(node)
        if number is not None:
            return number
        if isinstance(node, (ast.List, ast.Tuple)):
            return tuple(self.literal(e) for e in node.elts)
        if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
            # T.bool(True), T.int32(1)... as TVM prints some attribute values
            name = _dotted(node.func)
            value = self.number(node.args[0])
            if (name is not None and len(name) == 2 and name[0] == self.T
                    and name[1] in tir.DTYPES and value is not None):
                if name[1] == "bool":
                    return bool(value)
                return float(value) if tir.is_float(name[1]) else int(value)
        if isinstance(node, ast.Dict):
            out: dict[Any, Any] = {}
            for k, v in zip(node.keys, node.values):
                if k is None:
                    raise self.error("dictionary unpacking (**) is not supported", v)
                key = self.literal(k)
                if not isinstance(key, str):  # as in the JSON format and TVM's attributes
                    raise self.error(f"dictionary keys must be strings, got {self.src(k)}", k)
                out[key] = self.literal(v)
            return out
        raise self.error(f"expected a literal value (number, string, bool, None, list or dict), "
                         f"got {self.src(node)}", node)

    def number(self, node: ast.AST) -> int | float | bool | None:
        """A numeric literal, ``-1``, ``float("nan")``, ``-float("inf")``; None if not one."""
        negate = False
        while isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            negate ^= isinstance(node.op, ast.USub)
            node = node.operand
        value: Any = None
        if isinstance(node, ast.Constant) and isinstance(node.value, (bool, int, float)):
            value = node.value
        elif (isinstance(node, ast.Call) and _dotted(node.func) == ("float",) and len(node.args) == 1
              and not node.keywords and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            word = node.args[0].value.strip().lower()
            if word in ("nan", "inf", "-inf", "+inf", "infinity", "-infinity"):
                value = float(word)
        if value is None:
            return None
        if negate:
            if isinstance(value, bool):
                return None
            value = -value
        return value

    def bind_args(self, node: ast.Call, what: str, params: Sequence[str], required: int,
                  aliases: dict[str, str] | None = None) -> dict[str, ast.expr]:
        """Match a call's positional and keyword arguments to parameter names."""
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise self.error(f"{what}: *args are not supported", a)
        if len(node.args) > len(params):
            raise self.error(f"{what} takes at most {len(params)} positional argument(s) "
                             f"({', '.join(params)}), got {len(node.args)}", node)
        out = dict(zip(params, node.args))
        for kw in node.keywords:
            if kw.arg is None:
                raise self.error(f"{what}: **kwargs are not supported", kw.value)
            key = (aliases or {}).get(kw.arg, kw.arg)
            if key not in params:
                raise self.error(f"{what} has no argument {kw.arg!r}; expected: {', '.join(params)}",
                                 kw.value)
            if key in out:
                raise self.error(f"{what}: argument {kw.arg!r} given twice", kw.value)
            out[key] = kw.value
        for p in params[:required]:
            if p not in out:
                raise self.error(f"{what} is missing the argument {p!r}", node)
        return out

    def str_arg(self, node: ast.AST, what: str) -> str:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        raise self.error(f"{what} must be a string literal, got {self.src(node)}", node)

    def dtype_arg(self, node: ast.AST, what: str) -> str:
        dtype = self.str_arg(node, what)
        if dtype not in tir.DTYPES:
            raise self.error(f"{what}: unknown dtype {dtype!r}; expected one of "
                             f"{', '.join(tir.DTYPES)}", node)
        return dtype

    def check_dim(self, dim: tir.PrimExpr, node: ast.AST, what: str,
                  allow_negative: bool = False) -> tir.PrimExpr:
        """``dim`` if it can be a dimension (an integer expression, non-negative
        when constant unless ``allow_negative``); a ParseError otherwise."""
        problem = dim_problem(dim, allow_negative=allow_negative)
        if problem is not None:
            raise self.error(f"{what}: {problem}, got {self.src(node)}", node)
        return dim

    def dims(self, prim: "_PrimExprParser", nodes: Sequence[ast.AST], what: str,
             allow_negative: bool = False, dtype: str | None = "int64") -> list[tir.PrimExpr]:
        """Dimensions (bare literals of ``dtype``), each checked with :meth:`check_dim`."""
        out = []
        for e in nodes:
            if isinstance(e, ast.Starred):
                raise self.error(f"{what}: *args are not supported in a shape", e)
            out.append(self.check_dim(prim.parse(e, dtype), e, what, allow_negative))
        return out

    def global_var(self, name: str, node: ast.AST) -> rx.GlobalVar:
        if name not in self.function_kinds:
            known = ", ".join(self.function_kinds) or "(none)"
            raise self.error(f"module has no function {name!r} (its functions: {known})", node)
        return rx.GlobalVar(name, struct_info=self.globals.get(name), span=self.span(node))

    # -- the driver -----------------------------------------------------------
    def run(self) -> IRModule:
        if "\x00" in self.text:
            line = self.text.count("\n", 0, self.text.index("\x00")) + 1
            raise ParseError("the file contains NUL bytes; is it a binary file?",
                             Span(self.filename, line, 0))
        if not self.text.strip():
            raise ParseError("the file is empty; expected an @I.ir_module class",
                             Span(self.filename, 1, 0))
        try:
            with warnings.catch_warnings():  # e.g. SyntaxWarning: invalid escape sequence
                warnings.simplefilter("ignore")
                tree = ast.parse(self.text, filename=self.filename)
        except SyntaxError as exc:
            line = exc.lineno or 1
            col = max((exc.offset or 1) - 1, 0)
            end_line = exc.end_lineno if exc.end_lineno else None
            end_col = max(exc.end_offset - 1, 0) if exc.end_offset else None
            raise ParseError(f"invalid Python syntax: {exc.msg}",
                             Span(self.filename, line, col, end_line, end_col)) from None
        except (RecursionError, MemoryError):
            raise ParseError("the source is nested too deeply for Python's parser",
                             Span(self.filename, 1, 0)) from None
        except ValueError as exc:  # e.g. NUL bytes on some Python versions
            raise ParseError(f"cannot parse the file: {exc}", Span(self.filename, 1, 0)) from None
        try:
            return self._module(tree)
        except ParseError:
            raise
        except (RecursionError, MemoryError):
            raise self.error("expression or statement nested too deeply", self.where) from None
        except Exception as exc:  # noqa: BLE001 - never a raw traceback for user input
            raise self.error(f"internal error while parsing this statement "
                             f"({type(exc).__name__}: {exc})", self.where) from exc

    def _module(self, tree: ast.Module) -> IRModule:
        self._collect_aliases(tree)
        classes: list[ast.ClassDef] = []
        for i, stmt in enumerate(tree.body):
            self.where = stmt
            if isinstance(stmt, (ast.Import, ast.ImportFrom)) or (i == 0 and _is_docstring(stmt)):
                continue
            if isinstance(stmt, ast.ClassDef):
                if not self._is_ir_module_class(stmt):
                    raise self.error(f"class {stmt.name!r} is not an @{self.I}.ir_module class; "
                                     f"decorate it with @{self.I}.ir_module", stmt)
                classes.append(stmt)
                continue
            raise self.error(f"unsupported {_stmt_kind(stmt)} statement at module level "
                             f"({self.src(stmt)}); a module file holds imports and one "
                             f"@{self.I}.ir_module class", stmt)
        if not classes:
            raise ParseError(f"no @{self.I}.ir_module class found", Span(self.filename, 1, 0))
        if len(classes) > 1:
            raise self.error(f"more than one @{self.I}.ir_module class (first: "
                             f"{classes[0].name!r}); a file holds one module", classes[1])
        return self._class(classes[0])

    def _collect_aliases(self, tree: ast.Module) -> None:
        for stmt in tree.body:
            if isinstance(stmt, ast.ImportFrom) and stmt.module in _SCRIPT_MODULES:
                for a in stmt.names:
                    dialect = _DIALECT_OF_MODULE.get(a.name)
                    if dialect is not None:
                        self.aliases[dialect] = a.asname or a.name
            elif isinstance(stmt, ast.Import):
                for a in stmt.names:
                    mod, _, last = a.name.rpartition(".")
                    dialect = _DIALECT_OF_MODULE.get(last)
                    if mod in _SCRIPT_MODULES and dialect is not None and a.asname:
                        self.aliases[dialect] = a.asname
        for dialect, default in _DEFAULT_ALIASES.items():
            self.aliases.setdefault(dialect, default)
        # Names of the form the temporaries take, so temporaries never
        # collide with identifiers of the file (a text scan: cheap on big files).
        self.used_names.update(_FRESH_NAME_RE.findall(self.text))

    def _is_ir_module_class(self, node: ast.ClassDef) -> bool:
        return any(_dotted(d.func if isinstance(d, ast.Call) else d)
                   in ((self.I, "ir_module"), ("tvm", "script", "ir_module"))
                   for d in node.decorator_list)

    def _class(self, cls: ast.ClassDef) -> IRModule:
        self.where = cls
        if len(cls.decorator_list) != 1:
            raise self.error(f"@{self.I}.ir_module must be the only decorator of class "
                             f"{cls.name!r}", cls.decorator_list[-1])
        self.decorator_flags(cls, ())
        if cls.bases or cls.keywords:
            raise self.error(f"class {cls.name!r}: base classes are not supported", cls)
        self.class_names.add(cls.name)
        attrs: dict[str, Any] = {}
        attrs_node: ast.AST | None = None
        defs: list[tuple[str, ast.FunctionDef]] = []
        for i, stmt in enumerate(cls.body):
            self.where = stmt
            if i == 0 and _is_docstring(stmt):
                continue
            if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                    and _dotted(stmt.value.func) == (self.I, "module_attrs")):
                if attrs_node is not None:
                    raise self.error(f"{self.I}.module_attrs given twice", stmt)
                attrs_node = stmt
                attrs = self._module_attrs(stmt.value)
                continue
            if isinstance(stmt, ast.FunctionDef):
                kind = self._function_kind(stmt)
                if stmt.name in self.function_kinds:
                    raise self.error(f"function {stmt.name!r} is defined twice", stmt)
                self.function_kinds[stmt.name] = kind
                defs.append((kind, stmt))
                continue
            raise self.error(f"unsupported {_stmt_kind(stmt)} statement in an "
                             f"@{self.I}.ir_module class ({self.src(stmt)}); expected "
                             f"@R.function / @T.prim_func definitions and "
                             f"{self.I}.module_attrs({{...}})", stmt)
        # Signatures first: functions may refer to each other in any order.
        sigs: dict[str, _Signature] = {}
        for kind, fdef in defs:
            self.where = fdef
            if kind == "relax":
                sig = self.relax_signature(fdef)
                sigs[fdef.name] = sig
                fsinfo = sig.struct_info()
                if fsinfo is not None:
                    self.globals[fdef.name] = fsinfo
            else:
                # PrimFuncs are opaque impure callables at the Relax level
                # (as phasec.ir.infer.context_from_module describes them).
                self.globals[fdef.name] = FuncStructInfo(None, TupleStructInfo([]), purity=False)
        functions: dict[str, rx.BaseFunc] = {}
        for kind, fdef in defs:
            self.where = fdef
            if kind == "relax":
                func = _RelaxFunctionParser(self, sigs[fdef.name], None).parse_function()
                if func.struct_info is not None:
                    self.globals[fdef.name] = func.struct_info
            else:
                func = _PrimFuncParser(self, fdef).parse()
            functions[fdef.name] = func
        return IRModule(functions, attrs, span=self.span(cls))

    def _module_attrs(self, call: ast.Call) -> dict[str, Any]:
        if len(call.args) != 1 or call.keywords or not isinstance(call.args[0], ast.Dict):
            raise self.error(f"{self.I}.module_attrs expects one dictionary literal, e.g. "
                             f'{self.I}.module_attrs({{"phase": "optimization"}})', call)
        attrs = self.attr_dict(call.args[0])
        if "phase" in attrs:
            try:
                Phase.parse(attrs["phase"])  # validated here; kept as written
            except ValueError as exc:
                node = call.args[0]
                for k, v in zip(node.keys, node.values):
                    if isinstance(k, ast.Constant) and k.value == "phase":
                        node = v
                raise self.error(str(exc), node) from None
        return attrs

    def attr_dict(self, node: ast.AST) -> dict[str, Any]:
        """``{"key": literal, ...}`` with string keys; lists become tuples."""
        if not isinstance(node, ast.Dict):
            raise self.error(f"expected a dictionary literal, got {self.src(node)}", node)
        value = self.literal(node)
        for k, key_node in zip(value, node.keys):
            if not isinstance(k, str):
                raise self.error(f"attribute names must be strings, got {k!r}", key_node)
        return {k: _to_tuple(v) for k, v in value.items()}

    def _function_kind(self, fdef: ast.FunctionDef) -> str:
        if not fdef.decorator_list:
            raise self.error(f"function {fdef.name!r} needs a @{self.R}.function or "
                             f"@{self.T}.prim_func decorator", fdef)
        if len(fdef.decorator_list) > 1:
            raise self.error(f"function {fdef.name!r}: only one decorator is supported",
                             fdef.decorator_list[1])
        deco = fdef.decorator_list[0]
        name = _dotted(deco.func if isinstance(deco, ast.Call) else deco)
        if name == (self.R, "function"):
            return "relax"
        if name == (self.T, "prim_func"):
            return "prim"
        raise self.error(f"unsupported decorator @{self.src(deco)}; expected "
                         f"@{self.R}.function or @{self.T}.prim_func", deco)

    def decorator_flags(self, fdef: ast.FunctionDef | ast.ClassDef,
                        allowed: Sequence[str]) -> dict[str, bool]:
        """Literal keyword flags of ``@R.function(pure=False, private=True)``.

        TVM's ``s_tir=`` and ``check_well_formed=`` flags are accepted and
        ignored (phasec always verifies, with its own verifier).
        """
        allowed = (*allowed, *_IGNORED_FLAGS)
        deco = fdef.decorator_list[0]
        if not isinstance(deco, ast.Call):
            return {}
        if deco.args:
            raise self.error(f"@{self.src(deco.func)} takes keyword arguments only", deco.args[0])
        flags: dict[str, bool] = {}
        for kw in deco.keywords:
            if kw.arg not in allowed:
                raise self.error(f"@{self.src(deco.func)} has no argument {kw.arg!r}; expected: "
                                 f"{', '.join(allowed)}", kw.value if kw.arg is None else deco)
            value = kw.value
            if not (isinstance(value, ast.Constant) and isinstance(value.value, bool)):
                raise self.error(f"@{self.src(deco.func)}: {kw.arg}= must be True or False, "
                                 f"got {self.src(value)}", value)
            flags[kw.arg] = value.value
        return flags

    def check_plain_args(self, fdef: ast.FunctionDef) -> None:
        a = fdef.args
        seen: set[str] = set()
        for arg in a.args:  # Python's compiler rejects these, ast.parse does not
            if arg.arg in seen:
                raise self.error(f"function {fdef.name!r}: duplicate parameter name "
                                 f"{arg.arg!r}", arg)
            seen.add(arg.arg)
        if a.posonlyargs or a.kwonlyargs or a.vararg or a.kwarg:
            node = (a.vararg or a.kwarg or (a.posonlyargs or a.kwonlyargs)[0])
            raise self.error(f"function {fdef.name!r}: only plain positional parameters are "
                             f"supported", node)
        if a.defaults or any(d is not None for d in a.kw_defaults):
            raise self.error(f"function {fdef.name!r}: default parameter values are not "
                             f"supported", (a.defaults or [d for d in a.kw_defaults if d])[0])

    def relax_signature(self, fdef: ast.FunctionDef,
                        enclosing: _RelaxFunctionParser | None = None) -> _Signature:
        """Parameters and return annotation of an ``@R.function``.

        A dimension name declares a symbolic variable of the function, unless
        it names one of an ``enclosing`` function (for a nested function):
        that variable is used, as TVM does.
        """
        self.where = fdef
        flags = self.decorator_flags(fdef, ("pure", "private"))
        self.check_plain_args(fdef)
        syms: dict[str, tir.Var] = {}
        outer = enclosing.visible_sym if enclosing is not None else None
        sp = _SinfoParser(self, _PrimExprParser(self, "int64",
                                                _signature_resolver(self, syms, outer)))
        params = []
        for a in fdef.args.args:
            if a.annotation is None:
                raise self.error(f"parameter {a.arg!r} of {fdef.name!r} needs a struct info "
                                 f"annotation, e.g. {a.arg}: R.Tensor((n, 4), \"float32\")", a)
            params.append(rx.Var(a.arg, sp.parse(a.annotation), span=self.span(a)))
        ret = sp.parse(fdef.returns) if fdef.returns is not None else None
        return _Signature(fdef.name, fdef, params, ret, syms, flags.get("pure", True),
                          flags.get("private", enclosing is not None))


def _signature_resolver(mp: _ModuleParser, syms: dict[str, tir.Var],
                        outer: Callable[[str], tir.Var | None] | None = None):
    """In a signature, a dimension name is a symbolic variable of an enclosing
    function (``outer`` looks those up) or else declares one in ``syms``."""
    def resolve(name: str, node: ast.AST, declare: bool) -> tir.Var:
        var = syms.get(name)
        if var is None and outer is not None:
            var = outer(name)
        if var is None:
            var = tir.Var(name, "int64", span=mp.span(node))
        syms[name] = var
        return var
    return resolve


# ---------------------------------------------------------------------------
# Scalar (TIR) expressions
# ---------------------------------------------------------------------------

class _PrimExprParser:
    """Scalar expressions: TIR kernels and symbolic dimensions.

    ``int_dtype`` is the dtype of a bare integer literal (int32 in TIR,
    int64 for Relax shapes). Bare literals are "weak": combined with a typed
    operand they take its dtype (``i + 1`` with an int64 ``i`` is int64), as
    in TVM. ``resolve(name, node, declare)`` maps identifiers to ``tir.Var``
    or ``tir.Buffer``; ``declare`` is True for names written inside strings
    (``R.Tensor(("n", "n * 2"))``), which may declare symbolic variables.
    """

    def __init__(self, mp: _ModuleParser, int_dtype: str,
                 resolve: Callable[[str, ast.AST, bool], Any]) -> None:
        self.mp = mp
        self.int_dtype = int_dtype
        self.resolve = resolve
        self._in_string = False

    def parse(self, node: ast.AST, dtype: str | None = None) -> tir.PrimExpr:
        """Parse ``node``; with ``dtype``, a bare literal takes that dtype."""
        e, weak = self._p(node)
        if weak and dtype is not None:
            e = _adopt(e, dtype)
        return e

    def parse_pair(self, a: ast.AST, b: ast.AST) -> tuple[tir.PrimExpr, tir.PrimExpr]:
        """Two operands, a bare literal taking the other's dtype."""
        x, xw = self._p(a)
        y, yw = self._p(b)
        if xw and not yw:
            x = _adopt(x, y.dtype)
        elif yw and not xw:
            y = _adopt(y, x.dtype)
        return x, y

    def _literal(self, value: Any, node: ast.AST) -> tuple[tir.PrimExpr, bool]:
        span = self.mp.span(node)
        if isinstance(value, bool):
            return tir.IntImm(int(value), "bool", span=span), False
        if isinstance(value, int):
            dtype = self.int_dtype
            if int_range_problem(value, dtype) is not None:
                dtype = "int64"  # as in TVM, a literal too big for int32 is an int64
            problem = int_range_problem(value, dtype)
            if problem is not None:
                raise self.mp.error(f"integer literal {problem}", node)
            return tir.IntImm(value, dtype, span=span), True
        return tir.FloatImm(float(value), "float32", span=span), True

    def _p(self, node: ast.AST) -> tuple[tir.PrimExpr, bool]:
        mp = self.mp
        number = mp.number(node)
        if number is not None:
            return self._literal(number, node)
        span = mp.span(node)
        if isinstance(node, ast.Name):
            value = self.resolve(node.id, node, self._in_string)
            if isinstance(value, tir.Buffer):
                raise mp.error(f"buffer {node.id!r} is used as a scalar; index it, e.g. "
                               f"{node.id}[i]", node)
            return value, False
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str) and not self._in_string:
                return self._string_dim(node), False
            raise mp.error(f"unsupported literal {mp.src(node)} in a scalar expression", node)
        if isinstance(node, ast.BinOp):
            op = _BINOPS.get(type(node.op))
            if op is None:
                raise mp.error(f"unsupported operator {_PY_OP_SPELLING.get(type(node.op), '?')!r} "
                               f"in a scalar expression", node)
            lhs, rhs = self.parse_pair(node.left, node.right)
            return tir.BinaryOp(op, lhs, rhs, span=span), False
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                return tir.Not(self.parse(node.operand), span=span), False
            if isinstance(node.op, ast.USub):
                value = self.parse(node.operand)
                zero = _adopt(tir.IntImm(0, "int32"), value.dtype)
                return tir.BinaryOp("-", zero, value, span=span), False
            if isinstance(node.op, ast.UAdd):
                return self._p(node.operand)
            raise mp.error("unsupported operator '~' in a scalar expression", node)
        if isinstance(node, ast.BoolOp):
            op = "and" if isinstance(node.op, ast.And) else "or"
            result = self.parse(node.values[0])
            for v in node.values[1:]:
                result = tir.BinaryOp(op, result, self.parse(v), span=span)
            return result, False
        if isinstance(node, ast.Compare):
            if len(node.ops) != 1:
                raise mp.error("chained comparisons are not supported; combine them with 'and'",
                               node)
            op = _CMPOPS.get(type(node.ops[0]))
            if op is None:
                raise mp.error(f"unsupported comparison in {mp.src(node)!r}", node)
            lhs, rhs = self.parse_pair(node.left, node.comparators[0])
            return tir.BinaryOp(op, lhs, rhs, span=span), False
        if isinstance(node, ast.Subscript):
            return self._load(node), False
        if isinstance(node, ast.Call):
            return self._call(node), False
        raise mp.error(f"unsupported scalar expression {mp.src(node)!r}", node)

    def _string_dim(self, node: ast.Constant) -> tir.PrimExpr:
        """``"n"`` or ``"n * 2"``: a dimension written as a string (signatures)."""
        text = node.value.strip()
        if text.isidentifier():
            return self.resolve(text, node, True)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sub = ast.parse(text, mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            raise self.mp.error(f"invalid dimension expression {node.value!r}", node) from None
        for n in ast.walk(sub):  # report positions at the string
            ast.copy_location(n, node)
            n.end_lineno, n.end_col_offset = node.end_lineno, node.end_col_offset
        self._in_string = True
        try:
            return self.parse(sub)
        finally:
            self._in_string = False

    def _load(self, node: ast.Subscript) -> tir.BufferLoad:
        mp = self.mp
        if not isinstance(node.value, ast.Name):
            raise mp.error(f"only buffers can be indexed in a scalar expression, not "
                           f"{mp.src(node.value)!r}", node.value)
        buf = self.resolve(node.value.id, node.value, False)
        if not isinstance(buf, tir.Buffer):
            raise mp.error(f"{node.value.id!r} is not a buffer; only buffers can be indexed",
                           node.value)
        return tir.BufferLoad(buf, self.indices(node), span=mp.span(node))

    def indices(self, node: ast.Subscript) -> tuple[tir.PrimExpr, ...]:
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        out = []
        for e in elts:
            if isinstance(e, ast.Slice):
                raise self.mp.error("slices are only allowed in T.reads/T.writes regions", e)
            out.append(self.parse(e))
        return tuple(out)

    def _call(self, node: ast.Call) -> tir.PrimExpr:
        mp = self.mp
        name = _dotted(node.func)
        span = mp.span(node)
        if name is None or len(name) != 2 or name[0] != mp.T:
            raise mp.error(f"unsupported call {mp.src(node.func)!r} in a scalar expression; "
                           f"expected a {mp.T}.<function> such as {mp.T}.max or {mp.T}.exp", node)
        fn = name[1]
        if node.keywords:
            raise mp.error(f"{mp.T}.{fn} takes positional arguments only", node.keywords[0].value)
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise mp.error(f"{mp.T}.{fn}: *args are not supported", a)
        args = node.args

        def arity(n: int) -> None:
            if len(args) != n:
                raise mp.error(f"{mp.T}.{fn} takes {n} argument(s), got {len(args)}", node)

        if fn in tir.DTYPES:
            if not args:
                raise mp.error(f"{mp.T}.{fn}() declares a symbolic variable; write it as a "
                               f"statement `n = {mp.T}.{fn}()`", node)
            arity(1)
            number = mp.number(args[0])
            if number is None:
                return tir.Cast(fn, self.parse(args[0]), span=span)
            if tir.is_float(fn):
                if isinstance(number, bool):
                    raise mp.error(f"{mp.T}.{fn} expects a number, got {number}", args[0])
                return tir.FloatImm(float(number), fn, span=span)
            if isinstance(number, float):
                raise mp.error(f"{mp.T}.{fn} expects an integer, got {number!r}", args[0])
            problem = int_range_problem(int(number), fn)
            if problem is not None:
                raise mp.error(f"{mp.T}.{fn}({number}): {problem}", args[0])
            return tir.IntImm(int(number), fn, span=span)
        if fn in ("Cast", "cast"):
            arity(2)
            # T.Cast(dtype, value) (TVM's node) and T.cast(value, dtype)
            d_node, v_node = (args[0], args[1]) if fn == "Cast" else (args[1], args[0])
            dtype = mp.dtype_arg(d_node, f"{mp.T}.{fn}")
            return tir.Cast(dtype, self.parse(v_node), span=span)
        if fn in ("Select", "if_then_else"):
            arity(3)
            cond = self.parse(args[0])
            a, b = self.parse_pair(args[1], args[2])
            return tir.Select(cond, a, b, span=span)
        if fn in ("And", "Or"):
            arity(2)
            return tir.BinaryOp(fn.lower(), self.parse(args[0]), self.parse(args[1]), span=span)
        if fn == "Not":
            arity(1)
            return tir.Not(self.parse(args[0]), span=span)
        if fn in _TIR_BINARY_FUNCS:
            arity(2)
            a, b = self.parse_pair(args[0], args[1])
            return tir.BinaryOp(_TIR_BINARY_FUNCS[fn], a, b, span=span)
        if fn in tir.INTRINSICS:
            arity(tir.INTRINSICS[fn])
            return tir.Call(fn, [self.parse(a) for a in args], span=span)
        close = difflib.get_close_matches(fn, _TIR_FUNCS, n=1)
        hint = f" (did you mean {mp.T}.{close[0]}?)" if close else ""
        raise mp.error(f"unknown TIR function {mp.T}.{fn}{hint}", node.func)


def _adopt(e: tir.PrimExpr, dtype: str) -> tir.PrimExpr:
    """A bare literal takes the dtype its context asks for."""
    if e.dtype == dtype:
        return e
    if isinstance(e, tir.IntImm) and (tir.is_int(dtype) or tir.is_float(dtype)):
        if tir.is_float(dtype):
            return tir.FloatImm(float(e.value), dtype, span=e.span)
        problem = int_range_problem(e.value, dtype)
        if problem is not None:
            raise ParseError(f"integer literal {problem}", e.span)
        return tir.IntImm(e.value, dtype, span=e.span)
    if isinstance(e, tir.FloatImm) and tir.is_float(dtype):
        return tir.FloatImm(e.value, dtype, span=e.span)
    return e


def _same(a: tir.PrimExpr, b: tir.PrimExpr) -> bool:
    """Syntactic equality of small scalar expressions (variables by identity)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, (tir.IntImm, tir.FloatImm)):
        return a.value == b.value and a.dtype == b.dtype
    if isinstance(a, tir.BinaryOp):
        return a.op == b.op and _same(a.lhs, b.lhs) and _same(a.rhs, b.rhs)
    return False


def _extent(start: tir.PrimExpr, stop: tir.PrimExpr) -> tir.PrimExpr:
    """``stop - start``, folded when obvious (``range(a, a + n)`` has extent ``n``)."""
    if isinstance(start, tir.IntImm) and start.value == 0:
        return stop
    if isinstance(start, tir.IntImm) and isinstance(stop, tir.IntImm):
        return tir.IntImm(stop.value - start.value, stop.dtype, span=stop.span)
    if isinstance(stop, tir.BinaryOp) and stop.op == "+" and _same(stop.lhs, start):
        return stop.rhs
    return tir.BinaryOp("-", stop, start, span=stop.span)


# ---------------------------------------------------------------------------
# Struct info annotations
# ---------------------------------------------------------------------------

class _SinfoParser:
    """``R.Tensor(...)``, ``R.Tuple(...)``, ``R.Shape(...)``, ``R.Prim(...)``,
    ``R.Object``, ``R.Callable(...)``. Dimensions go through ``prim``."""

    def __init__(self, mp: _ModuleParser, prim: _PrimExprParser) -> None:
        self.mp = mp
        self.prim = prim

    def parse(self, node: ast.AST) -> StructInfo:
        mp = self.mp
        call = node if isinstance(node, ast.Call) else None
        name = _dotted(call.func if call is not None else node)
        if name is None or len(name) != 2 or name[0] != mp.R or name[1] not in _SINFO_KINDS:
            raise mp.error(f"expected a struct info annotation such as "
                           f"{mp.R}.Tensor((n, 4), \"float32\"), got {mp.src(node)!r}", node)
        kind = name[1]
        span = mp.span(node)
        if call is None:  # bare R.Tensor, R.Object...
            if kind == "Tensor":
                return TensorStructInfo(span=span)
            if kind in ("Object", "Any"):  # R.Any: newer TVM's name for R.Object
                return ObjectStructInfo(span=span)
            if kind == "Shape":
                return ShapeStructInfo(span=span)
            if kind == "Tuple":
                return TupleStructInfo((), span=span)
            if kind == "Callable":
                return FuncStructInfo(None, ObjectStructInfo(), True, span=span)
            raise mp.error(f"{mp.R}.Prim needs a dtype, e.g. {mp.R}.Prim(\"int64\")", node)
        return getattr(self, "_" + ("object" if kind == "Any" else kind.lower()))(call, span)

    def _dims(self, node: ast.AST, what: str, allow_negative: bool = False
              ) -> tuple[tir.PrimExpr, ...]:
        if not isinstance(node, (ast.Tuple, ast.List)):
            raise self.mp.error(f"{what} must be a tuple or list of dimensions, got "
                                f"{self.mp.src(node)!r}", node)
        return tuple(self.mp.dims(self.prim, node.elts, what, allow_negative))

    def _int(self, node: ast.AST, what: str) -> int:
        value = self.mp.number(node)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.mp.error(f"{what} must be an integer literal, got {self.mp.src(node)!r}", node)
        return value

    def _tensor(self, call: ast.Call, span: Span) -> StructInfo:
        mp = self.mp
        a = mp.bind_args(call, f"{mp.R}.Tensor", ("shape", "dtype", "ndim"), 0)
        first = a.get("shape")
        if isinstance(first, ast.Constant) and isinstance(first.value, str) and "dtype" not in a:
            a["dtype"] = a.pop("shape")  # R.Tensor("float32", ndim=2)
        shape = None
        if "shape" in a and not _is_none(a["shape"]):
            shape = self._dims(a["shape"], f"{mp.R}.Tensor shape")
        dtype = "void"
        if "dtype" in a and not _is_none(a["dtype"]):
            dtype = mp.str_arg(a["dtype"], f"{mp.R}.Tensor dtype")
            if dtype not in tir.DTYPES and dtype != "void":
                raise mp.error(f"{mp.R}.Tensor: unknown dtype {dtype!r}", a["dtype"])
        ndim = -1
        if "ndim" in a:
            ndim = self._int(a["ndim"], f"{mp.R}.Tensor ndim")
            if ndim < -1:
                raise mp.error(f"{mp.R}.Tensor: ndim must be -1 (unknown) or >= 0", a["ndim"])
            if shape is not None and ndim not in (-1, len(shape)):
                raise mp.error(f"{mp.R}.Tensor: ndim={ndim} does not match the shape's "
                               f"{len(shape)} dimension(s)", a["ndim"])
        return TensorStructInfo(shape, dtype, ndim, span=span)

    def _tuple(self, call: ast.Call, span: Span) -> StructInfo:
        mp = self.mp
        if call.keywords:
            raise mp.error(f"{mp.R}.Tuple takes its fields as positional arguments",
                           call.keywords[0].value)
        elts = call.args
        if len(elts) == 1 and isinstance(elts[0], (ast.List, ast.Tuple)):
            elts = elts[0].elts
        return TupleStructInfo([self.parse(e) for e in elts], span=span)

    def _shape(self, call: ast.Call, span: Span) -> StructInfo:
        mp = self.mp
        a = mp.bind_args(call, f"{mp.R}.Shape", ("values", "ndim"), 0)
        if "values" in a and not _is_none(a["values"]):
            values = self._dims(a["values"], f"{mp.R}.Shape values", allow_negative=True)
            if "ndim" in a and self._int(a["ndim"], f"{mp.R}.Shape ndim") not in (-1, len(values)):
                raise mp.error(f"{mp.R}.Shape: ndim does not match the number of values", a["ndim"])
            return ShapeStructInfo(values, span=span)
        ndim = self._int(a["ndim"], f"{mp.R}.Shape ndim") if "ndim" in a else -1
        if ndim < -1:
            raise mp.error(f"{mp.R}.Shape: ndim must be -1 (unknown) or >= 0", a["ndim"])
        return ShapeStructInfo(None, ndim, span=span)

    def _prim(self, call: ast.Call, span: Span) -> StructInfo:
        mp = self.mp
        a = mp.bind_args(call, f"{mp.R}.Prim", ("dtype", "value"), 0)
        value = None
        if "value" in a and not _is_none(a["value"]):
            value = self.prim.parse(a["value"])
        if "dtype" in a and not _is_none(a["dtype"]):
            dtype = mp.dtype_arg(a["dtype"], f"{mp.R}.Prim dtype")
            if value is not None:
                value = _adopt(value, dtype)
                if tir.is_float(value.dtype) != tir.is_float(dtype) or \
                        tir.is_bool(value.dtype) != tir.is_bool(dtype):
                    raise mp.error(f"{mp.R}.Prim: the value {mp.src(a['value'])} is "
                                   f"{value.dtype}, not {dtype}", a["value"])
        elif value is not None:
            dtype = value.dtype
        else:
            raise mp.error(f"{mp.R}.Prim needs a dtype or a value", call)
        return PrimStructInfo(dtype, value, span=span)

    def _object(self, call: ast.Call, span: Span) -> StructInfo:
        if call.args or call.keywords:
            raise self.mp.error(f"{self.mp.R}.Object takes no arguments", call)
        return ObjectStructInfo(span=span)

    def _callable(self, call: ast.Call, span: Span) -> StructInfo:
        mp = self.mp
        a = mp.bind_args(call, f"{mp.R}.Callable", ("params", "ret", "purity"), 0)
        params = None
        if "params" in a and not _is_none(a["params"]):
            p = a["params"]
            if not isinstance(p, (ast.Tuple, ast.List)):
                raise mp.error(f"{mp.R}.Callable params must be a tuple of struct info", p)
            params = [self.parse(e) for e in p.elts]
        ret: StructInfo = ObjectStructInfo()
        if "ret" in a and not _is_none(a["ret"]):
            ret = self.parse(a["ret"])
        purity = True
        if "purity" in a:
            value = a["purity"]
            if not (isinstance(value, ast.Constant) and isinstance(value.value, bool)):
                raise mp.error(f"{mp.R}.Callable purity must be True or False", value)
            purity = value.value
        return FuncStructInfo(params, ret, purity, span=span)


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


# ---------------------------------------------------------------------------
# Relax functions
# ---------------------------------------------------------------------------

class _Frame:
    """The binding blocks of one SeqExpr under construction."""

    __slots__ = ("blocks", "bindings", "dataflow", "filename")

    def __init__(self, filename: str) -> None:
        self.blocks: list[rx.BindingBlock] = []
        self.bindings: list[rx.Binding] = []
        self.dataflow = False
        self.filename = filename

    def flush(self, span: Span | None = None) -> None:
        """Close the open block (a dataflow block is kept even when empty)."""
        if not self.bindings and not self.dataflow:
            return
        if span is None:
            first, last = self.bindings[0].span, self.bindings[-1].span
            if first is not None and last is not None:
                span = Span(first.file, first.line, first.col, last.end_line, last.end_col)
        cls = rx.DataflowBlock if self.dataflow else rx.BindingBlock
        self.blocks.append(cls(self.bindings, span=span))
        self.bindings = []


#: Relax dialect calls with their own argument conventions: R.<name> -> handler.
_RELAX_CALLS = {
    "const": "_call_const",
    "shape": "_call_shape",
    "prim_value": "_call_prim_value",
    "str": "_call_str",
    "dtype": "_call_dtype",
    "call_tir": "_call_tir",
    "call_dps_packed": "_call_dps_packed",
    "call_packed": "_call_packed",
    "call_pure_packed": "_call_pure_packed",
    "make_closure": "_call_make_closure",
    "invoke_closure": "_call_invoke_closure",
    "invoke_pure_closure": "_call_invoke_pure_closure",
    "ExternFunc": "_call_extern_func",
}

#: Dialect names that are statements, not values: R.<name> -> where they belong.
_RELAX_STATEMENT_ONLY = {
    "match_cast": "can only be the value of an assignment: `y = R.match_cast(x, R.Tensor(...))`",
    "output": "can only be the last statement of a dataflow block",
    "dataflow": "opens a block: `with R.dataflow():`",
    "func_attr": "can only be a statement at the start of a function body",
    "function": "is a decorator: `@R.function`",
}

_OUT_SINFO = {"out_ty": "out_sinfo"}
_SINFO_ARGS = {"ty_args": "sinfo_args"}


class _RelaxFunctionParser:
    """Parses one ``@R.function`` (``parent`` is set for nested functions)."""

    def __init__(self, mp: _ModuleParser, sig: _Signature,
                 parent: _RelaxFunctionParser | None, self_var: rx.Var | None = None) -> None:
        self.mp = mp
        self.sig = sig
        self.parent = parent
        self.scopes: list[dict[str, rx.Expr]] = [{p.name_hint: p for p in sig.params}]
        if self_var is not None:  # a nested function sees its own name (recursion)
            self.scopes[0].setdefault(self_var.name_hint, self_var)
        self.frame = _Frame(mp.filename)
        self.output_stmts: set[int] = set()  # ids of statements defining R.output vars
        # names bound inside an ended dataflow block but not in its R.output
        self.dataflow_locals: set[str] = set()
        self.prim = _PrimExprParser(mp, "int64", self._resolve_dim)
        self.sinfo_parser = _SinfoParser(mp, self.prim)

    # -- names -------------------------------------------------------------
    def _lookup(self, name: str) -> rx.Expr | None:
        p: _RelaxFunctionParser | None = self
        while p is not None:
            for scope in reversed(p.scopes):
                value = scope.get(name)
                if value is not None:
                    return value
            p = p.parent
        return None

    def visible_sym(self, name: str) -> tir.Var | None:
        """The symbolic variable ``name`` of this function or of an enclosing
        one (a nested function is part of its enclosing function and shares
        its symbolic variables), or None."""
        p: _RelaxFunctionParser | None = self
        while p is not None:
            var = p.sig.syms.get(name)
            if var is not None:
                return var
            p = p.parent
        return None

    def _resolve_dim(self, name: str, node: ast.AST, declare: bool) -> tir.Var:
        """A symbolic dimension in the body: a variable of this function or an
        enclosing one; a string (``"m"`` in a match_cast) declares a new one."""
        var = self.visible_sym(name)
        if var is not None:
            return var
        if declare:
            var = self.sig.syms[name] = tir.Var(name, "int64", span=self.mp.span(node))
            return var
        if self._lookup(name) is not None:
            raise self.mp.error(f"{name!r} is a Relax variable, not a symbolic dimension", node)
        raise self.mp.error(f"name {name!r} is not defined (declare a symbolic dimension with "
                            f"`{name} = {self.mp.T}.int64()`)", node)

    def _bind(self, name: str, value: rx.Expr) -> None:
        self.scopes[-1][name] = value

    def _new_var(self, name: str, sinfo: StructInfo | None, node: ast.AST,
                 stmt: ast.AST | None) -> rx.Var:
        """A Var, or a DataflowVar inside a dataflow block unless R.output lists it."""
        span = self.mp.span(node)
        if self.frame.dataflow and (stmt is None or id(stmt) not in self.output_stmts):
            return rx.DataflowVar(name, sinfo, span=span)
        return rx.Var(name, sinfo, span=span)

    def _emit(self, binding: rx.Binding) -> None:
        self.frame.bindings.append(binding)

    # -- function ----------------------------------------------------------
    def parse_function(self, attrs: dict[str, Any] | None = None) -> rx.Function:
        mp, sig = self.mp, self.sig
        fdef = sig.node
        attrs = dict(attrs or {})
        body = list(fdef.body)
        if body and _is_docstring(body[0]):
            body = body[1:]
        for i, stmt in enumerate(body[:-1]):
            if isinstance(stmt, ast.Return):
                raise mp.error("`return` must be the last statement of the function body "
                               "(this statement follows it)", body[i + 1])
        if not body or not isinstance(body[-1], ast.Return):
            raise mp.error(f"R.function {sig.name!r} must end with `return <expr>`",
                           body[-1] if body else fdef)
        func_attrs: dict[str, Any] = {}
        for stmt in body[:-1]:
            mp.where = stmt
            if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                    and _dotted(stmt.value.func) == (mp.R, "func_attr")):
                call = stmt.value
                if func_attrs or len(call.args) != 1 or call.keywords:
                    raise mp.error(f"{mp.R}.func_attr expects one dictionary literal and may "
                                   f"appear once", stmt)
                func_attrs = mp.attr_dict(call.args[0])
                continue
            self._stmt(stmt)
        ret = body[-1]
        mp.where = ret
        if ret.value is None:
            raise mp.error(f"R.function {sig.name!r}: `return` needs a value", ret)
        # A non-leaf result gets its own binding, so the body is a leaf (as TVM's
        # normalizer does).
        result = self._arg(ret.value)
        self.frame.flush()
        seq = rx.SeqExpr(self.frame.blocks, result, span=mp.span(ret))
        if not sig.private:
            attrs["global_symbol"] = sig.name
        attrs.update(func_attrs)
        func = rx.Function(sig.params, seq, sig.ret, sig.is_pure, attrs, span=mp.span(fdef))
        if func.struct_info is None:
            sinfo = mp.infer(func)
            if sinfo is not None:
                func = rx.Function(sig.params, seq, sig.ret, sig.is_pure, attrs,
                                   struct_info=sinfo, span=func.span)
        return func

    # -- statements --------------------------------------------------------
    def _stmts(self, stmts: Sequence[ast.stmt]) -> None:
        for stmt in stmts:
            self._stmt(stmt)

    def _stmt(self, stmt: ast.stmt) -> None:
        mp = self.mp
        mp.where = stmt
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            self._assign(stmt)
        elif isinstance(stmt, ast.With):
            self._dataflow(stmt)
        elif isinstance(stmt, ast.If):
            self._if(stmt)
        elif isinstance(stmt, ast.FunctionDef):
            self._nested_function(stmt)
        elif isinstance(stmt, ast.Expr):
            self._expr_stmt(stmt)
        elif isinstance(stmt, ast.Return):
            raise mp.error("`return` must be the last statement of the function body "
                           "(in an if branch, assign the result instead)", stmt)
        else:
            raise mp.error(f"unsupported statement '{_stmt_kind(stmt)}' in R.function", stmt)

    def _target(self, stmt: ast.Assign | ast.AnnAssign) -> tuple[ast.Name, ast.AST | None]:
        mp = self.mp
        if isinstance(stmt, ast.Assign):
            if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
                raise mp.error("only `name = expr` assignments are supported in R.function "
                               "(no tuple unpacking or chained assignment)", stmt.targets[0])
            return stmt.targets[0], None
        if not isinstance(stmt.target, ast.Name):
            raise mp.error("only `name: annotation = expr` is supported in R.function", stmt.target)
        if stmt.value is None:
            raise mp.error(f"annotation without a value for {stmt.target.id!r}", stmt)
        return stmt.target, stmt.annotation

    def _assign(self, stmt: ast.Assign | ast.AnnAssign) -> None:
        mp = self.mp
        target, ann = self._target(stmt)
        value = stmt.value
        fname = _dotted(value.func) if isinstance(value, ast.Call) else None
        # `n = T.int64()`: a symbolic dimension
        if fname is not None and len(fname) == 2 and fname[0] == mp.T and fname[1] in _INT_DTYPES \
                and not value.args and not value.keywords:
            if ann is not None:
                raise mp.error("a symbolic variable declaration takes no annotation", ann)
            # Declaring a name again (the printer declares every variable a
            # function mentions, signature ones included) means the same variable.
            if self.visible_sym(target.id) is None:
                self.sig.syms[target.id] = tir.Var(target.id, fname[1], span=mp.span(target))
            return
        if (ann is None and isinstance(value, ast.Name) and value.id in mp.class_names
                and self._lookup(value.id) is None):
            mp.class_names.add(target.id)  # `cls = Module`, as TVM prints it
            return
        if fname == (mp.R, "match_cast"):
            a = mp.bind_args(value, f"{mp.R}.match_cast", ("value", "struct_info"), 2)
            source = self._arg(a["value"])
            cast_sinfo = self.sinfo_parser.parse(a["struct_info"])
            var_sinfo = self.sinfo_parser.parse(ann) if ann is not None else cast_sinfo
            var = self._new_var(target.id, var_sinfo, target, stmt)
            self._emit(rx.MatchCast(var, source, cast_sinfo, span=mp.span(stmt)))
            self._bind(target.id, var)
            return
        expr = self._expr(value)
        sinfo = self.sinfo_parser.parse(ann) if ann is not None else expr.struct_info
        var = self._new_var(target.id, sinfo, target, stmt)
        self._emit(rx.VarBinding(var, expr, span=mp.span(stmt)))
        self._bind(target.id, var)

    def _expr_stmt(self, stmt: ast.Expr) -> None:
        mp = self.mp
        value = stmt.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return  # a docstring or comment string
        if not isinstance(value, ast.Call):
            raise mp.error(f"expression statement {mp.src(value)!r} has no effect; only calls "
                           f"(e.g. {mp.R}.call_packed(...)) may stand alone", stmt)
        fname = _dotted(value.func)
        if fname == (mp.R, "output"):
            raise mp.error(f"{mp.R}.output(...) can only be the last statement of a dataflow "
                           f"block", stmt)
        if fname == (mp.R, "func_attr"):
            raise mp.error(f"{mp.R}.func_attr must be a statement at the top of the function "
                           f"body", stmt)
        expr = self._expr(value)
        var = self._new_var("_", expr.struct_info, value, stmt)
        self._emit(rx.VarBinding(var, expr, span=mp.span(stmt)))

    def _bound_name(self, stmt: ast.stmt) -> str | None:
        """The name a statement binds (for R.output resolution), if any."""
        while True:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                    and isinstance(stmt.targets[0], ast.Name):
                return stmt.targets[0].id
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                return stmt.target.id
            if isinstance(stmt, ast.FunctionDef):
                return stmt.name
            if isinstance(stmt, ast.If) and stmt.body:
                stmt = stmt.body[-1]
                continue
            return None

    def _dataflow(self, stmt: ast.With) -> None:
        mp = self.mp
        item = stmt.items[0]
        is_df = (len(stmt.items) == 1 and isinstance(item.context_expr, ast.Call)
                 and _dotted(item.context_expr.func) == (mp.R, "dataflow")
                 and not item.context_expr.args and not item.context_expr.keywords)
        if not is_df:
            raise mp.error(f"unsupported statement 'with {mp.src(item.context_expr)}' in "
                           f"R.function; only `with {mp.R}.dataflow():` is supported", stmt)
        if item.optional_vars is not None:
            raise mp.error(f"`with {mp.R}.dataflow()` takes no `as` target", item.optional_vars)
        if self.frame.dataflow:
            raise mp.error("dataflow blocks cannot be nested", stmt)
        last = stmt.body[-1]
        if not (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
                and _dotted(last.value.func) == (mp.R, "output")):
            raise mp.error(f"expected {mp.R}.output(...) as the last statement of a dataflow "
                           f"block", last)
        out_call = last.value
        if out_call.keywords:
            raise mp.error(f"{mp.R}.output takes variable names only", out_call.keywords[0].value)
        last_def: dict[str, ast.stmt] = {}
        for s in stmt.body[:-1]:
            name = self._bound_name(s)
            if name is not None:
                last_def[name] = s
        outputs: list[str] = []
        for a in out_call.args:
            if not isinstance(a, ast.Name):
                raise mp.error(f"{mp.R}.output takes variable names, got {mp.src(a)!r}", a)
            if a.id not in last_def:
                raise mp.error(f"{mp.R}.output({a.id}): {a.id!r} is not assigned in this "
                               f"dataflow block", a)
            outputs.append(a.id)
        self.frame.flush()
        self.frame.dataflow = True
        saved_outputs = self.output_stmts
        self.output_stmts = {id(last_def[n]) for n in outputs}
        self.scopes.append({})
        try:
            self._stmts(stmt.body[:-1])
        finally:
            block_scope = self.scopes.pop()
            self.output_stmts = saved_outputs
        mp.where = last
        self.frame.flush(mp.span(stmt))
        self.frame.dataflow = False
        for name in outputs:
            var = block_scope.get(name)
            if not isinstance(var, rx.Var) or isinstance(var, rx.DataflowVar):
                raise mp.error(f"{mp.R}.output({name}): {name!r} is not a variable bound in this "
                               f"dataflow block", out_call)
            self._bind(name, var)
        self.dataflow_locals.update(n for n in block_scope if n not in outputs)

    def _branch(self, stmts: list[ast.stmt], which: str,
                if_stmt: ast.If) -> tuple[str, StructInfo | None, rx.SeqExpr]:
        """One branch of an if: its bindings, and the value of its last assignment.

        As in TVM, a leaf value (``y = x``) is the branch's result directly;
        any other value is bound to ``y_then``/``y_else`` in the branch and
        that variable is the result, so branch bodies are leaves.
        """
        mp = self.mp
        saved_frame = self.frame
        self.frame = _Frame(mp.filename)
        self.scopes.append({})
        saved_outputs, self.output_stmts = self.output_stmts, set()
        try:
            self._stmts(stmts[:-1])
            last = stmts[-1]
            mp.where = last
            ann: StructInfo | None = None
            if isinstance(last, (ast.Assign, ast.AnnAssign)):
                target, ann_node = self._target(last)
                name = target.id
                inner_name = f"{name}_{which}"
                value = last.value
                if isinstance(value, ast.Call) and _dotted(value.func) == (mp.R, "match_cast"):
                    a = mp.bind_args(value, f"{mp.R}.match_cast", ("value", "struct_info"), 2)
                    source = self._arg(a["value"])
                    cast_sinfo = self.sinfo_parser.parse(a["struct_info"])
                    ann = self.sinfo_parser.parse(ann_node) if ann_node is not None else None
                    result = rx.Var(inner_name, ann or cast_sinfo, span=mp.span(target))
                    self._emit(rx.MatchCast(result, source, cast_sinfo, span=mp.span(last)))
                else:
                    expr = self._expr(value)
                    if ann_node is not None:
                        ann = self.sinfo_parser.parse(ann_node)
                    if isinstance(expr, (rx.LEAF_EXPRS, rx.Tuple)):
                        result = expr
                    else:
                        result = rx.Var(inner_name, ann or expr.struct_info, span=mp.span(target))
                        self._emit(rx.VarBinding(result, expr, span=mp.span(last)))
            elif isinstance(last, ast.If):
                self._if(last)  # `elif`, or a nested if that binds the result
                name = self._bound_name(last) or ""
                result = self.scopes[-1][name]
            else:
                raise mp.error(f"the {which} branch of an if must end with an assignment "
                               f"`name = expr` giving the if's result", last)
            self.frame.flush()
            seq = rx.SeqExpr(self.frame.blocks, result, span=mp.span(last))
        finally:
            self.scopes.pop()
            self.frame = saved_frame
            self.output_stmts = saved_outputs
        return name, ann, seq

    def _if(self, stmt: ast.If) -> None:
        mp = self.mp
        if not stmt.orelse:
            raise mp.error("an if in R.function needs an else branch (both branches assign the "
                           "result)", stmt)
        cond = self._arg(stmt.test)
        then_name, then_ann, then_seq = self._branch(stmt.body, "then", stmt)
        else_name, else_ann, else_seq = self._branch(stmt.orelse, "else", stmt)
        mp.where = stmt
        if then_name != else_name:
            raise mp.error(f"both branches of an if must assign the same variable (then assigns "
                           f"{then_name!r}, else assigns {else_name!r})", stmt)
        span = mp.span(stmt)
        node = rx.If(cond, then_seq, else_seq, span=span)
        sinfo = mp.infer(node)
        if sinfo is not None:
            node = rx.If(cond, then_seq, else_seq, struct_info=sinfo, span=span)
        var_sinfo = then_ann or else_ann or sinfo
        var = self._new_var(then_name, var_sinfo, stmt, stmt)
        self._emit(rx.VarBinding(var, node, span=span))
        self._bind(then_name, var)

    def _nested_function(self, stmt: ast.FunctionDef) -> None:
        mp = self.mp
        kind = mp._function_kind(stmt)
        if kind != "relax":
            raise mp.error(f"a {mp.T}.prim_func cannot be nested in an R.function; define it "
                           f"in the module class", stmt)
        sig = mp.relax_signature(stmt, enclosing=self)
        mp.where = stmt
        fsinfo = sig.struct_info()
        var = None
        if fsinfo is not None:
            var = self._new_var(stmt.name, fsinfo, stmt, stmt)
        elif any(isinstance(n, ast.Name) and n.id == stmt.name
                 for s in stmt.body for n in ast.walk(s)):
            raise mp.error(f"recursive function {stmt.name!r} needs a return annotation "
                           f"(`-> R.Tensor(...)`)", stmt)
        func = _RelaxFunctionParser(mp, sig, self, self_var=var).parse_function()
        mp.where = stmt
        if var is None:
            var = self._new_var(stmt.name, func.struct_info, stmt, stmt)
        self._emit(rx.VarBinding(var, func, span=mp.span(stmt)))
        self._bind(stmt.name, var)

    # -- expressions -------------------------------------------------------
    def _arg(self, node: ast.AST) -> rx.Expr:
        """An operand in A-normal form: non-leaf values get their own binding."""
        return self._as_leaf(self._expr(node), node)

    def _as_leaf(self, expr: rx.Expr, node: ast.AST) -> rx.Expr:
        if isinstance(expr, (rx.LEAF_EXPRS, rx.Tuple)):  # tuples are built from leaves
            return expr
        var = self._new_var(self.mp.fresh_name(), expr.struct_info, node, None)
        self._emit(rx.VarBinding(var, expr, span=self.mp.span(node)))
        return var

    def _expr(self, node: ast.AST) -> rx.Expr:
        mp = self.mp
        if isinstance(node, ast.Name):
            value = self._lookup(node.id)
            if value is not None:
                return value
            if node.id in self.sig.syms:
                raise mp.error(f"{node.id!r} is a symbolic dimension, not a Relax value; use "
                               f"{mp.R}.prim_value({node.id}) or {mp.R}.shape([{node.id}])", node)
            if node.id in self.dataflow_locals:
                raise mp.error(
                    f"{node.id!r} is a dataflow variable: it is bound inside a dataflow block "
                    f"but not listed in its {mp.R}.output(...), so it is not visible after the "
                    f"block; add it to {mp.R}.output (see phasec-check --explain WF003)", node)
            raise mp.error(f"name {node.id!r} is not defined", node)
        if isinstance(node, ast.Attribute):
            name = _dotted(node)
            if name is not None and len(name) == 2 and name[0] in mp.class_names:
                return mp.global_var(name[1], node)
            if name is not None and name[0] == mp.R:
                raise mp.error(f"{mp.src(node)} is not a value (did you mean to call it?)", node)
            raise mp.error(f"unsupported expression {mp.src(node)!r}", node)
        if isinstance(node, ast.Tuple):
            fields = []
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    raise mp.error("*args are not supported in a tuple", e)
                fields.append(self._arg(e))
            return rx.Tuple(fields, span=mp.span(node))
        if isinstance(node, ast.Subscript):
            if isinstance(node.value, ast.Name) and node.value.id == "metadata":
                raise mp.error("metadata[...] constants are not supported; write the value "
                               f"inline with {mp.R}.const([...], dtype)", node)
            index = mp.number(node.slice)
            if not isinstance(index, int) or isinstance(index, bool) or index < 0:
                raise mp.error(f"a tuple index must be a non-negative integer literal, got "
                               f"{mp.src(node.slice)!r}", node.slice)
            tup = self._arg(node.value)
            return rx.TupleGetItem(tup, index, span=mp.span(node))
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Constant) or mp.number(node) is not None:
            raise mp.error(f"a Python literal ({mp.src(node)}) is not a Relax value; use "
                           f"{mp.R}.const(...), {mp.R}.prim_value(...) or {mp.R}.str(...)", node)
        if isinstance(node, ast.BinOp):
            spelled = _PY_OP_SPELLING.get(type(node.op), "?")
            hint = _RELAX_OP_FOR.get(type(node.op))
            hint_text = f"; use {hint.replace('R.', mp.R + '.')}(...)" if hint else ""
            raise mp.error(f"operator {spelled!r} is not supported on Relax values{hint_text}", node)
        if isinstance(node, ast.Lambda):
            raise mp.error("lambda is not supported; define a nested @R.function", node)
        raise mp.error(f"unsupported expression {mp.src(node)!r} in R.function", node)

    def _call(self, node: ast.Call) -> rx.Expr:
        mp = self.mp
        name = _dotted(node.func)
        if name is not None and len(name) >= 2 and name[0] == mp.R:
            return self._relax_call(".".join(name[1:]), node)
        if name is not None and len(name) >= 2 and name[0] == mp.T:
            raise mp.error(f"{mp.src(node.func)} is a TIR function; in R.function wrap scalars "
                           f"with {mp.R}.prim_value(...)", node)
        if name is not None and len(name) == 2 and name[0] in mp.class_names:
            callee: rx.Expr = mp.global_var(name[1], node.func)
        elif name is not None and len(name) == 1:
            found = self._lookup(name[0])
            if found is None:
                raise mp.error(f"name {name[0]!r} is not defined", node.func)
            callee = found
        else:
            raise mp.error(f"unsupported call {mp.src(node.func)!r}; expected {mp.R}.<operator>, "
                           f"cls.<function> or a local function", node.func)
        if node.keywords:
            raise mp.error("calls of functions take positional arguments only",
                           node.keywords[0].value)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise mp.error("*args are not supported", a)
            args.append(self._arg(a))
        return self._with_sinfo(rx.Call(callee, args, span=mp.span(node)))

    def _with_sinfo(self, call: rx.Call) -> rx.Call:
        sinfo = self.mp.infer(call)
        if sinfo is None:
            return call
        return rx.Call(call.op, call.args, call.attrs, call.sinfo_args, struct_info=sinfo,
                       span=call.span)

    def _relax_call(self, name: str, node: ast.Call) -> rx.Expr:
        mp = self.mp
        handler = _RELAX_CALLS.get(name)
        if handler is not None:
            return getattr(self, handler)(node)
        if name in _RELAX_STATEMENT_ONLY:
            raise mp.error(f"{mp.R}.{name} {_RELAX_STATEMENT_ONLY[name]}", node)
        if name in _SINFO_KINDS:
            raise mp.error(f"{mp.R}.{name} is a struct info annotation, not a value", node)
        opdef = find_op("relax." + name)
        if opdef is None:
            hint = mp.op_suggestion("R." + name).replace("R.", mp.R + ".")
            raise mp.error(f"unknown operator {mp.R}.{name}{hint}", node.func)
        return self._op_call(opdef, node)

    def _op_call(self, opdef: OpDef, node: ast.Call) -> rx.Expr:
        """A registered operator: operands by ``OpDef.args``, attributes by ``OpDef.attrs``."""
        mp = self.mp
        what = f"{mp.R}.{opdef.name.removeprefix('relax.')}"
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise mp.error(f"{what}: *args are not supported", a)
        n_fixed = len(opdef.args) - (1 if opdef.variadic else 0)
        attr_names = list(opdef.attrs)
        operand_nodes: list[ast.AST | None] = list(node.args[:n_fixed])
        operand_nodes += [None] * (n_fixed - len(operand_nodes))
        attr_nodes: dict[str, ast.AST] = {}
        rest = node.args[n_fixed:]
        if opdef.variadic:
            operand_nodes += rest
        else:
            if len(rest) > len(attr_names):
                raise mp.error(
                    f"{what} takes {len(opdef.args)} operand(s) ({', '.join(opdef.args) or 'none'})"
                    + (f" and {len(attr_names)} attribute(s) ({', '.join(attr_names)})"
                       if attr_names else "")
                    + f", got {len(node.args)} positional argument(s)", node)
            attr_nodes.update(zip(attr_names, rest))
        sinfo_node: ast.AST | None = None
        for kw in node.keywords:
            if kw.arg is None:
                raise mp.error(f"{what}: **kwargs are not supported", kw.value)
            if kw.arg in opdef.args[:n_fixed]:
                i = opdef.args.index(kw.arg)
                if operand_nodes[i] is not None:
                    raise mp.error(f"{what}: operand {kw.arg!r} given twice", kw.value)
                operand_nodes[i] = kw.value
            elif kw.arg in opdef.attrs:
                if kw.arg in attr_nodes:
                    raise mp.error(f"{what}: attribute {kw.arg!r} given twice", kw.value)
                attr_nodes[kw.arg] = kw.value
            elif kw.arg in ("sinfo_args", "ty_args"):
                sinfo_node = kw.value
            else:
                expected = ", ".join(attr_names) or "none"
                raise mp.error(f"unknown keyword attribute {kw.arg!r} for {what} (its attributes: "
                               f"{expected})", kw.value)
        missing = [opdef.args[i] for i, n in enumerate(operand_nodes[:n_fixed]) if n is None]
        if missing:
            given = sum(n is not None for n in operand_nodes)
            raise mp.error(f"{what} expects {len(opdef.args)} operand(s) "
                           f"({', '.join(opdef.args)}), got {given}; missing {', '.join(missing)}",
                           node)
        attrs: dict[str, Any] = {}
        for key, default in opdef.attrs.items():
            if key in attr_nodes:
                attrs[key] = _to_tuple(mp.literal(attr_nodes[key]))
            elif default is REQUIRED:
                raise mp.error(f"{what} requires the attribute {key!r}", node)
            else:
                attrs[key] = _to_tuple(default)
        attrs = _normalize_attrs(opdef, attrs)
        operands = []
        for i, n in enumerate(operand_nodes):
            operands.append(self._operand(opdef, i, n))
        sinfo_args = self._sinfo_list(sinfo_node) if sinfo_node is not None else ()
        call = rx.Call(rx.Op(opdef.name, span=mp.span(node.func)), operands, attrs, sinfo_args,
                       span=mp.span(node))
        return self._with_sinfo(call)

    def _operand(self, opdef: OpDef, index: int, node: ast.AST) -> rx.Expr:
        """An operator operand. As for :func:`phasec.ir.op.call_op`, a Python
        tuple of dims for a shape operand is an R.shape and an integer for a
        scalar operand (``offset``) an R.prim_value."""
        name = opdef.args[min(index, len(opdef.args) - 1)]
        shape_operands, prim_operands = _operand_kinds()
        if name in prim_operands:
            number = self.mp.number(node)
            if isinstance(number, int) and not isinstance(number, bool):
                return rx.PrimValue(tir.IntImm(number, "int64", span=self.mp.span(node)),
                                    span=self.mp.span(node))
        if name in shape_operands and isinstance(node, (ast.Tuple, ast.List)) \
                and all(self._looks_like_dim(e) for e in node.elts):
            return rx.ShapeExpr(self.mp.dims(self.prim, node.elts, f"shape operand {name!r}",
                                             allow_negative=True), span=self.mp.span(node))
        return self._arg(node)

    def _looks_like_dim(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return self._lookup(node.id) is None and node.id in self.sig.syms
        return not isinstance(node, (ast.Tuple, ast.List, ast.Subscript)) and not (
            isinstance(node, ast.Call) and _dotted(node.func) is not None
            and _dotted(node.func)[0] != self.mp.T)

    def _sinfo_list(self, node: ast.AST) -> tuple[StructInfo, ...]:
        """``sinfo_args=R.Tensor(...)`` or ``sinfo_args=[A, B]``."""
        if isinstance(node, (ast.List, ast.Tuple)):
            return tuple(self.sinfo_parser.parse(e) for e in node.elts)
        return (self.sinfo_parser.parse(node),)

    def _out_sinfo(self, node: ast.AST) -> StructInfo:
        """``out_sinfo=R.Tensor(...)``; a list means a tuple of outputs."""
        if isinstance(node, (ast.List, ast.Tuple)):
            return TupleStructInfo([self.sinfo_parser.parse(e) for e in node.elts],
                                   span=self.mp.span(node))
        return self.sinfo_parser.parse(node)

    def _args_tuple(self, node: ast.AST) -> rx.Tuple:
        """The argument tuple of call_tir & co: ``(a, b)``; a single value is wrapped."""
        if isinstance(node, (ast.Tuple, ast.List)):
            fields = [self._arg(e) for e in node.elts]
            return rx.Tuple(fields, span=self.mp.span(node))
        value = self._arg(node)
        if isinstance(value, rx.Tuple):
            return value
        return rx.Tuple([value], span=self.mp.span(node))

    def _extern(self, node: ast.AST, what: str) -> rx.ExternFunc:
        name = self.mp.str_arg(node, f"{what}: the function name")
        return rx.ExternFunc(name, span=self.mp.span(node))

    def _builtin(self, op_name: str, node: ast.Call, args: list[rx.Expr],
                 sinfo_args: Sequence[StructInfo] = (), attrs: dict[str, Any] | None = None) -> rx.Expr:
        call = rx.Call(rx.Op(op_name, span=self.mp.span(node.func)), args, attrs or {},
                       tuple(sinfo_args), span=self.mp.span(node))
        return self._with_sinfo(call)

    # -- the dialect calls (table _RELAX_CALLS) ----------------------------------
    def _call_const(self, node: ast.Call) -> rx.Expr:
        mp = self.mp
        a = mp.bind_args(node, f"{mp.R}.const", ("value", "dtype"), 1)
        value = self._const_value(a["value"])
        dtype = None
        if "dtype" in a and not _is_none(a["dtype"]):
            dtype = mp.dtype_arg(a["dtype"], f"{mp.R}.const dtype")
        leaves = list(_flatten(value))
        if dtype is None:
            if leaves and all(isinstance(v, bool) for v in leaves):
                dtype = "bool"
            elif leaves and all(isinstance(v, int) for v in leaves):
                dtype = "int32"
            else:
                dtype = "float32"
        if not tir.is_float(dtype):
            for v in leaves:
                if isinstance(v, float):
                    raise mp.error(f"{mp.R}.const: {v!r} is not a valid {dtype} value", a["value"])
        try:
            with np.errstate(all="raise"):
                data = np.array(value, dtype=dtype)
        except (ValueError, TypeError, OverflowError, FloatingPointError) as exc:
            raise mp.error(f"{mp.R}.const: cannot make a {dtype} tensor of this value ({exc})",
                           a["value"]) from None
        if tir.is_int(dtype):
            info = np.iinfo(dtype)
            bad = [v for v in leaves if not info.min <= v <= info.max]
            if bad:
                raise mp.error(f"{mp.R}.const: {bad[0]} does not fit in {dtype}", a["value"])
        return rx.Constant(data, span=mp.span(node))

    def _const_value(self, node: ast.AST) -> Any:
        """Nested lists of numbers (tensor constants), or one number."""
        mp = self.mp
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self._const_value(e) for e in node.elts]
        number = mp.number(node)
        if number is None:
            raise mp.error(f"{mp.R}.const expects a number or nested lists of numbers, got "
                           f"{mp.src(node)!r}", node)
        return number

    def _call_shape(self, node: ast.Call) -> rx.Expr:
        mp = self.mp
        a = mp.bind_args(node, f"{mp.R}.shape", ("values",), 1)
        v = a["values"]
        if not isinstance(v, (ast.List, ast.Tuple)):
            raise mp.error(f"{mp.R}.shape expects a list of dimensions, e.g. {mp.R}.shape([n, 4])", v)
        return rx.ShapeExpr(mp.dims(self.prim, v.elts, f"{mp.R}.shape", allow_negative=True),
                            span=mp.span(node))

    def _call_prim_value(self, node: ast.Call) -> rx.Expr:
        mp = self.mp
        a = mp.bind_args(node, f"{mp.R}.prim_value", ("value",), 1)
        return rx.PrimValue(self.prim.parse(a["value"]), span=mp.span(node))

    def _call_str(self, node: ast.Call) -> rx.Expr:
        mp = self.mp
        a = mp.bind_args(node, f"{mp.R}.str", ("value",), 1)
        return rx.StringImm(mp.str_arg(a["value"], f"{mp.R}.str"), span=mp.span(node))

    def _call_dtype(self, node: ast.Call) -> rx.Expr:
        mp = self.mp
        a = mp.bind_args(node, f"{mp.R}.dtype", ("value",), 1)
        return rx.DataTypeImm(mp.dtype_arg(a["value"], f"{mp.R}.dtype"), span=mp.span(node))

    def _call_tir(self, node: ast.Call) -> rx.Expr:
        mp = self.mp
        a = mp.bind_args(node, f"{mp.R}.call_tir",
                         ("gvar", "args", "out_sinfo", "tir_vars", "sinfo_args"), 2,
                         {**_OUT_SINFO, **_SINFO_ARGS})
        func = self._arg(a["gvar"])
        args = [func, self._args_tuple(a["args"])]
        if "tir_vars" in a and not _is_none(a["tir_vars"]):
            args.append(self._tir_vars(a["tir_vars"]))
        return self._builtin("relax.call_tir", node, args, self._dps_sinfo(a, f"{mp.R}.call_tir"))

    def _dps_sinfo(self, a: dict[str, ast.expr], what: str) -> tuple[StructInfo, ...]:
        """``out_sinfo=`` (the usual spelling) or raw ``sinfo_args=``."""
        if "out_sinfo" in a and "sinfo_args" in a:
            raise self.mp.error(f"{what}: give out_sinfo= or sinfo_args=, not both", a["sinfo_args"])
        if "out_sinfo" in a:
            return (self._out_sinfo(a["out_sinfo"]),)
        if "sinfo_args" in a:
            return self._sinfo_list(a["sinfo_args"])
        raise self.mp.error(f"{what} needs out_sinfo=<struct info of the result>", self.mp.where)

    def _tir_vars(self, node: ast.AST) -> rx.Expr:
        if isinstance(node, (ast.List, ast.Tuple)):
            return rx.ShapeExpr(self.mp.dims(self.prim, node.elts, "tir_vars", allow_negative=True),
                                span=self.mp.span(node))
        return self._arg(node)

    def _call_dps_packed(self, node: ast.Call) -> rx.Expr:
        mp = self.mp
        what = f"{mp.R}.call_dps_packed"
        a = mp.bind_args(node, what, ("func", "args", "out_sinfo", "sinfo_args"), 2,
                         {**_OUT_SINFO, **_SINFO_ARGS})
        func = self._callee_arg(a["func"])
        return self._builtin("relax.call_dps_packed", node, [func, self._args_tuple(a["args"])],
                             self._dps_sinfo(a, what))

    def _callee_arg(self, node: ast.AST) -> rx.Expr:
        """A packed function name (string literal -> ExternFunc) or any value."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return rx.ExternFunc(node.value, span=self.mp.span(node))
        return self._arg(node)

    def _call_extern_func(self, node: ast.Call) -> rx.Expr:
        mp = self.mp
        a = mp.bind_args(node, f"{mp.R}.ExternFunc", ("global_symbol",), 1)
        return self._extern(a["global_symbol"], f"{mp.R}.ExternFunc")

    def _packed_parts(self, node: ast.Call, what: str, callee_is_name: bool
                      ) -> tuple[rx.Expr, list[rx.Expr], tuple[StructInfo, ...], dict]:
        mp = self.mp
        if not node.args:
            raise mp.error(f"{what} needs the packed function's name as first argument", node)
        func = self._extern(node.args[0], what) if callee_is_name else self._callee_arg(node.args[0])
        args = []
        for a in node.args[1:]:
            if isinstance(a, ast.Starred):
                raise mp.error(f"{what}: *args are not supported", a)
            args.append(self._arg(a))
        sinfo_args: tuple[StructInfo, ...] = ()
        attrs: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise mp.error(f"{what}: **kwargs are not supported", kw.value)
            if _SINFO_ARGS.get(kw.arg, kw.arg) == "sinfo_args":
                sinfo_args = self._sinfo_list(kw.value)
            else:  # extra keywords are call attributes (as in TVM)
                attrs[kw.arg] = _to_tuple(mp.literal(kw.value))
        return func, args, sinfo_args, attrs

    def _call_packed(self, node: ast.Call) -> rx.Expr:
        func, args, sinfo_args, attrs = self._packed_parts(node, f"{self.mp.R}.call_packed", True)
        call = rx.Call(func, args, attrs, sinfo_args, span=self.mp.span(node))
        return self._with_sinfo(call)

    def _call_pure_packed(self, node: ast.Call) -> rx.Expr:
        func, args, sinfo_args, attrs = self._packed_parts(node, f"{self.mp.R}.call_pure_packed", False)
        return self._builtin("relax.call_pure_packed", node, [func, *args], sinfo_args, attrs)

    def _call_make_closure(self, node: ast.Call) -> rx.Expr:
        mp = self.mp
        a = mp.bind_args(node, f"{mp.R}.make_closure", ("func", "args"), 2)
        func = self._arg(a["func"])
        return self._builtin("relax.make_closure", node, [func, self._args_tuple(a["args"])])

    def _invoke(self, node: ast.Call, op_name: str) -> rx.Expr:
        mp = self.mp
        what = f"{mp.R}.{op_name.removeprefix('relax.')}"
        a = mp.bind_args(node, what, ("closure", "args", "sinfo_args"), 2, _SINFO_ARGS)
        closure = self._arg(a["closure"])
        args = self._args_tuple(a["args"])
        sinfo_args = self._sinfo_list(a["sinfo_args"]) if "sinfo_args" in a else ()
        return self._builtin(op_name, node, [closure, args], sinfo_args)

    def _call_invoke_closure(self, node: ast.Call) -> rx.Expr:
        return self._invoke(node, "relax.invoke_closure")

    def _call_invoke_pure_closure(self, node: ast.Call) -> rx.Expr:
        return self._invoke(node, "relax.invoke_pure_closure")


def _operand_kinds() -> tuple[frozenset[str], frozenset[str]]:
    """Operand names taking a tuple of dims (``R.reshape(x, (2, n))``) and
    operand names taking a Python integer (``offset``), from the registry."""
    global _OPERAND_KINDS
    if _OPERAND_KINDS is None:
        from ..ir import op

        _OPERAND_KINDS = (frozenset(getattr(op, "SHAPE_OPERANDS", ("shape",))),
                          frozenset(getattr(op, "PRIM_OPERANDS", ())))
    return _OPERAND_KINDS


_OPERAND_KINDS: tuple[frozenset[str], frozenset[str]] | None = None


def _flatten(value: Any):
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(reversed(v))
        else:
            yield v


def _normalize_attrs(opdef: OpDef, attrs: dict[str, Any]) -> dict[str, Any]:
    """The registry's canonical attribute values; a value the registry rejects
    is kept as written (a semantic problem the verifier reports)."""
    try:
        from ..ir.op import normalize_attrs
    except ImportError:  # pragma: no cover - registry without normalizers
        return attrs
    try:
        return normalize_attrs(opdef, attrs)
    except Exception:  # noqa: BLE001
        return attrs


# ---------------------------------------------------------------------------
# TIR prim_funcs
# ---------------------------------------------------------------------------

class _Handle:
    """A ``T.handle`` parameter waiting for its ``T.match_buffer``."""

    __slots__ = ("name", "index", "node")

    def __init__(self, name: str, index: int, node: ast.AST) -> None:
        self.name = name
        self.index = index
        self.node = node


class _Wrap:
    """A statement that scopes over the rest of its block (let, alloc_buffer)."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[tir.Stmt], tir.Stmt]) -> None:
        self.make = make


class _PrimFuncParser:
    """Parses one ``@T.prim_func``."""

    def __init__(self, mp: _ModuleParser, fdef: ast.FunctionDef) -> None:
        self.mp = mp
        self.fdef = fdef
        self.scopes: list[dict[str, Any]] = [{}]
        self.params: list[Any] = []
        self.loop_extents: dict[int, tir.PrimExpr] = {}  # id(loop var) -> extent
        self.declared: set[int] = set()  # ids of `n = T.int64()` statements already handled
        self.prim = _PrimExprParser(mp, "int32", self._resolve)
        self.attrs: dict[str, Any] = {}
        self.attrs_seen = False

    def _lookup(self, name: str) -> Any:
        for scope in reversed(self.scopes):
            value = scope.get(name)
            if value is not None:
                return value
        return None

    def _resolve(self, name: str, node: ast.AST, declare: bool = False) -> Any:
        mp = self.mp
        if declare:  # "n" in a buffer shape: a symbolic dim
            var = self.scopes[0].get(name)
            if var is None:
                var = self.scopes[0][name] = tir.Var(name, "int64", span=mp.span(node))
            if not isinstance(var, tir.Var):
                raise mp.error(f"{name!r} is not a scalar variable", node)
            return var
        value = self._lookup(name)
        if value is None:
            raise mp.error(f"name {name!r} is not defined", node)
        if isinstance(value, _Handle):
            raise mp.error(f"handle {name!r} must be bound with {mp.T}.match_buffer before use",
                           node)
        return value

    def _bind(self, name: str, value: Any) -> None:
        self.scopes[-1][name] = value

    def _sym_decl(self, stmt: ast.stmt) -> tuple[str, str] | None:
        """(name, dtype) if ``stmt`` is ``n = T.int64()``."""
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Call)):
            return None
        name = _dotted(stmt.value.func)
        if (name is not None and len(name) == 2 and name[0] == self.mp.T and name[1] in tir.DTYPES
                and not stmt.value.args and not stmt.value.keywords):
            return stmt.targets[0].id, name[1]
        return None

    def parse(self) -> tir.PrimFunc:
        mp, fdef = self.mp, self.fdef
        flags = mp.decorator_flags(fdef, ("private",))
        mp.check_plain_args(fdef)
        body = list(fdef.body)
        if body and _is_docstring(body[0]):
            body = body[1:]
        # Symbolic variables first, so parameter annotations may use them.
        for stmt in body:
            decl = self._sym_decl(stmt)
            if decl is not None:
                self.scopes[0][decl[0]] = tir.Var(decl[0], decl[1], span=mp.span(stmt.targets[0]))
                self.declared.add(id(stmt))
        for i, a in enumerate(fdef.args.args):
            mp.where = a
            self.params.append(self._param(a, i))
            self._bind(a.arg, self.params[-1])
        if fdef.returns is not None and not _is_none(fdef.returns):
            raise mp.error(f"a {mp.T}.prim_func returns nothing; remove the return annotation",
                           fdef.returns)
        stmt = self._stmts(body, top=True)
        for p in self.params:
            if isinstance(p, _Handle):
                raise mp.error(f"handle parameter {p.name!r} has no {mp.T}.match_buffer", p.node)
        attrs = {} if flags.get("private", False) else {"global_symbol": fdef.name}
        attrs.update(self.attrs)
        return tir.PrimFunc(self.params, stmt, attrs, span=mp.span(fdef))

    def _param(self, a: ast.arg, index: int) -> Any:
        mp = self.mp
        ann = a.annotation
        span = mp.span(a)
        if ann is None:
            raise mp.error(f"parameter {a.arg!r} needs an annotation ({mp.T}.Buffer(...), "
                           f"{mp.T}.handle or a scalar type such as {mp.T}.int64)", a)
        name = _dotted(ann)
        if name == (mp.T, "handle"):
            return _Handle(a.arg, index, a)
        if name is not None and len(name) == 2 and name[0] == mp.T and name[1] in tir.DTYPES:
            return tir.Var(a.arg, name[1], span=span)
        if isinstance(ann, ast.Call) and _dotted(ann.func) == (mp.T, "Buffer"):
            shape, dtype = self._buffer_args(ann, f"{mp.T}.Buffer")
            return tir.Buffer(a.arg, shape, dtype, span=span)
        raise mp.error(f"unsupported parameter annotation {mp.src(ann)!r}; expected "
                       f"{mp.T}.Buffer(shape, dtype), {mp.T}.handle or {mp.T}.<dtype>", ann)

    def _buffer_args(self, call: ast.Call, what: str,
                     params: Sequence[str] = ("shape", "dtype")) -> tuple[list, str]:
        mp = self.mp
        a = mp.bind_args(call, what, params, params.index("shape") + 1)
        shape_node = a["shape"]
        elts = shape_node.elts if isinstance(shape_node, (ast.Tuple, ast.List)) else [shape_node]
        shape = mp.dims(self.prim, elts, f"{what} shape", dtype=None)
        dtype = mp.dtype_arg(a["dtype"], f"{what} dtype") if "dtype" in a else "float32"
        return shape, dtype

    # -- statements ----------------------------------------------------------
    def _stmts(self, stmts: Sequence[ast.stmt], top: bool = False) -> tir.Stmt:
        """A statement list; lets and allocations scope over the rest of it."""
        self.scopes.append({})
        try:
            pending: list[tuple[list[tir.Stmt], _Wrap]] = []
            current: list[tir.Stmt] = []
            for stmt in stmts:
                result = self._stmt(stmt, top)
                if result is None:
                    continue
                if isinstance(result, _Wrap):
                    pending.append((current, result))
                    current = []
                else:
                    current.append(result)
        finally:
            self.scopes.pop()
        body = _seq(current)
        for before, wrap in reversed(pending):
            body = _seq([*before, wrap.make(body)])
        return body

    def _stmt(self, stmt: ast.stmt, top: bool) -> tir.Stmt | _Wrap | None:
        mp = self.mp
        mp.where = stmt
        if isinstance(stmt, ast.For):
            return self._for(stmt)
        if isinstance(stmt, ast.Assign):
            return self._assign(stmt, top)
        if isinstance(stmt, ast.AnnAssign):
            return self._ann_assign(stmt)
        if isinstance(stmt, ast.AugAssign):
            return self._aug_assign(stmt)
        if isinstance(stmt, ast.If):
            cond = self.prim.parse(stmt.test)
            then = self._stmts(stmt.body)
            other = self._stmts(stmt.orelse) if stmt.orelse else None
            return tir.IfThenElse(cond, then, other, span=mp.span(stmt))
        if isinstance(stmt, ast.With):
            return self._with(stmt)
        if isinstance(stmt, ast.Expr):
            return self._expr_stmt(stmt, top)
        if isinstance(stmt, ast.Pass):
            return None
        raise mp.error(f"unsupported statement '{_stmt_kind(stmt)}' in {mp.T}.prim_func", stmt)

    def _expr_stmt(self, stmt: ast.Expr, top: bool) -> tir.Stmt | None:
        mp = self.mp
        value = stmt.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return None
        name = _dotted(value.func) if isinstance(value, ast.Call) else None
        if name == (mp.T, "evaluate"):
            a = mp.bind_args(value, f"{mp.T}.evaluate", ("value",), 1)
            return tir.Evaluate(self.prim.parse(a["value"]), span=mp.span(stmt))
        if name == (mp.T, "func_attr"):
            if not top or self.attrs_seen or len(value.args) != 1 or value.keywords:
                raise mp.error(f"{mp.T}.func_attr expects one dictionary literal, once, at the "
                               f"top of the function body", stmt)
            self.attrs_seen = True
            self.attrs = mp.attr_dict(value.args[0])
            return None
        if name in ((mp.T, "reads"), (mp.T, "writes")):
            raise mp.error(f"{mp.src(value.func)} is only allowed directly inside a "
                           f"{mp.T}.block", stmt)
        raise mp.error(f"unsupported expression statement {mp.src(value)!r} in {mp.T}.prim_func "
                       f"(use {mp.T}.evaluate(...) to evaluate a scalar)", stmt)

    def _assign(self, stmt: ast.Assign, top: bool) -> tir.Stmt | _Wrap | None:
        mp = self.mp
        if len(stmt.targets) != 1:
            raise mp.error("chained assignment is not supported", stmt)
        target, value = stmt.targets[0], stmt.value
        if isinstance(target, ast.Subscript):
            return self._store(target, value, stmt)
        if isinstance(target, ast.Tuple):
            raise mp.error(f"tuple assignment is only supported for {mp.T}.axis.remap inside a "
                           f"{mp.T}.block", stmt)
        if not isinstance(target, ast.Name):
            raise mp.error(f"unsupported assignment target {mp.src(target)!r}", target)
        name = _dotted(value.func) if isinstance(value, ast.Call) else None
        decl = self._sym_decl(stmt)
        if decl is not None:
            if id(stmt) not in self.declared:
                self._bind(decl[0], tir.Var(decl[0], decl[1], span=mp.span(target)))
            return None
        if name in ((mp.T, "alloc_buffer"), (mp.T, "decl_buffer")):
            # Both scope over the rest of the statement list (TVM prints
            # T.decl_buffer so when nothing follows the allocation's scope).
            shape, dtype = self._buffer_args(value, f"{mp.T}.{name[1]}")
            buf = tir.Buffer(target.id, shape, dtype, span=mp.span(target))
            self._bind(target.id, buf)
            span = mp.span(stmt)
            return _Wrap(lambda body: tir.Allocate(buf, body, span=span))
        if name == (mp.T, "match_buffer"):
            if not top:
                raise mp.error(f"{mp.T}.match_buffer is only allowed at the top of the function "
                               f"body", stmt)
            self._match_buffer(target, value)
            return None
        if name is not None and len(name) >= 2 and name[:2] == (mp.T, "axis"):
            raise mp.error(f"{mp.src(value.func)} is only allowed directly inside a {mp.T}.block",
                           stmt)
        expr = self.prim.parse(value)
        var = tir.Var(target.id, expr.dtype, span=mp.span(target))
        self._bind(target.id, var)
        span = mp.span(stmt)
        return _Wrap(lambda body: tir.LetStmt(var, expr, body, span=span))

    def _ann_assign(self, stmt: ast.AnnAssign) -> _Wrap:
        mp = self.mp
        if not isinstance(stmt.target, ast.Name) or stmt.value is None:
            raise mp.error(f"expected `name: {mp.T}.<dtype> = value`", stmt)
        ann = _dotted(stmt.annotation)
        if ann is None or len(ann) != 2 or ann[0] != mp.T or ann[1] not in tir.DTYPES:
            raise mp.error(f"expected a scalar type annotation such as {mp.T}.float32, got "
                           f"{mp.src(stmt.annotation)!r}", stmt.annotation)
        expr = self.prim.parse(stmt.value, ann[1])
        var = tir.Var(stmt.target.id, ann[1], span=mp.span(stmt.target))
        self._bind(stmt.target.id, var)
        span = mp.span(stmt)
        return _Wrap(lambda body: tir.LetStmt(var, expr, body, span=span))

    def _store(self, target: ast.Subscript, value: ast.AST, stmt: ast.stmt) -> tir.Stmt:
        mp = self.mp
        load = self.prim._load(target)
        expr = self.prim.parse(value, load.buffer.dtype)
        return tir.BufferStore(load.buffer, expr, load.indices, span=mp.span(stmt))

    def _aug_assign(self, stmt: ast.AugAssign) -> tir.Stmt:
        mp = self.mp
        op = _BINOPS.get(type(stmt.op))
        if not isinstance(stmt.target, ast.Subscript) or op is None:
            raise mp.error("augmented assignment is only supported on buffer elements "
                           "(A[i] += x)", stmt)
        load = self.prim._load(stmt.target)
        expr = self.prim.parse(stmt.value, load.buffer.dtype)
        new = tir.BinaryOp(op, load, expr, span=mp.span(stmt))
        return tir.BufferStore(load.buffer, new, load.indices, span=mp.span(stmt))

    def _match_buffer(self, target: ast.Name, call: ast.Call) -> None:
        mp = self.mp
        what = f"{mp.T}.match_buffer"
        if not call.args or not isinstance(call.args[0], ast.Name):
            raise mp.error(f"{what} expects a handle parameter as first argument", call)
        handle = self.scopes[0].get(call.args[0].id)
        if not isinstance(handle, _Handle):
            raise mp.error(f"{what}: {call.args[0].id!r} is not an unmatched {mp.T}.handle "
                           f"parameter", call.args[0])
        rest = ast.Call(func=call.func, args=call.args[1:], keywords=call.keywords)
        ast.copy_location(rest, call)
        shape, dtype = self._buffer_args(rest, what)
        buf = tir.Buffer(target.id, shape, dtype, span=mp.span(target))
        self.params[handle.index] = buf
        del self.scopes[0][handle.name]
        self.scopes[0][target.id] = buf

    def _for(self, stmt: ast.For) -> tir.Stmt:
        mp = self.mp
        if stmt.orelse:
            raise mp.error("for-else is not supported", stmt.orelse[0])
        it = stmt.iter
        name = _dotted(it.func) if isinstance(it, ast.Call) else None
        kinds = ", ".join(f"{mp.T}.{k}" for k in _LOOP_KINDS)
        if name == ("range",):
            kind = "serial"
        elif name is not None and len(name) == 2 and name[0] == mp.T and name[1] in (*_LOOP_KINDS, "grid"):
            kind = name[1]
        else:
            raise mp.error(f"unsupported loop {mp.src(it)!r}; expected range(...), {kinds} or "
                           f"{mp.T}.grid(...)", it)
        if it.keywords:
            raise mp.error(f"{mp.src(it.func)} takes positional arguments only",
                           it.keywords[0].value)
        span = mp.span(stmt)
        if kind == "grid":
            targets = stmt.target.elts if isinstance(stmt.target, ast.Tuple) else [stmt.target]
            if not it.args or len(targets) != len(it.args):
                raise mp.error(f"{mp.T}.grid has {len(it.args)} extent(s) but the loop has "
                               f"{len(targets)} variable(s)", stmt.target)
            bounds = [(tir.IntImm(0, e.dtype, span=e.span), e)
                      for e in (self.prim.parse(a) for a in it.args)]
        else:
            targets = [stmt.target]
            if len(it.args) == 1:
                extent = self.prim.parse(it.args[0])
                bounds = [(tir.IntImm(0, extent.dtype, span=extent.span), extent)]
            elif len(it.args) == 2:
                start, stop = self.prim.parse_pair(it.args[0], it.args[1])
                bounds = [(start, _extent(start, stop))]
            else:
                raise mp.error(f"{mp.src(it.func)} takes 1 or 2 arguments (extent, or start and "
                               f"stop), got {len(it.args)}", it)
        for (start, extent), arg in zip(bounds, it.args if kind == "grid" or len(it.args) == 1
                                         else it.args[1:]):
            for bound in (start, extent):
                if not tir.is_int(bound.dtype):
                    raise mp.error(f"loop bounds must be integers, got a {bound.dtype} value "
                                   f"in {mp.src(it)!r}", arg)
        loop_vars = []
        self.scopes.append({})
        try:
            for t, (_, extent) in zip(targets, bounds):
                if not isinstance(t, ast.Name):
                    raise mp.error(f"a loop variable must be a name, got {mp.src(t)!r}", t)
                var = tir.Var(t.id, extent.dtype, span=mp.span(t))
                self.loop_extents[id(var)] = extent
                self._bind(t.id, var)
                loop_vars.append(var)
            body = self._stmts(stmt.body)
        finally:
            self.scopes.pop()
        loop_kind = "serial" if kind == "grid" else kind
        for var, (start, extent) in zip(reversed(loop_vars), reversed(bounds)):
            body = tir.For(var, start, extent, loop_kind, body, span=span)
        return body

    def _with(self, stmt: ast.With) -> tir.Stmt:
        mp = self.mp
        item = stmt.items[0]
        ctx = item.context_expr
        name = _dotted(ctx.func) if isinstance(ctx, ast.Call) else None
        if len(stmt.items) == 1 and name in ((mp.T, "decl_buffer"), (mp.T, "LetStmt")):
            return self._scoped(stmt, name[1])
        if len(stmt.items) != 1 or item.optional_vars is not None or name not in (
                (mp.T, "block"), (mp.T, "sblock")):
            if name == (mp.T, "init"):
                raise mp.error(f"`with {mp.T}.init()` is only allowed directly inside a "
                               f"{mp.T}.block", stmt)
            raise mp.error(f"unsupported statement 'with {mp.src(ctx)}' in {mp.T}.prim_func; "
                           f"expected `with {mp.T}.block(\"name\"):`, `with {mp.T}.decl_buffer("
                           f"shape, dtype) as name:` or `with {mp.T}.LetStmt(value) as name:`",
                           stmt)
        a = mp.bind_args(ctx, f"{mp.T}.{name[1]}", ("name",), 0)
        block_name = mp.str_arg(a["name"], f"{mp.T}.block name") if "name" in a else ""
        return self._block(stmt, block_name)

    def _scoped(self, stmt: ast.With, kind: str) -> tir.Stmt:
        """``with T.decl_buffer(shape, dtype) as buf:`` (an allocation) or
        ``with T.LetStmt(value[, T.<dtype>]) as v:`` (a let) whose scope is the
        ``with`` body only, unlike ``buf = T.alloc_buffer(...)`` / ``v = value``,
        which scope over the rest of the statement list."""
        mp = self.mp
        item = stmt.items[0]
        call, target = item.context_expr, item.optional_vars
        what = f"{mp.T}.{kind}"
        if not isinstance(target, ast.Name):
            raise mp.error(f"`with {what}(...)` needs `as name` with a plain name", stmt)
        expr: tir.PrimExpr | None = None
        if kind == "decl_buffer":
            shape, dtype = self._buffer_args(call, what)
            value: Any = tir.Buffer(target.id, shape, dtype, span=mp.span(target))
        else:
            a = mp.bind_args(call, what, ("value", "type_annotation"), 1)
            dtype = None
            if "type_annotation" in a:
                ann = _dotted(a["type_annotation"])
                if ann is None or len(ann) != 2 or ann[0] != mp.T or ann[1] not in tir.DTYPES:
                    raise mp.error(f"{what}: expected a scalar type such as {mp.T}.int64, got "
                                   f"{mp.src(a['type_annotation'])!r}", a["type_annotation"])
                dtype = ann[1]
            # With an annotation the value's literals take its dtype (as in
            # `v: T.int64 = value`); without, the variable takes the value's.
            expr = self.prim.parse(a["value"], dtype)
            value = tir.Var(target.id, dtype or expr.dtype, span=mp.span(target))
        self.scopes.append({})
        try:
            self._bind(target.id, value)
            body = self._stmts(stmt.body)
        finally:
            self.scopes.pop()
        span = mp.span(stmt)
        if expr is None:
            return tir.Allocate(value, body, span=span)
        return tir.LetStmt(value, expr, body, span=span)

    def _block(self, stmt: ast.With, block_name: str) -> tir.Stmt:
        mp = self.mp
        iter_vars: list[tir.IterVar] = []
        iter_values: list[tir.PrimExpr] = []
        reads: tuple | None = None
        writes: tuple | None = None
        init: tir.Stmt | None = None
        body_nodes: list[ast.stmt] = []
        self.scopes.append({})
        try:
            for s in stmt.body:
                mp.where = s
                call = s.value if isinstance(s, (ast.Assign, ast.Expr)) else None
                fname = _dotted(call.func) if isinstance(call, ast.Call) else None
                if isinstance(s, ast.Assign) and fname is not None and fname[:2] == (mp.T, "axis"):
                    self._axis(s, fname, iter_vars, iter_values)
                elif isinstance(s, ast.Expr) and fname in ((mp.T, "reads"), (mp.T, "writes")):
                    regions = self._regions(call)
                    if fname[1] == "reads":
                        if reads is not None:
                            raise mp.error(f"{mp.T}.reads given twice", s)
                        reads = regions
                    else:
                        if writes is not None:
                            raise mp.error(f"{mp.T}.writes given twice", s)
                        writes = regions
                elif (isinstance(s, ast.With) and len(s.items) == 1
                      and isinstance(s.items[0].context_expr, ast.Call)
                      and _dotted(s.items[0].context_expr.func) == (mp.T, "init")):
                    if init is not None:
                        raise mp.error(f"{mp.T}.init given twice", s)
                    init = self._stmts(s.body)
                else:
                    body_nodes.append(s)
            body = self._stmts(body_nodes)
        finally:
            self.scopes.pop()
        return tir.Block(block_name, iter_vars, iter_values, body, init, reads or (), writes or (),
                         span=mp.span(stmt))

    def _axis(self, s: ast.Assign, fname: tuple[str, ...], iter_vars: list, iter_values: list) -> None:
        mp = self.mp
        call = s.value
        target = s.targets[0]
        kind_name = ".".join(fname[1:])
        if len(fname) != 3 or fname[2] not in ("spatial", "reduce", "S", "R", "remap"):
            raise mp.error(f"unknown block axis {mp.src(call.func)}; expected {mp.T}.axis.spatial, "
                           f"{mp.T}.axis.reduce or {mp.T}.axis.remap", call.func)
        if fname[2] == "remap":
            a = mp.bind_args(call, f"{mp.T}.{kind_name}", ("kinds", "bindings"), 2)
            kinds = mp.str_arg(a["kinds"], f"{mp.T}.axis.remap kinds")
            values = a["bindings"]
            if not isinstance(values, (ast.List, ast.Tuple)):
                raise mp.error(f"{mp.T}.axis.remap expects a list of loop variables", values)
            targets = target.elts if isinstance(target, ast.Tuple) else [target]
            if not (len(kinds) == len(values.elts) == len(targets)):
                raise mp.error(f"{mp.T}.axis.remap: {len(kinds)} kind(s), {len(values.elts)} "
                               f"loop variable(s) and {len(targets)} target(s) must agree", s)
            for k, v_node, t in zip(kinds, values.elts, targets):
                if k not in "SR":
                    raise mp.error(f"{mp.T}.axis.remap: axis kind must be 'S' or 'R', not {k!r}",
                                   a["kinds"])
                value = self.prim.parse(v_node)
                extent = self.loop_extents.get(id(value))
                if extent is None:
                    raise mp.error(f"{mp.T}.axis.remap binds loop variables; {mp.src(v_node)!r} "
                                   f"is not one", v_node)
                self._add_axis(t, k, extent, value, iter_vars, iter_values)
            return
        a = mp.bind_args(call, f"{mp.T}.{kind_name}", ("dom", "binding"), 2)
        value = self.prim.parse(a["binding"])
        extent = mp.check_dim(self.prim.parse(a["dom"], value.dtype), a["dom"],
                              f"{mp.T}.{kind_name} domain")
        kind = "S" if fname[2] in ("spatial", "S") else "R"
        self._add_axis(target, kind, extent, value, iter_vars, iter_values)

    def _add_axis(self, target: ast.AST, kind: str, extent: tir.PrimExpr, value: tir.PrimExpr,
                  iter_vars: list, iter_values: list) -> None:
        mp = self.mp
        if not isinstance(target, ast.Name):
            raise mp.error(f"a block axis must be assigned to a name, got {mp.src(target)!r}", target)
        var = tir.Var(target.id, value.dtype, span=mp.span(target))
        iter_vars.append(tir.IterVar(var, extent, kind, span=mp.span(target)))
        iter_values.append(value)
        self._bind(target.id, var)

    def _regions(self, call: ast.Call) -> tuple[tir.BufferRegion, ...]:
        mp = self.mp
        if call.keywords:
            raise mp.error(f"{mp.src(call.func)} takes buffer regions as positional arguments",
                           call.keywords[0].value)
        elts = call.args
        if len(elts) == 1 and isinstance(elts[0], (ast.List, ast.Tuple)):
            elts = elts[0].elts
        regions = []
        for e in elts:
            node = e.value if isinstance(e, ast.Subscript) else e
            if not isinstance(node, ast.Name):
                raise mp.error(f"expected a buffer region such as A[i, 0:4], got {mp.src(e)!r}", e)
            buf = self._resolve(node.id, node)
            if not isinstance(buf, tir.Buffer):
                raise mp.error(f"{node.id!r} is not a buffer", node)
            if not isinstance(e, ast.Subscript):  # the whole buffer
                region = [(tir.IntImm(0, d.dtype), d) for d in buf.shape]
            else:
                idx = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
                region = [self._range(i, buf, d) for d, i in enumerate(idx)]
            regions.append(tir.BufferRegion(buf, tuple(region), span=mp.span(e)))
        return tuple(regions)

    def _range(self, node: ast.AST, buf: tir.Buffer, dim: int) -> tuple[tir.PrimExpr, tir.PrimExpr]:
        mp = self.mp
        if not isinstance(node, ast.Slice):
            index = self.prim.parse(node)
            return index, tir.IntImm(1, index.dtype)
        if node.step is not None:
            raise mp.error("strided regions are not supported", node.step)
        if node.upper is None and dim >= len(buf.shape):
            raise mp.error(f"buffer {buf.name!r} has only {len(buf.shape)} dimension(s)", node)
        if node.lower is None and node.upper is None:
            stop = buf.shape[dim]
            return tir.IntImm(0, stop.dtype), stop
        if node.lower is None:
            stop = self.prim.parse(node.upper)
            return tir.IntImm(0, stop.dtype), stop
        if node.upper is None:
            start = self.prim.parse(node.lower, buf.shape[dim].dtype)
            return start, _extent(start, buf.shape[dim])
        start, stop = self.prim.parse_pair(node.lower, node.upper)
        return start, _extent(start, stop)


def _seq(stmts: list[tir.Stmt]) -> tir.Stmt:
    if len(stmts) == 1:
        return stmts[0]
    span = None
    if stmts and stmts[0].span is not None and stmts[-1].span is not None:
        first, last = stmts[0].span, stmts[-1].span
        span = Span(first.file, first.line, first.col, last.end_line, last.end_col)
    return tir.SeqStmt(stmts, span=span)


"""The parser's driver: :func:`parse` and :class:`ModuleParser`, the state
every sub-parser shares.

:class:`ModuleParser` reads one file: the dialect aliases from its imports,
the ``@I.ir_module`` class, ``I.module_attrs``, every function's signature
first (so functions may call each other in any order), then the bodies,
handing each to the parser of its level (:mod:`.relax_level`,
:mod:`.tir_level`). The sub-parsers receive it and use its helpers (spans,
errors, literals, argument binding); they never import this module but for
type annotations.
"""

from __future__ import annotations

import ast
import difflib
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from phasec.errors import ParseError, counted
from phasec.ir import expr as rx
from phasec.ir import tir
from phasec.ir.module import IRModule, Target, VDevice, plain_target, target_problem
from phasec.ir.node import Span
from phasec.op import infer as inference  # looked up at each call: tests replace it
from phasec.op.infer import prim_func_sinfo
from phasec.op.registry import InferContext, list_ops
from phasec.ir.phase import Phase
from phasec.ir.struct_info import FuncStructInfo, StructInfo, TupleStructInfo
from phasec.script.checks import dim_problem
from phasec.script.parser.common import (
    _DEFAULT_ALIASES, _DIALECT_OF_MODULE, _FRESH_NAME_RE, _IGNORED_FLAGS, _SCRIPT_MODULES,
    _dotted, _is_docstring, _is_none, _stmt_kind, _to_tuple,
)
from phasec.script.parser.expressions import _PrimExprParser, _SinfoParser
from phasec.script.parser.global_infos import parse_global_infos, vdevice_value
from phasec.script.parser.meta import expand_meta_vars
from phasec.script.parser.relax_level import _RelaxFunctionParser
from phasec.script.parser.relax_calls import _RELAX_CALLS, _RELAX_STATEMENT_ONLY
from phasec.script.parser.tir_level import _PrimFuncParser

__all__ = ["parse", "parse_struct_info", "decode_source", "ModuleParser", "Signature"]


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


def parse(text: str | bytes, filename: str = "<string>", *,
          metadata: Mapping[str, Sequence[np.ndarray]] | None = None) -> IRModule:
    """Parse TVMScript text into an IRModule.

    ``text`` is a ``@I.ir_module`` class in the TVMScript subset phasec reads
    (TVM 0.27 spelling). Nothing in it is executed. Any problem with the text
    is a :class:`~phasec.errors.ParseError` naming the file, line and column
    and what was not understood.

    ``metadata`` resolves TVM's ``metadata["key"][i]`` references to Relax
    constants (TVM prints every non-scalar constant that way): ``key`` -> the
    constants' values in index order. :func:`phasec.tvm.from_tvm` supplies it.
    """
    if isinstance(text, (bytes, bytearray)):
        text = decode_source(bytes(text), filename)
    if not isinstance(text, str):
        raise TypeError(f"parse() expects TVMScript text (str), not {type(text).__name__}")
    return ModuleParser(text, filename, metadata).run()


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
    mp = ModuleParser(text, filename)
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

class Signature:
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


class ModuleParser:
    """Parses one file: the imports and the single ``@I.ir_module`` class."""

    def __init__(self, text: str, filename: str,
                 metadata: Mapping[str, Sequence[np.ndarray]] | None = None) -> None:
        self.text = text
        self.filename = filename
        #: values for TVM's metadata["key"][i] constant references
        self.metadata = metadata
        self.aliases: dict[str, str] = {}
        self.where: ast.AST | None = None  # innermost statement being parsed
        self.class_names: set[str] = {"cls"}
        #: PrimFunc name -> the dtype it returns (None: a kernel, which returns nothing)
        self.prim_ret_dtypes: dict[str, str | None] = {}
        #: names declared at module level by `n = TypeVar("n")` (TVM 0.27)
        self.module_syms: set[str] = set()
        self.function_kinds: dict[str, str] = {}  # name -> "relax" | "prim"
        self.globals: dict[str, StructInfo] = {}
        self.ctx = InferContext(globals=self.globals)
        self.used_names: set[str] = set()
        self._fresh_counter = 0
        self._op_suggestions: list[str] | None = None
        #: the module's virtual devices (None: no module, a struct info on its own)
        self.vdevices: tuple[VDevice, ...] | None = None

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
        try:
            return inference.infer_struct_info(expr, self.ctx)
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
            arg = node.args[0]
            if (value is None and isinstance(arg, ast.Constant) and isinstance(arg.value, str)
                    and arg.value.strip().lower() in ("inf", "-inf", "+inf", "nan")
                    and name is not None and len(name) == 2 and name[1] in tir.DTYPES
                    and tir.is_float(name[1])):
                value = float(arg.value)  # T.float64("inf"), as TVM prints it
            if (name is not None and len(name) == 2 and name[0] == self.T
                    and name[1] in tir.DTYPES and value is not None):
                if name[1] == "bool":
                    return bool(value)
                return float(value) if tir.is_float(name[1]) else int(value)
            # R.str("global"), R.dtype("uint8"), R.prim_value(0): attribute values
            # TVM 0.27 prints as Relax values (trailing positional operands).
            if name in ((self.R, "str"), (self.R, "dtype"), (self.R, "prim_value")):
                inner = self.literal(node.args[0])
                if name[1] == "prim_value" and not isinstance(inner, (int, float)):
                    raise self.error(f"{self.R}.prim_value expects a number here, got "
                                     f"{self.src(node.args[0])}", node.args[0])
                if name[1] != "prim_value" and not isinstance(inner, str):
                    raise self.error(f"{self.R}.{name[1]} expects a string, got "
                                     f"{self.src(node.args[0])}", node.args[0])
                return inner
        if isinstance(node, ast.Call) and _dotted(node.func) == (self.I, "vdevice"):
            return vdevice_value(self, node)  # TVM's dst_vdevice= of vm.builtin.to_device
        if isinstance(node, ast.Call) and _dotted(node.func) == (self.T, "target"):
            a = self.bind_args(node, f"{self.T}.target", ("target",), 1)
            target = self.literal(a["target"])
            problem = target_problem(target)
            if problem is not None:
                raise self.error(f"{self.T}.target: {problem}, got {self.src(a['target'])}",
                                 a["target"])
            return Target(plain_target(target), span=self.span(node))
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
            raise self.error(f"{what} takes at most {counted(len(params), 'positional argument')} "
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
            sym = self._module_sym(stmt)
            if sym is not None:
                self.module_syms.add(sym)
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

    @staticmethod
    def _module_sym(stmt: ast.stmt) -> str | None:
        """``n = TypeVar("n")`` (how TVM 0.27 prints a symbolic variable that
        several functions mention) -> ``"n"``; each function that uses ``n``
        gets its own int64 symbolic variable of that name."""
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Call)):
            return None
        call = stmt.value
        if _dotted(call.func) not in (("TypeVar",), ("typing", "TypeVar")) or call.keywords:
            return None
        name = stmt.targets[0].id
        if len(call.args) != 1 or not isinstance(call.args[0], ast.Constant) \
                or call.args[0].value != name:
            return None
        return name

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
                   in ((self.I, "ir_module"), ("tvm", "script", "ir_module"),
                      ("tvm", "script", "ir", "ir_module"))
                   for d in node.decorator_list)

    def _class(self, cls: ast.ClassDef) -> IRModule:
        self.where = cls
        if len(cls.decorator_list) != 1:
            raise self.error(f"@{self.I}.ir_module must be the only decorator of class "
                             f"{cls.name!r}", cls.decorator_list[-1])
        self.decorator_flags(cls, ())
        if cls.bases or cls.keywords:
            if any(_dotted(b) is not None and _dotted(b)[-1] == "BasePyModule" for b in cls.bases):
                raise self.error(f"class {cls.name!r}: {_PY_MODULE_ERROR}", cls.bases[0])
            raise self.error(f"class {cls.name!r}: base classes are not supported", cls)
        self.class_names.add(cls.name)
        attrs: dict[str, Any] = {}
        attrs_node: ast.AST | None = None
        global_infos: dict[str, tuple[Any, ...]] = {}
        infos_node: ast.AST | None = None
        self.vdevices = ()
        defs: list[tuple[str, ast.FunctionDef]] = []
        for i, stmt in enumerate(cls.body):
            self.where = stmt
            if i == 0 and _is_docstring(stmt):
                continue
            if isinstance(stmt, ast.Pass):  # TVM prints a module without functions so
                continue
            if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                    and _dotted(stmt.value.func) == (self.I, "module_attrs")):
                if attrs_node is not None:
                    raise self.error(f"{self.I}.module_attrs given twice", stmt)
                attrs_node = stmt
                attrs = self._module_attrs(stmt.value)
                continue
            if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                    and _dotted(stmt.value.func) == (self.I, "module_global_infos")):
                if infos_node is not None:
                    raise self.error(f"{self.I}.module_global_infos given twice", stmt)
                infos_node = stmt
                global_infos = parse_global_infos(self, stmt.value)
                self.vdevices = global_infos.get("vdevice", ())
                continue
            if _is_py_function(self, stmt):
                if isinstance(stmt, ast.Assign):
                    raise self.error(f"{self.src(stmt)}: module-level {self.R}.ExternFunc entries "
                                     f"(external functions, e.g. the Python functions of TVM's "
                                     f"BasePyModule) are not supported; a phasec module holds "
                                     f"@R.function and @T.prim_func definitions", stmt)
                raise self.error(f"@{self.I}.pyfunc: {_PY_MODULE_ERROR}", stmt)
            if isinstance(stmt, ast.FunctionDef):
                kind = self._function_kind(stmt)
                if stmt.name in self.function_kinds:
                    raise self.error(f"function {stmt.name!r} is defined twice", stmt)
                self.function_kinds[stmt.name] = kind
                defs.append((kind, expand_meta_vars(self, stmt)))
                continue
            raise self.error(f"unsupported {_stmt_kind(stmt)} statement in an "
                             f"@{self.I}.ir_module class ({self.src(stmt)}); expected "
                             f"@R.function / @T.prim_func definitions, "
                             f"{self.I}.module_attrs({{...}}) and "
                             f"{self.I}.module_global_infos({{...}})", stmt)
        # Signatures first: functions may refer to each other in any order.
        sigs: dict[str, Signature] = {}
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
                # (as phasec.op.infer.context_from_module describes them).
                ret = _dotted(fdef.returns) if fdef.returns is not None else None
                ret_dtype = (ret[1] if ret is not None and len(ret) == 2 and ret[0] == self.T
                             and ret[1] in tir.DTYPES else None)
                self.globals[fdef.name] = prim_func_sinfo(ret_dtype)
                self.prim_ret_dtypes[fdef.name] = ret_dtype
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
        return IRModule(functions, attrs, span=self.span(cls), global_infos=global_infos)

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
                        enclosing: _RelaxFunctionParser | None = None) -> Signature:
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
        ret = None
        if fdef.returns is not None:
            # `-> None` declares no result, as TVM reads it: the empty tuple
            ret = (TupleStructInfo([], span=self.span(fdef.returns)) if _is_none(fdef.returns)
                   else sp.parse(fdef.returns))
        return Signature(fdef.name, fdef, params, ret, syms, flags.get("pure", True),
                          flags.get("private", enclosing is not None))


_PY_MODULE_ERROR = ("TVM's BasePyModule (Python functions, @I.pyfunc) is not supported; "
                    "phasec reads TVMScript and never runs Python")


def _is_py_function(mp: ModuleParser, stmt: ast.stmt) -> bool:
    """``@I.pyfunc def f(...)``, or ``f = R.ExternFunc("f")`` in the class (how TVM
    prints a BasePyModule's Python functions)."""
    if isinstance(stmt, ast.FunctionDef):
        return any(_dotted(d.func if isinstance(d, ast.Call) else d) == (mp.I, "pyfunc")
                   for d in stmt.decorator_list)
    return (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)
            and _dotted(stmt.value.func) == (mp.R, "ExternFunc"))


def _signature_resolver(mp: ModuleParser, syms: dict[str, tir.Var],
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

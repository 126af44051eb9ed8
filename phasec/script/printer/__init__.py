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
binding blocks merge and empty ones vanish; attribute lists become tuples; a
symbolic variable shared by two module-level functions becomes one per
function; a zero-size constant of rank > 1 prints as ``R.const([], ...)``.
``If``/``SeqExpr``/``Function`` found in expression position are printed as
statements before their use.
Every ``SeqStmt`` has a text (its constructor flattens nested sequences and
refuses one of a single statement: ``tir.seq`` builds them); a TIR variable
bound by two statements would read back as two variables, which the
verifier rejects (WF505) and TE lowering never produces.

Scoped TIR statements (``Allocate``, ``LetStmt``) are printed the way TVM's
printer does ("concise scoping"): when nothing follows the statement in its
printed statement list, as an assignment, ``buf = T.alloc_buffer(shape,
dtype)`` / ``v: T.let[T.int64] = value`` (``v: T.int64 = value`` in the legacy
spelling; TVM 0.27 reads that as a local scalar buffer), whose scope is the
rest of the list. When statements outside its scope follow it
(``SeqStmt[Allocate(buf, body), more]``), TVM 0.27 has no spelling for it (its
AllocBuffer and Bind always scope over the rest of their list; its parser
refuses ``with T.decl_buffer(...) as buf:`` and ``with T.LetStmt(...)``), so
the concise spelling goes inside ``with T.attr({"phasec.scope":
T.bool(True)}):``, which TVM reads as a harmless attribute statement and
phasec reads back as exactly the scoped statement (no attribute; see
:data:`phasec.ir.tir.SCOPE_ATTR`). The legacy spelling keeps the older
``with`` blocks holding exactly the body: ``with T.decl_buffer(shape, dtype)
as buf:`` / ``with T.LetStmt(value) as v:`` (``T.LetStmt(value, T.<dtype>)``
when the variable's dtype is not the value's); phasec reads both.
Flattening the scoped form instead would read back with a wider scope. So
the text round trip of a TIR statement is exact in both spellings, and the
kernels phasec generates (which keep their allocations at the end of
statement lists) print with the familiar ``T.alloc_buffer``. The JSON format is the exact
serialization of everything.

Public helpers for diagnostics: :func:`print_module`, :func:`print_function`,
:func:`print_prim_func`, :func:`print_expr`, :func:`print_binding`,
:func:`print_sinfo`, :func:`print_sinfos`, :func:`print_prim_expr`, :func:`print_stmt`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from phasec.ir import tir
from phasec.ir.expr import Binding, Expr, Function, If, SeqExpr, Var
from phasec.ir.module import DummyGlobalInfo, IRModule, VDevice
from phasec.ir.node import set_printer
from phasec.ir.struct_info import StructInfo
from phasec.script.printer.common import (
    INDENT, SYNTAXES, ConstantElision, attrs_dict_text, check_syntax, constant_elision,
    elide_constants, legacy, quote_str, sanitize, syntax, vdevice_text,
)
from phasec.script.printer.relax_level import RelaxPrinter
from phasec.script.printer.tir_level import TirPrinter

__all__ = [
    "print_module", "print_function", "print_prim_func", "print_expr", "print_binding",
    "print_sinfo", "print_sinfos", "print_prim_expr", "print_stmt", "quote_str",
    "SYNTAXES", "syntax", "script_text", "ConstantElision", "elide_constants",
]


def _header() -> tuple[str, ...]:
    tir_module = "tir" if legacy() else "tirx"
    return ("# from tvm.script import ir as I",
            "# from tvm.script import relax as R",
            f"# from tvm.script import {tir_module} as T")



def print_module(mod: IRModule, syntax_name: str | None = None, *,
                 function_texts: dict[Any, Any] | None = None) -> str:
    """The module as TVMScript text, ending in a newline.

    ``syntax_name`` is one of :data:`SYNTAXES` (default: the spelling selected
    with :func:`syntax`, else ``"tvm"``, what TVM 0.27 prints and parses).
    Functions are printed sorted by name, so equal modules print equally.
    ``function_texts``: a dict the caller keeps between calls, where each
    function's lines are kept and reused while the same function object
    comes again (the modules of one pipeline share most of their functions).
    """
    if syntax_name is not None:
        with syntax(check_syntax(syntax_name)):
            return print_module(mod, function_texts=function_texts)
    lines = [*_header(), "", "@I.ir_module", "class Module:"]
    has_body = False
    if mod.attrs:
        lines.append(INDENT + "I.module_attrs(" + attrs_dict_text(TirPrinter(), mod.attrs) + ")")
        has_body = True
    if mod.global_infos:
        lines.append(INDENT + "I.module_global_infos(" + _global_infos_text(mod.global_infos) + ")")
        has_body = True
    for name in sorted(mod.functions):
        if has_body:
            lines.append("")  # a blank line between module-level items
        func = mod.functions[name]
        lines.extend(_function_lines(name, func, INDENT) if function_texts is None
                     else _cached_function_lines(name, func, function_texts))
        has_body = True
    if not has_body:
        # A class needs a body; an empty attribute dict reads back as no attributes.
        lines.append(INDENT + "I.module_attrs({})")
    return "\n".join(lines) + "\n"


def _global_infos_text(infos: Mapping[str, tuple[VDevice, ...]]) -> str:
    """``{"vdevice": [I.vdevice(target, id, scope), ...]}``, targets as written."""
    items = []
    for key, devices in infos.items():
        entries = ["I.dummy_global_info()" if isinstance(d, DummyGlobalInfo) else vdevice_text(d)
                   for d in devices]
        items.append(f"{quote_str(key)}: [" + ", ".join(entries) + "]")
    return "{" + ", ".join(items) + "}"


def _cached_function_lines(name: str, func: Function | tir.PrimFunc,
                           cache: dict[Any, Any]) -> list[str]:
    """:func:`_function_lines` through ``cache``: keyed by the name, the
    function object, the spelling and the constant elision in force (whose
    references the lines hold and mark used again when reused)."""
    elision = constant_elision()
    key = (name, id(func), legacy(), id(elision))
    hit = cache.get(key)
    if hit is not None and hit[0] is func:
        if elision is not None:
            elision.used |= hit[2]
        return hit[1]
    outer = None
    if elision is not None:
        outer, elision.used = elision.used, set()
    lines = _function_lines(name, func, INDENT)
    used = frozenset()
    if elision is not None:
        used = frozenset(elision.used)
        elision.used = outer | elision.used
    cache[key] = (func, lines, used)
    return lines


def _function_lines(name: str, func: Function | tir.PrimFunc, indent: str) -> list[str]:
    if isinstance(func, tir.PrimFunc):
        tp = TirPrinter()
        tp.prim_func(name, func, indent)
        return tp.lines
    rp = RelaxPrinter()
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
    p = RelaxPrinter()
    t = type(expr)
    if t is Function:
        p.function(sanitize(str(expr.attrs.get("global_symbol", "f"))), expr, "", top=False)
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
    p = RelaxPrinter()
    p.binding(binding, "")
    return "\n".join(p.lines)


def print_sinfo(sinfo: StructInfo | None) -> str:
    """Struct info as its TVMScript annotation (``R.Tensor((n, 4), dtype="float32")``);
    ``None`` (unknown) prints as ``None``."""
    if sinfo is None:
        return "None"
    return RelaxPrinter().sinfo(sinfo)


def print_sinfos(sinfos: Sequence[StructInfo | None]) -> list[str]:
    """Several struct infos (a signature) as annotations, one text each, with
    one naming: a symbolic variable has the same name in every text and
    distinct variables have distinct names, so
    :func:`phasec.script.parser.parse_struct_info` with one shared ``syms``
    dict reads them back with the same sharing. ``None`` prints as ``None``."""
    p = RelaxPrinter()
    return ["None" if s is None else p.sinfo(s) for s in sinfos]


def print_prim_expr(expr: tir.PrimExpr, *, tir_context: bool = True) -> str:
    """A scalar expression. In TIR context bare integers are int32 (``T.int64(4)``
    spelt out); otherwise (Relax shapes) bare integers are int64."""
    p = TirPrinter() if tir_context else RelaxPrinter()
    return p.prim(expr)


def print_stmt(stmt: tir.Stmt) -> str:
    """A TIR statement (and its body) as TVMScript lines."""
    p = TirPrinter()
    p.stmt(stmt, "")
    return "\n".join(p.lines)


def script_text(obj: Any, syntax_name: str | None = None) -> str | None:
    """TVMScript for a module, an expression, a binding, struct info or a TIR
    node (a variable reads as its name and type, as in a signature); None
    for anything else. The IR prints itself with this function
    (``str(mod)``, ``repr(node)``): see :func:`phasec.ir.node.set_printer`."""
    if isinstance(obj, IRModule):
        return print_module(obj, syntax_name)
    if syntax_name is not None:
        with syntax(check_syntax(syntax_name)):
            return script_text(obj)
    if isinstance(obj, Var):
        return f"{obj.name_hint}: {print_sinfo(obj.struct_info)}"
    if isinstance(obj, Expr):
        return print_expr(obj)
    if isinstance(obj, Binding):
        return print_binding(obj)
    if isinstance(obj, StructInfo):
        return print_sinfo(obj)
    if isinstance(obj, tir.PrimFunc):
        return print_prim_func(str((obj.attrs or {}).get("global_symbol", "func")), obj)
    if isinstance(obj, tir.PrimExpr):
        return print_prim_expr(obj)
    if isinstance(obj, tir.Stmt):
        return print_stmt(obj)
    return None


set_printer(script_text)  # the IR prints through this printer from now on

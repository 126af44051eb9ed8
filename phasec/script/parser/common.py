"""Shared tables and helpers of the TVMScript parser (see :mod:`phasec.script.parser`)."""

from __future__ import annotations

import ast
import re
from typing import Any

from phasec.ir import tir

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
_LOOP_KINDS = tir.FOR_KINDS  # serial, parallel, vectorized, unroll, thread_binding
_TIR_BINARY_FUNCS = {"min": "min", "max": "max", "pow": "pow", "floordiv": "//", "floormod": "%",
                     "truncdiv": "/", "Div": "/"}  # TVM prints truncdiv as T.Div
_TIR_FUNCS = ("Cast", "cast", "Select", "if_then_else", "And", "Or", "Not", "min_value", "truncmod",
              "FloatImm", "IntImm",
              "max_value", *_TIR_BINARY_FUNCS,
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

def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


#: TVM's host-side TIR builtins (what VM codegen to TIR and hand-written host
#: code use): named in the error that refuses them.
_TIR_BUILTINS = frozenset({
    "call_packed", "call_cpacked", "call_intrin",
    "call_packed_lowered", "call_cpacked_lowered", "call_kernel", "tvm_struct_get",
    "tvm_struct_set", "tvm_stack_make_array", "tvm_stack_make_shape", "tvm_stack_alloca",
    "anylist_getitem", "anylist_setitem_call_packed", "anylist_setitem_call_cpacked",
    "Call", "tvm_call_packed", "tvm_storage_sync", "tvm_thread_allreduce",
})
TIR_BUILTIN_ERROR = ("one of TVM's host-side TIR builtins (packed calls, handles, structs), "
                     "which phasec's TIR does not have; phasec reads kernels over buffers")

"""The interpreter's texts of values and struct info in messages, and its
evaluation of scalar (TIR) expressions over symbolic variables (see
:mod:`phasec.interp.relax`). What it shares with the VM (storage, casts,
If conditions, the operators' semantics) is :mod:`phasec.runtime`'s."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from phasec.errors import DivisionByZeroError
from phasec.ir import tir
from phasec.ir.intrinsics import SCALAR_INTRINSICS
from phasec.ir.struct_info import (
    FuncStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
    TensorStructInfo, TupleStructInfo,
)
from phasec.runtime.binary_ops import SCALAR_BINARY
from phasec.runtime.values import InterpError, cast_scalar


#: "no value bound" (a symbolic variable not yet known)
_MISSING = object()


# ---------------------------------------------------------------------------
# Text of struct info and values (shared with the VM for error messages)
# ---------------------------------------------------------------------------

_INFIX = {"+", "-", "*", "/", "//", "%", "==", "!=", "<", "<=", ">", ">=", "and", "or"}


def prim_text(expr: tir.PrimExpr) -> str:
    """A short TVMScript-like rendering of a scalar expression."""
    t = type(expr)
    if t is tir.IntImm:
        return str(expr.value) if expr.dtype in ("int64", "int32") else f"T.{expr.dtype}({expr.value})"
    if t is tir.FloatImm:
        return repr(expr.value)
    if t is tir.Var:
        return expr.name
    if t is tir.BinaryOp:
        if expr.op in _INFIX:
            return f"({prim_text(expr.lhs)} {expr.op} {prim_text(expr.rhs)})"
        return f"T.{expr.op}({prim_text(expr.lhs)}, {prim_text(expr.rhs)})"
    if t is tir.Not:
        return f"not {prim_text(expr.value)}"
    if t is tir.Cast:
        return f"T.Cast({expr.dtype!r}, {prim_text(expr.value)})"
    if t is tir.Select:
        return (f"T.Select({prim_text(expr.condition)}, {prim_text(expr.true_value)}, "
                f"{prim_text(expr.false_value)})")
    if t is tir.Call:
        return f"T.{expr.name}({', '.join(prim_text(a) for a in expr.args)})"
    return type(expr).__name__


def sinfo_text(sinfo: StructInfo | None) -> str:
    """A TVMScript-like rendering of struct info, for error messages."""
    if sinfo is None:
        return "(unknown)"
    t = type(sinfo)
    if t is TensorStructInfo:
        dtype = "" if sinfo.dtype == "void" else f', dtype="{sinfo.dtype}"'
        if sinfo.shape is not None:
            dims = ", ".join(prim_text(d) for d in sinfo.shape)
            if len(sinfo.shape) == 1:
                dims += ","
            return f"R.Tensor(({dims}){dtype})"
        if sinfo.ndim >= 0:
            return f"R.Tensor(ndim={sinfo.ndim}{dtype})"
        return f"R.Tensor({dtype.lstrip(', ')})" if dtype else "R.Tensor"
    if t is TupleStructInfo:
        return f"R.Tuple({', '.join(sinfo_text(f) for f in sinfo.fields)})"
    if t is ShapeStructInfo:
        if sinfo.values is not None:
            return f"R.Shape([{', '.join(prim_text(v) for v in sinfo.values)}])"
        return f"R.Shape(ndim={sinfo.ndim})" if sinfo.ndim >= 0 else "R.Shape"
    if t is PrimStructInfo:
        if sinfo.value is not None:
            return f"R.Prim(value={prim_text(sinfo.value)})"
        return f'R.Prim("{sinfo.dtype}")'
    if t is FuncStructInfo:
        return "R.Callable"
    return "R.Object"


# ---------------------------------------------------------------------------
# Scalar (TIR) expressions over symbolic variables
# ---------------------------------------------------------------------------

def eval_prim_expr(expr: tir.PrimExpr, lookup: Callable[[tir.Var], Any]) -> Any:
    """Evaluate a scalar expression; ``lookup`` gives the value of each variable."""
    t = type(expr)
    if t is tir.IntImm:
        return bool(expr.value) if expr.dtype == "bool" else int(expr.value)
    if t is tir.Var:
        return lookup(expr)
    if t is tir.FloatImm:
        return float(expr.value)
    if t is tir.BinaryOp:
        a = eval_prim_expr(expr.lhs, lookup)
        b = eval_prim_expr(expr.rhs, lookup)
        try:
            return SCALAR_BINARY[expr.op](a, b)
        except ZeroDivisionError:
            if isinstance(a, float) or isinstance(b, float):
                raise InterpError(f"division by zero in {prim_text(expr)}") from None
            raise DivisionByZeroError(prim_text(expr)) from None
    if t is tir.Cast:
        return cast_scalar(eval_prim_expr(expr.value, lookup), expr.dtype)
    if t is tir.Not:
        return not eval_prim_expr(expr.value, lookup)
    if t is tir.Select:
        if eval_prim_expr(expr.condition, lookup):
            return eval_prim_expr(expr.true_value, lookup)
        return eval_prim_expr(expr.false_value, lookup)
    if t is tir.Call and expr.name in SCALAR_INTRINSICS:
        return SCALAR_INTRINSICS[expr.name](*(eval_prim_expr(a, lookup) for a in expr.args))
    raise InterpError(f"cannot evaluate {prim_text(expr)} as a shape or scalar expression")

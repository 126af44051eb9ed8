"""What the interpreter and the VM share: the error type, the text of
values and struct info in messages, and the evaluation of scalar (TIR)
expressions over symbolic variables (see :mod:`phasec.interp.relax`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from phasec.errors import VMError
from phasec.ir import tir
from phasec import arith
from phasec.ir.struct_info import (
    FuncStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
    TensorStructInfo, TupleStructInfo,
)


#: Byte alignment of tensors carved out of storage.
STORAGE_ALIGNMENT = 64

#: "no value bound" (a symbolic variable not yet known)
_MISSING = object()


class InterpError(VMError):
    """A program went wrong while being interpreted: wrong arguments, a failed
    match_cast, an operator that raised... The message names the function and
    the binding."""


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


def describe_value(value: Any) -> str:
    """What a run-time value is, for error messages ("float32 tensor of shape (2, 3)")."""
    if isinstance(value, np.ndarray):
        return f"{value.dtype} tensor of shape {tuple(value.shape)}"
    if isinstance(value, np.generic):
        return f"{value.dtype} scalar {value.item()!r}"
    if isinstance(value, tuple):
        if value and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                         for v in value):
            return f"shape or tuple {tuple(int(v) for v in value)}"
        if len(value) > 4:
            return f"tuple of {len(value)} values"
        return f"tuple ({', '.join(describe_value(v) for v in value)})"
    if isinstance(value, bool):
        return f"bool {value}"
    if isinstance(value, (int, float)):
        return f"{type(value).__name__} {value!r}"
    if isinstance(value, str):
        return f"string {value!r}"
    if value is None:
        return "null"
    if isinstance(value, Storage):
        return f"storage of {value.nbytes} bytes"
    if callable(value):
        return "function"
    return type(value).__name__


# ---------------------------------------------------------------------------
# Scalar (TIR) expressions over symbolic variables
# ---------------------------------------------------------------------------

def _trunc_div(a: Any, b: Any) -> Any:
    if isinstance(a, float) or isinstance(b, float):
        return a / b
    return arith.truncdiv(a, b)


def _pow(a: Any, b: Any) -> Any:
    """``a ** b``; for integers as the kernels compute it: wrapped to int64
    (a modular power, so ``n ** 100000000`` takes microseconds, not hours),
    and 0 for negative exponents except for the bases 1 and -1."""
    if isinstance(a, float) or isinstance(b, float):
        return a ** b
    a, b = int(a), int(b)
    if b < 0:
        return 1 if a == 1 else ((-1 if b % 2 else 1) if a == -1 else 0)
    r = pow(a, b, 1 << 64)
    return r - (1 << 64) if r >= 1 << 63 else r


# The constant-folding semantics of phasec.arith, with "/" also on floats
# and TIR's pow (a wrapping integer power).
_BINARY: Mapping[str, Callable[[Any, Any], Any]] = {**arith.CONST_FOLD, "/": _trunc_div,
                                                    "pow": _pow}

_INTRINSIC: Mapping[str, Callable[[float], Any]] = {
    "exp": math.exp, "log": math.log, "sqrt": math.sqrt, "rsqrt": lambda x: 1.0 / math.sqrt(x),
    "tanh": math.tanh, "sigmoid": lambda x: 1.0 / (1.0 + math.exp(-x)), "erf": math.erf,
    "fabs": abs, "floor": math.floor, "ceil": math.ceil, "round": round, "trunc": math.trunc,
    "sin": math.sin, "cos": math.cos, "exp2": lambda x: 2.0 ** x, "log2": math.log2,
    "isnan": math.isnan, "isinf": math.isinf, "isfinite": math.isfinite,
    "tan": math.tan, "asin": math.asin, "acos": math.acos, "atan": math.atan,
    "sinh": math.sinh, "cosh": math.cosh, "asinh": math.asinh, "acosh": math.acosh,
    "atanh": math.atanh, "atan2": math.atan2, "fmod": math.fmod,
    "bitwise_and": lambda a, b: a & b, "bitwise_or": lambda a, b: a | b,
    "bitwise_xor": lambda a, b: a ^ b, "bitwise_not": lambda a: ~a,
    "shift_left": lambda a, s: a << s if 0 <= s < 64 else 0,
    "shift_right": lambda a, s: a >> s if 0 <= s < 64 else (-1 if a < 0 else 0),
}


def cast_scalar(value: Any, dtype: str) -> Any:
    """``value`` as the Python scalar type of ``dtype`` (int, float or bool)."""
    if dtype == "bool":
        return bool(value)
    if tir.is_float(dtype):
        return float(value)
    return int(value)


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
            return _BINARY[expr.op](a, b)
        except ZeroDivisionError:
            raise InterpError(f"division by zero in {prim_text(expr)}") from None
    if t is tir.Cast:
        return cast_scalar(eval_prim_expr(expr.value, lookup), expr.dtype)
    if t is tir.Not:
        return not eval_prim_expr(expr.value, lookup)
    if t is tir.Select:
        if eval_prim_expr(expr.condition, lookup):
            return eval_prim_expr(expr.true_value, lookup)
        return eval_prim_expr(expr.false_value, lookup)
    if t is tir.Call and expr.name in _INTRINSIC:
        return _INTRINSIC[expr.name](*(eval_prim_expr(a, lookup) for a in expr.args))
    raise InterpError(f"cannot evaluate {prim_text(expr)} as a shape or scalar expression")


class Storage:
    """A raw byte buffer from ``alloc_storage``; tensors are views into it."""

    __slots__ = ("data", "nbytes", "owner", "__weakref__")

    def __init__(self, nbytes: int, alignment: int = STORAGE_ALIGNMENT) -> None:
        if nbytes < 0:
            raise InterpError(f"cannot allocate storage of {nbytes} bytes")
        raw = np.empty(nbytes + alignment, dtype=np.uint8)
        skew = (-raw.ctypes.data) % alignment
        self.data = raw[skew:skew + nbytes]
        self.nbytes = nbytes
        #: the array owning the memory: every tensor view keeps it alive
        #: (numpy points a view's ``base`` at the owner, not at ``data``)
        self.owner = raw

    def tensor(self, offset: int, shape: Sequence[int], dtype: str) -> np.ndarray:
        """A tensor view of ``shape``/``dtype`` starting ``offset`` bytes in."""
        shape = tuple(int(d) for d in shape)
        np_dtype = np.dtype(dtype)
        size = np_dtype.itemsize * math.prod(shape)
        if offset < 0 or offset + size > self.nbytes:
            raise InterpError(f"tensor of {size} bytes at offset {offset} does not fit in "
                              f"storage of {self.nbytes} bytes")
        if offset % np_dtype.itemsize:
            raise InterpError(f"offset {offset} is not aligned to {dtype} ({np_dtype.itemsize} bytes)")
        return np.ndarray(shape, np_dtype, buffer=self.data, offset=offset)

    def __repr__(self) -> str:
        return f"<Storage {self.nbytes} bytes>"

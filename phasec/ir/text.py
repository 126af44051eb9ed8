"""Short TVMScript spellings of IR for messages.

:func:`sinfo_to_str` spells struct info the way TVMScript does
(``R.Tensor((n, 4), dtype="float32")``), :func:`prim_expr_to_str` a scalar
expression as a shape dimension, :func:`expr_to_str` an operand (``x``,
``R.const(...)``). Errors name what they are about with these; the full
TVMScript of anything is the printer's (``str(node)``).
"""

from __future__ import annotations

from collections.abc import Sequence

from phasec.ir import tir
from phasec.ir.expr import (
    Call, Constant, DataTypeImm, Expr, ExternFunc, GlobalVar, Op, PrimValue, ShapeExpr,
    StringImm, Tuple, TupleGetItem, Var,
)
from phasec.ir.struct_info import (
    FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
    TensorStructInfo, TupleStructInfo,
)

__all__ = ["sinfo_to_str", "prim_expr_to_str", "expr_to_str"]

_PREC = {"or": 1, "and": 2, "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3,
         "+": 4, "-": 4, "*": 5, "/": 5, "//": 5, "%": 5}


def _prim_leaf_to_str(e: tir.PrimExpr) -> str | None:
    if isinstance(e, tir.IntImm):
        if e.dtype == "int64":
            return str(e.value)
        if e.dtype == "bool":
            return f"T.bool({bool(e.value)})"
        return f"T.{e.dtype}({e.value})"
    if isinstance(e, tir.FloatImm):
        return f"T.{e.dtype}({e.value!r})"
    if isinstance(e, tir.Var):
        return e.name
    return None


def prim_expr_to_str(e: tir.PrimExpr) -> str:
    """Spell a scalar expression as TVMScript prints shape dimensions.

    int64 constants are plain integers (the Relax-level default), other
    integer types are ``T.int32(3)``; variables are their names. Iterative,
    so arbitrarily deep expressions print without recursion.
    """
    # Post-order with an explicit stack; each entry is (node, parent precedence).
    out: list[str] = []
    stack: list[tuple[tir.PrimExpr, int, bool]] = [(e, 0, False)]
    while stack:
        node, parent_prec, ready = stack.pop()
        leaf = _prim_leaf_to_str(node)
        if leaf is not None:
            out.append(leaf)
            continue
        children = tir.expr_children(node)
        if not ready:
            stack.append((node, parent_prec, True))
            if isinstance(node, tir.BinaryOp) and node.op in _PREC:
                prec = _PREC[node.op]
                # Left-associative: the right operand needs parentheses at equal precedence.
                child_precs = (prec, prec + 1)
            elif isinstance(node, tir.Not):
                child_precs = (6,)
            else:
                child_precs = (0,) * len(children)
            for child, cp in reversed(list(zip(children, child_precs))):
                stack.append((child, cp, False))
            continue
        args = out[len(out) - len(children):] if children else []
        del out[len(out) - len(children):]
        if isinstance(node, tir.BinaryOp):
            if node.op in _PREC:
                text = f"{args[0]} {node.op} {args[1]}"
                out.append(f"({text})" if _PREC[node.op] < parent_prec else text)
            else:
                out.append(f"T.{node.op}({args[0]}, {args[1]})")
        elif isinstance(node, tir.Not):
            out.append(f"not {args[0]}")
        elif isinstance(node, tir.Cast):
            out.append(f'T.Cast("{node.dtype}", {args[0]})')
        elif isinstance(node, tir.Select):
            out.append(f"T.Select({', '.join(args)})")
        elif isinstance(node, tir.Call):
            out.append(f"T.{node.name}({', '.join(args)})")
        elif isinstance(node, tir.BufferLoad):
            out.append(f"{node.buffer.name}[{', '.join(args)}]")
        else:
            out.append(type(node).__name__)
    return out[0]


def _dims_to_str(dims: Sequence[tir.PrimExpr]) -> str:
    inner = ", ".join(prim_expr_to_str(d) for d in dims)
    return f"({inner},)" if len(dims) == 1 else f"({inner})"


def sinfo_to_str(sinfo: StructInfo | None) -> str:
    """TVMScript spelling: ``R.Tensor((n, 4), dtype="float32")``, ``R.Tuple(...)``..."""
    if sinfo is None:
        return "<no struct info>"
    if isinstance(sinfo, TensorStructInfo):
        parts = []
        if sinfo.shape is not None:
            parts.append(_dims_to_str(sinfo.shape))
        elif sinfo.ndim != -1:
            parts.append(f"ndim={sinfo.ndim}")
        if sinfo.dtype != "void":
            parts.append(f'dtype="{sinfo.dtype}"')
        return f"R.Tensor({', '.join(parts)})" if parts else "R.Tensor"
    if isinstance(sinfo, ShapeStructInfo):
        if sinfo.values is not None:
            return f"R.Shape([{', '.join(prim_expr_to_str(v) for v in sinfo.values)}])"
        return f"R.Shape(ndim={sinfo.ndim})"
    if isinstance(sinfo, PrimStructInfo):
        if sinfo.value is not None:
            return f"R.Prim(value={prim_expr_to_str(sinfo.value)})"
        return f'R.Prim("{sinfo.dtype}")'
    if isinstance(sinfo, TupleStructInfo):
        return f"R.Tuple({', '.join(sinfo_to_str(f) for f in sinfo.fields)})"
    if isinstance(sinfo, FuncStructInfo):
        if sinfo.params is None:
            if isinstance(sinfo.ret, ObjectStructInfo) and sinfo.purity:
                return "R.Callable()"
            return f"R.Callable(ret={sinfo_to_str(sinfo.ret)}, purity={sinfo.purity})"
        params = ", ".join(sinfo_to_str(p) for p in sinfo.params)
        if len(sinfo.params) == 1:
            params += ","
        return f"R.Callable(({params}), {sinfo_to_str(sinfo.ret)}, purity={sinfo.purity})"
    if isinstance(sinfo, ObjectStructInfo):
        return "R.Object"
    return type(sinfo).__name__


def expr_to_str(e: Expr) -> str:
    """A short spelling of an operand for messages (``x``, ``R.const(...)``)."""
    if isinstance(e, Var):
        return e.name_hint
    if isinstance(e, Constant):
        if e.data.ndim == 0:
            return f'R.const({e.data.item()!r}, "{e.data.dtype}")'
        return f"R.const(<{'x'.join(map(str, e.data.shape))} {e.data.dtype}>)"
    if isinstance(e, ShapeExpr):
        return f"R.shape([{', '.join(prim_expr_to_str(v) for v in e.values)}])"
    if isinstance(e, PrimValue):
        return f"R.prim_value({prim_expr_to_str(e.value)})"
    if isinstance(e, StringImm):
        return f"R.str({e.value!r})"
    if isinstance(e, DataTypeImm):
        return f'R.dtype("{e.value}")'
    if isinstance(e, GlobalVar):
        return f"cls.{e.name_hint}"
    if isinstance(e, ExternFunc):
        return repr(e.global_symbol)
    if isinstance(e, Op):
        return "R." + e.name.removeprefix("relax.")
    if isinstance(e, Tuple):
        inner = ", ".join(expr_to_str(f) for f in e.fields)
        return f"({inner},)" if len(e.fields) == 1 else f"({inner})"
    if isinstance(e, TupleGetItem):
        return f"{expr_to_str(e.tuple_value)}[{e.index}]"
    if isinstance(e, Call):
        return f"{expr_to_str(e.op)}({', '.join(expr_to_str(a) for a in e.args)})"
    return type(e).__name__

"""Struct-info inference and the struct-info lattice.

* :func:`infer_struct_info` derives the struct info of an expression from its
  operands (operators dispatch to their ``OpDef.infer``).
* :func:`struct_info_equal`, :func:`is_base_of` and :func:`join` (alias
  :func:`unify`) compare struct info; dimensions are compared with
  :func:`phasec.arith.prove_equal`, so ``n * 4`` and ``4 * n`` agree.
* :func:`sinfo_to_str` spells struct info the way TVMScript does
  (``R.Tensor((n, 4), dtype="float32")``) for error messages.

Errors are :class:`phasec.errors.StructInfoError` carrying the call's span,
naming the operator and the operands' struct info.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from phasec.errors import StructInfoError, counted
from phasec.ir import tir
from phasec import arith
from phasec.ir.expr import (
    Call, Constant, DataTypeImm, Expr, ExternFunc, Function, GlobalVar, If, Op, PrimValue,
    SeqExpr, ShapeExpr, StringImm, Tuple, TupleGetItem, Var,
)
from phasec.op.registry import InferContext, get_op
from phasec.ir.struct_info import (
    FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
    TensorStructInfo, TupleStructInfo,
)

if TYPE_CHECKING:
    from phasec.ir.module import IRModule

__all__ = [
    "infer_struct_info", "struct_info_equal", "is_base_of", "join", "unify",
    "collect_shape_vars", "sinfo_to_str", "prim_expr_to_str", "expr_to_str",
    "context_from_module", "erase_to_ndim", "derive_call_ret", "may_be_base_of",
    "substitute_sinfo", "InferContext",
]


# ---------------------------------------------------------------------------
# Spelling
# ---------------------------------------------------------------------------

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


def _prim_children(e: tir.PrimExpr) -> tuple:
    if isinstance(e, tir.BinaryOp):
        return (e.lhs, e.rhs)
    if isinstance(e, (tir.Not, tir.Cast)):
        return (e.value,)
    if isinstance(e, tir.Select):
        return (e.condition, e.true_value, e.false_value)
    if isinstance(e, tir.Call):
        return tuple(e.args)
    if isinstance(e, tir.BufferLoad):
        return tuple(e.indices)
    return ()


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
        children = _prim_children(node)
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


# ---------------------------------------------------------------------------
# The lattice
# ---------------------------------------------------------------------------

def _dims_equal(a: Sequence[tir.PrimExpr], b: Sequence[tir.PrimExpr]) -> bool:
    return len(a) == len(b) and all(arith.prove_equal(x, y) for x, y in zip(a, b))


def _prim_value_equal(a: tir.PrimExpr | None, b: tir.PrimExpr | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return arith.prove_equal(a, b)


def struct_info_equal(a: StructInfo | None, b: StructInfo | None) -> bool:
    """True when ``a`` and ``b`` describe provably the same set of values."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if x is y:
            continue
        if x is None or y is None or type(x) is not type(y):
            return False
        if isinstance(x, TensorStructInfo):
            if x.dtype != y.dtype or x.ndim != y.ndim:
                return False
            if (x.shape is None) != (y.shape is None):
                return False
            if x.shape is not None and not _dims_equal(x.shape, y.shape):
                return False
        elif isinstance(x, ShapeStructInfo):
            if x.ndim != y.ndim or (x.values is None) != (y.values is None):
                return False
            if x.values is not None and not _dims_equal(x.values, y.values):
                return False
        elif isinstance(x, PrimStructInfo):
            if x.dtype != y.dtype or not _prim_value_equal(x.value, y.value):
                return False
        elif isinstance(x, TupleStructInfo):
            if len(x.fields) != len(y.fields):
                return False
            stack.extend(zip(x.fields, y.fields))
        elif isinstance(x, FuncStructInfo):
            if x.purity != y.purity or (x.params is None) != (y.params is None):
                return False
            if x.params is not None:
                if len(x.params) != len(y.params):
                    return False
                stack.extend(zip(x.params, y.params))
            stack.append((x.ret, y.ret))
    return True


def is_base_of(base: StructInfo | None, derived: StructInfo | None) -> bool:
    """True when every value described by ``derived`` is described by ``base``.

    ``base`` is less or equally specific: ``R.Object`` is a base of everything,
    ``R.Tensor(ndim=2)`` of ``R.Tensor((2, 3), "float32")``. Dimensions are
    compared with ``prove_equal``: only provable facts count. Callables are
    covariant in their result and contravariant in their parameters; an impure
    callable type is a base of a pure one.
    """
    stack = [(base, derived)]
    while stack:
        b, d = stack.pop()
        if b is d:
            continue
        if isinstance(b, ObjectStructInfo):
            continue
        if b is None or d is None or type(b) is not type(d):
            return False
        if isinstance(b, TensorStructInfo):
            if b.dtype != "void" and b.dtype != d.dtype:
                return False
            if b.ndim != -1 and b.ndim != d.ndim:
                return False
            if b.shape is not None and (d.shape is None or not _dims_equal(b.shape, d.shape)):
                return False
        elif isinstance(b, ShapeStructInfo):
            if b.ndim != -1 and b.ndim != d.ndim:
                return False
            if b.values is not None and (d.values is None or not _dims_equal(b.values, d.values)):
                return False
        elif isinstance(b, PrimStructInfo):
            if b.dtype != d.dtype:
                return False
            if b.value is not None and (d.value is None or not arith.prove_equal(b.value, d.value)):
                return False
        elif isinstance(b, TupleStructInfo):
            if len(b.fields) != len(d.fields):
                return False
            stack.extend(zip(b.fields, d.fields))
        elif isinstance(b, FuncStructInfo):
            if b.purity and not d.purity:
                return False
            if b.params is not None:
                if d.params is None or len(b.params) != len(d.params):
                    return False
                stack.extend(zip(d.params, b.params))  # contravariant
            stack.append((b.ret, d.ret))
    return True


def may_be_base_of(base: StructInfo | None, derived: StructInfo | None) -> bool:
    """False only when no value of ``derived`` can match ``base``.

    This is the static check of a call argument against a parameter: kinds,
    known dtypes and ndims, and constant dimensions must agree; symbolic
    dimensions are left to the run-time check (TVM's "needs a match_cast").
    """
    stack = [(base, derived)]
    while stack:
        b, d = stack.pop()
        if isinstance(b, ObjectStructInfo) or isinstance(d, ObjectStructInfo) or b is None or d is None:
            continue
        if type(b) is not type(d):
            return False
        if isinstance(b, TensorStructInfo):
            if "void" not in (b.dtype, d.dtype) and b.dtype != d.dtype:
                return False
            if -1 not in (b.ndim, d.ndim) and b.ndim != d.ndim:
                return False
            if b.shape is not None and d.shape is not None:
                if any(arith.prove_not_equal(x, y) for x, y in zip(b.shape, d.shape)):
                    return False
        elif isinstance(b, ShapeStructInfo):
            if -1 not in (b.ndim, d.ndim) and b.ndim != d.ndim:
                return False
            if b.values is not None and d.values is not None:
                if any(arith.prove_not_equal(x, y) for x, y in zip(b.values, d.values)):
                    return False
        elif isinstance(b, PrimStructInfo):
            if b.dtype != d.dtype:
                return False
            if b.value is not None and d.value is not None and arith.prove_not_equal(b.value, d.value):
                return False
        elif isinstance(b, TupleStructInfo):
            if len(b.fields) != len(d.fields):
                return False
            stack.extend(zip(b.fields, d.fields))
        elif isinstance(b, FuncStructInfo):
            if b.params is not None and d.params is not None and len(b.params) != len(d.params):
                return False
    return True


def join(a: StructInfo, b: StructInfo) -> StructInfo:
    """The least upper bound: the most specific struct info describing both.

    Used for ``If`` (the result of either branch). Differing dimensions give
    an ndim-only tensor, differing kinds ``R.Object``.
    """
    if a is b:
        return a
    if a is None or b is None:
        return ObjectStructInfo()
    if isinstance(a, ObjectStructInfo) or isinstance(b, ObjectStructInfo) or type(a) is not type(b):
        return ObjectStructInfo()
    if isinstance(a, TensorStructInfo):
        dtype = a.dtype if a.dtype == b.dtype else "void"
        ndim = a.ndim if a.ndim == b.ndim else -1
        if a.shape is not None and b.shape is not None and _dims_equal(a.shape, b.shape):
            return TensorStructInfo(a.shape, dtype)
        return TensorStructInfo(None, dtype, ndim)
    if isinstance(a, ShapeStructInfo):
        if a.values is not None and b.values is not None and _dims_equal(a.values, b.values):
            return a
        return ShapeStructInfo(None, a.ndim if a.ndim == b.ndim else -1)
    if isinstance(a, PrimStructInfo):
        if a.dtype != b.dtype:
            return ObjectStructInfo()
        return a if _prim_value_equal(a.value, b.value) else PrimStructInfo(a.dtype)
    if isinstance(a, TupleStructInfo):
        if len(a.fields) != len(b.fields):
            return ObjectStructInfo()
        return TupleStructInfo([join(x, y) for x, y in zip(a.fields, b.fields)])
    if isinstance(a, FuncStructInfo):
        if struct_info_equal(a, b):
            return a
        return FuncStructInfo(None, join(a.ret, b.ret), a.purity and b.purity)
    return ObjectStructInfo()


unify = join


def collect_shape_vars(sinfo: StructInfo | None) -> list[tir.Var]:
    """Symbolic variables of ``sinfo`` (shapes, prim values), each once, in order."""
    out: list[tir.Var] = []
    seen: set[int] = set()

    def add(exprs: Iterable[tir.PrimExpr]) -> None:
        for e in exprs:
            for v in arith.free_vars(e):
                if id(v) not in seen:
                    seen.add(id(v))
                    out.append(v)

    stack = [sinfo]
    while stack:
        s = stack.pop()
        if isinstance(s, TensorStructInfo) and s.shape is not None:
            add(s.shape)
        elif isinstance(s, ShapeStructInfo) and s.values is not None:
            add(s.values)
        elif isinstance(s, PrimStructInfo) and s.value is not None:
            add([s.value])
        elif isinstance(s, TupleStructInfo):
            stack.extend(reversed(s.fields))
        elif isinstance(s, FuncStructInfo):
            stack.append(s.ret)
            if s.params is not None:
                stack.extend(reversed(s.params))
    return out


def substitute_sinfo(sinfo: StructInfo, vmap: Mapping[tir.Var, tir.PrimExpr]) -> StructInfo:
    """``sinfo`` with symbolic variables replaced (and dims simplified)."""
    if not vmap:
        return sinfo

    def sub(dims):
        return tuple(arith.simplify(arith.substitute(d, vmap)) for d in dims)

    if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None:
        return TensorStructInfo(sub(sinfo.shape), sinfo.dtype)
    if isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None:
        return ShapeStructInfo(sub(sinfo.values))
    if isinstance(sinfo, PrimStructInfo) and sinfo.value is not None:
        return PrimStructInfo(sinfo.dtype, sub([sinfo.value])[0])
    if isinstance(sinfo, TupleStructInfo):
        return TupleStructInfo([substitute_sinfo(f, vmap) for f in sinfo.fields])
    if isinstance(sinfo, FuncStructInfo):
        params = None if sinfo.params is None else [substitute_sinfo(p, vmap) for p in sinfo.params]
        return FuncStructInfo(params, substitute_sinfo(sinfo.ret, vmap), sinfo.purity)
    return sinfo


def erase_to_ndim(sinfo: StructInfo, keep: set[int] | None = None) -> StructInfo:
    """Forget dimensions that mention variables outside ``keep`` (ids of tir.Vars).

    With ``keep=None`` every symbolic dimension is forgotten. Tensors and
    shapes keep their ndim and dtype, prim values their dtype.
    """
    def ok(exprs) -> bool:
        return all(keep is not None and all(id(v) in keep for v in arith.free_vars(e))
                   for e in exprs)

    if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None:
        return sinfo if ok(sinfo.shape) else TensorStructInfo(None, sinfo.dtype, sinfo.ndim)
    if isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None:
        return sinfo if ok(sinfo.values) else ShapeStructInfo(None, sinfo.ndim)
    if isinstance(sinfo, PrimStructInfo) and sinfo.value is not None:
        return sinfo if ok([sinfo.value]) else PrimStructInfo(sinfo.dtype)
    if isinstance(sinfo, TupleStructInfo):
        fields = [erase_to_ndim(f, keep) for f in sinfo.fields]
        if all(a is b for a, b in zip(fields, sinfo.fields)):
            return sinfo
        return TupleStructInfo(fields)
    if isinstance(sinfo, FuncStructInfo):
        params = None if sinfo.params is None else [erase_to_ndim(p, keep) for p in sinfo.params]
        return FuncStructInfo(params, erase_to_ndim(sinfo.ret, keep), sinfo.purity)
    return sinfo


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------

def call_error(call: Call, message: str) -> StructInfoError:
    """A StructInfoError for ``call``: the call, the message, the operands' struct info.

    ``message`` should say what is wrong in terms of the operand names
    (e.g. "x has dtype float32 and y has dtype int32").
    """
    operands = []
    for arg in call.args:
        sinfo = arg.struct_info
        if sinfo is None:
            continue
        operands.append(f"{expr_to_str(arg)}: {sinfo_to_str(sinfo)}")
    detail = f" (operands: {', '.join(operands)})" if operands else ""
    call_str = expr_to_str(call)
    prefix = "" if call_str in message else f"{call_str}: "
    return StructInfoError(f"{prefix}{message}{detail}", call.span)


# ---------------------------------------------------------------------------
# Inference
# ---------------------------------------------------------------------------

def prim_func_sinfo(ret_dtype: str | None) -> FuncStructInfo:
    """A PrimFunc as a Relax callee: opaque and impure, returning ``R.Tuple()``
    (a kernel) or ``R.Prim(ret_dtype)`` (a PrimFunc that returns a scalar)."""
    ret = TupleStructInfo([]) if ret_dtype is None else PrimStructInfo(ret_dtype)
    return FuncStructInfo(None, ret, purity=False)


def context_from_module(mod: "IRModule | Mapping[str, object] | None") -> InferContext:
    """An InferContext with the struct info of every function of ``mod``.

    A Relax function contributes its FuncStructInfo; a PrimFunc an opaque
    impure callable returning ``R.Tuple()`` (call it through ``R.call_tir``),
    or ``R.Prim(ret_dtype)`` for one that returns a scalar.
    """
    from phasec.ir.expr import Function as _Function

    if mod is None:
        return InferContext()
    funcs = mod.functions if hasattr(mod, "functions") else mod
    globals_: dict[str, StructInfo] = {}
    for name, func in funcs.items():
        if isinstance(func, _Function):
            if func.struct_info is not None:
                globals_[name] = func.struct_info
        elif isinstance(func, tir.PrimFunc):
            globals_[name] = prim_func_sinfo(func.ret_dtype)
    return InferContext(globals_)


def arg_sinfo(expr: Expr, ctx: InferContext | None = None) -> StructInfo:
    """The struct info of an operand: its own, or inferred when not yet set."""
    sinfo = expr.struct_info
    if sinfo is not None:
        return sinfo
    return infer_struct_info(expr, ctx)


def _match_dims(params: Sequence[tir.PrimExpr], args: Sequence[tir.PrimExpr],
                vmap: dict[tir.Var, tir.PrimExpr]) -> None:
    for p, a in zip(params, args):
        if isinstance(p, tir.Var) and p not in vmap:
            vmap[p] = a


def _bind_params(param: StructInfo, arg: StructInfo, vmap: dict[tir.Var, tir.PrimExpr]) -> None:
    """Bind the callee's symbolic variables that appear as whole dims of ``param``."""
    stack = [(param, arg)]
    while stack:
        p, a = stack.pop()
        if isinstance(p, TensorStructInfo) and isinstance(a, TensorStructInfo):
            if p.shape is not None and a.shape is not None and len(p.shape) == len(a.shape):
                _match_dims(p.shape, a.shape, vmap)
        elif isinstance(p, ShapeStructInfo) and isinstance(a, ShapeStructInfo):
            if p.values is not None and a.values is not None and len(p.values) == len(a.values):
                _match_dims(p.values, a.values, vmap)
        elif isinstance(p, PrimStructInfo) and isinstance(a, PrimStructInfo):
            if p.value is not None and a.value is not None:
                _match_dims([p.value], [a.value], vmap)
        elif isinstance(p, TupleStructInfo) and isinstance(a, TupleStructInfo):
            stack.extend(zip(p.fields, a.fields))


def derive_call_ret(call: Call, fsinfo: FuncStructInfo, callee: str,
                    ctx: InferContext | None = None, global_callee: bool = True) -> StructInfo:
    """The result of calling a function of struct info ``fsinfo`` with ``call.args``.

    Checks the argument count and that each argument may match its parameter;
    symbolic variables of the parameters are bound from the arguments and
    substituted into the result; result dimensions that still mention unbound
    variables are erased (ndim-only), like TVM's DeriveCallRetStructInfo.
    """
    if fsinfo.params is None:
        if call.sinfo_args:
            return _sinfo_args_result(call)
        return fsinfo.ret
    if len(call.args) != len(fsinfo.params):
        raise StructInfoError(
            f"{expr_to_str(call)}: {callee} takes {counted(len(fsinfo.params), 'argument')} "
            f"but {len(call.args)} {'was' if len(call.args) == 1 else 'were'} given; its "
            f"signature is {sinfo_to_str(fsinfo)}", call.span)
    vmap: dict[tir.Var, tir.PrimExpr] = {}
    for i, (param, arg) in enumerate(zip(fsinfo.params, call.args)):
        asinfo = arg_sinfo(arg, ctx)
        if not may_be_base_of(param, asinfo):
            raise StructInfoError(
                f"{expr_to_str(call)}: argument {i} ({expr_to_str(arg)}) of {callee} has struct "
                f"info {sinfo_to_str(asinfo)}, which cannot match parameter struct info "
                f"{sinfo_to_str(param)}", call.span)
        _bind_params(param, asinfo, vmap)
    ret = substitute_sinfo(fsinfo.ret, vmap)
    # What is left of the callee's own variables is unknown at the call site:
    # parameters' variables the arguments did not bind, and (for a global
    # callee, which has its own scope) variables defined inside the callee.
    caller_vars = {id(v) for arg in call.args for v in collect_shape_vars(arg.struct_info)}
    param_vars = {id(v) for p in fsinfo.params for v in collect_shape_vars(p)}
    ret_vars = collect_shape_vars(ret)
    keep = {id(v) for v in ret_vars
            if id(v) in caller_vars or (not global_callee and id(v) not in param_vars)}
    if len(keep) != len(ret_vars):
        ret = erase_to_ndim(ret, keep)
    return ret


def _sinfo_args_result(call: Call) -> StructInfo:
    if not call.sinfo_args:
        return ObjectStructInfo()
    if len(call.sinfo_args) == 1:
        return call.sinfo_args[0]
    return TupleStructInfo(call.sinfo_args)


_OPDEFS: dict[str, object] = {}  # cache: operators are never unregistered
_EMPTY_CTX = InferContext()


def _operand_vdevice(call: Call) -> str | None:
    """The virtual device of an operator's tensor operands (tuple fields
    included) when they name exactly one, else None."""
    found: str | None = None
    stack = list(call.args)
    while stack:
        a = stack.pop()
        if type(a) is Tuple:
            stack.extend(a.fields)
            continue
        s = getattr(a, "struct_info", None)
        if type(s) is TupleStructInfo:
            stack.extend(s.fields)
            continue
        v = getattr(s, "vdevice", None)
        if v is not None:
            if found is not None and v != found:
                return None
            found = v
    return found


def _on_vdevice(sinfo: StructInfo, vdevice: str) -> StructInfo:
    """``sinfo`` with its tensors that name no virtual device placed on ``vdevice``:
    as TVM 0.27 infers, an operator's results live where its operands do."""
    if type(sinfo) is TensorStructInfo:
        if sinfo.vdevice is not None:
            return sinfo
        return TensorStructInfo(sinfo.shape, sinfo.dtype, sinfo.ndim, span=sinfo.span,
                                vdevice=vdevice)
    if type(sinfo) is TupleStructInfo:
        return TupleStructInfo([_on_vdevice(f, vdevice) for f in sinfo.fields], span=sinfo.span)
    return sinfo


def _infer_call(call: Call, ctx: InferContext | None) -> StructInfo:
    op = call.op
    if isinstance(op, Op):
        opdef = _OPDEFS.get(op.name)
        if opdef is None:
            try:
                opdef = _OPDEFS[op.name] = get_op(op.name)
            except KeyError as exc:
                raise StructInfoError(str(exc.args[0]), call.span or op.span) from None
        result = opdef.infer(call, ctx or _EMPTY_CTX)
        if opdef.category == "compute":
            vdevice = _operand_vdevice(call)
            if vdevice is not None:
                result = _on_vdevice(result, vdevice)
        return result
    if isinstance(op, ExternFunc):
        return _sinfo_args_result(call)
    if isinstance(op, GlobalVar):
        fsinfo = None
        if ctx is not None:
            fsinfo = ctx.globals.get(op.name_hint)
        if fsinfo is None:
            fsinfo = op.struct_info
        if isinstance(fsinfo, FuncStructInfo):
            return derive_call_ret(call, fsinfo, f"cls.{op.name_hint}", ctx)
        if fsinfo is not None and not isinstance(fsinfo, ObjectStructInfo):
            raise StructInfoError(f"{expr_to_str(call)}: cls.{op.name_hint} is not callable "
                                  f"(its struct info is {sinfo_to_str(fsinfo)})", call.span)
        return _sinfo_args_result(call)
    callee_sinfo = arg_sinfo(op, ctx)
    if isinstance(callee_sinfo, FuncStructInfo):
        return derive_call_ret(call, callee_sinfo, expr_to_str(op), ctx, global_callee=False)
    if isinstance(callee_sinfo, ObjectStructInfo):
        return _sinfo_args_result(call)
    raise StructInfoError(f"{expr_to_str(call)}: {expr_to_str(op)} is not callable "
                          f"(its struct info is {sinfo_to_str(callee_sinfo)})", call.span)


def _infer_if(expr: If, ctx: InferContext | None) -> StructInfo:
    cond = arg_sinfo(expr.cond, ctx)
    ok = (isinstance(cond, PrimStructInfo) and cond.dtype == "bool") or (
        isinstance(cond, TensorStructInfo) and cond.ndim in (0, -1) and cond.dtype in ("bool", "void"))
    if not ok:
        raise StructInfoError(
            f"the condition of an if must be a boolean scalar (R.Prim(\"bool\") or "
            f"R.Tensor((), dtype=\"bool\")), but {expr_to_str(expr.cond)} has struct info "
            f"{sinfo_to_str(cond)}", expr.span)
    return join(arg_sinfo(expr.true_branch, ctx), arg_sinfo(expr.false_branch, ctx))


def infer_struct_info(expr: Expr, ctx: InferContext | None = None) -> StructInfo:
    """Derive the struct info of ``expr`` from its operands.

    Calls dispatch on the callee: an ``Op`` to its ``OpDef.infer``; a
    ``GlobalVar`` to the callee's FuncStructInfo in ``ctx.globals`` (a
    PrimFunc callee gives ``sinfo_args[0]`` if present, else ``R.Tuple()``);
    a Var or closure with FuncStructInfo to its result; an ``ExternFunc``
    (``R.call_packed``) to ``sinfo_args[0]`` if given, else ``R.Object``.
    Operands without struct info are inferred recursively.

    Raises StructInfoError naming the operator, the operands' struct info and
    the call's span.
    """
    if isinstance(expr, Call):
        return _infer_call(expr, ctx)
    if isinstance(expr, Tuple):
        return TupleStructInfo([arg_sinfo(f, ctx) for f in expr.fields])
    if isinstance(expr, TupleGetItem):
        tsinfo = arg_sinfo(expr.tuple_value, ctx)
        if not isinstance(tsinfo, TupleStructInfo):
            raise StructInfoError(
                f"{expr_to_str(expr)}: indexing needs a tuple, but {expr_to_str(expr.tuple_value)} "
                f"has struct info {sinfo_to_str(tsinfo)}", expr.span)
        if not 0 <= expr.index < len(tsinfo.fields):
            raise StructInfoError(
                f"{expr_to_str(expr)}: index {expr.index} is out of range for "
                f"{sinfo_to_str(tsinfo)} with {len(tsinfo.fields)} field(s)", expr.span)
        return tsinfo.fields[expr.index]
    if isinstance(expr, If):
        return _infer_if(expr, ctx)
    if isinstance(expr, SeqExpr):
        return arg_sinfo(expr.body, ctx)
    if isinstance(expr, Function):
        ret = expr.ret_struct_info or arg_sinfo(expr.body, ctx)
        params = []
        for p in expr.params:
            if p.struct_info is None:
                raise StructInfoError(f"function parameter {p.name_hint} has no struct info",
                                      p.span or expr.span)
            params.append(p.struct_info)
        return FuncStructInfo(params, ret, expr.is_pure)
    if isinstance(expr, GlobalVar):
        if ctx is not None and expr.name_hint in ctx.globals:
            return ctx.globals[expr.name_hint]
        return expr.struct_info or ObjectStructInfo()
    if isinstance(expr, Var):
        if expr.struct_info is None:
            raise StructInfoError(f"variable {expr.name_hint} has no struct info", expr.span)
        return expr.struct_info
    if isinstance(expr, Constant):
        return TensorStructInfo(expr.data.shape, str(expr.data.dtype))
    if isinstance(expr, ShapeExpr):
        return ShapeStructInfo(expr.values)
    if isinstance(expr, PrimValue):
        return PrimStructInfo(expr.value.dtype, expr.value)
    if isinstance(expr, (StringImm, DataTypeImm, ExternFunc, Op)):
        return expr.struct_info or ObjectStructInfo()
    raise StructInfoError(f"cannot infer struct info of {type(expr).__name__}",
                          getattr(expr, "span", None))


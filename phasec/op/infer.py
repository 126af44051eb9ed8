"""Struct-info inference: the struct info of an expression from its operands.

:func:`infer_struct_info` dispatches calls on their callee: an operator to
its ``OpDef.infer`` (the registry), a function to its signature
(:func:`derive_call_ret`). The struct-info lattice it relies on is
:mod:`phasec.arith.lattice`; the spellings in its messages are
:mod:`phasec.ir.text`.

Errors are :class:`phasec.errors.StructInfoError` carrying the call's span,
naming the operator and the operands' struct info.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from phasec.arith.lattice import (
    collect_shape_vars, erase_to_ndim, join, may_be_base_of, substitute_sinfo,
)
from phasec.errors import StructInfoError, counted
from phasec.ir import tir
from phasec.ir.expr import (
    Call, Constant, DataTypeImm, Expr, ExternFunc, Function, GlobalVar, If, Op, PrimValue,
    SeqExpr, ShapeExpr, StringImm, Tuple, TupleGetItem, Var,
)
from phasec.ir.struct_info import (
    FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
    TensorStructInfo, TupleStructInfo,
)
from phasec.ir.text import expr_to_str, sinfo_to_str
from phasec.op.registry import InferContext, get_op

if TYPE_CHECKING:
    from phasec.ir.module import IRModule

__all__ = [
    "infer_struct_info", "arg_sinfo", "call_error", "context_from_module", "derive_call_ret",
    "prim_func_sinfo", "InferContext",
]


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
    if mod is None:
        return InferContext()
    funcs = mod.functions if hasattr(mod, "functions") else mod
    globals_: dict[str, StructInfo] = {}
    for name, func in funcs.items():
        if isinstance(func, Function):
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
    asinfos = [arg_sinfo(arg, ctx) for arg in call.args]
    # The parameters' variables are bound from the arguments first (as TVM's
    # DeriveCallRetStructInfo does): they are the callee's, even where the
    # call sits inside the callee (a recursive call with a grown shape).
    for param, asinfo in zip(fsinfo.params, asinfos):
        _bind_params(param, asinfo, vmap)
    for i, (param, arg, asinfo) in enumerate(zip(fsinfo.params, call.args, asinfos)):
        if not may_be_base_of(substitute_sinfo(param, vmap) if vmap else param, asinfo):
            raise StructInfoError(
                f"{expr_to_str(call)}: argument {i} ({expr_to_str(arg)}) of {callee} has struct "
                f"info {sinfo_to_str(asinfo)}, which cannot match parameter struct info "
                f"{sinfo_to_str(param)}", call.span)
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


"""Helpers the rules share: purity of calls, memoized inference, spelling.

The struct-info keys the inference caches use are :mod:`phasec.verifier.keys`.
"""

from __future__ import annotations

from typing import Any

from phasec.errors import StructInfoError
from phasec.ir import tir
from phasec.ir.expr import (
    Call, ExternFunc, Function, GlobalVar, Op, Tuple, Var,
)
from phasec.arith.lattice import is_base_of, may_be_base_of
from phasec.ir.text import expr_to_str, sinfo_to_str
from phasec.op.infer import infer_struct_info
from phasec.ir.struct_info import (
    FuncStructInfo, StructInfo,
)

from phasec.verifier.context import Context
from phasec.ir.memo import BoundedMemo

__all__ = ["FORCE_PURE", "is_force_pure", "impure_reason", "infer_call", "infer_expr",
           "op_spelling", "sinfo_to_str", "expr_to_str", "callee_spelling", "agreement",
           "prim_func_is_pure"]

FORCE_PURE = "relax.force_pure"


def is_force_pure(func: Function) -> bool:
    """Does the function carry a truthy ``relax.force_pure`` attribute?"""
    return bool(func.attrs.get(FORCE_PURE, False))


def op_spelling(name: str) -> str:
    """``relax.nn.relu`` -> ``R.nn.relu`` (how users wrote it)."""
    return "R." + name.removeprefix("relax.")


def callee_spelling(call: Call) -> str:
    op = call.op
    if isinstance(op, Op):
        return op_spelling(op.name)
    if isinstance(op, ExternFunc):
        return f"R.call_packed({op.global_symbol!r}, ...)"
    try:
        return expr_to_str(op)
    except Exception:  # odd callee: a name is enough for a message
        return type(op).__name__


def impure_reason(ctx: Context, call: Call, opdef: Any) -> str | None:
    """Why ``call`` has side effects (a phrase for messages), or None when pure.

    Impure: operators registered impure, packed calls (``R.call_packed``) unless
    the ExternFunc's own struct info declares it pure,
    direct calls of PrimFuncs (they write their output arguments), and calls
    of functions or callables whose struct info says impure. A callee whose
    purity cannot be known (no callable struct info) counts as pure here; the
    struct-info rules report it.
    """
    op = call.op
    t = type(op)
    if t is Op:
        if opdef is not None and not opdef.pure:
            return f"{op_spelling(op.name)} has side effects"
        return None
    if t is ExternFunc:
        sinfo = op.struct_info
        if isinstance(sinfo, FuncStructInfo) and sinfo.purity:
            # declared pure, as TVM's R.ExternFunc(name, R.Callable(..., purity=True)) that
            # LowerRuntimeBuiltin emits for R.memory.view
            return None
        return f"the packed call R.call_packed({op.global_symbol!r}, ...) has side effects"
    if t is GlobalVar:
        target = ctx.lookup(op)
        if isinstance(target, tir.PrimFunc) and not prim_func_is_pure(target):
            return f"the direct call of PrimFunc cls.{op.name_hint} writes its arguments"
        if isinstance(target, Function) and not target.is_pure:
            return f"cls.{op.name_hint} is an impure function"
        return None
    if isinstance(op, Var):
        sinfo = op.struct_info
        if isinstance(sinfo, FuncStructInfo) and not sinfo.purity:
            return f"{op.name_hint} is an impure callable"
    return None


#: call key -> inferred struct info, across checks, for calls of operators
#: none of whose operands is a GlobalVar (see _module_free): verification
#: after each pass infers the same calls again, and their inference reads
#: nothing but the key (a GlobalVar is keyed by its name, whose meaning is
#: the module's).
_SHARED_INFERENCE = BoundedMemo(8192)


def _module_free(call: Call) -> bool:
    if type(call.op) is not Op:
        return False
    for a in call.args:
        t = type(a)
        if t is GlobalVar or (t is Tuple and any(type(f) in (GlobalVar, Tuple) for f in a.fields)):
            return False
    return True


def infer_call(ctx: Context, call: Call) -> tuple[StructInfo | None, str | None]:
    """Re-infer ``call`` from its operands' struct info: ``(sinfo, None)`` or
    ``(None, error message)``. Memoized for the current call (several rules
    ask) and cached by struct-info key for the whole check (for operator
    calls that need no module, across checks)."""
    memo = ctx._infer_memo
    if memo[0] is call:
        return memo[1], memo[2]
    key = ctx.keys.call(call)
    cached = ctx.infer_cache.get(key) if key is not None else None
    shared = key is not None and _module_free(call)
    if cached is None and shared:
        cached = _SHARED_INFERENCE.get(key)
    if cached is not None:
        sinfo, error = cached, None
    else:
        sinfo, error = infer_expr(ctx, call)
        if key is not None and sinfo is not None:
            ctx.infer_cache[key] = sinfo
            if shared:
                _SHARED_INFERENCE.put(key, sinfo)
    ctx._infer_memo = (call, sinfo, error)
    return sinfo, error


def agreement(ctx: Context, annotation: StructInfo, inferred: StructInfo) -> str:
    """``"ok"`` when ``annotation`` is implied by ``inferred`` (``is_base_of``),
    ``"conflict"`` when it provably contradicts it (``may_be_base_of`` fails),
    else ``"unproven"`` (more specific than inference can show)."""
    if annotation is inferred:
        return "ok"
    key: Any = (ctx.keys.sinfo(annotation), ctx.keys.sinfo(inferred))
    try:
        hash(key)
    except TypeError:
        key = None
    if key is not None:
        if key[0] == key[1]:
            return "ok"
        verdict = ctx.verdict_cache.get(key)
        if verdict is not None:
            return verdict
    if is_base_of(annotation, inferred):
        verdict = "ok"
    elif may_be_base_of(annotation, inferred):
        verdict = "unproven"
    else:
        verdict = "conflict"
    if key is not None:
        ctx.verdict_cache[key] = verdict
    return verdict


def infer_expr(ctx: Context, expr: Any) -> tuple[StructInfo | None, str | None]:
    """Inference of any expression, turning every failure into a message."""
    try:
        return infer_struct_info(expr, ctx.infer_context()), None
    except StructInfoError as exc:
        return None, exc.message
    except RecursionError:
        return None, "the expression is nested too deeply to infer its struct info"
    except Exception as exc:  # a malformed operand must not crash the verifier
        return None, f"struct info inference failed ({type(exc).__name__}: {exc})"


#: host calls with effects (TVM's kOpaque / kUpdateState call effect kinds)
_EFFECT_HOST_CALLS = frozenset({"call_packed", "call_cpacked", "anylist_setitem_call_packed",
                                "anylist_setitem_call_cpacked"})


def prim_func_is_pure(func: tir.PrimFunc) -> bool:
    """TVM's purity of a PrimFunc (what a direct call of it may do): it
    stores into no buffer but those it allocates, and calls no host function
    with effects (a packed call). Kernels, which write their outputs, are
    impure; a helper that computes and returns a value (``-> T.bool``) is pure."""
    own: set[int] = set()
    stmts: list[Any] = [func.body]
    exprs: list[Any] = []
    while stmts:
        s = stmts.pop()
        t = type(s)
        if t is tir.Allocate:
            own.add(id(s.buffer))
        elif t is tir.BufferStore and id(s.buffer) not in own:
            return False
        stmts.extend(tir.stmt_children(s))
        for f in type(s)._fields:
            v = getattr(s, f)
            if isinstance(v, tir.PrimExpr):
                exprs.append(v)
    while exprs:
        e = exprs.pop()
        if type(e) is tir.Call and e.name in _EFFECT_HOST_CALLS:
            return False
        exprs.extend(tir.expr_children(e))
    return True

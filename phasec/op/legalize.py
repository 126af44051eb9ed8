"""Legalization drivers: turn one operator call, or one fused group, into a
PrimFunc.

Each operator's lowering (its TE definition, or a Relax-level lowering to a
VM builtin or packed call) lives beside its definition in its family module
(:mod:`.elementwise`, :mod:`.nn`, :mod:`.manipulate`, :mod:`.creation`...),
registered with :func:`~phasec.op._lowering.legalizes` into
:data:`LEGALIZE` (see :mod:`phasec.op._lowering` for the convention and
the shared TE helpers). This module holds what is common to all of them:

* :func:`lower_call` / :func:`legalize_call` — one operator call.
* :func:`lower_fused` / :func:`legalize_fused` — a ``Primitive`` function
  produced by FuseOps: one PrimFunc in which injective operators are inlined
  into their consumers and a reduction anchor (matmul, conv2d, sum...) is
  computed together with its elementwise epilogue (see :mod:`phasec.te`
  for the difference between inlining and fusion).

**PrimFunc calling convention** (what ``call_tir`` passes, TVM 0.27's): the
input buffers (one per tensor operand, in operand order, tuple operands
flattened; 0-d constants are folded into the kernel instead), then one int64
scalar parameter per symbolic dimension that no buffer, input or output,
has as a bare dimension (the ``n`` of ``R.zeros(R.shape([2 * n]))``; the
``n`` of ``R.zeros(R.shape([n, 4]))`` is bound by the output buffer's
shape), then the output buffers (several for a tuple result, e.g.
``split``). ``call_tir`` passes the scalars in its argument tuple, after the
tensors, as ``R.prim_value`` (TVM 0.27's ``R.call_tir`` has no ``tir_vars``
operand; phasec still reads one, written by other producers).
:class:`LoweredCall` lists exactly these: the Relax operands for the input
buffers and the Relax-level values for the scalar parameters.

Importing this module imports the operator definitions, so the registries
are complete for whoever reads them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from phasec.ir import tir
from phasec import te
from phasec.ir.expr import (
    Call, Constant, Expr, Function, MatchCast, Op, SeqExpr, Tuple, TupleGetItem, Var, VarBinding,
)
from phasec.ir.struct_info import PrimStructInfo, StructInfo, TensorStructInfo, TupleStructInfo
from phasec.te import Tensor
from phasec.te.schedules.workloads import constant_tensors
from phasec.ir.tir import PrimExpr, PrimFunc
from phasec.op import definitions  # noqa: F401  (each family registers its lowerings)
from phasec.op._lowering import LegalizeError, _const, _script, legalizes, legalizes_to_relax
from phasec.op.infer import infer_struct_info
from phasec.op.registry import LEGALIZE, LEGALIZE_RELAX, LOWERS_TO, LegalizeFn

__all__ = ["LEGALIZE", "LEGALIZE_RELAX", "LOWERS_TO", "legalizes", "legalizes_to_relax",
           "LegalizeError",
           "LoweredCall", "lower_call", "legalize_call", "lower_fused", "legalize_fused",
           "has_legalization"]


def has_legalization(op_name: str) -> bool:
    """True when ``op_name`` (``relax.add`` or ``R.add``) has a TE definition
    or a Relax-level lowering."""
    if op_name.startswith("R."):
        op_name = "relax." + op_name[2:]
    return op_name in LEGALIZE or op_name in LEGALIZE_RELAX


# --------------------------------------------------------------------------
# Drivers
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class LoweredCall:
    """A PrimFunc plus what a ``call_tir`` to it passes.

    ``args``: one Relax expression per input parameter (a buffer, or the
    scalar of an ``R.Prim`` operand), in order
    (operands of the call, or for a fused function its parameters and the
    non-scalar constants of its body; a field of a tuple-typed operand is a
    ``TupleGetItem``). ``tir_vars``: the Relax-level values (symbolic
    variables of the caller, or of the fused function) of the scalar
    parameters, in order (``call_tir`` passes them as ``R.prim_value``
    after ``args``); empty when there are none. ``out_sinfo``: the
    struct info of the result (a TupleStructInfo for several outputs).
    """

    prim_func: PrimFunc
    args: tuple[Expr, ...]
    tir_vars: tuple[PrimExpr, ...]
    out_sinfo: StructInfo


class _Inputs:
    """Placeholders for Relax operands (deduplicated by identity): tensors,
    and scalars for R.Prim operands of unknown value. ``args`` lists the
    Relax operands in parameter order, ``params`` the placeholder or scalar
    each one becomes."""

    def __init__(self) -> None:
        self.tensors: list[Tensor] = []
        self.scalars: list[tir.Var] = []
        self.args: list[Expr] = []
        self.params: list[Tensor | tir.Var] = []
        self._by_id: dict[int, Tensor | tir.Var] = {}
        self._names: set[str] = set()

    def _fresh(self, hint: str) -> str:
        name, k = hint, 1
        while name in self._names:
            name, k = f"{hint}_{k}", k + 1
        self._names.add(name)
        return name

    def tensor(self, expr: Expr, hint: str) -> Tensor:
        if isinstance(expr, Constant) and expr.data.ndim == 0:
            value = expr.data.item()
            dtype = str(expr.data.dtype)
            return te.compute((), lambda: _const(value, dtype), name="T_const")
        t = self._by_id.get(id(expr))
        if t is not None:
            return t
        sinfo = expr.struct_info
        if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None or sinfo.dtype == "void":
            raise LegalizeError(
                f"cannot legalize: operand {hint} needs a tensor type with known shape and dtype "
                "(symbolic dimensions are fine)")
        t = te.placeholder(sinfo.shape, sinfo.dtype, self._fresh(hint))
        self._by_id[id(expr)] = t
        self.tensors.append(t)
        self.args.append(expr)
        self.params.append(t)
        return t

    def scalar(self, expr: Expr, hint: str) -> tir.Var:
        v = self._by_id.get(id(expr))
        if v is None:
            v = tir.Var(self._fresh(hint), expr.struct_info.dtype)
            self._by_id[id(expr)] = v
            self.scalars.append(v)
            self.args.append(expr)
            self.params.append(v)
        return v


def _arg_hint(expr: Expr, default: str) -> str:
    if isinstance(expr, Var):
        return expr.name_hint
    if isinstance(expr, Constant):
        return "const"
    return default


def _operand(inputs: _Inputs, expr: Expr, pos: int, scalars: bool = False) -> Any:
    """The TE operand for a Relax operand; ``scalars``: an R.Prim variable of
    unknown value becomes a scalar parameter (see ``scalar_operands``)."""
    if isinstance(expr, Tuple):
        return [_operand(inputs, f, pos) for f in expr.fields]
    if scalars and _unknown_prim(expr):
        return inputs.scalar(expr, _arg_hint(expr, f"arg{pos}"))
    sinfo = expr.struct_info
    if isinstance(sinfo, TensorStructInfo) or isinstance(expr, Constant):
        return inputs.tensor(expr, _arg_hint(expr, f"arg{pos}"))
    if isinstance(sinfo, TupleStructInfo):
        out = []
        for k, f in enumerate(sinfo.fields):
            item = TupleGetItem(expr, k)
            if not isinstance(f, TensorStructInfo):
                raise LegalizeError("cannot legalize: nested non-tensor tuple operand")
            out.append(inputs.tensor(item, f"{_arg_hint(expr, f'arg{pos}')}_{k}"))
        return out
    return expr


def _unknown_prim(expr: Any) -> bool:
    return (isinstance(expr, Var) and isinstance(expr.struct_info, PrimStructInfo)
            and expr.struct_info.value is None)


def _takes_scalars(fn: LegalizeFn) -> bool:
    return getattr(fn, "scalar_operands", False)


def _legalize_fn(call: Call) -> LegalizeFn:
    if not isinstance(call.op, Op):
        raise LegalizeError("cannot legalize a call whose callee is not an operator")
    fn = LEGALIZE.get(call.op.name)
    if fn is None:
        raise LegalizeError(f"operator {_script(call)} has no legalization to TIR")
    return fn


def _as_list(result: Tensor | list[Tensor]) -> list[Tensor]:
    return list(result) if isinstance(result, (list, tuple)) else [result]


def _finish_outputs(outputs: list[Tensor]) -> list[Tensor]:
    """Every output a distinct compute (copies for inputs or repeated outputs)."""
    seen: set[int] = set()
    fixed = []
    for k, t in enumerate(outputs):
        if t.is_placeholder or id(t) in seen:
            src = t
            t = te.compute(src.shape, lambda *i, src=src: src[i], name=f"T_output{k}")
        seen.add(id(t))
        fixed.append(t)
    return fixed


def _build(inputs: _Inputs, outputs: list[Tensor], out_sinfo: StructInfo,
           schedule_hints: Any) -> LoweredCall:
    lowered = te.lower([*inputs.tensors, *inputs.scalars, *_finish_outputs(outputs)],
                       schedule_hints)
    func = lowered.prim_func
    tir_vars = lowered.scalar_params
    if tir_vars:
        # te puts the scalar parameters last (the operand scalars first);
        # call_tir passes them in its argument tuple, so the operand scalars
        # take their operands' places and the symbolic dimensions (as
        # R.prim_value) follow the inputs, before the outputs (TVM 0.27's
        # convention: its call_tir has no separate tir_vars operand).
        n_in = len(inputs.tensors)
        buffers = [p for p in func.params if not isinstance(p, tir.Var)]
        scalars = [p for p in func.params if isinstance(p, tir.Var)]
        fresh = {id(orig): p for orig, p in zip(tir_vars, scalars)}
        in_buffers = iter(buffers[:n_in])
        params = [next(in_buffers) if isinstance(p, Tensor) else fresh[id(p)]
                  for p in inputs.params]
        operand_scalars = {id(v) for v in inputs.scalars}
        dims = [(orig, p) for orig, p in zip(tir_vars, scalars) if id(orig) not in operand_scalars]
        func = tir.PrimFunc((*params, *(p for _, p in dims), *buffers[n_in:]), func.body,
                            func.attrs, span=func.span)
        tir_vars = tuple(orig for orig, _ in dims)
    return LoweredCall(func, tuple(inputs.args), tir_vars, out_sinfo)


def lower_call(call: Call, schedule_hints: Any = True) -> LoweredCall:
    """Lower one operator call to a PrimFunc and its ``call_tir`` operands."""
    fn = _legalize_fn(call)
    inputs = _Inputs()
    operands = [_operand(inputs, a, k, _takes_scalars(fn)) for k, a in enumerate(call.args)]
    outputs = _as_list(fn(call, operands))
    sinfo = call.struct_info
    if sinfo is None:
        sinfo = infer_struct_info(call)
    return _build(inputs, outputs, sinfo, schedule_hints)


def legalize_call(call: Call, schedule_hints: Any = True) -> PrimFunc:
    """The PrimFunc computing one operator call (see the module docstring for
    its parameters)."""
    return lower_call(call, schedule_hints).prim_func


def lower_fused(func: Function, schedule_hints: Any = True,
                constant_params: Collection[int] = ()) -> LoweredCall:
    """Lower a fused (``Primitive``) function to ONE PrimFunc.

    The body must be bindings of operator calls, tuples, tuple indexing and
    variable aliases over the parameters (and constants). ``args`` of the
    result are the parameters (tuple parameters as TupleGetItems) followed
    by the non-scalar constants used in the body. ``constant_params``: the
    positions of tensor parameters every caller passes a constant (weights):
    the schedules may plan for a copy prepared once per build (see
    ``ScheduleOptions.constant_inputs``).
    """
    if not isinstance(func, Function):
        raise LegalizeError(f"lower_fused expects a Relax Function, got {type(func).__name__}")
    if not isinstance(func.body, SeqExpr):
        raise LegalizeError("lower_fused: the function body must be a SeqExpr")
    inputs = _Inputs()
    env: dict[Var, Any] = {}
    scalar_params = _scalar_params(func)
    for k, p in enumerate(func.params):
        env[p] = _operand(inputs, p, k, p in scalar_params)
    names = frozenset(env[func.params[k]].name for k in constant_params
                      if 0 <= k < len(func.params) and isinstance(env[func.params[k]], Tensor))
    if names:
        opts = te.ScheduleOptions.make(schedule_hints)
        if opts.tile:  # (without hints no schedule reads it)
            schedule_hints = dataclasses.replace(opts, constant_inputs=names)
    body = func.body

    def value_of(expr: Expr, where: str) -> Any:
        if isinstance(expr, Var):
            if expr not in env:
                raise LegalizeError(f"lower_fused: {expr.name_hint} is used before it is defined")
            return env[expr]
        if isinstance(expr, Constant):
            t = inputs.tensor(expr, "const")
            constants.add(t.name)  # (a constant of the body is a constant of the module)
            return t
        if isinstance(expr, Tuple):
            return [value_of(f, where) for f in expr.fields]
        return expr  # shapes, prim values... (operands the TE definitions read directly)

    # the weights every caller passes a constant: a schedule's per-call cost
    # estimate leaves out the transforms PackConstantWeights does once
    with constant_tensors(names) as constants:
        for block in body.blocks:
            for b in block.bindings:
                where = f"binding {b.var.name_hint}"
                value = b.value
                if isinstance(b, MatchCast) or (isinstance(b, VarBinding) and isinstance(value, Var)):
                    env[b.var] = value_of(value, where)
                elif isinstance(value, Call):
                    fn = _legalize_fn(value)
                    operands = [value_of(a, where) for a in value.args]
                    result = fn(value, operands)
                    env[b.var] = list(result) if isinstance(result, (list, tuple)) else result
                elif isinstance(value, (Tuple, Constant)):
                    env[b.var] = value_of(value, where)
                elif isinstance(value, TupleGetItem):
                    tup = value_of(value.tuple_value, where)
                    if not isinstance(tup, list):
                        raise LegalizeError(f"lower_fused: {where} indexes a non-tuple")
                    env[b.var] = tup[value.index]
                else:
                    raise LegalizeError(f"lower_fused: {where} is a {type(value).__name__}, which "
                                        "cannot be part of a fused kernel")
    result = value_of(body.body, "the result")
    outputs = result if isinstance(result, list) else [result]
    flat: list[Tensor] = []
    stack = list(reversed(outputs))
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
        elif isinstance(item, Tensor):
            flat.append(item)
        else:
            raise LegalizeError("lower_fused: the function must return tensors")
    sinfo = func.ret_struct_info or body.struct_info
    return _build(inputs, flat, sinfo, schedule_hints)


def _scalar_params(func: Function) -> set[Var]:
    """The R.Prim parameters of unknown value that only operators taking
    scalar operands use: they become scalar parameters of the kernel."""
    verdict: dict[Var, bool] = {}
    for block in func.body.blocks:
        for b in block.bindings:
            if isinstance(b.value, Call) and isinstance(b.value.op, Op):
                takes = b.value.op.name in LEGALIZE and _takes_scalars(LEGALIZE[b.value.op.name])
                for a in b.value.args:
                    if isinstance(a, Var) and _unknown_prim(a):
                        verdict[a] = verdict.get(a, True) and takes
    return {p for p in func.params if verdict.get(p, False)}


def legalize_fused(func: Function, schedule_hints: Any = True) -> PrimFunc:
    """One PrimFunc for a fused (``Primitive``) function; see :func:`lower_fused`."""
    return lower_fused(func, schedule_hints).prim_func

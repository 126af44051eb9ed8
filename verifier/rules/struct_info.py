"""WF4xx: struct info — presence, agreement with inference, call signatures (every phase).

Agreement follows TVM's distinction between *provably wrong* and *not
provable*: an annotation the inferred struct info implies (``is_base_of``) is
fine; one that contradicts it (``may_be_base_of`` fails: kind, dtype, ndim or
a constant dimension differ) is an error; one that is merely more specific
than inference can show (``n`` where inference knows only ``ndim=2``) is a
warning — it holds only if checked at run time, which is R.match_cast's job.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Sequence
from typing import Any

from phasec.errors import StructInfoError, counted
from phasec.ir import tir
from phasec import arith
from phasec.ir.expr import (
    Binding, Call, ExternFunc, GlobalVar, If, MatchCast, Op, SeqExpr, ShapeExpr, Tuple,
    TupleGetItem, Var, VarBinding,
)
from phasec.arith.lattice import is_base_of, may_be_base_of
from phasec.ir.text import prim_expr_to_str
from phasec.op import call_op, normalize_attrs
from phasec.op.registry import list_ops
from phasec.ir.struct_info import (
    PrimStructInfo, StructInfo, TensorStructInfo, TupleStructInfo,
)
from phasec.ir.module import IRModule
from phasec.ir.phase import Phase

from phasec.verifier.context import Context
from phasec.verifier.diagnostics import WARNING
from phasec.verifier.util import agreement, callee_spelling, infer_call, infer_expr, sinfo_to_str
from phasec.verifier.injection import (
    Choose, conflicting_sinfo, copy_kernel, entry_function, insert_bindings, pick, replace_block,
    top_bindings, with_body,
)
from phasec.verifier.rules.base import Rule, TVMCheck, register

_CALL_TIR_OPS = frozenset({"relax.call_tir", "relax.call_tir_inplace", "relax.call_tir_with_grad"})


@register
class MissingStructInfo(Rule):
    code = "WF401"
    title = "Missing struct info"
    explanation = """
    Every variable (parameter or binding target) and every function's
    return must carry struct info: the static type and shape that operator
    inference, the VM's shape checks and every pass rely on. The TVMScript
    parser fills it in by inference; IR built by hand or by a pass must set
    it (use R.Object when nothing is known).
    """
    help = "set the struct info (annotate the variable, or infer it with phasec.op.infer)"
    tvm = TVMCheck.NOT_CHECKED
    tvm_note = "TVM infers missing struct info while parsing."
    injection = "bind a variable without struct info"

    def var_def(self, ctx: Context, var: Any, kind: str) -> None:
        if var.struct_info is not None:
            return
        causes = ctx.state(self, _Causes)
        binding = ctx.binding
        if kind != "param" and binding is not None and binding.var is var:
            cause, upstream = causes.cause_of(ctx, binding)
            if cause is not None:  # a consequence of an error: count it, do not report it
                causes.of[var] = cause
                if upstream:
                    causes.followers[cause] = causes.followers.get(cause, 0) + 1
                return
        what = "parameter" if kind == "param" else "variable"
        ctx.report(self, f"{what} '{var.name_hint}' has no struct info", var)
        causes.of[var] = len(ctx.diagnostics) - 1

    def exit_function(self, ctx: Context, func: Any) -> None:
        causes = ctx.state(self, _Causes)
        # After the body: a return without struct info is most often the
        # consequence of an error in the body (a call whose inference failed
        # leaves its result, and so the function's return, unknown). Then
        # that error is the one to fix, and the only one reported.
        if func.ret_struct_info is None and not causes.explains_return(func):
            ctx.report(self, "function has no return struct info", func,
                       help="annotate the function's return (def f(...) -> R.Tensor(...) in "
                            "TVMScript; ret_struct_info when building IR)")
        if func is ctx.top_func:
            causes.annotate(ctx)

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        return insert_bindings(mod, lambda x: [VarBinding(Var("untyped", None), x)], choose)


@register
class CallAnnotationMismatch(Rule):
    code = "WF402"
    call_keyed = True
    title = "Binding annotation disagrees with the inferred struct info of its call"
    explanation = """
    The struct info of a variable bound to a call must agree with what
    inference derives for the call from its operands' struct info: the
    annotation must be implied by (be a base of) the inferred struct info.
    An annotation that contradicts inference (another dtype, rank or
    constant dimension) is an error: every later pass and the VM would trust
    a wrong shape. An annotation that is only more specific than inference
    can prove is a warning; use R.match_cast to check it at run time.
    """
    help = "fix the annotation to the inferred struct info (or use R.match_cast to refine it)"
    tvm = TVMCheck.REFUSES
    injection = "annotate a call's result with a wrong dtype"

    def call(self, ctx: Context, call: Any, opdef: Any) -> None:
        b = ctx.binding
        if b is None or type(b) is MatchCast or not ctx.anf_ok:
            return
        annotation = b.var.struct_info
        if annotation is None or (type(call.op) is Op and opdef is None):
            return
        if type(call.op) is GlobalVar and ctx.lookup(call.op) is None:
            return
        inferred, error = infer_call(ctx, call)
        if inferred is None:
            return  # WF405 reports why inference failed
        verdict = agreement(ctx, annotation, inferred)
        if verdict == "conflict":
            ctx.report(self, f"'{b.var.name_hint}' is annotated {sinfo_to_str(annotation)} but "
                       f"{callee_spelling(call)} returns {sinfo_to_str(inferred)}", b.var)
        elif verdict == "unproven":
            ctx.report(self, f"'{b.var.name_hint}' is annotated {sinfo_to_str(annotation)}, more "
                       f"specific than {sinfo_to_str(inferred)} inferred for "
                       f"{callee_spelling(call)}; it is not checked", b.var, severity=WARNING,
                       help="use R.match_cast to check the refinement at run time")

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        cands = [(n, f, bi, ki, b) for n, f in mod.relax_functions()
                 for bi, ki, b in top_bindings(f)
                 if isinstance(b.value, Call) and isinstance(b.value.op, Op)
                 and isinstance(b.var.struct_info, TensorStructInfo)]
        if cands:
            name, func, bi, ki, b = pick(cands, choose)
            cls = type(b.var)
            bad = VarBinding(cls("wrong", conflicting_sinfo(b.var.struct_info)), b.value)
            bindings = list(func.body.blocks[bi].bindings)
            bindings.insert(ki + 1, bad)
            return mod.update({name: replace_block(func, bi, bindings)})

        def build(x: Var) -> list[Binding]:
            call = call_op("relax.stop_fusion", x) if mod.phase < Phase.LOWERING else \
                call_op("relax.call_dps_packed", ExternFunc("phasec.testing.scale2_dps"),
                        Tuple([x]), sinfo_args=[x.struct_info])
            return [VarBinding(Var("wrong", conflicting_sinfo(x.struct_info)), call)]
        return insert_bindings(mod, build, choose)


@register
class ReturnMismatch(Rule):
    code = "WF403"
    title = "Declared return struct info disagrees with the function body"
    explanation = """
    A function's declared return struct info (the -> annotation) must be
    implied by the struct info of the value its body returns. Callers derive
    the struct info of their call from the declaration, so a declaration
    that contradicts the body propagates a wrong shape or dtype to every
    call site. A declaration more specific than the body can prove is a
    warning.
    """
    help = "fix the return annotation, or R.match_cast the result before returning it"
    tvm = TVMCheck.NOT_CHECKED
    tvm_note = (
        "TVM's check_well_formed does not compare a function's body with its declared "
        "return struct info.")
    injection = "declare a return struct info the body contradicts"

    def exit_function(self, ctx: Context, func: Any) -> None:
        ret = func.ret_struct_info
        body = func.body
        if ret is None or type(body) is not SeqExpr:
            return
        result, _ = infer_expr(ctx, body.body)
        if result is None:
            return
        verdict = agreement(ctx, ret, result)
        # the SeqExpr's span is the return statement (a Var's span is its definition)
        node = body if body.span is not None else func
        if verdict == "conflict":
            ctx.report(self, f"function is declared to return {sinfo_to_str(ret)} but returns "
                       f"{sinfo_to_str(result)}", node)
        elif verdict == "unproven":
            ctx.report(self, f"function is declared to return {sinfo_to_str(ret)}, more specific "
                       f"than the {sinfo_to_str(result)} its body returns", node,
                       severity=WARNING,
                       help="R.match_cast the result before returning it")

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        name, func = entry_function(mod, choose)
        ret = conflicting_sinfo(func.ret_struct_info)
        return mod.update({name: with_body(func, list(func.body.blocks), ret=ret)})


@register
class BindingValueMismatch(Rule):
    code = "WF404"
    title = "Binding annotation incompatible with its value"
    explanation = """
    A variable bound to a value that is not a call — another variable, a
    tuple, a tuple element, a constant, an if, a function — must have struct
    info implied by the value's. For an if, each branch's result must fit
    the annotation. For R.match_cast the variable takes the target struct
    info, and a cast that can never succeed (a tuple cast to a tensor, a
    different dtype or rank) is an error.
    """
    help = "fix the annotation to the value's struct info"
    tvm = TVMCheck.REFUSES
    injection = "annotate a variable with struct info its value contradicts"

    def binding(self, ctx: Context, b: Any) -> None:
        value = b.value
        tv = type(value)
        annotation = b.var.struct_info
        if annotation is None or not ctx.anf_ok:
            return
        if type(b) is MatchCast:
            self._match_cast(ctx, b)
            return
        if tv is Call or tv is SeqExpr:
            return
        if tv is If:
            for label, branch in (("then", value.true_branch), ("else", value.false_branch)):
                if type(branch) is SeqExpr:
                    self._compare(ctx, b, annotation, branch.body, f"the {label} branch's result")
            return
        self._compare(ctx, b, annotation, value, "its value")

    def _compare(self, ctx: Context, b: Any, annotation: StructInfo, value: Any, what: str) -> None:
        sinfo, _ = infer_expr(ctx, value)
        if sinfo is None:
            return  # WF405 reports bad tuple indexing; WF001 undefined variables
        verdict = agreement(ctx, annotation, sinfo)
        if verdict == "conflict":
            ctx.report(self, f"'{b.var.name_hint}' is annotated {sinfo_to_str(annotation)} but "
                       f"{what} has struct info {sinfo_to_str(sinfo)}", b.var)
        elif verdict == "unproven":
            ctx.report(self, f"'{b.var.name_hint}' is annotated {sinfo_to_str(annotation)}, more "
                       f"specific than {what} ({sinfo_to_str(sinfo)})", b.var, severity=WARNING,
                       help="use R.match_cast to refine struct info")

    def _match_cast(self, ctx: Context, b: Any) -> None:
        target = b.struct_info
        if not is_base_of(b.var.struct_info, target):
            ctx.report(self, f"'{b.var.name_hint}' is annotated {sinfo_to_str(b.var.struct_info)} "
                       f"but R.match_cast gives {sinfo_to_str(target)}", b.var)
        if type(b.value) is Call:
            sinfo, _ = infer_call(ctx, b.value)
        else:
            sinfo, _ = infer_expr(ctx, b.value)
        if sinfo is not None and not may_be_base_of(target, sinfo):
            ctx.report(self, f"R.match_cast of {sinfo_to_str(sinfo)} to {sinfo_to_str(target)} "
                       "can never succeed", b)

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        return insert_bindings(
            mod, lambda x: [VarBinding(Var("wrong", conflicting_sinfo(x.struct_info)), x)], choose)


def _buffer_params(func: tir.PrimFunc) -> tuple[list[tir.Buffer], list[tir.Var]]:
    buffers = [p for p in func.params if type(p) is tir.Buffer]
    scalars = [p for p in func.params if type(p) is tir.Var]
    return buffers, scalars


def _provably_different(a: Any, b: Any) -> bool:
    """Do two extents provably differ? Constants and bare variables are
    decided here; only compound expressions need the simplifier."""
    if a is b:
        return False
    ta, tb = type(a), type(b)
    if ta is tir.IntImm and tb is tir.IntImm:
        return a.value != b.value
    if (ta is tir.Var or ta is tir.IntImm) and (tb is tir.Var or tb is tir.IntImm):
        return False  # n vs 4, n vs m: not provable statically
    return arith.prove_not_equal(a, b)


def _buffer_problems(kernel: str, operands: Sequence[tuple[str, StructInfo | None]],
                     buffers: Sequence[tir.Buffer], bound: dict[tir.Var, Any]) -> list[str]:
    """Each operand's tensor struct info against its buffer: ndim, dtype and
    extents (constants must match; a buffer's symbolic extent must get one
    consistent value). Returns the problems found, as messages."""
    problems: list[str] = []
    compound: list[tuple[str, int, Any, Any, str]] = []  # checked once every var is bound
    for (what, sinfo), buf in zip(operands, buffers):
        if sinfo is None:
            continue
        if type(sinfo) is not TensorStructInfo:
            problems.append(f"{what} of {kernel} has struct info {sinfo_to_str(sinfo)}, but "
                            f"buffer {buf.name} is a tensor")
            continue
        if sinfo.dtype != "void" and sinfo.dtype != buf.dtype:
            problems.append(f"{what} of {kernel} has dtype {sinfo.dtype}, but buffer {buf.name} "
                            f"has dtype {buf.dtype}")
        if sinfo.ndim != -1 and sinfo.ndim != len(buf.shape):
            problems.append(f"{what} of {kernel} has {sinfo.ndim} dimension(s), but buffer "
                            f"{buf.name} has {len(buf.shape)}")
            continue
        if sinfo.shape is None:
            continue
        for axis, (dim, bdim) in enumerate(zip(sinfo.shape, buf.shape)):
            if type(bdim) is tir.Var:
                prev = bound.get(bdim)
                if prev is None:
                    bound[bdim] = (dim, what)
                elif _provably_different(prev[0], dim):
                    problems.append(f"{what} of {kernel} gives {bdim.name} = {_dim(dim)} (axis "
                                    f"{axis} of buffer {buf.name}), but {prev[1]} gives "
                                    f"{bdim.name} = {_dim(prev[0])}")
            elif type(bdim) is tir.IntImm:
                if _provably_different(bdim, dim):
                    problems.append(f"{what} of {kernel} has extent {_dim(dim)} on axis {axis}, "
                                    f"but buffer {buf.name} has extent {_dim(bdim)}")
            else:
                compound.append((what, axis, dim, bdim, buf.name))
    # An extent such as n * 2 is fixed by the operand that binds n (a
    # T.match_buffer on an input fixes the output's extent, say).
    values = {v: value for v, (value, _) in bound.items()}
    for what, axis, dim, bdim, name in compound:
        expected = arith.simplify(arith.substitute(bdim, values)) if values else bdim
        if _provably_different(expected, dim):
            problems.append(f"{what} of {kernel} has extent {_dim(dim)} on axis {axis}, but "
                            f"buffer {name} has extent {_dim(bdim)} = {_dim(expected)}")
    return problems


def _sinfo_conflict(a: StructInfo, b: StructInfo) -> bool:
    """Two tensor struct infos that provably describe different tensors."""
    if type(a) is not TensorStructInfo or type(b) is not TensorStructInfo:
        return type(a) is not type(b)
    if "void" not in (a.dtype, b.dtype) and a.dtype != b.dtype:
        return True
    if -1 not in (a.ndim, b.ndim) and a.ndim != b.ndim:
        return True
    if a.shape is None or b.shape is None:
        return False
    return any(_provably_different(x, y) for x, y in zip(a.shape, b.shape))


def _cached_problems(rule: Rule, ctx: Context, call: Any, compute: Any) -> None:
    """Report the problems ``compute()`` finds for ``call``; calls with the
    same struct-info key (same kernel, same operand shapes) share the answer,
    so a lowered program of many similar calls is checked at dictionary speed."""
    cache = ctx.state(rule, dict)
    key = ctx.keys.call(call)
    problems = cache.get(key) if key is not None else None
    if problems is None:
        problems = compute()
        if key is not None:
            cache[key] = problems
    for message in problems:
        ctx.report(rule, message, call)


def _dim(e: Any) -> str:
    return prim_expr_to_str(e)


class _Causes:
    """Root causes of missing struct info, so that one error is reported once.

    A binding whose call fails inference (WF405) leaves its variable without
    struct info, and so does every binding that uses that variable, and so
    on: those follow-on WF401s are counted against the root diagnostic
    ("n more bindings depend on it") instead of being reported each, with
    advice that would not fix them.
    """

    __slots__ = ("of", "followers")

    def __init__(self) -> None:
        self.of: dict[Any, int] = {}  # variable without struct info -> root diagnostic index
        self.followers: dict[int, int] = {}  # root diagnostic index -> follow-on count

    def cause_of(self, ctx: Context, binding: Any) -> tuple[int | None, bool]:
        """The diagnostic that explains why ``binding``'s variable has no struct
        info, and whether it is upstream (an operand's) rather than this binding's."""
        for operand in _direct_operands(binding.value):
            root = self.of.get(operand)
            if root is not None:
                return root, True
        # An error reported on this very binding (e.g. WF405 for its call).
        name = binding.var.name_hint
        for index in range(len(ctx.diagnostics) - 1, -1, -1):
            d = ctx.diagnostics[index]
            if d.binding != name or d.function != ctx.func_name:
                break
            if d.code != MissingStructInfo.code:
                return index, False
        return None, False

    def explains_return(self, func: Any) -> bool:
        """Whether ``func`` returns a value whose missing struct info has a cause
        already reported (so its own missing return struct info is a consequence)."""
        body = getattr(func, "body", None)
        result = getattr(body, "body", body)
        return any(v in self.of for v in _direct_operands(result))

    def annotate(self, ctx: Context) -> None:
        for index, count in self.followers.items():
            d = ctx.diagnostics[index]
            ctx.diagnostics[index] = dataclasses.replace(
                d, message=f"{d.message}; {count} more binding{'s' if count != 1 else ''} "
                           f"depend{'s' if count == 1 else ''} on it and "
                           f"{'is' if count == 1 else 'are'} not reported")
        self.followers.clear()


def _direct_operands(value: Any) -> list[Any]:
    """The variables a binding value reads directly (call operands, tuple fields...)."""
    if isinstance(value, Var):
        return [value]
    if isinstance(value, Call):
        items = list(value.args) + ([value.op] if isinstance(value.op, Var) else [])
    elif isinstance(value, Tuple):
        items = list(value.fields)
    elif isinstance(value, TupleGetItem):
        items = [value.tuple_value]
    else:
        return []
    out: list[Any] = []
    for item in items:
        if isinstance(item, Var):
            out.append(item)
        elif isinstance(item, Tuple):
            out.extend(f for f in item.fields if isinstance(f, Var))
    return out


def _missing_sinfo(call: Any) -> bool:
    """An operand variable without struct info (WF401 reports it; inference cannot run)."""
    for a in call.args:
        if isinstance(a, Var) and a.struct_info is None:
            return True
    return isinstance(call.op, Var) and call.op.struct_info is None


@register
class CallSignatureMismatch(Rule):
    code = "WF405"
    call_keyed = True
    title = "Call arity or operand struct info disagrees with the operator or callee"
    explanation = """
    A call must give its operator or callee the number of operands it takes,
    with struct info it accepts: the operator's inference rule, the callee
    function's parameter struct info, or for a direct call of a PrimFunc its
    buffer parameters (count, rank, dtype, constant extents). Indexing a
    tuple must use a tuple and an index in range, and the condition of an if
    must be a boolean scalar. An operator's attributes must be values of their
    domains, whether or not its inference reads them (an alpha that is not a
    number, an unknown reduction). An inference failure names the operator and
    the operands' struct info.
    """
    help = "fix the operands so that their struct info fits the operator's signature"
    tvm = TVMCheck.REFUSES
    injection = "call an operator with the wrong number of operands"

    def call(self, ctx: Context, call: Any, opdef: Any) -> None:
        if not ctx.anf_ok or _missing_sinfo(call):
            return
        op = call.op
        top = type(op)
        if top is Op:
            if opdef is None:
                return  # WF407
            if not opdef.variadic and len(call.args) > len(opdef.args):
                ctx.report(self, f"{opdef.script_name} takes "
                           f"{counted(len(opdef.args), 'operand')} ({', '.join(opdef.args)}) "
                           f"but {len(call.args)} {'was' if len(call.args) == 1 else 'were'} "
                           "given", call)
                return
            if call.attrs or opdef.attrs:
                try:
                    normalize_attrs(opdef, call.attrs)
                except StructInfoError as exc:
                    ctx.report(self, exc.message, call)
                    return
        elif top is GlobalVar:
            target = ctx.lookup(op)
            if target is None:
                return  # WF301
            if isinstance(target, tir.PrimFunc):
                self._direct_prim_call(ctx, call, target)
                return
        _, error = infer_call(ctx, call)
        if error is not None:
            ctx.report(self, error, call)

    def binding(self, ctx: Context, b: Any) -> None:
        value = b.value
        tv = type(value)
        if (tv is TupleGetItem or tv is If) and ctx.anf_ok:
            operand = value.tuple_value if tv is TupleGetItem else value.cond
            if isinstance(operand, Var) and operand.struct_info is None:
                return  # WF401 reports the operand (or counts it as a follow-on)
            # tuple indexing, and an if's condition (a boolean scalar)
            _, error = infer_expr(ctx, value)
            if error is not None:
                ctx.report(self, error, value)

    def _direct_prim_call(self, ctx: Context, call: Any, func: tir.PrimFunc) -> None:
        def compute() -> list[str]:
            # tensors go to buffers and to opaque handles (T.handle without match_buffer)
            takers = [p for p in func.params if type(p) is tir.Buffer or p.dtype == "handle"]
            kernel = f"PrimFunc cls.{call.op.name_hint}"
            tensors = [(i, a.struct_info) for i, a in enumerate(call.args)
                       if type(a.struct_info) is TensorStructInfo]
            if len(tensors) != len(takers):
                what = "buffer" if all(type(p) is tir.Buffer for p in takers) else "buffer or handle"
                return [f"{kernel} has {len(takers)} {what} parameter(s) but the call passes "
                        f"{len(tensors)} tensor(s)"]
            pairs = [((f"argument {i}", sinfo), p) for (i, sinfo), p in zip(tensors, takers)
                     if type(p) is tir.Buffer]
            return _buffer_problems(kernel, [o for o, _ in pairs], [p for _, p in pairs], {})

        _cached_problems(self, ctx, call, compute)

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        def build(x: Var) -> list[Binding]:
            call = Call(Op("relax.add"), [x], struct_info=x.struct_info)  # add takes two
            return [VarBinding(Var("v", x.struct_info), call)]
        return insert_bindings(mod, build, choose)


@register
class CallTIRMismatch(Rule):
    code = "WF406"
    call_keyed = True
    title = "call_tir arguments or outputs disagree with the PrimFunc's buffers"
    explanation = """
    R.call_tir(cls.kernel, (inputs...), out_sinfo=..., tir_vars=...) calls a
    PrimFunc in destination-passing style: its buffer parameters are the
    inputs followed by the outputs, then its scalar parameters take the
    tir_vars. The callee must be a PrimFunc of the module, the counts must
    match, and each input's and output's tensor struct info must fit its
    buffer: same rank, same dtype, equal constant extents, and one
    consistent value for each symbolic extent of the kernel.
    """
    help = "make the call_tir operands and out_sinfo match the PrimFunc's buffer parameters"
    ops = _CALL_TIR_OPS
    tvm = TVMCheck.REFUSES
    injection = "call a PrimFunc with call_tir and mismatched buffers"

    def call(self, ctx: Context, call: Any, opdef: Any) -> None:
        if not ctx.anf_ok or not call.args:
            return
        callee = call.args[0]
        if type(callee) is not GlobalVar:
            ctx.report(self, "the first operand of R.call_tir must name a PrimFunc (cls.<name>)",
                       call)
            return
        target = ctx.lookup(callee)
        if target is None:
            return  # WF301
        if not isinstance(target, tir.PrimFunc):
            ctx.report(self, f"R.call_tir calls cls.{callee.name_hint}, which is a Relax "
                       "function, not a PrimFunc", call)
            return
        _cached_problems(self, ctx, call, lambda: self._problems(call, target))

    def _problems(self, call: Any, target: tir.PrimFunc) -> list[str]:
        # The PrimFunc's parameters, in order, take the inputs (tensors for
        # buffers, R.Prim values for scalars, as in TVM), then the outputs
        # (buffers), then the tir_vars (scalars).
        kernel = f"PrimFunc cls.{call.args[0].name_hint}"
        if not call.sinfo_args:
            return ["R.call_tir needs out_sinfo (the struct info of its outputs)"]
        inputs = self._inputs(call)
        out = call.sinfo_args[0]
        outputs = list(out.fields) if type(out) is TupleStructInfo else [out]
        problems: list[str] = []
        if call.op.name == "relax.call_tir_inplace":
            # an in-place output is the argument it overwrites: no buffer of its own
            indices = tuple(call.attrs.get("inplace_indices", ()))
            for i, (k, sinfo) in enumerate(zip(indices, outputs)):
                if 0 <= k < len(inputs) and inputs[k] is not None and sinfo is not None \
                        and _sinfo_conflict(inputs[k], sinfo):
                    problems.append(f"output {i} of {kernel} overwrites input {k} "
                                    f"({sinfo_to_str(inputs[k])}) but is declared "
                                    f"{sinfo_to_str(sinfo)}")
            outputs = [s for s, k in zip(outputs, indices) if k == -1]
        tir_vars = call.args[2] if len(call.args) > 2 else None
        values = tir_vars.values if type(tir_vars) is ShapeExpr else ()
        params = list(target.params)
        n_in, n_out = len(inputs), len(outputs)
        if n_in + n_out + len(values) != len(params):
            buffers, scalars = _buffer_params(target)
            return [f"{kernel} has {len(buffers)} buffer parameter(s) and {len(scalars)} scalar "
                    f"parameter(s) but R.call_tir passes {n_in} input(s), {n_out} output(s) and "
                    f"{len(values)} tir_vars"]
        bound: dict[tir.Var, Any] = {}
        operands: list[tuple[str, StructInfo | None]] = []
        buffers: list[tir.Buffer] = []
        for i, (param, sinfo) in enumerate(zip(params, inputs)):
            if type(param) is tir.Buffer:
                operands.append((f"input {i}", sinfo))
                buffers.append(param)
            elif param.dtype == "handle":
                continue  # an opaque handle (T.handle without T.match_buffer) takes any object
            elif sinfo is not None and (type(sinfo) is not PrimStructInfo
                                        or sinfo.dtype != param.dtype):
                problems.append(f"input {i} of {kernel} has struct info {sinfo_to_str(sinfo)}, "
                                f"but parameter {param.name} is a scalar {param.dtype} "
                                f"(pass R.Prim({param.dtype!r}))")
            elif sinfo is not None and sinfo.value is not None:
                bound[param] = (sinfo.value, f"input {i}")
        for i, param in enumerate(params[n_in:n_in + n_out]):
            if type(param) is not tir.Buffer and param.dtype == "handle":
                continue
            if type(param) is not tir.Buffer:
                problems.append(f"output {i} of {kernel} would be scalar parameter {param.name}; "
                                f"outputs must be buffers")
            else:
                operands.append((f"output {i}", outputs[i]))
                buffers.append(param)
        for param, value in zip(params[n_in + n_out:], values):
            if type(param) is not tir.Var:
                problems.append(f"{kernel}'s buffer parameter {param.name} would take a tir_var; "
                                f"tir_vars bind the trailing scalar parameters")
            else:
                bound[param] = (value, "tir_vars")
        return problems or _buffer_problems(kernel, operands, buffers, bound)

    @staticmethod
    def _inputs(call: Any) -> list[StructInfo | None]:
        if len(call.args) < 2:
            return []
        args = call.args[1]
        if type(args) is Tuple:
            return [f.struct_info for f in args.fields]
        sinfo = args.struct_info
        if type(sinfo) is TupleStructInfo:
            return list(sinfo.fields)
        return [sinfo]

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        cands = [(n, f, bi, ki, b) for n, f in mod.relax_functions()
                 for bi, ki, b in top_bindings(f)
                 if isinstance(b.value, Call) and isinstance(b.value.op, Op)
                 and b.value.op.name == "relax.call_tir" and b.value.sinfo_args
                 and isinstance(b.value.sinfo_args[0], TensorStructInfo)]
        if cands:
            name, func, bi, ki, b = pick(cands, choose)
            call = b.value
            wrong = conflicting_sinfo(call.sinfo_args[0])
            new = Call(call.op, call.args, call.attrs, (wrong, *call.sinfo_args[1:]),
                       struct_info=wrong, span=call.span)
            bindings = list(func.body.blocks[bi].bindings)
            bindings[ki] = VarBinding(type(b.var)(b.var.name_hint, wrong), new, span=b.span)
            # the old variable's uses now refer to nothing: keep it defined
            bindings.insert(ki, b)
            return mod.update({name: replace_block(func, bi, bindings)})
        mod = mod.update({"mutant_copy": copy_kernel()}) if "mutant_copy" not in mod else mod

        def build(x: Var) -> list[Binding]:
            out = TensorStructInfo((5,), "int32")  # the kernel writes float32[2]
            call = Call(Op("relax.call_tir"), [GlobalVar("mutant_copy"), Tuple([x])],
                        sinfo_args=[out], struct_info=out)
            return [VarBinding(Var("y", out), call)]
        return insert_bindings(mod, build, choose)


@register
class UnknownOperator(Rule):
    code = "WF407"
    title = "Unknown operator"
    explanation = """
    Every operator called through an Op must be registered in phasec's
    operator registry (phasec.op), which supplies its inference, its
    reference implementation and its legalization. An unknown name cannot be
    checked, optimized or compiled; it usually is a typo or an operator from
    a newer TVM that phasec does not implement.
    """
    help = "use a registered operator (phasec.op.list_ops() lists them)"
    categories = frozenset({"unknown"})
    tvm = TVMCheck.REFUSES
    injection = "call an operator that is not registered"

    def call(self, ctx: Context, call: Any, opdef: Any) -> None:
        if opdef is None:
            names = [o.name for o in list_ops()]
            close = difflib.get_close_matches(call.op.name, names, n=1)
            hint = f"; did you mean {'R.' + close[0].removeprefix('relax.')}?" if close else ""
            ctx.report(self, f"unknown operator {call.op.name!r}{hint}", call)

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        def build(x: Var) -> list[Binding]:
            call = Call(Op("relax.no_such_operator"), [x], struct_info=x.struct_info)
            return [VarBinding(Var("v", x.struct_info), call)]
        return insert_bindings(mod, build, choose)


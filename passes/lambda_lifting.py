"""LambdaLifting: every nested function becomes a private module-level function.

This is the transition from ingestion to optimization (the infrastructure
sets the phase; the body never does). For each nested function ``inner``
bound in a function ``outer``:

* it becomes the private function ``outer_inner`` (``outer`` being the
  lifted name of the enclosing function, so deeper nesting gives
  ``main_f_g``); a name already taken gets a numeric suffix (``main_f1``).
  Names depend only on the program, never on object identities.
* Its *captures* are the variables of enclosing scopes it uses. They become
  extra parameters placed **after** its own parameters (the reference
  interpreter and the VM append a closure's captured values to the call's
  arguments, as TVM's VM does), and its definition becomes
  ``inner = R.make_closure(cls.outer_inner, (captures...))``. Calls
  ``inner(args)`` become ``R.invoke_pure_closure(inner, (args,),
  sinfo_args=[ret])`` (``R.invoke_closure`` when ``inner`` is impure).
* A nested function without captures needs no closure: its binding is
  dropped, its uses become ``cls.outer_inner`` and its calls direct calls.

References between nested functions (recursion, mutual recursion between a
function and the functions nested in it, a function calling an earlier
sibling) are handled by computing the capture sets as a fixpoint: a
function that refers to another one captures that one's captures too, and
creates the closure it needs at the start of its lifted body
(``f = R.make_closure(cls.main_f, (c,))``, where ``c`` is one of its own
captured parameters).

Symbolic shape variables are never shared between functions: each lifted
function gets fresh ``tir.Var`` copies of every symbolic variable it
mentions. A symbolic variable of an enclosing function that the lifted
function uses but that neither its parameters nor its captured values
define (for example ``n`` in ``R.zeros(R.shape([n]))``) is captured as an
extra ``R.Prim(value=n)`` parameter (after the captured values), passed as
``R.prim_value(n)``. Such trailing parameters may define the variables of
the function's own parameters' compound dimensions (``a: R.Tensor((n * n,))``
first, ``x: R.Tensor((n, n))`` last): that is well formed, since a function's
parameters bind all their whole-dimension variables before any compound
dimension is checked (WF006; the interpreter and the VM do the same).

Functions with a ``Codegen`` or ``Composite`` attribute (BYOC) stay where
they are, nested or not, and so does everything inside a top-level function
that has one of these attributes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from phasec.ir import (
    Binding, BindingBlock, Call, DataflowVar, Expr, ExprMutator, Function, FuncStructInfo,
    GlobalVar, If, IRModule, MatchCast, ObjectStructInfo, Phase, PrimStructInfo, PrimValue,
    SeqExpr, ShapeExpr, ShapeStructInfo, StructInfo, TensorStructInfo, Tuple, TupleGetItem,
    TupleStructInfo, Var, VarBinding, tir,
)
from phasec import arith
from phasec.script.builder import NameTable
from phasec.arith.lattice import collect_shape_vars
from phasec.op.infer import context_from_module, infer_struct_info
from phasec.op import map_symbolic_attrs, op_expr, symbolic_attr_values
from phasec.op.registry import InferContext
from phasec.transform import module_pass, register_pass

from phasec.passes.normalize import normalize_module

__all__ = ["LambdaLifting", "is_byoc_function"]

#: Attributes marking a function compiled by an external (BYOC) backend.
BYOC_ATTRS = ("Codegen", "Composite")


def is_byoc_function(func: Function) -> bool:
    """True for functions that stay nested (``Codegen`` / ``Composite`` attribute)."""
    attrs = func.attrs or {}
    return any(a in attrs for a in BYOC_ATTRS)


# ---------------------------------------------------------------------------
# Symbolic variables
# ---------------------------------------------------------------------------

class _TirRenamer:
    """Gives every symbolic variable met a fresh copy (one per variable)."""

    def __init__(self) -> None:
        self.fresh: dict[tir.Var, tir.Var] = {}

    def var(self, v: tir.Var) -> tir.Var:
        new = self.fresh.get(v)
        if new is None:
            new = self.fresh[v] = tir.Var(v.name, v.dtype, span=v.span)
        return new

    def expr(self, e: tir.PrimExpr) -> tir.PrimExpr:
        if type(e) is tir.IntImm:
            return e
        if type(e) is tir.Var:
            return self.var(e)
        vmap = {v: self.var(v) for v in arith.free_vars(e)}
        return arith.substitute(e, vmap)

    def dims(self, dims: tuple) -> tuple:
        new = tuple(self.expr(d) for d in dims)
        return dims if all(a is b for a, b in zip(new, dims)) else new

    def sinfo(self, s: StructInfo | None) -> StructInfo | None:
        t = type(s)
        if t is TensorStructInfo and s.shape is not None:
            shape = self.dims(s.shape)
            return s if shape is s.shape else TensorStructInfo(shape, s.dtype, span=s.span)
        if t is ShapeStructInfo and s.values is not None:
            values = self.dims(s.values)
            return s if values is s.values else ShapeStructInfo(values, span=s.span)
        if t is PrimStructInfo and s.value is not None:
            value = self.expr(s.value)
            return s if value is s.value else PrimStructInfo(s.dtype, value, span=s.span)
        if t is TupleStructInfo:
            fields = [self.sinfo(f) for f in s.fields]
            if all(a is b for a, b in zip(fields, s.fields)):
                return s
            return TupleStructInfo(fields, span=s.span)
        if t is FuncStructInfo:
            params = None if s.params is None else [self.sinfo(p) for p in s.params]
            ret = self.sinfo(s.ret)
            if ret is s.ret and (params is None or all(a is b for a, b in zip(params, s.params))):
                return s
            return FuncStructInfo(params, ret, s.purity, span=s.span)
        return s


def _whole_dims(sinfo: StructInfo | None, out: set[tir.Var]) -> None:
    """Symbolic variables that ``sinfo`` defines (bare dimensions; callables excluded)."""
    stack = [sinfo]
    while stack:
        s = stack.pop()
        t = type(s)
        if t is TensorStructInfo and s.shape is not None:
            out.update(d for d in s.shape if type(d) is tir.Var)
        elif t is ShapeStructInfo and s.values is not None:
            out.update(d for d in s.values if type(d) is tir.Var)
        elif t is PrimStructInfo and type(s.value) is tir.Var:
            out.add(s.value)
        elif t is TupleStructInfo:
            stack.extend(s.fields)


# ---------------------------------------------------------------------------
# Analysis: scopes, free variables, captures
# ---------------------------------------------------------------------------

class _Frame:
    """One function being lifted (or the top-level function holding them)."""

    def __init__(self, func: Function, var: Var | None, name: str) -> None:
        self.func = func
        self.var = var            # the binding variable of a nested function
        self.name = name          # its module-level name
        self.children: list[_Frame] = []
        self.defs: set[Var] = set()
        self.uses: set[Var] = set()         # in its own scope (not nested liftables)
        self.child_uses: set[Var] = set()   # free variables of nested liftables
        self.sym_defs: set[tir.Var] = set()
        self.sym_uses: set[tir.Var] = set()
        # results
        self.captures: set[Var] = set()
        self.refs: set[Var] = set()          # function variables it needs (deep)
        self.direct_refs: set[Var] = set()   # ... referenced in its own scope
        self.sym_need: set[tir.Var] = set()
        self.capture_list: list[Var] = []
        self.sym_list: list[tir.Var] = []
        # signature
        self.renamer = _TirRenamer()
        self.params: list[Var] = []
        self.param_remap: dict[Var, Var] = {}
        self.ret: StructInfo | None = None

    @property
    def has_captures(self) -> bool:
        return bool(self.capture_list or self.sym_list)


class _Analyzer:
    """Walks one top-level function: frames, free variables, definition order."""

    def __init__(self, names: NameTable) -> None:
        self.names = names
        self.frames: dict[Var, _Frame] = {}  # nested function variable -> frame
        self.order: dict[Var, int] = {}
        self.sym_order: dict[tir.Var, int] = {}

    def _def(self, frame: _Frame, var: Var) -> None:
        frame.defs.add(var)
        self.order.setdefault(var, len(self.order))

    def _sym(self, v: tir.Var) -> None:
        self.sym_order.setdefault(v, len(self.sym_order))

    def _sinfo_syms(self, frame: _Frame, sinfo: Any, define: bool) -> None:
        stack = [sinfo]
        while stack:
            s = stack.pop()
            t = type(s)
            if t is TensorStructInfo:
                dims = s.shape
            elif t is ShapeStructInfo:
                dims = s.values
            elif t is PrimStructInfo:
                dims = None if s.value is None else (s.value,)
            elif t is TupleStructInfo:
                stack.extend(s.fields)
                continue
            else:  # callables: their symbolic variables are the callee's
                continue
            for d in dims or ():
                if type(d) is tir.IntImm:
                    continue
                if define and type(d) is tir.Var:
                    self._sym(d)
                    frame.sym_defs.add(d)
                    continue
                for v in arith.free_vars(d):
                    self._sym(v)
                    frame.sym_uses.add(v)

    def _prim_uses(self, frame: _Frame, e: tir.PrimExpr) -> None:
        if type(e) is tir.IntImm:
            return
        for v in arith.free_vars(e):
            self._sym(v)
            frame.sym_uses.add(v)

    def _expr_uses(self, frame: _Frame, expr: Expr) -> None:
        stack = [expr]
        while stack:
            e = stack.pop()
            t = type(e)
            if t is Var or t is DataflowVar:
                frame.uses.add(e)
            elif t is Call:
                stack.append(e.op)
                stack.extend(e.args)
                for s in e.sinfo_args:
                    self._sinfo_syms(frame, s, False)
                for v in symbolic_attr_values(e.attrs):  # strided_slice's begin=(i,)
                    self._prim_uses(frame, v)
            elif t is Tuple:
                stack.extend(e.fields)
            elif t is TupleGetItem:
                stack.append(e.tuple_value)
            elif t is ShapeExpr:
                for v in e.values:
                    self._prim_uses(frame, v)
            elif t is PrimValue:
                self._prim_uses(frame, e.value)
            elif t is If:
                self._expr_uses(frame, e.cond)
                self._seq(frame, e.true_branch)
                self._seq(frame, e.false_branch)
            elif t is SeqExpr:
                self._seq(frame, e)
            elif t is Function:  # kept in place (BYOC): part of this scope
                self._params(frame, e)
                self._seq(frame, e.body)

    def _params(self, frame: _Frame, func: Function) -> None:
        for p in func.params:
            self._def(frame, p)
            self._sinfo_syms(frame, p.struct_info, True)
        self._sinfo_syms(frame, func.ret_struct_info, False)

    def function(self, frame: _Frame) -> None:
        self._params(frame, frame.func)
        self._seq(frame, frame.func.body)

    def _seq(self, frame: _Frame, seq: SeqExpr) -> None:
        for block in seq.blocks:
            for b in block.bindings:
                value = b.value
                if type(value) is Function and not is_byoc_function(value):
                    child = _Frame(value, b.var,
                                   self.names.fresh(f"{frame.name}_{b.var.name_hint}"))
                    self.frames[b.var] = child
                    frame.children.append(child)
                    self.function(child)
                    frame.child_uses |= (child.uses | child.child_uses) - child.defs
                else:
                    self._expr_uses(frame, value)
                self._def(frame, b.var)
                if type(b) is MatchCast:
                    self._sinfo_syms(frame, b.struct_info, True)
                else:
                    self._sinfo_syms(frame, b.var.struct_info, False)
        self._expr_uses(frame, seq.body)


def _solve(frames: Mapping[Var, _Frame], order: Mapping[Var, int],
           sym_order: Mapping[tir.Var, int]) -> None:
    """Capture sets of every nested function, as a fixpoint over references."""
    fnvars = set(frames)
    nested = list(frames.values())
    for g in nested:
        free = (g.uses | g.child_uses) - g.defs
        g.captures = {v for v in free if v not in fnvars}
        g.refs = free & fnvars
        g.direct_refs = (g.uses & fnvars) - g.defs
    changed = True
    while changed:
        changed = False
        for g in nested:
            for h in g.refs:
                extra = frames[h].captures - g.captures
                if extra:
                    g.captures |= extra
                    changed = True
    # Symbolic variables the lifted function must receive explicitly.
    lifted_defs: dict[int, set[tir.Var]] = {}
    for g in nested:
        defs = set(g.sym_defs)
        for c in g.captures:
            _whole_dims(c.struct_info, defs)
        lifted_defs[id(g)] = defs
        g.sym_need = g.sym_uses - defs
    changed = True
    while changed:
        changed = False
        for g in nested:
            want = set()
            for c in g.children:
                want |= c.sym_need
            for h in g.direct_refs:
                want |= frames[h].sym_need
            extra = want - lifted_defs[id(g)] - g.sym_need
            if extra:
                g.sym_need |= extra
                changed = True
    for g in nested:
        g.capture_list = sorted(g.captures, key=order.__getitem__)
        g.sym_list = sorted(g.sym_need, key=sym_order.__getitem__)


def _signature(g: _Frame) -> FuncStructInfo:
    """Parameters of the lifted function: its own, then captures, then symbols."""
    ren = g.renamer
    used = {p.name_hint for p in g.func.params}
    names = NameTable(used)
    for p in g.func.params:
        sinfo = ren.sinfo(p.struct_info)
        new = p if sinfo is p.struct_info else Var(p.name_hint, sinfo, span=p.span)
        if new is not p:
            g.param_remap[p] = new
        g.params.append(new)
    for c in g.capture_list:
        new = Var(names.fresh(c.name_hint), ren.sinfo(c.struct_info), span=c.span)
        g.param_remap[c] = new
        g.params.append(new)
    for n in g.sym_list:
        g.params.append(Var(names.fresh(f"{n.name}_value"),
                            PrimStructInfo(n.dtype, ren.var(n)), span=n.span))
    g.ret = ren.sinfo(g.func.ret_struct_info)
    return FuncStructInfo([p.struct_info for p in g.params], g.ret, g.func.is_pure)


# ---------------------------------------------------------------------------
# Rewriting
# ---------------------------------------------------------------------------

class _Rewriter(ExprMutator):
    """Rewrites one function body: nested functions become closures or globals,
    calls of them become invocations, symbolic variables get fresh copies."""

    drop_empty_blocks = True  # a lifted function can leave its block empty

    def __init__(self, lifter: "_Lifter", renamer: _TirRenamer | None,
                 remap: Mapping[Var, Expr]) -> None:
        super().__init__()
        self.lifter = lifter
        self.renamer = renamer
        self.var_remap.update(remap)

    # -- symbolic substitution ------------------------------------------------
    def _sinfo(self, sinfo: Any) -> Any:
        return sinfo if self.renamer is None or sinfo is None else self.renamer.sinfo(sinfo)

    def _prim(self, e: tir.PrimExpr) -> tir.PrimExpr:
        return e if self.renamer is None else self.renamer.expr(e)

    def visit_var_def(self, var: Var) -> Var:
        sinfo = self._sinfo(var.struct_info)
        if sinfo is var.struct_info:
            return var
        new = type(var)(var.name_hint, sinfo, span=var.span)
        self.var_remap[var] = new
        return new

    def visit_shape_expr_(self, expr: ShapeExpr) -> Expr:
        if self.renamer is None:
            return expr
        values = self.renamer.dims(expr.values)
        return expr if values is expr.values else ShapeExpr(values, span=expr.span)

    def visit_prim_value_(self, expr: PrimValue) -> Expr:
        value = self._prim(expr.value)
        return expr if value is expr.value else PrimValue(value, span=expr.span)

    # -- expressions ----------------------------------------------------------
    def visit_call_(self, call: Call) -> Expr:
        op = call.op
        frame = self.lifter.frames.get(op) if isinstance(op, Var) else None
        args = [self.visit_expr(a) for a in call.args]
        sinfo = self._sinfo(call.struct_info)
        sinfo_args = tuple(self._sinfo(s) for s in call.sinfo_args)
        if frame is not None:
            if not frame.has_captures:
                return Call(GlobalVar(frame.name), args, call.attrs, sinfo_args,
                            struct_info=sinfo, span=call.span)
            closure = self.visit_expr(op)
            ret = sinfo if sinfo is not None else self._sinfo(frame.func.ret_struct_info)
            name = "invoke_pure_closure" if frame.func.is_pure else "invoke_closure"
            return Call(op_expr(name), [closure, Tuple(args)], None, (ret,),
                        struct_info=ret, span=call.span)
        new_op = self.visit_expr(op)
        # symbolic attribute values (strided_slice's begin=(i,)) take the fresh variables too
        attrs = call.attrs if self.renamer is None else \
            map_symbolic_attrs(call.attrs, self.renamer.expr)
        if (new_op is op and sinfo is call.struct_info and attrs is call.attrs
                and all(a is b for a, b in zip(args, call.args))
                and all(a is b for a, b in zip(sinfo_args, call.sinfo_args))):
            return call
        return Call(new_op, args, attrs, sinfo_args, struct_info=sinfo, span=call.span)

    def visit_if_(self, expr: If) -> Expr:
        cond = self.visit_expr(expr.cond)
        tb = self.visit_expr(expr.true_branch)
        fb = self.visit_expr(expr.false_branch)
        sinfo = self._sinfo(expr.struct_info)
        if (cond is expr.cond and tb is expr.true_branch and fb is expr.false_branch
                and sinfo is expr.struct_info):
            return expr
        return If(cond, tb, fb, struct_info=sinfo, span=expr.span)

    def visit_function_(self, func: Function) -> Expr:
        # A BYOC function kept in place.
        params = [self.visit_var_def(p) for p in func.params]
        body = self.visit_expr(func.body)
        ret = self._sinfo(func.ret_struct_info)
        if body is func.body and ret is func.ret_struct_info and all(
                a is b for a, b in zip(params, func.params)):
            return func
        return Function(params, body, ret, func.is_pure, func.attrs, span=func.span)

    def visit_binding(self, binding: Binding):
        value = binding.value
        if type(value) is Function:
            frame = self.lifter.frames.get(binding.var)
            if frame is not None:
                return self._lift(binding, frame)
        if type(binding) is MatchCast:
            new_value = self.visit_expr(value)
            sinfo = self._sinfo(binding.struct_info)
            var = self.visit_var_def(binding.var)
            if new_value is value and sinfo is binding.struct_info and var is binding.var:
                return binding
            return MatchCast(var, new_value, sinfo, span=binding.span)
        return super().visit_binding(binding)

    def closure(self, frame: _Frame, hint_var: Var, var_cls: type = Var) -> VarBinding:
        """``v = R.make_closure(cls.<lifted>, (captures...))`` in this scope."""
        captured = [self.visit_expr(c) for c in frame.capture_list]
        captured += [PrimValue(self._prim(n)) for n in frame.sym_list]
        call = Call(op_expr("make_closure"), [GlobalVar(frame.name), Tuple(captured)])
        sinfo = infer_struct_info(call, self.lifter.ctx)
        call = Call(call.op, call.args, struct_info=sinfo)
        # A closure type mentioning symbolic variables would mention the lifted
        # function's own ones; annotate the closure R.Object instead (calls
        # carry their result struct info in sinfo_args).
        var_sinfo = ObjectStructInfo() if collect_shape_vars(sinfo) else sinfo
        var = var_cls(hint_var.name_hint, var_sinfo, span=hint_var.span)
        return VarBinding(var, call, span=hint_var.span)

    def _lift(self, binding: Binding, frame: _Frame):
        self.lifter.build(frame)
        if not frame.has_captures:
            self.var_remap[binding.var] = GlobalVar(frame.name)
            return None
        new = self.closure(frame, binding.var, type(binding.var))
        self.var_remap[binding.var] = new.var
        return new


class _Lifter:
    """Lifts the nested functions of one module."""

    def __init__(self, mod: IRModule) -> None:
        self.mod = mod
        self.names = NameTable(mod.functions)
        self.frames: dict[Var, _Frame] = {}
        self.lifted: dict[str, Function] = {}
        self.globals: dict[str, StructInfo] = dict(context_from_module(mod).globals)
        self.ctx = InferContext(self.globals)

    def run(self) -> IRModule:
        out: dict[str, Any] = {}
        changed = False
        for name in sorted(self.mod.functions):
            func = self.mod.functions[name]
            if not isinstance(func, Function) or is_byoc_function(func):
                continue
            top = _Frame(func, None, name)
            analyzer = _Analyzer(self.names)
            analyzer.function(top)
            if not analyzer.frames:
                continue
            self.frames.update(analyzer.frames)
            _solve(analyzer.frames, analyzer.order, analyzer.sym_order)
            for g in analyzer.frames.values():
                self.globals[g.name] = _signature(g)
            body = _Rewriter(self, None, {}).visit_expr(func.body)
            out[name] = Function(func.params, body, func.ret_struct_info, func.is_pure,
                                 func.attrs, span=func.span)
            changed = True
        if not changed:
            return self.mod
        functions: dict[str, Any] = {}
        for name, func in self.mod.functions.items():
            functions[name] = out.get(name, func)
        for name in sorted(self.lifted):
            functions[name] = self.lifted[name]
        return self.mod.with_functions(functions)

    def build(self, g: _Frame) -> None:
        """Create the lifted function of ``g`` (its nested functions on the way)."""
        rewriter = _Rewriter(self, g.renamer, g.param_remap)
        prologue: list[Binding] = []
        for h in sorted(g.direct_refs, key=lambda v: self.frames[v].name):
            target = self.frames[h]
            if not target.has_captures:
                rewriter.var_remap[h] = GlobalVar(target.name)
                continue
            binding = rewriter.closure(target, h)
            prologue.append(binding)
            rewriter.var_remap[h] = binding.var
        body = rewriter.visit_expr(g.func.body)
        if prologue:
            blocks = list(body.blocks)
            if blocks and type(blocks[0]) is BindingBlock:
                blocks[0] = BindingBlock([*prologue, *blocks[0].bindings], span=blocks[0].span)
            else:
                blocks.insert(0, BindingBlock(prologue))
            body = SeqExpr(blocks, body.body, span=body.span)
        attrs = {k: v for k, v in (g.func.attrs or {}).items() if k != "global_symbol"}
        self.lifted[g.name] = Function(g.params, body, g.ret, g.func.is_pure, attrs,
                                       span=g.func.span)


def lift_module(mod: IRModule) -> IRModule:
    """``mod`` with every (non-BYOC) nested function lifted to module level."""
    return _Lifter(normalize_module(mod)).run()


@register_pass
@module_pass(opt_level=0, phases=Phase.INGESTION, transition_to=Phase.OPTIMIZATION,
             name="LambdaLifting")
class LambdaLifting:
    """Lift nested functions to private module-level functions; enters optimization.

    Captured variables go through ``R.make_closure`` and calls of closures
    through ``R.invoke_pure_closure`` / ``R.invoke_closure``.
    """

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        return lift_module(mod)


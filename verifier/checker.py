"""The checker: one traversal per function, dispatching events to rules.

The walk is iterative over binding lists. Nested scopes (if-branches, nested
functions) are walked by generators run from an explicit stack, so neither
long programs nor deep nesting reach Python's recursion limit. The cost per
node is a type dispatch plus the hooks of the rules that care about that
node kind, so checking is linear in program size at every phase.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Mapping
from typing import Any

from phasec import collector
from phasec.errors import WellFormedError
from phasec.ir import tir
from phasec.ir.expr import (
    Binding, Call, Constant, DataflowBlock, DataflowVar, DataTypeImm, Expr, ExternFunc, Function,
    GlobalVar, If, MatchCast, Op, PrimValue, SeqExpr, ShapeExpr, StringImm, Tuple,
    TupleGetItem, Var,
)
from phasec.ir.module import IRModule
from phasec.op import SYMBOLIC_ATTRS, symbolic_attr_values
from phasec.op.registry import find_op
from phasec.ir.phase import Phase
from phasec.ir.struct_info import (
    PrimStructInfo, ShapeStructInfo, TensorStructInfo, TupleStructInfo,
)

from phasec.verifier.context import BRANCH, DATAFLOW, FUNCTION, PRIM_FUNC, Context, Frame
from phasec.verifier.diagnostics import ERROR, Diagnostic, summarize
from phasec.ir.memo import BoundedMemo
from phasec.verifier.rules import HOOKS, Rule, all_rules, get_rule

__all__ = ["check", "verify", "infer_phase", "Checker"]

_SIMPLE_LEAVES = (Constant, StringImm, DataTypeImm, ExternFunc, Op)
_UNKNOWN = object()  # not looked up yet
_Walk = Generator[Any, None, None]


#: The rules whose var_use / var_def hooks the checker's fast paths know
#: (see ``_Dispatch``): when only these implement the event, a use or
#: definition that none of them could report is decided with one lookup.
_KNOWN_VAR_USE = frozenset({"WF001", "WF003", "WF005"})
_KNOWN_VAR_DEF = frozenset({"WF401", "WF002", "WF004", "WF008"})
#: The built-in rules hooked on the walk of a PrimFunc's body (its TIR
#: variables' and buffers' scopes): their verdict depends on the PrimFunc
#: alone (see ``_CLEAN_WALKS``).
_KNOWN_TIR_WALK = frozenset({"WF501", "WF502", "WF503", "WF505"})
_TIR_WALK_HOOKS = ("tir_var_def", "tir_var_use", "tir_buffer_use")

#: (id of a PrimFunc, the codes of the rules hooked on the walk) -> that
#: PrimFunc, whose body walked with those rules reported nothing.
#: Verification after each pass walks every kernel of the module again,
#: while the passes after LegalizeOps keep most of them as they are (the IR
#: is immutable: the same object is the same kernel); ResNet-50 walked its
#: kernels 174 times for 34 of them. The phases after LegalizeOps hook the
#: same rules on the walk, so a phase change walks no kernel again. Only
#: dispatches whose walk hooks are all built-in (pure_tir_walk) use it; the
#: PrimFunc kept as the value pins its id.
_CLEAN_WALKS = BoundedMemo(4096)


class _Dispatch:
    """The hooks of the rules active in one phase, per event (built once per phase).

    Performance: most bindings of a large module are fine, and a module
    repeats the same few call shapes many times, so the checker takes two
    shortcuts that never change the diagnostics:

    * ``fast_var_use`` / ``fast_var_def``: every rule hooked on the event
      is one of the built-in scope rules, whose conditions the checker can
      test inline; a use of a variable defined in an open scope (a
      definition of a fresh variable with struct info) skips the hooks.
    * ``call`` hooks of rules with ``call_keyed = True`` (their verdict
      depends only on the call's struct-info key, the binding's annotation
      and the enclosing function) are skipped for a key they already
      passed without a diagnostic.
    * ``pure_tir_walk``: every rule hooked on the walk of a PrimFunc's body
      is a built-in scope rule; a PrimFunc whose walk reported nothing
      before is not walked again (``_CLEAN_WALKS``).
    """

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rules = list(rules)
        for hook in HOOKS:
            setattr(self, hook, [getattr(r, hook) for r in self.rules if hook in r.hooks()])
        self.fast_var_use = {r.code for r in self.rules if "var_use" in r.hooks()} <= _KNOWN_VAR_USE
        self.fast_var_def = {r.code for r in self.rules if "var_def" in r.hooks()} <= _KNOWN_VAR_DEF
        self.tir_walk_codes = frozenset(r.code for r in self.rules if any(
            h in r.hooks() for h in _TIR_WALK_HOOKS))
        self.pure_tir_walk = self.tir_walk_codes <= _KNOWN_TIR_WALK
        callers = [r for r in self.rules if "call" in r.hooks()]
        self._generic = [r for r in callers if r.ops is None and r.categories is None]
        self._filtered = [r for r in callers if r.ops is not None or r.categories is not None]
        self._by_op: dict[str | None, tuple[list[Callable], list[Callable], frozenset[str]]] = {}

    def call_plan(self, op_name: str | None, opdef: Any
                  ) -> tuple[list[Callable], list[Callable], frozenset[str]]:
        """``(all hooks, hooks of rules that are not call_keyed, codes of the
        call_keyed rules)`` for a call of ``op_name``, each list in rule order."""
        plan = self._by_op.get(op_name)
        if plan is None:
            category = opdef.category if opdef is not None else "unknown"
            rules = self._generic if op_name is None else self._generic + [
                r for r in self._filtered
                if (r.ops is not None and op_name in r.ops)
                or (r.categories is not None and category in r.categories)]
            plan = ([r.call for r in rules], [r.call for r in rules if not r.call_keyed],
                    frozenset(r.code for r in rules if r.call_keyed))
            self._by_op[op_name] = plan
        return plan


_DISPATCH: dict[tuple[Phase, int], _Dispatch] = {}


def _dispatch_for(phase: Phase) -> _Dispatch:
    rules = all_rules()
    key = (phase, len(rules))  # a rule registered later invalidates the tables
    d = _DISPATCH.get(key)
    if d is None:
        d = _DISPATCH[key] = _Dispatch(r for r in rules if r.since <= phase)
    return d


class Checker:
    """Walks one module once and collects every rule's diagnostics."""

    def __init__(self, mod: IRModule, phase: Phase) -> None:
        self.ctx = Context(mod, phase)
        self.d = _dispatch_for(phase)
        self._opdefs: dict[str, Any] = {}
        # keys of calls whose call_keyed hooks reported nothing (see _Dispatch)
        self._clean_calls: set[Any] = set()
        # struct info objects known to mention no symbolic variable
        self._static_sinfo: set[Any] = set()

    # -- driver ----------------------------------------------------------
    def run(self) -> list[Diagnostic]:
        ctx, d = self.ctx, self.d
        for hook in d.module:
            hook(ctx, ctx.mod)
        for name, func in ctx.mod.functions.items():
            ctx.func_name, ctx.top_func = name, func
            try:
                if isinstance(func, Function):
                    self._drive(self._walk_function(func))
                else:
                    self._walk_prim_func(func)
            except RecursionError:
                self._internal_failure("the IR is nested too deeply to analyse")
            except Exception as exc:  # malformed IR must give a diagnostic, not a traceback
                self._internal_failure(f"{type(exc).__name__}: {exc}")
            # reset the walk state (a failure may have left it mid-function)
            ctx.binding = ctx.outer_binding = ctx.func = ctx.frame = ctx.df_frame = None
            ctx.func_depth, ctx.in_dataflow, ctx.stmt_span = -1, False, None
        return ctx.diagnostics

    def _internal_failure(self, what: str) -> None:
        ctx = self.ctx
        rule = get_rule("WF100")
        ctx.report(rule, f"function '{ctx.func_name}' could not be analysed completely "
                   f"({what}); it contains a node of an unexpected kind or shape")

    @staticmethod
    def _drive(walk: _Walk) -> None:
        """Run a generator walk; a generator yields sub-walks to run before resuming."""
        stack = [walk]
        while stack:
            try:
                child = next(stack[-1])
            except StopIteration:
                stack.pop()
                continue
            stack.append(child)

    # -- Relax functions ----------------------------------------------------
    def _walk_function(self, func: Function) -> _Walk:
        ctx, d = self.ctx, self.d
        saved = (ctx.func, ctx.func_depth, ctx.in_dataflow, ctx.binding, ctx.frame, ctx.df_frame,
                 ctx.outer_binding)
        ctx.outer_binding = ctx.binding
        ctx.func, ctx.func_depth, ctx.in_dataflow, ctx.binding = func, ctx.func_depth + 1, False, None
        ctx.df_frame = None
        for hook in d.enter_function:
            hook(ctx, func)
        frame = ctx.frame = Frame(FUNCTION, ctx.func_name or "")
        owner = ctx.func_name or ""
        # One signature binds its symbolic variables together: every
        # parameter's whole dims define, then compound dims are uses (WF006).
        self._define_syms([param.struct_info for param in func.params if isinstance(param, Var)])
        for param in func.params:
            if not isinstance(param, Var):
                self._bad_value(param)
                continue
            self._define(param, "param")
            ctx.param_owner.setdefault(param, owner)
        body = func.body
        if type(body) is SeqExpr:
            yield self._walk_seq(body)
        else:
            self._non_leaf(body, "function body (must be a SeqExpr)")
        ctx.binding = None
        self._sinfo_syms(func.ret_struct_info, define=False)
        for hook in d.exit_function:
            hook(ctx, func)
        frame.open = False
        (ctx.func, ctx.func_depth, ctx.in_dataflow, ctx.binding, ctx.frame, ctx.df_frame,
         ctx.outer_binding) = saved

    def _walk_seq(self, seq: SeqExpr) -> _Walk:
        ctx, d = self.ctx, self.d
        block_hooks, binding_hooks, if_hooks = d.block, d.binding, d.if_
        for block in seq.blocks:
            is_df = isinstance(block, DataflowBlock)
            ctx.binding = None
            for hook in block_hooks:
                hook(ctx, block)
            if is_df:
                saved_df = (ctx.df_frame, ctx.in_dataflow)
                df_frame = ctx.df_frame = Frame(DATAFLOW, ctx.func_name or "")
                ctx.in_dataflow = True
            for b in block.bindings:
                if not isinstance(b, Binding):
                    ctx.binding = None
                    self._bad_value(b)
                    continue
                ctx.binding = b
                value = b.value
                tv = type(value)
                ctx.anf_ok = True
                if tv is Call:
                    self._visit_call(value)
                elif tv is If:
                    self._operand(value.cond, "if condition")
                    for hook in if_hooks:
                        hook(ctx, value)
                    for branch in (value.true_branch, value.false_branch):
                        if type(branch) is not SeqExpr:
                            self._non_leaf(branch, "if branch (must be a SeqExpr)")
                            continue
                        outer, anf_ok = ctx.frame, ctx.anf_ok
                        frame = ctx.frame = Frame(BRANCH, ctx.func_name or "")
                        yield self._walk_seq(branch)
                        frame.open = False
                        ctx.frame, ctx.binding, ctx.anf_ok = outer, b, anf_ok
                elif tv is Function:
                    var = b.var
                    ctx.recursive.add(var)  # a local function may call itself
                    yield self._walk_function(value)
                    ctx.recursive.discard(var)
                    ctx.binding, ctx.anf_ok = b, True
                elif tv is TupleGetItem:
                    self._operand(value.tuple_value, "tuple_getitem operand")
                elif tv is SeqExpr:
                    ctx.anf_ok = False
                    for hook in d.misplaced_seq:
                        hook(ctx, value)
                elif isinstance(value, Expr):
                    self._operand(value, "binding value")
                else:
                    self._bad_value(value)
                var = b.var
                if not isinstance(var, Var):
                    self._bad_value(var)
                    continue
                if type(b) is MatchCast:
                    self._define_syms((b.struct_info,))
                for hook in binding_hooks:
                    hook(ctx, b)
                self._define(var, "match_cast" if type(b) is MatchCast else "binding")
                if var.struct_info not in self._static_sinfo:
                    self._sinfo_syms(var.struct_info, define=False)
            if is_df:
                df_frame.open = False
                ctx.df_frame, ctx.in_dataflow = saved_df
        ctx.binding = None
        ctx.stmt_span = seq.span  # uses in the result are located at the return statement
        self._operand(seq.body, "body of a function or branch")
        ctx.stmt_span = None

    def _define(self, var: Var, kind: str) -> None:
        ctx = self.ctx
        # Fast path (see _Dispatch): a fresh variable with struct info, an
        # ordinary Var or a DataflowVar bound inside a dataflow block, is
        # something none of the built-in var_def rules reports.
        if not (self.d.fast_var_def and kind != "param" and var.struct_info is not None
                and var not in ctx.defined_in
                and (type(var) is not DataflowVar or ctx.in_dataflow)):
            for hook in self.d.var_def:
                hook(ctx, var, kind)
        frame = ctx.df_frame if type(var) is DataflowVar and ctx.df_frame is not None else ctx.frame
        ctx.defined_in[var] = frame

    # -- expressions -------------------------------------------------------
    def _use(self, var: Any) -> None:
        """A use of a Relax variable: the var_use hooks, unless (fast path, see
        _Dispatch) it is defined in an open scope where none of the built-in
        scope rules could report it."""
        ctx = self.ctx
        if self.d.fast_var_use:
            frame = ctx.defined_in.get(var)
            if (frame is not None and frame.open
                    and (type(var) is not DataflowVar or ctx.in_dataflow)):
                return
        for hook in self.d.var_use:
            hook(ctx, var)

    def _visit_call(self, call: Call) -> None:
        ctx, d = self.ctx, self.d
        op = call.op
        top = type(op)
        opdef = None
        name = None
        if top is Op:
            name = op.name
            opdef = self._opdefs.get(name, _UNKNOWN)
            if opdef is _UNKNOWN:
                opdef = self._opdef(name)
        elif top is GlobalVar:
            for hook in d.global_use:
                hook(ctx, op)
        elif top is Var or top is DataflowVar:
            self._use(op)
        elif top is not ExternFunc:
            self._non_leaf(op, "callee")
        fast = d.fast_var_use
        defined_in = ctx.defined_in
        for arg in call.args:
            ta = type(arg)
            if fast and (ta is Var or (ta is DataflowVar and ctx.in_dataflow)):
                frame = defined_in.get(arg)  # inlined _use (the common operand)
                if frame is not None and frame.open:
                    continue
            self._operand(arg, "call argument")
        for sinfo in call.sinfo_args:
            if sinfo not in self._static_sinfo:
                self._sinfo_syms(sinfo, define=False)
        if name in SYMBOLIC_ATTRS and call.attrs:
            # strided_slice's begin=(index,): a use of the symbolic variable
            for value in symbolic_attr_values(call.attrs):
                self._prim_uses(value)
        hooks, unkeyed, keyed_codes = d.call_plan(name, opdef)
        if not keyed_codes:
            for hook in hooks:
                hook(ctx, call, opdef)
            return
        b = ctx.binding
        call_key = ctx.keys.call(call)
        key = None
        if call_key is not None and b is not None:
            key = (call_key, ctx.keys.sinfo(getattr(b.var, "struct_info", None)), type(b),
                   ctx.anf_ok, ctx.in_dataflow, ctx.func)
            if key in self._clean_calls:
                for hook in unkeyed:
                    hook(ctx, call, opdef)
                return
        diags = ctx.diagnostics
        before = len(diags)
        for hook in hooks:
            hook(ctx, call, opdef)
        if key is not None and not any(diags[i].code in keyed_codes
                                       for i in range(before, len(diags))):
            self._clean_calls.add(key)

    def _opdef(self, name: str) -> Any:
        try:
            return self._opdefs[name]
        except KeyError:
            opdef = self._opdefs[name] = find_op(name)
            return opdef

    def _operand(self, expr: Any, where: str) -> None:
        """A position where A-normal form wants a leaf (or a tuple of leaves)."""
        t = type(expr)
        ctx, d = self.ctx, self.d
        if t is Var or t is DataflowVar:
            if d.fast_var_use:  # inlined _use: the common operand
                frame = ctx.defined_in.get(expr)
                if frame is not None and frame.open and (t is Var or ctx.in_dataflow):
                    return
            for hook in d.var_use:
                hook(ctx, expr)
        elif t in _SIMPLE_LEAVES:
            pass
        elif t is GlobalVar:
            for hook in d.global_use:
                hook(ctx, expr)
        elif t is ShapeExpr:
            for value in expr.values:
                self._prim_uses(value)
        elif t is PrimValue:
            self._prim_uses(expr.value)
        elif t is Tuple:
            stack = list(expr.fields)
            fast = d.fast_var_use
            defined_in = ctx.defined_in
            while stack:
                f = stack.pop()
                tf = type(f)
                if tf is Var or tf is DataflowVar:
                    if fast and (tf is Var or ctx.in_dataflow):
                        frame = defined_in.get(f)  # inlined _use
                        if frame is not None and frame.open:
                            continue
                    self._use(f)
                elif tf is Tuple:
                    stack.extend(f.fields)
                else:
                    self._operand(f, "tuple field")
        elif isinstance(expr, Expr):
            self._non_leaf(expr, where)
        else:
            self._bad_value(expr)

    def _non_leaf(self, expr: Any, where: str) -> None:
        ctx = self.ctx
        ctx.anf_ok = False
        if type(expr) is SeqExpr and where.startswith(("tuple", "call", "binding")):
            for hook in self.d.misplaced_seq:
                hook(ctx, expr)
        elif not isinstance(expr, Expr):
            self._bad_value(expr)
            return
        else:
            for hook in self.d.non_leaf:
                hook(ctx, expr, where)
        self._nested_uses(expr)

    def _nested_uses(self, expr: Expr) -> None:
        """Report the variable uses inside a non-leaf operand (not its normal form again)."""
        ctx, d = self.ctx, self.d
        stack: list[Any] = [expr]
        while stack:
            e = stack.pop()
            t = type(e)
            if t is Var or t is DataflowVar:
                self._use(e)
            elif t is GlobalVar:
                for hook in d.global_use:
                    hook(ctx, e)
            elif t is Call:
                stack.append(e.op)
                stack.extend(e.args)
            elif t is Tuple:
                stack.extend(e.fields)
            elif t is TupleGetItem:
                stack.append(e.tuple_value)
            elif t is If:
                stack.append(e.cond)
            elif t is ShapeExpr:
                for value in e.values:
                    self._prim_uses(value)
            elif t is PrimValue:
                self._prim_uses(e.value)

    def _bad_value(self, value: Any) -> None:
        ctx = self.ctx
        ctx.anf_ok = False
        for hook in self.d.bad_value:
            hook(ctx, value)

    # -- symbolic variables ---------------------------------------------------
    def _define_syms(self, sinfos: Iterable[Any]) -> None:
        """Symbolic variables of a definition site: all parameters of one
        function, or one match_cast target. As in TVM, every bare dim of every
        struct info binds its variable first (when not yet visible) and only
        then are the compound dims (``n * n``) checked, so a compound dim may
        use a variable that a later dim or a later parameter binds (lifted
        closures list their captured values, which often bind the variables,
        after their own parameters)."""
        compound: list[Any] = []
        for sinfo in sinfos:
            self._sinfo_syms(sinfo, True, compound)
        for dim in compound:
            self._prim_uses(dim)

    def _sinfo_syms(self, sinfo: Any, define: bool, compound: list[Any] | None = None) -> None:
        """Symbolic variables in struct info: bare dims are definitions in
        ``define`` mode (see :meth:`_define_syms`) when not yet visible, and
        compound dims are then appended to ``compound`` to be checked later;
        every other occurrence is a use. Callable signatures are not descended
        into: their symbolic variables are the callee's."""
        static = self._static_sinfo
        if sinfo in static:
            return
        top = sinfo
        found = False  # a symbolic variable or expression somewhere in sinfo
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
                stack.extend(reversed(s.fields))
                continue
            else:
                continue
            if not dims:
                continue
            for dim in dims:
                td = type(dim)
                if td is tir.IntImm:
                    continue
                found = True
                if td is tir.Var:
                    if define and not self.ctx.sym_visible(dim):
                        self._sym_define(dim)
                    else:
                        self._sym_use(dim)
                elif compound is not None:
                    compound.append(dim)
                else:
                    self._prim_uses(dim)
        if not found:
            # No symbolic variable: walking it again (the same object is often
            # shared by many bindings) would find nothing either.
            static.add(top)

    def _sym_define(self, var: tir.Var) -> None:
        ctx = self.ctx
        for hook in self.d.sym_def:
            hook(ctx, var)
        ctx.sym_defined_in[var] = ctx.frame
        ctx.sym_owner.setdefault(var, ctx.func_name or "")

    def _sym_use(self, var: tir.Var) -> None:
        ctx = self.ctx
        for hook in self.d.sym_use:
            hook(ctx, var)
        ctx.sym_owner.setdefault(var, ctx.func_name or "")

    def _prim_uses(self, expr: Any) -> None:
        """Symbolic variable uses inside a PrimExpr at the Relax level."""
        if type(expr) is tir.IntImm:
            return
        for var in dict.fromkeys(_prim_vars(expr, None)):  # n * n: one use of n
            self._sym_use(var)

    # -- PrimFuncs -----------------------------------------------------------
    def _walk_prim_func(self, func: tir.PrimFunc) -> None:
        ctx, d = self.ctx, self.d
        ctx.frame = Frame(PRIM_FUNC, ctx.func_name or "")
        ctx.tir_scope = set()
        ctx.stmt_span = None
        for hook in d.prim_func:
            hook(ctx, func)
        key = (id(func), d.tir_walk_codes)
        if d.pure_tir_walk and _CLEAN_WALKS.get(key) is func:
            return
        reported = len(ctx.diagnostics)
        self._walk_prim_body(func)
        if d.pure_tir_walk and len(ctx.diagnostics) == reported:
            _CLEAN_WALKS.put(key, func)

    def _walk_prim_body(self, func: tir.PrimFunc) -> None:
        ctx, d = self.ctx, self.d
        scope = ctx.tir_scope
        var_def, var_use, buf_use = d.tir_var_def, d.tir_var_use, d.tir_buffer_use

        loaded: list[Any] = []

        def uses(expr: Any) -> None:
            t = type(expr)
            if t is tir.IntImm:
                return
            if t is tir.Var:  # the common index / extent: no expression walk
                for hook in var_use:
                    hook(ctx, expr)
                return
            for v in _prim_vars(expr, loaded):
                for hook in var_use:
                    hook(ctx, v)
            if loaded:
                for b in loaded:
                    for hook in buf_use:
                        hook(ctx, b)
                loaded.clear()

        # Parameters: scalar vars and the bare symbolic dims of buffer shapes are
        # definitions; composite dims (n * 2) are uses, checked once all are defined.
        composite: list[Any] = []
        for p in func.params:
            if type(p) is tir.Var:
                scope.add(p)
            elif type(p) is tir.Buffer:
                scope.add(p)
                for dim in p.shape:
                    if type(dim) is tir.Var:
                        scope.add(dim)
                    elif type(dim) is not tir.IntImm:
                        composite.append(dim)
            else:
                self._bad_value(p)
        for dim in composite:
            uses(dim)

        def define(var: Any) -> bool:
            for hook in var_def:
                hook(ctx, var)
            if var in scope:
                return False  # shadowing: the outer definition stays in scope
            scope.add(var)
            return True

        fallback = func.span
        stack: list[Any] = [func.body]
        while stack:
            s = stack.pop()
            if type(s) is tuple:  # ("exit", var-or-buffer): leave its scope
                scope.discard(s[1])
                continue
            ctx.stmt_span = getattr(s, "span", None) or fallback
            t = type(s)
            if t is tir.SeqStmt:
                stack.extend(reversed(s.stmts))
            elif t is tir.BufferStore:
                for hook in buf_use:
                    hook(ctx, s.buffer)
                uses(s.value)
                for i in s.indices:
                    uses(i)
            elif t is tir.For:
                uses(s.min)
                uses(s.extent)
                if define(s.loop_var):
                    stack.append(("exit", s.loop_var))
                stack.append(s.body)
            elif t is tir.AttrStmt:
                if isinstance(s.value, tir.PrimExpr):
                    uses(s.value)
                stack.append(s.body)
            elif t is tir.LetStmt:
                uses(s.value)
                if define(s.var):
                    stack.append(("exit", s.var))
                stack.append(s.body)
            elif t is tir.Allocate:
                for dim in s.buffer.shape:
                    uses(dim)
                if define(s.buffer):
                    stack.append(("exit", s.buffer))
                stack.append(s.body)
            elif t is tir.While:
                uses(s.condition)
                stack.append(s.body)
            elif t is tir.IfThenElse:
                uses(s.condition)
                if s.else_case is not None:
                    stack.append(s.else_case)
                stack.append(s.then_case)
            elif t is tir.Evaluate:
                uses(s.value)
            elif t is tir.Block:
                for value in s.iter_values:
                    uses(value)
                for iv in s.iter_vars:
                    uses(iv.min)
                    uses(iv.extent)
                for iv in s.iter_vars:
                    if define(iv.var):
                        stack.append(("exit", iv.var))
                for region in (*s.reads, *s.writes):
                    for hook in buf_use:
                        hook(ctx, region.buffer)
                    for lo, ext in region.region:
                        uses(lo)
                        uses(ext)
                # buffers and expressions named in schedule hints are uses too
                hints = list(s.annotations.values())
                while hints:
                    h = hints.pop()
                    if isinstance(h, tir.Buffer):
                        for hook in buf_use:
                            hook(ctx, h)
                    elif isinstance(h, tir.PrimExpr):
                        uses(h)
                    elif isinstance(h, (tuple, list)):
                        hints.extend(h)
                    elif isinstance(h, Mapping):
                        hints.extend(h.values())
                stack.append(s.body)
                if s.init is not None:
                    stack.append(s.init)
            else:
                self._bad_value(s)
        ctx.stmt_span = None


def _prim_vars(expr: Any, loaded: list[Any] | None) -> list[tir.Var]:
    """The TIR variables read by a scalar expression (iteratively); appends
    each buffer loaded to ``loaded``."""
    found: list[tir.Var] = []
    stack = [expr]
    while stack:
        e = stack.pop()
        t = type(e)
        if t is tir.IntImm or t is tir.FloatImm:
            continue
        if t is tir.Var:
            found.append(e)
        elif t is tir.BinaryOp:
            stack.append(e.rhs)
            stack.append(e.lhs)
        elif t is tir.BufferLoad:
            if loaded is not None:
                loaded.append(e.buffer)
            stack.extend(e.indices)
        elif t is tir.Cast or t is tir.Not:
            stack.append(e.value)
        elif t is tir.Select:
            stack.extend((e.false_value, e.true_value, e.condition))
        elif t is tir.Call:
            stack.extend(reversed(e.args))
        elif t is tir.BufferData:  # `buf.data` in a host call uses the buffer
            if loaded is not None:
                loaded.append(e.buffer)
    return found


# ---------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------

def _phase_of(mod: IRModule, phase: Phase | int | str | None) -> Phase:
    return mod.phase if phase is None else Phase.parse(phase)


def check(mod: IRModule, phase: Phase | int | str | None = None) -> list[Diagnostic]:
    """Every violation in ``mod`` of the rules of ``phase`` (default: the module's phase).

    ``phase`` accepts a :class:`~phasec.Phase`, its number or its name.
    Diagnostics come in traversal order (function by function, in source order).
    """
    if not isinstance(mod, IRModule):
        raise TypeError(f"verifier.check expects an IRModule, not {type(mod).__name__}")
    checker = Checker(mod, _phase_of(mod, phase))
    # The walk allocates many small short-lived objects (keys, frames); with
    # the cyclic collector running, each collection rescans the whole module,
    # which made checking large modules several times slower.
    with collector.paused():
        return checker.run()


def verify(mod: IRModule, phase: Phase | int | str | None = None,
           pass_name: str | None = None) -> None:
    """Raise :class:`phasec.WellFormedError` when ``mod`` violates a rule of ``phase``.

    Warnings do not raise. The error's message lists the first few errors;
    ``.diagnostics`` carries all of them and ``.pass_name`` the pass blamed.
    """
    target = _phase_of(mod, phase)
    errors = [d for d in check(mod, target) if d.severity == ERROR]
    if not errors:
        return
    after = f" after pass {pass_name}" if pass_name else ""
    count = f"{len(errors)} error{'s' if len(errors) != 1 else ''}"
    message = (f"module is not well-formed at phase {target.label}{after}: {count}\n"
               f"{summarize(errors)}")
    raise WellFormedError(message, errors, pass_name)


def infer_phase(mod: IRModule) -> Phase:
    """The highest phase whose invariants ``mod`` satisfies.

    Phase rules are cumulative, so one check at the build phase suffices: the
    answer is one below the earliest phase of any violated rule. A module that
    breaks a structural rule (one that applies at every phase) satisfies no
    phase: :class:`phasec.WellFormedError` is raised carrying those errors.
    """
    diags = [d for d in check(mod, Phase.BUILD) if d.severity == ERROR]
    if not diags:
        return Phase.BUILD
    earliest = min(get_rule(d.code).since for d in diags)
    if earliest == Phase.INGESTION:
        structural = [d for d in diags if get_rule(d.code).since == Phase.INGESTION]
        raise WellFormedError(
            f"module is not well-formed at any phase: {len(structural)} structural "
            f"error{'s' if len(structural) != 1 else ''}\n{summarize(structural)}", structural)
    return Phase(earliest - 1)

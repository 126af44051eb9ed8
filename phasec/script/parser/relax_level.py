"""The Relax level of the TVMScript parser: ``@R.function`` bodies (see
:mod:`phasec.script.parser`)."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any


from phasec.arith import free_vars
from phasec.ir import expr as rx
from phasec.ir import tir
from phasec.ir.node import Span
from phasec.arith.lattice import erase_to_ndim
from phasec.ir.struct_info import StructInfo, TupleStructInfo
from phasec.script.checks import int_range_problem
from phasec.script.parser.common import (
    _INT_DTYPES, _PY_OP_SPELLING, _RELAX_OP_FOR, _dotted, _is_docstring, _stmt_kind,
)
from phasec.script.parser.expressions import _PrimExprParser, _SinfoParser
from phasec.script.parser.relax_calls import _DialectCalls
from phasec.script.parser.relax_ops import _OperatorCalls

if TYPE_CHECKING:
    from phasec.script.parser.driver import ModuleParser, Signature


class _Frame:
    """The binding blocks of one SeqExpr under construction."""

    __slots__ = ("blocks", "bindings", "dataflow", "filename")

    def __init__(self, filename: str) -> None:
        self.blocks: list[rx.BindingBlock] = []
        self.bindings: list[rx.Binding] = []
        self.dataflow = False
        self.filename = filename

    def flush(self, span: Span | None = None) -> None:
        """Close the open block (a dataflow block is kept even when empty)."""
        if not self.bindings and not self.dataflow:
            return
        if span is None:
            first, last = self.bindings[0].span, self.bindings[-1].span
            if first is not None and last is not None:
                span = Span(first.file, first.line, first.col, last.end_line, last.end_col)
        cls = rx.DataflowBlock if self.dataflow else rx.BindingBlock
        self.blocks.append(cls(self.bindings, span=span))
        self.bindings = []





class _RelaxFunctionParser(_DialectCalls, _OperatorCalls):
    """Parses one ``@R.function`` (``parent`` is set for nested functions)."""

    def __init__(self, mp: ModuleParser, sig: Signature,
                 parent: _RelaxFunctionParser | None, self_var: rx.Var | None = None) -> None:
        self.mp = mp
        self.sig = sig
        self.parent = parent
        self.scopes: list[dict[str, rx.Expr]] = [{p.name_hint: p for p in sig.params}]
        if self_var is not None:  # a nested function sees its own name (recursion)
            self.scopes[0].setdefault(self_var.name_hint, self_var)
        self.frame = _Frame(mp.filename)
        self.output_stmts: set[int] = set()  # ids of statements defining R.output vars
        # names bound inside an ended dataflow block but not in its R.output
        self.dataflow_locals: set[str] = set()
        self.prim = _PrimExprParser(mp, "int64", self._resolve_dim)
        self.sinfo_parser = _SinfoParser(mp, self.prim, self._lookup_var)

    # -- names -------------------------------------------------------------
    def _lookup(self, name: str) -> rx.Expr | None:
        p: _RelaxFunctionParser | None = self
        while p is not None:
            for scope in reversed(p.scopes):
                value = scope.get(name)
                if value is not None:
                    return value
            p = p.parent
        return None

    def _lookup_var(self, name: str) -> rx.Var | None:
        """The Relax variable ``name`` (for ``name.ty`` annotations), or None."""
        value = self._lookup(name)
        return value if isinstance(value, rx.Var) else None

    def visible_sym(self, name: str) -> tir.Var | None:
        """The symbolic variable ``name`` of this function or of an enclosing
        one (a nested function is part of its enclosing function and shares
        its symbolic variables), or None."""
        p: _RelaxFunctionParser | None = self
        while p is not None:
            var = p.sig.syms.get(name)
            if var is not None:
                return var
            p = p.parent
        return None

    def _resolve_dim(self, name: str, node: ast.AST, declare: bool) -> tir.Var:
        """A symbolic dimension in the body: a variable of this function or an
        enclosing one; a string (``"m"`` in a match_cast) declares a new one."""
        var = self.visible_sym(name)
        if var is not None:
            return var
        if declare:
            var = self.sig.syms[name] = tir.Var(name, "int64", span=self.mp.span(node))
            return var
        if name in self.mp.module_syms and self._lookup(name) is None:
            # A module-level `n = TypeVar("n")`: a symbolic variable of the
            # module-level function (shared with the functions nested in it).
            root = self
            while root.parent is not None:
                root = root.parent
            var = root.sig.syms[name] = tir.Var(name, "int64", span=self.mp.span(node))
            return var
        if self._lookup(name) is not None:
            raise self.mp.error(f"{name!r} is a Relax variable, not a symbolic dimension", node)
        raise self.mp.error(f"name {name!r} is not defined (declare a symbolic dimension with "
                            f"`{name} = {self.mp.T}.int64()`)", node)

    def _bind(self, name: str, value: rx.Expr) -> None:
        self.scopes[-1][name] = value

    def _new_var(self, name: str, sinfo: StructInfo | None, node: ast.AST,
                 stmt: ast.AST | None) -> rx.Var:
        """A Var, or a DataflowVar inside a dataflow block unless R.output lists it."""
        span = self.mp.span(node)
        if self.frame.dataflow and (stmt is None or id(stmt) not in self.output_stmts):
            return rx.DataflowVar(name, sinfo, span=span)
        return rx.Var(name, sinfo, span=span)

    def _emit(self, binding: rx.Binding) -> None:
        self.frame.bindings.append(binding)

    # -- function ----------------------------------------------------------
    def parse_function(self, attrs: dict[str, Any] | None = None) -> rx.Function:
        mp, sig = self.mp, self.sig
        fdef = sig.node
        attrs = dict(attrs or {})
        body = list(fdef.body)
        if body and _is_docstring(body[0]):
            body = body[1:]
        for i, stmt in enumerate(body[:-1]):
            if isinstance(stmt, ast.Return):
                raise mp.error("`return` must be the last statement of the function body "
                               "(this statement follows it)", body[i + 1])
        if not body or not isinstance(body[-1], ast.Return):
            raise mp.error(f"R.function {sig.name!r} must end with `return <expr>`",
                           body[-1] if body else fdef)
        func_attrs: dict[str, Any] = {}
        for stmt in body[:-1]:
            mp.where = stmt
            if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                    and _dotted(stmt.value.func) == (mp.R, "func_attr")):
                call = stmt.value
                if func_attrs or len(call.args) != 1 or call.keywords:
                    raise mp.error(f"{mp.R}.func_attr expects one dictionary literal and may "
                                   f"appear once", stmt)
                func_attrs = mp.attr_dict(call.args[0])
                continue
            self._stmt(stmt)
        ret = body[-1]
        mp.where = ret
        if ret.value is None:
            raise mp.error(f"R.function {sig.name!r}: `return` needs a value", ret)
        # A non-leaf result gets its own binding, so the body is a leaf (as TVM's
        # normalizer does).
        result = self._arg(ret.value)
        self.frame.flush()
        seq = rx.SeqExpr(self.frame.blocks, result, span=mp.span(ret))
        if not sig.private:
            attrs["global_symbol"] = sig.name
        attrs.update(func_attrs)
        ret = sig.ret
        if ret is None and result.struct_info is not None:
            # No annotation: the body's struct info, as TVM deduces it, with the
            # dimensions forgotten that neither the parameters nor an enclosing
            # function (whose symbolic variables a nested function shares) define.
            keep = _sinfo_var_ids(p.struct_info for p in sig.params)
            outer = self.parent
            while outer is not None:
                keep.update(id(v) for v in outer.sig.syms.values())
                outer = outer.parent
            ret = erase_to_ndim(result.struct_info, keep)
        func = rx.Function(sig.params, seq, ret, sig.is_pure, attrs, span=mp.span(fdef))
        if func.struct_info is None:
            sinfo = mp.infer(func)
            if sinfo is not None:
                func = rx.Function(sig.params, seq, ret, sig.is_pure, attrs,
                                   struct_info=sinfo, span=func.span)
        return func

    # -- statements --------------------------------------------------------
    def _stmts(self, stmts: Sequence[ast.stmt]) -> None:
        for stmt in stmts:
            self._stmt(stmt)

    def _stmt(self, stmt: ast.stmt) -> None:
        mp = self.mp
        mp.where = stmt
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            self._assign(stmt)
        elif isinstance(stmt, ast.With):
            self._dataflow(stmt)
        elif isinstance(stmt, ast.If):
            self._if(stmt)
        elif isinstance(stmt, ast.FunctionDef):
            self._nested_function(stmt)
        elif isinstance(stmt, ast.Expr):
            self._expr_stmt(stmt)
        elif isinstance(stmt, ast.Return):
            raise mp.error("`return` must be the last statement of the function body "
                           "(in an if branch, assign the result instead)", stmt)
        else:
            raise mp.error(f"unsupported statement '{_stmt_kind(stmt)}' in R.function", stmt)

    def _target(self, stmt: ast.Assign | ast.AnnAssign) -> tuple[ast.Name, ast.AST | None]:
        mp = self.mp
        if isinstance(stmt, ast.Assign):
            if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
                raise mp.error("only `name = expr` assignments are supported in R.function "
                               "(no tuple unpacking or chained assignment)", stmt.targets[0])
            return stmt.targets[0], None
        if not isinstance(stmt.target, ast.Name):
            raise mp.error("only `name: annotation = expr` is supported in R.function", stmt.target)
        if stmt.value is None:
            raise mp.error(f"annotation without a value for {stmt.target.id!r}", stmt)
        return stmt.target, stmt.annotation

    def _assign(self, stmt: ast.Assign | ast.AnnAssign) -> None:
        mp = self.mp
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Tuple) and isinstance(stmt.value, ast.Tuple)
                and len(stmt.targets[0].elts) == len(stmt.value.elts)):
            # `m, n = T.int64(), T.int64()`: several symbolic declarations at once
            for t, v in zip(stmt.targets[0].elts, stmt.value.elts):
                self._assign(ast.copy_location(ast.Assign([t], v), t))
            return
        if isinstance(stmt, ast.Assign) and mp._module_sym(stmt) is not None:
            # `n = TypeVar("n")` in a body: how TVM prints the symbolic variables
            # of a nested function that the enclosing one does not use; each
            # function mentioning `n` gets its own variable, as at module level.
            mp.module_syms.add(stmt.targets[0].id)
            return
        target, ann = self._target(stmt)
        value = stmt.value
        fname = _dotted(value.func) if isinstance(value, ast.Call) else None
        # `n = T.int64()`: a symbolic dimension
        if fname is not None and len(fname) == 2 and fname[0] == mp.T and fname[1] in _INT_DTYPES \
                and not value.args and not value.keywords:
            if ann is not None:
                raise mp.error("a symbolic variable declaration takes no annotation", ann)
            # Declaring a name again (the printer declares every variable a
            # function mentions, signature ones included) means the same variable.
            if self.visible_sym(target.id) is None:
                self.sig.syms[target.id] = tir.Var(target.id, fname[1], span=mp.span(target))
            return
        if (ann is None and isinstance(value, ast.Name) and value.id in mp.class_names
                and self._lookup(value.id) is None):
            mp.class_names.add(target.id)  # `cls = Module`, as TVM prints it
            return
        if fname == (mp.R, "match_cast"):
            a = mp.bind_args(value, f"{mp.R}.match_cast", ("value", "struct_info"), 2)
            source = self._arg(a["value"])
            cast_sinfo = self.sinfo_parser.parse(a["struct_info"])
            var_sinfo = self.sinfo_parser.parse(ann) if ann is not None else cast_sinfo
            var = self._new_var(target.id, var_sinfo, target, stmt)
            self._emit(rx.MatchCast(var, source, cast_sinfo, span=mp.span(stmt)))
            self._bind(target.id, var)
            return
        expr = self._expr(value)
        sinfo = self.sinfo_parser.parse(ann) if ann is not None else expr.struct_info
        var = self._new_var(target.id, sinfo, target, stmt)
        self._emit(rx.VarBinding(var, expr, span=mp.span(stmt)))
        self._bind(target.id, var)

    def _expr_stmt(self, stmt: ast.Expr) -> None:
        mp = self.mp
        value = stmt.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return  # a docstring or comment string
        if not isinstance(value, ast.Call):
            raise mp.error(f"expression statement {mp.src(value)!r} has no effect; only calls "
                           f"(e.g. {mp.R}.call_packed(...)) may stand alone", stmt)
        fname = _dotted(value.func)
        if fname == (mp.R, "output"):
            raise mp.error(f"{mp.R}.output(...) can only be the last statement of a dataflow "
                           f"block", stmt)
        if fname == (mp.R, "func_attr"):
            raise mp.error(f"{mp.R}.func_attr must be a statement at the top of the function "
                           f"body", stmt)
        expr = self._expr(value)
        var = self._new_var("_", expr.struct_info, value, stmt)
        self._emit(rx.VarBinding(var, expr, span=mp.span(stmt)))

    def _dataflow_output_names(self, stmt: ast.With) -> list[str]:
        """The names in the ``R.output(...)`` ending ``with R.dataflow():`` (or [])."""
        mp = self.mp
        if not (len(stmt.items) == 1 and isinstance(stmt.items[0].context_expr, ast.Call)
                and _dotted(stmt.items[0].context_expr.func) == (mp.R, "dataflow")
                and stmt.body and isinstance(stmt.body[-1], ast.Expr)
                and isinstance(stmt.body[-1].value, ast.Call)
                and _dotted(stmt.body[-1].value.func) == (mp.R, "output")):
            return []
        return [a.id for a in stmt.body[-1].value.args if isinstance(a, ast.Name)]

    def _bound_name(self, stmt: ast.stmt) -> str | None:
        """The name a statement binds (for R.output resolution), if any."""
        while True:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                    and isinstance(stmt.targets[0], ast.Name):
                return stmt.targets[0].id
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                return stmt.target.id
            if isinstance(stmt, ast.FunctionDef):
                return stmt.name
            if isinstance(stmt, ast.If) and stmt.body:
                stmt = stmt.body[-1]
                continue
            return None

    def _dataflow(self, stmt: ast.With) -> None:
        mp = self.mp
        item = stmt.items[0]
        is_df = (len(stmt.items) == 1 and isinstance(item.context_expr, ast.Call)
                 and _dotted(item.context_expr.func) == (mp.R, "dataflow")
                 and not item.context_expr.args and not item.context_expr.keywords)
        if not is_df:
            raise mp.error(f"unsupported statement 'with {mp.src(item.context_expr)}' in "
                           f"R.function; only `with {mp.R}.dataflow():` is supported", stmt)
        if item.optional_vars is not None:
            raise mp.error(f"`with {mp.R}.dataflow()` takes no `as` target", item.optional_vars)
        if self.frame.dataflow:
            raise mp.error("dataflow blocks cannot be nested", stmt)
        last = stmt.body[-1]
        body = stmt.body[:-1]
        if not (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
                and _dotted(last.value.func) == (mp.R, "output")):
            # TVM 0.27 reads a block without R.output as R.output(): nothing leaves it
            body = stmt.body
            out_call = ast.copy_location(ast.Call(ast.Name(mp.R, ast.Load()), [], []), last)
        else:
            out_call = last.value
        if out_call.keywords:
            raise mp.error(f"{mp.R}.output takes variable names only", out_call.keywords[0].value)
        last_def: dict[str, ast.stmt] = {}
        for s in body:
            name = self._bound_name(s)
            if name is not None:
                last_def[name] = s
        outputs: list[str] = []
        for a in out_call.args:
            if not isinstance(a, ast.Name):
                raise mp.error(f"{mp.R}.output takes variable names, got {mp.src(a)!r}", a)
            if a.id not in last_def:
                raise mp.error(f"{mp.R}.output({a.id}): {a.id!r} is not assigned in this "
                               f"dataflow block", a)
            outputs.append(a.id)
        self.frame.flush()
        self.frame.dataflow = True
        saved_outputs = self.output_stmts
        self.output_stmts = {id(last_def[n]) for n in outputs}
        self.scopes.append({})
        try:
            self._stmts(body)
        finally:
            block_scope = self.scopes.pop()
            self.output_stmts = saved_outputs
        mp.where = last
        self.frame.flush(mp.span(stmt))
        self.frame.dataflow = False
        for name in outputs:
            var = block_scope.get(name)
            if not isinstance(var, rx.Var) or isinstance(var, rx.DataflowVar):
                raise mp.error(f"{mp.R}.output({name}): {name!r} is not a variable bound in this "
                               f"dataflow block", out_call)
            self._bind(name, var)
        self.dataflow_locals.update(n for n in block_scope if n not in outputs)

    def _branch(self, stmts: list[ast.stmt], which: str,
                if_stmt: ast.If) -> tuple[str, StructInfo | None, rx.SeqExpr]:
        """One branch of an if: its bindings, and the value of its last assignment.

        As in TVM, a leaf value (``y = x``) is the branch's result directly;
        any other value is bound to ``y_then``/``y_else`` in the branch and
        that variable is the result, so branch bodies are leaves.
        """
        mp = self.mp
        saved_frame = self.frame
        self.frame = _Frame(mp.filename)
        self.scopes.append({})
        saved_outputs, self.output_stmts = self.output_stmts, set()
        try:
            self._stmts(stmts[:-1])
            last = stmts[-1]
            mp.where = last
            ann: StructInfo | None = None
            if isinstance(last, (ast.Assign, ast.AnnAssign)):
                target, ann_node = self._target(last)
                name = target.id
                inner_name = f"{name}_{which}"
                value = last.value
                if isinstance(value, ast.Call) and _dotted(value.func) == (mp.R, "match_cast"):
                    a = mp.bind_args(value, f"{mp.R}.match_cast", ("value", "struct_info"), 2)
                    source = self._arg(a["value"])
                    cast_sinfo = self.sinfo_parser.parse(a["struct_info"])
                    ann = self.sinfo_parser.parse(ann_node) if ann_node is not None else None
                    result = rx.Var(inner_name, ann or cast_sinfo, span=mp.span(target))
                    self._emit(rx.MatchCast(result, source, cast_sinfo, span=mp.span(last)))
                else:
                    expr = self._expr(value)
                    if ann_node is not None:
                        ann = self.sinfo_parser.parse(ann_node)
                    if isinstance(expr, (rx.LEAF_EXPRS, rx.Tuple)):
                        result = expr
                    else:
                        result = rx.Var(inner_name, ann or expr.struct_info, span=mp.span(target))
                        self._emit(rx.VarBinding(result, expr, span=mp.span(last)))
            elif isinstance(last, ast.If):
                self._if(last)  # `elif`, or a nested if that binds the result
                name = self._bound_name(last) or ""
                result = self.scopes[-1][name]
            elif isinstance(last, ast.With) and self._dataflow_output_names(last):
                # A branch ending in a dataflow block: its result is the block's
                # last output binding (as TVM reads it)
                self._stmt(last)
                outputs = self._dataflow_output_names(last)
                bound = [self._bound_name(s) for s in last.body[:-1]]
                name = next((b for b in reversed(bound) if b in outputs), outputs[-1])
                result = self.scopes[-1][name]
            elif isinstance(last, ast.Expr) and isinstance(last.value, ast.Call):
                # A branch ending in a call statement (`R.print(...)`): TVM's sugar
                # for a branch whose result is the empty tuple, bound to `_`
                self._stmt(last)
                name, result = "_", rx.Tuple([], span=mp.span(last))
            else:
                raise mp.error(f"the {which} branch of an if must end with an assignment "
                               f"`name = expr` giving the if's result", last)
            self.frame.flush()
            seq = rx.SeqExpr(self.frame.blocks, result, span=mp.span(last))
        finally:
            self.scopes.pop()
            self.frame = saved_frame
            self.output_stmts = saved_outputs
        return name, ann, seq

    def _if(self, stmt: ast.If) -> None:
        mp = self.mp
        if not stmt.orelse:
            raise mp.error("an if in R.function needs an else branch (both branches assign the "
                           "result)", stmt)
        cond = self._arg(stmt.test)
        then_name, then_ann, then_seq = self._branch(stmt.body, "then", stmt)
        else_name, else_ann, else_seq = self._branch(stmt.orelse, "else", stmt)
        mp.where = stmt
        if then_name != else_name:
            raise mp.error(f"both branches of an if must assign the same variable (then assigns "
                           f"{then_name!r}, else assigns {else_name!r})", stmt)
        span = mp.span(stmt)
        node = rx.If(cond, then_seq, else_seq, span=span)
        sinfo = mp.infer(node)
        if sinfo is not None:
            node = rx.If(cond, then_seq, else_seq, struct_info=sinfo, span=span)
        var_sinfo = then_ann or else_ann or sinfo
        var = self._new_var(then_name, var_sinfo, stmt, stmt)
        self._emit(rx.VarBinding(var, node, span=span))
        self._bind(then_name, var)

    def _nested_function(self, stmt: ast.FunctionDef) -> None:
        mp = self.mp
        kind = mp._function_kind(stmt)
        if kind != "relax":
            raise mp.error(f"a {mp.T}.prim_func cannot be nested in an R.function; define it "
                           f"in the module class", stmt)
        sig = mp.relax_signature(stmt, enclosing=self)
        mp.where = stmt
        fsinfo = sig.struct_info()
        var = None
        if fsinfo is not None:
            var = self._new_var(stmt.name, fsinfo, stmt, stmt)
        elif any(isinstance(n, ast.Name) and n.id == stmt.name
                 for s in stmt.body for n in ast.walk(s)):
            raise mp.error(f"recursive function {stmt.name!r} needs a return annotation "
                           f"(`-> R.Tensor(...)`)", stmt)
        func = _RelaxFunctionParser(mp, sig, self, self_var=var).parse_function()
        mp.where = stmt
        if var is None:
            var = self._new_var(stmt.name, func.struct_info, stmt, stmt)
        self._emit(rx.VarBinding(var, func, span=mp.span(stmt)))
        self._bind(stmt.name, var)

    # -- expressions -------------------------------------------------------
    def _metadata_constant(self, node: ast.Subscript) -> rx.Constant:
        """TVM's ``metadata["key"][i]``: the constant the caller supplied."""
        mp = self.mp
        inner = node.value
        key = inner.slice if isinstance(inner, ast.Subscript) else None
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)
                and isinstance(node.slice, ast.Constant) and type(node.slice.value) is int):
            raise mp.error(f"expected metadata[\"<kind>\"][<index>], got {mp.src(node)!r}", node)
        table = (mp.metadata or {}).get(key.value)
        if table is None:
            raise mp.error(
                f"{mp.src(node)!r} refers to TVM's metadata section, which this text does not "
                f"carry: convert the TVM module with phasec.tvm.from_tvm, or write the value "
                f"inline with {mp.R}.const([...], dtype)", node)
        index = node.slice.value
        if not 0 <= index < len(table):
            raise mp.error(f"metadata[{key.value!r}] has {len(table)} entries; index {index} "
                           "is out of range", node.slice)
        return rx.Constant(table[index], span=mp.span(node))

    def _arg(self, node: ast.AST) -> rx.Expr:
        """An operand in A-normal form: non-leaf values get their own binding."""
        return self._as_leaf(self._expr(node), node)

    def _as_leaf(self, expr: rx.Expr, node: ast.AST) -> rx.Expr:
        if isinstance(expr, (rx.LEAF_EXPRS, rx.Tuple)):  # tuples are built from leaves
            return expr
        var = self._new_var(self.mp.fresh_name(), expr.struct_info, node, None)
        self._emit(rx.VarBinding(var, expr, span=self.mp.span(node)))
        return var

    def _expr(self, node: ast.AST) -> rx.Expr:
        mp = self.mp
        if isinstance(node, ast.Name):
            value = self._lookup(node.id)
            if value is not None:
                return value
            sym = self.visible_sym(node.id)
            if sym is not None:  # as TVM: a symbolic variable used as a value is a prim value
                return rx.PrimValue(sym, span=mp.span(node))
            if node.id in self.dataflow_locals:
                raise mp.error(
                    f"{node.id!r} is a dataflow variable: it is bound inside a dataflow block "
                    f"but not listed in its {mp.R}.output(...), so it is not visible after the "
                    f"block; add it to {mp.R}.output (see phasec-check --explain WF003)", node)
            raise mp.error(f"name {node.id!r} is not defined", node)
        if isinstance(node, ast.Attribute):
            name = _dotted(node)
            if name is not None and len(name) == 2 and name[0] in mp.class_names:
                return mp.global_var(name[1], node)
            if name is not None and name[0] == mp.R:
                raise mp.error(f"{mp.src(node)} is not a value (did you mean to call it?)", node)
            raise mp.error(f"unsupported expression {mp.src(node)!r}", node)
        if isinstance(node, (ast.Tuple, ast.List)):  # TVM reads a list as a tuple too
            fields = []
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    raise mp.error("*args are not supported in a tuple", e)
                fields.append(self._arg(e))
            return rx.Tuple(fields, span=mp.span(node))
        if isinstance(node, ast.Subscript):
            if _is_metadata_ref(node.value) or _is_metadata_ref(node):
                return self._metadata_constant(node)
            index = mp.number(node.slice)
            if not isinstance(index, int) or isinstance(index, bool) or index < 0:
                raise mp.error(f"a tuple index must be a non-negative integer literal, got "
                               f"{mp.src(node.slice)!r}", node.slice)
            tup = self._arg(node.value)
            return rx.TupleGetItem(tup, index, span=mp.span(node))
        if isinstance(node, ast.Call):
            return self._call(node)
        number = mp.number(node)
        if number is not None and not isinstance(number, bool):
            # As TVM converts a Python number in a Relax call: an int64 or
            # float64 R.prim_value (TVM 0.27 prints prim_value operands bare).
            value = (tir.IntImm(number, "int64") if isinstance(number, int)
                     else tir.FloatImm(number, "float64"))
            if isinstance(number, int) and int_range_problem(number, "int64") is not None:
                raise mp.error(f"integer literal {int_range_problem(number, 'int64')}", node)
            return rx.PrimValue(value, span=mp.span(node))
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return rx.StringImm(node.value, span=mp.span(node))
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            # As TVM converts a Python bool in a Relax call: a Python int, so an
            # int64 prim value 1 or 0 (TVM prints it as 1 / 0)
            return rx.PrimValue(tir.IntImm(int(node.value), "int64"), span=mp.span(node))
        if isinstance(node, (ast.Compare, ast.BinOp, ast.UnaryOp, ast.BoolOp)) \
                and self._scalar_only(node):
            # `N == 16`, `n + 1`: arithmetic on symbolic variables is a scalar
            # (TVM builds a TIR expression and wraps it as a prim value)
            return rx.PrimValue(self.prim.parse(node), span=mp.span(node))
        if isinstance(node, ast.Constant):
            raise mp.error(f"a Python literal ({mp.src(node)}) is not a Relax value; use "
                           f"{mp.R}.const(...), {mp.R}.prim_value(...) or {mp.R}.str(...)", node)
        if isinstance(node, (ast.BinOp, ast.UnaryOp)):
            return self._call(self._operator_call(node))
        if isinstance(node, ast.Lambda):
            raise mp.error("lambda is not supported; define a nested @R.function", node)
        raise mp.error(f"unsupported expression {mp.src(node)!r} in R.function", node)

    def _scalar_only(self, node: ast.AST) -> bool:
        """True when every operand of an operator expression is a symbolic
        variable, a number or a ``T.<dtype>(...)`` scalar, and at least one is
        a symbolic variable (Relax values take Relax operators)."""
        mp = self.mp
        stack, symbolic = [node], False
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Name):
                if self._lookup(n.id) is not None or self.visible_sym(n.id) is None:
                    return False
                symbolic = True
            elif isinstance(n, (ast.Compare, ast.BinOp, ast.UnaryOp, ast.BoolOp)):
                stack.extend(c for c in ast.iter_child_nodes(n) if isinstance(c, ast.expr))
            elif isinstance(n, ast.Call):
                name = _dotted(n.func)
                if not (name is not None and len(name) == 2 and name[0] == mp.T):
                    return False
            elif mp.number(n) is None:
                return False
        return symbolic

    def _operator_call(self, node: ast.BinOp | ast.UnaryOp) -> ast.Call:
        """``x + y`` -> ``R.add(x, y)``, ``-x`` -> ``R.negative(x)``: Python
        operators on Relax values, as TVM's TVMScript overloads them."""
        mp = self.mp
        if isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, ast.USub):
                raise mp.error(f"operator {mp.src(node).split()[0]!r} is not supported on Relax "
                               f"values", node)
            name, operands = "R.negative", [node.operand]
        else:
            op = _RELAX_OP_FOR.get(type(node.op))
            if op is None:
                spelled = _PY_OP_SPELLING.get(type(node.op), "?")
                raise mp.error(f"operator {spelled!r} is not supported on Relax values", node)
            name, operands = op, [node.left, node.right]
        func = ast.copy_location(ast.Attribute(ast.Name(mp.R, ast.Load()),
                                               name.split(".", 1)[1], ast.Load()), node)
        ast.copy_location(func.value, node)
        return ast.copy_location(ast.Call(func, operands, []), node)

    def _call(self, node: ast.Call) -> rx.Expr:
        mp = self.mp
        name = _dotted(node.func)
        if name is not None and len(name) >= 2 and name[0] == mp.R:
            return self._relax_call(".".join(name[1:]), node)
        if (name is not None and len(name) >= 2 and name[0] == "relax"
                and self._lookup("relax") is None):
            # relax.call_tir(...), relax.op.add(...): calls spelt through TVM's
            # Python module, which TVM's parser evaluates to the same calls
            rest = name[2:] if name[1] == "op" and len(name) > 2 else name[1:]
            return self._relax_call(".".join(rest), node)
        if (name is not None and len(name) == 2 and name[0] == mp.T and name[1] in tir.DTYPES
                and len(node.args) == 1 and not node.keywords):
            # T.float32(2.0), T.int64(n + 1): a scalar, as TVM prints a prim value operand
            return rx.PrimValue(self.prim.parse(node), span=mp.span(node))
        if name is not None and len(name) >= 2 and name[0] == mp.T:
            raise mp.error(f"{mp.src(node.func)} is a TIR function; in R.function wrap scalars "
                           f"with {mp.R}.prim_value(...)", node)
        if (isinstance(node.func, ast.Call)
                and _dotted(node.func.func) == (mp.R, "ExternFunc")):
            # R.ExternFunc("f", R.Callable(...))(x, ...): a call of a packed
            # function (TVM prints it as R.call_packed)
            callee: rx.Expr = self._call_extern_func(node.func)
        elif name is not None and len(name) == 2 and name[0] in mp.class_names:
            callee = mp.global_var(name[1], node.func)
        elif name is not None and len(name) == 1:
            found = self._lookup(name[0])
            if found is None:
                raise mp.error(f"name {name[0]!r} is not defined", node.func)
            callee = found
        else:
            raise mp.error(f"unsupported call {mp.src(node.func)!r}; expected {mp.R}.<operator>, "
                           f"cls.<function> or a local function", node.func)
        if node.keywords:
            raise mp.error("calls of functions take positional arguments only",
                           node.keywords[0].value)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise mp.error("*args are not supported", a)
            args.append(self._arg(a))
        return self._with_sinfo(rx.Call(callee, args, span=mp.span(node)))

    def _with_sinfo(self, call: rx.Call) -> rx.Call:
        sinfo = self.mp.infer(call)
        if sinfo is None:
            return call
        return rx.Call(call.op, call.args, call.attrs, call.sinfo_args, struct_info=sinfo,
                       span=call.span)

    def _sinfo_list(self, node: ast.AST) -> tuple[StructInfo, ...]:
        """``sinfo_args=R.Tensor(...)`` or ``sinfo_args=[A, B]``."""
        if isinstance(node, (ast.List, ast.Tuple)):
            return tuple(self.sinfo_parser.parse(e) for e in node.elts)
        return (self.sinfo_parser.parse(node),)

    def _out_sinfo(self, node: ast.AST) -> StructInfo:
        """``out_sinfo=R.Tensor(...)``; a list of several means a tuple of outputs
        and a list of one a single output, as in TVM (``out_sinfo=R.Tuple(X)``
        spells a tuple of one)."""
        if isinstance(node, (ast.List, ast.Tuple)):
            fields = [self.sinfo_parser.parse(e) for e in node.elts]
            if len(fields) == 1:
                return fields[0]
            return TupleStructInfo(fields, span=self.mp.span(node))
        return self.sinfo_parser.parse(node)

    def _args_tuple(self, node: ast.AST) -> rx.Tuple:
        """The argument tuple of call_tir & co: ``(a, b)``; a single value is wrapped."""
        if isinstance(node, (ast.Tuple, ast.List)):
            fields = [self._arg(e) for e in node.elts]
            return rx.Tuple(fields, span=self.mp.span(node))
        value = self._arg(node)
        if isinstance(value, rx.Tuple):
            return value
        return rx.Tuple([value], span=self.mp.span(node))

    def _extern(self, node: ast.AST, what: str) -> rx.ExternFunc:
        name = self.mp.str_arg(node, f"{what}: the function name")
        return rx.ExternFunc(name, span=self.mp.span(node))

    def _builtin(self, op_name: str, node: ast.Call, args: list[rx.Expr],
                 sinfo_args: Sequence[StructInfo] = (), attrs: dict[str, Any] | None = None) -> rx.Expr:
        call = rx.Call(rx.Op(op_name, span=self.mp.span(node.func)), args, attrs or {},
                       tuple(sinfo_args), span=self.mp.span(node))
        return self._with_sinfo(call)

def _sinfo_var_ids(sinfos: Any) -> set[int]:
    """Ids of the symbolic variables the struct infos mention (what they define)."""
    ids: set[int] = set()
    stack = list(sinfos)
    while stack:
        s = stack.pop()
        if isinstance(s, TupleStructInfo):
            stack.extend(s.fields)
            continue
        exprs = getattr(s, "shape", None) or getattr(s, "values", None) or ()
        value = getattr(s, "value", None)
        for e in (*exprs, *([value] if value is not None else [])):
            ids.update(id(v) for v in free_vars(e))
    return ids


def _is_metadata_ref(node: ast.AST) -> bool:
    """``metadata[...]``: TVM's reference into a module's metadata section."""
    return (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
            and node.value.id == "metadata")

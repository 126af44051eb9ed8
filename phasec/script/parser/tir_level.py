"""The TIR level of the TVMScript parser: ``@T.prim_func`` kernels (see
:mod:`phasec.script.parser`)."""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from phasec.ir import tir
from phasec.ir.node import Span
from phasec.script.parser.common import (
    TIR_BUILTIN_ERROR, _BINOPS, _LOOP_KINDS, _TIR_BUILTINS, _dotted, _is_docstring, _is_none,
    _stmt_kind,
)
from phasec.script.parser.expressions import _extent, _PrimExprParser
from phasec.script.parser.tir_blocks import _BlockParser, _LoopVars

if TYPE_CHECKING:
    from phasec.script.parser.driver import ModuleParser


class _Handle:
    """A ``T.handle`` parameter waiting for its ``T.match_buffer``."""

    __slots__ = ("name", "index", "node")

    def __init__(self, name: str, index: int, node: ast.AST) -> None:
        self.name = name
        self.index = index
        self.node = node


class _Wrap:
    """A statement that scopes over the rest of its block (let, alloc_buffer)."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[tir.Stmt], tir.Stmt]) -> None:
        self.make = make


class _PrimFuncParser(_BlockParser):
    """Parses one ``@T.prim_func``."""

    def __init__(self, mp: ModuleParser, fdef: ast.FunctionDef) -> None:
        self.mp = mp
        self.fdef = fdef
        self.scopes: list[dict[str, Any]] = [{}]
        self.params: list[Any] = []
        # id(loop var) -> (start, extent): T.axis.remap gives an axis its loop's domain
        self.loop_doms: dict[int, tuple[tir.PrimExpr, tir.PrimExpr]] = {}
        self.declared: set[int] = set()  # ids of `n = T.int64()` statements already handled
        self.prim = _PrimExprParser(mp, "int32", self._resolve)
        self.prim.handle_operand = self._handle_operand
        self.handle_vars: dict[int, tir.Var] = {}  # parameter index -> its handle variable
        self.attrs: dict[str, Any] = {}
        self.attrs_seen = False
        self.ret_dtype: str | None = None  # `-> T.bool`: the function returns a scalar

    def _lookup(self, name: str) -> Any:
        for scope in reversed(self.scopes):
            value = scope.get(name)
            if value is not None:
                return value
        return None

    def _resolve(self, name: str, node: ast.AST, declare: bool = False) -> Any:
        mp = self.mp
        if declare:  # "n" in a buffer shape: a symbolic dim
            var = self.scopes[0].get(name)
            if var is None:
                var = self.scopes[0][name] = tir.Var(name, "int64", span=mp.span(node))
            if not isinstance(var, tir.Var):
                raise mp.error(f"{name!r} is not a scalar variable", node)
            return var
        value = self._lookup(name)
        if value is None and name in mp.module_syms:  # `n = TypeVar("n")` at module level
            value = self.scopes[0][name] = tir.Var(name, "int64", span=mp.span(node))
        if value is None:
            raise mp.error(f"name {name!r} is not defined", node)
        if isinstance(value, _Handle):
            raise mp.error(f"handle {name!r} must be bound with {mp.T}.match_buffer before use",
                           node)
        if isinstance(value, _LoopVars):
            raise mp.error(f"{name!r} names the {len(value)} loop variables of a {mp.T}.grid; "
                           f"use it in {mp.T}.axis.remap or name them (for i, j in ...)", node)
        return value

    def _handle_operand(self, name: str) -> tir.Var | None:
        """The opaque variable of handle parameter ``name`` (an operand of a
        host call), or None if ``name`` is not one."""
        value = self._lookup(name)
        if isinstance(value, _Handle):
            var = self.handle_vars.get(value.index)
            if var is None:
                var = self.handle_vars[value.index] = tir.Var(name, "handle",
                                                              span=self.mp.span(value.node))
            return var
        if isinstance(value, tir.Var) and value.dtype == "handle":
            return value
        return None

    def _bind(self, name: str, value: Any) -> None:
        self.scopes[-1][name] = value

    def _sym_decl(self, stmt: ast.stmt) -> list[tuple[str, str, ast.AST]] | None:
        """[(name, dtype, target)] if ``stmt`` declares symbolic variables:
        ``n = T.int64()`` or ``m, n = T.int64(), T.int64()``."""
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            return None
        target, value = stmt.targets[0], stmt.value
        pairs = (list(zip(target.elts, value.elts))
                 if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)
                 and len(target.elts) == len(value.elts) else [(target, value)])
        out = []
        for t, v in pairs:
            if not (isinstance(t, ast.Name) and isinstance(v, ast.Call)):
                return None
            name = _dotted(v.func)
            if not (name is not None and len(name) == 2 and name[0] == self.mp.T
                    and name[1] in tir.DTYPES and not v.args and not v.keywords):
                return None
            out.append((t.id, name[1], t))
        return out

    def parse(self) -> tir.PrimFunc:
        mp, fdef = self.mp, self.fdef
        flags = mp.decorator_flags(fdef, ("private",))
        mp.check_plain_args(fdef)
        body = list(fdef.body)
        if body and _is_docstring(body[0]):
            body = body[1:]
        # Symbolic variables first, so parameter annotations may use them.
        for stmt in body:
            for sym, dtype, target in self._sym_decl(stmt) or ():
                self.scopes[0][sym] = tir.Var(sym, dtype, span=mp.span(target))
                self.declared.add(id(stmt))
        # Scalar parameters before buffers: a buffer's shape may name one that
        # comes later in the signature (TVM prints `gv: T.Buffer((1, "m * 2")),
        # m: T.int64`), and that name is the parameter, not a module-level one.
        scalars = {}
        for a in fdef.args.args:
            name = _dotted(a.annotation) if a.annotation is not None else None
            if name is not None and len(name) == 2 and name[0] == mp.T and name[1] in tir.DTYPES:
                scalars[a.arg] = tir.Var(a.arg, name[1], span=mp.span(a))
                self._bind(a.arg, scalars[a.arg])
        for i, a in enumerate(fdef.args.args):
            mp.where = a
            self.params.append(scalars.get(a.arg) or self._param(a, i))
            self._bind(a.arg, self.params[-1])
        if fdef.returns is not None and not _is_none(fdef.returns):
            ret = _dotted(fdef.returns)
            if ret is None or len(ret) != 2 or ret[0] != mp.T or ret[1] not in tir.DTYPES:
                raise mp.error(f"a {mp.T}.prim_func returns a scalar ({mp.T}.bool, "
                               f"{mp.T}.int64...) or nothing, got {mp.src(fdef.returns)!r}",
                               fdef.returns)
            self.ret_dtype = ret[1]
        stmt = self._stmts(body, top=True)
        # A handle without T.match_buffer stays an opaque handle parameter (TVM
        # passes such handles to builtins); phasec's kernels cannot use one.
        self.params = [(self.handle_vars.get(p.index)
                        or tir.Var(p.name, "handle", span=mp.span(p.node)))
                       if isinstance(p, _Handle) else p for p in self.params]
        attrs = {} if flags.get("private", False) else {"global_symbol": fdef.name}
        attrs.update(self.attrs)
        return tir.PrimFunc(self.params, stmt, attrs, span=mp.span(fdef), ret_dtype=self.ret_dtype)

    def _param(self, a: ast.arg, index: int) -> Any:
        mp = self.mp
        ann = a.annotation
        span = mp.span(a)
        if ann is None:
            raise mp.error(f"parameter {a.arg!r} needs an annotation ({mp.T}.Buffer(...), "
                           f"{mp.T}.handle or a scalar type such as {mp.T}.int64)", a)
        name = _dotted(ann)
        if name == (mp.T, "handle"):
            return _Handle(a.arg, index, a)
        if name is not None and len(name) == 2 and name[0] == mp.T and name[1] in tir.DTYPES:
            return tir.Var(a.arg, name[1], span=span)
        if isinstance(ann, ast.Call) and _dotted(ann.func) in ((mp.T, "Buffer"), (mp.T, "buffer")):
            shape, dtype = self._buffer_args(ann, f"{mp.T}.Buffer")
            return tir.Buffer(a.arg, shape, dtype, span=span)
        raise mp.error(f"unsupported parameter annotation {mp.src(ann)!r}; expected "
                       f"{mp.T}.Buffer(shape, dtype), {mp.T}.handle or {mp.T}.<dtype>", ann)

    def _scope_arg(self, call: ast.Call, what: str) -> tuple[ast.Call, str]:
        """An allocation's ``scope="shared"`` keyword: the call without it, and
        the scope (``"global"`` when not given)."""
        scope = "global"
        for kw in call.keywords:
            if kw.arg == "scope":
                scope = self.mp.str_arg(kw.value, f"{what} scope")
                if not scope:
                    raise self.mp.error(f"{what}: the storage scope is empty", kw.value)
        keywords = [kw for kw in call.keywords if kw.arg != "scope"]
        return ast.copy_location(ast.Call(call.func, call.args, keywords), call), scope

    def _buffer_args(self, call: ast.Call, what: str,
                     params: Sequence[str] = ("shape", "dtype")) -> tuple[list, str]:
        mp = self.mp
        kept = []
        for kw in call.keywords:
            if kw.arg in ("offset_factor", "align"):
                # Alignment facts about the buffer's data; phasec's buffers start
                # at their data (no element offset) and are allocated aligned.
                value = mp.number(kw.value)
                if not isinstance(value, int) or isinstance(value, bool) or value < -1:
                    raise mp.error(f"{what}: {kw.arg} must be an integer literal, got "
                                   f"{mp.src(kw.value)}", kw.value)
            elif kw.arg == "elem_offset":
                # TVM's element offset: 0, or a free variable (what offset_factor
                # makes, printed as `elem_offset=elem_offset_1`). phasec's buffers
                # start at their data, so a free offset is read as 0; any other
                # offset would move the data and is refused.
                value = kw.value
                if isinstance(value, ast.Call) and len(value.args) == 1 \
                        and _dotted(value.func) in ((mp.T, "int32"), (mp.T, "int64")):
                    value = value.args[0]
                if not (mp.number(value) == 0 or isinstance(value, ast.Name)):
                    raise mp.error(f"{what}: an element offset other than 0 or a free variable "
                                   f"is not supported, got {mp.src(kw.value)}", kw.value)
            else:
                kept.append(kw)
        if len(kept) != len(call.keywords):
            call = ast.copy_location(ast.Call(call.func, call.args, kept), call)
        a = mp.bind_args(call, what, params, params.index("shape") + 1)
        shape_node = a["shape"]
        same_as = self.prim.buffer_shape(shape_node)  # T.alloc_buffer(X.shape, ...)
        if same_as is not None:
            shape = list(same_as)
        else:
            elts = shape_node.elts if isinstance(shape_node, (ast.Tuple, ast.List)) else [shape_node]
            shape = mp.dims(self.prim, elts, f"{what} shape", dtype=None)
        dtype = mp.dtype_arg(a["dtype"], f"{what} dtype") if "dtype" in a else "float32"
        return shape, dtype

    # -- statements ----------------------------------------------------------
    def _stmts(self, stmts: Sequence[ast.stmt], top: bool = False) -> tir.Stmt:
        """A statement list; lets and allocations scope over the rest of it."""
        self.scopes.append({})
        try:
            pending: list[tuple[list[tir.Stmt], _Wrap]] = []
            current: list[tir.Stmt] = []
            for stmt in stmts:
                result = self._stmt(stmt, top)
                if result is None:
                    continue
                if isinstance(result, _Wrap):
                    pending.append((current, result))
                    current = []
                else:
                    current.append(result)
        finally:
            self.scopes.pop()
        body = _seq(current)
        for before, wrap in reversed(pending):
            body = _seq([*before, wrap.make(body)])
        return body

    def _stmt(self, stmt: ast.stmt, top: bool) -> tir.Stmt | _Wrap | None:
        mp = self.mp
        mp.where = stmt
        if isinstance(stmt, ast.For):
            return self._for(stmt)
        if isinstance(stmt, ast.Assign):
            return self._assign(stmt, top)
        if isinstance(stmt, ast.AnnAssign):
            return self._ann_assign(stmt)
        if isinstance(stmt, ast.AugAssign):
            return self._aug_assign(stmt)
        if isinstance(stmt, ast.If):
            cond = self.prim.parse(stmt.test)
            then = self._stmts(stmt.body)
            other = self._stmts(stmt.orelse) if stmt.orelse else None
            return tir.IfThenElse(cond, then, other, span=mp.span(stmt))
        if isinstance(stmt, ast.While):
            if stmt.orelse:
                raise mp.error("a while loop in TIR has no `else` branch", stmt.orelse[0])
            cond = self.prim.parse(stmt.test)
            if cond.dtype != "bool":
                raise mp.error(f"a while condition must be a bool expression, got a "
                               f"{cond.dtype} value", stmt.test)
            return tir.While(cond, self._stmts(stmt.body), span=mp.span(stmt))
        if isinstance(stmt, ast.With):
            return self._with(stmt)
        if isinstance(stmt, ast.Expr):
            return self._expr_stmt(stmt, top)
        if isinstance(stmt, ast.Pass):
            return None
        if isinstance(stmt, ast.Return):
            if stmt.value is None:
                raise mp.error("`return` needs a value (a PrimFunc with a return annotation "
                               "returns a scalar)", stmt)
            return self._return(stmt.value, stmt)
        raise mp.error(f"unsupported statement '{_stmt_kind(stmt)}' in {mp.T}.prim_func", stmt)

    def _attr_args(self, call: ast.Call) -> list[tuple[str, Any]]:
        """``T.attr({"key": value, ...})`` or ``T.attr(0, "key", value)``: the
        (key, value) pairs (TVM's node 0, "no particular node", only)."""
        mp = self.mp
        what = f"{mp.T}.attr"
        if len(call.args) == 1 and not call.keywords and isinstance(call.args[0], ast.Dict):
            items = list(zip(call.args[0].keys, call.args[0].values))
        else:
            a = mp.bind_args(call, what, ("node", "attr_key", "value"), 3)
            if mp.number(a["node"]) != 0:
                raise mp.error(f"{what} on a node other than 0 is not supported, got "
                               f"{mp.src(a['node'])}", a["node"])
            items = [(a["attr_key"], a["value"])]
        out = []
        for k, v in items:
            if k is None:
                raise mp.error("dictionary unpacking (**) is not supported", v)
            key = mp.str_arg(k, f"{what} key")
            if isinstance(v, ast.Constant) and isinstance(v.value, (str, bool, int, float)):
                out.append((key, v.value))
            else:
                out.append((key, self.prim.parse(v)))
        return out

    def _return(self, value: ast.AST, stmt: ast.stmt) -> tir.Stmt:
        """``return value`` / ``T.ret(value)``: ``Evaluate(ret(value))``, as TVM."""
        mp = self.mp
        if self.ret_dtype is None:
            raise mp.error(f"this {mp.T}.prim_func returns a value; annotate its return type, "
                           f"e.g. `-> {mp.T}.bool`", stmt)
        expr = self.prim.parse(value, self.ret_dtype)
        if expr.dtype != self.ret_dtype:
            raise mp.error(f"the function returns {self.ret_dtype} but this value is "
                           f"{expr.dtype}", value)
        return tir.Evaluate(tir.Call(tir.RET, [expr], span=mp.span(value)), span=mp.span(stmt))

    def _expr_stmt(self, stmt: ast.Expr, top: bool) -> tir.Stmt | None:
        mp = self.mp
        value = stmt.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return None
        name = _dotted(value.func) if isinstance(value, ast.Call) else None
        if name == (mp.T, "evaluate"):
            a = mp.bind_args(value, f"{mp.T}.evaluate", ("value",), 1)
            return tir.Evaluate(self.prim.parse(a["value"]), span=mp.span(stmt))
        if name == (mp.T, "attr"):  # scopes over the rest of the list, as TVM reads it
            attrs = self._attr_args(value)
            span = mp.span(stmt)

            def make(body: tir.Stmt) -> tir.Stmt:
                for key, v in reversed(attrs):
                    body = tir.AttrStmt(key, v, body, span=span)
                return body
            return _Wrap(make)
        if name == (mp.T, "ret"):
            a = mp.bind_args(value, f"{mp.T}.ret", ("value",), 1)
            return self._return(a["value"], stmt)
        if name == (mp.T, "assume"):  # TVM's statement form of Evaluate(T.assume(cond))
            return tir.Evaluate(self.prim.parse(value), span=mp.span(stmt))
        if name == (mp.T, "func_attr"):
            if not top or self.attrs_seen or len(value.args) != 1 or value.keywords:
                raise mp.error(f"{mp.T}.func_attr expects one dictionary literal, once, at the "
                               f"top of the function body", stmt)
            self.attrs_seen = True
            self.attrs = mp.attr_dict(value.args[0])
            return None
        if name in ((mp.T, "reads"), (mp.T, "writes")):
            raise mp.error(f"{mp.src(value.func)} is only allowed directly inside a "
                           f"{mp.T}.block", stmt)
        if name is not None and len(name) == 2 and name[0] == mp.T and name[1] in tir.HOST_CALLS:
            # TVM's statement form of T.evaluate(T.call_packed(...))
            return tir.Evaluate(self.prim.parse(value), span=mp.span(stmt))
        if name is not None and len(name) == 2 and name[0] == mp.T and name[1] in _TIR_BUILTINS:
            raise mp.error(f"{mp.T}.{name[1]}: {TIR_BUILTIN_ERROR}", stmt)
        raise mp.error(f"unsupported expression statement {mp.src(value)!r} in {mp.T}.prim_func "
                       f"(use {mp.T}.evaluate(...) to evaluate a scalar)", stmt)

    def _assign(self, stmt: ast.Assign, top: bool) -> tir.Stmt | _Wrap | None:
        mp = self.mp
        if len(stmt.targets) != 1:
            raise mp.error("chained assignment is not supported", stmt)
        target, value = stmt.targets[0], stmt.value
        if isinstance(target, ast.Subscript):
            return self._store(target, value, stmt)
        decl = self._sym_decl(stmt)
        if decl is not None:
            if id(stmt) not in self.declared:
                for sym, dtype, t in decl:
                    self._bind(sym, tir.Var(sym, dtype, span=mp.span(t)))
            return None
        if isinstance(target, ast.Tuple):
            raise mp.error(f"tuple assignment is only supported for {mp.T}.axis.remap inside a "
                           f"{mp.T}.block", stmt)
        if not isinstance(target, ast.Name):
            raise mp.error(f"unsupported assignment target {mp.src(target)!r}", target)
        name = _dotted(value.func) if isinstance(value, ast.Call) else None
        if name in ((mp.T, "alloc_buffer"), (mp.T, "decl_buffer"), (mp.T, "sblock_alloc_buffer"),
                    (mp.T, "alloc_shared"), (mp.T, "alloc_local")):
            # All scope over the rest of the statement list (TVM prints
            # T.decl_buffer so when nothing follows the allocation's scope;
            # T.sblock_alloc_buffer is an allocation of the implicit root block,
            # which TVM 0.27 prints at the top of the function body).
            value, scope = self._scope_arg(value, f"{mp.T}.{name[1]}")
            if name[1] in ("alloc_shared", "alloc_local"):  # TVM 0.27's T.alloc_buffer(scope=...)
                if any(kw.arg == "scope" for kw in stmt.value.keywords):
                    raise mp.error(f"{mp.T}.{name[1]} has its scope already", stmt.value)
                scope = name[1].split("_")[1]
            shape, dtype = self._buffer_args(value, f"{mp.T}.{name[1]}")
            buf = tir.Buffer(target.id, shape, dtype, span=mp.span(target), scope=scope)
            self._bind(target.id, buf)
            span = mp.span(stmt)
            return _Wrap(lambda body: tir.Allocate(buf, body, span=span))
        if name == (mp.T, "match_buffer"):
            if not top:
                raise mp.error(f"{mp.T}.match_buffer is only allowed at the top of the function "
                               f"body", stmt)
            self._match_buffer(target, value)
            return None
        if name is not None and len(name) >= 2 and name[:2] == (mp.T, "axis"):
            raise mp.error(f"{mp.src(value.func)} is only allowed directly inside a {mp.T}.block",
                           stmt)
        expr = self.prim.parse(value)
        var = tir.Var(target.id, expr.dtype, span=mp.span(target))
        self._bind(target.id, var)
        span = mp.span(stmt)
        return _Wrap(lambda body: tir.LetStmt(var, expr, body, span=span))

    def _ann_assign(self, stmt: ast.AnnAssign) -> _Wrap:
        mp = self.mp
        if not isinstance(stmt.target, ast.Name) or stmt.value is None:
            raise mp.error(f"expected `name: {mp.T}.<dtype> = value`", stmt)
        annotation = stmt.annotation
        if isinstance(annotation, ast.Subscript) and _dotted(annotation.value) == (mp.T, "let"):
            # `v: T.let[T.int64] = value`: TVM 0.27's spelling of a scalar binding
            # (its flat Bind statement), here as for `v: T.int64 = value`.
            annotation = annotation.slice
        dtype = None
        if _dotted(annotation) == (mp.T, "let"):  # `v: T.let = value`: the value's dtype
            expr = self.prim.parse(stmt.value)
            dtype = expr.dtype
        else:
            ann = _dotted(annotation)
            if ann is None or len(ann) != 2 or ann[0] != mp.T or ann[1] not in tir.DTYPES:
                raise mp.error(f"expected a scalar type annotation such as {mp.T}.float32 or "
                               f"{mp.T}.let[{mp.T}.float32], got {mp.src(stmt.annotation)!r}",
                               stmt.annotation)
            dtype = ann[1]
            expr = self.prim.parse(stmt.value, dtype)
        var = tir.Var(stmt.target.id, dtype, span=mp.span(stmt.target))
        self._bind(stmt.target.id, var)
        span = mp.span(stmt)
        return _Wrap(lambda body: tir.LetStmt(var, expr, body, span=span))

    def _store(self, target: ast.Subscript, value: ast.AST, stmt: ast.stmt) -> tir.Stmt:
        mp = self.mp
        load = self.prim._load(target)
        expr = self.prim.parse(value, load.buffer.dtype)
        return tir.BufferStore(load.buffer, expr, load.indices, span=mp.span(stmt))

    def _aug_assign(self, stmt: ast.AugAssign) -> tir.Stmt:
        mp = self.mp
        op = _BINOPS.get(type(stmt.op))
        if not isinstance(stmt.target, ast.Subscript) or op is None:
            raise mp.error("augmented assignment is only supported on buffer elements "
                           "(A[i] += x)", stmt)
        load = self.prim._load(stmt.target)
        expr = self.prim.parse(stmt.value, load.buffer.dtype)
        new = tir.BinaryOp(op, load, expr, span=mp.span(stmt))
        return tir.BufferStore(load.buffer, new, load.indices, span=mp.span(stmt))

    def _match_buffer(self, target: ast.Name, call: ast.Call) -> None:
        mp = self.mp
        what = f"{mp.T}.match_buffer"
        if not call.args or not isinstance(call.args[0], ast.Name):
            raise mp.error(f"{what} expects a handle parameter as first argument", call)
        handle = self.scopes[0].get(call.args[0].id)
        if not isinstance(handle, _Handle):
            raise mp.error(f"{what}: {call.args[0].id!r} is not an unmatched {mp.T}.handle "
                           f"parameter", call.args[0])
        rest = ast.Call(func=call.func, args=call.args[1:], keywords=call.keywords)
        ast.copy_location(rest, call)
        shape, dtype = self._buffer_args(rest, what)
        buf = tir.Buffer(target.id, shape, dtype, span=mp.span(target))
        self.params[handle.index] = buf
        del self.scopes[0][handle.name]
        self.scopes[0][target.id] = buf

    def _grid_extents(self, args: list[ast.expr]) -> tuple[list[tir.PrimExpr], list[ast.AST]]:
        """The extents of ``T.grid(...)`` and the node each comes from;
        ``*A.shape`` spreads a buffer's shape (as TVM reads it)."""
        mp = self.mp
        extents: list[tir.PrimExpr] = []
        nodes: list[ast.AST] = []
        for a in args:
            if isinstance(a, ast.Starred):
                inner = a.value
                buf = (self._lookup(inner.value.id) if isinstance(inner, ast.Attribute)
                       and inner.attr == "shape" and isinstance(inner.value, ast.Name) else None)
                if not isinstance(buf, tir.Buffer):
                    raise mp.error(f"{mp.T}.grid: only a buffer's shape can be spread "
                                   f"(*A.shape), got {mp.src(a)!r}", a)
                extents += buf.shape
                nodes += [a] * len(buf.shape)
            else:
                extents.append(self.prim.parse(a))
                nodes.append(a)
        return extents, nodes

    def _for(self, stmt: ast.For) -> tir.Stmt:
        mp = self.mp
        if stmt.orelse:
            raise mp.error("for-else is not supported", stmt.orelse[0])
        it = stmt.iter
        name = _dotted(it.func) if isinstance(it, ast.Call) else None
        kinds = ", ".join(f"{mp.T}.{k}" for k in _LOOP_KINDS)
        if name == ("range",):
            kind = "serial"
        elif name is not None and len(name) == 2 and name[0] == mp.T and name[1] in (*_LOOP_KINDS, "grid"):
            kind = name[1]
        else:
            raise mp.error(f"unsupported loop {mp.src(it)!r}; expected range(...), {kinds} or "
                           f"{mp.T}.grid(...)", it)
        thread = None
        if kind == "thread_binding":
            it, thread = self._thread_axis(it)
        if it.keywords:
            raise mp.error(f"{mp.src(it.func)} takes positional arguments only",
                           it.keywords[0].value)
        span = mp.span(stmt)
        arg_nodes: list[ast.AST] = list(it.args)
        if kind == "grid":
            targets = stmt.target.elts if isinstance(stmt.target, ast.Tuple) else [stmt.target]
            extents, arg_nodes = self._grid_extents(it.args)
            grouped = (len(targets) == 1 and isinstance(targets[0], ast.Name)
                       and len(extents) > 1)
            if grouped:  # `for iters in T.grid(m, n)`: one variable per extent
                targets = [ast.copy_location(ast.Name(f"{stmt.target.id}_{k}", ast.Store()),
                                             stmt.target) for k in range(len(extents))]
            if not extents or len(targets) != len(extents):
                raise mp.error(f"{mp.T}.grid has {len(extents)} extent(s) but the loop has "
                               f"{len(targets)} variable(s)", stmt.target)
            bounds = [(tir.IntImm(0, e.dtype, span=e.span), e) for e in extents]
        else:
            targets = [stmt.target]
            if len(it.args) == 1:
                extent = self.prim.parse(it.args[0])
                bounds = [(tir.IntImm(0, extent.dtype, span=extent.span), extent)]
            elif len(it.args) == 2:
                start, stop = self.prim.parse_pair(it.args[0], it.args[1])
                bounds = [(start, _extent(start, stop))]
            else:
                raise mp.error(f"{mp.src(it.func)} takes 1 or 2 arguments (extent, or start and "
                               f"stop), got {len(it.args)}", it)
        for (start, extent), arg in zip(bounds, arg_nodes if kind == "grid" or len(it.args) == 1
                                         else it.args[1:]):
            for bound in (start, extent):
                if not tir.is_int(bound.dtype):
                    raise mp.error(f"loop bounds must be integers, got a {bound.dtype} value "
                                   f"in {mp.src(it)!r}", arg)
        loop_vars = []
        self.scopes.append({})
        try:
            for t, (start, extent) in zip(targets, bounds):
                if not isinstance(t, ast.Name):
                    raise mp.error(f"a loop variable must be a name, got {mp.src(t)!r}", t)
                var = tir.Var(t.id, extent.dtype, span=mp.span(t))
                self.loop_doms[id(var)] = (start, extent)
                self._bind(t.id, var)
                loop_vars.append(var)
            if kind == "grid" and grouped:
                self._bind(stmt.target.id, _LoopVars(loop_vars))
            body = self._stmts(stmt.body)
        finally:
            self.scopes.pop()
        loop_kind = "serial" if kind == "grid" else kind
        for var, (start, extent) in zip(reversed(loop_vars), reversed(bounds)):
            body = tir.For(var, start, extent, loop_kind, body, span=span, thread=thread)
        return body

    def _thread_axis(self, it: ast.Call) -> tuple[ast.Call, str]:
        """``T.thread_binding(extent, thread="threadIdx.x")`` (also ``(start,
        stop, "blockIdx.x")``): the call without its thread axis, and the axis."""
        mp = self.mp
        args, keywords = list(it.args), list(it.keywords)
        node = None
        for kw in keywords:
            if kw.arg == "thread":
                node = kw.value
        keywords = [kw for kw in keywords if kw.arg != "thread"]
        if node is None and args and isinstance(args[-1], ast.Constant) \
                and isinstance(args[-1].value, str):
            node = args.pop()
        if node is None:
            raise mp.error(f"{mp.T}.thread_binding needs its thread axis, e.g. "
                           f"thread=\"threadIdx.x\"", it)
        thread = mp.str_arg(node, f"{mp.T}.thread_binding thread")
        if not thread:
            raise mp.error(f"{mp.T}.thread_binding: the thread axis is empty", node)
        return ast.copy_location(ast.Call(it.func, args, keywords), it), thread

    def _with(self, stmt: ast.With) -> tir.Stmt:
        mp = self.mp
        item = stmt.items[0]
        ctx = item.context_expr
        name = _dotted(ctx.func) if isinstance(ctx, ast.Call) else None
        if len(stmt.items) == 1 and name in ((mp.T, "decl_buffer"), (mp.T, "LetStmt")):
            return self._scoped(stmt, name[1])
        if len(stmt.items) == 1 and name == (mp.T, "attr") and item.optional_vars is None:
            attrs = self._attr_args(ctx)
            if [k for k, _ in attrs] == [tir.SCOPE_ATTR]:
                # the printer's scope of an allocation or let that statements
                # outside it follow: the body alone, its names local to it
                self.scopes.append({})
                try:
                    return self._stmts(stmt.body)
                finally:
                    self.scopes.pop()
            body = self._stmts(stmt.body)  # `with T.attr(...):` scopes over its body only
            for key, v in reversed(attrs):
                body = tir.AttrStmt(key, v, body, span=mp.span(stmt))
            return body
        if len(stmt.items) != 1 or item.optional_vars is not None or name not in (
                (mp.T, "block"), (mp.T, "sblock")):
            if name == (mp.T, "init"):
                raise mp.error(f"`with {mp.T}.init()` is only allowed directly inside a "
                               f"{mp.T}.block", stmt)
            raise mp.error(f"unsupported statement 'with {mp.src(ctx)}' in {mp.T}.prim_func; "
                           f"expected `with {mp.T}.block(\"name\"):`, `with {mp.T}.decl_buffer("
                           f"shape, dtype) as name:` or `with {mp.T}.LetStmt(value) as name:`",
                           stmt)
        a = mp.bind_args(ctx, f"{mp.T}.{name[1]}", ("name",), 0)
        block_name = mp.str_arg(a["name"], f"{mp.T}.block name") if "name" in a else ""
        return self._block(stmt, block_name)

    def _scoped(self, stmt: ast.With, kind: str) -> tir.Stmt:
        """``with T.decl_buffer(shape, dtype) as buf:`` (an allocation) or
        ``with T.LetStmt(value[, T.<dtype>]) as v:`` (a let) whose scope is the
        ``with`` body only, unlike ``buf = T.alloc_buffer(...)`` / ``v = value``,
        which scope over the rest of the statement list."""
        mp = self.mp
        item = stmt.items[0]
        call, target = item.context_expr, item.optional_vars
        what = f"{mp.T}.{kind}"
        if not isinstance(target, ast.Name):
            raise mp.error(f"`with {what}(...)` needs `as name` with a plain name", stmt)
        expr: tir.PrimExpr | None = None
        if kind == "decl_buffer":
            call, scope = self._scope_arg(call, what)
            shape, dtype = self._buffer_args(call, what)
            value: Any = tir.Buffer(target.id, shape, dtype, span=mp.span(target), scope=scope)
        else:
            a = mp.bind_args(call, what, ("value", "type_annotation"), 1)
            dtype = None
            if "type_annotation" in a:
                ann = _dotted(a["type_annotation"])
                if ann is None or len(ann) != 2 or ann[0] != mp.T or ann[1] not in tir.DTYPES:
                    raise mp.error(f"{what}: expected a scalar type such as {mp.T}.int64, got "
                                   f"{mp.src(a['type_annotation'])!r}", a["type_annotation"])
                dtype = ann[1]
            # With an annotation the value's literals take its dtype (as in
            # `v: T.int64 = value`); without, the variable takes the value's.
            expr = self.prim.parse(a["value"], dtype)
            value = tir.Var(target.id, dtype or expr.dtype, span=mp.span(target))
        self.scopes.append({})
        try:
            self._bind(target.id, value)
            body = self._stmts(stmt.body)
        finally:
            self.scopes.pop()
        span = mp.span(stmt)
        if expr is None:
            return tir.Allocate(value, body, span=span)
        return tir.LetStmt(value, expr, body, span=span)

def _seq(stmts: list[tir.Stmt]) -> tir.Stmt:
    if len(stmts) == 1:
        return stmts[0]
    span = None
    if stmts and stmts[0].span is not None and stmts[-1].span is not None:
        first, last = stmts[0].span, stmts[-1].span
        span = Span(first.file, first.line, first.col, last.end_line, last.end_col)
    return tir.seq(stmts, span=span)

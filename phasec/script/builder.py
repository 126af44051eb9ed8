"""Building and normalizing Relax functions.

:class:`BlockBuilder` builds functions binding by binding, in the spirit of
TVM's ``relax.BlockBuilder``::

    bb = BlockBuilder()
    x = Var("x", TensorStructInfo((n, 4), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            lv = bb.emit(call_op("relax.exp", x))
            gv = bb.emit_output(call_op("relax.add", lv, x))
        bb.emit_func_output(gv)
    mod = bb.get()

:func:`normalize_function` puts an existing function in A-normal form (every
call operand a leaf: a variable, constant, shape, prim value, string, dtype,
global, extern function, or a tuple of leaves) with struct info filled in
everywhere; it returns the very same object when there is nothing to do.

Fresh variable names are deterministic (``lv``, ``lv1``, ``lv2``...) and never
collide with names already used in the function. Binding lists are processed
with loops, so functions with 100k bindings are fine; recursion depth is
bounded by expression nesting (nested calls, branches, inner functions).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from phasec.errors import StructInfoError
from phasec.ir.expr import (
    LEAF_EXPRS, Binding, BindingBlock, Call, DataflowBlock, DataflowVar, Expr, Function,
    GlobalVar, If, MatchCast, SeqExpr, Tuple, TupleGetItem, Var, VarBinding,
)
from phasec.op.infer import context_from_module, infer_struct_info
from phasec.ir.module import IRModule
from phasec.ir.node import set_field
from phasec.op.registry import InferContext
from phasec.ir.struct_info import StructInfo
from phasec.ir.tir import PrimFunc

__all__ = ["BlockBuilder", "normalize_function", "normalize_expr", "is_leaf", "NameTable"]


def is_leaf(expr: Expr) -> bool:
    """True for expressions allowed as call operands in A-normal form."""
    if isinstance(expr, Tuple):
        stack = list(expr.fields)
        while stack:
            e = stack.pop()
            if isinstance(e, Tuple):
                stack.extend(e.fields)
            elif not isinstance(e, LEAF_EXPRS):
                return False
        return True
    return isinstance(expr, LEAF_EXPRS)


class NameTable:
    """Deterministic fresh names: ``hint``, then ``hint1``, ``hint2``... skipping used ones."""

    def __init__(self, used: Iterator[str] | Sequence[str] = ()) -> None:
        self._used: set[str] = set(used)
        self._next: dict[str, int] = {}

    def add(self, name: str) -> None:
        self._used.add(name)

    def fresh(self, hint: str) -> str:
        hint = hint or "v"
        if hint not in self._used:
            self._used.add(hint)
            return hint
        k = self._next.get(hint, 1)
        while f"{hint}{k}" in self._used:
            k += 1
        self._next[hint] = k + 1
        name = f"{hint}{k}"
        self._used.add(name)
        return name


def _collect_names(func: Function) -> set[str]:
    """Every Relax variable name used in ``func`` (params, bindings, inner functions)."""
    names: set[str] = set()
    stack: list[Any] = [func]
    while stack:
        e = stack.pop()
        if isinstance(e, Function):
            names.update(p.name_hint for p in e.params)
            stack.append(e.body)
        elif isinstance(e, SeqExpr):
            for block in e.blocks:
                for b in block.bindings:
                    names.add(b.var.name_hint)
                    if isinstance(b.value, (Function, SeqExpr, If)):
                        stack.append(b.value)
            stack.append(e.body)
        elif isinstance(e, If):
            stack.append(e.true_branch)
            stack.append(e.false_branch)
    return names


# Leaf expressions other than variables: never rewritten by normalization.
_ATOMS = frozenset(t for t in LEAF_EXPRS if not issubclass(t, Var))


def _retype_var(var: Var, sinfo: StructInfo) -> Var:
    return type(var)(var.name_hint, sinfo, span=var.span)


class _Normalizer:
    """A-normalization and struct-info filling, emitting into a binding list.

    ``self._scopes[-1]`` is the list of bindings being produced for the
    current block together with whether it is a dataflow block (fresh
    variables there are DataflowVars).
    """

    def __init__(self, ctx: InferContext | None, names: NameTable) -> None:
        self.ctx = ctx
        self.names = names
        self.remap: dict[Var, Var] = {}
        self._scopes: list[tuple[list[Binding], bool]] = []

    # -- scopes ----------------------------------------------------------
    def push(self, out: list[Binding], dataflow: bool) -> None:
        self._scopes.append((out, dataflow))

    def pop(self) -> None:
        self._scopes.pop()

    def bind(self, value: Expr, hint: str = "lv") -> Var:
        """Bind a normalized value to a fresh variable in the current block."""
        if not self._scopes:
            raise StructInfoError("cannot bind a nested expression outside of a binding block; "
                                  "normalize inside a function", getattr(value, "span", None))
        out, dataflow = self._scopes[-1]
        sinfo = self.sinfo_of(value)
        cls = DataflowVar if dataflow else Var
        var = cls(self.names.fresh(hint), sinfo, span=getattr(value, "span", None))
        out.append(VarBinding(var, value, span=getattr(value, "span", None)))
        return var

    def sinfo_of(self, expr: Expr) -> StructInfo:
        sinfo = expr.struct_info
        return sinfo if sinfo is not None else infer_struct_info(expr, self.ctx)

    # -- expressions -----------------------------------------------------
    def leaf(self, expr: Expr) -> Expr:
        """Normalize ``expr`` and bind it to a variable unless it is a leaf."""
        t = type(expr)
        if t is Var or t is DataflowVar:  # the common case, kept cheap
            return self.remap.get(expr, expr) if self.remap else expr
        if t in _ATOMS:
            return expr
        new = self.expr(expr)
        return new if is_leaf(new) else self.bind(new)

    def expr(self, expr: Expr) -> Expr:
        """Normalize ``expr``: operands become leaves, struct info is set."""
        if isinstance(expr, Var):
            return self.remap.get(expr, expr)
        if isinstance(expr, Call):
            return self._call(expr)
        if isinstance(expr, Tuple):
            fields = [self.leaf(f) for f in expr.fields]
            if all(a is b for a, b in zip(fields, expr.fields)) and expr.struct_info is not None:
                return expr
            return self._with_sinfo(Tuple(fields, span=expr.span))
        if isinstance(expr, TupleGetItem):
            tup = self.leaf(expr.tuple_value)
            if tup is expr.tuple_value and expr.struct_info is not None:
                return expr
            new = TupleGetItem(tup, expr.index, span=expr.span)
            return self._with_sinfo(new)
        if isinstance(expr, If):
            cond = self.leaf(expr.cond)
            tb = self.seq(expr.true_branch)
            fb = self.seq(expr.false_branch)
            if (cond is expr.cond and tb is expr.true_branch and fb is expr.false_branch
                    and expr.struct_info is not None):
                return expr
            new = If(cond, tb, fb, span=expr.span)
            return self._with_sinfo(new)
        if isinstance(expr, SeqExpr):
            return self.seq(expr)
        if isinstance(expr, Function):
            return self.function(expr)
        return expr  # other leaves carry their own struct info

    def _with_sinfo(self, expr: Expr) -> Expr:
        if expr.struct_info is None:
            # ``expr`` was just created here and is not shared yet.
            set_field(expr, "struct_info", infer_struct_info(expr, self.ctx))
        return expr

    def _call(self, call: Call) -> Expr:
        op = call.op
        new_op = self.remap.get(op, op) if isinstance(op, Var) else (
            op if isinstance(op, LEAF_EXPRS) else self.leaf(op))
        args = [self.leaf(a) for a in call.args]
        unchanged = new_op is op and all(a is b for a, b in zip(args, call.args))
        if unchanged and call.struct_info is not None:
            return call
        keep = call.struct_info  # an existing (e.g. annotated) struct info wins
        new = Call(new_op, args, call.attrs, call.sinfo_args, struct_info=keep, span=call.span)
        return self._with_sinfo(new)

    # -- blocks ----------------------------------------------------------
    def block(self, block: BindingBlock) -> list[Binding]:
        """Normalize one block; returns the new binding list."""
        out: list[Binding] = []
        dataflow = isinstance(block, DataflowBlock)
        self.push(out, dataflow)
        try:
            for b in block.bindings:
                value = self.expr(b.value)
                var = b.var
                if var.struct_info is None:
                    # a match_cast's variable has the struct info it casts to
                    var = _retype_var(var, b.struct_info if isinstance(b, MatchCast)
                                      else self.sinfo_of(value))
                    self.remap[b.var] = var
                out.append(b if value is b.value and var is b.var else b.rebind(value, var))
        finally:
            self.pop()
        return out

    def seq(self, seq: Expr) -> SeqExpr:
        """Normalize a function body or branch (wrapping a bare expression)."""
        if not isinstance(seq, SeqExpr):
            seq = SeqExpr([], seq, span=getattr(seq, "span", None))
            changed = True
        else:
            changed = False
        blocks: list[BindingBlock] = []
        for block in seq.blocks:
            bindings = self.block(block)
            if len(bindings) == len(block.bindings) and all(
                    a is b for a, b in zip(bindings, block.bindings)):
                blocks.append(block)
            else:
                changed = True
                blocks.append(type(block)(bindings, span=block.span))
        # The body is evaluated after the blocks, outside any dataflow block.
        tail: list[Binding] = []
        self.push(tail, False)
        try:
            body = self.leaf(seq.body)
        finally:
            self.pop()
        if tail:
            changed = True
            if blocks and type(blocks[-1]) is BindingBlock:
                last = blocks.pop()
                blocks.append(BindingBlock([*last.bindings, *tail], span=last.span))
            else:
                blocks.append(BindingBlock(tail))
        if not changed and body is seq.body and seq.struct_info is not None:
            return seq
        return SeqExpr(blocks, body, span=seq.span)

    def function(self, func: Function) -> Function:
        for p in func.params:
            if p.struct_info is None:
                raise StructInfoError(f"parameter {p.name_hint} of a function has no struct info; "
                                      "annotate it (e.g. x: R.Tensor((n, 4), \"float32\"))",
                                      p.span or func.span)
        body = self.seq(func.body)
        if body is func.body and func.struct_info is not None:
            return func
        return Function(func.params, body, func.ret_struct_info, func.is_pure, func.attrs,
                        span=func.span)


def normalize_function(func: Function, ctx: InferContext | None = None) -> Function:
    """``func`` in A-normal form with struct info everywhere (the same object if already so).

    Nested non-leaf operands are bound to fresh variables (``lv``, ``lv1``...,
    DataflowVars inside dataflow blocks) just before their use; a non-leaf
    body is bound in a trailing binding block. Variables without struct info
    are replaced by annotated copies (and their uses updated).
    """
    names = NameTable(_collect_names(func))
    return _Normalizer(ctx, names).function(func)


def normalize_expr(expr: Expr, ctx: InferContext | None = None) -> Expr:
    """Fill in struct info of ``expr`` without introducing bindings.

    Only an expression whose operands are already leaves can be normalized
    this way (use :class:`BlockBuilder` to bind nested operands).
    """
    return _Normalizer(ctx, NameTable()).expr(expr)


# ---------------------------------------------------------------------------
# BlockBuilder
# ---------------------------------------------------------------------------

class _FunctionFrame:
    def __init__(self, name: str, params: Sequence[Var], attrs: Mapping[str, Any],
                 pure: bool, private: bool) -> None:
        self.name = name
        self.params = list(params)
        self.attrs = dict(attrs)
        self.pure = pure
        self.private = private
        self.blocks: list[BindingBlock] = []
        self.bindings: list[Binding] = []  # the open block's bindings
        self.dataflow = False
        self.outputs: list[Var] = []
        self.output: Expr | None = None
        self.names = NameTable(p.name_hint for p in params)
        self.normalizer: _Normalizer | None = None


class BlockBuilder:
    """Build Relax functions binding by binding, always in normal form.

    ``mod`` (optional) supplies functions to start from; :meth:`get` returns
    a new IRModule with everything added (the input is never modified).
    """

    def __init__(self, mod: IRModule | None = None) -> None:
        self._functions: dict[str, Any] = dict(mod.functions) if mod is not None else {}
        self._attrs = dict(mod.attrs) if mod is not None else {}
        self._globals: dict[str, StructInfo] = dict(context_from_module(mod).globals)
        self._frame: _FunctionFrame | None = None
        self._ctx = InferContext(self._globals)

    # -- module --------------------------------------------------------------
    def _fresh_global(self, name: str) -> str:
        if name not in self._functions:
            return name
        k = 1
        while f"{name}{k}" in self._functions:
            k += 1
        return f"{name}{k}"

    def add_func(self, func: Function | PrimFunc, name: str) -> GlobalVar:
        """Add a function; a taken name becomes ``name1``, ``name2``... (deterministic).

        Adding the very same function object again returns its existing name.
        """
        for existing, f in self._functions.items():
            if f is func:
                return GlobalVar(existing)
        name = self._fresh_global(name)
        self._set_func(name, func)
        return GlobalVar(name)

    def update_func(self, gv: GlobalVar | str, func: Function | PrimFunc) -> None:
        """Replace (or add) the function named ``gv``."""
        self._set_func(gv.name_hint if isinstance(gv, GlobalVar) else gv, func)

    def _set_func(self, name: str, func: Function | PrimFunc) -> None:
        self._functions[name] = func
        self._globals.update(context_from_module({name: func}).globals)

    def get(self) -> IRModule:
        """The module built so far (an error while a function is open)."""
        if self._frame is not None:
            raise StructInfoError(f"function {self._frame.name!r} is still being built; "
                                  "call emit_func_output first")
        return IRModule(self._functions, self._attrs)

    @property
    def context(self) -> InferContext:
        """The inference context: struct info of every function added so far."""
        return self._ctx

    # -- scopes --------------------------------------------------------------
    def _need_frame(self, what: str) -> _FunctionFrame:
        if self._frame is None:
            raise StructInfoError(f"{what} must be called inside 'with bb.function(...)'")
        if self._frame.output is not None:
            raise StructInfoError(f"function {self._frame.name!r} is finished (emit_func_output "
                                  f"was called); {what} cannot add to it")
        return self._frame

    @contextmanager
    def function(self, name: str, params: Sequence[Var], attrs: Mapping[str, Any] | None = None,
                 pure: bool = True, private: bool = False) -> Iterator[None]:
        """Open a function; the body ends with :meth:`emit_func_output`."""
        if self._frame is not None:
            raise StructInfoError(f"cannot open function {name!r} inside function "
                                  f"{self._frame.name!r}; build inner functions separately")
        for p in params:
            if not isinstance(p, Var) or p.struct_info is None:
                raise StructInfoError(f"parameter {getattr(p, 'name_hint', p)!r} of {name!r} "
                                      "must be a Var with struct info")
        frame = _FunctionFrame(name, params, attrs or {}, pure, private)
        self._frame = frame
        try:
            yield
        except BaseException:
            self._frame = None
            raise
        self._frame = None
        if frame.output is None:
            raise StructInfoError(f"function {name!r} ended without emit_func_output")

    @contextmanager
    def dataflow(self) -> Iterator[None]:
        """Open a dataflow block: emitted variables are DataflowVars."""
        frame = self._need_frame("dataflow()")
        if frame.dataflow:
            raise StructInfoError("dataflow blocks cannot be nested")
        self._close_block(frame)
        frame.dataflow = True
        frame.outputs = []
        try:
            yield
        finally:
            self._close_block(frame)
            frame.dataflow = False

    def _close_block(self, frame: _FunctionFrame) -> None:
        if frame.bindings:
            cls = DataflowBlock if frame.dataflow else BindingBlock
            frame.blocks.append(cls(frame.bindings))
        frame.bindings = []

    def _normalizer(self, frame: _FunctionFrame) -> _Normalizer:
        norm = frame.normalizer
        if norm is None:
            norm = frame.normalizer = _Normalizer(self._ctx, frame.names)
        # Emit into the open block (its list is replaced when a block closes).
        norm._scopes = [(frame.bindings, frame.dataflow)]
        return norm

    # -- emitting --------------------------------------------------------------
    def normalize(self, expr: Expr) -> Expr:
        """``expr`` with struct info filled in and nested operands bound to fresh
        variables in the current block (outside a function: struct info only)."""
        if self._frame is None:
            return normalize_expr(expr, self._ctx)
        return self._normalizer(self._frame).expr(expr)

    def _emit(self, expr: Expr, name_hint: str, dataflow_var: bool) -> Var:
        frame = self._need_frame("emit")
        value = self._normalizer(frame).expr(expr)
        sinfo = value.struct_info if value.struct_info is not None else \
            infer_struct_info(value, self._ctx)
        cls = DataflowVar if dataflow_var else Var
        var = cls(frame.names.fresh(name_hint), sinfo, span=getattr(expr, "span", None))
        frame.bindings.append(VarBinding(var, value, span=getattr(expr, "span", None)))
        return var

    def emit(self, expr: Expr, name_hint: str = "lv") -> Var:
        """Bind ``expr`` (normalized) to a fresh variable; a DataflowVar inside dataflow()."""
        frame = self._need_frame("emit")
        return self._emit(expr, name_hint, frame.dataflow)

    def emit_output(self, expr: Expr, name_hint: str = "gv") -> Var:
        """Inside dataflow(): bind ``expr`` to a (non-dataflow) Var visible after the block."""
        frame = self._need_frame("emit_output")
        if not frame.dataflow:
            raise StructInfoError("emit_output must be called inside 'with bb.dataflow()'")
        var = self._emit(expr, name_hint, False)
        frame.outputs.append(var)
        return var

    def match_cast(self, expr: Expr, sinfo: StructInfo, name_hint: str = "lv") -> Var:
        """``var = R.match_cast(expr, sinfo)``: a run-time checked refinement."""
        frame = self._need_frame("match_cast")
        value = self._normalizer(frame).leaf(expr)
        cls = DataflowVar if frame.dataflow else Var
        var = cls(frame.names.fresh(name_hint), sinfo, span=getattr(expr, "span", None))
        frame.bindings.append(MatchCast(var, value, sinfo, span=getattr(expr, "span", None)))
        return var

    def emit_function(self, var: Var, func: Function) -> Var:
        """Bind the nested function ``func`` to ``var``, which exists before
        the binding so that ``func``'s body may call it (a local recursive
        function, lifted by LambdaLifting). ``var`` carries ``func``'s
        FuncStructInfo; outside a dataflow block only."""
        frame = self._need_frame("emit_function")
        if frame.dataflow:
            raise StructInfoError("a nested function cannot be bound inside a dataflow block")
        value = self._normalizer(frame).expr(func)
        frame.names.add(var.name_hint)
        frame.bindings.append(VarBinding(var, value, span=func.span))
        return var

    def emit_func_output(self, output: Expr, name_hint: str = "gv") -> GlobalVar:
        """Finish the open function with ``output`` as its result; returns its GlobalVar."""
        frame = self._need_frame("emit_func_output")
        if frame.dataflow:
            raise StructInfoError("emit_func_output must be called outside the dataflow block")
        body = self._normalizer(frame).expr(output)
        if not is_leaf(body):
            body = self._normalizer(frame).bind(body, name_hint)
        self._close_block(frame)
        frame.output = body
        attrs = dict(frame.attrs)
        name = self._fresh_global(frame.name)
        if not frame.private:
            attrs.setdefault("global_symbol", name)
        func = Function(frame.params, SeqExpr(frame.blocks, body), None, frame.pure, attrs)
        self._set_func(name, func)
        return GlobalVar(name)

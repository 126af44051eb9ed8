"""The Relax half of the TVMScript printer: struct info, expressions,
bindings and functions (see :mod:`phasec.script.printer` for the conventions)."""

from __future__ import annotations

from typing import Any

from phasec.ir import tir
from phasec.ir.expr import (
    Binding, BindingBlock, Call, Constant, DataflowBlock, DataflowVar, DataTypeImm, Expr,
    ExternFunc, Function, GlobalVar, If, MatchCast, Op, PrimValue, SeqExpr, ShapeExpr,
    StringImm, Tuple, TupleGetItem, Var,
)
from phasec.ir.struct_info import (
    FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
    TensorStructInfo, TupleStructInfo,
)
from phasec.op.unary import STOP_FUSION_PACKED
from phasec.op.registry import find_op
from phasec.script.printer.common import (
    INDENT, Namer, PrimPrinter, attr_text, attrs_dict_text, constant_elision, float_lit,
    has_tir_var, legacy, quote_str, tuple_text,
)

_CALL_DPS = ("relax.call_tir", "relax.call_dps_packed", "relax.call_tir_inplace")


class RelaxPrinter(PrimPrinter):
    """Prints one Relax function (with any nested functions) into ``lines``."""

    def __init__(self, namer: Namer | None = None) -> None:
        super().__init__(namer or Namer(), "int64")
        self.lines: list[str] = []
        self.indent = ""  # indent of the statement being printed (for hoisting)
        self.sig_mode = False  # printing a function signature: dims as strings
        self._sinfo_cache: dict[int, tuple[StructInfo, str]] = {}
        # Symbolic variable declarations (see ``function``): the functions being
        # printed, innermost last, as indices into ``_scopes`` ((line where the
        # declarations go, indent) per function); per variable, the innermost
        # function enclosing all its mentions, as a path of indices.
        self._func_stack: list[int] = []
        self._scopes: list[tuple[int, str]] = []
        self._sym_path: dict[int, tuple[tir.Var, tuple[int, ...]]] = {}
        self.uses_cls = False  # a ``cls.f`` was printed (TVM needs ``cls = Module``)

    def tvar(self, v: tir.Var) -> str:
        stack = self._func_stack
        if stack:
            entry = self._sym_path.get(id(v))
            if entry is None:
                self._sym_path[id(v)] = (v, tuple(stack))
            else:
                path = entry[1]
                # A scope index determines its ancestors, so ``path`` is a
                # prefix of ``stack`` iff their last common position agrees.
                if not (len(path) <= len(stack) and stack[len(path) - 1] == path[-1]):
                    i = 0
                    while i < len(path) and i < len(stack) and path[i] == stack[i]:
                        i += 1
                    self._sym_path[id(v)] = (v, path[:i])
        return self.namer.get(v, v.name)

    # -- struct info ------------------------------------------------------
    def dim(self, e: tir.PrimExpr) -> str:
        if self.sig_mode and has_tir_var(e):
            return quote_str(self.prim(e))
        return self.prim(e)

    def sinfo(self, s: StructInfo) -> str:
        if self.sig_mode:
            return self._sinfo(s)
        hit = self._sinfo_cache.get(id(s))
        if hit is not None and hit[0] is s:
            return hit[1]
        text = self._sinfo(s)
        self._sinfo_cache[id(s)] = (s, text)
        return text

    def _sinfo(self, s: StructInfo) -> str:
        t = type(s)
        if t is TensorStructInfo:
            args = []
            if s.shape is not None:
                args.append(tuple_text([self.dim(d) for d in s.shape]))
            if s.dtype != "void":
                args.append(f"dtype={quote_str(s.dtype)}")
            if s.shape is None and s.ndim != -1:
                args.append(f"ndim={s.ndim}")
            if s.vdevice is not None:
                args.append(f"vdevice={quote_str(s.vdevice)}")
            return "R.Tensor(" + ", ".join(args) + ")" if args else "R.Tensor"
        if t is ObjectStructInfo:
            return "R.Object"
        if t is PrimStructInfo:
            if s.value is None:
                return f"R.Prim({quote_str(s.dtype)})"
            if s.value.dtype == s.dtype:
                return f"R.Prim(value={self.dim(s.value)})"
            return f"R.Prim({quote_str(s.dtype)}, value={self.dim(s.value)})"
        if t is ShapeStructInfo:
            if s.values is None:
                return f"R.Shape(ndim={s.ndim})"
            return "R.Shape([" + ", ".join(self.dim(d) for d in s.values) + "])"
        if t is TupleStructInfo:
            return "R.Tuple(" + ", ".join(self.sinfo(f) for f in s.fields) + ")"
        if t is FuncStructInfo:
            purity = "True" if s.purity else "False"
            if s.params is None:
                if type(s.ret) is ObjectStructInfo and s.purity:
                    return "R.Callable()"
                return f"R.Callable(ret={self.sinfo(s.ret)}, purity={purity})"
            params = tuple_text([self.sinfo(x) for x in s.params])
            return f"R.Callable({params}, {self.sinfo(s.ret)}, purity={purity})"
        return f"<unprintable {t.__name__}>"

    def sinfo_args(self, sinfos: tuple[StructInfo, ...]) -> str:
        if len(sinfos) == 1:
            return self.sinfo(sinfos[0])
        return tuple_text([self.sinfo(s) for s in sinfos])

    # -- expressions ------------------------------------------------------
    def var(self, v: Var) -> str:
        return self.namer.get(v, v.name_hint)

    def expr(self, e: Expr) -> str:
        t = type(e)
        if t is Var or t is DataflowVar:
            return self.namer.get(e, e.name_hint)
        if t is Call:
            return self.call(e)
        if t is Constant:
            return self.constant(e)
        if t is Tuple:
            if e.fields:
                return tuple_text([self.expr(f) for f in e.fields])
            return "()" if legacy() else "R.tuple()"  # TVM 0.27 spells the empty tuple R.tuple()
        if t is TupleGetItem:
            return f"{self.expr(e.tuple_value)}[{e.index}]"
        if t is GlobalVar:
            self.uses_cls = True
            return "cls." + e.name_hint
        if t is ShapeExpr:
            return "R.shape([" + ", ".join(self.dim(d) for d in e.values) + "])"
        if t is PrimValue:
            return f"R.prim_value({self.prim(e.value)})"
        if t is StringImm:
            return f"R.str({quote_str(e.value)})"
        if t is DataTypeImm:
            return f"R.dtype({quote_str(e.value)})"
        if t is ExternFunc:
            return f"R.ExternFunc({quote_str(e.global_symbol)})"
        if t is Op:
            return _op_script_name(e.name)
        if t in (If, SeqExpr, Function):
            return self.hoist(e)
        return f"<unprintable {t.__name__}>"

    def hoist(self, e: Expr) -> str:
        """Print a statement-only expression (If, SeqExpr, Function) found in
        expression position as statements before the current one; return the
        name that holds its value. Only non-normalized IR needs this."""
        if type(e) is SeqExpr:
            self.seq_blocks(e.blocks, self.indent)
            return self.expr(e.body)
        name = self.namer.fresh("f" if type(e) is Function else "v")
        if type(e) is Function:
            self.function(name, e, self.indent, top=False)
        else:
            self.if_stmt(e, name, None, self.indent)
        return name

    def constant(self, c: Constant) -> str:
        arr = c.data
        elision = constant_elision()
        if elision is not None and (reference := elision.reference(arr)) is not None:
            return reference
        dtype = str(arr.dtype)
        if arr.ndim == 0:
            value = _scalar_text(arr.item())
        else:
            value = _nested_text(arr.tolist())
        return f"R.const({value}, {quote_str(dtype)})"

    def call(self, c: Call) -> str:
        op = c.op
        t = type(op)
        args = c.args
        if t is Op:
            name = op.name
            if name == "relax.stop_fusion" and not legacy():
                packed = self._stop_fusion_packed(c)
                if packed is not None:
                    return packed
            inplace = name == "relax.call_tir_inplace" and set(c.attrs) == {"inplace_indices"}
            if (name in _CALL_DPS and not c.attrs or inplace) and len(c.sinfo_args) == 1 and (
                    2 <= len(args) <= (2 if name == "relax.call_dps_packed" else 3)) \
                    and (type(args[1]) is Tuple or inplace):
                parts = [self._callee(args[0]), self.expr(args[1]), self._out_ty(c)]
                if inplace:
                    indices = ", ".join(str(k) for k in c.attrs["inplace_indices"])
                    parts.append(f"inplace_indices=[{indices}]")
                if len(args) == 3:
                    parts.append("tir_vars=" + self.expr(args[2]))
                return f"{_op_script_name(name)}({', '.join(parts)})"
            if name == "relax.call_tir_with_grad" and len(args) == 2 and len(c.sinfo_args) == 1:
                parts = [self._callee(args[0]), self.expr(args[1]), self._out_ty(c),
                         f"te_grad_name={quote_str(c.attrs['te_grad_name'])}"]
                if c.attrs.get("te_grad_kwargs"):
                    parts.append("te_grad_kwargs=" + attr_text(self, dict(c.attrs["te_grad_kwargs"])))
                return f"R.call_tir_with_grad({', '.join(parts)})"
            if name == "relax.hint_on_device" and set(c.attrs) == {"device_type", "index",
                                                                   "memory_scope"}:
                # TVM's spelling: the device as R.device(...), the scope positional
                device = (f"R.device(device_type={c.attrs['device_type']}, "
                          f"index={c.attrs['index']})")
                parts = [*(self.expr(a) for a in args), device,
                         quote_str(c.attrs["memory_scope"])]
                return self._finish_call("R.hint_on_device", parts, c)
            parts = []
            for i, a in enumerate(args):
                if i == 0 and name in ("relax.call_pure_packed", "relax.call_builtin_with_ctx",
                                       "relax.call_inplace_packed"):
                    parts.append(self._callee(a))
                else:
                    parts.append(self.expr(a))
            head, order, positional = _op_info(name)
            given = order[:len(c.attrs)]
            if positional and not legacy() and c.attrs and set(c.attrs) == set(given):
                parts += [_positional_attr_text(c.attrs[k]) for k in given]
                return self._finish_call(head, parts, c)
        elif t is ExternFunc and type(op.struct_info) is FuncStructInfo:
            # a callee with its own callable struct info (TVM writes R.ExternFunc(name,
            # R.Callable(..., purity=True))(args...)): kept, so its purity survives
            fs = op.struct_info
            # spelt out: TVM 0.27 does not read a bare R.Callable() here
            callable_text = (f"R.Callable(ret={self.sinfo(fs.ret)}, purity={fs.purity})"
                             if fs.params is None else self.sinfo(fs))
            head = f"R.ExternFunc({quote_str(op.global_symbol)}, {callable_text})"
            parts = [self.expr(a) for a in args]
            order = ()
        elif t is ExternFunc:
            head = "R.call_packed"
            parts = [quote_str(op.global_symbol)] + [self.expr(a) for a in args]
            order = ()
        else:
            head = self.expr(op)
            parts = [self.expr(a) for a in args]
            order = ()
        if c.attrs:
            keys = [k for k in order if k in c.attrs]
            keys += sorted((k for k in c.attrs if k not in order), key=str)
            parts += [f"{k}={self._call_attr_text(k, c.attrs[k])}" for k in keys]
        return self._finish_call(head, parts, c)

    def _stop_fusion_packed(self, c: Call) -> str | None:
        """``R.stop_fusion(x)`` in TVM 0.27's syntax, which has no such operator:
        the pure packed call ``phasec.stop_fusion`` (see
        :data:`phasec.op.unary.STOP_FUSION_PACKED`); None when the
        call's struct info is unknown (TVM needs ``ty_args``)."""
        if len(c.args) != 1 or c.attrs or c.sinfo_args:
            return None
        sinfo = c.struct_info or c.args[0].struct_info
        if sinfo is None:
            return None
        return (f"R.call_pure_packed({quote_str(STOP_FUSION_PACKED)}, {self.expr(c.args[0])}, "
                f"ty_args={self.sinfo(sinfo)})")

    def _out_ty(self, c: Call) -> str:
        """``out_ty=`` (``out_sinfo=`` in the legacy syntax) of a
        destination-passing call: one struct info, or a list of several."""
        out = c.sinfo_args[0]
        key = "out_sinfo=" if legacy() else "out_ty="
        if type(out) is TupleStructInfo and len(out.fields) != 1:
            return key + "[" + ", ".join(self.sinfo(f) for f in out.fields) + "]"
        return key + self.sinfo(out)

    def _finish_call(self, head: str, parts: list[str], c: Call) -> str:
        if c.sinfo_args:
            key = "sinfo_args=" if legacy() else "ty_args="
            parts = [*parts, key + self.sinfo_args(c.sinfo_args)]
        return f"{head}({', '.join(parts)})"

    def _call_attr_text(self, key: str, value: Any) -> str:
        # TVM 0.27 spells "no dtype given" (phasec's "void") as None; before
        # 0.27 it printed "void", which 0.27 reads as a void dtype.
        if value == "void" and key.endswith("dtype") and not legacy():
            return "None"
        if key == "inplace_indices" and isinstance(value, tuple):
            return "[" + ", ".join(str(v) for v in value) + "]"  # as TVM 0.27 prints it
        if key == "index_map" and isinstance(value, str):
            return f"T.index_map({value})"  # layout_transform: the lambda's canonical text
        return attr_text(self, value)

    def _callee(self, e: Expr) -> str:
        if type(e) is ExternFunc:
            return quote_str(e.global_symbol)
        return self.expr(e)

    # -- statements -------------------------------------------------------
    def emit(self, indent: str, text: str) -> None:
        self.lines.append(indent + text)

    def seq_blocks(self, blocks: tuple[BindingBlock, ...], indent: str) -> None:
        for block in blocks:
            if isinstance(block, DataflowBlock):
                self.emit(indent, "with R.dataflow():")
                inner = indent + INDENT
                outputs = []
                for b in block.bindings:
                    self.binding(b, inner)
                    if type(b.var) is not DataflowVar:
                        outputs.append(self.var(b.var))
                self.emit(inner, "R.output(" + ", ".join(outputs) + ")")
            else:
                for b in block.bindings:
                    self.binding(b, indent)

    def _annotation(self, v: Var) -> str:
        return "" if v.struct_info is None else ": " + self.sinfo(v.struct_info)

    def binding(self, b: Binding, indent: str) -> None:
        value = b.value
        if type(b) is MatchCast:
            self.indent = indent
            rhs = f"R.match_cast({self.expr(value)}, {self.sinfo(b.struct_info)})"
            self.emit(indent, f"{self.var(b.var)}{self._annotation(b.var)} = {rhs}")
            return
        tv = type(value)
        if tv is If:
            name = self.var(b.var)
            self.if_stmt(value, name, self._annotation(b.var), indent)
        elif tv is Function:
            self.function(self.var(b.var), value, indent, top=False)
        else:
            self.indent = indent
            rhs = self.expr(value)
            self.emit(indent, f"{self.var(b.var)}{self._annotation(b.var)} = {rhs}")

    def if_stmt(self, e: If, name: str, ann: str | None, indent: str) -> None:
        self.indent = indent
        self.emit(indent, f"if {self.expr(e.cond)}:")
        inner = indent + INDENT
        for kw, branch in ((None, e.true_branch), ("else:", e.false_branch)):
            if kw:
                self.emit(indent, kw)
            if type(branch) is SeqExpr:
                self.seq_blocks(branch.blocks, inner)
                body = branch.body
            else:  # not normalized: a bare expression as branch
                body = branch
            self.indent = inner
            rhs = self.expr(body)
            self.emit(inner, f"{name}{ann or ''} = {rhs}")

    def function(self, name: str, f: Function, indent: str, top: bool) -> None:
        """Print ``f`` as ``def name`` (a module function when ``top``).

        Every symbolic variable is declared (``n = T.int64()``) once, at the
        top of the body of the innermost function that encloses all its
        mentions: a nested function sees (and shares) the symbolic variables
        of the functions around it, as the parser reads them, so it does not
        declare the ones an enclosing function mentions. Names are unique in
        a module-level function, so a name never hides another variable.
        """
        attrs = dict(f.attrs)
        if top and attrs.get("global_symbol") == name:
            del attrs["global_symbol"]
        deco = []
        if not f.is_pure:
            deco.append("pure=False")
        if top and "global_symbol" not in f.attrs:
            deco.append("private=True")
        outermost = not self._func_stack
        if outermost:
            self._scopes, self._sym_path, self.uses_cls = [], {}, False
        scope = len(self._scopes)
        self._scopes.append((-1, ""))  # set once the signature is printed
        self._func_stack.append(scope)
        outer_cache, self._sinfo_cache = self._sinfo_cache, {}
        try:
            self.emit(indent, "@R.function" + (f"({', '.join(deco)})" if deco else ""))
            # Signature: symbolic dims as strings (TVM's convention).
            self.sig_mode = True
            params = [f"{self.var(p)}{self._annotation(p)}" for p in f.params]
            ret = "" if f.ret_struct_info is None else " -> " + self.sinfo(f.ret_struct_info)
            self.sig_mode = False
            self.emit(indent, f"def {name}({', '.join(params)}){ret}:")
            inner = indent + INDENT
            if attrs:
                self.emit(inner, "R.func_attr(" + attrs_dict_text(self, attrs) + ")")
            self._scopes[scope] = (len(self.lines), inner)
            body = f.body
            if type(body) is SeqExpr:
                self.seq_blocks(body.blocks, inner)
                result = body.body
            else:
                result = body
            self.indent = inner
            self.emit(inner, "return " + self.expr(result))
        finally:
            self.sig_mode = False
            self._func_stack.pop()
            self._sinfo_cache = outer_cache
        if outermost:
            self._declare_syms()
            if top and self.uses_cls:
                at, inner = self._scopes[scope]
                self.lines.insert(at, inner + "cls = Module")

    def _declare_syms(self) -> None:
        """Insert the symbolic variable declarations of the functions just printed."""
        by_scope: dict[int, list[str]] = {}
        for v, path in self._sym_path.values():  # in order of first mention
            by_scope.setdefault(path[-1], []).append(
                f"{self.namer.get(v, v.name)} = T.{v.dtype}()")
        # Bottom up, so the line numbers of the earlier functions stay valid.
        for scope in sorted(by_scope, key=lambda k: self._scopes[k][0], reverse=True):
            at, inner = self._scopes[scope]
            self.lines[at:at] = [inner + d for d in by_scope[scope]]


_OP_INFO: dict[str, tuple[str, tuple[str, ...], bool]] = {}

#: Operator namespaces whose attributes TVM passes (and prints) as trailing
#: positional operands: R.vm.alloc_storage(size, 0, R.dtype("uint8"), R.str("global")).
_POSITIONAL_ATTR_NAMESPACES = ("relax.memory.", "relax.builtin.", "relax.vm.")


def _op_info(name: str) -> tuple[str, tuple[str, ...], bool]:
    """(TVMScript spelling, attribute order, attributes printed positionally)
    of the operator ``name``, from the registry; an unregistered name is
    printed as ``R.<name>`` with its attributes sorted."""
    info = _OP_INFO.get(name)
    if info is None:
        opdef = find_op(name)
        if opdef is None:
            return "R." + name.removeprefix("relax."), (), False
        info = _OP_INFO[name] = (opdef.script_name, tuple(opdef.attrs),
                                 opdef.category != "compute"
                                 and name.startswith(_POSITIONAL_ATTR_NAMESPACES))
    return info


def _op_script_name(name: str) -> str:
    return _op_info(name)[0]


def _positional_attr_text(value: Any) -> str:
    """An attribute as TVM 0.27 writes it in operand position: a bare integer
    (an int64 R.prim_value), R.dtype("...") for a dtype, R.str("...")."""
    if isinstance(value, str):
        head = "R.dtype" if value in tir.DTYPES else "R.str"
        return f"{head}({quote_str(value)})"
    return str(value)


def _scalar_text(x: Any) -> str:
    if isinstance(x, bool):
        return "True" if x else "False"
    if isinstance(x, float):
        return float_lit(x)
    if isinstance(x, complex):
        return f"complex({float_lit(x.real)}, {float_lit(x.imag)})"
    return str(x)


def _nested_text(values: list) -> str:
    if values and isinstance(values[0], list):
        return "[" + ", ".join(_nested_text(v) for v in values) + "]"
    return "[" + ", ".join(_scalar_text(v) for v in values) + "]"


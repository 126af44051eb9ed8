"""The TIR half of the TVMScript printer: PrimFuncs and their statements
(see :mod:`phasec.script.printer` for the conventions)."""

from __future__ import annotations

from phasec.ir import tir
from phasec.ir.structural import structural_equal
from phasec.script.printer.common import (
    INDENT, LEGACY_ATTR_KEYS, Namer, PrimPrinter, attrs_dict_text, end_of, is_zero, legacy,
    quote_str, tuple_text,
)

SCOPE_ATTR = tir.SCOPE_ATTR

class TirPrinter(PrimPrinter):
    """Prints one PrimFunc (or a statement) into ``lines``."""

    def __init__(self, namer: Namer | None = None) -> None:
        super().__init__(namer or Namer(), "int32")
        self.lines: list[str] = []
        self.bound: set[int] = set()  # ids of TIR vars bound by params, loops, lets, axes
        self.loops: dict[int, tir.For] = {}  # loop var id -> enclosing For (for remap)
        self.root_allocs = False  # printing the allocations that open an s_tir body

    def bind(self, v: tir.Var) -> str:
        self.bound.add(id(v))
        return self.tvar(v)

    def emit(self, indent: str, text: str) -> None:
        self.lines.append(indent + text)

    def shape(self, dims: tuple) -> str:
        return tuple_text([self.prim(d) for d in dims]) if dims else "()"

    def prim_func(self, name: str, f: tir.PrimFunc, indent: str = "") -> None:
        attrs = dict(f.attrs)
        if attrs.get("global_symbol") == name:
            del attrs["global_symbol"]
        private = "global_symbol" not in f.attrs
        # Name every parameter before anything else so they keep their hints.
        for p in f.params:
            if isinstance(p, tir.Buffer):
                self.buffer_name(p)
            else:
                self.bind(p)
        params: list[str] = []
        matches: list[str] = []
        for p in f.params:
            if isinstance(p, tir.Buffer):
                bname = self.buffer_name(p)
                if all(type(d) is tir.IntImm for d in p.shape):
                    params.append(f"{bname}: T.Buffer({self.shape(p.shape)}, {quote_str(p.dtype)})")
                else:
                    handle = self.namer.fresh(bname.lower() if bname.lower() != bname else "var_" + bname)
                    params.append(f"{handle}: T.handle")
                    dtype = "" if p.dtype == "float32" else ", " + quote_str(p.dtype)
                    matches.append(f"{bname} = T.match_buffer({handle}, {self.shape(p.shape)}{dtype})")
            else:
                params.append(f"{self.tvar(p)}: T.{p.dtype}")
        inner = indent + INDENT
        flags = ["private=True"] if private else []
        if not legacy() and tir.contains_stmt(f.body, tir.Block):
            flags.append("s_tir=True")  # TVM 0.27 marks PrimFuncs that hold blocks
            # Allocations opening such a body belong to TVM's implicit root block.
            self.root_allocs = True
        self.emit(indent, "@T.prim_func" + (f"({', '.join(flags)})" if flags else ""))
        ret = "" if f.ret_dtype is None else f" -> T.{f.ret_dtype}"
        self.emit(indent, f"def {name}({', '.join(params)}){ret}:")
        if attrs:
            if legacy():
                attrs = {LEGACY_ATTR_KEYS.get(k, k): v for k, v in attrs.items()}
            self.emit(inner, "T.func_attr(" + attrs_dict_text(self, attrs) + ")")
        decl_at = len(self.lines)
        for m in matches:
            self.emit(inner, m)
        self.stmt(f.body, inner)
        decls = [f"{self.tvar(v)} = T.{v.dtype}()" for v in self.tir_vars
                 if id(v) not in self.bound]
        self.lines[decl_at:decl_at] = [inner + d for d in decls]

    # -- statements -------------------------------------------------------
    def stmt(self, s: tir.Stmt, indent: str, last: bool = True) -> None:
        """Print ``s`` at ``indent``. ``last``: nothing follows ``s`` in the
        printed statement list, so a let or allocation may take the concise
        spelling, whose scope is the rest of the list (see the module doc)."""
        # LetStmt / Allocate chains are printed with a loop: flat while they
        # end the list, as `with` scopes (one more indent each) otherwise.
        while True:
            t = type(s)
            if t is tir.LetStmt:
                self.root_allocs = False
                var = s.var
                if not last and not legacy():
                    indent, last = self._scope_marker(indent), True
                    continue
                if last:
                    # TVM 0.27 reads `v: T.int64 = value` as a local scalar buffer;
                    # its scalar binding (flat Bind, phasec's LetStmt) is T.let[...].
                    value = self.prim(s.value, var.dtype)
                    ann = f"T.{var.dtype}" if legacy() else f"T.let[T.{var.dtype}]"
                    self.emit(indent, f"{self.bind(var)}: {ann} = {value}")
                elif var.dtype == s.value.dtype:
                    self.emit(indent, f"with T.LetStmt({self.prim(s.value)}) as {self.bind(var)}:")
                    indent, last = indent + INDENT, True
                else:  # the annotation gives the variable's dtype (and the literals')
                    value = self.prim(s.value, var.dtype)
                    self.emit(indent, f"with T.LetStmt({value}, T.{var.dtype}) as "
                                      f"{self.bind(var)}:")
                    indent, last = indent + INDENT, True
                s = s.body
                continue
            if t is tir.AttrStmt:
                args = (f"{{{quote_str(s.key)}: {self._attr_value(s.value)}}}" if not legacy()
                        else f"0, {quote_str(s.key)}, {self._attr_value(s.value)}")
                if last:  # as TVM prints it: scopes over the rest of the list
                    self.emit(indent, f"T.attr({args})")
                else:
                    self.emit(indent, f"with T.attr({args}):")
                    indent, last = indent + INDENT, True
                s = s.body
                continue
            if t is tir.Allocate:
                if not last and not legacy():
                    self.root_allocs = False
                    indent, last = self._scope_marker(indent), True
                    continue
                b = s.buffer
                args = f"{self.shape(b.shape)}, {quote_str(b.dtype)}"
                if b.scope != "global":
                    args += f", scope={quote_str(b.scope)}"
                if last:
                    head = "T.sblock_alloc_buffer" if self.root_allocs else "T.alloc_buffer"
                    self.emit(indent, f"{self.buffer_name(b)} = {head}({args})")
                else:
                    self.root_allocs = False
                    self.emit(indent, f"with T.decl_buffer({args}) as {self.buffer_name(b)}:")
                    indent, last = indent + INDENT, True
                s = s.body
                continue
            break
        self.root_allocs = False
        if t is tir.SeqStmt:
            if not s.stmts:
                self.emit(indent, "pass")
            end = len(s.stmts) - 1
            for i, x in enumerate(s.stmts):
                self.stmt(x, indent, last and i == end)
        elif t is tir.BufferStore:
            value = self.prim(s.value, s.buffer.dtype)
            self.emit(indent, f"{self.buffer_name(s.buffer)}{self.indices(s.indices)} = {value}")
        elif t is tir.For:
            self.for_stmt(s, indent)
        elif t is tir.Block:
            self.block(s, indent)
        elif t is tir.IfThenElse:
            self.emit(indent, f"if {self.prim(s.condition)}:")
            self.stmt(s.then_case, indent + INDENT)
            if s.else_case is not None:
                self.emit(indent, "else:")
                self.stmt(s.else_case, indent + INDENT)
        elif t is tir.While:
            self.emit(indent, f"while {self.prim(s.condition)}:")
            self.stmt(s.body, indent + INDENT)
        elif t is tir.Evaluate:
            if type(s.value) is tir.Call and (s.value.name == "assume"
                                              or s.value.name in tir.HOST_CALLS):
                self.emit(indent, self.prim(s.value))  # as TVM prints it
            elif type(s.value) is tir.Call and s.value.name == tir.RET and len(s.value.args) == 1:
                self.emit(indent, f"return {self.prim(s.value.args[0])}")
            else:
                self.emit(indent, f"T.evaluate({self.prim(s.value)})")
        else:
            self.emit(indent, f"<unprintable {t.__name__}>")

    def _scope_marker(self, indent: str) -> str:
        """Open the scope of an allocation or let that statements outside it
        follow; returns the indent of its body. TVM 0.27 has no scoped
        allocation or let (its AllocBuffer and Bind scope over the rest of
        their list, and its parser refuses ``with T.decl_buffer(...) as buf:``
        and ``with T.LetStmt(...)``), so the scope is an attribute statement
        with phasec's key :data:`SCOPE_ATTR`, holding the concise spelling:
        TVM reads a harmless annotation, phasec reads back exactly the scoped
        statement (no attribute). The legacy spelling keeps the ``with``
        forms."""
        # the value as TVM prints it
        self.emit(indent, f"with T.attr({{{quote_str(SCOPE_ATTR)}: T.bool(True)}}):")
        return indent + INDENT

    def _attr_value(self, v: object) -> str:
        if isinstance(v, tir.PrimExpr):
            return self.prim(v)
        if isinstance(v, str):
            return quote_str(v)
        return repr(v)  # bool, int, float: Python's spelling is TVMScript's

    def _range(self, loop: tir.For) -> str:
        if is_zero(loop.min) and loop.min.dtype == loop.extent.dtype:
            return self.prim(loop.extent)
        lo, end = self.pair(loop.min, end_of(loop.min, loop.extent))
        return f"{lo[0]}, {end[0]}"

    def for_stmt(self, loop: tir.For, indent: str) -> None:
        chain = [loop]
        if loop.kind == "serial":
            while True:
                cur = chain[-1]
                nxt = cur.body
                if not (is_zero(cur.min) and cur.min.dtype == cur.extent.dtype):
                    break
                if type(nxt) is tir.For and nxt.kind == "serial" and is_zero(nxt.min) \
                        and nxt.min.dtype == nxt.extent.dtype:
                    chain.append(nxt)
                else:
                    break
        names = [self.bind(f.loop_var) for f in chain]
        if len(chain) > 1:
            extents = ", ".join(self.prim(f.extent) for f in chain)
            self.emit(indent, f"for {', '.join(names)} in T.grid({extents}):")
        else:
            head = "range" if loop.kind == "serial" else "T." + loop.kind
            thread = "" if loop.thread is None else f", thread={quote_str(loop.thread)}"
            self.emit(indent, f"for {names[0]} in {head}({self._range(loop)}{thread}):")
        for f in chain:
            self.loops[id(f.loop_var)] = f
        self.stmt(chain[-1].body, indent + INDENT)
        for f in chain:
            self.loops.pop(id(f.loop_var), None)

    def _remappable(self, blk: tir.Block) -> bool:
        if len(blk.iter_vars) < 2:
            return False
        for iv, val in zip(blk.iter_vars, blk.iter_values):
            if type(val) is not tir.Var or iv.var.dtype != val.dtype:
                return False
            loop = self.loops.get(id(val))
            if loop is None:
                return False
            # T.axis.remap gives the axis its loop's whole domain (start and extent)
            if not structural_equal(iv.min, loop.min):
                return False
            if iv.extent is not loop.extent and not structural_equal(iv.extent, loop.extent):
                return False
        return True

    def region(self, r: tir.BufferRegion) -> str:
        dims = []
        for lo, ext in r.region:
            if type(ext) is tir.IntImm and ext.value == 1 and ext.dtype == lo.dtype:
                dims.append(self.prim(lo))
            else:
                a, b = self.pair(lo, end_of(lo, ext))
                dims.append(f"{a[0]}:{b[0]}")
        return self.buffer_name(r.buffer) + ("[" + ", ".join(dims) + "]" if dims else "[()]")

    def block(self, blk: tir.Block, indent: str) -> None:
        head = "T.block" if legacy() else "T.sblock"
        self.emit(indent, f"with {head}({quote_str(blk.name)}):")
        inner = indent + INDENT
        if self._remappable(blk):
            names = [self.bind(iv.var) for iv in blk.iter_vars]
            kinds = "".join(iv.kind for iv in blk.iter_vars)
            values = ", ".join(self.prim(v) for v in blk.iter_values)
            self.emit(inner, f"{', '.join(names)} = T.axis.remap({quote_str(kinds)}, [{values}])")
        else:
            for iv, val in zip(blk.iter_vars, blk.iter_values):
                kind = "spatial" if iv.kind == "S" else "reduce"
                if iv.has_min:  # TVM's `(begin, end)` domain
                    a, b = self.pair(iv.min, end_of(iv.min, iv.extent))
                    extent = f"({a[0]}, {b[0]})"
                else:
                    extent = self.prim(iv.extent, val.dtype)
                value = self.prim(val)
                self.emit(inner, f"{self.bind(iv.var)} = T.axis.{kind}({extent}, {value})")
        self.emit(inner, "T.reads(" + ", ".join(self.region(r) for r in blk.reads) + ")")
        self.emit(inner, "T.writes(" + ", ".join(self.region(r) for r in blk.writes) + ")")
        if blk.annotations:
            head = "T.block_attr" if legacy() else "T.sblock_attr"
            self.emit(inner, f"{head}({attrs_dict_text(self, blk.annotations)})")
        if blk.init is not None:
            self.emit(inner, "with T.init():")
            self.stmt(blk.init, inner + INDENT)
        self.stmt(blk.body, inner)

"""Writing a module as a JSON document (:func:`to_json`)."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping
from typing import Any


from phasec import collector
from phasec.errors import SchemaError
from phasec.ir import tir
from phasec.ir.expr import (
    BindingBlock, Call, Constant, DataflowBlock, DataflowVar, DataTypeImm, Expr, ExternFunc,
    Function, GlobalVar, If, MatchCast, Op, PrimValue, SeqExpr, ShapeExpr, StringImm, Tuple,
    TupleGetItem, Var, VarBinding,
)
from phasec.ir.module import IRModule, Target, VDevice
from phasec.ir.node import Span
from phasec.ir.phase import Phase
from phasec.ir.struct_info import (
    FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
    TensorStructInfo, TupleStructInfo,
)

from phasec.script.json_format.schema import FORMAT_NAME, FORMAT_VERSION, MAX_DEPTH
# Writing
# ---------------------------------------------------------------------------

def _span(s: Span | None) -> dict | None:
    if s is None:
        return None
    d = {"file": s.file, "line": s.line, "col": s.col}
    if s.end_line is not None:
        d["end_line"] = s.end_line
    if s.end_col is not None:
        d["end_col"] = s.end_col
    return d


def _with_span(d: dict, node: Any) -> dict:
    s = node.span
    if s is not None:
        d["span"] = _span(s)
    return d


def _float_json(v: float) -> Any:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


class _Writer:
    """IR -> plain JSON-ready Python objects (validated only on load)."""

    def __init__(self) -> None:
        self.tir_var_ids: dict[int, int] = {}
        self.buffer_ids: dict[int, int] = {}
        self.var_ids: dict[int, int] = {}
        self.tir_vars: list[dict] = []
        self.buffers: list[dict] = []
        self.vars: list[dict] = []
        self.struct_infos: list[dict] = []
        self.sinfo_by_id: dict[int, int] = {}
        self.sinfo_by_key: dict[tuple, int] = {}
        self._alive: list[Any] = []  # keep referenced objects alive: ids stay unique
        self.depth = 0  # current node nesting (to refuse documents too deep to read)
        self.max_depth = 0

    # Nesting is tracked around the recursive writers: a document nested deeper
    # than the reader accepts must fail here, not when it is loaded.
    def _enter(self) -> None:
        self.depth += 1
        if self.depth > self.max_depth:
            self.max_depth = self.depth

    def prim(self, e: tir.PrimExpr) -> Any:
        if type(e) is tir.IntImm or type(e) is tir.Var:
            return self._prim(e)
        self._enter()
        if type(e) is tir.Select and type(e.false_value) is tir.Select:
            out = self._select_chain(e)
        else:
            out = self._prim(e)
        self.depth -= 1
        return out

    def stmt(self, s: tir.Stmt) -> dict:
        self._enter()
        scopes, body = _scope_chain(s)
        out = self._nest(scopes, body) if len(scopes) >= 2 else self._stmt(s)
        self.depth -= 1
        return out

    # Chains whose length is not bounded by the program's structure (lets, the
    # statements after each let, else-ifs, selects) are written as lists: the
    # reader's nesting limit would otherwise bound the chain (issue 17).
    def _nest(self, scopes: list[tir.Stmt], body: tir.Stmt) -> dict:
        out = []
        for s in scopes:
            t = type(s)
            if t is tir.LetStmt:
                d = {"node": "tir.LetStmt", "var": self.tvar(s.var), "value": self.prim(s.value)}
            elif t is tir.SeqStmt:
                d = {"node": "tir.SeqStmt", "stmts": [self.stmt(x) for x in s.stmts[:-1]]}
            elif t is tir.Allocate:
                d = {"node": "tir.Allocate", "buffer": self.buffer(s.buffer)}
            elif t is tir.AttrStmt:
                d = {"node": "tir.AttrStmt", "key": s.key,
                     "value": self.attr_value(s.value, f"T.attr {s.key!r}")}
            else:  # IfThenElse with an else case
                d = {"node": "tir.IfThenElse", "condition": self.prim(s.condition),
                     "then_case": self.stmt(s.then_case)}
            out.append(_with_span(d, s))
        return {"node": "tir.Nest", "scopes": out, "body": self.stmt(body)}

    def _select_chain(self, e: tir.Select) -> dict:
        cases = []
        while type(e) is tir.Select:
            cases.append(_with_span({"condition": self.prim(e.condition),
                                     "true_value": self.prim(e.true_value),
                                     "dtype": e.dtype}, e))
            e = e.false_value
        return {"node": "tir.SelectChain", "cases": cases, "false_value": self.prim(e)}

    def sinfo(self, s: StructInfo) -> dict:
        self._enter()
        out = self._sinfo(s)
        self.depth -= 1
        return out

    def expr(self, e: Expr) -> Any:
        if type(e) is Var or type(e) is DataflowVar:
            return self.var(e)
        self._enter()
        out = self._expr(e)
        self.depth -= 1
        return out

    # -- tables -----------------------------------------------------------
    def tvar(self, v: tir.Var) -> int:
        i = self.tir_var_ids.get(id(v))
        if i is None:
            i = self.tir_var_ids[id(v)] = len(self.tir_vars)
            self._alive.append(v)
            self.tir_vars.append(_with_span({"id": i, "name": v.name, "dtype": v.dtype}, v))
        return i

    def buffer(self, b: tir.Buffer) -> int:
        i = self.buffer_ids.get(id(b))
        if i is None:
            shape = [self.prim(d) for d in b.shape]  # dependencies first
            i = self.buffer_ids[id(b)] = len(self.buffers)
            self._alive.append(b)
            d = {"id": i, "name": b.name, "shape": shape, "dtype": b.dtype}
            if b.scope != "global":
                d["scope"] = b.scope
            self.buffers.append(_with_span(d, b))
        return i

    def var(self, v: Var) -> int:
        i = self.var_ids.get(id(v))
        if i is None:
            sinfo = None if v.struct_info is None else self.sinfo_ref(v.struct_info)
            i = self.var_ids[id(v)] = len(self.vars)
            self._alive.append(v)
            d: dict = {"id": i, "name": v.name_hint}
            if isinstance(v, DataflowVar):
                d["dataflow"] = True
            if sinfo is not None:
                d["struct_info"] = sinfo
            self.vars.append(_with_span(d, v))
        return i

    # -- TIR --------------------------------------------------------------
    def _prim(self, e: tir.PrimExpr) -> Any:
        t = type(e)
        if t is tir.IntImm:
            if e.dtype == "int64" and e.span is None and not isinstance(e.value, bool):
                return int(e.value)
            return _with_span({"node": "tir.IntImm", "value": int(e.value), "dtype": e.dtype}, e)
        if t is tir.Var:
            return _with_span({"node": "tir.Var", "id": self.tvar(e)}, e)
        if t is tir.FloatImm:
            return _with_span({"node": "tir.FloatImm", "value": _float_json(float(e.value)),
                               "dtype": e.dtype}, e)
        if t is tir.BinaryOp:
            d = {"node": "tir.BinaryOp", "op": e.op, "lhs": self.prim(e.lhs),
                 "rhs": self.prim(e.rhs), "dtype": e.dtype}
        elif t is tir.Not:
            d = {"node": "tir.Not", "value": self.prim(e.value), "dtype": e.dtype}
        elif t is tir.Cast:
            d = {"node": "tir.Cast", "dtype": e.dtype, "value": self.prim(e.value)}
        elif t is tir.Select:
            d = {"node": "tir.Select", "condition": self.prim(e.condition),
                 "true_value": self.prim(e.true_value), "false_value": self.prim(e.false_value),
                 "dtype": e.dtype}
        elif t is tir.Call:
            d = {"node": "tir.Call", "name": e.name, "args": [self.prim(a) for a in e.args],
                 "dtype": e.dtype}
        elif t is tir.StringImm:
            d = {"node": "tir.StringImm", "value": e.value}
        elif t is tir.BufferData:
            d = {"node": "tir.BufferData", "buffer": self.buffer(e.buffer)}
        elif t is tir.BufferLoad:
            d = {"node": "tir.BufferLoad", "buffer": self.buffer(e.buffer),
                 "indices": [self.prim(i) for i in e.indices], "dtype": e.dtype}
        else:
            raise SchemaError(f"cannot write {type(e).__name__} as a TIR expression")
        return _with_span(d, e)

    def _stmt(self, s: tir.Stmt) -> dict:
        t = type(s)
        if t is tir.BufferStore:
            d = {"node": "tir.BufferStore", "buffer": self.buffer(s.buffer),
                 "value": self.prim(s.value), "indices": [self.prim(i) for i in s.indices]}
        elif t is tir.SeqStmt:
            d = {"node": "tir.SeqStmt", "stmts": [self.stmt(x) for x in s.stmts]}
        elif t is tir.For:
            d = {"node": "tir.For", "loop_var": self.tvar(s.loop_var), "min": self.prim(s.min),
                 "extent": self.prim(s.extent), "kind": s.kind, "body": self.stmt(s.body)}
            if s.thread is not None:
                d["thread"] = s.thread
        elif t is tir.IfThenElse:
            d = {"node": "tir.IfThenElse", "condition": self.prim(s.condition),
                 "then_case": self.stmt(s.then_case)}
            if s.else_case is not None:
                d["else_case"] = self.stmt(s.else_case)
        elif t is tir.Allocate:
            d = {"node": "tir.Allocate", "buffer": self.buffer(s.buffer), "body": self.stmt(s.body)}
        elif t is tir.While:
            d = {"node": "tir.While", "condition": self.prim(s.condition),
                 "body": self.stmt(s.body)}
        elif t is tir.LetStmt:
            d = {"node": "tir.LetStmt", "var": self.tvar(s.var), "value": self.prim(s.value),
                 "body": self.stmt(s.body)}
        elif t is tir.AttrStmt:
            d = {"node": "tir.AttrStmt", "key": s.key,
                 "value": self.attr_value(s.value, f"T.attr {s.key!r}"), "body": self.stmt(s.body)}
        elif t is tir.Evaluate:
            d = {"node": "tir.Evaluate", "value": self.prim(s.value)}
        elif t is tir.Block:
            d = {"node": "tir.Block", "name": s.name,
                 "iter_vars": [_with_span({"var": self.tvar(iv.var), "extent": self.prim(iv.extent),
                                           "kind": iv.kind,
                                           **({"min": self.prim(iv.min)} if iv.has_min else {})},
                                          iv) for iv in s.iter_vars],
                 "iter_values": [self.prim(v) for v in s.iter_values],
                 "body": self.stmt(s.body)}
            if s.init is not None:
                d["init"] = self.stmt(s.init)
            d["reads"] = [self.region(r) for r in s.reads]
            d["writes"] = [self.region(r) for r in s.writes]
            if s.annotations:
                d["annotations"] = self.attrs(s.annotations, "block annotations")
        else:
            raise SchemaError(f"cannot write {t.__name__} as a TIR statement")
        return _with_span(d, s)

    def region(self, r: tir.BufferRegion) -> dict:
        return _with_span({"buffer": self.buffer(r.buffer),
                           "region": [[self.prim(lo), self.prim(ext)] for lo, ext in r.region]}, r)

    def prim_func(self, f: tir.PrimFunc) -> dict:
        params = [{"node": "tir.Buffer", "id": self.buffer(p)} if isinstance(p, tir.Buffer)
                  else {"node": "tir.Var", "id": self.tvar(p)} for p in f.params]
        d = {"node": "PrimFunc", "params": params, "body": self.stmt(f.body)}
        if f.ret_dtype is not None:
            d["ret_dtype"] = f.ret_dtype
        if f.attrs:
            d["attrs"] = self.attrs(f.attrs, "PrimFunc attrs")
        return _with_span(d, f)

    # -- struct info ------------------------------------------------------
    def sinfo_ref(self, s: StructInfo) -> int:
        """The index of ``s`` in the ``struct_infos`` table (equal ones shared)."""
        i = self.sinfo_by_id.get(id(s))
        if i is not None:
            return i
        key = _sinfo_key(s)
        i = self.sinfo_by_key.get(key) if key is not None else None
        if i is None:
            d = self.sinfo(s)
            i = len(self.struct_infos)
            self.struct_infos.append(d)
            if key is not None:
                self.sinfo_by_key[key] = i
        self.sinfo_by_id[id(s)] = i
        self._alive.append(s)
        return i

    def _sinfo(self, s: StructInfo) -> dict:
        t = type(s)
        if t is TensorStructInfo:
            d: dict = {"node": "TensorStructInfo"}
            if s.shape is not None:
                d["shape"] = [self.prim(x) for x in s.shape]
            d["dtype"] = s.dtype
            if s.shape is None and s.ndim != -1:
                d["ndim"] = s.ndim
            if s.vdevice is not None:
                d["vdevice"] = s.vdevice
        elif t is ObjectStructInfo:
            d = {"node": "ObjectStructInfo"}
        elif t is PrimStructInfo:
            d = {"node": "PrimStructInfo", "dtype": s.dtype}
            if s.value is not None:
                d["value"] = self.prim(s.value)
        elif t is ShapeStructInfo:
            d = {"node": "ShapeStructInfo"}
            if s.values is not None:
                d["values"] = [self.prim(x) for x in s.values]
            elif s.ndim != -1:
                d["ndim"] = s.ndim
        elif t is TupleStructInfo:
            d = {"node": "TupleStructInfo", "fields": [self.sinfo(f) for f in s.fields]}
        elif t is FuncStructInfo:
            d = {"node": "FuncStructInfo"}
            if s.params is not None:
                d["params"] = [self.sinfo(p) for p in s.params]
            d["ret"] = self.sinfo(s.ret)
            d["purity"] = bool(s.purity)
        else:
            raise SchemaError(f"cannot write {t.__name__} as struct info")
        return _with_span(d, s)

    # -- attributes -------------------------------------------------------
    def attrs(self, attrs: Mapping[str, Any], where: str) -> dict:
        out = {}
        for k, v in attrs.items():
            if not isinstance(k, str):
                raise SchemaError(f"{where}: attribute key {k!r} is not a string")
            out[k] = self.attr_value(v, f"{where}.{k}")
        return out

    def attr_value(self, v: Any, where: str) -> Any:
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, Phase):
            return v.label
        if isinstance(v, int):
            return int(v)
        if isinstance(v, float):
            j = _float_json(v)
            return {"float": j} if isinstance(j, str) else v
        if isinstance(v, tuple):
            return [self.attr_value(x, where) for x in v]
        if isinstance(v, list):
            return {"list": [self.attr_value(x, where) for x in v]}
        if isinstance(v, Mapping):
            return {"dict": self.attrs(v, where)}
        if isinstance(v, tir.PrimExpr):
            return {"prim_expr": self.prim(v)}
        if isinstance(v, StructInfo):
            return {"struct_info": self.sinfo(v)}
        if isinstance(v, tir.Buffer):
            return {"buffer": self.buffer(v)}
        if isinstance(v, Target):
            return {"target": self.attr_value(v.target, where)}
        if isinstance(v, VDevice):
            return {"vdevice": self.vdevice(v, where)}
        if isinstance(v, Expr):
            return {"expr": self.expr(v)}
        raise SchemaError(f"{where}: attribute value of type {type(v).__name__} ({v!r}) "
                          f"cannot be written to JSON")

    def vdevice(self, d: VDevice, where: str) -> dict:
        return _with_span({"target": self.attr_value(d.target, where),
                           "vdevice_id": d.vdevice_id, "memory_scope": d.memory_scope}, d)

    # -- Relax ------------------------------------------------------------
    def _opt_sinfo(self, d: dict, e: Expr) -> None:
        if e.struct_info is not None:
            d["struct_info"] = self.sinfo_ref(e.struct_info)

    def _expr(self, e: Expr) -> Any:
        t = type(e)
        if t is Var or t is DataflowVar:
            return self.var(e)
        if t is Call:
            op = e.op
            if type(op) is Op and op.struct_info is None and op.span is None:
                op_doc: Any = op.name
            else:
                op_doc = self.expr(op)
            d = {"node": "Call", "op": op_doc, "args": [self.expr(a) for a in e.args]}
            if e.attrs:
                d["attrs"] = self.attrs(e.attrs, "call attrs")
            if e.sinfo_args:
                d["sinfo_args"] = [self.sinfo_ref(s) for s in e.sinfo_args]
            self._opt_sinfo(d, e)
        elif t is Constant:
            arr = e.data  # tobytes() is C order whatever the layout
            if arr.dtype.byteorder == ">":
                arr = arr.astype(arr.dtype.newbyteorder("<"))
            d = {"node": "Constant", "dtype": str(arr.dtype), "shape": list(arr.shape),
                 "data": base64.b64encode(arr.tobytes()).decode("ascii")}
        elif t is Tuple:
            d = {"node": "Tuple", "fields": [self.expr(f) for f in e.fields]}
            if not _tuple_sinfo_derived(e):
                self._opt_sinfo(d, e)
        elif t is TupleGetItem:
            d = {"node": "TupleGetItem", "tuple_value": self.expr(e.tuple_value),
                 "index": e.index}
            if not _getitem_sinfo_derived(e):
                self._opt_sinfo(d, e)
        elif t is Op:
            d = {"node": "Op", "name": e.name}
            self._opt_sinfo(d, e)
        elif t is GlobalVar:
            d = {"node": "GlobalVar", "name": e.name_hint}
            self._opt_sinfo(d, e)
        elif t is ExternFunc:
            d = {"node": "ExternFunc", "global_symbol": e.global_symbol}
            if type(e.struct_info) is not ObjectStructInfo:
                self._opt_sinfo(d, e)
        elif t is ShapeExpr:
            d = {"node": "ShapeExpr", "values": [self.prim(v) for v in e.values]}
        elif t is PrimValue:
            d = {"node": "PrimValue", "value": self.prim(e.value)}
        elif t is StringImm:
            d = {"node": "StringImm", "value": e.value}
        elif t is DataTypeImm:
            d = {"node": "DataTypeImm", "value": e.value}
        elif t is If:
            d = {"node": "If", "cond": self.expr(e.cond), "true_branch": self.expr(e.true_branch),
                 "false_branch": self.expr(e.false_branch)}
            self._opt_sinfo(d, e)
        elif t is SeqExpr:
            d = {"node": "SeqExpr", "blocks": [self.block(b) for b in e.blocks],
                 "body": self.expr(e.body)}
            if e.struct_info is not e.body.struct_info:
                self._opt_sinfo(d, e)
        elif t is Function:
            d = {"node": "Function", "params": [self.var(p) for p in e.params],
                 "body": self.expr(e.body)}
            if e.ret_struct_info is not None:
                d["ret_struct_info"] = self.sinfo_ref(e.ret_struct_info)
            d["is_pure"] = bool(e.is_pure)
            if e.attrs:
                d["attrs"] = self.attrs(e.attrs, "function attrs")
            if not _function_sinfo_derived(e):
                self._opt_sinfo(d, e)
        else:
            raise SchemaError(f"cannot write {t.__name__} as a Relax expression")
        return _with_span(d, e)

    def block(self, b: BindingBlock) -> dict:
        bindings = []
        append = bindings.append
        for bd in b.bindings:  # a loop: blocks may hold 100k bindings
            if type(bd) is MatchCast:
                x = {"node": "MatchCast", "var": self.var(bd.var), "value": self.expr(bd.value),
                     "struct_info": self.sinfo_ref(bd.struct_info)}
            elif type(bd) is VarBinding:
                x = {"node": "VarBinding", "var": self.var(bd.var), "value": self.expr(bd.value)}
            else:
                raise SchemaError(f"cannot write {type(bd).__name__} as a binding")
            if bd.span is not None:
                x["span"] = _span(bd.span)
            append(x)
        kind = "DataflowBlock" if isinstance(b, DataflowBlock) else "BindingBlock"
        return _with_span({"node": kind, "bindings": bindings}, b)


def _scope_chain(s: tir.Stmt) -> tuple[list[tir.Stmt], tir.Stmt]:
    """The statements from ``s`` on that each continue in one next statement
    (a let's body, a SeqStmt's last statement, an allocation's or attribute's
    body, an else case), and the statement the chain ends in."""
    scopes = []
    while True:
        t = type(s)
        if t is tir.LetStmt or t is tir.Allocate or t is tir.AttrStmt:
            nxt = s.body
        elif t is tir.IfThenElse and s.else_case is not None:
            nxt = s.else_case
        elif t is tir.SeqStmt and len(s.stmts) >= 2 and _continues(s.stmts[-1]):
            nxt = s.stmts[-1]  # a SeqStmt is flat: its last statement is not one
        else:
            return scopes, s
        scopes.append(s)
        s = nxt


def _continues(s: tir.Stmt) -> bool:
    t = type(s)
    return (t is tir.LetStmt or t is tir.Allocate or t is tir.AttrStmt
            or (t is tir.IfThenElse and s.else_case is not None))


def _dim_key(d: Any) -> Any:
    t = type(d)
    if t is tir.IntImm:
        return (d.value, d.dtype, d.span)
    return id(d)  # variables by identity; other expressions too (rare in shapes)


def _sinfo_key(s: StructInfo) -> tuple | None:
    """A hashable key equal for struct infos that serialize identically
    (None: compare by identity only)."""
    t = type(s)
    if t is TensorStructInfo:
        shape = None if s.shape is None else tuple(_dim_key(d) for d in s.shape)
        return ("T", s.dtype, s.ndim, shape, s.span, s.vdevice)
    if t is ObjectStructInfo:
        return ("O", s.span)
    if t is PrimStructInfo:
        return ("P", s.dtype, None if s.value is None else _dim_key(s.value), s.span)
    if t is ShapeStructInfo:
        values = None if s.values is None else tuple(_dim_key(d) for d in s.values)
        return ("S", s.ndim, values, s.span)
    if t is TupleStructInfo:
        fields = tuple(_sinfo_key(f) for f in s.fields)
        return None if None in fields else ("U", fields, s.span)
    if t is FuncStructInfo:
        params = None if s.params is None else tuple(_sinfo_key(p) for p in s.params)
        ret = _sinfo_key(s.ret)
        if ret is None or (params is not None and None in params):
            return None
        return ("F", params, ret, s.purity, s.span)
    return None


def _tuple_sinfo_derived(e: Tuple) -> bool:
    s = e.struct_info
    fields = e.fields
    if s is None:
        return not all(f.struct_info is not None for f in fields)
    return (type(s) is TupleStructInfo and len(s.fields) == len(fields)
            and all(a is f.struct_info for a, f in zip(s.fields, fields)))


def _getitem_sinfo_derived(e: TupleGetItem) -> bool:
    ts = e.tuple_value.struct_info
    derived = (ts.fields[e.index] if isinstance(ts, TupleStructInfo)
               and 0 <= e.index < len(ts.fields) else None)
    return e.struct_info is derived


def _function_sinfo_derived(f: Function) -> bool:
    s = f.struct_info
    ret = f.ret_struct_info
    if s is None:
        return ret is None or any(p.struct_info is None for p in f.params)
    return (type(s) is FuncStructInfo and s.ret is ret and s.purity == f.is_pure
            and s.params is not None and len(s.params) == len(f.params)
            and all(a is p.struct_info for a, p in zip(s.params, f.params)))


def to_json(mod: IRModule, indent: int | None = None) -> str:
    """Serialize ``mod`` to a JSON document (see the module docstring).

    Compact by default; ``indent`` pretty-prints. Deterministic: equal modules
    built the same way give identical text.
    """
    if not isinstance(mod, IRModule):
        raise TypeError(f"to_json expects an IRModule, not {type(mod).__name__}")
    with collector.paused():
        try:
            return _dump(mod, indent)
        except RecursionError:
            raise SchemaError(f"the module is nested too deeply to write as JSON (the format "
                              f"supports about {MAX_DEPTH} levels of nested nodes)") from None


def _json_depth(doc: Any) -> int:
    """Nesting depth of a JSON-ready value (iterative)."""
    deepest = 0
    stack = [(doc, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            children = v.values()
        elif isinstance(v, list):
            children = v
        else:
            continue
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


def _dump(mod: IRModule, indent: int | None) -> str:
    w = _Writer()
    functions = {}
    for name, func in mod.functions.items():
        functions[name] = w.prim_func(func) if isinstance(func, tir.PrimFunc) else w.expr(func)
    attrs = dict(mod.attrs)
    phase = attrs.pop("phase", None)
    doc: dict[str, Any] = {
        "format": FORMAT_NAME, "version": FORMAT_VERSION,
        "phase": None if phase is None else Phase.parse(phase).label,
        "attrs": w.attrs(attrs, "module attrs"),
        "tir_vars": w.tir_vars, "buffers": w.buffers, "struct_infos": w.struct_infos,
        "vars": w.vars, "functions": functions,
    }
    if mod.global_infos:
        doc["global_infos"] = {
            key: [w.vdevice(d, "vdevice target") for d in devices]
            for key, devices in mod.global_infos.items() if key == "vdevice"}
        dummy = {key: len(v) for key, v in mod.global_infos.items() if key != "vdevice"}
        if dummy:
            doc["global_infos"]["dummy"] = dummy
    if mod.span is not None:
        doc["span"] = _span(mod.span)
    # A node level is at most 3 JSON levels (object, list, list of pairs).
    if 3 * w.max_depth + 8 > MAX_DEPTH:
        depth = _json_depth(doc)
        if depth > MAX_DEPTH:
            raise SchemaError(f"the module is nested too deeply to write as JSON: {depth} "
                              f"levels, the format supports {MAX_DEPTH} (a chain of nested "
                              f"TIR operations or expressions is too long)")
    if indent is None:
        return json.dumps(doc, separators=(",", ":"), allow_nan=False)
    return json.dumps(doc, indent=indent, allow_nan=False)



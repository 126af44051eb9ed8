"""Reading a JSON document into a module (:func:`from_json`), with validation."""

from __future__ import annotations

import base64
import binascii
import keyword
import math
from typing import Any

import numpy as np
from pydantic import ValidationError

from phasec import collector
from phasec.errors import InputError, SchemaError
from phasec.fileio import check_json_size
from phasec.ir import tir
from phasec.ir.expr import (
    BindingBlock, Call, Constant, DataflowBlock, DataflowVar, DataTypeImm, Expr, ExternFunc,
    Function, GlobalVar, If, MatchCast, Op, PrimValue, SeqExpr, ShapeExpr, StringImm, Tuple,
    TupleGetItem, Var, VarBinding,
)
from phasec.ir.module import (
    DummyGlobalInfo, IRModule, Target, VDevice, canonical_vdevice, plain_target,
    target_problem,
)
from phasec.ir.node import Span
from phasec.ir.struct_info import (
    FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
    TensorStructInfo, TupleStructInfo,
)
from phasec.script.checks import dim_problem, int_range_problem

from phasec.script.json_format.schema import (
    AllocateDoc, AttrDict, AttrExpr, AttrFloat, AttrList, AttrPrimExpr, AttrStmtDoc,
    AttrBuffer, AttrStructInfo, AttrTarget, AttrVDevice,
    BinaryOpDoc, BlockDoc, BlockDocR, BufferLoadDoc, BufferRef, BufferRegionDoc,
    BufferStoreDoc, CallDoc, CastDoc, ConstantDoc, DataTypeImmDoc, EvaluateDoc, ExternFuncDoc,
    FloatImmDoc, ForDoc, FuncStructInfoDoc, FunctionDoc, GlobalVarDoc, IfDoc, IfThenElseDoc,
    IntImmDoc, LetScopeDoc, LetStmtDoc, MAX_DEPTH, MAX_VALUES, MatchCastDoc, ModuleDoc, NestDoc, NotDoc,
    ObjectStructInfoDoc, OpDoc, PrimFuncDoc, PrimStructInfoDoc, PrimValueDoc, READABLE_VERSIONS,
    SelectChainDoc, SelectDoc, SeqExprDoc, SeqScopeDoc, SeqStmtDoc, AllocateScopeDoc,
    AttrScopeDoc,
    ShapeExprDoc, ShapeStructInfoDoc, SpanDoc, StringImmDoc, TensorStructInfoDoc, TirCallDoc,
    TirVarRef, TupleDoc, TupleGetItemDoc, TupleStructInfoDoc, WhileDoc, _Model,
    BufferDataDoc, TirStringImmDoc,
)
from phasec.script.json_format import schema
# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------

class _LoadError(Exception):
    def __init__(self, path: Any, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def _path_text(path: Any) -> str:
    keys = []
    while path is not None:
        path, key = path
        keys.append(str(key))
    return ".".join(reversed(keys)) or "(document)"


def _collect_tags() -> frozenset[str]:
    tags: set[str] = set()
    for m in vars(schema).values():
        if isinstance(m, type) and issubclass(m, _Model) and "node" in m.model_fields:
            ann = m.model_fields["node"].annotation
            tags.update(getattr(ann, "__args__", ()))
    return frozenset(tags)


#: Discriminator values pydantic inserts into error locations; they are not
#: part of the document's paths, so messages leave them out.
_TAGS = _collect_tags()
#: Fields holding dictionaries: the next path element is a user key, never a tag.
_DICT_FIELDS = frozenset({"functions", "attrs", "dict", "annotations"})
#: Labels pydantic gives the scalar members of a union in error locations.
_SCALAR_LABELS = frozenset({"int", "str", "bool", "float", "none"})


def _split_loc(loc: tuple) -> tuple[tuple, list[int]]:
    """Drop pydantic's union labels and discriminator tags from ``loc``.

    Returns the document path and, for each union member label met, the
    length of the path at that point (where the union is)."""
    parts: list[Any] = []
    unions: list[int] = []
    prev: Any = None
    for item in loc:
        if isinstance(item, str) and prev not in _DICT_FIELDS:
            if item in _SCALAR_LABELS or item.startswith("tagged-union[") or (
                    item.startswith("<") and item.endswith(">")):
                unions.append(len(parts))
                prev = item
                continue
            if item in _TAGS or item.startswith("function-"):
                prev = item
                continue
        parts.append(item)
        prev = item
    return tuple(parts), unions


def _clean_errors(errors: list[dict]) -> list[tuple[str, str]]:
    """Pydantic errors -> (path, message) pairs, one per real problem.

    A value that fails a union (a Var id *or* an expression object, an int64
    *or* a TIR expression...) makes pydantic report one error per member. A
    member whose basic type does not match the value (``int_type`` for an
    object...) is noise when another member went deeper; when none did, the
    members' expectations are merged into one message.
    """
    parsed = []
    deep: set[tuple] = set()  # union positions some member got past the type check of
    for err in errors:
        path, unions = _split_loc(tuple(err["loc"]))
        mismatch = bool(unions) and unions[-1] == len(path) and err["type"].endswith("_type")
        for u in (unions[:-1] if mismatch else unions):
            deep.add(path[:u])
        parsed.append((path, mismatch, err))
    out: list[tuple[str, str]] = []
    merged: dict[tuple, list[str]] = {}
    for path, mismatch, err in parsed:
        if mismatch:
            if path in deep:
                continue
            if path not in merged:
                merged[path] = []
                out.append((path, None))  # placeholder, filled below
            want = err["msg"].removeprefix("Input should be ")
            if want not in merged[path]:
                merged[path].append(want)
            continue
        out.append((path, err["msg"]))
    result = []
    for path, msg in out:
        if msg is None:
            msg = "Input should be " + " or ".join(merged[path])
        result.append((".".join(map(str, path)) or "(document)", msg))
    return result


def _schema_error(exc: ValidationError) -> SchemaError:
    errors = exc.errors(include_url=False)
    for err in errors:
        if err["type"] == "json_invalid":
            # pydantic's message carries the line and column
            msg = err["msg"].removeprefix("Invalid JSON: ")
            if "recursion limit" in msg:
                msg = (f"the document is nested too deeply ({msg}); the format supports "
                       f"about {MAX_DEPTH} levels")
            e = SchemaError(f"invalid JSON: {msg}")
            e.errors = [("(document)", f"invalid JSON: {msg}")]  # type: ignore[attr-defined]
            return e
    pairs = [(path, f"unsupported format version {_input_text(errors, path)}; this phasec reads "
                    f"versions {', '.join(map(str, READABLE_VERSIONS))}")
             if path == "version" else (path, msg) for path, msg in _clean_errors(errors)]
    lines = [f"{path}: {msg}" for path, msg in pairs]
    shown = lines[:20]
    more = f"\n  ... and {len(lines) - 20} more" if len(lines) > 20 else ""
    err = SchemaError("invalid module JSON:\n  " + "\n  ".join(shown) + more)
    err.errors = pairs  # type: ignore[attr-defined]
    return err


def _input_text(errors: list[dict], path: str) -> str:
    for err in errors:
        if ".".join(map(str, err["loc"])) == path:
            return repr(err.get("input"))
    return "?"  # pragma: no cover


def _mk_span(s: SpanDoc | None) -> Span | None:
    if s is None:
        return None
    return Span(s.file, s.line, s.col, s.end_line, s.end_col)


def _float_value(v: Any) -> float:
    if isinstance(v, str):
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[v]
    return float(v)


class _Reader:
    """Validated document models -> IR nodes."""

    def __init__(self, version: int = 2) -> None:
        self.version = version
        self.tir_vars: dict[int, tir.Var] = {}
        self.buffers: dict[int, tir.Buffer] = {}
        self.vars: dict[int, Var] = {}
        self.struct_infos: list[StructInfo] = []
        self.ops: dict[str, Op] = {}

    # -- references -------------------------------------------------------
    def _ref(self, table: dict, i: int, what: str, path: Any) -> Any:
        obj = table.get(i)
        if obj is None:
            raise _LoadError(path, f"unknown {what} id {i}")
        return obj

    def tables(self, doc: ModuleDoc) -> None:
        p = None
        self.global_infos: dict[str, tuple[VDevice, ...]] = {}
        self.vdevice_names: set[str] = set()
        if doc.global_infos is not None and doc.global_infos.vdevice:
            devices = tuple(self.vdevice(d, ((p, "global_infos"), i))
                            for i, d in enumerate(doc.global_infos.vdevice))
            self.global_infos["vdevice"] = devices
            self.vdevice_names = {canonical_vdevice(devices, d) for d in devices}
        if doc.global_infos is not None:
            for key, count in doc.global_infos.dummy.items():
                if key == "vdevice" or count == 0:
                    raise _LoadError(((p, "global_infos"), "dummy"),
                                     f"dummy global info {key!r}: a key other than 'vdevice' "
                                     f"with at least one entry")
                self.global_infos[key] = tuple(DummyGlobalInfo() for _ in range(count))
        for k, d in enumerate(doc.tir_vars):
            q = ((p, "tir_vars"), k)
            if d.id in self.tir_vars:
                raise _LoadError((q, "id"), f"duplicate tir var id {d.id}")
            self.tir_vars[d.id] = tir.Var(d.name, d.dtype, span=_mk_span(d.span))
        for k, d in enumerate(doc.buffers):
            q = ((p, "buffers"), k)
            if d.id in self.buffers:
                raise _LoadError((q, "id"), f"duplicate buffer id {d.id}")
            shape = self.dims(d.shape, (q, "shape"))
            self.buffers[d.id] = tir.Buffer(d.name, shape, d.dtype, span=_mk_span(d.span),
                                            scope=d.scope)
        for k, d in enumerate(doc.struct_infos):
            self.struct_infos.append(self.sinfo(d, ((p, "struct_infos"), k)))
        for k, d in enumerate(doc.vars):
            q = ((p, "vars"), k)
            if d.id in self.vars:
                raise _LoadError((q, "id"), f"duplicate var id {d.id}")
            sinfo = None if d.struct_info is None else self.sinfo(d.struct_info, (q, "struct_info"))
            cls = DataflowVar if d.dataflow else Var
            self.vars[d.id] = cls(d.name, sinfo, span=_mk_span(d.span))

    def dims(self, items: Any, p: Any, allow_negative: bool = False) -> tuple[tir.PrimExpr, ...]:
        """Shape dimensions: integer expressions (non-negative constants unless
        ``allow_negative``, as for R.shape values such as reshape's -1)."""
        out = []
        for i, x in enumerate(items):
            q = (p, i)
            dim = self.prim(x, q)
            problem = dim_problem(dim, allow_negative=allow_negative)
            if problem is not None:
                raise _LoadError(q, problem)
            out.append(dim)
        return tuple(out)

    # -- TIR --------------------------------------------------------------
    def prim(self, m: Any, p: Any) -> tir.PrimExpr:
        t = type(m)
        if t is int:
            problem = int_range_problem(m, "int64")
            if problem is not None:
                raise _LoadError(p, problem)
            return tir.IntImm(m, "int64")
        span = _mk_span(m.span)
        if t is TirVarRef:
            return self._ref(self.tir_vars, m.id, "tir var", (p, "id"))
        if t is IntImmDoc:
            problem = int_range_problem(m.value, m.dtype)
            if problem is not None:
                raise _LoadError((p, "value"), f"an IntImm of dtype {m.dtype}: {problem}")
            return tir.IntImm(m.value, m.dtype, span=span)
        if t is FloatImmDoc:
            return tir.FloatImm(_float_value(m.value), m.dtype, span=span)
        if t is BinaryOpDoc:
            return tir.BinaryOp(m.op, self.prim(m.lhs, (p, "lhs")), self.prim(m.rhs, (p, "rhs")),
                                m.dtype or "", span=span)
        if t is NotDoc:
            return tir.Not(self.prim(m.value, (p, "value")), m.dtype or "bool", span=span)
        if t is CastDoc:
            return tir.Cast(m.dtype, self.prim(m.value, (p, "value")), span=span)
        if t is SelectDoc:
            return tir.Select(self.prim(m.condition, (p, "condition")),
                              self.prim(m.true_value, (p, "true_value")),
                              self.prim(m.false_value, (p, "false_value")), m.dtype or "",
                              span=span)
        if t is SelectChainDoc:
            self._needs_version_2("tir.SelectChain", p)
            value = self.prim(m.false_value, (p, "false_value"))
            for i in range(len(m.cases) - 1, -1, -1):  # a loop: chains may be long
                c = m.cases[i]
                q = ((p, "cases"), i)
                value = tir.Select(self.prim(c.condition, (q, "condition")),
                                   self.prim(c.true_value, (q, "true_value")), value,
                                   c.dtype or "", span=_mk_span(c.span))
            return value
        if t is TirCallDoc:
            if not m.args and not m.dtype:
                raise _LoadError((p, "dtype"), "a tir.Call without arguments needs a dtype")
            args = tuple(self.prim(a, ((p, "args"), i)) for i, a in enumerate(m.args))
            return tir.Call(m.name, args, m.dtype or "", span=span)
        if t is TirStringImmDoc:
            return tir.StringImm(m.value, span=span)
        if t is BufferDataDoc:
            return tir.BufferData(self._ref(self.buffers, m.buffer, "buffer", (p, "buffer")),
                                  span=span)
        if t is BufferLoadDoc:
            buf = self._ref(self.buffers, m.buffer, "buffer", (p, "buffer"))
            idx = tuple(self.prim(a, ((p, "indices"), i)) for i, a in enumerate(m.indices))
            return tir.BufferLoad(buf, idx, m.dtype or "", span=span)
        raise _LoadError(p, f"unexpected {t.__name__}")  # pragma: no cover

    def stmt(self, m: Any, p: Any) -> tir.Stmt:
        t = type(m)
        span = _mk_span(m.span)
        if t is BufferStoreDoc:
            buf = self._ref(self.buffers, m.buffer, "buffer", (p, "buffer"))
            return tir.BufferStore(buf, self.prim(m.value, (p, "value")),
                                   tuple(self.prim(a, ((p, "indices"), i))
                                         for i, a in enumerate(m.indices)), span=span)
        if t is SeqStmtDoc:
            return tir.seq([self.stmt(s, ((p, "stmts"), i)) for i, s in enumerate(m.stmts)],
                           span=span)
        if t is ForDoc:
            var = self._ref(self.tir_vars, m.loop_var, "tir var", (p, "loop_var"))
            return tir.For(var, self.prim(m.min, (p, "min")), self.prim(m.extent, (p, "extent")),
                           m.kind, self.stmt(m.body, (p, "body")), span=span, thread=m.thread)
        if t is IfThenElseDoc:
            other = None if m.else_case is None else self.stmt(m.else_case, (p, "else_case"))
            return tir.IfThenElse(self.prim(m.condition, (p, "condition")),
                                  self.stmt(m.then_case, (p, "then_case")), other, span=span)
        if t is AllocateDoc:
            buf = self._ref(self.buffers, m.buffer, "buffer", (p, "buffer"))
            return tir.Allocate(buf, self.stmt(m.body, (p, "body")), span=span)
        if t is WhileDoc:
            return tir.While(self.prim(m.condition, (p, "condition")),
                             self.stmt(m.body, (p, "body")), span=span)
        if t is LetStmtDoc:
            var = self._ref(self.tir_vars, m.var, "tir var", (p, "var"))
            return tir.LetStmt(var, self.prim(m.value, (p, "value")), self.stmt(m.body, (p, "body")),
                               span=span)
        if t is AttrStmtDoc:
            return tir.AttrStmt(m.key, self.attr_value(m.value, (p, "value")),
                                self.stmt(m.body, (p, "body")), span=span)
        if t is EvaluateDoc:
            return tir.Evaluate(self.prim(m.value, (p, "value")), span=span)
        if t is NestDoc:
            return self.nest(m, p)
        if t is BlockDoc:
            if len(m.iter_vars) != len(m.iter_values):
                raise _LoadError((p, "iter_values"), f"a block needs one binding per axis: "
                                 f"{len(m.iter_vars)} axes, {len(m.iter_values)} values")
            ivs = []
            for i, iv in enumerate(m.iter_vars):
                q = ((p, "iter_vars"), i)
                ivs.append(tir.IterVar(self._ref(self.tir_vars, iv.var, "tir var", (q, "var")),
                                       self.prim(iv.extent, (q, "extent")), iv.kind,
                                       span=_mk_span(iv.span),
                                       min=None if iv.min is None else self.prim(iv.min, (q, "min"))))
            values = [self.prim(v, ((p, "iter_values"), i)) for i, v in enumerate(m.iter_values)]
            init = None if m.init is None else self.stmt(m.init, (p, "init"))
            return tir.Block(m.name, ivs, values, self.stmt(m.body, (p, "body")), init,
                             [self.region(r, ((p, "reads"), i)) for i, r in enumerate(m.reads)],
                             [self.region(r, ((p, "writes"), i)) for i, r in enumerate(m.writes)],
                             self.attrs(m.annotations, (p, "annotations")) or None, span=span)
        raise _LoadError(p, f"unexpected {t.__name__}")  # pragma: no cover

    def nest(self, m: NestDoc, p: Any) -> tir.Stmt:
        """A ``tir.Nest``: its scopes wrapped around its body, innermost first
        (a loop: a chain may hold thousands of lets)."""
        self._needs_version_2("tir.Nest", p)
        out = self.stmt(m.body, (p, "body"))
        for i in range(len(m.scopes) - 1, -1, -1):
            sc = m.scopes[i]
            q = ((p, "scopes"), i)
            t = type(sc)
            span = _mk_span(sc.span)
            if t is LetScopeDoc:
                var = self._ref(self.tir_vars, sc.var, "tir var", (q, "var"))
                out = tir.LetStmt(var, self.prim(sc.value, (q, "value")), out, span=span)
            elif t is SeqScopeDoc:
                stmts = [self.stmt(x, ((q, "stmts"), k)) for k, x in enumerate(sc.stmts)]
                out = tir.seq([*stmts, out], span=span)
            elif t is AllocateScopeDoc:
                out = tir.Allocate(self._ref(self.buffers, sc.buffer, "buffer", (q, "buffer")),
                                   out, span=span)
            elif t is AttrScopeDoc:
                out = tir.AttrStmt(sc.key, self.attr_value(sc.value, (q, "value")), out,
                                   span=span)
            else:  # ElseIfScopeDoc
                out = tir.IfThenElse(self.prim(sc.condition, (q, "condition")),
                                     self.stmt(sc.then_case, (q, "then_case")), out, span=span)
        return out

    def _needs_version_2(self, what: str, p: Any) -> None:
        if self.version < 2:
            raise _LoadError((p, "node"), f"{what} is a format version 2 node, but the "
                             f"document says version {self.version}")

    def region(self, m: BufferRegionDoc, p: Any) -> tir.BufferRegion:
        buf = self._ref(self.buffers, m.buffer, "buffer", (p, "buffer"))
        region = tuple((self.prim(lo, (((p, "region"), i), 0)), self.prim(ext, (((p, "region"), i), 1)))
                       for i, (lo, ext) in enumerate(m.region))
        return tir.BufferRegion(buf, region, span=_mk_span(m.span))

    def prim_func(self, m: PrimFuncDoc, p: Any) -> tir.PrimFunc:
        params = []
        for i, x in enumerate(m.params):
            q = (((p, "params"), i), "id")
            if type(x) is BufferRef:
                params.append(self._ref(self.buffers, x.id, "buffer", q))
            else:
                params.append(self._ref(self.tir_vars, x.id, "tir var", q))
        return tir.PrimFunc(params, self.stmt(m.body, (p, "body")),
                            self.attrs(m.attrs, (p, "attrs")), span=_mk_span(m.span),
                            ret_dtype=m.ret_dtype)

    # -- struct info ------------------------------------------------------
    def sinfo(self, m: Any, p: Any) -> StructInfo:
        t = type(m)
        if t is int:
            if 0 <= m < len(self.struct_infos):
                return self.struct_infos[m]
            raise _LoadError(p, f"unknown struct info index {m} (the struct_infos table has "
                             f"{len(self.struct_infos)} entries; an entry may only refer to "
                             f"earlier ones)")
        span = _mk_span(m.span)
        if t is TensorStructInfoDoc:
            if m.vdevice is not None and m.vdevice not in self.vdevice_names:
                known = ", ".join(sorted(self.vdevice_names)) or "none"
                raise _LoadError((p, "vdevice"), f"vdevice {m.vdevice!r} is not one of the "
                                 f"module's virtual devices (global_infos.vdevice: {known})")
            if m.shape is None:
                return TensorStructInfo(None, m.dtype, m.ndim, span=span, vdevice=m.vdevice)
            if m.ndim not in (-1, len(m.shape)):
                raise _LoadError((p, "ndim"), f"ndim {m.ndim} does not match the shape's "
                                 f"{len(m.shape)} dimensions")
            return TensorStructInfo(self.dims(m.shape, (p, "shape")), m.dtype, span=span,
                                    vdevice=m.vdevice)
        if t is ObjectStructInfoDoc:
            return ObjectStructInfo(span=span)
        if t is PrimStructInfoDoc:
            value = None if m.value is None else self.prim(m.value, (p, "value"))
            return PrimStructInfo(m.dtype, value, span=span)
        if t is ShapeStructInfoDoc:
            if m.values is None:
                return ShapeStructInfo(None, m.ndim, span=span)
            if m.ndim not in (-1, len(m.values)):
                raise _LoadError((p, "ndim"), f"ndim {m.ndim} does not match the "
                                 f"{len(m.values)} values")
            return ShapeStructInfo(self.dims(m.values, (p, "values"), allow_negative=True),
                                   span=span)
        if t is TupleStructInfoDoc:
            return TupleStructInfo([self.sinfo(f, ((p, "fields"), i))
                                    for i, f in enumerate(m.fields)], span=span)
        if t is FuncStructInfoDoc:
            params = None if m.params is None else [
                self.sinfo(x, ((p, "params"), i)) for i, x in enumerate(m.params)]
            return FuncStructInfo(params, self.sinfo(m.ret, (p, "ret")), m.purity, span=span)
        raise _LoadError(p, f"unexpected {t.__name__}")  # pragma: no cover

    def opt_sinfo(self, m: Any, p: Any) -> StructInfo | None:
        return None if m.struct_info is None else self.sinfo(m.struct_info, (p, "struct_info"))

    # -- attributes -------------------------------------------------------
    def attrs(self, attrs: dict, p: Any) -> dict:
        return {k: self.attr_value(v, (p, k)) for k, v in attrs.items()}

    def attr_value(self, v: Any, p: Any) -> Any:
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, list):
            return tuple(self.attr_value(x, (p, i)) for i, x in enumerate(v))
        t = type(v)
        if t is AttrList:
            return [self.attr_value(x, ((p, "list"), i)) for i, x in enumerate(v.list)]
        if t is AttrDict:
            return self.attrs(v.dict_, (p, "dict"))
        if t is AttrFloat:
            return _float_value(v.float)
        if t is AttrPrimExpr:
            return self.prim(v.prim_expr, (p, "prim_expr"))
        if t is AttrExpr:
            return self.expr(v.expr, (p, "expr"))
        if t is AttrStructInfo:
            return self.sinfo(v.struct_info, (p, "struct_info"))
        if t is AttrBuffer:
            return self._ref(self.buffers, v.buffer, "buffer", (p, "buffer"))
        if t is AttrTarget:
            return Target(self.target(v.target, (p, "target")))
        if t is AttrVDevice:
            return self.vdevice(v.vdevice, (p, "vdevice"))
        raise _LoadError(p, f"unexpected attribute value {v!r}")  # pragma: no cover

    def target(self, v: Any, p: Any) -> Any:
        value = self.attr_value(v, p)
        problem = target_problem(value)
        if problem is not None:
            raise _LoadError(p, problem)
        return plain_target(value)

    def vdevice(self, d: Any, p: Any) -> VDevice:
        return VDevice(self.target(d.target, (p, "target")), d.vdevice_id, d.memory_scope,
                       span=_mk_span(d.span))

    # -- Relax ------------------------------------------------------------
    def expr(self, m: Any, p: Any) -> Expr:
        t = type(m)
        if t is int:
            var = self.vars.get(m)
            if var is None:
                raise _LoadError(p, f"unknown var id {m}")
            return var
        span = _mk_span(m.span)
        if t is CallDoc:
            if type(m.op) is str:
                op = self.ops.get(m.op)
                if op is None:
                    op = self.ops[m.op] = Op(m.op)
            else:
                op = self.expr(m.op, (p, "op"))
            args = [self.expr(a, ((p, "args"), i)) for i, a in enumerate(m.args)]
            attrs = self.attrs(m.attrs, (p, "attrs")) if m.attrs else None
            sargs = tuple(self.sinfo(s, ((p, "sinfo_args"), i)) for i, s in enumerate(m.sinfo_args))
            return Call(op, args, attrs, sargs, self.opt_sinfo(m, p), span=span)
        if t is ConstantDoc:
            return Constant(self.constant_data(m, p), span=span)
        if t is TupleDoc:
            return Tuple([self.expr(f, ((p, "fields"), i)) for i, f in enumerate(m.fields)],
                         self.opt_sinfo(m, p), span=span)
        if t is TupleGetItemDoc:
            return TupleGetItem(self.expr(m.tuple_value, (p, "tuple_value")), m.index,
                                self.opt_sinfo(m, p), span=span)
        if t is OpDoc:
            return Op(m.name, self.opt_sinfo(m, p), span=span)
        if t is GlobalVarDoc:
            return GlobalVar(m.name, self.opt_sinfo(m, p), span=span)
        if t is ExternFuncDoc:
            return ExternFunc(m.global_symbol, self.opt_sinfo(m, p), span=span)
        if t is ShapeExprDoc:
            return ShapeExpr(self.dims(m.values, (p, "values"), allow_negative=True), span=span)
        if t is PrimValueDoc:
            return PrimValue(self.prim(m.value, (p, "value")), span=span)
        if t is StringImmDoc:
            return StringImm(m.value, span=span)
        if t is DataTypeImmDoc:
            return DataTypeImm(m.value, span=span)
        if t is IfDoc:
            return If(self.expr(m.cond, (p, "cond")), self.expr(m.true_branch, (p, "true_branch")),
                      self.expr(m.false_branch, (p, "false_branch")), self.opt_sinfo(m, p),
                      span=span)
        if t is SeqExprDoc:
            blocks = [self.block(b, ((p, "blocks"), i)) for i, b in enumerate(m.blocks)]
            body = self.expr(m.body, (p, "body"))
            return SeqExpr(blocks, body, self.opt_sinfo(m, p), span=span)
        if t is FunctionDoc:
            params = [self._ref(self.vars, v, "var", ((p, "params"), i))
                      for i, v in enumerate(m.params)]
            body = self.expr(m.body, (p, "body"))
            ret = None if m.ret_struct_info is None else self.sinfo(m.ret_struct_info,
                                                                    (p, "ret_struct_info"))
            return Function(params, body, ret, m.is_pure, self.attrs(m.attrs, (p, "attrs")),
                            self.opt_sinfo(m, p), span=span)
        raise _LoadError(p, f"unexpected {t.__name__}")  # pragma: no cover

    def constant_data(self, m: ConstantDoc, p: Any) -> np.ndarray:
        try:
            raw = base64.b64decode(m.data, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise _LoadError((p, "data"), f"invalid base64 data: {exc}") from None
        dtype = np.dtype(m.dtype).newbyteorder("<")
        count = 1
        for d in m.shape:
            count *= d
        expected = count * dtype.itemsize
        if len(raw) != expected:
            raise _LoadError((p, "data"), f"constant data has {len(raw)} bytes; shape "
                             f"{tuple(m.shape)} of {m.dtype} needs {expected}")
        if m.dtype == "bool" and raw.translate(None, b"\x00\x01"):
            raise _LoadError((p, "data"), "bool constant data must be bytes 0 or 1")
        arr = np.frombuffer(raw, dtype=dtype).reshape(tuple(m.shape))
        return arr.astype(np.dtype(m.dtype), copy=False)

    def block(self, m: BlockDocR, p: Any) -> BindingBlock:
        out = []
        append = out.append
        vars_ = self.vars
        bp = (p, "bindings")
        for i, b in enumerate(m.bindings):  # a loop: blocks may hold 100k bindings
            q = (bp, i)
            var = vars_.get(b.var)
            if var is None:
                raise _LoadError((q, "var"), f"unknown var id {b.var}")
            value = self.expr(b.value, (q, "value"))
            if type(b) is MatchCastDoc:
                append(MatchCast(var, value, self.sinfo(b.struct_info, (q, "struct_info")),
                                 span=_mk_span(b.span)))
            else:
                append(VarBinding(var, value, span=_mk_span(b.span)))
        cls = DataflowBlock if m.node == "DataflowBlock" else BindingBlock
        return cls(out, span=_mk_span(m.span))


def from_json(text: str | bytes) -> IRModule:
    """Load a module written by :func:`to_json` (or by hand, following the schema).

    Raises :class:`SchemaError` naming every offending field's path when the
    document does not fit the schema, refers to unknown ids, or holds bad
    data; invalid JSON gives line and column.
    """
    with collector.paused():
        return _load(text)


def _load(text: str | bytes) -> IRModule:
    if not isinstance(text, (str, bytes, bytearray)):
        raise TypeError(f"from_json expects JSON text (str or bytes), not {type(text).__name__}")
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8-sig")  # a BOM is fine, as in files
        except UnicodeDecodeError as exc:
            raise SchemaError(f"invalid JSON: the text is not UTF-8 (byte 0x{text[exc.start]:02x} "
                              f"at offset {exc.start})") from None
    elif text.startswith("\ufeff"):
        text = text[1:]
    try:  # counted before pydantic builds anything (a padded document would take GBs)
        check_json_size(text, "invalid module JSON", MAX_VALUES, MAX_DEPTH)
    except InputError as exc:
        raise SchemaError(str(exc)) from None
    try:
        doc = ModuleDoc.model_validate_json(text)
    except ValidationError as exc:
        raise _schema_error(exc) from None
    reader = _Reader(doc.version)
    try:
        reader.tables(doc)
        functions: dict[str, Any] = {}
        for name, f in doc.functions.items():
            p = ((None, "functions"), name)
            if not name.isidentifier() or keyword.iskeyword(name):
                # cls.<name> in TVMScript, and a symbol of the executable
                raise _LoadError(p, f"function name {name!r} is not a valid identifier")
            if type(f) is PrimFuncDoc:
                functions[name] = reader.prim_func(f, p)
            else:
                functions[name] = reader.expr(f, p)
        attrs = reader.attrs(doc.attrs, (None, "attrs"))
        global_infos = reader.global_infos
        if "phase" in attrs:
            raise _LoadError(((None, "attrs"), "phase"),
                             "the phase goes in the top-level 'phase' field, not in attrs")
    except _LoadError as exc:
        path = _path_text(exc.path)
        err = SchemaError(f"invalid module JSON:\n  {path}: {exc.message}")
        err.errors = [(path, exc.message)]  # type: ignore[attr-defined]
        raise err from None
    except RecursionError:
        raise SchemaError(f"invalid module JSON: nested too deeply (the format supports about "
                          f"{MAX_DEPTH} levels)") from None
    except (ValueError, TypeError) as exc:  # an IR constructor refused a value
        raise SchemaError(f"invalid module JSON: {exc}") from None
    if doc.phase is not None:
        attrs["phase"] = doc.phase
    return IRModule(functions, attrs, span=_mk_span(doc.span), global_infos=global_infos)

"""The JSON module format: ``to_json``, ``from_json`` and its schema.

The schema is defined by the pydantic (v2) models below; ``json_schema()``
returns it as a JSON Schema document. Layout of a document::

    {"format": "phasec.ir_module", "version": 1,
     "phase": "optimization",            # or null: no phase attribute
     "attrs": {...},                     # the other module attributes
     "tir_vars": [{"id": 0, "name": "n", "dtype": "int64"}, ...],
     "buffers":  [{"id": 0, "name": "A", "shape": [{"node": "tir.Var", "id": 0}, 4],
                   "dtype": "float32"}, ...],
     "struct_infos": [{"node": "TensorStructInfo", "shape": [...], "dtype": "float32"}, ...],
     "vars":     [{"id": 0, "name": "x", "struct_info": 0},
                  {"id": 1, "name": "lv", "dataflow": true, "struct_info": 0}, ...],
     "functions": {"main": {"node": "Function", "params": [0], "body": {...}, ...},
                   "add": {"node": "PrimFunc", ...}}}

Design points:

* Every node is an object whose ``"node"`` field names its kind (the IR class
  name; TIR nodes are prefixed ``tir.``), validated as a discriminated union.
  Every node may carry a ``"span"`` (file, line, col, end_line, end_col).
* Variables have identity: Relax ``Var``/``DataflowVar``, TIR ``Var`` and
  ``Buffer`` are defined once, in the module-level tables ``vars``,
  ``tir_vars`` and ``buffers``, and every use (parameters and binding targets
  included) refers to them by ``id``: where a Relax expression is expected a
  JSON integer is a use of that Var; TIR uses are ``{"node": "tir.Var", "id":
  ...}`` and buffer fields hold buffer ids. Identity round-trips exactly, even
  across functions. A buffer's shape may only refer to buffers listed before it.
* Compact forms: where a TIR expression is expected a JSON integer is an
  ``int64`` ``IntImm`` (shape dimensions stay readable); a call's ``op``
  given as a string is the registered operator of that name. Struct info is
  written once in the ``struct_infos`` table (equal ones shared) and referred
  to by index; inline struct info objects are accepted anywhere too (a table
  entry may refer to earlier entries only).
* Constants carry ``dtype``, ``shape`` and ``data``: the array's bytes,
  little-endian, C order, base64-encoded.
* Struct info of expressions is stored, not re-inferred, so a loaded module
  needs no inference: a ``Call``/``If`` (and ``Op``/``GlobalVar``/
  ``ExternFunc``) keeps its ``struct_info`` when it has one; for ``Tuple``,
  ``TupleGetItem``, ``SeqExpr`` and ``Function`` it is written only when it is
  not the one the node derives from its parts.
* Attribute values: ``null``, booleans, integers, strings and finite floats
  are JSON literals; a JSON array is a Python tuple; the one-key objects
  ``{"list": [...]}``, ``{"dict": {...}}``, ``{"float": "nan"|"inf"|"-inf"}``,
  ``{"prim_expr": ...}``, ``{"expr": ...}``, ``{"struct_info": ...}`` hold the
  rest.
* Loading is exact, not normalizing: the module holds what the document says
  (non-normal-form or use-before-definition programs included), so the
  verifier can inspect it. ``to_json(from_json(t)) == t`` for any ``t``
  written by ``to_json``.
* Nesting is limited to :data:`MAX_DEPTH` JSON levels (pydantic's JSON parser
  stops there); ``to_json`` refuses a module it could not read back.

Any document that does not fit raises :class:`phasec.errors.SchemaError`
listing the path of each offending field (``functions.main.body.blocks.0.
bindings.3.value.args: Field required``; the paths are also in its
``errors`` attribute as ``(path, message)`` pairs). Unknown ids, duplicate
ids, bad dtypes and constant data of the wrong length are SchemaErrors too;
invalid JSON text gives the line and column.

Performance: reading and writing are linear and iterative over binding
lists; a 100k-binding function writes in about 0.6 s and loads (pydantic
validation included) in about 1.5 s.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import gc
import json
import keyword
import math
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Literal, Optional, Union

import numpy as np
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError
from typing_extensions import TypeAliasType

from ..errors import SchemaError
from ..ir import tir
from ..ir.expr import (
    BindingBlock, Call, Constant, DataflowBlock, DataflowVar, DataTypeImm, Expr, ExternFunc,
    Function, GlobalVar, If, MatchCast, Op, PrimValue, SeqExpr, ShapeExpr, StringImm, Tuple,
    TupleGetItem, Var, VarBinding,
)
from ..ir.module import IRModule
from ..ir.node import Span
from ..ir.phase import Phase
from ..ir.struct_info import (
    FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
    TensorStructInfo, TupleStructInfo,
)
from ._checks import dim_problem, int_range_problem

__all__ = ["to_json", "from_json", "json_schema", "FORMAT_NAME", "FORMAT_VERSION",
           "ModuleDoc"]

FORMAT_NAME = "phasec.ir_module"
FORMAT_VERSION = 1
#: About how many levels of JSON nesting a document may have: pydantic's JSON
#: parser stops at 200 (a chain of ~190 nested TIR operations).
MAX_DEPTH = 200

# ---------------------------------------------------------------------------
# Schema (pydantic models)
# ---------------------------------------------------------------------------

Dtype = Literal[tir.DTYPES]  # type: ignore[valid-type]
TensorDtype = Literal[(*tir.DTYPES, "void")]  # type: ignore[valid-type]
NonNegInt = Annotated[int, Field(ge=0)]
Id = Annotated[int, Field(ge=0)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class SpanDoc(_Model):
    """A source location: 1-based line, 0-based column."""

    file: str
    line: int
    col: int
    end_line: Optional[int] = None
    end_col: Optional[int] = None


class _Node(_Model):
    span: Optional[SpanDoc] = None


# -- TIR expressions --------------------------------------------------------

class TirVarRef(_Node):
    """A use of a TIR variable defined in ``tir_vars``."""

    node: Literal["tir.Var"]
    id: Id


class IntImmDoc(_Node):
    node: Literal["tir.IntImm"]
    value: int
    dtype: Dtype = "int64"


class FloatImmDoc(_Node):
    node: Literal["tir.FloatImm"]
    value: Union[float, Literal["nan", "inf", "-inf"]]
    dtype: Dtype = "float32"


class BinaryOpDoc(_Node):
    node: Literal["tir.BinaryOp"]
    op: Literal[(*tir.ARITH_OPS, *tir.COMPARE_OPS, *tir.LOGIC_OPS)]  # type: ignore[valid-type]
    lhs: "PrimExprDoc"
    rhs: "PrimExprDoc"
    dtype: Optional[Dtype] = None


class NotDoc(_Node):
    node: Literal["tir.Not"]
    value: "PrimExprDoc"
    dtype: Optional[Dtype] = None


class CastDoc(_Node):
    node: Literal["tir.Cast"]
    dtype: Dtype
    value: "PrimExprDoc"


class SelectDoc(_Node):
    node: Literal["tir.Select"]
    condition: "PrimExprDoc"
    true_value: "PrimExprDoc"
    false_value: "PrimExprDoc"
    dtype: Optional[Dtype] = None


class TirCallDoc(_Node):
    node: Literal["tir.Call"]
    name: str
    args: list["PrimExprDoc"]
    dtype: Optional[Dtype] = None


class BufferLoadDoc(_Node):
    node: Literal["tir.BufferLoad"]
    buffer: Id
    indices: list["PrimExprDoc"]
    dtype: Optional[Dtype] = None


#: A TIR expression: a bare integer is an int64 ``IntImm``; anything else is an
#: object whose ``node`` names its kind.
PrimExprDoc = Union[
    int,
    Annotated[Union[TirVarRef, IntImmDoc, FloatImmDoc, BinaryOpDoc, NotDoc, CastDoc, SelectDoc,
                    TirCallDoc, BufferLoadDoc], Field(discriminator="node")],
]

# -- TIR statements ---------------------------------------------------------


class BufferStoreDoc(_Node):
    node: Literal["tir.BufferStore"]
    buffer: Id
    value: PrimExprDoc
    indices: list[PrimExprDoc]


class SeqStmtDoc(_Node):
    node: Literal["tir.SeqStmt"]
    stmts: list["StmtDoc"]


class ForDoc(_Node):
    node: Literal["tir.For"]
    loop_var: Id
    min: PrimExprDoc
    extent: PrimExprDoc
    kind: Literal[tir.FOR_KINDS]  # type: ignore[valid-type]
    body: "StmtDoc"


class IfThenElseDoc(_Node):
    node: Literal["tir.IfThenElse"]
    condition: PrimExprDoc
    then_case: "StmtDoc"
    else_case: Optional["StmtDoc"] = None


class AllocateDoc(_Node):
    node: Literal["tir.Allocate"]
    buffer: Id
    body: "StmtDoc"


class LetStmtDoc(_Node):
    node: Literal["tir.LetStmt"]
    var: Id
    value: PrimExprDoc
    body: "StmtDoc"


class EvaluateDoc(_Node):
    node: Literal["tir.Evaluate"]
    value: PrimExprDoc


class IterVarDoc(_Node):
    var: Id
    extent: PrimExprDoc
    kind: Literal["S", "R"] = "S"


class BufferRegionDoc(_Node):
    buffer: Id
    region: list[tuple[PrimExprDoc, PrimExprDoc]]


class BlockDoc(_Node):
    node: Literal["tir.Block"]
    name: str
    iter_vars: list[IterVarDoc] = Field(default_factory=list)
    iter_values: list[PrimExprDoc] = Field(default_factory=list)
    body: "StmtDoc"
    init: Optional["StmtDoc"] = None
    reads: list[BufferRegionDoc] = Field(default_factory=list)
    writes: list[BufferRegionDoc] = Field(default_factory=list)


StmtDoc = Annotated[
    Union[BufferStoreDoc, SeqStmtDoc, ForDoc, IfThenElseDoc, AllocateDoc, LetStmtDoc,
          EvaluateDoc, BlockDoc],
    Field(discriminator="node"),
]


class BufferRef(_Model):
    """A PrimFunc parameter that is a buffer from ``buffers``."""

    node: Literal["tir.Buffer"]
    id: Id


ParamDoc = Annotated[Union[TirVarRef, BufferRef], Field(discriminator="node")]

# -- struct info ------------------------------------------------------------


class ObjectStructInfoDoc(_Node):
    node: Literal["ObjectStructInfo"]


class PrimStructInfoDoc(_Node):
    node: Literal["PrimStructInfo"]
    dtype: Dtype
    value: Optional[PrimExprDoc] = None


class ShapeStructInfoDoc(_Node):
    node: Literal["ShapeStructInfo"]
    values: Optional[list[PrimExprDoc]] = None
    ndim: int = Field(default=-1, ge=-1)


class TensorStructInfoDoc(_Node):
    node: Literal["TensorStructInfo"]
    shape: Optional[list[PrimExprDoc]] = None
    dtype: TensorDtype = "void"
    ndim: int = Field(default=-1, ge=-1)


class TupleStructInfoDoc(_Node):
    node: Literal["TupleStructInfo"]
    fields: list["StructInfoDoc"]


class FuncStructInfoDoc(_Node):
    node: Literal["FuncStructInfo"]
    params: Optional[list["StructInfoDoc"]] = None
    ret: "StructInfoDoc"
    purity: bool = True


#: Struct info: an object whose ``node`` names its kind, or an integer: the
#: index of an entry of the module's ``struct_infos`` table.
StructInfoDoc = Union[
    int,
    Annotated[Union[ObjectStructInfoDoc, PrimStructInfoDoc, ShapeStructInfoDoc,
                    TensorStructInfoDoc, TupleStructInfoDoc, FuncStructInfoDoc],
              Field(discriminator="node")],
]

# -- attribute values -------------------------------------------------------


class AttrList(_Model):
    list: list["AttrValue"]


class AttrDict(_Model):
    dict_: dict[str, "AttrValue"] = Field(alias="dict")


class AttrFloat(_Model):
    float: Literal["nan", "inf", "-inf"]


class AttrPrimExpr(_Model):
    prim_expr: PrimExprDoc


class AttrExpr(_Model):
    expr: "ExprDoc"


class AttrStructInfo(_Model):
    struct_info: StructInfoDoc


_ATTR_OBJECT_TAGS = {"list": "<list>", "dict": "<dict>", "float": "<float-special>",
                     "prim_expr": "<prim_expr>", "expr": "<expr>",
                     "struct_info": "<struct_info>"}


def _attr_tag(v: Any) -> Optional[str]:
    if v is None:
        return "<null>"
    if isinstance(v, bool):
        return "<bool>"
    if isinstance(v, int):
        return "<int>"
    if isinstance(v, float):
        return "<float>"
    if isinstance(v, str):
        return "<str>"
    if isinstance(v, (list, tuple)):
        return "<tuple>"
    if isinstance(v, dict) and len(v) == 1:
        return _ATTR_OBJECT_TAGS.get(next(iter(v)))
    return None


AttrValue = TypeAliasType("AttrValue", Annotated[
    Union[
        Annotated[None, Tag("<null>")],
        Annotated[bool, Tag("<bool>")],
        Annotated[int, Tag("<int>")],
        Annotated[float, Tag("<float>")],
        Annotated[str, Tag("<str>")],
        Annotated[list["AttrValue"], Tag("<tuple>")],
        Annotated[AttrList, Tag("<list>")],
        Annotated[AttrDict, Tag("<dict>")],
        Annotated[AttrFloat, Tag("<float-special>")],
        Annotated[AttrPrimExpr, Tag("<prim_expr>")],
        Annotated[AttrExpr, Tag("<expr>")],
        Annotated[AttrStructInfo, Tag("<struct_info>")],
    ],
    Discriminator(_attr_tag, custom_error_type="invalid_attr_value",
                  custom_error_message="expected null, a boolean, number, string or array, or "
                                       "an object with one key of: list, dict, float, "
                                       "prim_expr, expr, struct_info"),
])

Attrs = dict[str, AttrValue]

# -- Relax expressions ------------------------------------------------------


class ConstantDoc(_Node):
    node: Literal["Constant"]
    dtype: Dtype
    shape: list[NonNegInt]
    data: str = Field(description="base64 of the little-endian C-order array bytes")


class TupleDoc(_Node):
    node: Literal["Tuple"]
    fields: list["ExprDoc"]
    struct_info: Optional[StructInfoDoc] = None


class TupleGetItemDoc(_Node):
    node: Literal["TupleGetItem"]
    tuple_value: "ExprDoc"
    index: int
    struct_info: Optional[StructInfoDoc] = None


class OpDoc(_Node):
    node: Literal["Op"]
    name: str
    struct_info: Optional[StructInfoDoc] = None


class GlobalVarDoc(_Node):
    node: Literal["GlobalVar"]
    name: str
    struct_info: Optional[StructInfoDoc] = None


class ExternFuncDoc(_Node):
    node: Literal["ExternFunc"]
    global_symbol: str
    struct_info: Optional[StructInfoDoc] = None


class ShapeExprDoc(_Node):
    node: Literal["ShapeExpr"]
    values: list[PrimExprDoc]


class PrimValueDoc(_Node):
    node: Literal["PrimValue"]
    value: PrimExprDoc


class StringImmDoc(_Node):
    node: Literal["StringImm"]
    value: str


class DataTypeImmDoc(_Node):
    node: Literal["DataTypeImm"]
    value: str


class CallDoc(_Node):
    """A call; ``op`` given as a string is the registered operator of that name."""

    node: Literal["Call"]
    op: Union[str, "ExprDoc"]
    args: list["ExprDoc"]
    attrs: Attrs = Field(default_factory=dict)
    sinfo_args: list[StructInfoDoc] = Field(default_factory=list)
    struct_info: Optional[StructInfoDoc] = None


class VarBindingDoc(_Node):
    node: Literal["VarBinding"]
    var: Id
    value: "ExprDoc"


class MatchCastDoc(_Node):
    node: Literal["MatchCast"]
    var: Id
    value: "ExprDoc"
    struct_info: StructInfoDoc


BindingDoc = Annotated[Union[VarBindingDoc, MatchCastDoc], Field(discriminator="node")]


class BlockDocR(_Node):
    """A ``BindingBlock`` or (``"node": "DataflowBlock"``) a dataflow block."""

    node: Literal["BindingBlock", "DataflowBlock"]
    bindings: list[BindingDoc]


class SeqExprDoc(_Node):
    node: Literal["SeqExpr"]
    blocks: list[BlockDocR]
    body: "ExprDoc"
    struct_info: Optional[StructInfoDoc] = None


class IfDoc(_Node):
    node: Literal["If"]
    cond: "ExprDoc"
    true_branch: SeqExprDoc
    false_branch: SeqExprDoc
    struct_info: Optional[StructInfoDoc] = None


class FunctionDoc(_Node):
    node: Literal["Function"]
    params: list[Id]
    body: SeqExprDoc
    ret_struct_info: Optional[StructInfoDoc] = None
    is_pure: bool = True
    attrs: Attrs = Field(default_factory=dict)
    struct_info: Optional[StructInfoDoc] = None


#: A Relax expression: an integer is a use of the variable with that id in
#: ``vars``; anything else is an object whose ``node`` names its kind.
ExprDoc = Union[
    int,
    Annotated[Union[ConstantDoc, TupleDoc, TupleGetItemDoc, OpDoc, GlobalVarDoc, ExternFuncDoc,
                    ShapeExprDoc, PrimValueDoc, StringImmDoc, DataTypeImmDoc, CallDoc, IfDoc,
                    SeqExprDoc, FunctionDoc], Field(discriminator="node")],
]


class PrimFuncDoc(_Node):
    node: Literal["PrimFunc"]
    params: list[ParamDoc]
    body: StmtDoc
    attrs: Attrs = Field(default_factory=dict)


FuncDoc = Annotated[Union[FunctionDoc, PrimFuncDoc], Field(discriminator="node")]

# -- tables and module ------------------------------------------------------


class TirVarDef(_Node):
    id: Id
    name: str
    dtype: Dtype = "int64"


class BufferDef(_Node):
    id: Id
    name: str
    shape: list[PrimExprDoc]
    dtype: Dtype = "float32"


class VarDef(_Node):
    id: Id
    name: str
    dataflow: bool = False
    struct_info: Optional[StructInfoDoc] = None


class ModuleDoc(_Model):
    """A whole IRModule."""

    format: Literal["phasec.ir_module"]
    version: Literal[1]
    phase: Optional[Literal[tuple(p.label for p in Phase)]] = None  # type: ignore[valid-type]
    attrs: Attrs = Field(default_factory=dict)
    tir_vars: list[TirVarDef] = Field(default_factory=list)
    buffers: list[BufferDef] = Field(default_factory=list)
    vars: list[VarDef] = Field(default_factory=list)
    struct_infos: list[StructInfoDoc] = Field(default_factory=list)
    functions: dict[str, FuncDoc] = Field(default_factory=dict)
    span: Optional[SpanDoc] = None


for _m in list(globals().values()):
    if isinstance(_m, type) and issubclass(_m, _Model) and _m is not _Model:
        _m.model_rebuild()


def json_schema() -> dict:
    """The JSON Schema of module documents (generated from the pydantic models)."""
    return ModuleDoc.model_json_schema()


# ---------------------------------------------------------------------------
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
        out = self._prim(e)
        self.depth -= 1
        return out

    def stmt(self, s: tir.Stmt) -> dict:
        self._enter()
        out = self._stmt(s)
        self.depth -= 1
        return out

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
            self.buffers.append(_with_span(
                {"id": i, "name": b.name, "shape": shape, "dtype": b.dtype}, b))
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
        elif t is tir.IfThenElse:
            d = {"node": "tir.IfThenElse", "condition": self.prim(s.condition),
                 "then_case": self.stmt(s.then_case)}
            if s.else_case is not None:
                d["else_case"] = self.stmt(s.else_case)
        elif t is tir.Allocate:
            d = {"node": "tir.Allocate", "buffer": self.buffer(s.buffer), "body": self.stmt(s.body)}
        elif t is tir.LetStmt:
            d = {"node": "tir.LetStmt", "var": self.tvar(s.var), "value": self.prim(s.value),
                 "body": self.stmt(s.body)}
        elif t is tir.Evaluate:
            d = {"node": "tir.Evaluate", "value": self.prim(s.value)}
        elif t is tir.Block:
            d = {"node": "tir.Block", "name": s.name,
                 "iter_vars": [_with_span({"var": self.tvar(iv.var), "extent": self.prim(iv.extent),
                                           "kind": iv.kind}, iv) for iv in s.iter_vars],
                 "iter_values": [self.prim(v) for v in s.iter_values],
                 "body": self.stmt(s.body)}
            if s.init is not None:
                d["init"] = self.stmt(s.init)
            d["reads"] = [self.region(r) for r in s.reads]
            d["writes"] = [self.region(r) for r in s.writes]
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
        if isinstance(v, Expr):
            return {"expr": self.expr(v)}
        raise SchemaError(f"{where}: attribute value of type {type(v).__name__} ({v!r}) "
                          f"cannot be written to JSON")

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
        return ("T", s.dtype, s.ndim, shape, s.span)
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


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector.

    Reading and writing allocate millions of small acyclic objects; without
    the pause the collector rescans the growing heap again and again (it
    tripled load time on a 100k-binding module).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def to_json(mod: IRModule, indent: int | None = None) -> str:
    """Serialize ``mod`` to a JSON document (see the module docstring).

    Compact by default; ``indent`` pretty-prints. Deterministic: equal modules
    built the same way give identical text.
    """
    if not isinstance(mod, IRModule):
        raise TypeError(f"to_json expects an IRModule, not {type(mod).__name__}")
    with _gc_paused():
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
    for m in globals().values():
        if isinstance(m, type) and issubclass(m, _Model) and "node" in m.model_fields:
            ann = m.model_fields["node"].annotation
            tags.update(getattr(ann, "__args__", ()))
    return frozenset(tags)


#: Discriminator values pydantic inserts into error locations; they are not
#: part of the document's paths, so messages leave them out.
_TAGS = _collect_tags()
#: Fields holding dictionaries: the next path element is a user key, never a tag.
_DICT_FIELDS = frozenset({"functions", "attrs", "dict"})
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
    pairs = _clean_errors(errors)
    lines = [f"{path}: {msg}" for path, msg in pairs]
    shown = lines[:20]
    more = f"\n  ... and {len(lines) - 20} more" if len(lines) > 20 else ""
    err = SchemaError("invalid module JSON:\n  " + "\n  ".join(shown) + more)
    err.errors = pairs  # type: ignore[attr-defined]
    return err


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

    def __init__(self) -> None:
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
            self.buffers[d.id] = tir.Buffer(d.name, shape, d.dtype, span=_mk_span(d.span))
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
        if t is TirCallDoc:
            if not m.args and not m.dtype:
                raise _LoadError((p, "dtype"), "a tir.Call without arguments needs a dtype")
            args = tuple(self.prim(a, ((p, "args"), i)) for i, a in enumerate(m.args))
            return tir.Call(m.name, args, m.dtype or "", span=span)
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
            return tir.SeqStmt([self.stmt(s, ((p, "stmts"), i)) for i, s in enumerate(m.stmts)],
                               span=span)
        if t is ForDoc:
            var = self._ref(self.tir_vars, m.loop_var, "tir var", (p, "loop_var"))
            return tir.For(var, self.prim(m.min, (p, "min")), self.prim(m.extent, (p, "extent")),
                           m.kind, self.stmt(m.body, (p, "body")), span=span)
        if t is IfThenElseDoc:
            other = None if m.else_case is None else self.stmt(m.else_case, (p, "else_case"))
            return tir.IfThenElse(self.prim(m.condition, (p, "condition")),
                                  self.stmt(m.then_case, (p, "then_case")), other, span=span)
        if t is AllocateDoc:
            buf = self._ref(self.buffers, m.buffer, "buffer", (p, "buffer"))
            return tir.Allocate(buf, self.stmt(m.body, (p, "body")), span=span)
        if t is LetStmtDoc:
            var = self._ref(self.tir_vars, m.var, "tir var", (p, "var"))
            return tir.LetStmt(var, self.prim(m.value, (p, "value")), self.stmt(m.body, (p, "body")),
                               span=span)
        if t is EvaluateDoc:
            return tir.Evaluate(self.prim(m.value, (p, "value")), span=span)
        if t is BlockDoc:
            if len(m.iter_vars) != len(m.iter_values):
                raise _LoadError((p, "iter_values"), f"a block needs one binding per axis: "
                                 f"{len(m.iter_vars)} axes, {len(m.iter_values)} values")
            ivs = []
            for i, iv in enumerate(m.iter_vars):
                q = ((p, "iter_vars"), i)
                ivs.append(tir.IterVar(self._ref(self.tir_vars, iv.var, "tir var", (q, "var")),
                                       self.prim(iv.extent, (q, "extent")), iv.kind,
                                       span=_mk_span(iv.span)))
            values = [self.prim(v, ((p, "iter_values"), i)) for i, v in enumerate(m.iter_values)]
            init = None if m.init is None else self.stmt(m.init, (p, "init"))
            return tir.Block(m.name, ivs, values, self.stmt(m.body, (p, "body")), init,
                             [self.region(r, ((p, "reads"), i)) for i, r in enumerate(m.reads)],
                             [self.region(r, ((p, "writes"), i)) for i, r in enumerate(m.writes)],
                             span=span)
        raise _LoadError(p, f"unexpected {t.__name__}")  # pragma: no cover

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
                            self.attrs(m.attrs, (p, "attrs")), span=_mk_span(m.span))

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
            if m.shape is None:
                return TensorStructInfo(None, m.dtype, m.ndim, span=span)
            if m.ndim not in (-1, len(m.shape)):
                raise _LoadError((p, "ndim"), f"ndim {m.ndim} does not match the shape's "
                                 f"{len(m.shape)} dimensions")
            return TensorStructInfo(self.dims(m.shape, (p, "shape")), m.dtype, span=span)
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
        raise _LoadError(p, f"unexpected attribute value {v!r}")  # pragma: no cover

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
    with _gc_paused():
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
    try:
        doc = ModuleDoc.model_validate_json(text)
    except ValidationError as exc:
        raise _schema_error(exc) from None
    reader = _Reader()
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
    return IRModule(functions, attrs, span=_mk_span(doc.span))

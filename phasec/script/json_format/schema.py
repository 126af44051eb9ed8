"""The JSON module format's schema: pydantic models, one per node kind."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag
from typing_extensions import TypeAliasType

from phasec.ir import tir
from phasec.ir.phase import Phase

__all__ = ["json_schema", "FORMAT_NAME", "FORMAT_VERSION", "READABLE_VERSIONS", "MAX_DEPTH",
           "MAX_VALUES", "ModuleDoc"]

FORMAT_NAME = "phasec.ir_module"
#: 2: chains of nested TIR scopes (lets, else-ifs...) and of selects written flat
#: (``tir.Nest``, ``tir.SelectChain``); version 1 documents (which never have
#: them) still read.
FORMAT_VERSION = 2
#: the versions :func:`from_json` reads
READABLE_VERSIONS = (1, 2)
#: About how many levels of JSON nesting a document may have: pydantic's JSON
#: parser stops at 200 (a chain of ~190 nested TIR operations).
MAX_DEPTH = 200
#: The most JSON values (objects, arrays, their items) a document may hold,
#: counted before it is parsed: a module takes ~6 bytes of text and ~90 bytes
#: of memory per value (a 100k-binding function a few million values), so
#: a document padded with empty objects cannot take more than ~1.5 GB.
MAX_VALUES = 16_000_000

# ---------------------------------------------------------------------------
# Schema (pydantic models)
# ---------------------------------------------------------------------------

Dtype = Literal[tir.DTYPES]  # type: ignore[valid-type]
#: a TIR dtype or "handle" (TVM's opaque pointers, operands of host calls)
HandleDtype = Literal[(*tir.DTYPES, "handle")]  # type: ignore[valid-type]
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
    #: "handle": TVM's host builtins (tvm_stack_make_array...), kept opaque
    dtype: Optional[HandleDtype] = None


class TirStringImmDoc(_Node):
    """A string operand of a host call (``T.call_packed("f", ...)``)."""

    node: Literal["tir.StringImm"]
    value: str


class BufferDataDoc(_Node):
    """``buf.data``, an operand of a host call."""

    node: Literal["tir.BufferData"]
    buffer: Id


class BufferLoadDoc(_Node):
    node: Literal["tir.BufferLoad"]
    buffer: Id
    indices: list["PrimExprDoc"]
    dtype: Optional[Dtype] = None


class SelectCaseDoc(_Node):
    """One ``condition ? true_value :`` of a :class:`SelectChainDoc`."""

    condition: "PrimExprDoc"
    true_value: "PrimExprDoc"
    dtype: Optional[Dtype] = None


class SelectChainDoc(_Node):
    """Selects nested in their ``false_value`` (an else-if chain; ``stack`` of
    many tensors legalizes to one), written flat so that the chain's length
    does not nest the document: ``Select(c0, t0, Select(c1, t1, f))`` is
    ``{"cases": [{c0, t0}, {c1, t1}], "false_value": f}``."""

    node: Literal["tir.SelectChain"]
    cases: list[SelectCaseDoc] = Field(min_length=1)
    false_value: "PrimExprDoc"


#: A TIR expression: a bare integer is an int64 ``IntImm``; anything else is an
#: object whose ``node`` names its kind.
PrimExprDoc = Union[
    int,
    Annotated[Union[TirVarRef, IntImmDoc, FloatImmDoc, BinaryOpDoc, NotDoc, CastDoc, SelectDoc,
                    SelectChainDoc, TirCallDoc, BufferLoadDoc, TirStringImmDoc, BufferDataDoc],
              Field(discriminator="node")],
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
    #: the thread axis of a thread_binding loop ("threadIdx.x"...)
    thread: Optional[str] = None


class IfThenElseDoc(_Node):
    node: Literal["tir.IfThenElse"]
    condition: PrimExprDoc
    then_case: "StmtDoc"
    else_case: Optional["StmtDoc"] = None


class AllocateDoc(_Node):
    node: Literal["tir.Allocate"]
    buffer: Id
    body: "StmtDoc"


class WhileDoc(_Node):
    node: Literal["tir.While"]
    condition: PrimExprDoc
    body: "StmtDoc"


class LetStmtDoc(_Node):
    node: Literal["tir.LetStmt"]
    var: Id
    value: PrimExprDoc
    body: "StmtDoc"


class AttrStmtDoc(_Node):
    node: Literal["tir.AttrStmt"]
    key: str
    value: "AttrValue"
    body: "StmtDoc"


class EvaluateDoc(_Node):
    node: Literal["tir.Evaluate"]
    value: PrimExprDoc


class IterVarDoc(_Node):
    var: Id
    extent: PrimExprDoc
    kind: Literal["S", "R"] = "S"
    #: where the domain starts (absent: 0), as TVM's ``(begin, end)`` domains
    min: PrimExprDoc | None = None


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
    annotations: "Attrs" = Field(default_factory=dict)


# A scope of a tir.Nest: a statement without the part the chain continues in.

class LetScopeDoc(_Node):
    """``LetStmt(var, value, <rest>)``."""

    node: Literal["tir.LetStmt"]
    var: Id
    value: PrimExprDoc


class SeqScopeDoc(_Node):
    """``SeqStmt([*stmts, <rest>])``."""

    node: Literal["tir.SeqStmt"]
    stmts: list["StmtDoc"] = Field(min_length=1)


class AllocateScopeDoc(_Node):
    """``Allocate(buffer, <rest>)``."""

    node: Literal["tir.Allocate"]
    buffer: Id


class AttrScopeDoc(_Node):
    """``AttrStmt(key, value, <rest>)``."""

    node: Literal["tir.AttrStmt"]
    key: str
    value: "AttrValue"


class ElseIfScopeDoc(_Node):
    """``IfThenElse(condition, then_case, <rest>)``: the rest is the else case."""

    node: Literal["tir.IfThenElse"]
    condition: PrimExprDoc
    then_case: "StmtDoc"


ScopeDoc = Annotated[
    Union[LetScopeDoc, SeqScopeDoc, AllocateScopeDoc, AttrScopeDoc, ElseIfScopeDoc],
    Field(discriminator="node"),
]


class NestDoc(_Node):
    """Statements each continuing in the next (a chain of lets, the statements
    after a let, buffer allocations, attributes, else-ifs), written flat so
    that the chain's length does not nest the document: ``scopes[0]`` holds
    ``scopes[1]``, ... the last holds ``body``. phasec's legalization of bicubic
    grid_sample is a chain of ~250 lets."""

    node: Literal["tir.Nest"]
    scopes: list[ScopeDoc] = Field(min_length=1)
    body: "StmtDoc"


StmtDoc = Annotated[
    Union[BufferStoreDoc, SeqStmtDoc, ForDoc, IfThenElseDoc, AllocateDoc, LetStmtDoc,
          AttrStmtDoc, EvaluateDoc, BlockDoc, NestDoc, WhileDoc],
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
    #: the virtual device, "<kind>:<index>:<memory scope>" (an entry of the
    #: module's global_infos.vdevice)
    vdevice: Optional[str] = None


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


class AttrBuffer(_Model):
    """A TIR buffer (by id) as an attribute value: TVM's block annotations
    name buffers (``{"layout_free_placeholders": [T_reshape_1]}``)."""

    buffer: Id


class AttrTarget(_Model):
    """A compilation target as TVM writes it (``T.target(...)``, the
    ``"target"`` attribute TVM's LegalizeOps sets on PrimFuncs): the target
    string or configuration dictionary as written."""

    target: "AttrValue"


class AttrVDevice(_Model):
    """A virtual device as an attribute value (``I.vdevice(...)``, the
    ``dst_vdevice`` of ``vm.builtin.to_device`` in TVM's later stages)."""

    vdevice: "VDeviceDoc"


_ATTR_OBJECT_TAGS = {"list": "<list>", "dict": "<dict>", "float": "<float-special>",
                     "prim_expr": "<prim_expr>", "expr": "<expr>",
                     "struct_info": "<struct_info>", "buffer": "<buffer>",
                     "target": "<target>", "vdevice": "<vdevice>"}


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
        Annotated[AttrBuffer, Tag("<buffer>")],
        Annotated[AttrTarget, Tag("<target>")],
        Annotated[AttrVDevice, Tag("<vdevice>")],
    ],
    Discriminator(_attr_tag, custom_error_type="invalid_attr_value",
                  custom_error_message="expected null, a boolean, number, string or array, or "
                                       "an object with one key of: list, dict, float, "
                                       "prim_expr, expr, struct_info, buffer, target, "
                                       "vdevice"),
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
    #: the dtype of the scalar the function returns (None: a kernel)
    ret_dtype: Optional[Dtype] = None


FuncDoc = Annotated[Union[FunctionDoc, PrimFuncDoc], Field(discriminator="node")]

# -- tables and module ------------------------------------------------------


class TirVarDef(_Node):
    id: Id
    name: str
    #: "handle": a T.handle parameter without T.match_buffer (host calls take it)
    dtype: HandleDtype = "int64"


class BufferDef(_Node):
    id: Id
    name: str
    shape: list[PrimExprDoc]
    dtype: Dtype = "float32"
    #: the storage scope ("global", "shared", "local"...)
    scope: str = "global"


class VarDef(_Node):
    id: Id
    name: str
    dataflow: bool = False
    struct_info: Optional[StructInfoDoc] = None


class VDeviceDoc(_Node):
    """A virtual device (TVM's ``I.vdevice``): the target as written (a
    target string or a configuration dictionary, an attribute value)."""

    target: AttrValue
    vdevice_id: NonNegInt = 0
    memory_scope: str = "global"


class GlobalInfosDoc(_Model):
    """The module's global infos (TVM's ``I.module_global_infos``)."""

    vdevice: list[VDeviceDoc] = Field(default_factory=list)
    #: other keys holding only TVM's placeholder I.dummy_global_info(): key -> how many
    dummy: dict[str, NonNegInt] = Field(default_factory=dict)


class ModuleDoc(_Model):
    """A whole IRModule."""

    format: Literal["phasec.ir_module"]
    version: Literal[READABLE_VERSIONS]  # type: ignore[valid-type]
    phase: Optional[Literal[tuple(p.label for p in Phase)]] = None  # type: ignore[valid-type]
    attrs: Attrs = Field(default_factory=dict)
    tir_vars: list[TirVarDef] = Field(default_factory=list)
    buffers: list[BufferDef] = Field(default_factory=list)
    vars: list[VarDef] = Field(default_factory=list)
    struct_infos: list[StructInfoDoc] = Field(default_factory=list)
    functions: dict[str, FuncDoc] = Field(default_factory=dict)
    global_infos: Optional[GlobalInfosDoc] = None
    span: Optional[SpanDoc] = None


for _m in list(globals().values()):
    if isinstance(_m, type) and issubclass(_m, _Model) and _m is not _Model:
        _m.model_rebuild()


def json_schema() -> dict:
    """The JSON Schema of module documents (generated from the pydantic models).

    Unions that pydantic tells apart with a Python function (attribute
    values) come out of pydantic as ``oneOf``; their alternatives overlap in
    JSON Schema (an integer is also a ``number``), so a validator would
    reject every integer attribute as "valid under each of" them. They are
    emitted as ``anyOf``.

    The unions tagged by a ``node`` field dispatch on it: ``node`` must be
    one of the tags, and ``if`` it is tag T ``then`` the document must match
    T's definition. As a ``oneOf``, a validator would check a node against
    every alternative, and every alternative's children against every
    alternative again: exponential in the nesting depth (a legalized kernel
    took minutes with ``jsonschema``); dispatching is linear. pydantic's
    ``discriminator`` annotation (OpenAPI) is kept for tools that read it.
    """
    return _dispatch_unions(ModuleDoc.model_json_schema())


def _dispatch_unions(schema: Any) -> Any:
    stack = [schema]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "oneOf" in item and "discriminator" not in item:
                item["anyOf"] = item.pop("oneOf")
            elif "oneOf" in item:
                tag = item["discriminator"]["propertyName"]
                mapping = item["discriminator"]["mapping"]
                del item["oneOf"]
                item["type"] = "object"
                item["required"] = [tag]
                item["properties"] = {tag: {"enum": sorted(mapping)}}
                item["allOf"] = [{"if": {"properties": {tag: {"const": value}}},
                                  "then": {"$ref": ref}} for value, ref in sorted(mapping.items())]
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return schema


# ---------------------------------------------------------------------------

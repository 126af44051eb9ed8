"""Relax-level expressions, bindings and functions (names follow ``tvm.relax``).

Every expression has ``struct_info`` (None until inferred) and ``span``.
For a ``Var`` the struct info is part of its identity and compared
structurally; for every other expression it is derived from its operands
(by :mod:`phasec.op.infer` / the block builder) and not compared.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Union

import numpy as np

from phasec.ir.node import Node, Span, node, set_field
from phasec.ir.struct_info import (
    FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
    TensorStructInfo, TupleStructInfo,
)
from phasec.ir.tir import PrimExpr, PrimFunc, as_prim_expr, frozen_attrs

__all__ = [
    "Expr", "Var", "DataflowVar", "Constant", "Tuple", "TupleGetItem", "Op",
    "GlobalVar", "ExternFunc", "ShapeExpr", "PrimValue", "StringImm", "DataTypeImm",
    "Call", "If", "SeqExpr", "Function", "Binding", "VarBinding", "MatchCast",
    "BindingBlock", "DataflowBlock", "BaseFunc", "LEAF_EXPRS", "is_splat",
]


@node(derived=("struct_info",))
class Expr(Node):
    """A Relax expression."""


@node(structural=("struct_info",))
class Var(Expr):
    """A Relax variable. Two Vars are the same variable iff they are the same object."""

    name_hint: str
    struct_info: StructInfo | None = None
    span: Span | None = None


@node(structural=("struct_info",))
class DataflowVar(Var):
    """A variable local to a dataflow block (``lv`` in TVMScript)."""


#: Byte alignment of the data of constants (a cache line; the widest vector
#: register, 512 bits, too).
CONSTANT_ALIGNMENT = 64


def _aligned_copy(data: Any) -> np.ndarray:
    """A C-ordered copy of ``data`` whose first byte is on a
    :data:`CONSTANT_ALIGNMENT` boundary (object and empty arrays: a plain copy).

    Kernels stream constant weights with full-width vector loads; numpy
    allocates on 16-byte boundaries only, and a 64-byte load that straddles
    two cache lines costs two (1x1024 @ 1024x1024 + bias on one core: 63 /
    60 us with the matrix 16 / 32 bytes off a line, 58 us aligned). The
    copy replaces the one a constant always made, so it costs nothing more.
    """
    src = np.asarray(data)
    if src.dtype.hasobject or src.nbytes == 0:
        return np.array(src, copy=True, order="C")
    out = aligned_empty(src.shape, src.dtype)
    np.copyto(out, src, casting="no")
    return out


#: a huge page of x86-64 Linux (bytes)
HUGE_PAGE = 2 << 20
#: constants of at least this many bytes start on a :data:`HUGE_PAGE`
#: boundary and their allocation ends on one
HUGE_PAGE_MIN_BYTES = HUGE_PAGE


def aligned_empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialized C-ordered array starting on a :data:`CONSTANT_ALIGNMENT`
    boundary (not of object dtype, not empty).

    One of :data:`HUGE_PAGE` bytes or more lies in whole huge pages of its
    allocation: its start and the allocation's end on such a boundary.
    NumPy asks Linux for transparent huge pages (``madvise``) for allocations
    of 4 MB and more, which back only the whole 2 MB pages inside them: at a
    start 16 bytes past a page, MobileNetV2's 5 MB classifier weight had 1 or
    2 of its 2.4 huge pages, and each of the TLB misses of the other 4 KB
    pages a call cost its stream (one core, in the model: 196 us mean with
    41% of the weight in huge pages, 174 us with 82%)."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    align, size = aligned_layout(nbytes, CONSTANT_ALIGNMENT)
    raw = np.empty(size, np.uint8)
    skew = -raw.__array_interface__["data"][0] % align
    return raw[skew:skew + nbytes].view(dtype).reshape(shape)


def aligned_layout(nbytes: int, alignment: int) -> tuple[int, int]:
    """(alignment, bytes to allocate) for ``nbytes`` bytes that must start on
    an ``alignment`` boundary: a :data:`HUGE_PAGE` boundary from
    :data:`HUGE_PAGE_MIN_BYTES` on, the allocation then rounded up so that
    the last huge page lies whole inside it (see :func:`aligned_empty`)."""
    if nbytes >= HUGE_PAGE_MIN_BYTES:
        return HUGE_PAGE, -(-nbytes // HUGE_PAGE) * HUGE_PAGE + HUGE_PAGE
    return alignment, nbytes + alignment


def _is_splat_view(data: Any) -> bool:
    """A numpy array of more than one element whose strides are all 0 (one
    element seen everywhere: ``np.broadcast_to(x, shape)`` of a scalar)."""
    return (type(data) is np.ndarray and data.size > 1 and not any(data.strides)
            and data.dtype.isnative and not data.dtype.hasobject)


def is_splat(arr: np.ndarray) -> bool:
    """Whether every element of ``arr`` has the same bits (NaNs of one
    payload are equal, ``0.0`` and ``-0.0`` are not); False when empty or of
    object dtype."""
    if arr.size == 0 or arr.dtype.hasobject:
        return False
    if arr.size == 1 or not any(arr.strides):  # one element, or one seen everywhere
        return True
    flat = arr.reshape(-1)
    if arr.dtype.itemsize in (1, 2, 4, 8) and arr.dtype.kind not in "US":
        flat = flat.view(f"u{arr.dtype.itemsize}")  # bitwise: NaN == NaN, -0.0 != 0.0
        # a few samples first: a real weight fails here without a full scan
        if flat[-1] != flat[0] or flat[flat.size // 2] != flat[0]:
            return False
        return bool((flat == flat[0]).all())
    return bool((flat == flat[0]).all()) and not (arr.dtype.kind in "fc"
                                                  and bool(np.isnan(flat[0])))


@node
class Constant(Expr):
    """A constant tensor backed by a read-only numpy array."""

    data: np.ndarray
    struct_info: StructInfo | None = None
    span: Span | None = None

    def __post_init__(self) -> None:
        if _is_splat_view(self.data):
            # a broadcast of one element (FoldConstant's splats): kept as the
            # view, so that a 9 MB splat weight costs its element; the VM's
            # constant pool materializes it once, contiguous and aligned
            arr = self.data
            arr.setflags(write=False)
            set_field(self, "struct_info", TensorStructInfo(arr.shape, str(arr.dtype)))
            return
        # C order: kernels and the VM take row-major buffers (a folded
        # reference result may be a transposed view)
        arr = _aligned_copy(self.data)
        if not arr.dtype.isnative:  # dtype strings name native byte order ("int32", not ">i4")
            arr = _aligned_copy(arr.astype(arr.dtype.newbyteorder("=")))
        arr.setflags(write=False)
        set_field(self, "data", arr)
        set_field(self, "struct_info", TensorStructInfo(arr.shape, str(arr.dtype)))


@node
class Tuple(Expr):
    fields: tuple[Expr, ...]
    struct_info: StructInfo | None = None
    span: Span | None = None

    def __post_init__(self) -> None:
        set_field(self, "fields", tuple(self.fields))
        if self.struct_info is None and all(f.struct_info is not None for f in self.fields):
            set_field(self, "struct_info", TupleStructInfo([f.struct_info for f in self.fields]))


@node
class TupleGetItem(Expr):
    tuple_value: Expr
    index: int
    struct_info: StructInfo | None = None
    span: Span | None = None

    def __post_init__(self) -> None:
        sinfo = self.tuple_value.struct_info
        if (self.struct_info is None and isinstance(sinfo, TupleStructInfo)
                and 0 <= self.index < len(sinfo.fields)):
            set_field(self, "struct_info", sinfo.fields[self.index])


@node
class Op(Expr):
    """A reference to a registered operator, by name (``relax.add``...).

    Use :func:`phasec.op.get_op` for its definition.
    """

    name: str
    struct_info: StructInfo | None = None
    span: Span | None = None


@node
class GlobalVar(Expr):
    """The name of a module-level function; compared by name."""

    name_hint: str
    struct_info: StructInfo | None = None
    span: Span | None = None


@node
class ExternFunc(Expr):
    """A packed function looked up by name at run time."""

    global_symbol: str
    struct_info: StructInfo | None = None
    span: Span | None = None

    def __post_init__(self) -> None:
        if self.struct_info is None:
            set_field(self, "struct_info", ObjectStructInfo())


@node
class ShapeExpr(Expr):
    """A shape value ``R.shape([n, 4])``."""

    values: tuple[PrimExpr, ...]
    struct_info: StructInfo | None = None
    span: Span | None = None

    def __post_init__(self) -> None:
        vals = tuple(as_prim_expr(v) for v in self.values)
        set_field(self, "values", vals)
        set_field(self, "struct_info", ShapeStructInfo(vals))


@node
class PrimValue(Expr):
    """A scalar ``R.prim_value(3)``."""

    value: PrimExpr
    struct_info: StructInfo | None = None
    span: Span | None = None

    def __post_init__(self) -> None:
        set_field(self, "value", as_prim_expr(self.value))
        set_field(self, "struct_info", PrimStructInfo(self.value.dtype, self.value))


@node
class StringImm(Expr):
    value: str
    struct_info: StructInfo | None = None
    span: Span | None = None

    def __post_init__(self) -> None:
        set_field(self, "struct_info", ObjectStructInfo())


@node
class DataTypeImm(Expr):
    value: str
    struct_info: StructInfo | None = None
    span: Span | None = None

    def __post_init__(self) -> None:
        set_field(self, "struct_info", ObjectStructInfo())


@node
class Call(Expr):
    """``op(args, **attrs)``: op is an Op, a GlobalVar, a Var or an ExternFunc.

    ``sinfo_args`` are explicit struct-info arguments (``out_sinfo=`` of
    call_tir, ``sinfo_args=`` of call_packed).
    """

    op: Expr
    args: tuple[Expr, ...]
    attrs: Mapping[str, Any] | None = None
    sinfo_args: tuple[StructInfo, ...] = ()
    struct_info: StructInfo | None = None
    span: Span | None = None

    def __post_init__(self) -> None:
        set_field(self, "args", tuple(self.args))
        set_field(self, "attrs", frozen_attrs(self.attrs))
        set_field(self, "sinfo_args", tuple(self.sinfo_args))


@node
class Binding(Node):
    """Base of VarBinding and MatchCast."""

    def rebind(self, value: Expr, var: Var | None = None) -> "Binding":
        """This binding with another ``value`` (and ``var``, if given): the
        same kind, span and, for a MatchCast, struct info; ``self`` when
        nothing changes."""
        # (``var``, ``value`` and ``span`` are fields of both subclasses.)
        var = self.var if var is None else var
        if value is self.value and var is self.var:
            return self
        if type(self) is MatchCast:
            return MatchCast(var, value, self.struct_info, span=self.span)
        return VarBinding(var, value, span=self.span)


@node
class VarBinding(Binding):
    """``var = value``."""

    var: Var
    value: Expr
    span: Span | None = None


@node
class MatchCast(Binding):
    """``var = R.match_cast(value, struct_info)``: checked at run time."""

    var: Var
    value: Expr
    struct_info: StructInfo
    span: Span | None = None


@node
class BindingBlock(Node):
    bindings: tuple[Binding, ...]
    span: Span | None = None

    def __post_init__(self) -> None:
        set_field(self, "bindings", tuple(self.bindings))


@node
class DataflowBlock(BindingBlock):
    """``with R.dataflow():`` — pure bindings, DataflowVars local to the block."""


@node
class SeqExpr(Expr):
    """Binding blocks followed by a result expression (a function/branch body)."""

    blocks: tuple[BindingBlock, ...]
    body: Expr
    struct_info: StructInfo | None = None
    span: Span | None = None

    def __post_init__(self) -> None:
        set_field(self, "blocks", tuple(self.blocks))
        if self.struct_info is None:
            set_field(self, "struct_info", self.body.struct_info)


@node
class If(Expr):
    cond: Expr
    true_branch: SeqExpr
    false_branch: SeqExpr
    struct_info: StructInfo | None = None
    span: Span | None = None


@node
class Function(Expr):
    """A Relax function. ``attrs`` holds e.g. ``global_symbol``, ``Codegen``,
    ``Primitive``, ``relax.force_pure``."""

    params: tuple[Var, ...]
    body: SeqExpr
    ret_struct_info: StructInfo | None = None
    is_pure: bool = True
    attrs: Mapping[str, Any] | None = None
    struct_info: StructInfo | None = None
    span: Span | None = None

    def __post_init__(self) -> None:
        set_field(self, "params", tuple(self.params))
        set_field(self, "attrs", frozen_attrs(self.attrs))
        ret = self.ret_struct_info
        if ret is None:
            ret = self.body.struct_info
            set_field(self, "ret_struct_info", ret)
        if self.struct_info is None and ret is not None and all(
                p.struct_info is not None for p in self.params):
            set_field(self, "struct_info", FuncStructInfo(
                [p.struct_info for p in self.params], ret, self.is_pure))

    def with_attr(self, key: str, value: Any) -> "Function":
        return Function(self.params, self.body, self.ret_struct_info, self.is_pure,
                        {**self.attrs, key: value}, span=self.span)

    def without_attr(self, key: str) -> "Function":
        attrs = {k: v for k, v in self.attrs.items() if k != key}
        return Function(self.params, self.body, self.ret_struct_info, self.is_pure,
                        attrs, span=self.span)


BaseFunc = Union[Function, PrimFunc]

#: Expressions that may appear as call arguments in A-normal form.
LEAF_EXPRS = (Var, Constant, ShapeExpr, PrimValue, StringImm, DataTypeImm,
              GlobalVar, ExternFunc, Op)

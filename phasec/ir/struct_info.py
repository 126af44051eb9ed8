"""Struct info: the static type-and-shape information of Relax values.

Mirrors TVM's ``relax.StructInfo`` family. Shapes are tuples of TIR
``PrimExpr`` so a dimension can be symbolic (``n``), and ``ndim=-1`` / a
``None`` shape mean "unknown".
"""

from __future__ import annotations

from phasec.ir.node import Node, Span, node, set_field
from phasec.ir.tir import PrimExpr, as_prim_expr

__all__ = [
    "StructInfo", "ObjectStructInfo", "PrimStructInfo", "ShapeStructInfo",
    "TensorStructInfo", "TupleStructInfo", "FuncStructInfo",
]


@node
class StructInfo(Node):
    """Base of all struct info."""


@node
class ObjectStructInfo(StructInfo):
    """Any value (``R.Object``)."""

    span: Span | None = None


@node
class PrimStructInfo(StructInfo):
    """A scalar (``R.Prim("int64")``), optionally with a known value."""

    dtype: str
    value: PrimExpr | None = None
    span: Span | None = None


@node
class ShapeStructInfo(StructInfo):
    """A shape value (``R.Shape([n, 4])`` or ``R.Shape(ndim=2)``)."""

    values: tuple[PrimExpr, ...] | None = None
    ndim: int = -1
    span: Span | None = None

    def __post_init__(self) -> None:
        if self.values is not None:
            set_field(self, "values", tuple(as_prim_expr(v) for v in self.values))
            set_field(self, "ndim", len(self.values))


@node
class TensorStructInfo(StructInfo):
    """A tensor: ``R.Tensor((n, 4), "float32")``; dtype "void" means unknown.

    ``vdevice`` names the virtual device the tensor lives on, as TVM prints it:
    ``"<target kind>:<index among the module's vdevices of that kind>:<memory
    scope>"`` (e.g. ``"llvm:0:global"``), an entry of the module's
    ``global_infos["vdevice"]``; None means unspecified. It takes part in
    structural equality (as in TVM). An operator's tensor results live on
    the virtual device its tensor operands name (when they name one), as
    TVM 0.27 infers; binary operators on two different ones are an error.
    """

    shape: tuple[PrimExpr, ...] | None = None
    dtype: str = "void"
    ndim: int = -1
    span: Span | None = None
    vdevice: str | None = None

    def __post_init__(self) -> None:
        if self.shape is not None:
            set_field(self, "shape", tuple(as_prim_expr(v) for v in self.shape))
            set_field(self, "ndim", len(self.shape))


@node
class TupleStructInfo(StructInfo):
    fields: tuple[StructInfo, ...]
    span: Span | None = None

    def __post_init__(self) -> None:
        set_field(self, "fields", tuple(self.fields))


@node
class FuncStructInfo(StructInfo):
    """A callable. ``params`` None means opaque (``R.Callable()``)."""

    params: tuple[StructInfo, ...] | None
    ret: StructInfo
    purity: bool = True
    span: Span | None = None

    def __post_init__(self) -> None:
        if self.params is not None:
            set_field(self, "params", tuple(self.params))

"""What an operator's legalization hands the schedule table: the operands
and attributes of one convolution or pooling, their layouts already read.

A layout is the operator family's object (:mod:`phasec.op._layout`); the
schedules use it only through :class:`LayoutIndex`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from phasec import arith
from phasec.ir.tir import PrimExpr
from phasec.target import tuning
from phasec.te.tensor import Tensor, View

__all__ = ["LayoutIndex", "CanonicalLayout", "SwappedSpatial", "ConvWorkload",
           "ConvTransposeWorkload", "PoolWorkload", "constant_tensors", "is_constant_tensor"]

#: the names of the placeholders of the kernel being built whose values are
#: constants of the module (None: outside a kernel's construction)
_CONSTANTS: ContextVar[set[str] | None] = ContextVar("phasec_constant_tensors", default=None)


@contextmanager
def constant_tensors(names: Iterable[str]) -> Iterator[set[str]]:
    """While one kernel's TE graph is built: ``names`` are its placeholders
    whose values are constants of the module (weights), which
    PackConstantWeights can transform once per build, so a schedule's
    estimate of its per-call cost leaves their transforms out. The set
    yielded takes the names of constants met on the way."""
    known = set(names)
    token = _CONSTANTS.set(known)
    try:
        yield known
    finally:
        _CONSTANTS.reset(token)


def is_constant_tensor(t: Tensor) -> bool:
    """Whether ``t`` is a placeholder :func:`constant_tensors` declared a
    constant, or a view of one (anything else, a computed tensor too, is
    read per call)."""
    while isinstance(t, View):
        t = t.source
    known = _CONSTANTS.get()
    return known is not None and t.is_placeholder and t.name in known


class LayoutIndex(Protocol):
    """A data layout as the schedules use it: its name, and indices mapped
    between the layout and its canonical order (``NC`` + spatial, ``OI`` +
    spatial)."""

    name: str

    def to_canonical(self, dims: Sequence[Any]) -> list[Any]: ...

    def index_from_canonical(self, idx: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]: ...

    def index_to_canonical(self, idx: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]: ...


class CanonicalLayout:
    """A layout in its canonical order (``NCHW``, ``OIHW``...): what a
    schedule gives the intermediate tensors it makes."""

    def __init__(self, name: str) -> None:
        self.name = name

    def to_canonical(self, dims: Sequence[Any]) -> list[Any]:
        return list(dims)

    def index_from_canonical(self, idx: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]:
        return tuple(idx)

    def index_to_canonical(self, idx: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]:
        return tuple(idx)


class SwappedSpatial:
    """A 2-D layout read with its two spatial axes swapped: the same tensor
    seen as its transpose in H and W, without moving anything (an ``N x 1``
    image seen as ``1 x N``)."""

    def __init__(self, layout: LayoutIndex) -> None:
        self.layout = layout
        self.name = layout.name.translate(str.maketrans("HW", "WH"))

    def to_canonical(self, dims: Sequence[Any]) -> list[Any]:
        a, b, h, w = self.layout.to_canonical(dims)
        return [a, b, w, h]

    def index_from_canonical(self, idx: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]:
        a, b, h, w = idx
        return tuple(self.layout.index_from_canonical((a, b, w, h)))

    def index_to_canonical(self, idx: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]:
        a, b, h, w = self.layout.index_to_canonical(idx)
        return (a, b, w, h)


@dataclass(frozen=True)
class ConvWorkload:
    """A convolution over ``rank`` spatial dimensions (``nn.conv{1,2,3}d``):
    ``padding`` holds the ``rank`` leading pads, then the trailing ones."""

    data: Tensor
    weight: Tensor
    out_shape: Sequence[PrimExpr]
    #: the output's dtype
    dtype: str
    rank: int
    strides: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int
    data_layout: LayoutIndex
    kernel_layout: LayoutIndex
    out_layout: LayoutIndex

    @property
    def lanes(self) -> int:
        """Elements of the output dtype (float32 or float64) in one of the host's vectors."""
        return tuning.host_tuning().lanes(64 if self.dtype == "float64" else 32)

    @property
    def weight_is_constant(self) -> bool:
        """Whether the weight is a constant of the module (transformed once
        per build), not a parameter transformed on every call."""
        return is_constant_tensor(self.weight)

    def depthwise_dims(self) -> tuple[int, ...] | None:
        """``(n, c, H, W, KH, KW, OH, OW)`` of a 2-D depthwise convolution in
        NCHW / OIHW of static sizes (one input and one output channel per
        group), else None."""
        if (self.rank != 2 or (self.data_layout.name, self.kernel_layout.name,
                               self.out_layout.name) != ("NCHW", "OIHW", "NCHW")):
            return None
        dims = [arith.const_int(d) for d in (*self.data.shape, *self.weight.shape,
                                             *self.out_shape)]
        if any(d is None for d in dims):
            return None
        n, c, H, W, O, CG, KH, KW, _, _, OH, OW = dims
        if not (self.groups == c == O and CG == 1):
            return None
        return n, c, H, W, KH, KW, OH, OW


@dataclass(frozen=True)
class ConvTransposeWorkload:
    """A transposed convolution over ``rank`` spatial dimensions
    (``nn.conv{1,2,3}d_transpose``): the kernel is (input channels, output
    channels per group, *window) in canonical order (``IOHW``...)."""

    data: Tensor
    weight: Tensor
    out_shape: Sequence[PrimExpr]
    dtype: str
    rank: int
    strides: tuple[int, ...]
    padding: tuple[int, ...]
    output_padding: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int
    data_layout: LayoutIndex
    kernel_layout: LayoutIndex
    out_layout: LayoutIndex


@dataclass(frozen=True)
class PoolWorkload:
    """A max or average pooling over ``rank`` spatial dimensions."""

    data: Tensor
    out_shape: Sequence[PrimExpr]
    #: "max" or "avg"
    kind: str
    rank: int
    pool_size: tuple[int, ...]
    strides: tuple[int, ...]
    padding: tuple[int, ...]
    dilation: tuple[int, ...]
    count_include_pad: bool
    layout: LayoutIndex
    out_layout: LayoutIndex
    #: the data layout is the canonical one (``NC`` + spatial, not packed)
    canonical: bool
    #: the name of the result (``T_max_pool2d``...)
    name: str

"""Tensor layouts of convolution and pooling operators (``"NCHW"``, ``"NHWC"``,
``"OIHW"``, ``"HWIO"`` ...), and the attribute normalizers those operators
share (spatial tuples and paddings of 1, 2 or 3 spatial dims).

A layout names each dimension with one upper-case letter; phasec accepts any
permutation of the operator's canonical layout (``NCW``/``NCHW``/``NCDHW`` for
data, ``OIW``/``OIHW``/``OIDHW`` for kernels, ``IOW``... for transposed
convolution kernels). TVM's packed sub-layouts (``NCHW4c``) are refused with
a clear error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..tir import PrimExpr
from ._common import Normalizer, err, int_tuple

__all__ = ["Layout", "layout_of", "spatial", "padding_nd", "SPATIAL_LETTERS"]

#: spatial letters by number of spatial dims
SPATIAL_LETTERS = {1: "W", 2: "HW", 3: "DHW"}


class Layout:
    """A permutation of a canonical layout.

    ``to_canonical(shape)`` reorders a shape given in this layout into the
    canonical order; ``from_canonical(values)`` goes back; ``axis(letter)``
    is the position of a dimension.
    """

    __slots__ = ("name", "canonical", "_pos")

    def __init__(self, name: str, canonical: str) -> None:
        self.name = name
        self.canonical = canonical
        self._pos = tuple(name.index(c) for c in canonical)

    def axis(self, letter: str) -> int:
        return self.name.index(letter)

    def to_canonical(self, values: Sequence[Any]) -> tuple:
        return tuple(values[p] for p in self._pos)

    def from_canonical(self, values: Sequence[Any]) -> tuple:
        return tuple(values[self.canonical.index(c)] for c in self.name)


def layout_of(call, name: str, canonical: str, what: str) -> Layout:
    """Check ``name`` is a permutation of ``canonical``; an error naming ``what`` otherwise."""
    if not isinstance(name, str) or sorted(name) != sorted(canonical) or len(set(name)) != len(name):
        hint = ""
        if isinstance(name, str) and any(ch.islower() or ch.isdigit() for ch in name):
            hint = " (packed sub-layouts such as NCHW4c are not supported)"
        raise err(call, f"{what} {name!r} is not a layout phasec supports: expected a "
                        f"permutation of {canonical!r}{hint}")
    return Layout(name, canonical)


def spatial(rank: int) -> Normalizer:
    """A per-spatial-dim attribute (strides, dilation, pool_size, output_padding):
    one int (used for every dim) or ``rank`` ints."""
    def norm(v: Any) -> tuple[int, ...]:
        t = int_tuple(v)
        if len(t) == 1:
            return t * rank
        if len(t) != rank:
            raise ValueError(f"expected 1 or {rank} integers, got {len(t)}")
        return t
    return norm


def padding_nd(rank: int) -> Normalizer:
    """Padding as ``rank`` leading pads then ``rank`` trailing pads, from 1
    (everywhere), ``rank`` (symmetric) or ``2 * rank`` integers (TVM's
    GetCompletePadding{1,2,3}D)."""
    def norm(v: Any) -> tuple[int, ...]:
        t = int_tuple(v)
        if len(t) == 1:
            return t * (2 * rank)
        if len(t) == rank:
            return t + t
        if len(t) == 2 * rank:
            return t
        raise ValueError(f"padding needs 1, {rank} or {2 * rank} integers, got {len(t)}")
    return norm


def opt_layout(v: Any) -> str | None:
    """``out_layout``: a layout string, or None for "the data layout"."""
    if v is None or isinstance(v, str):
        return v
    raise TypeError(f"expected a layout string or None, got {v!r}")


def check_nonneg(call, name: str, values: Sequence[int]) -> None:
    if any(v < 0 for v in values):
        raise err(call, f"{name} must be non-negative, got {tuple(values)}")


def check_positive(call, name: str, values: Sequence[int]) -> None:
    if any(v <= 0 for v in values):
        raise err(call, f"{name} must be positive, got {tuple(values)}")


def index_fn(layout: Layout) -> Callable[[Sequence[PrimExpr]], tuple]:
    """Maps an index in canonical order to one in ``layout``'s order."""
    return layout.from_canonical

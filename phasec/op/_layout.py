"""Tensor layouts of convolution and pooling operators (``"NCHW"``, ``"NHWC"``,
``"OIHW"``, ``"HWIO"`` ...), and the attribute normalizers those operators
share (spatial tuples and paddings of 1, 2 or 3 spatial dims).

A layout names each dimension with one upper-case letter; phasec accepts any
permutation of the operator's canonical layout (``NCW``/``NCHW``/``NCDHW`` for
data, ``OIW``/``OIHW``/``OIDHW`` for kernels, ``IOW``... for transposed
convolution kernels). The convolutions also take TVM's packed sub-layouts
(``NCHW4c`` data, ``OIHW4o`` kernels: :class:`PackedLayout`); elsewhere
they are refused with a clear error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from phasec import arith
from phasec.ir.tir import BinaryOp, IntImm, PrimExpr
from phasec.op._common import Normalizer, err, int_tuple

__all__ = ["Layout", "PackedLayout", "layout_of", "spatial", "padding_nd", "SPATIAL_LETTERS"]

#: spatial letters by number of spatial dims
SPATIAL_LETTERS = {1: "W", 2: "HW", 3: "DHW"}


class Layout:
    """A permutation of a canonical layout.

    ``to_canonical(shape)`` reorders a shape given in this layout into the
    canonical order; ``from_canonical(values)`` goes back; ``axis(letter)``
    is the position of a dimension. For a permutation, shapes and indices
    map alike (``index_to_canonical`` / ``index_from_canonical``), and
    ``array_to_canonical`` / ``array_from_canonical`` move a numpy array.
    """

    __slots__ = ("name", "canonical", "_pos")

    def __init__(self, name: str, canonical: str) -> None:
        self.name = name
        self.canonical = canonical
        self._pos = tuple(name.index(c) for c in canonical)

    @property
    def ndim(self) -> int:
        return len(self.name)

    def axis(self, letter: str) -> int:
        return self.name.index(letter)

    def to_canonical(self, values: Sequence[Any]) -> tuple:
        return tuple(values[p] for p in self._pos)

    def from_canonical(self, values: Sequence[Any]) -> tuple:
        return tuple(values[self.canonical.index(c)] for c in self.name)

    def index_to_canonical(self, idx: Sequence[Any]) -> tuple:
        return self.to_canonical(idx)

    def index_from_canonical(self, idx: Sequence[Any]) -> tuple:
        return self.from_canonical(idx)

    def array_to_canonical(self, x: np.ndarray) -> np.ndarray:
        return np.transpose(x, self._pos)

    def array_from_canonical(self, x: np.ndarray) -> np.ndarray:
        return np.transpose(x, [self.canonical.index(c) for c in self.name])


class PackedLayout:
    """A layout with packed sub-dimensions, as TVM writes them: ``NCHW4c`` is
    N, C/4, H, W and the 4 channels of a block (channel ``c = C_outer * 4 +
    c_inner``); ``OIHW4o``, ``NHWC4c``, ``OHWI2i4o``... Each primal letter of
    the canonical layout appears once (upper case); a lower-case letter with
    its factor splits that primal dimension, its block being the inner part.

    Shapes map as TVM's ForwardShape / BackwardShape (the primal extent is
    ``outer * factor``), indices as ``outer = i // factor``, ``inner = i %
    factor``; ``array_*`` move numpy arrays (transpose and reshape).
    """

    __slots__ = ("name", "canonical", "axes", "factors", "_pos", "_sub")

    def __init__(self, name: str, canonical: str, axes: list[str], factors: dict[str, int]) -> None:
        self.name = name
        self.canonical = canonical
        self.axes = tuple(axes)          # "N", "C", "H", "W", "c"
        self.factors = dict(factors)     # "C" -> 4
        self._pos = tuple(self.axes.index(c) for c in canonical)
        self._sub = {p: self.axes.index(p.lower()) for p in self.factors}

    @property
    def ndim(self) -> int:
        return len(self.axes)

    def to_canonical(self, shape: Sequence[Any]) -> tuple:
        out = []
        for p, k in zip(self.canonical, self._pos):
            d = shape[k]
            if p in self.factors:
                d = arith.simplify(BinaryOp("*", d, IntImm(self.factors[p], "int64")))
            out.append(d)
        return tuple(out)

    def from_canonical(self, dims: Sequence[Any]) -> tuple:
        by = dict(zip(self.canonical, dims))
        out = []
        for a in self.axes:
            if a.islower():
                out.append(IntImm(self.factors[a.upper()], "int64"))
            elif a in self.factors:
                out.append(arith.simplify(BinaryOp("//", by[a], IntImm(self.factors[a], "int64"))))
            else:
                out.append(by[a])
        return tuple(out)

    def index_to_canonical(self, idx: Sequence[Any]) -> tuple:
        out = []
        for p, k in zip(self.canonical, self._pos):
            i = idx[k]
            if p in self.factors:
                i = BinaryOp("+", BinaryOp("*", i, IntImm(self.factors[p], "int64")),
                             idx[self._sub[p]])
            out.append(i)
        return tuple(out)

    def index_from_canonical(self, idx: Sequence[Any]) -> tuple:
        by = dict(zip(self.canonical, idx))
        out = []
        for a in self.axes:
            if a.islower():
                out.append(BinaryOp("%", by[a.upper()], IntImm(self.factors[a.upper()], "int64")))
            elif a in self.factors:
                out.append(BinaryOp("//", by[a], IntImm(self.factors[a], "int64")))
            else:
                out.append(by[a])
        return tuple(out)

    def array_to_canonical(self, x: np.ndarray) -> np.ndarray:
        order: list[int] = []
        for p, k in zip(self.canonical, self._pos):
            order += [k] + ([self._sub[p]] if p in self.factors else [])
        dims = tuple(int(x.shape[k]) * self.factors.get(p, 1)
                     for p, k in zip(self.canonical, self._pos))
        return np.transpose(x, order).reshape(dims)

    def array_from_canonical(self, x: np.ndarray) -> np.ndarray:
        split_shape: list[int] = []
        names: list[str] = []
        for p, d in zip(self.canonical, x.shape):
            f = self.factors.get(p)
            if f:
                split_shape += [d // f, f]
                names += [p, p.lower()]
            else:
                split_shape.append(d)
                names.append(p)
        return np.transpose(x.reshape(split_shape), [names.index(a) for a in self.axes])


def _packed(name: str, canonical: str) -> PackedLayout | None:
    """The PackedLayout ``name`` spells over ``canonical``, or None if it is not one."""
    axes: list[str] = []
    factors: dict[str, int] = {}
    i = 0
    while i < len(name):
        j = i
        while j < len(name) and name[j].isdigit():
            j += 1
        if j >= len(name):
            return None
        letter = name[j]
        if j > i:
            f = int(name[i:j])
            if not letter.islower() or letter.upper() not in canonical \
                    or letter.upper() in factors or f <= 0:
                return None
            factors[letter.upper()] = f
        elif not letter.isupper():
            return None
        axes.append(letter)
        i = j + 1
    primal = [a for a in axes if a.isupper()]
    if sorted(primal) != sorted(canonical) or len(set(axes)) != len(axes):
        return None
    return PackedLayout(name, canonical, axes, factors)


def layout_of(call, name: str, canonical: str, what: str, packed: bool = False):
    """Check ``name`` is a permutation of ``canonical`` (with ``packed``, also
    a packed layout such as ``NCHW4c``: a :class:`PackedLayout`); an error
    naming ``what`` otherwise."""
    if isinstance(name, str) and sorted(name) == sorted(canonical) and len(set(name)) == len(name):
        return Layout(name, canonical)
    if packed and isinstance(name, str):
        found = _packed(name, canonical)
        if found is not None:
            return found
    hint = ""
    if not packed and isinstance(name, str) and any(ch.islower() or ch.isdigit() for ch in name):
        hint = " (packed sub-layouts such as NCHW4c are not supported here)"
    elif packed:
        hint = f", or a packed layout such as {canonical}4{canonical[1].lower()}"
    raise err(call, f"{what} {name!r} is not a layout phasec supports: expected a "
                    f"permutation of {canonical!r}{hint}")


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

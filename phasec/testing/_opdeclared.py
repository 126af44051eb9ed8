"""Generators for the operators that declare how they are drawn.

An operator whose operands need more than a tensor in scope declares a
:class:`phasec.op._draw.Draw` beside its definition (dtypes and ranks of
the first operand; a ``build`` that draws the other operands and the
attributes from their domains for a given shape; the interval of the
result). This module turns each declaration into an :class:`OpGen`: the
generator's only knowledge of these operators is what the registry holds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from hypothesis import strategies as st

from phasec.errors import PhasecError
from phasec.ir.expr import Constant, Tuple
from phasec.ir.struct_info import TensorStructInfo, TupleStructInfo
from phasec.op import call_op, list_ops
from phasec.testing._opgen import Hooked, OpGen, elementwise_generator
from phasec.testing._values import (
    BOOL, FLOAT, INT, OPAQUE, Draw, Elementwise, Hooks, Val, const_dim, hull, iv_ok,
)
from phasec.testing.errors import GeneratorError

if TYPE_CHECKING:
    from phasec.testing._gen import FuncGen

__all__ = ["Declared", "declared_generators"]

_KIND = {"float32": FLOAT, "int32": INT, "bool": BOOL}


def kind_of_dtype(dtype: str) -> str:
    """The generator's kind for a result dtype (float32/int*/bool; others opaque)."""
    if dtype == "float32":
        return FLOAT
    if dtype == "bool":
        return BOOL
    if dtype in ("int32", "int64"):
        return INT
    return OPAQUE


class _Ctx:
    """The :class:`~phasec.op._draw.DrawContext` of one call being built."""

    def __init__(self, g: "FuncGen", x: Val) -> None:
        self.g = g
        self.x = x.expr
        self.shape = tuple(const_dim(d) for d in x.shape)
        self.dtype = x.dtype
        self.lo, self.hi = x.lo, x.hi
        self.ivs: list[tuple[float, float]] = [(x.lo, x.hi)]
        self.fixed: tuple[float, float] | None = None

    @property
    def mag(self) -> float:
        return max(abs(self.lo), abs(self.hi))

    def choose(self, options: Sequence[Any]) -> Any:
        return self.g.pick(list(options))

    def integers(self, lo: int, hi: int) -> int:
        return self.g.draw(st.integers(lo, hi))

    def _data(self, shape: Sequence[int], lo: float, hi: float, dtype: str) -> np.ndarray:
        if dtype == "bool":
            seed = self.g.draw(st.integers(0, 2**16))
            return np.random.default_rng(seed).integers(0, 2, size=tuple(shape)).astype(bool)
        return self.g.constant(tuple(shape), (lo, hi), dtype).expr.data

    def const(self, shape: Sequence[int], lo: float, hi: float, dtype: str = "float32"
              ) -> np.ndarray:
        data = self._data(shape, lo, hi, dtype)
        if data.size and dtype != "bool":
            self.ivs.append((float(data.min()), float(data.max())))
        return data

    def indices(self, shape: Sequence[int], high: int, low: int = 0) -> np.ndarray:
        """int64 positions in ``[low, high)`` (not part of the data's interval)."""
        return self._data(shape, low, max(high - 1, low), "int64")

    def hull(self) -> tuple[float, float]:
        return hull(*self.ivs)

    def include(self, lo: float, hi: float) -> None:
        self.ivs.append((float(lo), float(hi)))

    def result_in(self, lo: float, hi: float) -> None:
        self.fixed = (float(lo), float(hi))


def _expr(ctx: _Ctx, value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return Constant(value)
    if isinstance(value, list):
        return Tuple([_expr(ctx, v) for v in value])
    return value  # the first operand, a shape tuple, or an Expr


class Declared(OpGen):
    """An operator drawn from its registry declaration."""

    def __init__(self, name: str, spec: Draw) -> None:
        self.name = name
        self.spec = spec
        self.kinds = tuple(dict.fromkeys(_KIND[d] for d in spec.dtypes))
        self.min_rank = min(spec.ranks)
        self.order = spec.order

    def accepts(self, g: "FuncGen", x: Val) -> bool:
        s = self.spec
        if x.dtype not in s.dtypes or x.rank not in s.ranks:
            return False
        if s.impure and (g.mode == "pure" or g.in_df):
            return False
        shape = tuple(const_dim(d) for d in x.shape)
        if s.static and any(d is None for d in shape):
            return False
        return s.fits is None or s.fits(shape)

    def operand(self, g: "FuncGen") -> tuple[str, tuple[int, ...]] | None:
        s = self.spec
        for _ in range(3):
            if s.shape is not None:
                shape = tuple(s.shape(g.pick))
            else:
                rank = g.pick(list(s.ranks))
                shape = tuple(g.draw(st.integers(2, max(g.cfg.max_dim, 2))) for _ in range(rank))
            if s.fits is None or s.fits(shape):
                return _KIND[s.dtypes[0]], shape
        return None

    def adapt(self, g: "FuncGen", x: Val) -> Val | None:
        return None

    def build(self, g: "FuncGen", x: Val) -> Val | None:
        ctx = _Ctx(g, x)
        made = self.spec.build(ctx)
        if made is None:
            return None
        operands, attrs = made
        args = [_expr(ctx, v) for v in operands]
        try:
            call = call_op(self.name, *args, ctx=g.mg.ctx, **attrs)
        except PhasecError as exc:
            raise GeneratorError(f"the draw declaration of {self.name} built an invalid call "
                                 f"(a bug in the declaration): {exc}") from None
        iv = self._interval(ctx, x)
        if not iv_ok(iv):
            return None
        sinfo = call.struct_info
        if isinstance(sinfo, TupleStructInfo) and not sinfo.fields:
            return g.emit(call, OPAQUE, (0.0, 0.0))  # print, assert_op: R.Tuple()
        if isinstance(sinfo, TupleStructInfo):
            kinds = [kind_of_dtype(f.dtype) if isinstance(f, TensorStructInfo) else OPAQUE
                     for f in sinfo.fields]
            tup = g.emit_tuple(call, kinds, iv)
            usable = [i for i, k in enumerate(kinds) if k != OPAQUE] or list(range(len(kinds)))
            return g.get_item(tup, g.pick(usable))
        kind = kind_of_dtype(sinfo.dtype) if isinstance(sinfo, TensorStructInfo) else OPAQUE
        return g.emit(call, kind, iv if kind != BOOL else (0.0, 1.0))

    def _interval(self, ctx: _Ctx, x: Val) -> tuple[float, float] | None:
        out = self.spec.out
        if ctx.fixed is not None:
            return ctx.fixed
        if out == "same":
            return ctx.hull()
        if out == "index":
            return 0.0, float(max(ctx.shape, default=1))
        if out == "bool":
            return 0.0, 1.0
        iv = out(ctx)
        if iv is None or not all(math.isfinite(v) for v in iv):
            return None
        return float(iv[0]), float(iv[1])


def declared_generators(skip: set[str] | frozenset[str]) -> list[OpGen]:
    """One generator per registered compute operator with a draw declaration
    (those in ``skip`` excepted), in registry order."""
    out: list[OpGen] = []
    for opdef in list_ops():
        spec = opdef.draw
        if spec is None or opdef.name in skip:
            continue
        if isinstance(spec, Elementwise):
            out.append(elementwise_generator(opdef.name, spec))
        elif isinstance(spec, Hooks):
            out.append(Hooked(opdef.name, spec))
        else:
            out.append(Declared(opdef.name, spec))
    return out


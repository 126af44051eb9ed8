"""Generators derived from the operator registry, for elementwise operators
without a draw declaration (:mod:`phasec.op.draw`).

An elementwise or broadcasting operator (pattern ``ELEMWISE``/``BROADCAST``,
one to three operands, no required attribute, a numpy reference and a
lowering) is fuzzed as soon as it is registered. What a declaration states
is found here by probing the operator's own numpy reference: for each
operand dtype the operator's inference accepts (float32, int32, bool), the
first operand domains (from a short list, widest first) on which the
reference stays finite and small on a dense grid, and the result interval
seen there (with a margin). Operands are built to fit: values in scope
whose interval lies in the domain, else an operand clipped into it.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from phasec.ir.expr import Constant, Var
from phasec.ir.struct_info import TensorStructInfo
from phasec.op import REQUIRED, OpPattern, call_op, find_op, list_ops
from phasec.testing._opgen import OpGen
from phasec.testing._values import BOOL, FLOAT, INT, VALUE_CAP, Val, const_dim, shapes_equal, within

if TYPE_CHECKING:
    from phasec.testing._gen import FuncGen

__all__ = ["derived_generators", "Probed", "SKIPPED_KINDS"]

Interval = tuple[float, float]

#: candidate operand domains per kind, widest first
_DOMAINS: dict[str, tuple[Interval, ...]] = {
    FLOAT: ((-2.0, 2.0), (-0.9, 0.9), (0.25, 2.0), (1.1, 3.0)),
    INT: ((-3.0, 3.0), (0.0, 3.0), (1.0, 3.0)),
    BOOL: ((0.0, 1.0),),
}
_DTYPE = {FLOAT: "float32", INT: "int32", BOOL: "bool"}

#: operand kinds not drawn for an operator, and why (fuzzer findings that are
#: open: drawing them would fail every campaign on a known bug)
SKIPPED_KINDS: dict[tuple[str, str], str] = {}
_CAP = min(VALUE_CAP, 100.0)
#: grid points per operand (by operand count): dense enough to see a pole
_POINTS = {1: 2001, 2: 101, 3: 21}


def _grid(kind: str, dom: Interval, points: int) -> np.ndarray:
    if kind == BOOL:
        return np.array([False, True])
    if kind == INT:
        return np.arange(int(dom[0]), int(dom[1]) + 1, dtype="int32")
    grid = np.linspace(dom[0], dom[1], points)
    if dom[0] < 0.0 < dom[1]:
        # zero exactly (a linspace may miss it by an ulp): a remainder or a
        # quotient by it is where the reference leaves the finite values
        grid = np.sort(np.append(grid, 0.0))
    return grid.astype("float32")


def _const_shape(x: Val) -> tuple[int, ...] | None:
    dims = tuple(const_dim(d) for d in x.shape)
    return None if any(d is None for d in dims) else dims  # type: ignore[return-value]


def _kind_of(dtype: str) -> str | None:
    if dtype == "bool":
        return BOOL
    if dtype.startswith(("int", "uint")):
        return INT
    if dtype.startswith("float"):
        return FLOAT
    return None


class Probed(OpGen):
    """An elementwise operator with operand domains found by probing."""

    def __init__(self, name: str, kind: str, domains: tuple[Interval, ...],
                 out_kind: str, out_iv: Interval) -> None:
        self.name = name
        self.kinds = (kind,)
        self.domains = domains  # one per operand
        self.out_kind = out_kind
        self.out_iv = out_iv

    def _fits(self, v: Val, i: int) -> bool:
        return (v.kind == self.kinds[0] and v.dtype == _DTYPE[v.kind]
                and (v.kind == BOOL or within((v.lo, v.hi), self.domains[i])))

    def accepts(self, g: "FuncGen", x: Val) -> bool:
        return self._fits(x, 0) and (len(self.domains) == 1 or _const_shape(x) is not None
                                     or bool(self._partners(g, x, 1)))

    def _partners(self, g: "FuncGen", x: Val, i: int) -> list[Val]:
        return g.visible(lambda v: self._fits(v, i) and shapes_equal(v.shape, x.shape))

    def operand(self, g: "FuncGen") -> tuple[str, tuple[int, ...]] | None:
        return self.kinds[0], super().operand(g)[1]

    def adapt(self, g: "FuncGen", x: Val) -> Val | None:
        """Clip a float operand into the first operand's domain."""
        if x.kind != FLOAT or self.kinds[0] != FLOAT:
            return None
        lo, hi = self.domains[0]
        return g.emit(call_op("relax.clip", x.expr, min=lo, max=hi), FLOAT, (lo, hi))

    def build(self, g: "FuncGen", x: Val) -> Val:
        args = [x.expr]
        for i in range(1, len(self.domains)):
            cands: list[Any] = self._partners(g, x, i)
            if _const_shape(x) is not None:
                cands.append("const")
            y = g.pick(cands)
            if y == "const":
                y = self._const(g, _const_shape(x), i)
            args.append(y.expr)
        return g.emit(call_op(self.name, *args), self.out_kind, self.out_iv)

    def _const(self, g: "FuncGen", shape: tuple[int, ...], i: int) -> Val:
        kind = self.kinds[0]
        if kind == BOOL:
            c = g.constant(shape, (-1.0, 1.0), "float32")
            zero = Constant(np.zeros((), dtype="float32"))
            return g.emit(call_op("relax.greater", c.expr, zero), BOOL, (0.0, 1.0), hint="b")
        return g.constant(shape, self.domains[i], _DTYPE[kind])


def _evaluate(opdef: Any, kind: str, doms: tuple[Interval, ...], points: int
              ) -> np.ndarray | None:
    """The reference on a grid over ``doms`` (None: it raises or misshapes)."""
    grids = np.meshgrid(*[_grid(kind, d, points) for d in doms], indexing="ij")
    try:
        with np.errstate(all="ignore"):
            out = np.asarray(opdef.reference(*grids))
    except Exception:  # noqa: BLE001 - not defined there
        return None
    return out if out.shape == grids[0].shape else None


def _probe(opdef: Any) -> Probed | None:
    nargs = len(opdef.args)
    for kind in (FLOAT, INT, BOOL):
        if (opdef.name, kind) in SKIPPED_KINDS:
            continue
        dtype = _DTYPE[kind]
        try:
            params = [Var(f"a{i}", TensorStructInfo((2,), dtype)) for i in range(nargs)]
            sinfo = call_op(opdef.name, *params).struct_info
        except Exception:  # noqa: BLE001 - the operator refuses this dtype
            continue
        out_kind = _kind_of(getattr(sinfo, "dtype", ""))
        if out_kind is None or getattr(sinfo, "ndim", -1) != 1:
            continue
        for doms in itertools.product(_DOMAINS[kind], repeat=nargs):
            # two grids, one finer: values that grow with the resolution are
            # a pole (tan near pi/2), not a bound
            out, finer = (_evaluate(opdef, kind, doms, _POINTS[nargs] * k) for k in (1, 2))
            if out is None or finer is None or _kind_of(str(out.dtype)) != out_kind:
                continue
            if out_kind == BOOL:
                return Probed(opdef.name, kind, doms, BOOL, (0.0, 1.0))
            vals = out.astype("float64")
            fine = finer.astype("float64")
            if not (np.all(np.isfinite(vals)) and np.all(np.isfinite(fine))):
                continue
            top, fine_top = np.abs(vals).max(), np.abs(fine).max()
            if fine_top > _CAP or fine_top > 1.05 * top + 0.01:
                continue
            vals = np.concatenate([vals.ravel(), fine.ravel()])
            lo, hi = float(vals.min()), float(vals.max())
            if out_kind == FLOAT:  # a margin: the grid may miss an extreme
                pad = 0.05 * (hi - lo) + 0.01
                lo, hi = lo - pad, hi + pad
            return Probed(opdef.name, kind, doms, out_kind, (math.floor(lo) if out_kind == INT
                                                           else lo,
                                                           math.ceil(hi) if out_kind == INT
                                                           else hi))
    return None


@functools.lru_cache(maxsize=None)
def _derived_for(names: frozenset[str], registered: tuple[str, ...]) -> tuple[Probed, ...]:
    out = []
    for name in registered:
        opdef = find_op(name)
        if (name in names or opdef is None or opdef.category != "compute" or not opdef.pure
                or opdef.variadic or opdef.reference is None or opdef.legalize is None
                or opdef.pattern not in (OpPattern.ELEMWISE, OpPattern.BROADCAST)
                or not 1 <= len(opdef.args) <= 3
                or any(v is REQUIRED for v in opdef.attrs.values())):
            continue
        gen = _probe(opdef)
        if gen is not None:
            out.append(gen)
    return tuple(out)


def derived_generators(table_names: set[str] | frozenset[str]) -> list[Probed]:
    """Generators for the registered elementwise operators not in the table."""
    registered = tuple(sorted(o.name for o in list_ops()))
    return list(_derived_for(frozenset(table_names), registered))

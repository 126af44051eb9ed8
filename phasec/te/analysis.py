"""What the lowering and the schedules ask of an expression: its structural
key, its simplified form, its static value, the tensors it reads and along
which axis."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from phasec.arith import simplify
from phasec.arith.bound import simplify_bounded
from phasec.ir import tir
from phasec.ir.tir import (
    BinaryOp, BufferLoad, FloatImm, IntImm, PrimExpr, Select, Var,
)
from phasec.te.tensor import ProducerLoad, children, post_order, rebuild

__all__ = [
    "SYMBOLIC_GUESS", "expr_key", "simplify_index", "static_int", "extent_guess", "loads_of",
    "last_index_uses", "calls", "uses_var", "costly", "vars_of", "subst_var",
]

#: assumed extent of a symbolic dimension when estimating work
SYMBOLIC_GUESS = 64


def expr_key(e: PrimExpr) -> Any:
    """A hashable structural key (variables by identity)."""
    if isinstance(e, Var):
        return ("v", id(e))
    if isinstance(e, IntImm):
        return ("c", e.dtype, e.value)
    memo: dict[int, Any] = {}
    for n in post_order([e]):
        if isinstance(n, Var):
            k: Any = ("v", id(n))
        elif isinstance(n, (IntImm, FloatImm)):
            k = ("c", n.dtype, n.value)
        else:
            extra: Any = getattr(n, "op", None) or getattr(n, "name", None)
            if isinstance(n, (BufferLoad,)):
                extra = id(n.buffer)
            elif isinstance(n, ProducerLoad):
                extra = id(n.tensor)
            k = (type(n).__name__, n.dtype, extra, tuple(memo[id(c)] for c in children(n)))
        memo[id(n)] = k
    return memo[id(e)]


def simplify_index(e: PrimExpr, bounds: Mapping[int, tuple[int, int]] | None = None
                   ) -> PrimExpr:
    """``e`` simplified; with ``bounds`` (``id(var) -> (lo, hi)`` of the loop
    variables) quotients and remainders the ranges decide are resolved too
    (:func:`phasec.arith.bound.simplify_bounded`)."""
    if isinstance(e, (Var, IntImm)) or not tir.is_int(e.dtype):
        return e
    try:
        if bounds:
            e = simplify_bounded(e, bounds)
        return simplify(e)
    except Exception:  # noqa: BLE001 - simplification is best effort
        return e


def static_int(e: PrimExpr) -> int | None:
    """The value of ``e`` when it simplifies to a constant, else None."""
    if isinstance(e, IntImm):
        return e.value
    s = simplify_index(e)
    return s.value if isinstance(s, IntImm) else None


def extent_guess(e: PrimExpr) -> int:
    """An extent's value, or a typical size for a symbolic one (work estimates)."""
    v = static_int(e)
    return SYMBOLIC_GUESS if v is None else v


def loads_of(e: PrimExpr) -> list[ProducerLoad]:
    """The tensor element reads in ``e``."""
    return [n for n in post_order([e]) if isinstance(n, ProducerLoad)]


def calls(e: PrimExpr) -> bool:
    """True when ``e`` calls a function (a math intrinsic such as tanh or exp)."""
    return any(isinstance(n, tir.Call) for n in post_order([e]))


def uses_var(e: PrimExpr, var: Var) -> bool:
    """True when ``e`` reads ``var``."""
    return any(n is var for n in post_order([e]))


def last_index_uses(ld: ProducerLoad, var: Var) -> bool:
    """True when the innermost index of ``ld`` uses ``var`` (contiguous along it)."""
    if not ld.indices:
        return False
    return any(n is var for n in post_order([ld.indices[-1]]))


def costly(e: PrimExpr) -> bool:
    """True when computing ``e`` does arithmetic beyond index computations."""
    for n in post_order([e]):
        if isinstance(n, (tir.Call, Select)):
            return True
        if isinstance(n, BinaryOp) and not tir.is_int(n.dtype) and not (
                tir.is_bool(n.dtype) and tir.is_int(n.lhs.dtype)):
            return True
    return False


def vars_of(e: PrimExpr) -> set[int]:
    """Ids of the variables in ``e``."""
    return {id(n) for n in post_order([e]) if isinstance(n, Var)}


def subst_var(e: PrimExpr, var: Var, value: PrimExpr) -> PrimExpr:
    """``e`` with ``var`` replaced by ``value``."""
    memo: dict[int, PrimExpr] = {}
    for n in post_order([e]):
        memo[id(n)] = value if n is var else rebuild(n, [memo[id(c)] for c in children(n)])
    return memo[id(e)]

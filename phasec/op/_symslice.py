"""strided_slice with symbolic begin / end: the index arithmetic TVM 0.27 uses.

TVM 0.27 passes strided_slice's ``begin``, ``end`` and ``strides`` as tuples
of PrimExprs, so an entry may be a symbolic expression (``index``,
``index + 1``, ``2 * n + 1``); phasec keeps them as the attribute values
(an int, or a ``tir.PrimExpr`` where the entry is symbolic). A symbolic
stride must be an expression that cannot be negative (of shape variables,
``k + 1``): it slices forwards, and a zero stride is an error at run time
(the interpreter's, numpy's "slice step cannot be zero"; the VM's division by
zero in the result shape). TVM also takes a stride of unknown sign; phasec
refuses it (WF405), since the kernel would need both directions.

For a symbolic entry the result length follows TVM's ``topi::GetLength``:
each index is canonicalized as Python's ``slice.indices`` does (a negative
index counts from the end, then it is clamped into ``[0, dim]``, or
``[-1, dim - 1]`` for a negative stride), and the length is
``ceildiv(end - begin, stride)``. With ``assume_inbound`` the indices are
taken as given (the caller promises they are in bounds), as in TVM.

Simplification mimics what TVM's analyzer does with these forms, so that the
inferred shapes read as TVM prints them (``T.min(index + 1, 16) -
T.min(index, 16)``): symbolic variables are shape variables, hence
non-negative (TVM 0.27 has no other kind); ``min`` / ``max`` are resolved when
constant bounds decide them, ``x - min(y, x)`` becomes ``max(x - y, 0)``.
(phasec also lets ``R.Prim(value=k)`` bind a variable; one that is negative at
run time breaks this assumption: the inferred length and the kernel's start
then do not hold. A bound that may be negative is written as an expression of
shape variables, ``k - 20``, whose sign the canonical form tests at run time.)

One deliberate difference: where TVM's length can be negative (``x[5:k]`` with
``k < 5``: TVM infers ``T.min(k, 16) - 5``, a negative dimension for small
``k``), phasec takes ``T.max(length, 0)``, numpy's empty slice. It is kept
off wherever the length is provably non-negative, which includes every form
TVM's own test suite uses.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from phasec.ir import tir
from phasec import arith
from phasec.ir.text import prim_expr_to_str
from phasec.ir.tir import BinaryOp, IntImm, PrimExpr, Select

__all__ = ["index_entry", "index_tuple", "stride_tuple", "canonical_index", "slice_length",
           "is_symbolic"]

Bound = tuple["int | None", "int | None"]


def _i64(v: int) -> IntImm:
    return IntImm(int(v), "int64")


def index_entry(v: Any) -> int | PrimExpr:
    """A begin / end / stride entry: an int, or an integer symbolic expression."""
    if isinstance(v, IntImm):
        return int(v.value)
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"expected an integer or a symbolic integer expression, got {v!r}")
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, PrimExpr):
        if not tir.is_int(v.dtype):
            raise TypeError(f"expected an integer expression, got one of dtype {v.dtype}")
        folded = arith.const_int(v)
        return v if folded is None else folded
    raise TypeError(f"expected an integer or a symbolic integer expression, got {v!r}")


def index_tuple(v: Any) -> tuple[int | PrimExpr, ...]:
    """An entry or a sequence of entries -> tuple (see :func:`index_entry`)."""
    if isinstance(v, (list, tuple)):
        return tuple(index_entry(x) for x in v)
    return (index_entry(v),)


def stride_tuple(v: Any) -> tuple[int | PrimExpr, ...]:
    """Strides: integers, or symbolic expressions that cannot be negative
    (expressions of shape variables: ``k``, ``2 * k``), which slice forwards.
    TVM 0.27 also takes a stride of unknown sign, whose sign picks the slice
    direction at run time; phasec refuses it (a kernel would need both)."""
    out = index_tuple(v)
    for x in out:
        if isinstance(x, PrimExpr):
            low = bounds(x)[0]
            if low is None or low < 0:
                raise TypeError(f"a symbolic stride must be a non-negative expression of "
                                f"shape variables (k, 2 * k), got {_text(x)}, whose sign is "
                                f"not known")
    return out


def is_symbolic(v: Any) -> bool:
    return isinstance(v, PrimExpr) and not isinstance(v, IntImm)


def _text(e: PrimExpr) -> str:
    return prim_expr_to_str(e)


# ---------------------------------------------------------------------------
# Constant bounds (TVM's ConstIntBound, as far as these forms need it)
# ---------------------------------------------------------------------------

def _add(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def bounds(e: PrimExpr) -> Bound:
    """(lower, upper) constant bounds of an integer expression; None is unbounded.
    Symbolic variables are shape variables: at least 0."""
    t = type(e)
    if t is IntImm:
        return e.value, e.value
    if t is tir.Var:
        return 0, None
    if t is Select:
        (la, ha), (lb, hb) = bounds(e.true_value), bounds(e.false_value)
        return (None if la is None or lb is None else min(la, lb),
                None if ha is None or hb is None else max(ha, hb))
    if t is not BinaryOp:
        return None, None
    (la, ha), (lb, hb) = bounds(e.lhs), bounds(e.rhs)
    op = e.op
    if op == "+":
        return _add(la, lb), _add(ha, hb)
    if op == "-":
        return (_add(la, None if hb is None else -hb), _add(ha, None if lb is None else -lb))
    if op == "min":
        return (None if la is None or lb is None else min(la, lb),
                hb if ha is None else (ha if hb is None else min(ha, hb)))
    if op == "max":
        return (lb if la is None else (la if lb is None else max(la, lb)),
                None if ha is None or hb is None else max(ha, hb))
    if op == "*" and lb is not None and lb == hb:  # x * c
        c = lb
        lo, hi = (la, ha) if c >= 0 else (ha, la)
        return (None if lo is None else lo * c, None if hi is None else hi * c)
    if op == "*" and la is not None and la == ha:  # c * x
        return bounds(BinaryOp("*", e.rhs, e.lhs))
    if op == "//" and lb is not None and lb == hb and lb > 0:
        return (None if la is None else la // lb, None if ha is None else ha // lb)
    return None, None


def smin(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``T.min(a, b)``, resolved where a constant difference or bounds decide it."""
    d = arith.const_int(arith.simplify(BinaryOp("-", a, b)))
    if d is not None:
        return a if d <= 0 else b
    (la, ha), (lb, hb) = bounds(a), bounds(b)
    if ha is not None and lb is not None and ha <= lb:
        return a
    if hb is not None and la is not None and hb <= la:
        return b
    return BinaryOp("min", a, b)


def smax(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``T.max(a, b)``, resolved as :func:`smin`."""
    d = arith.const_int(arith.simplify(BinaryOp("-", a, b)))
    if d is not None:
        return a if d >= 0 else b
    (la, ha), (lb, hb) = bounds(a), bounds(b)
    if la is not None and hb is not None and la >= hb:
        return a
    if lb is not None and ha is not None and lb >= ha:
        return b
    return BinaryOp("max", a, b)


# ---------------------------------------------------------------------------
# Canonical indices and lengths
# ---------------------------------------------------------------------------

def canonical_index(index: int | PrimExpr, dim: PrimExpr, stride: int) -> PrimExpr:
    """``index`` resolved against ``dim`` as ``slice.indices`` does: a negative
    index counts from the end, then it is clamped into ``[0, dim]`` (stride > 0)
    or ``[-1, dim - 1]`` (stride < 0)."""
    idx = _i64(index) if isinstance(index, int) else index
    ci, cd = arith.const_int(idx), arith.const_int(dim)
    if ci is not None and cd is not None:
        v = ci + cd if ci < 0 else ci
        lo, hi = (-1, cd - 1) if stride < 0 else (0, cd)
        return _i64(min(max(v, lo), hi))
    if stride > 0 and type(idx) is tir.Var and idx is dim:
        # x[..:n] of a dimension n. (TVM takes this shortcut for a negative
        # stride too, where n is out of range: x[n::-1] then starts at n.)
        return idx
    lo_r: PrimExpr = _i64(-1 if stride < 0 else 0)
    hi_r = arith.simplify(BinaryOp("-", dim, _i64(1))) if stride < 0 else dim
    low, high = bounds(idx)
    if low is not None and low >= 0:
        wrapped = idx
    elif high is not None and high < 0:
        wrapped = arith.simplify(BinaryOp("+", idx, dim))
    else:
        wrapped = Select(BinaryOp("<", idx, _i64(0)),
                         arith.simplify(BinaryOp("+", idx, dim)), idx)
    return smin(smax(wrapped, lo_r), hi_r)


def _ceildiv(n: PrimExpr, k: int | PrimExpr) -> PrimExpr:
    if isinstance(k, PrimExpr):  # a symbolic stride
        return arith.simplify(BinaryOp("//", BinaryOp("-", BinaryOp("+", n, k), _i64(1)), k))
    if k == 1:
        return arith.simplify(n)
    return arith.simplify(BinaryOp("//", BinaryOp("+", n, _i64(k - 1)), _i64(k)))


def _difference(hi: PrimExpr, lo: PrimExpr) -> PrimExpr:
    """``hi - lo``; ``x - min(y, x)`` is ``max(x - y, 0)`` (as TVM's rewrite)."""
    if type(lo) is BinaryOp and lo.op == "min":
        for y, x in ((lo.lhs, lo.rhs), (lo.rhs, lo.lhs)):
            if arith.prove_equal(x, hi):
                return smax(arith.simplify(BinaryOp("-", hi, y)), _i64(0))
    return arith.simplify(BinaryOp("-", hi, lo))


def slice_length(begin: int | PrimExpr, end: int | PrimExpr, stride: int | PrimExpr,
                 dim: PrimExpr, assume_inbound: bool) -> PrimExpr:
    """The length of ``x[begin:end:stride]`` along a dimension ``dim``, where
    ``begin``, ``end`` or ``stride`` is symbolic (see the module docstring; a
    symbolic stride is non-negative, see :func:`stride_tuple`)."""
    b = _i64(begin) if isinstance(begin, int) else begin
    e = _i64(end) if isinstance(end, int) else end
    if isinstance(stride, PrimExpr):
        k: int | PrimExpr = stride
        stride = 1  # the direction: forwards
    else:
        k = abs(stride)
    if assume_inbound:
        n = BinaryOp("-", e, b) if stride > 0 else BinaryOp("-", b, e)
        return _ceildiv(n, k)
    bc, ec = canonical_index(b, dim, stride), canonical_index(e, dim, stride)
    n = _difference(ec, bc) if stride > 0 else _difference(bc, ec)
    length = _ceildiv(n, k)
    if _non_negative(length, b, e, stride):
        return length
    return smax(length, _i64(0))


def _non_negative(length: PrimExpr, b: PrimExpr, e: PrimExpr, stride: int) -> bool:
    """The length is provably >= 0: by its bounds, or because canonicalization
    is monotone: with both indices non-negative (no wrap from the end) and
    ``end >= begin`` (``begin >= end`` for a negative stride), the clamped
    indices keep that order."""
    low = bounds(length)[0]
    if low is not None and low >= 0:
        return True
    for index in (b, e):
        low = bounds(index)[0]
        if low is None or low < 0:
            return False
    gap = arith.simplify(BinaryOp("-", e, b) if stride > 0 else BinaryOp("-", b, e))
    low = bounds(gap)[0]
    return low is not None and low >= 0

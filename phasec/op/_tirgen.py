"""Small builders of hand-written TIR, for the operators whose kernels are not
a loop nest of elementwise expressions (scans, scatters): the statement
builders that :func:`phasec.te.extern` calls."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import count

from phasec.ir import tir
from phasec.ir.tir import BinaryOp, Buffer, For, IntImm, PrimExpr, Stmt, Var
from phasec.ir.tir import seq as tir_seq

__all__ = ["nest", "seq", "copy_buffer", "checked", "i64", "ravel"]

_ids = count()


def i64(v: int) -> IntImm:
    return IntImm(int(v), "int64")


def nest(shape: Sequence[PrimExpr], body: Callable[[tuple[Var, ...]], Stmt],
         base: str = "i") -> Stmt:
    """Serial loops over ``shape`` (outermost first) around ``body(indices)``;
    fresh loop variables, so nests never share one."""
    tag = next(_ids)
    idx = tuple(Var(f"{base}{d}_{tag}", "int64") for d in range(len(shape)))
    stmt = body(idx)
    for v, ext in zip(reversed(idx), reversed(tuple(shape))):
        stmt = For(v, i64(0), ext, "serial", stmt)
    return stmt


def seq(*stmts: Stmt) -> Stmt:
    return tir_seq(stmts)


def copy_buffer(src: Buffer, dst: Buffer) -> Stmt:
    """``dst[...] = src[...]`` elementwise (same shape)."""
    return nest(dst.shape, lambda i: tir.BufferStore(dst, src[i], i), "c")


def checked(value: PrimExpr, extent: PrimExpr) -> PrimExpr:
    """An index read from data: negative counts from the end, anything out of
    ``[-extent, extent)`` stops the kernel with an IndexOutOfRangeError."""
    v = value if value.dtype == "int64" else tir.Cast("int64", value)
    return tir.Call("checked_index", (v, extent), "int64")


def ravel(idx: Sequence[PrimExpr], shape: Sequence[PrimExpr]) -> PrimExpr:
    """The row-major flat index of ``idx`` in ``shape``."""
    flat: PrimExpr = i64(0)
    for i, d in zip(idx, shape):
        flat = BinaryOp("+", BinaryOp("*", flat, d), i)
    return flat

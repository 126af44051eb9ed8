"""Hand-built TIR kernels that tests in more than one folder run, print or parse."""

from __future__ import annotations

from phasec.ir import tir


def i64(v):
    """An int64 immediate."""
    return tir.IntImm(v, "int64")


def loop(var, extent, body):
    """A serial loop of ``var`` over [0, extent)."""
    return tir.For(var, i64(0), i64(extent), "serial", body)


#: the input and the output of scoped_kernel
A = tir.Buffer("A", (i64(2),), "float32")
B = tir.Buffer("B", (i64(2),), "float32")


def scoped_kernel(mixed_dtype_let=True):
    """acc lives for fill + copy only; the loop after it is outside its scope;
    the let v likewise covers one store (and the let w, whose int64 variable
    takes an int32 value, unless not ``mixed_dtype_let``: TVM requires a let
    variable's dtype to be its value's)."""
    acc = tir.Buffer("acc", (i64(2),), "float32")
    i, j, k = tir.Var("i", "int64"), tir.Var("j", "int64"), tir.Var("k", "int64")
    v, w = tir.Var("v", "int64"), tir.Var("w", "int64")
    fill = loop(i, 2, tir.BufferStore(acc, tir.BufferLoad(A, (i,)), (i,)))
    copy = loop(j, 2, tir.BufferStore(B, tir.BufferLoad(acc, (j,)), (j,)))
    add = loop(k, 2, tir.BufferStore(B, tir.BufferLoad(B, (k,)) + tir.BufferLoad(A, (k,)), (k,)))
    let_v = tir.LetStmt(v, i64(1), tir.BufferStore(B, tir.BufferLoad(A, (v,)), (v,)))
    # a let whose variable's dtype is not its value's: printed with an annotation
    let_w = tir.LetStmt(w, tir.IntImm(0, "int32"),
                        tir.BufferStore(B, tir.BufferLoad(A, (w,)), (w,)))
    tail = tir.Allocate(tir.Buffer("t", (i64(1),), "float32"),
                        tir.BufferStore(B, tir.BufferLoad(B, (i64(0),)), (i64(0),)))
    lets = [let_v, let_w] if mixed_dtype_let else [let_v]
    body = tir.SeqStmt([tir.Allocate(acc, tir.SeqStmt([fill, copy])), *lets, add, tail])
    return tir.PrimFunc([A, B], body)


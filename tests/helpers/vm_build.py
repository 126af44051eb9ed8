"""Build-phase Relax modules written by hand for the VM's tests: shorthands
for calls, bindings and functions (every function impure, as in the build
phase), explicit storage allocation, and small TIR kernels."""

from __future__ import annotations

import numpy as np

from phasec import ir
from phasec.ir import tir

#: the unit (empty tuple) and the opaque object struct infos
UNIT = ir.TupleStructInfo([])
OBJ = ir.ObjectStructInfo()


def tensor(shape, dtype="float32"):
    """A tensor struct info."""
    return ir.TensorStructInfo(shape, dtype)


def op(name, *args, sinfo_args=(), **attrs):
    """A call of the Relax operator ``relax.<name>``."""
    return ir.Call(ir.Op("relax." + name), args, attrs, sinfo_args)


def packed(name, *args, sinfo=None):
    """A call of the packed function ``name``, returning ``sinfo``."""
    return ir.Call(ir.ExternFunc(name), args, None, (sinfo,) if sinfo is not None else ())


def seq(bindings, result):
    """``bindings`` (one block, none if empty) then ``result``."""
    return ir.SeqExpr([ir.BindingBlock(bindings)] if bindings else [], result)


def func(params, bindings, result, ret=None):
    """An impure function: the build phase makes every function impure."""
    return ir.Function(params, seq(bindings, result), ret, False)


def B(var, value):
    """A binding ``var = value``."""
    return ir.VarBinding(var, value)


def V(name, sinfo=None):
    """A Relax variable."""
    return ir.Var(name, sinfo)


def module(phase="build", **funcs):
    """A module of ``funcs`` at ``phase``."""
    return ir.IRModule(funcs, {"phase": phase})


def f32(*values):
    """A float32 array of ``values``."""
    return np.array(values, dtype="float32")


def alloc(name, shape, dtype="float32", nbytes=None):
    """Bindings allocating a tensor through R.vm.alloc_storage / R.vm.alloc_tensor."""
    itemsize = np.dtype(dtype).itemsize
    size = nbytes if nbytes is not None else itemsize * int(np.prod([
        d.value if isinstance(d, tir.IntImm) else d for d in shape])) if all(
        isinstance(d, (int, tir.IntImm)) for d in shape) else None
    if size is None:  # symbolic: bytes = prod(shape) * itemsize as a PrimExpr
        expr = tir.IntImm(itemsize)
        for d in shape:
            expr = expr * d
        size = expr
    storage = V(name + "_storage", OBJ)
    t = V(name, tensor(shape, dtype))
    return storage, t, [
        B(storage, op("vm.alloc_storage", ir.ShapeExpr([size]), runtime_device_index=0,
                      dtype="uint8")),
        B(t, op("vm.alloc_tensor", storage, ir.PrimValue(0), ir.ShapeExpr(shape), dtype=dtype)),
    ]


def vector_add_kernel():
    """C[i] = A[i] + B[i] over a symbolic length n."""
    n = tir.Var("n", "int64")
    A, Bf, C = (tir.Buffer(name, (n,), "float32") for name in "ABC")
    i = tir.Var("i", "int64")
    return tir.PrimFunc([A, Bf, C], tir.For(i, 0, n, "serial",
                                            tir.BufferStore(C, A[i] + Bf[i], (i,))))


def vector_mul_kernel():
    """C[i] = A[i] * B[i] over a symbolic length n."""
    n = tir.Var("n", "int64")
    A, Bf, C = (tir.Buffer(name, (n,), "float32") for name in "ABC")
    i = tir.Var("i", "int64")
    return tir.PrimFunc([A, Bf, C], tir.For(i, 0, n, "serial",
                                            tir.BufferStore(C, A[i] * Bf[i], (i,))))


def scale_kernel():
    """Out[i] = X[i] * k with a scalar shape parameter k."""
    n = tir.Var("n", "int64")
    k = tir.Var("k", "int64")
    X, Out = tir.Buffer("X", (n,), "float32"), tir.Buffer("Out", (n,), "float32")
    i = tir.Var("i", "int64")
    return tir.PrimFunc([X, Out, k], tir.For(
        i, 0, n, "serial", tir.BufferStore(Out, X[i] * tir.Cast("float32", k), (i,))))


def straight_line_module():
    """main(x, y) = (x + y) * y with two kernels and explicit storage, symbolic n."""
    n = tir.Var("n", "int64")
    x, y = V("x", tensor((n,))), V("y", tensor((n,)))
    s0, t0, b0 = alloc("t0", [n])
    s1, t1, b1 = alloc("t1", [n])
    c0, c1, k0 = V("c0", UNIT), V("c1", UNIT), V("k0", UNIT)
    main = func([x, y], [*b0, B(c0, ir.Call(ir.GlobalVar("vadd"), [x, y, t0])),
                         *b1, B(c1, ir.Call(ir.GlobalVar("vmul"), [t0, y, t1])),
                         B(k0, op("vm.kill_object", s0))], t1)
    return module(main=main, vadd=vector_add_kernel(), vmul=vector_mul_kernel())


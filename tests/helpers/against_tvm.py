"""Operators checked against TVM 0.27: the struct info both infer for the
same TVMScript, normalized to ``(dtype, ndim, dims)`` with symbolic dimensions
evaluated, and TVM's compiled output as a reference. TVM is imported lazily,
inside the functions that need it."""

from __future__ import annotations

import numpy as np

import phasec


def norm_phasec(si, env):
    """phasec's struct info ``si`` as ``(dtype, ndim, dims)`` (a tuple of them
    for a tuple), its dimensions evaluated with the variables of ``env``."""
    from phasec.ir import TupleStructInfo
    from phasec.ir.text import prim_expr_to_str

    if isinstance(si, TupleStructInfo):
        return tuple(norm_phasec(f, env) for f in si.fields)
    dims = None if si.shape is None else tuple(
        int(eval(prim_expr_to_str(d), {}, dict(env))) for d in si.shape)
    return (si.dtype, si.ndim, dims)


def norm_tvm(ty, env):
    """TVM's type ``ty`` in the form of :func:`norm_phasec`."""
    import tvm

    fields = getattr(ty, "fields", None)
    if fields is not None:
        return tuple(norm_tvm(f, env) for f in fields)
    dims = None
    if ty.shape is not None:
        dims = tuple(int(d) if isinstance(d, tvm.tirx.IntImm) else
                     int(eval(str(d), {}, dict(env))) for d in ty.shape.values)
    return (str(ty.dtype), int(ty.ndim), dims)


def dataflow_bindings(mod):
    """The bindings of ``main``'s blocks (phasec's or TVM's), but the last (`out`)."""
    return [b for blk in mod["main"].body.blocks for b in blk.bindings][:-1]  # not `out`


def flat_leaves(v):
    """The arrays of a nested tuple of VM results, depth first."""
    def leaf(e):
        return isinstance(e, np.ndarray) or hasattr(e, "numpy")
    return [w for e in v for w in ([e] if leaf(e) else flat_leaves(e))]


def bindings_phasec(source, env):
    """name -> (dtype, ndim, dims evaluated at ``env`` or None)."""
    from phasec.ir.text import prim_expr_to_str

    mod = phasec.parse(source)
    out = {}
    for blk in mod["main"].body.blocks:
        for b in blk.bindings:
            si = b.var.struct_info
            dims = None if si.shape is None else tuple(
                int(eval(prim_expr_to_str(d), {}, dict(env))) for d in si.shape)
            out[b.var.name_hint] = (si.dtype, si.ndim, dims)
    return out


def bindings_tvm(source, env):
    """What :func:`bindings_phasec` gives, as TVM 0.27 reads ``source``."""
    import tvm
    from tvm.script import from_source

    mod = from_source(source)
    out = {}
    for blk in mod["main"].body.blocks:
        for b in blk.bindings:
            ty = b.var.ty
            dims = None
            if ty.shape is not None:
                dims = tuple(int(d) if isinstance(d, tvm.tirx.IntImm) else
                             int(eval(str(d), {"T": _TPrint}, dict(env))) for d in ty.shape.values)
            out[b.var.name] = (str(ty.dtype), int(ty.ndim), dims)
    return out


class _TPrint:
    """What TVM's printed dimensions call: T.int64(3) and friends."""

    int64 = int32 = staticmethod(int)


def run_tvm(make, arrays):
    """TVM 0.27 as a reference: main(*arrays) = make(*params), compiled for the CPU."""
    return run_tvm_many([make], arrays)[0]


def run_tvm_many(makes, arrays):
    """TVM 0.27 as a reference for several results of the same arrays at
    once (one compile: TVM's takes seconds a module): main(*arrays) returns
    make(*params) of each of ``makes``."""
    import tvm
    from tvm import relax

    bb = relax.BlockBuilder()
    params = [relax.Var(f"p{i}", relax.TensorType(a.shape, str(a.dtype)))
              for i, a in enumerate(arrays)]
    with bb.function("main", params):
        with bb.dataflow():
            outs = [bb.emit(make(relax.op.nn, *params)) for make in makes]
            out = bb.emit_output(relax.Tuple(outs))
        bb.emit_func_output(out)
    exe = tvm.compile(bb.get(), target="llvm")
    vm = relax.VirtualMachine(exe, tvm.cpu())
    return [r.numpy() for r in vm["main"](*[tvm.runtime.tensor(a) for a in arrays])]

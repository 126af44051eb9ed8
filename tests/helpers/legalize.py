"""Operators lowered to TIR and run on the TIR interpreter: one call against
its numpy reference (``check_call``), and Primitive functions built for the
fused-group lowering (``fused``)."""

from __future__ import annotations

import numpy as np

from phasec.interp.tir import eval_prim_expr, run_prim_func
from phasec.ir import Constant, PrimValue, ShapeExpr, TensorStructInfo, Tuple, tir
from phasec.op import get_op
from phasec.op.legalize import lower_call
from phasec.script.builder import BlockBuilder


def _bind_dims(exprs, values, env):
    for e in exprs:
        si = e.struct_info
        if isinstance(si, TensorStructInfo) and e in values:
            for d, size in zip(si.shape, values[e].shape):
                if isinstance(d, tir.Var):
                    env[d] = size


def _value(expr, values, env):
    if isinstance(expr, Tuple):
        return tuple(_value(f, values, env) for f in expr.fields)
    if isinstance(expr, Constant):
        return expr.data
    if isinstance(expr, ShapeExpr):
        return tuple(int(eval_prim_expr(v, env)) for v in expr.values)
    if isinstance(expr, PrimValue):
        return eval_prim_expr(expr.value, env)
    return values[expr]


def check_call(call, values, hints=(True, False), rtol=1e-5, atol=1e-6, dims=None):
    """Lower ``call``, run it on ``values`` (Var -> array) and compare with the reference."""
    env = dict(dims or {})
    flat = [f for a in call.args for f in (a.fields if isinstance(a, Tuple) else [a])]
    _bind_dims(flat, values, env)
    ref = get_op(call.op.name).reference(*[_value(a, values, env) for a in call.args],
                                         **dict(call.attrs))
    expected = list(ref) if isinstance(ref, tuple) else [np.asarray(ref)]
    for h in hints:
        low = lower_call(call, h)
        ins = [np.asarray(_value(a, values, env)) for a in low.args]
        outs = [np.zeros(e.shape, e.dtype) for e in expected]
        scalars = [int(eval_prim_expr(v, env)) for v in low.tir_vars]
        run_prim_func(low.prim_func, ins + scalars + outs)  # scalars before outputs
        for got, exp in zip(outs, expected):
            assert got.dtype == exp.dtype
            np.testing.assert_allclose(got, exp, rtol=rtol, atol=atol)
    return low


def fused(params, build):
    """A Primitive function whose dataflow block is built by ``build(bb)``."""
    bb = BlockBuilder()
    with bb.function("fused", params, attrs={"Primitive": True}):
        with bb.dataflow():
            gv = bb.emit_output(build(bb))
        bb.emit_func_output(gv)
    return bb.get()["fused"]


"""Operators lowered to TIR and run on the TIR interpreter: typed operands and
random values, one call against its numpy reference (``check_call``),
Primitive functions for the fused-group lowering (``fused``, ``run_fused``),
and the statements of the PrimFuncs they lower to."""

from __future__ import annotations

import numpy as np

from phasec.interp.tir import eval_prim_expr, run_prim_func
from phasec.ir import Constant, PrimValue, ShapeExpr, TensorStructInfo, Tuple, Var, tir
from phasec.op import call_op, get_op
from phasec.op.legalize import lower_call, lower_fused
from phasec.script.builder import BlockBuilder

#: the generator of rand
RNG = np.random.default_rng(2024)


def tvar(name, shape, dtype="float32"):
    """A variable of tensor struct info (shape, dtype)."""
    return Var(name, TensorStructInfo(shape, dtype))


def rand(shape, dtype="float32"):
    """Random integers in [-9, 9] or standard-normal floats."""
    if dtype.startswith("int"):
        return RNG.integers(-9, 10, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


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


def walk(stmt):
    """Every statement under ``stmt``, pre-order."""
    out, stack = [], [stmt]
    while stack:
        s = stack.pop()
        if s is None:
            continue
        out.append(s)
        if isinstance(s, tir.SeqStmt):
            stack.extend(reversed(s.stmts))
        elif isinstance(s, (tir.For, tir.Allocate, tir.LetStmt)):
            stack.append(s.body)
        elif isinstance(s, tir.Block):
            stack.extend([s.body, s.init])
    return out


def nests(func):
    """The top-level statements of ``func`` (its loop nests), under its Allocates."""
    body = func.body
    while isinstance(body, tir.Allocate):
        body = body.body
    return list(body.stmts) if isinstance(body, tir.SeqStmt) else [body]


def run_fused(func, arrays, out_shapes, dtype="float32"):
    """Lower the Primitive function ``func`` and run it: (outputs, the lowering)."""
    low = lower_fused(func)
    outs = [np.zeros(s, dtype) for s in out_shapes]
    ins = [arrays[a] if isinstance(a, Var) else a.data for a in low.args]
    run_prim_func(low.prim_func, ins + outs)
    return outs, low


def depthwise_case(xs, k, rng, **attrs):
    """Random operands of a depthwise conv2d + bias over an NCHW input of
    shape ``xs`` with a ``k`` x ``k`` window (``attrs``: padding, strides,
    dilation as conv2d takes them) and the registry reference of ``conv + b``:
    ``(x, w, b, conv + b)``."""
    c = xs[1]
    x = rng.standard_normal(xs).astype("float32")
    w = rng.standard_normal((c, 1, k, k)).astype("float32")
    b = rng.standard_normal((1, c, 1, 1)).astype("float32")
    two = lambda v: (v, v) if isinstance(v, int) else v  # noqa: E731
    pads = attrs["padding"]
    ref = {"padding": (pads,) * 4 if isinstance(pads, int) else pads,
           "strides": two(attrs.get("strides", 1)), "dilation": two(attrs.get("dilation", 1))}
    return x, w, b, get_op("relax.nn.conv2d").reference(x, w, groups=c, **ref) + b


def lowered_depthwise(xs, k, act, **attrs):
    """The fused group of a depthwise conv2d over an NCHW input of shape
    ``xs`` with a ``k`` x ``k`` window (``attrs`` as conv2d takes them), a
    bias, then ``act`` (``"relu6"``, or a SiLU: ``y * sigmoid(y)``),
    lowered to TIR."""
    c = xs[1]
    d, w, b = tvar("d", xs), tvar("w", (c, 1, k, k)), tvar("b", (1, c, 1, 1))

    def body(bb):
        y = bb.emit(call_op("add", bb.emit(call_op("nn.conv2d", d, w, groups=c, **attrs)), b))
        if act == "relu6":
            return call_op("clip", y, min=0.0, max=6.0)
        return call_op("multiply", y, bb.emit(call_op("sigmoid", y)))
    return lower_fused(fused([d, w, b], body))


def check_depthwise(prim, x, w, b, want, interp):
    """``prim`` (a lowered float32 convolution + bias + epilogue:
    ``lowered_depthwise``, a 1-D or column convolution's) on ``x, w, b``
    against ``want``, compiled with LLVM and, with ``interp``, on the TIR
    interpreter too; the output starts as NaN, so every element must be
    written."""
    from phasec.backend.llvm import compile_prim_funcs
    got = np.full(want.shape, np.nan, "float32")
    compile_prim_funcs({"k": prim})["k"](x, w, b, got)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    if interp:
        again = np.full(want.shape, np.nan, "float32")
        run_prim_func(prim, [x, w, b, again])
        np.testing.assert_allclose(again, want, rtol=1e-4, atol=1e-4)


def check_other_form(xs, k, attrs, alloc, rng):
    """A depthwise conv2d + bias + ReLU6 over ``xs`` (``k`` x ``k``,
    ``attrs``) that a schedule does not take: none of its kernel's buffers
    is named ``alloc``, and its values are the reference's."""
    prim = lowered_depthwise(xs, k, "relu6", **attrs).prim_func
    assert alloc not in {s.buffer.name for s in walk(prim.body)
                         if isinstance(s, tir.Allocate)}
    x, w, b, y = depthwise_case(xs, k, rng, **attrs)
    check_depthwise(prim, x, w, b, np.minimum(np.maximum(y, 0), 6), False)


def check_infinities_3x3s2(prim, xs, rows, rng):
    """``prim`` (a lowered ``lowered_depthwise`` of 6 channels, 3x3, stride
    2, padding 1, relu6) on an input with infinities at rows' ends: channel
    0 at the end of row ``rows[0]``, channel 1 at the start of ``rows[1]``,
    channel 2 at the end of the first row and the start of the last; and
    infinite weights at the padding taps (channels 3 and 4). A tap past a
    row's end must read a zero, not the neighbouring row's element, and an
    infinite weight times the padding is NaN, as in the padded convolution:
    against the registry's reference (on LLVM and the TIR interpreter)."""
    H, W = xs[2], xs[3]
    x, w, b, _ = depthwise_case(xs, 3, rng, padding=1, strides=2)
    x[:, 0, rows[0], W - 1] = np.inf
    x[:, 1, rows[1], 0] = -np.inf
    x[:, 2, 0, W - 1] = np.inf              # the first and last rows
    x[:, 2, H - 1, 0] = -np.inf
    w[3, 0, 0, 0] = np.inf                  # the left pad and the top row's
    w[4, 0, 2, 2] = -np.inf                 # the right pad and the bottom row's
    with np.errstate(invalid="ignore"):  # (an infinite weight times the padding: NaN)
        ref = get_op("relax.nn.conv2d").reference(x, w, groups=6, padding=(1,) * 4,
                                                  strides=(2, 2)) + b
    assert np.isnan(ref[:, 3, 0, :]).all() and np.isnan(ref[:, 3, :, 0]).all()
    assert np.isfinite(ref[:, 0, :, 0]).all() and np.isfinite(ref[:, 1, :, -1]).all()
    check_depthwise(prim, x, w, b, np.minimum(np.maximum(ref, 0), 6), True)

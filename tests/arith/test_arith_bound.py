"""Index simplification with loop ranges (phasec.arith.bound), and what it
buys: fused layout chains (a channel shuffle) read their input directly.

The references are independent: the original and the simplified index
evaluated with Python integers at every point of the ranges; numpy and
onnxruntime for the kernels.
"""

from __future__ import annotations

import itertools

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import phasec
from phasec.frontend.onnx import from_onnx
from phasec.ir import tir as T
from phasec.arith.bound import simplify_bounded
from phasec.op._lowering import _flat_index, _unravel
from phasec.ir.tir import BinaryOp, IntImm, Var

_PY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
       "//": lambda a, b: a // b, "%": lambda a, b: a % b, "min": min, "max": max}


def _eval(e, env):
    """Python-integer value of an index expression (floor // and %, as TIR)."""
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, Var):
        return env[e.name]
    return _PY[e.op](_eval(e.lhs, env), _eval(e.rhs, env))


def _count_divs(e) -> int:
    stack, n = [e], 0
    while stack:
        x = stack.pop()
        if isinstance(x, BinaryOp):
            n += x.op in ("//", "%")
            stack += [x.lhs, x.rhs]
    return n


def _i(v):
    return IntImm(v, "int64")


def _check_everywhere(expr, ranges):
    vars_ = {name: Var(name) for name in ranges}
    e = expr(vars_)
    bounds = {id(vars_[n]): (lo, hi) for n, (lo, hi) in ranges.items()}
    s = simplify_bounded(e, bounds)
    names = list(ranges)
    for point in itertools.product(*(range(lo, hi + 1) for lo, hi in ranges.values())):
        env = dict(zip(names, point))
        assert _eval(s, env) == _eval(e, env), (env, s)
    return s


def _shuffle_index(c, h, w, channels, groups, height, width):
    """The input index a fused reshape -> permute_dims -> reshape (channel
    shuffle) reads, built with the reshape legalization's own helpers."""
    shape = [_i(channels), _i(height), _i(width)]
    flat = _flat_index([c, h, w], shape)
    g, n, y, x = _unravel(flat, [_i(channels // groups), _i(groups), _i(height), _i(width)])
    flat2 = _flat_index([n, g, y, x], [_i(groups), _i(channels // groups), _i(height), _i(width)])
    return _unravel(flat2, shape)


@pytest.mark.parametrize("channels,groups,height,width", [
    (12, 3, 5, 7), (8, 4, 3, 3), (10, 2, 1, 13), (21, 7, 2, 5)])
def test_channel_shuffle_index_is_direct(channels, groups, height, width):
    ranges = {"c": (0, channels - 1), "h": (0, height - 1), "w": (0, width - 1)}
    for k in range(3):
        s = _check_everywhere(
            lambda v: _shuffle_index(v["c"], v["h"], v["w"], channels, groups, height, width)[k],
            ranges)
        # the spatial indices come back as the loop variables; the channel
        # keeps one quotient and one remainder
        assert _count_divs(s) <= (2 if k == 0 else 0), s


@pytest.mark.parametrize("expr,ranges", [
    # quotient of a remainder-free split, with a constant
    (lambda v: (v["a"] * 6 + v["b"] * 2 + 3) // 2, {"a": (0, 4), "b": (0, 2)}),
    # remainder of a sum whose range spans the divisor: kept
    (lambda v: (v["a"] + v["b"]) % 5, {"a": (0, 4), "b": (0, 4)}),
    # negative coefficients and ranges
    (lambda v: (v["a"] * -4 + v["b"]) // 4, {"a": (-3, 3), "b": (0, 3)}),
    (lambda v: (v["a"] * -4 + v["b"]) % 4, {"a": (-3, 3), "b": (0, 3)}),
    # k divides d: (8q + r) // 24 == q // 3
    (lambda v: (v["q"] * 8 + v["r"]) // 24, {"q": (0, 11), "r": (0, 7)}),
    (lambda v: (v["q"] * 8 + v["r"]) % 24, {"q": (0, 11), "r": (0, 7)}),
    # nested, with min/max
    (lambda v: T.BinaryOp("max", (v["a"] * 3 + v["b"]) // 3, _i(1)) % 2,
     {"a": (0, 5), "b": (0, 2)}),
    # a prime extent: nothing to resolve, still equal
    (lambda v: (v["a"] * 7 + v["b"]) // 5 % 3, {"a": (0, 6), "b": (0, 6)}),
])
def test_simplified_equals_original_everywhere(expr, ranges):
    _check_everywhere(expr, ranges)


def test_unknown_ranges_are_left_alone():
    a, n = Var("a"), Var("n")
    e = (a * 4 + n) // 4  # n has no range (a symbolic dimension)
    s = simplify_bounded(e, {id(a): (0, 9)})
    for av, nv in itertools.product(range(10), range(-9, 9)):
        assert _eval(s, {"a": av, "n": nv}) == _eval(e, {"a": av, "n": nv})


# ---------------------------------------------------------------------------
# Kernels

def _shuffle_model(shape, groups, dims=None):
    n, c, h, w = shape
    dims = dims or shape
    nodes = [
        helper.make_node("Reshape", ["x", "s1"], ["a"]),
        helper.make_node("Transpose", ["a"], ["b"], perm=[0, 2, 1, 3, 4]),
        helper.make_node("Reshape", ["b", "s2"], ["y"]),
    ]
    inits = [helper.make_tensor("s1", TensorProto.INT64, [5], [n, groups, c // groups, h, w]),
             helper.make_tensor("s2", TensorProto.INT64, [4], [n, c, h, w])]
    graph = helper.make_graph(nodes, "shuffle",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                              initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("shape,groups", [
    ((1, 240, 28, 28), 3), ((2, 12, 7, 5), 4), ((1, 14, 3, 13), 7), ((1, 6, 1, 1), 2)])
def test_channel_shuffle_kernel(shape, groups):
    model = _shuffle_model(shape, groups)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    n, c, h, w = shape
    ref = x.reshape(n, groups, c // groups, h, w).transpose(0, 2, 1, 3, 4).reshape(shape)
    np.testing.assert_array_equal(want, ref)
    exe = phasec.build(from_onnx(model))
    got = np.asarray(phasec.VirtualMachine(exe)["main"](x))
    np.testing.assert_array_equal(got, ref)
    # one kernel, whose loads divide only to find the channel
    (kernel,) = [f for name, f in exe.prim_funcs.items()]
    loads = [e for e in _exprs(kernel.body) if isinstance(e, T.BufferLoad)]
    assert loads and all(sum(_count_divs(i) for i in ld.indices) <= 2 for ld in loads), loads


def _exprs(stmt):
    """Every expression reachable from a PrimFunc body."""
    out, stack = [], [stmt]
    seen = set()
    while stack:
        s = stack.pop()
        if s is None or id(s) in seen:
            continue
        seen.add(id(s))
        if isinstance(s, T.PrimExpr):
            out.append(s)
        for f in getattr(type(s), "__dataclass_fields__", {}):
            v = getattr(s, f, None)
            if isinstance(v, (list, tuple)):
                stack.extend(x for x in v if hasattr(x, "__dataclass_fields__"))
            elif hasattr(v, "__dataclass_fields__"):
                stack.append(v)
    return out


def test_channel_shuffle_symbolic_batch():
    """A symbolic batch has no range: the kernel stays correct."""
    model = _shuffle_model((1, 12, 5, 3), 3, dims=["n", 12, 5, 3])
    model.graph.node[0].input[1] = "s1"
    # the reshape targets keep a static batch of 1, so feed a batch of 1
    x = np.random.default_rng(2).standard_normal((1, 12, 5, 3)).astype(np.float32)
    ref = x.reshape(1, 3, 4, 5, 3).transpose(0, 2, 1, 3, 4).reshape(1, 12, 5, 3)
    got = np.asarray(phasec.VirtualMachine(phasec.build(from_onnx(model)))["main"](x))
    np.testing.assert_array_equal(got, ref)


# ---------------------------------------------------------------------------
# Clamps and conditions

@pytest.mark.parametrize("expr,ranges", [
    # a clamp that never clamps, and one that does
    (lambda v: T.BinaryOp("max", T.BinaryOp("min", v["a"] * 2 + v["r"], _i(54)), _i(0)),
     {"a": (0, 26), "r": (0, 2)}),
    (lambda v: T.BinaryOp("max", T.BinaryOp("min", v["a"] * 2 + v["r"] - 1, _i(54)), _i(0)),
     {"a": (0, 27), "r": (0, 2)}),
])
def test_clamps_resolve_only_when_the_ranges_allow(expr, ranges):
    s = _check_everywhere(expr, ranges)
    if ranges["a"][1] == 26:
        assert "min" not in str(s) and "max" not in str(s), s


def _cond(op, a, b):
    return BinaryOp(op, a, b)


@pytest.mark.parametrize("make,expected", [
    (lambda v: _cond(">=", v["a"] * 2 + v["r"], _i(0)), True),
    (lambda v: _cond("<", v["a"] * 2 + v["r"], _i(55)), True),
    (lambda v: _cond("<", v["a"] * 2 + v["r"] - 1, _i(0)), None),   # true only at a = r = 0
    (lambda v: _cond("and", _cond(">=", v["a"], _i(0)), _cond("<", v["r"], _i(3))), True),
    (lambda v: _cond("or", _cond(">", v["a"], _i(40)), _cond("==", v["r"] - v["r"], _i(0))),
     True),
    (lambda v: _cond("!=", v["a"] - v["a"], _i(0)), False),
    (lambda v: _cond("<=", v["a"], v["r"] + 30), True),
])
def test_prove_bounded_agrees_with_every_point(make, expected):
    from phasec.arith.bound import prove_bounded

    ranges = {"a": (0, 26), "r": (0, 2)}
    vars_ = {name: Var(name) for name in ranges}
    cond = make(vars_)
    known = prove_bounded(cond, {id(vars_[n]): r for n, r in ranges.items()})
    _ops = {**_PY, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b, ">": lambda a, b: a > b,
            "<=": lambda a, b: a <= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
            "and": lambda a, b: a and b, "or": lambda a, b: a or b}

    def ev(e, env):
        if isinstance(e, IntImm):
            return e.value
        if isinstance(e, Var):
            return env[e.name]
        return _ops[e.op](ev(e.lhs, env), ev(e.rhs, env))
    values = {bool(ev(cond, {"a": a, "r": r}))
              for a in range(ranges["a"][0], ranges["a"][1] + 1)
              for r in range(ranges["r"][0], ranges["r"][1] + 1)}
    assert known is expected
    assert values == ({True, False} if expected is None else {expected})

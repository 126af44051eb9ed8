"""Elementwise ONNX operators: arithmetic, comparisons, logic, math
functions, activations, Cast, Clip, Where.

ONNX broadcasting (opset 7+) is numpy's, as phasec's binary operators.
Opset 6 models spell broadcasting with the ``broadcast``/``axis``
attributes: the second operand is aligned to the first at ``axis`` (by
default at the trailing dimensions), which a reshape expresses.
"""

from __future__ import annotations

import numpy as np

from phasec.frontend.errors import FrontendError
from phasec.ir.expr import DataTypeImm, Tuple
from phasec.frontend.onnx._context import NodeContext, Unsupported, Value
from phasec.frontend.onnx._dtypes import narrow_format, onnx_dtype, type_name
from phasec.frontend.onnx.ops_narrow import cast_narrow
from phasec.frontend.onnx._registry import converter

__all__ = ["scalar", "onnx_to_dtype"]


def scalar(ctx: NodeContext, value: float | int | bool, like: Value | str) -> np.ndarray:
    """A 0-d constant of ``like``'s dtype (or the dtype named by ``like``)."""
    dtype = like if isinstance(like, str) else ctx.dtype(like)
    return np.asarray(value, dtype=dtype)


def onnx_to_dtype(elem_type: int, what: str) -> str:
    dtype = onnx_dtype(int(elem_type))
    if dtype is None:
        raise Unsupported(f"{what} {type_name(int(elem_type))} is not supported")
    return dtype


def _float_only(ctx: NodeContext, v: Value) -> None:
    if not ctx.dtype(v).startswith("float"):
        raise Unsupported(f"dtype {ctx.dtype(v)} (phasec computes {ctx.op_type} on floats)")


# ---------------------------------------------------------------------------
# unary
# ---------------------------------------------------------------------------

_TRIG = {"Sin": "sin", "Cos": "cos", "Tan": "tan", "Asin": "asin", "Acos": "acos",
         "Atan": "atan", "Sinh": "sinh", "Cosh": "cosh", "Asinh": "asinh", "Acosh": "acosh",
         "Atanh": "atanh"}
_UNARY = {
    "Abs": "abs", "Neg": "negative", "Exp": "exp", "Log": "log", "Sqrt": "sqrt",
    "Tanh": "tanh", "Sigmoid": "sigmoid", "Erf": "erf", "Floor": "floor", "Ceil": "ceil",
    "Round": "round", "Not": "logical_not", "Relu": "nn.relu", **_TRIG,
}
_FLOAT_UNARY = {"Exp", "Log", "Sqrt", "Tanh", "Sigmoid", "Erf", *_TRIG}


@converter(*_UNARY)
def _unary(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    if ctx.op_type in _FLOAT_UNARY:
        _float_only(ctx, x)
    if ctx.op_type in ("Abs", "Neg", "Relu") and ctx.dtype(x).startswith("uint"):
        if ctx.op_type == "Neg":
            raise Unsupported("Neg of an unsigned integer")
        return x  # |x| and max(x, 0) of unsigned values are x
    if ctx.op_type in ("Floor", "Ceil", "Round") and not ctx.dtype(x).startswith("float"):
        return x
    return ctx.emit(_UNARY[ctx.op_type], x)


@converter("Identity")
def _identity(ctx: NodeContext) -> Value:
    return ctx.input(0)


@converter("Reciprocal")
def _reciprocal(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    _float_only(ctx, x)
    return ctx.emit("divide", scalar(ctx, 1, x), x)


@converter("Sign")
def _sign(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    zero, one = scalar(ctx, 0, x), scalar(ctx, 1, x)
    pos = ctx.emit("greater", x, zero)
    if ctx.dtype(x).startswith("uint"):
        return ctx.emit("where", pos, one, zero)
    neg = ctx.emit("less", x, zero)
    # (NaN is neither: a float's sign of NaN is NaN, as ORT's; it is x itself)
    rest = x if ctx.dtype(x).startswith(("float", "bfloat")) else zero
    rest = ctx.emit("where", ctx.emit("equal", x, zero), zero, rest) if rest is x else rest
    return ctx.emit("where", pos, one, ctx.emit("where", neg, scalar(ctx, -1, x), rest))


@converter("IsNaN")
def _isnan(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    _float_only(ctx, x)
    return ctx.emit("not_equal", x, x)


@converter("IsInf")
def _isinf(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    _float_only(ctx, x)
    pos, neg = ctx.attr("detect_positive", 1), ctx.attr("detect_negative", 1)
    p = ctx.emit("equal", x, scalar(ctx, np.inf, x))
    n = ctx.emit("equal", x, scalar(ctx, -np.inf, x))
    if pos and neg:
        return ctx.emit("logical_or", p, n)
    if pos:
        return p
    if neg:
        return n
    return ctx.emit("logical_and", p, n)  # detects nothing: always false


# ---------------------------------------------------------------------------
# binary
# ---------------------------------------------------------------------------

_BINARY = {
    "Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide",
    "And": "logical_and", "Or": "logical_or", "Xor": "not_equal",
    "Equal": "equal", "Less": "less", "LessOrEqual": "less_equal", "Greater": "greater",
    "GreaterOrEqual": "greater_equal",
}


def legacy_broadcast(ctx: NodeContext, a: Value, b: Value) -> Value:
    """Opset < 7 ``broadcast=1, axis=k``: align ``b`` with ``a`` at axis ``k``."""
    if ctx.opset >= 7 or not ctx.attr("broadcast", 0):
        return b
    axis = ctx.attr("axis")
    nb, na = ctx.ndim(b), ctx.ndim(a)
    if axis is None or nb == 0:
        return b
    axis = axis + na if axis < 0 else axis
    trailing = na - axis - nb
    if trailing <= 0:
        return b
    return ctx.emit("reshape", b, tuple(ctx.shape(b)) + (1,) * trailing)


@converter(*_BINARY)
def _binary(ctx: NodeContext) -> Value:
    a, b = ctx.input(0), ctx.input(1)
    b = legacy_broadcast(ctx, a, b)
    op = _BINARY[ctx.op_type]
    if ctx.op_type == "Div" and ctx.dtype(a) == "bool":
        raise Unsupported("Div of bool tensors")
    if ctx.op_type in ("Add", "Sub", "Mul") and ctx.dtype(a) == "bool":
        raise Unsupported(f"{ctx.op_type} of bool tensors")
    if ctx.op_type == "Div":
        _no_integer_zero_divisor(ctx, b)
    return ctx.emit(op, a, b)


def _no_integer_zero_divisor(ctx: NodeContext, b: Value) -> None:
    """A known integer divisor holding 0 is an error at import, as in ONNX
    Runtime. (One computed at run time is the run's error, a
    DivisionByZeroError: phasec's integer division never yields 0 for it.)"""
    if (isinstance(b, np.ndarray) and b.dtype != object and b.dtype.kind in "iu"
            and not np.all(b != 0)):
        raise FrontendError(f"integer {ctx.op_type} by zero (the divisor is a constant "
                            "holding 0)")


@converter("Pow")
def _pow(ctx: NodeContext) -> Value:
    a, b = ctx.input(0), ctx.input(1)
    b = legacy_broadcast(ctx, a, b)
    dt = ctx.dtype(a)
    if not dt.startswith("float") and ctx.dtype(b).startswith("float"):
        # an integer base to a float exponent: C's pow in double, the result
        # converted back (4 ** 0.5 is 2, as in ONNX Runtime; a result out of
        # the integer type's range, 0 ** -2.5 or (-3) ** 0.5, is undefined)
        wide = ctx.emit("power", ctx.emit("astype", a, dtype="float64"),
                        ctx.emit("astype", b, dtype="float64"))
        return ctx.emit("astype", wide, dtype=dt)
    if ctx.dtype(b) != dt:
        b = ctx.emit("astype", b, dtype=dt)
    return ctx.emit("power", a, b)


@converter("Mod")
def _mod(ctx: NodeContext) -> Value:
    a, b = ctx.input(0), ctx.input(1)
    dt = ctx.dtype(a)
    fmod = ctx.attr("fmod", 0)
    if fmod not in (0, 1):
        raise FrontendError(f"attribute fmod={fmod!r}: must be 0 or 1")
    if dt.startswith("float") and not fmod and ctx.opset < 28:
        raise Unsupported("fmod=0 on floats, which ONNX defines from opset 28 only")
    if dt.startswith("float"):
        q = ctx.emit("divide", a, b)
        if fmod:  # C fmod: truncate the quotient
            q = ctx.emit("where", ctx.emit("less", q, scalar(ctx, 0, dt)),
                         ctx.emit("ceil", q), ctx.emit("floor", q))
        else:
            q = ctx.emit("floor", q)
        r = ctx.emit("subtract", a, ctx.emit("multiply", q, b))
        if _finite(b):
            return r
        # a finite a modulo +-inf: fmod gives a; Python's mod gives a when a has
        # b's sign (or is 0) and b otherwise (the formula above gives nan)
        inf = scalar(ctx, np.inf, dt)
        b_inf = ctx.emit("equal", ctx.emit("abs", b), inf)
        a_fin = ctx.emit("less", ctx.emit("abs", a), inf)
        if fmod:
            keep = a
        else:
            same = ctx.emit("logical_or", ctx.emit("greater", ctx.emit("multiply", a, b),
                                                   scalar(ctx, 0, dt)),
                            ctx.emit("equal", a, scalar(ctx, 0, dt)))
            keep = ctx.emit("where", same, a, b)
        return ctx.emit("where", ctx.emit("logical_and", b_inf, a_fin), keep, r)
    _no_integer_zero_divisor(ctx, b)
    # integers: the remainder with the dividend's sign (fmod: C's %, R.mod) or
    # the divisor's (Python/numpy mod, R.floor_mod); a divisor holding 0 at
    # run time is the run's error, as in ONNX Runtime
    return ctx.emit("mod" if fmod else "floor_mod", a, b)


def _finite(v: Value) -> bool:
    return isinstance(v, np.ndarray) and v.dtype != object and bool(np.all(np.isfinite(v)))


_VARIADIC = {"Sum": "add", "Max": "maximum", "Min": "minimum", "Mean": "add"}


@converter(*_VARIADIC)
def _variadic(ctx: NodeContext) -> Value:
    vals = [ctx.input(i) for i in range(len(ctx.inputs))]
    if not vals:
        raise Unsupported("no inputs")
    dt = ctx.dtype(vals[0])
    if dt == "bool":
        raise Unsupported(f"{ctx.op_type} of bool tensors")
    acc = vals[0]
    for v in vals[1:]:
        acc = ctx.emit(_VARIADIC[ctx.op_type], acc, v)
    if ctx.op_type == "Mean":
        if len(vals) == 1:
            return acc
        acc = ctx.emit("divide", acc, scalar(ctx, len(vals), dt))
    return acc


# ---------------------------------------------------------------------------
# activations
# ---------------------------------------------------------------------------

@converter("LeakyRelu")
def _leaky_relu(ctx: NodeContext) -> Value:
    return ctx.emit("nn.leakyrelu", ctx.input(0), alpha=float(ctx.attr("alpha", 0.01)))


@converter("PRelu")
def _prelu(ctx: NodeContext) -> Value:
    x, slope = ctx.input(0), ctx.input(1)
    slope = legacy_broadcast(ctx, x, slope)
    n, sdims = ctx.ndim(x), ctx.shape(slope)
    if ctx.opset < 7 and len(sdims) == 1 and n > 2 and sdims[0] != 1:
        # opset 6: a 1-D slope holds one value per channel (axis 1)
        slope = ctx.emit("reshape", slope, (sdims[0],) + (1,) * (n - 2))
    neg = ctx.emit("less", x, scalar(ctx, 0, x))
    return ctx.emit("where", neg, ctx.emit("multiply", x, slope), x)


def _expm1_scaled(ctx: NodeContext, x: Value, alpha: float) -> Value:
    """alpha * (exp(x) - 1)"""
    e = ctx.emit("subtract", ctx.emit("exp", x), scalar(ctx, 1, x))
    return ctx.emit("multiply", e, scalar(ctx, alpha, x))


@converter("Elu")
def _elu(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    _float_only(ctx, x)
    neg = ctx.emit("less", x, scalar(ctx, 0, x))
    return ctx.emit("where", neg, _expm1_scaled(ctx, x, float(ctx.attr("alpha", 1.0))), x)


@converter("Selu")
def _selu(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    _float_only(ctx, x)
    alpha = float(ctx.attr("alpha", 1.67326319217681884765625))
    gamma = float(ctx.attr("gamma", 1.05070102214813232421875))
    pos = ctx.emit("greater", x, scalar(ctx, 0, x))
    y = ctx.emit("where", pos, x, _expm1_scaled(ctx, x, alpha))
    return ctx.emit("multiply", y, scalar(ctx, gamma, x))


@converter("Celu")
def _celu(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    _float_only(ctx, x)
    alpha = float(ctx.attr("alpha", 1.0))
    inner = _expm1_scaled(ctx, ctx.emit("divide", x, scalar(ctx, alpha, x)), alpha)
    zero = scalar(ctx, 0, x)
    return ctx.emit("add", ctx.emit("maximum", x, zero),
                    ctx.emit("minimum", inner, zero))


@converter("HardSigmoid")
def _hard_sigmoid(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    _float_only(ctx, x)
    return _hard_sigmoid_of(ctx, x, float(ctx.attr("alpha", 0.2)), float(ctx.attr("beta", 0.5)))


def _hard_sigmoid_of(ctx: NodeContext, x: Value, alpha: float, beta: float) -> Value:
    y = ctx.emit("add", ctx.emit("multiply", x, scalar(ctx, alpha, x)), scalar(ctx, beta, x))
    return ctx.emit("clip", y, min=0.0, max=1.0)


@converter("HardSwish")
def _hard_swish(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    _float_only(ctx, x)
    return ctx.emit("multiply", x, _hard_sigmoid_of(ctx, x, 1.0 / 6.0, 0.5))


@converter("Softplus")
def _softplus(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    _float_only(ctx, x)
    return _softplus_of(ctx, x)


def _softplus_of(ctx: NodeContext, x: Value) -> Value:
    # log(1 + exp(x)) computed stably: max(x, 0) + log(1 + exp(-|x|))
    zero, one = scalar(ctx, 0, x), scalar(ctx, 1, x)
    t = ctx.emit("exp", ctx.emit("negative", ctx.emit("abs", x)))
    return ctx.emit("add", ctx.emit("maximum", x, zero), ctx.emit("log", ctx.emit("add", t, one)))


@converter("Softsign")
def _softsign(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    _float_only(ctx, x)
    return ctx.emit("divide", x, ctx.emit("add", ctx.emit("abs", x), scalar(ctx, 1, x)))


@converter("ThresholdedRelu")
def _thresholded_relu(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    alpha = float(ctx.attr("alpha", 1.0))
    return ctx.emit("where", ctx.emit("greater", x, scalar(ctx, alpha, x)), x, scalar(ctx, 0, x))


@converter("Mish")
def _mish(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    _float_only(ctx, x)
    return ctx.emit("multiply", x, ctx.emit("tanh", _softplus_of(ctx, x)))


@converter("Swish")
def _swish(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    _float_only(ctx, x)
    alpha = float(ctx.attr("alpha", 1.0))
    ax = x if alpha == 1.0 else ctx.emit("multiply", x, scalar(ctx, alpha, x))
    return ctx.emit("multiply", x, ctx.emit("sigmoid", ax))


@converter("Gelu")
def _gelu(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    _float_only(ctx, x)
    approx = ctx.attr("approximate", "none")
    if approx not in ("none", "tanh"):
        raise Unsupported(f"attribute approximate={approx!r}")
    return ctx.emit("nn.gelu_tanh" if approx == "tanh" else "nn.gelu", x)


@converter("Shrink")
def _shrink(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    bias, lambd = float(ctx.attr("bias", 0.0)), float(ctx.attr("lambd", 0.5))
    if not ctx.dtype(x).startswith("float"):
        raise Unsupported(f"dtype {ctx.dtype(x)}")
    lo = ctx.emit("less", x, scalar(ctx, -lambd, x))
    hi = ctx.emit("greater", x, scalar(ctx, lambd, x))
    zero = scalar(ctx, 0, x)
    return ctx.emit("where", lo, ctx.emit("add", x, scalar(ctx, bias, x)),
                    ctx.emit("where", hi, ctx.emit("subtract", x, scalar(ctx, bias, x)), zero))


# ---------------------------------------------------------------------------
# Cast, Clip, Where
# ---------------------------------------------------------------------------

@converter("Cast", since=6)  # before opset 6, "to" was a string
def _cast(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    to = ctx.attr("to")
    if to is None:
        raise Unsupported("missing attribute 'to'")
    fmt = narrow_format(int(to))
    if fmt is not None or ctx.node.input[0] in ctx.formats:
        dtype = None if fmt is not None else onnx_to_dtype(to, "cast to element type")
        return cast_narrow(ctx, ctx.input(0), fmt, dtype, _cast_to)
    dtype = onnx_to_dtype(to, "cast to element type")
    _no_saturate(ctx)
    return _cast_to(ctx, x, dtype)


def _no_saturate(ctx: NodeContext) -> None:
    if ctx.attr("saturate", 1) == 0:  # (the float 8 types are not supported)
        raise FrontendError("attribute saturate=0 is only for casts to float 8 types (as ORT)")


def _cast_to(ctx: NodeContext, x: Value, dtype: str) -> Value:
    if ctx.dtype(x) == dtype:
        return x
    src = ctx.dtype(x)
    if dtype == "bool" and src != "bool":
        return ctx.emit("not_equal", x, scalar(ctx, 0, x))
    return ctx.emit("astype", x, dtype=dtype)


@converter("CastLike")
def _cast_like(ctx: NodeContext) -> Value:
    fmt = ctx.formats.get(ctx.node.input[1])
    if fmt is not None or ctx.node.input[0] in ctx.formats:
        return cast_narrow(ctx, ctx.input(0), fmt, ctx.dtype(ctx.input(1)), _cast_to)
    _no_saturate(ctx)
    return _cast_to(ctx, ctx.input(0), ctx.dtype(ctx.input(1)))


@converter("BitCast", since=26)
def _bitcast(ctx: NodeContext) -> Value:
    """The same bits read as another type of the same width: ``R.memory.view``
    with the new dtype (no copy; the VM views the buffer), or numpy's
    ``view`` on a value known at import."""
    x = ctx.input(0)
    to = ctx.attr("to")
    if to is None:
        raise FrontendError("BitCast needs the attribute 'to'")
    if narrow_format(int(to)) is not None:
        raise Unsupported(f"BitCast to {type_name(int(to))}")
    dtype = onnx_to_dtype(to, "BitCast to element type")
    src = ctx.dtype(x)
    if np.dtype(src).itemsize != np.dtype(dtype).itemsize:
        raise FrontendError(f"BitCast from {src} to {dtype}: the types differ in width")
    if src == dtype:
        return x
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x).view(dtype)
    return ctx.emit("memory.view", x, Tuple([]), DataTypeImm(dtype), Tuple([]))


@converter("Clip")
def _clip(ctx: NodeContext) -> Value:
    x = ctx.input(0)
    dt = ctx.dtype(x)
    if ctx.opset < 11:
        lo: Value | None = scalar(ctx, ctx.attr("min", -np.inf), dt) if "min" in ctx.attrs else None
        hi: Value | None = scalar(ctx, ctx.attr("max", np.inf), dt) if "max" in ctx.attrs else None
    else:
        lo, hi = ctx.optional(1), ctx.optional(2)
    if dt == "bool":
        raise Unsupported("Clip of bool tensors")
    lo, hi = (None if v is None else _clip_bound(ctx, v, what) for v, what in
              ((lo, "min"), (hi, "max")))
    # max(x, lo) then min(., hi): a NaN input stays NaN, and lo > hi gives hi (ONNX)
    if lo is not None:
        x = ctx.emit("maximum", x, lo)
    if hi is not None:
        x = ctx.emit("minimum", x, hi)
    return x


def _clip_bound(ctx: NodeContext, v: Value, what: str) -> Value:
    """Clip's min or max: one element (ONNX Runtime also takes shape (1,)),
    as a scalar, so it does not broadcast the result."""
    dims = ctx.shape(v)
    if dims == []:
        return v
    if dims != [1]:
        raise FrontendError(f"Clip's {what} must be a scalar, not of shape {tuple(dims)}")
    return ctx.emit("reshape", v, ())


@converter("Where")
def _where(ctx: NodeContext) -> Value:
    return ctx.emit("where", ctx.input(0), ctx.input(1), ctx.input(2))


@converter("BitwiseNot")
def _bitwise_not(ctx: NodeContext) -> Value:
    return ctx.emit("bitwise_not", ctx.input(0))


_BITWISE = {"BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor"}


@converter(*_BITWISE)
def _bitwise(ctx: NodeContext) -> Value:
    return ctx.emit(_BITWISE[ctx.op_type], ctx.input(0), ctx.input(1))


@converter("BitShift")
def _bit_shift(ctx: NodeContext) -> Value:
    direction = ctx.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise Unsupported(f"attribute direction={direction!r}")
    return ctx.emit("left_shift" if direction == "LEFT" else "right_shift", ctx.input(0),
                    ctx.input(1))


@converter("SwiGLU", since=28)
def _swiglu(ctx: NodeContext) -> Value:
    a, b = ctx.input(0), ctx.input(1)
    _float_only(ctx, a)
    alpha = float(ctx.attr("alpha", 1.0))
    ax = a if alpha == 1.0 else ctx.emit("multiply", a, scalar(ctx, alpha, a))
    return ctx.emit("multiply", ctx.emit("multiply", a, ctx.emit("sigmoid", ax)), b)


@converter("Det", since=11)
def _det(ctx: NodeContext) -> Value:
    """The determinant of each matrix (``R.det``; float16 computed in float32)."""
    x = ctx.input(0)
    dims = ctx.shape(x)
    if len(dims) < 2:
        raise FrontendError(f"Det needs [..., M, M], got shape {tuple(dims)}")
    if isinstance(dims[-1], int) and isinstance(dims[-2], int) and dims[-1] != dims[-2]:
        raise FrontendError(f"Det needs square matrices, got shape {tuple(dims)}")
    dtype = ctx.dtype(x)
    if dtype not in ("float16", "float32", "float64"):
        raise Unsupported(f"Det on {dtype}")
    if dtype == "float16":
        return ctx.emit("astype", ctx.emit("det", ctx.emit("astype", x, dtype="float32")),
                        dtype="float16")
    return ctx.emit("det", x)

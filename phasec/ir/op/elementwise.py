"""Elementwise operators: binary arithmetic and comparisons (numpy
broadcasting), unary math, and activations.

Reference semantics (numpy, results in the operands' dtype):

* ``divide`` on integers truncates toward zero (C / TIR ``/``); on floats it is
  true division. ``floor_divide`` is ``floor(a / b)`` (numpy ``//``).
* ``round`` rounds half to even (numpy ``round``, LLVM ``nearbyint``).
* ``maximum``/``minimum`` propagate NaN (numpy).
* Comparisons return ``bool``; ``logical_and``/``logical_or``/``logical_not``
  return the operands' dtype (``bool`` for bool operands) holding 0/1.
* Float math (exp, log, sqrt, rsqrt, tanh, sigmoid, erf, gelu, gelu_tanh,
  silu, softmax...) require a float dtype.
* Arithmetic (add, subtract, multiply, divide, floor_divide, maximum,
  minimum, negative, relu, matmul, conv2d, max_pool2d) does not take bool
  tensors (:data:`~phasec.ir.op._common.NO_BOOL_OPS`): use the logical
  operators, or ``R.astype`` first. The reductions do, with a bool result
  as TVM's inference: sum and max are "any", prod and min are "all".
"""

from __future__ import annotations

import math

import numpy as np

from ..struct_info import TensorStructInfo
from ._common import (
    OpPattern, binary_dtype, broadcast, define, err, tensor_arg,
)

__all__ = ["BINARY_ARITH", "COMPARISONS", "UNARY"]


def _out(result, dtype) -> np.ndarray:
    return np.asarray(result).astype(dtype, copy=False)


def _binary_ref(fn):
    def ref(a, b):
        a, b = np.asarray(a), np.asarray(b)
        with np.errstate(all="ignore"):
            return _out(fn(a, b), np.result_type(a, b))
    return ref


def _compare_ref(fn):
    def ref(a, b):
        return _out(fn(np.asarray(a), np.asarray(b)), np.bool_)
    return ref


def _truncdiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.floating) or np.issubdtype(b.dtype, np.floating):
        return np.true_divide(a, b)
    safe_b = np.where(b == 0, 1, b)
    q = np.floor_divide(a, safe_b)
    # floor -> trunc: add one where the exact quotient was negative and inexact
    adjust = (np.remainder(a, safe_b) != 0) & ((a < 0) != (safe_b < 0))
    return np.where(b == 0, 0, q + adjust)


def _floordiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.floating) or np.issubdtype(b.dtype, np.floating):
        return np.floor(np.true_divide(a, b))
    safe_b = np.where(b == 0, 1, b)
    return np.where(b == 0, 0, np.floor_divide(a, safe_b))


def _power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.integer) and np.issubdtype(b.dtype, np.integer):
        # Integer powers with negative exponents are 0 (except bases 1, -1).
        neg = b < 0
        res = np.power(a, np.where(neg, 0, b))
        inv = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0))
        return np.where(neg, inv, res)
    return np.power(a, b)


#: name -> numpy implementation of binary arithmetic ops
BINARY_ARITH = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": _truncdiv,
    "floor_divide": _floordiv,
    "power": _power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
}

COMPARISONS = {
    "equal": np.equal,
    "not_equal": np.not_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
}


def _infer_binary(call, ctx):
    a = tensor_arg(call, 0, ctx)
    b = tensor_arg(call, 1, ctx)
    return broadcast(call, a, b, binary_dtype(call, a, b))


def _infer_compare(call, ctx):
    a = tensor_arg(call, 0, ctx)
    b = tensor_arg(call, 1, ctx)
    binary_dtype(call, a, b)
    return broadcast(call, a, b, "bool")


for _name, _fn in BINARY_ARITH.items():
    define(_name, ("x1", "x2"), _infer_binary, reference=_binary_ref(_fn),
           pattern=OpPattern.BROADCAST, doc=f"Elementwise {_name} with numpy broadcasting.")

for _name, _fn in COMPARISONS.items():
    define(_name, ("x1", "x2"), _infer_compare, reference=_compare_ref(_fn),
           pattern=OpPattern.BROADCAST, doc=f"Elementwise {_name} (bool result), broadcasting.")


# ---------------------------------------------------------------------------
# Unary
# ---------------------------------------------------------------------------

def _float_unary(call, ctx):
    x = tensor_arg(call, 0, ctx)
    if x.dtype != "void" and not x.dtype.startswith("float"):
        raise err(call, f"{call.op.name.removeprefix('relax.')} requires the input tensor to have "
                        f"a float dtype, but {_arg(call)} has dtype {x.dtype}")
    return _same(x)


def _any_unary(call, ctx):
    return _same(tensor_arg(call, 0, ctx))


def _arg(call) -> str:
    from ..infer import expr_to_str
    return expr_to_str(call.args[0])


def _same(x: TensorStructInfo) -> TensorStructInfo:
    return x if x.span is None else TensorStructInfo(x.shape, x.dtype, x.ndim)


def _unary_ref(fn, *, via_float64: bool = False):
    def ref(x):
        x = np.asarray(x)
        with np.errstate(all="ignore"):
            if via_float64:
                return _out(fn(x.astype(np.float64)), x.dtype)
            return _out(fn(x), x.dtype)
    return ref


_erf_vec = np.vectorize(math.erf, otypes=[np.float64])


def _erf(x: np.ndarray) -> np.ndarray:
    return _erf_vec(x) if x.size else x.astype(np.float64)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _relu(x):
    return np.maximum(x, np.zeros((), x.dtype))


#: name -> (numpy implementation, needs float dtype, compute in float64)
UNARY = {
    "negative": (np.negative, False, False),
    "abs": (np.abs, False, False),
    "exp": (np.exp, True, False),
    "log": (np.log, True, False),
    "sqrt": (np.sqrt, True, False),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), True, True),
    "tanh": (np.tanh, True, False),
    "sigmoid": (_sigmoid, True, True),
    "erf": (_erf, True, True),
    "floor": (np.floor, False, False),
    "ceil": (np.ceil, False, False),
    "round": (np.round, False, False),
    "logical_not": (np.logical_not, False, False),
    "nn.relu": (_relu, False, False),
    "nn.gelu": (_gelu, True, True),
    "nn.gelu_tanh": (_gelu_tanh, True, True),
    "nn.silu": (lambda x: x * _sigmoid(x), True, True),
}

for _name, (_fn, _needs_float, _f64) in UNARY.items():
    define(_name, ("x",), _float_unary if _needs_float else _any_unary,
           reference=_unary_ref(_fn, via_float64=_f64), pattern=OpPattern.ELEMWISE,
           doc=f"Elementwise {_name.removeprefix('nn.')}.")


def _stop_fusion_ref(x):
    return np.array(x, copy=True)


define("stop_fusion", ("x",), lambda call, ctx: _arg_sinfo_any(call, ctx),
       reference=_stop_fusion_ref, pattern=OpPattern.OPAQUE,
       doc="Identity; a fusion barrier for FuseOps.")


def _arg_sinfo_any(call, ctx):
    from ..infer import arg_sinfo
    if len(call.args) != 1:
        raise err(call, f"R.stop_fusion expects 1 operand, got {len(call.args)}")
    return arg_sinfo(call.args[0], ctx)

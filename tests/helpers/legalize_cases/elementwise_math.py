"""Legalization cases of the elementwise math functions
(tests/op/test_ops_elementwise_math.py), with operands in their domains."""

from __future__ import annotations

import numpy as np

from phasec.ir import TensorStructInfo, Var
from phasec.op import call_op

from helpers.op_coverage import FLOAT_UNARY

_U = Var("eu", TensorStructInfo((2, 3), "float32"))      # in (-1, 1)
_P = Var("ep", TensorStructInfo((2, 3), "float32"))      # > 1
_F = Var("ef", TensorStructInfo((1, 3), "float32"))
_I = Var("ei", TensorStructInfo((2, 3), "int32"))
_J = Var("ej", TensorStructInfo((3,), "int32"))
_B = Var("eb", TensorStructInfo((2, 3), "bool"))
_S = Var("es", TensorStructInfo((2, 3), "int8"))

EW_VALUES = {
    _U: np.array([[-0.9, -0.2, 0.0], [0.3, 0.75, 0.99]], "float32"),
    _P: np.array([[1.0, 1.5, 2.0], [3.0, 10.0, 100.0]], "float32"),
    _F: np.array([[np.nan, np.inf, -2.5]], "float32"),
    _I: np.array([[7, -7, 0], [5, -1, 9]], "int32"),
    _J: np.array([3, -3, -4], "int32"),  # (a divisor of 0: test_integer_division_by_zero)
    _B: np.array([[True, False, True], [False, False, True]]),
    _S: np.array([[-16, 5, 3], [127, -128, 1]], "int8"),
}
_ES = Var("esk", TensorStructInfo((2, 3), "int8"))
EW_VALUES[_ES] = np.array([[2, 7, 9], [-1, 0, 8]], "int8")

EW_LEGALIZE_CASES = (
    [(f"{n}", lambda n=n: call_op(n, _P if n == "acosh" else _U)) for n in FLOAT_UNARY]
    + [(f"{n}-f", lambda n=n: call_op(n, _F)) for n in ("sign", "square", "trunc", "isfinite",
                                                         "isinf", "isnan")]
    + [(f"{n}-i", lambda n=n: call_op(n, _I)) for n in ("sign", "square", "trunc", "isfinite",
                                                         "isnan", "bitwise_not")]
    + [("bitwise_not-b", lambda: call_op("bitwise_not", _B)),
       ("atan2", lambda: call_op("atan2", _U, _F)),
       ("log_add_exp", lambda: call_op("log_add_exp", _P, _F)),
       ("floor_mod-i", lambda: call_op("floor_mod", _I, _J)),
       ("mod-i", lambda: call_op("mod", _I, _J)),
       ("floor_mod-f", lambda: call_op("floor_mod", _U, _F)),
       ("mod-f", lambda: call_op("mod", _P, _U)),
       ("bitwise_and", lambda: call_op("bitwise_and", _I, _J)),
       ("bitwise_or", lambda: call_op("bitwise_or", _B, _B)),
       ("bitwise_xor", lambda: call_op("bitwise_xor", _S, _ES)),
       ("left_shift", lambda: call_op("left_shift", _S, _ES)),
       ("right_shift", lambda: call_op("right_shift", _S, _ES)),
       ("logical_xor", lambda: call_op("logical_xor", _I, _J)),
       ("ewise_fma", lambda: call_op("ewise_fma", _U, _P, _U))]
)

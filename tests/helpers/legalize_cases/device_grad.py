"""Legalization cases of the placement, parameter and gradient-marker operators
(tests/op/test_ops_device_grad.py): wrap_param, the one with a kernel."""

from __future__ import annotations

from phasec.ir import TensorStructInfo, Var
from phasec.op import call_op

_X = Var("dg_x", TensorStructInfo((2, 3), "float32"))
DEVICE_GRAD_LEGALIZE_CASES = [("wrap_param", lambda: call_op("wrap_param", _X, dtype="int32"))]

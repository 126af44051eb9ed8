"""Legalization cases of the data-indexed operators (tests/op/test_ops_indexing.py),
with index operands in range."""

from __future__ import annotations

import numpy as np

from phasec.ir import TensorStructInfo, Tuple, Var
from phasec.op import call_op

_X = Var("x", TensorStructInfo((2, 3, 4), "float32"))
_I3 = Var("ixe", TensorStructInfo((2, 2, 4), "int64"))
_U3 = Var("u3", TensorStructInfo((2, 2, 4), "float32"))
_G = Var("ixg", TensorStructInfo((2, 2), "int64"))
_GU = Var("gu", TensorStructInfo((2, 4), "float32"))
_GB = Var("gbt", TensorStructInfo((2, 1), "int64"))
_IA = Var("ia", TensorStructInfo((2, 1), "int64"))
_IB = Var("ib", TensorStructInfo((3,), "int64"))
_IC = Var("ic", TensorStructInfo((1, 3), "int64"))
_IV = Var("iv", TensorStructInfo((3,), "float32"))


#: in-range values of the index operands above
INDEXING_VALUES = {
    _I3: np.array([[[0, 2, -1, 1], [1, 1, 0, -3]], [[2, 0, 0, 1], [-2, 2, 1, 0]]], "int64"),
    _G: np.array([[1, -1], [0, 2]], "int64"),
    _GB: np.array([[2], [-1]], "int64"),
    _IA: np.array([[1], [0]], "int64"), _IB: np.array([2, -1, 2], "int64"),
    _IC: np.array([[0, 3, 3]], "int64"),
}

INDEXING_LEGALIZE_CASES = [
    ("gather_elements", lambda: call_op("gather_elements", _X, _I3, axis=1)),
    ("gather_nd", lambda: call_op("gather_nd", _X, _G)),
    ("gather_nd-batch", lambda: call_op("gather_nd", _X, _GB, batch_dims=1)),
    ("scatter_elements", lambda: call_op("scatter_elements", _X, _I3, _U3, axis=1)),
    ("scatter_elements-mean", lambda: call_op("scatter_elements", _X, _I3, _U3, axis=-2,
                                              reduction="mean")),
    ("scatter_nd", lambda: call_op("scatter_nd", _X, _G, _GU, reduction="add")),
    ("index_put", lambda: call_op("index_put", _X, Tuple([_IA, _IB, _IC]), _IV, accumulate=True)),
    ("index_put-update", lambda: call_op("index_put", _X, Tuple([_IA, _IB, _IC]), _IV)),
]

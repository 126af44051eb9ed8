"""Legalization cases of hamming_window, size, bucketize, index_tensor and
reverse_sequence (tests/op/test_ops_more.py)."""

from __future__ import annotations

import numpy as np

from phasec.ir import PrimValue, TensorStructInfo, Tuple, Var, tir
from phasec.op import call_op

_D = Var("md", TensorStructInfo((4, 5), "float32"))
_R = Var("mr", TensorStructInfo((2, 1), "int64"))
_C = Var("mc", TensorStructInfo((3,), "int64"))
_BD = Var("mbd", TensorStructInfo((3,), "float32"))
_LEN = Var("mlen", TensorStructInfo((4,), "int32"))
MORE_VALUES = {_R: np.array([[0], [-1]], "int64"), _C: np.array([1, 4, -5], "int64"),
               _BD: np.array([-0.5, 0.0, 1.0], "float32"), _LEN: np.array([5, 0, 2, 3], "int32")}


def _pv(v):
    return PrimValue(tir.IntImm(v) if isinstance(v, int) else tir.FloatImm(v, "float32"))


MORE_LEGALIZE_CASES = [
    ("hamming_window", lambda: call_op("hamming_window", _pv(7), _pv(0), _pv(0.54), _pv(0.46))),
    ("hamming_window-periodic", lambda: call_op("hamming_window", _pv(4), _pv(1), _pv(0.5),
                                                _pv(0.5), dtype="float64")),
    ("size", lambda: call_op("size", _D)),
    ("bucketize", lambda: call_op("bucketize", _D, _BD)),
    ("bucketize-right", lambda: call_op("bucketize", _D, _BD, right=True, out_int32=True)),
    ("index_tensor", lambda: call_op("index_tensor", _D, Tuple([_R, _C]))),
    ("index_tensor-rows", lambda: call_op("index_tensor", _D, Tuple([_R]))),
    ("reverse_sequence", lambda: call_op("reverse_sequence", _D, _LEN, seq_axis=1,
                                         batch_axis=0)),
]

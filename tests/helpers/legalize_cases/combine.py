"""Legalization cases of stack, meshgrid, outer, einsum, collapse_sum, and the
nn and slice operators of tests/op/test_ops_combine.py."""

from __future__ import annotations

import numpy as np

from phasec.ir import PrimValue, ShapeExpr, TensorStructInfo, Tuple, Var, tir
from phasec.op import call_op

_A = Var("ca", TensorStructInfo((2, 3), "float32"))
_B = Var("cb", TensorStructInfo((4, 3), "float32"))
_V = Var("cv", TensorStructInfo((3,), "float32"))
_IMG = Var("cimg", TensorStructInfo((1, 8, 2, 3), "float32"))
_BATCH = Var("cbt", TensorStructInfo((2, 1, 3, 4), "float32"))
_SRC = Var("csrc", TensorStructInfo((2, 2), "float32"))
_W = Var("cw", TensorStructInfo((2,), "float32"))
_BT2 = Var("cbt2", TensorStructInfo((3, 4, 2), "float32"))
_SQ = Var("csq", TensorStructInfo((3, 3), "float32"))
_RNG = np.random.default_rng(21)
#: values of the operands above (tuple fields get none by default in test_legalize)
COMBINE_VALUES = {v: _RNG.standard_normal(tuple(d.value for d in v.struct_info.shape))
                  .astype("float32") for v in (_A, _B, _V, _IMG, _BATCH, _SRC, _W, _BT2, _SQ)}


def _pv(k):
    return PrimValue(tir.IntImm(k))


COMBINE_LEGALIZE_CASES = [
    ("stack", lambda: call_op("stack", Tuple([_A, _A, _A]), axis=-1)),
    ("outer", lambda: call_op("outer", _V, _V)),
    ("meshgrid", lambda: call_op("meshgrid", Tuple([_V, _W]), indexing="xy")),
    ("einsum", lambda: call_op("einsum", Tuple([_A, _B]), subscripts="ij,kj->ki")),
    ("einsum-batch", lambda: call_op("einsum", Tuple([_BATCH, _BT2]), subscripts="...ij,...jk")),
    ("einsum-trace", lambda: call_op("einsum", Tuple([_SQ]), subscripts="ii")),
    ("collapse_sum_to", lambda: call_op("collapse_sum_to", _BATCH, ShapeExpr([3, 1]))),
    ("collapse_sum_like", lambda: call_op("collapse_sum_like", _B, _V)),
    ("batch_flatten", lambda: call_op("nn.batch_flatten", _IMG)),
    ("pixel_shuffle", lambda: call_op("nn.pixel_shuffle", _IMG, upscale_factor=2)),
    ("slice_scatter", lambda: call_op("slice_scatter", _A, _SRC, _pv(-3), _pv(9), _pv(2),
                                      axis=1)),
]

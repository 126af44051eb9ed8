"""Legalization cases of the creation, data-movement and statistics operators
(tests/op/test_ops_ext.py), and of the reductions of bool tensors."""

from __future__ import annotations

import numpy as np

from phasec.ir import PrimValue, TensorStructInfo, Var, tir
from phasec.op import call_op

_Z = Var("z", TensorStructInfo((2, 3, 4), "float32"))
_ZI = Var("zi", TensorStructInfo((2, 3, 4), "int32"))
_IDX = Var("ix", TensorStructInfo((2, 2), "int64"))


def _p(v):
    """``v`` as an R.prim_value: an integer immediate, or a float32 one."""
    return PrimValue(tir.IntImm(v) if isinstance(v, int) else tir.FloatImm(v, "float32"))


EXT_LEGALIZE_CASES = [
    ("arange", lambda: call_op("arange", _p(3), _p(-4), _p(-2), dtype="int32")),
    ("arange-float", lambda: call_op("arange", _p(0.5), _p(2.0), _p(0.5), dtype="float32")),
    ("full_like", lambda: call_op("full_like", _Z, Var("f0", TensorStructInfo((), "float32")),
                                  dtype="int64")),
    ("tril", lambda: call_op("tril", _Z, _p(0))),
    ("triu", lambda: call_op("triu", _ZI, _p(1))),
    ("one_hot", lambda: call_op("one_hot", _IDX, _p(1.0), _p(0.0), depth=3, axis=1)),
    ("eye", lambda: call_op("eye", _p(3), _p(2), _p(-1), dtype="float32")),
    ("eye_like", lambda: call_op("eye_like", Var("m", TensorStructInfo((3, 4), "int32")),
                                 _p(1))),
    ("tile", lambda: call_op("tile", _Z, repeats=[2, 1, 1, 2])),
    ("repeat", lambda: call_op("repeat", _Z, repeats=2, axis=-1)),
    ("repeat-flat", lambda: call_op("repeat", _ZI, repeats=2)),
    ("flip", lambda: call_op("flip", _Z, axis=1)),
    ("argmax", lambda: call_op("argmax", _Z, axis=1, keepdims=True)),
    ("argmin", lambda: call_op("argmin", _ZI)),
    ("variance", lambda: call_op("variance", _Z, axis=[0, 2])),
    ("std", lambda: call_op("std", _Z, keepdims=True)),
    ("cumsum", lambda: call_op("cumsum", _Z, axis=1, exclusive=True)),
    ("cumsum-flat", lambda: call_op("cumsum", _ZI, dtype="int64")),
    ("cumprod", lambda: call_op("cumprod", _Z, axis=-1)),
] + [(f"pad-{mode}", lambda mode=mode: call_op("nn.pad", _Z, pad_width=[0, 1, 2, 0, 3, 5],
                                                 pad_mode=mode, pad_value=2.0))
     for mode in ("constant", "reflect", "replicate", "circular")]


# reductions of bool tensors (issue 13: "prod/sum/max/min on bool")
_BOOLS = Var("bz", TensorStructInfo((2, 3, 4), "bool"))
BOOL_VALUES = {_BOOLS: np.random.default_rng(4).integers(0, 2, (2, 3, 4)).astype(bool)}
EXT_LEGALIZE_CASES += [
    (f"{n}-bool", lambda n=n: call_op(n, _BOOLS, axis=[1], keepdims=n == "prod"))
    for n in ("sum", "prod", "max", "min")]

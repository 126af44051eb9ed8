"""Struct info of a call whose callee's parameters have symbolic dimensions,
made from inside the callee (recursion, as ONNX Loop and Scan import to):
the callee's variables are bound from the arguments before the arguments
are checked, as TVM's DeriveCallRetStructInfo does."""

from __future__ import annotations

import pytest

from phasec import arith
from phasec.errors import StructInfoError
from phasec.ir import tir
from phasec.ir.expr import Call, Var
from phasec.ir.struct_info import FuncStructInfo, TensorStructInfo
from phasec.op.infer import infer_struct_info

N = tir.Var("n", "int64")
LOOP = Var("f", FuncStructInfo([TensorStructInfo((N, 2), "float32")],
                               TensorStructInfo((N, 2), "float32")))


def test_a_recursive_call_with_a_grown_argument_binds_n_anew():
    grown = Var("g", TensorStructInfo((N + 1, 2), "float32"))
    ret = infer_struct_info(Call(LOOP, [grown]))
    assert arith.prove_equal(ret.shape[0], N + 1) and ret.shape[1].value == 2


def test_a_constant_dimension_still_has_to_match():
    bad = Var("b", TensorStructInfo((N, 3), "float32"))
    with pytest.raises(StructInfoError, match="cannot match parameter"):
        infer_struct_info(Call(LOOP, [bad]))


def test_a_variable_bound_twice_must_agree():
    two = Var("h", FuncStructInfo([TensorStructInfo((N,), "float32")] * 2,
                                  TensorStructInfo((N,), "float32")))
    a = Var("a", TensorStructInfo((5,), "float32"))
    b = Var("b", TensorStructInfo((6,), "float32"))
    with pytest.raises(StructInfoError, match="argument 1"):
        infer_struct_info(Call(two, [a, b]))
    assert infer_struct_info(Call(two, [a, a])).shape[0].value == 5

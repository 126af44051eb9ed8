"""Operators' numpy references, run on random operands and checked against
struct-info inference for the same operands and attributes."""

from __future__ import annotations

import numpy as np

from phasec.ir import PrimValue, ShapeExpr, TensorStructInfo, Tuple, Var
from phasec.op import call_op, get_op

#: one generator for every caller of rand, seeded once per test session
rng = np.random.default_rng(0)


def rand(*shape, dtype="float32", lo=-2.0, hi=2.0):
    """A random array: integers in [lo, hi], bools, or uniform floats."""
    if np.dtype(dtype).kind in "iu":
        return rng.integers(int(lo), int(hi) + 1, size=shape).astype(dtype)
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def _operand(value):
    """Relax operand for a runtime value, plus the value the reference gets."""
    if isinstance(value, np.ndarray):
        return Var("v", TensorStructInfo(value.shape, str(value.dtype))), value
    if isinstance(value, ShapeExpr):
        return value, tuple(int(v.value) for v in value.values)
    if isinstance(value, list):  # a tuple operand of tensors
        return Tuple([_operand(v)[0] for v in value]), value
    if isinstance(value, PrimValue):  # as a numpy scalar of its dtype
        return value, np.array(value.value.value, value.value.dtype)[()]
    raise TypeError(value)


def run(name, *values, **attrs):
    """Run the reference; check it against inference; return the result."""
    operands = [_operand(v) for v in values]
    call = call_op(name, *[o for o, _ in operands], **attrs)
    result = get_op("relax." + name).reference(*[v for _, v in operands], **call.attrs)
    _check_against_sinfo(name, result, call.struct_info)
    return result


def _check_against_sinfo(name, result, sinfo):
    if isinstance(result, tuple):
        assert len(result) == len(sinfo.fields)
        for r, f in zip(result, sinfo.fields):
            _check_against_sinfo(name, r, f)
        return
    assert isinstance(result, np.ndarray), f"{name}: reference returned {type(result).__name__}"
    assert str(result.dtype) == sinfo.dtype, f"{name}: dtype {result.dtype} vs {sinfo.dtype}"
    if sinfo.shape is None:  # a data-dependent shape (unique, nonzero): the rank is known
        assert result.ndim == sinfo.ndim, f"{name}: ndim {result.ndim} vs {sinfo.ndim}"
        return
    assert result.shape == tuple(d.value for d in sinfo.shape), f"{name}: shape {result.shape}"


def close(a, b, tol=1e-5):
    """``a`` equals ``b`` within ``tol``, relative and absolute."""
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)

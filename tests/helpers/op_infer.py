"""Operator calls for struct-info inference tests: typed variables, the
inferred struct info as text, and checks of StructInfoError messages."""

from __future__ import annotations

import pytest

from phasec.errors import StructInfoError
from phasec.ir import TensorStructInfo, Var
from phasec.ir.text import sinfo_to_str


def T(shape=None, dtype="float32", ndim=-1):
    """A tensor struct info (``shape=None``: unknown shape of rank ``ndim``)."""
    return TensorStructInfo(shape, dtype, ndim)


def tv(name, shape=None, dtype="float32", ndim=-1):
    """A variable of tensor struct info ``T(shape, dtype, ndim)``."""
    return Var(name, T(shape, dtype, ndim))


def S(call):
    """The struct info inferred for ``call``, as text."""
    return sinfo_to_str(call.struct_info)


def raises(fragments, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` raises a StructInfoError whose message holds
    every one of ``fragments``; the error."""
    with pytest.raises(StructInfoError) as info:
        fn(*args, **kwargs)
    msg = str(info.value)
    for frag in fragments:
        assert frag in msg, f"{frag!r} not in {msg!r}"
    return info.value

"""Struct-info keys: what the checker's caches are keyed by.

A key is a hashable summary equal for struct info that is equal "by
construction" (same dtypes, same constant dims, the same symbolic Var
objects). Inference is a function of the operands' struct info, so equal keys
give equal results: the verifier infers each distinct call shape once, which
keeps re-inference cheap on long programs made of repeated calls.
"""

from __future__ import annotations

from typing import Any

from phasec.ir import tir
from phasec.ir.expr import (
    Call, Constant, DataflowVar, DataTypeImm, ExternFunc, GlobalVar, Op, PrimValue, ShapeExpr,
    StringImm, Tuple, Var,
)
from phasec.ir.struct_info import (
    ObjectStructInfo, PrimStructInfo, ShapeStructInfo, TensorStructInfo, TupleStructInfo,
)

__all__ = ["sinfo_key", "Keys"]


def _dim_key(d: Any) -> Any:
    # int64 constants by value; everything else (Vars, expressions) by identity
    return d.value if type(d) is tir.IntImm and d.dtype == "int64" else d


def sinfo_key(s: Any) -> Any:
    """The key of one struct info (see above); unmemoized."""
    t = type(s)
    if t is TensorStructInfo:
        shape = s.shape
        key = ("T", s.dtype, s.ndim if shape is None else tuple([_dim_key(d) for d in shape]))
        # the virtual device decides an operator's result device, and whether
        # two operands' devices clash
        return key if s.vdevice is None else key + (s.vdevice,)
    if t is ShapeStructInfo:
        values = s.values
        return ("S", s.ndim if values is None else tuple([_dim_key(d) for d in values]))
    if t is PrimStructInfo:
        return ("P", s.dtype, None if s.value is None else _dim_key(s.value))
    if t is ObjectStructInfo:
        return "O"
    if t is TupleStructInfo:
        return ("U", tuple([sinfo_key(f) for f in s.fields]))
    return s  # callables and anything else: by identity


class Keys:
    """Keys memoized for one check: per struct-info object (a variable's
    struct info is keyed once however often it is used) and for the call
    being checked (several rules ask for its key)."""

    __slots__ = ("_sinfo", "_call", "_call_key")

    def __init__(self) -> None:
        self._sinfo: dict[Any, Any] = {}
        self._call: Any = None
        self._call_key: Any = None

    def sinfo(self, s: Any) -> Any:
        key = self._sinfo.get(s)
        if key is None:
            key = self._sinfo[s] = sinfo_key(s)
        return key

    def operand(self, e: Any) -> Any:
        t = type(e)
        if t is Var or t is DataflowVar:
            s = e.struct_info
            key = self._sinfo.get(s)
            if key is None:
                key = self._sinfo[s] = sinfo_key(s)
            return key
        if t is Constant or t is ShapeExpr or t is PrimValue:
            return (t.__name__, self.sinfo(e.struct_info))
        if t is StringImm or t is DataTypeImm:
            return (t.__name__, e.value)
        if t is GlobalVar:
            return ("g", e.name_hint)
        if t is ExternFunc:
            return ("e", e.global_symbol)
        if t is Tuple:
            memo = self._sinfo
            fields = []
            for f in e.fields:
                tf = type(f)
                if tf is Var or tf is DataflowVar:  # the common field: inlined
                    s = f.struct_info
                    key = memo.get(s)
                    if key is None:
                        key = memo[s] = sinfo_key(s)
                    fields.append(key)
                else:
                    fields.append(self.operand(f))
            return ("U", tuple(fields))
        return e  # by identity

    def call(self, call: Call) -> Any:
        """The call's key, or None when it cannot be keyed (unhashable attributes)."""
        if call is self._call:
            return self._call_key
        op = call.op
        t = type(op)
        if t is Op:
            head: Any = op.name
        elif t is GlobalVar:
            head = ("g", op.name_hint)
        elif t is ExternFunc:
            head = ("e", op.global_symbol)
        else:
            head = self.sinfo(op.struct_info)
        operand = self.operand
        key: Any = (head, tuple([operand(a) for a in call.args]),
                    tuple(call.attrs.items()) if call.attrs else (),
                    tuple([self.sinfo(s) for s in call.sinfo_args]) if call.sinfo_args else ())
        try:
            hash(key)
        except TypeError:
            key = None
        self._call, self._call_key = call, key
        return key

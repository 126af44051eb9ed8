"""Matching runtime values against struct info: parameters on entry and
``R.match_cast``, binding symbolic variables (used by the interpreter and
the VM; see :mod:`phasec.interp.relax`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from phasec.errors import PhasecError
from phasec.ir import tir
from phasec.ir.struct_info import (
    FuncStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
    TensorStructInfo, TupleStructInfo,
)
from phasec.script.checks import int_range_problem
from phasec.runtime.values import InterpError, describe_value
from phasec.interp._values import _MISSING, eval_prim_expr, prim_text, sinfo_text


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def match_struct_info(value: Any, sinfo: StructInfo, lookup: Callable[[tir.Var], Any],
                      bind: Callable[[tir.Var, int], None], what: str,
                      error: type[PhasecError] = None) -> None:
    """Check ``value`` against ``sinfo``, binding its unbound symbolic variables.

    ``lookup(var)`` returns the value of a bound symbolic variable, or None
    when it is unbound; ``bind(var, value)`` binds one. Dimensions that are plain
    variables are bound on first sight; compound dimensions (``n * 2``) are
    checked after all variables are bound, as in TVM. ``what`` names the
    checked thing ("function 'main', parameter 'x'") in the error, which is
    ``error`` (InterpError by default).
    """
    match_struct_infos(((value, sinfo, what),), lookup, bind, error)


def match_struct_infos(items: Sequence[tuple[Any, StructInfo, str]],
                       lookup: Callable[[tir.Var], Any], bind: Callable[[tir.Var, int], None],
                       error: type[PhasecError] = None) -> None:
    """Check several ``(value, sinfo, what)`` together, as one function's
    parameters are: the plain-variable dimensions of ALL of them are bound
    first, then the compound dimensions of all of them are checked (TVM's
    semantics), so ``a: R.Tensor((n * n,))`` may come before the ``x:
    R.Tensor((n, n))`` that binds n. Nothing is bound unless everything
    matches. See :func:`match_struct_info` for the arguments.
    """
    err = error or InterpError
    local: dict[tir.Var, int] = {}

    def get(var: tir.Var) -> Any:
        if var in local:
            return local[var]
        value = lookup(var)
        return _MISSING if value is None else value

    # (compound dim, actual value, where, the item's value, sinfo and what)
    deferred: list[tuple[tir.PrimExpr, Any, str, Any, StructInfo, str]] = []

    for value, sinfo, what in items:
        if (type(sinfo) is TensorStructInfo and type(value) is np.ndarray
                and (sinfo.dtype == "void" or str(value.dtype) == sinfo.dtype)
                and (sinfo.ndim < 0 or value.ndim == sinfo.ndim)
                and (sinfo.shape is None or all(type(d) is tir.IntImm and d.value == n
                                                for d, n in zip(sinfo.shape, value.shape)))):
            continue  # fast path: a tensor with static dims that fits
        _match_one(value, sinfo, what, err, get, local, deferred)
    for expr, actual, where, value, sinfo, what in deferred:
        def strict(var: tir.Var) -> Any:
            got = get(var)
            if got is _MISSING:
                raise err(f"{what}: symbolic variable {var.name} in {prim_text(expr)} "
                          f"is not bound by any plain dimension")
            return got
        expected = eval_prim_expr(expr, strict)
        if expected != actual:
            raise err(f"{what}: expected {sinfo_text(sinfo)}, got {describe_value(value)} "
                      f"({where} is {actual}, expected {prim_text(expr)} = {expected})")
    for var, v in local.items():
        bind(var, v)


def _match_one(value: Any, sinfo: StructInfo, what: str, err: type[PhasecError],
               get: Callable[[tir.Var], Any], local: dict[tir.Var, int],
               deferred: list) -> None:
    """Match one value: bind plain-variable dims into ``local``, append
    compound dims to ``deferred`` (see :func:`match_struct_infos`)."""

    def fail(reason: str) -> None:
        raise err(f"{what}: expected {sinfo_text(sinfo)}, got {describe_value(value)}"
                  + (f" ({reason})" if reason else ""))

    def match_dim(expr: tir.PrimExpr, actual: Any, where: str) -> None:
        if type(expr) is tir.IntImm:
            if expr.dtype == "bool":
                if bool(actual) != bool(expr.value):
                    fail(f"{where} is {actual}, expected {bool(expr.value)}")
            elif actual != expr.value:
                fail(f"{where} is {actual}, expected {expr.value}")
        elif type(expr) is tir.Var:
            bound = get(expr)
            if bound is _MISSING:
                local[expr] = actual
            elif bound != actual:
                fail(f"{where} is {actual}, but {expr.name} = {bound}")
        else:
            deferred.append((expr, actual, where, value, sinfo, what))

    def walk(v: Any, s: StructInfo, where: str) -> None:
        t = type(s)
        if t is TensorStructInfo:
            if not isinstance(v, np.ndarray):
                fail(f"{where}is not a tensor" if where else "not a tensor")
            if s.dtype != "void" and str(v.dtype) != s.dtype:
                fail(f"{where}dtype is {v.dtype}, expected {s.dtype}")
            if s.ndim >= 0 and v.ndim != s.ndim:
                fail(f"{where}ndim is {v.ndim}, expected {s.ndim}")
            if s.shape is not None:
                for i, (d, n) in enumerate(zip(s.shape, v.shape)):
                    match_dim(d, int(n), f"{where}dimension {i}")
        elif t is TupleStructInfo:
            if not isinstance(v, tuple):
                fail(f"{where}is not a tuple")
            if len(v) != len(s.fields):
                fail(f"{where}has {len(v)} fields, expected {len(s.fields)}")
            for i, (fv, fs) in enumerate(zip(v, s.fields)):
                walk(fv, fs, f"{where}field {i}: ")
        elif t is ShapeStructInfo:
            if not isinstance(v, tuple) or not all(_is_int(x) for x in v):
                fail(f"{where}is not a shape")
            if s.ndim >= 0 and len(v) != s.ndim:
                fail(f"{where}has {len(v)} dimensions, expected {s.ndim}")
            if s.values is not None:
                for i, (d, n) in enumerate(zip(s.values, v)):
                    match_dim(d, int(n), f"{where}value {i}")
        elif t is PrimStructInfo:
            if isinstance(v, np.ndarray) and v.ndim == 0:
                v = v.item()
            elif isinstance(v, np.generic):
                v = v.item()
            if not isinstance(v, (bool, int, float)):
                fail(f"{where}is not a scalar")
            if tir.is_int(s.dtype) and not _is_int(v):
                fail(f"{where}is not an integer")
            if tir.is_int(s.dtype) and int_range_problem(int(v), s.dtype) is not None:
                fail(f"{where}is out of range: {int_range_problem(int(v), s.dtype)}")
            if tir.is_bool(s.dtype) and not isinstance(v, (bool, int)):
                fail(f"{where}is not a bool")
            if s.value is not None:
                match_dim(s.value, v, f"{where}value")
        elif t is FuncStructInfo:
            if not callable(v):
                fail(f"{where}is not a function")
        # ObjectStructInfo (and unknown kinds): anything goes

    walk(value, sinfo, "")

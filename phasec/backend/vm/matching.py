"""Scalar expressions and value patterns of the VM's bytecode, compiled once
when a function is decoded (split from ``vm.py`` along that seam).

Expression codes (``("bin", "+", ("reg", 3), ("imm", 16))``, see
:mod:`.bytecode`) become Python source: the straight-line function the VM
generates for a model inlines the shape arithmetic of ``make_shape`` and
``make_prim`` as plain Python expressions (a dynamic-shape model computes
dozens of shapes per call), and :func:`compile_expr` makes a function of
the same source for the dispatch loop, so both run one translation.

Only generated identifiers and integers enter the source; callables, dtypes
and other constants are passed through the namespace. Expression codes
from a file are validated before (``bytecode._code_problem``: known
operators and intrinsics, nesting at most 64 deep).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from phasec.errors import DivisionByZeroError, VMError
from phasec.ir.intrinsics import SCALAR_INTRINSICS
from phasec.runtime.binary_ops import SCALAR_BINARY
from phasec.runtime.values import cast_scalar, describe_value
from phasec.script.checks import int_range_problem
from phasec.backend.vm import bytecode as bc

__all__ = ["ExprSource", "compile_expr", "compile_shape", "compile_prim", "compile_matcher",
           "static_tensor_pattern"]

#: operators whose Python spelling on ints, floats and bools is TIR's (exact integers)
_INFIX = frozenset({"+", "-", "*", "==", "!=", "<", "<=", ">", ">="})
_DIVISIONS = frozenset({"//", "%", "/"})
#: operators that keep Python ints ints
_INTEGRAL = frozenset({"+", "-", "*", "min", "max"})


def _integral(code: tuple) -> bool:
    """Whether ``code`` surely evaluates to a Python int: registers in shape
    expressions hold symbolic dimensions, bound by matches as ints."""
    kind = code[0]
    if kind == "imm":
        return type(code[1]) is int
    if kind == "bin":
        return code[1] in _INTEGRAL and _integral(code[2]) and _integral(code[3])
    return kind == "reg"


def _dividing(fn: Callable[[Any, Any], Any], text: str) -> Callable[[Any, Any], Any]:
    """``fn`` (a division) whose zero divisor is phasec's error: integer
    division by zero is a DivisionByZeroError everywhere, as in the kernels."""
    def divide(a: Any, b: Any) -> Any:
        try:
            return fn(a, b)
        except ZeroDivisionError:
            if isinstance(a, float) or isinstance(b, float):
                raise VMError(f"division by zero in {text}") from None
            raise DivisionByZeroError(text) from None
    return divide


class ExprSource:
    """Translates expression codes to Python source over a list ``regs``,
    adding the callables and constants the source names to :attr:`ns`."""

    def __init__(self, ns: dict[str, Any]) -> None:
        self.ns = ns
        ns.setdefault("cast", cast_scalar)

    def _name(self, value: Any) -> str:
        name = f"k{len(self.ns)}"
        self.ns[name] = value
        return name

    def __call__(self, code: tuple) -> str:
        kind = code[0]
        if kind == "imm":
            value = code[1]
            return "%d" % value if type(value) is int else self._name(value)
        if kind == "reg":
            return "regs[%d]" % int(code[1])
        if kind == "bin":
            op, lhs, rhs = code[1], self(code[2]), self(code[3])
            if op in _INFIX:
                return f"({lhs} {op} {rhs})"
            fn = SCALAR_BINARY[op]
            if op in _DIVISIONS:
                fn = _dividing(fn, bc.expr_code_text(code))
            return f"{self._name(fn)}({lhs}, {rhs})"
        if kind == "not":
            return f"(not {self(code[1])})"
        if kind == "cast":
            return f"cast({self(code[2])}, {self._name(code[1])})"
        if kind == "select":
            c, a, b = (self(x) for x in code[1:4])
            return f"({a} if {c} else {b})"
        if kind == "call":
            args = ", ".join(self(x) for x in code[2])
            return f"{self._name(SCALAR_INTRINSICS[code[1]])}({args})"
        raise VMError(f"bad scalar expression code {code!r}")

    def shape(self, dims: Sequence[tuple]) -> str:
        """The tuple of ints ``make_shape`` builds from ``dims``."""
        parts = [self(d) if _integral(d) else f"int({self(d)})" for d in dims]
        return "(" + "".join(f"{p}, " for p in parts) + ")"

    def prim(self, code: tuple, dtype: str) -> str:
        """The scalar ``make_prim`` builds: ``code`` as a ``dtype`` value."""
        return self(("cast", dtype, code))


def _function(body: str, ns: dict[str, Any]) -> Callable[[list], Any]:
    exec(compile(f"def expr(regs):\n    return {body}\n", "<phasec vm expression>", "exec"),  # noqa: S102 - generated
         ns)
    return ns["expr"]


def compile_expr(code: tuple) -> Callable[[list], Any]:
    """``regs -> value`` of an expression code."""
    ns: dict[str, Any] = {}
    return _function(ExprSource(ns)(code), ns)


def compile_shape(dims: Sequence[tuple]) -> Callable[[list], tuple[int, ...]]:
    """``regs -> shape`` of a ``make_shape``."""
    ns: dict[str, Any] = {}
    return _function(ExprSource(ns).shape(dims), ns)


def compile_prim(code: tuple, dtype: str) -> Callable[[list], Any]:
    """``regs -> scalar`` of a ``make_prim``."""
    ns: dict[str, Any] = {}
    return _function(ExprSource(ns).prim(code, dtype), ns)


class _MatchFailure(Exception):
    """Internal: a value does not fit a pattern (reason in args[0])."""


_Deferred = list  # of (expr fn, actual, where, code)


def _compile_dims(dims: tuple, label: str) -> Callable[[Sequence[int], list, _Deferred, str], None]:
    steps = []
    for i, d in enumerate(dims):
        kind = d[0]
        if kind == "expr":
            steps.append((i, kind, compile_expr(d[1]), d[1]))
        else:
            steps.append((i, kind, d[1], None))
    all_imm = all(kind == "imm" for _, kind, _, _ in steps)
    expected_static = tuple(v for _, _, v, _ in steps) if all_imm else None

    def match(values: Sequence[int], regs: list, deferred: _Deferred, where: str) -> None:
        if expected_static is not None and tuple(values) == expected_static:
            return
        for i, kind, v, code in steps:
            actual = int(values[i])
            if kind == "imm":
                if actual != v:
                    raise _MatchFailure(f"{where}{label} {i} is {actual}, expected {v}")
            elif kind == "bind":
                regs[v] = actual
            elif kind == "check":
                if regs[v] != actual:
                    raise _MatchFailure(f"{where}{label} {i} is {actual}, but an earlier "
                                        f"dimension with the same variable is {regs[v]}")
            else:
                deferred.append((v, actual, f"{where}{label} {i}", code))
    return match


def _compile_pattern(pat: tuple) -> Callable[[Any, list, _Deferred, str], None]:
    kind = pat[0]
    if kind == "tensor":
        _, dtype, ndim, dims = pat
        np_dtype = np.dtype(dtype) if dtype else None
        match_dims = _compile_dims(dims, "dimension") if dims is not None else None

        def tensor(v: Any, regs: list, deferred: _Deferred, where: str) -> None:
            if not isinstance(v, np.ndarray):
                raise _MatchFailure(f"{where}not a tensor")
            if np_dtype is not None and v.dtype != np_dtype:
                raise _MatchFailure(f"{where}dtype is {v.dtype}, expected {dtype}")
            if ndim >= 0 and v.ndim != ndim:
                raise _MatchFailure(f"{where}ndim is {v.ndim}, expected {ndim}")
            if match_dims is not None:
                match_dims(v.shape, regs, deferred, where)
        return tensor
    if kind == "shape":
        _, ndim, dims = pat
        match_dims = _compile_dims(dims, "value") if dims is not None else None

        def shape(v: Any, regs: list, deferred: _Deferred, where: str) -> None:
            if not isinstance(v, tuple) or not all(
                    isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in v):
                raise _MatchFailure(f"{where}not a shape")
            if ndim >= 0 and len(v) != ndim:
                raise _MatchFailure(f"{where}has {len(v)} dimensions, expected {ndim}")
            if match_dims is not None:
                match_dims(v, regs, deferred, where)
        return shape
    if kind == "prim":
        _, dtype, dim = pat
        is_int = dtype.startswith("int") or dtype.startswith("uint")
        lo, hi = (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)) if is_int else (0, 0)
        match_value = _compile_dims((dim,), "value") if dim is not None else None

        def prim(v: Any, regs: list, deferred: _Deferred, where: str) -> None:
            if isinstance(v, (np.ndarray, np.generic)) and np.ndim(v) == 0:
                v = v.item()
            if not isinstance(v, (bool, int, float)):
                raise _MatchFailure(f"{where}not a scalar")
            if is_int and (isinstance(v, float) or isinstance(v, bool)):
                raise _MatchFailure(f"{where}not an integer")
            if is_int and not lo <= v <= hi:
                raise _MatchFailure(f"{where}out of range: {int_range_problem(v, dtype)}")
            if match_value is not None:
                match_value((v,), regs, deferred, where)
        return prim
    if kind == "tuple":
        subs = [_compile_pattern(p) for p in pat[1]]
        n = len(subs)

        def tup(v: Any, regs: list, deferred: _Deferred, where: str) -> None:
            if not isinstance(v, tuple):
                raise _MatchFailure(f"{where}not a tuple")
            if len(v) != n:
                raise _MatchFailure(f"{where}has {len(v)} fields, expected {n}")
            for i, (sub, x) in enumerate(zip(subs, v)):
                sub(x, regs, deferred, f"{where}field {i}: ")
        return tup
    if kind == "func":
        def func(v: Any, regs: list, deferred: _Deferred, where: str) -> None:
            if not callable(v):
                raise _MatchFailure(f"{where}not a function")
        return func
    return lambda v, regs, deferred, where: None


def _has_expr_dims(pat: tuple) -> bool:
    kind = pat[0]
    if kind == "tensor":
        dims = pat[3]
    elif kind == "shape":
        dims = pat[2]
    elif kind == "prim":
        dims = (pat[2],) if pat[2] is not None else None
    elif kind == "tuple":
        return any(_has_expr_dims(p) for p in pat[1])
    else:
        return False
    return dims is not None and any(d[0] == "expr" for d in dims)


def static_tensor_pattern(pattern: tuple) -> tuple[np.dtype, tuple[int, ...]] | None:
    """(dtype, shape) when ``pattern`` is a tensor of known dtype and constant shape."""
    if pattern[0] != "tensor" or not pattern[1] or pattern[3] is None:
        return None
    _, dtype, ndim, dims = pattern
    if ndim != len(dims) or not all(d[0] == "imm" for d in dims):
        return None
    try:
        return np.dtype(dtype), tuple(int(d[1]) for d in dims)
    except TypeError:
        return None


def compile_matcher(pattern: tuple, what: str, expected: str) -> Callable[[Any, list], None]:
    check = _compile_pattern(pattern)

    def fail(value: Any, reason: str) -> VMError:
        error = VMError(f"{what}: expected {expected}, got {describe_value(value)} ({reason})")
        error.located = True
        return error

    static = static_tensor_pattern(pattern)
    if static is not None:
        # The common parameter check (a tensor of a static shape): one type,
        # dtype and shape comparison; anything else takes the full check for
        # its message.
        np_dtype, shape = static

        def static_tensor_matcher(value: Any, regs: list) -> None:
            if type(value) is np.ndarray and value.shape == shape and value.dtype == np_dtype:
                return
            try:
                check(value, regs, None, "")
            except _MatchFailure as failure:
                raise fail(value, failure.args[0]) from None
        return static_tensor_matcher

    if not _has_expr_dims(pattern):
        def simple_matcher(value: Any, regs: list) -> None:
            try:
                check(value, regs, None, "")
            except _MatchFailure as failure:
                raise fail(value, failure.args[0]) from None
        return simple_matcher

    def matcher(value: Any, regs: list) -> None:
        deferred: _Deferred = []
        try:
            check(value, regs, deferred, "")
        except _MatchFailure as failure:
            raise fail(value, failure.args[0]) from None
        for fn, actual, where, code in deferred:
            want = fn(regs)
            if want != actual:
                raise fail(value, f"{where} is {actual}, expected {bc.expr_code_text(code)} = {want}")
    return matcher

"""The inputs of ``phasec run``: symbolic dimensions (``--dim``), arrays
given in ``--inputs FILE.npz`` and random values for the rest (see
:mod:`phasec.cli.run` for the rules)."""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from phasec.errors import FileAccessError, InputError
from phasec.fileio import read_npz
from phasec.interp import eval_prim_expr, sinfo_text
from phasec.ir import tir
from phasec.ir.struct_info import (
    PrimStructInfo, ShapeStructInfo, StructInfo, TensorStructInfo, TupleStructInfo,
)
from phasec.runtime.random_inputs import (
    FALLBACK_BUDGET, RandomBudget, random_bool, random_integers, random_normal,
)

__all__ = ["DEFAULT_DIM", "MAX_RANDOM_BYTES", "load_npz", "make_inputs", "onnx_input_names",
           "parse_dims"]

#: a symbolic dimension no input and no --dim gives
DEFAULT_DIM = 1
#: the budget of random inputs where the available memory is unknown; elsewhere
#: it is half the memory available (phasec.runtime.random_inputs): beyond it, a
#: typo in --dim would only end in an out-of-memory error
MAX_RANDOM_BYTES = FALLBACK_BUDGET


def parse_dims(items: list[str]) -> dict[str, int]:
    """``["n=4", "m=2"]`` -> ``{"n": 4, "m": 2}``."""
    dims: dict[str, int] = {}
    for item in items:
        m = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(-?\d+)\s*", item)
        if m is None:
            raise InputError(f"--dim {item!r}: expected NAME=VALUE with an integer value, "
                             "e.g. --dim n=4")
        value = int(m.group(2))
        if value < 0:
            raise InputError(f"--dim {item!r}: a dimension cannot be negative")
        dims[m.group(1)] = value
    return dims


class _Dims:
    """Values of symbolic dimensions: from given arrays, ``--dim``, or the default."""

    def __init__(self, given: Mapping[str, int]) -> None:
        self.given = dict(given)
        self.bound: dict[str, int] = {}
        self.used: set[str] = set()

    def value(self, name: str) -> int:
        self.used.add(name)
        if name in self.bound:
            return self.bound[name]
        return self.bound.setdefault(name, self.given.get(name, DEFAULT_DIM))

    def bind(self, name: str, value: int, where: str) -> None:
        self.used.add(name)
        if name in self.given and self.given[name] != value:
            raise InputError(f"{where} has {name} = {value}, but --dim says {name}="
                             f"{self.given[name]}")
        old = self.bound.setdefault(name, value)
        if old != value:
            raise InputError(f"{where} has {name} = {value}, but another input has "
                             f"{name} = {old}")


def _prim_value(expr: tir.PrimExpr, dims: _Dims) -> int:
    return int(eval_prim_expr(expr, lambda v: dims.value(v.name)))


def _bind_shape(sinfo: StructInfo | None, value: Any, dims: _Dims, where: str) -> None:
    """Record the symbolic dims an input array defines (plain variables only)."""
    if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None \
            and isinstance(value, np.ndarray) and value.ndim == len(sinfo.shape):
        for d, n in zip(sinfo.shape, value.shape):
            if isinstance(d, tir.Var):
                dims.bind(d.name, int(n), where)


def _random_value(sinfo: StructInfo | None, rng: np.random.Generator, dims: _Dims,
                  where: str, budget: RandomBudget) -> Any:
    if isinstance(sinfo, TensorStructInfo):
        if sinfo.shape is None:
            raise InputError(f"{where} has no known shape ({_sinfo(sinfo)}); give it with "
                             "--inputs")
        shape = tuple(_prim_value(d, dims) for d in sinfo.shape)
        return _random_array(shape, sinfo.dtype, rng, where, budget)
    if isinstance(sinfo, TupleStructInfo):
        return tuple(_random_value(f, rng, dims, f"{where}[{i}]", budget)
                     for i, f in enumerate(sinfo.fields))
    if isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None:
        return tuple(_prim_value(v, dims) for v in sinfo.values)
    if isinstance(sinfo, PrimStructInfo):
        if sinfo.value is not None:
            return _prim_value(sinfo.value, dims)
        if sinfo.dtype.startswith("float"):
            return float(rng.standard_normal())
        return int(rng.integers(0, 8))
    raise InputError(f"cannot make a random value for {where} ({_sinfo(sinfo)}); "
                     "give it with --inputs")


def _random_array(shape: tuple[int, ...], dtype: str, rng: np.random.Generator,
                  where: str, budget: RandomBudget) -> np.ndarray:
    """Made in place in ``dtype`` (peak: the array plus one chunk), after
    charging it to ``budget``."""
    if dtype in ("void", ""):
        raise InputError(f"{where} has no dtype; give it with --inputs")
    if any(d < 0 for d in shape):
        raise InputError(f"{where} would have the negative shape {shape}; check --dim")
    if dtype not in tir.DTYPES or not dtype.startswith(("float", "int", "uint", "bool")):
        raise InputError(f"cannot make a random {dtype} array for {where}; give it with "
                         f"--inputs")
    budget.charge(shape, "bool" if dtype == "bool" else dtype, where)
    if dtype.startswith("float"):
        fan_in = math.prod(shape[1:]) if len(shape) >= 2 else 1
        return random_normal(rng, shape, dtype, math.sqrt(max(fan_in, 1)))
    if dtype == "bool":
        return random_bool(rng, shape)
    return random_integers(rng, 0, 8, shape, dtype)


def _sinfo(sinfo: StructInfo | None) -> str:
    return sinfo_text(sinfo)


def load_npz(path: str) -> dict[str, np.ndarray]:
    """The arrays of ``--inputs``: a regular file, each member's declared size
    checked before it is inflated, nothing unpickled (phasec.fileio.read_npz)."""
    try:
        return read_npz(path, what="--inputs")
    except FileAccessError as exc:
        if "not a zip archive" in exc.reason:  # numpy's own message would talk about pickles
            raise InputError(f"--inputs {path!r}: not an .npz archive of arrays named after "
                             "the parameters (write one with numpy.savez)") from None
        raise


def onnx_input_names(given: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``--inputs`` for an ONNX model names the graph's inputs; the parameters
    of the imported ``main`` carry those names made identifiers (``gpu_0/data``
    is ``gpu_0_data``): either spelling is accepted."""
    from phasec.frontend.onnx import parameter_name  # (its converters load for ONNX input only)

    return {parameter_name(k): v for k, v in given.items()}


def _cast_given(value: np.ndarray, sinfo: StructInfo | None, name: str) -> np.ndarray:
    """A float64 array given for a float32 (or float16) parameter is cast, with a
    note: numpy writes float64 by default, and the VM checks dtypes exactly."""
    if isinstance(sinfo, TensorStructInfo) and isinstance(value, np.ndarray) \
            and value.dtype == np.float64 and sinfo.dtype in ("float32", "float16"):
        print(f"note: input {name!r} is float64; cast to {sinfo.dtype} as the parameter "
              "declares", file=sys.stderr)
        return value.astype(sinfo.dtype)
    return value


def make_inputs(params: list[tuple[str, StructInfo | None]], given: Mapping[str, np.ndarray],
                dims: Mapping[str, int], seed: int) -> tuple[list[Any], list[str]]:
    """The argument list for ``params`` ((name, struct info) pairs): arrays
    from ``given`` by name, random values for the rest. Returns the arguments
    and the names of the random ones."""
    names = [n for n, _ in params]
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise InputError(f"--inputs has {', '.join(map(repr, unknown))}, which "
                         f"{'is not a parameter' if len(unknown) == 1 else 'are not parameters'}"
                         f"; the parameters are {', '.join(names) or '(none)'}")
    state = _Dims(dims)
    for name, sinfo in params:  # given arrays define symbolic dims first
        if name in given:
            _bind_shape(sinfo, given[name], state, f"input {name!r}")
    rng = np.random.default_rng(seed)
    budget = RandomBudget()  # all random inputs of the run together
    args: list[Any] = []
    generated: list[str] = []
    for name, sinfo in params:
        if name in given:
            args.append(_cast_given(given[name], sinfo, name))
        else:
            args.append(_random_value(sinfo, rng, state, f"parameter {name!r}", budget))
            generated.append(name)
    unused = sorted(set(dims) - state.used)
    if unused:
        known = sorted(state.used)
        raise InputError(f"--dim {unused[0]}: no parameter has a symbolic dimension "
                         f"{unused[0]!r}" + (f"; they have {', '.join(known)}" if known else
                                             "; the entry function has no symbolic dimensions"))
    return args, generated

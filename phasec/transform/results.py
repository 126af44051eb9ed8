"""What "the same results" means between two stages of a pipeline.

The pieces :class:`~phasec.transform.validate.ValidateResults` and
``phasec bisect`` share:

* :func:`validation_inputs` -- seeded inputs fitted to each parameter's
  struct info (dtype and shape; symbolic dimensions made small), or the
  user's arrays by parameter name;
* :func:`widen` -- the module with every float type made float64, so the
  stage a pipeline starts from can be evaluated in float64 (the "true"
  result rounding differences are measured against);
* :class:`Tolerance` and :func:`compare_outputs` -- a per-output error bound
  that separates rounding from miscompilation: ``atol + rtol * |ref|``, plus
  ``noise * max|ref32 - ref64|`` (the float32 evaluation's own error on these
  inputs, so ill-conditioned outputs get room) plus
  ``growth * eps(dtype) * K * max|ref|``, where ``K`` counts the roundings
  behind the outputs: every operator contributes one, a reduction (matmul,
  convolution, sum, softmax, norm, pooling, ...) as many as it reduces
  over (:func:`rounding_length`).
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from phasec.errors import InputError
from phasec.interp import eval_prim_expr, sinfo_text
from phasec.ir import IRModule, tir
from phasec.ir.expr import Call, Function, Op
from phasec.ir.struct_info import (
    PrimStructInfo, ShapeStructInfo, StructInfo, TensorStructInfo, TupleStructInfo,
)
from phasec.ir.visitor import ExprVisitor
from phasec.script.json_format import from_json, to_json

__all__ = ["Tolerance", "Mismatch", "validation_inputs", "widen", "compare_outputs",
           "rounding_length", "leaves", "copy_value", "as_float64", "error_and_bound", "worst_ratio", "DEFAULT_DIM", "FLOAT_TYPES"]

#: the value a symbolic dimension takes when no input fixes it: small, so
#: that lowered stages stay cheap to interpret, but above 1, so that a loop
#: bound off by one or a broadcast gone wrong still shows
DEFAULT_DIM = 2
#: float dtypes :func:`widen` makes float64
FLOAT_TYPES = ("float16", "bfloat16", "float32")


@dataclass(frozen=True)
class Tolerance:
    """How far a stage's float output may be from the reference.

    An element fails when ``|got - ref| > atol + rtol * |ref| + noise *
    max|ref32 - ref64| + growth * eps * K * max|ref|`` (see the module
    docstring). Integer, boolean and shape outputs must be equal. Tighten
    with smaller values (``growth=0, noise=0``: only ``atol``/``rtol``),
    loosen with larger ones.
    """

    rtol: float = 1e-5
    atol: float = 1e-6
    noise: float = 16.0
    growth: float = 1.0

    def __post_init__(self) -> None:
        for name in ("rtol", "atol", "noise", "growth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value < 0:
                raise InputError(f"tolerance {name}={value!r}: expected a finite number >= 0")


@dataclass(frozen=True)
class Mismatch:
    """The first place where a stage's outputs leave the reference."""

    output: str                 # "output", "output[1]", ...
    index: tuple[int, ...]      # the element (empty for scalars and whole-value mismatches)
    expected: Any               # the reference value there
    got: Any                    # the stage's value there
    error: float                # |got - expected| (inf for non-numeric mismatches)
    bound: float                # the bound it broke (0 for exact comparisons)
    count: int                  # elements out of bounds in this output
    size: int                   # elements of this output
    reason: str = ""            # for mismatches that are not a value: shape, dtype, structure

    def describe(self) -> str:
        if self.reason:
            return f"{self.output}: {self.reason}"
        where = f" at index {self.index}" if self.index else ""
        exact = self.bound == 0.0
        by = "" if exact else (f" (|difference| {self.error:.3g} > bound {self.bound:.3g}, "
                               f"{self.error / self.bound:.3g}x)" if self.bound > 0 else "")
        return (f"{self.output}: {self.count} of {self.size} element(s) differ{where}: "
                f"expected {self.expected!r}, got {self.got!r}{by}")


# -- inputs -----------------------------------------------------------------------
def _shape(sinfo: TensorStructInfo, dims: dict[str, int], where: str) -> tuple[int, ...]:
    def lookup(v: tir.Var) -> int:
        return dims.setdefault(v.name, DEFAULT_DIM)

    if sinfo.shape is None:
        raise InputError(f"{where} has no known shape ({sinfo_text(sinfo)}): give its value")
    return tuple(int(eval_prim_expr(d, lookup)) for d in sinfo.shape)


def _random(sinfo: StructInfo | None, rng: np.random.Generator, dims: dict[str, int],
            where: str) -> Any:
    if isinstance(sinfo, TensorStructInfo):
        shape = _shape(sinfo, dims, where)
        dtype = sinfo.dtype
        if dtype.startswith(("float", "bfloat")):
            fan_in = math.prod(shape[1:]) if len(shape) >= 2 else 1
            data = rng.standard_normal(shape) / math.sqrt(max(fan_in, 1))
            return data.astype("float32" if dtype == "bfloat16" else dtype)
        if dtype == "bool":
            return rng.integers(0, 2, shape).astype(bool)
        if dtype.startswith(("int", "uint")):
            # small non-negative values: valid as indices into any axis of length >= 4
            return rng.integers(0, 4, shape).astype(dtype)
        raise InputError(f"cannot make a random {dtype} value for {where}: give its value")
    if isinstance(sinfo, TupleStructInfo):
        return tuple(_random(f, rng, dims, f"{where}[{i}]") for i, f in enumerate(sinfo.fields))
    if isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None:
        return tuple(int(eval_prim_expr(v, lambda x: dims.setdefault(x.name, DEFAULT_DIM)))
                     for v in sinfo.values)
    if isinstance(sinfo, PrimStructInfo):
        if sinfo.value is not None:
            return eval_prim_expr(sinfo.value, lambda x: dims.setdefault(x.name, DEFAULT_DIM))
        return float(rng.standard_normal()) if sinfo.dtype.startswith("float") \
            else int(rng.integers(0, 4))
    raise InputError(f"cannot make a random value for {where} ({sinfo_text(sinfo)}): "
                     "give its value")


def _bind_dims(sinfo: StructInfo | None, value: Any, dims: dict[str, int]) -> None:
    if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None \
            and isinstance(value, np.ndarray) and value.ndim == len(sinfo.shape):
        for d, n in zip(sinfo.shape, value.shape):
            if isinstance(d, tir.Var):
                dims.setdefault(d.name, int(n))


def validation_inputs(mod: IRModule, entry: str = "main",
                      given: Sequence[Any] | Mapping[str, Any] | None = None,
                      seed: int = 0, dims: Mapping[str, int] | None = None) -> tuple:
    """The arguments to validate ``mod[entry]`` on.

    ``given`` is a full argument list, or arrays by parameter name (the
    others are drawn). Drawn values are seeded by ``seed``: floats normal
    with standard deviation ``1/sqrt(fan-in)`` (as ``phasec run`` draws
    them), integers in [0, 4), booleans uniform. A symbolic dimension takes
    its value from ``dims``, else from a given array, else
    :data:`DEFAULT_DIM`.
    """
    if entry not in mod or not isinstance(mod[entry], Function):
        raise InputError(f"cannot validate results: the module has no Relax function {entry!r}")
    params = list(mod[entry].params)
    if given is not None and not isinstance(given, Mapping):
        args = tuple(given)
        if len(args) != len(params):
            count = f"{len(params)} argument{'' if len(params) == 1 else 's'}"
            raise InputError(f"validation inputs: {entry} takes {count}, {len(args)} given")
        return args
    by_name = dict(given or {})
    names = [p.name_hint for p in params]
    unknown = sorted(set(by_name) - set(names))
    if unknown:
        raise InputError(f"validation inputs: {', '.join(map(repr, unknown))} is not a "
                         f"parameter of {entry}; its parameters are {', '.join(names) or '(none)'}")
    values = dict(dims or {})
    for p in params:
        if p.name_hint in by_name:
            _bind_dims(p.struct_info, np.asarray(by_name[p.name_hint]), values)
    rng = np.random.default_rng(seed)
    return tuple(by_name[p.name_hint] if p.name_hint in by_name
                 else _random(p.struct_info, rng, values, f"parameter {p.name_hint!r}")
                 for p in params)


def copy_value(value: Any) -> Any:
    """A deep copy of an argument (no run may see another run's writes)."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, (tuple, list)):
        return tuple(copy_value(v) for v in value)
    return value


def as_float64(value: Any) -> Any:
    """Float arrays (and nested tuples of them) as float64; the rest unchanged."""
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return value.astype(np.float64)
    if isinstance(value, tuple):
        return tuple(as_float64(v) for v in value)
    return value


# -- float64 evaluation ---------------------------------------------------------------
def _widen_doc(node: Any) -> Any:
    if isinstance(node, dict):
        if node.get("node") == "Constant" and node.get("dtype") in FLOAT_TYPES \
                and isinstance(node.get("data"), str):
            raw = base64.b64decode(node["data"])
            src = "float32" if node["dtype"] == "bfloat16" else node["dtype"]
            if node["dtype"] == "bfloat16":  # stored as the high halves of float32s
                data = (np.frombuffer(raw, "<u2").astype("<u4") << 16).view("<f4")
            else:
                data = np.frombuffer(raw, np.dtype(src).newbyteorder("<"))
            node = dict(node, dtype="float64",
                        data=base64.b64encode(data.astype("<f8").tobytes()).decode("ascii"))
        return {k: _widen_doc(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_widen_doc(v) for v in node]
    if isinstance(node, str) and node in FLOAT_TYPES:
        return "float64"
    return node


def widen(mod: IRModule) -> IRModule:
    """``mod`` with every float16/bfloat16/float32 type, constant and dtype
    attribute made float64 (through the JSON format, so every node kind is
    covered). Raises what loading the widened module raises: not every
    module has a float64 twin (an operator or intrinsic with no float64 form)."""
    doc = _widen_doc(json.loads(to_json(mod)))
    return from_json(json.dumps(doc))


# -- rounding length ------------------------------------------------------------------
def _size(sinfo: Any) -> int | None:
    if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None:
        dims = [d.value if isinstance(d, tir.IntImm) else None for d in sinfo.shape]
        if None not in dims:
            return math.prod(dims)  # type: ignore[arg-type]
    return None


class _Roundings(ExprVisitor):
    """Counts the roundings of a function: one per operator call, plus the
    length of every reduction (estimated from operand and result sizes)."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def visit_call_(self, expr: Call) -> Any:
        super().visit_call_(expr)
        if type(expr.op) is not Op:
            return
        name = expr.op.name
        out = _size(expr.struct_info)
        sizes = [_size(getattr(a, "struct_info", None)) for a in expr.args]
        length = 1
        if out and ("matmul" in name or name.endswith(("dense", "linear"))):
            first = getattr(expr.args[0], "struct_info", None) if expr.args else None
            if isinstance(first, TensorStructInfo) and first.shape \
                    and isinstance(first.shape[-1], tir.IntImm):
                length = first.shape[-1].value
        elif out and "conv" in name and len(sizes) > 1 and sizes[1]:
            weight = expr.args[1].struct_info
            out_channels = weight.shape[0].value if isinstance(weight, TensorStructInfo) \
                and weight.shape and isinstance(weight.shape[0], tir.IntImm) else 1
            length = max(1, sizes[1] // max(out_channels, 1))
        elif out and sizes and sizes[0]:
            length = max(1, sizes[0] // out)  # sum, mean, pooling, ...
            if any(k in name for k in ("softmax", "norm", "attention", "cumsum", "variance",
                                       "std")):
                length = max(length, _last_dim(expr))
        self.total += length


def _last_dim(expr: Call) -> int:
    sinfo = getattr(expr.args[0], "struct_info", None) if expr.args else None
    if isinstance(sinfo, TensorStructInfo) and sinfo.shape \
            and isinstance(sinfo.shape[-1], tir.IntImm):
        return int(sinfo.shape[-1].value)
    return 1


def rounding_length(mod: IRModule) -> int:
    """``K`` of the error bound: how many roundings the module's float
    results can accumulate, summed over its Relax functions (at least 1).
    Symbolic dimensions count as 1 (they are made small for validation)."""
    counter = _Roundings()
    for _, func in mod.relax_functions():
        counter.visit_expr(func)
    return max(1, counter.total)


# -- comparison -----------------------------------------------------------------------
def leaves(value: Any, path: str = "output") -> Iterator[tuple[str, Any]]:
    """(path, leaf) of a result: tensors and scalars inside nested tuples."""
    if isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            yield from leaves(v, f"{path}[{i}]")
    else:
        yield path, value


def _first(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(mask)[0]) if mask.ndim else ()


def _finite_max(a: np.ndarray) -> float:
    finite = np.abs(a[np.isfinite(a)])
    return float(finite.max()) if finite.size else 0.0


def _truth(ref: np.ndarray, wide: Any) -> np.ndarray:
    if wide is not None and np.shape(wide) == ref.shape:
        return np.asarray(wide, dtype=np.float64)
    return ref.astype(np.float64)


def error_and_bound(got: np.ndarray, ref: np.ndarray, wide: Any, tol: Tolerance,
                    length: int) -> tuple[np.ndarray, np.ndarray]:
    """Elementwise ``|got - truth|`` and the bound of :class:`Tolerance` for a
    float output (``truth``: ``wide``, the float64 evaluation, when given)."""
    truth = _truth(ref, wide)
    with np.errstate(all="ignore"):
        noise = _finite_max(np.abs(ref.astype(np.float64) - truth)) if wide is not None else 0.0
        err = np.abs(got.astype(np.float64) - truth)
        bound = (tol.atol + tol.rtol * np.abs(truth) + tol.noise * noise
                 + tol.growth * float(np.finfo(ref.dtype).eps) * length * _finite_max(truth))
    return err, np.broadcast_to(bound, ref.shape)


def worst_ratio(got: Any, ref32: Any, ref64: Any | None, tol: Tolerance, length: int) -> float:
    """The largest ``error / bound`` over the float outputs (1.0: at the bound)."""
    worst = 0.0
    wide = dict(leaves(ref64)) if ref64 is not None else {}
    for (path, g), (_, r) in zip(leaves(got), leaves(ref32)):
        if not (isinstance(r, np.ndarray) and r.dtype.kind == "f" and isinstance(g, np.ndarray)
                and g.shape == r.shape):
            continue
        err, bound = error_and_bound(g, r, wide.get(path), tol, length)
        with np.errstate(all="ignore"):
            ratio = err / np.where(bound > 0, bound, np.inf)
        finite = ratio[np.isfinite(ratio)]
        if finite.size:
            worst = max(worst, float(finite.max()))
    return worst


def compare_outputs(got: Any, ref32: Any, ref64: Any | None, tol: Tolerance,
                    length: int) -> Mismatch | None:
    """The first output of ``got`` out of bounds, or None.

    ``ref32`` is the starting stage's result in its own types, ``ref64`` its
    float64 evaluation (None when it could not be made): floats are
    compared with ``ref64`` when there is one, with the bound of
    :class:`Tolerance`; everything else with ``ref32``, exactly.
    """
    g_leaves = list(leaves(got))
    r_leaves = list(leaves(ref32))
    if len(g_leaves) != len(r_leaves) or [p for p, _ in g_leaves] != [p for p, _ in r_leaves]:
        return Mismatch("output", (), None, None, math.inf, 0.0, 1, 1,
                        f"the result's structure changed: {len(r_leaves)} value(s) before, "
                        f"{len(g_leaves)} after")
    wide = dict(leaves(ref64)) if ref64 is not None else {}
    for (path, g), (_, r) in zip(g_leaves, r_leaves):
        problem = _compare_leaf(path, g, r, wide.get(path), tol, length)
        if problem is not None:
            return problem
    return None


def _compare_leaf(path: str, got: Any, ref: Any, wide: Any, tol: Tolerance,
                  length: int) -> Mismatch | None:
    if not isinstance(ref, (np.ndarray, np.generic, int, float, bool)):
        if isinstance(ref, tuple) or ref is None or isinstance(ref, str):
            return None if got == ref else Mismatch(path, (), ref, got, math.inf, 0.0, 1, 1,
                                                    f"expected {ref!r}, got {got!r}")
        return None  # closures and other objects: not comparable by value
    r = np.asarray(ref)
    try:
        g = np.asarray(got)
    except Exception:  # noqa: BLE001 - anything unconvertible is a mismatch
        g = np.asarray(None, dtype=object)
    if g.dtype == object or g.shape != r.shape or g.dtype != r.dtype:
        what = ("a tensor" if g.dtype != object else "no tensor")
        reason = (f"shape {g.shape} instead of {r.shape}" if g.dtype != object
                  and g.shape != r.shape else f"dtype {g.dtype} instead of {r.dtype}"
                  if g.dtype != object else f"expected a tensor, got {what}")
        return Mismatch(path, (), None, None, math.inf, 0.0, 1, max(r.size, 1), reason)
    if r.dtype.kind != "f":
        bad = g != r
        if not bad.any():
            return None
        idx = _first(bad)
        return Mismatch(path, idx, r[idx].item(), g[idx].item(), math.inf, 0.0,
                        int(bad.sum()), r.size)
    err, bound = error_and_bound(g, r, wide, tol, length)
    with np.errstate(all="ignore"):
        g64 = g.astype(np.float64)
        # Where the starting stage itself overflowed (inf or NaN in its own
        # types, whatever float64 gives), any non-finite value is the same
        # result: which of inf and NaN an overflow ends in is rounding too.
        # Elsewhere a non-finite value is a change.
        overflowed = ~np.isfinite(r) & ~np.isfinite(g64)
        bad = ~((err <= bound) | overflowed)
    truth = _truth(r, wide)
    if not bad.any():
        return None
    idx = _first(bad)
    b = float(bound[idx])
    return Mismatch(path, idx, float(truth[idx]), g[idx].item(), float(err[idx]), b,
                    int(bad.sum()), r.size)

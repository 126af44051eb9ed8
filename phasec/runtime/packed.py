"""The packed-function registry: Python functions callable from Relax programs.

A program calls them by name with ``R.call_packed("name", ...)``,
``R.call_pure_packed("name", ...)`` or ``R.call_dps_packed("name", ...)``;
the reference interpreter and the VM look the name up here at run time.

    @phasec.register_func("my.double")
    def double(x):
        return x * 2

Arguments arrive as numpy arrays (tensors), tuples (Relax tuples), tuples of
ints (shapes), Python scalars (prim values), ``str`` (strings and dtypes) and
callables (closures: calling one runs it). For ``call_dps_packed`` the outputs
are passed last and must be written in place.

A few ``vm.builtin.*`` functions that need no VM state are registered here
too, so programs lowered TVM-style can call them by name.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from phasec.errors import PhasecError, ProgramAssertionError, VMError

__all__ = ["PackedFuncError", "register_func", "get_packed_func", "find_packed_func",
           "list_packed_funcs", "remove_func"]

F = TypeVar("F", bound=Callable[..., Any])


class PackedFuncError(PhasecError, LookupError):
    """An unknown packed-function name, or a name registered twice."""


_REGISTRY: dict[str, Callable[..., Any]] = {}
# Registration may happen from several threads (e.g. test workers); lookups
# are plain dict reads, which are atomic in CPython.
_LOCK = threading.Lock()


def register_func(name: str, f: Callable[..., Any] | None = None, override: bool = False):
    """Register ``f`` as the packed function ``name``.

    Works as a call (``register_func("a.b", fn)``) or as a decorator
    (``@register_func("a.b")``); both return ``f`` unchanged. Registering a
    name that exists is an error unless ``override=True``.
    """
    if not isinstance(name, str) or not name:
        raise PackedFuncError(f"a packed function name must be a non-empty string, not {name!r}")

    def register(func: F) -> F:
        if not callable(func):
            raise PackedFuncError(f"packed function {name!r} must be callable, "
                                  f"not {type(func).__name__}")
        with _LOCK:
            if name in _REGISTRY and not override:
                raise PackedFuncError(f"packed function {name!r} is already registered; "
                                      f"pass override=True to replace it")
            _REGISTRY[name] = func
        return func

    if f is None:
        return register
    return register(f)


def find_packed_func(name: str) -> Callable[..., Any] | None:
    """The function registered as ``name``, or None."""
    return _REGISTRY.get(name)


def get_packed_func(name: str) -> Callable[..., Any]:
    """The function registered as ``name``; unknown names raise PackedFuncError
    listing the closest registered names."""
    func = _REGISTRY.get(name)
    if func is None:
        close = difflib.get_close_matches(name, list(_REGISTRY), n=3)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise PackedFuncError(f"no packed function named {name!r} is registered{hint} "
                              f"(register one with phasec.register_func({name!r}))")
    return func


def list_packed_funcs() -> list[str]:
    """Every registered name, sorted."""
    return sorted(_REGISTRY)


def remove_func(name: str) -> None:
    """Unregister ``name`` (no error if it is not registered)."""
    with _LOCK:
        _REGISTRY.pop(name, None)


# ---------------------------------------------------------------------------
# Stateless VM builtins (TVM names). Builtins that need the VM's state —
# closures, storage accounting — are implemented by the VM itself.
# ---------------------------------------------------------------------------

def _shape_of(tensor: np.ndarray) -> tuple[int, ...]:
    return tuple(int(d) for d in np.shape(tensor))


def _reshape(tensor: np.ndarray, shape: Any) -> np.ndarray:
    return np.reshape(tensor, tuple(int(d) for d in shape))


def _tuple_getitem(tup: Any, index: Any) -> Any:
    return tup[int(index)]


def _make_tuple(*fields: Any) -> tuple:
    return tuple(fields)


def _copy(value: Any) -> Any:
    return np.array(value, copy=True) if isinstance(value, np.ndarray) else value


def _null_value() -> None:
    return None


def _shape_to_tensor(shape: Any) -> np.ndarray:
    return np.array([int(d) for d in shape], np.int64).reshape(-1)


def _tensor_to_shape(tensor: Any) -> tuple[int, ...]:
    values = tuple(int(v) for v in np.asarray(tensor).reshape(-1))
    if any(v < 0 for v in values):
        raise VMError(f"R.tensor_to_shape: the tensor {list(values)} has a negative dimension")
    return values


def render_values(fmt: str, values: Any) -> str:
    """What R.print writes and R.assert_op reports: ``fmt.format(*values)``, or
    without a format the values separated by spaces."""
    shown = [np.asarray(v) if isinstance(v, np.ndarray) else v for v in values]
    return fmt.format(*shown) if fmt else " ".join(str(v) for v in shown)


def _print(fmt: str, *values: Any) -> tuple:
    print(render_values(fmt, values), flush=True)
    return ()


def _assert_op(condition: Any, fmt: str, *args: Any) -> tuple:
    if not bool(np.asarray(condition)):
        raise ProgramAssertionError(render_values(fmt, args) if fmt or args
                                    else "Assertion Failed")
    return ()


# Sorting and data-dependent shapes (R.sort, R.argsort, R.topk, R.median,
# R.unique, R.nonzero lower to these, as TVM's CPU build calls packed sorts):
# numpy's stable sorts; the references of the operators call the same code.

def _order(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Stable sorting indices along ``axis``; descending keeps equal elements in
    their original order (NaN sorts last ascending, first descending)."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    flipped = np.flip(x, axis)
    n = x.shape[axis]
    return (n - 1) - np.flip(np.argsort(flipped, axis=axis, kind="stable"), axis)


def _sort(x: Any, axis: int, descending: bool) -> np.ndarray:
    x = np.asarray(x)
    return np.take_along_axis(x, _order(x, int(axis), bool(descending)), int(axis))


def _argsort(x: Any, axis: int, descending: bool, dtype: str) -> np.ndarray:
    return _order(np.asarray(x), int(axis), bool(descending)).astype(str(dtype))


def _topk(x: Any, k: int, axis: int, ret_type: str, largest: bool, dtype: str) -> Any:
    x = np.asarray(x)
    axis, k = int(axis) % max(x.ndim, 1), int(k)
    n = x.shape[axis]
    take = n if k < 1 or k > n else k  # TVM's rule: k < 1 or beyond the axis takes it all
    idx = np.take(_order(x, axis, bool(largest)), np.arange(take), axis=axis)
    values = np.take_along_axis(x, idx, axis)
    idx = idx.astype(str(dtype))
    return {"both": (values, idx), "values": values, "indices": idx}[str(ret_type)]


def _median(x: Any, axis: int, all_axes: bool, keepdims: bool) -> Any:
    """torch.median: the lower median; along one axis, also its index."""
    x = np.asarray(x)
    if all_axes:
        flat = x.reshape(-1)
        order = np.argsort(flat, kind="stable")
        value = flat[order[(flat.size - 1) // 2]]
        return np.asarray(value).reshape((1,) * x.ndim if keepdims else ())
    ax = int(axis) % x.ndim
    order = np.argsort(x, axis=ax, kind="stable")
    mid = np.take(order, [(x.shape[ax] - 1) // 2], axis=ax)
    values, index = np.take_along_axis(x, mid, ax), mid.astype(np.int64)
    if not keepdims:
        values, index = np.squeeze(values, ax), np.squeeze(index, ax)
    return values, index


def _unique(x: Any, is_sorted: bool, return_index: bool, return_inverse: bool,
            return_counts: bool, has_axis: bool, axis: int) -> Any:
    x = np.asarray(x)
    ax = int(axis) % x.ndim if has_axis else None
    values, index, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                               return_counts=True, axis=ax)
    inverse = inverse.reshape(-1)
    if not is_sorted:  # the order of first occurrence
        perm = np.argsort(index, kind="stable")
        rank = np.empty_like(perm)
        rank[perm] = np.arange(perm.size)
        values = np.take(values, perm, axis=0 if ax is None else ax)
        index, counts, inverse = index[perm], counts[perm], rank[inverse]
    out: list[np.ndarray] = [values]
    for flag, extra in ((return_index, index), (return_inverse, inverse),
                        (return_counts, counts)):
        if flag:
            out.append(extra.astype(np.int64))
    return out[0] if len(out) == 1 else tuple(out)


def _nonzero(x: Any) -> np.ndarray:
    x = np.asarray(x)
    return np.array(np.nonzero(x), np.int64).reshape(x.ndim, -1)


def _dynamic_strided_slice(x: Any, begin: Any, end: Any, strides: Any) -> np.ndarray:
    x = np.asarray(x)
    b, e, s = (np.asarray(v).reshape(-1).tolist() for v in (begin, end, strides))
    if not len(b) == len(e) == len(s) == x.ndim:
        raise VMError(f"R.dynamic_strided_slice: begin, end and strides need {x.ndim} entries, "
                      f"got {len(b)}, {len(e)}, {len(s)}")
    if any(v == 0 for v in s):
        raise VMError(f"R.dynamic_strided_slice: a stride is zero ({s})")
    return x[tuple(slice(p, q, r) for p, q, r in zip(b, e, s))].copy()


def _create_view(data: Any, shape: Any, dtype: Any, offset: Any) -> np.ndarray:
    """``runtime.TVMTensorCreateView`` (R.memory.view, every operand filled in
    by VMBuiltinLower): a numpy array over the same memory as ``data``,
    ``offset`` bytes in. A view past the end of ``data`` is a VMError."""
    if not isinstance(data, np.ndarray) or not data.flags.c_contiguous:
        raise VMError("R.memory.view needs a contiguous tensor to view")
    out_dtype = np.dtype(str(dtype))
    out_shape = tuple(int(d) for d in shape)
    start = int(offset)
    nbytes = int(np.prod(out_shape, dtype=np.int64)) * out_dtype.itemsize
    if start < 0 or start + nbytes > data.nbytes:
        raise VMError(f"R.memory.view: a view of {nbytes} bytes at byte offset {start} exceeds "
                      f"the {data.nbytes} bytes of the viewed tensor")
    flat = data.reshape(-1).view(np.uint8)
    return flat[start:start + nbytes].view(out_dtype).reshape(out_shape)


def _ensure_zero_offset(data: Any) -> Any:
    """``vm.builtin.ensure_zero_offset``: a tensor whose data starts at its
    buffer's beginning (a view at an offset is copied)."""
    if isinstance(data, np.ndarray) and data.base is not None and (
            not data.flags.c_contiguous
            or data.__array_interface__["data"][0] != np.asarray(data.base).__array_interface__["data"][0]):
        return np.ascontiguousarray(data).copy()
    return data


def _to_device(data: Any, device_type: Any, device_id: Any, scope: Any = "global") -> Any:
    """``vm.builtin.to_device`` (R.to_vdevice after VMBuiltinLower, TVM's
    layout): a copy, on the one device phasec runs on, the CPU."""
    if int(device_type) != 1:
        raise ValueError(f"vm.builtin.to_device: device type {int(device_type)} is not the CPU "
                         "(1), the only device phasec runs on")
    return np.array(data, copy=True)


def _read_if_cond(cond: Any) -> bool:
    return bool(np.asarray(cond).reshape(-1)[0]) if np.size(cond) else False


for _name, _func in {
    "vm.builtin.shape_of": _shape_of,
    "vm.builtin.reshape": _reshape,
    "vm.builtin.tuple_getitem": _tuple_getitem,
    "vm.builtin.make_tuple": _make_tuple,
    "vm.builtin.copy": _copy,
    "vm.builtin.null_value": _null_value,
    "vm.builtin.read_if_cond": _read_if_cond,
    # R.shape_to_tensor, R.tensor_to_shape, R.print, R.assert_op lower to these
    "vm.builtin.shape_to_tensor": _shape_to_tensor,
    "vm.builtin.tensor_to_shape": _tensor_to_shape,
    "relax.run.print": _print,
    "relax.run.assert_op": _assert_op,
    "phasec.sort": _sort, "phasec.argsort": _argsort, "phasec.topk": _topk,
    "phasec.median": _median, "relax.run.unique": _unique, "relax.run.nonzero": _nonzero,
    "phasec.dynamic_strided_slice": _dynamic_strided_slice,
    # R.memory.view and R.memory.ensure_zero_offset lower to these (as in TVM)
    "runtime.TVMTensorCreateView": _create_view,
    "vm.builtin.ensure_zero_offset": _ensure_zero_offset,
    "vm.builtin.to_device": _to_device,
}.items():
    register_func(_name, _func)

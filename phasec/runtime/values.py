"""Run-time values as the interpreter and the VM both treat them: the
storage tensors are carved from, scalar casts, the truth of an ``If``
condition, and the text of a value in error messages.

=====================  ===========================================
Relax value            Python value
=====================  ===========================================
tensor                 ``numpy.ndarray``
tuple                  ``tuple``
shape                  ``tuple`` of ``int``
prim value             ``int`` / ``float`` / ``bool``
string, dtype          ``str``
storage                :class:`Storage`
null                   ``None``
=====================  ===========================================
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from phasec.errors import VMError
from phasec.ir import tir

__all__ = ["InterpError", "Storage", "STORAGE_ALIGNMENT", "describe_value", "cast_scalar",
           "truth", "depth_exceeded", "DEFAULT_MAX_CALL_DEPTH"]

#: Most Relax calls pending at once before the VM or the interpreter stops
#: (a guard against runaway recursion eating all memory); calls in tail
#: position reuse their caller's frame and do not count.
DEFAULT_MAX_CALL_DEPTH = 100_000

#: Byte alignment of tensors carved out of storage.
STORAGE_ALIGNMENT = 64


class InterpError(VMError):
    """A program went wrong while being interpreted: wrong arguments, a failed
    match_cast, an operator that raised... The message names the function and
    the binding. (The VM raises it too, from the value semantics it shares
    with the interpreter: a storage too small, an If condition that is no
    scalar.)"""


def describe_value(value: Any) -> str:
    """What a run-time value is, for error messages ("float32 tensor of shape (2, 3)")."""
    if isinstance(value, np.ndarray):
        return f"{value.dtype} tensor of shape {tuple(value.shape)}"
    if isinstance(value, np.generic):
        return f"{value.dtype} scalar {value.item()!r}"
    if isinstance(value, tuple):
        if value and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                         for v in value):
            return f"shape or tuple {tuple(int(v) for v in value)}"
        if len(value) > 4:
            return f"tuple of {len(value)} values"
        return f"tuple ({', '.join(describe_value(v) for v in value)})"
    if isinstance(value, bool):
        return f"bool {value}"
    if isinstance(value, (int, float)):
        return f"{type(value).__name__} {value!r}"
    if isinstance(value, str):
        return f"string {value!r}"
    if value is None:
        return "null"
    if isinstance(value, Storage):
        return f"storage of {value.nbytes} bytes"
    if callable(value):
        return "function"
    return type(value).__name__


def depth_exceeded(limit: int, callee: str, runner: str) -> str:
    """The message of the recursion guard (the VM's and the interpreter's):
    ``limit`` calls are pending, the next one calls ``callee``; ``runner``
    (``VirtualMachine``, ``Interpreter``) is what takes the limit. Calls in
    tail position reuse their caller's frame and never count."""
    return (f"call depth exceeded {limit} calling {callee!r}: {limit} Relax calls are "
            f"pending (a recursion this deep not in tail position, or a runaway one; calls "
            f"whose result is returned unchanged do not count). If the program is right, "
            f"raise the limit: {runner}(..., max_call_depth=N), or phasec run "
            f"--max-call-depth N")


def cast_scalar(value: Any, dtype: str) -> Any:
    """``value`` as the Python scalar type of ``dtype`` (int, float or bool)."""
    if dtype == "bool":
        return bool(value)
    if tir.is_float(dtype):
        return float(value)
    return int(value)


def truth(cond: Any) -> bool:
    """The branch an If takes: the condition is a scalar (bool) tensor or prim value."""
    if isinstance(cond, np.ndarray):
        if cond.size != 1:
            raise InterpError(f"an If condition must be a scalar, got {describe_value(cond)}")
        return bool(cond.reshape(-1)[0])
    if isinstance(cond, (bool, int, float, np.generic)):
        return bool(cond)
    raise InterpError(f"an If condition must be a scalar tensor or prim value, "
                      f"got {describe_value(cond)}")


class Storage:
    """A raw byte buffer from ``alloc_storage``; tensors are views into it."""

    __slots__ = ("data", "nbytes", "owner", "__weakref__")

    def __init__(self, nbytes: int, alignment: int = STORAGE_ALIGNMENT) -> None:
        if nbytes < 0:
            raise InterpError(f"cannot allocate storage of {nbytes} bytes")
        raw = np.empty(nbytes + alignment, dtype=np.uint8)
        skew = (-raw.ctypes.data) % alignment
        self.data = raw[skew:skew + nbytes]
        self.nbytes = nbytes
        #: the array owning the memory: every tensor view keeps it alive
        #: (numpy points a view's ``base`` at the owner, not at ``data``)
        self.owner = raw

    def tensor(self, offset: int, shape: Sequence[int], dtype: str) -> np.ndarray:
        """A tensor view of ``shape``/``dtype`` starting ``offset`` bytes in."""
        shape = tuple(int(d) for d in shape)
        np_dtype = np.dtype(dtype)
        size = np_dtype.itemsize * math.prod(shape)
        if offset < 0 or offset + size > self.nbytes:
            raise InterpError(f"tensor of {size} bytes at offset {offset} does not fit in "
                              f"storage of {self.nbytes} bytes")
        if offset % np_dtype.itemsize:
            raise InterpError(f"offset {offset} is not aligned to {dtype} ({np_dtype.itemsize} bytes)")
        return np.ndarray(shape, np_dtype, buffer=self.data, offset=offset)

    def __repr__(self) -> str:
        return f"<Storage {self.nbytes} bytes>"

"""numpy's array object as this process lays it out, probed once: where an
array keeps its data pointer, rank, dimensions, dtype and flags
(:class:`.abi.ArrayLayout`), for kernel entries that read their array
arguments natively (split from :mod:`.runtime`)."""

from __future__ import annotations

import ctypes

import numpy as np

from phasec.ir import tir
from phasec.backend.llvm.abi import ArrayLayout

__all__ = ["NUMPY_DTYPE", "probe_array_data_offset", "probe_array_layout"]

#: phasec's dtypes as numpy's canonical dtype objects
NUMPY_DTYPE = {d: np.dtype("bool" if d == "bool" else d) for d in tir.DTYPES}


def probe_array_data_offset() -> int | None:
    """Byte offset of the data pointer inside a numpy array object, or None.

    Verified on several arrays (including views) so a numpy with a different
    object layout falls back to passing ``ndarray.ctypes.data``.
    """
    base = np.zeros(64, dtype=np.float64)
    samples = [base, base[3:], np.zeros((3, 5), np.int8), np.empty(0, np.float32)]
    try:
        for off in range(8, 64, 8):  # within PyArrayObject_fields
            if all(arr.ctypes.data != 0 and ctypes.c_void_p.from_address(id(arr) + off).value
                   == arr.ctypes.data for arr in samples[:3]):
                return off
    except Exception:  # pragma: no cover - defensive
        return None
    return None


def probe_array_layout(data_offset: int | None) -> ArrayLayout | None:
    """The fields of numpy's array object (``PyArrayObject_fields``: data, nd,
    dimensions, strides, base, descr, flags, in this order after the object
    header) and the canonical dtype objects, verified on arrays of several
    ranks, dtypes and flags; None if anything does not match, in which case
    kernels check their arguments in Python."""
    if data_offset is None:
        return None
    read_ptr = lambda address: ctypes.c_void_p.from_address(address).value or 0  # noqa: E731
    read_i32 = lambda address: ctypes.c_int32.from_address(address).value  # noqa: E731
    type_offset = 8  # after ob_refcnt in the header of every object
    layout = ArrayLayout(
        type_offset=type_offset, data_offset=data_offset, nd_offset=data_offset + 8,
        dims_offset=data_offset + 16, descr_offset=data_offset + 40,
        flags_offset=data_offset + 48, ndarray_type=id(np.ndarray),
        descrs=tuple((d, id(NUMPY_DTYPE[d])) for d in tir.DTYPES))
    readonly = np.arange(6, dtype=np.int16)
    readonly.flags.writeable = False
    samples = [np.zeros((), np.float64), np.zeros(5, np.float32),
               np.zeros((2, 3, 4), np.int64)[:, 1:], np.zeros((3, 5), np.uint8).T, readonly,
               np.empty((0, 7), np.float16), *(np.empty((2, 1), dt) for dt in NUMPY_DTYPE.values())]
    try:
        if read_ptr(id(object()) + type_offset) != id(object):
            return None
        for a in samples:
            base = id(a)
            if read_ptr(base + type_offset) != id(np.ndarray) or \
                    read_i32(base + layout.nd_offset) != a.ndim or \
                    read_ptr(base + layout.descr_offset) != id(a.dtype) or \
                    read_i32(base + layout.flags_offset) != a.flags.num:
                return None
            dims = read_ptr(base + layout.dims_offset)
            if a.ndim and tuple(ctypes.c_int64.from_address(dims + 8 * k).value
                                for k in range(a.ndim)) != a.shape:
                return None
    except Exception:  # pragma: no cover - defensive
        return None
    return layout

"""The VM's memory: storages, tensor views of them, and the accounting
behind ``VirtualMachine.stats`` (a mixin of :class:`VirtualMachine`, split
from ``vm.py`` along that seam).

Allocation builtins with constant operands (static shapes: the common case)
are specialized when a function is decoded; a constant-size
``vm.alloc_storage`` keeps the storage it made and reuses it on the next
call when nothing refers to it any more (see :meth:`VMMemory._pooled_storage`).
"""

from __future__ import annotations

import functools
import math
import sys
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from phasec.errors import VMError
from phasec.runtime.values import STORAGE_ALIGNMENT, Storage, describe_value

__all__ = ["VMMemory"]


class VMMemory:
    """Storage allocation and accounting for :class:`VirtualMachine`."""

    _stats: dict[str, int]

    def _init_memory(self) -> None:
        self._live_refs: dict[int, tuple[Any, int]] = {}
        #: Each allocating instruction keeps its storage between calls in a
        #: cell (see _pooled_storage): [storage, nbytes, in use, idle reference
        #: counts of the storage and of its owner].
        #: The cells marked in use, by id: their storages count in the live
        #: bytes until ``stats`` sweeps the free ones out (see _raise_peak).
        self._pool_in_use: dict[int, list[Any]] = {}
        self._pool_lock = threading.Lock()
        self.reset_stats()

    @property
    def stats(self) -> dict[str, int]:
        """Allocation counters since creation or :meth:`reset_stats`:
        ``storage_allocs``, ``tensor_allocs``, ``bytes_allocated`` (total),
        ``live_bytes`` (allocated and still referenced) and ``peak_bytes``."""
        self._sweep()
        return dict(self._stats)

    @property
    def peak_bytes(self) -> int:
        """The most bytes of VM-allocated memory alive at once."""
        return self._stats["peak_bytes"]

    def reset_stats(self) -> None:
        if hasattr(self, "_pool_in_use"):
            self._sweep()
        live = getattr(self, "_stats", {}).get("live_bytes", 0)
        self._stats = {"storage_allocs": 0, "tensor_allocs": 0, "bytes_allocated": 0,
                       "live_bytes": live, "peak_bytes": live}

    # -- builtins --------------------------------------------------------------------
    def _account(self, owner: Any, nbytes: int) -> None:
        stats = self._stats
        if stats["live_bytes"] + nbytes > stats["peak_bytes"]:
            with self._pool_lock:
                self._raise_peak(nbytes)
        stats["bytes_allocated"] += nbytes
        stats["live_bytes"] += nbytes
        # A weak reference with a callback (much cheaper than weakref.finalize);
        # the VM keeps the reference alive until the owner dies.
        # (Keyed by the reference's id: a weakref hashes like its referent,
        # and arrays are unhashable.)
        ref = weakref.ref(owner, self._release)
        self._live_refs[id(ref)] = (ref, nbytes)

    def _release(self, ref: "weakref.ref[Any]") -> None:
        entry = self._live_refs.pop(id(ref), None)
        if entry is not None:
            self._stats["live_bytes"] -= entry[1]

    def _alloc_storage(self, size: Any, dtype: Any = None) -> Storage:
        return self._new_storage(_nbytes(size))

    def _new_storage(self, nbytes: int) -> Storage:
        storage = _VMStorage(nbytes)
        self._stats["storage_allocs"] += 1
        # Tensor views keep the owning array alive, not the Storage object.
        self._account(storage.owner, nbytes)
        return storage

    # A straight-line model allocates the same storages on every call, and a
    # fresh 64 KiB numpy allocation plus its accounting costs ~3-4 us, as much
    # as a small kernel. So each allocating instruction keeps the storage it
    # made last; the next call reuses it when nothing refers to it any more:
    # no register, no tensor view of it (every view holds the owning array,
    # so the reference counts of the storage and its owner are back at what
    # they were when it was new). A storage still in use (an output the
    # caller kept) is left to the caller and accounted like any other; the
    # instruction allocates a new one. An instruction whose size depends on
    # symbolic dimensions reuses its storage for any size up to the largest it
    # has met (like an arena: a model called at several sizes keeps the
    # memory of its largest call, as a static build of that size would).
    # The tensor views of a storage cost ~0.4 us each to make, so an
    # allocation whose tensor only kernels read keeps its view in the
    # storage (``alloc_tensor.reusing_views``): the next call takes it again
    # when nothing but the storage refers to it. Those kept views hold the
    # owner too; a storage is free when its owner's count is its own plus one
    # per kept view and every kept view is free (see _idle).
    def _sweep(self) -> None:
        """Pooled storages nothing refers to any more stop counting as live."""
        in_use = self._pool_in_use
        if not in_use:
            return
        idle = [cell for cell in in_use.values() if _idle(cell)]
        for cell in idle:
            cell[2] = False
            del in_use[id(cell)]
            self._stats["live_bytes"] -= cell[1]

    def _pooled_storage(self, cell: list[Any], nbytes: int | None = None) -> Storage:
        """The storage of ``cell``'s instruction for this call: its last one
        when free (and, for ``nbytes`` given, at least that large), else new."""
        # (acquire/release: half the cost of ``with`` on this path, taken by
        # every allocation of every call)
        lock = self._pool_lock
        lock.acquire()
        try:
            if cell[2] and (nbytes is None or nbytes <= cell[1]) and _idle(cell):
                # the common case: the storage of the last call, free again and
                # large enough, is taken at once (in use before and after, so
                # the live bytes and the peak stay as they are)
                stats = self._stats
                stats["storage_allocs"] += 1
                stats["bytes_allocated"] += cell[1]
                return cell[0]
            return self._new_pooled_storage(cell, nbytes)
        finally:
            lock.release()

    def _new_pooled_storage(self, cell: list[Any], nbytes: int | None) -> Storage:
        """:meth:`_pooled_storage` when the cell's last storage is not free
        or too small (called with the pool lock held)."""
        stats = self._stats
        if cell[0] is not None and cell[2] and _idle(cell):  # its last storage is free
            cell[2] = False
            del self._pool_in_use[id(cell)]
            stats["live_bytes"] -= cell[1]
        if cell[0] is not None and cell[2]:
            # still in use (e.g. a returned tensor): from now on it is
            # accounted like any other storage, until its owner dies
            ref = weakref.ref(cell[0].owner, self._release)
            self._live_refs[id(ref)] = (ref, cell[1])
            cell[0], cell[2] = None, False
            del self._pool_in_use[id(cell)]
        if nbytes is not None and (cell[0] is None or cell[1] < nbytes):
            cell[0], cell[1] = None, nbytes
        if cell[0] is None:
            cell[0] = _VMStorage(cell[1])  # nothing else refers to it yet:
            cell[3], cell[4] = sys.getrefcount(cell[0]), sys.getrefcount(cell[0].owner)
        if stats["live_bytes"] + cell[1] > stats["peak_bytes"]:
            self._raise_peak(cell[1])
        cell[2] = True
        self._pool_in_use[id(cell)] = cell
        stats["storage_allocs"] += 1
        stats["bytes_allocated"] += cell[1]
        stats["live_bytes"] += cell[1]
        return cell[0]

    def _raise_peak(self, nbytes: int) -> None:
        """Count ``nbytes`` more becoming live now in the peak, exactly: the
        live bytes without the pooled storages nothing refers to. Those stay
        marked in use (the live bytes count them until ``stats`` sweeps), so
        the next call takes them on the fast path; marking them free here
        made every call's allocations take the slow path and sweep again.
        (Called with the pool lock held.)"""
        stats = self._stats
        live = stats["live_bytes"] - sum(
            cell[1] for cell in self._pool_in_use.values() if _idle(cell))
        if live + nbytes > stats["peak_bytes"]:
            stats["peak_bytes"] = live + nbytes

    def _alloc_tensor(self, storage: Any, offset: Any, shape: Any, dtype: Any) -> np.ndarray:
        if not isinstance(storage, Storage):
            raise VMError(f"alloc_tensor needs a storage, got {describe_value(storage)}")
        self._stats["tensor_allocs"] += 1
        return storage.tensor(int(offset), _shape(shape), str(dtype))

    def _const_builtin(self, name: str, args: tuple[int, ...], consts: Mapping[int, Any]
                       ) -> tuple[Callable[..., Any], tuple[int, ...]] | None:
        """A specialized ``(function, argument registers)`` for an allocation
        builtin whose offset and dtype operands are constant registers (and,
        static shapes, its size or shape), or None. Conversions and checks
        that depend only on constants happen here, once; what remains per
        call is the allocation itself."""
        try:
            if name == "vm.alloc_storage" and args:
                cell: list[Any] = [None, 0, False, 0, 0]
                pooled = self._pooled_storage
                if args[0] not in consts:  # a size of symbolic dimensions
                    def alloc_symbolic_storage(size: Any, *_: Any) -> Storage:
                        if type(size) is tuple:  # a shape made by make_shape: ints
                            return pooled(cell, math.prod(size))
                        return pooled(cell, _nbytes(size))
                    return alloc_symbolic_storage, args
                cell[1] = _nbytes(consts[args[0]])
                if cell[1] < 0:
                    return None
                alloc = functools.partial(pooled, cell)
                # (for a straight-line function that takes all its storages
                # at once: see claimer)
                alloc.pooled_cell = cell  # type: ignore[attr-defined]
                alloc.pool = self  # type: ignore[attr-defined]
                return alloc, ()
            if name == "vm.alloc_tensor" and len(args) == 4 and args[1] in consts \
                    and args[3] in consts:
                offset = int(consts[args[1]])
                np_dtype = np.dtype(str(consts[args[3]]))
                shape = _shape(consts[args[2]]) if args[2] in consts else None
            else:
                return None
        except (VMError, TypeError, ValueError):
            return None  # leave the error to the generic builtin, at run time
        if offset < 0 or offset % np_dtype.itemsize:
            return None
        vm = self
        generic = self._alloc_tensor
        dtype_text = str(np_dtype)
        itemsize = np_dtype.itemsize
        if shape is None:  # symbolic dimensions: a shape built by make_shape
            def alloc_symbolic_tensor(storage: Any, dims: Any) -> np.ndarray:
                if type(storage) is _VMStorage and type(dims) is tuple:
                    try:  # (numpy refuses a negative dimension or a short buffer)
                        tensor = np.ndarray(dims, np_dtype, storage.data, offset)
                    except (TypeError, ValueError):
                        pass
                    else:
                        vm._stats["tensor_allocs"] += 1
                        return tensor
                return generic(storage, offset, dims, dtype_text)  # errors, other storages
            return alloc_symbolic_tensor, (args[0], args[2])
        end = offset + itemsize * math.prod(shape)

        def alloc_tensor(storage: Any) -> np.ndarray:
            if type(storage) is not _VMStorage or end > storage.nbytes:
                return generic(storage, offset, shape, dtype_text)  # errors, other storages
            vm._stats["tensor_allocs"] += 1  # (reset_stats replaces the dict)
            return np.ndarray(shape, np_dtype, storage.data, offset)

        key = object()  # this instruction's view in a storage's kept views

        def alloc_reusing_view(storage: Any) -> np.ndarray:
            if type(storage) is not _VMStorage or end > storage.nbytes:
                return generic(storage, offset, shape, dtype_text)  # errors, other storages
            vm._stats["tensor_allocs"] += 1
            tensor = storage.views.get(key)
            if tensor is None or sys.getrefcount(tensor) != _KEPT_VIEW_REFS:
                tensor = storage.views[key] = np.ndarray(shape, np_dtype, storage.data, offset)
            return tensor
        # Only for a tensor nothing but kernels reads (the caller decides):
        # a view that reached a user could have had its shape or flags set.
        alloc_tensor.reusing_views = alloc_reusing_view  # type: ignore[attr-defined]
        alloc_reusing_view.view_key = key  # type: ignore[attr-defined]
        return alloc_tensor, args[:1]

    def claimer(self, cells: list[list[Any]], views: list[tuple[int, object]]
                ) -> Callable[[], list[Any] | None]:
        """``claim()``: the storages of the pooled-storage ``cells`` and then
        their kept ``views`` (``(index of the storage in cells, key)``: see
        ``alloc_tensor.reusing_views``), taken at once, or None unless every
        one of them would be taken by its own instruction's fast path (each
        cell's storage free, each view kept): what those instructions would
        return and count, in one call of a function and under one
        acquisition of the pool lock, for a straight-line function that
        makes all of them on every call (see ``straight.py``)."""
        lock = self._pool_lock
        nbytes = sum(cell[1] for cell in cells)

        def claim() -> list[Any] | None:
            lock.acquire()
            try:
                for cell in cells:  # (each checked before anything refers to it)
                    if not cell[2] or not _idle(cell):
                        return None
                taken = [cell[0] for cell in cells]
                for at, key in views:
                    view = taken[at].views.get(key)
                    if view is None:
                        return None
                    taken.append(view)
                stats = self._stats
                stats["storage_allocs"] += len(cells)
                stats["bytes_allocated"] += nbytes
                stats["tensor_allocs"] += len(views)
                return taken
            finally:
                lock.release()
        return claim

    def _empty(self, shape: Any, dtype: Any) -> np.ndarray:
        try:
            arr = np.empty(_shape(shape), dtype=str(dtype))
        except (MemoryError, ValueError):  # (ValueError: beyond numpy's maximum size)
            raise VMError(f"out of memory allocating a {dtype} tensor of shape "
                          f"{_shape(shape)}") from None
        self._stats["tensor_allocs"] += 1
        self._account(arr, arr.nbytes)
        return arr


def _kept_view_refs() -> int:
    """The references to a kept view nothing else refers to, as the reads
    below see it (the storage's views dictionary, the local name it is read
    into, getrefcount's argument): measured, not assumed, since the
    interpreter's counting may differ between versions."""
    views = {0: np.empty(0)}
    view = views.get(0)
    return sys.getrefcount(view)


_KEPT_VIEW_REFS = _kept_view_refs()


def _idle(cell: list[Any]) -> bool:
    """Whether the storage of a pool cell (see VMMemory._pooled_storage) is
    free: only the cell refers to it, and to its owner only the storage and
    its kept views, which nothing else refers to (the same expressions as
    where the cell's counts were taken)."""
    refcount = sys.getrefcount
    if refcount(cell[0]) != cell[3]:
        return False
    views = cell[0].views
    if refcount(cell[0].owner) != cell[4] + len(views):
        return False
    for view in views.values():
        if refcount(view) != _KEPT_VIEW_REFS:
            return False
    return True


def _data_address_reader() -> Callable[[np.ndarray], int]:
    """The fastest way to read an array's data address: the pointer at the
    offset the LLVM runtime probed inside numpy's array object (checked
    against ``ctypes.data`` here), else ``ctypes.data`` (about 1 us)."""
    slow = lambda a: a.ctypes.data  # noqa: E731
    try:
        import ctypes

        from phasec.backend.llvm.runtime import array_data_offset
    except Exception:  # noqa: BLE001 - no LLVM backend: the portable way
        return slow
    if array_data_offset is None:
        return slow
    offset = array_data_offset
    read = ctypes.c_void_p.from_address

    def fast(a: np.ndarray) -> int:
        return read(id(a) + offset).value or 0
    probe = np.empty(8, np.uint8)
    return fast if fast(probe) == probe.ctypes.data else slow


_data_address = _data_address_reader()


class _VMStorage(Storage):
    """The VM's storage: a :class:`Storage` made without the slow
    ``ctypes.data`` lookup (the VM allocates one per call of a function)."""

    __slots__ = ("views",)

    def __init__(self, nbytes: int, alignment: int = STORAGE_ALIGNMENT) -> None:
        #: tensor views kept for the next call (see VMMemory._pooled_storage)
        self.views: dict[object, np.ndarray] = {}
        if nbytes < 0:
            raise VMError(f"cannot allocate storage of {nbytes} bytes")
        try:
            raw = np.empty(nbytes + alignment, dtype=np.uint8)
        except (MemoryError, ValueError):
            raise VMError(f"out of memory allocating storage of {nbytes} bytes") from None
        skew = (-_data_address(raw)) % alignment
        self.data = raw[skew:skew + nbytes]
        self.nbytes = nbytes
        self.owner = raw


def _shape(value: Any) -> tuple[int, ...]:
    if isinstance(value, tuple):
        return tuple(int(d) for d in value)
    if isinstance(value, np.ndarray):
        return tuple(int(d) for d in value.reshape(-1))
    raise VMError(f"expected a shape, got {describe_value(value)}")


def _nbytes(size: Any) -> int:
    if isinstance(size, (int, np.integer)):
        return int(size)
    n = 1
    for d in _shape(size):
        n *= d
    return n


"""LLVM plumbing: initialisation, host target machine, O3 pipeline, MCJIT.

All kernels of a module are compiled into one LLVM module and one MCJIT
execution engine. External symbols the generated code can reference
(libm math functions LLVM lowers intrinsics to, malloc/free, pthreads, half
conversions) are registered with LLVM explicitly from the running process,
and every remaining external declaration is checked before finalisation, so
a missing symbol is a clear :class:`CodegenError` instead of LLVM aborting
the process.

LLVM's diagnostics are taken off standard error while it works (see
:mod:`.capture`).

The parallel runtime (``phasec_rt_parallel_for``, see :mod:`.irlib`) is a
separate module JIT-compiled once per process; kernel modules call it by
symbol. ``PHASEC_PARALLEL_RUNTIME=spawn`` selects the thread-per-call
runtime instead of the persistent pool (the default on Linux).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import re
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import llvmlite.binding as llvm

from phasec import console
from phasec.errors import InputError, PhasecError
from phasec.fileio import parse_size
from phasec.ir import intrinsics
from phasec.target.amx import amx_enabled, amx_permitted, without_amx
from phasec.target.tuning import host_tuning, register_thread_count
from phasec.backend import interrupt
from phasec.backend.llvm import diskcache, objworker
from phasec.backend.llvm.abi import (
    CANCEL_FLAG, NDARRAY_SYMBOL, PYTHON_API_FUNCTIONS, ArrayLayout, descr_symbol,
)
from phasec.backend.llvm.capture import captured_llvm_output, dispatch_captured
from phasec.backend.llvm.errors import CodegenError
from phasec.backend.llvm.irlib import parallel_runtime_ir, pool_supported
from phasec.backend.llvm.parallel import compile_modules

__all__ = ["host_target", "host_target_info", "NativeModule", "jit_compile", "jit_compile_modules", "jit_load_cached",
           "bind_array_symbols", "set_num_threads", "available_cpus", "compile_jobs",
           "get_num_threads", "set_min_parallel_work", "set_parallel_chunk_work", "set_parallel_wake_work",
           "parallel_runtime_kind", "trim_buffer_cache", "set_buffer_cache_limit",
           "default_num_threads"]

#: the limit of the runtime's cache of freed kernel buffers ("0": none; "256M"...)
BUFFER_CACHE_ENV = "PHASEC_BUFFER_CACHE"
#: the threads of parallel loops (a positive integer; default: default_num_threads())
NUM_THREADS_ENV = "PHASEC_NUM_THREADS"
#: the processes compiling one kernel library (a positive integer; default: available_cpus())
COMPILE_JOBS_ENV = "PHASEC_COMPILE_JOBS"
#: CPU features the kernels are compiled without (or with): "-avx512vnni,-avxvnni"
CPU_FEATURES_ENV = "PHASEC_CPU_FEATURES"
_FEATURE = re.compile(r"[+-][a-z0-9_.-]+")  # (LLVM names: avx512vnni, amx-int8)


def with_feature_override(features: str, override: str) -> str:
    """The LLVM feature string ``features`` ("+avx2,-avx512f,...") with the
    entries of ``override`` (comma-separated "+name" / "-name") replacing
    the host's own for those names: ``PHASEC_CPU_FEATURES=-avx512vnni,-avxvnni``
    compiles every kernel as for a CPU without VNNI (the integer GEMM's
    exact vpmaddwd path; see :mod:`.intdot`), ``-amx-int8`` without AMX
    (the integer GEMM's tiles on ``vpdpbusd``; see :mod:`.amx`, which a
    process also goes without when the OS refuses it the tile data:
    :mod:`phasec.target.amx`). The kernel cache key holds the
    resulting string, so kernels compiled either way are kept apart. A
    malformed entry, or "+name" for a feature ``features`` does not enable
    (kernels using it would stop on an illegal instruction), is an
    :class:`~phasec.errors.InputError`."""
    wanted = [f.strip() for f in override.split(",") if f.strip()]
    host = set(features.split(","))
    for f in wanted:
        if not _FEATURE.fullmatch(f):
            raise InputError(f"the environment variable {CPU_FEATURES_ENV} must list CPU "
                             f"features as +name or -name, separated by commas; not {f!r}")
        if f[0] == "+" and f not in host:
            raise InputError(f"the environment variable {CPU_FEATURES_ENV} asks for {f!r}, "
                             "which this CPU does not have (only features it has can be "
                             "turned back on)")
    names = {f[1:] for f in wanted}
    kept = [f for f in features.split(",") if f and f[1:] not in names]
    return ",".join(kept + wanted)


#: the runtime's cache of kernels' freed intermediate buffers (bufcache.BUFFER_CACHE_IR)
_RUNTIME_BUFFER_FUNCTIONS = ("phasec_rt_alloc", "phasec_rt_free", "phasec_rt_trim_buffers")

_init_lock = threading.Lock()
# LLVM's global context is not thread-safe and llvmlite releases the GIL, so
# compilations are serialised.
_compile_lock = threading.RLock()
_initialized = False
_target: "HostTarget | None" = None
_runtime: "NativeModule | None" = None
_runtime_kind = ""
#: the thread compiling the parallel runtime, and its error (host_target_info)
_runtime_thread: "threading.Thread | None" = None
_runtime_error: BaseException | None = None

#: C symbols generated code may call, directly or through LLVM intrinsics:
#: the C math functions of the intrinsics (phasec.ir.intrinsics), and these.
_PROCESS_SYMBOLS = (
    "malloc", "free", "aligned_alloc", "memset", "memcpy", "memmove",
    "pthread_create", "pthread_join",
    "powf", "pow",  # BinaryOp pow
    "fminf", "fmin", "fmaxf", "fmax", "fminimumf", "fminimum", "fmaximumf", "fmaximum",
    "__extendhfsf2", "__truncsfhf2", "__truncdfhf2", "__gnu_h2f_ieee", "__gnu_f2h_ieee",
    "sincosf", "sincos", "pthread_detach", "syscall", "sched_yield",
    "sched_getcpu", "sched_getaffinity", "sched_setaffinity",  # the pool runtime
    *intrinsics.process_symbols(),
)


@dataclass(frozen=True)
class HostTarget:
    """The host CPU as LLVM sees it."""

    triple: str
    cpu: str
    features: str

    def create_target_machine(self) -> Any:
        """A new target machine (an MCJIT engine takes ownership of its own)."""
        return objworker.target_machine(self.triple, self.cpu, self.features)


def _register_process_symbols() -> None:
    libs = [ctypes.CDLL(None), *_system_libraries()]
    for sym in _PROCESS_SYMBOLS:
        if llvm.address_of_symbol(sym):
            continue
        fn = next((f for lib in libs if (f := getattr(lib, sym, None)) is not None), None)
        if fn is not None:
            llvm.add_symbol(sym, ctypes.cast(fn, ctypes.c_void_p).value)


def _system_libraries() -> list[ctypes.CDLL]:
    """libm and libpthread, those found: by glibc's sonames first, then
    through ``find_library`` (which runs ``ldconfig -p``: a fork and ~10 ms
    of every warm build)."""
    def opened(path: str | None) -> ctypes.CDLL | None:
        try:
            return ctypes.CDLL(path) if path else None
        except OSError:  # (not this soname, or a library that does not load)
            return None

    found = (opened(soname) or opened(ctypes.util.find_library(name))
             for name, soname in (("m", "libm.so.6"), ("pthread", "libpthread.so.0")))
    return [lib for lib in found if lib is not None]


def bind_array_symbols(layout: ArrayLayout) -> None:
    """Bind the ndarray type and dtype symbols compiled entries compare
    against (see :class:`.abi.ArrayLayout`) to this process's objects, and
    the CPython functions fast entries call to this interpreter's."""
    llvm.add_symbol(NDARRAY_SYMBOL, layout.ndarray_type)
    for name in PYTHON_API_FUNCTIONS:
        llvm.add_symbol(name, ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value)
    for dtype, address in layout.descrs:
        llvm.add_symbol(descr_symbol(dtype), address)


def host_target() -> HostTarget:
    """Initialise LLVM once and return the host target (CPU name and
    features), once the process-wide parallel runtime is ready."""
    target = host_target_info()
    _await_runtime()
    return target


def host_target_info() -> HostTarget:
    """The host target (CPU name and features) without waiting for the
    parallel runtime: the first call starts compiling it in a thread, which
    runs LLVM (no GIL: ~0.1 s of CPU when the disk cache does not have it)
    on another core while the build goes on; :func:`host_target`, which
    every caller that loads or runs code calls, waits for it. A bad
    configuration (``PHASEC_PARALLEL_RUNTIME``...) is raised here."""
    global _initialized, _target, _runtime_thread
    with _init_lock:
        if not _initialized:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            try:
                llvm.load_library_permanently(None)  # type: ignore[arg-type]
            except Exception:  # pragma: no cover - explicit symbols below suffice
                pass
            _register_process_symbols()
            # the cancel flag kernels poll (Ctrl-C; see phasec/backend/interrupt.py)
            llvm.add_symbol(CANCEL_FLAG, interrupt.flag_address())
            _initialized = True
        if _target is None:
            triple = llvm.get_process_triple()
            cpu = llvm.get_host_cpu_name()
            features = with_feature_override(llvm.get_host_cpu_features().flatten(),
                                             os.environ.get(CPU_FEATURES_ENV, ""))
            if amx_enabled(features) and not amx_permitted():
                # (the OS refused the tile data: an AMX instruction would be SIGILL)
                features = without_amx(features)
            target = HostTarget(triple, cpu, features)
            config = _runtime_config()  # first: a bad configuration leaves no half-set target
            _runtime_thread = threading.Thread(target=_start_parallel_runtime,
                                               args=(target, config),
                                               name="phasec-runtime-jit")
            _runtime_thread.start()
            _target = target
        return _target


def _await_runtime() -> None:
    """Wait until the parallel runtime is compiled (see :func:`host_target_info`);
    its compilation's error, if it failed, is raised here (each time)."""
    thread = _runtime_thread
    if thread is not None and thread is not threading.current_thread():
        thread.join()
    if _runtime_error is not None:
        raise _runtime_error


def _join_runtime_before_fork() -> None:
    """A fork while the runtime's thread is inside LLVM would leave the child
    a copy of LLVM's locks held by a thread it does not have: its first
    compilation would hang. So a fork waits for that thread first (its error,
    if any, is left for :func:`_await_runtime` to raise). Worker processes
    start by fork + exec (subprocess), which does not run these handlers."""
    thread = _runtime_thread
    if thread is not None and thread is not threading.current_thread():
        thread.join()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_join_runtime_before_fork)


def _runtime_config() -> tuple[str, str, int | None, int]:
    """(kind, machine, buffer cache bytes or None, threads) of the parallel
    runtime, from the environment; InputError for an invalid setting."""
    machine = platform.machine().lower()
    kind = os.environ.get("PHASEC_PARALLEL_RUNTIME", "pool")
    if kind not in ("pool", "spawn"):
        raise InputError(f"the environment variable PHASEC_PARALLEL_RUNTIME must be 'pool' "
                         f"(the default) or 'spawn', not {kind!r}")
    if not pool_supported(sys.platform, machine):
        kind = "spawn"
    limit = os.environ.get(BUFFER_CACHE_ENV, "").strip()
    cache_bytes = None if not limit else 0 if limit == "0" else parse_size(
        limit, f"the environment variable {BUFFER_CACHE_ENV}")  # refused before any JIT work
    threads = default_num_threads()  # (PHASEC_NUM_THREADS too)
    return kind, machine, cache_bytes, threads


def _start_parallel_runtime(target: HostTarget, config: tuple[str, str, int | None, int]) -> None:
    """JIT the process-wide parallel runtime and export its entry point (in
    the thread :func:`host_target_info` starts; an error is kept for
    :func:`_await_runtime`)."""
    global _runtime, _runtime_kind, _runtime_error
    kind, machine, cache_bytes, threads = config
    try:
        with _compile_lock:
            runtime = _jit(target, parallel_runtime_ir(kind, machine),
                           ["phasec_rt_parallel_for", *_RUNTIME_BUFFER_FUNCTIONS],
                           ["phasec_rt_num_threads", "phasec_rt_min_work", "phasec_rt_spin",
                            "phasec_rt_chunk_work", "phasec_rt_wake_work", "phasec_rt_asleep",
                            "phasec_rt_wakeups", "phasec_rt_buffer_cache_bytes"], 3)
        # Pool workers run this module's code for the life of the process, so it
        # must never be freed, not even while the interpreter shuts down.
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(runtime))
        for name in ("phasec_rt_parallel_for", *_RUNTIME_BUFFER_FUNCTIONS):
            llvm.add_symbol(name, runtime.addresses[name])
        runtime.set_i32("phasec_rt_num_threads", threads)
        tuning = host_tuning()
        runtime.set_i64("phasec_rt_min_work", tuning.parallel_min_work)
        runtime.set_i64("phasec_rt_wake_work", tuning.parallel_wake_work)
        if cache_bytes is not None:
            runtime.set_i64("phasec_rt_buffer_cache_bytes", cache_bytes)
    except BaseException as exc:  # noqa: BLE001 - raised by _await_runtime in the caller's thread
        _runtime_error = exc
        return
    _runtime, _runtime_kind = runtime, kind


def default_num_threads() -> int:
    """The threads parallel loops use unless told: ``PHASEC_NUM_THREADS``
    when set, else the CPUs this process may run on (its affinity mask, as
    ``taskset`` sets it), capped by its cgroup's CPU quota (a container's
    ``--cpus``), at most 256. An invalid ``PHASEC_NUM_THREADS`` is an
    :class:`~phasec.errors.InputError` naming it."""
    return _env_count(NUM_THREADS_ENV, "threads") or available_cpus()


def compile_jobs() -> int:
    """The processes that compile one kernel library's modules at once
    (see :mod:`.parallel`): ``PHASEC_COMPILE_JOBS`` when set (1: everything
    in this process), else :func:`available_cpus`. An invalid value is an
    :class:`~phasec.errors.InputError` naming it."""
    return _env_count(COMPILE_JOBS_ENV, "processes") or available_cpus()


def _env_count(name: str, what: str) -> int | None:
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    if not value.isdigit() or not 1 <= int(value) <= 256:
        raise InputError(f"the environment variable {name} must be a number of {what} from 1 "
                         f"to 256, not {value!r}")
    return int(value)


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, as ``taskset``
    sets it), capped by its cgroup's CPU quota (a container's ``--cpus``),
    at most 256."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    quota = _cgroup_cpu_quota()
    if quota is not None:
        cpus = min(cpus, quota)
    return max(1, min(cpus, 256))


def _cgroup_cpu_quota() -> int | None:
    """CPUs the process's cgroup (v2 ``cpu.max``, or v1 ``cpu.cfs_quota_us``)
    allows, rounded up; None without a quota."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        try:
            if controllers == "":  # cgroup v2
                with open(f"/sys/fs/cgroup{path.rstrip('/')}/cpu.max", encoding="utf-8") as fh:
                    quota, period = fh.read().split()[:2]
            elif "cpu" in controllers.split(","):
                base = f"/sys/fs/cgroup/{controllers}{path.rstrip('/')}"
                with open(f"{base}/cpu.cfs_quota_us", encoding="utf-8") as fh:
                    quota = fh.read().strip()
                with open(f"{base}/cpu.cfs_period_us", encoding="utf-8") as fh:
                    period = fh.read().strip()
            else:
                continue
        except (OSError, ValueError):
            continue
        if quota in ("max", "-1") or int(period) <= 0:
            return None
        return max(1, -(-int(quota) // int(period)))
    return None


def trim_buffer_cache() -> int:
    """Free the kernel buffers the runtime keeps for reuse (see
    :data:`.bufcache.BUFFER_CACHE_IR`); returns the bytes released."""
    host_target()
    fn = ctypes.CFUNCTYPE(ctypes.c_int64)(_runtime.addresses["phasec_rt_trim_buffers"])
    return int(fn())


def set_buffer_cache_limit(nbytes: int) -> None:
    """Keep at most ``nbytes`` of kernels' freed intermediate buffers for
    reuse (default :data:`.bufcache.BUFFER_CACHE_BYTES`, 32 MiB; or
    ``PHASEC_BUFFER_CACHE``; 0: none), so that large buffers are not faulted
    in again on every call when glibc gave them back to the system; blocks
    already kept beyond a lower limit are freed."""
    host_target()
    if not isinstance(nbytes, int) or nbytes < 0:
        raise PhasecError(f"the buffer cache limit must be a byte count >= 0, not {nbytes!r}")
    _runtime.set_i64("phasec_rt_buffer_cache_bytes", nbytes)
    trim_buffer_cache()


def parallel_runtime_kind() -> str:
    """``"pool"`` (persistent futex-based thread pool) or ``"spawn"`` (threads per call)."""
    host_target()
    return _runtime_kind


def set_num_threads(n: int) -> None:
    """Threads used by ``parallel`` loops, process-wide (1 runs them serially).

    The default is :func:`default_num_threads` (``PHASEC_NUM_THREADS``, else
    the CPUs the process may use).
    """
    host_target()
    _runtime.set_i32("phasec_rt_num_threads", max(1, min(int(n), 256)))


def get_num_threads() -> int:
    """Threads used by ``parallel`` loops now (see :func:`set_num_threads`)."""
    host_target()
    return ctypes.c_int32.from_address(_runtime.globals["phasec_rt_num_threads"]).value


def _build_thread_count() -> int:
    """The threads a build sizes schedules by (``tuning.build_threads``):
    the runtime's count once it is up, else the default it starts with; a
    build (and a warm build's cache key) does not wait for the runtime's JIT
    (``host_target_info``), and ``set_num_threads`` brings it up first."""
    if _runtime is None:
        return default_num_threads()
    return ctypes.c_int32.from_address(_runtime.globals["phasec_rt_num_threads"]).value


register_thread_count(_build_thread_count)


def set_min_parallel_work(n: int) -> None:
    """Parallel loops whose estimated element stores are fewer than ``n`` run
    serially (default ``host_tuning().parallel_min_work``, 32768); 0 always
    uses the threads."""
    host_target()
    _runtime.set_i64("phasec_rt_min_work", int(n))


def set_parallel_wake_work(n: int) -> int:
    """Parallel loops of fewer estimated element stores than ``n`` run
    serially while the pool's worker threads sleep (they went to sleep after
    spinning idle for a while): waking them costs more than such a loop
    gains (default ``host_tuning().parallel_wake_work``; 0 always wakes
    them). Returns the previous value."""
    host_target()
    address = _runtime.globals["phasec_rt_wake_work"]
    previous = ctypes.c_int64.from_address(address).value
    _runtime.set_i64("phasec_rt_wake_work", max(0, int(n)))
    return previous


def _pool_state() -> tuple[int, int]:
    """(pool workers asleep now, futex wake-ups callers have issued so far):
    for tests of when the pool wakes its workers."""
    host_target()
    asleep = ctypes.c_int32.from_address(_runtime.globals["phasec_rt_asleep"]).value
    wakeups = ctypes.c_int64.from_address(_runtime.globals["phasec_rt_wakeups"]).value
    return asleep, wakeups


def set_parallel_chunk_work(n: int) -> int:
    """Estimated element stores per chunk of a parallel loop (the pool
    runtime cuts a loop into between 4 and 32 chunks per thread, one per
    ``n`` stores); returns the previous value. Smaller chunks balance better
    when threads are descheduled, larger ones cost fewer atomics."""
    host_target()
    address = _runtime.globals["phasec_rt_chunk_work"]
    previous = ctypes.c_int64.from_address(address).value
    _runtime.set_i64("phasec_rt_chunk_work", max(1, int(n)))
    return previous


@dataclass
class NativeModule:
    """A finalised JIT module: keeps the engine (and so the code) alive."""

    engine: Any
    addresses: dict[str, int]
    optimized_ir: str
    globals: dict[str, int]
    compile_seconds: float

    def set_i32(self, name: str, value: int) -> None:
        ctypes.c_int32.from_address(self.globals[name]).value = value

    def set_i64(self, name: str, value: int) -> None:
        ctypes.c_int64.from_address(self.globals[name]).value = value


def jit_compile(ir_text: str, entry_symbols: list[str], global_symbols: list[str],
                opt_level: int = 3, cache_key: str | None = None,
                off: tuple[str, ...] = ()) -> NativeModule:
    """Parse, optimise (new pass manager, O``opt_level``, loop and SLP
    vectorization; the switches of :data:`.objworker.PIPELINE_SWITCHES` in
    ``off`` off) and JIT-compile ``ir_text``.

    The object code goes to the disk cache (when on) under ``cache_key``, or
    under a key of ``ir_text`` itself when None; :func:`jit_load_cached`
    reads an entry back without any IR."""
    target = host_target()
    kernels = f"{len(entry_symbols)} kernel{'' if len(entry_symbols) == 1 else 's'}"
    # the longest silent step of a build (SqueezeNet: ~25 s): a progress line on a terminal
    with console.step(f"compiling {kernels} with LLVM"), _compile_lock:
        return _jit(target, ir_text, entry_symbols, global_symbols, opt_level, cache_key, off)


def jit_load_cached(cache_key: str, entry_symbols: list[str],
                    global_symbols: list[str]) -> list[NativeModule] | None:
    """The disk cache's entry ``cache_key`` mapped into this process (one
    native module per object it holds, see :func:`jit_compile_modules`), or
    None (cache off, no entry, a damaged entry, an entry that lacks a
    symbol). No IR is generated or parsed: each engine gets an empty module
    and the object code through its object cache, so LLVM only links and
    maps the machine code."""
    if not diskcache.enabled():
        return None
    hit = diskcache.load(cache_key)
    if hit is None:
        return None
    parts = _split_entry(*hit)
    if parts is None:
        return None
    target = host_target()
    with _compile_lock:
        natives = [_load_object(target, obj, entry_symbols, global_symbols, optimized)
                   for obj, optimized in parts]
    if not all(all(n.globals.values()) for n in natives) or \
            not all(any(n.addresses[s] for n in natives) for s in entry_symbols):
        return None  # an entry that lacks a symbol is not this code: rebuild
    return natives


def _load_object(target: HostTarget, obj: bytes, entry_symbols: list[str],
                 global_symbols: list[str], optimized: str) -> NativeModule:
    """An engine running ``obj`` (object code phasec compiled in this run or
    read from its own kernel cache); entry symbols it lacks have address 0."""
    tm = target.create_target_machine()
    t0 = time.perf_counter()
    mod = llvm.parse_assembly("")
    mod.triple = target.triple
    mod.data_layout = str(tm.target_data)
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.set_object_cache(getbuffer_func=lambda _module: obj)
    return _finish(engine, entry_symbols, global_symbols, optimized, t0)


#: a cache entry of several objects (jit_compile_modules): this magic, their
#: count, their sizes, the objects; their optimized IRs joined by the separator
_OBJECTS_MAGIC = b"PHASECMO"
_IR_SEPARATOR = "\n; ---- phasec: the next module of this library ----\n"


def _join_entry(compiled: list[tuple[bytes, str]]) -> tuple[bytes, str]:
    sizes = struct.pack(f"<I{len(compiled)}Q", len(compiled), *(len(o) for o, _ in compiled))
    return _OBJECTS_MAGIC + sizes + b"".join(o for o, _ in compiled), \
        _IR_SEPARATOR.join(ir for _, ir in compiled)


def _split_entry(blob: bytes, optimized: str) -> list[tuple[bytes, str]] | None:
    """The (object, optimized IR) pairs of a cache entry (one for an entry of
    a single object), or None when the framing does not add up."""
    if not blob.startswith(_OBJECTS_MAGIC):
        return [(blob, optimized)]
    at = len(_OBJECTS_MAGIC)
    if len(blob) < at + 4:
        return None
    (count,) = struct.unpack_from("<I", blob, at)
    irs = optimized.split(_IR_SEPARATOR)
    if count == 0 or len(irs) != count or len(blob) < at + 4 + 8 * count:
        return None
    sizes = struct.unpack_from(f"<{count}Q", blob, at + 4)
    at += 4 + 8 * count
    if at + sum(sizes) != len(blob):
        return None
    parts = []
    for size, ir in zip(sizes, irs):
        parts.append((blob[at:at + size], ir))
        at += size
    return parts


def jit_compile_modules(ir_texts: Iterable[str], entry_symbols: list[str] | Callable[[], list[str]],
                        global_symbols: list[str], opt_level: int,
                        cache_key: str | None) -> list[NativeModule]:
    """Compile the modules of one library (each complete on its own, every
    entry symbol in one of them) on several cores (:mod:`.parallel`) and map
    each into its own engine; the objects go to the disk cache as one entry
    under ``cache_key`` (when given and the cache is on). ``ir_texts`` may be
    an iterator that emits the modules while the workers compile the first
    (see :func:`.parallel.compile_modules`); ``entry_symbols`` then a
    function giving them once it is done."""
    target = host_target()  # (its wait is outside _compile_lock, which the runtime's JIT takes)
    workers = compile_jobs() - 1
    if isinstance(ir_texts, Sequence):
        workers = min(workers + 1, len(ir_texts)) - 1
    with console.step(f"compiling kernels with LLVM ({workers + 1} processes)"), _compile_lock:
        t0 = time.perf_counter()
        with captured_llvm_output():
            try:
                compiled = compile_modules(ir_texts, target.triple, target.cpu, target.features,
                                           opt_level, dispatch_captured, workers)
            except RuntimeError as exc:  # a codegen bug, not a user error; keep the detail
                raise CodegenError(f"generated LLVM IR is invalid: {exc}") from exc
        for name in sorted({e for _, _, externals in compiled for e in externals}):
            if not llvm.address_of_symbol(name):
                raise CodegenError(f"the generated code calls '{name}', which is not "
                                   "available in this process")
        entries = entry_symbols() if callable(entry_symbols) else entry_symbols
        natives = [_load_object(target, obj, entries, global_symbols, optimized)
                   for obj, optimized, _ in compiled]
    seconds = time.perf_counter() - t0
    for native in natives:
        native.compile_seconds = seconds
    if cache_key is not None and diskcache.enabled():
        diskcache.store(cache_key, *_join_entry([(o, ir) for o, ir, _ in compiled]))
    return natives


def _jit(target: HostTarget, ir_text: str, entry_symbols: list[str], global_symbols: list[str],
         opt_level: int, cache_key: str | None = None,
         off: tuple[str, ...] = ()) -> NativeModule:
    tm = target.create_target_machine()
    t0 = time.perf_counter()
    try:
        mod = llvm.parse_assembly(ir_text)
        mod.verify()
    except RuntimeError as exc:  # a codegen bug, not a user error; keep the detail
        raise CodegenError(f"generated LLVM IR is invalid: {exc}") from exc
    mod.triple = target.triple
    mod.data_layout = str(tm.target_data)

    key = None
    if diskcache.enabled():
        key = cache_key or diskcache.entry_key(ir_text, opt_level,
                                               (target.triple, target.cpu, target.features), off)
        hit = diskcache.load(key)
        if hit is not None:
            # The machine code of an identical earlier compilation: LLVM only
            # maps it (no optimization, no code generation).
            obj, optimized = hit
            engine = llvm.create_mcjit_compiler(mod, tm)
            engine.set_object_cache(getbuffer_func=lambda _module: obj)
            return _finish(engine, entry_symbols, global_symbols, optimized, t0)

    with captured_llvm_output():
        objworker.optimize(mod, tm, opt_level, off)  # (the workers' pipeline: one definition)

    for f in mod.functions:
        if f.is_declaration and not f.name.startswith("llvm."):
            if not llvm.address_of_symbol(f.name):
                raise CodegenError(f"the generated code calls '{f.name}', which is not "
                                   "available in this process")
    optimized = str(mod)
    engine = llvm.create_mcjit_compiler(mod, tm)
    compiled: list[bytes] = []
    if key is not None:
        engine.set_object_cache(notify_func=lambda _module, buf: compiled.append(bytes(buf)))
    with captured_llvm_output():  # code generation has remarks of its own
        native = _finish(engine, entry_symbols, global_symbols, optimized, t0)
    if compiled:
        diskcache.store(key, compiled[0], optimized)
    return native


def _finish(engine: Any, entry_symbols: list[str], global_symbols: list[str], optimized: str,
            t0: float) -> NativeModule:
    engine.finalize_object()
    addresses = {s: engine.get_function_address(s) for s in entry_symbols}
    globs = {s: engine.get_global_value_address(s) for s in global_symbols}
    return NativeModule(engine, addresses, optimized, globs, time.perf_counter() - t0)

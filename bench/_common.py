"""Shared helpers of the benchmarks: BLAS environment, timing, tables, TVM.

Import this module before numpy (directly or through phasec) when the
script measures numpy: :func:`prepare_blas_env` must run before OpenBLAS is
loaded, because OpenBLAS reads its environment variables once, at load time.
"""

from __future__ import annotations

import math
import os
import platform
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

# Make ``import phasec`` work from a plain checkout too (``python bench/x.py``).
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

#: OpenBLAS variables some machines set globally. ``OPENBLAS_CORETYPE`` forces
#: a kernel family (e.g. an older one than the CPU supports) and
#: ``OPENBLAS_L2_SIZE`` changes its blocking; either can make numpy's matmul
#: several times slower than what the CPU can do.
BLAS_ENV_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")

_removed_blas_env: dict[str, str] = {}


def prepare_blas_env(keep: bool = False) -> dict[str, str]:
    """Unset :data:`BLAS_ENV_VARS` for this process (unless ``keep``) so that
    numpy uses the BLAS kernels OpenBLAS picks for the CPU.

    Only this process is affected. Returns the variables removed. Must run
    before numpy is imported; if numpy is already loaded nothing is changed.
    """
    if keep or "numpy" in sys.modules:
        return {}
    for name in BLAS_ENV_VARS:
        value = os.environ.pop(name, None)
        if value is not None:
            _removed_blas_env[name] = value
    return dict(_removed_blas_env)


def wants_keep_blas_env(argv: Sequence[str] | None = None) -> bool:
    """True when the command line asks to keep the BLAS environment as it is."""
    return "--keep-blas-env" in (sys.argv if argv is None else argv)


def blas_description() -> str:
    """One line: numpy's BLAS library, the kernel family it runs, its threads
    and what :func:`prepare_blas_env` did.

    Uses threadpoolctl when it is installed; otherwise asks the OpenBLAS
    library numpy loaded directly (through ctypes).
    """
    import numpy as np

    np.dot(np.ones((4, 4)), np.ones((4, 4)))  # make sure BLAS is loaded
    parts: list[str] = []
    try:
        from threadpoolctl import threadpool_info  # optional, never required
        for info in threadpool_info():
            if info.get("user_api") == "blas":
                parts.append(f"{info.get('internal_api')} {info.get('version')} "
                             f"kernel={info.get('architecture')} "
                             f"threads={info.get('num_threads')}")
    except ImportError:
        parts.extend(_openblas_by_ctypes())
    if not parts:
        parts.append("BLAS library not identified")
    removed = ", ".join(f"{k}={v}" for k, v in _removed_blas_env.items())
    kept = ", ".join(f"{k}={os.environ[k]}" for k in BLAS_ENV_VARS if k in os.environ)
    if removed:
        parts.append(f"unset for this run: {removed}")
    elif kept:
        parts.append(f"kept: {kept}")
    return "; ".join(parts)


def set_blas_threads(n: int) -> int | None:
    """Set numpy's BLAS thread count; returns the previous count, or None when
    it cannot be changed (threadpoolctl if installed, else OpenBLAS by ctypes)."""
    try:
        from threadpoolctl import ThreadpoolController  # optional
        ctl = ThreadpoolController()
        blas = [c for c in ctl.lib_controllers if c.user_api == "blas"]
        if not blas:
            return None
        previous = blas[0].num_threads
        for c in blas:
            c.set_num_threads(n)
        return previous
    except ImportError:
        pass
    import ctypes

    for path in _openblas_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in (("scipy_openblas_", "64_"), ("scipy_openblas_", ""),
                               ("openblas_", "")):
            get = getattr(lib, f"{prefix}get_num_threads{suffix}", None)
            put = getattr(lib, f"{prefix}set_num_threads{suffix}", None)
            if get is None or put is None:
                continue
            get.restype = ctypes.c_int
            previous = get()
            put.argtypes = [ctypes.c_int]
            put(n)
            return previous
    return None


def _openblas_paths() -> list[str]:
    try:
        with open("/proc/self/maps") as maps:
            return sorted({line.split()[-1] for line in maps
                           if "openblas" in line.lower() and line.split()[-1].startswith("/")})
    except OSError:
        return []


def _openblas_by_ctypes() -> list[str]:
    import ctypes

    found: list[str] = []
    for path in _openblas_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        desc = os.path.basename(path)
        for prefix, suffix in (("scipy_openblas_", "64_"), ("scipy_openblas_", ""),
                               ("openblas_", "")):
            core = getattr(lib, f"{prefix}get_corename{suffix}", None)
            threads = getattr(lib, f"{prefix}get_num_threads{suffix}", None)
            if core is None:
                continue
            core.restype = ctypes.c_char_p
            desc += f" kernel={core().decode()}"
            if threads is not None:
                threads.restype = ctypes.c_int
                desc += f" threads={threads()}"
            break
        found.append(desc)
    return found


def machine_description() -> str:
    """CPU model and core count, for the header of a table."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} logical cores, Python {platform.python_version()}"


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------

def best_of(fn: Callable[[], Any], repeat: int = 5, number: int = 1,
            warmup: int = 1) -> float:
    """Best (smallest) mean seconds per call of ``fn`` over ``repeat`` batches
    of ``number`` calls, after ``warmup`` untimed calls.

    The minimum is the figure least disturbed by other processes on a shared
    machine; see :func:`spread` for how noisy the samples were.
    """
    return min(samples(fn, repeat, number, warmup))


def samples(fn: Callable[[], Any], repeat: int = 5, number: int = 1,
            warmup: int = 1) -> list[float]:
    """Mean seconds per call of each of ``repeat`` batches of ``number`` calls."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        out.append((time.perf_counter() - t0) / number)
    return out


def calibrate(fn: Callable[[], Any], target_seconds: float = 0.05) -> int:
    """A batch size so that one batch of ``fn`` takes about ``target_seconds``."""
    t0 = time.perf_counter()
    fn()
    one = time.perf_counter() - t0
    return max(1, min(10_000, int(target_seconds / max(one, 1e-7))))


def spread(values: Sequence[float]) -> float:
    """Median over minimum (1.0: no noise; 1.3: the median run was 30% slower)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[len(ordered) // 2] / ordered[0] if ordered[0] > 0 else math.nan


def run_queue_wait() -> float | None:
    """Seconds the threads of this process have spent runnable but waiting
    for a CPU (the second field of Linux's ``/proc/<pid>/task/<tid>/schedstat``,
    summed over the threads alive now), or None where it is not available.

    The difference across a timed call says whether the machine took a core
    away from it: on a machine shared with other jobs a call of milliseconds
    with two threads is often slowed by its worker waiting behind another
    process, and its time then says nothing about the code. Threads that
    ended during the call are not counted (phasec's pool threads live for
    the process)."""
    total = 0
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # the thread ended meanwhile
    return total / 1e9


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``(fn(), seconds)``."""
    t0 = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - t0


# ---------------------------------------------------------------------------
# Formatting
# ---------------------------------------------------------------------------

def fmt_seconds(s: float | None) -> str:
    """Seconds with a unit that keeps three significant digits."""
    if s is None or (isinstance(s, float) and math.isnan(s)):
        return "-"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} us"


def fmt_ratio(r: float | None) -> str:
    if r is None or (isinstance(r, float) and (math.isnan(r) or math.isinf(r))):
        return "-"
    return f"{r:.2f}x" if r < 100 else f"{r:.0f}x"


def fmt_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def print_table(header: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None,
                left: int = 1) -> None:
    """A plain-text table; the first ``left`` columns are left-aligned, the
    rest right-aligned (numbers)."""
    rows = [[str(c) for c in r] for r in rows]
    header = [str(h) for h in header]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    if title:
        print(title)
    print("  ".join(h.ljust(w) if i < left else h.rjust(w)
                    for i, (h, w) in enumerate(zip(header, widths))))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(c.ljust(w) if i < left else c.rjust(w)
                        for i, (c, w) in enumerate(zip(r, widths))))
    print(flush=True)


# ---------------------------------------------------------------------------
# Programs shared by several benchmarks
# ---------------------------------------------------------------------------

def chain_source(n: int, width: int = 16) -> str:
    """TVMScript of one function whose dataflow block is a chain of ``n``
    elementwise bindings (add, multiply, subtract in turn) on a
    ``(width,)`` float32 tensor, ending with an ``exp``."""
    lines = ["@I.ir_module", "class Chain:", "    @R.function",
             f'    def main(x: R.Tensor(({width},), "float32")) -> '
             f'R.Tensor(({width},), "float32"):',
             "        with R.dataflow():"]
    prev = "x"
    ops = ("R.add", "R.multiply", "R.subtract")
    for i in range(n):
        lines.append(f"            lv{i} = {ops[i % 3]}({prev}, x)")
        prev = f"lv{i}"
    lines += [f"            gv = R.exp({prev})", "            R.output(gv)", "        return gv"]
    return "\n".join(lines) + "\n"


def chain_module(n: int, width: int = 16) -> Any:
    """The parsed :func:`chain_source` module (phase ingestion)."""
    from phasec.script.parser import parse

    return parse(chain_source(n, width))


def count_bindings(mod: Any) -> int:
    """Bindings in all Relax functions of ``mod``."""
    from phasec.ir.expr import Function, SeqExpr

    total = 0
    for func in mod.functions.values():
        if isinstance(func, Function) and isinstance(func.body, SeqExpr):
            total += sum(len(b.bindings) for b in func.body.blocks)
    return total


# ---------------------------------------------------------------------------
# TVM (optional peer)
# ---------------------------------------------------------------------------

def tvm_status() -> tuple[Any, str]:
    """``(tvm module or None, description)``. Never installs anything."""
    try:
        import tvm  # type: ignore[import-not-found]
    except Exception as exc:  # ImportError, or a broken installation
        reason = "TVM not installed" if isinstance(exc, ImportError) else f"TVM unusable ({exc})"
        return None, reason
    return tvm, f"TVM {getattr(tvm, '__version__', '?')}"


def timed_kernels_vm(exe: Any, record: Callable[[str, float], None]) -> Any:
    """A VirtualMachine of ``exe`` whose LLVM kernels each call
    ``record(kernel name, seconds)`` after running."""
    from phasec.backend.vm import VirtualMachine

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., None]:
        def timed_kernel(*args: Any) -> None:
            t0 = time.perf_counter()
            fn(*args)
            record(name, time.perf_counter() - t0)
        return timed_kernel
    return VirtualMachine(exe, kernels={n: timed(n, k) for n, k in exe.kernels("llvm").items()})


def profile_kernels(exe: Any, run_once: Callable[[Any], Any], repeat: int, title: str,
                    whole_seconds: float) -> None:
    """Print the best time of each LLVM kernel of ``exe`` in program order:
    ``run_once(vm)`` runs the model once on a VirtualMachine whose kernels are
    timed; ``whole_seconds`` is the whole model's best time, for scale."""
    times: dict[str, list[float]] = {}
    vm = timed_kernels_vm(exe, lambda name, dt: times.setdefault(name, []).append(dt))
    for _ in range(repeat):
        run_once(vm)
    print(f"{title}: whole model {fmt_seconds(whole_seconds)}")
    print_table(("kernel", "best", "calls/run"),
                [(n, fmt_seconds(min(t)), len(t) // repeat) for n, t in times.items()])

"""Where a compiled program's time goes: each kernel, and the VM between them.

:func:`profile_run` calls a function of an executable ``rounds`` times on a
VM whose kernels are timed one by one, alternating with calls on a plain VM
(whose whole-call time is therefore not inflated by the timing). For each
call site it keeps the best time over the rounds; a kernel's time is the sum
over its call sites. What the whole call takes beyond the sum of its kernels
is the VM's own work: instruction dispatch, argument and shape checks,
allocation, Python in the call path (``RunProfile.vm_seconds``, also per
kernel call).

``phasec run --profile`` prints this table, and ONNX Runtime's own profile
of the same model beside it for an ``.onnx`` input.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from phasec.backend.vm.executable import Executable
from phasec.backend.vm.vm import VirtualMachine

__all__ = ["KernelTime", "RunProfile", "profile_run", "format_seconds", "array_text"]


@dataclass(frozen=True)
class KernelTime:
    """One kernel: its calls per run, its best time per run (seconds) and
    what it writes (its last argument, destination-passing style: ``float32[1,
    192, 7, 7]``, or the shapes of its call sites joined by ``|``), so that a
    row can be matched with a layer of the model."""

    name: str
    calls: int
    seconds: float
    output: str = ""


@dataclass(frozen=True)
class RunProfile:
    """The profile of one function of an executable (see the module docstring)."""

    kernels: tuple[KernelTime, ...]  # slowest first
    rounds: int
    whole_seconds: float  # best whole call on the plain VM

    @property
    def kernel_seconds(self) -> float:
        return sum(k.seconds for k in self.kernels)

    @property
    def kernel_calls(self) -> int:
        return sum(k.calls for k in self.kernels)

    @property
    def vm_seconds(self) -> float:
        """The whole call's time beyond its kernels' (never negative)."""
        return max(0.0, self.whole_seconds - self.kernel_seconds)

    def table(self, top: int = 25) -> str:
        """The profile as an aligned text table, the ``top`` slowest kernels first."""
        whole = self.whole_seconds or math.inf
        rows = [(k.name, str(k.calls), format_seconds(k.seconds),
                 f"{100 * k.seconds / whole:.1f}%", k.output) for k in self.kernels[:top]]
        if len(self.kernels) > top:
            rest = self.kernels[top:]
            rows.append((f"({len(rest)} more kernels)", str(sum(k.calls for k in rest)),
                         format_seconds(sum(k.seconds for k in rest)),
                         f"{100 * sum(k.seconds for k in rest) / whole:.1f}%", ""))
        calls = self.kernel_calls
        per_call = f" ({format_seconds(self.vm_seconds / calls)} per kernel call)" if calls else ""
        rows += [("sum of kernels", str(calls), format_seconds(self.kernel_seconds),
                  f"{100 * self.kernel_seconds / whole:.1f}%", ""),
                 ("VM between kernels" + per_call, "", format_seconds(self.vm_seconds),
                  f"{100 * self.vm_seconds / whole:.1f}%", ""),
                 ("whole call", "", format_seconds(self.whole_seconds), "100%", "")]
        return aligned(("kernel", "calls", "time", "share", "writes"), rows)


def profile_run(exe: Executable, entry: str, args: Sequence[Any], *, kernels: str = "llvm",
                rounds: int | None = None, budget_seconds: float = 5.0) -> RunProfile:
    """Profile ``exe[entry](*args)``: ``rounds`` alternating timed and plain
    calls (None: at least 3, more while within ``budget_seconds``, at most
    100), after one warm-up call of each VM."""
    site = [0]
    best: dict[tuple[int, str], float] = {}
    writes: dict[tuple[int, str], str] = {}

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed_kernel(*kargs: Any) -> Any:
            start = time.perf_counter()
            out = fn(*kargs)
            elapsed = time.perf_counter() - start
            key = (site[0], name)
            site[0] += 1
            best[key] = min(best.get(key, math.inf), elapsed)
            if key not in writes:
                writes[key] = array_text(kargs[-1]) if kargs else ""
            return out
        # (the VM memoizes a kernel computed from the binding alone by the
        # arguments it writes: profiled as it runs)
        timed_kernel.written_arguments = getattr(fn, "written_arguments", None)  # type: ignore
        return timed_kernel

    native = exe.kernels(kernels)
    timed_fn = VirtualMachine(exe, kernels={n: timed(n, k) for n, k in native.items()})[entry]
    plain_fn = VirtualMachine(exe, kernels=native)[entry]
    plain_fn(*args)
    timed_fn(*args)  # (a first call of a binding also runs what later calls reuse)
    best.clear()
    whole = math.inf
    done = 0
    began = time.perf_counter()
    while True:
        site[0] = 0
        timed_fn(*args)
        start = time.perf_counter()
        plain_fn(*args)
        whole = min(whole, time.perf_counter() - start)
        done += 1
        if rounds is not None:
            if done >= rounds:
                break
        elif done >= 100 or (done >= 3 and time.perf_counter() - began >= budget_seconds):
            break
    per: dict[str, list[float]] = {}
    outputs: dict[str, dict[str, None]] = {}
    for (at, name), seconds in best.items():
        per.setdefault(name, []).append(seconds)
        outputs.setdefault(name, {})[writes.get((at, name), "")] = None
    rows = sorted((KernelTime(name, len(times), sum(times), " | ".join(filter(None, outputs[name])))
                   for name, times in per.items()), key=lambda k: -k.seconds)
    return RunProfile(tuple(rows), done, whole)


def array_text(value: Any) -> str:
    """``float32[1, 192, 7, 7]`` for an array, "" for anything else."""
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is None or dtype is None:
        return ""
    return f"{dtype}[{', '.join(map(str, shape))}]"


def format_seconds(seconds: float) -> str:
    """``1.234 ms``, ``56.7 us``, ``2.50 s``: three significant figures or so."""
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} us"


def aligned(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Rows under a header, the first column left-aligned, the rest right-aligned."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(r: Sequence[str]) -> str:
        return "  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                for i, (c, w) in enumerate(zip(r, widths))).rstrip()
    return "\n".join([line(header), *map(line, rows)])

"""Where a compiled program's time goes: each kernel, and the VM between them.

:func:`profile_run` calls a function of an executable ``rounds`` times on a
VM whose kernels are timed one by one, alternating with calls on a plain VM
(whose whole-call time is therefore not inflated by the timing). For each
call site it keeps the best time over the rounds; a kernel's time is the sum
over its call sites. A kernel with a native entry (``Kernel.native_call``,
what the plain VM calls) is timed through it, not through the Python
argument checks of ``Kernel.__call__`` (~2 us a call). The VM's own work
(instruction dispatch, allocation, argument checks, Python in the call
path: ``RunProfile.vm_seconds``, also per kernel call) is measured within
each timed call: its whole time less its kernels' and the timing's own cost
(calibrated), the best over the rounds. (The whole call's best less the sum
of each site's best, as before, counts every site's luckiest round once
and a different cache state: it made SqueezeNet's VM look like 470 us a
call, 11.5 us a kernel, where this measures ~20 us.)

``phasec run --profile`` prints this table, and ONNX Runtime's own profile
of the same model beside it for an ``.onnx`` input.
"""

from __future__ import annotations

import math
import operator
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from phasec.backend.vm.executable import Executable
from phasec.backend.vm.vm import DEFAULT_MAX_CALL_DEPTH, VirtualMachine

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
    #: the VM's own work measured within the timed calls (see the module
    #: docstring); None: the whole call less the sum of the kernels
    between_seconds: float | None = None

    @property
    def kernel_seconds(self) -> float:
        return sum(k.seconds for k in self.kernels)

    @property
    def kernel_calls(self) -> int:
        return sum(k.calls for k in self.kernels)

    @property
    def vm_seconds(self) -> float:
        """The call's time beyond its kernels' (never negative)."""
        if self.between_seconds is not None:
            return max(0.0, self.between_seconds)
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
                  f"{100 * self.vm_seconds / whole:.1f}%", "")]
        if self.between_seconds is not None:
            # what neither explains: each site's best round summed against
            # the whole call's best, the caches of a kernel timed alone
            rest = self.whole_seconds - self.kernel_seconds - self.vm_seconds
            rows.append(("rest (sites' best rounds, caches)", "",
                         ("-" if rest < 0 else "") + format_seconds(abs(rest)),
                         f"{100 * rest / whole:.1f}%", ""))
        rows.append(("whole call", "", format_seconds(self.whole_seconds), "100%", ""))
        return aligned(("kernel", "calls", "time", "share", "writes"), rows)


def profile_run(exe: Executable, entry: str, args: Sequence[Any], *, kernels: str = "llvm",
                rounds: int | None = None, budget_seconds: float = 5.0,
                max_call_depth: int = DEFAULT_MAX_CALL_DEPTH) -> RunProfile:
    """Profile ``exe[entry](*args)``: ``rounds`` alternating timed and plain
    calls (None: at least 3, more while within ``budget_seconds``, at most
    100), after one warm-up call of each VM (both VMs take ``max_call_depth``)."""
    clock = time.perf_counter
    best: dict[tuple[int, str], float] = {}
    writes: dict[tuple[int, str], str] = {}
    spent: list[tuple[str, float]] = []  # this call's kernels and their times, in call order
    outputs: list[tuple] = []  # each call site's arguments in the recording call

    recording: list[bool] = []  # non-empty: the warm-up call recording what sites write

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        native_call = getattr(fn, "native_call", None)
        if native_call is not None:
            def timed_kernel(*kargs: Any) -> Any:
                start = clock()
                rc = native_call(*kargs)
                spent.append((name, clock() - start))
                if rc:  # (its error or the slow path's: as on the plain VM)
                    fn.failed(rc, kargs)
                if recording:
                    outputs.append(kargs)
        else:
            def timed_kernel(*kargs: Any) -> Any:
                start = clock()
                fn(*kargs)
                spent.append((name, clock() - start))
                if recording:
                    outputs.append(kargs)
        # (the VM memoizes a kernel computed from the binding alone by the
        # arguments it writes: profiled as it runs)
        timed_kernel.written_arguments = getattr(fn, "written_arguments", None)  # type: ignore
        return timed_kernel

    native = exe.kernels(kernels)
    timed_fn = VirtualMachine(exe, kernels={n: timed(n, k) for n, k in native.items()},
                              max_call_depth=max_call_depth)[entry]
    plain_fn = VirtualMachine(exe, kernels=native, max_call_depth=max_call_depth)[entry]
    plain_fn(*args)
    # (a first call of a binding also runs what later calls reuse: the
    # second call runs the sites the rounds run)
    timed_fn(*args)
    spent.clear()
    recording.append(True)
    timed_fn(*args)
    recording.clear()
    writes.update({(at, name): array_text(kargs[-1]) if kargs else ""
                   for at, ((name, _), kargs) in enumerate(zip(spent, outputs))})
    outputs.clear()  # (the arrays: the pooled storages are free again)
    overhead = _timing_overhead(clock)
    whole = between = math.inf
    done = 0
    began = clock()
    while True:
        spent.clear()
        start = clock()
        timed_fn(*args)
        call = clock() - start
        between = min(between, call - sum(t for _, t in spent) - overhead * len(spent))
        for at, (name, seconds) in enumerate(spent):
            best[(at, name)] = min(best.get((at, name), math.inf), seconds)
        start = clock()
        plain_fn(*args)
        whole = min(whole, clock() - start)
        done += 1
        if rounds is not None:
            if done >= rounds:
                break
        elif done >= 100 or (done >= 3 and clock() - began >= budget_seconds):
            break
    per: dict[str, list[float]] = {}
    texts: dict[str, dict[str, None]] = {}
    for (at, name), seconds in best.items():
        per.setdefault(name, []).append(seconds)
        texts.setdefault(name, {})[writes.get((at, name), "")] = None
    rows = sorted((KernelTime(name, len(times), sum(times), " | ".join(filter(None, texts[name])))
                   for name, times in per.items()), key=lambda k: -k.seconds)
    return RunProfile(tuple(rows), done, whole,
                      None if between == math.inf else between)


def _timing_overhead(clock: Callable[[], float]) -> float:
    """What timing one kernel call adds to a call's time beyond the interval
    it records (the wrapper's Python call, half of each clock read, the
    append): a wrapper like the profile's around a builtin of two arguments
    (as a native entry), its whole cost less what it recorded, the best of
    three runs of 2,000 calls."""
    spent: list[tuple[str, float]] = []
    probe = operator.is_

    recording: list[bool] = []

    def wrapped(*kargs: Any) -> None:
        start = clock()
        rc = probe(*kargs)
        spent.append(("", clock() - start))
        if rc or recording:
            raise AssertionError("unreachable")
    costs = []
    for _ in range(3):
        spent.clear()
        start = clock()
        for _ in range(2000):
            wrapped(1, 2)
        costs.append((clock() - start - sum(t for _, t in spent)) / 2000)
    return max(0.0, min(costs))


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

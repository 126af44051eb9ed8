"""ONNX Runtime beside phasec, for an ``.onnx`` input: its outputs (the
reference of ``phasec bisect``) and its own profile (``phasec run
--profile``). onnxruntime is optional, imported only here and only then."""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from phasec.backend.vm.profiler import aligned, format_seconds
from phasec.cli._inputs import onnx_input_names

__all__ = ["ort_session", "ort_feed", "OrtProfile", "ort_profile"]


def ort_session(path: str, threads: int | None = None, profile_dir: str | None = None) -> Any:
    """An ONNX Runtime CPU session of the model at ``path`` (all graph
    optimizations, ONNX Runtime's default); ``threads`` intra-op threads
    (None: its default); its profiler on, writing under ``profile_dir``."""
    import onnxruntime as ort  # (optional: only for .onnx models)

    options = ort.SessionOptions()
    options.log_severity_level = 3
    if threads is not None:
        options.intra_op_num_threads = options.inter_op_num_threads = threads
    if profile_dir is not None:
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(profile_dir, "ort")
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def ort_feed(session: Any, param_names: Sequence[str], inputs: Sequence[Any]) -> dict[str, Any]:
    """The feed of ``session`` for the imported function's arguments:
    parameters carry the ONNX input names made identifiers."""
    onnx_names = onnx_input_names({i.name: i.name for i in session.get_inputs()})
    return {onnx_names[ident]: np.asarray(inputs[k]) for k, ident in enumerate(param_names)
            if ident in onnx_names}


@dataclass(frozen=True)
class OrtProfile:
    """ONNX Runtime's time per operator type (from its profiler: the best of
    each node over the rounds, summed per type) and its best whole call
    (timed on a second session with the profiler off)."""

    by_op: tuple[tuple[str, int, float], ...]  # (op type, nodes, seconds), slowest first
    whole_seconds: float
    rounds: int

    def table(self, top: int = 15, phasec_seconds: float | None = None) -> str:
        whole = self.whole_seconds or math.inf
        rows = [(op, str(n), format_seconds(s), f"{100 * s / whole:.1f}%")
                for op, n, s in self.by_op[:top]]
        rest = self.by_op[top:]
        if rest:
            rows.append((f"({len(rest)} more operator types)", str(sum(n for _, n, _ in rest)),
                         format_seconds(sum(s for _, _, s in rest)), ""))
        nodes = sum(n for _, n, _ in self.by_op)
        total = sum(s for _, _, s in self.by_op)
        rows.append(("sum of nodes", str(nodes), format_seconds(total),
                     f"{100 * total / whole:.1f}%"))
        ratio = f"  phasec/ORT {phasec_seconds / self.whole_seconds:.2f}x" \
            if phasec_seconds is not None and self.whole_seconds > 0 else ""
        rows.append(("whole call" + ratio, "", format_seconds(self.whole_seconds), "100%"))
        return aligned(("ONNX Runtime operator", "nodes", "time", "share"), rows)


def ort_profile(path: str, param_names: Sequence[str], inputs: Sequence[Any], rounds: int,
                threads: int | None) -> OrtProfile:
    """Profile the model at ``path`` in ONNX Runtime on the same inputs."""
    with tempfile.TemporaryDirectory(prefix="phasec-ort-profile-") as tmp:
        profiled = ort_session(path, threads, profile_dir=tmp)
        plain = ort_session(path, threads)
        feed = ort_feed(plain, param_names, inputs)
        profiled.run(None, feed)
        plain.run(None, feed)
        whole = math.inf
        for _ in range(rounds):
            profiled.run(None, feed)
            start = time.perf_counter()
            plain.run(None, feed)
            whole = min(whole, time.perf_counter() - start)
        with open(profiled.end_profiling(), encoding="utf-8") as f:
            events = json.load(f)
    best: dict[str, tuple[str, float]] = {}
    for event in events:
        # one "Node" event per node and run: "<node>_kernel_time", dur in microseconds
        if event.get("cat") != "Node" or not str(event.get("name", "")).endswith("_kernel_time"):
            continue
        op = str(event.get("args", {}).get("op_name", "?"))
        seconds = float(event.get("dur", 0)) * 1e-6
        node = event["name"]
        if node not in best or seconds < best[node][1]:
            best[node] = (op, seconds)
    per_op: dict[str, list[float]] = {}
    for op, seconds in best.values():
        per_op.setdefault(op, []).append(seconds)
    by_op = sorted(((op, len(s), sum(s)) for op, s in per_op.items()), key=lambda r: -r[2])
    return OrtProfile(tuple(by_op), whole, rounds)

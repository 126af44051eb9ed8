"""The ONNX backend conformance suite (``onnx.backend.test.BackendTest``) run
over phasec's backend, case by case, with results by operator.

::

    python -m phasec.frontend.onnx.conformance                 # table by operator
    python -m phasec.frontend.onnx.conformance --write-unsupported tests/fixtures/onnx_unsupported.txt
    python -m phasec.frontend.onnx.conformance -k conv          # cases whose name has 'conv'

Each case ends as *pass*, *unsupported* (``prepare`` or ``run`` raised
``unittest.SkipTest``: an operator, attribute or dtype the frontend does not
support) or *fail* (a wrong answer or an error). ``tests/frontend/test_onnx_backend.py``
runs every CPU case and requires the unsupported ones to be exactly those
listed in ``tests/fixtures/onnx_unsupported.txt`` and every other one to pass.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
import unittest
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from phasec.fileio import write_atomic

__all__ = ["Case", "Result", "load_cases", "run_case", "operators", "by_operator", "TOLERANCES",
           "SKIPPED_CATEGORIES", "read_list"]

#: Per-case tolerances (the runner's ``test_kwargs``). (The float16 causal
#: Attention cases once needed one: phasec computed the softmax in float32
#: throughout, one float16 ulp from the definition's step-by-step float16
#: rounding; it now rounds as the definition does.) The inverse DFT cases'
#: expected imaginary parts, exactly 0, are numpy's float64 FFT rounding
#: noise of 1.9e-7 on a signal of magnitude 50 (4e-9 relative): phasec's
#: direct sum gives 3e-15, which the default atol of 1e-7 refuses. (ONNX
#: Runtime's float32 FFT is off by 1e-5 there and fails every DFT case.)
TOLERANCES: dict[str, dict[str, float]] = {
    "test_dft_inverse": {"atol": 1e-6},
    "test_dft_inverse_opset19": {"atol": 1e-6},
}

#: Categories of BackendTest left out: the "real" cases are the nine light
#: models, which tests/frontend/test_onnx_models.py compiles and checks with the same
#: inputs, expected outputs and tolerances (running them twice would double
#: the suite's longest compilations).
SKIPPED_CATEGORIES = frozenset({"RealModel"})


@dataclass(frozen=True)
class Case:
    name: str        #: e.g. "test_conv_with_strides_padding_cpu"
    category: str    #: "NodeModel", "SimpleModel", "PyTorchConvertedModel", ...
    func: Any        #: the runner's test function
    proto: Any       #: the runner's model holder: [ModelProto] once the case has run

    @property
    def model(self) -> Any:
        return self.proto[0] if self.proto else None


@dataclass(frozen=True)
class Result:
    case: Case
    status: str      #: "pass", "unsupported" or "fail"
    message: str
    seconds: float


def load_cases(backend: Any = None, device: str = "CPU") -> dict[str, Case]:
    """Every case of ``BackendTest`` for ``device``, by name."""
    import onnx.backend.test

    if backend is None:
        from phasec.frontend.onnx import backend as phasec_backend

        backend = phasec_backend
    bt = onnx.backend.test.BackendTest(backend, __name__, test_kwargs=TOLERANCES)
    suffix = "_" + device.lower()
    raw = [(cat, name, item) for cat, items in bt._test_items.items()
           for name, item in items.items()
           if name.endswith(suffix) and cat not in SKIPPED_CATEGORIES]
    return {name: Case(name, cat, item.func, item.proto) for cat, name, item in raw}


def run_case(case: Case) -> Result:
    """Run one case: pass, unsupported (SkipTest) or fail."""
    start = time.perf_counter()
    try:
        case.func(None)
        status, message = "pass", ""
    except unittest.SkipTest as exc:
        status, message = "unsupported", str(exc)
    except Exception as exc:  # noqa: BLE001 - every failure is a result
        status, message = "fail", f"{type(exc).__name__}: {exc}"
    return Result(case, status, message, time.perf_counter() - start)


def operators(results: Iterable[Result], device: str = "CPU") -> dict[str, str]:
    """case name -> the operator it tests (known once the cases have run: the
    runner loads a case's model when it runs it).

    A node case's operator is its node's op_type; a case whose graph is an
    expanded function body (``test_relu_expanded_ver18``) counts for the
    function's operator as ``"Relu (expanded)"``; other multi-node graphs and
    model cases are grouped by category."""
    suffix = "_" + device.lower()
    results = list(results)
    single: dict[str, str] = {}
    for r in results:
        model = r.case.model
        if r.case.category == "NodeModel" and model is not None and len(model.graph.node) == 1:
            single[r.case.name.removesuffix(suffix)] = model.graph.node[0].op_type
    out = {}
    for r in results:
        base = r.case.name.removesuffix(suffix)
        if base in single:
            op = single[base]
        elif r.case.category == "NodeModel" and base.split("_expanded")[0] in single:
            op = single[base.split("_expanded")[0]] + " (expanded)"
        elif r.case.category == "NodeModel":
            op = "(multi-node graphs)"
        else:
            op = f"({r.case.category})"
        out[r.case.name] = op
    return out


def by_operator(results: Iterable[Result]) -> dict[str, collections.Counter]:
    """operator -> Counter of statuses."""
    results = list(results)
    ops = operators(results)
    table: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in results:
        table[ops[r.case.name]][r.status] += 1
    return dict(table)


def read_list(path: str | os.PathLike) -> dict[str, str]:
    """A committed case list: the first word of each line is a case name; the
    rest of the line is a note; ``#`` starts a comment."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                name, _, note = line.partition(" ")
                out[name] = note.strip()
    return out


def _short_reason(message: str) -> str:
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    detail = lines[1] if len(lines) > 1 else (lines[0] if lines else "")
    return detail.split(": ", 1)[-1][:110] if "): " in detail else detail[:110]


def _table(table: Mapping[str, collections.Counter]) -> str:
    rows = [f"{'operator':<40} {'pass':>5} {'fail':>5} {'unsup':>6}"]
    total: collections.Counter = collections.Counter()
    for op in sorted(table, key=str.lower):
        c = table[op]
        total.update(c)
        rows.append(f"{op:<40} {c['pass']:>5} {c['fail']:>5} {c['unsupported']:>6}")
    rows.append(f"{'total':<40} {total['pass']:>5} {total['fail']:>5} {total['unsupported']:>6}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m phasec.frontend.onnx.conformance",
                                description=__doc__.splitlines()[0])
    p.add_argument("-k", dest="pattern", default="", help="only cases whose name contains this")
    p.add_argument("--write-unsupported", metavar="PATH",
                   help="write the unsupported cases (with their reasons) to PATH")
    p.add_argument("--failures", action="store_true", help="print each failure's message")
    args = p.parse_args(argv)
    import warnings

    warnings.filterwarnings("ignore")
    cases = load_cases()
    results = []
    for name in sorted(cases):
        if args.pattern in name:
            results.append(run_case(cases[name]))
    print(_table(by_operator(results)))
    seconds = sum(r.seconds for r in results)
    print(f"{len(results)} cases in {seconds:.0f} s")
    if args.failures:
        for r in results:
            if r.status == "fail":
                print(f"FAIL {r.case.name}: {r.message[:500]}")
    if args.write_unsupported:
        lines = [f"{r.case.name} {_short_reason(r.message)}" for r in results
                 if r.status == "unsupported"]
        header = ("# ONNX backend conformance cases phasec reports as unsupported (SkipTest), one\n"
                  "# per line: the case, then the first reason. Regenerate with\n"
                  "#   python -m phasec.frontend.onnx.conformance --write-unsupported PATH\n"
                  "# tests/frontend/test_onnx_backend.py fails when a case outside this list is\n"
                  "# unsupported, or when a listed case no longer is.\n")
        # (atomic, and never through a link planted at the name or a temporary)
        write_atomic(args.write_unsupported, header + "\n".join(sorted(lines)) + "\n",
                     what="list of unsupported cases")
    return 1 if any(r.status == "fail" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())

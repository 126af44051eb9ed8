"""The real-model corpus (issue 28) against ONNX Runtime: models that
published packages ship in their wheels (``bench/corpus/models.toml``),
each imported, compiled and run by phasec and by ORT on the same seeded
inputs, in a fresh worker process per model.

* **import / compile**: ``from_onnx(path, shapes=...)`` with the manifest's
  concrete shapes for the model's symbolic dimensions, then
  ``phasec.build`` and loading the VM (LLVM compilation of every kernel;
  the kernel cache on disk is a fresh directory per run, so it is cold);
* **verdict**: ``ok`` when every output has ORT's shape and dtype and
  agrees (integers exactly; floats within rtol 1e-3 and atol = the
  manifest's ``atol`` (default 1e-4) times the largest |ORT output|),
  ``MISMATCH`` with the first difference, or the stage that failed
  (``import``, ``compile``, ``run``) with phasec's message;
* **time**: one thread each (phasec ``set_num_threads(1)``; ORT
  ``intra_op_num_threads=1``), batches of ~20 ms *interleaved* between
  the engines (at least N rounds, more while within a budget), the best
  batch of each; the ratio is phasec / ORT in the same run, so both saw
  the same machine load.

    python bench/bench_corpus.py                     # every model
    python bench/bench_corpus.py --models magika_v3_3,silero_vad --repeat 5
    python bench/bench_corpus.py --quick             # the test subset, best of 3
    python bench/bench_corpus.py --profile ddddocr_det   # each phasec kernel, 1 thread

Models are fetched first (``bench/corpus/corpus.py``: pip download into
``~/.cache/phasec/corpus``, sha256 checked).
"""

from __future__ import annotations

import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus"))

import _common as C  # noqa: E402

C.prepare_blas_env(keep=C.wants_keep_blas_env())

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from typing import Any  # noqa: E402

import corpus  # noqa: E402


def _short(err: BaseException) -> str:
    msg = " ".join(str(err).split())
    return f"{type(err).__name__}: {msg[:300]}"


def worker(name: str, repeat: int) -> dict[str, Any]:
    """Compile, check and time one model in this process."""
    import numpy as np
    import onnx

    entry = {e.name: e for e in corpus.load_manifest()}[name]
    path = corpus.fetch(entry)
    model = onnx.load(path)
    feeds = corpus.make_inputs(entry, model)
    out: dict[str, Any] = {"model": name, "package": entry.package}
    sess = corpus.ort_session(path, threads=1)
    names = [o.name for o in sess.get_outputs()]
    ref = sess.run(None, feeds)

    import phasec
    from phasec.backend.llvm import set_num_threads
    from phasec.frontend.onnx import from_onnx

    order = [n for n, _, _ in corpus.graph_inputs(model)]
    args = [feeds[n] for n in order]
    stage = "import"
    try:
        t0 = time.perf_counter()
        mod = from_onnx(model, shapes=entry.shapes or None)
        out["import"] = time.perf_counter() - t0
        stage = "compile"
        vm = phasec.VirtualMachine(phasec.build(mod))
        out["compile"] = time.perf_counter() - t0
        stage = "run"
        set_num_threads(1)
        f = vm["main"]
        res = f(*args)
    except Exception as e:  # noqa: BLE001 - the table reports every failure
        out["verdict"] = stage
        out["detail"] = _short(e)
        out["trace"] = traceback.format_exc()[-3000:]
        return out
    ours = list(res) if isinstance(res, (tuple, list)) else [res]
    ours = [np.asarray(o.numpy() if hasattr(o, "numpy") else o) for o in ours]
    diff = corpus.compare(entry, ours, ref, names)
    out["verdict"] = "MISMATCH" if diff else "ok"
    out["detail"] = diff
    # interleaved timing, one thread each
    ph, ort_best = math.inf, math.inf
    n_ph = C.calibrate(lambda: f(*args), 0.02)
    n_ort = C.calibrate(lambda: sess.run(None, feeds), 0.02)
    t_end = time.perf_counter() + max(2.0, 0.0)
    rounds = 0
    while rounds < repeat or (time.perf_counter() < t_end and rounds < 200):
        ph = min(ph, C.best_of(lambda: f(*args), 1, n_ph, warmup=0))
        ort_best = min(ort_best, C.best_of(lambda: sess.run(None, feeds), 1, n_ort, warmup=0))
        rounds += 1
    out.update(phasec_t=ph, ort_t=ort_best, rounds=rounds)
    return out


def profile(name: str, repeat: int) -> None:
    """Each phasec kernel of one model at one thread (best of ``repeat`` runs)."""
    import onnx

    import phasec
    from phasec.backend.llvm import set_num_threads
    from phasec.frontend.onnx import from_onnx

    entry = {e.name: e for e in corpus.load_manifest()}[name]
    model = onnx.load(corpus.fetch(entry))
    feeds = corpus.make_inputs(entry, model)
    args = [feeds[n] for n, _, _ in corpus.graph_inputs(model)]
    exe = phasec.build(from_onnx(model, shapes=entry.shapes or None))
    set_num_threads(1)
    f = phasec.VirtualMachine(exe)["main"]
    whole = C.best_of(lambda: f(*args), repeat, 1)
    C.profile_kernels(exe, lambda vm: vm["main"](*args), repeat, name, whole)


def _spawn(name: str, repeat: int, timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", name,
           "--repeat", str(repeat), "--keep-blas-env"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"model": name, "verdict": "timeout", "detail": f"over {timeout:.0f} s"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = " ".join(proc.stderr.strip().splitlines()[-3:])
        return {"model": name, "verdict": "crash",
                "detail": f"worker exit {proc.returncode}: {tail[-300:]}"}
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", help="comma-separated names from models.toml")
    ap.add_argument("--repeat", type=int, default=10, help="interleaved rounds, at least")
    ap.add_argument("--quick", action="store_true", help="the test subset, best of 3")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per model")
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--traces", action="store_true", help="print the traceback of each failure")
    ap.add_argument("--profile", metavar="MODEL", help="time each phasec kernel of one model")
    ap.add_argument("--keep-blas-env", action="store_true")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        os.environ.setdefault("PHASEC_CACHE_DIR", tempfile.mkdtemp(prefix="phasec-corpus-"))
        print(json.dumps(worker(args.worker, args.repeat)))
        return 0
    if args.profile:
        profile(args.profile, args.repeat)
        return 0
    entries = corpus.load_manifest()
    if args.quick:
        entries = [e for e in entries if e.test]
        args.repeat = 3
    if args.models:
        wanted = args.models.split(",")
        known = {e.name for e in entries}
        missing = [w for w in wanted if w not in known]
        if missing:
            ap.error(f"unknown models {missing}")
        entries = [e for e in entries if e.name in wanted]
    os.environ["PHASEC_CACHE_DIR"] = tempfile.mkdtemp(prefix="phasec-corpus-")
    print(C.machine_description())
    rows, results = [], []
    for e in entries:
        corpus.fetch(e)
        r = _spawn(e.name, args.repeat, args.timeout)
        r.setdefault("package", e.package)
        results.append(r)
        ratio = (r["phasec_t"] / r["ort_t"]) if "phasec_t" in r else None
        row = [e.name, f"{e.package} {e.version}",
               C.fmt_seconds(r.get("phasec_t")), C.fmt_seconds(r.get("ort_t")),
               C.fmt_ratio(ratio) if ratio else "-",
               C.fmt_seconds(r.get("compile")), r["verdict"], r.get("detail", "")[:110]]
        rows.append(row)
        print("  " + "  ".join(str(x) for x in row[:7]), r.get("detail", "")[:200], flush=True)
        if args.traces and r.get("trace"):
            print(r["trace"])
    C.print_table(["model", "package", "phasec 1T", "ORT 1T", "ratio", "compile", "verdict",
                   "detail"], rows, left=2,
                  title="real models from packages: phasec vs ONNX Runtime, one thread "
                        "(ratio = phasec / ORT, interleaved, best batch)")
    ok = [r for r in results if r["verdict"] == "ok"]
    pk = {r["package"] for r in ok}
    print(f"\n{len(ok)} of {len(results)} models match ORT, from {len(pk)} packages")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

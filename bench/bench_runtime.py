"""Run time of compiled models against numpy (and TVM when installed), one process.

Models (TVMScript below, numpy implementations alongside, same inputs):

* ``mlp``: x (64, 256) through two 256-wide dense layers (matmul + bias,
  ReLU after the first);
* ``ln_gelu_res``: ``x + gelu(layer_norm(x))`` on a (512, 1024) tensor;
* ``attention``: single-head self-attention, batch 4, 128 tokens, 64 wide
  (q/k/v projections, ``softmax(q k^T / 8) v``);
* ``tiny``: ten elementwise operations on 16 floats, where the VM's
  per-call and per-instruction overhead is all there is.

Each model is compiled once with ``phasec.build(mod, opt_level=2)``; the
compiled function and the numpy function are each timed best-of-R batches
(batch size calibrated to ~50 ms) after checking that the results agree.
The ratio is phasec time / numpy time (below 1: phasec is faster).
numpy runs with its default BLAS threads; "numpy 1T" is numpy with one BLAS
thread (often faster for these small matrices on a busy 2-core machine).
Likewise "phasec 1T" runs phasec's parallel loops on one thread; "best/best"
is the faster phasec time over the faster numpy time, the comparison least
distorted by other processes competing for the cores. When
``apache-tvm`` is importable, TVM compiles the same TVMScript
(``tvm.compile``, target ``llvm``, no tuning) and its time is a column;
otherwise the table says "TVM not installed" (this script never installs
anything). For reference, TVM 0.27 without tuning ran mlp, ln_gelu_res and
attention at about 60x, 0.13x and 12x numpy's time on a 2-core machine.

numpy's gelu uses a float32 erf approximation (Abramowitz-Stegun 7.1.26,
|error| < 1.5e-7), since numpy has no erf; results are checked against a
float64 reference.

OpenBLAS: ``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` are unset for this
process (they can make numpy's matmul much slower than the CPU allows);
``--keep-blas-env`` keeps them. The header says which BLAS kernel numpy uses.

    python bench/bench_runtime.py             # all models, best of 20 batches
    python bench/bench_runtime.py --quick     # best of 5 batches
    python bench/bench_runtime.py --models mlp,attention --repeat 50
    python bench/bench_runtime.py --profile attention   # time per kernel
"""

from __future__ import annotations

import _common as C

C.prepare_blas_env(keep=C.wants_keep_blas_env())

import argparse  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

# ---------------------------------------------------------------------------
# Models: TVMScript (parsed by phasec and by TVM) and numpy
# ---------------------------------------------------------------------------

MLP = """
@I.ir_module
class MLP:
    @R.function
    def main(x: R.Tensor((64, 256), dtype="float32"),
             w1: R.Tensor((256, 256), dtype="float32"), b1: R.Tensor((256,), dtype="float32"),
             w2: R.Tensor((256, 256), dtype="float32"), b2: R.Tensor((256,), dtype="float32")
             ) -> R.Tensor((64, 256), dtype="float32"):
        with R.dataflow():
            h = R.nn.relu(R.add(R.matmul(x, w1), b1))
            out = R.add(R.matmul(h, w2), b2)
            R.output(out)
        return out
"""

LN_GELU_RES = """
@I.ir_module
class LayerNormGeluResidual:
    @R.function
    def main(x: R.Tensor((512, 1024), dtype="float32"), g: R.Tensor((1024,), dtype="float32"),
             b: R.Tensor((1024,), dtype="float32")) -> R.Tensor((512, 1024), dtype="float32"):
        with R.dataflow():
            h = R.nn.layer_norm(x, g, b, axes=[-1], epsilon=1e-05)
            out = R.add(x, R.nn.gelu(h))
            R.output(out)
        return out
"""

ATTENTION = """
@I.ir_module
class Attention:
    @R.function
    def main(x: R.Tensor((4, 128, 64), dtype="float32"), wq: R.Tensor((64, 64), dtype="float32"),
             wk: R.Tensor((64, 64), dtype="float32"), wv: R.Tensor((64, 64), dtype="float32")
             ) -> R.Tensor((4, 128, 64), dtype="float32"):
        with R.dataflow():
            q = R.matmul(x, wq)
            k = R.matmul(x, wk)
            v = R.matmul(x, wv)
            kt = R.permute_dims(k, axes=[0, 2, 1])
            scores = R.multiply(R.matmul(q, kt), R.const(0.125, "float32"))
            attn = R.nn.softmax(scores, axis=-1)
            out = R.matmul(attn, v)
            R.output(out)
        return out
"""

TINY = """
@I.ir_module
class Tiny:
    @R.function
    def main(x: R.Tensor((16,), dtype="float32"), y: R.Tensor((16,), dtype="float32")
             ) -> R.Tensor((16,), dtype="float32"):
        with R.dataflow():
            a = R.add(x, y)
            b = R.multiply(a, x)
            c = R.subtract(b, y)
            d = R.add(c, x)
            e = R.multiply(d, y)
            f = R.subtract(e, x)
            g = R.add(f, y)
            h = R.multiply(g, x)
            i = R.subtract(h, y)
            out = R.add(i, x)
            R.output(out)
        return out
"""


def _erf_f32(x: np.ndarray) -> np.ndarray:
    """erf in float32 numpy (Abramowitz-Stegun 7.1.26, |error| < 1.5e-7)."""
    a1, a2, a3, a4, a5, p = (np.float32(c) for c in (
        0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429, 0.3275911))
    s = np.sign(x)
    ax = np.abs(x)
    t = np.float32(1) / (np.float32(1) + p * ax)
    y = np.float32(1) - (((((a5 * t + a4) * t) + a3) * t + a2) * t + a1) * t * np.exp(-ax * ax)
    return s * y


def np_mlp(x, w1, b1, w2, b2):
    h = np.maximum(x @ w1 + b1, np.float32(0))
    return h @ w2 + b2


def np_ln_gelu_res(x, g, b):
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    var = np.mean(centered * centered, axis=-1, keepdims=True)
    h = centered / np.sqrt(var + np.float32(1e-5)) * g + b
    gelu = np.float32(0.5) * h * (np.float32(1) + _erf_f32(h * np.float32(0.7071067811865476)))
    return x + gelu


def np_attention(x, wq, wk, wv):
    q, k, v = x @ wq, x @ wk, x @ wv
    scores = (q @ k.transpose(0, 2, 1)) * np.float32(0.125)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v


def np_tiny(x, y):
    a = x + y
    b = a * x
    c = b - y
    d = c + x
    e = d * y
    f = e - x
    g = f + y
    h = g * x
    i = h - y
    return i + x


def ref_ln_gelu_res(x, g, b):
    """float64 reference with an exact erf."""
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=-1, keepdims=True)
    var = x64.var(axis=-1, keepdims=True)
    h = (x64 - mean) / np.sqrt(var + 1e-5) * g + b
    erf = np.vectorize(math.erf)(h / math.sqrt(2.0))
    return x64 + 0.5 * h * (1.0 + erf)


@dataclass
class Model:
    name: str
    description: str
    source: str
    make_inputs: Callable[[np.random.Generator], list[np.ndarray]]
    numpy_fn: Callable[..., np.ndarray]
    reference: Callable[..., np.ndarray] | None = None  # float64 (default: numpy_fn in float64)


def _normal(rng: np.random.Generator, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


MODELS = [
    Model("mlp", "MLP 64x256, two 256-wide layers", MLP,
          lambda r: [_normal(r, (64, 256)), _normal(r, (256, 256), 1 / 16), _normal(r, (256,)),
                     _normal(r, (256, 256), 1 / 16), _normal(r, (256,))], np_mlp),
    Model("ln_gelu_res", "layer_norm+gelu+residual 512x1024", LN_GELU_RES,
          lambda r: [_normal(r, (512, 1024)), _normal(r, (1024,)), _normal(r, (1024,))],
          np_ln_gelu_res, ref_ln_gelu_res),
    Model("attention", "attention b4 t128 d64", ATTENTION,
          lambda r: [_normal(r, (4, 128, 64)), _normal(r, (64, 64), 1 / 8),
                     _normal(r, (64, 64), 1 / 8), _normal(r, (64, 64), 1 / 8)], np_attention),
    Model("tiny", "tiny: 10 elementwise ops on 16 floats", TINY,
          lambda r: [_normal(r, (16,)), _normal(r, (16,))], np_tiny),
]


# ---------------------------------------------------------------------------
# Runners
# ---------------------------------------------------------------------------

def build_phasec(source: str) -> tuple[Callable[..., Any], Any, float]:
    """(callable, executable, seconds to build) for a TVMScript module."""
    import phasec

    t0 = time.perf_counter()
    exe = phasec.build(phasec.parse(source), opt_level=2)
    vm = phasec.VirtualMachine(exe)
    return vm["main"], exe, time.perf_counter() - t0


def build_tvm(tvm: Any, source: str) -> Callable[..., Any]:
    """A callable running ``source`` compiled by TVM (numpy in, numpy out)."""
    from tvm import relax  # type: ignore[import-not-found]

    mod = tvm.script.from_source(source)
    compile_fn = getattr(tvm, "compile", None)
    ex = compile_fn(mod, target="llvm") if compile_fn else relax.build(mod, target="llvm")
    dev = tvm.cpu()
    vm = relax.VirtualMachine(ex, dev)
    make = getattr(tvm.runtime, "tensor", None) or tvm.nd.array
    main = vm["main"]

    def run(*arrays: np.ndarray) -> Any:
        return main(*[make(a, dev) for a in arrays])

    def run_prepared(prepared: list[Any]) -> Any:
        return main(*prepared)

    run.prepare = lambda arrays: [make(a, dev) for a in arrays]  # type: ignore[attr-defined]
    run.run_prepared = run_prepared  # type: ignore[attr-defined]
    return run


def check_close(name: str, actual: np.ndarray, expected: np.ndarray, rtol: float = 1e-4) -> str:
    """"ok" or a short description of the mismatch (errors relative to max|expected|)."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    if actual.shape != expected.shape:
        return f"shape {actual.shape} != {expected.shape}"
    scale = float(np.max(np.abs(expected))) or 1.0
    err = float(np.max(np.abs(actual - expected))) / scale
    return "ok" if err <= rtol else f"MISMATCH rel err {err:.2e}"


def time_fn(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """(best seconds per call, spread = median/best)."""
    number = C.calibrate(fn, 0.05)
    s = C.samples(fn, repeat=repeat, number=number, warmup=2)
    return min(s), C.spread(s)


def profile_kernels(model: Model, repeat: int) -> None:
    """Best time of each kernel of the compiled model, in program order."""
    import phasec
    from phasec.backend.vm import VirtualMachine

    exe = phasec.build(phasec.parse(model.source), opt_level=2)
    inputs = model.make_inputs(np.random.default_rng(0))
    plain = VirtualMachine(exe)
    total, _ = time_fn(lambda: plain["main"](*inputs), repeat)
    C.profile_kernels(exe, lambda vm: vm["main"](*inputs), repeat, model.name, total)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="best of 5 batches instead of 20")
    ap.add_argument("--repeat", type=int, default=None, help="batches per measurement")
    ap.add_argument("--models", default=None,
                    help=f"comma-separated subset of {', '.join(m.name for m in MODELS)}")
    ap.add_argument("--keep-blas-env", action="store_true",
                    help="keep OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE (unset by default)")
    ap.add_argument("--no-tvm", action="store_true", help="do not run TVM even if installed")
    ap.add_argument("--profile", default=None, metavar="MODEL",
                    help="print the time of each kernel of MODEL and stop")
    ap.add_argument("--threads", type=int, default=None,
                    help="threads of phasec's parallel loops (default: all cores)")
    args = ap.parse_args(argv)
    if args.threads:
        from phasec.backend.llvm import set_num_threads
        set_num_threads(args.threads)
    repeat = args.repeat or (5 if args.quick else 20)
    models = MODELS
    if args.models:
        wanted = args.models.split(",")
        unknown = [w for w in wanted if w not in {m.name for m in MODELS}]
        if unknown:
            ap.error(f"unknown model(s) {', '.join(unknown)}")
        models = [m for m in MODELS if m.name in wanted]
    if args.profile:
        profile_kernels(next(m for m in MODELS if m.name == args.profile), repeat)
        return

    from phasec.backend.llvm import get_num_threads, set_num_threads

    tvm, tvm_desc = (None, "TVM not run (--no-tvm)") if args.no_tvm else C.tvm_status()
    print(f"run time against numpy; {C.machine_description()}")
    print(f"numpy {np.__version__}: {C.blas_description()}")
    print(f"phasec kernel threads: {get_num_threads()}; {tvm_desc}")
    print(f"best of {repeat} batches of ~50 ms; spread = median/best batch\n")

    rows = []
    for model in models:
        rng = np.random.default_rng(0)
        inputs = model.make_inputs(rng)
        run, exe, build_s = build_phasec(model.source)
        out = run(*inputs)
        reference = (model.reference or (lambda *a: model.numpy_fn(
            *[x.astype(np.float64) for x in a])))(*inputs)
        status = check_close(model.name, out, reference)
        np_status = check_close(model.name, model.numpy_fn(*inputs), reference)
        t_ph, sp_ph = time_fn(lambda: run(*inputs), repeat)
        threads = get_num_threads()
        set_num_threads(1)
        t_ph1, _ = time_fn(lambda: run(*inputs), repeat)
        set_num_threads(threads)
        t_np, sp_np = time_fn(lambda: model.numpy_fn(*inputs), repeat)
        t_np1 = None
        previous = C.set_blas_threads(1)
        if previous is not None:
            t_np1, _ = time_fn(lambda: model.numpy_fn(*inputs), repeat)
            C.set_blas_threads(previous)
        tvm_cell = "-"
        if tvm is not None:
            try:
                trun = build_tvm(tvm, model.source)
                prepared = trun.prepare(inputs)
                tout = trun.run_prepared(prepared)
                tout = tout.numpy() if hasattr(tout, "numpy") else np.asarray(tout)
                t_tvm, _ = time_fn(lambda: trun.run_prepared(prepared), repeat)
                tvm_cell = (f"{C.fmt_seconds(t_tvm)} ({C.fmt_ratio(t_tvm / t_np)})"
                            + ("" if check_close(model.name, tout, reference) == "ok"
                               else " MISMATCH"))
            except Exception as exc:  # noqa: BLE001 - a peer's failure is reported, not fatal
                tvm_cell = f"failed: {type(exc).__name__}"
        best_np = t_np if t_np1 is None else min(t_np, t_np1)
        rows.append((model.description, C.fmt_seconds(t_ph), f"{sp_ph:.2f}",
                     C.fmt_seconds(t_ph1), C.fmt_seconds(t_np), f"{sp_np:.2f}",
                     C.fmt_seconds(t_np1), C.fmt_ratio(t_ph / t_np),
                     C.fmt_ratio(min(t_ph, t_ph1) / best_np),
                     tvm_cell if tvm is not None else tvm_desc,
                     len(exe.prim_funcs), status if np_status == "ok" else
                     f"{status}; numpy {np_status}"))
    C.print_table(("model", "phasec", "spread", "phasec 1T", "numpy", "spread", "numpy 1T",
                   "phasec/numpy", "best/best",
                   "TVM (TVM/numpy)", "kernels", "check"), rows)
    print("TVM 0.27 reference (untuned, 2 cores): mlp ~60x, ln_gelu_res ~0.13x, "
          "attention ~12x numpy")


if __name__ == "__main__":
    main()

"""Cache prefetch hints (``T.attr({"phasec.prefetch": A[i]})``) and the GEMM
schedule's use of them: a register tile with a long reduction prefetches the
lines its epilogue reads (a residual) and writes (the output) before the
reduction. Values are checked against numpy (LLVM and the TIR interpreter);
the hints survive printing, parsing and JSON, and TVM 0.27 compiles and runs
a kernel that has them (it ignores the attribute)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import phasec
from phasec.backend.llvm import compile_prim_funcs
from phasec.interp.tir import run_prim_func
from phasec.ir import IRModule, assert_structural_equal
from phasec import te
from phasec.ir import tir as T
from phasec.target import tuning
from phasec.target.tuning import host_tuning
from phasec.script.json_format import from_json, to_json


@pytest.fixture(autouse=True)
def _avx512_prefetch_sizes(monkeypatch):
    """The prefetch thresholds these tests were written for (the avx512 and
    avx2 profiles'), also on a host whose profile changes them (the Xeon's)."""
    monkeypatch.setenv("PHASEC_TUNING", "gemm_prefetch_min_k=256,gemm_prefetch_a_min_k=64,"
                       "gemm_prefetch_a_max_k=1000000000,gemm_prefetch_a_max_columns=256,"
                       "gemm_prefetch_a_min_bytes=0")
    tuning.host_tuning.cache_clear()
    yield
    tuning.host_tuning.cache_clear()


def _walk(stmt):
    stack = [stmt]
    while stack:
        s = stack.pop()
        yield s
        stack.extend(T.stmt_children(s))


def _conv_residual(c: int, h: int, w: int, o: int, k: int = 3, opts=None):
    """conv2d (NCHW, no padding) + residual, as te computes; with its numpy reference."""
    X = te.placeholder((1, c, h, w), "float32", "X")
    W = te.placeholder((o, c, k, k), "float32", "W")
    oh, ow = h - k + 1, w - k + 1
    R = te.placeholder((1, o, oh, ow), "float32", "R")
    rc, ry, rx = te.reduce_axis(c, "rc"), te.reduce_axis(k, "ry"), te.reduce_axis(k, "rx")
    conv = te.compute((1, o, oh, ow), lambda b, q, y, x: te.sum(
        X[b, rc.var, y + ry.var, x + rx.var] * W[q, rc.var, ry.var, rx.var],
        axis=[rc, ry, rx]), name="conv", tag="conv2d")
    out = te.compute(conv.shape, lambda b, q, y, x: conv[b, q, y, x] + R[b, q, y, x], name="out")
    func = te.create_prim_func([X, W, R, out], schedule_hints=opts or True)

    def reference(x, wt, r):
        oh, ow = x.shape[2] - k + 1, x.shape[3] - k + 1
        y = np.zeros((1, o, oh, ow))
        for dy in range(k):
            for dx in range(k):
                y[0] += np.einsum("chw,qc->qhw", x[0, :, dy:dy + oh, dx:dx + ow].astype("float64"),
                                  wt[:, :, dy, dx])
        return y + r
    if not isinstance(h, int):
        return func, None, None, reference
    rng = np.random.default_rng(c * 100 + w)
    args = [rng.standard_normal((1, c, h, w)).astype("float32"),
            rng.standard_normal((o, c, k, k)).astype("float32"),
            rng.standard_normal((1, o, oh, ow)).astype("float32")]
    return func, args, (1, o, oh, ow), reference


def _prefetches(func):
    return [(s.key, s.value.buffer.name) for s in _walk(func.body)
            if isinstance(s, T.AttrStmt) and s.key in (T.PREFETCH_ATTR, T.PREFETCH_WRITE_ATTR)]


def test_long_reduction_tiles_prefetch_the_residual_and_output_lines():
    # K = 32 x 3 x 3 = 288: long enough; 23 columns (prime), 13 channels (odd)
    func, args, out_shape, reference = _conv_residual(32, 5, 25, 13)
    keys = _prefetches(func)
    assert {(T.PREFETCH_ATTR, "R"), (T.PREFETCH_WRITE_ATTR, "out")} == set(keys)
    assert not [b for _, b in keys if b in ("X", "W")]  # the reduction's operands: never
    want = reference(*args)
    got = np.zeros(out_shape, "float32")
    lib = compile_prim_funcs({"k": func})
    lib["k"](*args, got)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    asm = lib.assembly()
    assert "prefetcht0" in asm and "prefetchw" in asm
    # the interpreter runs the body as if the hints were not there (the same
    # reduction over fewer outputs: 258k multiply-adds took 18 s there)
    func, args, out_shape, reference = _conv_residual(32, 3, 11, 5)
    assert set(_prefetches(func)) == set(keys)
    fresh = [a.copy() for a in args] + [np.zeros(out_shape, "float32")]
    run_prim_func(func, fresh)
    np.testing.assert_allclose(fresh[-1], reference(*args), rtol=1e-4, atol=1e-4)


def test_short_reductions_and_the_switch_leave_no_prefetch():
    # K = 8 x 3 x 3 = 72 < gemm_prefetch_min_k: the prefetches would not pay
    func, args, out_shape, reference = _conv_residual(8, 4, 12, 9)
    assert not _prefetches(func)
    off = te.ScheduleOptions(tuning=dataclasses.replace(host_tuning(), gemm_prefetch_min_k=10**9))
    func_off, _, _, _ = _conv_residual(32, 5, 25, 13, opts=off)
    assert not _prefetches(func_off)
    got = np.zeros(out_shape, "float32")
    compile_prim_funcs({"k": func})["k"](*args, got)
    np.testing.assert_allclose(got, reference(*args), rtol=1e-4, atol=1e-4)


def test_a_symbolic_height_prefetches_too():
    n = T.Var("n")
    func, _, _, reference = _conv_residual(32, n, 19, 6)
    assert _prefetches(func)
    rng = np.random.default_rng(1)
    lib = compile_prim_funcs({"k": func})
    for h in (3, 4, 7):
        args = [rng.standard_normal((1, 32, h, 19)).astype("float32"),
                rng.standard_normal((6, 32, 3, 3)).astype("float32"),
                rng.standard_normal((1, 6, h - 2, 17)).astype("float32")]
        got = np.zeros((1, 6, h - 2, 17), "float32")
        lib["k"](*args, got)
        np.testing.assert_allclose(got, reference(*args), rtol=1e-4, atol=1e-4)


def test_a_prefetch_address_is_never_checked_or_read():
    # a hint past the end of its buffer: no bounds error (check_bounds on), no
    # fault, nothing read; the interpreter ignores it as well
    A = T.Buffer("A", (8,), "float32")
    B = T.Buffer("B", (8,), "float32")
    i = T.Var("i")
    body = T.For(i, 0, 8, "serial", T.AttrStmt(
        T.PREFETCH_ATTR, T.BufferLoad(A, (i + 1000000,)),
        T.AttrStmt(T.PREFETCH_WRITE_ATTR, T.BufferLoad(B, (i - 100,)),
                   T.BufferStore(B, A[i] * 2.0, (i,)))))
    func = T.PrimFunc([A, B], body)
    a = np.arange(8, dtype="float32")
    for check in (False, True):
        b = np.zeros(8, "float32")
        compile_prim_funcs({"f": func}, check_bounds=check)["f"](a, b)
        np.testing.assert_array_equal(b, 2 * a)
    b = np.zeros(8, "float32")
    run_prim_func(func, [a, b])
    np.testing.assert_array_equal(b, 2 * a)


# (output rows of 18: wider than a vector, so the residual is read in the
# conv's own tiles, see test_conv_narrow.py)
_RESIDUAL = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((1, 32, 6, 20), "float32"), w: R.Tensor((16, 32, 3, 3), "float32"),
             r: R.Tensor((1, 16, 4, 18), "float32")) -> R.Tensor((1, 16, 4, 18), "float32"):
        with R.dataflow():
            c = R.nn.conv2d(x, w)
            y = R.add(c, r)
            R.output(y)
        return y
'''


def _legalized() -> IRModule:
    from phasec.transform import get_pass
    mod = phasec.parse(_RESIDUAL)
    for name in ("Normalize", "LambdaLifting", "ConvertToDataflow", "FuseOps", "ToNonDataflow",
                 "LegalizeOps"):
        mod = get_pass(name)(mod)
    return mod


def test_prefetch_hints_print_parse_and_json_round_trip():
    mod = _legalized()
    kernels = [f for f in mod.functions.values() if isinstance(f, T.PrimFunc)]
    assert any(_prefetches(f) for f in kernels)
    for syntax in ("tvm", "legacy"):
        text = mod.script(syntax=syntax)
        assert '"phasec.prefetch"' in text and '"phasec.prefetch_write"' in text
        again = phasec.parse(text)
        assert_structural_equal(again, mod)
        assert again.script(syntax=syntax) == text
    assert_structural_equal(from_json(to_json(mod)), mod)


def test_tvm_compiles_and_runs_a_kernel_with_prefetch_hints():
    import tvm
    from tvm import relax

    from phasec.tvm import to_tvm
    mod = _legalized()
    vm = relax.VirtualMachine(tvm.compile(to_tvm(mod), target="llvm"), tvm.cpu())
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype("float32")
            for s in ((1, 32, 6, 20), (16, 32, 3, 3), (1, 16, 4, 18))]
    got = vm["main"](*[tvm.runtime.tensor(a) for a in args]).numpy()
    ours = np.asarray(phasec.VirtualMachine(phasec.build(phasec.parse(_RESIDUAL)))["main"](*args))
    want = np.zeros((16, 4, 18))
    for dy in range(3):
        for dx in range(3):
            want += np.einsum("chw,qc->qhw", args[0][0, :, dy:dy + 4, dx:dx + 18].astype("float64"),
                              args[1][:, :, dy, dx])
    want = want[None] + args[2]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ours, want, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------
# The next row tile's A: a constant weight streamed once per call
# ---------------------------------------------------------------------------


def _pointwise(c: int, hw: int, o: int, batch=1, constants=("W",), tuning=None):
    """A 1x1 convolution (NCHW) + bias as te computes it, W given as a
    constant of the module (``constant_inputs``); with its numpy reference."""
    X = te.placeholder((batch, c, hw, hw), "float32", "X")
    W = te.placeholder((o, c, 1, 1), "float32", "W")
    b = te.placeholder((o,), "float32", "bias")
    rc = te.reduce_axis(c, "rc")
    ry, rx = te.reduce_axis(1, "ry"), te.reduce_axis(1, "rx")
    conv = te.compute((batch, o, hw, hw), lambda n, q, y, x: te.sum(
        X[n, rc.var, y + ry.var, x + rx.var] * W[q, rc.var, ry.var, rx.var],
        axis=[rc, ry, rx]), name="conv", tag="conv2d")
    out = te.compute(conv.shape, lambda n, q, y, x: conv[n, q, y, x] + b[q], name="out")
    opts = te.ScheduleOptions(constant_inputs=frozenset(constants), tuning=tuning)
    func = te.create_prim_func([X, W, b, out], schedule_hints=opts)

    def reference(x, wt, bias):
        return (np.einsum("nchw,qc->nqhw", x.astype("float64"), wt[:, :, 0, 0].astype("float64"))
                + bias[None, :, None, None])
    return func, reference


def _run_both(func, reference, c, hw, o, batch=1):
    rng = np.random.default_rng(c + o)
    args = [rng.standard_normal((batch, c, hw, hw)).astype("float32"),
            rng.standard_normal((o, c, 1, 1)).astype("float32"),
            rng.standard_normal(o).astype("float32")]
    want = reference(*args)
    got = np.zeros((batch, o, hw, hw), "float32")
    compile_prim_funcs({"k": func}, check_bounds=True)["k"](*args, got)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    if batch * c * hw * hw * o <= 60_000:  # the interpreter too (~5-10k multiply-adds a second)
        fresh = [a.copy() for a in args] + [np.zeros_like(got)]
        run_prim_func(func, fresh)
        np.testing.assert_allclose(fresh[-1], want, rtol=1e-4, atol=1e-4)


def test_a_constant_weight_over_a_small_image_prefetches_the_next_rows():
    # 96 input channels (K >= 64), 37 output channels (odd: a remainder row
    # tile, whose next rows are clamped to the last), 7x7 = 49 columns; a batch
    # of 3 (the batch axis is a loop around the GEMM, not a kernel parameter)
    func, reference = _pointwise(96, 7, 37, batch=3)
    assert (T.PREFETCH_ATTR, "W") in _prefetches(func)
    assert [p.name for p in func.params] == ["X", "W", "bias", "out"]  # nothing left free
    _run_both(func, reference, 96, 7, 37, batch=3)


def test_no_weight_prefetch_for_activations_short_reductions_or_wide_products():
    for func, _ in (_pointwise(96, 7, 37, constants=()),      # W not a constant
                    _pointwise(48, 7, 37),                     # K = 48 < 64
                    _pointwise(96, 17, 37)):                   # 289 columns > 256
        assert (T.PREFETCH_ATTR, "W") not in _prefetches(func)
    off = dataclasses.replace(host_tuning(), gemm_prefetch_a_min_k=10**9)
    func, reference = _pointwise(96, 7, 37, tuning=off)
    assert (T.PREFETCH_ATTR, "W") not in _prefetches(func)
    _run_both(func, reference, 96, 7, 37)


@pytest.mark.parametrize("c, hw, o, batch, taken", [
    (131, 7, 1009, 1, True),   # K = 131 (prime) in [128, 384], 49 columns, 517 KB
    (383, 5, 347, 2, True),    # K = 383 (prime), 2 x 25 = 50 columns, a batch of two
    (160, 7, 960, 1, True),    # MobileNetV2's 160 -> 960 over 7x7
    (389, 7, 347, 1, False),   # K = 389 > 384: A's rows a stream the prefetchers follow
    (127, 7, 1039, 1, False),  # K = 127 < 128
    (131, 9, 1009, 1, False),  # 81 columns > 64
    (136, 7, 544, 1, False),   # 289 KB < 512 KB (ShuffleNet's grouped 1x1s lost)
])
def test_the_xeon_prefetches_a_for_reductions_of_128_to_384_over_64_columns(c, hw, o, batch,
                                                                            taken):
    # the Xeon's window (tuning.avx512_xeon_tuning): odd, prime sizes, against numpy
    xeon = tuning.avx512_xeon_tuning()
    assert (xeon.gemm_prefetch_a_min_k, xeon.gemm_prefetch_a_max_k,
            xeon.gemm_prefetch_a_max_columns, xeon.gemm_prefetch_a_min_bytes
            ) == (128, 384, 64, 512 * 1024)
    func, reference = _pointwise(c, hw, o, batch=batch, tuning=xeon)
    assert ((T.PREFETCH_ATTR, "W") in _prefetches(func)) == taken
    _run_both(func, reference, c, hw, o, batch=batch)


def test_the_weights_bytes_bound_the_prefetch_on_the_interpreter_too():
    # 131 x 13 floats (6.8 KB) over 3x3: prefetched under a 4 KB bound, not under 8 KB
    xeon = tuning.avx512_xeon_tuning()
    for min_bytes, taken in ((4096, True), (8192, False)):
        small = dataclasses.replace(xeon, gemm_prefetch_a_min_bytes=min_bytes)
        func, reference = _pointwise(131, 3, 13, tuning=small)
        assert ((T.PREFETCH_ATTR, "W") in _prefetches(func)) == taken
        _run_both(func, reference, 131, 3, 13)

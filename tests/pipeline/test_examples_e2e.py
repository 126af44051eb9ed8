"""End to end: the bundled example models (phasec/examples: an MLP, a small
CNN, a transformer block) parsed from package data, compiled with
phasec.build (default pipeline, LLVM kernels), run on the VM, and compared
with the reference interpreter and with independent float64 numpy code.

Each model is compiled once per session (the ``compiled`` fixture); LLVM
compilation dominates this file's run time.

Tolerances. Every comparison is ``|vm - ref| <= rtol * |ref| + atol`` with
rtol 1e-5 and ``atol = 1e-5 * max|ref|``. The absolute part is needed and
justified: the kernels compute in float32 and accumulate matmul/conv2d sums
of K products (K up to 2048 here) in another order than numpy (vectorized,
tiled), so an output element is off by about K * 2^-24 times the magnitude
of its *terms*; for an element near zero (terms that cancel) that is a large
error relative to the element itself, but not relative to the output's
scale. Inputs are scaled as in a trained network (weights ~ N(0, 1/fan_in)),
so activations stay O(1) and softmax is not saturated; with unscaled N(0, 1)
weights the transformer's attention logits reach ~100 and its outputs ~1e3,
and the same float32 rounding gives errors of ~2e-5 relative, the reason
``phasec run`` defaults to 1e-4.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import phasec
from phasec.backend.vm import Executable, VirtualMachine
from phasec.cli.run import EXAMPLES, example_source, load_example
from phasec.errors import VMError
from phasec.interp import run as interpret
from phasec.ir import Phase
from phasec.transform import PassTrace

RTOL = 1e-5


def assert_close(actual, expected, rtol=RTOL):
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape
    scale = float(np.max(np.abs(expected)))
    np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64),
                               rtol=rtol, atol=rtol * scale)


# ---------------------------------------------------------------------------
# Inputs and float64 numpy references
# ---------------------------------------------------------------------------

def _normal(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype("float32")


def mlp_inputs(rng):
    x = _normal(rng, (64, 256))
    layers = []
    for fan_in, fan_out in ((256, 256), (256, 256), (256, 10)):
        layers += [_normal(rng, (fan_in, fan_out), 1 / math.sqrt(fan_in)),
                   _normal(rng, (fan_out,), 0.1)]
    return [x, *layers]


def mlp_numpy(x, w1, b1, w2, b2, w3, b3):
    x, w1, b1, w2, b2, w3, b3 = (a.astype(np.float64) for a in (x, w1, b1, w2, b2, w3, b3))
    h1 = np.maximum(x @ w1 + b1, 0)
    h2 = np.maximum(h1 @ w2 + b2, 0)
    return h2 @ w3 + b3


def cnn_inputs(rng):
    return [_normal(rng, (1, 3, 32, 32)),
            _normal(rng, (16, 3, 3, 3), 1 / math.sqrt(27)), _normal(rng, (1, 16, 1, 1), 0.1),
            _normal(rng, (32, 16, 3, 3), 1 / math.sqrt(144)), _normal(rng, (1, 32, 1, 1), 0.1),
            _normal(rng, (2048, 10), 1 / math.sqrt(2048)), _normal(rng, (10,), 0.1)]


def _conv2d_same3x3(x, k):
    """NCHW x OIHW, 3x3 kernel, stride 1, padding 1."""
    n, c, h, w = x.shape
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, k.shape[0], h, w))
    for dy in range(3):
        for dx in range(3):
            out += np.einsum("nchw,oc->nohw", padded[:, :, dy:dy + h, dx:dx + w], k[:, :, dy, dx])
    return out


def _pool2x2(x, reduce):
    n, c, h, w = x.shape
    return reduce(x.reshape(n, c, h // 2, 2, w // 2, 2), axis=(3, 5))


def cnn_numpy(x, k1, c1, k2, c2, w, b):
    x, k1, c1, k2, c2, w, b = (a.astype(np.float64) for a in (x, k1, c1, k2, c2, w, b))
    p1 = _pool2x2(np.maximum(_conv2d_same3x3(x, k1) + c1, 0), np.max)
    p2 = _pool2x2(np.maximum(_conv2d_same3x3(p1, k2) + c2, 0), np.mean)
    return p2.reshape(1, 2048) @ w + b


def transformer_inputs(rng, n):
    d, f = 64, 256
    return [_normal(rng, (n, 128, d)),
            1 + _normal(rng, (d,), 0.1), _normal(rng, (d,), 0.1),
            *(_normal(rng, (d, d), 1 / math.sqrt(d)) for _ in range(4)),
            1 + _normal(rng, (d,), 0.1), _normal(rng, (d,), 0.1),
            _normal(rng, (d, f), 1 / math.sqrt(d)), _normal(rng, (f, d), 1 / math.sqrt(f))]


def _layer_norm(x, g, b, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * g + b


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


_erf = np.vectorize(math.erf)


def _gelu(x):
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def transformer_numpy(x, g1, be1, wq, wk, wv, wo, g2, be2, w1, w2):
    x, g1, be1, wq, wk, wv, wo, g2, be2, w1, w2 = (
        a.astype(np.float64) for a in (x, g1, be1, wq, wk, wv, wo, g2, be2, w1, w2))
    h = _layer_norm(x, g1, be1)
    q, k, v = h @ wq, h @ wk, h @ wv
    attn = _softmax((q @ k.transpose(0, 2, 1)) * 0.125)
    x1 = x + (attn @ v) @ wo
    ff = _gelu(_layer_norm(x1, g2, be2) @ w1) @ w2
    return x1 + ff


INPUTS = {"mlp": mlp_inputs, "cnn": cnn_inputs,
          "transformer": lambda rng: transformer_inputs(rng, 2)}
NUMPY = {"mlp": mlp_numpy, "cnn": cnn_numpy, "transformer": transformer_numpy}


# ---------------------------------------------------------------------------
# Compiled once per session
# ---------------------------------------------------------------------------

class Compiled:
    def __init__(self, name: str) -> None:
        self.mod = load_example(name)
        self.trace = PassTrace()
        self.exe = phasec.build(self.mod, opt_level=2, instruments=[self.trace])
        self.vm = VirtualMachine(self.exe)


@pytest.fixture(scope="session")
def compiled():
    cache: dict[str, Compiled] = {}

    def get(name: str) -> Compiled:
        if name not in cache:
            cache[name] = Compiled(name)
        return cache[name]

    return get


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------

def test_examples_are_package_data():
    assert set(EXAMPLES) == {"mlp", "cnn", "transformer"}
    for name in EXAMPLES:
        text = example_source(name)
        assert "@I.ir_module" in text and "def main" in text
        assert load_example(name).phase == Phase.INGESTION
    ops = {name: example_source(name) for name in EXAMPLES}
    assert "R.matmul" in ops["mlp"] and "R.nn.relu" in ops["mlp"]
    for op in ("R.nn.conv2d", "R.nn.relu", "pool2d"):
        assert op in ops["cnn"]
    for op in ("R.nn.layer_norm", "R.matmul", "R.nn.softmax", "R.nn.gelu"):
        assert op in ops["transformer"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_matches_interpreter_and_numpy(compiled, name):
    c = compiled(name)
    args = INPUTS[name](np.random.default_rng(0))
    out = c.vm["main"](*args)
    ref = interpret(c.mod, *args)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    assert_close(out, ref)
    assert_close(out, NUMPY[name](*args))
    # The whole default pipeline ran, each pass once, ending in the build phase.
    ran = c.trace.ran()
    assert ran[0] == "Normalize" and ran[-1] == "VMBuiltinLower"
    assert len(ran) == len(set(ran))


@pytest.mark.parametrize("name, max_kernels", [("mlp", 2), ("cnn", 6), ("transformer", 10)])
def test_examples_are_fused(compiled, name, max_kernels):
    # Far fewer kernels than operators: epilogues fused into matmul/conv2d.
    exe = compiled(name).exe
    assert 0 < len(exe.prim_funcs) <= max_kernels
    assert any(k.startswith("fused_") for k in exe.prim_funcs)


def test_transformer_symbolic_batch(compiled):
    c = compiled("transformer")
    param = c.mod["main"].params[0]
    assert "n" in phasec.interp.sinfo_text(param.struct_info)  # the batch is symbolic
    for n in (1, 3):  # one executable, two batch sizes
        args = transformer_inputs(np.random.default_rng(n), n)
        out = c.vm["main"](*args)
        assert out.shape == (n, 128, 64)
        assert_close(out, interpret(c.mod, *args))
        assert_close(out, transformer_numpy(*args))


def test_wrong_input_shape_is_a_clear_error(compiled):
    c = compiled("transformer")
    args = transformer_inputs(np.random.default_rng(0), 1)
    args[0] = args[0][:, :100]  # 100 tokens instead of 128
    with pytest.raises(VMError, match="x"):
        c.vm["main"](*args)
    args = transformer_inputs(np.random.default_rng(0), 1)
    args[1] = args[1].astype("float64")
    with pytest.raises(VMError, match="float"):
        c.vm["main"](*args)


def test_saved_executable_gives_the_same_results(compiled, tmp_path):
    c = compiled("mlp")
    path = tmp_path / "mlp.pvm"
    c.exe.save(path)
    loaded = Executable.load(path)
    assert loaded.function_names() == c.exe.function_names()
    assert sorted(loaded.prim_funcs) == sorted(c.exe.prim_funcs)
    args = mlp_inputs(np.random.default_rng(5))
    np.testing.assert_array_equal(VirtualMachine(loaded)["main"](*args), c.vm["main"](*args))

"""Lowerings with their own form for symbolic dimensions, compiled and run at
several sizes against numpy:

* reshape: a symbolic dimension the reshape keeps never becomes a divisor in
  the kernel (which would cost integer divisions per element: a
  transformer's ``(batch, seq, 64) -> (batch, seq, 4, 16) -> permute`` chain
  ran 18x slower with a symbolic ``seq`` than with a constant one);
* softmax over a symbolic last axis: exp once per element, in the output row.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import phasec
from phasec.backend.vm import VirtualMachine
from phasec.script.printer import print_prim_func

# (input shape, output shape, whether a symbolic dimension may be a divisor)
CASES = [
    ("(b, s, 64)", "(b, s, 4, 16)", False),
    ("(b, s, 4, 16)", "(b, s, 64)", False),
    ("(b, 4, s, 16)", "(b * 4, s, 16)", False),
    ("(b, s, 16)", "(b, s, 4, 2, 2)", False),
    ("(b, s, 1, 6)", "(b, s, 6)", False),
    ("(b, s)", "(b, 1, s, 1)", False),
    ("(1, b, 3, 1)", "(b, 3)", False),
    ("(s, 6)", "(s, 2, 3)", False),
    ("(b, s, 6)", "(b, s * 6)", False),
    ("(b, 6, s)", "(b, 2, 3 * s)", True),   # 6 * s = 2 * (3 * s): a split of a product
    ("(b, s)", "(s, b)", True),             # no cut: the flat index
    ("(2, b, 3)", "(3, b, 2)", True),
]


def _module(in_shape: str, out_shape: str) -> str:
    return f'''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor({in_shape}, "float32")):
        b = T.int64()
        s = T.int64()
        return R.reshape(x, {out_shape})
'''


@pytest.mark.parametrize("case", CASES, ids=[f"{a}->{b}" for a, b, _ in CASES])
def test_symbolic_reshape_matches_numpy(case):
    in_shape, out_shape, may_divide = case
    exe = phasec.build(phasec.parse(_module(in_shape, out_shape)))
    main = VirtualMachine(exe)["main"]
    rng = np.random.default_rng(0)
    for b, s in [(2, 5), (3, 1), (1, 7), (0, 4), (4, 0)]:
        env = {"b": b, "s": s}
        x = rng.standard_normal(eval(in_shape, {}, env)).astype("float32")  # our own strings
        want = x.reshape(eval(out_shape, {}, env))
        got = main(x)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    if not may_divide:
        text = "\n".join(print_prim_func(n, f) for n, f in exe.prim_funcs.items())
        divisors = re.findall(r"(?://|%) \(?([A-Za-z_][\w.]*)", text)
        assert not [d for d in divisors if d in ("b", "s")], text


_SOFTMAX = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("b", 3, "s"), "DTYPE")):
        b = T.int64()
        s = T.int64()
        return R.nn.softmax(x, axis=-1)
"""


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_over_a_symbolic_last_axis_matches_numpy(dtype):
    exe = phasec.build(phasec.parse(_SOFTMAX.replace("DTYPE", dtype)))
    (name, kernel), = exe.prim_funcs.items()
    # once per element: in the loop over whole vectors, and over the rest
    assert print_prim_func(name, kernel).count("T.exp(") == 2
    main = VirtualMachine(exe)["main"]
    rng = np.random.default_rng(1)
    for b, s in [(2, 5), (1, 1), (3, 37), (0, 4), (2, 0), (1, 16), (2, 32)]:
        x = (rng.standard_normal((b, 3, s)) * 20).astype(dtype)
        if b and s > 1:
            x[0, 0, 0] = np.nan            # a NaN makes its row NaN
            x[0, 1, :] = -np.inf           # a row of -inf: 0/0
            x[0, 2, 0] = np.inf            # an inf: exp(inf - inf) is NaN
        with np.errstate(invalid="ignore"):  # inf - inf, -inf - -inf: NaN, as intended
            shifted = x - x.max(axis=-1, keepdims=True) if s else x
            e = np.exp(shifted)
            want = e / e.sum(axis=-1, keepdims=True)
        got = main(x)
        assert got.shape == x.shape and got.dtype == x.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == "float32" else 1e-12,
                                   atol=1e-30)

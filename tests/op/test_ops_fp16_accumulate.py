"""float16 lowering (phasec/op/_lowering.py, linear_algebra.py, statistical.py,
nn/activation.py, nn/attention.py): sums, products, means, matmuls and
attention accumulate in float32 and round once, compiled and run on the VM,
against numpy (which accumulates float16 in float32 too) and float64."""

from __future__ import annotations

import numpy as np

import phasec

_SRC = '''
@I.ir_module
class Module:
    @R.function
    def main(a: R.Tensor((3, 3000), "float16"), b: R.Tensor((3000, 4), "float16"),
             x: R.Tensor((4, 3000), "float16"), q: R.Tensor((1, 5, 2, 8), "float16"),
             k: R.Tensor((1, 7, 2, 8), "float16"), v: R.Tensor((1, 7, 2, 8), "float16")):
        return (R.matmul(a, b), R.sum(x, axis=[1]), R.mean(x, axis=[1]),
                R.prod(R.reshape(x, R.shape([4, 300, 10])), axis=[2]),
                R.nn.softmax(x, axis=1), R.nn.attention(q, k, v, causal_mask="BottomRight"))
'''


def test_float16_accumulates_in_float32():
    rng = np.random.default_rng(0)
    a = rng.uniform(0, 1, (3, 3000)).astype(np.float16)
    b = rng.uniform(0, 1, (3000, 4)).astype(np.float16)
    x = rng.uniform(0.5, 1.5, (4, 3000)).astype(np.float16)
    q, k, v = (rng.normal(size=s).astype(np.float16) for s in ((1, 5, 2, 8), (1, 7, 2, 8),
                                                                (1, 7, 2, 8)))
    out = phasec.VirtualMachine(phasec.build(phasec.parse(_SRC)))["main"](a, b, x, q, k, v)
    mm, s, m, p, sm, att = (np.asarray(o) for o in out)
    # every total here passes 2048, where a float16 accumulator stops counting
    np.testing.assert_array_equal(mm, np.matmul(a, b))
    np.testing.assert_array_equal(s, x.sum(axis=1))
    np.testing.assert_array_equal(m, x.mean(axis=1))
    want_p = np.prod(x.astype(np.float64).reshape(4, 300, 10), axis=2)
    np.testing.assert_allclose(p.astype(np.float64), want_p, rtol=1e-3)  # one rounding
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_array_equal(sm, e / e.sum(axis=1, keepdims=True))
    # attention in float32 throughout, rounded once: within an ulp of float64
    q64, k64, v64 = (t.astype(np.float64) for t in (q, k, v))
    scores = np.einsum("bihd,bjhd->bhij", q64, k64) / np.sqrt(8)
    keep = np.arange(7)[None, :] <= np.arange(5)[:, None] + 2
    scores = np.where(keep, scores, -np.inf)
    w = np.exp(scores - scores.max(-1, keepdims=True))
    want = np.einsum("bhij,bjhd->bihd", w / w.sum(-1, keepdims=True), v64)
    np.testing.assert_allclose(att.astype(np.float64), want, rtol=1e-3, atol=1e-3)
    assert att.dtype == np.float16

"""phasec.testing.shrink: kernels simplified keep their results (numpy), and
dimensions are made small consistently (derived shapes re-inferred)."""

from __future__ import annotations

import numpy as np

from phasec import interp
from phasec.pipeline import lower
from phasec.script.parser import parse
from phasec.testing.shrink import shape_candidates, simplify_kernel

SOURCE = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((1, 3, 8, 8), dtype="float32"), k: R.Tensor((4, 3, 3, 3), dtype="float32"),
             w: R.Tensor((6, 5), dtype="float32")) -> R.Tensor((1, 4, 3, 3), dtype="float32"):
        with R.dataflow():
            c = R.nn.relu(R.nn.conv2d(x, k, strides=[2, 2]))
            R.output(c)
        return c
'''

MATMUL = '''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((5, 6), dtype="float32"), w: R.Tensor((6, 7), dtype="float32")) -> R.Tensor((5, 7), dtype="float32"):
        with R.dataflow():
            y = R.nn.relu(R.matmul(x, w))
            R.output(y)
        return y
'''


def test_simplified_kernels_compute_the_same():
    lowered = lower(parse(MATMUL), 2)
    simple = lowered
    for name, func in lowered.prim_funcs():
        simple = simple.update_func(name, simplify_kernel(func))
    text = simple.script()
    assert "T.sblock(" not in text and "T.vectorized" not in text
    assert len(text.splitlines()) < len(lowered.script().splitlines())
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((5, 6)).astype("float32"), rng.standard_normal((6, 7)).astype("float32")
    np.testing.assert_allclose(interp.run(simple, x, w), np.maximum(x @ w, 0), rtol=1e-5, atol=1e-6)


def test_shape_candidates_shrink_consistently():
    found = {(dim, value): mod for dim, value, mod in shape_candidates(parse(SOURCE))}
    assert {value for _, value in found} <= {1, 2, 3}  # only small values are tried
    # 8 -> 3: the strided convolution's output follows, (3 - 3) // 2 + 1 = 1
    small = found[("8", 3)]
    main = small["main"]
    assert [int(d.value) for d in main.params[0].struct_info.shape] == [1, 3, 3, 3]
    assert [int(d.value) for d in main.ret_struct_info.shape] == [1, 4, 1, 1]
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 3, 3, 3)).astype("float32")
    k = rng.standard_normal((4, 3, 3, 3)).astype("float32")
    got = interp.run(small, x, k, np.zeros((6, 5), "float32"))
    want = np.maximum(np.einsum("chw,ochw->o", x[0], k), 0).reshape(1, 4, 1, 1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # 8 -> 2 leaves the 3x3 kernel larger than its input: not offered
    assert ("8", 2) not in found

"""Attention and loss operators (phasec/op/nn/attention.py, loss.py): inference
(TVM 0.27's results, symbolic and error cases), the references against loop
formulas (helpers/nn_loops.py) and against TVM 0.27 itself (its legalization compiled
with tvm.compile and run on its VM)."""

import math

import numpy as np
import pytest

from phasec.ir import tir
from phasec.op import call_op

from helpers.against_tvm import run_tvm
from helpers.nn_loops import attention_loops
from helpers.op_infer import S, raises, tv
from helpers.op_reference import close, rand, run

n = tir.Var("n")


# ---------------------------------------------------------------------------
# inference
# ---------------------------------------------------------------------------

def test_attention_infer():
    q, k, v = tv("q", (n, 3, 4, 8)), tv("k", (n, 5, 2, 8)), tv("v", (n, 5, 2, 6))
    assert S(call_op("nn.attention", q, k, v)) == 'R.Tensor((n, 3, 4, 6), dtype="float32")'
    assert S(call_op("nn.attention_bias", q, k, v, tv("b", (1, 4, 1, 5)),
                     causal_mask="TopLeft", scale=0.5)) == \
        'R.Tensor((n, 3, 4, 6), dtype="float32")'
    raises(["4 dimensions"], call_op, "nn.attention", tv("q", (3, 4, 8)), k, v)
    raises(["batch sizes of query and key differ: 2 vs 3"], call_op, "nn.attention",
           tv("q", (2, 3, 4, 8)), tv("k", (3, 5, 4, 8)), tv("v", (2, 5, 4, 8)))
    raises(["4 heads are not a multiple of the key's 3"], call_op, "nn.attention",
           tv("q", (1, 3, 4, 8)), tv("k", (1, 5, 3, 8)), tv("v", (1, 5, 4, 8)))
    raises(["sequence lengths of key and value differ"], call_op, "nn.attention", q, k,
           tv("v", (n, 6, 2, 6)))
    raises(["head dims of query and key differ"], call_op, "nn.attention", q,
           tv("k", (n, 5, 2, 7)), v)
    raises(["bias's number of heads 3"], call_op, "nn.attention_bias", q, k, v,
           tv("b", (1, 3, 3, 5)))
    raises(["key length and the bias's last dim"], call_op, "nn.attention_bias", q, k, v,
           tv("b", (1, 4, 3, 4)))
    raises(["expected one of 'TopLeft', 'BottomRight'"], call_op, "nn.attention", q, k, v,
           causal_mask="Top")
    raises(["window_size", "not supported"], call_op, "nn.attention", q, k, v, window_size=2)
    raises(["float"], call_op, "nn.attention", *[tv("x", (1, 2, 2, 2), "int32")] * 3)
    assert S(call_op("nn.attention", tv("q", ndim=4), k, v)) == 'R.Tensor(ndim=4, dtype="float32")'


def test_loss_infer():
    assert S(call_op("nn.cross_entropy_with_logits", tv("x", (n, 4)), tv("y", (n, 4)))) == \
        'R.Tensor((), dtype="float32")'
    raises(["same ndim"], call_op, "nn.cross_entropy_with_logits", tv("x", (2, 4)),
           tv("y", (4,)))
    raises(["differ on axis 1"], call_op, "nn.cross_entropy_with_logits", tv("x", (2, 4)),
           tv("y", (2, 3)))
    p, t = tv("p", (n, 5, 3)), tv("t", (n, 3), "int64")
    assert S(call_op("nn.nll_loss", p, t, reduction="none")) == 'R.Tensor((n, 3), dtype="float32")'
    assert S(call_op("nn.nll_loss", p, t, tv("w", (5,)))) == 'R.Tensor((), dtype="float32")'
    assert S(call_op("nn.nll_loss", tv("p", (5,)), tv("t", (), "int32"), reduction="none")) == \
        'R.Tensor((), dtype="float32")'
    assert S(call_op("nn.nll_loss", tv("p", ndim=3), t, reduction="none")) == \
        'R.Tensor(ndim=2, dtype="float32")'
    raises(["integer targets"], call_op, "nn.nll_loss", p, tv("t", (n, 3)))
    raises(["1 extra dims", "0 after N"], call_op, "nn.nll_loss", p, tv("t", (n,), "int64"))
    raises(["targets' dim 1 is 4"], call_op, "nn.nll_loss", p, tv("t", (n, 4), "int64"))
    raises(["weights have 4 entries", "5 classes"], call_op, "nn.nll_loss", p, t,
           tv("w", (4,)))
    raises(["expected one of 'none', 'sum', 'mean'"], call_op, "nn.nll_loss", p, t,
           reduction="avg")
    raises(["takes at least 2 operands"], call_op, "nn.nll_loss", p)
    raises(["2 or 3 operands"], call_op, "nn.nll_loss", p, t, tv("w", (5,)), tv("w2", (5,)))
    raises(["need a 0-d target"], call_op, "nn.nll_loss", tv("p", (5,)), tv("t", (2,), "int32"))


# ---------------------------------------------------------------------------
# references
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("sq,skv,cm", [(3, 5, None), (3, 5, "TopLeft"), (3, 5, "BottomRight"),
                                       (5, 3, "BottomRight"), (4, 4, "TopLeft")])
def test_attention_reference(sq, skv, cm):
    q, k, v = rand(2, sq, 2, 4), rand(2, skv, 2, 4), rand(2, skv, 2, 3)
    offset = None if cm is None else (0 if cm == "TopLeft" else abs(sq - skv))
    out = run("nn.attention", q, k, v, causal_mask=cm)
    close(out, attention_loops(q, k, v, None, 1 / math.sqrt(4), offset), 1e-4)
    close(out, run_tvm(lambda nn, a, b, c: nn.attention(a, b, c, causal_mask=cm), [q, k, v]),
          1e-5)


def test_attention_bias_and_grouped_heads():
    q, k, v = rand(2, 3, 4, 4), rand(2, 5, 2, 4), rand(2, 5, 1, 3)
    bias = rand(1, 4, 3, 5)
    out = run("nn.attention_bias", q, k, v, bias, scale=0.7, causal_mask="TopLeft")
    close(out, attention_loops(q, k, v, bias, 0.7, 0), 1e-4)
    q, k, v, bias = rand(2, 3, 2, 4), rand(2, 5, 2, 4), rand(2, 5, 2, 3), rand(2, 1, 1, 5)
    close(run("nn.attention_bias", q, k, v, bias),
          run_tvm(lambda nn, a, b, c, d: nn.attention(a, b, c, d), [q, k, v, bias]), 1e-5)


def test_cross_entropy_reference():
    x, y = rand(3, 4), rand(3, 4)
    total = sum(float(a) * float(b) for a, b in zip(x.ravel(), y.ravel()))
    close(run("nn.cross_entropy_with_logits", x, y), -total / 3)
    close(run("nn.cross_entropy_with_logits", x[0], y[0]),
          -sum(float(a) * float(b) for a, b in zip(x[0], y[0])))
    close(run("nn.cross_entropy_with_logits", x, y),
          run_tvm(lambda nn, a, b: nn.cross_entropy_with_logits(a, b), [x, y]))
    xi, yi = np.array([[1, 2], [3, -4]], "int32"), np.array([[1, 1], [1, 1]], "int32")
    np.testing.assert_array_equal(run("nn.cross_entropy_with_logits", xi, yi), -1)  # trunc(-2/2)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_nll_loss_reference(reduction):
    p = rand(3, 4, 2)
    t = np.array([[0, 3], [1, 1], [2, 3]], "int64")
    w = rand(4, lo=0.5, hi=2.0)
    for ignore in (-100, 3):
        for weights in (w, None):
            losses, used = np.zeros((3, 2)), 0.0
            for i in range(3):
                for j in range(2):
                    c = int(t[i, j])
                    wt = 0.0 if c == ignore else (1.0 if weights is None else float(weights[c]))
                    losses[i, j] = -float(p[i, c, j]) * wt
                    used += wt
            expected = {"none": losses, "sum": losses.sum(), "mean": losses.sum() / used}
            args = (p, t) if weights is None else (p, t, weights)
            out = run("nn.nll_loss", *args, reduction=reduction, ignore_index=ignore)
            close(out, expected[reduction])
            close(out, run_tvm(lambda nn, *a: nn.nll_loss(*a, reduction=reduction,
                                                          ignore_index=ignore), list(args)))
    one = run("nn.nll_loss", p[0, :, 0], np.array(2, "int32"), w, reduction=reduction)
    close(one, -p[0, 2, 0] * (1 if reduction == "mean" else w[2]))

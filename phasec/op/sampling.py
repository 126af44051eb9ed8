"""``R.multinomial_from_uniform(prob, uniform_sample, sample_indices, dtype="int64")``
(TVM 0.27): draw one category per row from given uniform samples.

``prob`` is ``[batch, vocab]`` (float), ``uniform_sample`` and
``sample_indices`` are ``[n, 1]``; output ``[n, 1]`` of ``dtype``: for row
``i``, with ``c`` the running sum of ``prob[sample_indices[i, 0]]`` (in the
probabilities' dtype, left to right, as TVM's cumsum), the first ``j`` with
``uniform_sample[i, 0] < c[j]``, or ``vocab - 1`` when there is none (TVM's
generic get_sample_index kernel). ``sample_indices`` is read from data, so it
is bounds-checked (``-batch <= k < batch``, negatives from the end; anything
else is an IndexOutOfRangeError) in the reference and the kernel.
"""

from __future__ import annotations

import numpy as np

from phasec import arith
from phasec import te
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.tir import BinaryOp, IntImm, Select
from phasec.op._common import OpPattern, as_dtype, attrs_of, check_indices, define, err, tensor_arg
from phasec.op.draw import FLOAT, INT, Hooks, const_dim, declares_draw
from phasec.op._lowering import _out, _tensor, legalizes
from phasec.op._tirgen import checked

__all__: list[str] = []


def _infer(call, ctx):
    prob = tensor_arg(call, 0, ctx, "prob")
    usample = tensor_arg(call, 1, ctx, "uniform_sample")
    idx = tensor_arg(call, 2, ctx, "sample_indices")
    dtype = attrs_of(call)["dtype"]
    for s, what, ok in ((prob, "prob", "float"), (usample, "uniform_sample", "float"),
                        (idx, "sample_indices", "int")):
        if s.dtype != "void" and not s.dtype.startswith(ok):
            raise err(call, f"multinomial_from_uniform requires {what} to have {ok} dtype, but "
                            f"it is {s.dtype}")
    if not dtype.startswith(("int", "uint")):
        raise err(call, f"multinomial_from_uniform returns indices: dtype must be an integer "
                        f"type, got {dtype}")
    if -1 in (prob.ndim, usample.ndim, idx.ndim):
        return TensorStructInfo(None, dtype, -1)
    for s, what in ((prob, "prob"), (usample, "uniform_sample"), (idx, "sample_indices")):
        if s.ndim != 2:
            raise err(call, f"multinomial_from_uniform requires {what} to be a 2-D tensor, but "
                            f"it has ndim {s.ndim}")
    if prob.shape is None or usample.shape is None or idx.shape is None:
        return TensorStructInfo(None, dtype, 2)
    n = usample.shape[0]
    if not arith.prove_equal(n, idx.shape[0]):
        raise err(call, "multinomial_from_uniform requires uniform_sample and sample_indices to "
                        "have the same number of rows")
    if arith.const_int(usample.shape[1]) != 1 or arith.const_int(idx.shape[1]) != 1:
        raise err(call, "multinomial_from_uniform requires uniform_sample and sample_indices of "
                        "shape (n, 1)")
    return TensorStructInfo((n, IntImm(1, "int64")), dtype)


def _reference(prob, uniform_sample, sample_indices, dtype="int64"):
    p = np.asarray(prob)
    u = np.asarray(uniform_sample)
    k = np.asarray(sample_indices).astype(np.int64)
    check_indices(k, p.shape[0], "multinomial_from_uniform")
    csum = np.cumsum(p, axis=1, dtype=p.dtype)[k[:, 0]]       # left to right, in p's dtype
    count = (csum <= u.astype(p.dtype)).sum(axis=1, keepdims=True)
    return np.minimum(count, p.shape[1] - 1).astype(dtype)


define("multinomial_from_uniform", ("prob", "uniform_sample", "sample_indices"), _infer,
       attrs={"dtype": ("int64", as_dtype)}, reference=_reference, pattern=OpPattern.OPAQUE,
       doc="The category of each uniform sample in its row's cumulative probabilities.")


@legalizes("multinomial_from_uniform")
def _multinomial_te(call, inputs):
    prob, usample, idx = (_tensor(inputs, k, call) for k in range(3))
    out = _out(call)
    batch, vocab = prob.shape
    dt = prob.dtype
    zero = IntImm(0, "int64")
    rk = te.reduce_axis(vocab, "rk")

    # the running sum, one term at a time (adding zeros past j is exact): TVM's cumsum
    def running(i, j):
        row = checked(idx[i, zero], batch)
        return te.sum(Select(BinaryOp("<=", rk.var, j), prob[row, rk.var], te.const(0, dt)),
                      axis=[rk])
    csum = te.compute((usample.shape[0], vocab), running, name="T_multinomial_cumsum")
    rj = te.reduce_axis(vocab, "rj")

    def count(i, _):
        u = te.cast(usample[i, zero], dt)
        return te.sum(Select(BinaryOp("<=", csum[i, rj.var], u), IntImm(1, "int64"),
                             IntImm(0, "int64")), axis=[rj])
    cnt = te.compute(out.shape, count, name="T_multinomial_count")
    last = arith.simplify(BinaryOp("-", vocab, IntImm(1, "int64")))
    return te.compute(out.shape, lambda i, j: te.cast(BinaryOp("min", cnt[i, j], last),
                                                      out.dtype), name="T_multinomial")


def _draw_accepts(g, x) -> bool:
    # Probabilities: non-negative (a made operand is brought there through
    # exp, OpGen.adapt). With a negative one the running sum is not monotone
    # and the category is not defined: TVM 0.27's kernel then keeps the last
    # j with c[j-1] <= u < c[j] (or writes nothing), phasec counts the c[j] <= u.
    return (x.kind == FLOAT and x.rank == 2 and x.lo >= 0.0
            and all(const_dim(d) is not None for d in x.shape))


def _draw_build(g, x):
    from phasec.op.calls import call_op

    batch, vocab = (const_dim(d) for d in x.shape)
    n = g.integers(1, 4)
    u = g.constant((n, 1), (0.0, 1.0), "float32")
    # rows in range, not from the end: TVM 0.27 does not read negative
    # indices (phasec does, as numpy; the unit tests cover them)
    k = g.int_constant((n, 1), 0, batch - 1)
    call = call_op("relax.multinomial_from_uniform", x.expr, u.expr, k, dtype="int64")
    return g.emit(call, INT, (0.0, float(vocab - 1)))


def _draw_operand(g):
    top = max(g.cfg.max_dim, 2)
    return FLOAT, (g.integers(2, top), g.integers(2, top))


declares_draw("multinomial_from_uniform", Hooks(_draw_build, (FLOAT,), 2, _draw_accepts,
                                                _draw_operand))

"""Legalization cases of nn.lstm, nn.gru and nn.rnn (tests/op/test_ops_nn_rnn.py
checks them further against the ONNX equations)."""

from __future__ import annotations

import numpy as np

from phasec.ir import TensorStructInfo, Var
from phasec.op import call_op


def _v(name, shape, dtype="float32"):
    return Var(name, TensorStructInfo(shape, dtype))


_X = _v("rx", (3, 2, 2))
_LENS = _v("rlens", (2,), "int32")
RNN_VALUES = {_LENS: np.array([3, 1], "int32")}


def _cell(op, gates, d, *, states=1, peephole=False, lens=False, **attrs):
    def make():
        ops = [_X, _v(f"{op}_w{d}", (d, 2 * gates, 2)), _v(f"{op}_r{d}", (d, 2 * gates, 2)),
               _v(f"{op}_b{d}", (d, 4 * gates))]
        ops += [_v(f"{op}_s{d}_{k}", (d, 2, 2)) for k in range(states)]
        if peephole:
            ops.append(_v(f"{op}_p{d}", (d, 6)))
        if lens:
            ops.append(_LENS)
        return call_op(f"nn.{op}", *ops, **attrs)
    return make


RNN_LEGALIZE_CASES = [
    ("lstm-bidirectional", _cell("lstm", 4, 2, states=2, peephole=True, lens=True,
                                 direction="bidirectional", clip=1.0)),
    ("gru-reverse-linear_before_reset", _cell("gru", 3, 1, lens=True, direction="reverse",
                                              linear_before_reset=True)),
    ("rnn", _cell("rnn", 1, 1, activations=("Relu",))),
]

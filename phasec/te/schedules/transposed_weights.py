"""The recurrent layers' weights read transposed, made once per build when
they are constants.

Each step of an LSTM, GRU or RNN multiplies the input ``x`` by ``W`` and
the state ``h`` by ``R`` (``(D, G*H, K)``, ONNX's layout: a gate row's
weights contiguous). As dot products along those rows, each row ends in a
horizontal sum of its partial sums: for ``K = 64`` as many vector
operations as the multiply-adds themselves. Read transposed, a product is
``x[k]`` broadcast times a row of the transpose added into the gates, a
few vectors of gates in registers over the whole ``k`` loop: no horizontal
sums. The transpose is laid out in panels of that many gates (``(D, P, K,
tile)``, zero past the last gate), each read in order: a plain ``(D, K,
G*H)`` read a tile's rows ``4 * G*H`` bytes apart, which for ``H = 256``
all fell in the same few sets of the L1 cache (:mod:`phasec.op.nn._rnn_loop`, which marks
the nests that transpose ``W`` and ``R`` with :data:`INPUT_MARK` and
:data:`RECURRENCE_MARK`). When a weight is a constant of the module,
PackConstantWeights transposes it once (:data:`INPUT_TRANSFORM`,
:data:`RECURRENCE_TRANSFORM`) and the kernel reads the transposed
parameter.
"""

from __future__ import annotations

import numpy as np

from phasec.ir import tir
from phasec.te.operation import i64
from phasec.te.schedules.build_time import (
    WeightPlan, WeightTransform, ir_nodes, statements, static_dims, stored_buffer,
)

__all__ = ["INPUT_MARK", "RECURRENCE_MARK", "INPUT_TRANSFORM", "RECURRENCE_TRANSFORM",
           "transpose_gates"]

#: the keys of the AttrStmts around the nests that write ``W^T`` and ``R^T``
INPUT_MARK = "phasec.input_weight_transposed"
RECURRENCE_MARK = "phasec.recurrence_transposed"


def transpose_gates(m: np.ndarray, tile: int) -> np.ndarray:
    """``M^T`` per direction in panels of ``tile`` gates: ``(D, G*H, K) ->
    (D, ceil(G*H / tile), K, tile)``, zero past the last gate."""
    d, rows, k = m.shape
    panels = -(-rows // tile)
    padded = np.zeros((d, panels * tile, k), m.dtype)
    padded[:, :rows] = m
    return np.ascontiguousarray(padded.reshape(d, panels, tile, k).transpose(0, 1, 3, 2))


def _plan(mark: str):
    def plan(func: tir.PrimFunc) -> WeightPlan | None:
        """The transpose ``func`` marks with ``mark`` (one nest reading one
        parameter of three static dimensions into a buffer of its panels'
        shape), or None."""
        marks = [s for s in statements(func.body) if type(s) is tir.AttrStmt and s.key == mark]
        if len(marks) != 1:
            return None
        params = {id(p): i for i, p in enumerate(func.params) if isinstance(p, tir.Buffer)}
        read = {id(n.buffer) for n in ir_nodes(marks[0].body) if type(n) is tir.BufferLoad}
        target = stored_buffer(marks[0].body)
        if len(read) != 1 or not read <= params.keys() or target is None:
            return None
        index = params[next(iter(read))]
        weight = func.params[index]
        dims, out = static_dims(weight), static_dims(target)
        if (dims is None or len(dims) != 3 or out is None or len(out) != 4
                or out[:3] != [dims[0], -(-dims[1] // out[3]), dims[2]]):
            return None
        transposed = tir.Buffer(weight.name + "_t", target.shape, target.dtype)
        tile = out[3]
        return WeightPlan(index, transposed, mark, lambda _: i64(0), dict(func.attrs or {}),
                          lambda data: transpose_gates(data, tile))
    return plan


#: ``W^T`` and ``R^T`` of constant weights, made at build time
INPUT_TRANSFORM = WeightTransform("input weight transpose", _plan(INPUT_MARK))
RECURRENCE_TRANSFORM = WeightTransform("recurrence weight transpose", _plan(RECURRENCE_MARK))

"""BatchTakenMatmuls: matmuls of one constant weight by rows taken from one
tensor become one matmul of the whole tensor, split into its rows.

A recurrence exported step by step (a PyTorch loop over an ``LSTMCell``,
a Keras RNN unrolled) multiplies each step's input by the same weight::

    x0 = R.take(seq, R.const(0), axis=0)      # seq: [T, ...] (a graph value)
    y0 = R.matmul(x0, W)                      # W: one constant, 2-D
    ...
    x19 = R.take(seq, R.const(19), axis=0)
    y19 = R.matmul(x19, W)

Each step's product reads all of ``W`` for one row (a 4096 x 400 weight is
6.5 MB, beyond the caches: the product runs at memory speed, ~100 us, where
its arithmetic takes ~30). The inputs are all known before the first step,
so this becomes::

    ys = R.matmul(seq, W)                     # one GEMM, W read once
    parts = R.split(ys, 20, axis=0)
    y0 = R.squeeze(parts[0], axis=[0])
    ...

``ys`` and ``parts`` are bound where the first of the products was (``seq``
is bound before it, as the take of that product reads it); each step's row
is bound where its product was. A ``seq`` of rank 3 or more is multiplied
as one matrix of rows (reshaped, then back), the GEMM's rows: a batch of
matrices of one row each would read ``W`` once per step again. The rows
are pieces of a split rather than takes, whose constant index would make
each step's kernel (fused with what follows) a kernel of its own. Taken
only when the products cover at least half of ``seq``'s rows (the GEMM
computes every row), ``seq``'s first dimension is static, each index a
constant within it, and the matmuls keep their own ``out_dtype``. The
values are the same products, summed in the GEMM's order rather than the
vector-matrix one's (float sums may differ in the last bits).

Runs in the optimization phase after FoldConstant (a transposed weight is
then one folded constant, shared by every step) and before FuseOps (each
row's squeeze then fuses with what follows it, a bias's add).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from phasec.ir import (
    Call, Constant, DataflowBlock, DataflowVar, Function, IRModule, Phase,
    TupleGetItem, Var, VarBinding,
)
from phasec.ir.node import replace
from phasec.op.calls import call_op
from phasec.passes._dataflow_blocks import is_op_call, map_dataflow_blocks
from phasec.transform import module_pass, register_pass

__all__ = ["BatchTakenMatmuls"]


@dataclass(frozen=True)
class _Step:
    """One product ``var = matmul(take(seq, index, axis=0), weight)``."""

    position: int  # (of its binding in the block)
    var: Var
    seq: Var
    index: int
    call: Call
    weight: Constant  # (the call's operand, or the constant its variable is bound to)


def _shape(seq: Any) -> tuple[Any, ...] | None:
    """``seq``'s shape (PrimExprs) when it has rank 2 or more and a static
    first dimension (the others may be symbolic)."""
    shape = getattr(seq.struct_info, "shape", None)
    if shape is None or len(shape) < 2 or getattr(shape[0], "value", None) is None:
        return None
    return tuple(shape)


def _constant_index(e: Any) -> int | None:
    if type(e) is not Constant or e.data.ndim != 0 or e.data.dtype.kind not in "iu":
        return None
    return int(e.data)


def _steps(block: DataflowBlock) -> list[_Step]:
    """The block's products of a constant 2-D weight by a row taken by a
    constant index along a tensor's static first dimension."""
    taken: dict[Var, tuple[Var, int]] = {}
    constants: dict[Var, Constant] = {}  # (a folded weight is bound to a variable)
    steps: list[_Step] = []
    for k, b in enumerate(block.bindings):
        if not isinstance(b, VarBinding):
            continue
        v = b.value
        if type(v) is Constant:
            constants[b.var] = v
        if is_op_call(v, "relax.take") and v.attrs.get("axis") == 0 and isinstance(v.args[0], Var):
            shape, index = _shape(v.args[0]), _constant_index(v.args[1])
            if shape is not None and index is not None and 0 <= index < shape[0].value:
                taken[b.var] = (v.args[0], index)
        elif is_op_call(v, "relax.matmul") and v.args[0] in taken:
            weight = constants.get(v.args[1], v.args[1])
            if type(weight) is Constant and weight.data.ndim == 2:
                seq, index = taken[v.args[0]]
                steps.append(_Step(k, b.var, seq, index, v, weight))
    return steps


def _bind(out: list[VarBinding], step: _Step, value: Call | TupleGetItem) -> DataflowVar:
    var = DataflowVar(f"{step.var.name_hint}_steps{len(out)}", value.struct_info)
    out.append(VarBinding(var, value))
    return var


def _batch(block: DataflowBlock) -> DataflowBlock:
    # steps of one tensor, weight and attributes; a weight is one array, or
    # copies of equal contents (the importer may give each step its own)
    alike: dict[tuple[Any, ...], list[list[_Step]]] = defaultdict(list)
    for s in _steps(block):
        w = s.weight.data
        groups = alike[(s.seq, w.shape, w.dtype.str, tuple(sorted(s.call.attrs.items())))]
        for group in groups:
            if group[0].weight.data is w or np.array_equal(group[0].weight.data, w):
                group.append(s)
                break
        else:
            groups.append([s])
    replaced: dict[int, list[VarBinding]] = {}
    for steps in (group for groups in alike.values() for group in groups):
        first = steps[0]
        shape = _shape(first.seq)
        assert shape is not None
        if len({s.index for s in steps}) < max(2, (shape[0].value + 1) // 2):
            continue
        new: list[VarBinding] = []
        replaced[first.position] = new
        weight, (k, n) = first.call.args[1], first.weight.data.shape
        if len(shape) == 2:
            product = _bind(new, first, call_op("matmul", first.seq, weight, **first.call.attrs))
        else:
            # one matrix of every row (the GEMM's rows: a batch of 20 matrices
            # of one row each read the weight 20 times), then the steps' shape
            rows = _bind(new, first, call_op("reshape", first.seq, (-1, k)))
            flat = _bind(new, first, call_op("matmul", rows, weight, **first.call.attrs))
            product = _bind(new, first, call_op("reshape", flat, (*shape[:-1], n)))
        # the steps' rows as pieces of one split, not takes: a take's index
        # is a constant of its kernel, so each step's kernel (fused with what
        # follows) would be another kernel to compile
        pieces = _bind(new, first, call_op("split", product, indices_or_sections=shape[0].value,
                                           axis=0))
        for s in steps:
            out = replaced.setdefault(s.position, [])
            piece = _bind(out, s, TupleGetItem(pieces, s.index))
            out.append(VarBinding(s.var, call_op("squeeze", piece, axis=[0])))
    if not replaced:
        return block
    bindings: list[Any] = []
    for k, b in enumerate(block.bindings):
        bindings.extend(replaced.get(k, [b]))
    return replace(block, bindings=tuple(bindings))


@register_pass
@module_pass(opt_level=1, phases=Phase.OPTIMIZATION, name="BatchTakenMatmuls")
class BatchTakenMatmuls:
    """Run matmuls of one constant weight by rows taken from one tensor as one matmul.

    A step-by-step recurrence's input products become one GEMM (see the
    module docstring)."""

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        return mod.map_functions(
            lambda _, func: map_dataflow_blocks(func, _batch) if isinstance(func, Function)
            else func)

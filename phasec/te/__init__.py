"""Tensor expressions (TE): describe tensor computations, generate TIR kernels.

A small layer in the spirit of TVM's ``tvm.te``::

    n = tir.Var("n")
    A = te.placeholder((n, 4), "float32", "A")
    B = te.compute((n, 4), lambda i, j: te.call("exp", A[i, j]), name="B")
    k = te.reduce_axis(4, "k")
    C = te.compute((n,), lambda i: te.sum(B[i, k], axis=[k]), name="C")
    func = te.create_prim_func([A, C])

Every :class:`Tensor` is produced by a placeholder (a kernel input) or a
``compute`` (one scalar expression per output element, indices are int64
``tir.Var``s). A compute body may be a reduction (``te.sum/max/min/prod``)
at its top level.

:func:`create_prim_func` turns a graph of tensors into one ``PrimFunc``
whose parameters are the input buffers, then the output buffers
(destination-passing style), then scalar int64 shape parameters for the
symbolic dimensions that no input buffer binds as a bare dimension.
This package is a facade: the tensors and their operations are in
:mod:`phasec.te.tensor`, what builds them (``placeholder``, ``compute``,
the scalar helpers) in :mod:`phasec.te.operation`, the lowering (stages,
inlining, attachment, :func:`lower`) in :mod:`phasec.te.lowering`, the loop
nest of each stage in :mod:`phasec.te.emit`, and the CPU schedules, with
the one table that picks them, in :mod:`phasec.te.schedules`; every tile
and block size comes from :class:`phasec.target.tuning.TargetTuning`.

**Inlining versus fusion.** Two different mechanisms put several operators
into one kernel:

* *Inlining* (TVM's ``compute_inline``): an injective compute that is not an
  output (or is marked ``inline=True``) never gets a buffer; each load of it
  is replaced by its defining expression at the loaded indices. A chain of
  elementwise/broadcast/injective operators thus becomes a single expression
  in the consumer's loop nest and touches memory once. Values an expression
  uses several times are bound once with ``LetStmt`` instead of recomputed.
* *Fusion of an anchor with its epilogue*: a reduction (matmul, conv2d, sum,
  a softmax's max...) cannot be inlined, it needs an accumulator. It is
  *materialized*, but when every use of it reads, for each element of a
  consumer's loop nest, one element identified by that nest's outer loop
  indices, it is computed *inside* the consumer's loop nest into a small
  local accumulator right before the consumer uses it (TVM's
  ``compute_at``). A matmul followed by bias-add and relu becomes one nest
  where each output tile is accumulated and then the epilogue applied; a
  softmax over the last axis computes each row's max and sum inside the
  row loop. Materialized tensors that cannot be attached this way get an
  intermediate buffer (``T.alloc_buffer``) and their own loop nest, still in
  the same PrimFunc.
* *An extern storing through its consumer*: a hand-written extern that
  offers a ``store_through`` builder (``te.extern(..., store_through=)``)
  and whose one consumer is elementwise, reading it at the consumer's own
  element (a depthwise convolution's bias and activation), stores each
  value through the consumer's expression into the consumer's buffer: no
  buffer for the extern, no nest for the consumer.

**Schedule hints** (``schedule_hints=True``, the default): the outermost
non-trivial spatial loop is ``parallel`` when it has at least two iterations
and the kernel does at least ``TargetTuning.parallel_min_work`` (32k) scalar
operations; the innermost spatial loop of an elementwise nest is
``vectorized`` when its extent is static; reductions write their init value
before the reduction loops (TVM's ``decompose_reduction``); a long float sum
or product along a contiguous axis accumulates into a vector of partial sums
(32 or 16 lanes, folded at the end), so it vectorizes instead of running as
one latency-bound chain (long: in all its reduction loops, so a global
average pooling's 32 rows of 32 share the lanes); an injective matmul operand that transposes its
input (``permute_dims(w)``) is staged into a buffer so that the matmul's
inner loop stays contiguous; a compute marked ``attrs={ROW_LOCAL: True}``
(softmax's exp) is computed once per row into a local row buffer that its
consumers in the row loop read. Each loop nest then gets the schedule the
table of :mod:`phasec.te.schedules` picks: a matmul or convolution
(``tag="matmul"``, ``"conv2d"``...: a product of a row operand and a column
operand) the blocked, packed GEMM schedule (:mod:`~phasec.te.schedules.gemm`:
register tiles with remainders for every shape, B packed into L2-sized
panels, the epilogue applied to each finished tile); another reduction whose
innermost output axis indexes the innermost dimension of one of its inputs
a row or a tile of rows at a time into a local accumulator, the reduction
loops outside and a contiguous, vectorized innermost loop, then the
epilogue over the same tile (:mod:`~phasec.te.schedules.row_tile`); an
elementwise nest that reads its inputs along its next-to-last axis
(``permute_dims`` swapping the last two axes) four columns at a time
through a row buffer instead of gathers
(:mod:`~phasec.te.schedules.transpose`); any other the plain nest
(:mod:`~phasec.te.schedules.plain`). Sizes come from
:mod:`phasec.target.tuning`. With ``schedule_hints=False`` the kernel is the
canonical form: serial loops, one block per stage with ``T.init()`` for
reductions.
"""

from __future__ import annotations

from phasec.te.lowering import LoweredTE, create_prim_func, lower
from phasec.te.operation import (
    all_of, call, cast, clamp_index, compute, const, eq, extern, fast_max, ge, gt, i64,
    in_range, le, lt, max, max_value, maximum, min, min_value, minimum, ne, placeholder, prod,
    reduce_axis, select, sum,
)
from phasec.te.options import ScheduleOptions
from phasec.te.schedules import conv_pool_stem
from phasec.te.tensor import OWN_NEST, ROW_LOCAL, ExternOp, ProducerLoad, Reduce, TEError, Tensor

__all__ = [
    "Tensor", "ProducerLoad", "Reduce", "TEError", "placeholder", "compute", "reduce_axis",
    "sum", "max", "min", "prod", "fast_max", "create_prim_func", "call", "cast", "select", "const",
    "max_value", "min_value", "ScheduleOptions", "lower", "LoweredTE", "ROW_LOCAL", "OWN_NEST", "extern",
    "ExternOp", "i64", "lt", "le", "gt", "ge", "eq", "ne", "all_of", "in_range", "maximum",
    "minimum", "clamp_index",
]

# the stem's pool lowers its producer (the table cannot import the lowering)
conv_pool_stem.use_lowering(lower)

"""Every built-in operator, registered on import: this is the one list of the
operator families (the registry imports it lazily on first lookup).

The families follow TVM 0.27's ``python/tvm/relax/op`` layout: an operator is
in the module TVM names (``R.take`` in :mod:`.index`, ``R.nn.softmax`` in
:mod:`.nn`); where TVM keeps one large module (``manipulate.py``,
``nn/nn.py``) phasec has a package with one module per family. Each family
module holds its operators whole: registry entry, struct-info inference,
numpy reference, fusion pattern, legalization and draw declaration, side by
side.

* :mod:`.base` -- call_tir, call_tir_inplace, call_tir_with_grad,
  call_dps_packed, call_pure_packed, call_inplace_packed, invoke_pure_closure,
  make_closure, invoke_closure, call_builtin_with_ctx, null_value, shape_of,
  shape_to_tensor, tensor_to_shape, print, assert_op, size, to_vdevice,
  hint_on_device
* :mod:`.binary` -- add, subtract, multiply, divide, floor_divide, power,
  maximum, minimum, the comparisons, logical_and/or/xor, atan2, log_add_exp,
  floor_mod, mod, bitwise_and/or/xor, left_shift, right_shift
* :mod:`.builtin` -- builtin.alloc_tensor, builtin.stop_lift_params
* :mod:`.create` -- zeros, ones, full, zeros_like, ones_like, full_like,
  arange, tril, triu, eye, eye_like, hamming_window
* :mod:`.datatype` -- astype, wrap_param
* :mod:`.decomposition` -- det
* :mod:`.grad` -- grad.no_grad, grad.start_checkpoint, grad.end_checkpoint
* :mod:`.image` -- image.resize2d, image.resize3d (:mod:`.image.resize`);
  image.affine_grid, image.grid_sample (:mod:`.image.grid`); image.onnx_resize
  (:mod:`.image.onnx_resize`)
* :mod:`.index` -- take, strided_slice, dynamic_strided_slice
* :mod:`.linear_algebra` -- matmul, outer, einsum
* :mod:`.manipulate` -- reshape, flatten, permute_dims, expand_dims, squeeze,
  broadcast_to, collapse_sum_like, collapse_sum_to
  (:mod:`.manipulate.reshape`); concat, split, stack, meshgrid
  (:mod:`.manipulate.join`); tile, repeat, flip, reverse_sequence
  (:mod:`.manipulate.tile`); gather_elements, gather_nd, scatter_elements,
  scatter_nd, index_put, index_tensor, slice_scatter, one_hot
  (:mod:`.manipulate.gather_scatter`); layout_transform
  (:mod:`.manipulate.layout_transform`)
* :mod:`.memory` -- memory.alloc_storage, memory.alloc_tensor,
  memory.kill_storage, memory.kill_tensor (:mod:`.memory.memory`);
  memory.view, memory.ensure_zero_offset (:mod:`.memory.view`)
* :mod:`.nn` -- relu, gelu, gelu_tanh, silu, leakyrelu, prelu, selu,
  softplus, softmax, log_softmax (:mod:`.nn.activation`); layer_norm,
  rms_norm, batch_norm, group_norm, instance_norm, dropout (:mod:`.nn.norm`);
  attention, attention_bias (:mod:`.nn.attention`); lstm, gru, rnn, the
  recurrent layers (:mod:`.nn.rnn`);
  cross_entropy_with_logits, nll_loss (:mod:`.nn.loss`); pad, batch_flatten,
  pixel_shuffle (:mod:`.nn.pad`); the convolutions (:mod:`.nn.conv`),
  pooling and onnx_max_pool_indices (:mod:`.nn.pool`); col2im, im2col and im2col_matmul
  (:mod:`.nn.col2im`).
* :mod:`.narrow` -- round_to_format (values of bfloat16, float8 and float4,
  kept in float32: phasec's own)
* :mod:`.qdq` -- quantize, dequantize
* :mod:`.sampling` -- multinomial_from_uniform
* :mod:`.search` -- where, argmax, argmin, bucketize
* :mod:`.set` -- unique, nonzero
* :mod:`.signal` -- signal.dft, signal.stft (phasec's own: TVM has no Fourier
  transforms)
* :mod:`.sorting` -- sort, argsort, topk
* :mod:`.statistical` -- sum, mean, max, min, prod, variance, std, cumsum,
  cumprod, median
* :mod:`.ternary` -- ewise_fma
* :mod:`.unary` -- negative, abs, exp, log, sqrt, rsqrt, tanh, sigmoid, erf,
  the trigonometric and hyperbolic functions, sign, square, floor, ceil,
  round, trunc, logical_not, bitwise_not, isfinite, isinf, isnan, clip; and
  stop_fusion, phasec's fusion barrier, which TVM lacks (it spells it as a
  pure packed call)
* :mod:`.vision` -- vision.onnx_roi_align, vision.onnx_nms (ONNX's RoiAlign and
  NonMaxSuppression, under their own names: TVM's differ)
* :mod:`.vm` -- vm.alloc_storage, vm.alloc_tensor, vm.kill_object,
  vm.call_tir_dyn

What several families share is in helper modules: :mod:`.draw` (how an
operator declares its draws; the fuzzing generator reads it),
:mod:`._elementwise` (the elementwise families), :mod:`._packed` (the
operators lowered to packed functions), and the registry's own
:mod:`._common`, :mod:`._lowering`, :mod:`.infer`.

Conventions shared by all entries:

* ``OpDef.args`` names the Relax operands in order; ``OpDef.attrs`` maps each
  attribute to its default (``REQUIRED`` if none), in the order the printer
  writes them. Attribute values are normalized (by ``call_op`` /
  :func:`phasec.op.normalize_attrs`) to hashable immutable Python values:
  ints, floats, bools, strings, None and tuples of ints (an ``axis`` given as
  an int becomes a 1-tuple where the attribute is a list of axes; ``strides``
  and ``dilation`` become pairs; ``padding`` becomes (top, left, bottom, right)).
* ``OpDef.reference(*operands, **attrs)`` is the exact numpy semantics. The
  caller passes tensors as numpy arrays, shape operands (``R.shape``) as
  tuples of ints, tuple operands (concat's ``tensors``) as sequences of
  arrays, and prim values as numpy scalars of their dtype (plain Python
  scalars are read as int64 / float32 / bool); attributes are the call's
  (normalized) attributes. The result is a numpy array whose dtype and shape
  are exactly the inferred struct info's (float32 in, float32 out), or a
  tuple of arrays for ``split``. Builtins (categories "call", "memory",
  "vm") have no reference.
* ``OpDef.legalize`` reads the op's TE definition, registered beside it with
  :func:`phasec.op._lowering.legalizes`; the drivers that turn calls into
  PrimFuncs are in :mod:`phasec.op.legalize`.
* ``OpDef.draw`` reads how the fuzzing generator calls the op, declared
  beside it with :func:`phasec.op.draw.declares_draw` (a ``Draw``:
  operand dtypes and ranks, a ``build`` drawing the other operands and the
  attributes, the result's interval; an ``Elementwise`` interval rule; or
  ``Hooks`` run on the generator); the generator has no other table.
  Elementwise ops may declare none (the generator then probes their
  reference); a compute op with neither is a test failure until
  it declares one or is listed, with the reason, in
  ``phasec.testing._optable.UNGENERATED``.
"""

from __future__ import annotations

# Each family module registers its operators on import.
from phasec.op import base, binary, builtin, create, datatype, decomposition, grad, index  # noqa: F401
from phasec.op import linear_algebra, narrow, qdq, sampling, search, signal  # noqa: F401
from phasec.op import sorting, statistical  # noqa: F401
from phasec.op import set as set_  # noqa: F401  (the module name shadows the builtin)
from phasec.op import ternary, unary, vision, vm  # noqa: F401
from phasec.op.image import grid, onnx_resize, resize  # noqa: F401
from phasec.op.manipulate import gather_scatter, join, layout_transform, reshape, tile  # noqa: F401
from phasec.op.memory import memory, view  # noqa: F401
from phasec.op.nn import activation, attention, col2im, conv, loss, norm, pad, pool, rnn  # noqa: F401

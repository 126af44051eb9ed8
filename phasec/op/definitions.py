"""Every built-in operator, registered on import.

The definitions are split by family; importing this module imports them all
(the package :mod:`phasec.op` imports it, so importing any operator module
registers them all):

* :mod:`.elementwise` — binary/unary elementwise ops, activations, astype,
  where, clip, stop_fusion
* :mod:`.nn` — softmax, normalizations, conv2d, pooling
* :mod:`.linalg` — matmul and reductions
* :mod:`.manipulate` — shape manipulation and indexing
* :mod:`.creation` — zeros, ones, full, arange, eye...
* :mod:`.builtin` — call_tir and friends, closures, memory and VM builtins
* and the families of issue 13 (:mod:`.elementwise_math`, :mod:`.nn_conv`...)

Each family module holds its operators whole: definition, inference, numpy
reference and legalization side by side.

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
  beside it with :func:`phasec.op._draw.declares_draw` (a ``Draw``:
  operand dtypes and ranks, a ``build`` drawing the other operands and the
  attributes, the result's interval; an ``Elementwise`` interval rule; or
  ``Hooks`` run on the generator); the generator has no other table.
  Elementwise ops may declare none (the generator then probes their
  reference); a compute op with neither is a test failure until
  it declares one or is listed, with the reason, in
  ``phasec.testing._optable.UNGENERATED``.
"""

from __future__ import annotations

from phasec.op import builtin, elementwise, linalg, manipulate, nn  # noqa: F401  (register on import)
from phasec.op import image, nn_act, nn_attention, nn_conv, nn_norm, nn_pool, qdq  # noqa: F401  (register on import)
from phasec.op import creation, elementwise_math, indexing, shape_ops, sorting, statistics  # noqa: F401
from phasec.op import combine, transform  # noqa: F401  (register on import)
from phasec.op import builtin_compute, image_ext, layout_transform, memory_view, sampling  # noqa: F401
from phasec.op import manipulate_draw  # noqa: F401  (the draw declarations of manipulate's operators)
from phasec.op import device, grad  # noqa: F401  (register on import)

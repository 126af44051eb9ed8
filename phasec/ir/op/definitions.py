"""Every built-in operator, registered on import.

The definitions are split by family; importing this module imports them all
(the registry imports it lazily on first lookup):

* :mod:`.elementwise` — binary/unary elementwise ops and activations
* :mod:`.nn` — softmax, normalizations, conv2d, pooling
* :mod:`.linalg` — matmul and reductions
* :mod:`.manipulate` — shape manipulation, indexing, creation
* :mod:`.builtin` — call_tir and friends, closures, memory and VM builtins
"""

from __future__ import annotations

from . import builtin, elementwise, linalg, manipulate, nn  # noqa: F401

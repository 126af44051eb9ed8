"""PrimFuncs compiled with LLVM, run by the reference interpreter.

The interpreter runs kernels in the exact TIR interpreter, which is too slow
for full-size tensors; result validation (``ValidateResults``,
``--validate-each``, ``phasec bisect``) gives it :func:`llvm_kernel_runner`
instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from phasec.backend.llvm import compile_prim_funcs
from phasec.interp import KernelRunner
from phasec.ir import tir

__all__ = ["llvm_kernel_runner"]


def llvm_kernel_runner(check_bounds: bool = True) -> KernelRunner:
    """A ``kernel_runner`` for :func:`phasec.interp.run` that compiles each
    PrimFunc with LLVM once (cached by identity; LLVM's own cache is keyed
    by structure) and calls it in destination-passing style. With
    ``check_bounds`` (the default) a kernel indexing outside a buffer raises
    :class:`~phasec.errors.BufferAccessError` instead of corrupting memory."""
    compiled: dict[int, tuple[tir.PrimFunc, Any]] = {}

    def run(name: str, func: tir.PrimFunc, args: Sequence[Any]) -> None:
        entry = compiled.get(id(func))
        if entry is None or entry[0] is not func:
            lib = compile_prim_funcs({name: func}, check_bounds=check_bounds)
            entry = compiled[id(func)] = (func, lib[name])
        # Compiled kernels take C-contiguous arrays; the interpreter's values
        # need not be (a constant made by broadcasting, a view): run on
        # contiguous copies and write back what the kernel may have written.
        call = [np.ascontiguousarray(a) if isinstance(a, np.ndarray)
                and not a.flags.c_contiguous else a for a in args]
        entry[1](*call)
        for orig, used in zip(args, call):
            if used is not orig and orig.flags.writeable:
                orig[...] = used

    return run

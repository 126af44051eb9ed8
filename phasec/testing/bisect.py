"""Which pass introduced the difference? Bisection over a pipeline.

:func:`bisect_pipeline` runs a pipeline pass by pass (keeping every
intermediate module: modules are immutable, so this is cheap), then finds
the first pass whose result leaves the reference's bounds by bisection, so
a large model runs the interpreter O(log passes) times instead of once per
pass. ``phasec bisect MODEL`` (:mod:`phasec.cli.bisect`) is its command
line: the reference is ONNX Runtime for an ``.onnx`` model, the
interpreter on the module itself otherwise.

:func:`llvm_kernel_runner` makes the interpreter run PrimFuncs compiled
with LLVM (bounds-checked, so a kernel indexing outside a buffer is an
error, not a crash) instead of the exact TIR interpreter, which is too slow
for full-size tensors.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from phasec import interp
from phasec.backend.kernel_runner import llvm_kernel_runner
from phasec.errors import InputError, PhasecError
from phasec.interp import KernelRunner
from phasec.ir import IRModule, Phase, tir
from phasec.pipeline import lower_context, pipeline_for_phase, pipeline_from
from phasec.transform import PassContext, PassInstrument, Tolerance
from phasec.transform.results import (
    Mismatch, as_float64, compare_outputs, copy_value, leaves, rounding_length,
    validation_inputs, widen,
)
from phasec.transform.validate import ROUNDING_PASSES, ResultChange, changed_functions

__all__ = ["llvm_kernel_runner", "Stage", "BisectResult", "run_stages", "bisect_pipeline",
           "Reference", "module_reference"]



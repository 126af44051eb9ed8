"""Model importers: turn a model file from another framework into an
ingestion-phase :class:`~phasec.ir.IRModule` the verifier accepts.

* :mod:`phasec.frontend.onnx` -- ONNX models (``from_onnx``); needs the
  optional ``onnx`` package (``pip install phasec[onnx]``), imported only
  when a model is imported.

Frontends sit in layer 5 (see DESIGN.md): they build modules with the IR
builder and verify them; nothing below imports them.
"""

from __future__ import annotations

from phasec.frontend.errors import FrontendError, UnsupportedModelError

__all__ = ["FrontendError", "UnsupportedModelError"]

"""ONNX Runtime's quantized operators (domain ``com.microsoft``)."""

from __future__ import annotations

__all__: list[str] = []

"""ONNX element types and the phasec dtypes they import as.

Shared by the graph walk (graph inputs, initializers) and the converters
(``Cast``, ``EyeLike``'s ``dtype`` attribute...), below both.
"""

from __future__ import annotations

__all__ = ["ONNX_DTYPES", "onnx_dtype", "type_name"]

#: ONNX TensorProto element type -> phasec dtype (the ones phasec computes with)
ONNX_DTYPES: dict[int, str] = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
}


def onnx_dtype(elem_type: int) -> str | None:
    """The phasec dtype for an ONNX element type, or None when unsupported."""
    return ONNX_DTYPES.get(elem_type)


def type_name(elem_type: int) -> str:
    """The ONNX name of an element type (``FLOAT``, ``STRING``...), for messages."""
    from onnx import TensorProto  # optional dependency: imported when a model is

    try:
        return TensorProto.DataType.Name(elem_type)
    except ValueError:
        return str(elem_type)

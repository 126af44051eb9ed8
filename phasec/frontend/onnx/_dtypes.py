"""ONNX element types and the phasec dtypes they import as.

Shared by the graph walk (graph inputs, initializers) and the converters
(``Cast``, ``EyeLike``'s ``dtype`` attribute...), below both.
"""

from __future__ import annotations

__all__ = ["ONNX_DTYPES", "NARROW_FORMATS", "NARROW_INTS", "onnx_dtype", "narrow_format",
           "carrier", "type_name"]

#: ONNX TensorProto element type -> phasec dtype (the ones phasec computes with)
ONNX_DTYPES: dict[int, str] = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
}


#: ONNX element types phasec holds in a wider dtype (their values exactly):
#: the float ones in float32, as R.round_to_format's formats (casts to them
#: round, casts from them are exact); the integer ones in int8 / uint8
#: (NARROW_INTS: casts to them wrap, as ml_dtypes)
NARROW_FORMATS: dict[int, str] = {
    16: "bfloat16", 17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2",
    20: "float8_e5m2fnuz", 23: "float4_e2m1fn", 24: "float8_e8m0fnu",
    21: "uint4", 22: "int4", 25: "uint2", 26: "int2",
}
#: the integer formats: (bits, signed)
NARROW_INTS: dict[str, tuple[int, bool]] = {
    "uint4": (4, False), "int4": (4, True), "uint2": (2, False), "int2": (2, True),
}


def narrow_format(elem_type: int) -> str | None:
    """The format of an ONNX element type phasec holds in a wider dtype, or None."""
    return NARROW_FORMATS.get(elem_type)


def carrier(fmt: str) -> str:
    """The phasec dtype holding a narrow format's values."""
    if fmt in NARROW_INTS:
        return "int8" if NARROW_INTS[fmt][1] else "uint8"
    return "float32"


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

"""The text of LLVM IR: the LLVM types of TIR dtypes, exact literals, global
names, and :class:`FunctionText`, the lines of one LLVM function being built.

The lowest module of the kernel code generator: it knows LLVM's syntax and
TIR's dtypes, nothing about kernels.
"""

from __future__ import annotations

import re
import struct

import numpy as np

__all__ = ["LLVM_TYPE", "BITS", "FLOAT_SUFFIX", "ICMP", "FCMP", "llvm_type", "mem_type",
           "is_float", "is_intlike", "is_signed", "elem_bytes", "float_literal", "int_literal",
           "sanitize", "quote", "FunctionText"]

#: The LLVM register type of each TIR dtype (bool is ``i1``).
LLVM_TYPE = {
    "bool": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "i8", "uint16": "i16", "uint32": "i32", "uint64": "i64",
    "float16": "half", "float32": "float", "float64": "double",
}
#: The width in bits of each TIR dtype.
BITS = {
    "bool": 1, "int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "uint16": 16,
    "uint32": 32, "uint64": 64, "float16": 16, "float32": 32, "float64": 64,
}
#: The suffix of LLVM's float intrinsics per float dtype (``llvm.exp.f32``).
FLOAT_SUFFIX = {"float16": "f16", "float32": "f32", "float64": "f64"}
#: Integer comparison predicates (``s``/``u`` is prefixed to the ordering ones).
ICMP = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
#: Ordered float comparisons, except "!=", which is true for NaN like numpy's.
FCMP = {"==": "oeq", "!=": "une", "<": "olt", "<=": "ole", ">": "ogt", ">=": "oge"}


def llvm_type(dtype: str) -> str:
    """The LLVM register type of a TIR dtype (bool is ``i1``)."""
    return LLVM_TYPE[dtype]


def mem_type(dtype: str) -> str:
    """The LLVM type of a dtype in memory (a bool is a byte there)."""
    return "i8" if dtype == "bool" else LLVM_TYPE[dtype]


def is_float(dtype: str) -> bool:
    return dtype.startswith("float")


def is_intlike(dtype: str) -> bool:
    """Integer or bool (bool behaves as a one-bit unsigned integer)."""
    return not dtype.startswith("float")


def is_signed(dtype: str) -> bool:
    return dtype.startswith("int")


def elem_bytes(dtype: str) -> int:
    """Bytes per element of a buffer of ``dtype``."""
    return 1 if dtype == "bool" else BITS[dtype] // 8


def float_literal(value: float, dtype: str) -> str:
    """An exactly representable LLVM float constant in hexadecimal form."""
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype == "float16":
            return f"0xH{int(np.float16(value).view(np.uint16)):04X}"
        if dtype == "float32":
            value = float(np.float32(value))
    return f"0x{struct.unpack('<Q', struct.pack('<d', float(value)))[0]:016X}"


def int_literal(value: int, dtype: str) -> str:
    """An LLVM integer constant of ``dtype`` (wrapped to its width)."""
    if dtype == "bool":
        return "true" if value else "false"
    bits = BITS[dtype]
    value &= (1 << bits) - 1
    if value >= 1 << (bits - 1):
        value -= 1 << bits
    return str(value)


def sanitize(name: str) -> str:
    """``name`` as a short LLVM identifier (for value and symbol names)."""
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)[:40]
    return s or "v"


def quote(symbol: str) -> str:
    """An LLVM global name, quoted and escaped."""
    out = []
    for ch in symbol:
        if ch.isalnum() or ch in "._-":
            out.append(ch)
        else:
            out.extend(f"\\{b:02X}" for b in ch.encode("utf-8"))
    return '@"' + "".join(out) + '"'


class FunctionText:
    """The lines of one LLVM function: its header, the ``alloca``s of its
    entry block, its instructions, and fresh value and label names."""

    def __init__(self, header: str) -> None:
        self.header = header
        self.allocas: list[str] = []
        self.lines: list[str] = []
        #: the label of the basic block being emitted
        self.block = "entry"
        self._n = 0

    def tmp(self, hint: str = "t") -> str:
        """A fresh value name (``%hint.N``)."""
        self._n += 1
        return f"%{hint}.{self._n}"

    def label(self, hint: str) -> str:
        """A fresh label name."""
        self._n += 1
        return f"{hint}.{self._n}"

    def emit(self, line: str) -> None:
        """Append one instruction to the current block."""
        self.lines.append("  " + line)

    def start(self, label: str) -> None:
        """Start the basic block ``label``."""
        self.lines.append(f"{label}:")
        self.block = label

    def text(self) -> str:
        return "\n".join([self.header + " {", "entry:", *self.allocas, *self.lines, "}", ""])

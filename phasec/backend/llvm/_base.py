"""Shared pieces of the LLVM code generator: dtype tables, literals, error
codes, the text builder of one LLVM function and iterative TIR traversals.

Split from :mod:`.codegen` so the loop emitters (:mod:`.loops`) can use them
without an import cycle.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from phasec.ir import tir
from phasec.ir.node import Node

# --------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------

_LLVM_TYPE = {
    "bool": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "i8", "uint16": "i16", "uint32": "i32", "uint64": "i64",
    "float16": "half", "float32": "float", "float64": "double",
}
_BITS = {
    "bool": 1, "int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "uint16": 16,
    "uint32": 32, "uint64": 64, "float16": 16, "float32": 32, "float64": 64,
}
_INTRINSIC_SUFFIX = {"float16": "f16", "float32": "f32", "float64": "f64"}
#: LLVM intrinsics implementing unary TIR intrinsics on floats.
_UNARY_FLOAT_INTRINSIC = {
    "exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh", "fabs": "fabs",
    "floor": "floor", "ceil": "ceil", "round": "roundeven", "trunc": "trunc",
    "sin": "sin", "cos": "cos", "exp2": "exp2", "log2": "log2",
}
_ICMP = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
# Ordered float comparisons, except "!=", which is true for NaN like numpy's.
_FCMP = {"==": "oeq", "!=": "une", "<": "olt", "<=": "ole", ">": "ogt", ">=": "oge"}

#: Constant-size temporaries up to this many bytes live on the stack.
ALLOCA_LIMIT = 16 * 1024
#: Error codes returned by kernels. RC_BAD_ARGUMENTS: an entry that checks
#: its arrays (KernelABI.checked) found one it does not accept; nothing ran.
RC_OK, RC_OUT_OF_MEMORY, RC_BAD_ARGUMENTS = 0, 1, 1 << 30
#: a T.checked_index failed; the index and the extent are in OOB_VALUE / OOB_EXTENT
RC_INDEX_OUT_OF_RANGE = 2
OOB_VALUE, OOB_EXTENT = "phasec_oob_value", "phasec_oob_extent"
#: a kernel built with check_bounds made an out-of-bounds buffer access; the
#: index, the extent and the site (buffer_site()) are in OOB_VALUE, OOB_EXTENT, OOB_SITE
RC_BUFFER_OUT_OF_BOUNDS = 8
OOB_SITE = "phasec_oob_site"
#: the kernel stopped at a poll of the cancel flag (Ctrl-C; see ..interrupt and .loops)
RC_CANCELLED = 4
#: the process-wide cancel flag (an i32 the interrupt watcher sets) and how
#: many iterations an innermost loop runs between two looks at it
CANCEL_FLAG = "phasec_rt_cancel"
POLL_EVERY = 1 << 16
#: numpy array flags (NPY_ARRAY_C_CONTIGUOUS, _ALIGNED, _WRITEABLE: numpy's C API).
NPY_C_CONTIGUOUS, NPY_ALIGNED, NPY_WRITEABLE = 0x1, 0x100, 0x400


def llvm_type(dtype: str) -> str:
    """The LLVM register type of a TIR dtype (bool is ``i1``)."""
    return _LLVM_TYPE[dtype]


def _mem_type(dtype: str) -> str:
    return "i8" if dtype == "bool" else _LLVM_TYPE[dtype]


def _is_float(dtype: str) -> bool:
    return dtype.startswith("float")


def _is_intlike(dtype: str) -> bool:
    """Integer or bool (bool behaves as a one-bit unsigned integer)."""
    return not dtype.startswith("float")


def _is_signed(dtype: str) -> bool:
    return dtype.startswith("int")


def _bad_index(buffer: str, dtype: str) -> str:
    kind = "float dtype" if _is_float(dtype) else "dtype"
    return f"index into buffer '{buffer}' has {kind} {dtype}; indices must be integers"


def _elem_bytes(dtype: str) -> int:
    return 1 if dtype == "bool" else _BITS[dtype] // 8


def _float_literal(value: float, dtype: str) -> str:
    """An exactly representable LLVM float constant in hexadecimal form."""
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype == "float16":
            return f"0xH{int(np.float16(value).view(np.uint16)):04X}"
        if dtype == "float32":
            value = float(np.float32(value))
    return f"0x{struct.unpack('<Q', struct.pack('<d', float(value)))[0]:016X}"


def _int_literal(value: int, dtype: str) -> str:
    if dtype == "bool":
        return "true" if value else "false"
    bits = _BITS[dtype]
    value &= (1 << bits) - 1
    if value >= 1 << (bits - 1):
        value -= 1 << bits
    return str(value)


def _sanitize(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)[:40]
    return s or "v"


def _quote(symbol: str) -> str:
    """An LLVM global name, quoted and escaped."""
    out = []
    for ch in symbol:
        if ch.isalnum() or ch in "._-":
            out.append(ch)
        else:
            out.extend(f"\\{b:02X}" for b in ch.encode("utf-8"))
    return '@"' + "".join(out) + '"'


# --------------------------------------------------------------------------
# Generic traversal helpers (iterative)
# --------------------------------------------------------------------------


def _children(n: Any) -> list[Any]:
    out: list[Any] = []
    for f in type(n)._fields:
        v = getattr(n, f)
        if isinstance(v, Node):
            out.append(v)
        elif isinstance(v, tuple):
            for x in v:
                if isinstance(x, Node):
                    out.append(x)
                elif isinstance(x, tuple):  # BufferRegion ranges
                    out.extend(y for y in x if isinstance(y, Node))
    return out


def _walk(root: Node) -> list[Node]:
    """Every node reachable from ``root`` (pre-order, each object once)."""
    seen: set[int] = set()
    order: list[Node] = []
    stack = [root]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        order.append(n)
        kids = _children(n)
        stack.extend(reversed(kids))
    return order




#: Transcendental intrinsics (a polynomial of ~10-20 vector operations, see
#: mathlib, or a libm call) and what each counts for in :func:`_estimate_work`: measured on
#: one AVX-512 core, a store of gelu_tanh's value (one tanh) costs 0.7 ns
#: against ~0.1 ns for a scaled copy.
_MATH_CALLS = frozenset({
    "exp", "exp2", "log", "log2", "tanh", "erf", "sigmoid", "sin", "cos", "tan", "asin", "acos",
    "atan", "atan2", "sinh", "cosh", "asinh", "acosh", "atanh", "fmod"})
_MATH_CALL_WORK = 8


def _math_calls(e: tir.PrimExpr) -> int:
    """Transcendental calls in ``e`` (a node shared in the tree counted once:
    the walk stays linear in the size of the graph)."""
    count = 0
    seen: set[int] = set()
    stack = [e]
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if type(x) is tir.Call and x.name in _MATH_CALLS:
            count += 1
        stack.extend(tir.expr_children(x))
    return count


def _estimate_work(body: tir.Stmt) -> int:
    """Rough count of element stores per iteration of an enclosing loop, a
    transcendental call in a stored or bound value counting for
    ``_MATH_CALL_WORK`` more stores.

    Used to keep small parallel loops serial, to leave a sleeping pool
    worker asleep for a small loop, and to size chunks; symbolic inner
    extents count as 256.
    """
    total = 0
    stack: list[tuple[Any, int]] = [(body, 1)]
    while stack:
        n, mult = stack.pop()
        if isinstance(n, tir.For):
            ext = n.extent.value if isinstance(n.extent, tir.IntImm) else 256
            stack.append((n.body, mult * max(int(ext), 1)))
        elif isinstance(n, tir.BufferStore):
            total += mult * (1 + _MATH_CALL_WORK * _math_calls(n.value))
        elif isinstance(n, tir.SeqStmt):
            stack.extend((s, mult) for s in n.stmts)
        elif isinstance(n, (tir.IfThenElse,)):
            stack.append((n.then_case, mult))
            if n.else_case is not None:
                stack.append((n.else_case, mult))
        elif isinstance(n, tir.LetStmt):
            total += mult * _MATH_CALL_WORK * _math_calls(n.value)
            stack.append((n.body, mult))
        elif isinstance(n, (tir.Allocate, tir.AttrStmt)):
            stack.append((n.body, mult))
        elif isinstance(n, tir.While):  # trips unknown: counted as a loop of 256
            stack.append((n.body, mult * 256))
        elif isinstance(n, tir.Block):
            stack.append((n.body, mult))
            if n.init is not None:
                stack.append((n.init, mult))
    return max(total, 1)


# --------------------------------------------------------------------------
# Function builder: lines of one LLVM function
# --------------------------------------------------------------------------


class _FunctionText:
    def __init__(self, header: str) -> None:
        self.header = header
        self.allocas: list[str] = []
        self.lines: list[str] = []
        self.block = "entry"
        self._n = 0

    def tmp(self, hint: str = "t") -> str:
        self._n += 1
        return f"%{hint}.{self._n}"

    def label(self, hint: str) -> str:
        self._n += 1
        return f"{hint}.{self._n}"

    def emit(self, line: str) -> None:
        self.lines.append("  " + line)

    def start(self, label: str) -> None:
        self.lines.append(f"{label}:")
        self.block = label

    def text(self) -> str:
        return "\n".join([self.header + " {", "entry:", *self.allocas, *self.lines, "}", ""])


@dataclass
class _BufInfo:
    buffer: tir.Buffer
    ptr: str
    dims: list[str]  # i64 operands




def buffers_in_order(func: tir.PrimFunc, body_nodes: list[Node] | None = None
                     ) -> list[tir.Buffer]:
    """Every buffer of ``func`` — its parameters, then the body's in pre-order —
    once each. The same order for structurally equal functions, so a number
    (:func:`buffer_site`) names a buffer across the kernel cache.
    ``body_nodes``: ``_walk(func.body)`` when the caller has it already."""
    seen: set[int] = set()
    out: list[tir.Buffer] = []
    for n in [*func.params, *(_walk(func.body) if body_nodes is None else body_nodes)]:
        if isinstance(n, tir.Buffer) and id(n) not in seen:
            seen.add(id(n))
            out.append(n)
    return out


def buffer_site(ordinal: int, dim: int, write: bool) -> int:
    """The number a bounds-checked access stores in OOB_SITE."""
    return (ordinal << 20) | (min(dim, (1 << 19) - 1) << 1) | int(write)


def decode_buffer_site(site: int) -> tuple[int, int, bool]:
    """(buffer ordinal, dimension, is a write) of :func:`buffer_site`."""
    return site >> 20, (site >> 1) & ((1 << 19) - 1), bool(site & 1)

"""What the parser tests share: the fixture modules by name (and a line in
one), the bindings of a parsed function, and struct info compared the way
inference compares it."""

from __future__ import annotations

import phasec
from phasec.ir import Function, TensorStructInfo
from phasec.ir.struct_info import StructInfo

from helpers.paths import FIXTURES


def load(name: str) -> phasec.IRModule:
    """The fixture module ``tests/fixtures/<name>.py``, parsed."""
    return phasec.load(FIXTURES / f"{name}.py")


def line_of(name: str, needle: str) -> int:
    """1-based line of the first line of fixture ``name`` containing ``needle``."""
    for i, line in enumerate((FIXTURES / f"{name}.py").read_text().splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError(f"{needle!r} not in {name}")


def bindings(func: Function) -> list:
    """The bindings of ``func``'s blocks, in order."""
    return [b for block in func.body.blocks for b in block.bindings]


def binding(func: Function, name: str):
    """The one binding of ``func`` whose variable is ``name``."""
    found = [b for b in bindings(func) if b.var.name_hint == name]
    assert len(found) == 1, f"{name}: {len(found)} bindings"
    return found[0]


def tensor(shape, dtype) -> TensorStructInfo:
    """A tensor struct info."""
    return TensorStructInfo(shape, dtype)


def sinfo_eq(a: StructInfo | None, b: StructInfo | None) -> bool:
    """``a`` and ``b`` are equal struct infos (None: unknown)."""
    from phasec.arith.lattice import struct_info_equal

    return struct_info_equal(a, b)


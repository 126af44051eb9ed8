"""The integer GEMM's AMX microkernel (Intel AMX-INT8 ``tdpbusd``), in LLVM IR.

The GEMM schedule (:mod:`phasec.te.schedules.gemm_amx`) marks a register
tile of 16 or 32 rows x 32 int32 columns whose operands are rows of bytes
(A) and a packed micro-panel of words (B, ``bp[t, kq, c]``: K/4 rows of 32
words of four bytes, the VNNI layout ``tdpbusd`` reads). When the target
has ``+amx-tile,+amx-int8`` (:func:`phasec.target.amx.amx_enabled`; the
JIT's target keeps them only when the OS granted this process the tile
data, :func:`phasec.target.amx.amx_permitted`), the backend replaces the tile's
zeroing and its first ``64 * kb`` bytes of reduction by one call of
``phasec.amx_u8s8.r{rows}``::

    C[rows, 32] (int32, row stride 128 bytes) = sum over kb blocks of 64 bytes
        A[rows, 64] (uint8, row stride lda) x B[16, 32 words] (int8, stride 128)

Each call loads its tile configuration (palette 1: tiles 0-3 the 16 x 16
int32 accumulators, 4-5 A's two 16-row blocks, 6-7 B's two 16-column
halves, all 16 rows of 64 bytes), so no state is kept between calls or
threads. ``tdpbusd`` sums four u8 x s8 products into each int32 lane,
wrapping like ``vpdpbusd``: the same results as ``T.dot4_u8s8``.
"""

from __future__ import annotations

from typing import Any

from phasec.ir import tir
from phasec.target.amx import amx_enabled
from phasec.te.analysis import static_int
from phasec.te.schedules.gemm_amx import (
    AMX_A_ATTR, AMX_B_ATTR, AMX_C_ATTR, AMX_COLS, AMX_ROWS, AMX_SU_ATTR,
)

__all__ = ["AMX_FUNCTION", "amx_function", "emit_amx_tile"]

#: the microkernels' name prefix: ``phasec.amx_u8s8.r16``, ``.r32`` (A's bytes
#: unsigned, B's signed: ``tdpbusd``), ``phasec.amx_s8u8.r16``, ``.r32`` (the
#: other way round, ``tdpbsud``: a GEMM whose rows are the signed operand)
AMX_FUNCTION = "phasec.amx_"
_OPS = {"u8s8": "tdpbusd", "s8u8": "tdpbsud"}

_CFG = "phasec.amx_cfg"
_DECLS = {
    "llvm.x86.ldtilecfg": "declare void @llvm.x86.ldtilecfg(ptr)",
    "llvm.x86.tilezero": "declare void @llvm.x86.tilezero(i8 immarg)",
    "llvm.x86.tileloadd64": "declare void @llvm.x86.tileloadd64(i8 immarg, ptr, i64)",
    **{f"llvm.x86.{op}": f"declare void @llvm.x86.{op}(i8 immarg, i8 immarg, i8 immarg)"
       for op in ("tdpbusd", "tdpbsud")},
    "llvm.x86.tilestored64": "declare void @llvm.x86.tilestored64(i8 immarg, ptr, i64)",
}


def _config(rows: int, signs: str) -> str:
    """Palette 1, eight tiles of 16 rows x 64 bytes (the layout of ldtilecfg's
    64-byte operand: palette, start row, 14 reserved, 16 x i16 bytes per
    row, 16 x i8 rows)."""
    data = [1, 0] + [0] * 14
    colsb = [64] * 8 + [0] * 8
    for c in colsb:
        data += [c & 0xff, c >> 8]
    data += [16] * 8 + [0] * 8
    body = ", ".join(f"i8 {b}" for b in data)
    return f"@{_CFG}.{signs}.r{rows} = internal constant [64 x i8] [{body}], align 64"


def _kernel(rows: int, signs: str) -> str:
    """``phasec.amx_{signs}.r{rows}(ptr c, ptr a, i64 lda, ptr b, i64 kb)``."""
    rt = rows // 16
    acc = [(r, h) for r in range(rt) for h in range(2)]  # tile 2r + h: rows r, columns h
    lines = [
        f"define internal void @{AMX_FUNCTION}{signs}.r{rows}(ptr noalias %c, ptr noalias %a, "
        "i64 %lda, ptr noalias %b, i64 %kb) noinline nounwind {",
        "entry:",
        f"  call void @llvm.x86.ldtilecfg(ptr @{_CFG}.{signs}.r{rows})",
        *(f"  call void @llvm.x86.tilezero(i8 {2 * r + h})" for r, h in acc),
        "  %a16 = mul i64 %lda, 16",
        "  %a1 = getelementptr i8, ptr %a, i64 %a16",
        "  br label %loop",
        "loop:",
        "  %k = phi i64 [0, %entry], [%k1, %loop]",
        "  %ao = mul i64 %k, 64",
        "  %bo = mul i64 %k, 2048",  # 16 rows of 128 bytes a block
        "  %pa0 = getelementptr i8, ptr %a, i64 %ao",
        "  %pb0 = getelementptr i8, ptr %b, i64 %bo",
        "  %pb1 = getelementptr i8, ptr %pb0, i64 64",
        "  %pa1 = getelementptr i8, ptr %a1, i64 %ao",
    ]
    # Each load just before the first product that reads it: tiles are not
    # renamed, so a load waits for the products still reading its tile, and
    # loading all four first made every block wait for the last product of
    # the one before (~10-15% slower in a loop of 32 x 32 x 1024 calls)
    loaded = set()
    for r, h in acc:
        for tile, ptr, stride in ((4 + r, f"%pa{r}", "%lda"), (6 + h, f"%pb{h}", "128")):
            if tile not in loaded:
                loaded.add(tile)
                lines.append(f"  call void @llvm.x86.tileloadd64(i8 {tile}, ptr {ptr}, "
                             f"i64 {stride})")
        lines.append(f"  call void @llvm.x86.{_OPS[signs]}(i8 {2 * r + h}, i8 {4 + r}, "
                     f"i8 {6 + h})")
    lines += [
        "  %k1 = add i64 %k, 1",
        "  %more = icmp ult i64 %k1, %kb",
        "  br i1 %more, label %loop, label %done",
        "done:",
    ]
    for r, h in acc:
        off = r * 16 * 128 + h * 64
        lines += [f"  %pc{r}{h} = getelementptr i8, ptr %c, i64 {off}",
                  f"  call void @llvm.x86.tilestored64(i8 {2 * r + h}, ptr %pc{r}{h}, i64 128)"]
    # (tiles not released: a tilerelease before returning made the QDQ MatMul
    # and convolutions 5-20% slower; a thread switched out saves their 8 KB)
    lines += ["  ret void", "}"]
    return "\n".join(lines)


def amx_function(name: str) -> tuple[str, dict[str, str]]:
    """The IR text of microkernel ``name`` (``phasec.amx_u8s8.r16`` / ``.r32``)
    with its tile configuration, and the declarations it needs. Callers
    must pass ``kb >= 1``."""
    signs, _, rows_text = name[len(AMX_FUNCTION):].partition(".r")
    if (not name.startswith(AMX_FUNCTION) or signs not in _OPS or not rows_text.isdigit()
            or int(rows_text) not in AMX_ROWS):
        raise ValueError(f"no AMX microkernel {name!r}")
    rows = int(rows_text)
    return _config(rows, signs) + "\n" + _kernel(rows, signs), dict(_DECLS)


def _marks(s: Any) -> tuple[int, Any, Any, Any] | None:
    """(kb, C's, A's and B's first element) of an AMX mark
    (:func:`phasec.te.schedules.gemm_amx.amx_mark`), or None when ``s`` is
    not a complete one."""
    keys = (AMX_C_ATTR, AMX_A_ATTR, AMX_B_ATTR)
    at, node = [], s.body
    for key in keys:
        if type(node) is not tir.AttrStmt or node.key != key or type(node.value) is not tir.BufferLoad:
            return None
        at.append(node.value)
        node = node.body
    kb = s.value.value if type(s.value) is tir.IntImm else 0
    return (kb, *at) if kb >= 1 else None


def emit_amx_tile(st: Any, s: Any) -> bool:
    """Emit the microkernel call of the AMX mark ``s`` into ``st``'s kernel
    (a :class:`~phasec.backend.llvm.statements.StatementEmitter`) when the
    target has AMX and the mark's buffers have the shapes the microkernel
    reads; False otherwise (the caller then emits the mark's body, the same
    sums). The first and last element each operand's tiles read are
    bounds-checked like any access (A's rows ``row0 .. row0 + rows - 1``,
    bytes ``0 .. 64 * kb - 1``; B's words ``0 .. 16 * kb - 1``)."""
    parts = _marks(s)
    if parts is None or not amx_enabled(st.ctx.options.features):
        return False
    kb, c, a, b = parts
    rows = static_int(c.buffer.shape[0]) if len(c.buffer.shape) == 2 else None
    if (rows not in AMX_ROWS or static_int(c.buffer.shape[1]) != AMX_COLS
            or c.buffer.dtype != "int32" or b.buffer.dtype != "int32" or len(b.buffer.shape) != 3
            or static_int(b.buffer.shape[2]) != AMX_COLS or a.buffer.dtype not in ("uint8", "int8")
            or len(a.indices) < 2):
        return False
    last_a = (*a.indices[:-2], a.indices[-2] + _i64(rows - 1), _i64(64 * kb - 1))
    last_b = (b.indices[0], b.indices[1] + _i64(16 * kb - 1), b.indices[2] + _i64(AMX_COLS - 1))
    last_c = (c.indices[0] + _i64(rows - 1), c.indices[1] + _i64(AMX_COLS - 1))
    ptrs = []
    for load, last in ((c, last_c), (a, last_a), (b, last_b)):
        for idx in (last, load.indices):
            node = tir.BufferLoad(load.buffer, tuple(idx))
            ops = [st.expressions.emit_expr(i) for i in node.indices]
            info, p = st.access.element_ptr(load.buffer, node.indices, ops, node)
        ptrs.append((p, info))
    signs = "s8u8" if s.key == AMX_SU_ATTR else "u8s8"
    callee = st.ctx.mod.use_math(f"{AMX_FUNCTION}{signs}.r{rows}")
    (pc, _), (pa, a_info), (pb, _) = ptrs
    st.ctx.fn.emit(f"call void {callee}(ptr {pc}, ptr {pa}, i64 {a_info.dims[-1]}, "
                   f"ptr {pb}, i64 {kb})")
    return True


def _i64(v: int) -> Any:
    return tir.IntImm(v, "int64")

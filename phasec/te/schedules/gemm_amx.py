"""The integer GEMM's register tiles on AMX tiles (Intel AMX-INT8).

When the target plans for AMX (:attr:`phasec.target.tuning.TargetTuning.int8_amx`),
an integer GEMM whose B is packed into micro-panels of 32 words and whose A
is read as rows of bytes (``A[..., i, 4*kq + q]``, the unsigned operand of
``T.dot4_u8s8``) gets tiles of 32 rows (16 for 16-31 rows left over; fewer
on ``vpdpbusd``, as before). Such a tile's accumulator zeroing and the
first ``16 * kb`` words of its reduction are marked::

    T.attr({"phasec.amx_tile": kb}):        # 64-byte blocks of K
      T.attr({"phasec.amx_c": acc[0, 0]}):  # [rows, 32] int32
        T.attr({"phasec.amx_a": A[..., row0, 0]}):
          T.attr({"phasec.amx_b": bp[t, 0, 0]}):   # [tiles, K/4, 32] int32
            acc = 0; for kq in 0 .. 16*kb: acc += dot4(A word, bp[t, kq])

and the rest of the reduction (``K % 64`` bytes) follows as ordinary TIR.
The body is the exact semantics: the interpreter and a backend without AMX
run it; the LLVM backend with ``+amx-int8`` calls its microkernel instead
(:mod:`phasec.backend.llvm.amx`), which computes the same int32 sums.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from phasec.arith import simplify, substitute
from phasec.ir import tir
from phasec.ir.tir import AttrStmt, Buffer, BufferLoad, For, IntImm, PrimExpr, Stmt, Var
from phasec.te.analysis import static_int
from phasec.te.operation import i64
from phasec.te.schedules.gemm_operands import is_dot4
from phasec.te.schedules.gemm_prepack import _offset
from phasec.te.stmt import seq
from phasec.te.tensor import post_order

if TYPE_CHECKING:
    from phasec.target.tuning import TargetTuning
    from phasec.te.schedules.gemm import GemmEmitter

__all__ = ["AMX_ATTR", "AMX_SU_ATTR", "AMX_C_ATTR", "AMX_A_ATTR", "AMX_B_ATTR", "AMX_ROWS", "AMX_COLS",
           "plan_rows", "amx_planned", "amx_blocks", "amx_mark", "amx_tile", "rest_rows"]

AMX_ATTR = "phasec.amx_tile"
#: the same with A's bytes signed and B's unsigned (``T.dot4_u8s8(b, a)``:
#: the rows are a convolution's weight, the columns its image)
AMX_SU_ATTR = "phasec.amx_tile_s8u8"
AMX_C_ATTR = "phasec.amx_c"
AMX_A_ATTR = "phasec.amx_a"
AMX_B_ATTR = "phasec.amx_b"
#: the tile rows one AMX call computes (one or two tiles of 16 rows)
AMX_ROWS = (16, 32)
#: a micro-panel's columns (two tiles of 16 int32)
AMX_COLS = 32


def plan_rows(tuning: TargetTuning, rows: int, cols: int) -> int:
    """The rows of a packed integer GEMM plan's register tile: AMX's 32
    where the target has AMX tiles and the columns are one micro-panel of
    :data:`AMX_COLS` (the rows left over are register tiles: :func:`rest_rows`)."""
    return AMX_ROWS[-1] if tuning.int8_amx and cols == AMX_COLS else rows


def amx_planned(em: GemmEmitter) -> bool:
    """Whether the plan's whole tiles are AMX tiles (see the module's doc)."""
    p = em.plan
    return (em.nest.opt.target.int8_amx and is_dot4(em.anchor.expr)
            and p.pack and not p.wide and not p.row_group
            and p.cols == AMX_COLS and len(em.rexts) == 1 and static_int(em.K) is not None)


def rest_rows(em: GemmEmitter, rem: int) -> list[int]:
    """The tiles of ``rem`` rows left after the whole ones: one AMX tile of
    16 when there are that many, then register tiles of at most the
    target's ``gemm_rows`` (a 31-row register tile would spill)."""
    if not (em.plan.rows in AMX_ROWS and amx_planned(em)):
        return [rem] if rem else []
    out = [16] if rem >= 16 else []
    rem -= sum(out)
    step = em.nest.opt.target.gemm_rows
    out += [step] * (rem // step) + ([rem % step] if rem % step else [])
    return out


_Byte = tuple[int | None, BufferLoad, tuple[int | None, int | None] | None]


def _word_bytes(e: PrimExpr, kq: Var) -> list[_Byte] | None:
    """The bytes of ``e`` when it is a word of :func:`.gemm_prepack.byte_word`'s
    form: (shift, the 8-bit load, ``(q, Kc)`` of its ``4*kq + q < Kc``
    select or None) each, or None for any other expression."""
    if type(e) is tir.Call and e.name == "bitwise_or" and len(e.args) == 2:
        parts = [_word_bytes(x, kq) for x in e.args]
        return None if None in parts else [b for part in parts for b in part]
    shift = 0
    if type(e) is tir.Call and e.name == "shift_left" and len(e.args) == 2:
        e, shift = e.args[0], static_int(e.args[1])
    bound = None
    if type(e) is tir.Select:
        c = e.condition
        if type(c) is not tir.BinaryOp or c.op != "<" or static_int(e.false_value) != 0:
            return None
        e, bound = e.true_value, (_offset(c.lhs, kq), static_int(c.rhs))
    if type(e) is not tir.Cast or e.dtype != "int32":
        return None
    e = e.value
    if type(e) is tir.Cast and e.dtype == "uint8":
        e = e.value
    if type(e) is not BufferLoad or e.buffer.dtype not in ("uint8", "int8") or shift is None:
        return None
    return [(shift, e, bound)]


def _a_rows(em: GemmEmitter, row0: PrimExpr) -> tuple[BufferLoad, int] | None:
    """(the address ``A[..., row0, 0]``, the bytes of A's rows the AMX
    tiles may read) when the row operand is exactly the words of bytes
    ``A[..., i, 4*kq + q]`` of an 8-bit buffer (byte ``q`` at bit ``8q``,
    one row of A a row of the tile), else None."""
    anchor, low = em.anchor, em.low
    r, kq = Var("amx_r", "int64"), Var("amx_kq", "int64")
    vmap = dict(zip(anchor.axes, em._anchor_values(r, i64(0))))
    vmap[anchor.raxes[0].var] = kq
    parts = _word_bytes(low.emit_value(em.plan.a_expr, vmap, low.default_load), kq)
    if parts is None or len(parts) != 4 or any(n.buffer is not parts[0][1].buffer
                                                 for _, n, _ in parts):
        return None
    buf = parts[0][1].buffer
    row_bytes = static_int(buf.shape[-1]) if len(buf.shape) >= 2 else None
    if row_bytes is None:
        return None
    ref = first = parts[0][1]
    for shift, n, bound in parts:
        q = _offset(n.indices[-1], kq)
        if q is None or shift != 8 * q or len(n.indices) != len(buf.shape):
            return None
        if bound is not None:  # (bytes past the bound are zero: AMX reads none of them)
            if bound[0] != q or bound[1] is None:
                return None
            row_bytes = min(row_bytes, bound[1])
        if q == 0:
            first = n
        for d, idx in enumerate(n.indices[:-1]):
            rest = simplify(idx - r) if d == len(n.indices) - 2 else idx
            if (any(v is r or v is kq for v in post_order([rest]))
                    or static_int(simplify(idx - ref.indices[d])) != 0):
                return None
    if sorted(_offset(n.indices[-1], kq) for _, n, _ in parts) != [0, 1, 2, 3]:
        return None
    at = tuple(simplify(substitute(i, {r: row0, kq: i64(0)})) for i in first.indices)
    return BufferLoad(buf, at), row_bytes


def amx_blocks(em: GemmEmitter, mr: int, width: int, bp: Buffer | None, row0: PrimExpr
               ) -> tuple[int, BufferLoad] | None:
    """(kb, A's address) when the tile of ``mr`` rows x ``width`` columns
    runs its first ``64 * kb`` bytes of reduction on AMX, else None."""
    if (mr not in AMX_ROWS or width != AMX_COLS or bp is None or not amx_planned(em)
            or static_int(bp.shape[2]) != AMX_COLS):
        return None
    a = _a_rows(em, row0)
    kq = static_int(em.K)
    if a is None or kq is None:
        return None
    kb = min(a[1], 4 * kq) // 64
    return (kb, a[0]) if kb >= 1 else None


def amx_mark(kb: int, acc: Buffer, a: BufferLoad, bp: Buffer, t: PrimExpr, body: Stmt,
             signed_a: bool) -> Stmt:
    """``body`` (the tile's zeroing and first ``16 * kb`` words of reduction)
    marked for the AMX microkernel (``signed_a``: A's bytes are the signed
    operand of ``T.dot4_u8s8``)."""
    zero = i64(0)
    body = AttrStmt(AMX_B_ATTR, BufferLoad(bp, (t, zero, zero)), body)
    body = AttrStmt(AMX_A_ATTR, a, body)
    body = AttrStmt(AMX_C_ATTR, BufferLoad(acc, (zero, zero)), body)
    return AttrStmt(AMX_SU_ATTR if signed_a else AMX_ATTR, IntImm(kb, "int64"), body)


def amx_tile(em: GemmEmitter, amx: tuple[int, BufferLoad], acc: Buffer, bp: Buffer,
             t: PrimExpr, k: Var, init: Stmt, update: Callable[[PrimExpr], Stmt]) -> list[Stmt]:
    """A register tile's zeroing (``init``) and reduction on AMX
    (``amx``: :func:`amx_blocks`'s): the marked first ``16 * kb`` words,
    then the rest of K as ordinary TIR (``update(kq)``: one step of it)."""
    kb, a_at = amx
    parts = [amx_mark(kb, acc, a_at, bp, t, seq([
        init, For(k, i64(0), i64(16 * kb), "serial", update(k))]), em.plan.b_first)]
    rest = static_int(em.K) - 16 * kb
    if rest > 0:
        kt = Var(em.low.names.fresh(k.name + "_t"), "int64")
        parts.append(For(kt, i64(0), i64(rest), "serial", update(kt + i64(16 * kb))))
    return parts

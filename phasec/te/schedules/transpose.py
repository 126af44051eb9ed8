"""The transposing schedule of an elementwise nest whose inputs are read
along its next-to-last axis.

``out[..., i, j] = f(x[..., j, i], ...)`` (a ``permute_dims`` swapping the
last two axes, possibly with elementwise operations fused into it): the
plain nest vectorizes along ``j``, where the input is strided, so every
vector load becomes a gather, one element at a time. Instead, four output
columns at a time::

    for j4 in range(J // 4):
        for i in range(I):            # vectorized: contiguous reads of x
            for m in range(4):        # unrolled
                t[i * 4 + m] = f(x[..., j4 * 4 + m, i])
        for i in range(I):
            for m in range(4):        # vectorized: 16-byte rows of t
                out[..., i, j4 * 4 + m] = t[i * 4 + m]
    the J % 4 remaining columns: for j, i: out[..., i, j] = f(...)

A symbolic ``J`` (``k^T`` over a sequence known at run time) takes the
same passes, their counts computed at run time.

The first loop's four stores interleave into ``t`` with stride 4: LLVM
vectorizes such an interleaved group with shuffles (the in-register
transpose of 4-element groups) instead of gathers; the second copies rows
of four elements. (Eight columns interleave worse: LLVM's shuffles for a
stride of 8 cost more than the gathers.) Measurements: bench/README.md,
"Schedule notes moved from docstrings".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from phasec.ir.tir import (
    Allocate, Buffer, BufferLoad, BufferStore, For, IntImm, IterVar, PrimExpr, Stmt, Var,
)
from phasec.te.analysis import last_index_uses, loads_of, static_int
from phasec.te.operation import i64
from phasec.te.stmt import block, seq

if TYPE_CHECKING:
    from phasec.te.emit import NestEmitter

__all__ = ["TransposeNest", "TRANSPOSE", "schedule", "takes_transpose"]

#: output columns interleaved together
GROUP = 4
#: groups of columns per pass (a row of 32 columns written per pass 2 row)
BLOCK_GROUPS = 8
#: the most bytes of the row buffer (stays in L1)
TMP_BYTES = 32 * 1024
_I64 = "int64"


class TransposeNest:
    """The transposing schedule (stateless: one instance serves every nest)."""

    anchor = None
    vectorizes_last_axis = False

    def outer_loops(self, nest: NestEmitter) -> list[tuple[str, int, PrimExpr]]:
        """The outer axes; :func:`emit_transpose` emits the last two."""
        return [("axis", t, nest.shape[t]) for t in range(nest.m - 2)]

    def emit_inner(self, nest: NestEmitter) -> Stmt:
        return emit_transpose(nest)


TRANSPOSE = TransposeNest()


def schedule(nest: NestEmitter) -> TransposeNest | None:
    """The transposing schedule when it takes ``nest`` (:func:`takes_transpose`)."""
    return TRANSPOSE if takes_transpose(nest) else None


def takes_transpose(nest: NestEmitter) -> bool:
    """Whether ``nest`` (an elementwise root with nothing attached) reads
    its inputs along the next-to-last axis and never along the last: some
    load's innermost index is exactly the next-to-last axis, no load's uses
    the last one. Static I >= 8, J >= GROUP or symbolic, 32-bit elements
    (the interleaving measured)."""
    root, m = nest.root, nest.m
    if (m < 2 or root.is_reduce or nest.attached or not nest.opt.vectorize
            or root.tensor.dtype not in ("float32", "int32", "uint32")):
        return False
    rows, cols = static_int(nest.shape[m - 2]), static_int(nest.shape[m - 1])
    if (rows is None or rows < 8 or (cols is not None and cols < GROUP)
            or _groups_perblock(rows, cols) < 1):
        return False
    ivar, jvar = root.axes[m - 2], root.axes[m - 1]
    loads = loads_of(root.expr)
    if not loads or any(last_index_uses(ld, jvar) for ld in loads):
        return False
    return any(ld.indices and ld.indices[-1] is ivar for ld in loads)


def _groups_perblock(rows: int, cols: int | None) -> int:
    """Groups of four columns transposed per pass: up to BLOCK_GROUPS (and
    the columns' for a static count), the row buffer within TMP_BYTES (0:
    the rows are too long for it)."""
    most = BLOCK_GROUPS if cols is None else min(BLOCK_GROUPS, cols // GROUP)
    return min(most, TMP_BYTES // (rows * GROUP * 4))


def _offset(start: PrimExpr, x: PrimExpr) -> PrimExpr:
    """``start + x`` (just ``x`` when ``start`` is the constant 0)."""
    if isinstance(start, IntImm) and start.value == 0:
        return x
    return start + x


def emit_transpose(nest: NestEmitter) -> Stmt:
    """The last two loops of ``nest`` (inside its outer axis loops) in the
    transposing schedule of the module docstring."""
    low, root, m = nest.low, nest.root, nest.m
    rows, static_cols = static_int(nest.shape[m - 2]), static_int(nest.shape[m - 1])
    assert rows is not None
    cols: PrimExpr | int = nest.shape[m - 1] if static_cols is None else static_cols
    names = low.names
    iname, jname = root.axes[m - 2].name, root.axes[m - 1].name
    per_block = _groups_perblock(rows, static_cols)
    tmp = Buffer(names.fresh(root.name + "_rows"), (i64(per_block * rows * GROUP),),
                 root.tensor.dtype)

    def block_for(i: PrimExpr, j: PrimExpr, extra: list[tuple[str, PrimExpr, Var]]
                  ) -> tuple[list[IterVar], list[IterVar], list[PrimExpr]]:
        """Block variables for the root's axes at (i, j) and ``extra`` ones."""
        nest.axis_expr[root.axes[m - 2]] = i
        nest.axis_expr[root.axes[m - 1]] = j
        ivs = [nest.iter_var(ax.name, ext, "S") for ax, ext in zip(root.axes, nest.shape)]
        xivs = [nest.iter_var(base, ext, "S") for base, ext, _ in extra]
        values = [nest.axis_expr[ax] for ax in root.axes] + [v for _, _, v in extra]
        return ivs, xivs, values

    def value_store(ivs: list[IterVar], buf: Buffer, index: tuple[PrimExpr, ...]) -> Stmt:
        vmap = {ax: iv.var for ax, iv in zip(root.axes, ivs)}
        value = low.emit_value(root.expr, vmap, low.default_load)
        return low.with_lets([value], lambda v: BufferStore(buf, v[0], index))

    def columns(col0: PrimExpr, groups: int | PrimExpr) -> Stmt:
        """Columns [col0, col0 + 4 * groups): both passes."""
        count = i64(groups) if isinstance(groups, int) else groups
        over_groups = "unroll" if isinstance(groups, int) else "serial"
        g, i, mm = (Var(names.fresh(n), _I64) for n in (jname + "_g", iname, jname + "_m"))
        ivs, (gv, mv), values = block_for(i, _offset(col0, g * GROUP + mm),
                                          [(jname + "_g", count, g), (jname + "_m", GROUP, mm)])
        index = (gv.var * rows + ivs[m - 2].var) * GROUP + mv.var
        pack = block(nest.block_name(root.name + "_rows"), ivs + [gv, mv], values,
                      value_store(ivs, tmp, (index,)))
        pass1 = For(g, i64(0), count, "serial",
                    For(i, i64(0), i64(rows), "vectorized",
                        For(mm, i64(0), i64(GROUP), "unroll", pack)))
        g2, i2, m2 = (Var(names.fresh(n), _I64) for n in (jname + "_g", iname, jname + "_m"))
        ivs, (gv, mv), values = block_for(i2, _offset(col0, g2 * GROUP + m2),
                                          [(jname + "_g", count, g2), (jname + "_m", GROUP, m2)])
        index = (gv.var * rows + ivs[m - 2].var) * GROUP + mv.var
        copy = block(nest.block_name(root.name), ivs + [gv, mv], values, BufferStore(
            root.buffer, BufferLoad(tmp, (index,)), tuple(iv.var for iv in ivs)))
        pass2 = For(i2, i64(0), i64(rows), "serial",
                    For(g2, i64(0), count, over_groups,
                        For(m2, i64(0), i64(GROUP), "vectorized", copy)))
        return seq([pass1, pass2])

    stmts: list[Stmt] = []
    # block, group and column counts: static, or computed at run time (a loop
    # may then run 0 times); a static count of 0 emits no loop
    if isinstance(cols, int):
        full, left = divmod(cols // GROUP, per_block)
        full_x, left_x, rest_x = i64(full), left, i64(cols % GROUP)
        done: PrimExpr = i64(cols - cols % GROUP)
    else:
        full_x, left_x, rest_x = cols // GROUP // per_block, cols // GROUP % per_block, \
            cols % GROUP
        done = cols // GROUP * GROUP
    if not (isinstance(full_x, IntImm) and full_x.value == 0):
        jb = Var(names.fresh(jname + "_b"), _I64)
        stmts.append(For(jb, i64(0), full_x, "serial",
                         columns(jb * (per_block * GROUP), per_block)))
    if not isinstance(left_x, int) or left_x:
        stmts.append(columns(full_x * (per_block * GROUP), left_x))
    body: Stmt = Allocate(tmp, seq(stmts))
    if not (isinstance(rest_x, IntImm) and rest_x.value == 0):
        # the last J % 4 columns one element at a time
        j, i = Var(names.fresh(jname), _I64), Var(names.fresh(iname), _I64)
        ivs, _, values = block_for(i, _offset(done, j), [])
        elem = block(nest.block_name(root.name), ivs, values,
                      value_store(ivs, root.buffer, tuple(iv.var for iv in ivs)))
        body = seq([body, For(j, i64(0), rest_x, "serial",
                               For(i, i64(0), i64(rows), "serial", elem))])
    return body

"""The transposing schedule of an elementwise nest whose inputs are read
along its next-to-last axis (used by :mod:`phasec.te.emit`).

``out[..., i, j] = f(x[..., j, i], ...)`` (a ``permute_dims`` swapping the
last two axes, possibly with elementwise operations fused into it): the
plain nest vectorizes along ``j``, where the input is strided, so every
vector load becomes a gather (on this AVX-512 host ~20 cycles per 16
elements: 4 x 128 x 64 in 12-14 us). Instead, four output columns at a
time::

    for j4 in range(J // 4):
        for i in range(I):            # vectorized: contiguous reads of x
            for m in range(4):        # unrolled
                t[i * 4 + m] = f(x[..., j4 * 4 + m, i])
        for i in range(I):
            for m in range(4):        # vectorized: 16-byte rows of t
                out[..., i, j4 * 4 + m] = t[i * 4 + m]
    the J % 4 remaining columns: for j, i: out[..., i, j] = f(...)

The first loop's four stores interleave into ``t`` with stride 4: LLVM
vectorizes such an interleaved group with shuffles (the in-register
transpose of 4-element groups) instead of gathers; the second copies rows
of four elements. Measured on 4 x 128 x 64 float32, one core: 14.1 ->
8.6 us. (Eight columns interleave worse: LLVM's shuffles for a stride of 8
cost more than the gathers.)
"""

from __future__ import annotations

import builtins as _b
from typing import TYPE_CHECKING

from phasec.ir import tir
from phasec.ir.tir import (
    Allocate, Buffer, BufferLoad, BufferStore, For, IntImm, IterVar, PrimExpr, Stmt, Var,
)
from phasec.te import _post_order, _static

if TYPE_CHECKING:
    from phasec.te.emit import _NestEmitter

#: output columns interleaved together
GROUP = 4
#: groups of columns per pass (a row of 32 columns written per pass 2 row)
BLOCK_GROUPS = 8
#: the most bytes of the row buffer (stays in L1)
TMP_BYTES = 32 * 1024
_I64 = "int64"


def _i64(v: int) -> IntImm:
    return IntImm(v, _I64)


def takes_transpose(nest: _NestEmitter) -> bool:
    """Whether ``nest`` (an elementwise root with nothing attached) reads
    its inputs along the next-to-last axis and never along the last: some
    load's innermost index is exactly the next-to-last axis, no load's uses
    the last one. Static I >= 8 and J >= GROUP, 32-bit elements (the
    interleaving measured)."""
    from phasec.te.emit import _last_index_uses, _loads_of

    root, m = nest.root, nest.m
    if (m < 2 or root.is_reduce or nest.attached or not nest.opt.vectorize
            or root.tensor.dtype not in ("float32", "int32", "uint32")):
        return False
    rows, cols = _static(nest.shape[m - 2]), _static(nest.shape[m - 1])
    if (rows is None or cols is None or rows < 8 or cols < GROUP
            or _groups_per_block(rows, cols) < 1):
        return False
    ivar, jvar = root.axes[m - 2], root.axes[m - 1]
    loads = _loads_of(root.expr)
    if not loads or _b.any(_last_index_uses(ld, jvar) for ld in loads):
        return False
    return _b.any(ld.indices and ld.indices[-1] is ivar for ld in loads)


def _groups_per_block(rows: int, cols: int) -> int:
    """Groups of four columns transposed per pass: up to BLOCK_GROUPS, the
    row buffer within TMP_BYTES (0: the rows are too long for it)."""
    return _b.min(BLOCK_GROUPS, cols // GROUP, TMP_BYTES // (rows * GROUP * 4))


def emit_transpose(nest: _NestEmitter) -> Stmt:
    """The last two loops of ``nest`` (inside its outer axis loops) in the
    transposing schedule of the module docstring."""
    from phasec.te.emit import _block, _seq

    low, root, m = nest.low, nest.root, nest.m
    rows, cols = _static(nest.shape[m - 2]), _static(nest.shape[m - 1])
    assert rows is not None and cols is not None
    names = low.names
    iname, jname = root.axes[m - 2].name, root.axes[m - 1].name
    per_block = _groups_per_block(rows, cols)
    tmp = Buffer(names.fresh(root.name + "_rows"), (_i64(per_block * rows * GROUP),),
                 root.tensor.dtype)

    def add(a: PrimExpr, b: PrimExpr) -> PrimExpr:
        if isinstance(a, IntImm) and a.value == 0:
            return b
        return tir.BinaryOp("+", a, b)

    def mul(a: PrimExpr, c: int) -> PrimExpr:
        return tir.BinaryOp("*", a, _i64(c))

    def block_for(i: PrimExpr, j: PrimExpr, extra: list[tuple[str, int, Var]]
                  ) -> tuple[list[IterVar], list[IterVar], list[PrimExpr]]:
        """Block variables for the root's axes at (i, j) and ``extra`` ones."""
        nest.axis_expr[root.axes[m - 2]] = i
        nest.axis_expr[root.axes[m - 1]] = j
        ivs = [nest._iter_var(ax.name, ext, "S") for ax, ext in zip(root.axes, nest.shape)]
        xivs = [nest._iter_var(base, _i64(ext), "S") for base, ext, _ in extra]
        values = [nest.axis_expr[ax] for ax in root.axes] + [v for _, _, v in extra]
        return ivs, xivs, values

    def value_store(ivs: list[IterVar], buf: Buffer, index: tuple[PrimExpr, ...]) -> Stmt:
        vmap = {ax: iv.var for ax, iv in zip(root.axes, ivs)}
        value = low.emit_value(root.expr, vmap, low.default_load)
        return low.with_lets([value], lambda v: BufferStore(buf, v[0], index))

    def columns(col0: PrimExpr, groups: int) -> Stmt:
        """Columns [col0, col0 + 4 * groups): both passes."""
        g, i, mm = (Var(names.fresh(n), _I64) for n in (jname + "_g", iname, jname + "_m"))
        ivs, (gv, mv), values = block_for(i, add(col0, add(mul(g, GROUP), mm)),
                                          [(jname + "_g", groups, g), (jname + "_m", GROUP, mm)])
        index = add(mul(add(mul(gv.var, rows), ivs[m - 2].var), GROUP), mv.var)
        pack = _block(nest._block_name(root.name + "_rows"), ivs + [gv, mv], values,
                      value_store(ivs, tmp, (index,)))
        pass1 = For(g, _i64(0), _i64(groups), "serial",
                    For(i, _i64(0), _i64(rows), "vectorized",
                        For(mm, _i64(0), _i64(GROUP), "unroll", pack)))
        g2, i2, m2 = (Var(names.fresh(n), _I64) for n in (jname + "_g", iname, jname + "_m"))
        ivs, (gv, mv), values = block_for(i2, add(col0, add(mul(g2, GROUP), m2)),
                                          [(jname + "_g", groups, g2), (jname + "_m", GROUP, m2)])
        index = add(mul(add(mul(gv.var, rows), ivs[m - 2].var), GROUP), mv.var)
        copy = _block(nest._block_name(root.name), ivs + [gv, mv], values, BufferStore(
            root.buffer, BufferLoad(tmp, (index,)), tuple(iv.var for iv in ivs)))
        pass2 = For(i2, _i64(0), _i64(rows), "serial",
                    For(g2, _i64(0), _i64(groups), "unroll",
                        For(m2, _i64(0), _i64(GROUP), "vectorized", copy)))
        return _seq([pass1, pass2])

    full, left = divmod(cols // GROUP, per_block)
    stmts: list[Stmt] = []
    if full:
        jb = Var(names.fresh(jname + "_b"), _I64)
        stmts.append(For(jb, _i64(0), _i64(full), "serial",
                         columns(mul(jb, per_block * GROUP), per_block)))
    if left:
        stmts.append(columns(_i64(full * per_block * GROUP), left))
    body: Stmt = Allocate(tmp, _seq(stmts))
    rest = cols % GROUP
    if rest:
        # the last J % 4 columns one element at a time
        j, i = Var(names.fresh(jname), _I64), Var(names.fresh(iname), _I64)
        ivs, _, values = block_for(i, add(_i64(cols - rest), j), [])
        elem = _block(nest._block_name(root.name), ivs, values,
                      value_store(ivs, root.buffer, tuple(iv.var for iv in ivs)))
        body = _seq([body, For(j, _i64(0), _i64(rest), "serial",
                               For(i, _i64(0), _i64(rows), "serial", elem))])
    return body

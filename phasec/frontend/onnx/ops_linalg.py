"""ONNX Einsum and MatMulInteger, as ``matmul`` with reshapes.

Einsum: each operand first sums the indices no one else needs; then two
operands at a time (left to right) become one batched ``matmul``: the
indices both keep are the batch, the ones both share and drop are the
reduction, the others the matrix rows and columns (``permute_dims`` and
``reshape`` around it). ``...`` stands for the leading dimensions. A repeated
index within one operand (``ii``: a diagonal) is taken first, exactly, by a
``take`` of every ``n + 1``-th element of the two axes flattened (``n``
known at import).
"""

from __future__ import annotations

import string

import numpy as np

from phasec.frontend.onnx._context import NodeContext, Unsupported, Value
from phasec.frontend.onnx._registry import converter
from phasec.frontend.onnx.ops_nn import back_to_dtype, in_float32
from phasec.frontend.onnx.ops_tensor import prod_dims

__all__: list[str] = []


def _parse(ctx: NodeContext, equation: str, ranks: list[int]) -> tuple[list[str], str]:
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise Unsupported(f"equation {equation!r} for {len(ranks)} inputs")
    used = set(eq) - {".", ",", "-", ">"}
    spare = [c for c in string.ascii_letters if c not in used]
    ell_rank = max((r - (len(t) - 3) for t, r in zip(terms, ranks) if "..." in t), default=0)
    ell = "".join(spare[:ell_rank])
    out_terms = []
    for t, r in zip(terms, ranks):
        if "..." in t:
            k = r - (len(t) - 3)
            t = t.replace("...", ell[ell_rank - k:])
        if len(t) != r:
            raise Unsupported(f"term {t!r} of equation {equation!r} for a rank-{r} input")
        out_terms.append(t)
    if arrow:
        out = rhs.replace("...", ell)
    else:  # implicit: the ellipsis, then indices used once, alphabetically
        counts: dict[str, int] = {}
        for t in out_terms:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    return out_terms, out


def _diagonals(ctx: NodeContext, x: Value, term: str) -> tuple[Value, str]:
    """``x`` with each index repeated in ``term`` (``ii``: a diagonal) taken
    once: the two axes moved last, flattened, and every ``n + 1``-th element
    taken (exact for every dtype; the index then comes last)."""
    while len(set(term)) != len(term):
        c = next(ch for ch in term if term.count(ch) > 1)
        p = term.index(c)
        q = term.index(c, p + 1)
        n, m = ctx.shape(x)[p], ctx.shape(x)[q]
        if not isinstance(n, int) or n != m:
            raise Unsupported(f"a diagonal of index {c!r} over sizes {n} and {m} (it needs "
                              "equal sizes known at import)")
        rest = [k for k in range(len(term)) if k not in (p, q)]
        if rest + [p, q] != list(range(len(term))):
            x = ctx.emit("permute_dims", x, axes=rest + [p, q])
        dims = ctx.shape(x)
        x = ctx.emit("reshape", x, (*dims[:-2], n * n))
        step = ctx.emit("multiply", ctx.iota(n), np.asarray(n + 1, np.int64))
        x = ctx.emit("take", x, step, axis=len(dims) - 2)
        term = "".join(term[k] for k in rest) + c
    return x, term


def _sum_out(ctx: NodeContext, x: Value, term: str, keep: set[str]) -> tuple[Value, str]:
    axes = [i for i, c in enumerate(term) if c not in keep]
    if not axes:
        return x, term
    return ctx.emit("sum", x, axis=axes), "".join(c for c in term if c in keep)


def _permute(ctx: NodeContext, x: Value, term: str, order: str) -> Value:
    if term == order:
        return x
    return ctx.emit("permute_dims", x, axes=[term.index(c) for c in order])


def _contract(ctx: NodeContext, a: Value, ta: str, b: Value, tb: str, keep: set[str]
              ) -> tuple[Value, str]:
    da = dict(zip(ta, ctx.shape(a)))
    db = dict(zip(tb, ctx.shape(b)))
    batch = "".join(c for c in ta if c in tb and c in keep)
    red = "".join(c for c in ta if c in tb and c not in keep)
    rows = "".join(c for c in ta if c not in tb)
    cols = "".join(c for c in tb if c not in ta)
    for c in batch + red:
        if isinstance(da[c], int) and isinstance(db[c], int) and da[c] != db[c] and 1 not in (
                da[c], db[c]):
            raise Unsupported(f"index {c!r} has sizes {da[c]} and {db[c]}")
        if da[c] != db[c]:
            raise Unsupported(f"index {c!r} broadcast between operands")
    size = {**db, **da}
    a2 = ctx.emit("reshape", _permute(ctx, a, ta, batch + rows + red),
                  (prod_dims([size[c] for c in batch]), prod_dims([size[c] for c in rows]),
                   prod_dims([size[c] for c in red])))
    b2 = ctx.emit("reshape", _permute(ctx, b, tb, batch + red + cols),
                  (prod_dims([size[c] for c in batch]), prod_dims([size[c] for c in red]),
                   prod_dims([size[c] for c in cols])))
    (a2, b2), dtype = in_float32(ctx, [a2, b2])
    y = back_to_dtype(ctx, ctx.emit("matmul", a2, b2), dtype)
    term = batch + rows + cols
    return ctx.emit("reshape", y, tuple(size[c] for c in term)), term


@converter("Einsum", since=12)
def _einsum(ctx: NodeContext) -> Value:
    vals = [ctx.input(i) for i in range(len(ctx.inputs))]
    if ctx.dtype(vals[0]) == "bool":
        raise Unsupported("Einsum of bool tensors")
    terms, out = _parse(ctx, str(ctx.attr("equation")), [ctx.ndim(v) for v in vals])
    if len(set(out)) != len(out):
        raise Unsupported(f"a repeated output index in {out!r}")
    # indices each step must keep: the output's and those of the operands to come
    for i, (v, t) in enumerate(zip(vals, terms)):
        vals[i], terms[i] = _diagonals(ctx, v, t)
    needed_after = [set(out).union(*terms[i + 1:]) for i in range(len(terms))]
    acc, tacc = _sum_out(ctx, vals[0], terms[0], needed_after[0])
    for i in range(1, len(vals)):
        b, tb = _sum_out(ctx, vals[i], terms[i], needed_after[i] | set(tacc))
        acc, tacc = _contract(ctx, acc, tacc, b, tb, needed_after[i])
    acc, tacc = _sum_out(ctx, acc, tacc, set(out))
    return _permute(ctx, acc, tacc, out)


def exact_int_matmul(ctx: NodeContext, a32: Value, b32: Value, *sources: Value) -> Value:
    """The int32 matmul of two int32 operands that came from 8-bit integers
    minus zero points (|a|, |b| <= 255), computed in float64 and cast back:
    every product is below 2^16 and every partial sum of fewer than 2^15
    terms below 2^31, so float64 holds each exactly, no int32 sum wraps, and
    the result is ONNX Runtime's; the float GEMM schedule then runs it
    (phasec has no integer GEMM schedule: the plain nest took 2.2 s for
    ddddocr's 32x1024x8210 product). ``sources`` are the quantized operands
    the two came from; 16-bit ones, or longer sums, keep the int32 matmul."""
    k = ctx.shape(a32)[-1] if ctx.ndim(a32) else 1
    if (not isinstance(k, int) or k >= 1 << 15
            or any(ctx.dtype(v) not in ("int8", "uint8") for v in sources)):
        return ctx.emit("matmul", a32, b32)
    y = ctx.emit("matmul", ctx.emit("astype", a32, dtype="float64"),
                 ctx.emit("astype", b32, dtype="float64"))
    return ctx.emit("astype", y, dtype="int32")


@converter("MatMulInteger", since=10)
def _matmul_integer(ctx: NodeContext) -> Value:
    a, b = ctx.input(0), ctx.input(1)

    def centered(x: Value, zp: Value | None, row_axis: int | None) -> Value:
        x = ctx.emit("astype", x, dtype="int32")
        if zp is None:
            return x
        zp = ctx.emit("astype", zp, dtype="int32")
        if row_axis is not None and ctx.ndim(zp) == 1 and ctx.shape(zp)[0] != 1:
            zp = ctx.emit("reshape", zp, (ctx.shape(zp)[0], 1))  # one per row of A
        return ctx.emit("subtract", x, zp)
    za, zb = ctx.optional(2), ctx.optional(3)
    k = integer_gemm_length(ctx, a, b)
    if k is not None:
        return integer_gemm(ctx, a, b, za, zb, k)
    a32 = centered(a, za, 0)
    b32 = centered(b, zb, None)
    return exact_int_matmul(ctx, a32, b32, a, b)


def integer_gemm_length(ctx: NodeContext, a: Value, b: Value) -> int | None:
    """K when ``a @ b`` can run on the integer GEMM (8-bit operands, B a
    matrix or a batch of them, a static K), else None."""
    k = ctx.shape(a)[-1] if ctx.ndim(a) else None
    if (ctx.dtype(a) in ("uint8", "int8") and ctx.dtype(b) in ("uint8", "int8")
            and ctx.ndim(b) >= 2 and isinstance(k, int)):
        return k
    return None


def integer_gemm(ctx: NodeContext, a: Value, b: Value, za: Value | None, zb: Value | None,
                  k: int) -> Value:
    """``sum_k (a - za)(b - zb)`` through the uint8 x int8 integer GEMM
    (``matmul(..., out_dtype="int32")`` of one uint8 and one int8 operand,
    see phasec/op/linear_algebra.py), zero points not subtracted from the
    operands but corrected after: ``sum ab - za sum b - zb sum a + K za zb``
    (``za`` per tensor or per row of ``a``, ``zb`` per tensor or per column
    of ``b``). Of two int8 operands ``a`` becomes uint8 by adding 128 (its
    zero point too), of two uint8 ones ``b`` int8 by subtracting 128.

    A constant operand (a weight) is shifted and summed at import whatever
    its size (:meth:`NodeContext.weight_transform`: past the fold budget,
    ddddocr's 1024 x 8210 uint8 weight was re-centred, 0.37 ms, and an int32
    copy summed per column on every call)."""
    def as_int32(x: Value) -> Value:
        return ctx.emit("astype", x, dtype="int32")

    def shifted(x: Value, by: int, dtype: str) -> Value:
        with ctx.weight_transform():
            return ctx.emit("astype", ctx.emit("add", as_int32(x), (
                np.array(by, "int32"))), dtype=dtype)

    def sums(x: Value, axis: int) -> Value:
        with ctx.weight_transform():  # (|sum| <= 255 K: int32 for any K the GEMM takes)
            return ctx.emit("sum", as_int32(x), axis=[axis], keepdims=True)

    same = ctx.dtype(a) == ctx.dtype(b)
    a_shift = 128 if same and ctx.dtype(a) == "int8" else 0
    b_shift = -128 if same and ctx.dtype(b) == "uint8" else 0
    if a_shift:
        a = shifted(a, a_shift, "uint8")
    if b_shift:
        b = shifted(b, b_shift, "int8")
    y = ctx.emit("matmul", a, b, out_dtype="int32")

    def zero_point(zp: Value | None, shift: int, per_row: bool) -> Value | None:
        if zp is None and not shift:
            return None
        z = np.array(0, "int32") if zp is None else as_int32(zp)
        if per_row and ctx.ndim(z) == 1 and ctx.shape(z)[0] != 1:
            z = ctx.emit("reshape", z, (ctx.shape(z)[0], 1))  # one per row of A
        if shift:
            z = ctx.emit("add", z, np.array(shift, "int32"))
        return z
    za32 = zero_point(za, a_shift, True)
    zb32 = zero_point(zb, b_shift, False)   # b = b' - b_shift: zb' = zb + b_shift
    if za32 is not None:
        y = ctx.emit("subtract", y, ctx.emit("multiply", za32, sums(b, -2)))
    if zb32 is not None:
        y = ctx.emit("subtract", y, ctx.emit("multiply", zb32, sums(a, -1)))
    if za32 is not None and zb32 is not None:
        y = ctx.emit("add", y, ctx.emit("multiply", ctx.emit(
            "multiply", za32, zb32), np.array(k, "int32")))
    return y


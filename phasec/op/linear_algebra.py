"""Linear algebra (TVM 0.27's ``relax.op.linear_algebra``): matmul, outer, einsum.

* ``matmul(x1, x2, out_dtype="void")`` follows ``numpy.matmul``: 1-D operands
  are promoted (a leading or trailing 1 that is removed from the result) and
  batch dimensions broadcast. With ``out_dtype`` set the operands are
  converted to it before multiplying (so int8 x int8 -> int32 accumulates in
  int32); otherwise both operands need the same dtype.
* ``outer(x1, x2)``: ``x1[i] * x2[j]`` of two 1-D tensors of one dtype.
* ``einsum(operands, subscripts)``: numpy.einsum — explicit (``ij,jk->ik``)
  or implicit output, repeated labels (diagonals, ``ii->i``), and ``...``
  (broadcast batch axes, 1 against anything); one kernel, the contracted
  labels summed in the operands' dtype.
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence
from typing import Any

import numpy as np

from phasec import arith
from phasec.errors import counted
from phasec import te
from phasec.ir import tir
from phasec.ir.expr import Call
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.tir import BinaryOp, PrimExpr
from phasec.op._common import (
    REQUIRED, OpPattern, as_dtype, as_str, attrs_of, binary_dtype, broadcast_dims, define, err,
    tensor_arg,
)
from phasec.op._lowering import Inputs, LegalizeError, _i64, _is_one, _out, _tensor, legalizes
from phasec.op.draw import (
    FLOAT, FLOATS, NUMBERS, VALUE_CAP, Hooks, const_dim, data_like, declares_draw, dim_max,
    dims_equal, iv_ok,
)
from phasec.op.manipulate.join import common_dtype, tensor_list, tuple_of_tensors
from phasec.ir.text import expr_to_str, prim_expr_to_str
from phasec.te import Tensor
from phasec.te.analysis import static_int
from phasec.te.schedules.gemm_prepack import byte_word
from phasec.op.calls import call_op

__all__: list[str] = []


# ---------------------------------------------------------------------------
# matmul
# ---------------------------------------------------------------------------

def _infer_matmul(call, ctx):
    a = tensor_arg(call, 0, ctx)
    b = tensor_arg(call, 1, ctx)
    out_dtype = attrs_of(call)["out_dtype"]
    dtype = out_dtype if out_dtype != "void" else binary_dtype(call, a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise err(call, "matmul does not accept 0-d (scalar) operands; use R.multiply")
    if a.ndim == -1 or b.ndim == -1:
        return TensorStructInfo(None, dtype, -1)
    out_ndim = max(a.ndim, b.ndim, 2) - (a.ndim == 1) - (b.ndim == 1)
    if a.shape is None or b.shape is None:
        return TensorStructInfo(None, dtype, out_ndim)
    ka = a.shape[-1]
    kb = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if arith.prove_not_equal(ka, kb):
        s = prim_expr_to_str
        raise err(call, f"matmul reduction lengths differ: {s(ka)} (last axis of the first "
                        f"operand) vs {s(kb)} ({'first' if b.ndim == 1 else 'second-to-last'} "
                        "axis of the second operand)")
    batch = broadcast_dims(call, a.shape[:-2], b.shape[:-2], ("batch dims of x1", "batch dims of x2"))
    if batch is None:
        return TensorStructInfo(None, dtype, out_ndim)
    dims = list(batch)
    if a.ndim > 1:
        dims.append(a.shape[-2])
    if b.ndim > 1:
        dims.append(b.shape[-1])
    return TensorStructInfo(tuple(dims), dtype)


def _matmul_ref(x1, x2, out_dtype="void"):
    x1, x2 = np.asarray(x1), np.asarray(x2)
    dtype = np.dtype(x1.dtype if out_dtype == "void" else out_dtype)
    # Float products are summed in float64 and rounded once: BLAS's float32
    # kernels sum the edge columns of a matrix in another order than the
    # others, so equal columns could give unequal results (a softmax over
    # large, equal logits then stops being uniform).
    acc = np.float64 if dtype.kind == "f" and dtype.itemsize < 8 else dtype
    return np.asarray(np.matmul(x1.astype(acc), x2.astype(acc))).astype(dtype)


define("matmul", ("x1", "x2"), _infer_matmul, attrs={"out_dtype": ("void", as_dtype)},
       reference=_matmul_ref, pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
       doc="Matrix product with numpy.matmul semantics (1-D operands, batch broadcasting).")


@legalizes("matmul")
def _matmul(call: Call, inputs: Inputs) -> Tensor:
    a, b = _tensor(inputs, 0, call), _tensor(inputs, 1, call)
    out = _out(call)
    # float16 products accumulate in float32 and round once (as ONNX Runtime's
    # and numpy's float16 matmuls do)
    dt = "float32" if out.dtype == "float16" else out.dtype
    a_mat, b_mat = a.ndim > 1, b.ndim > 1
    out_nd = len(out.shape)
    n_batch = out_nd - int(a_mat) - int(b_mat)
    batch_shape = out.shape[:n_batch]

    def batch_index(t: Tensor, i: Sequence[PrimExpr]) -> list[PrimExpr]:
        tb = t.shape[:-2]
        off = n_batch - len(tb)
        return [(_i64(0) if _is_one(tb[d]) and not _is_one(batch_shape[off + d])
                 else i[off + d]) for d in range(len(tb))]

    def a_index(i: Sequence[PrimExpr], k: PrimExpr) -> list[PrimExpr]:
        return (batch_index(a, i[:n_batch]) + [i[n_batch], k]) if a_mat else [k]

    def b_index(i: Sequence[PrimExpr], k: PrimExpr) -> list[PrimExpr]:
        return (batch_index(b, i[:n_batch]) + [k, i[-1]]) if b_mat else [k]

    K = static_int(a.shape[-1])
    if (out.dtype == "int32" and {a.dtype, b.dtype} == {"uint8", "int8"}
            and K is not None and K >= 1):
        # uint8 x int8 (either side): exact int32 sums of T.dot4_u8s8 over
        # words of four bytes of each operand (vpdpbusd with AVX512-VNNI or
        # AVX-VNNI, else an exact vpmaddwd sequence, chosen from the features
        # of the CPU the kernel is compiled for; see
        # phasec/backend/llvm/intdot.py), which the GEMM schedule tiles like
        # a float matmul
        kq = te.reduce_axis(_i64(-(-K // 4)), "kq")

        def words(*i: PrimExpr) -> Any:
            aw = byte_word(a, lambda k: a_index(i, k), K, kq.var)
            bw = byte_word(b, lambda k: b_index(i, k), K, kq.var)
            pair = (aw, bw) if a.dtype == "uint8" else (bw, aw)
            return te.sum(te.call("dot4_u8s8", *pair), axis=[kq])
        return te.compute(out.shape, words, name="T_matmul_u8s8", tag="matmul")
    k = te.reduce_axis(a.shape[-1], "k")

    def body(*i: PrimExpr) -> Any:
        return te.sum(BinaryOp("*", te.cast(a[tuple(a_index(i, k.var))], dt),
                               te.cast(b[tuple(b_index(i, k.var))], dt)), axis=[k])
    if dt == out.dtype:
        return te.compute(out.shape, body, name="T_matmul", tag="matmul")
    wide = te.compute(out.shape, body, name="T_matmul_f32", tag="matmul")
    return te.compute(out.shape, lambda *i: te.cast(wide[i], out.dtype), name="T_matmul")


# ---------------------------------------------------------------------------
# outer
# ---------------------------------------------------------------------------

def _infer_outer(call, ctx):
    a, b = tensor_arg(call, 0, ctx), tensor_arg(call, 1, ctx)
    for k, x in enumerate((a, b)):
        if x.ndim not in (-1, 1):
            raise err(call, f"outer needs 1-D tensors, but {expr_to_str(call.args[k])} has "
                            f"ndim {x.ndim}")
    if "void" not in (a.dtype, b.dtype) and a.dtype != b.dtype:
        raise err(call, f"outer needs two tensors of one dtype, got {a.dtype} and {b.dtype}")
    if a.shape is None or b.shape is None:
        return TensorStructInfo(None, a.dtype, 2)
    return TensorStructInfo((a.shape[0], b.shape[0]), a.dtype)


define("outer", ("x1", "x2"), _infer_outer,
       reference=lambda x1, x2: np.outer(np.asarray(x1), np.asarray(x2)),
       pattern=OpPattern.BROADCAST, doc="The outer product x1[i] * x2[j] of two 1-D tensors.")


@legalizes("outer")
def _outer(call, inputs):
    a, b = _tensor(inputs, 0, call), _tensor(inputs, 1, call)
    out = _out(call)
    return te.compute(out.shape, lambda i, j: BinaryOp("*", a[i], b[j]), name="T_outer")


# ---------------------------------------------------------------------------
# einsum
# ---------------------------------------------------------------------------

_ELL = [chr(0x3B1 + k) for k in range(24)]  # labels for the axes of "..." (alpha, beta...)


class _Spec:
    """A parsed subscripts string, with "..." expanded for the operand ranks."""

    def __init__(self, inputs: list[list[str]], output: list[str]) -> None:
        self.inputs = inputs
        self.output = output
        seen: list[str] = []
        for labels in inputs:
            for c in labels:
                if c not in seen:
                    seen.append(c)
        self.summed = [c for c in seen if c not in output]


def _parse_einsum(subscripts: str, ndims: list[int], fail) -> _Spec:
    text = subscripts.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ndims):
        fail(f"einsum: the subscripts {subscripts!r} name {counted(len(terms), 'operand')}, "
             f"but {len(ndims)} {'was' if len(ndims) == 1 else 'were'} given")
    allowed = set(string.ascii_letters)
    n_ell = 0
    parsed: list[list[str]] = []
    for term, nd in zip(terms, ndims):
        if term.count("...") > 1 or any(c not in allowed for c in term.replace("...", "")):
            fail(f"einsum: bad term {term!r} in {subscripts!r} (letters and one '...')")
        letters = term.replace("...", "")
        if "..." in term:
            k = nd - len(letters)
            if k < 0:
                fail(f"einsum: term {term!r} has more labels than its operand's {nd} axes")
            n_ell = max(n_ell, k)
            head, _, tail = term.partition("...")
            parsed.append(list(head) + _ELL[len(_ELL) - k:] + list(tail) if k else
                          list(head) + list(tail))
        else:
            if len(letters) != nd:
                fail(f"einsum: term {term!r} has {len(letters)} labels but its operand has "
                     f"{nd} axes")
            parsed.append(list(letters))
    ell = _ELL[len(_ELL) - n_ell:] if n_ell else []
    if arrow:
        if rhs.count("...") > 1 or any(c not in allowed for c in rhs.replace("...", "")):
            fail(f"einsum: bad output {rhs!r} in {subscripts!r}")
        head, dots, tail = rhs.partition("...")
        out = list(head) + (ell if dots else []) + list(tail)
        if not dots and ell:
            fail(f"einsum: the output {rhs!r} must keep the '...' axes")
        inputs_labels = {c for p in parsed for c in p}
        for c in out:
            if c not in inputs_labels:
                fail(f"einsum: output label {c!r} does not appear in the inputs")
        if len(set(out)) != len(out):
            fail(f"einsum: output {rhs!r} repeats a label")
    else:
        counts: dict[str, int] = {}
        for p in parsed:
            for c in p:
                if c not in ell:
                    counts[c] = counts.get(c, 0) + 1
        out = ell + sorted(c for c, n in counts.items() if n == 1)
    return _Spec(parsed, out)


def _label_dims(spec: _Spec, shapes, fail) -> dict[str, PrimExpr]:
    dims: dict[str, PrimExpr] = {}
    for labels, shape in zip(spec.inputs, shapes):
        for c, d in zip(labels, shape):
            prev = dims.get(c)
            if prev is None or (c in _ELL and arith.const_int(prev) == 1):
                dims[c] = d
            elif arith.const_int(d) == 1 and c in _ELL:
                continue  # a "..." axis of size 1 broadcasts
            elif arith.prove_not_equal(prev, d):
                fail(f"einsum: label {c!r} has sizes {prim_expr_to_str(prev)} and "
                     f"{prim_expr_to_str(d)}")
    return dims


def _infer_einsum(call, ctx):
    fields = tuple_of_tensors(call, ctx, "einsum")
    dtype = common_dtype(fields)
    subs = attrs_of(call)["subscripts"]

    def fail(msg):
        raise err(call, msg)
    if any(f.ndim == -1 for f in fields):
        return TensorStructInfo(None, dtype, -1)
    spec = _parse_einsum(subs, [f.ndim for f in fields], fail)
    if any(f.shape is None for f in fields):
        return TensorStructInfo(None, dtype, len(spec.output))
    dims = _label_dims(spec, [f.shape for f in fields], fail)
    return TensorStructInfo(tuple(dims[c] for c in spec.output), dtype)


define("einsum", ("operands",), _infer_einsum, attrs={"subscripts": (REQUIRED, as_str)},
       reference=lambda operands, subscripts: np.asarray(np.einsum(
           subscripts, *[np.asarray(o) for o in operands])).astype(np.asarray(operands[0]).dtype),
       pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
       doc="numpy.einsum over a tuple of tensors (explicit or implicit output, '...').")


@legalizes("einsum")
def _einsum(call, inputs):
    ts = tensor_list(inputs, call)
    out = _out(call)

    def fail(msg):
        raise LegalizeError(msg)
    spec = _parse_einsum(attrs_of(call)["subscripts"], [t.ndim for t in ts], fail)
    dims = _label_dims(spec, [t.shape for t in ts], fail)
    raxes = {c: te.reduce_axis(dims[c], f"k_{ord(c)}") for c in spec.summed}

    def body(*i):
        var = dict(zip(spec.output, i))
        var.update({c: r.var for c, r in raxes.items()})
        prod = None
        for t, labels in zip(ts, spec.inputs):
            ind = []
            for c, d in zip(labels, t.shape):
                # a broadcast "..." axis of size 1 against a longer one
                ind.append(tir.IntImm(0) if arith.const_int(d) == 1 and
                           arith.const_int(dims[c]) != 1 else var[c])
            load = t[tuple(ind)]
            prod = load if prod is None else BinaryOp("*", prod, load)
        return te.sum(prod, axis=list(raxes.values())) if raxes else prod
    return te.compute(out.shape, body, name="T_einsum", tag="einsum")


# ---------------------------------------------------------------------------
# How the fuzzing generator draws them (phasec.testing; matmul: phasec.op.draw.Hooks)
# ---------------------------------------------------------------------------

def _matmul_iv(x, y, max_dim):
    bound = dim_max(x.shape[-1], max_dim) * x.mag * y.mag
    return -bound, bound


def _matmul_ok(x, y, max_dim) -> bool:
    if y.kind != FLOAT or y.rank not in (1, 2) or x.rank + y.rank < 2:
        return False
    if x.rank == 1 and y.rank == 1:
        return False  # a 0-d dot product: fine, but keep shapes simple
    return dims_equal(x.shape[-1], y.shape[0]) and iv_ok(_matmul_iv(x, y, max_dim))


def _matmul_accepts(g, x) -> bool:
    if x.kind != FLOAT or x.rank < 1:
        return False
    k = const_dim(x.shape[-1])
    return (k is not None and g.cfg.constants
            and dim_max(x.shape[-1], g.cfg.max_dim) * x.mag * 1.0 <= VALUE_CAP)


def _matmul_build(g, x):

    cands = g.visible(lambda v: _matmul_ok(x, v, g.cfg.max_dim))
    cands.append("const")
    y = g.pick(cands)
    if y == "const":  # the second operand: a value in scope, or a weight
        m = g.pick(list(range(1, g.cfg.max_dim + 1)))
        y = g.constant((const_dim(x.shape[-1]), m), (-1.0, 1.0), "float32")
    return g.emit(call_op("relax.matmul", x.expr, y.expr), FLOAT, _matmul_iv(x, y, g.cfg.max_dim))


declares_draw("matmul", Hooks(_matmul_build, (FLOAT,), 1, _matmul_accepts, order=10))


def _draw_outer(ctx):
    y = data_like(ctx, (ctx.integers(1, 4),))
    bound = ctx.mag * max(abs(float(y.min())), abs(float(y.max())))
    ctx.result_in(-bound, bound)
    return (ctx.x, y), {}


def _draw_einsum(ctx):
    rank = len(ctx.shape)
    letters = "abcd"[:rank]
    choices = [f"{letters}->{letters[::-1]}", f"{letters}->"]
    if rank >= 2 and ctx.shape[-1] == ctx.shape[-2]:
        choices.append(f"{letters[:-1]}{letters[-2]}->{letters[:-1]}")  # a diagonal
    subscripts = ctx.choose(choices)
    operands = [ctx.x]
    if ctx.choose([False, True]):  # contract the last axis with a matrix
        m = ctx.integers(1, 3)
        w = ctx.const((ctx.shape[-1], m), -1.0, 1.0, ctx.dtype)
        subscripts = f"{letters},{letters[-1]}z->{letters[:-1]}z"
        operands.append(w)
        bound = ctx.shape[-1] * ctx.mag
    elif subscripts.endswith("->"):
        bound = math.prod(ctx.shape) * ctx.mag
    else:
        bound = ctx.mag
    ctx.result_in(-bound, bound)
    return (operands,), {"subscripts": subscripts}


declares_draw("outer", dtypes=NUMBERS, ranks=(1,), build=_draw_outer)
declares_draw("einsum", dtypes=FLOATS, build=_draw_einsum)

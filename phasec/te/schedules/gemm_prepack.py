"""The GEMM schedule's constant weights packed at build time, and the
integer GEMM's words of four bytes.

A packing nest of :mod:`phasec.te.schedules.gemm` that copies a constant B
into micro-panels is marked (``PACK_MARK``) and declared on its PrimFunc;
PackConstantWeights then computes the panels once, with numpy
(:func:`pack_weight`), and the kernel reads them as a parameter. The
integer GEMM reads B as int32 words of four 8-bit values along the
reduction (:func:`byte_word`, the one expression of them, which
:func:`word_parameter` recognizes): its panels are packed from
:func:`byte_words` of the constant, so the bytes are regrouped once per
build, not on every call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from phasec.arith import simplify
from phasec.ir import tir
from phasec.ir.tir import AttrStmt, BinaryOp, Buffer, BufferLoad, BufferStore, For, IntImm, \
    PrimExpr, Stmt, Var
from phasec.te import operation as te
from phasec.te.analysis import static_int
from phasec.te.operation import i64
from phasec.te.schedules.build_time import WeightPlan, WeightTransform, static_dims
from phasec.te.schedules.gemm_operands import reads_flat_reduction
from phasec.te.tensor import ProducerLoad, Tensor, post_order

if TYPE_CHECKING:
    from phasec.te.schedules.gemm import GemmEmitter

__all__ = ["PACK_MARK", "PREPACK_ATTR", "PREPACK_WIDTH_ATTR", "PREPACK_TRANSPOSED_ATTR",
           "PREPACK_WORDS_ATTR", "WEIGHT_TRANSFORM", "pack_weight", "b_parameter",
           "byte_word", "byte_words", "word_parameter", "ROW_PACK_MARK", "ROW_PACK_ATTR",
           "ROW_PACK_ROWS_ATTR", "ROW_WEIGHT_TRANSFORM", "pack_rows", "row_panels"]

#: The marker of a packing loop nest the PackConstantWeights pass can remove:
#: ``AttrStmt(PACK_MARK, value=index of the panel's first micro-panel, body=pack)``.
#: The PrimFunc then names the packed parameter in ``PREPACK_ATTR`` and the
#: micro-panel width in ``PREPACK_WIDTH_ATTR``.
PACK_MARK = "phasec.gemm_pack"
PREPACK_ATTR = "phasec.gemm_prepack"
PREPACK_WIDTH_ATTR = "phasec.gemm_prepack_width"
#: set when B's parameter is laid out transposed, ``B[j, k]`` (``[N, K]``, or
#: ``[N, K, 1, 1]``: a 1x1 convolution's weight read as the columns)
PREPACK_TRANSPOSED_ATTR = "phasec.gemm_prepack_transposed"
#: set when the kernel reads B (``[K, N]``, 8-bit) as int32 words of four
#: bytes along K (:func:`byte_word`): the panels hold ``byte_words(B)``
PREPACK_WORDS_ATTR = "phasec.gemm_prepack_words"
_ATTRS = (PREPACK_ATTR, PREPACK_WIDTH_ATTR, PREPACK_TRANSPOSED_ATTR, PREPACK_WORDS_ATTR)


def byte_word(t: Tensor, index: Callable[[PrimExpr], list[PrimExpr]], K: int,
              kq: PrimExpr) -> PrimExpr:
    """The int32 word of bytes ``4*kq .. 4*kq+3`` of ``t`` (8-bit) along its
    reduction axis (``index(k)`` its indices), byte 0 lowest, zero past ``K``."""
    word: PrimExpr | None = None
    for q in range(4):
        k = kq * 4 + q
        byte = te.cast(te.cast(t[tuple(index(k))], "uint8"), "int32")
        if K % 4 and 4 * (K // 4) + q >= K:
            byte = te.select(te.lt(k, i64(K)), byte, IntImm(0, "int32"))
        if q:
            byte = te.call("shift_left", byte, IntImm(8 * q, "int32"))
        word = byte if word is None else te.call("bitwise_or", word, byte)
    assert word is not None
    return word


def byte_words(w: np.ndarray) -> np.ndarray:
    """``w`` ([K, N], 8-bit) as int32 words of four bytes along K, zero past K
    (what :func:`byte_word` computes): ``[ceil(K / 4), N]``."""
    k, n = w.shape
    padded = np.zeros((-(-k // 4) * 4, n), np.uint8)
    padded[:k] = w.view(np.uint8)
    quads = padded.reshape(-1, 4, n).astype(np.uint32)
    words = quads[:, 0] | (quads[:, 1] << 8) | (quads[:, 2] << 16) | (quads[:, 3] << 24)
    return words.astype(np.uint32).view(np.int32)


def word_parameter(value: Any, kq: Var, j: Var, K: int | None, buffers: Any
                   ) -> Buffer | None:
    """The 2-D 8-bit parameter ``B`` ([K, N]) when ``value`` (a lowered
    :func:`byte_word`) reads exactly ``B[4*kq + q, j]`` for each of its bytes
    ``q``, else None."""
    loads = [n for n in post_order([value]) if isinstance(n, BufferLoad)]
    if len(loads) != 4 or K is None:
        return None
    buf = loads[0].buffer
    if (not any(buf is b for b in buffers) or buf.dtype not in ("uint8", "int8")
            or len(buf.shape) != 2 or static_int(buf.shape[0]) != K):
        return None
    offsets = [_offset(n.indices[0], kq) for n in loads]
    if (any(n.buffer is not buf or len(n.indices) != 2 or n.indices[1] is not j for n in loads)
            or sorted(o if o is not None else -1 for o in offsets) != [0, 1, 2, 3]):
        return None
    return buf


def _offset(index: PrimExpr, kq: Var) -> int | None:
    """``q`` when ``index`` is ``kq * 4 + q``, else None."""
    rest = simplify(index - kq * 4)
    return rest.value if isinstance(rest, IntImm) and not any(
        n is kq for n in post_order([rest])) else None


def pack_weight(w: np.ndarray, width: int) -> np.ndarray:
    """``Wp[t, k, c] = w[k, t*width + c]``, zero past the last column: the
    layout of the packed micro-panels (a view when the columns divide
    evenly; a relax ``Constant`` makes it contiguous)."""
    k, n = w.shape
    tiles = -(-n // width)
    if tiles * width != n:
        padded = np.zeros((k, tiles * width), w.dtype)
        padded[:, :n] = w
        w = padded
    return w.reshape(k, tiles, width).transpose(1, 0, 2)


def b_parameter(load: BufferLoad, ks: Sequence[Var], kexts: Sequence[int | None], j: Var,
                N: int) -> tuple[Buffer, bool] | None:
    """``load``'s buffer when it reads all of B as ``B[k, j]`` (``[K, N]``:
    False) or transposed as ``B[j, k]`` (``[N, K]`` or ``[N, K, 1, ...]``
    read at 0 past the second index: True), else None. ``ks`` are the
    reduction axes (extents ``kexts``), flat ``k = (k0 * E1 + k1) * E2 ...``;
    several are read transposed only, as ``B[j, k0, k1, ...]`` over a buffer
    ``[N, E0, E1, ...]`` (a KxK convolution's OIHW weight, whose flat
    ``[N, K]`` view is that same memory: ``gemm_operands.reads_flat_reduction``,
    which also takes a 1-D convolution's ``[N, C, KW]`` in its one-row 2-D form)."""
    idx, dims = load.indices, [static_int(d) for d in load.buffer.shape]
    if len(ks) != 1:
        if (len(ks) > 1 and idx and idx[0] is j and dims[0] == N
                and reads_flat_reduction(idx[1:], dims[1:], ks, kexts)):
            return load.buffer, True
        return None
    k, K = ks[0], kexts[0]
    if len(idx) == 2 and idx[0] is k and idx[1] is j and dims == [K, N]:
        return load.buffer, False
    if (len(idx) >= 2 and idx[0] is j and idx[1] is k and dims[:2] == [N, K]
            and all(d == 1 for d in dims[2:])
            and all(isinstance(i, IntImm) and i.value == 0 for i in idx[2:])):
        return load.buffer, True
    return None


def _declared(func: tir.PrimFunc, name_attr: str, size_attr: str) -> tuple[int, int] | None:
    """(the index of the parameter ``func``'s ``name_attr`` names, its
    positive ``size_attr``), or None."""
    pname = (func.attrs or {}).get(name_attr)
    size = (func.attrs or {}).get(size_attr)
    if not pname or not isinstance(size, int) or size < 1:
        return None
    index = next((i for i, p in enumerate(func.params)
                  if isinstance(p, tir.Buffer) and p.name == pname), None)
    return None if index is None else (index, size)


def _prepacked_weight(func: tir.PrimFunc) -> WeightPlan | None:
    """The packing of B that ``func`` declares (``PREPACK_ATTR`` naming a
    parameter of static shape read as ``B[k, j]``, or as ``B[j, k]`` with
    ``PREPACK_TRANSPOSED_ATTR``; ``PACK_MARK`` nests), or None."""
    found = _declared(func, PREPACK_ATTR, PREPACK_WIDTH_ATTR)
    if found is None:
        return None
    index, width = found
    b = func.params[index]
    dims = static_dims(b)
    transposed = bool(func.attrs.get(PREPACK_TRANSPOSED_ATTR))
    as_words = bool(func.attrs.get(PREPACK_WORDS_ATTR))
    if dims is None or (len(dims) != 2 and not transposed) or len(dims) < 2:
        return None
    if as_words and (transposed or b.dtype not in ("uint8", "int8")):
        return None
    if transposed:
        n, k = dims[0], math.prod(dims[1:])
    else:
        k, n = dims
    if as_words:  # B's bytes as the int32 words the integer GEMM reads
        packed = tir.Buffer(b.name + "_packed", (i64(-(-n // width)), i64(-(-k // 4)),
                                                 i64(width)), "int32")
        attrs = {a: v for a, v in func.attrs.items() if a not in _ATTRS}
        return WeightPlan(index, packed, PACK_MARK, lambda mark: mark.value, attrs,
                          lambda w: pack_weight(byte_words(w), width))
    packed = tir.Buffer(b.name + "_packed", (i64(-(-n // width)), i64(k), i64(width)), b.dtype)
    attrs = {a: v for a, v in func.attrs.items() if a not in _ATTRS}
    if transposed:
        return WeightPlan(index, packed, PACK_MARK, lambda mark: mark.value, attrs,
                          lambda w: pack_weight(w.reshape(n, k).T, width))
    return WeightPlan(index, packed, PACK_MARK, lambda mark: mark.value, attrs,
                      lambda w: pack_weight(w, width))


#: B's panels packed into micro-panels (``pack_weight``); each marked nest
#: writes the micro-panels from the one its mark's value gives
WEIGHT_TRANSFORM = WeightTransform("GEMM micro-panels of a constant B", _prepacked_weight)


#: The row operand's (A's) counterpart of :data:`PACK_MARK`: a nest copying a
#: constant A (``[M, K]``, or ``[M, K, 1, ...]``: a 1x1 convolution's weight)
#: into row panels ``Ap[r // mr, k, r % mr]`` (:func:`row_panels`); the
#: PrimFunc names the parameter in ``ROW_PACK_ATTR`` and ``mr`` in
#: ``ROW_PACK_ROWS_ATTR``.
ROW_PACK_MARK = "phasec.gemm_pack_rows"
ROW_PACK_ATTR = "phasec.gemm_prepack_rows"
ROW_PACK_ROWS_ATTR = "phasec.gemm_prepack_rows_mr"


def pack_rows(w: np.ndarray, mr: int) -> np.ndarray:
    """``Ap[i, k, r] = w[i*mr + r, k]`` (``w`` read as ``[M, K]``), zero past
    the last row: each tile of ``mr`` rows one contiguous run along K."""
    m = w.shape[0]
    w = w.reshape(m, -1)
    tiles = -(-m // mr)
    padded = np.zeros((tiles * mr, w.shape[1]), w.dtype)
    padded[:m] = w
    return np.ascontiguousarray(padded.reshape(tiles, mr, -1).transpose(0, 2, 1))


def row_panels(em: GemmEmitter, M: int, mr: int) -> tuple[Buffer, Stmt] | None:
    """The row panels of A for the register tiles of ``mr`` rows over ``M``
    static rows (``Ap[r // mr, k, r % mr]``, zero past ``M``) and the marked
    nest that fills them on each call unless PackConstantWeights computes
    them at build time, or None. Only a constant A that one float load reads
    as ``A[row, k]`` (a 1x1 convolution's weight) of at least
    ``gemm_pack_a_min_bytes``, in a GEMM over flat columns (a whole image's
    positions, ``GemmPlan.flat``) of at most ``gemm_pack_a_max_columns``
    columns a call and one panel: each row tile reads few columns, so A is
    streamed once per call from L3 or memory, and read in place its tile's
    ``mr`` rows were ``mr`` short streams (a few KB each, one line per 16
    steps of each) the hardware prefetchers did not follow; here the tile
    reads one stream, and the tiles one after another all of A in order.
    A reduction of at most ``gemm_pack_a_max_k`` steps: the projections of
    1024 and 2048 over 7x7 lost this way in their models (bench/README.md,
    issue 29, pw7b). Each sum is the same, in the same order (only where A
    is read from changes)."""
    target, plan, low = em.nest.opt.target, em.plan, em.low
    a = plan.a_expr
    if (not target.gemm_pack_a_max_columns or not plan.flat or plan.wide or plan.row_group
            or em.dtype != "float32" or len(em.rexts) != 1 or em._part is not None
            or em.N is None or em.N > plan.cols or type(a) is not ProducerLoad
            or not a.tensor.is_placeholder or a.tensor.dtype != "float32"
            or a.tensor.name not in em.nest.opt.constant_inputs
            or any(x in low.attrs for x in (PREPACK_ATTR, ROW_PACK_ATTR))):
        return None
    K = static_int(em.rexts[0])
    dims = [static_int(d) for d in a.tensor.shape]
    dims_ok = (len(dims) >= 2 and dims[0] == M and dims[1] == K
               and all(d == 1 for d in dims[2:]))
    anchor = em.anchor
    row_var, k_var = anchor.axes[em.ri], anchor.raxes[0].var
    if (K is None or K > target.gemm_pack_a_max_k or not dims_ok
            or a.indices[0] is not row_var or a.indices[1] is not k_var
            or not all(isinstance(i, IntImm) and i.value == 0 for i in a.indices[2:])):
        return None
    # the columns A meets in a call: the GEMM's own times the batch loops
    shape = [static_int(d) for d in em.nest.shape]
    if None in shape or math.prod(shape) // M > target.gemm_pack_a_max_columns:  # type: ignore
        return None
    if M * K * 4 < target.gemm_pack_a_min_bytes:
        return None
    tiles = -(-M // mr)
    buf = low.buffers[id(a.tensor)]
    ap = Buffer(low.names.fresh(a.tensor.name + "_rows"), (i64(tiles), i64(K), i64(mr)),
                "float32")
    i, k, r = (Var(low.names.fresh(n), "int64") for n in ("ia", "ka", "ra"))
    row = i * mr + r
    # rows past M (the last tile's): a copy of the last row, never stored
    # (the tiles past M do not exist); PackConstantWeights writes zeros there
    src = BufferLoad(buf, (BinaryOp("min", row, i64(M - 1)), k,
                           *(i64(0) for _ in dims[2:])))
    nest = For(i, i64(0), i64(tiles), "serial", For(k, i64(0), i64(K), "serial", For(
        r, i64(0), i64(mr), "serial", BufferStore(ap, src, (i, k, r)))))
    low.attrs[ROW_PACK_ATTR] = buf.name
    low.attrs[ROW_PACK_ROWS_ATTR] = mr
    return ap, AttrStmt(ROW_PACK_MARK, i64(0), nest)


def _row_packed_weight(func: tir.PrimFunc) -> WeightPlan | None:
    """The row panels of A that ``func`` declares (``ROW_PACK_ATTR``), or None."""
    found = _declared(func, ROW_PACK_ATTR, ROW_PACK_ROWS_ATTR)
    if found is None:
        return None
    index, mr = found
    attrs = func.attrs
    dims = static_dims(func.params[index])
    if dims is None or len(dims) < 2:
        return None
    m, k = dims[0], math.prod(dims[1:])
    b = func.params[index]
    packed = tir.Buffer(b.name + "_rows", (i64(-(-m // mr)), i64(k), i64(mr)), b.dtype)
    rest = {a: v for a, v in attrs.items() if a not in (ROW_PACK_ATTR, ROW_PACK_ROWS_ATTR)}
    return WeightPlan(index, packed, ROW_PACK_MARK, lambda mark: mark.value, rest,
                      lambda w: pack_rows(w, mr))


#: A's rows packed into row panels (``pack_rows``)
ROW_WEIGHT_TRANSFORM = WeightTransform("GEMM row panels of a constant A", _row_packed_weight)

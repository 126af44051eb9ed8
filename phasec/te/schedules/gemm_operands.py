"""What the GEMM schedule (:mod:`gemm`) needs to know about its operands'
expressions: an integer GEMM's words, unit-stride columns, a window sliding
along one row, a grouped convolution's row groups, a constant matrix that
can be packed at build time."""

from __future__ import annotations

import math
from collections.abc import Sequence

from phasec import arith
from phasec.arith import simplify
from phasec.ir import tir
from phasec.ir.tir import BinaryOp, BufferLoad, IntImm, PrimExpr, Var
from phasec.te.analysis import subst_var, vars_of
from phasec.te.tensor import ProducerLoad, children, post_order

__all__ = ["is_dot4", "unit_stride", "sliding_window", "row_group", "constant_matrix"]


def is_dot4(e: PrimExpr) -> bool:
    """Whether ``e`` is ``T.dot4_u8s8(a, b)``: an integer GEMM's product of
    words of four 8-bit values (see phasec/backend/llvm/intdot.py)."""
    return isinstance(e, tir.Call) and e.name == "dot4_u8s8" and len(e.args) == 2


def unit_stride(e: PrimExpr, var: Var) -> bool:
    """True when every tensor load in ``e`` that uses ``var`` uses it in its
    last index only, with step 1 (``A[.., var + c]``): consecutive values of
    ``var`` read consecutive elements."""
    for n in post_order([e]):
        if not isinstance(n, (ProducerLoad, BufferLoad)):
            continue
        uses = [id(var) in vars_of(i) for i in n.indices]
        if not any(uses):
            continue
        if any(uses[:-1]):
            return False
        last = n.indices[-1]
        step = simplify(subst_var(last, var, var + 1) - last)
        if not (isinstance(step, IntImm) and step.value == 1):
            return False
    return True


def sliding_window(e: PrimExpr, jvar: Var, rvars: list[Var], rexts: list[int | None]) -> bool:
    """Whether every load in ``e`` that uses the column ``jvar`` reads
    ``t[.., row, jvar + r]`` with ``r`` one reduction variable (of at least
    two taps) and no other in its last index, and no reduction variable of
    more than one value in ``row``: a window sliding along one row (a 1-D
    convolution, or a 1 x K one)."""
    found = False
    for n in post_order([e]):
        if not isinstance(n, (ProducerLoad, BufferLoad)):
            continue
        uses = [id(jvar) in vars_of(i) for i in n.indices]
        if not any(uses):
            continue
        if any(uses[:-1]):
            return False
        rest = simplify(n.indices[-1] - jvar)
        taps = [(v, x) for v, x in zip(rvars, rexts) if id(v) in vars_of(rest)]
        if len(taps) != 1 or taps[0][1] is None or taps[0][1] < 2:
            return False
        if not isinstance(simplify(rest - taps[0][0]), IntImm):
            return False  # (jvar + 2*r, 2*jvar + r: not one sliding row)
        if len(n.indices) > 1 and any(id(v) in vars_of(n.indices[-2])
                                      for v, x in zip(rvars, rexts) if x is None or x > 1):
            return False  # a 2-D window (KH x KW): its rows do not all stay in L1
        found = True
    return found


def row_group(e: PrimExpr, var: Var) -> int:
    """When ``e`` uses ``var`` only as ``var // c`` (static ``c``): the gcd of
    those ``c`` (rows ``[g*c, (g+1)*c)`` read the same ``e``: a grouped
    convolution's input channel ``(oc // og) * cg + rc``); else 0."""
    divisors: list[int] = []
    stack = [e]
    while stack:
        n = stack.pop()
        if n is var:
            return 0  # used otherwise
        if (isinstance(n, BinaryOp) and n.op == "//" and n.lhs is var
                and isinstance(n.rhs, IntImm) and n.rhs.value > 0):
            divisors.append(n.rhs.value)
            continue
        stack.extend(children(n))
    return math.gcd(*divisors) if divisors else 0


def reads_flat_reduction(indices: Sequence[PrimExpr], dims: Sequence[int | None],
                         ks: Sequence[Var], kexts: Sequence[int | None]) -> bool:
    """Whether a load at ``indices`` of a tensor of ``dims`` reads the flat
    reduction ``(k0 * E1 + k1) * E2 ...`` over ``ks`` (extents ``kexts``) in
    memory order: each axis ``k`` at an index of extent ``E_k``, in order;
    an axis of extent 1 may also be left out (it is 0 throughout), and any
    index may be a 0 over a dimension of 1 (a 1x1 convolution's ``[N, K, 1,
    1]``, a 1-D convolution's ``[N, C, KW]`` in its one-row 2-D form)."""
    if len(indices) != len(dims) or None in kexts:
        return False
    pending = list(zip(ks, kexts))
    for index, dim in zip(indices, dims):
        while pending and pending[0][0] is not index and pending[0][1] == 1:
            pending.pop(0)  # an axis of extent 1 not read
        if pending and pending[0][0] is index and pending[0][1] == dim:
            pending.pop(0)
        elif not (isinstance(index, IntImm) and index.value == 0 and dim == 1):
            return False
    return all(e == 1 for _, e in pending)


def constant_matrix(b_expr: PrimExpr, constants: frozenset[str],
                    kvars: tuple[Var, ...] = (), kexts: Sequence[int | None] = ()) -> bool:
    """Whether the column operand is a 2-D constant placeholder read as is
    (or a convolution's weight ``[N, C, KH, KW]`` read as its flat ``[N,
    K]`` view, :func:`reads_flat_reduction` of the reduction axes ``kvars``
    of extents ``kexts``, a 1x1 one's read at 0 past ``[j, k]``; or an
    integer GEMM's words of the bytes of a 2-D constant)."""
    if isinstance(b_expr, tir.Call) and b_expr.name == "bitwise_or":
        loads = [n for n in post_order([b_expr]) if isinstance(n, ProducerLoad)]
        return (len(loads) == 4 and len({id(n.tensor) for n in loads}) == 1
                and loads[0].tensor.is_placeholder and loads[0].tensor.name in constants
                and len(loads[0].tensor.shape) == 2)
    if not (isinstance(b_expr, ProducerLoad) and b_expr.tensor.is_placeholder
            and b_expr.tensor.name in constants and len(b_expr.indices) >= 2):
        return False
    rest = b_expr.indices[1:]
    if all(isinstance(i, IntImm) and i.value == 0 for i in rest[1:]):
        return True
    dims = [arith.const_int(d) for d in b_expr.tensor.shape[1:]]
    return len(kvars) > 1 and reads_flat_reduction(rest, dims, kvars, kexts)

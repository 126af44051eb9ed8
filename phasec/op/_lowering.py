"""What every operator's legalization shares: the decorators a family
module registers its lowerings with (into the registry's tables
:data:`~phasec.op.registry.LEGALIZE` and
:data:`~phasec.op.registry.LEGALIZE_RELAX`, which LegalizeOps reads), and
the small TE helpers they use.

:data:`LEGALIZE` maps an operator name (``"relax.add"``) to a function
``legalize(call, inputs) -> te.Tensor | list[te.Tensor]``; ``inputs[i]``
corresponds to ``call.args[i]``: a :class:`~phasec.te.Tensor` for a tensor
operand, a list of Tensors for a tuple operand (``concat``), or the Relax
expression itself for anything else (shapes, prim values). Attributes are
read with defaults filled in; result shapes and dtypes come from
``call.struct_info``.

Each family module (:mod:`.elementwise`, :mod:`.nn`, :mod:`.manipulate`...)
keeps an operator's lowering beside its definition; the drivers that turn a
call or a fused group into a PrimFunc are in :mod:`.legalize`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from phasec.errors import PhasecError
from phasec.ir import tir
from phasec import arith
from phasec import te
from phasec.ir.expr import Call, Expr, Op
from phasec.ir.struct_info import TensorStructInfo, TupleStructInfo
from phasec.te import Tensor
from phasec.ir.tir import BinaryOp, Cast, IntImm, PrimExpr
from phasec.op._common import attrs_of
from phasec.op.infer import infer_struct_info
from phasec.op.registry import LEGALIZE, LEGALIZE_RELAX, LOWERS_TO, LegalizeFn
from phasec.target.tuning import host_tuning

__all__ = ["LEGALIZE", "LEGALIZE_RELAX", "legalizes", "legalizes_to_relax", "LegalizeError",
           "Inputs", "LegalizeFn"]


class LegalizeError(PhasecError):
    """An operator call cannot be lowered to TIR (unknown shape, unsupported op...)."""


Inputs = Sequence[Any]


def _register(*names: str) -> Callable[[LegalizeFn], LegalizeFn]:
    def wrap(fn: LegalizeFn) -> LegalizeFn:
        for n in names:
            LEGALIZE["relax." + n] = fn
        return fn
    return wrap


def scalar_operands(fn: LegalizeFn) -> LegalizeFn:
    """Mark a TE definition that takes an ``R.Prim`` operand whose value is
    unknown (a function parameter, say) as a scalar ``tir.Var``: the kernel
    receives it as a scalar parameter at its operand's position, as TVM 0.27
    legalizes ``R.atan2(x, y)`` for ``y: R.Prim("float32")``. Unmarked
    definitions see such an operand as its Relax expression."""
    fn.scalar_operands = True  # type: ignore[attr-defined]
    return fn


def legalizes(*names: str) -> Callable[[LegalizeFn], LegalizeFn]:
    """Register the decorated TE definition as the legalization of ``relax.<name>`` for each name.

    Family modules use it to keep an operator's legalization beside its
    definition: ``@legalizes("flip")`` above ``def _flip(call, inputs)``.
    """
    return _register(*names)


def legalizes_to_relax(*names: str, lowers_to: str = "VM builtin / packed call"
                       ) -> Callable[[Callable[[Call], Expr]], Callable[[Call], Expr]]:
    """Register the decorated ``fn(call) -> Expr`` as the Relax-level lowering
    of ``relax.<name>`` for each name (LegalizeOps uses it instead of a kernel);
    ``lowers_to`` says what it produces (PHASES.md's operator table)."""
    def wrap(fn: Callable[[Call], Expr]) -> Callable[[Call], Expr]:
        for n in names:
            LEGALIZE_RELAX["relax." + n] = fn
            LOWERS_TO["relax." + n] = lowers_to
        return fn
    return wrap


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

I64 = "int64"


def _i64(v: int) -> IntImm:
    return IntImm(int(v), I64)


def _op_name(call: Call) -> str:
    return call.op.name if isinstance(call.op, Op) else "<call>"


def _script(call: Call) -> str:
    return "R." + _op_name(call).removeprefix("relax.")


def _attrs(call: Call) -> dict[str, Any]:
    return attrs_of(call)


def _out(call: Call, index: int | None = None) -> TensorStructInfo:
    sinfo = call.struct_info
    if sinfo is None:
        sinfo = infer_struct_info(call)
    if index is not None:
        if not isinstance(sinfo, TupleStructInfo):
            raise LegalizeError(f"{_script(call)}: expected a tuple result")
        sinfo = sinfo.fields[index]
    if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None or sinfo.dtype == "void":
        raise LegalizeError(
            f"cannot legalize {_script(call)}: its result needs a known shape and dtype "
            "(symbolic dimensions are fine), but struct info inference could not determine "
            "them; add a match_cast to give the operands known shapes")
    return sinfo


def _name(call: Call) -> str:
    return "T_" + _op_name(call).removeprefix("relax.").removeprefix("nn.")


def _static(e: PrimExpr) -> int | None:
    return arith.const_int(e)


def _is_one(e: PrimExpr) -> bool:
    return _static(e) == 1


def _bcast(t: Tensor, out_shape: Sequence[PrimExpr], idx: Sequence[PrimExpr]) -> Any:
    """Load ``t`` at the output index ``idx`` with numpy broadcasting."""
    off = len(out_shape) - t.ndim
    ind = []
    for d in range(t.ndim):
        if _is_one(t.shape[d]) and not _is_one(out_shape[off + d]):
            ind.append(_i64(0))
        else:
            ind.append(idx[off + d])
    return t[tuple(ind)]


def _const(value: Any, dtype: str) -> PrimExpr:
    return te.const(value, dtype)


def _float(dtype: str) -> bool:
    return tir.is_float(dtype)


def _clamp(i: PrimExpr, hi: PrimExpr) -> PrimExpr:
    """``i`` clamped to ``[0, hi - 1]`` (so a load stays in bounds when a Select
    evaluates both branches)."""
    upper = arith.simplify(BinaryOp("-", hi, _i64(1)))
    return BinaryOp("max", BinaryOp("min", i, upper), _i64(0))


def _norm_axis(axis: int, ndim: int) -> int:
    return axis + ndim if axis < 0 else axis


def _prod(dims: Sequence[PrimExpr]) -> PrimExpr:
    acc: PrimExpr = _i64(1)
    for d in dims:
        acc = BinaryOp("*", acc, d)
    return arith.simplify(acc)


def _count(count: PrimExpr, dtype: str) -> PrimExpr:
    """An element count as a value of ``dtype`` (an immediate when static)."""
    c = _static(count)
    return _const(c, dtype) if c is not None else Cast(dtype, count)


def _tensor(inputs: Inputs, i: int, call: Call) -> Tensor:
    t = inputs[i]
    if not isinstance(t, Tensor):
        raise LegalizeError(f"{_script(call)}: operand {i} must be a tensor")
    return t


def _reduction(x: Tensor, axes: Sequence[int], keepdims: bool, out_shape: Sequence[PrimExpr],
               combiner: Callable[..., Any], name: str,
               value: Callable[[PrimExpr], PrimExpr] = lambda v: v) -> Tensor:
    """``combiner(value(x[...]))`` over ``axes`` of ``x`` with output ``out_shape``.

    float16 sums and products accumulate in float32 and round once at the
    end (as numpy's and ONNX Runtime's float16 reductions do): a float16
    accumulator stops growing once the total passes 2048 (its ulp is 2)."""
    axes = list(axes)
    if not axes:
        return te.compute(out_shape, lambda *i: value(x[i]), name=name)
    if combiner in (te.sum, te.prod) and tir.as_prim_expr(value(x[tuple(
            _i64(0) for _ in range(x.ndim))])).dtype == "float16":
        wide = _reduction(x, axes, keepdims, out_shape, combiner, name + "_f32",
                          lambda v: te.cast(value(v), "float32"))
        return te.compute(out_shape, lambda *i: te.cast(wide[i], "float16"), name=name)
    # The last two axes reduced together, of static extents, rows not whole
    # vectors (a squeeze-excite's mean over 7x7 ... 56x56): one reduce axis
    # over both, contiguous in memory, so a sum gets vector partial
    # accumulators over the whole plane instead of a serial chain per row of
    # 14, or a lane loop and a scalar tail per row of 28 (measured 1 core,
    # mean over 240x28x28 23.3 -> 8.5 us, 144x56x56 25.3 -> 19.8 us; max over
    # 240x28x28 75.9 -> 24.1 us). Rows of whole vectors (112, 1024) stay two
    # axes: they vectorize as they are, and LLVM makes gathers of a power-of-
    # two row's q // W and q % W (a sum over 8192x1024 0.7 -> 8.4 ms)
    rows = [arith.const_int(d) for d in x.shape[-2:]]
    flat = (x.ndim >= 2 and x.ndim - 2 in axes and x.ndim - 1 in axes and None not in rows
            and rows[1] % min(host_tuning().partial_lanes) != 0)
    rks = [te.reduce_axis(x.shape[a], f"k{a}") for a in axes if not (flat and a >= x.ndim - 2)]
    if flat:
        rks.append(te.reduce_axis(_i64(rows[0] * rows[1]), f"k{x.ndim - 2}_{x.ndim - 1}"))

    def body(*i: PrimExpr) -> Any:
        ind: list[Any] = []
        pos = 0
        rk = iter(rks)
        for d in range(x.ndim):
            if flat and d == x.ndim - 2:
                q = rks[-1].var
                ind += [q // _i64(rows[1]), q % _i64(rows[1])]
                if keepdims:
                    pos += 2
                break
            if d in axes:
                ind.append(next(rk).var)
                if keepdims:
                    pos += 1
            else:
                ind.append(i[pos])
                pos += 1
        return combiner(value(x[tuple(ind)]), axis=rks)
    return te.compute(out_shape, body, name=name)


def _strides(shape: Sequence[PrimExpr]) -> list[PrimExpr]:
    out: list[PrimExpr] = []
    acc: PrimExpr = _i64(1)
    for d in reversed(shape):
        out.append(acc)
        acc = arith.simplify(BinaryOp("*", acc, d))
    return list(reversed(out))


def _flat_index(i: Sequence[PrimExpr], shape: Sequence[PrimExpr]) -> PrimExpr:
    flat: PrimExpr = _i64(0)
    for v, s in zip(i, _strides(shape)):
        term = v if _static(s) == 1 else BinaryOp("*", v, s)
        flat = term if _static(flat) == 0 else BinaryOp("+", flat, term)
    return flat


def _unravel(flat: PrimExpr, shape: Sequence[PrimExpr]) -> list[PrimExpr]:
    out = []
    strides = _strides(shape)
    for d, (s, st) in enumerate(zip(shape, strides)):
        v = flat if _static(st) == 1 else BinaryOp("//", flat, st)
        if d > 0:
            v = BinaryOp("%", v, s)
        out.append(v)
    return out

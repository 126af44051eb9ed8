"""More elementwise operators (TVM 0.27's set): trigonometric and hyperbolic
functions, sign/square/trunc, the IEEE class tests, floor_mod/mod,
atan2, log_add_exp, the bitwise and shift operators, logical_xor and
ewise_fma.

Semantics (numpy's functions are the references):

* ``acos acosh asin asinh atan atanh cos cosh sin sinh tan`` and ``atan2``
  (``arctan2(x1, x2)``), ``log_add_exp`` (``log(exp(x1) + exp(x2))``
  without overflow): float tensors only, as TVM.
* ``sign`` (-1, 0, 1; NaN stays NaN as numpy's, where TVM 0.27 gives 0), ``square``, ``trunc`` (identity on
  integers): any numeric dtype, not bool.
* ``isfinite``, ``isinf``, ``isnan``: a bool result; always finite / never
  inf or NaN for integers.
* ``floor_mod(x1, x2)``: the remainder with the divisor's sign (numpy
  ``mod``, Python ``%``); ``mod(x1, x2)``: the remainder with the dividend's
  sign (C ``fmod``, numpy ``fmod``, TVM's truncmod). An integer divisor of 0
  gives 0 (phasec's rule for integer division, never a trap); float division
  by 0 gives NaN.
* ``bitwise_and/or/xor`` (integers and bool), ``bitwise_not``; ``left_shift``
  / ``right_shift`` (integers; right shifts are arithmetic for signed types;
  an amount outside ``[0, bits)`` gives 0 to the left and the sign fill to
  the right, as numpy, never C's undefined behaviour).
* ``logical_xor``: as ``logical_and``: the operands' dtype holding 0/1.
* The binary ones take an ``R.Prim`` scalar for either operand (not both),
  broadcast over the other, as the arithmetic operators do (TVM 0.27's
  InferTypeBroadcast).
* ``ewise_fma(x1, x2, x3)``: ``x1 * x2 + x3`` on three tensors of one shape
  and dtype (no broadcasting, TVM's rule); multiply then add, each rounded
  (TVM's legalization), not a fused multiply-add.
"""

from __future__ import annotations

import numpy as np

from phasec.ir import tir
from phasec import arith
from phasec import te
from phasec.ir.text import expr_to_str, sinfo_to_str
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.tir import BinaryOp, PrimExpr, Select
from phasec.op._common import OpPattern, binary_dtype, broadcast, define, err, tensor_arg
from phasec.op.elementwise import _as_operand, _binary_input, _binary_operands
from phasec.op._lowering import _bcast, _const, _name, _out, _tensor, legalizes, scalar_operands

__all__ = ["MATH_UNARY", "MATH_BINARY"]


def _same(x: TensorStructInfo, dtype: str | None = None) -> TensorStructInfo:
    # on the operand's virtual device, as TVM 0.27's InferTypeUnary
    return TensorStructInfo(x.shape, x.dtype if dtype is None else dtype, x.ndim,
                            vdevice=x.vdevice)


def _kind_check(call, x: TensorStructInfo, kind: str, k: int = 0) -> None:
    """kind: "float", "numeric" (no bool), "int" (no bool, no float), "intbool"."""
    d = x.dtype
    if d == "void":
        return
    ok = {"float": tir.is_float(d), "numeric": d != "bool", "int": tir.is_int(d),
          "intbool": tir.is_int(d) or d == "bool"}[kind]
    if not ok:
        need = {"float": "a float dtype", "numeric": "a numeric (non-bool) dtype",
                "int": "an integer dtype", "intbool": "an integer or bool dtype"}[kind]
        raise err(call, f"{expr_to_str(call.op)} requires {need}, but {expr_to_str(call.args[k])} "
                        f"has dtype {d}")


def _unary_infer(kind: str, out_dtype: str | None = None):
    def infer(call, ctx):
        x = tensor_arg(call, 0, ctx)
        _kind_check(call, x, kind)
        return _same(x, out_dtype)
    return infer


def _binary_infer(kind: str):
    def infer(call, ctx):
        a, b = _binary_operands(call, ctx)  # an R.Prim operand broadcasts as a scalar
        _kind_check(call, a, kind, 0)
        _kind_check(call, b, kind, 1)
        return broadcast(call, a, b, binary_dtype(call, a, b))
    return infer


def _ref_unary(fn, out=None):
    def ref(x):
        x = np.asarray(x)
        with np.errstate(all="ignore"):
            return np.asarray(fn(x)).astype(out or x.dtype)
    return ref


def _ref_binary(fn):
    def ref(x1, x2):
        a, b = _as_operand(x1, x2), _as_operand(x2, x1)
        with np.errstate(all="ignore"):
            return np.asarray(fn(a, b)).astype(np.result_type(a, b))
    return ref


# ---------------------------------------------------------------------------
# unary
# ---------------------------------------------------------------------------

def _sign_ref(x):
    return np.sign(x)


def _trunc_ref(x):
    return np.trunc(x) if x.dtype.kind == "f" else x


#: name -> (dtype kind, numpy implementation, bool result)
MATH_UNARY = {
    "acos": ("float", np.arccos, False), "acosh": ("float", np.arccosh, False),
    "asin": ("float", np.arcsin, False), "asinh": ("float", np.arcsinh, False),
    "atan": ("float", np.arctan, False), "atanh": ("float", np.arctanh, False),
    "cos": ("float", np.cos, False), "cosh": ("float", np.cosh, False),
    "sin": ("float", np.sin, False), "sinh": ("float", np.sinh, False),
    "tan": ("float", np.tan, False),
    "sign": ("numeric", _sign_ref, False), "square": ("numeric", np.square, False),
    "trunc": ("numeric", _trunc_ref, False),
    "isfinite": ("any", np.isfinite, True), "isinf": ("any", np.isinf, True),
    "isnan": ("any", np.isnan, True),
    "bitwise_not": ("intbool", np.invert, False),
}

def _infer_class_test(call, ctx):
    return _same(tensor_arg(call, 0, ctx), "bool")


for _n, (_kind, _fn, _bool) in MATH_UNARY.items():
    define(_n, ("x",), _infer_class_test if _kind == "any" else _unary_infer(_kind),
           reference=_ref_unary(_fn, "bool" if _bool else None), pattern=OpPattern.ELEMWISE,
           doc=f"Elementwise {_n} (numpy).")


def _unary_tir(name: str, x: PrimExpr) -> PrimExpr:
    dt = x.dtype
    if name in ("isfinite", "isinf", "isnan"):
        if not tir.is_float(dt):
            return te.const(name == "isfinite", "bool")
        return te.call(name, x)
    if name == "sign":
        zero = _const(0, dt)
        pos = Select(BinaryOp(">", x, zero), _const(1, dt), zero)
        neg = Select(BinaryOp("<", x, zero), _const(-1, dt), pos)
        return neg if not tir.is_float(dt) else Select(te.call("isnan", x), x, neg)
    if name == "square":
        return BinaryOp("*", x, x)
    if name == "trunc":
        return te.call("trunc", x) if tir.is_float(dt) else x
    if name == "bitwise_not":
        return tir.Call("bitwise_not", (x,), dt)
    return te.call(name, x)  # the float math intrinsics (sin, cos: LLVM's; the rest: libm)


def _unary_legalize(name: str):
    def legalize(call, inputs):
        x = _tensor(inputs, 0, call)
        out = _out(call)
        return te.compute(out.shape, lambda *i: _unary_tir(name, x[i]), name=_name(call))
    return legalize


for _n in MATH_UNARY:
    legalizes(_n)(_unary_legalize(_n))


# ---------------------------------------------------------------------------
# binary
# ---------------------------------------------------------------------------

def _int_zero_safe(fn):
    """numpy with phasec's integer rule: a zero divisor gives 0."""
    def wrapped(a, b):
        if a.dtype.kind in "iu" and b.dtype.kind in "iu":
            safe = np.where(b == 0, 1, b)
            return np.where(b == 0, 0, fn(a, safe))
        return fn(a, b)
    return wrapped


def _log_add_exp_ref(a, b):
    return np.logaddexp(a, b)


def _shift_ref(left: bool):
    def ref(a, b):
        a, b = np.broadcast_arrays(a, b)
        bits = a.dtype.itemsize * 8
        inr = (b >= 0) & (b < bits)
        safe = np.where(inr, b, 0).astype(a.dtype)
        shifted = np.left_shift(a, safe) if left else np.right_shift(a, safe)
        fill = np.zeros_like(a) if left else np.where(a < 0, -1, 0).astype(a.dtype)
        return np.where(inr, shifted, fill)
    return ref


def _logical_xor_ref(a, b):
    return np.logical_xor(a, b)


#: name -> (dtype kind, numpy implementation)
MATH_BINARY = {
    "atan2": ("float", np.arctan2),
    "log_add_exp": ("float", _log_add_exp_ref),
    "floor_mod": ("numeric", _int_zero_safe(np.mod)),
    "mod": ("numeric", _int_zero_safe(np.fmod)),
    "bitwise_and": ("intbool", np.bitwise_and),
    "bitwise_or": ("intbool", np.bitwise_or),
    "bitwise_xor": ("intbool", np.bitwise_xor),
    "left_shift": ("int", _shift_ref(True)),
    "right_shift": ("int", _shift_ref(False)),
    "logical_xor": ("intbool", _logical_xor_ref),
}

for _n, (_kind, _fn) in MATH_BINARY.items():
    define(_n, ("x1", "x2"), _binary_infer(_kind),
           reference=_ref_binary(_fn), pattern=OpPattern.BROADCAST,
           doc=f"Elementwise {_n} with numpy broadcasting.")


def _truthy(x: PrimExpr) -> PrimExpr:
    return x if tir.is_bool(x.dtype) else BinaryOp("!=", x, _const(0, x.dtype))


def _binary_tir(name: str, a: PrimExpr, b: PrimExpr, dt: str) -> PrimExpr:
    if name == "atan2":
        return tir.Call("atan2", (a, b), dt)
    if name == "log_add_exp":
        hi, lo = BinaryOp("max", a, b), BinaryOp("min", a, b)
        # log(e^hi + e^lo) = hi + log(1 + e^(lo - hi)); equal infinities: hi itself
        soft = BinaryOp("+", hi, te.call("log", BinaryOp(
            "+", _const(1.0, dt), te.call("exp", BinaryOp("-", lo, hi)))))
        return Select(te.call("isinf", hi), hi, soft)
    if name in ("floor_mod", "mod"):
        if tir.is_float(dt):
            # C's fmod is exact; the floor remainder moves a non-zero remainder
            # whose sign differs from the divisor's by one divisor (numpy's rule);
            # T.fmod, not %: TVM's TIR has no float %
            r = tir.Call("fmod", (a, b), dt)
            if name == "mod":
                return r
            zero = _const(0, dt)
            differ = BinaryOp("!=", BinaryOp("<", r, zero), BinaryOp("<", b, zero))
            adjust = BinaryOp("and", BinaryOp("!=", r, zero), differ)
            return Select(adjust, BinaryOp("+", r, b), r)
        zero = _const(0, dt)
        safe = Select(BinaryOp("==", b, zero), _const(1, dt), b)
        r = BinaryOp("%", a, safe)  # TIR %: the floor remainder (TVM's floormod)
        if name == "mod":  # truncated: the dividend's sign
            differ = BinaryOp("!=", BinaryOp("<", r, zero), BinaryOp("<", a, zero))
            adjust = BinaryOp("and", BinaryOp("!=", r, zero), differ)
            r = Select(adjust, BinaryOp("-", r, safe), r)
        return Select(BinaryOp("==", b, zero), zero, r)
    if name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        return tir.Call(name, (a, b), dt)
    if name in ("left_shift", "right_shift"):
        return tir.Call("shift_left" if name == "left_shift" else "shift_right", (a, b), dt)
    # logical_xor: 0/1 in the operands' dtype, as logical_and
    return te.cast(BinaryOp("!=", _truthy(a), _truthy(b)), dt)


def _binary_legalize(name: str):
    def legalize(call, inputs):
        a, b = _binary_input(call, inputs, 0), _binary_input(call, inputs, 1)
        out = _out(call)
        shape = out.shape

        def load(t, i):
            return t if isinstance(t, PrimExpr) else _bcast(t, shape, i)
        return te.compute(shape, lambda *i: _binary_tir(
            name, load(a, i), load(b, i), out.dtype), name=_name(call))
    return scalar_operands(legalize)


for _n in MATH_BINARY:
    legalizes(_n)(_binary_legalize(_n))


# ---------------------------------------------------------------------------
# ewise_fma
# ---------------------------------------------------------------------------

def _infer_fma(call, ctx):
    xs = [tensor_arg(call, k, ctx) for k in range(3)]
    for k, x in enumerate(xs):
        _kind_check(call, x, "numeric", k)
    dtypes = {x.dtype for x in xs}
    if len(dtypes) > 1:
        raise err(call, f"ewise_fma needs three operands of one dtype, got "
                        f"{', '.join(x.dtype for x in xs)}")
    ndims = {x.ndim for x in xs if x.ndim != -1}
    if len(ndims) > 1:
        raise err(call, f"ewise_fma needs three operands of one ndim (no broadcasting), got "
                        f"{', '.join(sinfo_to_str(x) for x in xs)}")
    known = [x for x in xs if x.shape is not None]
    for x in known[1:]:
        if any(arith.prove_not_equal(p, q) for p, q in zip(known[0].shape, x.shape)):
            raise err(call, f"ewise_fma needs three operands of one shape (no broadcasting), "
                            f"got {', '.join(sinfo_to_str(x) for x in xs)}")
    return _same(known[0] if known else xs[0])


def _fma_ref(x1, x2, x3):
    a, b, c = np.asarray(x1), np.asarray(x2), np.asarray(x3)
    with np.errstate(all="ignore"):
        return (a * b + c).astype(a.dtype)


define("ewise_fma", ("x1", "x2", "x3"), _infer_fma, reference=_fma_ref,
       pattern=OpPattern.ELEMWISE, doc="x1 * x2 + x3 on three tensors of one shape and dtype.")


@legalizes("ewise_fma")
def _ewise_fma(call, inputs):
    a, b, c = (_tensor(inputs, k, call) for k in range(3))
    out = _out(call)
    return te.compute(out.shape, lambda *i: BinaryOp("+", BinaryOp("*", a[i], b[i]), c[i]),
                      name=_name(call))

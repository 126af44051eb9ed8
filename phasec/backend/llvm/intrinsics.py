"""Math, bit and index intrinsics in LLVM IR (``T.exp``, ``T.atan2``,
``T.bitwise_and``, ``T.checked_index``...), as their declarations in
:mod:`phasec.ir.intrinsics` say: LLVM intrinsics, C math library calls,
phasec's vectorizable float32 helpers (:mod:`.mathlib`), and the sequences
of the intrinsics whose lowering is CUSTOM, here keyed by name."""

from __future__ import annotations

from collections.abc import Callable

from phasec.ir import tir
from phasec.ir.intrinsics import (
    BIT, C_MATH, INDEX, INTRINSIC_TABLE, LLVM_INTRINSIC, Intrinsic,
)
from phasec.backend.llvm.abi import OOB_EXTENT, OOB_VALUE, RC_INDEX_OUT_OF_RANGE
from phasec.backend.llvm.context import KernelContext
from phasec.backend.llvm.conversions import Conversions
from phasec.backend.llvm.exprtypes import ExprTypes
from phasec.backend.llvm.intdot import DOT4_FUNCTION, DOT4_VARIANTS
from phasec.backend.llvm.irtext import (
    BITS, FLOAT_SUFFIX, LLVM_TYPE, float_literal, is_float, is_signed,
)

__all__ = ["IntrinsicLowering"]


class IntrinsicLowering:
    """Emits the intrinsic calls of a kernel into ``ctx``'s function."""

    def __init__(self, ctx: KernelContext, types: ExprTypes, conversions: Conversions) -> None:
        self.ctx = ctx
        self.types = types
        self.conversions = conversions

    def emit(self, n: tir.Call, args: list[str]) -> str:
        """The value of ``n`` given its arguments' operands (``n`` was type-checked)."""
        spec = INTRINSIC_TABLE[n.name]
        if spec.kind == INDEX:
            return self.checked_index(n, args[0], args[1])
        if spec.kind == BIT:
            return self.bit_op(n, args)
        if spec.arity == 2:
            return self.binary(spec, n, args)
        return self.unary(spec, n, args[0])

    def checked_index(self, n: tir.Call, index: str, extent: str) -> str:
        """``T.checked_index(i, n)``: ``i`` (``i + n`` when negative) if in
        range, else record ``i`` and ``n`` and return RC_INDEX_OUT_OF_RANGE.

        The error exit frees the heap buffers live at that point (the
        out-of-memory exit does not: it has nothing it could free safely).
        """
        fn = self.ctx.fn
        i = self.conversions.convert(index, self.types.dtype_of(n.args[0]), "int64")
        size = self.conversions.convert(extent, self.types.dtype_of(n.args[1]), "int64")
        neg, wrapped, j, ok = (fn.tmp("ix.neg"), fn.tmp("ix.wrap"), fn.tmp("ix"),
                               fn.tmp("ix.ok"))
        fn.emit(f"{neg} = icmp slt i64 {i}, 0")
        fn.emit(f"{wrapped} = add i64 {i}, {size}")
        fn.emit(f"{j} = select i1 {neg}, i64 {wrapped}, i64 {i}")
        fn.emit(f"{ok} = icmp ult i64 {j}, {size}")  # unsigned: also catches j < 0
        bad, cont = fn.label("ix.bad"), fn.label("ix.ok")
        fn.emit(f"br i1 {ok}, label %{cont}, label %{bad}, !prof {self.ctx.mod.unlikely_md()}")
        fn.start(bad)
        fn.emit(f"store atomic i64 {i}, ptr @{OOB_VALUE} monotonic, align 8")
        fn.emit(f"store atomic i64 {size}, ptr @{OOB_EXTENT} monotonic, align 8")
        self.ctx.error_return(str(RC_INDEX_OUT_OF_RANGE))
        fn.start(cont)
        return j

    def unary(self, spec: Intrinsic, n: tir.Call, arg: str) -> str:
        """A math intrinsic of one operand."""
        fn = self.ctx.fn
        at = self.types.dtype_of(n.args[0])
        rt = self.types.dtype_of(n)
        name = spec.name
        if spec.result == "bool":
            return _TESTS[name](self, spec, arg, at)
        if spec.lowering == C_MATH and is_float(at):
            return self.libm(spec, [arg], at, rt)
        if not is_float(at):  # integer identities and abs
            x = self.conversions.convert(arg, at, rt)
            if name == "fabs" and is_signed(rt):
                ty = LLVM_TYPE[rt]
                callee = self.ctx.mod.intrinsic(f"llvm.abs.{ty}", ty, [ty, "i1"])
                r = fn.tmp("abs")
                fn.emit(f"{r} = call {ty} {callee}({ty} {x}, i1 false)")
                return r
            return x
        if self.ctx.options.vector_math and rt in ("float32", "float16") and spec.vector:
            x32 = self.conversions.convert(arg, at, "float32")
            return self.conversions.convert(self._vector_math(spec, x32), "float32", rt)
        x = self.conversions.convert(arg, at, rt)
        r = fn.tmp(name)
        if spec.lowering == LLVM_INTRINSIC:
            ty = LLVM_TYPE[rt]
            callee = self.ctx.mod.intrinsic(f"llvm.{spec.llvm}.{FLOAT_SUFFIX[rt]}", ty, [ty])
            fn.emit(f"{r} = call {self.ctx.options.float_flags}{ty} {callee}({ty} {x})")
            return r
        custom = _UNARY.get(name)
        if custom is None:  # pragma: no cover - INTRINSIC_TABLE and this class agree (tested)
            raise self.ctx.error(f"intrinsic '{name}' has no LLVM lowering", n)
        return custom(self, spec, x, rt, r)

    def binary(self, spec: Intrinsic, n: tir.Call, args: list[str]) -> str:
        """A math intrinsic of two float operands (``atan2``, ``fmod``)."""
        rt = self.types.dtype_of(n)
        xs = [self.conversions.convert(a, self.types.dtype_of(e), rt)
              for a, e in zip(args, n.args)]
        if spec.lowering == C_MATH:
            return self.libm(spec, xs, rt, rt)
        custom = _BINARY.get(spec.name)
        if custom is None:  # pragma: no cover - INTRINSIC_TABLE and this class agree (tested)
            raise self.ctx.error(f"intrinsic '{spec.name}' has no LLVM lowering", n)
        return custom(self, xs, rt)

    def libm(self, spec: Intrinsic, args: list[str], at: str, rt: str) -> str:
        """A call of the C math library function ``spec.c_name``: ``<c_name>f``
        in float32 (float16 widened), ``<c_name>`` in float64."""
        fn = self.ctx.fn
        wide = "float64" if rt == "float64" else "float32"
        name = spec.c_name
        assert name is not None
        sym = name if wide == "float64" else name + "f"
        ty = LLVM_TYPE[wide]
        self.ctx.mod.declare(sym, f"declare {ty} @{sym}({', '.join([ty] * len(args))}) "
                             "nounwind willreturn memory(none)")
        xs = [self.conversions.convert(a, at, wide) for a in args]
        r = fn.tmp(spec.name)
        fn.emit(f"{r} = call {ty} @{sym}({', '.join(f'{ty} {x}' for x in xs)})")
        return self.conversions.convert(r, wide, rt)

    def bit_op(self, n: tir.Call, args: list[str]) -> str:
        """and/or/xor/not, and shifts with numpy's rule for amounts outside
        [0, bits): 0 to the left, the sign fill to the right."""
        fn = self.ctx.fn
        rt = self.types.dtype_of(n)
        if n.name == "dot4_u8s8":
            return self.dot4(n, "0", args[0], args[1])
        ty = LLVM_TYPE[rt]
        xs = [self.conversions.convert(a, self.types.dtype_of(e), rt)
              for a, e in zip(args, n.args)]
        r = fn.tmp(n.name)
        if n.name == "bitwise_not":
            fn.emit(f"{r} = xor {ty} {xs[0]}, {'true' if rt == 'bool' else -1}")
            return r
        if n.name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
            op = {"bitwise_and": "and", "bitwise_or": "or", "bitwise_xor": "xor"}[n.name]
            fn.emit(f"{r} = {op} {ty} {xs[0]}, {xs[1]}")
            return r
        if rt == "bool":  # a shift of one bit: by 0 keeps, anything else clears (left)
            a, s = xs
            keep = fn.tmp("keep")
            fn.emit(f"{keep} = xor i1 {s}, true")
            fn.emit(f"{r} = and i1 {a}, {keep}")
            return r
        a, s = xs
        bits = BITS[rt]
        signed = is_signed(rt)
        inrange = fn.tmp("inr")
        fn.emit(f"{inrange} = icmp ult {ty} {s}, {bits}")  # unsigned: negative is out too
        safe = fn.tmp("s")
        fn.emit(f"{safe} = select i1 {inrange}, {ty} {s}, {ty} 0")
        raw = fn.tmp("sh")
        if n.name == "shift_left":
            fn.emit(f"{raw} = shl {ty} {a}, {safe}")
            fill = "0"
        else:
            fn.emit(f"{raw} = {'ashr' if signed else 'lshr'} {ty} {a}, {safe}")
            if signed:
                fill = fn.tmp("fill")
                fn.emit(f"{fill} = ashr {ty} {a}, {bits - 1}")
            else:
                fill = "0"
        fn.emit(f"{r} = select i1 {inrange}, {ty} {raw}, {ty} {fill}")
        return r

    def dot4(self, n: tir.Call, acc: str, a: str, b: str, acc_dtype: str = "int32") -> str:
        """``acc + T.dot4_u8s8(a, b)`` as one call of the helper whose vector
        variants are vpdpbusd (see :mod:`.intdot`); the result in ``n``'s dtype."""
        fn, convert, dtype_of = self.ctx.fn, self.conversions.convert, self.types.dtype_of
        callee = self.ctx.mod.use_math(DOT4_FUNCTION)
        xs = [convert(acc, acc_dtype, "int32"), convert(a, dtype_of(n.args[0]), "int32"),
              convert(b, dtype_of(n.args[1]), "int32")]
        r = fn.tmp("dot4")
        fn.emit(f"{r} = call i32 {callee}({', '.join('i32 ' + x for x in xs)}) {DOT4_VARIANTS}")
        return convert(r, "int32", dtype_of(n))

    # -- the CUSTOM lowerings ---------------------------------------------------
    def _assume(self, spec: Intrinsic, arg: str, at: str) -> str:
        return "true"  # in an expression: its condition is no value

    def _isnan(self, spec: Intrinsic, arg: str, at: str) -> str:
        if not is_float(at):
            return "false"
        fn = self.ctx.fn
        r = fn.tmp("isnan")
        fn.emit(f"{r} = fcmp uno {LLVM_TYPE[at]} {arg}, {float_literal(0.0, at)}")
        return r

    def _class_test(self, spec: Intrinsic, arg: str, at: str) -> str:
        """isinf: ``|x| == inf``; isfinite: ``|x| < inf``, false for NaN (ordered)."""
        name = spec.name
        if not is_float(at):
            return "false" if name == "isinf" else "true"
        fn = self.ctx.fn
        ty = LLVM_TYPE[at]
        fabs = self.ctx.mod.intrinsic(f"llvm.fabs.{FLOAT_SUFFIX[at]}", ty, [ty])
        a, r = fn.tmp("abs"), fn.tmp(name)
        fn.emit(f"{a} = call {ty} {fabs}({ty} {arg})")
        cmp = "oeq" if name == "isinf" else "olt"
        fn.emit(f"{r} = fcmp {cmp} {ty} {a}, {float_literal(float('inf'), at)}")
        return r

    def _rsqrt(self, spec: Intrinsic, x: str, rt: str, r: str) -> str:
        fn = self.ctx.fn
        ty = LLVM_TYPE[rt]
        fl = self.ctx.options.float_flags
        callee = self.ctx.mod.intrinsic(f"llvm.sqrt.{FLOAT_SUFFIX[rt]}", ty, [ty])
        s = fn.tmp("sqrt")
        fn.emit(f"{s} = call {fl}{ty} {callee}({ty} {x})")
        fn.emit(f"{r} = fdiv {fl}{ty} {float_literal(1.0, rt)}, {s}")
        return r

    def _sigmoid_scalar(self, spec: Intrinsic, x: str, rt: str, r: str) -> str:
        ty = LLVM_TYPE[rt]
        return self._sigmoid(x, rt, self.ctx.mod.intrinsic(f"llvm.exp.{FLOAT_SUFFIX[rt]}", ty,
                                                            [ty]))

    def _erf(self, spec: Intrinsic, x: str, rt: str, r: str) -> str:
        """libm's erf in float64, erff otherwise (float16 widened)."""
        fn = self.ctx.fn
        mod = self.ctx.mod
        name = spec.c_name
        if rt == "float64":
            mod.declare(name, f"declare double @{name}(double) nounwind willreturn memory(none)")
            fn.emit(f"{r} = call double @{name}(double {x})")
            return r
        mod.declare(f"{name}f",
                    f"declare float @{name}f(float) nounwind willreturn memory(none)")
        xf = self.conversions.convert(x, rt, "float32")
        rf = fn.tmp(spec.name)
        fn.emit(f"{rf} = call float @{name}f(float {xf})")
        return self.conversions.convert(rf, "float32", rt)

    def _fmod(self, xs: list[str], rt: str) -> str:
        """C's fmod: LLVM's frem (exact, the sign of the dividend)."""
        r = self.ctx.fn.tmp("fmod")
        self.ctx.fn.emit(f"{r} = frem {LLVM_TYPE[rt]} {xs[0]}, {xs[1]}")
        return r

    def _sigmoid(self, x: str, dt: str, exp_callee: str) -> str:
        """1 / (1 + exp(-x)) for x >= 0, exp(x) / (1 + exp(x)) below: one exp,
        never overflowing, accurate for very negative x."""
        fn = self.ctx.fn
        ty = LLVM_TYPE[dt]
        sfx = FLOAT_SUFFIX[dt]
        fabs = self.ctx.mod.intrinsic(f"llvm.fabs.{sfx}", ty, [ty])
        one, zero = float_literal(1.0, dt), float_literal(0.0, dt)
        a, na, e, d, pos, num, r = (fn.tmp(h) for h in ("abs", "neg", "exp", "den", "pos",
                                                         "num", "sigmoid"))
        fn.emit(f"{a} = call {ty} {fabs}({ty} {x})")
        fn.emit(f"{na} = fneg {ty} {a}")
        fn.emit(f"{e} = call {ty} {exp_callee}({ty} {na})")
        fn.emit(f"{d} = fadd {ty} {one}, {e}")
        fn.emit(f"{pos} = fcmp oge {ty} {x}, {zero}")
        fn.emit(f"{num} = select i1 {pos}, {ty} {one}, {ty} {e}")
        fn.emit(f"{r} = fdiv {ty} {num}, {d}")
        return r

    def silu(self, x: str) -> str:
        """``x * sigmoid(x)`` of a float32 ``x`` as phasec's vectorizable
        ``x / (1 + exp(-x))`` (:func:`phasec.backend.llvm.mathlib.math_function`)."""
        r = self.ctx.fn.tmp("silu")
        self.ctx.fn.emit(f"{r} = call float {self.ctx.mod.use_math('phasec.siluf')}(float {x})")
        return r

    def _vector_math(self, spec: Intrinsic, x: str) -> str:
        """A float32 operand through phasec's vectorizable helper ``spec.vector``."""
        fn = self.ctx.fn
        r = fn.tmp(spec.name)
        callee = self.ctx.mod.use_math(spec.vector)
        fn.emit(f"{r} = call float {callee}(float {x})")
        return r


# The CUSTOM lowerings, by intrinsic. Tests of the operand (a bool result),
# given the operand and its dtype:
_TESTS: dict[str, Callable[[IntrinsicLowering, Intrinsic, str, str], str]] = {
    "assume": IntrinsicLowering._assume, "isnan": IntrinsicLowering._isnan,
    "isinf": IntrinsicLowering._class_test, "isfinite": IntrinsicLowering._class_test,
}
# ... float functions, given the operand converted to the result's dtype,
# that dtype and the name of the result:
_UNARY: dict[str, Callable[[IntrinsicLowering, Intrinsic, str, str, str], str]] = {
    "rsqrt": IntrinsicLowering._rsqrt, "sigmoid": IntrinsicLowering._sigmoid_scalar,
    "erf": IntrinsicLowering._erf,
}
# ... functions of two floats, given the operands converted to the result's dtype:
_BINARY: dict[str, Callable[[IntrinsicLowering, list[str], str], str]] = {
    "fmod": IntrinsicLowering._fmod,
}

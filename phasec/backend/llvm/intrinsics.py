"""Math, bit and index intrinsics of the kernel code generator (``T.exp``,
``T.atan2``, ``T.checked_index``...): a mixin of the per-kernel codegen in
:mod:`phasec.backend.llvm.codegen`, as :mod:`.loops` is for loops."""

from __future__ import annotations

from phasec.ir import tir
from phasec.backend.llvm._base import (
    _BITS, _INTRINSIC_SUFFIX, _LLVM_TYPE, _UNARY_FLOAT_INTRINSIC, OOB_EXTENT, OOB_VALUE,
    RC_INDEX_OUT_OF_RANGE, _float_literal, _is_float, _is_signed,
)

__all__ = ["IntrinsicCodegen"]


class IntrinsicCodegen:
    """Emits the intrinsic calls of a kernel (mixed into ``_KernelCodegen``)."""

    def _checked_index(self, n: tir.Call, index: str, extent: str) -> str:
        """``T.checked_index(i, n)``: ``i`` (``i + n`` when negative) if in
        range, else record ``i`` and ``n`` and return RC_INDEX_OUT_OF_RANGE.

        The error exit frees the heap buffers live at that point (the
        out-of-memory exit does not: it has nothing it could free safely).
        """
        fn = self.fn
        i = self.convert(index, self.dtype_of(n.args[0]), "int64")
        size = self.convert(extent, self.dtype_of(n.args[1]), "int64")
        neg, wrapped, j, ok = (fn.tmp("ix.neg"), fn.tmp("ix.wrap"), fn.tmp("ix"),
                               fn.tmp("ix.ok"))
        fn.emit(f"{neg} = icmp slt i64 {i}, 0")
        fn.emit(f"{wrapped} = add i64 {i}, {size}")
        fn.emit(f"{j} = select i1 {neg}, i64 {wrapped}, i64 {i}")
        fn.emit(f"{ok} = icmp ult i64 {j}, {size}")  # unsigned: also catches j < 0
        bad, cont = fn.label("ix.bad"), fn.label("ix.ok")
        fn.emit(f"br i1 {ok}, label %{cont}, label %{bad}, !prof {self.mod.unlikely_md()}")
        fn.start(bad)
        fn.emit(f"store atomic i64 {i}, ptr @{OOB_VALUE} monotonic, align 8")
        fn.emit(f"store atomic i64 {size}, ptr @{OOB_EXTENT} monotonic, align 8")
        self.error_return(str(RC_INDEX_OUT_OF_RANGE))
        fn.start(cont)
        return j

    def _call(self, n: tir.Call, arg: str) -> str:
        fn = self.fn
        at = self.dtype_of(n.args[0])
        rt = self.dtype_of(n)
        name = n.name
        if name == "assume":  # inside an expression: true (its condition is not a value)
            return "true"
        if name == "isnan":
            if not _is_float(at):
                return "false"
            r = fn.tmp("isnan")
            fn.emit(f"{r} = fcmp uno {_LLVM_TYPE[at]} {arg}, {_float_literal(0.0, at)}")
            return r
        if name in ("isinf", "isfinite"):
            if not _is_float(at):
                return "false" if name == "isinf" else "true"
            ty = _LLVM_TYPE[at]
            fabs = self.mod.intrinsic(f"llvm.fabs.{_INTRINSIC_SUFFIX[at]}", ty, [ty])
            a, r = fn.tmp("abs"), fn.tmp(name)
            fn.emit(f"{a} = call {ty} {fabs}({ty} {arg})")
            # |x| == inf; finite: |x| < inf, which is false for NaN (ordered)
            cmp = "oeq" if name == "isinf" else "olt"
            fn.emit(f"{r} = fcmp {cmp} {ty} {a}, {_float_literal(float('inf'), at)}")
            return r
        if name in tir.LIBM_INTRINSICS and _is_float(at):
            return self._libm(name, [arg], at, rt)
        if not _is_float(at):  # integer identities and abs
            x = self.convert(arg, at, rt)
            if name == "fabs" and _is_signed(rt):
                ty = _LLVM_TYPE[rt]
                callee = self.mod.intrinsic(f"llvm.abs.{ty}", ty, [ty, "i1"])
                r = fn.tmp("abs")
                fn.emit(f"{r} = call {ty} {callee}({ty} {x}, i1 false)")
                return r
            return x
        if self.mod.options.vector_math and rt in ("float32", "float16") and name in (
                "exp", "sigmoid", "tanh", "erf", "log", "log2"):
            return self.convert(self._vector_math(name, self.convert(arg, at, "float32")),
                                "float32", rt)
        x = self.convert(arg, at, rt)
        ty = _LLVM_TYPE[rt]
        sfx = _INTRINSIC_SUFFIX[rt]
        fl = self.mod.options.float_flags
        one = _float_literal(1.0, rt)
        r = fn.tmp(name)
        if name in _UNARY_FLOAT_INTRINSIC:
            callee = self.mod.intrinsic(f"llvm.{_UNARY_FLOAT_INTRINSIC[name]}.{sfx}", ty, [ty])
            fn.emit(f"{r} = call {fl}{ty} {callee}({ty} {x})")
        elif name == "rsqrt":
            callee = self.mod.intrinsic(f"llvm.sqrt.{sfx}", ty, [ty])
            s = fn.tmp("sqrt")
            fn.emit(f"{s} = call {fl}{ty} {callee}({ty} {x})")
            fn.emit(f"{r} = fdiv {fl}{ty} {one}, {s}")
        elif name == "sigmoid":
            r = self._sigmoid(x, rt, self.mod.intrinsic(f"llvm.exp.{sfx}", ty, [ty]))
        elif name == "erf":
            if rt == "float64":
                self.mod.declare("erf", "declare double @erf(double) nounwind willreturn memory(none)")
                fn.emit(f"{r} = call double @erf(double {x})")
            else:
                self.mod.declare("erff", "declare float @erff(float) nounwind willreturn memory(none)")
                xf = self.convert(x, rt, "float32")
                rf = fn.tmp("erf")
                fn.emit(f"{rf} = call float @erff(float {xf})")
                r = self.convert(rf, "float32", rt)
        else:  # pragma: no cover - INTRINSICS and this table agree (tested)
            raise self.error(f"intrinsic '{name}' has no LLVM lowering", n)
        return r

    def _libm(self, name: str, args: list[str], at: str, rt: str) -> str:
        """A C math library call: ``namef`` in float32 (float16 widened), ``name``
        in float64."""
        fn = self.fn
        wide = "float64" if rt == "float64" else "float32"
        sym = name if wide == "float64" else name + "f"
        ty = _LLVM_TYPE[wide]
        self.mod.declare(sym, f"declare {ty} @{sym}({', '.join([ty] * len(args))}) "
                              "nounwind willreturn memory(none)")
        xs = [self.convert(a, at, wide) for a in args]
        r = fn.tmp(name)
        fn.emit(f"{r} = call {ty} @{sym}({', '.join(f'{ty} {x}' for x in xs)})")
        return self.convert(r, wide, rt)

    def _bit_op(self, n: tir.Call, args: list[str]) -> str:
        """and/or/xor/not, and shifts with numpy's rule for amounts outside
        [0, bits): 0 to the left, the sign fill to the right."""
        fn = self.fn
        rt = self.dtype_of(n)
        ty = _LLVM_TYPE[rt]
        xs = [self.convert(a, self.dtype_of(e), rt) for a, e in zip(args, n.args)]
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
        bits = _BITS[rt]
        signed = _is_signed(rt)
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

    def _fmod(self, n: tir.Call, a: str, b: str) -> str:
        """C's fmod: LLVM's frem (exact, the sign of the dividend)."""
        rt = self.dtype_of(n)
        ty = _LLVM_TYPE[rt]
        x = self.convert(a, self.dtype_of(n.args[0]), rt)
        y = self.convert(b, self.dtype_of(n.args[1]), rt)
        r = self.fn.tmp("fmod")
        self.fn.emit(f"{r} = frem {ty} {x}, {y}")
        return r

    def _atan2(self, n: tir.Call, y: str, x: str) -> str:
        rt = self.dtype_of(n)
        ys = self.convert(y, self.dtype_of(n.args[0]), rt)
        xs = self.convert(x, self.dtype_of(n.args[1]), rt)
        return self._libm("atan2", [ys, xs], rt, rt)

    def _sigmoid(self, x: str, dt: str, exp_callee: str) -> str:
        """1 / (1 + exp(-x)) for x >= 0, exp(x) / (1 + exp(x)) below: one exp,
        never overflowing, accurate for very negative x."""
        fn = self.fn
        ty = _LLVM_TYPE[dt]
        sfx = _INTRINSIC_SUFFIX[dt]
        fabs = self.mod.intrinsic(f"llvm.fabs.{sfx}", ty, [ty])
        one, zero = _float_literal(1.0, dt), _float_literal(0.0, dt)
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

    def _vector_math(self, name: str, x: str) -> str:
        """float32 exp/sigmoid/tanh/erf through phasec's vectorizable helpers."""
        fn = self.fn
        r = fn.tmp(name)
        if name == "sigmoid":
            return self._sigmoid(x, "float32", self.mod.use_math('phasec.expf'))
        callee = self.mod.use_math({"exp": "phasec.expf", "tanh": "phasec.tanhf",
                                    "erf": "phasec.erff", "log": "phasec.logf",
                                    "log2": "phasec.log2f"}[name])
        fn.emit(f"{r} = call float {callee}(float {x})")
        return r

    # ======================================================================
    # Statements
    # ======================================================================

"""Scalar expressions and arithmetic in LLVM IR.

Expressions are emitted iteratively (no Python recursion on deep trees);
``Select`` and ``and``/``or`` branch lazily when an operand may fail (reads
memory, or divides by a divisor that may be 0), so padding guards such as
``Select(i > 0, A[i - 1], 0)`` never read out of bounds and
``Select(n != 0, a // n, 0)`` never divides by zero. Integer division
follows TVM: ``/`` truncates, ``//`` and ``%`` floor; a zero divisor ends
the kernel with RC_DIVISION_BY_ZERO (a DivisionByZeroError) at the next
loop exit or return -- a flag, so a dividing loop keeps no early exit and
still vectorizes -- tested unless the divisor is a non-zero constant or
proven non-zero (:meth:`.exprtypes.ExprTypes.checks_divisor`);
``INT_MIN / -1`` wraps. The hardware division itself never traps: its
divisor is 1 where the true one is 0 or -1 (an unchecked divisor may be 0
only in a Select branch whose result is not used).
"""

from __future__ import annotations

from typing import Any

from phasec.ir import tir
from phasec.ir.node import Node
from phasec.backend.llvm.access import BufferAccess
from phasec.backend.llvm.context import KernelContext
from phasec.backend.llvm.conversions import Conversions
from phasec.backend.llvm.exact import exact_arithmetic
from phasec.backend.llvm.exprtypes import ExprTypes
from phasec.backend.llvm.intrinsics import IntrinsicLowering
from phasec.backend.llvm.irtext import (
    BITS, FCMP, FLOAT_SUFFIX, ICMP, LLVM_TYPE, float_literal, int_literal, is_float, is_intlike,
    is_signed,
)

__all__ = ["ExpressionEmitter"]

#: the exponents ``pow`` is computed for by square roots (:meth:`_quarter_power`):
#: the non-integer multiples of 1/4 in (0, 2), LRN's 0.75 among them
_QUARTER_POWERS = (0.25, 0.5, 0.75, 1.25, 1.5, 1.75)


class ExpressionEmitter:
    """Emits the scalar expressions of a kernel into ``ctx``'s function."""

    def __init__(self, ctx: KernelContext, types: ExprTypes, conversions: Conversions,
                 access: BufferAccess, intrinsics: IntrinsicLowering) -> None:
        self.ctx = ctx
        self.types = types
        self.conversions = conversions
        self.access = access
        self.intrinsics = intrinsics
        # products that are operands of a sum, by id (see _silu_operand); the
        # nodes held so that no id is reused within the kernel
        self._summed_products: dict[int, tir.BinaryOp] = {}
        # the arithmetic a rounding to an integer decides: never fused (see .exact)
        self._exact = exact_arithmetic(ctx.func)

    def float_flags(self, n: tir.BinaryOp) -> str:
        """The fast-math flags of float arithmetic ``n``: none where a
        rounding or a comparison decides on its value (:mod:`.exact`)."""
        return "" if id(n) in self._exact else self.ctx.options.float_flags

    def emit_value_as(self, e: Any, dst: str, what: str) -> str:
        """Emit ``e`` converted to ``dst``, allowing only implicit conversions
        between integer types (and of literals)."""
        src = self.types.dtype_of(e)
        if src != dst:
            implicit = (is_intlike(src) and is_intlike(dst) and dst != "bool") or isinstance(
                e, (tir.IntImm, tir.FloatImm))
            if not implicit:
                raise self.ctx.error(f"cannot use a {src} value as {what} of dtype {dst} without a "
                                     "Cast", e)
        return self.conversions.convert(self.emit_expr(e), src, dst)

    def emit_cond(self, e: Any) -> str:
        """Emit ``e`` as an i1."""
        return self.conversions.convert(self.emit_expr(e), self.types.dtype_of(e), "bool")

    def emit_expr(self, root: Any) -> str:
        """Emit ``root``; the result has dtype ``self.types.dtype_of(root)``."""
        types = self.types
        types.dtype_of(root)
        scope = self.ctx.vars
        apply = self._apply
        vals: list[str] = []
        tasks: list[Any] = [root]
        while tasks:
            t = tasks.pop()
            if type(t) is tuple:
                t[0](t[1], vals)
                continue
            if callable(t) and not isinstance(t, Node):
                t(vals)
                continue
            tt = type(t)
            if tt is tir.BinaryOp and (t.op == "+" or t.op == "-"):
                for term in (t.lhs, t.rhs):
                    if type(term) is tir.BinaryOp and term.op == "*":
                        self._summed_products[id(term)] = term
            if tt is tir.IntImm:
                vals.append(int_literal(int(t.value), t.dtype) if is_intlike(t.dtype)
                            else float_literal(float(t.value), t.dtype))
            elif tt is tir.FloatImm:
                vals.append(float_literal(float(t.value), t.dtype) if is_float(t.dtype)
                            else int_literal(int(t.value), t.dtype))
            elif tt is tir.Var:
                b = scope.get(id(t))
                if b is None:
                    raise self.ctx.error(f"variable '{t.name}' is used but not defined (not a "
                                         "parameter, shape variable, loop variable, block axis or "
                                         "let binding in scope)", t)
                vals.append(b[0])
            elif tt is tir.BinaryOp and t.op in tir.LOGIC_OPS and types.may_fail(t.rhs):
                self._lazy_logic(t, tasks)
            elif tt is tir.BinaryOp and t.op == "+" and dot4_term(t) is not None:
                # acc + dot4(a, b): one helper call (vpdpbusd accumulates in place)
                acc, dot = dot4_term(t)
                tasks.append((self._dot4_sum, (t, acc, dot)))
                tasks.extend(reversed([acc, *dot.args]))
            elif tt is tir.Select and (types.may_fail(t.true_value)
                                       or types.may_fail(t.false_value)):
                self._lazy_select(t, tasks)
            else:
                tasks.append((apply, t))
                tasks.extend(reversed(tir.expr_children(t)))
        assert len(vals) == 1
        return vals[0]

    def _dot4_sum(self, parts: tuple[tir.BinaryOp, Any, tir.Call], vals: list[str]) -> None:
        n, acc, dot = parts
        acc_v, a, b = vals[-3:]
        del vals[-3:]
        r = self.intrinsics.dot4(dot, acc_v, a, b, self.types.dtype_of(acc))
        vals.append(self.conversions.convert(r, self.types.dtype_of(dot),
                                             self.types.dtype_of(n)))

    def _apply(self, n: Any, vals: list[str]) -> None:
        kids = tir.expr_children(n)
        k = len(kids)
        args = vals[len(vals) - k:]
        del vals[len(vals) - k:]
        t = type(n)
        if t is tir.BinaryOp:
            vals.append(self._binop(n, args[0], args[1]))
        elif t is tir.BufferLoad:
            vals.append(self.access.load(n, args))
        elif t is tir.Cast:
            vals.append(self.conversions.convert(args[0], self.types.dtype_of(n.value), n.dtype))
        elif t is tir.Not:
            fn = self.ctx.fn
            c = self.conversions.convert(args[0], self.types.dtype_of(n.value), "bool")
            r = fn.tmp("not")
            fn.emit(f"{r} = xor i1 {c}, true")
            vals.append(r)
        elif t is tir.Select:
            fn = self.ctx.fn
            convert, dtype_of = self.conversions.convert, self.types.dtype_of
            rt = dtype_of(n)
            c = convert(args[0], dtype_of(n.condition), "bool")
            a = convert(args[1], dtype_of(n.true_value), rt)
            b = convert(args[2], dtype_of(n.false_value), rt)
            r = fn.tmp("sel")
            fn.emit(f"{r} = select i1 {c}, {LLVM_TYPE[rt]} {a}, {LLVM_TYPE[rt]} {b}")
            vals.append(r)
        elif t is tir.Call:
            vals.append(self.intrinsics.emit(n, args))
        else:  # pragma: no cover - rejected by dtype_of
            raise self.ctx.error(f"unsupported expression node {t.__name__}", n)

    def _lazy_select(self, n: tir.Select, tasks: list[Any]) -> None:
        fn = self.ctx.fn
        rt = self.types.dtype_of(n)
        ty = LLVM_TYPE[rt]
        lt, lf, lm = fn.label("sel.t"), fn.label("sel.f"), fn.label("sel.m")
        state: dict[str, str] = {}

        def branch(vals: list[str]) -> None:
            c = self.conversions.convert(vals.pop(), self.types.dtype_of(n.condition), "bool")
            fn.emit(f"br i1 {c}, label %{lt}, label %{lf}")
            fn.start(lt)

        def after_true(vals: list[str]) -> None:
            state["t"] = self.conversions.convert(vals.pop(), self.types.dtype_of(n.true_value), rt)
            state["tb"] = fn.block
            fn.emit(f"br label %{lm}")
            fn.start(lf)

        def after_false(vals: list[str]) -> None:
            f = self.conversions.convert(vals.pop(), self.types.dtype_of(n.false_value), rt)
            fb = fn.block
            fn.emit(f"br label %{lm}")
            fn.start(lm)
            r = fn.tmp("sel")
            fn.emit(f"{r} = phi {ty} [ {state['t']}, %{state['tb']} ], [ {f}, %{fb} ]")
            vals.append(r)

        tasks.extend([after_false, n.false_value, after_true, n.true_value, branch, n.condition])

    def _lazy_logic(self, n: tir.BinaryOp, tasks: list[Any]) -> None:
        """``a and b`` / ``a or b`` evaluating ``b`` only when needed."""
        fn = self.ctx.fn
        lr, lm = fn.label("sc.rhs"), fn.label("sc.m")
        is_and = n.op == "and"
        state: dict[str, str] = {}

        def branch(vals: list[str]) -> None:
            c = self.conversions.convert(vals.pop(), self.types.dtype_of(n.lhs), "bool")
            state["lb"] = fn.block
            if is_and:
                fn.emit(f"br i1 {c}, label %{lr}, label %{lm}")
            else:
                fn.emit(f"br i1 {c}, label %{lm}, label %{lr}")
            fn.start(lr)

        def merge(vals: list[str]) -> None:
            c = self.conversions.convert(vals.pop(), self.types.dtype_of(n.rhs), "bool")
            rb = fn.block
            fn.emit(f"br label %{lm}")
            fn.start(lm)
            r = fn.tmp("sc")
            short = "false" if is_and else "true"
            fn.emit(f"{r} = phi i1 [ {short}, %{state['lb']} ], [ {c}, %{rb} ]")
            vals.append(r)

        tasks.extend([merge, n.rhs, branch, n.lhs])

    # -- arithmetic -------------------------------------------------------------
    def _binop(self, n: tir.BinaryOp, a: str, b: str) -> str:
        fn = self.ctx.fn
        op = n.op
        if op in tir.LOGIC_OPS:
            a = self.conversions.convert(a, self.types.dtype_of(n.lhs), "bool")
            b = self.conversions.convert(b, self.types.dtype_of(n.rhs), "bool")
            r = fn.tmp(op)
            fn.emit(f"{r} = {op} i1 {a}, {b}")
            return r
        ot = self.types.optypes[id(n)]
        a = self.conversions.convert(a, self.types.dtype_of(n.lhs), ot)
        b = self.conversions.convert(b, self.types.dtype_of(n.rhs), ot)
        ty = LLVM_TYPE[ot]
        if op in tir.COMPARE_OPS:
            r = fn.tmp("cmp")
            if is_float(ot):
                fn.emit(f"{r} = fcmp {FCMP[op]} {ty} {a}, {b}")
            else:
                pred = ICMP[op]
                if pred not in ("eq", "ne"):
                    pred = ("s" if is_signed(ot) else "u") + pred
                fn.emit(f"{r} = icmp {pred} {ty} {a}, {b}")
            return r
        if is_float(ot):
            silu = self._silu_operand(n, ot, a, b)
            if silu is not None:
                return self.intrinsics.silu(silu)
            return self._float_arith(op, ot, a, b, id(n) in self._exact)
        if self.types.checks_divisor(n):
            self._check_divisor(ty, b)
        return self._int_arith(op, ot, a, b)

    def _silu_operand(self, n: tir.BinaryOp, ot: str, a: str, b: str) -> str | None:
        """``x``'s value when ``n`` is SiLU, ``x * sigmoid(x)`` (either order)
        in float32 with the vector math on: then one ``x / (1 + exp(-x))``
        replaces the sigmoid's reciprocal and the product (one multiply a
        vector fewer; the unused sigmoid is dead code once inlined). Not a
        term of a sum, whose product is a multiply-add already (a SiLU then
        mean: the quotient then saves nothing and keeps one more vector
        live, 27 -> 35 us over 1x1280x7x7)."""
        if n.op != "*" or ot != "float32" or not self.ctx.options.vector_math:
            return None
        if self.ctx.options.contract and id(n) in self._summed_products:
            return None
        for x, sig, xv in ((n.lhs, n.rhs, a), (n.rhs, n.lhs, b)):
            if (type(sig) is tir.Call and sig.name == "sigmoid"
                    and self.types.dtype_of(sig) == "float32"
                    and self.types.dtype_of(x) == "float32"
                    and _same_value(sig.args[0], x)):
                return xv
        return None

    def _check_divisor(self, ty: str, b: str) -> None:
        """Note a zero ``b`` in the function's flag: the kernel then ends with
        RC_DIVISION_BY_ZERO at the next loop exit or return
        (:meth:`.context.KernelContext.note_zero_divisor`)."""
        fn = self.ctx.fn
        isz = fn.tmp("dz")
        fn.emit(f"{isz} = icmp eq {ty} {b}, 0")
        self.ctx.note_zero_divisor(isz)

    def _quarter_power(self, x: str, c: float, dt: str) -> str:
        """``x ** c`` for ``c`` in :data:`_QUARTER_POWERS`: square roots and
        products, vectorized by LLVM (a pow stays a libm call, one element at
        a time: ZFNet's LRN, ``pow(., 0.75)`` over 1.1M elements, 8.9 ms).
        At most ~2 ulp from a correctly rounded pow; pow's values where the
        roots differ: +0 for -0 (``sqrt(-0)`` is -0) and +inf for -inf
        (``sqrt(-inf)`` is NaN). Other negatives are NaN either way."""
        fn, ty = self.ctx.fn, LLVM_TYPE[dt]
        fl = self.ctx.options.float_flags
        sqrt = self.ctx.mod.intrinsic(f"llvm.sqrt.{FLOAT_SUFFIX[dt]}", ty, [ty])

        def emit(rhs: str) -> str:
            t = fn.tmp("f")
            fn.emit(f"{t} = {rhs}")
            return t

        half = emit(f"call {fl}{ty} {sqrt}({ty} {x})")
        frac = c % 1
        part = half
        if frac != 0.5:
            quarter = emit(f"call {fl}{ty} {sqrt}({ty} {half})")
            part = quarter if frac == 0.25 else emit(f"fmul {fl}{ty} {half}, {quarter}")
        r = emit(f"fmul {fl}{ty} {x}, {part}") if c > 1 else part
        zero, inf = float_literal(0.0, dt), float_literal(float("inf"), dt)
        is_zero = emit(f"fcmp oeq {ty} {x}, {zero}")
        r = emit(f"select i1 {is_zero}, {ty} {zero}, {ty} {r}")
        is_minus_inf = emit(f"fcmp oeq {ty} {x}, {float_literal(float('-inf'), dt)}")
        return emit(f"select i1 {is_minus_inf}, {ty} {inf}, {ty} {r}")

    def _float_arith(self, op: str, dt: str, a: str, b: str, exact: bool = False) -> str:
        """``a op b`` in float dtype ``dt``; ``exact``: without fast-math
        flags (a value a rounding decides, :mod:`.exact`)."""
        fn = self.ctx.fn
        ty = LLVM_TYPE[dt]
        fl = "" if exact else self.ctx.options.float_flags
        sfx = FLOAT_SUFFIX[dt]
        r = fn.tmp("f")
        simple = {"+": "fadd", "-": "fsub", "*": "fmul", "/": "fdiv"}
        if op in simple:
            fn.emit(f"{r} = {simple[op]} {fl}{ty} {a}, {b}")
        elif op in ("min", "max"):
            name = f"llvm.{'minimum' if op == 'min' else 'maximum'}.{sfx}"
            callee = self.ctx.mod.intrinsic(name, ty, [ty, ty])
            fn.emit(f"{r} = call {ty} {callee}({ty} {a}, {ty} {b})")
        elif op == "pow" and b == float_literal(3.0, dt):
            # a cube (GPT-2's tanh GELU) as two products, as ONNX Runtime computes
            # it: LLVM keeps pow(x, 3) a libm call, one element at a time
            sq = fn.tmp("f")
            fn.emit(f"{sq} = fmul {fl}{ty} {a}, {a}")
            fn.emit(f"{r} = fmul {fl}{ty} {sq}, {a}")
        elif op == "pow" and (c := next((c for c in _QUARTER_POWERS
                                         if b == float_literal(c, dt)), None)) is not None:
            r = self._quarter_power(a, c, dt)
        elif op == "pow":
            callee = self.ctx.mod.intrinsic(f"llvm.pow.{sfx}", ty, [ty, ty])
            fn.emit(f"{r} = call {fl}{ty} {callee}({ty} {a}, {ty} {b})")
        elif op == "//":
            q = fn.tmp("f")
            fn.emit(f"{q} = fdiv {fl}{ty} {a}, {b}")
            callee = self.ctx.mod.intrinsic(f"llvm.floor.{sfx}", ty, [ty])
            fn.emit(f"{r} = call {ty} {callee}({ty} {q})")
        elif op == "%":
            # numpy's float mod: fmod, then shift into the divisor's sign.
            zero = float_literal(0.0, dt)
            m = fn.tmp("f")
            fn.emit(f"{m} = frem {ty} {a}, {b}")
            nz = fn.tmp("f")
            fn.emit(f"{nz} = fcmp une {ty} {m}, {zero}")
            mneg = fn.tmp("f")
            fn.emit(f"{mneg} = fcmp olt {ty} {m}, {zero}")
            bneg = fn.tmp("f")
            fn.emit(f"{bneg} = fcmp olt {ty} {b}, {zero}")
            diff = fn.tmp("f")
            fn.emit(f"{diff} = xor i1 {mneg}, {bneg}")
            adj = fn.tmp("f")
            fn.emit(f"{adj} = and i1 {nz}, {diff}")
            s = fn.tmp("f")
            fn.emit(f"{s} = fadd {ty} {m}, {b}")
            fn.emit(f"{r} = select i1 {adj}, {ty} {s}, {ty} {m}")
        else:  # pragma: no cover
            raise self.ctx.error(f"operator '{op}' is not supported on floats")
        return r

    def _int_arith(self, op: str, dt: str, a: str, b: str) -> str:
        fn = self.ctx.fn
        ty = LLVM_TYPE[dt]
        signed = is_signed(dt)
        nsw = "nsw " if signed else ""
        r = fn.tmp("i")
        simple = {"+": "add", "-": "sub", "*": "mul"}
        if op in simple:
            fn.emit(f"{r} = {simple[op]} {nsw}{ty} {a}, {b}")
            return r
        if op in ("min", "max"):
            name = f"llvm.{'s' if signed else 'u'}{op}.{ty}"
            callee = self.ctx.mod.intrinsic(name, ty, [ty, ty])
            fn.emit(f"{r} = call {ty} {callee}({ty} {a}, {ty} {b})")
            return r
        if op == "pow":
            a64 = self.conversions.convert(a, dt, "int64" if signed else "uint64")
            b64 = self.conversions.convert(b, dt, "int64" if signed else "uint64")
            p = fn.tmp("i")
            fn.emit(f"{p} = call i64 @phasec.ipow(i64 {a64}, i64 {b64})")
            return self.conversions.convert(p, "int64", dt) if BITS[dt] != 64 else p
        # Division family: the hardware never traps, on a zero divisor (the
        # check above ended the kernel; an unchecked one is in an unused
        # Select branch: result 0) or on INT_MIN / -1 (the result wraps).
        isz = fn.tmp("i")
        fn.emit(f"{isz} = icmp eq {ty} {b}, 0")
        if signed:
            ism1 = fn.tmp("i")
            fn.emit(f"{ism1} = icmp eq {ty} {b}, -1")
            bad = fn.tmp("i")
            fn.emit(f"{bad} = or i1 {isz}, {ism1}")
        else:
            bad = isz
        bs = fn.tmp("i")
        fn.emit(f"{bs} = select i1 {bad}, {ty} 1, {ty} {b}")
        q = fn.tmp("i")
        rem = fn.tmp("i")
        fn.emit(f"{q} = {'sdiv' if signed else 'udiv'} {ty} {a}, {bs}")
        fn.emit(f"{rem} = {'srem' if signed else 'urem'} {ty} {a}, {bs}")
        if op == "%":
            if not signed:
                return rem  # rem is 0 when b == 0
            # floormod: shift a nonzero remainder whose sign differs from b's
            adj = self._floor_adjust(ty, rem, bs)
            add = fn.tmp("i")
            fn.emit(f"{add} = select i1 {adj}, {ty} {bs}, {ty} 0")
            fn.emit(f"{r} = add {ty} {rem}, {add}")
            return r
        if signed and op == "//":
            adj = self._floor_adjust(ty, rem, bs)
            z = fn.tmp("i")
            fn.emit(f"{z} = zext i1 {adj} to {ty}")
            q2 = fn.tmp("i")
            fn.emit(f"{q2} = sub {ty} {q}, {z}")
            q = q2
        if signed:
            neg = fn.tmp("i")
            fn.emit(f"{neg} = sub {ty} 0, {a}")
            q3 = fn.tmp("i")
            fn.emit(f"{q3} = select i1 {ism1}, {ty} {neg}, {ty} {q}")
            q = q3
        fn.emit(f"{r} = select i1 {isz}, {ty} 0, {ty} {q}")
        return r

    def _floor_adjust(self, ty: str, rem: str, b: str) -> str:
        fn = self.ctx.fn
        nz = fn.tmp("i")
        fn.emit(f"{nz} = icmp ne {ty} {rem}, 0")
        x = fn.tmp("i")
        fn.emit(f"{x} = xor {ty} {rem}, {b}")
        sgn = fn.tmp("i")
        fn.emit(f"{sgn} = icmp slt {ty} {x}, 0")
        adj = fn.tmp("i")
        fn.emit(f"{adj} = and i1 {nz}, {sgn}")
        return adj


def dot4_term(n: tir.BinaryOp) -> tuple[Any, tir.Call] | None:
    """(acc, the dot4 call) of ``acc + T.dot4_u8s8(a, b)`` (either order) in
    int32, else None."""
    if n.dtype != "int32":
        return None
    for acc, dot in ((n.lhs, n.rhs), (n.rhs, n.lhs)):
        if (type(dot) is tir.Call and dot.name == "dot4_u8s8" and dot.dtype == "int32"
                and acc.dtype == "int32"):
            return acc, dot
    return None


def _same_value(a: tir.PrimExpr, b: tir.PrimExpr) -> bool:
    """Whether ``a`` and ``b`` are the same expression of the same variables
    and buffers (not merely equal up to renaming, as structural_equal is)."""
    if a is b:
        return True
    t = type(a)
    if t is not type(b):
        return False
    if t is tir.IntImm or t is tir.FloatImm:
        return a.value == b.value and a.dtype == b.dtype
    if t is tir.BufferLoad:
        if a.buffer is not b.buffer:
            return False
    elif t is tir.BinaryOp:
        if a.op != b.op:
            return False
    elif t is tir.Cast:
        if a.dtype != b.dtype:
            return False
    elif t is tir.Call:
        if a.name != b.name:
            return False
    else:  # a Var (by identity, above) or anything else
        return False
    ka, kb = tir.expr_children(a), tir.expr_children(b)
    return len(ka) == len(kb) and all(_same_value(x, y) for x, y in zip(ka, kb))

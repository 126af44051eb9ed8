"""Types, conversions, expressions and arithmetic of the kernel code
generator: a mixin of the per-kernel codegen in
:mod:`phasec.backend.llvm.codegen`, as :mod:`.statements` is for statements.

Expressions are emitted iteratively (no Python recursion on deep trees);
``Select`` and ``and``/``or`` branch lazily when an operand reads memory, so
padding guards such as ``Select(i > 0, A[i - 1], 0)`` never read out of
bounds. Integer division follows TVM: ``/`` truncates, ``//`` and ``%``
floor; a zero divisor yields 0 and ``INT_MIN / -1`` wraps instead of
trapping.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from phasec.errors import counted
from phasec.ir import tir
from phasec.ir.node import Node
from phasec.backend.llvm._base import (
    _BITS, _FCMP, _ICMP, _INTRINSIC_SUFFIX, _LLVM_TYPE, _bad_index, _float_literal, _int_literal,
    _is_float, _is_intlike, _is_signed,
)

__all__ = ["ExpressionCodegen"]


class ExpressionCodegen:
    """Emits the scalar expressions of a kernel (mixed into ``_KernelCodegen``)."""

    # ======================================================================
    # Types
    # ======================================================================
    def dtype_of(self, e: Any) -> str:
        """The dtype of the value the codegen produces for ``e`` (checked)."""
        return self._memoized(e, self.types, self._infer_one)

    def _memoized(self, e: Any, memo: dict[int, Any], compute: Callable[[Any], Any]) -> Any:
        """``compute(n)`` for ``e`` and each of its sub-expressions not in
        ``memo`` yet, children first; iterative (no Python recursion on deep
        trees)."""
        r = memo.get(id(e))
        if r is not None:
            return r
        stack: list[tuple[Any, bool]] = [(e, False)]
        while stack:
            n, ready = stack.pop()
            if id(n) in memo:
                continue
            if ready:
                memo[id(n)] = compute(n)
                continue
            if not isinstance(n, tir.PrimExpr):
                raise self.error(f"expected a scalar expression, got {type(n).__name__}", n)
            stack.append((n, True))
            stack.extend((k, False) for k in tir.expr_children(n) if id(k) not in memo)
        return memo[id(e)]

    def _infer_one(self, n: tir.PrimExpr) -> str:
        t = type(n)
        memo = self.types
        if t is tir.IntImm or t is tir.FloatImm or t is tir.Var:
            return self.check_dtype(n.dtype, f"{t.__name__} {getattr(n, 'name', '')}".strip(), n)
        if t is tir.BufferLoad:
            for i in n.indices:
                if _is_float(memo[id(i)]) or memo[id(i)] == "bool":
                    raise self.error(_bad_index(n.buffer.name, memo[id(i)]), n)
            return self.check_dtype(n.buffer.dtype, f"buffer '{n.buffer.name}'", n)
        if t is tir.BinaryOp:
            lt, rt = memo[id(n.lhs)], memo[id(n.rhs)]
            if n.op in tir.LOGIC_OPS:
                return "bool"
            ot = self._unify(n.lhs, lt, n.rhs, rt, n)
            if n.op in tir.ARITH_OPS and ot == "bool":
                ot = "int32"  # C-style promotion of bool arithmetic
            self.optypes[id(n)] = ot
            return "bool" if n.op in tir.COMPARE_OPS else ot
        if t is tir.Not:
            return "bool"
        if t is tir.Cast:
            return self.check_dtype(n.dtype, "cast target", n)
        if t is tir.Select:
            return self._unify(n.true_value, memo[id(n.true_value)], n.false_value,
                               memo[id(n.false_value)], n)
        if t is tir.Call:
            arity = tir.INTRINSICS.get(n.name)
            if arity is None:
                raise self.error(f"unknown intrinsic '{n.name}' (known: "
                                 f"{', '.join(sorted(tir.INTRINSICS))})", n)
            if len(n.args) != arity:
                raise self.error(f"intrinsic '{n.name}' takes {counted(arity, 'argument')}, "
                                 f"got {len(n.args)}", n)
            at = memo[id(n.args[0])]
            if n.name in tir.BOOL_INTRINSICS:
                return "bool"
            if n.name in tir.BIT_INTRINSICS:
                types = [memo[id(a)] for a in n.args]
                if not all(_is_intlike(t) for t in types):
                    raise self.error(f"{n.name} needs integer or bool arguments, got "
                                     f"{', '.join(types)}", n)
                if len(types) == 1:
                    return types[0]
                return self._unify(n.args[0], types[0], n.args[1], types[1], n)
            if n.name in ("atan2", "fmod"):
                bt = memo[id(n.args[1])]
                if not (_is_float(at) and _is_float(bt)):
                    raise self.error(f"{n.name} needs float arguments; insert a Cast", n)
                return self._unify(n.args[0], at, n.args[1], bt, n)
            if n.name == "checked_index":
                for a in n.args:
                    if not _is_intlike(memo[id(a)]):
                        raise self.error("checked_index takes integer index and extent", n)
                return "int64"
            if _is_float(at):
                if n.dtype and n.dtype != at:
                    self.check_dtype(n.dtype, f"result of '{n.name}'", n)
                    if not _is_float(n.dtype):
                        raise self.error(f"intrinsic '{n.name}' on {at} cannot produce "
                                         f"{n.dtype}", n)
                    return n.dtype
                return at
            if n.name in ("fabs", "floor", "ceil", "round", "trunc"):
                return "int32" if at == "bool" else at
            raise self.error(f"intrinsic '{n.name}' needs a float argument, got {at}; insert "
                             "a Cast", n)
        raise self.error(f"unsupported expression node {t.__name__}", n)

    def _unify(self, a: Any, ta: str, b: Any, tb: str, where: Any) -> str:
        if ta == tb:
            return ta
        if _is_intlike(ta) and _is_intlike(tb):
            if ta == "bool":
                return tb
            if tb == "bool":
                return ta
            wa, wb = _BITS[ta], _BITS[tb]
            if wa != wb:
                return ta if wa > wb else tb
            return ta if not _is_signed(ta) else tb  # same width: unsigned wins, as in C
        a_imm = isinstance(a, (tir.IntImm, tir.FloatImm))
        b_imm = isinstance(b, (tir.IntImm, tir.FloatImm))
        if a_imm and not b_imm:
            return tb
        if b_imm and not a_imm:
            return ta
        if a_imm and b_imm:
            if _is_float(ta) and _is_float(tb):
                return ta if _BITS[ta] >= _BITS[tb] else tb
            return ta if _is_float(ta) else tb
        what = getattr(where, "op", None) or type(where).__name__
        raise self.error(f"dtype mismatch in '{what}': {ta} and {tb}; insert a Cast", where)

    def reads_memory(self, e: Any) -> bool:
        """Does evaluating ``e`` load from a buffer?"""
        memo = self.loads
        return self._memoized(e, memo, lambda n: type(n) is tir.BufferLoad or any(
            memo[id(k)] for k in tir.expr_children(n)))

    # ======================================================================
    # Conversions
    # ======================================================================
    def convert(self, op: str, src: str, dst: str) -> str:
        """Convert ``op`` of dtype ``src`` to ``dst`` (C cast semantics)."""
        if src == dst:
            return op
        fn = self.fn
        st, dt = _LLVM_TYPE[src], _LLVM_TYPE[dst]
        r = fn.tmp("cv")
        if dst == "bool":
            if _is_float(src):
                fn.emit(f"{r} = fcmp une {st} {op}, {_float_literal(0.0, src)}")
            else:
                fn.emit(f"{r} = icmp ne {st} {op}, 0")
            return r
        if _is_intlike(src) and _is_intlike(dst):
            sb, db = _BITS[src], _BITS[dst]
            if sb == db:
                return op
            if sb < db:
                ext = "sext" if _is_signed(src) else "zext"
                fn.emit(f"{r} = {ext} {st} {op} to {dt}")
            else:
                fn.emit(f"{r} = trunc {st} {op} to {dt}")
            return r
        if _is_intlike(src):  # -> float
            conv = "sitofp" if _is_signed(src) else "uitofp"
            fn.emit(f"{r} = {conv} {st} {op} to {dt}")
            return r
        if _is_intlike(dst):  # float -> int; freeze: out-of-range gives some value, not poison
            conv = "fptosi" if _is_signed(dst) else "fptoui"
            raw = fn.tmp("cv")
            fn.emit(f"{raw} = {conv} {st} {op} to {dt}")
            fn.emit(f"{r} = freeze {dt} {raw}")
            return r
        if src == "float64" and dst == "float16":
            return self._f64_to_f16(op)
        conv = "fpext" if _BITS[dst] > _BITS[src] else "fptrunc"
        fn.emit(f"{r} = {conv} {st} {op} to {dt}")
        return r

    def _f64_to_f16(self, op: str) -> str:
        """double -> half, correctly rounded, through float.

        LLVM lowers a direct ``fptrunc double to half`` to a call of
        ``__truncdfhf2``, a compiler-rt function the JIT cannot resolve (the
        call jumps to address 0). Rounding to float first would round twice;
        rounding to float *to odd* (truncate, then set the last bit when
        inexact) keeps enough information for the second rounding to be the
        correct one (float has more than 11 + 2 mantissa bits).
        """
        fn = self.fn
        fabs = self.mod.intrinsic("llvm.fabs.f64", "double", ["double"])
        f, back, af, ad, away = (fn.tmp("h") for _ in range(5))
        fn.emit(f"{f} = fptrunc double {op} to float")
        fn.emit(f"{back} = fpext float {f} to double")
        fn.emit(f"{af} = call double {fabs}(double {back})")
        fn.emit(f"{ad} = call double {fabs}(double {op})")
        fn.emit(f"{away} = fcmp ogt double {af}, {ad}")  # rounded away from zero
        bits, down, trunc, inexact, odd, res, rf, r = (fn.tmp("h") for _ in range(8))
        fn.emit(f"{bits} = bitcast float {f} to i32")
        fn.emit(f"{down} = sub i32 {bits}, 1")  # one ulp towards zero (sign-magnitude)
        fn.emit(f"{trunc} = select i1 {away}, i32 {down}, i32 {bits}")
        fn.emit(f"{inexact} = fcmp one double {back}, {op}")  # false for NaN
        fn.emit(f"{odd} = or i32 {trunc}, 1")
        fn.emit(f"{res} = select i1 {inexact}, i32 {odd}, i32 {trunc}")
        fn.emit(f"{rf} = bitcast i32 {res} to float")
        fn.emit(f"{r} = fptrunc float {rf} to half")
        return r

    def emit_value_as(self, e: Any, dst: str, what: str) -> str:
        """Emit ``e`` converted to ``dst``, allowing only implicit conversions
        between integer types (and of literals)."""
        src = self.dtype_of(e)
        if src != dst:
            implicit = (_is_intlike(src) and _is_intlike(dst) and dst != "bool") or isinstance(
                e, (tir.IntImm, tir.FloatImm))
            if not implicit:
                raise self.error(f"cannot use a {src} value as {what} of dtype {dst} without a "
                                 "Cast", e)
        return self.convert(self.emit_expr(e), src, dst)

    def emit_cond(self, e: Any) -> str:
        return self.convert(self.emit_expr(e), self.dtype_of(e), "bool")

    def to_i64(self, op: str, dtype: str) -> str:
        return self.convert(op, dtype, "int64") if dtype != "uint64" else op

    # ======================================================================
    # Expressions
    # ======================================================================
    def emit_expr(self, root: Any) -> str:
        """Emit ``root``; the result has dtype ``self.dtype_of(root)``."""
        self.dtype_of(root)
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
            if tt is tir.IntImm:
                vals.append(_int_literal(int(t.value), t.dtype) if _is_intlike(t.dtype)
                            else _float_literal(float(t.value), t.dtype))
            elif tt is tir.FloatImm:
                vals.append(_float_literal(float(t.value), t.dtype) if _is_float(t.dtype)
                            else _int_literal(int(t.value), t.dtype))
            elif tt is tir.Var:
                b = self.vars.get(id(t))
                if b is None:
                    raise self.error(f"variable '{t.name}' is used but not defined (not a "
                                     "parameter, shape variable, loop variable, block axis or "
                                     "let binding in scope)", t)
                vals.append(b[0])
            elif tt is tir.BinaryOp and t.op in tir.LOGIC_OPS and self.reads_memory(t.rhs):
                self._lazy_logic(t, tasks)
            elif tt is tir.Select and (self.reads_memory(t.true_value)
                                      or self.reads_memory(t.false_value)):
                self._lazy_select(t, tasks)
            else:
                tasks.append((self._apply, t))
                tasks.extend(reversed(tir.expr_children(t)))
        assert len(vals) == 1
        return vals[0]

    def _apply(self, n: Any, vals: list[str]) -> None:
        kids = tir.expr_children(n)
        k = len(kids)
        args = vals[len(vals) - k:]
        del vals[len(vals) - k:]
        t = type(n)
        if t is tir.BinaryOp:
            vals.append(self._binop(n, args[0], args[1]))
        elif t is tir.BufferLoad:
            vals.append(self._load(n, args))
        elif t is tir.Cast:
            vals.append(self.convert(args[0], self.dtype_of(n.value), n.dtype))
        elif t is tir.Not:
            c = self.convert(args[0], self.dtype_of(n.value), "bool")
            r = self.fn.tmp("not")
            self.fn.emit(f"{r} = xor i1 {c}, true")
            vals.append(r)
        elif t is tir.Select:
            rt = self.dtype_of(n)
            c = self.convert(args[0], self.dtype_of(n.condition), "bool")
            a = self.convert(args[1], self.dtype_of(n.true_value), rt)
            b = self.convert(args[2], self.dtype_of(n.false_value), rt)
            r = self.fn.tmp("sel")
            self.fn.emit(f"{r} = select i1 {c}, {_LLVM_TYPE[rt]} {a}, {_LLVM_TYPE[rt]} {b}")
            vals.append(r)
        elif t is tir.Call and n.name == "checked_index":
            vals.append(self._checked_index(n, args[0], args[1]))
        elif t is tir.Call and n.name == "atan2":
            vals.append(self._atan2(n, args[0], args[1]))
        elif t is tir.Call and n.name == "fmod":
            vals.append(self._fmod(n, args[0], args[1]))
        elif t is tir.Call and n.name in tir.BIT_INTRINSICS:
            vals.append(self._bit_op(n, args))
        elif t is tir.Call:
            vals.append(self._call(n, args[0]))
        else:  # pragma: no cover - rejected by dtype_of
            raise self.error(f"unsupported expression node {t.__name__}", n)

    def _lazy_select(self, n: tir.Select, tasks: list[Any]) -> None:
        fn = self.fn
        rt = self.dtype_of(n)
        ty = _LLVM_TYPE[rt]
        lt, lf, lm = fn.label("sel.t"), fn.label("sel.f"), fn.label("sel.m")
        state: dict[str, str] = {}

        def branch(vals: list[str]) -> None:
            c = self.convert(vals.pop(), self.dtype_of(n.condition), "bool")
            fn.emit(f"br i1 {c}, label %{lt}, label %{lf}")
            fn.start(lt)

        def after_true(vals: list[str]) -> None:
            state["t"] = self.convert(vals.pop(), self.dtype_of(n.true_value), rt)
            state["tb"] = fn.block
            fn.emit(f"br label %{lm}")
            fn.start(lf)

        def after_false(vals: list[str]) -> None:
            f = self.convert(vals.pop(), self.dtype_of(n.false_value), rt)
            fb = fn.block
            fn.emit(f"br label %{lm}")
            fn.start(lm)
            r = fn.tmp("sel")
            fn.emit(f"{r} = phi {ty} [ {state['t']}, %{state['tb']} ], [ {f}, %{fb} ]")
            vals.append(r)

        tasks.extend([after_false, n.false_value, after_true, n.true_value, branch, n.condition])

    def _lazy_logic(self, n: tir.BinaryOp, tasks: list[Any]) -> None:
        """``a and b`` / ``a or b`` evaluating ``b`` only when needed."""
        fn = self.fn
        lr, lm = fn.label("sc.rhs"), fn.label("sc.m")
        is_and = n.op == "and"
        state: dict[str, str] = {}

        def branch(vals: list[str]) -> None:
            c = self.convert(vals.pop(), self.dtype_of(n.lhs), "bool")
            state["lb"] = fn.block
            if is_and:
                fn.emit(f"br i1 {c}, label %{lr}, label %{lm}")
            else:
                fn.emit(f"br i1 {c}, label %{lm}, label %{lr}")
            fn.start(lr)

        def merge(vals: list[str]) -> None:
            c = self.convert(vals.pop(), self.dtype_of(n.rhs), "bool")
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
        fn = self.fn
        op = n.op
        if op in tir.LOGIC_OPS:
            a = self.convert(a, self.dtype_of(n.lhs), "bool")
            b = self.convert(b, self.dtype_of(n.rhs), "bool")
            r = fn.tmp(op)
            fn.emit(f"{r} = {op} i1 {a}, {b}")
            return r
        ot = self.optypes[id(n)]
        a = self.convert(a, self.dtype_of(n.lhs), ot)
        b = self.convert(b, self.dtype_of(n.rhs), ot)
        ty = _LLVM_TYPE[ot]
        if op in tir.COMPARE_OPS:
            r = fn.tmp("cmp")
            if _is_float(ot):
                fn.emit(f"{r} = fcmp {_FCMP[op]} {ty} {a}, {b}")
            else:
                pred = _ICMP[op]
                if pred not in ("eq", "ne"):
                    pred = ("s" if _is_signed(ot) else "u") + pred
                fn.emit(f"{r} = icmp {pred} {ty} {a}, {b}")
            return r
        if _is_float(ot):
            return self._float_arith(op, ot, a, b)
        return self._int_arith(op, ot, a, b)

    def _float_arith(self, op: str, dt: str, a: str, b: str) -> str:
        fn = self.fn
        ty = _LLVM_TYPE[dt]
        fl = self.mod.options.float_flags
        sfx = _INTRINSIC_SUFFIX[dt]
        r = fn.tmp("f")
        simple = {"+": "fadd", "-": "fsub", "*": "fmul", "/": "fdiv"}
        if op in simple:
            fn.emit(f"{r} = {simple[op]} {fl}{ty} {a}, {b}")
        elif op in ("min", "max"):
            name = f"llvm.{'minimum' if op == 'min' else 'maximum'}.{sfx}"
            callee = self.mod.intrinsic(name, ty, [ty, ty])
            fn.emit(f"{r} = call {ty} {callee}({ty} {a}, {ty} {b})")
        elif op == "pow":
            callee = self.mod.intrinsic(f"llvm.pow.{sfx}", ty, [ty, ty])
            fn.emit(f"{r} = call {fl}{ty} {callee}({ty} {a}, {ty} {b})")
        elif op == "//":
            q = fn.tmp("f")
            fn.emit(f"{q} = fdiv {fl}{ty} {a}, {b}")
            callee = self.mod.intrinsic(f"llvm.floor.{sfx}", ty, [ty])
            fn.emit(f"{r} = call {ty} {callee}({ty} {q})")
        elif op == "%":
            # numpy's float mod: fmod, then shift into the divisor's sign.
            zero = _float_literal(0.0, dt)
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
            raise self.error(f"operator '{op}' is not supported on floats")
        return r

    def _int_arith(self, op: str, dt: str, a: str, b: str) -> str:
        fn = self.fn
        ty = _LLVM_TYPE[dt]
        signed = _is_signed(dt)
        nsw = "nsw " if signed else ""
        r = fn.tmp("i")
        simple = {"+": "add", "-": "sub", "*": "mul"}
        if op in simple:
            fn.emit(f"{r} = {simple[op]} {nsw}{ty} {a}, {b}")
            return r
        if op in ("min", "max"):
            name = f"llvm.{'s' if signed else 'u'}{op}.{ty}"
            callee = self.mod.intrinsic(name, ty, [ty, ty])
            fn.emit(f"{r} = call {ty} {callee}({ty} {a}, {ty} {b})")
            return r
        if op == "pow":
            a64 = self.convert(a, dt, "int64" if signed else "uint64")
            b64 = self.convert(b, dt, "int64" if signed else "uint64")
            p = fn.tmp("i")
            fn.emit(f"{p} = call i64 @phasec.ipow(i64 {a64}, i64 {b64})")
            return self.convert(p, "int64", dt) if _BITS[dt] != 64 else p
        # Division family: never trap on a zero divisor (result 0) or on
        # INT_MIN / -1 (result wraps), unlike raw sdiv/udiv.
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
        fn = self.fn
        nz = fn.tmp("i")
        fn.emit(f"{nz} = icmp ne {ty} {rem}, 0")
        x = fn.tmp("i")
        fn.emit(f"{x} = xor {ty} {rem}, {b}")
        sgn = fn.tmp("i")
        fn.emit(f"{sgn} = icmp slt {ty} {x}, 0")
        adj = fn.tmp("i")
        fn.emit(f"{adj} = and i1 {nz}, {sgn}")
        return adj

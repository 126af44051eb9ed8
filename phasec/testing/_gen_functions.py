"""Statements of the program generator that make and call functions.

A mixin of :class:`phasec.testing._gen.FuncGen`: a nested function over
captured variables and its call, a nested function returning a nested
function, calls of module-level helpers (created on demand,
shape-polymorphic when their dims are generalized to symbolic ones), and
bounded recursion (a module-level or nested ``loop(i, acc)`` that calls
itself ``i`` times).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st

from phasec.ir import tir
from phasec.script.builder import NameTable
from phasec.ir.expr import Call, Constant, Expr, Function, GlobalVar, If, SeqExpr, Var, VarBinding
from phasec.op.infer import infer_struct_info
from phasec.ir.node import set_field
from phasec.op import call_op, op_expr
from phasec.ir.struct_info import FuncStructInfo, StructInfo, TensorStructInfo, TupleStructInfo
from phasec.testing._values import (
    BOOL, FLOAT, FUNC, INT, INT_INPUT_RANGE, Val, const_dim, dims_equal, hull, within,
)

__all__ = ["FunctionStatements", "Helper", "PARAM_NAMES", "syms_of"]

#: parameter names, in order, of ``main`` and of generated helpers
PARAM_NAMES = ("x", "y", "z", "w", "u")


@dataclass(eq=False)
class Helper:
    """A module-level function the generator made and may call again."""

    name: str
    params: list[StructInfo]
    kinds: list[str]
    ivs: list[tuple[float, float]]
    ret_kind: str
    ret_iv: tuple[float, float]
    ret_fields: tuple = ()
    pure: bool = True  # callers see it as pure (pure or force_pure)
    loop: bool = False  # a self-recursive loop(i, acc)


class FunctionStatements:
    """The function-making statements of ``FuncGen`` (mixed into it)."""

    def _stmt_call(self) -> bool:
        return self._call_helper(loop=False)

    def _stmt_loop(self) -> bool:
        if not self.cfg.control_flow:
            return False
        counter = self.counter()
        if counter is None:
            return False
        if (self.cfg.closures and not self.in_df and self.nest < self.cfg.max_depth
                and self.draw(st.booleans())):
            return self._local_loop(counter)
        return self._call_helper(loop=True, counter=counter)

    def _stmt_closure(self) -> bool:
        """A nested function over captured variables, then a call of it."""
        if self.in_df or not self.cfg.closures or self.nest >= self.cfg.max_depth:
            return False
        args = self._pick_args()
        sub = type(self)(self.mg, self.name, parent=self, captured=self.nonlocal_visible(),
                      nest=self.nest + 1)
        for a in args:
            sub.add_param("a", a.sinfo, a.kind, (a.lo, a.hi))
        body = sub.gen_body(3)
        func = Function(sub.params, body, None, True, {})
        fval = self._bind_function(func, sub.ret_val, "f")
        self._call_local(fval, args)
        return True

    def _stmt_factory(self) -> bool:
        """A nested function that returns a nested function; call both."""
        if (self.in_df or not self.cfg.closures or self.nest + 1 >= self.cfg.max_depth):
            return False
        outer_args = self._pick_args(1)
        inner_args = self._pick_args(1)
        maker = type(self)(self.mg, self.name, parent=self, captured=self.nonlocal_visible(),
                        nest=self.nest + 1)
        for a in outer_args:
            maker.add_param("a", a.sinfo, a.kind, (a.lo, a.hi))
        inner = type(self)(self.mg, self.name, parent=maker, captured=maker.nonlocal_visible(),
                        nest=self.nest + 2)
        for a in inner_args:
            inner.add_param("b", a.sinfo, a.kind, (a.lo, a.hi))
        inner_func = Function(inner.params, inner.gen_body(2), None, True, {})
        made = maker._bind_function(inner_func, inner.ret_val, "g")
        maker.close_block()
        maker_func = Function(maker.params, SeqExpr(maker.blocks, made.expr), None, True, {})
        mval = self._bind_function(maker_func, made, "make")
        fval = self._call_local(mval, outer_args, hint="h")
        self._call_local(fval, inner_args)
        return True

    def _pick_args(self, most: int = 2) -> list[Val]:
        vals = self.nonlocal_visible()
        count = self.draw(st.integers(1, most))
        return [self.pick(vals) for _ in range(count)]

    def _bind_function(self, func: Function, ret: Val, hint: str) -> Val:
        var, _ = self._bind(func, func.struct_info, hint)
        fval = Val(var, FUNC, fn=ret)
        self.scope.append(fval)
        return fval

    def _call_local(self, fval: Val, args: Sequence[Val], hint: str = "v") -> Val:
        call = Call(fval.expr, [a.expr for a in args])
        set_field(call, "struct_info", infer_struct_info(call, self.mg.ctx))
        ret: Val = fval.fn
        if ret.kind == FUNC:
            var, _ = self._bind(call, call.struct_info, hint)
            val = Val(var, FUNC, fn=ret.fn)
            self.scope.append(val)
            return val
        return self.emit(call, ret.kind, (ret.lo, ret.hi), fields=ret.fields)

    def _local_loop(self, counter: Val) -> bool:
        """A nested function calling itself ``counter`` times, then a call of it."""
        accs = self.nonlocal_visible(kinds=(FLOAT,))
        if not accs:
            return False
        acc = self.pick(accs)
        sub = type(self)(self.mg, self.name, parent=self, captured=self.nonlocal_visible(),
                      nest=self.nest + 1)
        i = sub.add_param("i", counter.sinfo, INT, INT_INPUT_RANGE)
        a = sub.add_param("acc", acc.sinfo, FLOAT, (acc.lo, acc.hi))
        fsinfo = FuncStructInfo([counter.sinfo, acc.sinfo], acc.sinfo, True)
        # the function refers to itself: its variable exists before its body
        fvar = Var(self.names.fresh("loop"), fsinfo)
        body, step_iv = sub._loop_body(i, a, fvar)
        func = Function(sub.params, body, acc.sinfo, True, {})
        self.cur.append(VarBinding(fvar, func))
        self.scope.append(Val(fvar, FUNC, fn=Val(fvar, FLOAT)))
        call = Call(fvar, [counter.expr, acc.expr], struct_info=acc.sinfo)
        self.emit(call, FLOAT, hull((acc.lo, acc.hi), step_iv))
        return True

    def _loop_body(self, i: Val, acc: Val, callee: Expr) -> tuple[SeqExpr, tuple[float, float]]:
        """``if i <= 0: acc else: callee(i - 1, step(acc))`` as a function body."""
        stop = Call(_op("less_equal"), [i.expr, Constant(np.zeros((), "int64"))])
        stop_v = self.emit(_infer(stop), BOOL, (0, 1), hint="stop")
        self.close_block()
        base = SeqExpr([], acc.expr)
        other = self.branch()
        j = other.emit(call_op("relax.subtract", i.expr, Constant(np.ones((), "int64"))),
                       INT, (i.lo - 1, i.hi), hint="j")
        step_name = other.pick(["tanh", "sigmoid", "clip"])
        if step_name == "clip":
            step = call_op("relax.clip", acc.expr, min=-1.0, max=1.0)
        else:
            step = call_op("relax." + step_name, acc.expr)
        step_iv = (-1.0, 1.0) if step_name != "sigmoid" else (0.0, 1.0)
        nxt = other.emit(step, FLOAT, step_iv, hint="nxt")
        rec = Call(callee, [j.expr, nxt.expr], struct_info=acc.sinfo)
        res = other.emit(rec, FLOAT, hull((acc.lo, acc.hi), step_iv), hint="rec")
        other.close_block()
        branch = SeqExpr(other.blocks, res.expr)
        value = If(stop_v.expr, base, branch, struct_info=acc.sinfo)
        out = self.emit(value, FLOAT, hull((acc.lo, acc.hi), step_iv), hint="res")
        self.close_block()
        return SeqExpr(self.blocks, out.expr), step_iv

    def _call_helper(self, loop: bool, counter: Val | None = None) -> bool:
        mg = self.mg
        caller_pure = self.mode == "pure" or self.in_df
        options: list[Any] = []
        for h in mg.helpers:
            if h.loop != loop or (caller_pure and not h.pure):
                continue
            args = self._match_args(h, counter)
            if args is not None:
                options.append((h, args))
        if mg.can_add_function() and self.nest == 0 and (not loop or self.cfg.control_flow):
            options.append("new")
        if not options:
            return False
        choice = self.pick(options)
        if choice == "new":
            if loop:
                accs = self.visible(kinds=(FLOAT,))
                if not accs:
                    return False
                args = [counter, self.pick(accs)]
                helper = self._new_loop_helper(args[1])
            else:
                args = self._pick_args_any()
                helper = self._new_helper(args, caller_pure)
        else:
            helper, args = choice
        call = Call(GlobalVar(helper.name), [a.expr for a in args])
        set_field(call, "struct_info", infer_struct_info(call, mg.ctx))
        if helper.loop:
            iv = hull((args[1].lo, args[1].hi), helper.ret_iv)
        else:
            iv = helper.ret_iv
        self.emit(call, helper.ret_kind, iv, fields=helper.ret_fields)
        return True

    def _pick_args_any(self) -> list[Val]:
        vals = self.visible()
        count = self.draw(st.integers(1, 2))
        return [self.pick(vals) for _ in range(count)]

    def _match_args(self, h: Helper, counter: Val | None) -> list[Val] | None:
        """Values in scope that fit the helper's parameters (first fit, or None)."""
        bound: dict[tir.Var, Any] = {}
        args: list[Val] = []
        for k, (sinfo, kind, iv) in enumerate(zip(h.params, h.kinds, h.ivs)):
            if h.loop and k == 0:
                args.append(counter)
                continue
            found = None
            for v in self.visible(kinds=(kind,)):
                if v.dtype != sinfo.dtype or v.rank != len(sinfo.shape):
                    continue
                if not h.loop and not within((v.lo, v.hi), iv):
                    continue
                trial = dict(bound)
                if _bind_dims(sinfo.shape, v.shape, trial):
                    found = v
                    bound = trial
                    break
            if found is None:
                return None
            args.append(found)
        return args

    def _generalize(self, sinfos: Sequence[StructInfo]) -> list[StructInfo]:
        """Parameter struct info for a helper taking these arguments: the
        caller's symbolic dims become the helper's own, and constant dims may
        become symbolic (a shape-polymorphic helper)."""
        names = NameTable()
        mapping: dict[int, tir.Var] = {}
        out = []
        for sinfo in sinfos:
            dims = []
            for d in sinfo.shape:
                if const_dim(d) is None:
                    sym = mapping.get(id(d))
                    if sym is None:
                        sym = mapping[id(d)] = tir.Var(names.fresh(getattr(d, "name", "n")))
                    dims.append(sym)
                elif self.cfg.symbolic and self.draw(st.booleans()):
                    dims.append(tir.Var(names.fresh("m")))
                else:
                    dims.append(d)
            out.append(TensorStructInfo(tuple(dims), sinfo.dtype))
        return out

    def _new_helper(self, args: Sequence[Val], caller_pure: bool) -> Helper:
        mg = self.mg
        modes = ["pure", "force_pure"] if caller_pure else ["pure", "impure", "force_pure"]
        mode = self.pick(modes)
        name = mg.global_names.fresh("helper")
        mg.pending += 1
        gen = type(self)(mg, name, mode=mode)
        sinfos = self._generalize([a.sinfo for a in args])
        for a, sinfo in zip(args, sinfos):
            gen.add_param(PARAM_NAMES[len(gen.params) % 5], sinfo, a.kind, (a.lo, a.hi))
        body = gen.gen_body(max(2, self.cfg.max_bindings // 2))
        private = self.draw(st.booleans())
        func = gen.finish_function(body, {} if private else {"global_symbol": name})
        mg.pending -= 1
        mg.add_function(name, func)
        ret = gen.ret_val
        helper = Helper(name, list(sinfos), [a.kind for a in args], [(a.lo, a.hi) for a in args],
                         ret.kind, (ret.lo, ret.hi), ret.fields, pure=mode != "impure")
        mg.helpers.append(helper)
        return helper

    def _new_loop_helper(self, acc: Val) -> Helper:
        mg = self.mg
        name = mg.global_names.fresh("loop")
        gen = type(self)(mg, name)
        counter_sinfo = TensorStructInfo((), "int64")
        acc_sinfo = self._generalize([acc.sinfo])[0]
        i = gen.add_param("i", counter_sinfo, INT, INT_INPUT_RANGE)
        a = gen.add_param("acc", acc_sinfo, FLOAT, (acc.lo, acc.hi))
        # the recursive call needs the callee's signature before it exists
        mg.globals[name] = FuncStructInfo([counter_sinfo, acc_sinfo], acc_sinfo, True)
        body, step_iv = gen._loop_body(i, a, GlobalVar(name))
        func = Function(gen.params, body, acc_sinfo, True, {})
        mg.add_function(name, func)
        helper = Helper(name, [counter_sinfo, acc_sinfo], [INT, FLOAT],
                         [INT_INPUT_RANGE, (-1e9, 1e9)], FLOAT, step_iv, loop=True)
        mg.helpers.append(helper)
        return helper


def _op(name: str) -> Any:
    return op_expr(name)


def _infer(call: Call) -> Call:
    set_field(call, "struct_info", infer_struct_info(call))
    return call


def _bind_dims(params: Sequence[Any], actual: Sequence[Any], bound: dict) -> bool:
    """Can a parameter of shape ``params`` take an argument of shape ``actual``?"""
    for p, a in zip(params, actual):
        if const_dim(p) is not None:
            if const_dim(a) != const_dim(p):
                return False
        elif p in bound:
            if not dims_equal(bound[p], a):
                return False
        else:
            bound[p] = a
    return True


def syms_of(sinfo: Any) -> set:
    out: set = set()
    stack = [sinfo]
    while stack:
        s = stack.pop()
        if isinstance(s, TensorStructInfo) and s.shape is not None:
            for d in s.shape:
                stack.append(d)
        elif isinstance(s, TupleStructInfo):
            stack.extend(s.fields)
        elif isinstance(s, tir.Var):
            out.add(s)
        elif isinstance(s, tir.BinaryOp):
            stack.extend((s.lhs, s.rhs))
    return out

"""Planted miscompilations: passes that change results on purpose, made
with the public pass API and inserted into the default pipeline, for the
tests (and bench/bench_validate.py) of result validation and bisection."""

from __future__ import annotations

import dataclasses

import numpy as np

from phasec import transform as T
from phasec.ir import Constant, IRModule, Phase, tir
from phasec.ir.expr import Call, Function, Op
from phasec.ir.tir_visitor import StmtExprMutator
from phasec.ir.visitor import ExprMutator
from phasec.pipeline import default_pipeline

#: operators whose operands do not commute (a swap changes the result)
_NON_COMMUTATIVE = ("relax.subtract", "relax.divide", "relax.power", "relax.matmul")


class _Swap(ExprMutator):
    def __init__(self) -> None:
        super().__init__()
        self.done = False

    def visit_call_(self, expr: Call) -> Call:
        expr = super().visit_call_(expr)
        if self.done or type(expr.op) is not Op or expr.op.name not in _NON_COMMUTATIVE \
                or len(expr.args) != 2:
            return expr
        a, b = expr.args
        if expr.op.name == "relax.matmul" and a.struct_info != b.struct_info:
            return expr  # only a square matmul stays well-typed when swapped
        self.done = True
        return dataclasses.replace(expr, args=(b, a))


@T.module_pass(phases=Phase.OPTIMIZATION, name="PlantedSwapInFused")
def swap_in_fused(mod: IRModule, ctx: T.PassContext) -> IRModule:
    """Swaps the operands of the first non-commutative call in a fused
    (``Primitive``) function."""
    for name, func in mod.relax_functions():
        if func.attrs.get("Primitive"):
            mutator = _Swap()
            new = mutator.visit_expr(func)
            if mutator.done:
                return mod.update_func(name, new)
    return mod


class _ShortLoop(StmtExprMutator):
    def __init__(self) -> None:
        self.done = False

    def visit_for_(self, loop: tir.For) -> tir.For:
        if self.done or loop.kind != "serial" or not isinstance(loop.extent, tir.IntImm) \
                or loop.extent.value < 2:
            return loop
        self.done = True
        return dataclasses.replace(loop, extent=tir.IntImm(loop.extent.value - 1,
                                                           loop.extent.dtype))


@T.module_pass(phases=Phase.LOWERING, name="PlantedOffByOne")
def off_by_one(mod: IRModule, ctx: T.PassContext) -> IRModule:
    """Shortens the innermost serial loop of constant extent of the first
    kernel by one iteration (in a matmul: its reduction loop)."""
    for name, func in mod.prim_funcs():
        mutator = _ShortLoop()
        body = mutator.visit(func.body)
        if mutator.done:
            return mod.update_func(name, dataclasses.replace(func, body=body))
    return mod


class _WrongConstant(ExprMutator):
    def __init__(self) -> None:
        super().__init__()
        self.done = False

    def visit_constant_(self, expr: Constant) -> Constant:
        data = np.asarray(expr.data)
        if self.done or data.dtype.kind != "f":
            return expr
        self.done = True
        wrong = data.copy()
        wrong.reshape(-1)[-1] += 1  # one element: a shift of every element may cancel
        return dataclasses.replace(expr, data=wrong)


@T.module_pass(phases=Phase.OPTIMIZATION, name="PlantedWrongFold")
def wrong_fold(mod: IRModule, ctx: T.PassContext) -> IRModule:
    """Adds 1 to the last element of the first float constant (a constant
    folded wrongly)."""
    for name, func in mod.relax_functions():
        mutator = _WrongConstant()
        new = mutator.visit_expr(func)
        if mutator.done:
            return mod.update_func(name, new)
    return mod


PLANTED = {"swap": (swap_in_fused, Phase.OPTIMIZATION), "off_by_one": (off_by_one, Phase.LOWERING),
           "wrong_fold": (wrong_fold, Phase.OPTIMIZATION)}


def planted_pipeline(kind: str, opt_level: int = 2):
    """The default pipeline with the planted pass ``kind`` at the end of its
    phase window (after FuseOps/LegalizeOps: in the fused or lowered module)."""
    planted, phase = PLANTED[kind]
    pipeline = default_pipeline(opt_level)
    if phase == Phase.OPTIMIZATION:
        # before ToNonDataflow and LegalizeOps: in the fused module
        names = [p.info.name for p in pipeline.passes]
        index = names.index("ToNonDataflow")
        return T.Pipeline([*pipeline.passes[:index], planted, *pipeline.passes[index:]],
                          name=f"planted_{kind}")
    return pipeline.insert(phase, passes=[planted], at="start")

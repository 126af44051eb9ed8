"""Planted miscompilations: passes that change results on purpose, made
with the public pass API and inserted into the default pipeline, for the
tests (and bench/bench_validate.py) of result validation and bisection."""

from __future__ import annotations

import dataclasses

import numpy as np

from phasec import transform as T
from phasec.ir import Constant, IRModule, Phase, structural_equal, tir
from phasec.ir.expr import Call, Function, Op, VarBinding
from phasec.op import call_op
from phasec.ir.tir_visitor import StmtExprMutator, walk
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


#: elementwise epilogues a fused function applies after its main operator
_EPILOGUES = ("relax.nn.relu", "relax.nn.gelu", "relax.nn.silu", "relax.sigmoid", "relax.tanh")


def _op_name(value) -> str:
    return value.op.name if isinstance(value, Call) and type(value.op) is Op else ""


def _swap_epilogue(func: Function) -> Function | None:
    """``t = add(a, b); y = relu(t)`` -> ``t = relu(a); y = add(t, b)``: the
    epilogue moved before the bias (when ``a`` has ``t``'s type)."""
    for bi, block in enumerate(func.body.blocks):
        bindings = list(block.bindings)
        producer = {id(b.var): k for k, b in enumerate(bindings) if isinstance(b, VarBinding)}
        for k, b in enumerate(bindings):
            if not isinstance(b, VarBinding) or _op_name(b.value) not in _EPILOGUES:
                continue
            t = b.value.args[0]
            j = producer.get(id(t))
            if j is None:
                continue
            inner = bindings[j].value
            if not isinstance(inner, Call) or type(inner.op) is not Op or len(inner.args) != 2 \
                    or not structural_equal(inner.args[0].struct_info, t.struct_info):
                continue
            bindings[j] = dataclasses.replace(
                bindings[j], value=dataclasses.replace(b.value, args=(inner.args[0],)))
            bindings[k] = dataclasses.replace(
                b, value=dataclasses.replace(inner, args=(t, inner.args[1])))
            blocks = list(func.body.blocks)
            blocks[bi] = dataclasses.replace(block, bindings=tuple(bindings))
            return dataclasses.replace(func, body=dataclasses.replace(func.body, blocks=blocks))
    return None


def _transpose_square_operand(func: Function) -> Function | None:
    """``y = matmul(a, w)`` with a square 2-D ``w`` -> ``wt = permute_dims(w);
    y = matmul(a, wt)``: the weight read transposed."""
    for bi, block in enumerate(func.body.blocks):
        for k, b in enumerate(block.bindings):
            if not isinstance(b, VarBinding) or _op_name(b.value) != "relax.matmul":
                continue
            w = b.value.args[1]
            shape = getattr(w.struct_info, "shape", None)
            if shape is None or len(shape) != 2 or not structural_equal(shape[0], shape[1]):
                continue
            transposed = call_op("relax.permute_dims", w)
            wt = type(b.var)("wt", transposed.struct_info)
            bindings = [*block.bindings[:k], VarBinding(wt, transposed),
                        dataclasses.replace(b, value=dataclasses.replace(
                            b.value, args=(b.value.args[0], wt))), *block.bindings[k + 1:]]
            blocks = list(func.body.blocks)
            blocks[bi] = dataclasses.replace(block, bindings=tuple(bindings))
            return dataclasses.replace(func, body=dataclasses.replace(func.body, blocks=blocks))
    return None


def _swapped(func: Function) -> Function | None:
    mutator = _Swap()
    new = mutator.visit_expr(func)
    if mutator.done:
        return new
    return _swap_epilogue(func) or _transpose_square_operand(func)


@T.module_pass(phases=Phase.OPTIMIZATION, name="PlantedSwapInFused")
def swap_in_fused(mod: IRModule, ctx: T.PassContext) -> IRModule:
    """An operand swap in the first fused (``Primitive``) function where one
    changes the results: the operands of a non-commutative call swapped (a
    subtract, divide, power, or a square matmul), else the epilogue applied
    before the bias (``relu(add(mm, b))`` -> ``add(relu(mm), b)``), else a
    square weight of a matmul read transposed."""
    for name, func in mod.relax_functions():
        if func.attrs.get("Primitive"):
            new = _swapped(func)
            if new is not None:
                return mod.update_func(name, new)
    return mod


def _is_reduction(loop: tir.For) -> bool:
    """Whether ``loop`` is a reduction axis of the one update ``B[i] = B[i]
    + ...`` it holds (through blocks and inner loops)."""
    body = loop.body
    while isinstance(body, (tir.Block, tir.For)):
        body = body.body
    if not isinstance(body, tir.BufferStore) or not isinstance(body.value, tir.BinaryOp):
        return False
    first = body.value.lhs
    if not (isinstance(first, tir.BufferLoad) and first.buffer is body.buffer):
        return False
    # a reduction axis: the loop variable does not index what is stored
    # (inside blocks: the block axes bound to it do not either)
    stored = {id(n) for i in body.indices for n in walk(i)}
    bound = {id(iv.var) for b in _blocks(loop) for iv, v in zip(b.iter_vars, b.iter_values)
             if any(n is loop.loop_var for n in walk(v))}
    return id(loop.loop_var) not in stored and not (bound & stored)


def _blocks(loop: tir.For) -> list[tir.Block]:
    out, body = [], loop.body
    while isinstance(body, (tir.Block, tir.For)):
        if isinstance(body, tir.Block):
            out.append(body)
        body = body.body
    return out


class _ShortLoop(StmtExprMutator):
    def __init__(self, reductions_only: bool) -> None:
        self.done = False
        self.reductions_only = reductions_only

    def visit_for_(self, loop: tir.For) -> tir.For:
        if self.done or loop.kind != "serial" or not isinstance(loop.extent, tir.IntImm) \
                or loop.extent.value < 2 or (self.reductions_only and not _is_reduction(loop)):
            return loop
        self.done = True
        return dataclasses.replace(loop, extent=tir.IntImm(loop.extent.value - 1,
                                                           loop.extent.dtype))


@T.module_pass(phases=Phase.LOWERING, name="PlantedOffByOne")
def off_by_one(mod: IRModule, ctx: T.PassContext) -> IRModule:
    """Shortens a serial loop of constant extent of the first kernel that
    has one by one iteration: the innermost one holding a reduction's update
    (a matmul's or a convolution's sum loses its last term), else the
    innermost one."""
    for reductions_only in (True, False):
        for name, func in mod.prim_funcs():
            mutator = _ShortLoop(reductions_only)
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
        # scaled (a ReLU may hide a change of a few elements), and one element
        # moved (a shift or scale of every element may cancel in a softmax)
        wrong = (data * 1.5).astype(data.dtype)
        wrong.reshape(-1)[-1] += 1
        return dataclasses.replace(expr, data=wrong)


class _WrongLiteral(StmtExprMutator):
    def __init__(self, nonzero: bool) -> None:
        self.done = False
        self.nonzero = nonzero

    def visit_float_imm_(self, imm: tir.FloatImm) -> tir.FloatImm:
        # (an identity such as max-pooling's -inf or the float minimum absorbs the +1)
        if self.done or (self.nonzero and imm.value == 0) or not abs(imm.value) < 1e30:
            return imm
        self.done = True
        return dataclasses.replace(imm, value=imm.value + 1)


@T.module_pass(phases=Phase.LOWERING, name="PlantedWrongFold")
def wrong_fold(mod: IRModule, ctx: T.PassContext) -> IRModule:
    """A constant folded wrongly: the first float constant of a Relax
    function scaled by 1.5 and its last element moved by 1; else 1 added to
    the first non-zero finite float literal of a kernel (a scale), else to
    its first one (a reduction's initial 0, a ReLU's 0)."""
    for name, func in mod.relax_functions():
        mutator = _WrongConstant()
        new = mutator.visit_expr(func)
        if mutator.done:
            return mod.update_func(name, new)
    for nonzero in (True, False):  # a scale first: a shifted 0 may cancel (in a softmax)
        for name, func in mod.prim_funcs():
            literal = _WrongLiteral(nonzero)
            body = literal.visit(func.body)
            if literal.done:
                return mod.update_func(name, dataclasses.replace(func, body=body))
    return mod


PLANTED = {"swap": (swap_in_fused, Phase.OPTIMIZATION), "off_by_one": (off_by_one, Phase.LOWERING),
           "wrong_fold": (wrong_fold, Phase.LOWERING)}


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

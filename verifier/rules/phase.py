"""PHxxx: the phase invariants (cumulative: each applies from its phase on).

=========  ==============  =================================================
phase      entered by      invariants added
=========  ==============  =================================================
optimiz.   LambdaLifting   PH101 no nested functions (BYOC exception)
lowering   LegalizeOps     PH201 no dataflow blocks; PH202 no high-level operators
build      VMBuiltinLower  PH301 no pure functions; PH302 no pure packed calls or
                           pure closure calls; PH303 no call_tir/call_dps_packed;
                           PH304 no memory builtins
=========  ==============  =================================================

Which operators a phase allows comes from the registry: ``OpDef.category``
and ``OpDef.max_phase`` (compute ops up to optimization, call and memory
ops up to lowering, VM builtins and closures always).
"""

from __future__ import annotations

from typing import Any

from phasec.ir.expr import (
    Binding, DataflowBlock, ExternFunc, Function, SeqExpr, Tuple, Var, VarBinding,
)
from phasec.ir.phase import Phase
from phasec.ir.module import IRModule
from phasec.op import call_op
from phasec.ir.struct_info import TensorStructInfo

from phasec.verifier.context import Context
from phasec.verifier.util import FORCE_PURE, is_force_pure, op_spelling
from phasec.verifier.injection import Choose, insert_bindings, new_function, pick
from phasec.verifier.rules.base import Rule, TVMCheck, register

#: attributes that exempt a nested function from PH101 (BYOC: external codegen, patterns)
BYOC_ATTRS = ("Codegen", "Composite")
PURE_CALL_OPS = frozenset({"relax.call_pure_packed", "relax.invoke_pure_closure"})


def _declare(phase: Phase) -> str:
    return (f"or declare phase '{phase.label}': I.module_attrs({{\"phase\": "
            f"\"{phase.label}\"}}) in the module class")


@register
class NestedFunction(Rule):
    code = "PH101"
    title = "Nested function (only module-level functions from optimization on)"
    since = Phase.OPTIMIZATION
    explanation = """
    From the optimization phase on, every Relax function is a module-level
    function: the optimization passes (fusion, constant folding, dead-code
    elimination) and lowering work function by function and do not descend
    into closures. LambdaLifting, the transition into optimization, lifts
    nested functions to the module and replaces them with closures
    (R.make_closure) or direct calls. Functions carrying a Codegen or
    Composite attribute are exempt: they are BYOC regions handed to an
    external code generator, which must see them in place.
    """
    help = f"run LambdaLifting to lift nested functions ({_declare(Phase.INGESTION)})"
    tvm = TVMCheck.NO_PHASES
    injection = "leave a nested function after lambda lifting"

    def enter_function(self, ctx: Context, func: Any) -> None:
        if ctx.func_depth > 0 and not any(func.attrs.get(a) for a in BYOC_ATTRS):
            b = ctx.outer_binding
            name = f" '{b.var.name_hint}'" if b is not None else ""
            ctx.report(self, f"nested function{name} in phase {ctx.phase.label}; only functions "
                       "with a Codegen or Composite attribute may stay nested", func)

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        def build(x: Var) -> list[Binding]:
            a = Var("a", x.struct_info)
            inner = Function([a], SeqExpr([], a), None, mod.phase < Phase.BUILD, {})
            return [VarBinding(Var("inner", inner.struct_info), inner)]
        return insert_bindings(mod, build, choose)


@register
class DataflowBlockAfterOptimization(Rule):
    code = "PH201"
    title = "Dataflow block (none from lowering on)"
    since = Phase.LOWERING
    explanation = """
    Dataflow blocks mark pure, reorderable regions for the graph-level
    optimizations. The lowering phase makes memory and effects explicit
    (output allocation, in-place kernels, storage reuse), which the dataflow
    contract cannot express, so lowering requires plain binding blocks.
    ToNonDataflow turns dataflow blocks into ordinary blocks; LegalizeOps,
    the transition into lowering, requires it.
    """
    help = f"run ToNonDataflow before LegalizeOps ({_declare(Phase.OPTIMIZATION)})"
    tvm = TVMCheck.NO_PHASES
    injection = "leave a dataflow block in the lowering phase"

    def block(self, ctx: Context, block: Any) -> None:
        if isinstance(block, DataflowBlock):
            ctx.report(self, f"dataflow block in phase {ctx.phase.label}", _block_anchor(block))

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        return insert_bindings(mod, lambda x: [VarBinding(Var("gv", x.struct_info), x)], choose,
                               dataflow=True)


def _block_anchor(block: Any) -> Any:
    if block.span is not None or not block.bindings:
        return block
    return block.bindings[0]


@register
class HighLevelOperator(Rule):
    code = "PH202"
    title = "High-level operator (none from lowering on)"
    since = Phase.LOWERING
    explanation = """
    From the lowering phase on, every computation is a call into a kernel:
    R.call_tir to a PrimFunc, R.call_dps_packed or a packed call. High-level
    operators (R.add, R.matmul, R.nn.conv2d, ...) have no run-time
    implementation of their own; LegalizeOps, the transition into lowering,
    replaces each with a call_tir to a generated PrimFunc. Only call-like
    builtins, closures and memory/VM builtins may remain.
    """
    help = f"run LegalizeOps to lower high-level operators to R.call_tir ({_declare(Phase.OPTIMIZATION)})"

    categories = frozenset({"compute"})
    # call_tir plus the name of its gradient, for a Gradient pass (high level)
    ops = frozenset({"relax.call_tir_with_grad"})
    tvm = TVMCheck.NO_PHASES
    injection = "leave a high-level operator in the lowering phase"

    def call(self, ctx: Context, call: Any, opdef: Any) -> None:
        if opdef is not None:
            ctx.report(self, f"high-level operator {opdef.script_name} in phase "
                       f"{ctx.phase.label}", call)

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        def build(x: Var) -> list[Binding]:
            call = call_op("relax.stop_fusion", x)
            return [VarBinding(Var("v", call.struct_info), call)]
        return insert_bindings(mod, build, choose)


@register
class PureFunctionInBuild(Rule):
    code = "PH301"
    title = "Pure function (every function impure or force_pure in build)"
    since = Phase.BUILD
    explanation = f"""
    In the build phase memory is explicit: kernels are called directly and
    write their output buffers, and allocation builtins have effects. Purity
    tracking no longer holds, so every function must either be declared
    impure (pure=False) or carry {FORCE_PURE}, which promises that its side
    effects are not observable to callers. RemovePurityChecking, run in the
    lowering phase, marks the functions.
    """
    help = f"run RemovePurityChecking ({_declare(Phase.LOWERING)})"
    tvm = TVMCheck.NO_PHASES
    injection = "leave a pure function (no force_pure) in the build phase"

    def enter_function(self, ctx: Context, func: Any) -> None:
        if func.is_pure and not is_force_pure(func):
            ctx.report(self, f"function is pure without {FORCE_PURE} in phase build", func)

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        cands = [(n, f) for n, f in mod.relax_functions()
                 if f.attrs.get(FORCE_PURE) and f.is_pure]
        if cands:
            name, func = pick(sorted(cands, key=lambda nf: nf[0]), choose)
            return mod.update({name: func.without_attr(FORCE_PURE)})
        x = Var("x", TensorStructInfo((2,), "float32"))
        func = new_function([x], SeqExpr([], x), "mutant_pure", pure=True)
        return mod.update({"mutant_pure": func})


@register
class PureCallInBuild(Rule):
    code = "PH302"
    title = "call_pure_packed or invoke_pure_closure (none in build)"
    since = Phase.BUILD
    explanation = """
    R.call_pure_packed and R.invoke_pure_closure exist to call effectful
    things inside pure code (dataflow blocks, pure functions). Once purity
    tracking is gone they are ordinary R.call_packed and R.invoke_closure
    calls, the only forms the VM code generator emits. RemovePurityChecking
    rewrites them.
    """
    help = f"run RemovePurityChecking ({_declare(Phase.LOWERING)})"
    ops = PURE_CALL_OPS
    tvm = TVMCheck.NO_PHASES
    injection = "leave R.call_pure_packed in the build phase"

    def call(self, ctx: Context, call: Any, opdef: Any) -> None:
        plain = "R.call_packed" if call.op.name.endswith("call_pure_packed") else "R.invoke_closure"
        ctx.report(self, f"{op_spelling(call.op.name)} in phase build (use {plain})", call)

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        def build(x: Var) -> list[Binding]:
            call = call_op("relax.call_pure_packed", ExternFunc("phasec.testing.scale2"), x,
                           sinfo_args=[x.struct_info])
            return [VarBinding(Var("p", x.struct_info), call)]
        return insert_bindings(mod, build, choose)


@register
class CallTIRInBuild(Rule):
    code = "PH303"
    title = "call_tir or call_dps_packed (none in build)"
    since = Phase.BUILD
    explanation = """
    R.call_tir and R.call_dps_packed allocate their outputs implicitly. In
    the build phase allocation is explicit, so each becomes an output
    allocation plus a direct call of the PrimFunc or packed function
    (CallTIRRewrite), and the allocations become VM builtins
    (VMBuiltinLower). Direct PrimFunc calls and VM builtins are what the VM
    code generator accepts.
    """
    help = f"run CallTIRRewrite, then VMBuiltinLower ({_declare(Phase.LOWERING)})"

    categories = frozenset({"call"})
    tvm = TVMCheck.NO_PHASES
    injection = "leave R.call_dps_packed in the build phase"

    def call(self, ctx: Context, call: Any, opdef: Any) -> None:
        if opdef is not None and call.op.name not in PURE_CALL_OPS:
            ctx.report(self, f"{opdef.script_name} in phase build", call)

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        def build(x: Var) -> list[Binding]:
            call = call_op("relax.call_dps_packed", ExternFunc("phasec.testing.scale2_dps"),
                           Tuple([x]), sinfo_args=[x.struct_info])
            return [VarBinding(Var("y", x.struct_info), call)]
        return insert_bindings(mod, build, choose)


@register
class MemoryBuiltinInBuild(Rule):
    code = "PH304"
    title = "Memory builtin (only VM builtins in build)"
    since = Phase.BUILD
    explanation = """
    The memory builtins of the lowering phase (R.builtin.alloc_tensor,
    R.memory.alloc_storage, R.memory.alloc_tensor, R.memory.kill_* ...) are
    abstract allocations that memory planning works on. VMBuiltinLower turns
    them into the VM's own builtins (R.vm.alloc_storage, R.vm.alloc_tensor),
    the only allocation instructions the VM has.
    """
    help = f"run VMBuiltinLower ({_declare(Phase.LOWERING)})"

    categories = frozenset({"memory"})
    tvm = TVMCheck.NO_PHASES
    injection = "leave a memory builtin in the build phase"

    def call(self, ctx: Context, call: Any, opdef: Any) -> None:
        if opdef is not None:
            ctx.report(self, f"memory builtin {opdef.script_name} in phase build", call)

    def inject(self, mod: IRModule, choose: Choose) -> IRModule:
        def build(x: Var) -> list[Binding]:
            call = call_op("relax.builtin.alloc_tensor", (2,), dtype="float32")
            return [VarBinding(Var("alloc", call.struct_info), call)]
        return insert_bindings(mod, build, choose)

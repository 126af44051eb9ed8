"""VM codegen: a verified phase-3 (build) module -> :class:`Executable`.

Every Relax function becomes register bytecode (see :mod:`.bytecode`);
PrimFuncs are carried over for the kernel backend. The input must be in the
build phase and pass the verifier: that is what lets codegen assume A-normal
form, no dataflow blocks, no nested functions and only VM builtins.

Register assignment: parameters take registers ``0 .. n-1``; every binding,
temporary and symbolic shape variable gets its own register; constants used
by a function are loaded into registers by a prologue of ``load_const``
instructions (which the VM folds into the frame's initial register file, so
they cost nothing per call).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from phasec.errors import PhasecError, PhaseError
from phasec.ir import tir
from phasec.arith import free_vars
from phasec.ir.expr import (
    Call, Constant, DataflowVar, DataTypeImm, Expr, ExternFunc, Function, GlobalVar, If,
    MatchCast, Op, PrimValue, SeqExpr, ShapeExpr, StringImm, Tuple, TupleGetItem, Var,
)
from phasec.ir.module import IRModule
from phasec.ir.phase import Phase
from phasec.ir.struct_info import (
    FuncStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo, TensorStructInfo,
    TupleStructInfo,
)
from phasec.interp.relax import sinfo_text
from phasec.op.registry import find_op
from phasec.script.printer import print_sinfos
from phasec.backend.llvm.fpenv import flush_by_default
from phasec.backend.vm import bytecode as bc
from phasec.backend.vm.bytecode import CalleeKind
from phasec.backend.vm.executable import Executable

__all__ = ["codegen", "VMCodegenError"]


class VMCodegenError(PhasecError):
    """The module contains something the VM cannot run (names the function)."""


def codegen(mod: IRModule, *, verify: bool = True,
            flush_subnormals: bool | None = None) -> Executable:
    """Compile a build-phase module to VM bytecode.

    ``flush_subnormals`` (default: as the kernels, see
    :mod:`phasec.backend.llvm.fpenv`) stores the float constants (weights)
    with their subnormal elements as zeros of the same sign: a subnormal
    operand costs a kernel a microcode assist per instruction that meets it
    (a 1x1 convolution 256 -> 256 over 28x28 with 1% of its weights
    subnormal took 2.2x as long, with 10% 13x; ONNX Runtime 21x and 116x), and
    the kernels flush subnormal results anyway.

    Raises :class:`phasec.PhaseError` when ``mod`` is not in the build phase
    and :class:`phasec.WellFormedError` when it fails the verifier (skip the
    latter with ``verify=False`` only if you have just verified it).
    """
    if not isinstance(mod, IRModule):
        raise TypeError(f"codegen needs an IRModule, not {type(mod).__name__}")
    if mod.phase != Phase.BUILD:
        raise PhaseError(
            f"VM codegen needs a module in phase {Phase.BUILD.label} ({int(Phase.BUILD)}); this "
            f"module is in phase {mod.phase.label} ({int(mod.phase)}). Run the lowering pipeline "
            f"up to VMBuiltinLower (phasec.build does all of it) first.")
    if verify:
        _verify(mod)
    flush = flush_by_default() if flush_subnormals is None else flush_subnormals
    return _ModuleCodegen(mod, flush).run()


def flush_subnormal_elements(value: Any) -> Any:
    """``value`` with the subnormal elements of a float32/float64 array
    replaced by signed zeros (a copy; ``value`` itself when it has none or is
    not such an array)."""
    if not isinstance(value, np.ndarray) or value.dtype not in (np.float32, np.float64):
        return value
    repeated = [stride == 0 and extent > 1 for stride, extent in zip(value.strides, value.shape)]
    if any(repeated):
        # a splat or broadcast (ConstantOfShape of any size): its distinct
        # elements, flushed, broadcast again (never materialized)
        distinct = np.ascontiguousarray(value[tuple(
            slice(0, 1) if r else slice(None) for r in repeated)])
        flushed = flush_subnormal_elements(distinct)
        return value if flushed is distinct else np.broadcast_to(flushed, value.shape)
    tiny = np.finfo(value.dtype).tiny
    magnitude = np.abs(value)
    subnormal = (magnitude < tiny) & (magnitude > 0)
    if not subnormal.any():
        return value
    return np.where(subnormal, np.copysign(value.dtype.type(0), value), value)


def _verify(mod: IRModule) -> None:
    # imported when a module is compiled, not by every user of the VM (~40 ms)
    from phasec.verifier import verify

    verify(mod, Phase.BUILD)


# Operators with a VM lowering: registry name -> (VM builtin, canonical operand
# names, TVM's operand order used when the registry does not know the op).
_ALLOC_OPS: Mapping[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "relax.vm.alloc_storage": ("vm.alloc_storage", ("size", "dtype"),
                               ("size", "runtime_device_index", "dtype", "storage_scope")),
    "relax.memory.alloc_storage": ("vm.alloc_storage", ("size", "dtype"),
                                   ("size", "virtual_device_index", "storage_scope", "dtype")),
    "relax.vm.alloc_tensor": ("vm.alloc_tensor", ("storage", "offset", "shape", "dtype"),
                              ("storage", "offset", "shape", "dtype")),
    "relax.memory.alloc_tensor": ("vm.alloc_tensor", ("storage", "offset", "shape", "dtype"),
                                  ("storage", "offset", "shape", "dtype")),
    "relax.builtin.alloc_tensor": ("vm.empty", ("shape", "dtype"),
                                   ("shape", "dtype", "runtime_device_index")),
}

_KILL_OPS = frozenset({"relax.vm.kill_object", "relax.memory.kill_storage",
                       "relax.memory.kill_tensor"})
_CLOSURE_CALL_OPS = frozenset({"relax.invoke_closure", "relax.invoke_pure_closure"})
_PACKED_OPS = frozenset({"relax.call_packed", "relax.call_pure_packed"})
_NOT_LOWERED = {
    "relax.call_tir": "CallTIRRewrite", "relax.call_dps_packed": "CallTIRRewrite",
    "relax.call_tir_inplace": "CallTIRRewrite",
}


class _ModuleCodegen:
    def __init__(self, mod: IRModule, flush_subnormals: bool = False) -> None:
        self.mod = mod
        self.flush_subnormals = flush_subnormals
        self.func_names = [name for name, _ in mod.relax_functions()]
        self.func_index = {name: i for i, name in enumerate(self.func_names)}
        self.constants: list[Any] = []
        self._const_ids: dict[Any, int] = {}

    def run(self) -> Executable:
        functions = [_FunctionCodegen(self, name, func).run()
                     for name, func in self.mod.relax_functions()]
        return Executable(functions, self.constants, dict(self.mod.prim_funcs()))

    def constant(self, value: Any, key: Any) -> int:
        """Index of ``value`` in the pool; ``key`` deduplicates (identity for
        tensors, value and type for scalars)."""
        index = self._const_ids.get(key)
        if index is None:
            index = len(self.constants)
            self.constants.append(flush_subnormal_elements(value) if self.flush_subnormals
                                  else value)
            self._const_ids[key] = index
        return index


class _FunctionCodegen:
    def __init__(self, parent: _ModuleCodegen, name: str, func: Function) -> None:
        self.parent = parent
        self.mod = parent.mod
        self.name = name
        self.func = func
        self.code: list[bc.Instruction] = []
        self.prologue: list[bc.Instruction] = []
        self.num_regs = 0
        self.var_reg: dict[Var, int] = {}
        self.sym_reg: dict[tir.Var, int] = {}
        self.bound_syms: set[tir.Var] = set()
        self.const_reg: dict[int, int] = {}  # pool index -> register
        self.pending: list[tuple[tir.Var, Any]] = []  # compound-dim vars awaiting a bind
        self.defer_compound = False  # see emit_match

    # -- helpers ------------------------------------------------------------------
    def error(self, message: str, node: Any = None) -> VMCodegenError:
        span = getattr(node, "span", None)
        where = f" ({span})" if span is not None else ""
        return VMCodegenError(f"VM codegen, function {self.name!r}{where}: {message}")

    def new_reg(self) -> int:
        self.num_regs += 1
        return self.num_regs - 1

    def emit(self, ins: bc.Instruction) -> int:
        self.code.append(ins)
        return len(self.code) - 1

    def const(self, value: Any, key: Any = None) -> int:
        """Register holding a constant (loaded once, by the prologue)."""
        if key is None:
            key = (type(value).__name__, value)
        index = self.parent.constant(value, key)
        reg = self.const_reg.get(index)
        if reg is None:
            reg = self.new_reg()
            self.const_reg[index] = reg
            self.prologue.append(bc.LoadConst(reg, index))
        return reg

    def sym(self, var: tir.Var) -> int:
        reg = self.sym_reg.get(var)
        if reg is None:
            reg = self.sym_reg[var] = self.new_reg()
        return reg

    # -- functions -------------------------------------------------------------------
    def run(self) -> bc.VMFunction:
        func = self.func
        for p in func.params:
            self.var_reg[p] = self.new_reg()
        self.match_params(func)
        result = self.seq(func.body)
        self.emit(bc.Ret(result))
        # The signature as text, for callers of a saved executable (phasec run);
        # printed together so a symbolic variable has one name in all of it.
        texts = print_sinfos([p.struct_info for p in func.params])
        param_sinfo = tuple(None if p.struct_info is None else text
                            for p, text in zip(func.params, texts))
        return bc.VMFunction(self.name, tuple(p.name_hint for p in func.params), self.num_regs,
                             tuple(self.prologue + self.code), param_sinfo)

    def seq(self, seq: SeqExpr) -> int:
        for block in seq.blocks:
            for binding in block.bindings:
                dst = self.new_reg()
                self.expr_into(binding.value, dst, binding.var.name_hint)
                if type(binding) is MatchCast:
                    self.emit_match(dst, binding.struct_info,
                                    f"function {self.name!r}, match_cast of {binding.var.name_hint!r}")
                self.var_reg[binding.var] = dst
        return self.operand(seq.body)

    # -- expressions --------------------------------------------------------------------
    def operand(self, expr: Expr) -> int:
        """A register holding the value of ``expr`` (a leaf, or a tuple of leaves)."""
        t = type(expr)
        if t is Var or t is DataflowVar:
            reg = self.var_reg.get(expr)
            if reg is None:
                raise self.error(f"variable {expr.name_hint!r} is used before it is defined", expr)
            return reg
        if t is Constant:
            return self.const(expr.data, ("tensor", id(expr.data)))
        if t is StringImm or t is DataTypeImm:
            return self.const(expr.value)
        if t is ShapeExpr and all(type(v) is tir.IntImm for v in expr.values):
            shape = tuple(int(v.value) for v in expr.values)
            return self.const(shape, ("shape", shape))
        if t is PrimValue and type(expr.value) in (tir.IntImm, tir.FloatImm):
            return self.const(_scalar(expr.value.value, expr.value.dtype),
                              ("prim", expr.value.dtype, expr.value.value))
        reg = self.new_reg()
        self.expr_into(expr, reg, "")
        return reg

    def expr_into(self, expr: Expr, dst: int, name: str) -> None:
        """Emit code leaving the value of ``expr`` in register ``dst``."""
        t = type(expr)
        if t is Call:
            self.call(expr, dst)
        elif t is Var or t is DataflowVar or t is Constant or t is StringImm or t is DataTypeImm:
            self.emit(bc.Move(dst, self.operand(expr)))
        elif t is ShapeExpr:
            if all(type(v) is tir.IntImm for v in expr.values):
                self.emit(bc.Move(dst, self.operand(expr)))
            else:
                self.emit(bc.MakeShape(dst, tuple(self.prim_code(v, expr) for v in expr.values)))
        elif t is PrimValue:
            if type(expr.value) in (tir.IntImm, tir.FloatImm):
                self.emit(bc.Move(dst, self.operand(expr)))
            else:
                self.emit(bc.MakePrim(dst, self.prim_code(expr.value, expr), expr.value.dtype))
        elif t is Tuple:
            self.emit(bc.MakeTuple(dst, tuple(self.operand(f) for f in expr.fields)))
        elif t is TupleGetItem:
            self.emit(bc.GetItem(dst, self.operand(expr.tuple_value), expr.index))
        elif t is If:
            self.if_(expr, dst)
        elif t is SeqExpr:
            self.emit(bc.Move(dst, self.seq(expr)))
        elif t is GlobalVar:
            self.emit(bc.MakeClosure(dst, self.relax_func_index(expr), ()))
        elif t is ExternFunc:
            self.emit(bc.Call(dst, CalleeKind.BUILTIN, "vm.get_packed",
                              (self.const(expr.global_symbol),)))
        elif t is Function:
            raise self.error(f"nested function {name!r}: the build phase has no nested functions "
                             f"(run LambdaLifting)", expr)
        elif t is Op:
            raise self.error(f"operator {expr.name!r} used as a value", expr)
        else:
            raise self.error(f"cannot compile a {t.__name__} expression", expr)

    def if_(self, expr: If, dst: int) -> None:
        cond = self.operand(expr.cond)
        branch_at = self.emit(bc.If(cond, 0))
        saved = set(self.bound_syms)
        self.emit(bc.Move(dst, self.seq(expr.true_branch)))
        goto_at = self.emit(bc.Goto(0))
        else_at = len(self.code)
        self.bound_syms = set(saved)
        self.emit(bc.Move(dst, self.seq(expr.false_branch)))
        end_at = len(self.code)
        self.bound_syms = saved  # variables bound in one branch are not in scope after
        self.code[branch_at] = bc.If(cond, else_at - branch_at)
        self.code[goto_at] = bc.Goto(end_at - goto_at)

    def relax_func_index(self, gv: GlobalVar) -> int:
        index = self.parent.func_index.get(gv.name_hint)
        if index is None:
            what = "a PrimFunc" if gv.name_hint in self.mod else "not a function of the module"
            raise self.error(f"{gv.name_hint!r} is {what}; expected a Relax function", gv)
        return index

    # -- calls ---------------------------------------------------------------------------------
    def call(self, call: Call, dst: int) -> None:
        op = call.op
        t = type(op)
        if t is GlobalVar:
            target = self.mod.functions.get(op.name_hint)
            if target is None:
                raise self.error(f"call of unknown function {op.name_hint!r}", call)
            if isinstance(target, tir.PrimFunc):
                self.kernel_call(op.name_hint, target, call.args, dst, call)
            else:
                nparams = len(target.params)
                if len(call.args) != nparams:
                    raise self.error(f"{op.name_hint!r} takes {nparams} arguments, "
                                     f"the call passes {len(call.args)}", call)
                self.emit(bc.Call(dst, CalleeKind.VM_FUNC, self.parent.func_index[op.name_hint],
                                  tuple(self.operand(a) for a in call.args)))
        elif t is ExternFunc:
            self.emit(bc.Call(dst, CalleeKind.PACKED, op.global_symbol,
                              tuple(self.operand(a) for a in call.args)))
        elif t is Var or t is DataflowVar:
            self.emit(bc.Call(dst, CalleeKind.CLOSURE, self.operand(op),
                              tuple(self.operand(a) for a in call.args)))
        elif t is Op:
            self.op_call(op.name, call, dst)
        else:
            raise self.error(f"cannot call a {t.__name__}", call)

    def tuple_operands(self, expr: Expr, what: str, call: Call) -> tuple[int, ...]:
        if type(expr) is Tuple:
            return tuple(self.operand(f) for f in expr.fields)
        raise self.error(f"{what} needs a literal tuple of arguments", call)

    def kernel_call(self, name: str, func: tir.PrimFunc, args: Any, dst: int, call: Call) -> None:
        regs: list[int] = []
        for a in args:
            # Shape operands (tir_vars) pass their dims as scalar arguments.
            if type(a) is ShapeExpr:
                regs.extend(self.operand(PrimValue(v)) if type(v) is tir.IntImm
                            else self.prim_reg(v, a) for v in a.values)
            elif type(a) is Tuple:
                regs.extend(self.operand(f) for f in a.fields)
            else:
                regs.append(self.operand(a))
        if len(regs) != len(func.params):
            raise self.error(f"kernel {name!r} takes {len(func.params)} arguments (inputs, outputs, "
                             f"scalars), the call passes {len(regs)}", call)
        self.emit(bc.Call(dst, CalleeKind.KERNEL, name, tuple(regs)))

    def prim_reg(self, value: tir.PrimExpr, node: Any) -> int:
        reg = self.new_reg()
        self.emit(bc.MakePrim(reg, self.prim_code(value, node), value.dtype))
        return reg

    def op_call(self, name: str, call: Call, dst: int) -> None:
        args = call.args
        if name in _PACKED_OPS:
            if not args or type(args[0]) is not ExternFunc:
                raise self.error(f"{name} needs a packed function name as first operand", call)
            self.emit(bc.Call(dst, CalleeKind.PACKED, args[0].global_symbol,
                              tuple(self.operand(a) for a in args[1:])))
        elif name in _CLOSURE_CALL_OPS:
            callee = self.operand(args[0])
            call_args = self.tuple_operands(args[1], name, call) if len(args) > 1 else ()
            self.emit(bc.Call(dst, CalleeKind.CLOSURE, callee, call_args))
        elif name == "relax.make_closure":
            if type(args[0]) is not GlobalVar:
                raise self.error("make_closure needs a module function as first operand", call)
            captured = self.tuple_operands(args[1], name, call) if len(args) > 1 else ()
            self.emit(bc.MakeClosure(dst, self.relax_func_index(args[0]), captured))
        elif name in _ALLOC_OPS:
            builtin, canonical, tvm_order = _ALLOC_OPS[name]
            operands = self.named_operands(name, call, tvm_order)
            regs = []
            for key in canonical:
                if key == "size" and key not in operands:
                    key = "shape"
                if key not in operands:
                    raise self.error(f"{name}: no {key!r} operand", call)
                kind, value = operands[key]
                regs.append(self.operand(value) if kind == "expr" else self.const(value))
            self.emit(bc.Call(dst, CalleeKind.BUILTIN, builtin, tuple(regs)))
        elif name in _KILL_OPS:
            target = args[0] if args else None
            if type(target) not in (Var, DataflowVar):
                raise self.error(f"{name} needs a variable operand", call)
            self.emit(bc.Kill(dst, self.operand(target)))
        elif name == "relax.null_value":
            self.emit(bc.Move(dst, self.const(None, ("null",))))
        elif name == "relax.vm.call_tir_dyn":
            if type(args[0]) is not GlobalVar or not isinstance(self.mod.functions.get(args[0].name_hint), tir.PrimFunc):
                raise self.error("call_tir_dyn needs a PrimFunc of the module", call)
            flat = args[1].fields if type(args[1]) is Tuple else args[1:]
            self.kernel_call(args[0].name_hint, self.mod[args[0].name_hint], flat, dst, call)
        elif name in _NOT_LOWERED:
            raise self.error(f"{name} must be lowered before VM codegen (run {_NOT_LOWERED[name]})", call)
        else:
            raise self.error(f"operator {name!r} is not a VM builtin; the build phase allows "
                             f"only VM builtins (run LegalizeOps and VMBuiltinLower)", call)

    def named_operands(self, name: str, call: Call,
                       tvm_order: tuple[str, ...]) -> dict[str, tuple[str, Any]]:
        """An op's operands (``("expr", Expr)``) and attributes (``("attr", value)``)
        by name, as the registry names them (TVM's order if it does not know the op)."""
        opdef = find_op(name)
        names = opdef.args if opdef is not None else tvm_order
        named: dict[str, tuple[str, Any]] = {n: ("expr", a) for n, a in zip(names, call.args)}
        attrs = dict(opdef.attrs) if opdef is not None else {}
        attrs.update(call.attrs)
        for key, value in attrs.items():
            value = _attr_value(value)
            if key not in named and (value is None or isinstance(value, (int, float, str))):
                named[key] = ("attr", value)
        return named

    # -- struct info patterns and scalar expressions ---------------------------------------------
    def match_params(self, func: Function) -> None:
        """Emit the parameter checks with TVM's semantics: the plain-variable
        dims of ALL parameters are bound before any compound dim is checked,
        so ``a: R.Tensor((n * n,))`` may precede the ``x: R.Tensor((n, n))``
        that binds n (lifted closures take their captured values last).

        A parameter with a compound dim that uses a variable only a later
        parameter binds is matched twice: first with that dim binding a
        scratch register (checking everything else and binding its own
        variables), then, after every parameter, fully again.
        """
        params = [p for p in func.params if p.struct_info is not None]
        all_plain = {v for p in params for v in _plain_vars(p.struct_info)}
        bound = set(self.bound_syms)  # by this parameter or an earlier one
        needs_recheck: list[bool] = []
        for p in params:
            bound.update(_plain_vars(p.struct_info))
            needs_recheck.append(any(v not in bound and v in all_plain
                                     for v in _compound_vars(p.struct_info)))
        for p, recheck in zip(params, needs_recheck):
            self.emit_match(self.var_reg[p], p.struct_info,
                            f"function {self.name!r}, parameter {p.name_hint!r}",
                            defer_compound=recheck)
        for p, recheck in zip(params, needs_recheck):
            if recheck:
                self.emit_match(self.var_reg[p], p.struct_info,
                                f"function {self.name!r}, parameter {p.name_hint!r}")

    def emit_match(self, src: int, sinfo: StructInfo, what: str,
                   defer_compound: bool = False) -> None:
        """Emit a Match of register ``src`` against ``sinfo``. With
        ``defer_compound``, compound dims only bind a scratch register (the
        caller checks them by a second full match once their variables are
        bound)."""
        self.pending: list[tuple[tir.Var, Any]] = []
        self.defer_compound = defer_compound
        try:
            pattern = self.pattern(sinfo)
        finally:
            self.defer_compound = False
        for var, node in self.pending:
            if var not in self.bound_syms:
                raise self.error(f"{what}: symbolic variable {var.name} in a compound dimension "
                                 f"is not defined by any plain dimension", node)
        self.emit(bc.Match(src, pattern, what, sinfo_text(sinfo)))

    def pattern(self, sinfo: StructInfo) -> tuple:
        t = type(sinfo)
        if t is TensorStructInfo:
            dims = None if sinfo.shape is None else tuple(self.dim(d, sinfo) for d in sinfo.shape)
            return ("tensor", None if sinfo.dtype == "void" else sinfo.dtype, sinfo.ndim, dims)
        if t is ShapeStructInfo:
            dims = None if sinfo.values is None else tuple(self.dim(d, sinfo) for d in sinfo.values)
            return ("shape", sinfo.ndim, dims)
        if t is PrimStructInfo:
            return ("prim", sinfo.dtype, None if sinfo.value is None else self.dim(sinfo.value, sinfo))
        if t is TupleStructInfo:
            return ("tuple", tuple(self.pattern(f) for f in sinfo.fields))
        if t is FuncStructInfo:
            return ("func",)
        return ("any",)

    def dim(self, expr: tir.PrimExpr, node: Any) -> tuple:
        t = type(expr)
        if t is tir.IntImm:
            return ("imm", int(expr.value))
        if t is tir.Var:
            if expr in self.bound_syms:
                return ("check", self.sym(expr))
            self.bound_syms.add(expr)
            return ("bind", self.sym(expr))
        if self.defer_compound:
            return ("bind", self.new_reg())  # checked by a later full match (match_params)
        # Compound dimension: checked once the plain variables are bound; its
        # variables must be bound by now or by a plain dimension of this pattern.
        return ("expr", self.prim_code(expr, node, allow_pending=True))

    def prim_code(self, expr: tir.PrimExpr, node: Any, allow_pending: bool = False) -> tuple:
        t = type(expr)
        if t is tir.IntImm:
            return ("imm", bool(expr.value) if expr.dtype == "bool" else int(expr.value))
        if t is tir.FloatImm:
            return ("imm", float(expr.value))
        if t is tir.Var:
            if expr not in self.bound_syms:
                if allow_pending:
                    self.pending.append((expr, node))
                    return ("reg", self.sym(expr))
                raise self.error(f"symbolic variable {expr.name} is used before a parameter or "
                                 f"match_cast defines it", node)
            return ("reg", self.sym(expr))
        if t is tir.BinaryOp:
            return ("bin", expr.op, self.prim_code(expr.lhs, node, allow_pending),
                    self.prim_code(expr.rhs, node, allow_pending))
        if t is tir.Not:
            return ("not", self.prim_code(expr.value, node, allow_pending))
        if t is tir.Cast:
            return ("cast", expr.dtype, self.prim_code(expr.value, node, allow_pending))
        if t is tir.Select:
            return ("select", *(self.prim_code(e, node, allow_pending)
                                for e in (expr.condition, expr.true_value, expr.false_value)))
        if t is tir.Call:
            return ("call", expr.name, tuple(self.prim_code(a, node, allow_pending) for a in expr.args))
        raise self.error(f"cannot compute {type(expr).__name__} in a shape expression", node)


def _sinfo_dims(sinfo: StructInfo):
    """The dims of ``sinfo`` (tensor shapes, shape values, prim values, in
    tuples), as the VM's match patterns see them."""
    stack = [sinfo]
    while stack:
        s = stack.pop()
        t = type(s)
        if t is TensorStructInfo and s.shape is not None:
            yield from s.shape
        elif t is ShapeStructInfo and s.values is not None:
            yield from s.values
        elif t is PrimStructInfo and s.value is not None:
            yield s.value
        elif t is TupleStructInfo:
            stack.extend(s.fields)


def _plain_vars(sinfo: StructInfo) -> list[tir.Var]:
    return [d for d in _sinfo_dims(sinfo) if type(d) is tir.Var]


def _compound_vars(sinfo: StructInfo) -> set[tir.Var]:
    return {v for d in _sinfo_dims(sinfo) if type(d) not in (tir.Var, tir.IntImm)
            for v in free_vars(d)}


def _scalar(value: Any, dtype: str) -> Any:
    if dtype == "bool":
        return bool(value)
    if tir.is_float(dtype):
        return float(value)
    return int(value)


def _attr_value(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (tir.IntImm, tir.FloatImm)):
        return value.value
    if isinstance(value, np.dtype):
        return str(value)
    return value

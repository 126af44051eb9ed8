"""The TVMScript parser on TIR: blocks with init, loops, lets, allocations and
ifs, casts and literals, and the lowered and build-phase calls of main."""

from __future__ import annotations

import phasec
from phasec.ir import DataflowBlock, GlobalVar, PrimValue, ShapeExpr, tir

from helpers.parsed import binding, bindings, line_of, load, sinfo_eq, tensor
from helpers.paths import FIXTURES


# ---------------------------------------------------------------------------
# TIR statements
# ---------------------------------------------------------------------------

def test_reduction_block_with_init():
    mm = load("tir_kernels")["matmul"]
    assert mm.attrs["op_pattern"] == 4
    i = mm.body
    j = i.body
    k = j.body
    assert [f.kind for f in (i, j, k)] == ["serial"] * 3
    block = k.body
    assert [iv.kind for iv in block.iter_vars] == ["S", "S", "R"]
    assert [iv.extent.value for iv in block.iter_vars] == [4, 16, 8]
    assert isinstance(block.init, tir.BufferStore) and block.init.value.value == 0.0
    assert len(block.reads) == 2 and len(block.writes) == 1
    assert block.span.line == line_of("tir_kernels", 'with T.block("C")')

    rs = load("tir_kernels")["row_sum"]
    block = rs.body.body.body
    assert [iv.kind for iv in block.iter_vars] == ["S", "R"]
    (read,) = block.reads
    lo, ext = read.region[1]
    assert lo.value == 0 and ext.value == 8


def test_loops_lets_allocs_and_ifs():
    ew = load("tir_kernels")["elementwise"]
    alloc = ew.body
    assert isinstance(alloc, tir.Allocate) and alloc.buffer.name == "tmp"
    first, second = alloc.body.stmts
    assert (first.kind, first.body.kind) == ("parallel", "vectorized")
    assert (second.kind, second.body.kind) == ("serial", "unroll")
    store = first.body.body
    assert store.buffer is alloc.buffer and isinstance(store.value.lhs, tir.Call)
    assert store.value.lhs.name == "exp"
    let_x = second.body.body
    assert isinstance(let_x, tir.LetStmt) and let_x.var.dtype == "float32"
    let_y = let_x.body
    assert isinstance(let_y, tir.LetStmt) and let_y.value.op == "max"
    branch = let_y.body
    assert isinstance(branch, tir.IfThenElse) and branch.else_case is not None
    assert branch.condition.op == "and" and isinstance(branch.condition.rhs, tir.Not)
    assert isinstance(branch.then_case.value, tir.Select)
    assert isinstance(branch.else_case.value, tir.Select)  # T.if_then_else
    assert branch.else_case.value.condition.op == "or"


def test_casts_literals_and_loop_bounds():
    casts = load("tir_kernels")["casts"]
    A, B, n = casts.params
    assert isinstance(n, tir.Var) and n.dtype == "int64"
    first, second, evaluate = casts.body.stmts
    assert first.min.value == 2 and first.extent.value == 6 and first.loop_var.dtype == "int64"
    cast = first.body.value
    assert isinstance(cast, tir.Cast) and cast.dtype == "float16"
    div = cast.value.lhs.lhs
    assert div.op == "//" and div.rhs.dtype == "int32"  # plain integers are int32 in TIR
    assert isinstance(evaluate, tir.Evaluate)
    inner_if = second.body.stmts[1]
    assert isinstance(inner_if, tir.IfThenElse) and inner_if.else_case is None
    assert inner_if.then_case.value.dtype == "float16"


def test_lowered_main_calls():
    main = load("tir_kernels")["main"]
    assert load("tir_kernels").phase == phasec.Phase.LOWERING
    assert all(not isinstance(b, DataflowBlock) for b in main.body.blocks)
    cs = binding(main, "cs").value
    assert cs.op.name == "relax.call_tir" and cs.args[2].values[0].value == 3


def test_build_phase_builtins():
    mod = load("vm_builtins")
    assert mod.phase == phasec.Phase.BUILD
    main = mod["main"]
    assert not main.is_pure
    storage, y, call, z, kill, null = bindings(main)
    assert storage.value.op.name == "relax.vm.alloc_storage"
    assert dict(storage.value.attrs) == {"runtime_device_index": 0, "dtype": "uint8",
                                         "storage_scope": "global"}
    assert isinstance(storage.value.args[0], ShapeExpr)
    assert y.value.op.name == "relax.vm.alloc_tensor" and y.value.args[0] is storage.var
    assert sinfo_eq(y.value.struct_info, tensor((4,), "float32"))
    assert isinstance(call.value.op, GlobalVar) and call.value.args == (main.params[0], y.var)
    assert kill.value.op.name == "relax.vm.kill_object"
    assert null.value.op.name == "relax.null_value" and null.value.args == ()
    # a Python integer for a scalar operand (offset) is a prim value, as in call_op
    text = (FIXTURES / "vm_builtins.py").read_text().replace("R.prim_value(0)", "0")
    offset = bindings(phasec.parse(text)["main"])[1].value.args[1]
    assert isinstance(offset, PrimValue) and offset.value.dtype == "int64"

"""IR modules built node by node for the tests that print, parse, serialize and
report them: one using every node kind (``all_nodes_module``), one per
registered operator (``op_module``), and long chains of bindings."""

from __future__ import annotations

import math

import numpy as np

from phasec.errors import StructInfoError
from phasec.ir import (
    BindingBlock, Call, Constant, DataflowBlock, DataflowVar, DataTypeImm, ExternFunc,
    FuncStructInfo, Function, GlobalVar, If, IRModule, MatchCast, ObjectStructInfo, Op,
    PrimStructInfo, PrimValue, SeqExpr, ShapeExpr, ShapeStructInfo, StringImm,
    TensorStructInfo, Tuple, TupleGetItem, TupleStructInfo, Var, VarBinding, tir,
)
from phasec.op import REQUIRED, call_op


def f32(*shape) -> TensorStructInfo:
    """A float32 tensor struct info of ``shape``."""
    return TensorStructInfo(shape, "float32")


def relax_values_function() -> Function:
    """Leaves and composites: constants, tuples, shapes, prim values, strings,
    dtypes, extern funcs, global vars, match_cast, struct info of every kind."""
    n = tir.Var("n", "int64")
    m = tir.Var("m", "int64")
    x = Var("x", TensorStructInfo((n, 4), "float32"))
    s = Var("s", ShapeStructInfo(ndim=2))
    o = Var("o", ObjectStructInfo())
    p = Var("p", PrimStructInfo("int64"))
    bindings = []

    def bind(name, value, sinfo="infer", cls=Var):
        var = cls(name, value.struct_info if sinfo == "infer" else sinfo)
        bindings.append(VarBinding(var, value))
        return var

    c0 = bind("c0", Constant(np.array(0.1, "float32")))
    bind("c1", Constant(np.array([[1, -2], [3, 4]], "int32")))
    bind("c2", Constant(np.array([math.nan, math.inf, -math.inf, -0.0, 1e-30], "float64")))
    bind("c3", Constant(np.array([True, False], "bool")))
    bind("c4", Constant(np.array([[0.5, 2.0]], "float16")))
    bind("c5", Constant(np.array(255, "uint8")))
    bind("c6", Constant(np.array(-(2 ** 63), "int64")))
    t = bind("t", Tuple([x, c0, Tuple([])]))
    bind("t1", Tuple([x]))
    bind("g", TupleGetItem(t, 1))
    bind("sh", ShapeExpr([n, 4, n * 2]))
    bind("pv", PrimValue(tir.IntImm(3, "int64")))
    bind("pv32", PrimValue(tir.IntImm(-3, "int32")))
    bind("pvf", PrimValue(tir.FloatImm(2.5, "float32")))
    bind("pvn", PrimValue(n + 1))
    bind("st", StringImm('quote " backslash \\ newline \n tab \t unicode é'))
    bind("dt", DataTypeImm("float16"))
    bind("ef", ExternFunc("my.packed"))
    bind("gv", GlobalVar("helper"), FuncStructInfo([f32(2)], f32(2)))
    # match_cast introducing a new symbolic variable m
    y = Var("y", TensorStructInfo((m, 4), "float32"))
    bindings.append(MatchCast(y, x, TensorStructInfo((m, 4), "float32")))
    # variables with every struct info kind
    bind("a0", Tuple([s, o, p]), TupleStructInfo([ShapeStructInfo(ndim=2), ObjectStructInfo(),
                                                 PrimStructInfo("int64")]))
    bind("a1", x, TensorStructInfo(None, "float32", ndim=2))
    bind("a2", x, TensorStructInfo(None, "float32"))
    bind("a3", x, TensorStructInfo())
    bind("a4", x, TensorStructInfo((n, 4)))
    bind("a5", s, ShapeStructInfo([n, 4]))
    bind("a6", s, ShapeStructInfo())
    bind("a7", p, PrimStructInfo("int64", n))
    bind("a8", p, PrimStructInfo("int64", tir.IntImm(7, "int64")))
    bind("a9", o, FuncStructInfo(None, ObjectStructInfo(), purity=True))
    bind("a10", o, FuncStructInfo(None, f32(2), purity=False))
    bind("a11", o, FuncStructInfo([f32(2), ShapeStructInfo(ndim=1)], f32(2), purity=True))
    bind("a12", o, FuncStructInfo([], TupleStructInfo([]), purity=False))
    bind("a13", o, TupleStructInfo([]))
    bind("a14", x, TensorStructInfo((n * 2 + 1, m), "float32"))
    body = SeqExpr([BindingBlock(bindings)], y)
    return Function([x, s, o, p], body, TensorStructInfo((m, 4), "float32"),
                    attrs={"global_symbol": "values"})


def relax_dataflow_function() -> Function:
    """Dataflow blocks (with outputs, DataflowVars, empty), binding blocks,
    op calls with attributes, call_tir with tir_vars and tuple outputs."""
    n = tir.Var("n", "int64")
    x = Var("x", TensorStructInfo((n, 4), "float32"))
    w = Var("w", f32(4, 4))
    mm = call_op("matmul", x, w)
    lv = DataflowVar("lv", mm.struct_info)
    sm = call_op("nn.softmax", lv, axis=1)
    lv1 = DataflowVar("lv", sm.struct_info)  # same hint: printed lv_1
    sum_ = call_op("sum", lv1, axis=[1], keepdims=True)
    gv = Var("gv", sum_.struct_info)
    block1 = DataflowBlock([VarBinding(lv, mm), VarBinding(lv1, sm), VarBinding(gv, sum_)])
    out = TupleStructInfo([TensorStructInfo((n, 4), "float32"), f32(4)])
    ct = call_op("call_tir", GlobalVar("kernel"), (gv, w), ShapeExpr([n]), sinfo_args=[out])
    r = Var("r", out)
    r0 = Var("r0", TensorStructInfo((n, 4), "float32"))
    block2 = BindingBlock([VarBinding(r, ct), VarBinding(r0, TupleGetItem(r, 0))])
    block3 = DataflowBlock([])
    return Function([x, w], SeqExpr([block1, block2, block3], r0),
                    TensorStructInfo((n, 4), "float32"), attrs={"global_symbol": "dataflow"})


def relax_control_function() -> Function:
    """If/else (nested), nested functions (recursive), closures, packed calls,
    calls of globals and locals, impure function with attributes."""
    x = Var("x", f32(4))
    cond = Var("cond", TensorStructInfo((), "bool"))
    fsinfo = FuncStructInfo([f32(4)], f32(4))
    # nested recursive function  inner(v) = inner(v)  (structure only)
    inner_var = Var("inner", fsinfo)
    v = Var("v", f32(4))
    rec = Var("rec", f32(4))
    inner = Function([v], SeqExpr([BindingBlock([VarBinding(rec, Call(inner_var, [v],
                                                                        struct_info=f32(4)))])],
                                  rec), f32(4), attrs={"Primitive": True})
    # if/else with bindings in branches and a nested if in the else branch
    t1 = Var("t1", f32(4))
    then = SeqExpr([BindingBlock([VarBinding(t1, call_op("add", x, x))])], t1)
    e1 = Var("e1", f32(4))
    inner_if = If(cond, SeqExpr([], x), SeqExpr([], e1), struct_info=f32(4))
    e2 = Var("e2", f32(4))
    other = SeqExpr([BindingBlock([VarBinding(e1, call_op("multiply", x, x)),
                                   VarBinding(e2, inner_if)])], e2)
    y = Var("y", f32(4))
    clo = Var("clo", ObjectStructInfo())
    z = Var("z", f32(4))
    z2 = Var("z2", f32(4))
    pk = Var("pk", f32(4))
    pk2 = Var("pk2", TupleStructInfo([f32(4), f32(4)]))
    pp = Var("pp", f32(4))
    dps = Var("dps", f32(4))
    gcall = Var("gcall", f32(4))
    lcall = Var("lcall", f32(4))
    unused = Var("_", ObjectStructInfo())
    bindings = [
        VarBinding(inner_var, inner),
        VarBinding(y, If(cond, then, other, struct_info=f32(4))),
        VarBinding(clo, call_op("make_closure", GlobalVar("helper"), (x,))),
        VarBinding(z, call_op("invoke_closure", clo, (y,), sinfo_args=[f32(4)])),
        VarBinding(z2, call_op("invoke_pure_closure", clo, (z,), sinfo_args=[f32(4)])),
        VarBinding(pk, Call(ExternFunc("test.packed"), [z2, PrimValue(tir.IntImm(1, "int64"))],
                            sinfo_args=[f32(4)], struct_info=f32(4))),
        VarBinding(pk2, Call(ExternFunc("test.packed2"), [pk],
                             sinfo_args=[f32(4), f32(4)], struct_info=pk2.struct_info)),
        VarBinding(pp, call_op("call_pure_packed", ExternFunc("test.pure"), pk, StringImm("k"),
                               sinfo_args=[f32(4)])),
        VarBinding(dps, call_op("call_dps_packed", ExternFunc("test.dps"), (pp, x),
                                sinfo_args=[f32(4)])),
        VarBinding(gcall, Call(GlobalVar("helper"), [dps], struct_info=f32(4))),
        VarBinding(lcall, Call(inner_var, [gcall], struct_info=f32(4))),
        VarBinding(unused, Call(ExternFunc("test.effect"), [lcall], struct_info=ObjectStructInfo())),
    ]
    return Function([x, cond], SeqExpr([BindingBlock(bindings)], lcall), f32(4), is_pure=False,
                    attrs={"global_symbol": "control", "num_input": 1, "ratio": 0.25,
                           "nested": {"b": (1, 2), "a": (3.5, "s", None, True, (-1,))},
                           "inf": math.inf})


def relax_helper_function() -> Function:
    """A private function (no global_symbol): printed with private=True."""
    a = Var("a", f32(4))
    b = Var("b", f32(4))
    r = Var("r", f32(4))
    return Function([a, b], SeqExpr([BindingBlock([VarBinding(r, call_op("add", a, b))])], r),
                    f32(4))


def tir_kernel_static() -> tir.PrimFunc:
    """Blocks with remap and explicit axes, init, reads/writes with slices,
    grid, every loop kind, let/alloc chains, if/else, evaluate, intrinsics."""
    A = tir.Buffer("A", (4, 8), "float32")
    B = tir.Buffer("B", (4,), "float32")
    C = tir.Buffer("C", (4, 8), "float16")
    i, k = tir.Var("i"), tir.Var("k")
    vi, vk = tir.Var("v_i"), tir.Var("v_k")
    reduce_block = tir.Block(
        "B", [tir.IterVar(vi, tir.IntImm(4)), tir.IterVar(vk, tir.IntImm(8), "R")], [i, k],
        tir.BufferStore(B, B[vi] + A[vi, vk], [vi]),
        init=tir.BufferStore(B, tir.FloatImm(0.0), [vi]),
        reads=[tir.BufferRegion(A, ((vi, tir.IntImm(1)), (tir.IntImm(0), tir.IntImm(8))))],
        writes=[tir.BufferRegion(B, ((vi, tir.IntImm(1)),))])
    nest1 = tir.For(i, 0, tir.IntImm(4), "serial", tir.For(k, 0, tir.IntImm(8), "serial",
                                                              reduce_block))
    # explicit axes: bindings that are expressions, not plain loop variables
    j = tir.Var("j")
    vj = tir.Var("v_j")
    T_buf = tir.Buffer("T", (8,), "float32")
    x = tir.Var("x", "float32")
    y = tir.Var("y", "int32")
    body2 = tir.Block(
        "C", [tir.IterVar(vj, tir.IntImm(8))], [j * 1 + 0],
        tir.LetStmt(x, tir.Call("exp", [A[tir.IntImm(0), vj]]),
                    tir.Allocate(T_buf,
                                 tir.SeqStmt([
                                     tir.BufferStore(T_buf, tir.Select(
                                         tir.BinaryOp("and", tir.BinaryOp("<", x, tir.FloatImm(1.0)),
                                                      tir.Not(tir.Call("isnan", [x]))),
                                         x, tir.BinaryOp("max", x, tir.FloatImm(-1.5))), [vj]),
                                     tir.LetStmt(y, tir.IntImm(3, "int32") * tir.IntImm(2, "int32"),
                                                 tir.IfThenElse(
                                                     tir.BinaryOp("==", vj % 2, tir.IntImm(0)),
                                                     tir.BufferStore(C, tir.Cast("float16", T_buf[vj]),
                                                                     [tir.IntImm(1), vj]),
                                                     tir.BufferStore(C, tir.FloatImm(2.0, "float16"),
                                                                     [tir.IntImm(2), vj]))),
                                 ]))),
        reads=[tir.BufferRegion(A, ((tir.IntImm(0), tir.IntImm(1)), (vj, tir.IntImm(1))))],
        writes=[tir.BufferRegion(C, ((tir.IntImm(1), tir.IntImm(2)), (vj, tir.IntImm(1))))])
    loop2 = tir.For(j, 0, tir.IntImm(8), "parallel", body2)
    p = tir.Var("p")
    q = tir.Var("q", "int32")
    u = tir.Var("u")
    misc = [
        tir.For(p, tir.IntImm(2), tir.IntImm(6), "vectorized",
                tir.BufferStore(A, tir.FloatImm(math.nan), [tir.IntImm(0), p])),
        tir.For(q, tir.IntImm(0, "int32"), tir.IntImm(4, "int32"), "unroll",
                tir.Evaluate(q + 1)),
        tir.For(u, tir.IntImm(0), tir.IntImm(3), "serial",
                tir.IfThenElse(tir.BinaryOp(">=", u, tir.IntImm(1)),
                               tir.BufferStore(A, tir.FloatImm(-math.inf) * tir.FloatImm(0.5),
                                               [u, tir.IntImm(0)]))),
        tir.Evaluate(tir.IntImm(0, "int32")),
    ]
    return tir.PrimFunc([A, B, C], tir.SeqStmt([nest1, loop2, *misc]),
                        {"tir.noalias": True, "global_symbol": "kernel_static"})


def tir_kernel_symbolic() -> tir.PrimFunc:
    """Symbolic shapes (handles + match_buffer), a scalar parameter, non-default
    dtypes, symbolic loop bounds and regions, mixed literal dtypes."""
    n = tir.Var("n", "int64")
    m = tir.Var("m", "int64")
    X = tir.Buffer("X", (n, 4), "float32")
    Y = tir.Buffer("Y", (n, 4), "int8")
    i, j = tir.Var("i"), tir.Var("j")
    vi, vj = tir.Var("v_i"), tir.Var("v_j")
    blk = tir.Block("Y", [tir.IterVar(vi, n), tir.IterVar(vj, tir.IntImm(4))], [i, j],
                    tir.BufferStore(Y, tir.Cast("int8", X[vi, vj] * tir.FloatImm(2.0)), [vi, vj]),
                    reads=[tir.BufferRegion(X, ((vi, tir.IntImm(1)), (tir.IntImm(0), tir.IntImm(4))))],
                    writes=[tir.BufferRegion(Y, ((vi, tir.IntImm(1)), (vj, tir.IntImm(1))))])
    loops = tir.For(i, 0, n, "parallel", tir.For(j, 0, tir.IntImm(4), "vectorized", blk))
    k = tir.Var("k")
    w = tir.Var("w", "int32")
    tail = tir.For(k, m, n, "serial", tir.BufferStore(Y, tir.IntImm(1, "int8"), [k, k % 4]))
    mixed = tir.Evaluate(tir.BinaryOp("+", w, tir.IntImm(1, "int32")))
    mixed2 = tir.Evaluate(tir.BinaryOp("<", tir.IntImm(1, "int32"), tir.Cast("int32", m)))
    mixed3 = tir.Evaluate(tir.BinaryOp("*", tir.IntImm(2, "int32"), tir.IntImm(3, "int32")))
    mixed4 = tir.Evaluate(tir.BinaryOp("-", tir.Cast("int32", n), tir.IntImm(5, "int32")))
    mixed5 = tir.Evaluate(tir.BinaryOp("//", tir.IntImm(7, "int32"), tir.IntImm(2, "int64")))
    region_blk = tir.Block("R", [], [], tir.Evaluate(tir.IntImm(0, "int32")),
                           reads=[tir.BufferRegion(X, ((m, n), (tir.IntImm(0), tir.IntImm(4))))])
    let = tir.LetStmt(w, tir.Cast("int32", m), tir.SeqStmt([tail, mixed, mixed2, mixed3, mixed4,
                                                            mixed5, region_blk]))
    return tir.PrimFunc([X, Y, m], tir.SeqStmt([loops, let]))


def all_nodes_module() -> IRModule:
    """Every Relax and TIR node kind, in six functions, with module attributes."""
    return IRModule({
        "values": relax_values_function(),
        "dataflow": relax_dataflow_function(),
        "control": relax_control_function(),
        "helper": relax_helper_function(),
        "kernel": tir_kernel_symbolic(),
        "kernel_static": tir_kernel_static(),
    }, {"phase": "ingestion", "note": "round trip", "version": (1, 2)})


class OperandEnv:
    """Parameters the operator calls draw their operands from."""

    def __init__(self) -> None:
        self.x = Var("x", f32(2, 3))
        self.y = Var("y", f32(2, 3))
        self.row = Var("row", f32(1, 3))
        self.vec = Var("vec", f32(3))
        self.b = Var("b", TensorStructInfo((2, 3), "bool"))
        self.idx = Var("idx", TensorStructInfo((2,), "int64"))
        self.img = Var("img", f32(1, 3, 8, 8))
        self.wgt = Var("wgt", f32(4, 3, 3, 3))
        self.obj = Var("obj", ObjectStructInfo())
        self.seq = Var("seq", f32(1, 3, 8))
        self.vol = Var("vol", f32(1, 3, 4, 4, 4))
        self.wgt1 = Var("wgt1", f32(4, 3, 3))
        self.wgt3 = Var("wgt3", f32(4, 3, 2, 2, 2))
        self.bias = Var("bias", f32(1, 8, 3, 3))
        self.idx2 = Var("idx2", TensorStructInfo((2, 3), "int64"))
        self.idx1 = Var("idx1", TensorStructInfo((2, 1), "int64"))
        self.params = [self.x, self.y, self.row, self.vec, self.b, self.idx, self.img, self.wgt,
                       self.obj, self.seq, self.vol, self.wgt1, self.wgt3, self.bias, self.idx2,
                       self.idx1]


#: Operators whose operands/attributes cannot be guessed (generic_call): name -> builder(env) -> call.
OP_TABLE = {
    "relax.astype": lambda e: call_op("astype", e.x, dtype="float16"),
    "relax.broadcast_to": lambda e: call_op("broadcast_to", e.row, (2, 3)),
    "relax.builtin.alloc_tensor": lambda e: call_op("builtin.alloc_tensor", (2, 3), dtype="float32"),
    "relax.call_dps_packed": lambda e: call_op("call_dps_packed", ExternFunc("ext.f"), (e.x, e.y),
                                               sinfo_args=[f32(2, 3)]),
    "relax.call_pure_packed": lambda e: call_op("call_pure_packed", ExternFunc("ext.g"), e.x,
                                                sinfo_args=[f32(2, 3)]),
    "relax.call_tir": lambda e: call_op("call_tir", GlobalVar("copy"), (e.x,),
                                        sinfo_args=[f32(2, 3)]),
    "relax.call_tir_inplace": lambda e: call_op("call_tir_inplace", GlobalVar("copy"), (e.x, e.y),
                                                inplace_indices=[1], sinfo_args=[f32(2, 3)]),
    "relax.call_tir_with_grad": lambda e: call_op(
        "call_tir_with_grad", GlobalVar("copy"), (e.x,), te_grad_name="copy_grad",
        te_grad_kwargs={"axis": 1, "mode": "x"}, sinfo_args=[f32(2, 3)]),
    "relax.clip": lambda e: call_op("clip", e.x, min=0.0, max=1.0),
    "relax.concat": lambda e: call_op("concat", (e.x, e.y), axis=1),
    "relax.expand_dims": lambda e: call_op("expand_dims", e.x, axis=0),
    "relax.full": lambda e: call_op("full", (2, 3), Constant(np.array(1.5, "float32"))),
    "relax.invoke_closure": lambda e: call_op("invoke_closure", e.obj, (e.x,), sinfo_args=[f32(2, 3)]),
    "relax.invoke_pure_closure": lambda e: call_op("invoke_pure_closure", e.obj, (e.x,),
                                                   sinfo_args=[f32(2, 3)]),
    "relax.make_closure": lambda e: call_op("make_closure", GlobalVar("closed"), (e.y,)),
    "relax.memory.alloc_storage": lambda e: call_op("memory.alloc_storage", ShapeExpr([24])),
    "relax.memory.alloc_tensor": lambda e: call_op("memory.alloc_tensor", e.obj, 0, (2, 3),
                                                   dtype="float32"),
    "relax.memory.kill_storage": lambda e: call_op("memory.kill_storage", e.obj),
    "relax.memory.kill_tensor": lambda e: call_op("memory.kill_tensor", e.x),
    "relax.nn.avg_pool2d": lambda e: call_op("nn.avg_pool2d", e.img, pool_size=(2, 2)),
    "relax.nn.conv2d": lambda e: call_op("nn.conv2d", e.img, e.wgt, padding=(1, 1, 1, 1)),
    "relax.nn.layer_norm": lambda e: call_op("nn.layer_norm", e.x, e.vec, e.vec, axes=[-1]),
    "relax.nn.max_pool2d": lambda e: call_op("nn.max_pool2d", e.img, pool_size=(2, 2)),
    "relax.nn.im2col": lambda e: call_op("nn.im2col", e.img, kernel_size=(2, 3), strides=(1, 2),
                                         padding=(1, 0, 0, 1)),
    "relax.nn.im2col_matmul": lambda e: call_op(
        "nn.im2col_matmul", Constant(np.full((1, 2, 4, 4), 3, np.uint8)),
        Constant(np.ones((3, 8), np.int8)), kernel_size=(2, 2), pad_value=3.0),
    "relax.nn.rms_norm": lambda e: call_op("nn.rms_norm", e.x, e.vec),
    "relax.nn.adaptive_avg_pool1d": lambda e: call_op("nn.adaptive_avg_pool1d", e.seq,
                                                      output_size=2, layout="NWC"),
    "relax.nn.adaptive_avg_pool2d": lambda e: call_op("nn.adaptive_avg_pool2d", e.img,
                                                      output_size=(1, 2)),
    "relax.nn.adaptive_avg_pool3d": lambda e: call_op("nn.adaptive_avg_pool3d", e.vol),
    "relax.nn.avg_pool1d": lambda e: call_op("nn.avg_pool1d", e.seq, pool_size=2,
                                             count_include_pad=True, padding=1),
    "relax.nn.avg_pool3d": lambda e: call_op("nn.avg_pool3d", e.vol, pool_size=2, ceil_mode=True,
                                             strides=2),
    "relax.nn.batch_norm": lambda e: call_op("nn.batch_norm", e.x, e.vec, e.vec, e.vec, e.vec,
                                             axis=1, training=False, momentum=0.2),
    "relax.nn.conv1d": lambda e: call_op("nn.conv1d", e.seq, e.wgt1, padding=(1, 0), strides=2),
    "relax.nn.conv3d": lambda e: call_op("nn.conv3d", e.vol, e.wgt3, dilation=2,
                                         out_dtype="float32"),
    "relax.nn.conv1d_transpose": lambda e: call_op("nn.conv1d_transpose", e.seq, e.wgt1,
                                                   strides=2, output_padding=1,
                                                   kernel_layout="OIW"),
    "relax.nn.conv2d_transpose": lambda e: call_op("nn.conv2d_transpose", e.img, e.wgt,
                                                   padding=(1, 0), kernel_layout="OIHW"),
    "relax.nn.conv3d_transpose": lambda e: call_op("nn.conv3d_transpose", e.vol, e.wgt3,
                                                   dilation=(1, 2, 1), kernel_layout="OIDHW"),
    "relax.nn.dropout": lambda e: call_op("nn.dropout", e.x, rate=0.25),
    "relax.image.resize2d": lambda e: call_op("image.resize2d", e.img, (4, 5), method="cubic",
                                              roi=(0.0, 0.1, 1.0, 0.9)),
    "relax.quantize": lambda e: call_op("quantize", e.x, e.vec, Constant(np.array(3, "int8")),
                                        axis=1, out_dtype="int8"),
    "relax.dequantize": lambda e: call_op("dequantize", e.x, e.vec, Constant(np.array(3, "int8")),
                                          axis=-1, out_dtype="float16"),
    "relax.nn.attention": lambda e: call_op("nn.attention", e.img, e.img, e.img,
                                            causal_mask="BottomRight"),
    "relax.nn.attention_bias": lambda e: call_op("nn.attention_bias", e.img, e.img, e.img,
                                                 e.bias, scale=0.5),
    "relax.nn.cross_entropy_with_logits": lambda e: call_op("nn.cross_entropy_with_logits",
                                                            e.x, e.y),
    "relax.nn.nll_loss": lambda e: call_op("nn.nll_loss", e.x, e.idx, e.vec, reduction="sum",
                                           ignore_index=2),
    "relax.nn.group_norm": lambda e: call_op("nn.group_norm", e.img, e.vec, e.vec, num_groups=3,
                                             channel_axis=1, axes=[2, 3]),
    "relax.nn.instance_norm": lambda e: call_op("nn.instance_norm", e.img, e.vec, e.vec,
                                                channel_axis=1, axes=[2, 3], epsilon=0.01),
    "relax.nn.leakyrelu": lambda e: call_op("nn.leakyrelu", e.x, alpha=0.125),
    "relax.nn.max_pool1d": lambda e: call_op("nn.max_pool1d", e.seq, pool_size=3, dilation=2),
    "relax.nn.max_pool3d": lambda e: call_op("nn.max_pool3d", e.vol, pool_size=(1, 2, 2),
                                             layout="NDHWC", out_layout="NCDHW"),
    "relax.nn.prelu": lambda e: call_op("nn.prelu", e.x, e.vec, axis=1),
    "relax.nn.softplus": lambda e: call_op("nn.softplus", e.x, beta=2.0, threshold=10.0),
    "relax.null_value": lambda e: call_op("null_value"),
    "relax.ones": lambda e: call_op("ones", (2, 3)),
    "relax.zeros": lambda e: call_op("zeros", (2, 3), dtype="int32"),
    "relax.reshape": lambda e: call_op("reshape", e.x, (3, 2)),
    "relax.split": lambda e: call_op("split", e.x, indices_or_sections=2, axis=0),
    "relax.strided_slice": lambda e: call_op("strided_slice", e.x, axes=[1], begin=[0], end=[2]),
    "relax.take": lambda e: call_op("take", e.x, e.idx, axis=1),
    "relax.vm.alloc_storage": lambda e: call_op("vm.alloc_storage", ShapeExpr([24])),
    "relax.vm.alloc_tensor": lambda e: call_op("vm.alloc_tensor", e.obj, 0, (2, 3), dtype="float32"),
    "relax.vm.kill_object": lambda e: call_op("vm.kill_object", e.obj),
    "relax.where": lambda e: call_op("where", e.b, e.x, e.y),
    "relax.permute_dims": lambda e: call_op("permute_dims", e.x, axes=[1, 0]),
    "relax.sum": lambda e: call_op("sum", e.x, axis=[1], keepdims=True),
}


def _pv(v) -> PrimValue:
    return PrimValue(tir.IntImm(v, "int64") if isinstance(v, int) else tir.FloatImm(v, "float32"))


# issue 13's creation, data-movement and statistics operators
OP_TABLE.update({
    "relax.arange": lambda e: call_op("arange", _pv(0), _pv(6), _pv(2), dtype="int32"),
    "relax.full_like": lambda e: call_op("full_like", e.x, Constant(np.array(2, "int32")),
                                         dtype="float16"),
    "relax.tril": lambda e: call_op("tril", e.x, _pv(-1)),
    "relax.triu": lambda e: call_op("triu", e.x, _pv(1)),
    "relax.one_hot": lambda e: call_op("one_hot", e.idx, _pv(1.0), _pv(0.0), depth=4, axis=0),
    "relax.eye": lambda e: call_op("eye", _pv(2), _pv(3), _pv(1), dtype="int8"),
    "relax.eye_like": lambda e: call_op("eye_like", e.x, _pv(0), dtype="float64"),
    "relax.tile": lambda e: call_op("tile", e.x, repeats=[2, 1, 3]),
    "relax.repeat": lambda e: call_op("repeat", e.x, repeats=2, axis=1),
    "relax.flip": lambda e: call_op("flip", e.x, axis=-1),
    "relax.nn.pad": lambda e: call_op("nn.pad", e.x, pad_width=[1, 0, 2, 3], pad_mode="reflect",
                                      pad_value=0.5),
    "relax.argmax": lambda e: call_op("argmax", e.x, axis=1, keepdims=True),
    "relax.argmin": lambda e: call_op("argmin", e.x),
    "relax.variance": lambda e: call_op("variance", e.x, axis=[0], keepdims=True),
    "relax.std": lambda e: call_op("std", e.x, axis=[1]),
    "relax.cumsum": lambda e: call_op("cumsum", e.x, axis=1, dtype="float64", exclusive=True),
    "relax.cumprod": lambda e: call_op("cumprod", e.x, axis=0),
    "relax.gather_elements": lambda e: call_op("gather_elements", e.x, e.idx2, axis=1),
    "relax.gather_nd": lambda e: call_op("gather_nd", e.x, e.idx1, batch_dims=0),
    "relax.scatter_elements": lambda e: call_op("scatter_elements", e.x, e.idx2, e.x,
                                                reduction="max"),
    "relax.scatter_nd": lambda e: call_op("scatter_nd", e.x, e.idx1, e.y, reduction="add"),
    "relax.shape_of": lambda e: call_op("shape_of", e.x),
    "relax.hamming_window": lambda e: call_op("hamming_window", _pv(5), _pv(1), _pv(0.54),
                                              _pv(0.46), dtype="float64"),
    "relax.bucketize": lambda e: call_op("bucketize", e.x, e.vec, right=True),
    "relax.reverse_sequence": lambda e: call_op("reverse_sequence", e.x, e.idx, seq_axis=1),
    "relax.index_tensor": lambda e: call_op("index_tensor", e.x, Tuple([e.idx, e.idx])),
    "relax.stack": lambda e: call_op("stack", Tuple([e.x, e.y]), axis=2),
    "relax.meshgrid": lambda e: call_op("meshgrid", Tuple([e.vec, e.vec]), indexing="xy"),
    "relax.outer": lambda e: call_op("outer", e.vec, e.vec),
    "relax.einsum": lambda e: call_op("einsum", Tuple([e.x, e.y]), subscripts="ij,kj->ik"),
    "relax.collapse_sum_to": lambda e: call_op("collapse_sum_to", e.x, ShapeExpr([1, 3])),
    "relax.collapse_sum_like": lambda e: call_op("collapse_sum_like", e.x, e.vec),
    "relax.nn.pixel_shuffle": lambda e: call_op("nn.pixel_shuffle", e.bias, upscale_factor=2),
    "relax.slice_scatter": lambda e: call_op("slice_scatter", e.x, e.row, _pv(1), _pv(2),
                                             _pv(1), axis=0),
    "relax.dynamic_strided_slice": lambda e: call_op("dynamic_strided_slice", e.x, e.idx,
                                                     e.idx, e.idx),
    "relax.argsort": lambda e: call_op("argsort", e.x, axis=0, descending=True, dtype="int64"),
    "relax.topk": lambda e: call_op("topk", e.x, k=2, ret_type="indices", largest=False),
    "relax.median": lambda e: call_op("median", e.x, axis=[1], keepdims=True),
    "relax.unique": lambda e: call_op("unique", e.x, sorted=False, return_counts=True, axis=1),
    "relax.shape_to_tensor": lambda e: call_op("shape_to_tensor", ShapeExpr([2, 3])),
    "relax.tensor_to_shape": lambda e: call_op("tensor_to_shape", e.idx),
    "relax.print": lambda e: call_op("print", e.x, e.idx, format="x={} i={}\n\"q\""),
    "relax.assert_op": lambda e: call_op("assert_op", Constant(np.array(True)), e.x,
                                         format="bad {}"),
    "relax.index_put": lambda e: call_op("index_put", e.x, Tuple([e.idx, e.idx]),
                                         Constant(np.array(1.0, "float32")), accumulate=True),
    "relax.call_inplace_packed": lambda e: call_op(
        "call_inplace_packed", ExternFunc("f"), e.x, e.y, inplace_indices=[1, -1],
        sinfo_args=[TupleStructInfo([f32(2, 3), f32(2, 3)])]),
    "relax.memory.view": lambda e: call_op("memory.view", e.x, ShapeExpr([3, 2])),
    "relax.vm.call_tir_dyn": lambda e: call_op("vm.call_tir_dyn", GlobalVar("copy"),
                                               Tuple([e.x, e.y])),
    "relax.layout_transform": lambda e: call_op("layout_transform", e.x,
                                                index_map="lambda i, j: (j, i // 4, i % 4)",
                                                pad_value=1.5),
})

#: Guesses for required attributes of operators not in the table.
_ATTR_GUESSES = {"axis": 0, "axes": (0,), "dtype": "float32", "indices_or_sections": 1}


def generic_call(opdef, env: OperandEnv) -> Call:
    """Build a call of an operator not in the table: tensor operands of one
    dtype, required attributes guessed. Without inferable struct info the call
    is still printable (its variable is then unannotated)."""
    attrs = {k: _ATTR_GUESSES.get(k, 1) for k, d in opdef.attrs.items() if d is REQUIRED}
    n = len(opdef.args)
    for operand in (env.x, env.b, env.idx):
        try:
            return call_op(opdef.name, *([operand] * n), **attrs)
        except (StructInfoError, TypeError, ValueError):
            continue
    full = {k: (d if d is not REQUIRED else attrs[k]) for k, d in opdef.attrs.items()}
    return Call(Op(opdef.name), [env.x] * n, full)


def op_module(opdef) -> IRModule:
    """``main`` calling the operator ``opdef`` once (from OP_TABLE, or a guessed
    call), beside a PrimFunc ``copy`` and a plain function ``closed``."""
    env = OperandEnv()
    builder = OP_TABLE.get(opdef.name)
    call = builder(env) if builder is not None else generic_call(opdef, env)
    if builder is not None:
        assert call.struct_info is not None, f"{opdef.name}: the table's call does not infer"
    r = Var("r", call.struct_info)
    pure = opdef.pure and opdef.category == "compute"
    block = (DataflowBlock if pure else BindingBlock)([VarBinding(r, call)])
    main = Function(env.params, SeqExpr([block], r), call.struct_info, is_pure=opdef.pure,
                    attrs={"global_symbol": "main"})
    A = tir.Buffer("A", (2, 3))
    B = tir.Buffer("B", (2, 3))
    i, j = tir.Var("i"), tir.Var("j")
    copy = tir.PrimFunc([A, B], tir.For(i, 0, tir.IntImm(2), "serial", tir.For(
        j, 0, tir.IntImm(3), "serial", tir.BufferStore(B, A[i, j], [i, j]))))
    return IRModule({"main": main, "copy": copy, "closed": relax_closed_function()})


def relax_closed_function() -> Function:
    """``closed(a, b) = a + b``: a function without free variables."""
    a = Var("a", f32(2, 3))
    b = Var("b", f32(2, 3))
    r = Var("r", f32(2, 3))
    return Function([a, b], SeqExpr([BindingBlock([VarBinding(r, call_op("add", a, b))])], r),
                    f32(2, 3))


#: The passes from ingestion to build, in a working order.
PIPELINE = ["Normalize", "LambdaLifting", "FoldConstant", "FuseOps", "ToNonDataflow",
            "LegalizeOps", "RemovePurityChecking", "CallTIRRewrite", "StaticPlanBlockMemory",
            "VMBuiltinLower"]


def add_chain_module(n: int) -> IRModule:
    """``main(x)``: ``n`` bindings, each adding ``x`` to the previous one, in
    one (non-dataflow) block."""
    x = Var("x", TensorStructInfo((8,), "float32"))
    bindings, prev = [], x
    for i in range(n):
        v = Var(f"v{i}", TensorStructInfo((8,), "float32"))
        bindings.append(VarBinding(v, call_op("add", prev, x)))
        prev = v
    return IRModule({"main": Function([x], SeqExpr([BindingBlock(bindings)], prev),
                                      prev.struct_info, attrs={"global_symbol": "main"})})



def folded_weights() -> tuple[np.ndarray, np.ndarray]:
    """The weight (64x48, 3,072 elements) and bias (48) of :func:`folded_weights_module`."""
    w = (np.arange(64 * 48, dtype="float32").reshape(64, 48) % 7) - 3
    b = np.linspace(-1, 1, 48, dtype="float32")
    return w, b


def folded_weights_module() -> IRModule:
    """``main(x) = relu(x @ (w * 2) + b)`` with constant ``w`` and ``b``
    (:func:`folded_weights`): FoldConstant folds ``w * 2`` into a second
    64x48 constant."""
    w, b = folded_weights()
    x = Var("x", TensorStructInfo((2, 64), "float32"))
    bindings = []

    def bind(name, value):
        var = Var(name, value.struct_info)
        bindings.append(VarBinding(var, value))
        return var

    w2 = bind("w2", call_op("multiply", Constant(w), Constant(np.array(2.0, "float32"))))
    h = bind("h", call_op("matmul", x, w2))
    hb = bind("hb", call_op("add", h, Constant(b)))
    y = bind("y", call_op("nn.relu", hb))
    return IRModule({"main": Function([x], SeqExpr([BindingBlock(bindings)], y),
                                      y.struct_info, attrs={"global_symbol": "main"})})

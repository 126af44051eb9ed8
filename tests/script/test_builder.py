"""BlockBuilder and normalize_function: A-normal form, struct info, fresh names."""


import numpy as np
import pytest

from phasec.errors import StructInfoError
from phasec.ir import (
    BindingBlock, Call, Constant, DataflowBlock, DataflowVar, ExternFunc, FuncStructInfo, Function,
    GlobalVar, If, IRModule, MatchCast, Op, SeqExpr, TensorStructInfo, Tuple, TupleGetItem,
    TupleStructInfo, Var, VarBinding, structural_equal, tir,
)
from phasec.interp import run as run_interp
from phasec.script.builder import BlockBuilder, NameTable, is_leaf, normalize_function
from phasec.verifier import verify
from phasec.ir.text import sinfo_to_str
from phasec.op import InferContext, call_op

n = tir.Var("n")


def T(shape=None, dtype="float32", ndim=-1):
    return TensorStructInfo(shape, dtype, ndim)


def raw(name, *args, **attrs):
    """An operator call WITHOUT struct info (as a careless producer would build)."""
    return Call(Op("relax." + name), args, attrs)


def bindings(func):
    return [b for block in func.body.blocks for b in block.bindings]


def assert_anf(func):
    """Every call operand is a leaf and every binding var has struct info."""
    for b in bindings(func):
        assert b.var.struct_info is not None
        v = b.value
        if isinstance(v, Call):
            assert v.struct_info is not None
            assert all(is_leaf(a) for a in v.args), [type(a).__name__ for a in v.args]
    assert is_leaf(func.body.body)


# ---------------------------------------------------------------------------
# BlockBuilder
# ---------------------------------------------------------------------------

def test_build_function_with_dataflow_block():
    x = Var("x", T((n, 4)))
    w = Var("w", T((4, 4)))
    bb = BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            lv = bb.emit(call_op("matmul", x, w))
            lv1 = bb.emit(call_op("nn.relu", lv))
            gv = bb.emit_output(call_op("add", lv1, Constant(np.float32(1.0))))
        bb.emit_func_output(gv)
    mod = bb.get()
    f = mod["main"]
    assert isinstance(f, Function) and f.attrs["global_symbol"] == "main"
    assert len(f.body.blocks) == 1 and isinstance(f.body.blocks[0], DataflowBlock)
    assert [type(b.var) for b in bindings(f)] == [DataflowVar, DataflowVar, Var]
    assert [b.var.name_hint for b in bindings(f)] == ["lv", "lv1", "gv"]
    assert f.body.body is gv
    assert sinfo_to_str(f.ret_struct_info) == 'R.Tensor((n, 4), dtype="float32")'
    assert isinstance(f.struct_info, FuncStructInfo)
    assert normalize_function(f) is f


def test_emit_binds_nested_operands_and_names_are_fresh():
    x = Var("x", T((2, 3)))
    bb = BlockBuilder()
    with bb.function("f", [x], private=True):
        nested = raw("exp", raw("add", x, raw("negative", x)))
        v = bb.emit(nested, name_hint="x")  # "x" is taken by the parameter
        bb.emit_func_output(raw("sum", v))
    f = bb.get()["f"]
    assert "global_symbol" not in f.attrs
    names = [b.var.name_hint for b in bindings(f)]
    assert len(set(names)) == len(names) and "x" not in names
    assert names[-2] == "x1"
    assert_anf(f)
    assert sinfo_to_str(f.ret_struct_info) == 'R.Tensor((), dtype="float32")'
    # the output call was bound in a trailing (non-dataflow) block
    assert isinstance(f.body.blocks[-1], BindingBlock)


def test_match_cast_and_tuple_output():
    x = Var("x", T(ndim=2))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        y = bb.match_cast(x, T((n, 4)))
        z = bb.emit(call_op("exp", y))
        bb.emit_func_output(Tuple([y, z]))
    f = bb.get()["main"]
    mc = bindings(f)[0]
    assert isinstance(mc, MatchCast) and mc.var is y
    assert sinfo_to_str(z.struct_info) == 'R.Tensor((n, 4), dtype="float32")'
    assert isinstance(f.body.body, Tuple)
    assert sinfo_to_str(f.ret_struct_info).startswith("R.Tuple(")


def test_builder_errors():
    x = Var("x", T((2,)))
    bb = BlockBuilder()
    with pytest.raises(StructInfoError, match="inside 'with bb.function"):
        bb.emit(call_op("exp", x))
    with pytest.raises(StructInfoError, match="emit_output must be called inside"):
        with bb.function("f", [x]):
            bb.emit_output(call_op("exp", x))
    with pytest.raises(StructInfoError, match="outside the dataflow block"):
        with bb.function("f", [x]):
            with bb.dataflow():
                bb.emit_func_output(x)
    with pytest.raises(StructInfoError, match="ended without emit_func_output"):
        with bb.function("f", [x]):
            bb.emit(call_op("exp", x))
    with pytest.raises(StructInfoError, match="must be a Var with struct info"):
        with bb.function("f", [Var("p")]):
            pass
    with pytest.raises(StructInfoError, match="same datatype"):
        with bb.function("f", [x]):
            bb.emit(raw("add", x, Var("y", T((2,), "int32"))))
    assert len(bb.get()) == 0  # nothing half-built was added


def test_add_func_names_and_module_context():
    x = Var("x", T((2,)))
    base = IRModule({"f": Function([x], SeqExpr([], x))})
    bb = BlockBuilder(base)
    g = Function([x], SeqExpr([], x))
    gv = bb.add_func(g, "f")
    assert gv.name_hint == "f1"
    assert bb.add_func(g, "other").name_hint == "f1"  # same object: same name
    assert bb.add_func(Function([x], SeqExpr([], x)), "f").name_hint == "f2"
    y = Var("y", T((2,)))
    with bb.function("main", [y]):
        r = bb.emit(Call(GlobalVar("f"), [y]))  # callee struct info from the module
        bb.emit_func_output(r)
    mod = bb.get()
    assert sinfo_to_str(r.struct_info) == 'R.Tensor((2,), dtype="float32")'
    assert set(mod.functions) == {"f", "f1", "f2", "main"}
    assert set(base.functions) == {"f"}  # the input module is untouched


def test_normalize_method():
    x = Var("x", T((2, 3)))
    bb = BlockBuilder()
    # outside a function: struct info only
    c = bb.normalize(raw("exp", x))
    assert sinfo_to_str(c.struct_info) == 'R.Tensor((2, 3), dtype="float32")'
    assert bb.normalize(c) is c
    with bb.function("f", [x]):
        e = bb.normalize(raw("add", raw("exp", x), x))
        assert isinstance(e.args[0], Var) and e.struct_info is not None
        assert bb.normalize(e) is e
        bb.emit_func_output(bb.emit(e))
    assert_anf(bb.get()["f"])


def test_name_table():
    t = NameTable(["lv", "lv1", "gv"])
    assert [t.fresh("lv") for _ in range(3)] == ["lv2", "lv3", "lv4"]
    assert t.fresh("x") == "x" and t.fresh("x") == "x1"
    assert t.fresh("") == "v"


# ---------------------------------------------------------------------------
# normalize_function
# ---------------------------------------------------------------------------

def test_normalize_function_binds_nested_calls():
    x = Var("x", T((n, 4)))
    y = Var("y")  # no struct info yet
    z = Var("z")
    body = SeqExpr([DataflowBlock([
        VarBinding(y, raw("add", raw("exp", x), x)),
        VarBinding(z, raw("multiply", y, y)),
    ])], raw("nn.relu", z))
    f = Function([x], body)
    g = normalize_function(f)
    assert g is not f
    assert_anf(g)
    bs = bindings(g)
    assert [b.var.name_hint for b in bs] == ["lv", "y", "z", "lv1"]
    assert isinstance(bs[0].var, DataflowVar)  # fresh var inside a dataflow block
    assert isinstance(bs[-1].var, Var) and not isinstance(bs[-1].var, DataflowVar)
    # uses of retyped variables were updated
    assert bs[2].value.args[0] is bs[1].var
    assert sinfo_to_str(bs[2].var.struct_info) == 'R.Tensor((n, 4), dtype="float32")'
    assert sinfo_to_str(g.ret_struct_info) == 'R.Tensor((n, 4), dtype="float32")'
    # idempotent: normalizing again returns the very same object
    assert normalize_function(g) is g


def test_normalize_is_identity_on_normal_functions():
    x = Var("x", T((2,)))
    lv = Var("lv", T((2,)))
    f = Function([x], SeqExpr([BindingBlock([VarBinding(lv, call_op("exp", x))])], lv))
    assert normalize_function(f) is f


def test_normalize_tuples_getitem_if_and_inner_functions():
    x = Var("x", T((2,)))
    c = Var("c", T((), "bool"))
    t = Var("t")
    item = Var("item")
    r = Var("r")
    inner_p = Var("p", T((2,)))
    inner = Function([inner_p], SeqExpr([], raw("exp", raw("exp", inner_p))))
    fv = Var("fv")
    then_ = SeqExpr([], raw("negative", x))
    else_ = SeqExpr([], x)
    body = SeqExpr([BindingBlock([
        VarBinding(t, Tuple([raw("exp", x), x])),
        VarBinding(item, TupleGetItem(Tuple([raw("abs", x)]), 0)),
        VarBinding(r, If(c, then_, else_)),
        VarBinding(fv, inner),
    ])], Tuple([t, item, r, fv]))
    f = Function([x, c], body)
    g = normalize_function(f)
    assert_anf(g)
    bs = bindings(g)
    by_name = {b.var.name_hint: b for b in bs}
    assert isinstance(by_name["t"].value, Tuple) and all(is_leaf(e) for e in by_name["t"].value.fields)
    assert sinfo_to_str(by_name["item"].var.struct_info) == 'R.Tensor((2,), dtype="float32")'
    branch = by_name["r"].value
    assert isinstance(branch, If) and is_leaf(branch.true_branch.body)
    assert sinfo_to_str(by_name["r"].var.struct_info) == 'R.Tensor((2,), dtype="float32")'
    inner2 = by_name["fv"].value
    assert isinstance(inner2, Function) and len(bindings(inner2)) == 2
    assert isinstance(by_name["fv"].var.struct_info, FuncStructInfo)
    assert normalize_function(g) is g
    # fresh names do not collide with any name in the function (inner ones too)
    names = [b.var.name_hint for b in bs] + [b.var.name_hint for b in bindings(inner2)]
    assert len(names) == len(set(names))


def test_normalize_function_needs_param_struct_info():
    p = Var("p")
    with pytest.raises(StructInfoError, match="parameter p"):
        normalize_function(Function([p], SeqExpr([], p)))


def test_normalize_with_context_for_global_calls():
    x = Var("x", T((3, 4)))
    fn = tir.Var("fn")
    ctx = InferContext({"g": FuncStructInfo([T((fn, 4))], T((fn,)))})
    y = Var("y")
    f = Function([x], SeqExpr([BindingBlock([VarBinding(y, Call(GlobalVar("g"), [x]))])], y))
    g = normalize_function(f, ctx)
    assert sinfo_to_str(bindings(g)[0].var.struct_info) == 'R.Tensor((3,), dtype="float32")'


def test_normalize_result_matches_builder_structurally():
    x = Var("x", T((2, 3)))
    bb = BlockBuilder()
    with bb.function("f", [x], private=True):
        with bb.dataflow():
            a = bb.emit(call_op("exp", x))
            b = bb.emit_output(call_op("add", a, x))
        bb.emit_func_output(b)
    built = bb.get()["f"]
    y = Var("b")
    manual = Function([x], SeqExpr([DataflowBlock([VarBinding(y, raw("add", raw("exp", x), x))])], y))
    assert structural_equal(normalize_function(manual), built)


def test_packed_calls_and_extern_leaves():
    x = Var("x", T((2,)))
    out = Var("out")
    call = Call(ExternFunc("my_print"), [raw("exp", x)], sinfo_args=[TupleStructInfo([])])
    f = Function([x], SeqExpr([BindingBlock([VarBinding(out, call)])], x), is_pure=False)
    g = normalize_function(f)
    assert_anf(g)
    assert sinfo_to_str(bindings(g)[-1].var.struct_info) == "R.Tuple()"


# ---------------------------------------------------------------------------
# scale
# ---------------------------------------------------------------------------

def test_100k_bindings_build_and_normalize():
    count = 100_000
    x = Var("x", T((n, 4)))
    add = Op("relax.add")
    # An un-normalized chain: every binding nests a call and lacks struct info.
    bs = []
    prev = x
    for i in range(count // 2):
        v = Var(f"v{i}")
        bs.append(VarBinding(v, Call(add, [Call(add, [prev, x]), x])))
        prev = v
    f = Function([x], SeqExpr([DataflowBlock(bs)], prev))
    g = normalize_function(f)
    assert len(bindings(g)) == count
    assert sinfo_to_str(g.ret_struct_info) == 'R.Tensor((n, 4), dtype="float32")'
    assert normalize_function(g) is g
    # and the builder emits 100k bindings without recursion
    bb = BlockBuilder()
    with bb.function("big", [x]):
        with bb.dataflow():
            v = x
            for _ in range(count):
                v = bb.emit(Call(add, [v, x], struct_info=x.struct_info))
            gv = bb.emit_output(v)
        bb.emit_func_output(gv)
    assert len(bindings(bb.get()["big"])) == count + 1


# -- small IR helpers shared by the passes ---------------------------------------

def test_collect_exprs_walks_nested_scopes_not_definitions():
    from phasec.ir import collect_exprs

    x, y = Var("x", T((4,))), Var("y", T((4,)))
    c, p = Var("c", TensorStructInfo((), "bool")), Var("p", T((4,)))
    inner = Function([p], SeqExpr([], Tuple([p, GlobalVar("g")])))
    lv = DataflowVar("lv", T((4,)))
    body = SeqExpr([DataflowBlock([VarBinding(lv, raw("add", x, x))]),
                    BindingBlock([VarBinding(Var("f", None), inner)])],
                   If(c, SeqExpr([], TupleGetItem(Tuple([lv, y]), 0)), SeqExpr([], x)))
    found = collect_exprs(body, frozenset((Var, DataflowVar)))
    # binding targets (f) and parameters are definitions; uses inside the nested function count
    assert {v.name_hint for v in found} == {"x", "lv", "y", "c", "p"}
    assert [g.name_hint for g in collect_exprs(body, (GlobalVar,))] == ["g"]


def test_binding_rebind_keeps_kind_and_struct_info():
    x, y = Var("x", T((4,))), Var("y", T((4,)))
    b = VarBinding(x, y)
    assert b.rebind(y) is b and b.rebind(y, x) is b
    assert type(b.rebind(x)) is VarBinding and b.rebind(x).var is x
    cast = MatchCast(x, y, T((4,)))
    new = cast.rebind(x, Var("z", None))
    assert type(new) is MatchCast and new.struct_info is cast.struct_info
    assert new.var.name_hint == "z" and new.value is x


def test_module_map_functions_returns_the_module_when_nothing_changes():
    f = Function([], SeqExpr([], Tuple([])))
    g = Function([], SeqExpr([], Tuple([])))
    mod = IRModule({"f": f, "g": g})
    assert mod.map_functions(lambda name, func: func) is mod
    new = mod.map_functions(lambda name, func: g if name == "f" else func)
    assert new is not mod and new["f"] is g and new["g"] is g and list(new) == ["f", "g"]


def test_emit_function_binds_a_recursive_local_function():
    # countdown(i) = if i <= 0: i else: countdown(i - 1), called from main
    i64 = TensorStructInfo((), "int64")
    fvar = Var("countdown", FuncStructInfo([i64], i64))
    i = Var("i", i64)
    inner = BlockBuilder()
    with inner.function("countdown", [i]):
        stop = inner.emit(call_op("relax.less_equal", i, Constant(np.array(0, "int64"))), "stop")
        j = call_op("relax.subtract", i, Constant(np.array(1, "int64")))
        rec = SeqExpr([], Call(fvar, [j]))
        inner.emit_func_output(inner.emit(If(stop, SeqExpr([], i), rec), "res"))
    body = inner.get()["countdown"].body
    n = Var("n", i64)
    bb = BlockBuilder()
    with bb.function("main", [n]):
        bb.emit_function(fvar, Function([i], body, i64))
        out = bb.emit(Call(fvar, [n]), "out")
        bb.emit_func_output(out)
    mod = bb.get()
    verify(mod)
    binding = mod["main"].body.blocks[0].bindings[0]
    assert binding.var is fvar and isinstance(binding.value, Function)
    assert int(run_interp(mod, np.array(5, "int64"))) == 0
    with pytest.raises(StructInfoError, match="dataflow"):
        with bb.function("g", [Var("m", i64)]):
            with bb.dataflow():
                bb.emit_function(fvar, Function([i], body, i64))

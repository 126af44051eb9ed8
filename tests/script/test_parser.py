"""The TVMScript parser: every fixture parses, and the IR it builds is checked
in detail (node kinds, struct info, dataflow vars, spans, symbolic variables,
A-normal form), plus the round trip through the printer. TIR statements are in
test_parser_tir.py, the spellings and conveniences in test_parser_spellings.py."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import phasec
from phasec.ir import (
    Call, Constant, DataflowBlock, DataflowVar, DataTypeImm, ExternFunc, FuncStructInfo, Function,
    GlobalVar, If, MatchCast, ObjectStructInfo, Op, PrimStructInfo, PrimValue, SeqExpr,
    ShapeExpr, ShapeStructInfo, StringImm, TensorStructInfo, Tuple, TupleGetItem,
    TupleStructInfo, Var, VarBinding, assert_structural_equal, tir,
)

from helpers.parsed import binding, bindings, line_of, load, sinfo_eq, tensor
from helpers.paths import FIXTURES

FIXTURE_FILES = sorted(FIXTURES.glob("*.py"))
EXAMPLES = sorted((Path(phasec.__file__).parent / "examples").glob("*.py"))


# ---------------------------------------------------------------------------
# Every fixture
# ---------------------------------------------------------------------------

def test_fixture_set_is_complete():
    assert {p.stem for p in FIXTURE_FILES} >= {
        "dataflow_basic", "control_flow", "values", "symbolic", "tir_kernels", "vm_builtins"}


@pytest.mark.parametrize("path", FIXTURE_FILES + EXAMPLES, ids=lambda p: p.stem)
def test_every_fixture_parses(path: Path):
    mod = phasec.load(path)
    assert isinstance(mod, phasec.IRModule) and len(mod) >= 1
    text = path.read_text()
    assert_structural_equal(mod, phasec.parse(text, filename=str(path)))
    for name, func in mod.functions.items():
        assert func.span is not None and func.span.file == str(path)
        if isinstance(func, Function):
            assert func.struct_info is not None, name
            for b in bindings(func):
                assert b.span is not None and b.var.span is not None
                assert b.var.struct_info is not None, (name, b.var.name_hint)


@pytest.mark.parametrize("path", FIXTURE_FILES + EXAMPLES, ids=lambda p: p.stem)
def test_round_trip_through_printer(path: Path):
    from phasec.script import printer

    mod = phasec.load(path)
    text = printer.print_module(mod)
    assert_structural_equal(phasec.parse(text), mod)


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.stem)
def test_fixtures_are_well_formed(path: Path):
    from phasec import verifier

    mod = phasec.load(path)
    diags = verifier.check(mod)
    assert not diags, "\n".join(verifier.format_diagnostic(d) for d in diags)


def test_load_json_delegates_to_json_format(tmp_path: Path):
    from phasec.script import json_format

    mod = load("values")
    path = tmp_path / "values.json"
    path.write_text(json_format.to_json(mod))
    assert_structural_equal(phasec.load(path), mod)


# ---------------------------------------------------------------------------
# The canonical module, in detail
# ---------------------------------------------------------------------------

def test_dataflow_basic_module():
    mod = load("dataflow_basic")
    assert mod.attrs["phase"] == "optimization"
    assert mod.phase == phasec.Phase.OPTIMIZATION
    assert set(mod.functions) == {"relu", "add", "main"}
    assert isinstance(mod["relu"], tir.PrimFunc) and isinstance(mod["add"], tir.PrimFunc)
    main = mod["main"]
    assert isinstance(main, Function) and main.is_pure
    # global_symbol for public functions only
    assert main.attrs["global_symbol"] == "main"
    assert "global_symbol" not in mod["relu"].attrs
    assert mod["relu"].attrs["tirx.noalias"] is True
    assert main.span.line == line_of("dataflow_basic", "def main")


def test_symbolic_dim_shared_between_signature_and_body():
    main = load("dataflow_basic")["main"]
    x, w = main.params
    n = x.struct_info.shape[0]
    assert isinstance(n, tir.Var) and n.name == "n" and n.dtype == "int64"
    assert main.ret_struct_info.shape[0] is n
    assert w.struct_info.shape[0].dtype == "int64" and w.struct_info.shape[0].value == 4
    # `n = T.int64()` and the annotations in the body use the signature's n
    for b in bindings(main):
        assert b.var.struct_info.shape[0] is n
    # so do the inferred struct info and call_tir's out_sinfo
    lv1 = binding(main, "lv1")
    assert lv1.value.sinfo_args[0].shape[0] is n


def test_dataflow_vars_and_outputs():
    main = load("dataflow_basic")["main"]
    (block,) = main.body.blocks
    assert isinstance(block, DataflowBlock)
    kinds = {b.var.name_hint: type(b.var) for b in block.bindings}
    assert kinds == {"lv": DataflowVar, "lv1": DataflowVar, "gv": Var}
    gv = binding(main, "gv").var
    assert main.body.body is gv


def test_calls_struct_info_and_spans():
    main = load("dataflow_basic")["main"]
    lv = binding(main, "lv")
    call = lv.value
    assert isinstance(call, Call) and isinstance(call.op, Op) and call.op.name == "relax.matmul"
    assert dict(call.attrs) == {"out_dtype": "void"}
    assert sinfo_eq(call.struct_info, lv.var.struct_info)
    line = line_of("dataflow_basic", "lv: R.Tensor")
    assert lv.span.line == line and call.span.line == line and lv.var.span.line == line
    assert lv.var.span.col == 12 and lv.span.file.endswith("dataflow_basic.py")
    assert call.op.span is not None and call.op.span.line == line

    lv1 = binding(main, "lv1").value
    assert lv1.op.name == "relax.call_tir"
    gvar, args = lv1.args
    assert isinstance(gvar, GlobalVar) and gvar.name_hint == "relu"
    assert isinstance(args, Tuple) and args.fields == (lv.var,)
    assert len(lv1.sinfo_args) == 1 and lv1.sinfo_args[0].dtype == "float32"
    assert sinfo_eq(lv1.struct_info, lv1.sinfo_args[0])

    gv = binding(main, "gv").value
    assert gv.op.name == "relax.add"
    const = gv.args[1]
    assert isinstance(const, Constant) and const.data.dtype == np.float32
    assert const.data.shape == () and const.data.item() == 1.0


def test_prim_func_with_handles():
    relu = load("dataflow_basic")["relu"]
    X, Y = relu.params
    assert isinstance(X, tir.Buffer) and isinstance(Y, tir.Buffer)
    assert (X.name, Y.name, X.dtype) == ("X", "Y", "float32")
    n = X.shape[0]
    assert isinstance(n, tir.Var) and Y.shape[0] is n
    assert X.shape[1].dtype == "int64" and X.shape[1].value == 4
    outer = relu.body
    assert isinstance(outer, tir.For) and outer.kind == "parallel" and outer.extent is n
    assert outer.loop_var.dtype == "int64"
    inner = outer.body
    assert isinstance(inner, tir.For) and inner.kind == "vectorized"
    block = inner.body
    assert isinstance(block, tir.Block) and block.name == "Y"
    assert [iv.kind for iv in block.iter_vars] == ["S", "S"]
    assert block.iter_values == (outer.loop_var, inner.loop_var)
    assert block.iter_vars[0].extent is n
    (read,), (write,) = block.reads, block.writes
    assert read.buffer is X and write.buffer is Y
    assert read.region[0][0] is block.iter_vars[0].var and read.region[0][1].value == 1
    store = block.body
    assert isinstance(store, tir.BufferStore) and store.buffer is Y
    assert isinstance(store.value, tir.BinaryOp) and store.value.op == "max"
    assert isinstance(store.value.rhs, tir.FloatImm) and store.value.rhs.dtype == "float32"


def test_prim_func_with_buffer_params_and_grid():
    add = load("dataflow_basic")["add"]
    A, B, C = add.params
    assert [b.name for b in add.params] == ["A", "B", "C"]
    assert [d.value for d in A.shape] == [2, 3] and A.shape[0].dtype == "int64"
    outer = add.body
    assert isinstance(outer, tir.For) and outer.kind == "serial"
    assert isinstance(outer.body, tir.For) and outer.body.kind == "serial"
    store = outer.body.body
    assert store.buffer is C and store.indices == (outer.loop_var, outer.body.loop_var)
    assert store.value.op == "+" and store.value.lhs.buffer is A


# ---------------------------------------------------------------------------
# Control flow, functions as values
# ---------------------------------------------------------------------------

def test_if_else_and_global_recursion():
    mod = load("control_flow")
    fact = mod["fact"]
    if_binding = bindings(fact)[-1]
    assert isinstance(if_binding, VarBinding) and if_binding.var.name_hint == "r"
    node = if_binding.value
    assert isinstance(node, If) and node.cond is bindings(fact)[0].var
    assert isinstance(node.true_branch, SeqExpr) and isinstance(node.false_branch, SeqExpr)
    # a leaf result is the branch body itself
    assert isinstance(node.true_branch.body, Constant)
    # a call result is bound to r_else, as TVM does, so bodies stay leaves
    else_bindings = [b for blk in node.false_branch.blocks for b in blk.bindings]
    assert [b.var.name_hint for b in else_bindings] == ["m", "rec", "r_else"]
    assert node.false_branch.body is else_bindings[-1].var
    rec = else_bindings[1].value
    assert isinstance(rec.op, GlobalVar) and rec.op.name_hint == "fact"
    assert sinfo_eq(rec.struct_info, tensor((), "int64"))
    assert sinfo_eq(node.struct_info, tensor((), "int64"))
    assert fact.body.body is if_binding.var
    assert if_binding.span.line == line_of("control_flow", "if stop:")


def test_elif_becomes_nested_if():
    sign = load("control_flow")["sign"]
    outer = bindings(sign)[-1].value
    assert isinstance(outer, If)
    inner_bindings = [b for blk in outer.false_branch.blocks for b in blk.bindings]
    assert isinstance(inner_bindings[-1].value, If)
    assert outer.false_branch.body is inner_bindings[-1].var


def test_nested_functions_recursion_and_capture():
    main = load("control_flow")["main"]
    assert main.attrs["num_input"] == 2 and main.attrs["global_symbol"] == "main"
    x = main.params[0]
    repeat_b, shift_b = bindings(main)[:2]
    assert isinstance(repeat_b.value, Function) and repeat_b.var.name_hint == "repeat"
    assert isinstance(repeat_b.var.struct_info, FuncStructInfo)
    assert "global_symbol" not in repeat_b.value.attrs
    # the recursive call refers to the very Var the function is bound to
    calls = []
    phasec.ir.post_order_visit(repeat_b.value, lambda e: calls.append(e) if isinstance(e, Call) else None)
    recursive = [c for c in calls if c.op is repeat_b.var]
    assert len(recursive) == 1
    assert sinfo_eq(recursive[0].struct_info, tensor((4,), "float32"))
    # the nested function captures main's x
    shift_body = bindings(shift_b.value)[0].value
    assert shift_body.args[1] is x
    # local function calls
    if_node = bindings(main)[2].value
    then_call = [b for blk in if_node.true_branch.blocks for b in blk.bindings][0].value
    assert then_call.op is repeat_b.var


def test_closures_and_purity():
    mod = load("control_flow")
    assert mod["closures"].is_pure is False
    assert "global_symbol" not in mod["scale_by"].attrs
    c, y, z = bindings(mod["closures"])
    assert c.value.op.name == "relax.make_closure"
    gv, captured = c.value.args
    assert isinstance(gv, GlobalVar) and gv.name_hint == "scale_by"
    assert isinstance(captured, Tuple) and captured.fields == (mod["closures"].params[0],)
    assert y.value.op.name == "relax.invoke_closure" and y.value.args[0] is c.var
    assert sinfo_eq(y.value.sinfo_args[0], tensor((4,), "float32"))
    assert z.value.op.name == "relax.invoke_pure_closure"


# ---------------------------------------------------------------------------
# Values and annotations
# ---------------------------------------------------------------------------

def test_parameter_annotations():
    main = load("values")["main"]
    x, s, p, o, u, v = main.params
    assert sinfo_eq(x.struct_info, tensor((2, 3), "float32"))
    assert isinstance(s.struct_info, ShapeStructInfo) and [d.value for d in s.struct_info.values] == [2, 3]
    assert isinstance(p.struct_info, PrimStructInfo) and p.struct_info.dtype == "int64"
    assert isinstance(o.struct_info, ObjectStructInfo)
    assert u.struct_info.shape is None and u.struct_info.ndim == 2
    assert v.struct_info.shape is None and v.struct_info.ndim == -1 and v.struct_info.dtype == "void"
    ret = main.ret_struct_info
    assert isinstance(ret, TupleStructInfo) and len(ret.fields) == 2
    cb = binding(main, "cb").var.struct_info
    assert isinstance(cb, FuncStructInfo) and cb.purity and len(cb.params) == 1


def test_packed_calls():
    main = load("values")["main"]
    first = bindings(main)[0]
    assert first.var.name_hint == "_"  # a bare call statement
    assert isinstance(first.value.op, ExternFunc) and first.value.op.global_symbol == "phasec.test.log"
    assert isinstance(first.value.args[1], StringImm) and first.value.args[1].value == "hello"
    assert isinstance(first.var.struct_info, ObjectStructInfo)
    a = binding(main, "a").value
    assert isinstance(a.op, ExternFunc) and sinfo_eq(a.sinfo_args[0], tensor((2, 3), "float32"))
    b = binding(main, "b").value
    assert b.op.name == "relax.call_pure_packed"
    assert isinstance(b.args[0], ExternFunc) and b.args[1] is binding(main, "a").var
    c = binding(main, "c").value
    assert c.op.name == "relax.call_dps_packed" and isinstance(c.args[0], ExternFunc)
    assert isinstance(c.args[1], Tuple)


def test_constants():
    main = load("values")["main"]
    k = binding(main, "k").value
    assert k.data.dtype == np.int32 and k.data.tolist() == [[1, 2, 3], [4, 5, 6]]
    f = binding(main, "f").value.data
    assert f.dtype == np.float32 and f[0, 1] == np.float32(-1.25) and math.isnan(f[0, 2])
    assert f[1, 0] == np.inf and f[1, 1] == -np.inf and f[1, 2] == np.float32(1e-07)
    d = binding(main, "d").value.data
    assert d.dtype == np.float64 and d[0] == 0.1
    assert binding(main, "bo").value.data.dtype == np.bool_
    i8 = binding(main, "i8").value.data
    assert i8.dtype == np.int8 and i8.item() == -7
    assert sinfo_eq(binding(main, "k").var.struct_info, tensor((2, 3), "int32"))


def test_leaf_values():
    main = load("values")["main"]
    assert isinstance(binding(main, "dt").value, DataTypeImm)
    assert binding(main, "dt").value.value == "float16"
    assert binding(main, "st").value.value == 'a "quoted" string\n'
    sh = binding(main, "sh").value
    assert isinstance(sh, ShapeExpr) and [d.value for d in sh.values] == [2, 3]
    assert all(d.dtype == "int64" for d in sh.values)
    pv = binding(main, "pv").value
    assert isinstance(pv, PrimValue) and pv.value.dtype == "int64" and pv.value.value == 5
    assert binding(main, "pf").value.value.dtype == "float32"
    assert binding(main, "pi").value.value.dtype == "int32"
    assert isinstance(binding(main, "ext").value, ExternFunc)
    assert isinstance(binding(main, "cb").value, GlobalVar)


def test_tuples_and_indexing():
    main = load("values")["main"]
    t = binding(main, "t")
    assert isinstance(t.value, Tuple) and len(t.value.fields) == 3
    assert isinstance(t.value.fields[2], PrimValue)
    first = binding(main, "first").value
    assert isinstance(first, TupleGetItem) and first.index == 0 and first.tuple_value is t.var
    assert sinfo_eq(first.struct_info, tensor((2, 3), "float32"))
    empty = binding(main, "empty").value
    assert isinstance(empty, Tuple) and empty.fields == ()
    nested = binding(main, "nested").value
    assert isinstance(nested.fields[2], Tuple)  # a tuple of leaves stays inline
    assert isinstance(binding(main, "inner").value, TupleGetItem)


def test_nested_calls_are_normalized():
    main = load("values")["main"]
    summed = binding(main, "summed")
    lhs, rhs = summed.value.args
    assert isinstance(lhs, Var) and isinstance(rhs, Var)
    names = [b.var.name_hint for b in bindings(main)]
    assert names.index(lhs.name_hint) < names.index(rhs.name_hint) < names.index("summed")
    assert binding(main, lhs.name_hint).value.op.name == "relax.add"
    assert binding(main, rhs.name_hint).value.op.name == "relax.multiply"


def test_attributes():
    mod = load("values")
    assert dict(mod.attrs) == {"phase": "ingestion", "origin": "fixture", "version": (1, 2)}
    attrs = mod["main"].attrs
    assert attrs["levels"] == (1, 2, 3)
    assert attrs["nested"] == {"a": 1.5, "b": None, "c": True}
    assert attrs["global_symbol"] == "main"
    assert "global_symbol" not in mod["helper"].attrs


# ---------------------------------------------------------------------------
# Symbolic shapes
# ---------------------------------------------------------------------------

def test_symbolic_shapes():
    main = load("symbolic")["main"]
    x, y, z = main.params
    n = x.struct_info.shape[0]
    two_n = y.struct_info.shape[0]
    assert isinstance(two_n, tir.BinaryOp) and two_n.op == "*" and two_n.lhs is n
    assert two_n.rhs.value == 2 and two_n.rhs.dtype == "int64"
    m = main.ret_struct_info.fields[2].shape[0]
    assert isinstance(m, tir.Var) and m.name == "m" and m is not n

    scaled = binding(main, "scaled").value
    assert len(scaled.args) == 3 and isinstance(scaled.args[2], ShapeExpr)
    tv = scaled.args[2].values[0]
    assert tv.op == "+" and tv.lhs is n

    parts = binding(main, "parts")
    out = parts.value.sinfo_args[0]
    assert isinstance(out, TupleStructInfo) and len(out.fields) == 2
    assert isinstance(parts.var, DataflowVar)

    zz = binding(main, "zz")
    assert isinstance(zz, MatchCast) and zz.struct_info.shape[0] is m and zz.value is z
    assert type(zz.var) is Var  # listed in R.output
    w = binding(main, "w")
    k = w.struct_info.shape[0]
    assert isinstance(w, MatchCast) and k.name == "k" and w.var.struct_info.shape[0] is k

    dims = binding(main, "dims")
    assert dims.var.struct_info.value.op == "*" and dims.var.struct_info.value.lhs is n

    # symbolic variables are per function
    scale = load("symbolic")["scale"]
    assert scale.params[0].shape[0] is not n and scale.params[2].dtype == "int64"


NESTED_SYMBOLIC = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("m", 4), "float32")) -> R.Tensor(("m", 4), "float32"):
        m = T.int64()
        @R.function
        def inner(y: R.Tensor((m, 4), "float32")) -> R.Tensor((m, 4), "float32"):
            return y
        z = inner(x)
        return z
"""


def test_nested_function_uses_the_enclosing_symbolic_variables():
    from phasec import verifier

    mod = phasec.parse(NESTED_SYMBOLIC)
    main = mod["main"]
    m = main.params[0].struct_info.shape[0]
    inner = binding(main, "inner").value
    # the very same tir.Var: a nested function is part of its enclosing function
    assert inner.params[0].struct_info.shape[0] is m
    assert inner.ret_struct_info.shape[0] is m
    assert binding(main, "z").var.struct_info.shape[0] is m
    assert verifier.check(mod) == []


def test_symbolic_variables_through_several_levels_of_nesting():
    mod = phasec.parse("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("m", "k"), "float32")):
        @R.function
        def f(y: R.Tensor(("j", "m"), "float32")):
            j = T.int64()
            m = T.int64()
            @R.function
            def g(z: R.Tensor((m, j), "float32")):
                w = R.match_cast(z, R.Tensor(("m", "q"), "float32"))
                s = R.shape([m, k, j, q])
                return s
            return g
        @R.function
        def h(v: R.Tensor(("j",), "float32")):
            return v
        return f
""")
    main = mod["main"]
    m, k = main.params[0].struct_info.shape
    f = binding(main, "f").value
    j, m_f = f.params[0].struct_info.shape
    assert m_f is m and j.name == "j"  # "m" (a string) and `m = T.int64()` reuse main's m
    g = binding(f, "g").value
    assert g.params[0].struct_info.shape[0] is m and g.params[0].struct_info.shape[1] is j
    w = binding(g, "w")
    q = w.struct_info.shape[1]
    assert w.struct_info.shape[0] is m and q.name == "q"
    assert binding(g, "s").value.values == (m, k, j, q)
    # a sibling's own variable is its own
    h = binding(main, "h").value
    assert h.params[0].struct_info.shape[0] is not j


def test_nested_functions_own_symbolic_variables_stay_inside():
    with pytest.raises(phasec.ParseError, match="name 'j' is not defined") as info:
        phasec.parse("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32")):
        @R.function
        def f(y: R.Tensor(("j",), "float32")):
            return y
        s = R.shape([j])
        return s
""")
    assert info.value.span.line == 9


# ---------------------------------------------------------------------------
# parse_struct_info
# ---------------------------------------------------------------------------

def test_parse_struct_info_reads_printed_struct_info():
    from phasec.script.parser import parse_struct_info
    from phasec.script.printer import print_sinfo

    t = parse_struct_info('R.Tensor((n, 4), dtype="float32")')
    assert isinstance(t, TensorStructInfo) and t.dtype == "float32"
    n = t.shape[0]
    assert isinstance(n, tir.Var) and n.name == "n" and n.dtype == "int64"
    assert t.shape[1].value == 4
    # one variable per name within a call; quoted names (signature style) too
    tup = parse_struct_info('R.Tuple(R.Tensor(("n", n * 2)), R.Shape([n, 3]), R.Prim(value=k))')
    a, shape, prim = tup.fields
    assert a.shape[0] is shape.values[0] is a.shape[1].lhs
    assert prim.value.name == "k" and prim.dtype == "int64"
    # fresh variables per call, unless a syms dict is shared
    assert parse_struct_info("R.Tensor((n,))").shape[0] is not n
    syms: dict = {}
    first = parse_struct_info("R.Tensor((n,))", syms=syms)
    second = parse_struct_info("R.Shape([n, m])", syms=syms)
    assert second.values[0] is first.shape[0] is syms["n"] and set(syms) == {"n", "m"}
    for text in ['R.Tensor((n, 4), dtype="float32")', "R.Object", "R.Tensor(ndim=2)",
                 'R.Prim("bool")', 'R.Callable((R.Tensor((n,), dtype="int32"),), '
                 'R.Tensor((n,), dtype="int32"), purity=False)', "R.Tuple()"]:
        sinfo = parse_struct_info(text)
        assert print_sinfo(sinfo) == text or text == "R.Tuple()"
        assert phasec.structural_equal(parse_struct_info(print_sinfo(sinfo)), sinfo)


@pytest.mark.parametrize("text, message", [
    ("", "empty struct info"),
    ("R.Tensor((", "invalid struct info syntax"),
    ('__import__("os").system("true")', "expected a struct info annotation"),
    ("None", "expected a struct info annotation"),
    ('R.Tensor((n,), "float99")', "unknown dtype 'float99'"),
    ("R.Tensor((n,), ndim=3)", "does not match"),
    ("R.Shape([x.y])", "unsupported scalar expression"),
    ("R.Tensor((1,)) + 1", "expected a struct info annotation"),
    pytest.param("R.Tuple(" * 300 + ")" * 300, "nested", id="deep"),
])
def test_parse_struct_info_rejects_bad_text(text, message):
    from phasec.script.parser import parse_struct_info

    with pytest.raises(phasec.ParseError, match=message) as info:
        parse_struct_info(text, filename="sig.txt")
    assert info.value.span is not None and info.value.span.file == "sig.txt"



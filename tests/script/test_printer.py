"""The TVMScript printer: exact text for the canonical forms (TVM 0.27 spelling)."""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest

import phasec
from phasec.ir import (
    BindingBlock, Call, Constant, DataflowBlock, DataflowVar, ExternFunc, FuncStructInfo,
    Function, GlobalVar, If, IRModule, MatchCast, ObjectStructInfo, Op, PrimStructInfo,
    PrimValue, SeqExpr, ShapeExpr, ShapeStructInfo, TensorStructInfo, Tuple, TupleStructInfo,
    Var, VarBinding, assert_structural_equal, tir,
)
from phasec.op import call_op
from phasec.script.printer import (
    print_binding, print_expr, print_function, print_module, print_prim_expr, print_prim_func,
    print_sinfo, print_stmt, quote_str, syntax,
)


def f32(*shape) -> TensorStructInfo:
    return TensorStructInfo(shape, "float32")


def body_lines(text: str) -> list[str]:
    return [l.strip() for l in text.splitlines()]


def assert_reparses(name, func, **others):
    """The function, printed in a module, parses back structurally equal."""
    mod = IRModule({name: func, **others})
    assert_structural_equal(phasec.parse(mod.script()), mod)


def example_module() -> IRModule:
    """The module of the syntax reference, built programmatically."""
    n = tir.Var("n", "int64")
    x = Var("x", TensorStructInfo((n, 4), "float32"))
    w = Var("w", f32(4, 4))
    mm = call_op("matmul", x, w)
    lv = DataflowVar("lv", mm.struct_info)
    out = TensorStructInfo((n, 4), "float32")
    ct = call_op("call_tir", GlobalVar("relu"), (lv,), sinfo_args=[out])
    lv1 = DataflowVar("lv1", out)
    add = call_op("add", lv1, Constant(np.array(1.0, "float32")))
    gv = Var("gv", add.struct_info)
    main = Function([x, w], SeqExpr([DataflowBlock([VarBinding(lv, mm), VarBinding(lv1, ct),
                                                    VarBinding(gv, add)])], gv),
                    out, attrs={"global_symbol": "main"})
    m = tir.Var("n", "int64")
    X = tir.Buffer("X", (m, 4))
    Y = tir.Buffer("Y", (m, 4))
    i, j, vi, vj = tir.Var("i"), tir.Var("j"), tir.Var("v_i"), tir.Var("v_j")
    store = tir.BufferStore(Y, tir.BinaryOp("max", X[vi, vj], tir.FloatImm(0.0)), [vi, vj])
    one = tir.IntImm(1)
    blk = tir.Block("Y", [tir.IterVar(vi, m), tir.IterVar(vj, tir.IntImm(4))], [i, j], store,
                    reads=[tir.BufferRegion(X, ((vi, one), (vj, one)))],
                    writes=[tir.BufferRegion(Y, ((vi, one), (vj, one)))])
    relu = tir.PrimFunc([X, Y], tir.For(i, 0, m, "parallel",
                                        tir.For(j, 0, tir.IntImm(4), "vectorized", blk)),
                        {"tir.noalias": True})
    A, B, C = (tir.Buffer(name, (2, 3)) for name in "ABC")
    i2, j2 = tir.Var("i"), tir.Var("j")
    add_k = tir.PrimFunc([A, B, C], tir.For(i2, 0, tir.IntImm(2), "serial", tir.For(
        j2, 0, tir.IntImm(3), "serial", tir.BufferStore(C, A[i2, j2] + B[i2, j2], [i2, j2]))))
    return IRModule({"relu": relu, "add": add_k, "main": main}, {"phase": "optimization"})


EXAMPLE_TEXT = '''\
# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tirx as T

@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @T.prim_func(private=True)
    def add(A: T.Buffer((T.int64(2), T.int64(3)), "float32"), B: T.Buffer((T.int64(2), T.int64(3)), "float32"), C: T.Buffer((T.int64(2), T.int64(3)), "float32")):
        for i, j in T.grid(T.int64(2), T.int64(3)):
            C[i, j] = A[i, j] + B[i, j]

    @R.function
    def main(x: R.Tensor(("n", 4), dtype="float32"), w: R.Tensor((4, 4), dtype="float32")) -> R.Tensor(("n", 4), dtype="float32"):
        cls = Module
        n = T.int64()
        with R.dataflow():
            lv: R.Tensor((n, 4), dtype="float32") = R.matmul(x, w, out_dtype=None)
            lv1: R.Tensor((n, 4), dtype="float32") = R.call_tir(cls.relu, (lv,), out_ty=R.Tensor((n, 4), dtype="float32"))
            gv: R.Tensor((n, 4), dtype="float32") = R.add(lv1, R.const(1.0, "float32"))
            R.output(gv)
        return gv

    @T.prim_func(private=True, s_tir=True)
    def relu(x: T.handle, y: T.handle):
        T.func_attr({"tirx.noalias": True})
        n = T.int64()
        X = T.match_buffer(x, (n, T.int64(4)))
        Y = T.match_buffer(y, (n, T.int64(4)))
        for i in T.parallel(n):
            for j in T.vectorized(T.int64(4)):
                with T.sblock("Y"):
                    v_i, v_j = T.axis.remap("SS", [i, j])
                    T.reads(X[v_i, v_j])
                    T.writes(Y[v_i, v_j])
                    Y[v_i, v_j] = T.max(X[v_i, v_j], T.float32(0.0))
'''


def legacy_spelling(text: str) -> str:
    """``text`` in the spelling of TVM before 0.27, by TVM's own renamings."""
    for new, old in (("import tirx as T", "import tir as T"), ("T.sblock(", "T.block("),
                     ("out_ty=", "out_sinfo="), ("out_dtype=None", 'out_dtype="void"'),
                     (", s_tir=True", ""), ('"tirx.noalias"', '"tir.noalias"')):
        text = text.replace(new, old)
    return text


def test_legacy_syntax_prints_pre_027_spelling_and_reads_back():
    mod = example_module()
    legacy = print_module(mod, "legacy")
    assert legacy == legacy_spelling(EXAMPLE_TEXT)
    assert mod.script(syntax="legacy") == legacy
    with syntax("legacy"):
        assert mod.script() == legacy
    assert mod.script() == EXAMPLE_TEXT  # the context ended
    assert_structural_equal(phasec.parse(legacy), mod)
    assert_structural_equal(phasec.parse(EXAMPLE_TEXT), mod)


def test_unknown_syntax_is_refused():
    with pytest.raises(ValueError, match="unknown TVMScript syntax 'tvm0.18'.*tvm, legacy"):
        example_module().script(syntax="tvm0.18")


def test_example_module_text():
    mod = example_module()
    assert print_module(mod) == EXAMPLE_TEXT
    assert mod.script() == EXAMPLE_TEXT
    assert str(mod) == EXAMPLE_TEXT


def test_printing_is_deterministic_and_stable():
    text = example_module().script()
    assert example_module().script() == text
    assert phasec.parse(text).script() == text


def test_functions_sorted_and_attrs_sorted():
    mod = example_module()
    text = mod.with_attrs({"z": 1, "phase": "lowering", "a": (1, "x")}).script()
    assert 'I.module_attrs({"a": (1, "x"), "phase": "lowering", "z": 1})' in text
    assert text.index("def add(") < text.index("def main(") < text.index("def relu(")


# ---------------------------------------------------------------------------
# Variable naming
# ---------------------------------------------------------------------------

def _chain(hints, sinfo=None):
    sinfo = sinfo or f32(2)
    x = Var("x", sinfo)
    bindings, prev = [], x
    for h in hints:
        v = Var(h, sinfo)
        bindings.append(VarBinding(v, call_op("exp", prev)))
        prev = v
    return Function([x], SeqExpr([BindingBlock(bindings)], prev), sinfo,
                    attrs={"global_symbol": "main"})


def test_duplicate_hints_get_deterministic_suffixes():
    text = print_function("main", _chain(["x", "y", "y", "y_1", "y"]))
    lines = body_lines(text)
    assert lines[2].startswith("x_1: R.Tensor((2,)") and lines[2].endswith("= R.exp(x)")
    assert lines[3].startswith("y: ") and lines[4].startswith("y_1: ")
    assert lines[5].startswith("y_1_1: ") and lines[6].startswith("y_2: ")
    assert lines[-1] == "return y_2"


def test_invalid_and_reserved_hints_are_sanitized():
    text = print_function("main", _chain(["", "3d", "a.b-c", "for", "R", "T", "I", "cls",
                                          "range", "float", "é"]))
    names = [l.split(":")[0] for l in body_lines(text)[2:-1]]
    assert names == ["v", "v_3d", "a_b_c", "for_1", "R_1", "T_1", "I_1", "cls_1", "range_1",
                     "float_1", "_"]


def test_relax_and_tir_vars_share_one_namespace():
    n = tir.Var("x", "int64")
    f = _chain([], TensorStructInfo((n,), "float32"))
    text = print_function("main", f)
    assert 'def main(x: R.Tensor(("x_1",), dtype="float32"))' in text
    assert "x_1 = T.int64()" in text


def test_prim_func_names_unique():
    A = tir.Buffer("A", (4,))
    A2 = tir.Buffer("A", (4,))
    i, i2 = tir.Var("i"), tir.Var("i")
    f = tir.PrimFunc([A, A2], tir.SeqStmt([
        tir.For(i, 0, tir.IntImm(4), "serial", tir.BufferStore(A2, A[i], [i])),
        tir.For(i2, 0, tir.IntImm(4), "serial", tir.BufferStore(A, A2[i2], [i2]))]))
    text = print_prim_func("k", f)
    assert 'def k(A: T.Buffer((T.int64(4),), "float32"), A_1: T.Buffer' in text
    assert "A_1[i] = A[i]" in text and "A[i_1] = A_1[i_1]" in text


# ---------------------------------------------------------------------------
# Literals and struct info
# ---------------------------------------------------------------------------

def test_constants():
    def c(value, dtype):
        return print_expr(Constant(np.array(value, dtype)))

    assert c(1.0, "float32") == 'R.const(1.0, "float32")'
    assert c(0.1, "float32") == 'R.const(0.10000000149011612, "float32")'
    assert c(0.1, "float64") == 'R.const(0.1, "float64")'
    assert c(math.nan, "float32") == 'R.const(float("nan"), "float32")'
    assert c([math.inf, -math.inf], "float16") == 'R.const([float("inf"), -float("inf")], "float16")'
    assert c([[1, 2], [3, 4]], "int32") == 'R.const([[1, 2], [3, 4]], "int32")'
    assert c(True, "bool") == 'R.const(True, "bool")'
    assert c([], "float32") == 'R.const([], "float32")'
    # values print exactly: parsing gives back the same bits
    rng = np.random.default_rng(0)
    data = rng.standard_normal((3, 4)).astype("float32")
    text = print_expr(Constant(data))
    import ast
    values = np.array(ast.literal_eval(text[len("R.const("):text.rindex(",")]), "float32")
    assert values.tobytes() == data.tobytes()


def test_quote_str():
    assert quote_str("abc") == '"abc"'
    assert quote_str('a"b\\c\nd\te\x00é') == '"a\\"b\\\\c\\nd\\te\\x00é"'
    import ast
    for s in ['x"y', "\\", "\n", "\u2028", "\ud800", "mixed 'quotes' \"here\""]:
        assert ast.literal_eval(quote_str(s)) == s


def test_struct_info_annotations():
    n = tir.Var("n", "int64")
    cases = [
        (TensorStructInfo((n, 4), "float32"), 'R.Tensor((n, 4), dtype="float32")'),
        (TensorStructInfo((8,), "int8"), 'R.Tensor((8,), dtype="int8")'),
        (TensorStructInfo((), "bool"), 'R.Tensor((), dtype="bool")'),
        (TensorStructInfo(None, "float32", ndim=2), 'R.Tensor(dtype="float32", ndim=2)'),
        (TensorStructInfo(None, "float32"), 'R.Tensor(dtype="float32")'),
        (TensorStructInfo((n,)), "R.Tensor((n,))"),
        (TensorStructInfo(), "R.Tensor"),
        (TupleStructInfo([f32(2), ObjectStructInfo()]), 'R.Tuple(R.Tensor((2,), dtype="float32"), R.Object)'),
        (TupleStructInfo([]), "R.Tuple()"),
        (ShapeStructInfo([n, 4]), "R.Shape([n, 4])"),
        (ShapeStructInfo(ndim=2), "R.Shape(ndim=2)"),
        (ShapeStructInfo(), "R.Shape(ndim=-1)"),
        (PrimStructInfo("int64"), 'R.Prim("int64")'),
        (PrimStructInfo("int64", n), "R.Prim(value=n)"),
        (PrimStructInfo("float32", tir.FloatImm(1.5)), "R.Prim(value=T.float32(1.5))"),
        (ObjectStructInfo(), "R.Object"),
        (FuncStructInfo([f32(2)], f32(2)), 'R.Callable((R.Tensor((2,), dtype="float32"),), R.Tensor((2,), dtype="float32"), purity=True)'),
        (FuncStructInfo(None, ObjectStructInfo()), "R.Callable()"),
        (FuncStructInfo(None, f32(2), purity=False), 'R.Callable(ret=R.Tensor((2,), dtype="float32"), purity=False)'),
    ]
    for sinfo, text in cases:
        assert print_sinfo(sinfo) == text
    assert print_sinfo(None) == "None"


def test_unknown_struct_info_prints_no_annotation():
    x = Var("x", f32(2))
    y = Var("y", None)
    f = Function([x], SeqExpr([BindingBlock([VarBinding(y, Call(Op("relax.exp"), [x]))])], y))
    lines = body_lines(print_function("f", f))
    assert lines[0] == "@R.function(private=True)"
    assert lines[1] == 'def f(x: R.Tensor((2,), dtype="float32")):'
    assert lines[2] == "y = R.exp(x)"


def test_symbolic_dims_in_signature_are_strings():
    n, m = tir.Var("n", "int64"), tir.Var("m", "int64")
    x = Var("x", TensorStructInfo((n, m * 2), "float32"))
    p = Var("p", PrimStructInfo("int64", m))
    y = Var("y", TensorStructInfo((n * (m * 2),), "float32"))
    f = Function([x, p], SeqExpr([BindingBlock([VarBinding(y, call_op("reshape", x, ShapeExpr([n * (m * 2)])))])], y),
                 TensorStructInfo((n * (m * 2),), "float32"), attrs={"global_symbol": "f"})
    lines = body_lines(print_function("f", f))
    assert lines[1] == ('def f(x: R.Tensor(("n", "m * 2"), dtype="float32"), p: R.Prim(value="m"))'
                        ' -> R.Tensor(("n * (m * 2)",), dtype="float32"):')
    assert lines[2:4] == ["n = T.int64()", "m = T.int64()"]
    assert lines[4] == ('y: R.Tensor((n * (m * 2),), dtype="float32") = '
                        'R.reshape(x, R.shape([n * (m * 2)]))')
    assert_reparses("f", f)


# ---------------------------------------------------------------------------
# Relax statements and call forms
# ---------------------------------------------------------------------------

def test_function_decorators_and_attrs():
    x = Var("x", f32(2))
    body = SeqExpr([], x)
    cases = [
        ({"global_symbol": "f"}, True, "@R.function", None),
        ({}, True, "@R.function(private=True)", None),
        ({}, False, "@R.function(pure=False, private=True)", None),
        ({"global_symbol": "g"}, False, "@R.function(pure=False)", 'R.func_attr({"global_symbol": "g"})'),
        ({"global_symbol": "f", "b": 1, "a": {"k": [1.5]}}, True, "@R.function",
         'R.func_attr({"a": {"k": (1.5,)}, "b": 1})'),
    ]
    for attrs, pure, deco, attr_line in cases:
        lines = body_lines(print_function("f", Function([x], body, f32(2), pure, attrs)))
        assert lines[0] == deco
        assert (lines[2] if attr_line else None) == attr_line


def test_call_forms():
    x = Var("x", f32(2))
    c = Var("c", ObjectStructInfo())
    fv = Var("fv", FuncStructInfo([f32(2)], f32(2)))
    n = tir.Var("n", "int64")
    cases = [
        (call_op("call_tir", GlobalVar("k"), (x,), sinfo_args=[f32(2)]),
         'R.call_tir(cls.k, (x,), out_ty=R.Tensor((2,), dtype="float32"))'),
        (call_op("call_tir", GlobalVar("k"), (x, x), ShapeExpr([n]),
                 sinfo_args=[TupleStructInfo([f32(2), f32(2)])]),
         'R.call_tir(cls.k, (x, x), out_ty=[R.Tensor((2,), dtype="float32"), '
         'R.Tensor((2,), dtype="float32")], tir_vars=R.shape([n]))'),
        (call_op("call_dps_packed", ExternFunc("ext"), (x,), sinfo_args=[f32(2)]),
         'R.call_dps_packed("ext", (x,), out_ty=R.Tensor((2,), dtype="float32"))'),
        (call_op("call_pure_packed", ExternFunc("ext"), x, x, sinfo_args=[f32(2)]),
         'R.call_pure_packed("ext", x, x, ty_args=R.Tensor((2,), dtype="float32"))'),
        (Call(ExternFunc("vm.print"), [x, PrimValue(tir.IntImm(1))], sinfo_args=[f32(2), ObjectStructInfo()]),
         'R.call_packed("vm.print", x, R.prim_value(1), ty_args=(R.Tensor((2,), dtype="float32"), R.Object))'),
        (Call(ExternFunc("noargs"), []), 'R.call_packed("noargs")'),
        (call_op("make_closure", GlobalVar("g"), (x,)), "R.make_closure(cls.g, (x,))"),
        (call_op("invoke_closure", c, (x,), sinfo_args=[f32(2)]),
         'R.invoke_closure(c, (x,), ty_args=R.Tensor((2,), dtype="float32"))'),
        (call_op("invoke_pure_closure", c, (), sinfo_args=[f32(2)]),
         'R.invoke_pure_closure(c, R.tuple(), ty_args=R.Tensor((2,), dtype="float32"))'),
        (Call(GlobalVar("g"), [x, x]), "cls.g(x, x)"),
        (Call(fv, [x]), "fv(x)"),
        (call_op("nn.softmax", x, axis=0), "R.nn.softmax(x, axis=0)"),
        (call_op("sum", x, axis=[0], keepdims=True), "R.sum(x, axis=(0,), keepdims=True)"),
        (call_op("reshape", x, (1, 2)), "R.reshape(x, R.shape([1, 2]))"),
        (call_op("null_value"), "R.null_value()"),
    ]
    for call, text in cases:
        assert print_expr(call) == text


def test_call_forms_in_legacy_spelling():
    x = Var("x", f32(2))
    call = call_op("call_tir", GlobalVar("k"), (x,), sinfo_args=[f32(2)])
    packed = Call(ExternFunc("vm.print"), [x], sinfo_args=[f32(2)])
    with syntax("legacy"):
        assert print_expr(call) == 'R.call_tir(cls.k, (x,), out_sinfo=R.Tensor((2,), dtype="float32"))'
        assert print_expr(packed) == 'R.call_packed("vm.print", x, sinfo_args=R.Tensor((2,), dtype="float32"))'
        assert print_expr(call_op("matmul", x, x)).endswith('out_dtype="void")')


def test_op_attrs_in_registry_order():
    img = Var("img", f32(1, 3, 8, 8))
    w = Var("w", f32(4, 3, 3, 3))
    call = call_op("nn.conv2d", img, w, groups=1, strides=(2, 2))
    text = print_expr(call)
    assert text == ('R.nn.conv2d(img, w, strides=(2, 2), padding=(0, 0, 0, 0), dilation=(1, 1), '
                    'groups=1, data_layout="NCHW", kernel_layout="OIHW", out_layout="NCHW", '
                    'out_dtype=None)')


def test_leaf_expressions():
    n = tir.Var("n", "int64")
    x = Var("x", f32(2))
    assert print_expr(Tuple([])) == "R.tuple()"  # TVM 0.27's spelling; () before it
    assert print_expr(Tuple([x])) == "(x,)"
    assert print_expr(Tuple([x, Tuple([x])])) == "(x, (x,))"
    from phasec.ir import DataTypeImm, StringImm, TupleGetItem
    assert print_expr(TupleGetItem(Tuple([x, x]), 1)) == "(x, x)[1]"
    assert print_expr(ShapeExpr([n, 4])) == "R.shape([n, 4])"
    assert print_expr(ShapeExpr([])) == "R.shape([])"
    assert print_expr(PrimValue(tir.IntImm(3))) == "R.prim_value(3)"
    assert print_expr(PrimValue(tir.IntImm(3, "int32"))) == "R.prim_value(T.int32(3))"
    assert print_expr(PrimValue(tir.IntImm(1, "bool"))) == "R.prim_value(T.bool(True))"
    assert print_expr(StringImm("a\"b")) == 'R.str("a\\"b")'
    assert print_expr(DataTypeImm("int8")) == 'R.dtype("int8")'
    assert print_expr(ExternFunc("f")) == 'R.ExternFunc("f")'
    assert print_expr(GlobalVar("main")) == "cls.main"
    assert print_expr(Op("relax.nn.relu")) == "R.nn.relu"


def test_dataflow_outputs_and_match_cast():
    n = tir.Var("n", "int64")
    x = Var("x", TensorStructInfo(None, "float32", ndim=1))
    y = DataflowVar("y", TensorStructInfo((n,), "float32"))
    z = Var("z", TensorStructInfo((n,), "float32"))
    w = DataflowVar("w", TensorStructInfo((n,), "float32"))
    block = DataflowBlock([MatchCast(y, x, TensorStructInfo((n,), "float32")),
                           VarBinding(z, call_op("exp", y)), VarBinding(w, call_op("exp", z))])
    f = Function([x], SeqExpr([block], z), TensorStructInfo((n,), "float32"))
    assert body_lines(print_function("f", f))[1:] == [
        'def f(x: R.Tensor(dtype="float32", ndim=1)) -> R.Tensor(("n",), dtype="float32"):',
        "n = T.int64()",
        "with R.dataflow():",
        'y: R.Tensor((n,), dtype="float32") = R.match_cast(x, R.Tensor((n,), dtype="float32"))',
        'z: R.Tensor((n,), dtype="float32") = R.exp(y)',
        'w: R.Tensor((n,), dtype="float32") = R.exp(z)',
        "R.output(z)",
        "return z",
    ]
    assert_reparses("f", f)


def test_if_and_nested_function():
    x = Var("x", f32(2))
    c = Var("c", TensorStructInfo((), "bool"))
    t = Var("t", f32(2))
    r = Var("r", f32(2))
    a = Var("a", f32(2))
    ra = Var("ra", f32(2))
    inner = Function([a], SeqExpr([BindingBlock([VarBinding(ra, call_op("exp", a))])], ra), f32(2))
    g = Var("g", inner.struct_info)
    res = Var("res", f32(2))
    branch = If(c, SeqExpr([BindingBlock([VarBinding(t, Call(g, [x]))])], t), SeqExpr([], x))
    f = Function([x, c], SeqExpr([BindingBlock([VarBinding(g, inner), VarBinding(res, branch)])], res),
                 f32(2), attrs={"global_symbol": "f"})
    text = print_function("f", f)
    assert text == textwrap.dedent('''\
        @R.function
        def f(x: R.Tensor((2,), dtype="float32"), c: R.Tensor((), dtype="bool")) -> R.Tensor((2,), dtype="float32"):
            @R.function
            def g(a: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
                ra: R.Tensor((2,), dtype="float32") = R.exp(a)
                return ra
            if c:
                t: R.Tensor((2,), dtype="float32") = g(x)
                res: R.Tensor((2,), dtype="float32") = t
            else:
                res: R.Tensor((2,), dtype="float32") = x
            return res
        ''')
    assert_reparses("f", f)


def test_nested_function_does_not_redeclare_enclosing_symbolic_vars():
    src = textwrap.dedent('''\
        @R.function
        def main(x: R.Tensor(("m", 4), dtype="float32")) -> R.Tensor(("m", 4), dtype="float32"):
            m = T.int64()
            @R.function
            def inner(y: R.Tensor(("m", 4), dtype="float32")) -> R.Tensor(("m", 4), dtype="float32"):
                return y
            z: R.Tensor((m, 4), dtype="float32") = inner(x)
            return z
        ''')
    mod = phasec.parse("@I.ir_module\nclass Module:\n" + textwrap.indent(src, "    "))
    assert print_function("main", mod["main"]) == src
    assert_structural_equal(phasec.parse(mod.script()), mod)


def test_non_normalized_input_still_prints():
    """Nested calls print inline; If/SeqExpr/Function in expression position are
    hoisted into statements so the text stays valid Python."""
    x = Var("x", f32(2))
    nested = Call(Op("relax.add"), [Call(Op("relax.exp"), [x]), x])
    assert print_expr(nested) == "R.add(R.exp(x), x)"
    inner = SeqExpr([BindingBlock([VarBinding(Var("t", f32(2)), nested)])], x)
    f = Function([x], SeqExpr([], Call(Op("relax.exp"), [inner])), f32(2))
    text = print_function("f", f)
    compile(text, "<printed>", "exec")  # valid Python
    assert "t: R.Tensor((2,), dtype=\"float32\") = R.add(R.exp(x), x)" in text
    assert "return R.exp(x)" in text


def test_helpers():
    x = Var("x", f32(2))
    y = Var("y", f32(2))
    assert print_binding(VarBinding(y, call_op("exp", x))) == 'y: R.Tensor((2,), dtype="float32") = R.exp(x)'
    i = tir.Var("i")
    assert print_prim_expr(i + 1) == "i + T.int64(1)"
    assert print_prim_expr(i + 1, tir_context=False) == "i + 1"
    A = tir.Buffer("A", (4,))
    assert print_stmt(tir.BufferStore(A, tir.FloatImm(1.0), [i])) == "A[i] = T.float32(1.0)"
    seq = SeqExpr([BindingBlock([VarBinding(y, call_op("exp", x))])], y)
    assert print_expr(seq).splitlines()[-1] == "return y"


# ---------------------------------------------------------------------------
# TIR
# ---------------------------------------------------------------------------

def test_tir_expressions_and_precedence():
    a, b = tir.Var("a", "int32"), tir.Var("b", "int32")
    c1 = tir.IntImm(1, "int32")
    cases = [
        (tir.BinaryOp("+", a, c1), "a + 1"),
        (tir.BinaryOp("*", tir.BinaryOp("+", a, b), b), "(a + b) * b"),
        (tir.BinaryOp("-", a, tir.BinaryOp("-", a, b)), "a - (a - b)"),
        (tir.BinaryOp("-", tir.BinaryOp("-", a, b), a), "a - b - a"),
        (tir.BinaryOp("//", a, tir.BinaryOp("%", a, b)), "a // (a % b)"),
        # integer `/` truncates; TVM 0.27 reads it only spelt T.truncdiv
        (tir.BinaryOp("/", a, b), "T.truncdiv(a, b)"),
        (tir.BinaryOp("/", tir.Var("x", "float32"), tir.Var("y", "float32")), "x / y"),
        (tir.BinaryOp("<", tir.BinaryOp("<", a, b), tir.IntImm(1, "bool")), "(a < b) < T.bool(True)"),
        (tir.BinaryOp("and", tir.BinaryOp("or", tir.BinaryOp("<", a, b), tir.BinaryOp("==", a, b)),
                      tir.Not(tir.BinaryOp("!=", a, b))), "(a < b or a == b) and not a != b"),
        (tir.BinaryOp("*", a, tir.IntImm(-2, "int32")), "a * -2"),
        (tir.BinaryOp("min", a, b), "T.min(a, b)"),
        (tir.BinaryOp("pow", tir.FloatImm(2.0), tir.FloatImm(0.5)), "T.pow(T.float32(2.0), T.float32(0.5))"),
        (tir.Cast("float16", a), 'T.Cast("float16", a)'),
        (tir.Select(tir.BinaryOp(">", a, b), a, b), "T.Select(a > b, a, b)"),
        (tir.Call("exp", [tir.FloatImm(1.0, "float64")]), "T.exp(T.float64(1.0))"),
        (tir.IntImm(5, "int64"), "T.int64(5)"),
        (tir.IntImm(5, "uint8"), "T.uint8(5)"),
        (tir.FloatImm(math.inf, "float32"), 'T.float32(float("inf"))'),
        # a bare literal next to an operand of another dtype would adopt it: spelt out
        (tir.BinaryOp("+", tir.Var("k", "int64"), c1), "k + T.int32(1)"),
        (tir.BinaryOp("+", c1, tir.IntImm(2, "int32")), "1 + 2"),
    ]
    for e, text in cases:
        assert print_prim_expr(e) == text, text


def test_tir_statements():
    n = tir.Var("n", "int64")
    A = tir.Buffer("A", (n,), "float16")
    B = tir.Buffer("B", (4, 4), "int32")
    i, j, k, k2 = tir.Var("i"), tir.Var("j"), tir.Var("k"), tir.Var("k")
    x = tir.Var("x", "float32")
    tmp = tir.Buffer("tmp", (4,), "float32")
    vi = tir.Var("vi")
    body = tir.SeqStmt([
        tir.For(i, tir.IntImm(1), n - 1, "serial", tir.BufferStore(A, tir.FloatImm(0.0, "float16"), [i])),
        tir.For(j, 0, tir.IntImm(4), "serial", tir.For(k, tir.IntImm(1), tir.IntImm(3), "serial",
                                                      tir.BufferStore(B, tir.IntImm(0, "int32"), [j, k]))),
        # a let (and an allocation) scopes over the rest of its sequence
        tir.LetStmt(x, tir.FloatImm(1.0), tir.Allocate(tmp, tir.SeqStmt([
            tir.BufferStore(tmp, x, [tir.IntImm(0)]),
            tir.IfThenElse(tir.BinaryOp(">", x, tir.FloatImm(0.0)), tir.Evaluate(tir.IntImm(0, "int32"))),
            tir.For(k2, 0, tir.IntImm(4), "unroll", tir.Block(
                "b", [tir.IterVar(vi, tir.IntImm(4), "R")], [k2], tir.SeqStmt([]),
                reads=[tir.BufferRegion(B, ((vi, tir.IntImm(1)), (tir.IntImm(0), tir.IntImm(4))))])),
        ]))),
    ])
    f = tir.PrimFunc([A, B, n], body, {"global_symbol": "k"})
    assert print_prim_func("k", f) == textwrap.dedent('''\
        @T.prim_func(s_tir=True)
        def k(a: T.handle, B: T.Buffer((T.int64(4), T.int64(4)), "int32"), n: T.int64):
            A = T.match_buffer(a, (n,), "float16")
            for i in range(T.int64(1), T.int64(1) + (n - T.int64(1))):
                A[i] = T.float16(0.0)
            for j in range(T.int64(4)):
                for k in range(T.int64(1), T.int64(4)):
                    B[j, k] = 0
            x: T.let[T.float32] = T.float32(1.0)
            tmp = T.alloc_buffer((T.int64(4),), "float32")
            tmp[T.int64(0)] = x
            if x > T.float32(0.0):
                T.evaluate(0)
            for k_1 in T.unroll(T.int64(4)):
                with T.sblock("b"):
                    vi = T.axis.reduce(T.int64(4), k_1)
                    T.reads(B[vi, T.int64(0):T.int64(4)])
                    T.writes()
                    pass
        ''')
    assert_reparses("k", f)


def test_tir_symbolic_declarations_and_buffer_dtypes():
    n = tir.Var("n", "int64")
    m = tir.Var("m", "int32")
    A = tir.Buffer("a", (n, m), "int8")
    i = tir.Var("i", "int32")
    f = tir.PrimFunc([A], tir.For(i, tir.IntImm(0, "int32"), m, "parallel",
                                  tir.BufferStore(A, tir.IntImm(1, "int8"), [tir.IntImm(0), tir.Cast("int64", i)])))
    assert print_prim_func("k", f).splitlines() == [
        "@T.prim_func(private=True)",
        "def k(var_a: T.handle):",
        "    n = T.int64()",
        "    m = T.int32()",
        '    a = T.match_buffer(var_a, (n, m), "int8")',
        "    for i in T.parallel(m):",
        '            a[T.int64(0), T.Cast("int64", i)] = T.int8(1)'.replace("        ", "    ", 1),
    ]


def test_deep_binding_list_prints_iteratively():
    x = Var("x", f32(2))
    bindings, prev = [], x
    for _ in range(20_000):
        v = Var("v", f32(2))
        bindings.append(VarBinding(v, Call(Op("relax.exp"), [prev], struct_info=f32(2))))
        prev = v
    text = print_function("f", Function([x], SeqExpr([BindingBlock(bindings)], prev), f32(2)))
    assert text.count("\n") == 20_000 + 3
    assert "v_19999: " in text


def test_long_let_chain_prints_iteratively():
    A = tir.Buffer("A", (1,))
    body: tir.Stmt = tir.BufferStore(A, tir.FloatImm(0.0), [tir.IntImm(0)])
    for k in range(5000):
        body = tir.LetStmt(tir.Var("t", "float32"), tir.FloatImm(float(k)), body)
    text = print_prim_func("k", tir.PrimFunc([A], body))
    assert "t_4999: T.let[T.float32] = T.float32(0.0)" in text


def test_long_operator_chain_prints_iteratively():
    A = tir.Buffer("A", (4,))
    e = tir.FloatImm(0.0)
    for k in range(10_000):
        e = tir.BinaryOp("+", e, A[tir.IntImm(k % 4, "int32")])
    text = print_stmt(tir.BufferStore(A, e, [tir.IntImm(0, "int32")]))
    assert text.startswith("A[0] = T.float32(0.0) + A[0] + A[1] + A[2] + A[3] + A[0]")
    assert text.count("+") == 10_000
    right = tir.FloatImm(0.0)
    for k in range(3000):
        right = tir.BinaryOp("-", A[tir.IntImm(0, "int32")], right)
    text = print_prim_expr(right)  # A[0] - (A[0] - (... - T.float32(0.0)))
    assert text.count("(") == 2999 + 1 and text.endswith("A[0] - T.float32(0.0)" + ")" * 2999)

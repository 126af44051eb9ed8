"""The JSON module format: exact round trips, identity, schema and bad input."""

from __future__ import annotations

import base64
import copy
import json
import math

import numpy as np
import pytest

import phasec
from phasec.errors import SchemaError
from phasec.ir import (
    BindingBlock, Call, Constant, DataflowBlock, DataflowVar, ExternFunc, FuncStructInfo,
    Function, GlobalVar, If, IRModule, MatchCast, ObjectStructInfo, Op, PrimStructInfo,
    PrimValue, SeqExpr, ShapeExpr, ShapeStructInfo, Span, StringImm, TensorStructInfo, Tuple,
    TupleGetItem, TupleStructInfo, Var, VarBinding, assert_structural_equal, tir,
)
from phasec.op import call_op
from phasec.script.json_format import FORMAT_NAME, FORMAT_VERSION, from_json, json_schema, to_json

SRC = '''
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization", "note": "x"})

    @T.prim_func(private=True)
    def relu(x: T.handle, y: T.handle):
        T.func_attr({"tir.noalias": True})
        n = T.int64()
        X = T.match_buffer(x, (n, T.int64(4)))
        Y = T.match_buffer(y, (n, T.int64(4)))
        for i in T.parallel(n):
            for j in T.vectorized(T.int64(4)):
                with T.block("Y"):
                    v_i, v_j = T.axis.remap("SS", [i, j])
                    T.reads(X[v_i, v_j])
                    T.writes(Y[v_i, v_j])
                    Y[v_i, v_j] = T.max(X[v_i, v_j], T.float32(0.0))

    @R.function
    def main(x: R.Tensor(("n", 4), dtype="float32"), w: R.Tensor((4, 4), dtype="float32")) -> R.Tensor(("n", 4), dtype="float32"):
        n = T.int64()
        with R.dataflow():
            lv: R.Tensor((n, 4), dtype="float32") = R.matmul(x, w, out_dtype="void")
            lv1: R.Tensor((n, 4), dtype="float32") = R.call_tir(cls.relu, (lv,), out_sinfo=R.Tensor((n, 4), dtype="float32"))
            c: R.Tensor((2,), dtype="float32") = R.const([1.5, -2.0], "float32")
            gv: R.Tensor((n, 4), dtype="float32") = R.add(lv1, R.const(1.0, "float32"))
            R.output(gv)
        return gv
'''


def parsed_module() -> IRModule:
    return phasec.parse(SRC, "src.py")


def exact(mod: IRModule) -> IRModule:
    text = to_json(mod)
    loaded = from_json(text)
    assert_structural_equal(loaded, mod)
    assert to_json(loaded) == text
    return loaded


def f32(*shape):
    return TensorStructInfo(shape, "float32")


def simple_function(body_value_fn=None) -> Function:
    x = Var("x", f32(2))
    y = Var("y", f32(2))
    value = call_op("exp", x) if body_value_fn is None else body_value_fn(x)
    return Function([x], SeqExpr([BindingBlock([VarBinding(y, value)])], y), f32(2),
                    attrs={"global_symbol": "main"})


# ---------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------

def test_parsed_module_roundtrip_keeps_spans_and_struct_info():
    mod = parsed_module()
    loaded = exact(mod)
    b0 = mod["main"].body.blocks[0].bindings[0]
    l0 = loaded["main"].body.blocks[0].bindings[0]
    assert l0.span == b0.span and l0.var.span == b0.var.span and l0.value.span == b0.value.span
    assert loaded["relu"].span == mod["relu"].span
    # struct info of calls is stored, not re-inferred
    assert l0.value.struct_info is not None
    assert_structural_equal(l0.value.struct_info, b0.value.struct_info)
    assert isinstance(loaded["main"].body.blocks[0], DataflowBlock)
    assert loaded.phase.label == "optimization" and loaded.attrs["note"] == "x"


def test_document_layout():
    doc = json.loads(to_json(parsed_module()))
    assert doc["format"] == FORMAT_NAME == "phasec.ir_module"
    assert doc["version"] == FORMAT_VERSION == 2
    assert doc["phase"] == "optimization" and doc["attrs"] == {"note": "x"}
    assert [v["name"] for v in doc["tir_vars"]][:1] == ["n"]
    assert {f: d["node"] for f, d in doc["functions"].items()} == {"relu": "PrimFunc",
                                                                   "main": "Function"}
    main = doc["functions"]["main"]
    binding = main["body"]["blocks"][0]["bindings"][0]
    assert binding["node"] == "VarBinding" and binding["value"]["op"]["name"] == "relax.matmul"
    assert binding["value"]["args"] == main["params"]  # Var uses are ids
    const = main["body"]["blocks"][0]["bindings"][2]["value"]
    assert const["node"] == "Constant" and const["dtype"] == "float32" and const["shape"] == [2]
    assert np.frombuffer(base64.b64decode(const["data"]), "<f4").tolist() == [1.5, -2.0]
    # pretty printing gives the same document
    assert json.loads(to_json(parsed_module(), indent=2)) == doc


def test_module_without_phase_and_empty_module():
    exact(IRModule())
    mod = exact(IRModule({"main": simple_function()}))
    assert "phase" not in mod.attrs
    assert json.loads(to_json(mod))["phase"] is None
    built = IRModule({"main": simple_function()}).with_phase(2)
    assert exact(built).attrs["phase"] == "lowering"


def test_identity_is_preserved_across_functions():
    n = tir.Var("n", "int64")
    shared = Var("shared", TensorStructInfo((n,), "float32"))
    r1, r2 = Var("r", shared.struct_info), Var("r", shared.struct_info)
    f1 = Function([shared], SeqExpr([BindingBlock([VarBinding(r1, call_op("exp", shared))])], r1))
    f2 = Function([shared], SeqExpr([BindingBlock([VarBinding(r2, call_op("exp", shared))])], r2))
    loaded = exact(IRModule({"f1": f1, "f2": f2}))
    p1, p2 = loaded["f1"].params[0], loaded["f2"].params[0]
    assert p1 is p2
    assert p1.struct_info.shape[0] is p2.struct_info.shape[0]
    assert loaded["f1"].body.blocks[0].bindings[0].value.args[0] is p1


def test_every_expression_and_struct_info_kind():
    n = tir.Var("n", "int64")
    x = Var("x", TensorStructInfo((n, 4), "float32"))
    o = Var("o", ObjectStructInfo())
    vals = []

    def bind(value, sinfo=None, cls=Var):
        v = cls(f"v{len(vals)}", sinfo if sinfo is not None else value.struct_info)
        vals.append(VarBinding(v, value))
        return v

    t = bind(Tuple([x, Tuple([])]))
    bind(TupleGetItem(t, 0))
    bind(ShapeExpr([n, n * 2, 3]))
    bind(PrimValue(tir.FloatImm(math.nan, "float64")))
    bind(PrimValue(tir.IntImm(1, "bool")))
    bind(StringImm("é \"q\" \n"))
    bind(phasec.ir.DataTypeImm("int8"))
    bind(ExternFunc("f"))
    bind(ExternFunc("g", struct_info=FuncStructInfo(None, f32(1), purity=False)))
    bind(GlobalVar("main"), FuncStructInfo([f32(2)], f32(2)))
    bind(Op("relax.add"), ObjectStructInfo())
    bind(Call(ExternFunc("pk"), [x, o], {"k": 1}, [f32(1), ShapeStructInfo(ndim=2)], struct_info=f32(1)))
    bind(Call(o, [x]), ObjectStructInfo())  # no struct info on the call
    bind(Constant(np.zeros((0, 3), "float32")))
    bind(Constant(np.array([2 ** 64 - 1], "uint64")))
    bind(Constant(np.array([[True], [False]])))
    bind(Constant(np.array(np.float16(65504.0))))
    bind(Constant(np.arange(6, dtype="int32").reshape(2, 3)))
    m = tir.Var("m", "int64")
    mc = Var("mc", TensorStructInfo((m, 4), "float32"))
    vals.append(MatchCast(mc, x, TensorStructInfo((m, 4), "float32")))
    sinfos = [TensorStructInfo(None, "int8", ndim=3), TensorStructInfo(), TensorStructInfo((n,)),
              ShapeStructInfo([n, 1]), ShapeStructInfo(ndim=0), ShapeStructInfo(),
              PrimStructInfo("float16"), PrimStructInfo("int64", n + 1),
              TupleStructInfo([TupleStructInfo([]), ObjectStructInfo()]),
              FuncStructInfo(None, ObjectStructInfo()),
              FuncStructInfo([ShapeStructInfo(ndim=1)], TupleStructInfo([]), purity=False)]
    for s in sinfos:
        bind(o, s)
    bind(o, None, DataflowVar)
    f = Function([x, o], SeqExpr([BindingBlock(vals)], mc), attrs={"global_symbol": "main"})
    loaded = exact(IRModule({"main": f}))
    consts = [b.value for b in loaded["main"].body.blocks[0].bindings if isinstance(b.value, Constant)]
    assert [c.data.dtype.str for c in consts] == ["<f4", "<u8", "|b1", "<f2", "<i4"]
    assert consts[0].data.shape == (0, 3)
    assert consts[1].data[0] == 2 ** 64 - 1
    assert consts[4].data.tolist() == [[0, 1, 2], [3, 4, 5]]
    pv = loaded["main"].body.blocks[0].bindings[3].value
    assert math.isnan(pv.value.value) and pv.value.dtype == "float64"


def test_control_flow_and_nested_functions():
    c = Var("c", TensorStructInfo((), "bool"))
    x = Var("x", f32(2))
    a = Var("a", f32(2))
    inner = Function([a], SeqExpr([], a), f32(2), is_pure=False, attrs={"Primitive": 1})
    g = Var("g", inner.struct_info)
    t = Var("t", f32(2))
    r = Var("r", f32(2))
    branch = If(c, SeqExpr([BindingBlock([VarBinding(t, Call(g, [x]))])], t), SeqExpr([], x),
                struct_info=f32(2))
    f = Function([c, x], SeqExpr([DataflowBlock([]), BindingBlock([VarBinding(g, inner),
                                                                   VarBinding(r, branch)])], r),
                 f32(2), attrs={"global_symbol": "main"})
    loaded = exact(IRModule({"main": f}))
    lf = loaded["main"]
    assert lf.body.blocks[1].bindings[1].value.struct_info is not None
    assert lf.body.blocks[1].bindings[0].value.is_pure is False


def test_tir_every_node_kind():
    n = tir.Var("n", "int64")
    A = tir.Buffer("A", (n, 4), "float32")
    B = tir.Buffer("B", (n,), "int8")
    i, k, vi = tir.Var("i"), tir.Var("k", "int32"), tir.Var("vi")
    x = tir.Var("x", "float32")
    tmp = tir.Buffer("tmp", (4,), "float16")
    body = tir.SeqStmt([
        tir.For(i, 0, n, "parallel", tir.Block(
            "b", [tir.IterVar(vi, n, "R")], [i],
            tir.BufferStore(A, tir.Select(tir.Not(tir.BinaryOp("<", A[vi, 0], tir.FloatImm(0.0))),
                                          tir.Call("exp", [A[vi, 0]]), tir.FloatImm(-math.inf)),
                            [vi, 0]),
            init=tir.Evaluate(tir.IntImm(0, "int32")),
            reads=[tir.BufferRegion(A, ((vi, tir.IntImm(1)), (tir.IntImm(0), tir.IntImm(4))))],
            writes=[tir.BufferRegion(A, ((vi, tir.IntImm(1)), (tir.IntImm(0), tir.IntImm(1))))])),
        tir.For(k, tir.IntImm(1, "int32"), tir.IntImm(3, "int32"), "unroll",
                tir.IfThenElse(tir.BinaryOp("==", k % 2, tir.IntImm(0, "int32")),
                               tir.BufferStore(B, tir.Cast("int8", k), [tir.Cast("int64", k)]),
                               tir.Evaluate(k))),
        tir.LetStmt(x, tir.FloatImm(2.5), tir.Allocate(tmp, tir.BufferStore(
            tmp, tir.Cast("float16", x * x), [tir.IntImm(3)]))),
        tir.IfThenElse(tir.IntImm(1, "bool"), tir.Evaluate(tir.IntImm(0, "int32"))),
    ])
    f = tir.PrimFunc([A, B, n], body, {"tir.noalias": True, "global_symbol": "k"},
                     span=Span("k.py", 3, 4, 9, 0))
    loaded = exact(IRModule({"k": f}))
    assert loaded["k"].span == Span("k.py", 3, 4, 9, 0)
    params = loaded["k"].params
    assert params[0].shape[0] is params[2]  # the symbolic dim is the scalar parameter


def test_attribute_values_round_trip_exactly():
    attrs = {"none": None, "t": True, "i": -3, "big": 2 ** 70, "f": 0.1, "nan": math.nan,
             "inf": -math.inf, "s": "x", "tuple": (1, (2.5, "a")), "empty": (), "list": [1, [2]],
             "dict": {"a": {"b": [None]}}, "prim": tir.IntImm(3, "int32"),
             "expr": ShapeExpr([1, 2]), "sinfo": f32(3)}
    f = simple_function().with_attr("extra", attrs)
    loaded = exact(IRModule({"main": f}, {"phase": "ingestion", **attrs}))
    got = loaded["main"].attrs["extra"]
    assert type(got["tuple"]) is tuple and type(got["list"]) is list
    assert type(got["list"][1]) is list and type(got["tuple"][1]) is tuple
    assert got["big"] == 2 ** 70 and got["f"] == 0.1 and math.isnan(got["nan"])
    assert loaded.attrs["s"] == "x"


def test_struct_info_table_is_shared():
    si = TensorStructInfo((4,), "float32")
    x = Var("x", si)
    bindings, prev = [], x
    for _ in range(500):
        v = Var("v", TensorStructInfo((4,), "float32"))  # equal, distinct objects
        bindings.append(VarBinding(v, call_op("exp", prev)))
        prev = v
    mod = IRModule({"main": Function([x], SeqExpr([BindingBlock(bindings)], prev), si)})
    doc = json.loads(to_json(mod))
    assert len(doc["struct_infos"]) == 1  # 501 equal struct infos, one entry
    exact(mod)
    # a module built without spans writes operators by name and Var uses as ids
    first = doc["functions"]["main"]["body"]["blocks"][0]["bindings"][0]
    assert first == {"node": "VarBinding", "var": 1,
                     "value": {"node": "Call", "op": "relax.exp", "args": [0],
                               "struct_info": 0}}


def test_not_normalized_programs_load_as_written():
    """JSON does not normalize: use-before-definition, nested calls and
    non-leaf bodies come back exactly as written (for the verifier to see)."""
    x = Var("x", f32(2))
    later = Var("later", f32(2))
    early = Var("early", f32(2))
    nested = Call(Op("relax.add"), [Call(Op("relax.exp"), [x]), later])
    dup = Var("dup", f32(2))
    body = SeqExpr([BindingBlock([VarBinding(early, nested), VarBinding(later, call_op("exp", x)),
                                  VarBinding(dup, x), VarBinding(dup, x)])],
                   Call(Op("relax.exp"), [early]))
    f = Function([x], body, f32(2))
    loaded = exact(IRModule({"main": f}))
    bs = loaded["main"].body.blocks[0].bindings
    assert bs[0].value.args[1] is bs[1].var  # used before its definition
    assert isinstance(bs[0].value.args[0], Call)
    assert bs[2].var is bs[3].var  # defined twice
    assert isinstance(loaded["main"].body.body, Call)


def test_from_json_accepts_bytes_and_rejects_non_modules():
    text = to_json(parsed_module())
    assert_structural_equal(from_json(text.encode()), parsed_module())
    with pytest.raises(TypeError):
        to_json(parsed_module()["main"])


def test_unwritable_attribute_is_a_schema_error():
    f = simple_function().with_attr("obj", object())
    with pytest.raises(SchemaError, match="obj"):
        to_json(IRModule({"main": f}))


def test_json_schema():
    schema = json_schema()
    assert schema["title"] == "ModuleDoc"
    defs = schema["$defs"]
    for name in ("CallDoc", "FunctionDoc", "PrimFuncDoc", "TensorStructInfoDoc", "ForDoc",
                 "BlockDoc", "ConstantDoc", "VarDef", "BufferDef", "TirVarDef", "SpanDoc"):
        assert name in defs
    json.dumps(schema)  # plain JSON


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------

def base_doc() -> dict:
    return json.loads(to_json(parsed_module()))


def load_error(doc) -> SchemaError:
    text = doc if isinstance(doc, str) else json.dumps(doc)
    with pytest.raises(SchemaError) as info:
        from_json(text)
    return info.value


def binding(doc, i):
    return doc["functions"]["main"]["body"]["blocks"][0]["bindings"][i]


BINDINGS = "functions.main.body.blocks.0.bindings"


def test_invalid_json_reports_line_and_column():
    err = load_error('{"format": "phasec.ir_module",\n  "version": 1,\n  "functions": {')
    assert "invalid JSON" in str(err) and "line 3" in str(err) and "column" in str(err)
    err = load_error("")
    assert "invalid JSON" in str(err)
    err = load_error("[1, 2]")
    assert "(document)" in str(err)


def test_missing_field_path():
    doc = base_doc()
    del binding(doc, 3)["value"]["args"]
    err = load_error(doc)
    assert f"{BINDINGS}.3.value.args: Field required" in str(err)
    assert err.errors == [(f"{BINDINGS}.3.value.args", "Field required")]

    doc = base_doc()
    binding(doc, 3)["value"]["args"][1] = {"node": "Call", "args": []}
    assert f"{BINDINGS}.3.value.args.1.op: Field required" in str(load_error(doc))

    doc = base_doc()
    del doc["format"]
    assert "format: Field required" in str(load_error(doc))


def test_wrong_types_paths():
    doc = base_doc()
    binding(doc, 3)["value"]["args"][1] = 2.5
    assert (f"{BINDINGS}.3.value.args.1: Input should be a valid integer or an object"
            in str(load_error(doc)))
    doc = base_doc()
    binding(doc, 0)["var"] = "lv"
    assert f"{BINDINGS}.0.var: Input should be a valid integer" in str(load_error(doc))
    doc = base_doc()
    doc["functions"]["main"]["is_pure"] = "yes"
    assert "functions.main.is_pure: Input should be a valid boolean" in str(load_error(doc))
    doc = base_doc()
    doc["struct_infos"][0]["shape"][1] = "4"
    err = str(load_error(doc))
    assert "struct_infos.0.shape.1: Input should be a valid integer or an object" in err
    doc = base_doc()
    doc["functions"]["relu"]["body"]["body"]["kind"] = "sideways"
    err = str(load_error(doc))
    assert "functions.relu.body.body.kind: Input should be 'serial'" in err


def test_unknown_node_kind():
    doc = base_doc()
    binding(doc, 3)["value"] = {"node": "Lambda"}
    err = str(load_error(doc))
    assert f"{BINDINGS}.3.value: Input tag 'Lambda'" in err and "'Call'" in err
    doc = base_doc()
    doc["functions"]["main"]["node"] = "Module"
    assert "functions.main: Input tag 'Module'" in str(load_error(doc))
    doc = base_doc()
    doc["struct_infos"][0]["node"] = "TensorInfo"
    assert "struct_infos.0: Input tag 'TensorInfo'" in str(load_error(doc))


def test_extra_fields_are_rejected():
    doc = base_doc()
    binding(doc, 0)["value"]["colour"] = "red"
    assert f"{BINDINGS}.0.value.colour: Extra inputs are not permitted" in str(load_error(doc))


def test_several_errors_are_all_listed():
    doc = base_doc()
    del binding(doc, 0)["var"]
    del binding(doc, 1)["value"]["args"]
    err = load_error(doc)
    paths = [p for p, _ in err.errors]
    assert paths == [f"{BINDINGS}.0.var", f"{BINDINGS}.1.value.args"]


def test_unknown_ids():
    doc = base_doc()
    binding(doc, 3)["value"]["args"][0] = 999
    assert f"{BINDINGS}.3.value.args.0: unknown var id 999" in str(load_error(doc))
    doc = base_doc()
    binding(doc, 0)["var"] = 998
    assert f"{BINDINGS}.0.var: unknown var id 998" in str(load_error(doc))
    doc = base_doc()
    doc["functions"]["main"]["params"][1] = 997
    assert "functions.main.params.1: unknown var id 997" in str(load_error(doc))
    doc = base_doc()
    doc["struct_infos"][0]["shape"][0]["id"] = 55
    assert "struct_infos.0.shape.0.id: unknown tir var id 55" in str(load_error(doc))
    doc = base_doc()
    doc["functions"]["relu"]["params"][0]["id"] = 44
    assert "functions.relu.params.0.id: unknown buffer id 44" in str(load_error(doc))
    doc = base_doc()
    doc["vars"][0]["struct_info"] = 33
    assert "vars.0.struct_info: unknown struct info index 33" in str(load_error(doc))
    doc = base_doc()
    doc["vars"][1]["id"] = doc["vars"][0]["id"]
    assert "vars.1.id: duplicate var id" in str(load_error(doc))


def test_bad_dtypes_and_constant_data():
    doc = base_doc()
    const = binding(doc, 2)["value"]
    const["dtype"] = "float8"
    assert f"{BINDINGS}.2.value.dtype: Input should be 'bool'" in str(load_error(doc))
    doc = base_doc()
    binding(doc, 2)["value"]["data"] = base64.b64encode(b"\0" * 12).decode()
    err = str(load_error(doc))
    assert f"{BINDINGS}.2.value.data: constant data has 12 bytes" in err and "needs 8" in err
    doc = base_doc()
    binding(doc, 2)["value"]["data"] = "not base64!"
    assert f"{BINDINGS}.2.value.data: invalid base64" in str(load_error(doc))
    doc = base_doc()
    binding(doc, 2)["value"]["shape"] = [-1]
    assert f"{BINDINGS}.2.value.shape.0: Input should be greater than or equal to 0" in str(load_error(doc))
    doc = base_doc()
    doc["tir_vars"][0]["dtype"] = "int128"
    assert "tir_vars.0.dtype: Input should be" in str(load_error(doc))


def test_other_semantic_errors():
    doc = base_doc()
    doc["version"] = 7
    assert "version: unsupported format version 7; this phasec reads versions 1, 2" in \
        str(load_error(doc))
    doc = base_doc()
    doc["phase"] = "testing"
    assert "phase: Input should be 'ingestion'" in str(load_error(doc))
    doc = base_doc()
    doc["struct_infos"][0]["ndim"] = 3
    assert "struct_infos.0.ndim: ndim 3 does not match" in str(load_error(doc))
    doc = base_doc()
    block = doc["functions"]["relu"]["body"]["body"]["body"]
    block["iter_values"].pop()
    assert "functions.relu.body.body.body.iter_values: a block needs one binding per axis" in \
        str(load_error(doc))
    doc = base_doc()
    doc["attrs"]["x"] = {"a": 1, "b": 2}
    assert "attrs.x: expected null" in str(load_error(doc))


def test_errors_are_phasec_errors():
    doc = base_doc()
    doc["functions"]["main"]["body"] = None
    err = load_error(doc)
    assert isinstance(err, phasec.PhasecError)
    assert "functions.main.body" in str(err)
    deep = copy.deepcopy(base_doc())
    value = {"node": "Tuple", "fields": []}
    for _ in range(400):
        value = {"node": "Tuple", "fields": [value]}
    binding(deep, 0)["value"] = value
    with pytest.raises(SchemaError):
        from_json(json.dumps(deep))


def _chain_kernel(length: int) -> IRModule:
    A = tir.Buffer("A", (4,))
    e = tir.FloatImm(0.0)
    for k in range(length):
        e = tir.BinaryOp("+", e, A[tir.IntImm(k % 4)])
    return IRModule({"k": tir.PrimFunc([A], tir.BufferStore(A, e, [tir.IntImm(0)]))})


def test_nesting_depth_limit_is_checked_when_writing():
    exact(_chain_kernel(150))  # deep but within the format's limit
    for length in (250, 3000):  # what the reader could not load is refused when writing
        with pytest.raises(SchemaError, match="nested too deeply"):
            to_json(_chain_kernel(length))
    text = "[" * 300 + "]" * 300
    assert "nested too deeply" in str(load_error(text))


def test_phase_belongs_in_its_own_field():
    doc = base_doc()
    doc["attrs"]["phase"] = "build"
    assert "attrs.phase: the phase goes in the top-level 'phase' field" in str(load_error(doc))
    with pytest.raises(TypeError):
        from_json(base_doc())

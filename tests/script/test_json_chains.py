"""The JSON format writes unbounded chains flat (issue 17): a chain of TIR
lets, the statements after each let, else-ifs and selects is a list, not a
nesting, so its length does not meet the reader's nesting limit (MAX_DEPTH).
Loading gives back the same IR (structural equality with the module that was
written), and the published schema accepts the documents."""

from __future__ import annotations

import json

import jsonschema
import pytest

import phasec
from phasec import transform
from phasec.errors import SchemaError
from phasec.ir import IRModule, assert_structural_equal, tir
from phasec.script.json_format import (
    FORMAT_VERSION, MAX_DEPTH, READABLE_VERSIONS, from_json, json_schema, to_json,
)

GRID_SAMPLE = '''
@I.ir_module
class Module:
    @R.function
    def main(y: R.Tensor((2, 2, 2, 2), dtype="float32"), g: R.Tensor((2, 2, 1, 1), dtype="float32")) -> R.Tensor((2, 2, 1, 1), dtype="float32"):
        v: R.Tensor((2, 2, 1, 1), dtype="float32") = R.image.grid_sample(y, g, method="bicubic", layout="NCHW", padding_mode="reflection", align_corners=True)
        return v
'''


def json_depth(value) -> int:
    """Nesting depth of parsed JSON, counted independently of the writer."""
    if isinstance(value, dict):
        return 1 + max((json_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((json_depth(v) for v in value), default=0)
    return 0


def exact(mod: IRModule) -> dict:
    text = to_json(mod)
    loaded = from_json(text)
    assert_structural_equal(loaded, mod)
    assert to_json(loaded) == text
    doc = json.loads(text)
    assert doc["version"] == FORMAT_VERSION == 2
    return doc


def nodes(doc) -> list[str]:
    out, stack = [], [doc]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if "node" in v:
                out.append(v["node"])
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return out


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json_schema())


def valid(validator, doc) -> None:
    assert [e.message[:200] for e in validator.iter_errors(doc)] == []


def kernel(body: tir.Stmt, *buffers: tir.Buffer) -> IRModule:
    return IRModule({"k": tir.PrimFunc(list(buffers), body)})


def let_chain(n: int) -> IRModule:
    """A = [v_0 + ... ]: v_k = v_{k-1} + 1, n lets deep, the store innermost."""
    A = tir.Buffer("A", (1,))
    vs = [tir.Var(f"v{k}", "float32") for k in range(n)]
    body: tir.Stmt = tir.BufferStore(A, vs[-1], [tir.IntImm(0)])
    for k in range(n - 1, -1, -1):
        value = tir.FloatImm(0.0) if k == 0 else tir.BinaryOp("+", vs[k - 1], tir.FloatImm(1.0))
        body = tir.LetStmt(vs[k], value, body)
    return kernel(body, A)


def test_grid_sample_bicubic_reflection_kernel_round_trips(validator):
    # The fuzz finding of issue 17: the legalized kernel nested 278 JSON levels.
    mod = phasec.parse(GRID_SAMPLE, "grid_sample.py")
    for name in ("LambdaLifting", "LegalizeOps"):
        mod = transform.get_pass(name)(mod)
    prims = [f for f in mod.functions.values() if isinstance(f, tir.PrimFunc)]
    assert len(prims) == 1
    lets, stack = 0, [prims[0].body]
    while stack:  # count the kernel's lets independently of the writer
        s = stack.pop()
        lets += type(s) is tir.LetStmt
        for field in ("body", "then_case", "else_case", "init"):
            if getattr(s, field, None) is not None:
                stack.append(getattr(s, field))
        stack.extend(getattr(s, "stmts", ()))
    assert lets > MAX_DEPTH  # a chain the old nested encoding could not hold
    doc = exact(mod)
    assert json_depth(doc) < 50
    assert "tir.Nest" in nodes(doc)
    valid(validator, doc)


def test_thousand_long_let_chain_round_trips(validator):
    mod = let_chain(1000)
    doc = exact(mod)
    assert json_depth(doc) < 20
    (nest,) = [d for d in nodes(doc) if d == "tir.Nest"]
    valid(validator, doc)
    # the innermost store reads the last let: the chain's order is kept
    loaded = from_json(json.dumps(doc))
    s = loaded["k"].body
    for k in range(1000):
        assert type(s) is tir.LetStmt and s.var.name == f"v{k}"
        s = s.body
    assert type(s) is tir.BufferStore and s.value.name == "v999"


def test_statements_between_lets_else_ifs_allocations_attributes(validator):
    # `store; v = ...; store; w = ...` parses as SeqStmt([store, LetStmt(v, SeqStmt(...))]):
    # the chain goes through each SeqStmt's last statement.
    A = tir.Buffer("A", (4,), "int64")
    i = tir.Var("i")
    n = 600
    body: tir.Stmt = tir.BufferStore(A, tir.IntImm(-1), [tir.IntImm(0)])
    for k in range(n - 1, -1, -1):
        v = tir.Var(f"v{k}")
        store = tir.BufferStore(A, v, [tir.IntImm(k % 4)])
        kind = k % 4
        if kind == 0:
            body = tir.LetStmt(v, tir.IntImm(k), tir.SeqStmt([store, body]))
        elif kind == 1:  # else-if
            body = tir.IfThenElse(tir.BinaryOp("==", i, tir.IntImm(k)),
                                  tir.BufferStore(A, tir.IntImm(k), [tir.IntImm(1)]), body)
        elif kind == 2:
            tmp = tir.Buffer(f"t{k}", (1,), "int64", scope="local")
            body = tir.Allocate(tmp, tir.SeqStmt([tir.BufferStore(tmp, i, [tir.IntImm(0)]),
                                                  body]))
        else:
            body = tir.AttrStmt("pragma_unroll", tir.IntImm(k), body)
    mod = IRModule({"k": tir.PrimFunc([A, i], body)})
    doc = exact(mod)
    assert json_depth(doc) < 20
    valid(validator, doc)


def test_select_chain_round_trips(validator):
    # stack of many tensors legalizes to such a chain
    A = tir.Buffer("A", (1000,))
    i = tir.Var("i")
    e: tir.PrimExpr = tir.FloatImm(-1.0)
    for k in range(999, -1, -1):
        e = tir.Select(tir.BinaryOp("==", i, tir.IntImm(k)), A[tir.IntImm(k)], e)
    mod = kernel(tir.BufferStore(A, e, [tir.IntImm(0)]), A)
    mod = IRModule({"k": tir.PrimFunc([A, i], mod["k"].body)})
    doc = exact(mod)
    assert json_depth(doc) < 20 and nodes(doc).count("tir.SelectChain") == 1
    valid(validator, doc)


def test_a_short_chain_keeps_the_plain_nodes():
    doc = exact(let_chain(1))
    assert "tir.Nest" not in nodes(doc) and "tir.LetStmt" in nodes(doc)


def test_genuinely_deep_input_still_has_a_clear_error():
    # a left-nested sum is not a chain the format writes flat
    A = tir.Buffer("A", (4,))
    e: tir.PrimExpr = tir.FloatImm(0.0)
    for k in range(400):
        e = tir.BinaryOp("+", e, A[tir.IntImm(k % 4)])
    with pytest.raises(SchemaError, match=rf"nested too deeply to write as JSON: \d+ levels, "
                                          rf"the format supports {MAX_DEPTH}"):
        to_json(kernel(tir.BufferStore(A, e, [tir.IntImm(0)]), A))
    text = '{"format": "phasec.ir_module", "version": 2, "attrs": ' + "[" * 300 + "]" * 300 + "}"
    with pytest.raises(SchemaError, match=f"nested too deeply.*{MAX_DEPTH} levels"):
        from_json(text)


def test_versions():
    assert READABLE_VERSIONS == (1, 2)
    doc = json.loads(to_json(let_chain(1)))
    doc["version"] = 1  # a version 1 document (no chain nodes) still reads
    assert_structural_equal(from_json(json.dumps(doc)), let_chain(1))
    doc["version"] = 3
    with pytest.raises(SchemaError, match="version: unsupported format version 3; this phasec "
                                          "reads versions 1, 2"):
        from_json(json.dumps(doc))
    doc = json.loads(to_json(let_chain(3)))
    doc["version"] = 1  # chain nodes are version 2 nodes
    with pytest.raises(SchemaError, match=r"functions\.k\.body\.node: tir\.Nest is a format "
                                          r"version 2 node, but the document says version 1"):
        from_json(json.dumps(doc))


def test_schema_errors_inside_a_chain_name_their_path():
    doc = json.loads(to_json(let_chain(5)))
    doc["functions"]["k"]["body"]["scopes"][3]["var"] = 999
    with pytest.raises(SchemaError, match=r"functions\.k\.body\.scopes\.3\.var: unknown tir var "
                                          r"id 999"):
        from_json(json.dumps(doc))
    doc = json.loads(to_json(let_chain(5)))
    doc["functions"]["k"]["body"]["scopes"] = []
    with pytest.raises(SchemaError, match=r"functions\.k\.body\.scopes: List should have at "
                                          r"least 1 item"):
        from_json(json.dumps(doc))

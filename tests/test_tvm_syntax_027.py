"""The rest of TVM 0.27's TVMScript that TVM's relax test suite uses (issue 12).

TVM 0.27 is the reference: every snippet is read by TVM, and phasec must read
both the snippet and TVM's own reprint of it to the module TVM reads
(phasec's module, handed back to TVM, is structurally equal to TVM's parse).
Each also round-trips through phasec in both spellings (``syntax="tvm"``,
the default, and ``syntax="legacy"``) and through the JSON format.
"""

from __future__ import annotations

import json

import jsonschema
import pytest
import tvm

import phasec
from phasec.errors import ParseError
from phasec.ir import TensorStructInfo, assert_structural_equal
from phasec.script.json_format import from_json, json_schema, to_json
from phasec.tvm import to_tvm

HEADER = """
# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tirx as T
"""

SNIPPETS = {
    "vdevices_in_global_infos_and_tensor_struct_info": """
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [
        I.vdevice("llvm", 0, "global"),
        I.vdevice({"keys": ["cuda", "gpu"], "kind": "cuda", "arch": "sm_80"}, 0, "global"),
        I.vdevice("llvm", 1, "texture"),
    ]})

    @R.function
    def main(x: R.Tensor((2, 3), "float32", "llvm"),
             y: R.Tensor((2, 3), "float32", vdevice="cuda:0"),
             w: R.Tensor((2, 3), "float32", "llvm:1")) -> R.Tensor((2, 3), "float32", "llvm:0"):
        z: R.Tensor((2, 3), "float32", "llvm:0:global") = R.add(x, x)
        return z
""",
    "meta_var_values_substituted_where_used": """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor("float32", ndim=4)) -> R.Tensor("float32", ndim=4):
        N, C, H, W = T.int64(), I.meta_var(T.int64(16)), T.int64(), T.int64()
        axis = I.meta_var(1)
        lv0 = R.match_cast(x, R.Tensor((N, C, H, W), "float32"))
        lv1 = R.nn.softmax(lv0, axis=axis)
        return lv1

    @T.prim_func(private=True)
    def add_k(A: T.Buffer((T.int64(4),), "int32")):
        K = T.meta_var(3)
        for i in range(T.int64(4)):
            A[i] = A[i] + K
""",
}


def _text(name: str) -> str:
    return HEADER + SNIPPETS[name]


def _same_as_tvm(mod: phasec.IRModule, reference) -> None:
    again = to_tvm(mod).without_attr("phase")
    tvm.ir.assert_structural_equal(again, reference, map_free_vars=True)


@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_phasec_reads_the_snippet_and_tvms_reprint_as_tvm_does(name: str) -> None:
    reference = tvm.script.from_source(_text(name))  # TVM 0.27 accepts the snippet
    _same_as_tvm(phasec.parse(_text(name)), reference)
    _same_as_tvm(phasec.parse(reference.script()), reference)


@pytest.mark.parametrize("name", sorted(SNIPPETS))
@pytest.mark.parametrize("syntax", ["tvm", "legacy"])
def test_both_spellings_and_json_round_trip(name: str, syntax: str) -> None:
    mod = phasec.parse(_text(name))
    text = mod.script(syntax=syntax)
    again = phasec.parse(text)
    assert_structural_equal(again, mod)
    assert again.script(syntax=syntax) == text
    doc = to_json(mod)
    jsonschema.Draft202012Validator(json_schema()).validate(json.loads(doc))
    assert_structural_equal(from_json(doc), mod)


def test_vdevice_is_kept_and_compared_as_tvm_prints_it() -> None:
    mod = phasec.parse(_text("vdevices_in_global_infos_and_tensor_struct_info"))
    kinds = [d.kind for d in mod.vdevices]
    assert kinds == ["llvm", "cuda", "llvm"]
    params = mod["main"].params
    # TVM prints "<kind>:<index among that kind>:<memory scope of the device>"
    assert [p.struct_info.vdevice for p in params] == [
        "llvm:0:global", "cuda:0:global", "llvm:1:texture"]
    reference = tvm.script.from_source(_text("vdevices_in_global_infos_and_tensor_struct_info"))
    assert 'vdevice="llvm:1:texture"' in reference.script()
    assert 'vdevice="llvm:1:texture"' in mod.script()
    # The device takes part in structural equality and hashing.
    other = TensorStructInfo((2, 3), "float32", vdevice="llvm:1:texture")
    plain = TensorStructInfo((2, 3), "float32")
    assert not phasec.ir.structural_equal(other, plain)
    assert phasec.ir.structural_hash(other) != phasec.ir.structural_hash(plain)
    assert phasec.ir.structural_equal(
        other, TensorStructInfo((2, 3), "float32", vdevice="llvm:1:texture"))


@pytest.mark.parametrize("annotation, message", [
    ('R.Tensor((2,), "float32", "cuda:0")', "no virtual devices"),
])
def test_vdevice_without_global_infos_is_a_clear_error(annotation: str, message: str) -> None:
    text = HEADER + f"""
@I.ir_module
class Module:
    @R.function
    def main(x: {annotation}) -> R.Tensor((2,), "float32"):
        return x
"""
    with pytest.raises(ParseError, match=message):
        phasec.parse(text)


def test_vdevice_of_a_missing_kind_is_a_clear_error() -> None:
    text = HEADER + """
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm")]})

    @R.function
    def main(x: R.Tensor((2,), "float32", "cuda:0")) -> R.Tensor((2,), "float32"):
        return x
"""
    with pytest.raises(ParseError, match=r"0 virtual device\(s\) of kind 'cuda'"):
        phasec.parse(text)


def test_device_meshes_are_refused_as_unsupported_dist() -> None:
    text = HEADER + """
@I.ir_module
class Module:
    I.module_global_infos({"mesh": [R.device_mesh((2,), I.Range(0, 2))]})

    @R.function
    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        return x
"""
    tvm.script.from_source(text)  # TVM reads it (relax.dist)
    with pytest.raises(ParseError, match=r"relax\.dist.*not supported"):
        phasec.parse(text)


def test_meta_var_names_read_as_their_values() -> None:
    mod = phasec.parse(_text("meta_var_values_substituted_where_used"))
    cast = mod["main"].body.blocks[0].bindings[0]
    n, c, h, w = cast.struct_info.shape
    assert int(c.value) == 16 and c.dtype == "int64"
    assert mod["main"].body.blocks[0].bindings[1].value.attrs["axis"] == 1
    store = mod["add_k"].body.body
    assert store.value.rhs.value == 3 and store.value.rhs.dtype == "int32"

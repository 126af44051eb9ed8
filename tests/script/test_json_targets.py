"""Targets and virtual devices as attribute values in the JSON format: the
``"target"`` attribute TVM's LegalizeOps sets on PrimFuncs
(``T.target({...})``) and the ``dst_vdevice=I.vdevice(...)`` of
``vm.builtin.to_device`` in TVM's later stages. Documents are checked by an
independent validator (jsonschema against the published schema); every
Relax stage TVM 0.27 prints during ``tvm.compile`` of a module with a
virtual device round-trips exactly."""

from __future__ import annotations

import json

import jsonschema
import pytest

import phasec
from phasec.errors import SchemaError
from phasec.ir import assert_structural_equal
from phasec.ir.module import Target, VDevice
from phasec.script.json_format import from_json, json_schema, to_json

# what TVM 0.27 prints after its LowerRuntimeBuiltin pass (trimmed to the forms at issue)
LOWERED = '''
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global")]})

    @T.prim_func(private=True, s_tir=True)
    def add(x: T.Buffer((T.int64(2), T.int64(3)), "float32"), y: T.Buffer((T.int64(2), T.int64(3)), "float32")):
        T.func_attr({"target": T.target({"keys": ["cpu"], "kind": "llvm", "host": {"keys": ("cpu",), "kind": "llvm"}, "tag": ""}), "tirx.noalias": True})
        for i, j in T.grid(T.int64(2), T.int64(3)):
            with T.sblock("add"):
                vi, vj = T.axis.remap("SS", [i, j])
                y[vi, vj] = x[vi, vj] + x[vi, vj]

    @R.function(pure=False)
    def main(x: R.Tensor((2, 3), dtype="float32")):
        f: R.Tensor((2, 3), dtype="float32", vdevice="llvm:0:global") = R.call_packed("vm.builtin.to_device", x, 1, 0, R.str("global"), attrs_type_key="relax.attrs.ToVDeviceAttrs", dst_vdevice=I.vdevice({"keys": ["cpu"], "kind": "llvm", "tag": ""}, 0, "global"), ty_args=(R.Tensor((2, 3), dtype="float32", vdevice="llvm:0:global"),))
        return f
'''


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json_schema())


def _attr_values(mod: phasec.IRModule) -> tuple[Target, VDevice]:
    target = mod["add"].attrs["target"]
    call = mod["main"].body.blocks[0].bindings[0].value
    return target, call.attrs["dst_vdevice"]


def test_targets_and_vdevices_round_trip(validator) -> None:
    mod = phasec.parse(LOWERED)
    text = to_json(mod)
    assert [e.message for e in validator.iter_errors(json.loads(text))] == []
    back = from_json(text)
    assert_structural_equal(back, mod)
    assert back.script() == mod.script()
    target, vdevice = _attr_values(back)
    assert isinstance(target, Target) and target.kind == "llvm"
    assert target.target["host"] == {"keys": ["cpu"], "kind": "llvm"}  # arrays as lists
    assert isinstance(vdevice, VDevice) and (vdevice.kind, vdevice.vdevice_id,
                                             vdevice.memory_scope) == ("llvm", 0, "global")


@pytest.mark.parametrize("bad,message", [
    ({"target": 5}, "a target is a target string such as \"llvm\" or a target dictionary"),
    ({"target": "  "}, "a target string cannot be blank"),
    ({"target": {"dict": {"keys": ["cpu"]}}}, "a target dictionary needs a \"kind\" string"),
    ({"target": {"dict": {"kind": 3}}}, "a target dictionary needs a \"kind\" string"),
    ({"vdevice": {"target": {"dict": {"kind": ["cuda"]}}}}, "needs a \"kind\" string"),
    ({"vdevice": {"target": "llvm", "vdevice_id": -1}}, "vdevice_id"),
    ({"vdevice": {"vdevice_id": 0}}, "target"),
])
def test_malformed_targets_are_schema_errors(bad, message) -> None:
    doc = json.loads(to_json(phasec.parse(LOWERED)))
    doc["functions"]["add"]["attrs"]["target"] = bad
    with pytest.raises(SchemaError, match=message) as info:
        from_json(json.dumps(doc))
    assert "attrs" in str(info.value) and "target" in str(info.value)


def test_every_relax_stage_of_tvm_compile_round_trips() -> None:
    import tvm

    source = '''
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global")]})

    @R.function
    def main(x: R.Tensor((2, 3), "float32")):
        f = R.to_vdevice(x, dst_vdevice="llvm:0:global")
        g = R.add(f, f)
        return g
'''
    stages: list[str] = []

    @tvm.instrument.pass_instrument
    class Grab:
        def run_after_pass(self, mod, info):
            if any(isinstance(f, tvm.relax.Function) for f in mod.functions.values()):
                stages.append(mod.script())

    with tvm.transform.PassContext(opt_level=3, instruments=[Grab()]):
        tvm.compile(tvm.script.from_source(source), "llvm")
    with_target = [s for s in stages if "T.target(" in s]
    with_vdevice_attr = [s for s in stages if "dst_vdevice=I.vdevice(" in s]
    assert with_target and with_vdevice_attr
    for text in stages:
        mod = phasec.parse(text)
        back = from_json(to_json(mod))
        assert_structural_equal(back, mod)
        assert back.script() == mod.script()


@pytest.mark.parametrize("old,new,message", [
    ('T.target({"keys": ["cpu"], "kind": "llvm", ', 'T.target({"keys": ["cpu"], ',
     'T.target: a target dictionary needs a "kind" string'),
    ('"kind": "llvm", "host"', '"kind": "", "host"', 'T.target: a target dictionary needs'),
    ('dst_vdevice=I.vdevice({"keys": ["cpu"], "kind": "llvm", "tag": ""}',
     'dst_vdevice=I.vdevice(" "', "I.vdevice: a target string cannot be blank"),
])
def test_the_parser_refuses_the_same_targets(old, new, message) -> None:
    """The text form and the JSON form share one rule (ir.module.target_problem)."""
    from phasec.errors import ParseError

    assert old in LOWERED
    with pytest.raises(ParseError) as info:
        phasec.parse(LOWERED.replace(old, new), "f.py")
    assert str(info.value).startswith("f.py:") and message in str(info.value)

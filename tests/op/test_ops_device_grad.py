"""TVM 0.27's placement, parameter and gradient-marker operators
(phasec/op/base.py, grad.py, wrap_param, call_tir_with_grad): inference
against what TVM 0.27 infers (TVM builds the same calls with its own
BlockBuilder), the interpreter and the VM against numpy, TVM reading
phasec's print back, TVM's pipeline on them under PhaseCheck, and the errors."""

from __future__ import annotations

import re

import numpy as np
import pytest

import phasec
from phasec.errors import PhasecError, StructInfoError
from phasec.interp import run as interp_run
from phasec.ir import Constant, Phase, ShapeExpr, TensorStructInfo, Var
from phasec.op import call_op

from helpers.op_infer import S, raises


_X = Var("dg_x", TensorStructInfo((2, 3), "float32"))

VDEVICE_INFO = 'I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global")]})'

SOURCE = f'''
@I.ir_module
class Module:
    {VDEVICE_INFO}

    @R.function
    def main(x: R.Tensor((2, "n"), "float32")):
        n = T.int64()
        a = R.wrap_param(x, dtype="float16")
        b = R.grad.start_checkpoint(x)
        c = R.grad.end_checkpoint(b)
        d = R.grad.no_grad(c)
        e = R.hint_on_device(d, R.device(device_type=1, index=0), "global")
        f = R.to_vdevice(e, dst_vdevice="llvm:0:global")
        g = R.wrap_param(x)
        return (a, f, g)
'''


def _bindings(mod):
    return {b.var.name_hint: b for blk in mod["main"].body.blocks for b in blk.bindings}


def _tvm_inferred():
    """What TVM 0.27's own inference gives for SOURCE's calls (built with
    TVM's BlockBuilder, so nothing comes from phasec)."""
    import tvm
    from tvm import relax
    from tvm.script import ir as I

    n = tvm.tirx.Var("n", "int64")
    x = relax.Var("x", relax.TensorType((2, n), "float32"))
    vdev = I.vdevice("llvm", 0, "global")
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        a = bb.emit(relax.op.wrap_param(x, "float16"))
        b = bb.emit(relax.op.grad.start_checkpoint(x))
        c = bb.emit(relax.op.grad.end_checkpoint(b))
        d = bb.emit(relax.op.grad.no_grad(c))
        e = bb.emit(relax.op.hint_on_device(d, tvm.cpu(0)))
        f = bb.emit(relax.op.to_vdevice(e, vdev))
        g = bb.emit(relax.op.wrap_param(x))
        bb.emit_func_output(relax.Tuple([a, f, g]))
    ty = {name: v.struct_info if hasattr(v, "struct_info") else v.ty
          for name, v in zip("abcdefg", (a, b, c, d, e, f, g))}
    # TVM prints the vdevice by its index among the module's (-1: not registered)
    return {k: (v.shape is not None and tuple(str(s) for s in v.shape), str(v.dtype),
                getattr(v, "vdevice", None) is not None)
            for k, v in ty.items()}


def test_inference_matches_tvm():
    mod = phasec.parse(SOURCE)
    mine = {k: b.value.struct_info for k, b in _bindings(mod).items()}
    got = {k: (tuple(str(s) for s in v.shape), v.dtype, v.vdevice is not None)
           for k, v in mine.items()}
    assert got == _tvm_inferred()
    assert mine["f"].vdevice == "llvm:0:global"
    assert S(_bindings(mod)["e"].value) == 'R.Tensor((2, n), dtype="float32")'


def test_tvm_reads_the_print_and_the_result_reads_back():
    import tvm

    mod = phasec.parse(SOURCE)
    text = mod.script()
    assert 'R.hint_on_device(d, R.device(device_type=1, index=0), "global")' in text
    theirs = tvm.script.from_source(text)
    assert tvm.relax.analysis.check_well_formed(theirs)
    back = phasec.parse(theirs.script())
    assert phasec.structural_equal(back["main"], mod["main"])


def test_interpreter_and_vm_match_numpy():
    x = np.random.default_rng(0).standard_normal((2, 5)).astype("float32")
    mod = phasec.parse(SOURCE)
    for a, f, g in (interp_run(mod, x), phasec.VirtualMachine(phasec.build(mod))["main"](x)):
        np.testing.assert_array_equal(a, x.astype("float16"))
        np.testing.assert_array_equal(f, x)
        np.testing.assert_array_equal(g, x)
        assert a.dtype == np.float16 and f.dtype == g.dtype == np.float32


def test_markers_lower_to_their_operand_and_to_vdevice_to_a_vm_builtin():
    # TVM's legalization of the grad markers and RealizeVDevice's of the hint: no
    # kernel; to_vdevice stays a memory builtin until VMBuiltinLower, which makes it
    # vm.builtin.to_device as TVM's LowerRuntimeBuiltin does
    from phasec import transform

    mod = phasec.parse(SOURCE)
    lowered = transform.parse_pipeline("LambdaLifting,LegalizeOps")(mod)
    text = lowered.script()
    for gone in ("start_checkpoint", "end_checkpoint", "no_grad", "hint_on_device",
                 "R.wrap_param"):
        assert gone not in text
    assert text.count("R.call_tir(") == 2  # the two wrap_param (astype) kernels
    assert re.search(r'R\.to_vdevice\(\w+, dst_vdevice="llvm:0:global"\)', text)
    built = phasec.pipeline.lower(mod).script()  # the build phase, before VM codegen
    assert re.search(r'R\.call_packed\("vm\.builtin\.to_device", \w+, R\.prim_value\(1\), '
                     r'R\.prim_value\(0\), R\.str\("global"\)', built)


def test_tvm_pipeline_on_to_vdevice_is_phase_clean():
    # every stage of tvm.compile reads back and verifies (T.target attributes,
    # vm.builtin.to_device with its I.vdevice attribute); TVM's VM agrees with numpy
    import tvm

    from phasec.tvm import PhaseCheck

    text = f'''
@I.ir_module
class Module:
    {VDEVICE_INFO}

    @R.function
    def main(x: R.Tensor((2, 3), "float32")):
        f = R.to_vdevice(x, dst_vdevice="llvm:0:global")
        g = R.add(f, f)
        return g
'''
    check = PhaseCheck()
    with tvm.transform.PassContext(opt_level=3, instruments=[check.instrument()]):
        exe = tvm.compile(tvm.script.from_source(text), "llvm")
    names = [v.pass_name for v in check.verdicts]
    assert "LowerRuntimeBuiltin" in names
    bad = [v for v in check.verdicts if not v.ok]
    # the one finding: TVM never lambda-lifts, so LegalizeOps runs in ingestion
    assert [v.pass_name for v in bad] == ["LegalizeOps"]
    assert "phase order" in bad[0].describe() and "WF" not in bad[0].describe()
    # TVM's LegalizeOps marks each kernel with the target: T.target reads and prints back
    legalized = tvm.relax.transform.LegalizeOps()(tvm.script.from_source(text)).script()
    mine = phasec.parse(legalized).script()
    assert 'T.func_attr({"target": T.target({"keys": ["cpu"], "kind": "llvm"' in mine
    tvm.ir.assert_structural_equal(tvm.script.from_source(mine), tvm.script.from_source(legalized))
    x = np.arange(6, dtype="float32").reshape(2, 3)
    vm = tvm.relax.VirtualMachine(exe, tvm.cpu())
    np.testing.assert_array_equal(vm["main"](tvm.runtime.tensor(x)).numpy(), 2 * x)
    np.testing.assert_array_equal(phasec.VirtualMachine(phasec.build(phasec.parse(text)))["main"](x),
                                  2 * x)


def test_errors():
    raises(["dst_vdevice", "<target kind>[:<index>[:<memory scope>]]"], call_op, "to_vdevice",
           _X, dst_vdevice="llvm:zero")
    # TVM's short spellings: an omitted index is 0, an omitted scope global (the
    # parser looks "kind:index" up among the module's devices, as TVM does)
    assert call_op("to_vdevice", _X, dst_vdevice="llvm").attrs["dst_vdevice"] == "llvm:0:global"
    short = phasec.parse(SOURCE.replace('dst_vdevice="llvm:0:global"', 'dst_vdevice="llvm:0"'))
    assert _bindings(short)["f"].value.attrs["dst_vdevice"] == "llvm:0:global"
    with pytest.raises(PhasecError, match=r"to_vdevice dst_vdevice 'llvm:1'.*1 virtual device"):
        phasec.parse(SOURCE.replace('dst_vdevice="llvm:0:global"', 'dst_vdevice="llvm:1"'))
    raises(["requires", "dst_vdevice"], call_op, "to_vdevice", _X)
    assert call_op("grad.no_grad", ShapeExpr([2])).struct_info.values is not None  # any value
    raises(["marks a variable", "bind it first"], call_op, "grad.start_checkpoint",
           Constant(np.zeros(2, "float32")))
    raises(["device type"], call_op, "hint_on_device", _X, device_type=0)
    raises(["dtype"], call_op, "wrap_param", _X, dtype="void")
    # the Python spelling TVM's parser evaluates (its own tests write it)
    for spelling, device in (("tvm.cpu()", (1, 0)), ("tvm.cuda(1)", (2, 1))):
        hinted = _bindings(phasec.parse(SOURCE.replace("R.device(device_type=1, index=0)",
                                                       spelling)))["e"].value
        assert (hinted.attrs["device_type"], hinted.attrs["index"]) == device
    with pytest.raises(PhasecError, match=r"tvm.<device>\(index\)"):
        phasec.parse(SOURCE.replace("R.device(device_type=1, index=0)", "tvm.tpu()"))
    with pytest.raises(PhasecError, match=r"expects a device R\.device"):
        phasec.parse(SOURCE.replace('R.device(device_type=1, index=0)', '"cpu"'))
    cuda = SOURCE.replace(VDEVICE_INFO, VDEVICE_INFO.replace(
        '"llvm", 0, "global")]', '"llvm", 0, "global"), I.vdevice("cuda", 0, "global")]'))
    cuda = cuda.replace('dst_vdevice="llvm:0:global"', 'dst_vdevice="cuda:0:global"')
    with pytest.raises(PhasecError, match="host CPU only") as info:
        phasec.build(phasec.parse(cuda))
    assert "R.to_vdevice" in str(info.value)
    with pytest.raises(StructInfoError):
        call_op("grad.start_checkpoint", _X, _X)


GRAD_TIR = '''
@I.ir_module
class Module:
    @T.prim_func(private=True)
    def f_mul(A: T.Buffer((T.int64(5), T.int64(5)), "float32"),
              B: T.Buffer((T.int64(5), T.int64(5)), "float32"),
              C: T.Buffer((T.int64(5), T.int64(5)), "float32")):
        for i0, i1 in T.grid(T.int64(5), T.int64(5)):
            with T.sblock("f_mul"):
                v0, v1 = T.axis.remap("SS", [i0, i1])
                C[v0, v1] = A[v0, v1] * B[v0, v1]

    @R.function
    def main(a: R.Tensor((5, 5), "float32"), b: R.Tensor((5, 5), "float32")):
        cls = Module
        with R.dataflow():
            lv = R.call_tir_with_grad(cls.f_mul, (a, b), out_ty=R.Tensor((5, 5), "float32"),
                                      te_grad_name="f_mul_grad", te_grad_kwargs={"k": 2})
            gv = R.sum(lv)
            R.output(gv)
        return gv
'''


def test_call_tir_with_grad_runs_as_call_tir_and_tvm_reads_it():
    import tvm

    mod = phasec.parse(GRAD_TIR)
    call = _bindings(mod)["lv"].value
    assert call.attrs == {"te_grad_name": "f_mul_grad", "te_grad_kwargs": (("k", 2),)}
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((5, 5)).astype("float32") for _ in range(2))
    want = (a * b).sum()
    np.testing.assert_allclose(interp_run(mod, a, b), want, rtol=1e-5)
    np.testing.assert_allclose(phasec.VirtualMachine(phasec.build(mod))["main"](a, b), want,
                               rtol=1e-5)
    text = mod.script()
    assert 'te_grad_name="f_mul_grad", te_grad_kwargs={"k": 2}' in text
    theirs = tvm.script.from_source(text)
    assert tvm.relax.analysis.check_well_formed(theirs)
    assert phasec.parse(theirs.script()).script() == text


def test_call_tir_with_grad_is_high_level():
    # LegalizeOps lowers it to its call_tir; one left in phase lowering is PH202
    from phasec import transform
    from phasec.verifier import check

    mod = phasec.parse(GRAD_TIR)
    lowered = transform.parse_pipeline("LambdaLifting,LegalizeOps")(mod)
    assert "call_tir_with_grad" not in lowered.script()
    assert "R.call_tir(cls.f_mul, (a, b)" in lowered.script()
    codes = [d.code for d in check(mod, phase=Phase.LOWERING)]
    assert "PH202" in codes
    with pytest.raises(PhasecError, match="te_grad_name"):
        phasec.parse(GRAD_TIR.replace('te_grad_name="f_mul_grad", ', ""))

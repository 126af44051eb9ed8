"""R.Prim operands of unknown value (a function's scalar parameter) in the
binary elementwise operators, end to end: LegalizeOps passes the scalar to
the kernel in its operand's place, as TVM 0.27 legalizes
``R.atan2(x, y)`` for ``y: R.Prim("float32")``. Checked against TVM's own
LegalizeOps (the call's operands and the kernel's parameter kinds), against
TVM's parser and well-formedness check, and against numpy on the VM."""

from __future__ import annotations

import numpy as np
import pytest

import phasec
from phasec import verifier
from phasec.ir import Call, PrimStructInfo, tir
from phasec.transform import Sequential, get_pass

SOURCE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 3), "float32"), y: R.Prim("float32"), k: R.Prim("int32"),
             i: R.Tensor((4,), "int32")):
        n = T.int64()
        a = R.atan2(x, y)
        b = R.exp(R.subtract(y, a))
        c = R.floor_mod(k, i)
        d = R.left_shift(i, k)
        return (a, b, c, d)
'''


def _numpy(x, y, k, i):
    a = np.arctan2(x, np.float32(y))
    b = np.exp(np.float32(y) - a)
    c = np.mod(np.int32(k), i)
    d = np.where((k >= 0) & (k < 32), np.left_shift(i, np.int32(k)), 0).astype("int32")
    return a, b, c, d


@pytest.mark.parametrize("rows", [1, 5])
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "unfused"])
def test_results_match_numpy(rows: int, fused: bool) -> None:
    rng = np.random.default_rng(rows)
    x = rng.uniform(-2, 2, (rows, 3)).astype("float32")
    i = np.array([-7, 3, 5, 1 << 20], "int32")
    vm = phasec.VirtualMachine(phasec.build(phasec.parse(SOURCE), opt_level=2 if fused else 0))
    for y, k in ((0.75, 3), (-1.5, -4)):
        got = vm["main"](x, y, k, i)
        for g, want in zip(got, _numpy(x, y, k, i)):
            np.testing.assert_allclose(g, want, rtol=1e-6)
            assert g.dtype == want.dtype


def _legalized() -> phasec.IRModule:
    mod = phasec.parse(SOURCE)
    return Sequential([get_pass(n) for n in ("LambdaLifting", "ToNonDataflow", "LegalizeOps")])(mod)


def _kernel_calls(mod) -> dict[str, tuple[list[str], list[str]]]:
    """op kernel -> (the call_tir operand kinds, the kernel's parameter kinds)."""
    out = {}
    for b in mod["main"].body.blocks[0].bindings:
        v = b.value
        if isinstance(v, Call) and getattr(v.op, "name", "") == "relax.call_tir":
            kernel = mod[v.args[0].name_hint]
            operands = ["scalar" if isinstance(a.struct_info, PrimStructInfo) else "tensor"
                        for a in v.args[1].fields]
            params = ["scalar" if isinstance(p, tir.Var) else "buffer" for p in kernel.params]
            out[v.args[0].name_hint] = (operands, params)
    return out


def test_the_scalar_takes_its_operands_place_as_in_tvm() -> None:
    import tvm
    from tvm import relax
    from tvm.tirx.buffer import is_buffer_var

    ours = _kernel_calls(_legalized())
    theirs = relax.transform.LegalizeOps()(tvm.script.from_source(SOURCE))
    tvm_calls = {}
    for b in theirs["main"].body.blocks[0].bindings:
        v = b.value
        if isinstance(v, relax.Call) and v.op.name == "relax.call_tir":
            kernel = theirs[v.args[0]]
            operands = ["scalar" if isinstance(a.ty, tvm.ir.PrimType) else "tensor"
                        for a in v.args[1].fields]
            params = ["buffer" if is_buffer_var(p) else "scalar" for p in kernel.params]
            tvm_calls[v.args[0].name_hint] = (operands, params)
    assert sorted(ours.values()) == sorted(tvm_calls.values())
    assert any("scalar" in operands for operands, _ in ours.values())


def test_tvm_accepts_the_legalized_module() -> None:
    import tvm
    from tvm import relax

    mod = _legalized()
    verifier.verify(mod, mod.phase)
    assert relax.analysis.check_well_formed(tvm.script.from_source(mod.script()))

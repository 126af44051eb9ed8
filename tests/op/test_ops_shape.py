"""shape_of, shape_to_tensor, tensor_to_shape, print and assert_op
(phasec/op/base.py): inference against TVM 0.27 reading the same
module, what LegalizeOps makes of them (VM builtins and packed calls, no
kernel, never fused), and the program run on the reference interpreter and
on the VM: printed text, shapes, a failing assertion."""

from __future__ import annotations

import numpy as np
import pytest

import phasec
from phasec import transform
from phasec.errors import ProgramAssertionError
from phasec.ir import Call, ExternFunc, ShapeExpr, tir
from phasec.op import call_op
from phasec.op.legalize import LEGALIZE_RELAX

from helpers.op_coverage import SHAPE_TESTED
from helpers.op_infer import S, raises, tv


INFER_SOURCE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 3), dtype="float32"), t: R.Tensor((2,), dtype="int64"),
             u: R.Tensor(dtype="float32", ndim=3)):
        n = T.int64()
        s = R.shape_of(x)
        s1 = R.shape_of(u)
        st = R.shape_to_tensor(s)
        ts = R.tensor_to_shape(t)
        return (s, s1, st, ts)
'''


def _shape_bindings_tvm():
    from tvm.script import from_source

    mod = from_source(INFER_SOURCE)
    return {b.var.name: str(b.var.ty) for blk in mod["main"].body.blocks for b in blk.bindings}


def test_inference_matches_tvm():
    mod = phasec.parse(INFER_SOURCE)
    from phasec.ir.text import sinfo_to_str

    ours = {b.var.name_hint: sinfo_to_str(b.var.struct_info)
            for blk in mod["main"].body.blocks for b in blk.bindings}
    theirs = _shape_bindings_tvm()
    assert ours["s"] == theirs["s"] == "R.Shape([n, 3])"
    assert ours["s1"] == theirs["s1"] == "R.Shape(ndim=3)"
    assert ours["st"] == theirs["st"] == 'R.Tensor((2,), dtype="int64")'
    assert ours["ts"] == theirs["ts"] == "R.Shape(ndim=2)"


def test_inference_errors():
    x = tv("x", (2, 3))
    raises(["expects a shape"], call_op, "shape_to_tensor", x)
    raises(["needs a 1-D tensor"], call_op, "tensor_to_shape", tv("t", (2, 2), "int64"))
    raises(["needs an integer tensor"], call_op, "tensor_to_shape", tv("t", (2,)))
    raises(["bool scalar condition"], call_op, "assert_op", x)
    raises(["bool scalar condition"], call_op, "assert_op", tv("c", (2,), "bool"))
    assert S(call_op("print", x, x, format="{} {}")) == "R.Tuple()"
    assert S(call_op("assert_op", tv("c", (), "bool"), x, format="x={}")) == "R.Tuple()"
    assert S(call_op("shape_to_tensor", ShapeExpr([tir.Var("n"), 4]))) == \
        'R.Tensor((2,), dtype="int64")'


SOURCE = '''
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor(("n", 3), dtype="float32"), t: R.Tensor((2,), dtype="int64"),
             c: R.Tensor((), dtype="bool")):
        n = T.int64()
        s = R.shape_of(x)
        st = R.shape_to_tensor(s)
        ts = R.tensor_to_shape(t)
        a = T.int64()
        b = T.int64()
        ts2 = R.match_cast(ts, R.Shape([a, b]))
        r = R.reshape(x, ts2)
        p = R.print(x, st, format="x={} shape={}")
        q = R.print(st)
        k = R.assert_op(c, st, format="bad shape {}")
        return (s, st, ts, r)
'''


def test_legalize_ops_makes_builtin_and_packed_calls():
    mod = transform.get_pass("LambdaLifting")(phasec.parse(SOURCE))
    lowered = transform.get_pass("LegalizeOps")(transform.get_pass("FuseOps")(mod))
    calls = {}
    for b in lowered["main"].body.blocks[0].bindings:
        v = b.value
        if isinstance(v, Call) and isinstance(v.op, ExternFunc):
            calls[b.var.name_hint] = ("packed", v.op.global_symbol)
        elif isinstance(v, Call) and v.op.name == "relax.call_pure_packed":
            calls[b.var.name_hint] = ("pure", v.args[0].global_symbol)
    assert calls == {"s": ("pure", "vm.builtin.shape_of"),
                     "st": ("pure", "vm.builtin.shape_to_tensor"),
                     "ts": ("pure", "vm.builtin.tensor_to_shape"),
                     "p": ("packed", "relax.run.print"), "q": ("packed", "relax.run.print"),
                     "k": ("packed", "relax.run.assert_op")}
    names = " ".join(str(g) for g in lowered.functions)
    for op in ("shape_of", "shape_to_tensor", "tensor_to_shape", "print", "assert"):
        assert op not in names  # no fused function, no kernel
    assert {"relax." + n for n in SHAPE_TESTED} <= set(LEGALIZE_RELAX)


@pytest.fixture(scope="module")
def mod_exe():
    mod = phasec.parse(SOURCE)
    return mod, phasec.build(mod)


X = np.arange(6, dtype="float32").reshape(2, 3)
T_ = np.array([3, 2])


def _runners(mod, exe):
    return {"interp": lambda *a: phasec.interp.run(mod, *a),
            "vm": lambda *a: phasec.VirtualMachine(exe)["main"](*a)}


@pytest.mark.parametrize("runner", ["interp", "vm"])
def test_program_runs(mod_exe, runner, capsys):
    run = _runners(*mod_exe)[runner]
    s, st, ts, r = run(X, T_, np.array(True))
    assert tuple(s) == (2, 3) and tuple(ts) == (3, 2)
    np.testing.assert_array_equal(st, np.array([2, 3], "int64"))
    assert np.asarray(st).dtype == np.int64
    np.testing.assert_array_equal(r, X.reshape(3, 2))
    out = capsys.readouterr().out
    assert out == f"x={X} shape={np.array([2, 3])}\n{np.array([2, 3])}\n"


@pytest.mark.parametrize("runner", ["interp", "vm"])
def test_failed_assertion_stops_the_program(mod_exe, runner):
    run = _runners(*mod_exe)[runner]
    with pytest.raises(phasec.PhasecError) as info:
        run(X, T_, np.array(False))
    exc = info.value
    err = exc if isinstance(exc, ProgramAssertionError) else exc.__cause__
    assert isinstance(err, ProgramAssertionError)
    assert "bad shape [2 3]" in str(exc)


@pytest.mark.parametrize("runner", ["interp", "vm"])
def test_negative_tensor_to_shape_is_an_error(mod_exe, runner):
    run = _runners(*mod_exe)[runner]
    with pytest.raises(phasec.PhasecError, match="negative dimension"):
        run(X, np.array([-3, -2]), np.array(True))


def test_print_without_format_and_assert_default_message(capsys):
    src = '''
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor((2,), dtype="int32"), c: R.Prim("bool")):
        p = R.print(x, x)
        k = R.assert_op(c)
        return x
'''
    mod = phasec.parse(src)
    vm = phasec.VirtualMachine(phasec.build(mod))
    vm["main"](np.array([1, 2], "int32"), True)
    assert capsys.readouterr().out == "[1 2] [1 2]\n"
    with pytest.raises(ProgramAssertionError, match="Assertion Failed"):
        vm["main"](np.array([1, 2], "int32"), False)


def test_print_in_a_pure_function_is_a_diagnostic():
    from phasec.verifier import check

    src = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), dtype="int32")):
        p = R.print(x)
        return x
'''
    diags = [d for d in check(phasec.parse(src)) if d.is_error]
    assert diags and any("impure" in d.message.lower() or "pure" in d.message for d in diags)

"""TVM 0.27's remaining builtins and spellings (issue 13): R.memory.view,
R.memory.ensure_zero_offset, R.call_inplace_packed, R.vm.call_tir_dyn and
R.nn.relu6 (which TVM builds as R.clip(x, 0, 6)). Inference against TVM's
printed results, the interpreter and the VM against numpy formulas
(views share memory: numpy reshape / view / byte slicing), what TVM reads
back, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

import phasec
from phasec.runtime import packed
from phasec.errors import StructInfoError, VMError
from phasec.interp import run as interp_run
from phasec.ir import ExternFunc, PrimValue, ShapeExpr, TensorStructInfo, Tuple, Var, tir
from phasec.op import call_op

from helpers.op_infer import S, raises, tv

VIEWS = '''
@I.ir_module
class Module:
    @R.function
    def main(A: R.Tensor((16,), "float32"), x: R.Tensor((2, 3), "float32")):
        with R.dataflow():
            B = R.memory.view(A, shape=R.shape([4, 4]))
            C = R.memory.view(A)
            D = R.memory.view(A, shape=R.shape([2, 2]), relative_byte_offset=R.prim_value(32))
            E = R.memory.view(A, dtype=R.dtype("int32"))
            F = R.memory.ensure_zero_offset(D)
            G = R.add(B, R.const(1.0, "float32"))
            H = R.multiply(F, R.const(2.0, "float32"))
            K = R.nn.relu6(x)
            R.output(G, H, E, C, K)
        return (G, H, E, C, K)
'''

#: the bindings TVM 0.27 prints for the views of VIEWS (struct info from InferTypeView)
TVM_VIEW_SINFO = {"B": 'R.Tensor((4, 4), dtype="float32")', "C": 'R.Tensor((16,), dtype="float32")',
                  "D": 'R.Tensor((2, 2), dtype="float32")', "E": 'R.Tensor((16,), dtype="int32")',
                  "F": 'R.Tensor((2, 2), dtype="float32")', "K": 'R.Tensor((2, 3), dtype="float32")'}


def _bindings(mod):
    return {b.var.name_hint: b for blk in mod["main"].body.blocks for b in blk.bindings}


def test_view_inference_matches_tvm_and_tvm_reads_the_print():
    import tvm

    mod = phasec.parse(VIEWS)
    got = {k: S(b.value) for k, b in _bindings(mod).items() if k in TVM_VIEW_SINFO}
    assert got == TVM_VIEW_SINFO
    text = mod.script()
    # omitted operands are TVM's void, the empty tuple; relu6 is TVM's R.clip(x, 0, 6)
    assert "R.memory.view(A, R.tuple(), R.tuple(), R.tuple())" in text
    assert "R.clip(x, " in text and "relu6" not in text
    theirs = tvm.script.from_source(text).script()
    for name, sinfo in TVM_VIEW_SINFO.items():
        assert f"{name}: {sinfo}" in theirs


def test_views_share_memory_in_the_interpreter_and_on_the_vm():
    A = np.arange(16, dtype="float32")
    x = np.array([[-1, 3, 7], [0.5, 6, 9]], "float32")
    expected = (A.reshape(4, 4) + 1, A.view(np.uint8)[32:48].view(np.float32).reshape(2, 2) * 2,
                A.view(np.int32), A, np.clip(x, 0, 6))
    mod = phasec.parse(VIEWS)
    for result in (interp_run(mod, A, x), phasec.VirtualMachine(phasec.build(mod))["main"](A, x)):
        for got, want in zip(result, expected):
            np.testing.assert_array_equal(np.asarray(got), want)
    # the lowered module calls TVM's packed functions for them
    low = phasec.pipeline.lower(mod).script()
    assert '"runtime.TVMTensorCreateView"' in low and '"vm.builtin.ensure_zero_offset"' in low


def test_view_errors():
    A = Var("A", TensorStructInfo((16,), "float32"))
    void = Tuple([])
    # TVM 0.27: "Views into an array must not exceed the bounds of the array being viewed"
    raises(["past the end of A (64 bytes)"], call_op, "memory.view", A, ShapeExpr([4, 5]))
    raises(["past the end of A (64 bytes)"], call_op, "memory.view", A, ShapeExpr([4, 4]), void,
           PrimValue(tir.IntImm(4, "int64")))
    raises(["would end at byte 128"], call_op, "memory.view", A, void,
           phasec.ir.DataTypeImm("float64"), void)
    unknown = Var("u", TensorStructInfo(None, "float32", 1))
    raises(["element size from 4 to 8"], call_op, "memory.view", unknown, void,
           phasec.ir.DataTypeImm("float64"), void)
    raises(["int64 R.prim_value"], call_op, "memory.view", A, void, void,
           PrimValue(tir.IntImm(4, "int32")))
    raises(["expects a tensor"], call_op, "memory.view", ShapeExpr([4]))
    # at run time: a view past the end of the data
    with pytest.raises(VMError, match="exceeds the 64 bytes"):
        packed.get_packed_func("runtime.TVMTensorCreateView")(np.zeros(16, "float32"), (4, 4),
                                                              "float32", 8)


# ---------------------------------------------------------------------------
# call_inplace_packed, vm.call_tir_dyn
# ---------------------------------------------------------------------------

INPLACE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
        with R.dataflow():
            a = R.call_inplace_packed("test.ops.inplace_add", x, y, inplace_indices=0,
                                      ty_args=(R.Tensor((3, 4), dtype="float32")))
            b = R.add(a, y)
            R.output(b)
        return b
'''


@pytest.fixture(scope="module")
def inplace_add():
    def add(a, b):
        np.add(a, b, out=a)  # writes its first argument, as inplace_indices says
        return a
    packed.register_func("test.ops.inplace_add", add, override=True)
    return add


def test_call_inplace_packed_runs_and_prints_as_tvm(inplace_add):
    import tvm

    mod = phasec.parse(INPLACE)
    text = mod.script()
    assert 'R.call_inplace_packed("test.ops.inplace_add", x, y, inplace_indices=[0], ' in text
    tvm.script.from_source(text)  # TVM reads it
    x, y = np.ones((3, 4), "float32"), np.full((3, 4), 2, "float32")
    np.testing.assert_array_equal(interp_run(mod, x.copy(), y), x + y + y)
    vm = phasec.VirtualMachine(phasec.build(mod))
    np.testing.assert_array_equal(vm["main"](x.copy(), y), x + y + y)
    # RemovePurityChecking makes it the plain packed call (as TVM does)
    low = phasec.pipeline.lower(mod).script()
    assert "call_inplace_packed" not in low and 'R.call_packed("test.ops.inplace_add"' in low


def test_call_inplace_packed_inference_errors():
    x = Var("x", TensorStructInfo((3, 4), "float32"))
    y = Var("y", TensorStructInfo((3, 4), "float32"))
    f = ExternFunc("f")
    out = TensorStructInfo((3, 4), "float32")
    two = [out, out]
    # TVM 0.27's InferTypeCallInplacePacked errors
    raises(["in-place index 0 is out of range", "between -1 and 1"], call_op,
           "call_inplace_packed", f, x, y, inplace_indices=2, sinfo_args=[out])
    raises(["index 0 appears more than once"], call_op, "call_inplace_packed", f, x, y,
           inplace_indices=[0, 0], sinfo_args=[phasec.ir.TupleStructInfo(two)])
    raises(["at least one in-place index must be other than -1"], call_op,
           "call_inplace_packed", f, x, inplace_indices=-1, sinfo_args=[out])
    raises(["does not match the in-place argument 0"], call_op, "call_inplace_packed", f, x,
           inplace_indices=0, sinfo_args=[TensorStructInfo((4, 3), "float32")])
    raises(["without arguments use R.call_pure_packed"], call_op, "call_inplace_packed", f,
           inplace_indices=0, sinfo_args=[out])
    call = call_op("call_inplace_packed", f, x, y, inplace_indices=[0, -1],
                   sinfo_args=[phasec.ir.TupleStructInfo(two)])
    assert S(call).startswith("R.Tuple(")


TIR_DYN = '''
@I.ir_module
class Module:
    @T.prim_func
    def tir_full(var_full: T.handle, n: T.int64):
        full = T.match_buffer(var_full, (n,), "float32")
        for i in range(n):
            full[i] = T.float32(2.5)

    @R.function(pure=False)
    def main(z: R.Tensor(("n",), "float32")):
        n = T.int64()
        cls = Module
        alloc = R.builtin.alloc_tensor(R.shape([n]), R.dtype("float32"), R.prim_value(0))
        _ = R.vm.call_tir_dyn(cls.tir_full, (alloc, R.shape([n])))
        return alloc
'''


def test_call_tir_dyn_reads_runs_and_round_trips():
    import tvm

    mod = phasec.parse(TIR_DYN)
    call = _bindings(mod)["_"].value
    assert S(call) == "R.Tuple()"  # TVM 0.27: ReturnVoidType
    assert not phasec.op.get_op("relax.vm.call_tir_dyn").pure
    np.testing.assert_array_equal(interp_run(mod, np.zeros(5, "float32")), np.full(5, 2.5))
    text = mod.script()
    assert "R.vm.call_tir_dyn(cls.tir_full, (alloc, R.shape([n])))" in text
    tvm.script.from_source(text)
    with pytest.raises(StructInfoError, match="must be a PrimFunc of the module"):
        call_op("vm.call_tir_dyn", ExternFunc("f"), Tuple([]))


def test_view_offset_written_as_integer_arithmetic_is_folded():
    # TVM's parser evaluates relative_byte_offset=32 * 64 * 4 as Python; phasec folds it
    # (nothing executed) to the same R.prim_value(8192)
    import tvm

    text = VIEWS.replace("relative_byte_offset=R.prim_value(32)",
                         "relative_byte_offset=2 * 4 * 4")
    mod = phasec.parse(text)
    view = _bindings(mod)["D"].value
    assert isinstance(view.args[3], PrimValue) and view.args[3].value.value == 32
    assert "R.prim_value(32)" in mod.script()
    assert "D: R.Tensor((2, 2)" in tvm.script.from_source(text).script()
    with pytest.raises(phasec.errors.ParseError):
        phasec.parse(VIEWS.replace("relative_byte_offset=R.prim_value(32)",
                                   "relative_byte_offset=__import__('os')"))


def test_stop_lift_params_is_the_identity():
    # TVM 0.27: InferTypeUnaryArith (same struct info), no legalization of its own
    import tvm

    text = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, "n"), "float32")):
        n = T.int64()
        y = R.builtin.stop_lift_params(x)
        z = R.add(y, y)
        return z
"""
    mod = phasec.parse(text)
    assert S(_bindings(mod)["y"].value) == 'R.Tensor((2, n), dtype="float32")'
    assert "y: R.Tensor((2, n), dtype=\"float32\")" in tvm.script.from_source(text).script()
    x = np.arange(6, dtype="float32").reshape(2, 3)
    np.testing.assert_array_equal(interp_run(mod, x), 2 * x)
    np.testing.assert_array_equal(phasec.VirtualMachine(phasec.build(mod))["main"](x), 2 * x)
    raises(["expects a tensor"], call_op, "builtin.stop_lift_params", ShapeExpr([2]))


# ---------------------------------------------------------------------------
# multinomial_from_uniform
# ---------------------------------------------------------------------------

SAMPLING = '''
@I.ir_module
class Module:
    @R.function
    def main(p: R.Tensor((3, 7), "float32"), u: R.Tensor((9, 1), "float32"),
             k: R.Tensor((9, 1), "int64")):
        y = R.multinomial_from_uniform(p, u, k, dtype="int64")
        return y
'''


def test_multinomial_from_uniform_matches_tvm():
    import tvm
    from tvm import relax

    rng = np.random.default_rng(3)
    p = rng.uniform(0, 1, (3, 7)).astype("float32")
    p /= p.sum(axis=1, keepdims=True)
    u = rng.uniform(0, 1, (9, 1)).astype("float32")
    u[:3, 0] = [0.0, 0.9999999, p[1, 0]]   # edges: the first category, the last, a boundary
    k = rng.integers(0, 3, (9, 1)).astype("int64")
    k[2, 0] = 1
    vm = relax.VirtualMachine(tvm.compile(tvm.script.from_source(SAMPLING), target="llvm"),
                              tvm.cpu())
    expected = vm["main"](*[tvm.runtime.tensor(a) for a in (p, u, k)]).numpy()
    mod = phasec.parse(SAMPLING)
    np.testing.assert_array_equal(interp_run(mod, p, u, k), expected)
    np.testing.assert_array_equal(phasec.VirtualMachine(phasec.build(mod))["main"](p, u, k),
                                  expected)
    # TVM's documented example
    from phasec.op import get_op
    ref = get_op("relax.multinomial_from_uniform").reference
    np.testing.assert_array_equal(
        ref(np.array([[0.2, 0.3, 0.5], [0.3, 0.4, 0.3]], "float32"),
            np.array([[0.4], [0.9]], "float32"), np.array([[0], [1]], "int64")), [[1], [2]])


def test_multinomial_sample_indices_are_bounds_checked():
    from phasec.errors import IndexOutOfRangeError, PhasecError

    mod = phasec.parse(SAMPLING)
    p = np.full((3, 7), 1 / 7, "float32")
    u = np.full((9, 1), 0.5, "float32")
    k = np.zeros((9, 1), "int64")
    k[4, 0] = 3   # past the 3 distributions
    # the interpreter names the binding around the reference's IndexOutOfRangeError
    with pytest.raises(PhasecError, match="index 3 is out of range for an axis of extent 3"):
        interp_run(mod, p, u, k)
    with pytest.raises(IndexOutOfRangeError):
        phasec.VirtualMachine(phasec.build(mod))["main"](p, u, k)
    k[4, 0] = -1  # negative counts from the end, as every data index in phasec
    np.testing.assert_array_equal(interp_run(mod, p, u, k), np.full((9, 1), 3))


def test_multinomial_inference_errors():
    p, u, k = tv("p", (3, 7)), tv("u", (9, 1)), tv("k", (9, 1), "int64")
    assert S(call_op("multinomial_from_uniform", p, u, k)) == 'R.Tensor((9, 1), dtype="int64")'
    # TVM 0.27's InferTypeMultinomialFromUniform checks
    raises(["prob to have float dtype"], call_op, "multinomial_from_uniform",
           tv("pi", (3, 7), "int32"), u, k)
    raises(["sample_indices to have int dtype"], call_op, "multinomial_from_uniform", p, u,
           tv("kf", (9, 1)))
    raises(["prob to be a 2-D tensor"], call_op, "multinomial_from_uniform", tv("p1", (7,)), u, k)
    raises(["the same number of rows"], call_op, "multinomial_from_uniform", p, u,
           tv("k8", (8, 1), "int64"))
    raises(["shape (n, 1)"], call_op, "multinomial_from_uniform", p, tv("u2", (9, 2)), k)


def test_pure_extern_func_call_as_tvm_lowers_a_view():
    # TVM's LowerRuntimeBuiltin writes R.memory.view as a call of an ExternFunc whose own
    # struct info says pure: a pure function may contain it; it prints and reads back as such
    import tvm
    from phasec import verifier
    from phasec.ir.structural import structural_equal

    text = """
@I.ir_module
class Module:
    @R.function
    def main(A: R.Tensor([4096], "float32")):
        B = R.ExternFunc("runtime.TVMTensorCreateView",
                         R.Callable(derive_func="tvm.relax.type.infer_view_ty", purity=True))(
            A, R.shape([64, 64]), R.dtype("float32"), R.prim_value(0))
        return B
"""
    mod = phasec.parse(text)
    assert not [d for d in verifier.check(mod) if d.is_error]
    again = phasec.parse(mod.script())
    assert structural_equal(mod, again)
    tvm.script.from_source(mod.script())
    impure = phasec.parse(text.replace("purity=True", "purity=False"))
    assert any(d.code == "WF202" for d in verifier.check(impure) if d.is_error)


def test_cumsum_exclusive_none_is_false():
    # TVM 0.27: R.cumsum(x, axis=1, exclusive=None) builds (and prints) exclusive=False
    x = tv("x", (2, 3))
    for op in ("cumsum", "cumprod"):
        assert call_op(op, x, axis=1, exclusive=None).attrs["exclusive"] is False
    text = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")):
        y = R.cumsum(x, axis=1, exclusive=None)
        return y
"""
    assert "exclusive=False" in phasec.parse(text).script()


def test_binary_operators_take_a_scalar_operand():
    # TVM 0.27's InferTypeBroadcast accepts an R.Prim operand beside a tensor
    # (test_transform_legalize_ops_binary writes R.add(x, y) with y: R.Prim("float32"))
    import tvm

    text = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, "k"), "float32")):
        k = T.int64()
        a = R.multiply(x, R.prim_value(T.float32(2.5)))
        b = R.greater(R.prim_value(T.float32(0.5)), x)
        c = R.add(R.astype(x, "int64"), R.prim_value(k))
        return (a, b, c)
"""
    mod = phasec.parse(text)
    theirs = tvm.script.from_source(text).script()
    for name, b in _bindings(mod).items():
        if name in "abc":
            assert f"{name}: {S(b.value)} = " in theirs
    x = np.arange(6, dtype="float32").reshape(2, 3)
    expected = (x * 2.5, 0.5 > x, x.astype("int64") + 3)   # k = 3, the symbolic width
    for got in (interp_run(mod, x), phasec.VirtualMachine(phasec.build(mod))["main"](x)):
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(np.asarray(g), e)
    one = PrimValue(tir.FloatImm(1.0, "float32"))
    raises(["of two scalars (R.Prim)"], call_op, "add", one, one)
    raises(["same datatype"], call_op, "add", tv("x", (2, 3)), PrimValue(tir.IntImm(1, "int64")))

"""VM codegen and the virtual machine on hand-built build-phase (3) modules:
explicit storage, direct DPS kernel calls, packed calls, closures, If,
recursion, tuples and match_cast, and the checks of a call's inputs.

Executables (save, load, validation) are in test_vm_executable.py, memory
and allocation counters in test_vm_memory.py, the straight-line code the VM
compiles to Python in test_vm_compiled.py."""

import numpy as np
import pytest

from phasec import ir
from phasec.backend.vm import VirtualMachine, VMClosure, VMCodegenError, codegen
from phasec.errors import PhaseError, VMError, WellFormedError
from phasec.interp import run as interpret
from phasec.ir import tir

from helpers.vm_build import (
    OBJ, UNIT, B, V, alloc, f32, func, module, op, packed, scale_kernel, seq,
    straight_line_module, tensor, vector_add_kernel,
)


# ---------------------------------------------------------------------------
# codegen accepts only verified build-phase modules
# ---------------------------------------------------------------------------


def test_codegen_rejects_other_phases():
    mod = straight_line_module().with_phase("lowering")
    with pytest.raises(PhaseError, match="phase build.*phase lowering.*VMBuiltinLower"):
        codegen(mod)


def test_codegen_runs_the_verifier():
    x, r = V("x", tensor((2,))), V("r", tensor((2,)))
    mod = module(main=func([x], [B(r, op("add", x, x))], r))  # high-level op at phase 3
    with pytest.raises(WellFormedError):
        codegen(mod)


def test_codegen_errors_name_the_function():
    x, r = V("x", tensor((2,))), V("r", tensor((2,)))
    mod = module(main=func([x], [B(r, op("add", x, x))], r))
    with pytest.raises(VMCodegenError, match="function 'main'.*'relax.add' is not a VM builtin"):
        codegen(mod, verify=False)


# ---------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kernels", ["interp", "llvm"])
def test_straight_line_kernels_with_symbolic_batch(kernels):
    exe = codegen(straight_line_module())
    vm = VirtualMachine(exe, kernels=kernels)
    for n in (3, 7):
        x = np.arange(n, dtype="float32")
        y = np.full(n, 2, "float32")
        np.testing.assert_allclose(vm["main"](x, y), (x + y) * y)
    # the interpreter agrees on the build-phase module itself
    np.testing.assert_allclose(interpret(straight_line_module(), f32(1, 2), f32(3, 4)),
                               [12, 24])


def test_results_match_interpreter_and_disassembly_reads_well():
    exe = codegen(straight_line_module())
    text = exe.as_text()
    assert "function main(x, y)" in text and "kernel vadd" in text and "kill r" in text
    assert "match r0 tensor[(r" in text and "builtin vm.alloc_storage" in text
    assert exe.stats()["kernels"] == 2 and exe.stats()["functions"] == 1


def test_custom_kernel_mapping():
    exe = codegen(straight_line_module())
    calls = []

    def fake_add(a, b, out):
        calls.append("add")
        out[...] = a + b

    vm = VirtualMachine(exe, kernels={"vadd": fake_add, "vmul": lambda a, b, o: o.__setitem__(..., a * b)})
    np.testing.assert_array_equal(vm["main"](f32(1), f32(2)), [6])
    assert calls == ["add"]
    with pytest.raises(VMError, match="no kernel implementation given for vmul"):
        VirtualMachine(exe, kernels={"vadd": fake_add})


def test_scalar_kernel_arguments_from_shape_expr():
    n = tir.Var("n", "int64")
    x = V("x", tensor((n,)))
    s, out, blk = alloc("out", [n])
    c = V("c", UNIT)
    main = func([x], [*blk, B(c, ir.Call(ir.GlobalVar("scale"), [x, out, ir.ShapeExpr([n + 1])]))],
                out)
    exe = codegen(module(main=main, scale=scale_kernel()))
    vm = VirtualMachine(exe, kernels="interp")
    np.testing.assert_array_equal(vm["main"](f32(1, 2, 3)), [4, 8, 12])


def test_if_and_packed_functions(packed_funcs):
    packed_funcs("test.vm.is_neg", lambda x: np.asarray(x < 0))
    packed_funcs("test.vm.neg", lambda x: -x)
    x = V("x", tensor((), "float32"))
    c, r, ng = V("c", tensor((), "bool")), V("r", tensor((), "float32")), V("ng", tensor((), "float32"))
    main = func([x], [
        B(c, packed("test.vm.is_neg", x, sinfo=tensor((), "bool"))),
        B(r, ir.If(c, seq([B(ng, packed("test.vm.neg", x, sinfo=tensor((), "float32")))], ng),
                   seq([], x))),
    ], r)
    vm = VirtualMachine(codegen(module(main=main)), kernels="interp")
    assert vm["main"](np.float32(-3)) == 3
    assert vm["main"](np.float32(5)) == 5


def _sum_to_module():
    """sum_to(n) = n <= 0 ? n : n + sum_to(n - 1) with packed arithmetic."""
    T = tensor((), "int64")
    n = V("n", T)
    c, r, m, rec, s = (V("c", tensor((), "bool")), V("r", T), V("m", T), V("rec", T), V("s", T))
    other = seq([B(m, packed("test.vm.sub1", n, sinfo=T)),
                 B(rec, ir.Call(ir.GlobalVar("sum_to"), [m])),
                 B(s, packed("test.vm.add", n, rec, sinfo=T))], s)
    f = func([n], [B(c, packed("test.vm.le0", n, sinfo=tensor((), "bool"))),
                   B(r, ir.If(c, seq([], n), other))], r)
    return module(sum_to=f)


@pytest.fixture
def arith(packed_funcs):
    packed_funcs("test.vm.sub1", lambda x: x - 1)
    packed_funcs("test.vm.add", lambda x, y: x + y)
    packed_funcs("test.vm.le0", lambda x: np.asarray(x <= 0))


def test_recursion_is_not_limited_by_python_stack(arith):
    vm = VirtualMachine(codegen(_sum_to_module()), kernels="interp")
    assert int(vm["sum_to"](np.int64(10))) == 55
    assert int(vm["sum_to"](np.int64(20000))) == 20000 * 20001 // 2


def test_runaway_recursion_is_an_error(arith):
    vm = VirtualMachine(codegen(_sum_to_module()), kernels="interp", max_call_depth=100)
    with pytest.raises(VMError, match="call depth exceeded 100"):
        vm["sum_to"](np.int64(1000))


def test_closures_capture_last_and_call_back_from_python(packed_funcs):
    packed_funcs("test.vm.apply_twice", lambda f, x: f(f(x)))
    n = tir.Var("n", "int64")
    # lifted(x, c) = x + c  (captured c comes last, TVM's convention)
    x, cap = V("x", tensor((n,))), V("c", tensor((n,)))
    s, out, blk = alloc("out", [n])
    u = V("u", UNIT)
    lifted = func([x, cap], [*blk, B(u, ir.Call(ir.GlobalVar("vadd"), [x, cap, out]))], out)
    a = V("a", tensor((2,)))
    fsig = ir.FuncStructInfo([tensor((2,))], tensor((2,)), False)
    clo, r1, r2 = V("clo", fsig), V("r1", tensor((2,))), V("r2", tensor((2,)))
    main = func([a], [
        B(clo, op("make_closure", ir.GlobalVar("lifted"), ir.Tuple([a]))),
        B(r1, op("invoke_closure", clo, ir.Tuple([a]), sinfo_args=(tensor((2,)),))),
        B(r2, packed("test.vm.apply_twice", clo, r1, sinfo=tensor((2,)))),
    ], ir.Tuple([r1, r2, clo]))
    vm = VirtualMachine(codegen(module(main=main, lifted=lifted, vadd=vector_add_kernel())),
                        kernels="interp")
    r1v, r2v, closure = vm["main"](f32(1, 2))
    np.testing.assert_array_equal(r1v, [2, 4])
    np.testing.assert_array_equal(r2v, [4, 8])
    assert isinstance(closure, VMClosure) and closure.name == "lifted"
    np.testing.assert_array_equal(closure(f32(10, 10)), [11, 12])


def test_closure_arity_is_checked():
    x, cap = V("x", tensor((2,))), V("c", tensor((2,)))
    lifted = func([x, cap], [], x)
    a = V("a", tensor((2,)))
    clo, r = V("clo", OBJ), V("r", tensor((2,)))
    main = func([a], [B(clo, op("make_closure", ir.GlobalVar("lifted"), ir.Tuple([a]))),
                      B(r, op("invoke_closure", clo, ir.Tuple([a, a]),
                              sinfo_args=(tensor((2,)),)))], r)
    vm = VirtualMachine(codegen(module(main=main, lifted=lifted)), kernels="interp")
    with pytest.raises(VMError, match="closure 'lifted' takes 1 argument, got 2"):
        vm["main"](f32(1, 2))


def test_function_value_and_null(packed_funcs):
    packed_funcs("test.vm.call", lambda f, x: f(x))
    x = V("x", tensor((2,)))
    ident = func([x], [], x)
    a = V("a", tensor((2,)))
    fv, r, nul = V("fv", OBJ), V("r", tensor((2,))), V("nul", OBJ)
    main = func([a], [B(fv, ir.GlobalVar("ident")), B(r, packed("test.vm.call", fv, a,
                                                                  sinfo=tensor((2,)))),
                      B(nul, op("null_value"))], ir.Tuple([r, nul]))
    vm = VirtualMachine(codegen(module(main=main, ident=ident)), kernels="interp")
    r, nul = vm["main"](f32(1, 2))
    np.testing.assert_array_equal(r, [1, 2])
    assert nul is None


def test_tuples_and_calls_between_functions():
    x, y = V("x", tensor((2,))), V("y", tensor((3,)))
    t = V("t", ir.TupleStructInfo([tensor((3,)), tensor((2,))]))
    swap = func([x, y], [B(t, ir.Tuple([y, x]))], t)
    a, b = V("a", tensor((2,))), V("b", tensor((3,)))
    r = V("r", ir.TupleStructInfo([tensor((3,)), tensor((2,))]))
    g0, g1 = V("g0", tensor((3,))), V("g1", tensor((2,)))
    main = func([a, b], [B(r, ir.Call(ir.GlobalVar("swap"), [a, b])),
                         B(g0, ir.TupleGetItem(r, 0)), B(g1, ir.TupleGetItem(r, 1))],
                ir.Tuple([g1, ir.Tuple([g0]), ir.PrimValue(7), ir.ShapeExpr([2, 3])]))
    vm = VirtualMachine(codegen(module(main=main, swap=swap)), kernels="interp")
    g1v, (g0v,), seven, shape = vm["main"](f32(1, 2), f32(3, 4, 5))
    np.testing.assert_array_equal(g1v, [1, 2])
    np.testing.assert_array_equal(g0v, [3, 4, 5])
    assert seven == 7 and shape == (2, 3)


def test_match_cast_binds_symbolic_dims_for_later_allocation(packed_funcs):
    packed_funcs("test.vm.flatten", lambda x: x.reshape(-1))
    x = V("x", tensor((2, 3)))
    flat = V("flat", tensor(None, "float32"))
    m = tir.Var("m", "int64")
    fm = V("fm", tensor((m,)))
    s, out, blk = alloc("out", [m])
    u, shp = V("u", UNIT), V("shp", ir.ShapeStructInfo([m]))
    main = func([x], [B(flat, packed("test.vm.flatten", x, sinfo=tensor(None, "float32"))),
                      ir.MatchCast(fm, flat, tensor((m,))),
                      *blk, B(u, ir.Call(ir.GlobalVar("vadd"), [fm, fm, out])),
                      B(shp, ir.ShapeExpr([m]))], ir.Tuple([out, shp]))
    vm = VirtualMachine(codegen(module(main=main, vadd=vector_add_kernel())), kernels="interp")
    out, shp = vm["main"](np.ones((2, 3), "float32"))
    np.testing.assert_array_equal(out, np.full(6, 2))
    assert shp == (6,)

    packed_funcs("test.vm.flatten", lambda x: x)  # now returns 2-D: match_cast must fail
    vm = VirtualMachine(codegen(module(main=main, vadd=vector_add_kernel())), kernels="interp")
    with pytest.raises(VMError, match="function 'main', match_cast of 'fm'.*ndim is 2, expected 1"):
        vm["main"](np.ones((2, 3), "float32"))


# ---------------------------------------------------------------------------
# Input checks
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checked_vm():
    n = tir.Var("n", "int64")
    x, w = V("x", tensor((n, 4))), V("w", tensor((4, n), "int32"))
    return VirtualMachine(codegen(module(main=func([x, w], [], x))), kernels="interp")


def test_input_arity(checked_vm):
    with pytest.raises(VMError, match=r"function 'main' takes 2 arguments \(x, w\), got 1"):
        checked_vm["main"](np.zeros((2, 4), "float32"))


@pytest.mark.parametrize("x, w, param, reason", [
    (np.zeros((2, 4), "float64"), np.zeros((4, 2), "int32"), "x", "dtype is float64, expected float32"),
    (np.zeros((2, 4, 1), "float32"), np.zeros((4, 2), "int32"), "x", "ndim is 3, expected 2"),
    (np.zeros((2, 5), "float32"), np.zeros((4, 2), "int32"), "x", "dimension 1 is 5, expected 4"),
    (np.zeros((2, 4), "float32"), np.zeros((4, 3), "int32"), "w", "dimension 1 is 3, but an earlier"),
    (np.zeros((2, 4), "float32"), [[1, 2]], "w", "not a tensor"),
])
def test_input_checks_name_function_parameter_expected_and_actual(checked_vm, x, w, param, reason):
    with pytest.raises(VMError) as info:
        checked_vm["main"](x, w)
    msg = str(info.value)
    assert f"function 'main', parameter '{param}'" in msg and reason in msg
    assert "expected R.Tensor((n, 4)" in msg or 'expected R.Tensor((4, n), dtype="int32")' in msg
    assert "got " in msg


def test_non_contiguous_inputs_are_accepted():
    exe = codegen(straight_line_module())
    vm = VirtualMachine(exe, kernels="interp")
    x = np.arange(8, dtype="float32")[::2]
    np.testing.assert_array_equal(vm["main"](x, np.ones(4, "float32")), (x + 1))


def test_unknown_function_and_unknown_packed_function():
    x, r = V("x", tensor((2,))), V("r", tensor((2,)))
    vm = VirtualMachine(codegen(module(main=func([x], [B(r, packed("test.vm.missing", x,
                                                                       sinfo=tensor((2,))))], r))),
                        kernels="interp")
    with pytest.raises(VMError, match="no function 'mian'; it has: main"):
        vm["mian"]
    with pytest.raises(VMError, match="no packed function named 'test.vm.missing'.*in main"):
        vm["main"](f32(1, 2))


def test_packed_function_registered_after_vm_creation(packed_funcs):
    x, r = V("x", tensor((2,))), V("r", tensor((2,)))
    vm = VirtualMachine(codegen(module(main=func([x], [B(r, packed("test.vm.late", x,
                                                                       sinfo=tensor((2,))))], r))),
                        kernels="interp")
    packed_funcs("test.vm.late", lambda x: x * 10)
    np.testing.assert_array_equal(vm["main"](f32(1, 2)), [10, 20])


def test_errors_in_packed_functions_are_located(packed_funcs):
    def boom(x):
        raise RuntimeError("exploded")

    packed_funcs("test.vm.boom", boom)
    x, r = V("x", tensor((2,))), V("r", tensor((2,)))
    vm = VirtualMachine(codegen(module(main=func([x], [B(r, packed("test.vm.boom", x,
                                                                       sinfo=tensor((2,))))], r))),
                        kernels="interp")
    with pytest.raises(VMError, match=r"RuntimeError: exploded \(in main, instruction \d+: "
                                      r"call r\d+ = packed test.vm.boom") as info:
        vm["main"](f32(1, 2))
    assert isinstance(info.value.__cause__, RuntimeError)




def test_arguments_by_parameter_name():
    """ONNX Runtime users pass inputs by name: vm["main"](x=..., w=...)."""
    import phasec

    mod = phasec.parse('''
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), w: R.Tensor((3, 2), "float32")) -> R.Tensor((2, 2), "float32"):
        y = R.matmul(x, w)
        return y
''')
    vm = VirtualMachine(phasec.build(mod))
    x = np.arange(6, dtype="float32").reshape(2, 3)
    w = np.arange(6, dtype="float32").reshape(3, 2) - 2
    for call in (lambda: vm["main"](x=x, w=w), lambda: vm["main"](w=w, x=x),
                 lambda: vm["main"](x, w=w)):
        np.testing.assert_allclose(np.asarray(call()), x @ w)
    with pytest.raises(VMError, match="no parameter 'input'; its parameters are: x, w"):
        vm["main"](input=x, w=w)
    with pytest.raises(VMError, match="got parameter 'x' twice"):
        vm["main"](x, x=x)
    with pytest.raises(VMError, match="missing 1 argument: w"):
        vm["main"](x=x)

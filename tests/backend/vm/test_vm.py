"""VM codegen, the virtual machine and executable save/load, on hand-built
build-phase (3) modules: explicit storage, direct DPS kernel calls, packed
calls, closures, If, recursion, tuples and match_cast."""

import zipfile

import numpy as np
import pytest

import phasec
from phasec import ir
from phasec.backend.vm import (
    CalleeKind, Executable, ExecutableFormatError, VirtualMachine, VMClosure, VMCodegenError,
    codegen,
)
from phasec.backend.vm import bytecode as bc
from phasec.errors import PhaseError, VMError, WellFormedError
from phasec.interp import run as interpret
from phasec.ir import tir
from phasec.runtime.packed import register_func, remove_func

# ---------------------------------------------------------------------------
# Building helpers (build-phase form)
# ---------------------------------------------------------------------------

UNIT = ir.TupleStructInfo([])
OBJ = ir.ObjectStructInfo()


def tensor(shape, dtype="float32"):
    return ir.TensorStructInfo(shape, dtype)


def op(name, *args, sinfo_args=(), **attrs):
    return ir.Call(ir.Op("relax." + name), args, attrs, sinfo_args)


def packed(name, *args, sinfo=None):
    return ir.Call(ir.ExternFunc(name), args, None, (sinfo,) if sinfo is not None else ())


def seq(bindings, result):
    return ir.SeqExpr([ir.BindingBlock(bindings)] if bindings else [], result)


def func(params, bindings, result, ret=None):
    # the build phase: every function impure
    return ir.Function(params, seq(bindings, result), ret, False)


def B(var, value):
    return ir.VarBinding(var, value)


def V(name, sinfo=None):
    return ir.Var(name, sinfo)


def module(phase="build", **funcs):
    return ir.IRModule(funcs, {"phase": phase})


def f32(*values):
    return np.array(values, dtype="float32")


def alloc(name, shape, dtype="float32", nbytes=None):
    """Bindings allocating a tensor through R.vm.alloc_storage / R.vm.alloc_tensor."""
    itemsize = np.dtype(dtype).itemsize
    size = nbytes if nbytes is not None else itemsize * int(np.prod([
        d.value if isinstance(d, tir.IntImm) else d for d in shape])) if all(
        isinstance(d, (int, tir.IntImm)) for d in shape) else None
    if size is None:  # symbolic: bytes = prod(shape) * itemsize as a PrimExpr
        expr = tir.IntImm(itemsize)
        for d in shape:
            expr = expr * d
        size = expr
    storage = V(name + "_storage", OBJ)
    t = V(name, tensor(shape, dtype))
    return storage, t, [
        B(storage, op("vm.alloc_storage", ir.ShapeExpr([size]), runtime_device_index=0,
                      dtype="uint8")),
        B(t, op("vm.alloc_tensor", storage, ir.PrimValue(0), ir.ShapeExpr(shape), dtype=dtype)),
    ]


def vector_add_kernel():
    """C[i] = A[i] + B[i] over a symbolic length n."""
    n = tir.Var("n", "int64")
    A, Bf, C = (tir.Buffer(name, (n,), "float32") for name in "ABC")
    i = tir.Var("i", "int64")
    return tir.PrimFunc([A, Bf, C], tir.For(i, 0, n, "serial",
                                            tir.BufferStore(C, A[i] + Bf[i], (i,))))


def vector_mul_kernel():
    n = tir.Var("n", "int64")
    A, Bf, C = (tir.Buffer(name, (n,), "float32") for name in "ABC")
    i = tir.Var("i", "int64")
    return tir.PrimFunc([A, Bf, C], tir.For(i, 0, n, "serial",
                                            tir.BufferStore(C, A[i] * Bf[i], (i,))))


def scale_kernel():
    """Out[i] = X[i] * k with a scalar shape parameter k."""
    n = tir.Var("n", "int64")
    k = tir.Var("k", "int64")
    X, Out = tir.Buffer("X", (n,), "float32"), tir.Buffer("Out", (n,), "float32")
    i = tir.Var("i", "int64")
    return tir.PrimFunc([X, Out, k], tir.For(
        i, 0, n, "serial", tir.BufferStore(Out, X[i] * tir.Cast("float32", k), (i,))))


@pytest.fixture
def packed_funcs():
    names = []

    def add(name, fn):
        register_func(name, fn, override=True)
        names.append(name)
        return name

    yield add
    for n in names:
        remove_func(n)


def straight_line_module():
    """main(x, y) = (x + y) * y with two kernels and explicit storage, symbolic n."""
    n = tir.Var("n", "int64")
    x, y = V("x", tensor((n,))), V("y", tensor((n,)))
    s0, t0, b0 = alloc("t0", [n])
    s1, t1, b1 = alloc("t1", [n])
    c0, c1, k0 = V("c0", UNIT), V("c1", UNIT), V("k0", UNIT)
    main = func([x, y], [*b0, B(c0, ir.Call(ir.GlobalVar("vadd"), [x, y, t0])),
                         *b1, B(c1, ir.Call(ir.GlobalVar("vmul"), [t0, y, t1])),
                         B(k0, op("vm.kill_object", s0))], t1)
    return module(main=main, vadd=vector_add_kernel(), vmul=vector_mul_kernel())


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


# ---------------------------------------------------------------------------
# Memory accounting
# ---------------------------------------------------------------------------


def _two_buffers_module(kill_first):
    """t0 = x + x; t1 = x * x (t0 dead before t1 is allocated); returns t1."""
    x = V("x", tensor((256,)))
    s0, t0, b0 = alloc("t0", [256])
    s1, t1, b1 = alloc("t1", [256])
    c0, c1 = V("c0", UNIT), V("c1", UNIT)
    kills = [B(V("k0", UNIT), op("vm.kill_object", t0)),
             B(V("k1", UNIT), op("vm.kill_object", s0))] if kill_first else []
    main = func([x], [*b0, B(c0, ir.Call(ir.GlobalVar("vadd"), [x, x, t0])), *kills,
                      *b1, B(c1, ir.Call(ir.GlobalVar("vmul"), [x, x, t1]))], t1)
    return module(main=main, vadd=vector_add_kernel(), vmul=vector_mul_kernel())


def test_peak_bytes_reflects_kill_object():
    x = np.ones(256, "float32")
    vm = VirtualMachine(codegen(_two_buffers_module(kill_first=True)), kernels="interp")
    vm["main"](x)
    assert vm.peak_bytes == 1024 and vm.stats["storage_allocs"] == 2
    assert vm.stats["bytes_allocated"] == 2048
    vm = VirtualMachine(codegen(_two_buffers_module(kill_first=False)), kernels="interp")
    vm["main"](x)
    assert vm.peak_bytes == 2048


def test_live_bytes_and_reset_stats():
    vm = VirtualMachine(codegen(_two_buffers_module(kill_first=True)), kernels="interp")
    out = vm["main"](np.ones(256, "float32"))
    assert vm.stats["live_bytes"] == 1024  # the result's storage
    del out
    assert vm.stats["live_bytes"] == 0
    vm.reset_stats()
    assert vm.stats == {"storage_allocs": 0, "tensor_allocs": 0, "bytes_allocated": 0,
                        "live_bytes": 0, "peak_bytes": 0}


def test_alloc_tensor_must_fit_in_storage():
    s, t = V("s", OBJ), V("t", tensor((4,)))
    main = func([], [B(s, op("vm.alloc_storage", ir.ShapeExpr([8]), runtime_device_index=0,
                             dtype="uint8")),
                     B(t, op("vm.alloc_tensor", s, ir.PrimValue(0), ir.ShapeExpr([4]),
                             dtype="float32"))], t)
    vm = VirtualMachine(codegen(module(main=main)), kernels="interp")
    with pytest.raises(VMError, match="16 bytes at offset 0 does not fit in storage of 8 bytes"):
        vm["main"]()


# ---------------------------------------------------------------------------
# Executables: save, load, validation
# ---------------------------------------------------------------------------


def _constants_module():
    x = V("x", tensor((3,)))
    c = ir.Constant(np.array([1.5, np.nan, -np.inf], "float32"))
    s, out, blk = alloc("out", [3])
    u = V("u", UNIT)
    main = func([x], [*blk, B(u, ir.Call(ir.GlobalVar("vadd"), [x, c, out]))],
                ir.Tuple([out, ir.PrimValue(tir.FloatImm(0.1, "float64")), ir.StringImm("hi")]))
    return module(main=main, vadd=vector_add_kernel())


def test_save_load_round_trip(tmp_path):
    exe = codegen(_constants_module())
    path = tmp_path / "model.pvm"
    exe.save(path)
    loaded = Executable.load(path)
    assert loaded.as_text() == exe.as_text()
    assert set(loaded.prim_funcs) == {"vadd"}
    assert phasec.structural_equal(loaded.prim_funcs["vadd"], exe.prim_funcs["vadd"])
    x = f32(1, 2, 3)
    for e in (exe, loaded):
        out, tenth, hi = VirtualMachine(e, kernels="interp")["main"](x)
        np.testing.assert_array_equal(out, [2.5, np.nan, -np.inf])
        assert tenth == 0.1 and hi == "hi"


def test_load_rejects_garbage(tmp_path):
    bad = tmp_path / "bad.pvm"
    bad.write_bytes(b"not a zip file")
    with pytest.raises(ExecutableFormatError, match="not a phasec executable"):
        Executable.load(bad)
    with pytest.raises(ExecutableFormatError, match="no such file"):
        Executable.load(tmp_path / "missing.pvm")
    other = tmp_path / "other.pvm"
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("executable.json", '{"format": "something-else"}')
    with pytest.raises(ExecutableFormatError, match="something-else"):
        Executable.load(other)


def test_load_rejects_tampered_bytecode(tmp_path):
    path = tmp_path / "model.pvm"
    codegen(_constants_module()).save(path)
    with zipfile.ZipFile(path) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    import json

    doc = json.loads(files["executable.json"])
    doc["functions"][0]["code"][-1] = ["ret", 999]  # register out of range
    files["executable.json"] = json.dumps(doc).encode()
    tampered = tmp_path / "tampered.pvm"
    with zipfile.ZipFile(tampered, "w") as zf:
        for n, data in files.items():
            zf.writestr(n, data)
    with pytest.raises(ExecutableFormatError, match="register 999 out of range"):
        Executable.load(tampered)


def test_executable_validation_of_hand_made_bytecode():
    ok = bc.VMFunction("f", ("x",), 1, (bc.Ret(0),))
    Executable([ok], [], {})
    with pytest.raises(ExecutableFormatError, match="jump target"):
        Executable([bc.VMFunction("f", (), 1, (bc.Goto(5),))], [], {})
    with pytest.raises(ExecutableFormatError, match="unknown kernel 'k'"):
        Executable([bc.VMFunction("f", (), 1, (bc.Call(0, CalleeKind.KERNEL, "k", ()),
                                               bc.Ret(0)))], [], {})
    with pytest.raises(ExecutableFormatError, match="'f' takes 1 arguments, the call passes 0"):
        Executable([bc.VMFunction("f", ("x",), 1, (bc.Call(0, CalleeKind.VM_FUNC, 0, ()),
                                                   bc.Ret(0)))], [], {})


def _rewrite_doc(src, dst, edit):
    """Copy executable ``src`` to ``dst`` with ``edit(doc)`` applied to executable.json."""
    import json

    with zipfile.ZipFile(src) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    doc = json.loads(files["executable.json"])
    edit(doc)
    files["executable.json"] = json.dumps(doc).encode()
    with zipfile.ZipFile(dst, "w") as zf:
        for n, data in files.items():
            zf.writestr(n, data)
    return dst


def test_signature_survives_save_and_load(tmp_path):
    n = tir.Var("n", "int64")
    x, s = V("x", tensor((n, 4))), V("s", ir.ShapeStructInfo([n]))
    t, k = V("t", ir.TupleStructInfo([tensor((n,), "int32"), ir.PrimStructInfo("int64")])), V("k")
    main = func([x, s, t, k], [], x)
    exe = codegen(module(main=main), verify=False)
    assert exe.functions[0].param_sinfo == (
        'R.Tensor((n, 4), dtype="float32")', "R.Shape([n])",
        'R.Tuple(R.Tensor((n,), dtype="int32"), R.Prim("int64"))', None)
    path = tmp_path / "sig.pvm"
    exe.save(path)
    loaded = Executable.load(path)
    for e in (exe, loaded):
        sig = e.signature("main")
        assert [name for name, _ in sig] == ["x", "s", "t", "k"]
        (_, xs), (_, ss), (_, ts), (_, ks) = sig
        dim = xs.shape[0]
        assert isinstance(dim, tir.Var) and dim.name == "n" and dim.dtype == "int64"
        assert xs.shape[1].value == 4 and xs.dtype == "float32"
        assert ss.values[0] is dim and ts.fields[0].shape[0] is dim  # one n for the signature
        assert ks is None
        assert phasec.structural_equal([p.struct_info for p in main.params[:3]],
                                       [xs, ss, ts])
    with pytest.raises(VMError, match="no function 'nope'; it has: main"):
        loaded.signature("nope")


def test_signature_distinct_variables_keep_distinct_names():
    n1, n2 = tir.Var("n", "int64"), tir.Var("n", "int64")
    main = func([V("a", tensor((n1,))), V("b", tensor((n2,)))], [], ir.Tuple([]))
    exe = codegen(module(main=main), verify=False)
    (_, a), (_, b) = exe.signature("main")
    assert a.shape[0] is not b.shape[0]
    assert exe.functions[0].param_sinfo == ('R.Tensor((n,), dtype="float32")',
                                            'R.Tensor((n_1,), dtype="float32")')


def test_executable_format_versions(tmp_path):
    from phasec.backend.vm.executable import FORMAT_VERSION

    path = tmp_path / "model.pvm"
    codegen(straight_line_module()).save(path)
    assert FORMAT_VERSION == 3

    def as_version_1(doc):
        doc["version"] = 1
        for f in doc["functions"]:
            del f["param_sinfo"]

    # version 1 (no signatures) still loads and runs; its signature is unknown
    old = Executable.load(_rewrite_doc(path, tmp_path / "v1.pvm", as_version_1))
    assert old.signature("main") == [("x", None), ("y", None)]
    out = VirtualMachine(old, kernels="interp")["main"](f32(1, 2), f32(3, 4))
    np.testing.assert_array_equal(out, [12, 24])
    # an unknown version is refused with a clear message
    newer = _rewrite_doc(path, tmp_path / "v9.pvm", lambda d: d.update(version=9))
    with pytest.raises(ExecutableFormatError, match=r"version 9 is not supported.*reads "
                                                    r"versions 1, 2, 3.*phasec build"):
        Executable.load(newer)


@pytest.mark.parametrize("edit, message", [
    (lambda f: f.pop("param_sinfo"), "'main' has no param_sinfo"),
    (lambda f: f.update(param_sinfo=["R.Tensor((n,))"]), "one struct info per parameter"),
    (lambda f: f.update(param_sinfo="R.Tensor"), "param_sinfo must be a list"),
    (lambda f: f.update(param_sinfo=[3, None]), "param_sinfo must be a list"),
    (lambda f: f.update(param_sinfo=["R.Tensor((n,), \"nope\")", None]),
     "parameter 'x': bad struct info.*unknown dtype 'nope'"),
    (lambda f: f.update(param_sinfo=["__import__('os').system('false')", None]),
     "parameter 'x': bad struct info.*expected a struct info annotation"),
])
def test_load_rejects_bad_signatures(tmp_path, edit, message):
    path = tmp_path / "model.pvm"
    codegen(straight_line_module()).save(path)
    bad = _rewrite_doc(path, tmp_path / "bad.pvm", lambda d: edit(d["functions"][0]))
    with pytest.raises(ExecutableFormatError, match=message):
        Executable.load(bad)


def test_hand_made_signature_is_validated():
    with pytest.raises(ExecutableFormatError, match="one struct info per parameter"):
        Executable([bc.VMFunction("f", ("x",), 1, (bc.Ret(0),), ())], [], {})
    with pytest.raises(ExecutableFormatError, match="function 'f', parameter 'x': bad struct"):
        Executable([bc.VMFunction("f", ("x",), 1, (bc.Ret(0),), ("R.Tensor((",))], [], {})
    exe = Executable([bc.VMFunction("f", ("x",), 1, (bc.Ret(0),), ("R.Prim(value=k)",))],
                     [], {})
    assert exe.signature("f")[0][1].value.name == "k"


def test_instruction_json_round_trip():
    instrs = [bc.Call(1, CalleeKind.PACKED, "p", (0,)), bc.Ret(1), bc.Goto(-2), bc.If(0, 3),
              bc.LoadConst(2, 0), bc.Match(0, ("tensor", "float32", 1, (("bind", 3),)), "w", "e"),
              bc.MakeShape(1, (("bin", "*", ("reg", 3), ("imm", 2)),)),
              bc.MakePrim(1, ("reg", 3), "int64"), bc.MakeTuple(1, (0, 2)), bc.GetItem(1, 0, 1),
              bc.MakeClosure(1, 0, (2,)), bc.Move(1, 0), bc.Kill(1, 0)]
    for ins in instrs:
        assert bc.instruction_from_json(ins.to_json()) == ins
        assert str(ins)
    with pytest.raises(ValueError):
        bc.instruction_from_json(["nope"])


# ---------------------------------------------------------------------------
# A build-phase module written in TVMScript
# ---------------------------------------------------------------------------

SCRIPT = '''
@I.ir_module
class Module:
    I.module_attrs({"phase": "build"})

    @T.prim_func(private=True)
    def add(a: T.handle, b: T.handle, c: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        C = T.match_buffer(c, (n,), "float32")
        for i in range(n):
            C[i] = A[i] + B[i]

    @R.function(pure=False, private=True)
    def lifted(x: R.Tensor(("n",), "float32"), c: R.Tensor(("n",), "float32")) -> R.Tensor(("n",), "float32"):
        n = T.int64()
        st: R.Object = R.vm.alloc_storage(R.shape([n * 4]), runtime_device_index=0, dtype="uint8")
        out: R.Tensor((n,), "float32") = R.vm.alloc_tensor(st, R.prim_value(0), R.shape([n]), dtype="float32")
        _ = cls.add(x, c, out)
        return out

    @R.function(pure=False)
    def fact(k: R.Tensor((), "int64")) -> R.Tensor((), "int64"):
        c: R.Tensor((), "bool") = R.call_packed("test.vm.le1", k, sinfo_args=R.Tensor((), "bool"))
        if c:
            r: R.Tensor((), "int64") = k
        else:
            m: R.Tensor((), "int64") = R.call_packed("test.vm.sub1", k, sinfo_args=R.Tensor((), "int64"))
            rec: R.Tensor((), "int64") = cls.fact(m)
            r: R.Tensor((), "int64") = R.call_packed("test.vm.mul", k, rec, sinfo_args=R.Tensor((), "int64"))
        return r

    @R.function(pure=False)
    def main(x: R.Tensor(("b",), "float32"), k: R.Tensor((), "int64")):
        b = T.int64()
        clo = R.make_closure(cls.lifted, (x,))
        y: R.Tensor((b,), "float32") = R.invoke_closure(clo, (x,), sinfo_args=R.Tensor((b,), "float32"))
        f = cls.fact(k)
        return (y, f)
'''


@pytest.mark.parametrize("kernels", ["interp", "llvm"])
def test_tvmscript_module_through_vm_and_interpreter(packed_funcs, kernels, tmp_path):
    packed_funcs("test.vm.le1", lambda k: np.asarray(k <= 1))
    packed_funcs("test.vm.sub1", lambda k: k - 1)
    packed_funcs("test.vm.mul", lambda a, b: a * b)
    mod = phasec.parse(SCRIPT)
    exe = codegen(mod)
    exe.save(tmp_path / "m.pvm")
    for e in (exe, Executable.load(tmp_path / "m.pvm")):
        vm = VirtualMachine(e, kernels=kernels)
        for x in (f32(1, 2), f32(1, 2, 3, 4)):
            y, f = vm["main"](x, np.int64(5))
            np.testing.assert_array_equal(y, 2 * x)
            assert int(f) == 120
    y, f = interpret(mod, f32(1, 2), np.int64(6))
    np.testing.assert_array_equal(y, [2, 4])
    assert int(f) == 720


# ---------------------------------------------------------------------------
# Straight-line functions compiled to Python; allocation counters
# ---------------------------------------------------------------------------


def _raise(message):
    def kernel(*args):
        raise RuntimeError(message)
    return kernel


def _add_into(a, b, out):
    out[...] = a + b


def _pc_of_kernel_call(exe, func_name, kernel):
    code = exe.functions[exe.func_index[func_name]].code
    return next(pc for pc, ins in enumerate(code)
                if isinstance(ins, bc.Call) and ins.callee == kernel)


@pytest.mark.parametrize("failing", ["vadd", "vmul"])
def test_errors_in_compiled_straight_line_code_name_function_and_instruction(failing):
    exe = codegen(straight_line_module())
    kernels = {"vadd": _add_into, "vmul": lambda a, b, o: o.__setitem__(..., a * b)}
    kernels[failing] = _raise(f"{failing} exploded")
    vm = VirtualMachine(exe, kernels=kernels)
    assert vm._funcs_compiled == ["main"]        # no dispatch loop for main
    pc = _pc_of_kernel_call(exe, "main", failing)
    with pytest.raises(VMError) as info:
        vm["main"](f32(1, 2), f32(3, 4))
    message = str(info.value)
    assert message.startswith(f"RuntimeError: {failing} exploded (in main, instruction {pc}: "
                              f"call r")
    assert f"= kernel {failing}(" in message
    assert isinstance(info.value.__cause__, RuntimeError)
    # The dispatch loop reports the very same location.
    loop_vm = VirtualMachine(exe, kernels=kernels)
    loop_vm._funcs[exe.func_index["main"]].compiled = None
    with pytest.raises(VMError) as loop_info:
        loop_vm["main"](f32(1, 2), f32(3, 4))
    assert str(loop_info.value) == message
    # and the VM still works after an error
    kernels[failing] = _add_into if failing == "vadd" else (
        lambda a, b, o: o.__setitem__(..., a * b))
    vm = VirtualMachine(exe, kernels=kernels)
    np.testing.assert_array_equal(vm["main"](f32(1, 2), f32(3, 4)), [12, 24])


def test_errors_in_builtins_of_compiled_code_are_located():
    n = tir.Var("n", "int64")
    x = V("x", tensor((n,)))
    s, t = V("s", OBJ), V("t", tensor((n,)))
    # storage of 8 bytes, tensor of n floats: fits only for n <= 2
    main = func([x], [B(s, op("vm.alloc_storage", ir.ShapeExpr([8]), runtime_device_index=0,
                             dtype="uint8")),
                      B(t, op("vm.alloc_tensor", s, ir.PrimValue(0), ir.ShapeExpr([n]),
                              dtype="float32"))], t)
    vm = VirtualMachine(codegen(module(main=main)), kernels="interp")
    assert vm._funcs_compiled == ["main"]
    assert vm["main"](f32(1, 2)).shape == (2,)
    with pytest.raises(VMError, match=r"12 bytes at offset 0 does not fit in storage of 8 bytes "
                                      r"\(in main, instruction \d+: call r\d+ = builtin "
                                      r"vm.alloc_tensor\("):
        vm["main"](f32(1, 2, 3))


def test_errors_in_a_compiled_closure_called_from_python_name_the_closure(packed_funcs):
    packed_funcs("test.vm.call_with", lambda f, x: f(x))
    n = tir.Var("n", "int64")
    x, cap = V("x", tensor((n,))), V("c", tensor((n,)))
    s, out, blk = alloc("out", [n])
    u = V("u", UNIT)
    lifted = func([x, cap], [*blk, B(u, ir.Call(ir.GlobalVar("vadd"), [x, cap, out]))], out)
    a = V("a", tensor((2,)))
    clo, r = V("clo", OBJ), V("r", tensor((2,)))
    main = func([a], [B(clo, op("make_closure", ir.GlobalVar("lifted"), ir.Tuple([a]))),
                      B(r, packed("test.vm.call_with", clo, a, sinfo=tensor((2,))))], r)
    exe = codegen(module(main=main, lifted=lifted, vadd=vector_add_kernel()))
    vm = VirtualMachine(exe, kernels={"vadd": _raise("inner")})
    assert "lifted" in vm._funcs_compiled and "main" not in vm._funcs_compiled
    pc = _pc_of_kernel_call(exe, "lifted", "vadd")
    with pytest.raises(VMError, match=rf"RuntimeError: inner \(in lifted, instruction {pc}: "
                                      r"call r\d+ = kernel vadd\("):
        vm["main"](f32(1, 2))


def _specialized_allocations(vm, name="main"):
    """Names of the builtin callables of a decoded function (the constant-shape
    allocations are closures made once, at decode time)."""
    code = vm._funcs[vm.exe.func_index[name]].code
    return [getattr(ins[2], "__name__", "") for ins in code if ins[0] == 2]  # _BUILTIN


def test_stats_count_constant_shape_allocations_after_reset_stats():
    vm = VirtualMachine(codegen(_two_buffers_module(kill_first=True)), kernels="interp")
    # static shapes: both allocations take the specialized path
    assert _specialized_allocations(vm).count("alloc_tensor") == 2
    x = np.ones(256, "float32")
    vm["main"](x)
    assert vm.stats["tensor_allocs"] == 2 and vm.stats["storage_allocs"] == 2
    for _ in range(3):
        vm.reset_stats()  # replaces the counters: the specialized closures must see the new ones
        out = vm["main"](x)
        np.testing.assert_array_equal(out, x * x)
        assert vm.stats["tensor_allocs"] == 2
        assert vm.stats["storage_allocs"] == 2 and vm.stats["bytes_allocated"] == 2048
        assert vm.stats["peak_bytes"] == 1024
        del out
    vm.reset_stats()
    vm["main"](x)
    vm["main"](x)
    assert vm.stats["tensor_allocs"] == 4 and vm.stats["storage_allocs"] == 4


@pytest.mark.parametrize("kernels", ["interp", "llvm"])
def test_allocations_with_symbolic_shapes(kernels):
    exe = codegen(straight_line_module())
    vm = VirtualMachine(exe, kernels=kernels)
    # sizes computed at run time: the generic builtins
    assert "alloc_tensor" not in _specialized_allocations(vm)
    kept = vm["main"](f32(1, 2, 3), f32(1, 1, 1))          # n = 3: two 12-byte storages
    np.testing.assert_array_equal(kept, [2, 3, 4])
    assert vm.stats == {"storage_allocs": 2, "tensor_allocs": 2, "bytes_allocated": 24,
                        "live_bytes": 12, "peak_bytes": 24}
    vm.reset_stats()                                        # the kept result stays live
    assert vm.stats == {"storage_allocs": 0, "tensor_allocs": 0, "bytes_allocated": 0,
                        "live_bytes": 12, "peak_bytes": 12}
    x = np.arange(7, dtype="float32")
    out = vm["main"](x, np.full(7, 2, "float32"))           # n = 7: two 28-byte storages
    np.testing.assert_array_equal(out, (x + 2) * 2)
    assert out.shape == (7,) and out.dtype == np.float32
    assert vm.stats["storage_allocs"] == 2 and vm.stats["tensor_allocs"] == 2
    assert vm.stats["bytes_allocated"] == 56 and vm.stats["peak_bytes"] == 12 + 56
    assert vm.stats["live_bytes"] == 12 + 28                # the first storage was killed
    del out, kept
    assert vm.stats["live_bytes"] == 0
    # n = 0: empty tensors, empty storages
    empty = vm["main"](f32(), f32())
    assert empty.shape == (0,) and vm.stats["storage_allocs"] == 4


# ---------------------------------------------------------------------------
# Arming for Ctrl-C: once per call, skipped for short calls of constant shapes
# ---------------------------------------------------------------------------

_STATIC_MLP = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), "float32"), w: R.Tensor((8, 8), "float32")):
        y = R.nn.relu(R.matmul(x, w))
        return y
"""

_SYMBOLIC_MLP = _STATIC_MLP.replace('R.Tensor((4, 8), "float32")', 'R.Tensor(("n", 8), "float32")')


def _count_wakeup_fd_calls(monkeypatch):
    import signal as _signal

    calls = []
    real = _signal.set_wakeup_fd

    def counting(*a, **k):
        calls.append(a[0])
        return real(*a, **k)
    monkeypatch.setattr(_signal, "set_wakeup_fd", counting)
    return calls


def test_short_calls_of_constant_shapes_run_unarmed(monkeypatch):
    import phasec.backend.vm.vm as vm_module

    mod = phasec.parse(_STATIC_MLP)
    x, w = np.ones((4, 8), np.float32), np.full((8, 8), 0.5, np.float32)
    main = VirtualMachine(phasec.build(mod))["main"]
    calls = _count_wakeup_fd_calls(monkeypatch)
    first = main(x, w)
    assert len(calls) == 2  # armed: installed, then restored
    for _ in range(3):
        np.testing.assert_array_equal(main(x, w), first)
    assert len(calls) == 2  # the same short work: not armed again
    np.testing.assert_allclose(first, np.maximum(x @ w, 0))
    # a call that took longer than the limit is armed the next time
    monkeypatch.setattr(vm_module, "SHORT_CALL_SECONDS", 0.0)
    main(x, w)
    main(x, w)
    assert len(calls) == 4


def test_calls_with_symbolic_shapes_are_always_armed(monkeypatch):
    mod = phasec.parse(_SYMBOLIC_MLP)
    w = np.full((8, 8), 0.5, np.float32)
    main = VirtualMachine(phasec.build(mod))["main"]
    calls = _count_wakeup_fd_calls(monkeypatch)
    for n in (1, 4, 2):
        x = np.ones((n, 8), np.float32)
        np.testing.assert_allclose(main(x, w), np.maximum(x @ w, 0))
    assert len(calls) == 6  # every call: its size can change


def test_short_call_leaves_interrupt_state_as_it_was():
    from phasec.backend import interrupt

    assert not interrupt._is_armed
    with interrupt.short_call():
        assert interrupt._is_armed  # kernels inside do not arm one by one
    assert not interrupt._is_armed
    with interrupt.armed():
        with interrupt.short_call():
            assert interrupt._is_armed
        assert interrupt._is_armed  # nested: the outer arming stays
    assert not interrupt._is_armed


# ---------------------------------------------------------------------------
# Storages of constant size are reused between calls when nothing holds them
# ---------------------------------------------------------------------------

def test_storage_is_reused_only_when_nothing_refers_to_it():
    vm = VirtualMachine(codegen(_two_buffers_module(kill_first=True)), kernels="interp")
    x = np.arange(256, dtype="float32")
    out = vm["main"](x)
    address = out.ctypes.data
    kept = vm["main"](x + 1)  # `out` is still held: a new storage for this result
    assert kept.ctypes.data != address
    np.testing.assert_array_equal(out, x * x)  # not overwritten by the second call
    np.testing.assert_array_equal(kept, (x + 1) * (x + 1))
    assert vm.stats["live_bytes"] == 2048  # both results
    del out
    assert vm.stats["live_bytes"] == 1024
    view = kept[::2]  # a view of a result holds its storage too
    del kept
    assert vm.stats["live_bytes"] == 1024
    again = vm["main"](x + 2)
    np.testing.assert_array_equal(view, ((x + 1) * (x + 1))[::2])
    del view, again
    assert vm.stats["live_bytes"] == 0
    first = vm["main"](x).ctypes.data  # dropped at once: the next call reuses it
    assert vm["main"](x).ctypes.data == first


def test_pooled_storages_under_concurrent_callers():
    import threading

    vm = VirtualMachine(codegen(_two_buffers_module(kill_first=True)), kernels="interp")
    errors = []

    def call(seed):
        rng = np.random.default_rng(seed)
        for _ in range(30):
            x = rng.standard_normal(256).astype("float32")
            out = vm["main"](x)
            if not np.array_equal(out, x * x):
                errors.append(seed)

    threads = [threading.Thread(target=call, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert vm.stats["live_bytes"] == 0

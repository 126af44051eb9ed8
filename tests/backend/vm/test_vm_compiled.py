"""Straight-line functions the VM compiles to Python (Ifs included): their
errors name the function and the instruction; and arming for Ctrl-C, once
per call and skipped for a short call whose shapes were short last time
(with Ifs, not when they once took longer)."""

import numpy as np
import pytest

import phasec
from phasec import ir
from phasec.backend.vm import VirtualMachine, codegen
from phasec.backend.vm import bytecode as bc
from phasec.errors import VMError
from phasec.ir import tir

from helpers.vm_build import (
    OBJ, UNIT, B, V, alloc, f32, func, module, op, packed, straight_line_module, tensor,
    vector_add_kernel,
)


# ---------------------------------------------------------------------------
# Straight-line functions compiled to Python
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


def test_shapes_of_the_parameters_dimensions_are_computed_once_per_binding_and_located():
    n, m = tir.Var("n", "int64"), tir.Var("m", "int64")
    x, y = V("x", tensor((n,))), V("y", tensor((m,)))
    s, t = V("s", OBJ), V("t", tensor((tir.BinaryOp("//", n, m),)))
    main = func([x, y], [B(s, op("vm.alloc_storage", ir.ShapeExpr([n * 4]), runtime_device_index=0,
                                dtype="uint8")),
                         B(t, op("vm.alloc_tensor", s, ir.PrimValue(0),
                                 ir.ShapeExpr([tir.BinaryOp("//", n, m)]), dtype="float32"))], t)
    exe = codegen(module(main=main))
    vm = VirtualMachine(exe, kernels="interp")
    assert vm._funcs_compiled == ["main"]
    for rows, cols in [(8, 2), (9, 4), (8, 2), (3, 5), (7, 1)]:
        assert vm["main"](f32(*range(rows)), f32(*range(cols))).shape == (rows // cols,)
    make_shape = next(pc for pc, ins in enumerate(exe.functions[0].code)
                      if isinstance(ins, bc.MakeShape) and "//" in str(ins))
    with pytest.raises(VMError) as info:
        vm["main"](f32(1, 2), f32())
    assert str(info.value).startswith("integer division by zero in (r")
    assert f"(in main, instruction {make_shape}: make_shape r" in str(info.value)
    loop_vm = VirtualMachine(exe, kernels="interp")  # the dispatch loop says the same
    loop_vm._funcs[0].compiled = None
    with pytest.raises(VMError) as loop_info:
        loop_vm["main"](f32(1, 2), f32())
    assert str(loop_info.value) == str(info.value)


_BINDING_ONLY = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32")):
        n = T.int64()
        r = R.arange(R.prim_value(0), R.prim_value(n), R.prim_value(1), dtype="float32")
        s = R.cumsum(R.exp(r), axis=0)
        return R.add(x, s)
"""


class _Counting:
    """A compiled kernel whose calls are counted."""

    def __init__(self, kernel, calls, name):
        self.kernel, self.calls, self.name = kernel, calls, name
        self.written_arguments = kernel.written_arguments

    def __call__(self, *args):
        self.calls.append(self.name)
        self.kernel(*args)


def test_kernels_computed_from_the_binding_alone_run_once_per_binding(monkeypatch):
    import phasec.backend.vm.straight as straight

    exe = phasec.build(phasec.parse(_BINDING_ONLY))
    calls = []
    kernels = {k: _Counting(v, calls, k) for k, v in exe.kernels("llvm").items()}
    main = VirtualMachine(exe, kernels=kernels)["main"]
    sizes = [3, 5, 3, 0, 5, 1, 3]
    outs = []
    for n in sizes:
        x = np.arange(n, dtype=np.float32)
        outs.append(main(x))
        np.testing.assert_allclose(outs[-1], x + np.cumsum(np.exp(np.arange(n, dtype=np.float32))),
                                   rtol=1e-6)
    # arange/exp and cumsum read nothing but n: once per distinct n; the add every call
    assert calls.count("fused_add") == len(sizes)
    assert calls.count("fused_cumsum") == calls.count("fused_arange_exp") == len(set(sizes))
    outs[0][...] = -1  # a result the caller changes is theirs alone
    np.testing.assert_allclose(main(np.zeros(3, np.float32)), np.cumsum(np.exp(np.arange(3.0))),
                               rtol=1e-6)
    # outputs larger than the limit are computed every call
    monkeypatch.setattr(straight, "MEMO_BYTES", 8)
    calls.clear()
    main = VirtualMachine(exe, kernels=kernels)["main"]
    for n in (1, 1, 5, 5):
        main(np.zeros(n, np.float32))
    assert calls.count("fused_arange_exp") == 3  # n = 1 kept (4 bytes), n = 5 not (20)


_BINDING_RESULT = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32")):
        n = T.int64()
        r = R.arange(R.prim_value(0), R.prim_value(n), R.prim_value(1), dtype="float32")
        e = R.exp(r)
        return (R.add(x, e), e)
"""


def test_folded_kernels_are_skipped_and_their_results_never_shared_with_the_caller():
    """After the first call of a binding, a kernel computed from the binding
    alone is skipped (with its allocation) and its kept output read in place
    when only kernels read it; one returned to the caller is copied into a
    fresh result every call, which the caller may change freely."""
    from phasec.backend.vm import straight

    exe = phasec.build(phasec.parse(_BINDING_RESULT))
    calls = []
    kernels = {k: _Counting(v, calls, k) for k, v in exe.kernels("llvm").items()}
    vm = VirtualMachine(exe, kernels=kernels)
    main = vm["main"]
    for n in (4, 4, 4):
        x = np.ones(n, np.float32)
        total, e = main(x)
        want = np.exp(np.arange(n, dtype=np.float32))
        np.testing.assert_allclose(total, x + want, rtol=1e-6)
        np.testing.assert_allclose(e, want, rtol=1e-6)
        assert e.flags.writeable
        e[...] = -1  # the caller's own array
    assert calls.count("fused_add") == 3 and calls.count("fused_arange_exp") == 1
    # kept outputs only kernels read: after the first call of a binding, the
    # kernels and their allocations are skipped
    vm = VirtualMachine(exe := phasec.build(phasec.parse(_BINDING_ONLY)))
    allocs = []
    for n in (5, 5, 5, 2, 2):
        vm.reset_stats()
        x = np.ones(n, np.float32)
        np.testing.assert_allclose(vm["main"](x), x + np.cumsum(np.exp(np.arange(n))), rtol=1e-6)
        allocs.append(vm.stats["tensor_allocs"])
    assert allocs[1] == allocs[2] == allocs[4] < allocs[0] == allocs[3]
    # a kept output is read-only: a kernel writing it would fail, not change it
    kept: dict = {}
    out = np.zeros(4, np.float32)
    straight._memoized(kept, (4,), lambda o: o.fill(2.0), (out,), (out,))
    (frozen,) = kept[(4,)]
    assert (frozen == 2.0).all() and not frozen.flags.writeable


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


# ---------------------------------------------------------------------------
# Arming for Ctrl-C: once per call, skipped for short calls of shapes seen short
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
    # every call short whatever the machine's load (the limit is wall time)
    monkeypatch.setattr(vm_module, "SHORT_CALL_SECONDS", 60.0)
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


def test_symbolic_shapes_run_unarmed_only_at_sizes_seen_short(monkeypatch):
    import phasec.backend.vm.vm as vm_module

    mod = phasec.parse(_SYMBOLIC_MLP)
    w = np.full((8, 8), 0.5, np.float32)
    main = VirtualMachine(phasec.build(mod))["main"]
    calls = _count_wakeup_fd_calls(monkeypatch)
    # every call short whatever the machine's load (the limit is wall time)
    monkeypatch.setattr(vm_module, "SHORT_CALL_SECONDS", 60.0)

    def run(n):
        x = np.arange(n * 8, dtype=np.float32).reshape(n, 8)
        np.testing.assert_allclose(main(x, w), np.maximum(x @ w, 0))
    for n in (1, 4, 2):
        run(n)
    assert len(calls) == 6  # each size's first call: its work is not known yet
    for n in (4, 1, 2, 4):
        run(n)
    assert len(calls) == 6  # sizes that were short: not armed again
    run(3)
    assert len(calls) == 8  # a new size is armed
    monkeypatch.setattr(vm_module, "SHORT_CALL_SECONDS", 0.0)
    run(4)  # unarmed (short last time), but now judged long
    run(4)
    assert len(calls) == 10


def test_short_call_leaves_interrupt_state_as_it_was():
    from phasec.backend import interrupt

    assert not interrupt._is_armed
    assert interrupt.claim_short()
    assert interrupt._is_armed  # kernels inside do not arm one by one
    interrupt.release_short()
    assert not interrupt._is_armed
    with interrupt.armed():
        assert not interrupt.claim_short()  # nested: the outer arming stays
        assert interrupt._is_armed
    assert not interrupt._is_armed


def test_short_calls_are_claimed_only_on_the_main_thread_and_outermost():
    import threading

    from phasec.backend import interrupt

    claimed: list[bool] = []
    worker = threading.Thread(target=lambda: claimed.append(interrupt.claim_short()))
    worker.start()
    worker.join()
    assert claimed == [False] and not interrupt._is_armed  # another thread: untouched
    assert interrupt.claim_short()
    assert not interrupt.claim_short()  # nested: the outer claim stays
    interrupt.release_short()
    assert not interrupt._is_armed


def test_inputs_are_made_contiguous_and_keyed_by_shape_in_one_pass():
    from phasec.backend.vm.vm import _inputs_and_work_key

    strided = np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2]
    scalar = np.float32(2.5)
    inputs, key = _inputs_and_work_key((strided, scalar, 3, 1.5, True))
    assert inputs[0].flags.c_contiguous and np.array_equal(inputs[0], strided)
    assert type(inputs[1]) is np.ndarray and inputs[1].shape == () and inputs[1] == 2.5
    assert inputs[2:] == (3, 1.5, True)
    assert key == ((4, 3), (), 3, 1.5, True)
    # an argument of another kind (a tuple, an object): the work is not judged
    assert _inputs_and_work_key((strided, (1, 2)))[1] is None
    # a contiguous array is passed as it is, not copied
    dense = np.ones((2, 2), np.float32)
    assert _inputs_and_work_key((dense,))[0][0] is dense


def test_a_non_contiguous_input_gives_the_same_result_as_its_copy():
    mod = phasec.parse(_STATIC_MLP)
    x = np.arange(64, dtype=np.float32).reshape(4, 16)[:, ::2] / 10
    w = np.full((8, 8), 0.5, np.float32)
    main = VirtualMachine(phasec.build(mod))["main"]
    np.testing.assert_allclose(main(x, w), np.maximum(np.ascontiguousarray(x) @ w, 0),
                               rtol=1e-6)


# ---------------------------------------------------------------------------
# Functions with Ifs: compiled too, the branches as Python's
# ---------------------------------------------------------------------------

_NESTED_IFS = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32"), a: R.Tensor((), "bool"), b: R.Tensor((), "bool")):
        if a:
            if b:
                y = R.add(x, x)
            else:
                y = R.multiply(x, x)
            z = R.add(y, R.const(1, "float32"))
        else:
            z = R.subtract(x, R.const(1, "float32"))
        w = R.multiply(z, R.const(2, "float32"))
        return w
"""


def _nested_ifs_want(x, a, b):
    return 2 * ((x + x if b else x * x) + 1 if a else x - 1)


def test_a_function_with_nested_ifs_is_compiled_and_takes_each_path():
    exe = phasec.build(phasec.parse(_NESTED_IFS))
    vm = VirtualMachine(exe)
    assert vm._funcs_compiled == ["main"]
    loop = VirtualMachine(exe)
    loop._funcs[exe.func_index["main"]].compiled = None
    x = np.array([0.5, -2, 3, 7], np.float32)
    for a in (True, False, True):
        for b in (False, True):
            args = (x, np.array(a), np.array(b))
            want = _nested_ifs_want(x, a, b)
            np.testing.assert_array_equal(vm["main"](*args), want)
            np.testing.assert_array_equal(loop["main"](*args), want)


def test_an_error_inside_a_branch_names_its_instruction():
    exe = phasec.build(phasec.parse(_NESTED_IFS))
    kernels = dict(exe.kernels("llvm"))
    (name,) = [k for k in kernels if "subtract" in k]
    kernels[name] = _raise("the else branch failed")
    vm = VirtualMachine(exe, kernels=kernels)
    assert vm._funcs_compiled == ["main"]
    x = np.ones(4, np.float32)
    np.testing.assert_array_equal(vm["main"](x, np.array(True), np.array(False)),
                                  _nested_ifs_want(x, True, False))
    with pytest.raises(VMError) as info:
        vm["main"](x, np.array(False), np.array(False))
    pc = _pc_of_kernel_call(exe, "main", name)
    assert str(info.value).startswith(f"RuntimeError: the else branch failed (in main, "
                                      f"instruction {pc}: call r")
    loop = VirtualMachine(exe, kernels=kernels)
    loop._funcs[exe.func_index["main"]].compiled = None
    with pytest.raises(VMError) as loop_info:
        loop["main"](x, np.array(False), np.array(False))
    assert str(loop_info.value) == str(info.value)


def test_shapes_whose_data_once_took_a_long_path_stay_armed(monkeypatch):
    """The same shapes, another branch: a call of a function with Ifs that
    took longer than the limit keeps its shapes armed from then on, where
    straight-line code's next short call would make them short again."""
    import phasec.backend.vm.vm as vm_module

    main = VirtualMachine(phasec.build(phasec.parse(_NESTED_IFS)))["main"]
    calls = _count_wakeup_fd_calls(monkeypatch)
    x, yes, no = np.ones(4, np.float32), np.array(True), np.array(False)
    monkeypatch.setattr(vm_module, "SHORT_CALL_SECONDS", 60.0)
    main(x, yes, yes)
    main(x, yes, yes)
    assert len(calls) == 2  # short: the second call unarmed
    monkeypatch.setattr(vm_module, "SHORT_CALL_SECONDS", 0.0)
    main(x, no, no)  # (unarmed: short last time) judged long
    monkeypatch.setattr(vm_module, "SHORT_CALL_SECONDS", 60.0)
    for _ in range(3):
        main(x, yes, yes)
    assert len(calls) == 2 + 2 * 3  # armed every time since


@pytest.mark.parametrize("structured", [True, False])
def test_only_the_jumps_of_structured_ifs_are_compiled(structured):
    """Hand-made bytecode: ``r3 = y; if a: r3 = x``, then a goto over one
    move. As the else-goto of an if/else (the If's false target just after
    it) it compiles; after an If without else (the If's false path reaches
    the goto, which skips the move on both paths) it is no If's else, and
    the function runs on the dispatch loop: compiled as an else-block, the
    skipped move would run on the false path."""
    from phasec.backend.vm.executable import Executable

    false_target = 4 if structured else 3  # just past the goto, or onto it
    code = (bc.Move(3, 2), bc.If(0, false_target - 1), bc.Move(3, 1), bc.Goto(2),
            bc.Move(3, 0), bc.Ret(3))
    exe = Executable([bc.VMFunction("main", ("a", "x", "y"), 4, code)], [], {})
    vm = VirtualMachine(exe, kernels={})
    assert vm._funcs_compiled == (["main"] if structured else [])
    a, x, y = np.bool_(False), np.float32(1), np.float32(2)
    assert vm["main"](np.bool_(True), x, y) == x
    # structured: the false path takes the else-block (r3 = a); else it skips it
    assert vm["main"](a, x, y) == (a if structured else y)

"""Proper tail calls: a Relax call whose result its caller returns unchanged
runs in the caller's frame, on the VM and in the reference interpreter, so
recursion in tail position (what an ONNX Loop becomes: see
tests/frontend/test_onnx_loop_tail_calls.py) needs constant stack and memory
and never meets ``max_call_depth``; other recursion still does, with a
message that says the limit and how to raise it.

Results are checked against closed forms (sums of integers); the tail-call
analysis of bytecode against hand-made instruction sequences."""

import numpy as np
import pytest

import phasec
from phasec.backend.vm import Executable, VirtualMachine
from phasec.backend.vm import bytecode as bc
from phasec.backend.vm.bytecode import CalleeKind
from phasec.errors import VMError
from phasec.interp import InterpError
from phasec.interp import run as interpret

_TENSOR = 'R.Tensor((), dtype="int64")'
_VEC = 'R.Tensor((4,), dtype="float32")'

SCRIPT = f'''
@I.ir_module
class Recursion:
    @R.function
    def count_prim(n_: R.Prim(value="n"), acc_: R.Prim(value="a")) -> R.Prim("int64"):
        n = T.int64()
        a = T.int64()
        done: R.Prim("bool") = R.prim_value(n <= T.int64(0))
        if done:
            r: R.Prim("int64") = acc_
        else:
            m: R.Prim("int64") = R.prim_value(n - T.int64(1))
            s: R.Prim("int64") = R.prim_value(a + n)
            r: R.Prim("int64") = cls.count_prim(m, s)
        return r

    @R.function
    def count(n: {_TENSOR}, acc: {_TENSOR}) -> {_TENSOR}:
        done: R.Tensor((), dtype="bool") = R.less_equal(n, R.const(0, "int64"))
        if done:
            r: {_TENSOR} = acc
        else:
            m: {_TENSOR} = R.subtract(n, R.const(1, "int64"))
            a: {_TENSOR} = R.add(acc, n)
            r: {_TENSOR} = cls.count(m, a)
        return r

    @R.function
    def depth(n: {_TENSOR}) -> {_TENSOR}:
        done: R.Tensor((), dtype="bool") = R.less_equal(n, R.const(0, "int64"))
        if done:
            r: {_TENSOR} = n
        else:
            m: {_TENSOR} = R.subtract(n, R.const(1, "int64"))
            d: {_TENSOR} = cls.depth(m)
            r: {_TENSOR} = R.add(d, R.const(1, "int64"))
        return r

    @R.function
    def is_even(n: {_TENSOR}) -> R.Tensor((), dtype="bool"):
        zero: R.Tensor((), dtype="bool") = R.equal(n, R.const(0, "int64"))
        if zero:
            r: R.Tensor((), dtype="bool") = R.const(True, "bool")
        else:
            m: {_TENSOR} = R.subtract(n, R.const(1, "int64"))
            r: R.Tensor((), dtype="bool") = cls.is_odd(m)
        return r

    @R.function
    def is_odd(n: {_TENSOR}) -> R.Tensor((), dtype="bool"):
        zero: R.Tensor((), dtype="bool") = R.equal(n, R.const(0, "int64"))
        if zero:
            r: R.Tensor((), dtype="bool") = R.const(False, "bool")
        else:
            m: {_TENSOR} = R.subtract(n, R.const(1, "int64"))
            r: R.Tensor((), dtype="bool") = cls.is_even(m)
        return r

    @R.function
    def repeat_add(x: {_VEC}, k: {_TENSOR}) -> {_VEC}:
        @R.function
        def repeat(i: {_TENSOR}, acc: {_VEC}) -> {_VEC}:
            done: R.Tensor((), dtype="bool") = R.less_equal(i, R.const(0, "int64"))
            if done:
                res: {_VEC} = acc
            else:
                j: {_TENSOR} = R.subtract(i, R.const(1, "int64"))
                nxt: {_VEC} = R.add(acc, x)
                res: {_VEC} = repeat(j, nxt)
            return res

        y: {_VEC} = repeat(k, x)
        return y

    @R.function
    def checked(n: {_TENSOR}, acc: {_TENSOR}) -> {_TENSOR}:
        done: R.Tensor((), dtype="bool") = R.less_equal(n, R.const(0, "int64"))
        if done:
            r: {_TENSOR} = R.call_pure_packed("test.tail.check", acc,
                                              sinfo_args=R.Tensor((), dtype="int64"))
        else:
            m: {_TENSOR} = R.subtract(n, R.const(1, "int64"))
            a: {_TENSOR} = R.add(acc, n)
            r: {_TENSOR} = cls.checked(m, a)
        return r
'''


@pytest.fixture(scope="module")
def program():
    """The module and its executable (built once: LLVM kernels)."""
    mod = phasec.parse(SCRIPT)
    return mod, phasec.build(mod)


def _i64(v):
    return np.array(v, np.int64)


def test_tail_recursion_300000_deep_on_the_vm_and_the_interpreter(program):
    # (max_call_depth 10: no tail call takes a frame)
    mod, exe = program
    n = 300_000
    expected = n * (n + 1) // 2
    assert int(VirtualMachine(exe, max_call_depth=10)["count_prim"](n, 0)) == expected
    assert int(interpret(mod, n, 0, entry="count_prim", max_call_depth=10)) == expected


def test_tail_recursion_on_tensors_through_kernels(program):
    # what the pipeline makes of a tensor recursion: allocations, kernels and
    # kills around the call, the call in an If's branch
    mod, exe = program
    n = 5000
    vm = VirtualMachine(exe, max_call_depth=10)
    assert int(vm["count"](_i64(n), _i64(7))) == 7 + n * (n + 1) // 2
    assert int(interpret(mod, _i64(n), _i64(7), entry="count", max_call_depth=10)) \
        == 7 + n * (n + 1) // 2


def test_mutual_tail_recursion(program):
    mod, exe = program
    vm = VirtualMachine(exe, max_call_depth=10)
    for n in (0, 1, 4001, 6000):
        assert bool(vm["is_even"](_i64(n))) == (n % 2 == 0)
        assert bool(interpret(mod, _i64(n), entry="is_odd", max_call_depth=10)) == (n % 2 == 1)


def test_closure_call_in_tail_position(program):
    # a nested recursive function capturing x: lifted, called through a closure
    mod, exe = program
    x = np.array([1, -2, 0.5, 3], np.float32)
    k = 3000
    got = VirtualMachine(exe, max_call_depth=10)["repeat_add"](x, _i64(k))
    np.testing.assert_array_equal(got, (k + 1) * x)
    ref = interpret(mod, x, _i64(k), entry="repeat_add", max_call_depth=10)
    np.testing.assert_array_equal(ref, (k + 1) * x)


def test_tail_calls_survive_save_and_load(program, tmp_path):
    # decided when the VM decodes bytecode: nothing in the file changes
    _, exe = program
    exe.save(tmp_path / "r.pvm")
    vm = VirtualMachine(Executable.load(tmp_path / "r.pvm"), max_call_depth=10)
    assert int(vm["count_prim"](20_000, 5)) == 5 + 20_000 * 20_001 // 2


def test_non_tail_recursion_deeper_than_the_limit_is_a_clear_error(program):
    mod, exe = program
    assert int(VirtualMachine(exe, max_call_depth=300)["depth"](_i64(250))) == 250
    with pytest.raises(VMError, match="call depth exceeded 300 calling 'depth'") as err:
        VirtualMachine(exe, max_call_depth=300)["depth"](_i64(1000))
    assert "VirtualMachine(..., max_call_depth=N)" in str(err.value)
    assert int(interpret(mod, _i64(250), entry="depth", max_call_depth=300)) == 250
    with pytest.raises(InterpError, match="call depth exceeded 300 calling 'depth'") as err:
        interpret(mod, _i64(1000), entry="depth", max_call_depth=300)
    assert "Interpreter(..., max_call_depth=N)" in str(err.value)


def test_an_error_in_a_tail_called_function_names_it(program, packed_funcs):
    def check(acc):
        if int(acc) > 100:
            raise ValueError(f"sum {int(acc)} is too large")
        return acc
    packed_funcs("test.tail.check", check)
    mod, exe = program
    vm = VirtualMachine(exe)
    assert int(vm["checked"](_i64(10), _i64(0))) == 55
    with pytest.raises(VMError, match=r"sum 210 is too large.*in checked\b.*test\.tail\.check"):
        vm["checked"](_i64(20), _i64(0))
    with pytest.raises(InterpError, match=r"function 'checked'.*sum 210 is too large"):
        interpret(mod, _i64(20), _i64(0), entry="checked")


# ---------------------------------------------------------------------------
# Which calls are tail calls (bytecode.is_tail_call)
# ---------------------------------------------------------------------------

def _call(dst=1, kind=CalleeKind.VM_FUNC, callee=0):
    return bc.Call(dst, kind, callee, (0,))


@pytest.mark.parametrize("code, tail", [
    ([_call(), bc.Ret(1)], True),
    # an If's branch: move to the join register, jump over the other branch, kills
    ([_call(), bc.Move(2, 1), bc.Goto(3), bc.Move(2, 0), bc.Goto(1), bc.Kill(3, 4),
      bc.Ret(2)], True),
    ([_call(kind=CalleeKind.CLOSURE, callee=5), bc.Move(2, 1), bc.Ret(2)], True),
    ([_call(), bc.Ret(0)], False),  # returns another value
    ([_call(), bc.Move(1, 0), bc.Ret(1)], False),  # the result overwritten
    ([_call(), bc.Kill(2, 1), bc.Ret(1)], False),  # the result dropped
    ([_call(), bc.Move(2, 1), bc.Kill(3, 2), bc.Ret(2)], False),
    ([_call(), bc.GetItem(2, 1, 0), bc.Ret(2)], False),  # more work after the call
    ([_call(), bc.Match(1, ("any",), "r", "any"), bc.Ret(1)], False),  # a check after it
    ([_call(), bc.Goto(0)], False),  # never returns
    ([_call()], False),  # falls off the end
    ([_call(kind=CalleeKind.PACKED, callee="p"), bc.Ret(1)], False),  # not a Relax call
    ([_call(kind=CalleeKind.KERNEL, callee="k"), bc.Ret(1)], False),
])
def test_is_tail_call(code, tail):
    assert bc.is_tail_call(code, 0) is tail


def test_disassembly_marks_tail_calls(program):
    _, exe = program
    text = exe.as_text()
    marked = [line for line in text.splitlines() if line.endswith("# tail call")]
    assert any("func count(" in line for line in marked)
    assert any("func is_odd(" in line for line in marked)
    assert any("= closure r" in line for line in marked)  # repeat_add's lifted loop
    assert not any("func depth(" in line for line in marked)
    assert any("func depth(" in line for line in text.splitlines())

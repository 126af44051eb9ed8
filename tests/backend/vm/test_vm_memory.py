"""The VM's memory: bytes live and at peak, allocation counters of
constant and symbolic shapes, and storages reused between calls only when
nothing holds them, concurrent callers included."""

import numpy as np
import pytest

from phasec import ir
from phasec.backend.vm import VirtualMachine, codegen
from phasec.errors import VMError

from helpers.vm_build import (
    OBJ, UNIT, B, V, alloc, f32, func, module, op, straight_line_module, tensor,
    vector_add_kernel, vector_mul_kernel,
)


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
# Allocation counters
# ---------------------------------------------------------------------------


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
    # shapes computed at run time: one specialized allocation for any shape
    assert _specialized_allocations(vm).count("alloc_symbolic_tensor") == 2
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
# Storages are reused between calls when nothing holds them
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("kernels", ["interp", "llvm"])
def test_symbolic_storage_is_reused_up_to_the_largest_size(kernels):
    vm = VirtualMachine(codegen(straight_line_module()), kernels=kernels)

    def run(n):
        x, y = np.arange(n, dtype="float32"), np.full(n, 3, "float32")
        return vm["main"](x, y), (x + y) * y

    big, expected_big = run(9)
    address = big.ctypes.data
    small, expected_small = run(4)  # `big` is still held: a new storage
    assert small.ctypes.data != address
    np.testing.assert_array_equal(big, expected_big)  # not overwritten
    np.testing.assert_array_equal(small, expected_small)
    del big, small
    first = run(9)[0].ctypes.data  # dropped at once: smaller calls reuse its storage
    for n in (9, 5, 0, 1):
        out, expected = run(n)
        assert out.ctypes.data == first
        np.testing.assert_array_equal(out, expected)
        assert out.shape == (n,)
        del out
    out, expected = run(12)  # larger than any before: a new, larger storage
    np.testing.assert_array_equal(out, expected)
    del out
    assert vm.stats["live_bytes"] == 0


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


def _concurrent_errors(vm, expected, calls, threads=4):
    """The seeds of the threads (``threads`` of them, started together, each
    calling ``vm["main"]`` ``calls`` times on random inputs) that got a
    result other than ``expected(x)``."""
    import threading

    errors = []
    start = threading.Barrier(threads)

    def call(seed):
        rng = np.random.default_rng(seed)
        start.wait()
        for _ in range(calls):
            x = rng.standard_normal(256).astype("float32")
            if not np.array_equal(vm["main"](x), expected(x)):
                errors.append(seed)

    running = [threading.Thread(target=call, args=(s,)) for s in range(threads)]
    for t in running:
        t.start()
    for t in running:
        t.join()
    return errors


def test_pooled_storages_under_concurrent_callers():
    vm = VirtualMachine(codegen(_two_buffers_module(kill_first=True)), kernels="interp")
    assert not _concurrent_errors(vm, lambda x: x * x, 30)
    assert vm.stats["live_bytes"] == 0


# ---------------------------------------------------------------------------
# Tensor views only kernels see are kept with their storage
# ---------------------------------------------------------------------------


def _chain_module():
    """t0 = x + x, an intermediate only kernels read; returns t1 = t0 * x."""
    x = V("x", tensor((256,)))
    s0, t0, b0 = alloc("t0", [256])
    s1, t1, b1 = alloc("t1", [256])
    c0, c1 = V("c0", UNIT), V("c1", UNIT)
    main = func([x], [*b0, B(c0, ir.Call(ir.GlobalVar("vadd"), [x, x, t0])),
                      *b1, B(c1, ir.Call(ir.GlobalVar("vmul"), [t0, x, t1])),
                      B(V("k0", UNIT), op("vm.kill_object", t0)),
                      B(V("k1", UNIT), op("vm.kill_object", s0))], t1)
    return module(main=main, vadd=vector_add_kernel(), vmul=vector_mul_kernel())


def _kept_views(other_than=()):
    """The tensor views kept in the VM's storages (but those of ``other_than``)."""
    import gc

    from phasec.backend.vm.memory import _VMStorage
    gc.collect()
    return [v for s in gc.get_objects() if type(s) is _VMStorage for v in s.views.values()
            if not any(v is o for o in other_than)]


@pytest.mark.parametrize("kernels", ["interp", "llvm"])
def test_an_intermediate_keeps_its_view_and_results_stay_right(kernels):
    earlier = _kept_views()  # (other tests' machines)
    vm = VirtualMachine(codegen(_chain_module()), kernels=kernels)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(256).astype("float32") for _ in range(4)]
    held = vm["main"](xs[0])  # held while the next calls run: they need a new result storage
    outs = [vm["main"](x) for x in xs[1:]]
    for x, out in zip(xs, [held, *outs]):
        np.testing.assert_array_equal(out, (x + x) * x)
    kept = _kept_views(earlier)
    assert len(kept) == 1 and kept[0].shape == (256,)  # t0's view, not any result's
    assert all(out is not kept[0] and not np.shares_memory(out, kept[0]) for out in [held, *outs])
    assert vm.stats["tensor_allocs"] == 8
    del kept  # (holding t0's view holds its storage)
    # every result is held: at the last call the four results and t0 were live
    assert vm.stats["peak_bytes"] == 5 * 1024 and vm.stats["live_bytes"] == 4 * 1024
    del held, outs, out
    assert vm.stats["live_bytes"] == 0


@pytest.mark.parametrize("kernels", ["interp", "llvm"])
def test_a_result_its_user_reshaped_and_froze_is_never_handed_out_again(kernels):
    vm = VirtualMachine(codegen(_chain_module()), kernels=kernels)
    x = np.arange(256, dtype="float32")
    out = vm["main"](x)
    out.shape = (16, 16)
    out.flags.writeable = False
    del out  # its storage is free again: the next call reuses it with a new view
    again = vm["main"](x + 1)
    assert again.shape == (256,) and again.flags.writeable
    np.testing.assert_array_equal(again, (x + 1 + x + 1) * (x + 1))


# ---------------------------------------------------------------------------
# A straight-line call takes its kept views at once (VMMemory.claimer)
# ---------------------------------------------------------------------------


def _counting_pool(monkeypatch):
    """Count the calls of the pooled-storage allocation (one per storage an
    instruction allocates on its own)."""
    from phasec.backend.vm.memory import VMMemory
    calls = []
    one_by_one = VMMemory._pooled_storage

    def counted(self, cell, nbytes=None):
        calls.append(cell[1])
        return one_by_one(self, cell, nbytes)
    monkeypatch.setattr(VMMemory, "_pooled_storage", counted)
    return calls


@pytest.mark.parametrize("kernels", ["interp", "llvm"])
def test_a_call_takes_its_free_storages_and_views_at_once(monkeypatch, kernels):
    calls = _counting_pool(monkeypatch)
    vm = VirtualMachine(codegen(_chain_module()), kernels=kernels)
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(256).astype("float32") for _ in range(4)]
    out = vm["main"](xs[0])
    assert calls == [1024, 1024]  # the first call: both storages one by one
    for x in xs[1:]:
        calls.clear()
        out = vm["main"](x)
        np.testing.assert_array_equal(out, (x + x) * x)
        # t0's storage and view were taken at once; the result's storage
        # (its caller may keep it) still by its instruction
        assert calls == [1024]
    # counted as one by one: two storages and two tensors a call
    stats = vm.stats
    assert (stats["storage_allocs"], stats["tensor_allocs"], stats["bytes_allocated"]) == (
        8, 8, 8 * 1024)
    del out
    assert vm.stats["live_bytes"] == 0
    # (``stats`` marks the free storages free: the next call takes them one
    # by one again, and the one after at once)
    calls.clear()
    vm["main"](xs[0])
    vm["main"](xs[0])
    assert calls == [1024, 1024, 1024]


@pytest.mark.parametrize("kernels", ["interp", "llvm"])
def test_concurrent_calls_never_share_an_intermediate(kernels):
    """A call that finds the storages taken (another thread's call holds
    them) allocates its own: every result right, whatever the interleaving."""
    vm = VirtualMachine(codegen(_chain_module()), kernels=kernels)
    assert not _concurrent_errors(vm, lambda x: (x + x) * x, 40 if kernels == "llvm" else 10)
    assert vm.stats["live_bytes"] == 0


def test_an_error_in_a_call_that_took_its_storages_at_once_is_located():
    """The second call (its intermediate's storage and view taken at once)
    names the failing instruction as the first would."""
    from phasec.backend.vm import bytecode as bc
    exe = codegen(_chain_module())
    state = {"fail": False}

    def vmul(a, b, out):
        if state["fail"]:
            raise RuntimeError("vmul exploded")
        out[...] = a * b

    vm = VirtualMachine(exe, kernels={"vadd": lambda a, b, o: o.__setitem__(..., a + b),
                                      "vmul": vmul})
    x = np.arange(256, dtype="float32")
    np.testing.assert_array_equal(vm["main"](x), (x + x) * x)
    state["fail"] = True
    code = exe.functions[exe.func_index["main"]].code
    pc = next(pc for pc, ins in enumerate(code) if isinstance(ins, bc.Call) and ins.callee == "vmul")
    with pytest.raises(VMError, match=rf"vmul exploded \(in main, instruction {pc}: call r"):
        vm["main"](x)
    state["fail"] = False
    np.testing.assert_array_equal(vm["main"](x + 1), (x + 1 + x + 1) * (x + 1))

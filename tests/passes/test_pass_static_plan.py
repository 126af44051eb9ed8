"""StaticPlanBlockMemory: storage reused along chains and across dtypes,
best fit, live and escaping tensors kept apart, If branches, symbolic
shapes, the peak memory on the VM; idempotent and declared."""

from __future__ import annotations

import numpy as np
import pytest

import phasec
from phasec.backend.vm import VirtualMachine, codegen
from phasec.ir import Call, Op, Phase, tir
from phasec.transform import get_pass

from phasec.passes.static_plan_block_memory import (
    STORAGE_BYTES_ATTR, TENSOR_BYTES_ATTR, PlanStats, plan_stats,
)

from helpers.lowering import (
    CHAIN, RNG, add_kernel, alloc_binding, assert_same_results, bindings, calls_of, inc_kernel,
    lowered, lowering_module, op_names, rand, run_pass,
)


# ---------------------------------------------------------------------------
# StaticPlanBlockMemory
# ---------------------------------------------------------------------------

def storage_of(func, var_name):
    value = alloc_binding(func, var_name)
    assert value.op.name == "relax.memory.alloc_tensor", f"{var_name} was not planned"
    return value.args[0]


def storage_sizes(func):
    return {b.var: b.value.args[0].values[0].value
            for b in calls_of(func, "relax.memory.alloc_storage")}


def test_static_plan_reuses_storage_along_a_chain():
    mod = lowering_module(CHAIN, kernels=[inc_kernel("inc", 16)])
    out = run_pass("StaticPlanBlockMemory", mod)
    main = out["main"]
    sizes = storage_sizes(main)
    assert len(sizes) == 2 and set(sizes.values()) == {64}  # ping-pong between two storages
    sa, sb, sc, sd = (storage_of(main, n) for n in "abcd")
    assert sa is sc and sb is sd and sa is not sb
    # e is returned: it escapes and keeps its own allocation
    assert alloc_binding(main, "e").op.name == "relax.builtin.alloc_tensor"
    stats = plan_stats(out)
    assert stats["main"] == PlanStats(tensor_bytes=4 * 64, storage_bytes=2 * 64)
    assert stats["total"].storage_bytes < stats["total"].tensor_bytes
    assert main.attrs[TENSOR_BYTES_ATTR] == 256 and main.attrs[STORAGE_BYTES_ATTR] == 128
    # kills after the last uses
    killed = [b.value.args[0] for b in calls_of(main, "relax.memory.kill_tensor")]
    assert {v.name_hint for v in killed} == set("abcd")
    assert len(calls_of(main, "relax.memory.kill_storage")) == 2
    x = rand(16)
    np.testing.assert_allclose(assert_same_results(mod, out, x), x + 5, rtol=1e-6)


def test_static_plan_lowers_peak_memory_on_the_vm():
    mod = lowering_module(CHAIN, kernels=[inc_kernel("inc", 16)])
    unplanned = get_pass("VMBuiltinLower")(mod)          # StaticPlanBlockMemory skipped
    planned = get_pass("VMBuiltinLower")(get_pass("StaticPlanBlockMemory")(mod))
    x = rand(16)
    peaks = []
    for built in (unplanned, planned):
        vm = VirtualMachine(codegen(built), kernels="interp")
        np.testing.assert_allclose(vm["main"](x), x + 5, rtol=1e-6)
        peaks.append(vm.peak_bytes)
    assert peaks[1] < peaks[0]
    assert peaks[0] == 5 * 64


def test_static_plan_keeps_live_tensors_apart():
    # a stays alive across b and c: nothing may overwrite it
    body = '''
a = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc(x, a)
b = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc(a, b)
c = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc(b, c)
d = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.add(a, c, d)
e = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc(d, e)
return e
'''
    mod = lowering_module(body, kernels=[inc_kernel("inc", 16), add_kernel("add", 16)])
    out = run_pass("StaticPlanBlockMemory", mod)
    main = out["main"]
    sa, sb, sc, sd = (storage_of(main, n) for n in "abcd")
    assert sa is not sb and sa is not sc and sb is not sc
    assert sd is sb  # b died when c was computed
    x = rand(16)
    np.testing.assert_allclose(assert_same_results(mod, out, x), (x + 1) + (x + 3) + 1,
                               rtol=1e-6)


def test_static_plan_best_fit():
    kernels = [inc_kernel("inc64", 64), inc_kernel("inc16", 16), inc_kernel("inc8", 8)]
    params = ('x64: R.Tensor((64,), "float32"), x16: R.Tensor((16,), "float32"), '
              'x8: R.Tensor((8,), "float32")')
    ret = ('R.Tuple(R.Tensor((64,), "float32"), R.Tensor((16,), "float32"), '
           'R.Tensor((8,), "float32"))')
    body = '''
p = R.builtin.alloc_tensor(R.shape([64]), dtype="float32")
_ = cls.inc64(x64, p)
q = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc16(x16, q)
u = R.builtin.alloc_tensor(R.shape([64]), dtype="float32")
v = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc64(p, u)
_ = cls.inc16(q, v)
w = R.builtin.alloc_tensor(R.shape([8]), dtype="float32")
_ = cls.inc8(x8, w)
o = R.builtin.alloc_tensor(R.shape([8]), dtype="float32")
_ = cls.inc8(w, o)
t = (u, v, o)
return t
'''
    mod = lowering_module(body, params=params, ret=ret, kernels=kernels)
    out = run_pass("StaticPlanBlockMemory", mod)
    main = out["main"]
    sizes = storage_sizes(main)
    sp, sq, sw = (storage_of(main, n) for n in "pqw")
    # when w (32 bytes) is allocated, p's 256-byte and q's 64-byte storages are
    # both free: best fit takes q's
    assert sw is sq and sp is not sq
    assert sizes == {sp: 256, sq: 64}
    # u, v, o escape through the returned tuple
    for name in "uvo":
        assert alloc_binding(main, name).op.name == "relax.builtin.alloc_tensor"
    assert plan_stats(out)["main"] == PlanStats(256 + 64 + 32, 256 + 64)
    assert_same_results(mod, out, rand(64), rand(16), rand(8))


def test_static_plan_grows_a_smaller_free_storage():
    kernels = [inc_kernel("inc64", 64), inc_kernel("inc16", 16)]
    params = 'x64: R.Tensor((64,), "float32"), x16: R.Tensor((16,), "float32")'
    ret = 'R.Tuple(R.Tensor((64,), "float32"), R.Tensor((16,), "float32"))'
    body = '''
q = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc16(x16, q)
r = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc16(q, r)
t = R.builtin.alloc_tensor(R.shape([64]), dtype="float32")
_ = cls.inc64(x64, t)
o1 = R.builtin.alloc_tensor(R.shape([64]), dtype="float32")
_ = cls.inc64(t, o1)
o2 = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc16(r, o2)
res = (o1, o2)
return res
'''
    mod = lowering_module(body, params=params, ret=ret, kernels=kernels)
    out = run_pass("StaticPlanBlockMemory", mod)
    main = out["main"]
    sizes = storage_sizes(main)
    sq, sr, st = (storage_of(main, n) for n in "qrt")
    assert st is sq and sizes[sq] == 256  # q's 64-byte storage grown to hold t
    assert sr is not sq and len(sizes) == 2
    assert plan_stats(out)["main"] == PlanStats(64 + 64 + 256, 256 + 64)
    assert_same_results(mod, out, rand(64), rand(16))


def test_static_plan_storage_is_shared_across_dtypes():
    kernels = [inc_kernel("inc_f", 16), inc_kernel("inc_i", 16, "int32")]
    params = 'x: R.Tensor((16,), "float32"), y: R.Tensor((16,), "int32")'
    ret = 'R.Tensor((16,), "int32")'
    body = '''
a = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc_f(x, a)
b = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc_f(a, b)
c = R.builtin.alloc_tensor(R.shape([16]), dtype="int32")
_ = cls.inc_i(y, c)
d = R.builtin.alloc_tensor(R.shape([16]), dtype="int32")
_ = cls.inc_i(c, d)
return d
'''
    mod = lowering_module(body, params=params, ret=ret, kernels=kernels)
    out = run_pass("StaticPlanBlockMemory", mod)
    main = out["main"]
    assert storage_of(main, "c") is storage_of(main, "a")
    y = RNG.integers(0, 9, 16).astype("int32")
    assert_same_results(mod, out, rand(16), y)


@pytest.mark.parametrize("escape", ["return", "tuple", "packed", "relax_call", "branch"])
def test_static_plan_does_not_reuse_escaping_tensors(escape, packed):
    packed("test.lowering.keep", lambda t: t)
    uses = {
        "return": ("return a", 'R.Tensor((16,), "float32")'),
        "tuple": ("t = (a, b)\nreturn t",
                  'R.Tuple(R.Tensor((16,), "float32"), R.Tensor((16,), "float32"))'),
        "packed": ('k = R.call_packed("test.lowering.keep", a, sinfo_args=R.Tensor((16,), "float32"))'
                   "\nreturn b", 'R.Tensor((16,), "float32")'),
        "relax_call": ("k = cls.identity(a)\nreturn b", 'R.Tensor((16,), "float32")'),
        "branch": ("cond = R.const(True, \"bool\")\nif cond:\n    r = a\nelse:\n    r = b\nreturn r",
                   'R.Tensor((16,), "float32")'),
    }
    tail, ret = uses[escape]
    body = '''
a = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc(x, a)
b = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc(x, b)
''' + tail
    extra = '''
    @R.function
    def identity(t: R.Tensor((16,), "float32")) -> R.Tensor((16,), "float32"):
        return t
'''
    mod = lowering_module(body, ret=ret, kernels=[inc_kernel("inc", 16)], extra=extra)
    out = run_pass("StaticPlanBlockMemory", mod)
    assert alloc_binding(out["main"], "a").op.name == "relax.builtin.alloc_tensor"
    assert_same_results(mod, out, rand(16))


def test_static_plan_plans_inside_if_branches():
    body = '''
cond = R.const(True, "bool")
if cond:
    a = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
    _ = cls.inc(x, a)
    b = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
    _ = cls.inc(a, b)
    c = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
    _ = cls.inc(b, c)
    r = c
else:
    r = x
return r
'''
    mod = lowering_module(body, kernels=[inc_kernel("inc", 16)])
    out = run_pass("StaticPlanBlockMemory", mod)
    branch = [b for b in bindings(out["main"]) if isinstance(b.value, phasec.ir.If)][0].value
    inner = [b for block in branch.true_branch.blocks for b in block.bindings]
    names = [b.value.op.name for b in inner if isinstance(b.value, Call)
             and isinstance(b.value.op, Op)]
    assert names.count("relax.memory.alloc_storage") == 2
    assert names.count("relax.builtin.alloc_tensor") == 1  # c is the branch's result
    assert plan_stats(out)["main"] == PlanStats(128, 128)
    assert_same_results(mod, out, rand(16))


def test_static_plan_symbolic_shapes_reuse_equal_sizes_or_grow_to_the_max():
    mod = lowered('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n", 4), "float32"):
        n = T.int64()
        a = R.tanh(x)
        b = R.tanh(a)
        c = R.tanh(b)
        d = R.sum(c, axis=[1])
        e = R.tanh(d)
        f = R.tanh(e)
        g = R.expand_dims(f, axis=[1])
        h = R.add(c, g)
        return h
''')
    main = mod["main"]
    n = main.params[0].struct_info.shape[0]
    # a and b (n*16 bytes) take two storages and c reuses a's (a died when b was
    # computed); d (n*4 bytes) takes b's, grown to hold either size; e takes a
    # new one (d is its input); f reuses d's, already large enough
    assert storage_of(main, "c") is storage_of(main, "a")
    assert storage_of(main, "d") is storage_of(main, "b")
    assert storage_of(main, "e") is not storage_of(main, "d")
    assert storage_of(main, "f") is storage_of(main, "d")
    sizes = {id(b.var): b.value.args[0].values[0]
             for b in calls_of(main, "relax.memory.alloc_storage")}
    for rows in (0, 1, 7):
        at = lambda e: phasec.arith.const_int(phasec.arith.substitute(e, {n: tir.IntImm(rows, "int64")}))  # noqa: E731
        grown = at(sizes[id(storage_of(main, "d"))])
        assert grown == max(16 * rows, 4 * rows)  # the largest tensor it holds
        assert at(sizes[id(storage_of(main, "e"))]) == 4 * rows
    assert alloc_binding(main, "h").op.name == "relax.builtin.alloc_tensor"  # returned
    assert plan_stats(mod)["main"] == PlanStats()  # statistics count constant shapes only
    built = run_pass("VMBuiltinLower", mod)
    vm = VirtualMachine(codegen(built), kernels="interp")
    for rows in (2, 5):
        x = rand(rows, 4)
        c = np.tanh(np.tanh(np.tanh(x)))
        expected = c + np.tanh(np.tanh(c.sum(axis=1)))[:, None]
        np.testing.assert_allclose(vm["main"](x), expected, rtol=1e-5)


def test_static_plan_symbolic_sizes_of_different_parameters_share_a_storage():
    """n and m are both bound on entry: a tensor of m rows reuses the free
    storage of one of n rows (grown to the max of both), as sizes of one
    variable do; results at n < m, n > m and n = 0."""
    mod = lowered('''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), y: R.Tensor(("m", 4), "float32")):
        n = T.int64()
        m = T.int64()
        a = R.tanh(x)
        b = R.sum(a, axis=[0])
        c = R.tanh(y)
        d = R.sum(c, axis=[0])
        return R.add(b, d)
''')
    main = mod["main"]
    assert storage_of(main, "c") is storage_of(main, "a")
    n, m = (p.struct_info.shape[0] for p in main.params)
    (size,) = [b.value.args[0].values[0] for b in calls_of(main, "relax.memory.alloc_storage")
               if b.var is storage_of(main, "a")]
    at = lambda e, rn, rm: phasec.arith.const_int(phasec.arith.substitute(  # noqa: E731
        e, {n: tir.IntImm(rn, "int64"), m: tir.IntImm(rm, "int64")}))
    assert [at(size, 2, 5), at(size, 5, 2), at(size, 0, 3)] == [80, 80, 48]
    vm = VirtualMachine(codegen(run_pass("VMBuiltinLower", mod)), kernels="interp")
    for rows_x, rows_y in ((2, 5), (5, 2), (0, 3)):
        x, y = rand(rows_x, 4), rand(rows_y, 4)
        np.testing.assert_allclose(vm["main"](x, y),
                                   np.tanh(x).sum(axis=0) + np.tanh(y).sum(axis=0), rtol=1e-5)


def test_static_plan_needs_no_kills_in_pure_functions():
    # a pure function (no force_pure) whose allocations only feed call_tir: planned, no kills
    body = '''
a = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
b = R.call_tir(cls.inc, (a,), out_sinfo=R.Tensor((16,), "float32"))
c = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
d = R.call_tir(cls.inc, (c,), out_sinfo=R.Tensor((16,), "float32"))
return d
'''
    pure = lowering_module(body, kernels=[inc_kernel("inc", 16)], attrs="")
    out = run_pass("StaticPlanBlockMemory", pure)
    assert storage_of(out["main"], "a") is storage_of(out["main"], "c")
    assert not any(n.startswith("relax.memory.kill") for n in op_names(out["main"]))


def test_static_plan_is_idempotent_and_declared():
    mod = lowering_module(CHAIN, kernels=[inc_kernel("inc", 16)])
    once = get_pass("StaticPlanBlockMemory")(mod)
    assert get_pass("StaticPlanBlockMemory")(once) is once
    assert get_pass("StaticPlanBlockMemory").info.phases == frozenset({Phase.LOWERING})


def test_static_plan_takes_the_storage_freed_last_among_equal_sizes():
    # when d's kernel has run, a's and b's storage (freed together at c) and
    # c's (freed at d, read by the kernel just run: its lines still cached)
    # are free and of one size: e takes c's
    body = '''
a = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc(x, a)
b = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc(x, b)
c = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.add(a, b, c)
d = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc(c, d)
e = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc(d, e)
f = R.builtin.alloc_tensor(R.shape([16]), dtype="float32")
_ = cls.inc(e, f)
return f
'''
    mod = lowering_module(body, kernels=[inc_kernel("inc", 16), add_kernel("add", 16)])
    out = run_pass("StaticPlanBlockMemory", mod)
    main = out["main"]
    sa, sb, sc, sd, se = (storage_of(main, n) for n in "abcde")
    assert len({id(s) for s in (sa, sb, sc)}) == 3 and sd is sa
    assert se is sc  # not sb, free since c's kernel
    assert storage_sizes(main) == {sa: 64, sb: 64, sc: 64}  # the same bytes either way
    x = rand(16)
    np.testing.assert_array_equal(assert_same_results(mod, out, x), 2 * (x + 1) + 3)


def _interleaved_program(seed: int, steps: int = 40):
    """A random chain of ``inc`` / ``add`` kernels over tensors of 8 and 16
    floats whose operands are drawn from every earlier value (recent ones
    more often), so lifetimes start and end interleaved; returns the body,
    the returned names and a function computing the results with numpy."""
    rng = np.random.default_rng(seed)
    pools: dict[int, list[str]] = {8: ["x8"], 16: ["x16"]}
    lines, steps_ref = [], []
    for k in range(steps):
        n = int(rng.choice([8, 16]))
        pool = pools[n]
        ops = [pool[-min(int(rng.geometric(0.3)), len(pool))] for _ in range(2)]
        name = f"t{k}"
        lines.append(f'{name} = R.builtin.alloc_tensor(R.shape([{n}]), dtype="float32")')
        if rng.random() < 0.5:
            lines.append(f"_ = cls.add{n}({ops[0]}, {ops[1]}, {name})")
            steps_ref.append((name, ops[0], ops[1]))
        else:
            lines.append(f"_ = cls.inc{n}({ops[0]}, {name})")
            steps_ref.append((name, ops[0], None))
        pool.append(name)
    # the last value of each size, and an early one that must survive to the end
    early = pools[16][min(2, len(pools[16]) - 1)]
    results = [pools[8][-1], pools[16][-1], early]
    lines.append(f"res = ({', '.join(results)})")
    lines.append("return res")

    def reference(x8: np.ndarray, x16: np.ndarray) -> list[np.ndarray]:
        env = {"x8": x8, "x16": x16}
        for name, a, b in steps_ref:
            env[name] = env[a] + (env[b] if b is not None else np.float32(1))
        return [env[r] for r in results]
    return "\n".join(lines), results, reference


def _is_op(v, prefix: str) -> bool:
    """``v`` is a call of an operator whose name starts with ``prefix``."""
    return isinstance(v, Call) and isinstance(v.op, Op) and v.op.name.startswith(prefix)


def _live_ranges(func):
    """Each planned tensor's (storage variable, first byte, end byte, binding
    of its allocation, binding of its last reference other than a kill)."""
    bs = bindings(func)
    out = {}
    for i, b in enumerate(bs):
        v = b.value
        if _is_op(v, "relax.memory.alloc_tensor"):
            nbytes = 4 * int(np.prod([int(d.value) for d in v.args[2].values]))
            offset = int(v.args[1].value.value)
            out[b.var] = [v.args[0], offset, offset + nbytes, i, i]
    for i, b in enumerate(bs):
        v = b.value
        if _is_op(v, "relax.memory.kill"):
            continue
        for a in getattr(v, "args", ()) if isinstance(v, Call) else (v,):
            for leaf in getattr(a, "fields", (a,)):
                if leaf in out:
                    out[leaf][4] = max(out[leaf][4], i)
    return list(out.values())


@pytest.mark.parametrize("seed", range(6))
def test_static_plan_never_aliases_two_live_tensors(seed):
    body, results, reference = _interleaved_program(seed)
    kernels = [inc_kernel("inc8", 8), inc_kernel("inc16", 16), add_kernel("add8", 8),
               add_kernel("add16", 16)]
    params = 'x8: R.Tensor((8,), "float32"), x16: R.Tensor((16,), "float32")'
    ret = ('R.Tuple(R.Tensor((8,), "float32"), R.Tensor((16,), "float32"), '
           'R.Tensor((16,), "float32"))')
    mod = lowering_module(body, params=params, ret=ret, kernels=kernels)
    out = run_pass("StaticPlanBlockMemory", mod)
    ranges = _live_ranges(out["main"])
    assert len(ranges) >= 20 and len({id(r[0]) for r in ranges}) < len(ranges)  # reuse happened
    for k, (s1, lo1, hi1, a1, z1) in enumerate(ranges):
        for s2, lo2, hi2, a2, z2 in ranges[k + 1:]:
            if s1 is s2 and lo1 < hi2 and lo2 < hi1:  # the same bytes...
                assert z1 < a2 or z2 < a1, "two live tensors share storage"  # ...never both live
    x8, x16 = rand(8), rand(16)
    expected = reference(x8, x16)
    built = codegen(get_pass("VMBuiltinLower")(out))
    for kernels_kind in ("interp", "llvm"):
        got = VirtualMachine(built, kernels=kernels_kind)["main"](x8, x16)
        for g, e in zip(got, expected):  # float32 sums in the same order: exact
            np.testing.assert_array_equal(np.asarray(g), e)

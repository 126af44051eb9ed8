# pipeline: EliminateCommonSubexpr
# idempotent: yes
# Identical pure calls merge (also into if-branches and dataflow blocks);
# impure calls, calls with other attributes, the two branches of an if, and
# a DataflowVar after its block do not. A dataflow output duplicating a
# DataflowVar becomes a rebinding (the DataflowVar cannot leave the block).
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function(pure=False)
    def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32"), flag: R.Tensor((), "bool")) -> R.Tensor((2, 3), "float32"):
        a = R.add(x, y)
        b = R.add(x, y)
        c = R.multiply(a, b)
        d = R.call_packed("vm.builtin.copy", c, sinfo_args=R.Tensor((2, 3), "float32"))
        e = R.call_packed("vm.builtin.copy", c, sinfo_args=R.Tensor((2, 3), "float32"))
        with R.dataflow():
            lv = R.exp(x)
            gv = R.add(x, y)
            gv2 = R.exp(x)
            lv2 = R.add(lv, gv2)
            R.output(gv, gv2, lv2)
        g = R.exp(x)
        s0 = R.sum(x, axis=[0])
        s1 = R.sum(x, axis=[1])
        if flag:
            h1 = R.add(x, y)
            h2 = R.negative(x)
            h = R.add(h1, h2)
        else:
            k2 = R.negative(x)
            h = R.add(k2, g)
        m = R.negative(x)
        r1 = R.add(d, e)
        r2 = R.add(r1, gv)
        r3 = R.add(r2, lv2)
        r4 = R.add(r3, h)
        r5 = R.add(r4, m)
        r6 = R.add(r5, g)
        return r6
# ---- after ----
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function(pure=False)
    def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32"), flag: R.Tensor((), "bool")) -> R.Tensor((2, 3), "float32"):
        a = R.add(x, y)
        c = R.multiply(a, a)
        d = R.call_packed("vm.builtin.copy", c, sinfo_args=R.Tensor((2, 3), "float32"))
        e = R.call_packed("vm.builtin.copy", c, sinfo_args=R.Tensor((2, 3), "float32"))
        with R.dataflow():
            lv = R.exp(x)
            gv2 = lv
            lv2 = R.add(lv, gv2)
            R.output(gv2, lv2)
        g = R.exp(x)
        s0 = R.sum(x, axis=[0])
        s1 = R.sum(x, axis=[1])
        if flag:
            h2 = R.negative(x)
            h = R.add(a, h2)
        else:
            k2 = R.negative(x)
            h = R.add(k2, g)
        m = R.negative(x)
        r1 = R.add(d, e)
        r2 = R.add(r1, a)
        r3 = R.add(r2, lv2)
        r4 = R.add(r3, h)
        r5 = R.add(r4, m)
        r6 = R.add(r5, g)
        return r6

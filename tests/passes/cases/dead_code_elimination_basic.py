# pipeline: DeadCodeElimination
# idempotent: yes
# Unused pure bindings go (transitively, also inside dataflow blocks and
# branches); unused impure calls, an if with an impure branch and a
# match_cast defining a symbolic variable stay. Private functions nothing
# reaches from an entry point (global_symbol) are removed.
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function(pure=False)
    def main(x: R.Tensor((4,), "float32"), v: R.Tensor(ndim=1, dtype="float32"), flag: R.Tensor((), "bool")) -> R.Tensor((4,), "float32"):
        n = T.int64()
        a = R.add(x, x)
        b = R.exp(a)
        c = R.multiply(b, b)
        d = R.call_packed("vm.builtin.copy", x, sinfo_args=R.Tensor((4,), "float32"))
        with R.dataflow():
            lv = R.negative(a)
            gv = R.sqrt(R.abs(a))
            R.output(gv)
        if flag:
            e = R.add(a, a)
        else:
            e = a
        if flag:
            f0 = R.exp(a)
            f = R.call_packed("vm.builtin.copy", a, sinfo_args=R.Tensor((4,), "float32"))
        else:
            f = a
        m = R.match_cast(x, R.Tensor((4,), "float32"))
        t = R.match_cast(v, R.Tensor((n,), "float32"))
        r = cls.helper(gv)
        return r

    @R.function(private=True)
    def helper(y: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        z = R.add(y, y)
        unused = R.multiply(y, z)
        return z

    @R.function(private=True)
    def unreachable(y: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        z = cls.unreachable2(y)
        return z

    @R.function(private=True)
    def unreachable2(y: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        return y

    @R.function
    def other_entry(y: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        z = cls.helper2(y)
        return z

    @R.function(private=True)
    def helper2(y: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        return y
# ---- after ----
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function(pure=False)
    def main(x: R.Tensor((4,), "float32"), v: R.Tensor(ndim=1, dtype="float32"), flag: R.Tensor((), "bool")) -> R.Tensor((4,), "float32"):
        n = T.int64()
        a = R.add(x, x)
        d = R.call_packed("vm.builtin.copy", x, sinfo_args=R.Tensor((4,), "float32"))
        with R.dataflow():
            lv1 = R.abs(a)
            gv = R.sqrt(lv1)
            R.output(gv)
        if flag:
            f = R.call_packed("vm.builtin.copy", a, sinfo_args=R.Tensor((4,), "float32"))
        else:
            f = a
        t = R.match_cast(v, R.Tensor((n,), "float32"))
        r = cls.helper(gv)
        return r

    @R.function(private=True)
    def helper(y: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        z = R.add(y, y)
        return z

    @R.function
    def other_entry(y: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        z = cls.helper2(y)
        return z

    @R.function(private=True)
    def helper2(y: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        return y

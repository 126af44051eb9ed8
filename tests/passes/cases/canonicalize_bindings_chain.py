# pipeline: CanonicalizeBindings
# idempotent: yes
# Chains of rebindings collapse, a no-op match_cast goes, a refining one
# (to a symbolic shape) stays; uses inside branches see the original.
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(x: R.Tensor((2, 3), "float32"), t: R.Tensor(ndim=2, dtype="float32"), flag: R.Tensor((), "bool")) -> R.Tensor((2, 3), "float32"):
        m = T.int64()
        n = T.int64()
        a = x
        b = a
        c = R.match_cast(b, R.Tensor((2, 3), "float32"))
        d = R.add(c, b)
        u = R.match_cast(t, R.Tensor((m, n), "float32"))
        if flag:
            e = R.multiply(d, a)
        else:
            e = c
        f = e
        return f
# ---- after ----
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(x: R.Tensor((2, 3), "float32"), t: R.Tensor(ndim=2, dtype="float32"), flag: R.Tensor((), "bool")) -> R.Tensor((2, 3), "float32"):
        m = T.int64()
        n = T.int64()
        d = R.add(x, x)
        u = R.match_cast(t, R.Tensor((m, n), "float32"))
        if flag:
            e = R.multiply(d, x)
        else:
            e = x
        return e

# pipeline: LambdaLifting
# A nested function calling an earlier sibling that has captures: it
# captures the sibling's captures too and rebuilds the sibling's closure in
# its lifted body. A nested function defined inside an if-branch is lifted
# from there.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float32"), flag: R.Tensor((), "bool")) -> R.Tensor((3,), "float32"):
        k = R.exp(x)
        @R.function
        def f(a: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
            b = R.multiply(a, k)
            return b
        @R.function
        def g(a: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
            c = f(a)
            d = R.add(c, a)
            return d
        if flag:
            @R.function
            def h(a: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
                e = R.subtract(a, x)
                return e
            r = h(x)
        else:
            r = g(x)
        return r
# ---- after ----
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(x: R.Tensor((3,), "float32"), flag: R.Tensor((), "bool")) -> R.Tensor((3,), "float32"):
        k = R.exp(x)
        f = R.make_closure(cls.main_f, (k,))
        g = R.make_closure(cls.main_g, (k,))
        if flag:
            h = R.make_closure(cls.main_h, (x,))
            r = R.invoke_pure_closure(h, (x,), sinfo_args=R.Tensor((3,), "float32"))
        else:
            r = R.invoke_pure_closure(g, (x,), sinfo_args=R.Tensor((3,), "float32"))
        return r

    @R.function(private=True)
    def main_f(a: R.Tensor((3,), "float32"), k: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        b = R.multiply(a, k)
        return b

    @R.function(private=True)
    def main_g(a: R.Tensor((3,), "float32"), k: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        f = R.make_closure(cls.main_f, (k,))
        c = R.invoke_pure_closure(f, (a,), sinfo_args=R.Tensor((3,), "float32"))
        d = R.add(c, a)
        return d

    @R.function(private=True)
    def main_h(a: R.Tensor((3,), "float32"), x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        e = R.subtract(a, x)
        return e

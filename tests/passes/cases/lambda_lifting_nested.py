# pipeline: LambdaLifting
# A function nested in a nested function: the innermost one captures a
# parameter of main (through its parent, which captures it too) and a local
# of its parent. Lifted names follow the nesting: main_outer_inner.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float32"), w: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        @R.function
        def outer(a: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
            t = R.multiply(a, a)
            @R.function
            def inner(b: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
                u = R.add(b, t)
                v = R.multiply(u, w)
                return v
            r = inner(a)
            r2 = inner(r)
            return r2
        y = outer(x)
        return y
# ---- after ----
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(x: R.Tensor((3,), "float32"), w: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        outer = R.make_closure(cls.main_outer, (w,))
        y = R.invoke_pure_closure(outer, (x,), sinfo_args=R.Tensor((3,), "float32"))
        return y

    @R.function(private=True)
    def main_outer(a: R.Tensor((3,), "float32"), w: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        t = R.multiply(a, a)
        inner = R.make_closure(cls.main_outer_inner, (w, t))
        r = R.invoke_pure_closure(inner, (a,), sinfo_args=R.Tensor((3,), "float32"))
        r2 = R.invoke_pure_closure(inner, (r,), sinfo_args=R.Tensor((3,), "float32"))
        return r2

    @R.function(private=True)
    def main_outer_inner(b: R.Tensor((3,), "float32"), w: R.Tensor((3,), "float32"), t: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        u = R.add(b, t)
        v = R.multiply(u, w)
        return v

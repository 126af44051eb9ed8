# pipeline: LambdaLifting
# A closure capturing several variables (two parameters and a local) takes
# them after its own parameters; a nested function without captures becomes
# a plain private function called directly; `main_helper` is taken, so the
# second one is named main_helper1.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        s = R.multiply(x, y)
        @R.function
        def combine(a: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
            b = R.add(a, x)
            c = R.subtract(b, y)
            d = R.multiply(c, s)
            return d
        @R.function
        def helper(a: R.Tensor((2, 3), "float32"), b: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
            c = R.maximum(a, b)
            return c
        r1 = combine(x)
        r2 = helper(r1, y)
        r3 = combine(r2)
        return r3

    @R.function(private=True)
    def main_helper(a: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        return a
# ---- after ----
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        s = R.multiply(x, y)
        combine = R.make_closure(cls.main_combine, (x, y, s))
        r1 = R.invoke_pure_closure(combine, (x,), sinfo_args=R.Tensor((2, 3), "float32"))
        r2 = cls.main_helper1(r1, y)
        r3 = R.invoke_pure_closure(combine, (r2,), sinfo_args=R.Tensor((2, 3), "float32"))
        return r3

    @R.function(private=True)
    def main_combine(a: R.Tensor((2, 3), "float32"), x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32"), s: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        b = R.add(a, x)
        c = R.subtract(b, y)
        d = R.multiply(c, s)
        return d

    @R.function(private=True)
    def main_helper1(a: R.Tensor((2, 3), "float32"), b: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        c = R.maximum(a, b)
        return c

    @R.function(private=True)
    def main_helper(a: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        return a

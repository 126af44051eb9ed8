# pipeline: LambdaLifting
# results: no
# A nested function calling itself, with a capture: the lifted body makes
# its own closure; without captures, the recursive call is a direct call.
@I.ir_module
class Module:
    @R.function
    def main(n: R.Tensor((), "int64"), step: R.Tensor((), "int64")) -> R.Tensor((), "int64"):
        @R.function
        def count(k: R.Tensor((), "int64"), acc: R.Tensor((), "int64")) -> R.Tensor((), "int64"):
            if R.less_equal(k, R.const(0, "int64")):
                r = acc
            else:
                r = count(R.subtract(k, step), R.add(acc, R.const(1, "int64")))
            return r
        @R.function
        def fact(k: R.Tensor((), "int64")) -> R.Tensor((), "int64"):
            if R.less_equal(k, R.const(1, "int64")):
                r = R.const(1, "int64")
            else:
                r = R.multiply(k, fact(R.subtract(k, R.const(1, "int64"))))
            return r
        c = count(n, R.const(0, "int64"))
        f = fact(c)
        return f
# ---- after ----
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(n: R.Tensor((), "int64"), step: R.Tensor((), "int64")) -> R.Tensor((), "int64"):
        count = R.make_closure(cls.main_count, (step,))
        c = R.invoke_pure_closure(count, (n, R.const(0, "int64")), sinfo_args=R.Tensor((), "int64"))
        f = cls.main_fact(c)
        return f

    @R.function(private=True)
    def main_count(k: R.Tensor((), "int64"), acc: R.Tensor((), "int64"), step: R.Tensor((), "int64")) -> R.Tensor((), "int64"):
        count = R.make_closure(cls.main_count, (step,))
        lv = R.less_equal(k, R.const(0, "int64"))
        if lv:
            r = acc
        else:
            lv1 = R.subtract(k, step)
            lv2 = R.add(acc, R.const(1, "int64"))
            r = R.invoke_pure_closure(count, (lv1, lv2), sinfo_args=R.Tensor((), "int64"))
        return r

    @R.function(private=True)
    def main_fact(k: R.Tensor((), "int64")) -> R.Tensor((), "int64"):
        lv3 = R.less_equal(k, R.const(1, "int64"))
        if lv3:
            r = R.const(1, "int64")
        else:
            lv4 = R.subtract(k, R.const(1, "int64"))
            lv5 = cls.main_fact(lv4)
            r = R.multiply(k, lv5)
        return r

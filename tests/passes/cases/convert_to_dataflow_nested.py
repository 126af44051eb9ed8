# pipeline: ConvertToDataflow{min_size=3}
# idempotent: yes
# Branches and nested functions are converted too; with min_size=3 the
# two-binding run at the top stays as it is.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32"), flag: R.Tensor((), "bool")) -> R.Tensor((4,), "float32"):
        a = R.add(x, x)
        b = R.exp(a)
        if flag:
            c1 = R.multiply(b, b)
            c2 = R.add(c1, x)
            c3 = R.sqrt(R.abs(c2))
            c = c3
        else:
            c = R.negative(b)
        @R.function
        def inner(y: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
            p = R.add(y, c)
            q = R.multiply(p, p)
            r = R.subtract(q, y)
            return r
        s = inner(b)
        return s
# ---- after ----
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32"), flag: R.Tensor((), "bool")) -> R.Tensor((4,), "float32"):
        a = R.add(x, x)
        b = R.exp(a)
        if flag:
            with R.dataflow():
                c1 = R.multiply(b, b)
                c2 = R.add(c1, x)
                lv = R.abs(c2)
                c3 = R.sqrt(lv)
                R.output(c3)
            c = c3
        else:
            c = R.negative(b)
        @R.function
        def inner(y: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
            with R.dataflow():
                p = R.add(y, c)
                q = R.multiply(p, p)
                r = R.subtract(q, y)
                R.output(r)
            return r
        s = inner(b)
        return s

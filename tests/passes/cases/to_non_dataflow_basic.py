# pipeline: ToNonDataflow
# idempotent: yes
# Dataflow blocks become ordinary bindings (merged with their neighbours),
# DataflowVars become Vars, in branches and in every function.
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(x: R.Tensor((4,), "float32"), flag: R.Tensor((), "bool")) -> R.Tensor((4,), "float32"):
        a = R.add(x, x)
        with R.dataflow():
            lv = R.exp(a)
            gv = R.multiply(lv, a)
            R.output(gv)
        if flag:
            with R.dataflow():
                lv1 = R.negative(gv)
                b1 = R.add(lv1, x)
                R.output(b1)
            b = b1
        else:
            b = gv
        c = cls.helper(b)
        return c

    @R.function(private=True)
    def helper(y: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        with R.dataflow():
            lv = R.add(y, y)
            gv = R.sqrt(R.abs(lv))
            R.output(gv)
        return gv
# ---- after ----
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(x: R.Tensor((4,), "float32"), flag: R.Tensor((), "bool")) -> R.Tensor((4,), "float32"):
        a = R.add(x, x)
        lv = R.exp(a)
        gv = R.multiply(lv, a)
        if flag:
            lv1 = R.negative(gv)
            b1 = R.add(lv1, x)
            b = b1
        else:
            b = gv
        c = cls.helper(b)
        return c

    @R.function(private=True)
    def helper(y: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        lv = R.add(y, y)
        lv2 = R.abs(lv)
        gv = R.sqrt(lv2)
        return gv

# pipeline: CanonicalizeBindings
# idempotent: yes
# `gv1 = lv2` in a dataflow block (gv1 an output): the output is defined by
# lv2's binding (a DataflowVar cannot leave its block); a DataflowVar copy of
# an outer variable is replaced by that variable.
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tuple(R.Tensor((4,), "float32"), R.Tensor((4,), "float32")):
        with R.dataflow():
            lv0 = x
            lv1 = R.add(lv0, lv0)
            lv2 = R.exp(lv1)
            gv = lv2
            gv1 = lv2
            gv2 = gv
            R.output(gv1, gv2)
        res = (gv1, gv2)
        return res
# ---- after ----
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tuple(R.Tensor((4,), "float32"), R.Tensor((4,), "float32")):
        with R.dataflow():
            lv1 = R.add(x, x)
            gv1 = R.exp(lv1)
            R.output(gv1)
        res = (gv1, gv1)
        return res

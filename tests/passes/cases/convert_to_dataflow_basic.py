# pipeline: ConvertToDataflow
# idempotent: yes
# Runs of pure bindings become dataflow blocks; the impure packed call, the
# if and the lone pure binding after the if stay outside. Variables used
# after their block (c, e, the if's operand g) are the block's outputs.
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        a = R.add(x, y)
        b = R.multiply(a, x)
        c = R.exp(b)
        d = R.call_packed("vm.builtin.copy", c, sinfo_args=R.Tensor((2, 3), "float32"))
        e = R.add(d, c)
        f = R.sum(e)
        g = R.greater(f, R.const(0.0, "float32"))
        if g:
            h = R.add(e, e)
        else:
            h = R.subtract(e, e)
        k = R.negative(h)
        return k
# ---- after ----
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        with R.dataflow():
            a = R.add(x, y)
            b = R.multiply(a, x)
            c = R.exp(b)
            R.output(c)
        d = R.call_packed("vm.builtin.copy", c, sinfo_args=R.Tensor((2, 3), "float32"))
        with R.dataflow():
            e = R.add(d, c)
            f = R.sum(e)
            g = R.greater(f, R.const(0.0, "float32"))
            R.output(e, g)
        if g:
            h = R.add(e, e)
        else:
            h = R.subtract(e, e)
        k = R.negative(h)
        return k

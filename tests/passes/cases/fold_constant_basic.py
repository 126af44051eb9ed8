# pipeline: FoldConstant{max_elements=4}
# idempotent: yes
# Constant chains fold (through variables and tuple items); calls with a
# non-constant operand, results above max_elements (the broadcast) and
# creation from a shape alone (zeros) do not.
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        c = R.const([1.0, 2.0, 3.0], "float32")
        d = R.add(c, c)
        e = R.multiply(d, R.const(0.5, "float32"))
        i = R.astype(e, "int32")
        j = R.multiply(i, R.const(-2, "int32"))
        parts = R.split(c, indices_or_sections=3)
        p1 = parts[1]
        big = R.broadcast_to(c, R.shape([2, 3]))
        zero = R.zeros(R.shape([3]), "float32")
        z = R.add(x, e)
        w = R.add(z, p1)
        k = R.astype(j, "float32")
        s = R.sum(big, axis=[0])
        r1 = R.add(w, zero)
        r2 = R.add(r1, k)
        r = R.add(r2, s)
        return r
# ---- after ----
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        c = R.const([1.0, 2.0, 3.0], "float32")
        d = R.const([2.0, 4.0, 6.0], "float32")
        e = R.const([1.0, 2.0, 3.0], "float32")
        i = R.const([1, 2, 3], "int32")
        j = R.const([-2, -4, -6], "int32")
        parts = (R.const([1.0], "float32"), R.const([2.0], "float32"), R.const([3.0], "float32"))
        p1 = R.const([2.0], "float32")
        big = R.broadcast_to(c, R.shape([2, 3]))
        zero = R.zeros(R.shape([3]), "float32")
        z = R.add(x, e)
        w = R.add(z, p1)
        k = R.const([-2.0, -4.0, -6.0], "float32")
        s = R.sum(big, axis=[0])
        r1 = R.add(w, zero)
        r2 = R.add(r1, k)
        r = R.add(r2, s)
        return r

# pipeline: BatchTakenMatmuls
# idempotent: yes
# Products of one constant weight by rows taken from one tensor (a
# recurrence exported step by step) become one matmul of the tensor, its rows
# split out where the products were: seq's three steps (rank 3: reshaped to
# one matrix of rows and back), rows' three of four steps; not batched: the
# product by another weight (z1), rows under half of the tensor's (few),
# a weight that is not a constant (wp).
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(seq: R.Tensor((3, 1, 4), "float32"), rows: R.Tensor((4, 4), "float32"), few: R.Tensor((8, 4), "float32"), wp: R.Tensor((4, 2), "float32")) -> R.Tuple(R.Tensor((1, 2), "float32"), R.Tensor((1, 2), "float32"), R.Tensor((1, 2), "float32"), R.Tensor((4, 2), "float32"), R.Tensor((4, 2), "float32")):
        with R.dataflow():
            w = R.const([[0.5, -1.0], [0.25, 2.0], [-0.75, 1.5], [1.0, 0.125]], "float32")
            x0 = R.take(seq, R.const(0, "int64"), axis=0, mode="fast")
            y0 = R.matmul(x0, w)
            x2 = R.take(seq, R.const(2, "int64"), axis=0, mode="fast")
            y2 = R.matmul(x2, w)
            x1 = R.take(seq, R.const(1, "int64"), axis=0, mode="fast")
            y1 = R.add(R.matmul(x1, w), y0)
            r0 = R.take(rows, R.const(0, "int64"), axis=0, mode="fast")
            r3 = R.take(rows, R.const(3, "int64"), axis=0, mode="fast")
            z0 = R.matmul(r0, w)
            z3 = R.matmul(r3, w)
            r1 = R.take(rows, R.const(1, "int64"), axis=0, mode="fast")
            z1 = R.matmul(r1, R.const([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.5, 0.5]], "float32"))
            zs = R.stack((z0, z3, z1, R.matmul(R.take(rows, R.const(2, "int64"), axis=0, mode="fast"), w)), axis=0)
            f0 = R.take(few, R.const(0, "int64"), axis=0, mode="fast")
            f5 = R.take(few, R.const(5, "int64"), axis=0, mode="fast")
            p0 = R.take(rows, R.const(0, "int64"), axis=0, mode="fast")
            p1 = R.take(rows, R.const(1, "int64"), axis=0, mode="fast")
            fs = R.stack((R.matmul(f0, w), R.matmul(f5, w), R.matmul(p0, wp), R.matmul(p1, wp)), axis=0)
            R.output(y0, y1, y2, zs, fs)
        return (y0, y1, y2, zs, fs)
# ---- after ----
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(seq: R.Tensor((3, 1, 4), dtype="float32"), rows: R.Tensor((4, 4), dtype="float32"), few: R.Tensor((8, 4), dtype="float32"), wp: R.Tensor((4, 2), dtype="float32")) -> R.Tuple(R.Tensor((1, 2), dtype="float32"), R.Tensor((1, 2), dtype="float32"), R.Tensor((1, 2), dtype="float32"), R.Tensor((4, 2), dtype="float32"), R.Tensor((4, 2), dtype="float32")):
        with R.dataflow():
            w: R.Tensor((4, 2), dtype="float32") = R.const([[0.5, -1.0], [0.25, 2.0], [-0.75, 1.5], [1.0, 0.125]], "float32")
            x0: R.Tensor((1, 4), dtype="float32") = R.take(seq, R.const(0, "int64"), axis=0, mode="fast")
            y0_steps0: R.Tensor((3, 4), dtype="float32") = R.reshape(seq, R.shape([-1, 4]))
            y0_steps1: R.Tensor((3, 2), dtype="float32") = R.matmul(y0_steps0, w, out_dtype=None)
            y0_steps2: R.Tensor((3, 1, 2), dtype="float32") = R.reshape(y0_steps1, R.shape([3, 1, 2]))
            y0_steps3: R.Tuple(R.Tensor((1, 1, 2), dtype="float32"), R.Tensor((1, 1, 2), dtype="float32"), R.Tensor((1, 1, 2), dtype="float32")) = R.split(y0_steps2, indices_or_sections=3, axis=0)
            y0_steps4: R.Tensor((1, 1, 2), dtype="float32") = y0_steps3[0]
            y0: R.Tensor((1, 2), dtype="float32") = R.squeeze(y0_steps4, axis=(0,))
            x2: R.Tensor((1, 4), dtype="float32") = R.take(seq, R.const(2, "int64"), axis=0, mode="fast")
            y2_steps0: R.Tensor((1, 1, 2), dtype="float32") = y0_steps3[2]
            y2: R.Tensor((1, 2), dtype="float32") = R.squeeze(y2_steps0, axis=(0,))
            x1: R.Tensor((1, 4), dtype="float32") = R.take(seq, R.const(1, "int64"), axis=0, mode="fast")
            lv_steps0: R.Tensor((1, 1, 2), dtype="float32") = y0_steps3[1]
            lv: R.Tensor((1, 2), dtype="float32") = R.squeeze(lv_steps0, axis=(0,))
            y1: R.Tensor((1, 2), dtype="float32") = R.add(lv, y0)
            r0: R.Tensor((4,), dtype="float32") = R.take(rows, R.const(0, "int64"), axis=0, mode="fast")
            r3: R.Tensor((4,), dtype="float32") = R.take(rows, R.const(3, "int64"), axis=0, mode="fast")
            z0_steps0: R.Tensor((4, 2), dtype="float32") = R.matmul(rows, w, out_dtype=None)
            z0_steps1: R.Tuple(R.Tensor((1, 2), dtype="float32"), R.Tensor((1, 2), dtype="float32"), R.Tensor((1, 2), dtype="float32"), R.Tensor((1, 2), dtype="float32")) = R.split(z0_steps0, indices_or_sections=4, axis=0)
            z0_steps2: R.Tensor((1, 2), dtype="float32") = z0_steps1[0]
            z0: R.Tensor((2,), dtype="float32") = R.squeeze(z0_steps2, axis=(0,))
            z3_steps0: R.Tensor((1, 2), dtype="float32") = z0_steps1[3]
            z3: R.Tensor((2,), dtype="float32") = R.squeeze(z3_steps0, axis=(0,))
            r1: R.Tensor((4,), dtype="float32") = R.take(rows, R.const(1, "int64"), axis=0, mode="fast")
            z1: R.Tensor((2,), dtype="float32") = R.matmul(r1, R.const([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.5, 0.5]], "float32"), out_dtype=None)
            lv1: R.Tensor((4,), dtype="float32") = R.take(rows, R.const(2, "int64"), axis=0, mode="fast")
            lv2_steps0: R.Tensor((1, 2), dtype="float32") = z0_steps1[2]
            lv2: R.Tensor((2,), dtype="float32") = R.squeeze(lv2_steps0, axis=(0,))
            zs: R.Tensor((4, 2), dtype="float32") = R.stack((z0, z3, z1, lv2), axis=0)
            f0: R.Tensor((4,), dtype="float32") = R.take(few, R.const(0, "int64"), axis=0, mode="fast")
            f5: R.Tensor((4,), dtype="float32") = R.take(few, R.const(5, "int64"), axis=0, mode="fast")
            p0: R.Tensor((4,), dtype="float32") = R.take(rows, R.const(0, "int64"), axis=0, mode="fast")
            p1: R.Tensor((4,), dtype="float32") = R.take(rows, R.const(1, "int64"), axis=0, mode="fast")
            lv3: R.Tensor((2,), dtype="float32") = R.matmul(f0, w, out_dtype=None)
            lv4: R.Tensor((2,), dtype="float32") = R.matmul(f5, w, out_dtype=None)
            lv5: R.Tensor((2,), dtype="float32") = R.matmul(p0, wp, out_dtype=None)
            lv6: R.Tensor((2,), dtype="float32") = R.matmul(p1, wp, out_dtype=None)
            fs: R.Tensor((4, 2), dtype="float32") = R.stack((lv3, lv4, lv5, lv6), axis=0)
            R.output(y0, y2, y1, zs, fs)
        return (y0, y1, y2, zs, fs)


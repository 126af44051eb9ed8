# pipeline: FuseQDQMatmul
# idempotent: yes
# A dequantize -> matmul -> quantize chain whose float weight is exactly int8
# times a scale (here 2**-7) becomes the integer GEMM (int8 activations
# shifted to uint8, zero points corrected by the weight's column sums) and
# the float requantization; a weight that is not (0.1, 0.2, ...) stays float.
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(x: R.Tensor((2, 3), "int8")) -> R.Tensor((2, 2), "uint8"):
        with R.dataflow():
            d = R.dequantize(x, R.const(0.5, "float32"), R.const(-3, "int8"), axis=-1, out_dtype="float32")
            m = R.matmul(d, R.const([[0.25, -0.5], [0.9921875, 0.75], [-0.9921875, 0.0]], "float32"))
            y = R.quantize(m, R.const(0.125, "float32"), R.const(128, "uint8"), axis=-1, out_dtype="uint8")
            other = R.dequantize(x, R.const(0.5, "float32"), R.const(-3, "int8"), axis=-1, out_dtype="float32")
            float_w = R.matmul(other, R.const([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]], "float32"))
            z = R.quantize(float_w, R.const(0.125, "float32"), R.const(128, "uint8"), axis=-1, out_dtype="uint8")
            r = R.add(y, z)
            R.output(r)
        return r
# ---- after ----
@I.ir_module
class Module:
    I.module_attrs({"phase": "optimization"})

    @R.function
    def main(x: R.Tensor((2, 3), dtype="int8")) -> R.Tensor((2, 2), dtype="uint8"):
        with R.dataflow():
            d: R.Tensor((2, 3), dtype="float32") = R.dequantize(x, R.const(0.5, "float32"), R.const(-3, "int8"), axis=-1, out_dtype="float32")
            m: R.Tensor((2, 2), dtype="float32") = R.matmul(d, R.const([[0.25, -0.5], [0.9921875, 0.75], [-0.9921875, 0.0]], "float32"), out_dtype=None)
            qdq_gemm_1: R.Tensor((2, 3), dtype="int32") = R.astype(x, dtype="int32")
            qdq_gemm_2: R.Tensor((2, 3), dtype="int32") = R.add(qdq_gemm_1, R.const(128, "int32"))
            qdq_gemm_3: R.Tensor((2, 3), dtype="uint8") = R.astype(qdq_gemm_2, dtype="uint8")
            qdq_gemm_4: R.Tensor((2, 2), dtype="int32") = R.matmul(qdq_gemm_3, R.const([[32, -64], [127, 96], [-127, 0]], "int8"), out_dtype="int32")
            qdq_gemm_5: R.Tensor((2, 2), dtype="int32") = R.subtract(qdq_gemm_4, R.const([4000, 4000], "int32"))
            qdq_gemm_6: R.Tensor((2, 2), dtype="float32") = R.astype(qdq_gemm_5, dtype="float32")
            qdq_gemm_7: R.Tensor((2, 2), dtype="float32") = R.multiply(qdq_gemm_6, R.const(0.03125, "float32"))
            y: R.Tensor((2, 2), dtype="uint8") = R.quantize(qdq_gemm_7, R.const(1.0, "float32"), R.const(128, "uint8"), axis=-1, out_dtype="uint8")
            other: R.Tensor((2, 3), dtype="float32") = R.dequantize(x, R.const(0.5, "float32"), R.const(-3, "int8"), axis=-1, out_dtype="float32")
            float_w: R.Tensor((2, 2), dtype="float32") = R.matmul(other, R.const([[0.10000000149011612, 0.20000000298023224], [0.30000001192092896, 0.4000000059604645], [0.5, 0.6000000238418579]], "float32"), out_dtype=None)
            z: R.Tensor((2, 2), dtype="uint8") = R.quantize(float_w, R.const(0.125, "float32"), R.const(128, "uint8"), axis=-1, out_dtype="uint8")
            r: R.Tensor((2, 2), dtype="uint8") = R.add(y, z)
            R.output(r)
        return r


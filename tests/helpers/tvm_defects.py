"""A module that meets TVM 0.27's grouped-query attention defect (its
LegalizeOps pairs query head h with key head h % 2, not h // 2): the
result-validation tests of phasec.tvm localize it to that pass."""

GQA = '''
@I.ir_module
class M:
    @R.function
    def main(q: R.Tensor((1, 3, 4, 2), dtype="float32"), k: R.Tensor((1, 3, 2, 2), dtype="float32"),
             v: R.Tensor((1, 3, 2, 2), dtype="float32")) -> R.Tensor((1, 3, 4, 2), dtype="float32"):
        with R.dataflow():
            o = R.nn.attention(q, k, v)
            R.output(o)
        return o
'''

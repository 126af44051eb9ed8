# An MLP: two 256-wide hidden layers with ReLU, batch 64.
# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class MLP:
    @R.function
    def main(x: R.Tensor((64, 256), dtype="float32"),
             w1: R.Tensor((256, 256), dtype="float32"), b1: R.Tensor((256,), dtype="float32"),
             w2: R.Tensor((256, 256), dtype="float32"), b2: R.Tensor((256,), dtype="float32"),
             w3: R.Tensor((256, 10), dtype="float32"), b3: R.Tensor((10,), dtype="float32")) -> R.Tensor((64, 10), dtype="float32"):
        with R.dataflow():
            h1 = R.nn.relu(R.add(R.matmul(x, w1), b1))
            h2 = R.nn.relu(R.add(R.matmul(h1, w2), b2))
            out = R.add(R.matmul(h2, w3), b3)
            R.output(out)
        return out

# A small CNN: conv2d + relu + max-pool, twice, then a dense layer.
# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class CNN:
    @R.function
    def main(x: R.Tensor((1, 3, 32, 32), dtype="float32"),
             k1: R.Tensor((16, 3, 3, 3), dtype="float32"), c1: R.Tensor((1, 16, 1, 1), dtype="float32"),
             k2: R.Tensor((32, 16, 3, 3), dtype="float32"), c2: R.Tensor((1, 32, 1, 1), dtype="float32"),
             w: R.Tensor((2048, 10), dtype="float32"), b: R.Tensor((10,), dtype="float32")) -> R.Tensor((1, 10), dtype="float32"):
        with R.dataflow():
            y1 = R.nn.relu(R.add(R.nn.conv2d(x, k1, padding=[1, 1, 1, 1]), c1))
            p1 = R.nn.max_pool2d(y1, pool_size=[2, 2], strides=[2, 2])
            y2 = R.nn.relu(R.add(R.nn.conv2d(p1, k2, padding=[1, 1, 1, 1]), c2))
            p2 = R.nn.avg_pool2d(y2, pool_size=[2, 2], strides=[2, 2])
            flat = R.reshape(p2, R.shape([1, 2048]))
            out = R.add(R.matmul(flat, w), b)
            R.output(out)
        return out

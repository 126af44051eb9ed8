# A single-head transformer block: attention and an MLP, each with a residual
# connection and layer_norm. The batch dimension `n` is symbolic.
# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tir as T

@I.ir_module
class TransformerBlock:
    @R.function
    def main(x: R.Tensor(("n", 128, 64), dtype="float32"),
             g1: R.Tensor((64,), dtype="float32"), be1: R.Tensor((64,), dtype="float32"),
             wq: R.Tensor((64, 64), dtype="float32"), wk: R.Tensor((64, 64), dtype="float32"),
             wv: R.Tensor((64, 64), dtype="float32"), wo: R.Tensor((64, 64), dtype="float32"),
             g2: R.Tensor((64,), dtype="float32"), be2: R.Tensor((64,), dtype="float32"),
             w1: R.Tensor((64, 256), dtype="float32"), w2: R.Tensor((256, 64), dtype="float32")) -> R.Tensor(("n", 128, 64), dtype="float32"):
        n = T.int64()
        with R.dataflow():
            h = R.nn.layer_norm(x, g1, be1, axes=[-1], epsilon=1e-05)
            q = R.matmul(h, wq)
            k = R.matmul(h, wk)
            v = R.matmul(h, wv)
            kt = R.permute_dims(k, axes=[0, 2, 1])
            scores = R.multiply(R.matmul(q, kt), R.const(0.125, "float32"))
            attn = R.nn.softmax(scores, axis=-1)
            ctx = R.matmul(attn, v)
            x1 = R.add(x, R.matmul(ctx, wo))
            h2 = R.nn.layer_norm(x1, g2, be2, axes=[-1], epsilon=1e-05)
            ff = R.matmul(R.nn.gelu(R.matmul(h2, w1)), w2)
            out = R.add(x1, ff)
            R.output(out)
        return out

"""relax.nn: the neural-network operators (TVM 0.27 namespace), one module per
family:

* :mod:`.activation` -- relu, gelu, gelu_tanh, silu, leakyrelu, prelu, selu,
  softplus, softmax, log_softmax
* :mod:`.norm` -- layer_norm, rms_norm, batch_norm, group_norm, instance_norm,
  dropout
* :mod:`.attention` -- attention, attention_bias
* :mod:`.loss` -- cross_entropy_with_logits, nll_loss
* :mod:`.pad` -- pad, and the other data movements: batch_flatten, pixel_shuffle
* :mod:`.pad` -- pad, and the other data movements: batch_flatten, pixel_shuffle

The convolutions and the pooling operators are still in
:mod:`phasec.op.nn_conv` and :mod:`phasec.op.nn_pool` (with the Winograd
kernels, :mod:`phasec.op.nn_winograd`).
"""

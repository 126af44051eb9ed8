"""relax.nn: the neural-network operators (TVM 0.27 namespace), one module per
family:

* :mod:`.activation` -- relu, gelu, gelu_tanh, silu, leakyrelu, prelu, selu,
  softplus, softmax, log_softmax
* :mod:`.conv` -- conv1d/2d/3d and their transposes (the kernels are chosen by
  :mod:`phasec.te.schedules`)
* :mod:`.pool` -- max/avg pooling over 1-3 spatial dims, adaptive average pooling
* :mod:`.norm` -- layer_norm, rms_norm, batch_norm, group_norm, instance_norm,
  dropout
* :mod:`.attention` -- attention, attention_bias
* :mod:`.rnn` -- lstm, gru, rnn (ONNX's recurrent layers: a time loop in TIR)
* :mod:`.loss` -- cross_entropy_with_logits, nll_loss
* :mod:`.pad` -- pad, and the other data movements: batch_flatten, pixel_shuffle
"""

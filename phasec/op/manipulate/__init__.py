"""relax.op.manipulate: tensor manipulation (TVM 0.27's ``manipulate.py``, one
module per family here):

* :mod:`.reshape` -- reshape, flatten, permute_dims, expand_dims, squeeze,
  broadcast_to, collapse_sum_like, collapse_sum_to
* :mod:`.join` -- concat, split, stack, meshgrid
* :mod:`.tile` -- tile, repeat, flip, reverse_sequence
* :mod:`.gather_scatter` -- gather_elements, gather_nd, scatter_elements,
  scatter_nd, index_put, index_tensor, slice_scatter, one_hot
* :mod:`.layout_transform` -- layout_transform
"""

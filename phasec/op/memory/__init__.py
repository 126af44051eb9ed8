"""relax.memory: the memory operators (TVM 0.27 namespace), one module per family:

* :mod:`.memory` -- alloc_storage, alloc_tensor, kill_storage, kill_tensor
* :mod:`.view` -- view, ensure_zero_offset
"""

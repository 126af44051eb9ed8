"""relax.image: image operators (TVM 0.27 namespace), one module per family.

* :mod:`.resize` -- ``image.resize2d``, ``image.resize3d``
* :mod:`.onnx_resize` -- ``image.onnx_resize`` (ONNX's Resize over any axes)
* :mod:`.grid` -- ``image.affine_grid``, ``image.grid_sample``
"""

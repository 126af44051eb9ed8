"""relax.image: image operators (TVM 0.27 namespace), one module per family.

* :mod:`.resize` -- ``image.resize2d``, ``image.resize3d``
* :mod:`.grid` -- ``image.affine_grid``, ``image.grid_sample``
"""

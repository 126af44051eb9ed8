"""relax.op.image: image operators (TVM 0.27 namespace)."""

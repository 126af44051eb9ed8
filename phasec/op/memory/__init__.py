"""relax.op.memory: memory operators (TVM 0.27 namespace)."""

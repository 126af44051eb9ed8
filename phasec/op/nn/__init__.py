"""relax.op.nn: neural-network operators (TVM 0.27 namespace), one module per family."""

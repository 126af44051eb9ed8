"""CPU schedules of tensor-expression nests: one module per schedule."""

"""What the interpreter and the VM share: packed functions and value semantics;
seeded random inputs for declared shapes (:mod:`phasec.runtime.random_inputs`)."""

"""What the interpreter and the VM share: packed functions and value semantics."""

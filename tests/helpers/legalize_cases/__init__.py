"""Legalization cases of the operator families, one module per family
(tests/op/test_ops_<family>.py tests the family itself): each holds
``<FAMILY>_LEGALIZE_CASES``, a list of ``(id, make_call)`` that
tests/op/test_legalize.py lowers and runs on the TIR interpreter against the
operator's reference, and, where the random default would not do, the
operands' values (``<FAMILY>_VALUES``: indices in range, arguments in a
function's domain)."""

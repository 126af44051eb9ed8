"""The reference interpreter: runs modules of every phase on numpy arrays.

``phasec.interp.run(mod, *args, entry="main")`` (alias ``evaluate``, also
exported as ``phasec.evaluate``) interprets a module: operators through their
numpy references, PrimFuncs through the exact TIR interpreter
(:mod:`phasec.interp.tir`), packed functions from :mod:`phasec.runtime.packed`. Its
results define what "the same results" means for every pass.
"""

from phasec.interp.relax import (  # noqa: F401
    DEFAULT_MAX_CALL_DEPTH, Closure, InterpError, Interpreter, KernelRunner, Storage, call_prim_func,
    describe_value, eval_prim_expr, evaluate, evaluate_expr, match_struct_info,
    match_struct_infos, run, sinfo_text,
)

__all__ = ["run", "evaluate", "evaluate_expr", "Interpreter", "InterpError", "Closure", "KernelRunner",
           "Storage", "DEFAULT_MAX_CALL_DEPTH", "describe_value", "sinfo_text",
           "eval_prim_expr", "match_struct_info", "match_struct_infos", "call_prim_func"]

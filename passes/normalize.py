"""Normalize: A-normal form with struct info filled in everywhere.

Wraps :func:`phasec.script.builder.normalize_function` for every Relax function
of the module: nested non-leaf operands are bound to fresh variables (named
``lv``, ``lv1``... deterministically, DataflowVars inside dataflow blocks),
if-branches and function bodies become ``SeqExpr``s, and variables and
expressions without struct info get it by inference.

Calls of module functions are inferred from their callees' signatures, so
functions whose signature is not known yet (no return annotation and a body
without struct info) are normalized callees first.

The pass is idempotent, and a module that is already normal is returned as
the very same object.

Normalize declares ``verify_input=False``: verify-each normally checks a
pass's input too, but Normalize's input is exactly the IR that check rejects
(not in A-normal form, struct info missing); its output is verified as usual.
"""

from __future__ import annotations

from phasec.ir import Function, IRModule, Phase
from phasec.script.builder import normalize_function
from phasec.op.infer import context_from_module
from phasec.op.registry import InferContext
from phasec.transform import module_pass, register_pass

from phasec.passes.dead_code_elimination import global_refs

__all__ = ["Normalize", "normalize_module"]


def _order(mod: IRModule) -> list[str]:
    """Relax functions in normalization order: callees with unknown signatures
    before their callers (depth-first post-order), then the others."""
    unknown = {name for name, f in mod.relax_functions() if f.struct_info is None}
    order: list[str] = []
    done: set[str] = set()
    for root in sorted(unknown):
        if root in done:
            continue
        # iterative DFS post-order over calls into functions of unknown signature
        stack = [(root, iter(sorted(global_refs(mod[root]) & unknown)))]
        done.add(root)
        while stack:
            name, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                order.append(name)
            elif child not in done:
                done.add(child)
                stack.append((child, iter(sorted(global_refs(mod[child]) & unknown))))
    order.extend(name for name, _ in mod.relax_functions() if name not in unknown)
    return order


def normalize_module(mod: IRModule) -> IRModule:
    """``mod`` with every Relax function normalized (the same object if all are)."""
    globals_ = dict(context_from_module(mod).globals)
    changed: dict[str, Function] = {}
    for name in _order(mod):
        func = mod[name]
        new = normalize_function(func, InferContext(globals_))
        if new is not func:
            changed[name] = new
            if new.struct_info is not None:
                globals_[name] = new.struct_info
    return mod.update(changed) if changed else mod


@register_pass
@module_pass(opt_level=0, phases=[Phase.INGESTION, Phase.OPTIMIZATION], name="Normalize",
             verify_input=False)
class Normalize:
    """Put every Relax function in A-normal form with struct info everywhere."""

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        return normalize_module(mod)

"""ConvertToDataflow: wrap runs of pure bindings into dataflow blocks.

In every ordinary binding block (function bodies, if-branches, nested
functions) each maximal run of at least ``min_size`` consecutive bindings
that are free of side effects becomes a ``DataflowBlock``. Eligible values:
pure calls (see :func:`phasec.passes.dead_code_elimination.call_is_pure`), tuples,
tuple items, variables and constants, and ``R.match_cast``. Impure calls,
``If`` and nested functions are never moved into a dataflow block: they end
a run.

Inside a new block, a variable used only by later bindings of the same
block becomes a ``DataflowVar``; a variable used after the block (by later
bindings, nested functions, branches or the result) stays an ordinary
``Var``: it is one of the block's outputs. Existing dataflow blocks are left
as they are, and so are functions with a ``Codegen`` or ``Composite``
attribute (their bodies belong to an external backend).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from phasec.ir import (
    Binding, BindingBlock, Call, DataflowBlock, DataflowVar, Expr, ExprMutator, Function, If,
    IRModule, Phase, SeqExpr, Var,
)
from phasec.transform import PassConfigError, module_pass, register_pass
from phasec.transform.info import is_int_at_least

from phasec.passes.dead_code_elimination import call_is_pure, used_vars
from phasec.passes.lambda_lifting import is_byoc_function

__all__ = ["ConvertToDataflow", "binding_is_pure"]

_NOT_MOVABLE = (If, Function, SeqExpr)


def binding_is_pure(binding: Binding, functions: Mapping[str, object]) -> bool:
    """True when ``binding`` may live in a dataflow block."""
    value = binding.value
    if isinstance(value, _NOT_MOVABLE):
        return False
    if type(value) is Call:
        return call_is_pure(value, functions)
    return True


class _Converter(ExprMutator):
    def __init__(self, functions: Mapping[str, object], min_size: int) -> None:
        super().__init__()
        self.functions = functions
        self.min_size = min_size

    def visit_function_(self, func: Function) -> Expr:
        if is_byoc_function(func):
            return func  # an external backend's function (or pattern): left as it is
        return super().visit_function_(func)

    def visit_seq_expr_(self, expr: SeqExpr) -> Expr:
        blocks = [self.visit_binding_block(b) for b in expr.blocks]
        body = self.visit_expr(expr.body)
        new_blocks = self._convert(blocks, body)
        if body is expr.body and len(new_blocks) == len(expr.blocks) and all(
                a is b for a, b in zip(new_blocks, expr.blocks)):
            return expr
        return SeqExpr(new_blocks, body, span=expr.span)

    def _convert(self, blocks: Sequence[BindingBlock], body: Expr) -> list[BindingBlock]:
        if not any(type(b) is not DataflowBlock and len(b.bindings) >= self.min_size
                   for b in blocks):
            return list(blocks)
        # Position of the last use of every variable (the result counts as +inf).
        last_use: dict[Var, int] = {}
        pos = 0
        for block in blocks:
            for b in block.bindings:
                for v in used_vars(b.value):
                    last_use[v] = pos
                pos += 1
        end = pos
        for v in used_vars(body):
            last_use[v] = end

        out: list[BindingBlock] = []
        start = 0  # position of the block's first binding
        for block in blocks:
            n = len(block.bindings)
            if type(block) is DataflowBlock or n < self.min_size:
                out.append(block)
                start += n
                continue
            out.extend(self._split(block, start, last_use))
            start += n
        return out

    def _split(self, block: BindingBlock, start: int,
               last_use: dict[Var, int]) -> list[BindingBlock]:
        """``block`` cut into ordinary blocks and dataflow blocks (runs)."""
        bindings = block.bindings
        eligible = [binding_is_pure(b, self.functions) for b in bindings]
        pieces: list[BindingBlock] = []
        plain: list[Binding] = []
        i = 0
        changed = False
        while i < len(bindings):
            if not eligible[i]:
                plain.append(bindings[i])
                i += 1
                continue
            j = i
            while j < len(bindings) and eligible[j]:
                j += 1
            if j - i < self.min_size:
                plain.extend(bindings[i:j])
                i = j
                continue
            changed = True
            if plain:
                pieces.append(BindingBlock(plain, span=block.span))
                plain = []
            pieces.append(self._dataflow(bindings[i:j], start + j, last_use))
            i = j
        if not changed:
            return [block]
        if plain:
            pieces.append(BindingBlock(plain, span=block.span))
        return pieces

    @staticmethod
    def _dataflow(run: Sequence[Binding], run_end: int,
                  last_use: dict[Var, int]) -> DataflowBlock:
        mutator = ExprMutator()  # substitutes the run's new DataflowVars in later values
        remap = mutator.var_remap
        out: list[Binding] = []
        for b in run:
            value = mutator.visit_expr(b.value) if remap else b.value
            var = b.var
            if type(var) is Var and last_use.get(var, -1) < run_end:
                var = DataflowVar(var.name_hint, var.struct_info, span=var.span)
                remap[b.var] = var
            out.append(b.rebind(value, var))
        return DataflowBlock(out)


@register_pass
@module_pass(opt_level=1, phases=[Phase.INGESTION, Phase.OPTIMIZATION], name="ConvertToDataflow")
class ConvertToDataflow:
    """Wrap runs of at least ``min_size`` pure bindings into dataflow blocks."""

    min_size: int = 2

    def __post_init__(self) -> None:
        if not is_int_at_least(self.min_size, 1):
            raise PassConfigError(f"ConvertToDataflow(min_size=...) must be an int >= 1, "
                                  f"not {self.min_size!r}")

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        converter = _Converter(mod.functions, self.min_size)
        # A function compiled by an external backend keeps its body:
        # _Converter.visit_function_ leaves it alone.
        return mod.map_functions(lambda _, func: converter.visit_expr(func))

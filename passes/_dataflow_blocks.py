"""The dataflow blocks of a Relax function, rewritten one by one: shared by
the passes that rewrite patterns within dataflow blocks (FuseQDQMatmul,
BatchTakenMatmuls)."""

from __future__ import annotations

from collections.abc import Callable

from phasec.ir import DataflowBlock, Function, SeqExpr
from phasec.ir.node import replace

__all__ = ["map_dataflow_blocks"]


def map_dataflow_blocks(func: Function,
                        rewrite: Callable[[DataflowBlock], DataflowBlock]) -> Function:
    """``func`` with each dataflow block of its body replaced by
    ``rewrite(block)``; ``func`` itself when no block changed (or its body
    is not a sequence of blocks)."""
    body = func.body
    if not isinstance(body, SeqExpr):
        return func
    blocks = tuple(rewrite(blk) if isinstance(blk, DataflowBlock) else blk
                   for blk in body.blocks)
    if all(a is b for a, b in zip(blocks, body.blocks)):
        return func
    return replace(func, body=replace(body, blocks=blocks))

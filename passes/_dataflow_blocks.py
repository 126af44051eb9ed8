"""What the passes that rewrite patterns within dataflow blocks share
(FuseQDQMatmul, BatchTakenMatmuls): a function's dataflow blocks rewritten
one by one, and the test of a binding's value against an operator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from phasec.ir import Call, DataflowBlock, Function, SeqExpr
from phasec.ir.node import replace

__all__ = ["map_dataflow_blocks", "is_op_call"]


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


def is_op_call(e: Any, name: str) -> bool:
    """Whether ``e`` is a call of the operator ``name`` (``"relax.matmul"``)."""
    return type(e) is Call and getattr(e.op, "name", None) == name

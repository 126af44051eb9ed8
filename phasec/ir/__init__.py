"""The phasec IR: Relax-level expressions, TIR kernels, struct info, modules.

Import Relax nodes from here (``phasec.ir.Var``, ``phasec.ir.Call`` ...) and
TIR nodes through the ``tir`` submodule (``phasec.ir.tir.For``). Visitors:
:class:`ExprVisitor` / :class:`ExprMutator` for Relax,
:class:`StmtExprVisitor` / :class:`StmtExprMutator` for TIR.
"""

from phasec.ir import tir
from phasec.ir.expr import *  # noqa: F401,F403
from phasec.ir.expr import __all__ as _expr_all
from phasec.ir.module import IRModule, VDevice
from phasec.ir.node import Node, Span, replace
from phasec.ir.phase import Phase
from phasec.ir.struct_info import *  # noqa: F401,F403
from phasec.ir.struct_info import __all__ as _sinfo_all
from phasec.ir.structural import assert_structural_equal, structural_equal, structural_hash
from phasec.ir.tir_visitor import StmtExprMutator, StmtExprVisitor
from phasec.ir.visitor import ExprMutator, ExprVisitor, collect_exprs, post_order_visit

__all__ = [
    "tir", "IRModule", "VDevice", "Node", "Span", "replace", "Phase", "structural_equal",
    "structural_hash", "assert_structural_equal", "ExprVisitor", "ExprMutator",
    "post_order_visit", "collect_exprs", "StmtExprVisitor", "StmtExprMutator", *_expr_all,
    *_sinfo_all,
]

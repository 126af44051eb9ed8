"""The phasec IR: Relax-level expressions, TIR kernels, struct info, modules.

Import Relax nodes from here (``phasec.ir.Var``, ``phasec.ir.Call`` ...) and
TIR nodes through the ``tir`` submodule (``phasec.ir.tir.For``).
"""

from . import tir
from .expr import *  # noqa: F401,F403
from .expr import __all__ as _expr_all
from .module import IRModule, VDevice
from .node import Node, Span, replace
from .phase import Phase
from .struct_info import *  # noqa: F401,F403
from .struct_info import __all__ as _sinfo_all
from .structural import assert_structural_equal, structural_equal, structural_hash
from .visitor import ExprMutator, ExprVisitor, collect_exprs, post_order_visit

__all__ = [
    "tir", "IRModule", "VDevice", "Node", "Span", "replace", "Phase", "structural_equal",
    "structural_hash", "assert_structural_equal", "ExprVisitor", "ExprMutator",
    "post_order_visit", "collect_exprs", *_expr_all, *_sinfo_all,
]

"""Smaller modules for reproducers: shapes shrunk, kernels simplified.

Two rewrites :mod:`phasec.testing.minimize` tries on a module a blamed pass
changes the results of (each candidate is kept only when the verifier
accepts it at its phase and the pass still changes its results):

* :func:`shape_candidates` -- the module with one dimension value made
  small wherever it appears in a tensor type or a shape (``64`` -> ``2`` in
  every ``R.Tensor((64, 256))`` and ``R.shape([64, ...])``), or a symbolic
  dimension given a small constant value. The substitution is textual on
  the module's TVMScript with the bindings' annotations dropped, which the
  parser then re-infers (a convolution's output shape follows its input's);
  a substitution that breaks a shape (a reshape's product, a kernel larger
  than its padded input) does not parse or verify, and is dropped. It is meant for the module a
  pipeline starts from (no kernels yet): a lowered module is re-derived
  from the shrunk one by re-running the pipeline's passes.
* :func:`simplify_kernel` -- a PrimFunc with its blocks inlined (each block
  axis replaced by its binding; blocks with an ``init`` are kept), loops of
  extent 1 removed, unrolled and vectorized loops made serial: the same
  computation in fewer lines.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

from phasec import verifier
from phasec.arith import simplify
from phasec.ir import IRModule, tir
from phasec.ir.tir_visitor import StmtExprMutator
from phasec.script.parser import parse

__all__ = ["shape_candidates", "simplify_kernel", "SMALL_DIMS"]

#: the values a dimension is shrunk to, in the order tried (each kept only
#: where the problem still shows: an off-by-one needs 2 or more)
SMALL_DIMS = (1, 2, 3)

_SHAPE = re.compile(r"(R\.Tensor\(\(|R\.shape\(\[|R\.Shape\(\[)([^()\[\]]*)([)\]])")
_TOKEN = re.compile(r'^\s*("?)([A-Za-z_][A-Za-z_0-9]*|\d+)\1\s*$')


def _dims(text: str) -> list[str]:
    """The dimension tokens of the shapes in ``text`` (``"64"``, ``"n"``),
    largest numbers first, then symbolic names."""
    found: set[str] = set()
    for match in _SHAPE.finditer(text):
        for token in match.group(2).split(","):
            m = _TOKEN.match(token)
            if m:
                found.add(m.group(2))
    numbers = sorted((t for t in found if t.isdigit() and int(t) > min(SMALL_DIMS)),
                     key=lambda t: -int(t))
    return numbers + sorted(t for t in found if not t.isdigit())


def _substitute(text: str, dim: str, value: int) -> str:
    def one(match: re.Match[str]) -> str:
        tokens = []
        for token in match.group(2).split(","):
            m = _TOKEN.match(token)
            tokens.append(token.replace(m.group(0).strip(), str(value))
                          if m and m.group(2) == dim else token)
        return match.group(1) + ",".join(tokens) + match.group(3)

    out = _SHAPE.sub(one, text)
    if not dim.isdigit():  # the symbolic variable's declaration, now unused
        out = re.sub(rf"^\s*{dim}\s*=\s*T\.int(32|64)\(\)\s*\n", "", out, flags=re.M)
    return out


#: a binding's type annotation in TVMScript (one level of nested parentheses)
_ANNOTATION = re.compile(r"^(\s+\w+): R\.\w+\((?:[^()\n]|\([^()\n]*\))*\) = ", re.M)
#: a Relax function's return type
_RETURNS = re.compile(r"\) -> R\.\w+\((?:[^()\n]|\([^()\n]*\))*\):$", re.M)


def _unannotated(text: str) -> str:
    """``text`` without the types of its bindings (``lv: R.Tensor(...) = x``
    -> ``lv = x``) and of its functions' results: the parser infers them, so only the parameters' shapes
    (and explicit shape operands) need substituting consistently."""
    stripped = _RETURNS.sub("):", _ANNOTATION.sub(lambda m: m.group(1) + " = ", text))
    try:
        parse(stripped)
    except Exception:  # noqa: BLE001 - an annotation the parser needs (keep them all)
        return text
    return stripped


def shape_candidates(mod: IRModule) -> Iterator[tuple[str, int, IRModule]]:
    """Modules with one dimension (a value, or a symbolic name) made small:
    (the dimension, its new value, the module), for every dimension and
    small value; only the substitutions that parse and verify are yielded. The caller
    keeps the first that still shows its problem and asks again. Without
    kernels, binding annotations are dropped first (derived shapes, such as
    a strided convolution's output, are re-inferred)."""
    text = mod.script()
    if not any(True for _ in mod.prim_funcs()):
        text = _unannotated(text)
    for dim in _dims(text):
        for value in SMALL_DIMS:
            if dim.isdigit() and int(dim) <= value:
                continue
            candidate = _substitute(text, dim, value)
            if candidate == text:
                continue
            try:
                made = parse(candidate)
            except Exception:  # noqa: BLE001 - an inconsistent substitution: not a candidate
                continue
            if not any(d.is_error for d in verifier.check(made)):
                yield dim, value, made


class _Indices(StmtExprMutator):
    """Simplifies buffer indices (``0 * 2 + i`` -> ``i``)."""

    def visit_buffer_load_(self, load: tir.BufferLoad) -> tir.PrimExpr:
        indices = tuple(simplify(i) for i in load.indices)
        return dataclasses.replace(load, indices=indices) if indices != load.indices else load

    def visit_buffer_store_(self, store: tir.BufferStore) -> tir.Stmt:
        indices = tuple(simplify(i) for i in store.indices)
        return dataclasses.replace(store, indices=indices) if indices != store.indices else store


class _Substitute(_Indices):
    def __init__(self, vmap: dict[tir.Var, tir.PrimExpr]) -> None:
        self.vmap = vmap

    def visit_var_(self, var: tir.Var) -> tir.PrimExpr:
        return self.vmap.get(var, var)


class _Simplify(_Indices):
    def __init__(self, serial: bool) -> None:
        self.serial = serial

    def visit_block_(self, block: tir.Block) -> tir.Stmt:
        if block.init is not None:
            return block
        vmap = {iv.var: value for iv, value in zip(block.iter_vars, block.iter_values)}
        return _Substitute(vmap).visit(block.body) if vmap else block.body

    def visit_for_(self, loop: tir.For) -> tir.Stmt:
        if isinstance(loop.extent, tir.IntImm) and loop.extent.value == 1 and loop.thread is None:
            return _Substitute({loop.loop_var: loop.min}).visit(loop.body)
        if self.serial and loop.kind in ("unroll", "vectorized"):
            return dataclasses.replace(loop, kind="serial")
        return loop


def simplify_kernel(func: tir.PrimFunc, serial: bool = True) -> tir.PrimFunc:
    """``func`` with blocks inlined, unit loops removed and (``serial``)
    unrolled or vectorized loops made serial (see the module docstring)."""
    body = _Simplify(serial).visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)

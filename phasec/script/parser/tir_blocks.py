"""Blocks of a T.prim_func: ``with T.sblock(name):`` with its axes
(``T.axis.spatial/reduce/remap``, ``(begin, end)`` domains), regions
(``T.reads``/``T.writes``), annotations (``T.sblock_attr``) and init.

A mixin of the PrimFunc reader (``_parse_tir._PrimFuncParser``), split out
along the block seam; it uses the reader's scopes, loop domains and scalar
expression parser.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from phasec.errors import ParseError
from phasec.ir import tir
from phasec.script.parser.common import _dotted
from phasec.script.parser.expressions import _extent

if TYPE_CHECKING:
    from phasec.script.parser.expressions import _PrimExprParser
    from phasec.script.parser.driver import ModuleParser


class _LoopVars(tuple):
    """``for iters in T.grid(m, n)``: one name for the grid's loop variables
    (TVM binds it to their tuple; ``T.axis.remap("SS", iters)`` takes it)."""

    __slots__ = ()


class _BlockParser:
    """The block statements of the PrimFunc reader (see the module docstring)."""

    mp: ModuleParser
    prim: _PrimExprParser
    scopes: list[dict[str, Any]]
    loop_doms: dict[int, tuple[tir.PrimExpr, tir.PrimExpr]]

    def _block(self, stmt: ast.With, block_name: str) -> tir.Stmt:
        mp = self.mp
        iter_vars: list[tir.IterVar] = []
        iter_values: list[tir.PrimExpr] = []
        reads: tuple | None = None
        writes: tuple | None = None
        init: tir.Stmt | None = None
        annotations: dict[str, Any] | None = None
        body_nodes: list[ast.stmt] = []
        self.scopes.append({})
        try:
            for s in stmt.body:
                mp.where = s
                call = s.value if isinstance(s, (ast.Assign, ast.Expr)) else None
                fname = _dotted(call.func) if isinstance(call, ast.Call) else None
                if isinstance(s, ast.Assign) and fname is not None and fname[:2] == (mp.T, "axis"):
                    self._axis(s, fname, iter_vars, iter_values)
                elif isinstance(s, ast.Expr) and fname in ((mp.T, "reads"), (mp.T, "writes")):
                    regions = self._regions(call)
                    if fname[1] == "reads":
                        if reads is not None:
                            raise mp.error(f"{mp.T}.reads given twice", s)
                        reads = regions
                    else:
                        if writes is not None:
                            raise mp.error(f"{mp.T}.writes given twice", s)
                        writes = regions
                elif isinstance(s, ast.Expr) and fname in ((mp.T, "sblock_attr"),
                                                           (mp.T, "block_attr")):
                    # Block annotations: hints for TVM's schedulers, kept as written.
                    if len(call.args) != 1 or call.keywords or annotations is not None:
                        raise mp.error(f"{mp.src(call.func)} expects one dictionary literal, "
                                       f"once per block", s)
                    annotations = self._annotations(call.args[0])
                elif (isinstance(s, ast.With) and len(s.items) == 1
                      and isinstance(s.items[0].context_expr, ast.Call)
                      and _dotted(s.items[0].context_expr.func) == (mp.T, "init")):
                    if init is not None:
                        raise mp.error(f"{mp.T}.init given twice", s)
                    init = self._stmts(s.body)
                else:
                    body_nodes.append(s)
            body = self._stmts(body_nodes)
        finally:
            self.scopes.pop()
        return tir.Block(block_name, iter_vars, iter_values, body, init, reads or (), writes or (),
                         annotations, span=mp.span(stmt))

    def _annotations(self, node: ast.AST) -> dict[str, Any]:
        """A block's ``{"key": value}``: literals as attributes everywhere, and
        the buffers and scalar expressions TVM's schedule hints name
        (``{"layout_free_placeholders": [T_reshape_1]}``)."""
        mp = self.mp
        if not isinstance(node, ast.Dict):
            raise mp.error(f"expected a dictionary literal, got {mp.src(node)}", node)
        out: dict[str, Any] = {}
        for key, value in zip(node.keys, node.values):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                raise mp.error(f"attribute names must be strings, got "
                               f"{'**' if key is None else mp.src(key)}", key or value)
            out[key.value] = self._annotation_value(value)
        return out

    def _annotation_value(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Dict):
            return self._annotations(node)
        if isinstance(node, (ast.List, ast.Tuple)):
            return tuple(self._annotation_value(e) for e in node.elts)
        if isinstance(node, ast.Name) and isinstance(self._lookup(node.id), tir.Buffer):
            return self._lookup(node.id)
        try:
            return self.mp.literal(node)
        except ParseError:
            return self.prim.parse(node)  # a scalar expression (or its clear error)

    def _axis(self, s: ast.Assign, fname: tuple[str, ...], iter_vars: list, iter_values: list) -> None:
        mp = self.mp
        call = s.value
        target = s.targets[0]
        kind_name = ".".join(fname[1:])
        if len(fname) != 3 or fname[2] not in ("spatial", "reduce", "S", "R", "remap"):
            raise mp.error(f"unknown block axis {mp.src(call.func)}; expected {mp.T}.axis.spatial, "
                           f"{mp.T}.axis.reduce or {mp.T}.axis.remap", call.func)
        if fname[2] == "remap":
            a = mp.bind_args(call, f"{mp.T}.{kind_name}", ("kinds", "bindings"), 2)
            kinds = mp.str_arg(a["kinds"], f"{mp.T}.axis.remap kinds")
            values = a["bindings"]
            if isinstance(values, ast.Name) and isinstance(self._lookup(values.id), _LoopVars):
                # `T.axis.remap("SS", iters)` with `for iters in T.grid(...)`
                loop_vars = self._lookup(values.id)
                values = ast.copy_location(ast.List(
                    [ast.copy_location(ast.Name(f"{values.id}_{k}", ast.Load()), values)
                     for k in range(len(loop_vars))], ast.Load()), values)
            if not isinstance(values, (ast.List, ast.Tuple)):
                raise mp.error(f"{mp.T}.axis.remap expects a list of loop variables", values)
            targets = target.elts if isinstance(target, ast.Tuple) else [target]
            if not (len(kinds) == len(values.elts) == len(targets)):
                raise mp.error(f"{mp.T}.axis.remap: {len(kinds)} kind(s), {len(values.elts)} "
                               f"loop variable(s) and {len(targets)} target(s) must agree", s)
            for k, v_node, t in zip(kinds, values.elts, targets):
                if k not in "SR":
                    raise mp.error(f"{mp.T}.axis.remap: axis kind must be 'S' or 'R', not {k!r}",
                                   a["kinds"])
                value = self.prim.parse(v_node)
                dom = self.loop_doms.get(id(value))
                if dom is None:
                    raise mp.error(f"{mp.T}.axis.remap binds loop variables; {mp.src(v_node)!r} "
                                   f"is not one", v_node)
                start, extent = dom
                self._add_axis(t, k, extent, value, iter_vars, iter_values,
                               start)
            return
        a = mp.bind_args(call, f"{mp.T}.{kind_name}", ("dom", "binding"), 2)
        value = self.prim.parse(a["binding"])
        dom = a["dom"]
        start: tir.PrimExpr | None = None
        if isinstance(dom, ast.Tuple):
            # `(begin, end)`: TVM's spelling of a domain that does not start at 0
            if len(dom.elts) != 2 or any(isinstance(e, ast.Starred) for e in dom.elts):
                raise mp.error(f"{mp.T}.{kind_name} domain: expected an extent or a (begin, end) "
                               f"pair, got {mp.src(dom)}", dom)
            start = self.prim.parse(dom.elts[0], value.dtype)
            stop = self.prim.parse(dom.elts[1], value.dtype)
            for bound, node in ((start, dom.elts[0]), (stop, dom.elts[1])):
                if not tir.is_int(bound.dtype):
                    raise mp.error(f"{mp.T}.{kind_name} domain bounds must be integers, got a "
                                   f"{bound.dtype} value", node)
            extent = _extent(start, stop)
        else:
            extent = mp.check_dim(self.prim.parse(dom, value.dtype), dom,
                                  f"{mp.T}.{kind_name} domain")
        kind = "S" if fname[2] in ("spatial", "S") else "R"
        self._add_axis(target, kind, extent, value, iter_vars, iter_values, start)

    def _add_axis(self, target: ast.AST, kind: str, extent: tir.PrimExpr, value: tir.PrimExpr,
                  iter_vars: list, iter_values: list, start: tir.PrimExpr | None = None) -> None:
        mp = self.mp
        if not isinstance(target, ast.Name):
            raise mp.error(f"a block axis must be assigned to a name, got {mp.src(target)!r}", target)
        var = tir.Var(target.id, value.dtype, span=mp.span(target))
        iter_vars.append(tir.IterVar(var, extent, kind, span=mp.span(target), min=start))
        iter_values.append(value)
        self._bind(target.id, var)

    def _regions(self, call: ast.Call) -> tuple[tir.BufferRegion, ...]:
        mp = self.mp
        if call.keywords:
            raise mp.error(f"{mp.src(call.func)} takes buffer regions as positional arguments",
                           call.keywords[0].value)
        elts = call.args
        if len(elts) == 1 and isinstance(elts[0], (ast.List, ast.Tuple)):
            elts = elts[0].elts
        regions = []
        for e in elts:
            node = e.value if isinstance(e, ast.Subscript) else e
            if not isinstance(node, ast.Name):
                raise mp.error(f"expected a buffer region such as A[i, 0:4], got {mp.src(e)!r}", e)
            buf = self._resolve(node.id, node)
            if not isinstance(buf, tir.Buffer):
                raise mp.error(f"{node.id!r} is not a buffer", node)
            if not isinstance(e, ast.Subscript):  # the whole buffer
                region = [(tir.IntImm(0, d.dtype), d) for d in buf.shape]
            else:
                idx = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
                region = [self._range(i, buf, d) for d, i in enumerate(idx)]
            regions.append(tir.BufferRegion(buf, tuple(region), span=mp.span(e)))
        return tuple(regions)

    def _range(self, node: ast.AST, buf: tir.Buffer, dim: int) -> tuple[tir.PrimExpr, tir.PrimExpr]:
        mp = self.mp
        if not isinstance(node, ast.Slice):
            index = self.prim.parse(node)
            return index, tir.IntImm(1, index.dtype)
        if node.step is not None:
            raise mp.error("strided regions are not supported", node.step)
        if node.upper is None and dim >= len(buf.shape):
            raise mp.error(f"buffer {buf.name!r} has only {len(buf.shape)} dimension(s)", node)
        if node.lower is None and node.upper is None:
            stop = buf.shape[dim]
            return tir.IntImm(0, stop.dtype), stop
        if node.lower is None:
            stop = self.prim.parse(node.upper)
            return tir.IntImm(0, stop.dtype), stop
        if node.upper is None:
            start = self.prim.parse(node.lower, buf.shape[dim].dtype)
            return start, _extent(start, buf.shape[dim])
        start, stop = self.prim.parse_pair(node.lower, node.upper)
        return start, _extent(start, stop)

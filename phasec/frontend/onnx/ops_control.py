"""Control flow: ``If``, ``Loop`` and ``Scan``.

**If** becomes a Relax ``If`` whose branches are the two subgraphs, each
converted into a ``SeqExpr`` that uses the values of the enclosing graph
directly (ONNX subgraphs capture outer values by name, Relax branches see
every variable in scope). The result's struct info is the join of the
branches'; an output whose shape the join leaves unknown (the branches
disagree on a dimension) is matched to fresh symbolic dimensions
(``R.match_cast``), checked at run time. A condition known at import
selects its branch at import: only that subgraph is converted. A branch
that is inconsistent for the input shapes given (a ``FrontendError`` while
converting it) becomes a branch that fails at run time with that message
(``R.assert_op``), as ONNX Runtime fails only if it runs it.

**Loop** and **Scan** become *recursion through a local function*, as TVM
Relax allows (phasec has no loop construct in its IR, and none is needed):
a nested function ``loop(i, cond, v..., acc...)`` in the enclosing function,
its body ``if continue: <body>; loop(i + 1, cond', v'..., acc'...) else:
(v..., acc...)``. Loop-carried values are its parameters; each scan output
is an accumulator parameter of shape ``(n, *element)`` (``n`` symbolic),
concatenated with the iteration's element. The function captures the
enclosing values the body uses; ``LambdaLifting`` turns it into a private
module-level function (the captured values become trailing parameters) and
the VM runs the self-call as an ordinary call with its own frame (so a loop
runs at most the VM's call-depth limit of iterations, 100,000). Nothing is
interpreted: each iteration runs the compiled kernels of the body.
``Scan`` takes its per-iteration inputs with ``R.take`` at the iteration
index (from the end for reversed inputs), and its stacked outputs have the
trip count, known at import, as their length. Opset-8 ``Scan`` (a leading
batch axis everywhere) scans each element of a batch known at import with
its own loop and stacks the results.

A scan output whose element shape the body computes (its dimensions bound
inside the body, which the enclosing function cannot name) has an
accumulator of unknown shape: see :func:`_stack`. (The importer first
matches a body output to the static shape the body declares, where it
declares one.)

A loop-carried value keeps its initial struct info when the body returns
one of the same shape; otherwise the parameter gets fresh symbolic
dimensions (same rank), and the loop's result is matched to fresh symbolic
dimensions after the call. Where ONNX leaves ``M`` out, only the
condition decides; where it leaves ``cond`` out, the loop starts with
``true`` and still stops when the body returns ``false`` (as ONNX Runtime
and onnx's reference implementation do, although the specification's
comment calls that output ignored).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from phasec.arith.lattice import collect_shape_vars, struct_info_equal
from phasec.frontend.errors import FrontendError
from phasec.frontend.onnx._context import NodeContext, Unsupported, Value, is_const
from phasec.frontend.onnx._registry import converter
from phasec.ir import tir
from phasec.ir.expr import (Call, Constant, Expr, Function, If, MatchCast, SeqExpr, Tuple,
                            TupleGetItem, Var)
from phasec.ir.struct_info import FuncStructInfo, StructInfo, TensorStructInfo, TupleStructInfo
from phasec.script.builder import BlockBuilder

__all__: list[str] = []

# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def _sym_name(ctx: NodeContext, what: str) -> str:
    return f"{ctx.hint}_{what}"


def _scalar(ctx: NodeContext, v: Value, dtype: str, what: str) -> Expr:
    """``v`` (one element of ``dtype``) as a 0-d tensor expression."""
    sinfo = ctx.sinfo(v)
    if sinfo.dtype != dtype:
        raise Unsupported(f"{what} has element type {sinfo.dtype}, expected {dtype}")
    if sinfo.ndim < 0 or sinfo.shape is None:
        raise Unsupported(f"{what} has an unknown shape")
    dims = ctx.shape(v)
    if any(d != 1 for d in dims):
        raise Unsupported(f"{what} must hold one element, but has shape "
                          f"({', '.join(map(str, dims))})")
    out = v if not dims else ctx.emit("reshape", v, ())
    return ctx.expr(out)


def _tensor_sinfo(v: Any, what: str) -> TensorStructInfo:
    s = v.struct_info if isinstance(v, Expr) else None
    if isinstance(v, np.ndarray):
        return TensorStructInfo(v.shape, "int64" if v.dtype == object else str(v.dtype))
    if not isinstance(s, TensorStructInfo):
        raise Unsupported(f"{what} is not a tensor")
    return s


def _fresh_dims(ctx: NodeContext, sinfo: TensorStructInfo, what: str,
                first: int = 0) -> tuple[Any, ...]:
    """``sinfo``'s dimensions from ``first`` on replaced by fresh symbolic ones."""
    if sinfo.ndim < 0:
        raise Unsupported(f"{what} has an unknown rank")
    dims = list(sinfo.shape) if sinfo.shape is not None else [None] * sinfo.ndim
    return tuple(tir.Var(_sym_name(ctx, f"{what}_d{k}"), "int64") if k >= first else d
                 for k, d in enumerate(dims))


def _known(sinfo: StructInfo) -> bool:
    return isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None


def _settle_output(ctx: NodeContext, value: Expr, what: str,
                   known: TensorStructInfo | None = None, length: Any = None) -> Expr:
    """A result whose shape is unknown, matched to fresh symbolic dims
    (``known``: the shape it has, but for its first dimension, which is
    ``length`` when that is known)."""
    sinfo = value.struct_info
    if _known(sinfo):
        return value
    if not isinstance(sinfo, TensorStructInfo) or sinfo.ndim < 0:
        raise Unsupported(f"{what} has no known rank (the subgraphs disagree on it)")
    dims = _fresh_dims(ctx, known or sinfo, what, first=0)
    if known is not None:
        dims = (dims[0] if length is None else length,) + tuple(known.shape[1:])
    target = TensorStructInfo(dims, sinfo.dtype)
    return ctx.builder.match_cast(value, target, ctx.hint)


def _graph_body(ctx: NodeContext, attr: str, bind: Any = None, finish: Any = None) -> SeqExpr:
    """The subgraph in ``attr`` as a SeqExpr: the bindings of its inputs
    (``bind(sub_ctx)`` returns them by name, after emitting what they need),
    its own bindings, then its outputs (a tuple when there are several) or
    whatever ``finish(sub_ctx, outputs)`` returns after further bindings."""
    sub = BlockBuilder()
    with sub.function("body", []):
        sctx = ctx.with_builder(sub)
        outs = ctx.convert_graph(sub, attr, bind(sctx) if bind is not None else {})
        exprs = [sctx.expr(v) for v in outs]
        if finish is not None:
            result = finish(sctx, exprs)
        else:
            result = exprs[0] if len(exprs) == 1 else Tuple(exprs)
        sub.emit_func_output(result)
    return sub.get()["body"].body


def _items(ctx: NodeContext, value: Expr, n: int) -> list[Expr]:
    if n == 1 and not isinstance(value.struct_info, TupleStructInfo):
        return [value]
    return [ctx.builder.emit(TupleGetItem(value, k, span=ctx.span), ctx.hint) for k in range(n)]


# --------------------------------------------------------------------------
# If
# --------------------------------------------------------------------------


def _failing_branch(ctx: NodeContext, branches: list[SeqExpr | None],
                    error: FrontendError) -> list[SeqExpr]:
    """The two branches, the one that could not be converted (``None``)
    replaced by one that fails at run time with ``error``'s message, and
    otherwise returns zeros like the other branch's outputs. A branch can be
    inconsistent for the input shapes given while the model is valid: Silero
    VAD's 8 kHz branch, given a 16 kHz window, squeezes an axis that is not 1;
    ONNX Runtime never runs it, nor fails unless it does. When both branches
    fail, or the good one's output shapes are not all known integers, the
    error stands."""
    good = [b for b in branches if b is not None]
    if not good:
        raise error
    sinfo = good[0].struct_info
    fields = list(sinfo.fields) if isinstance(sinfo, TupleStructInfo) else [sinfo]
    shapes = [[d if isinstance(d, int) else getattr(d, "value", None) for d in f.shape]
              if isinstance(f, TensorStructInfo) and f.shape is not None else [None]
              for f in fields]
    if any(not isinstance(d, int) for dims in shapes for d in dims):
        raise error
    sub = BlockBuilder()
    with sub.function("body", []):
        sctx = ctx.with_builder(sub)
        text = str(error).replace("{", "{{").replace("}", "}}")
        sctx.emit("assert_op", np.asarray(False), fold=False,
                  format=f"{ctx.op_type} node {ctx.node.name!r}: the branch taken cannot run "
                         f"for these input shapes: {text}")
        outs = [sctx.expr(np.zeros(tuple(dims), f.dtype)) for dims, f in zip(shapes, fields)]
        sub.emit_func_output(outs[0] if len(outs) == 1 and not isinstance(sinfo, TupleStructInfo)
                             else Tuple(outs))
    failing = sub.get()["body"].body
    return [b if b is not None else failing for b in branches]


@converter("If")
def _if(ctx: NodeContext) -> list[Value]:
    cond = ctx.input(0)
    n = len(ctx.node.output)
    if is_const(cond):
        arr = np.asarray(cond)
        if arr.size != 1:
            raise Unsupported(f"the condition must hold one element, but has shape {arr.shape}")
        taken = "then_branch" if bool(arr.reshape(-1)[0]) else "else_branch"
        return ctx.convert_graph(ctx.builder, taken, {})
    c = _scalar(ctx, cond, "bool", "the condition")
    branches: list[SeqExpr | None] = []
    failed: list[FrontendError] = []
    for attr in ("then_branch", "else_branch"):
        try:
            body = _graph_body(ctx, attr)
        except FrontendError as e:
            branches.append(None)
            failed.append(e)
            continue
        got = body.struct_info
        count = len(got.fields) if isinstance(got, TupleStructInfo) and n > 1 else 1
        if count != n:
            raise Unsupported(f"{attr} has {count} output(s), the node {n}")
        branches.append(body)
    if failed:
        branches = _failing_branch(ctx, branches, failed[0])
    res = ctx.builder.emit(If(c, branches[0], branches[1], span=ctx.span), ctx.hint)
    return [_settle_output(ctx, v, f"out{k}") for k, v in enumerate(_items(ctx, res, n))]


# --------------------------------------------------------------------------
# Loop and Scan: a recursive local function
# --------------------------------------------------------------------------


class _LoopSpec:
    """What the recursive function needs, besides the body.

    ``carried``: the initial loop-carried values; ``scan_elems``: the struct
    info of each scan output's per-iteration element (None: learn it);
    ``bind(sctx, i, c, vs)``: the body graph's input bindings for iteration
    ``i``; ``more(sctx, i, c)``: the continue test; ``split(outs)``:
    ``(cond_out or None, carried outs, scan outs)`` of the body's outputs.
    """

    def __init__(self, attr: str, carried: Sequence[Expr], n_scan: int,
                 bind: Any, more: Any, split: Any, reverse: Sequence[bool] = (),
                 length: Any = None) -> None:
        self.attr = attr
        self.carried = list(carried)
        self.n_scan = n_scan
        self.bind = bind
        self.more = more
        self.split = split
        self.reverse = list(reverse) or [False] * n_scan
        #: the scan outputs' length when known at import (Scan's trip count)
        self.length = length


_I64 = TensorStructInfo((), "int64")
_BOOL = TensorStructInfo((), "bool")


def _defined_syms(seq: SeqExpr, out: set[int]) -> set[int]:
    """The ids of the symbolic variables ``R.match_cast`` binds in ``seq``
    (its If branches included): they exist only inside it."""
    for block in seq.blocks:
        for b in block.bindings:
            if isinstance(b, MatchCast):
                out.update(id(v) for v in collect_shape_vars(b.struct_info))
            if isinstance(b.value, If):
                _defined_syms(b.value.true_branch, out)
                _defined_syms(b.value.false_branch, out)
    return out


def _probe(ctx: NodeContext, spec: _LoopSpec, carried: list[TensorStructInfo]
           ) -> tuple[list[StructInfo], list[StructInfo], set[int]]:
    """The struct info of the body's carried and scan outputs, converting
    the body once for parameters of the given struct info, and the ids of
    the symbolic variables the body binds (a data-dependent shape's)."""
    i, c = Var("i", _I64), Var("cond", _BOOL)
    vs = [Var(f"v{k}", s) for k, s in enumerate(carried)]
    seen: list[list[StructInfo]] = []

    def finish(sctx: NodeContext, outs: list[Expr]) -> Expr:
        _, v_out, s_out = spec.split(outs)
        seen.append([o.struct_info for o in v_out])
        seen.append([o.struct_info for o in s_out])
        return Tuple([])

    sub = BlockBuilder()
    with sub.function("probe", [i, c, *vs]):
        sctx = ctx.with_builder(sub)
        outs = ctx.convert_graph(sub, spec.attr, spec.bind(sctx, i, c, vs))
        sub.emit_func_output(finish(sctx, [sctx.expr(v) for v in outs]))
    return seen[0], seen[1], _defined_syms(sub.get()["probe"].body, set())


def _loop_sinfos(ctx: NodeContext, spec: _LoopSpec
                 ) -> tuple[list[TensorStructInfo], list[TensorStructInfo], list[bool]]:
    """Parameter struct info of the carried values (and whether each keeps
    its initial shape) and the scan outputs' element struct info (of
    unknown shape where the body computes it: see :func:`_stack`)."""
    carried = [_tensor_sinfo(v, f"loop-carried value {k}") for k, v in enumerate(spec.carried)]
    exact = [True] * len(carried)
    for _ in range(3):
        v_out, s_out, inner = _probe(ctx, spec, carried)
        changed = False
        for k, (p, o) in enumerate(zip(carried, v_out)):
            if not isinstance(o, TensorStructInfo) or o.dtype != p.dtype:
                raise Unsupported(f"loop-carried value {k} changes type in the body "
                                  f"({p} -> {o})")
            if exact[k] and not struct_info_equal(p, o):
                if o.ndim != p.ndim:
                    raise Unsupported(f"loop-carried value {k} changes rank in the body")
                carried[k] = TensorStructInfo(_fresh_dims(ctx, p, f"v{k}"), p.dtype)
                exact[k] = False
                changed = True
        if not changed:
            break
    else:
        raise Unsupported("the loop-carried shapes do not settle")
    own = {id(v) for s in carried for v in collect_shape_vars(s)}
    elems = []
    for k, s in enumerate(s_out):
        if not isinstance(s, TensorStructInfo) or s.ndim < 0:
            raise Unsupported(f"scan output {k} has no known rank")
        if any(id(v) in own for v in collect_shape_vars(s)):
            raise Unsupported(f"scan output {k}'s shape changes from iteration to iteration")
        if not _known(s) or any(id(v) in inner for v in collect_shape_vars(s)):
            s = TensorStructInfo(None, s.dtype, ndim=s.ndim)  # known at run time only
        elems.append(s)
    return carried, elems, exact


def _stack(ctx: NodeContext, sctx: NodeContext, i: Var, acc: Var, elem: Expr, rev: bool,
           k: int) -> Expr:
    """The accumulator ``acc`` with this iteration's ``elem`` added at its
    end (its front when ``rev``). An element whose shape the body computes
    (a Slice with run-time bounds: ONNX's loop11) has dimensions bound
    inside the body, which its caller cannot name: its accumulator is of
    unknown shape, the first iteration's element alone, later ones matched
    to the accumulator's element shape (checked at run time) and
    concatenated."""
    one = sctx.emit("expand_dims", elem, axis=[0])
    if _known(acc.struct_info):
        return sctx.emit("concat", [one, acc] if rev else [acc, one], axis=0)
    ndim = acc.struct_info.ndim
    later = BlockBuilder()
    with later.function("later", []):
        lctx = ctx.with_builder(later)
        dims = [tir.Var(_sym_name(ctx, f"s{k}_d{j}"), "int64") for j in range(ndim)]
        whole = later.match_cast(acc, TensorStructInfo(dims, acc.struct_info.dtype), "acc")
        first = later.match_cast(sctx.expr(one), TensorStructInfo([1, *dims[1:]],
                                                                   acc.struct_info.dtype), "elem")
        later.emit_func_output(lctx.expr(lctx.emit("concat", [first, whole] if rev
                                                   else [whole, first], axis=0)))
    at_start = sctx.expr(sctx.emit("equal", i, np.array(0, "int64")))
    res = sctx.builder.emit(If(at_start, SeqExpr([], sctx.expr(one)), later.get()["later"].body,
                               span=ctx.span), "acc")
    return sctx.builder.match_cast(res, TensorStructInfo(None, acc.struct_info.dtype, ndim=ndim),
                                   "acc") if _known(res.struct_info) else res


def _emit_loop(ctx: NodeContext, spec: _LoopSpec, start: list[Expr]) -> list[Expr]:
    """Bind the recursive function, call it with ``start`` (``i``, ``cond``),
    and return its carried then scan results (scan outputs stacked on axis 0)."""
    carried, elems, exact = _loop_sinfos(ctx, spec)
    accs = [TensorStructInfo((tir.Var(_sym_name(ctx, f"n{k}"), "int64"), *e.shape), e.dtype)
            if _known(e) else TensorStructInfo(None, e.dtype, ndim=e.ndim + 1)
            for k, e in enumerate(elems)]
    ret = TupleStructInfo([p if keep else TensorStructInfo(None, p.dtype, ndim=p.ndim)
                           for p, keep in zip(carried, exact)]
                          + [TensorStructInfo(None, a.dtype, ndim=a.ndim) for a in accs])
    params = [Var("i", _I64), Var("cond", _BOOL),
              *[Var(f"v{k}", s) for k, s in enumerate(carried)],
              *[Var(f"acc{k}", s) for k, s in enumerate(accs)]]
    i, c = params[0], params[1]
    vs, acc_vars = params[2:2 + len(carried)], params[2 + len(carried):]
    pinfo = [p.struct_info for p in params]
    fvar = Var(f"{ctx.hint}_loop", FuncStructInfo(pinfo, ret, True))

    def step(sctx: NodeContext, outs: list[Expr]) -> Expr:
        cond_out, v_out, s_out = spec.split(outs)
        nxt = sctx.emit("add", i, np.array(1, "int64"))
        new_accs = [_stack(ctx, sctx, i, acc, elem, rev, k)
                    for k, (acc, elem, rev) in enumerate(zip(acc_vars, s_out, spec.reverse))]
        next_cond = c if cond_out is None else _scalar(sctx, cond_out, "bool", "the body's cond")
        call = Call(fvar, [sctx.expr(nxt), next_cond, *v_out, *map(sctx.expr, new_accs)],
                    span=ctx.span)
        return sctx.builder.emit(call, "rec")

    fb = BlockBuilder()
    with fb.function("loop", params):
        fctx = ctx.with_builder(fb)
        more = spec.more(fctx, i, c)
        go = _graph_body(ctx, spec.attr, lambda sctx: spec.bind(sctx, i, c, vs), step)
        stop = SeqExpr([], Tuple([*vs, *acc_vars]))
        res = fb.emit(If(more, go, stop, span=ctx.span), "res")
        fb.emit_func_output(res)
    body = fb.get()["loop"].body
    func = Function(params, body, ret, True, {}, span=ctx.span)
    ctx.builder.emit_function(fvar, func)
    # (made at run time: a constant with no elements would print without its shape)
    # (an element of unknown shape: zeros of shape (0, 0...), the result of no iterations)
    empties = [ctx.emit("zeros", (0, *(e.shape if _known(e) else [0] * e.ndim)), dtype=e.dtype,
                        fold=False) for e in elems]
    out = ctx.builder.emit(Call(fvar, [*start, *spec.carried, *empties], span=ctx.span),
                           ctx.hint)
    items = _items(ctx, out, len(ret.fields))
    n = len(carried)
    return [_settle_output(ctx, v, f"out{k}", accs[k - n] if k >= n and _known(accs[k - n])
                           else None, spec.length)
            for k, v in enumerate(items)]


@converter("Loop")
def _loop(ctx: NodeContext) -> list[Value]:
    body = ctx.attr("body")
    n_carried = len(ctx.inputs) - 2
    if n_carried < 0:
        raise Unsupported("Loop needs its M and cond inputs (empty names for absent ones)")
    if len(body.input) != n_carried + 2:
        raise Unsupported(f"the body has {len(body.input)} inputs, expected {n_carried + 2}")
    n_scan = len(body.output) - 1 - n_carried
    if n_scan < 0:
        raise Unsupported(f"the body has {len(body.output)} outputs, expected at least "
                          f"{n_carried + 1}")
    trip = ctx.optional(0)
    given_cond = ctx.optional(1)
    m = None if trip is None else _scalar(ctx, trip, "int64", "the trip count M")
    c0 = (Constant(np.array(True)) if given_cond is None
          else _scalar(ctx, given_cond, "bool", "the condition"))
    names = [x.name for x in body.input]

    def bind(sctx: NodeContext, i: Var, c: Var, vs: list[Var]) -> dict[str, Value]:
        bound: dict[str, Value] = dict(zip(names[2:], vs))
        if names[0]:
            bound[names[0]] = i
        if names[1]:
            bound[names[1]] = c
        return bound

    def more(sctx: NodeContext, i: Var, c: Var) -> Expr:
        if m is None:
            return c
        return sctx.expr(sctx.emit("logical_and", sctx.emit("less", i, m), c))

    def split(outs: list[Expr]) -> tuple[Expr | None, list[Expr], list[Expr]]:
        return outs[0], outs[1:1 + n_carried], outs[1 + n_carried:]

    spec = _LoopSpec("body", [ctx.expr(ctx.input(2 + k)) for k in range(n_carried)],
                     n_scan, bind, more, split)
    return _emit_loop(ctx, spec, [Constant(np.array(0, "int64")), c0])


def _axes(ctx: NodeContext, name: str, count: int, ranks: Sequence[int]) -> list[int]:
    given = list(ctx.attr(name) or [0] * count)
    if len(given) != count:
        raise Unsupported(f"{name} has {len(given)} entries, expected {count}")
    out = []
    for a, r in zip(given, ranks):
        if not -r <= a < r:
            raise Unsupported(f"{name}: axis {a} is out of range for rank {r}")
        out.append(a % r)
    return out


def _directions(ctx: NodeContext, name: str, count: int) -> list[bool]:
    given = list(ctx.attr(name) or [0] * count)
    if len(given) != count or any(d not in (0, 1) for d in given):
        raise Unsupported(f"{name} must hold {count} entries of 0 or 1, got {given}")
    return [d == 1 for d in given]


def _scan_over(ctx: NodeContext, states: list[Value], xs: list[Value], in_axes: list[int],
               in_rev: list[bool], out_rev: list[bool]) -> list[Expr]:
    """The scan loop over ``xs`` along ``in_axes``: the final states, then
    each scan output stacked on axis 0."""
    body = ctx.attr("body")
    n, k_out = len(states), len(out_rev)
    lengths = [ctx.shape(x)[a] for x, a in zip(xs, in_axes)]
    trip = lengths[0]
    for d in lengths[1:]:
        if str(d) != str(trip):
            raise Unsupported(f"the scan inputs' lengths differ ({', '.join(map(str, lengths))})")
    if isinstance(trip, int):
        count: Expr = Constant(np.array(trip, "int64"))
    else:
        sym = np.empty((), dtype=object)
        sym[()] = trip
        count = ctx.expr(sym)
    x_exprs = [ctx.expr(x) for x in xs]
    names = [x.name for x in body.input]

    def bind(sctx: NodeContext, i: Var, c: Var, vs: list[Var]) -> dict[str, Value]:
        bound: dict[str, Value] = dict(zip(names[:n], vs))
        back = None
        for name, x, axis, rev in zip(names[n:], x_exprs, in_axes, in_rev):
            if rev and back is None:
                back = sctx.emit("subtract", sctx.emit("subtract", count, i),
                                 np.array(1, "int64"))
            bound[name] = sctx.emit("take", x, back if rev else i, axis=axis)
        return bound

    def more(sctx: NodeContext, i: Var, c: Var) -> Expr:
        return sctx.expr(sctx.emit("less", i, count))

    def split(outs: list[Expr]) -> tuple[Expr | None, list[Expr], list[Expr]]:
        return None, outs[:n], outs[n:]

    spec = _LoopSpec("body", [ctx.expr(v) for v in states], k_out, bind, more, split, out_rev,
                     trip)
    return _emit_loop(ctx, spec, [Constant(np.array(0, "int64")), Constant(np.array(True))])


def _scan_shape(ctx: NodeContext, first: int) -> tuple[int, int]:
    """(states, scan outputs) of a Scan whose states start at input ``first``."""
    body = ctx.attr("body")
    m = ctx.attr("num_scan_inputs")
    if not isinstance(m, int) or not 0 < m <= len(ctx.inputs) - first:
        raise Unsupported(f"num_scan_inputs {m!r} does not fit the {len(ctx.inputs)} inputs")
    n = len(ctx.inputs) - first - m
    k_out = len(body.output) - n
    if len(body.input) != n + m or k_out < 0:
        raise Unsupported(f"the body has {len(body.input)} inputs and {len(body.output)} "
                          f"outputs, which do not fit {n} states and {m} scan inputs")
    return n, k_out


@converter("Scan", since=8)
def _scan(ctx: NodeContext) -> list[Value]:
    if ctx.opset < 9:
        return _scan8(ctx)
    n, k_out = _scan_shape(ctx, 0)
    xs = [ctx.input(j) for j in range(n, len(ctx.inputs))]
    in_axes = _axes(ctx, "scan_input_axes", len(xs), [ctx.ndim(x) for x in xs])
    in_rev = _directions(ctx, "scan_input_directions", len(xs))
    out_rev = _directions(ctx, "scan_output_directions", k_out)
    results = _scan_over(ctx, [ctx.input(k) for k in range(n)], xs, in_axes, in_rev, out_rev)
    scans = results[n:]
    out_axes = _axes(ctx, "scan_output_axes", k_out, [ctx.ndim(s) for s in scans])
    for k, (s, axis) in enumerate(zip(scans, out_axes)):
        if axis:
            order = list(range(1, axis + 1)) + [0] + list(range(axis + 1, ctx.ndim(s)))
            scans[k] = ctx.emit("permute_dims", s, axes=order)
    return results[:n] + scans


def _scan8(ctx: NodeContext) -> list[Value]:
    """Opset 8: every state and scan input has a leading batch axis (scan
    inputs scan along axis 1), each batch element scanned on its own: one
    loop per element of a batch known at import, the results stacked."""
    n, k_out = _scan_shape(ctx, 1)
    xs = [ctx.input(j) for j in range(1 + n, len(ctx.inputs))]
    states = [ctx.input(1 + k) for k in range(n)]
    batch = ctx.shape(xs[0])[0] if ctx.ndim(xs[0]) >= 2 else None
    if not isinstance(batch, int) or batch < 1:
        raise Unsupported("opset-8 Scan needs scan inputs of shape [batch, sequence, ...] with "
                          "a batch size known at import")
    length = ctx.shape(xs[0])[1]
    if ctx.has(0):
        lens = ctx.const(0, "sequence_lens")
        if not isinstance(length, int) or np.any(np.asarray(lens) != length):
            raise Unsupported("sequence_lens other than the full sequence length")
    rev = _directions(ctx, "directions", len(xs))
    per_batch = []
    for b in range(batch):
        index = np.array(b, "int64")
        pick = [ctx.emit("take", v, index, axis=0) for v in states + xs]
        per_batch.append(_scan_over(ctx, pick[:n], pick[n:], [0] * len(xs), rev,
                                    [False] * k_out))
    return [ctx.emit("concat", [ctx.emit("expand_dims", r[j], axis=[0]) for r in per_batch],
                     axis=0) for j in range(n + k_out)]

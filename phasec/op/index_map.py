"""Index maps of ``R.layout_transform``: ``T.index_map(lambda i, j: (i // 4, j, i % 4))``.

An index map sends an input index ``(i, j)`` to an output index. phasec
reads the lambda structurally with ``ast`` (it is never executed): its body
is a tuple of integer expressions over the parameters built from ``+``,
``-``, ``*``, ``//``, ``%``, integer literals (``4`` or ``T.int64(4)``) and
``T.floordiv`` / ``T.floormod``. The attribute stores its canonical text
(``lambda i, j: (i // 4, j, i % 4)``), which TVM 0.27 prints inside
``T.index_map(...)``.

Shapes follow TVM 0.27's ``IndexMap::MapShape``. The preferred route
(TVM's DetectIterMap) writes each output index as a sum of *splits*
``scale * ((v // lower) % extent)`` of the input variables; a split's extent
is ``ceildiv(n, lower)`` when it takes the rest of ``v`` (``v // 4``, ``v``),
so a map that does not divide pads (``i // 4, i % 4`` over 10 gives 3 x 4);
an output's extent is its largest ``scale * extent``. When the expression is
not such a sum, the output's extent is its value range (TVM's EvalSet
fall-back), for constant shapes. An output whose smallest value is not 0 is
an error, as in TVM.

The map is inverted for the kernel and the reference: every input variable
must be tiled by its splits (lower factors 1, e1, e1*e2, ..., the last one
taking the rest); an output position whose decoded input is outside the
input (or between the multiples of a scale) is padding and gets
``pad_value`` (0 when None, as TVM legalizes it).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache

from phasec.errors import PhasecError
from phasec.ir import tir
from phasec import arith
from phasec.ir.tir import BinaryOp, IntImm, PrimExpr

__all__ = ["IndexMap", "parse_index_map", "index_map_text", "MapError"]

I64 = "int64"


class MapError(PhasecError, ValueError):
    """An index map phasec cannot read, or one that does not fit the tensor."""


def _i64(v: int) -> IntImm:
    return IntImm(int(v), I64)


@dataclass(frozen=True)
class Split:
    """``(var // lower) % extent``; ``extent`` None: the rest of the variable."""

    var: int
    lower: int
    extent: int | None


@dataclass(frozen=True)
class Term:
    scale: int
    split: Split


@dataclass(frozen=True)
class IndexMap:
    """A parsed index map: parameter names and one expression per output.

    ``exprs`` use ``tir.Var`` parameters (``params_vars``, int64); ``text`` is
    the canonical lambda text the attribute stores.
    """

    params: tuple[str, ...]
    param_vars: tuple[tir.Var, ...]
    exprs: tuple[PrimExpr, ...]
    text: str

    @property
    def ndim_in(self) -> int:
        return len(self.params)

    @property
    def ndim_out(self) -> int:
        return len(self.exprs)


# ---------------------------------------------------------------------------
# reading the lambda (never executed)
# ---------------------------------------------------------------------------

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}
_CALLS = {"floordiv": "//", "floormod": "%"}


def _lambda_of(node: ast.AST) -> ast.Lambda:
    """``lambda ...`` itself, or ``T.index_map(lambda ..., index_dtype=...)``."""
    if isinstance(node, ast.Lambda):
        return node
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "index_map" and len(node.args) == 1:
        for kw in node.keywords:
            if kw.arg not in ("index_dtype", "inverse_index_map"):
                raise MapError(f"T.index_map has no argument {kw.arg!r}")
        if isinstance(node.args[0], ast.Lambda):
            return node.args[0]
    raise MapError("expected an index map: lambda i, j: (...) or "
                   "T.index_map(lambda i, j: (...))")


def _expr(node: ast.AST, names: dict[str, tir.Var]) -> PrimExpr:
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise MapError(f"unknown name {node.id!r} in the index map (its parameters: "
                           f"{', '.join(names)})")
        return names[node.id]
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return _i64(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _expr(node.operand, names)
        if isinstance(inner, IntImm):
            return _i64(-inner.value)
        return BinaryOp("-", _i64(0), inner)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return BinaryOp(_BINOPS[type(node.op)], _expr(node.left, names),
                        _expr(node.right, names))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and isinstance(node.func.value, ast.Name) and not node.keywords:
        attr = node.func.attr
        if attr in ("int64", "int32") and len(node.args) == 1:
            value = _expr(node.args[0], names)
            if isinstance(value, IntImm):
                return value
        if attr in _CALLS and len(node.args) == 2:
            return BinaryOp(_CALLS[attr], _expr(node.args[0], names), _expr(node.args[1], names))
    raise MapError(f"unsupported expression {ast.unparse(node)!r} in the index map; expected "
                   "integer arithmetic (+, -, *, //, %) over the lambda's parameters")


_PREC = {"+": 1, "-": 1, "*": 2, "//": 2, "%": 2}


def _text(e: PrimExpr, parent: int = 0, right: bool = False) -> str:
    if isinstance(e, tir.Var):
        return e.name
    if isinstance(e, IntImm):
        s = str(e.value)
        return f"({s})" if e.value < 0 and parent else s
    assert isinstance(e, BinaryOp)
    p = _PREC[e.op]
    s = f"{_text(e.lhs, p)} {e.op} {_text(e.rhs, p, True)}"
    return f"({s})" if p < parent or (right and p == parent) else s


def _parse_node(node: ast.AST) -> IndexMap:
    lam = _lambda_of(node)
    a = lam.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs:
        raise MapError("the index map's lambda takes plain parameters only")
    params = tuple(p.arg for p in a.args)
    if len(set(params)) != len(params):
        raise MapError("the index map's lambda repeats a parameter")
    names = {p: tir.Var(p, I64) for p in params}
    body = lam.body
    elts = body.elts if isinstance(body, (ast.Tuple, ast.List)) else [body]
    if not elts:
        raise MapError("the index map has no output index")
    exprs = tuple(_expr(e, names) for e in elts)
    outs = ", ".join(_text(e) for e in exprs)
    if len(exprs) == 1:
        outs += ","
    text = f"lambda {', '.join(params)}: ({outs})"
    return IndexMap(params, tuple(names.values()), exprs, text)


def index_map_text(node: ast.AST) -> str:
    """The canonical text of the index map written at ``node`` (an ``ast``
    Lambda or ``T.index_map(...)`` call); MapError if it is not one."""
    return _parse_node(node).text


@lru_cache(maxsize=512)
def parse_index_map(text: str) -> IndexMap:
    """The IndexMap of a stored (or user-given) lambda text; MapError if unreadable."""
    if not isinstance(text, str):
        raise MapError(f"expected an index map, got {text!r}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise MapError(f"the index map {text!r} is not a lambda: {exc.msg}") from None
    return _parse_node(tree.body)


# ---------------------------------------------------------------------------
# iter-map detection: each output as a sum of splits
# ---------------------------------------------------------------------------

def _affine(e: PrimExpr, index: dict[tir.Var, int]) -> tuple[int, list[Term]] | None:
    """(base, terms) with ``e == base + sum(scale * split)``, or None."""
    if isinstance(e, IntImm):
        return e.value, []
    if isinstance(e, tir.Var):
        return 0, [Term(1, Split(index[e], 1, None))]
    assert isinstance(e, BinaryOp)
    a = _affine(e.lhs, index)
    b = _affine(e.rhs, index)
    if a is None or b is None:
        return None
    if e.op == "+":
        return a[0] + b[0], a[1] + b[1]
    if e.op == "-":
        if b[1]:
            return None
        return a[0] - b[0], a[1]
    if e.op == "*":
        if a[1] and b[1]:
            return None
        if not a[1] and not b[1]:
            return a[0] * b[0], []
        (c, _), (base, terms) = (a, b) if not a[1] else (b, a)
        if c <= 0:
            return None if c < 0 or terms else (0, [])
        return base * c, [Term(t.scale * c, t.split) for t in terms]
    if e.op in ("//", "%"):
        c = b[0]
        if b[1] or c <= 0:
            return None
        base, terms = a
        if not terms:
            return (base // c if e.op == "//" else base % c), []
        if base != 0 or len(terms) != 1:
            return None
        t = terms[0]
        s, sp = t.scale, t.split
        if e.op == "//":
            if s % c == 0:
                return 0, [Term(s // c, sp)]
            if s != 1:
                return None
            ext = None if sp.extent is None else -(-sp.extent // c)
            return 0, [Term(1, Split(sp.var, sp.lower * c, ext))]
        if c % s:
            return None
        m = c // s
        if sp.extent is not None and sp.extent <= m:
            return 0, [t]
        if sp.extent is not None and sp.extent % m:
            return None
        return 0, [Term(s, Split(sp.var, sp.lower, m))]
    return None


def _ceildiv(n: PrimExpr, d: int) -> PrimExpr:
    """ceil(n / d), spelt as TVM 0.27 prints it for a symbolic n: (n - n % -d) // d."""
    if d == 1:
        return n
    c = arith.const_int(n)
    if c is not None:
        return _i64(-(-c // d))
    return arith.simplify(BinaryOp("//", BinaryOp("-", n, BinaryOp("%", n, _i64(-d))), _i64(d)))


@dataclass(frozen=True)
class _Detected:
    """Each output's terms, sorted by decreasing scale, with resolved extents."""

    outputs: tuple[tuple[tuple[int, Split, PrimExpr], ...], ...]


def _detect(imap: IndexMap, shape: tuple[PrimExpr, ...]) -> _Detected | None:
    index = {v: k for k, v in enumerate(imap.param_vars)}
    outputs = []
    used: dict[int, list[tuple[int, PrimExpr]]] = {}
    for e in imap.exprs:
        r = _affine(e, index)
        if r is None:
            return None
        base, terms = r
        if base != 0:
            raise MapError(f"output index {_text(e)} starts at {base}, not 0")
        resolved = []
        for t in terms:
            sp = t.split
            ext = _ceildiv(shape[sp.var], sp.lower) if sp.extent is None else _i64(sp.extent)
            resolved.append((t.scale, sp, ext))
            used.setdefault(sp.var, []).append((sp.lower, ext))
        resolved.sort(key=lambda r: -r[0])
        if len({r[0] for r in resolved}) != len(resolved):
            return None
        for (s_hi, _, _), (s_lo, _, e_lo) in zip(resolved, resolved[1:]):
            if arith.const_int(e_lo) is None or s_lo * arith.const_int(e_lo) != s_hi:
                return None
        outputs.append(tuple(resolved))
    for splits in used.values():
        splits.sort(key=lambda s: s[0])
        for (lo1, e1), (lo2, _) in zip(splits, splits[1:]):
            c = arith.const_int(e1)
            if c is None or lo1 * c > lo2:
                return None  # overlapping splits of one variable
    return _Detected(tuple(outputs))


def _eval_range(e: PrimExpr, ranges: dict[tir.Var, tuple[int, int]]) -> tuple[int, int]:
    """Interval [lo, hi] of ``e`` over constant parameter ranges (TVM's EvalSet)."""
    if isinstance(e, IntImm):
        return e.value, e.value
    if isinstance(e, tir.Var):
        return ranges[e]
    assert isinstance(e, BinaryOp)
    a, b = _eval_range(e.lhs, ranges), _eval_range(e.rhs, ranges)
    if e.op == "+":
        return a[0] + b[0], a[1] + b[1]
    if e.op == "-":
        return a[0] - b[1], a[1] - b[0]
    if e.op == "*":
        v = [x * y for x in a for y in b]
        return min(v), max(v)
    if b[0] != b[1] or b[0] == 0:
        raise MapError(f"{_text(e)}: the divisor must be a non-zero constant")
    c = b[0]
    if e.op == "//":
        v = [a[0] // c, a[1] // c]
        return min(v), max(v)
    if c > 0 and a[0] // c == a[1] // c:
        return a[0] % c, a[1] % c
    return (0, c - 1) if c > 0 else (c + 1, 0)


def map_shape(imap: IndexMap, shape: tuple[PrimExpr, ...]) -> tuple[PrimExpr, ...] | None:
    """The output shape (TVM 0.27's MapShape), None when it depends on
    symbolic sizes phasec cannot bound; MapError for a map that does not fit."""
    if len(shape) != imap.ndim_in:
        raise MapError(f"the index map takes {imap.ndim_in} indices but the tensor has "
                       f"{len(shape)} dimensions")
    det = _detect(imap, shape)
    if det is not None:
        out = []
        for terms in det.outputs:
            if not terms:
                out.append(_i64(1))
                continue
            s, _, ext = terms[0]
            out.append(arith.simplify(BinaryOp("*", ext, _i64(s))) if s != 1 else ext)
        return tuple(out)
    consts = [arith.const_int(d) for d in shape]
    if any(c is None for c in consts):
        return None
    ranges = {v: (0, c - 1) for v, c in zip(imap.param_vars, consts)}
    out = []
    for e in imap.exprs:
        lo, hi = _eval_range(e, ranges)
        if lo != 0:
            raise MapError(f"output index {_text(e)} starts at {lo}, not 0")
        out.append(_i64(hi - lo + 1))
    return tuple(out)


# ---------------------------------------------------------------------------
# the inverse: output index -> input index and a padding predicate
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Inverse:
    """How to read an output position: per output index, its terms (scale,
    split, extent) by decreasing scale; per input variable, its splits by
    increasing lower factor."""

    outputs: tuple[tuple[tuple[int, Split, PrimExpr], ...], ...]
    splits: tuple[tuple[tuple[int, int, int], ...], ...]  # var -> ((lower, out k, term j), ...)
    #: per input variable: can a decoded value reach past the input (padding)?
    overflows: tuple[bool, ...]


def inverse(imap: IndexMap, shape: tuple[PrimExpr, ...]) -> Inverse:
    """The inverse of ``imap`` over ``shape``; MapError when the map is not
    invertible (it drops or repeats part of an input index)."""
    det = _detect(imap, shape)
    if det is None:
        raise MapError(f"the index map {imap.text} cannot be inverted: its outputs are not "
                       "sums of disjoint splits of the input indices")
    per_var: dict[int, list[tuple[int, int, int, PrimExpr, Split]]] = {}
    for k, terms in enumerate(det.outputs):
        for j, (_, sp, ext) in enumerate(terms):
            per_var.setdefault(sp.var, []).append((sp.lower, k, j, ext, sp))
    splits = []
    overflows: list[bool] = []
    for v in range(imap.ndim_in):
        parts = sorted(per_var.get(v, []), key=lambda p: p[0])
        n = arith.const_int(shape[v])
        if not parts:
            if n == 1:
                splits.append(())
                overflows.append(False)
                continue
            raise MapError(f"the index map {imap.text} drops input index {imap.params[v]}: it "
                           "cannot be inverted")
        expect = 1
        for lower, _, _, ext, _ in parts:
            if lower != expect:
                raise MapError(f"the index map {imap.text} drops part of input index "
                               f"{imap.params[v]} (no split at factor {expect}): it cannot "
                               "be inverted")
            c = arith.const_int(ext)
            expect = lower * c if c is not None else None
        top = parts[-1][4]
        if top.extent is not None and not (n is not None and expect is not None and expect >= n):
            raise MapError(f"the index map {imap.text} keeps only {expect} values of input index "
                           f"{imap.params[v]}: it cannot be inverted")
        splits.append(tuple((lower, k, j) for lower, k, j, _, _ in parts))
        # the largest decoded value is sum((extent - 1) * lower) + 1 == n: no padding
        top = BinaryOp("+", _i64(1), _i64(0))
        for lower, _, _, ext, _ in parts:
            top = BinaryOp("+", top, BinaryOp("*", BinaryOp("-", ext, _i64(1)), _i64(lower)))
        overflows.append(not arith.prove_equal(arith.simplify(top), shape[v]))
    return Inverse(det.outputs, tuple(splits), tuple(overflows))


def apply_inverse(inv: Inverse, out_index, shape, ops):
    """(input index, padding-free condition or None) of an output position.

    ``ops`` supplies the arithmetic (``floordiv``, ``floormod``, ``mul``,
    ``add``, ``less``, ``eq0``, ``and_``, ``const``) so that the kernel (TIR
    expressions) and the reference (numpy arrays) share this decoding.
    """
    values: dict[tuple[int, int], object] = {}
    conds = []
    for k, terms in enumerate(inv.outputs):
        o = out_index[k]
        for j, (s, _, ext) in enumerate(terms):
            q = o if s == 1 else ops.floordiv(o, s)
            values[(k, j)] = q if j == 0 else ops.floormod(q, ext)
        if terms and terms[-1][0] != 1:
            conds.append(ops.eq0(ops.floormod(o, terms[-1][0])))
    index = []
    for v, parts in enumerate(inv.splits):
        acc = None
        for lower, k, j in parts:
            term = values[(k, j)] if lower == 1 else ops.mul(values[(k, j)], lower)
            acc = term if acc is None else ops.add(acc, term)
        if acc is None:
            acc = ops.const(0)
        index.append(acc)
        if parts and inv.overflows[v]:
            conds.append(ops.less(acc, shape[v]))
    cond = None
    for c in conds:
        cond = c if cond is None else ops.and_(cond, c)
    return index, cond

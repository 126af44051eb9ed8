"""The random program generator behind :func:`phasec.testing.modules`.

Programs are built directly as IR, one hypothesis draw per decision, and
every decision is a choice among a short list whose first element is the
simplest (the first operand in scope, ``R.add``, no dataflow block, no
constant...). Hypothesis shrinks draws towards zero and deletes them, so a
minimal failing program has few bindings, few functions and plain operators.

A program is a module with a ``main`` function and helpers it calls. Bodies
are lists of *statements*, each adding one or a few bindings: an operator
call, a constant, a tuple and its items, a repeated computation (for CSE), a
call of a module-level helper (created on demand, shape-polymorphic when its
dims are generalized to symbolic ones), an if/else, a nested function that
captures variables and is called, a function returned by a nested function,
a packed call (``R.call_packed`` only in impure or force_pure functions, and
never in a dataflow block), a ``R.match_cast`` that introduces a symbolic
dimension, and a bounded recursion (a module-level or nested function that
calls itself ``k`` times, ``k`` an int64 input in ``[-3, 3]``).

Every generated module is checked by the verifier before it is returned: a
violation there is a bug in this generator and raises :class:`GeneratorError`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st

from phasec import verifier
from phasec.ir import tir
from phasec import arith
from phasec.script.builder import NameTable
from phasec.ir.expr import (
    Binding, BindingBlock, Call, Constant, DataflowBlock, DataflowVar, Expr, ExternFunc,
    Function, If, MatchCast, Op, SeqExpr, Tuple, TupleGetItem, Var, VarBinding,
)
from phasec.op.infer import infer_struct_info
from phasec.ir.module import IRModule
from phasec.ir.node import set_field
from phasec.op import InferContext, OpPattern, call_op, find_op
from phasec.ir.struct_info import StructInfo, TensorStructInfo, TupleStructInfo
from phasec.testing._gen_functions import PARAM_NAMES, FunctionStatements, Helper, syms_of
from phasec.testing._opgen import OpGen
from phasec.testing._optable import all_op_gens
from phasec.testing._values import (
    BOOL, FLOAT, INPUT_RANGE, INT, INT_INPUT_RANGE, OPAQUE, TUPLE, Val, const_dim, hull, iv_ok,
    numel_max, shapes_equal,
)
from phasec.testing.errors import GeneratorError
from phasec.testing.packed_funcs import DPS_FUNCS, PACKED_FUNCS

__all__ = ["GenConfig", "generate_module", "FORCE_PURE", "SWARM_OPS", "SWARM_FEATURES"]

FORCE_PURE = "relax.force_pure"
_SYM_NAMES = ("n", "m", "p", "q")
_PARAM_DTYPES = ("float32", "float32", "float32", "int32", "bool")
#: parameters ``main`` may get beyond ``max_params``, made to fit an operator
_MAX_EXTRA_PARAMS = 3


@dataclass(frozen=True)
class GenConfig:
    """What :func:`phasec.testing.modules` may generate.

    ``max_bindings`` bounds the statements of each function body (a statement
    adds one to three bindings); ``max_functions`` the module-level functions;
    ``ops`` restricts the operators (registry names, ``None``: every operator
    the generator knows).

    ``swarm`` (swarm testing, Groce et al., ISSTA 2012): each module draws a
    small subset of the operators (one to :data:`SWARM_OPS`) and of the
    features (control flow, closures, packed calls, dataflow blocks,
    constants, symbolic dimensions), so programs are dense in a few
    operators; one module in five keeps the whole pool. ``focus``: operators
    the subset is drawn from three times in four (the operators a pass under
    test rewrites). With ``swarm`` a binary operator takes two distinct
    operands when it can (``x - x`` hides a swap), and half the operator
    calls are *chains*: the call (the producer) and then one or two
    elementwise or broadcast operators on its result (the epilogue, from the
    module's subset when it has such operators, else from the whole pool),
    in a dataflow block when the module has them: the groups FuseOps fuses,
    which calls drawn independently rarely form (``chains=False``: none).
    """

    max_bindings: int = 8
    max_functions: int = 3
    max_params: int = 3
    max_rank: int = 4
    max_dim: int = 4
    max_depth: int = 2
    symbolic: bool = True
    control_flow: bool = True
    closures: bool = True
    packed: bool = True
    dataflow: bool = True
    constants: bool = True
    ops: frozenset[str] | None = None
    swarm: bool = False
    focus: frozenset[str] | None = None
    chains: bool = True


#: the largest operator subset of a swarm module
SWARM_OPS = 4
#: the features a swarm module may leave out
SWARM_FEATURES = ("control_flow", "closures", "packed", "dataflow", "constants", "symbolic")


class ModuleGen:
    """Module-wide state: the functions made so far and their signatures."""

    def __init__(self, draw: Callable[[st.SearchStrategy], Any], cfg: GenConfig) -> None:
        self.draw = draw
        self.cfg = cfg
        self.functions: dict[str, Function] = {}
        self.globals: dict[str, StructInfo] = {}
        self.helpers: list[Helper] = []
        self.global_names = NameTable(["main"])
        self.pending = 0  # helpers being generated (not yet in functions)
        self.op_gens = [g for g in all_op_gens() if cfg.ops is None or g.name in cfg.ops]
        #: operators that can follow a producer in a fusable chain (see GenConfig)
        self.epilogue_gens = [g for g in self.op_gens if _is_epilogue(g.name)]

    @property
    def ctx(self) -> InferContext:
        return InferContext(self.globals)

    def can_add_function(self) -> bool:
        return len(self.functions) + self.pending + 1 < self.cfg.max_functions

    def add_function(self, name: str, func: Function) -> None:
        self.functions[name] = func
        self.globals[name] = func.struct_info

    def draw_swarm(self) -> None:
        """Swarm testing: this module's operators and features (see :class:`GenConfig`).

        Every draw shrinks to the simplest: one operator, the pool's first
        (``R.add``) or the focus's first, and every feature off."""
        cfg = self.cfg
        if self.draw(st.integers(0, 4)) == 4:
            return  # the whole pool and every feature allowed
        off = {f: False for f in SWARM_FEATURES if not self.draw(st.booleans())}
        self.cfg = dataclasses.replace(cfg, **off)
        pool = self.op_gens
        focus = [g for g in pool if cfg.focus is not None and g.name in cfg.focus]
        rnd = self.draw(_RANDOM)
        picked: list[OpGen] = []
        for _ in range(self.draw(st.integers(1, SWARM_OPS))):
            src = focus if focus and rnd.random() < 0.75 else pool
            if src:
                gen = src[rnd.randrange(len(src))]
                if gen not in picked:
                    picked.append(gen)
        if picked:
            self.op_gens = picked

    def build(self) -> IRModule:
        if self.cfg.swarm:
            self.draw_swarm()
        mode = self.draw(st.sampled_from(["pure", "impure", "force_pure"]))
        gen = FuncGen(self, "main", mode=mode, is_main=True)
        gen.draw_main_params()
        func = gen.finish_function(gen.gen_body(self.cfg.max_bindings), {"global_symbol": "main"})
        functions = dict(self.functions)
        functions["main"] = func
        return IRModule(functions)


class FuncGen(FunctionStatements):
    """Generates the body of one function (and, through sub-generators, the
    nested functions and branches inside it)."""

    def __init__(self, mg: ModuleGen, name: str, *, mode: str = "pure", is_main: bool = False,
                 parent: "FuncGen | None" = None, captured: Sequence[Val] = (),
                 nest: int = 0) -> None:
        self.mg = mg
        self.cfg = mg.cfg
        self.name = name
        self.mode = mode
        self.is_main = is_main
        self.nest = nest
        # nested functions share names (readable, unique) with their parent
        self.names: NameTable = parent.names if parent else NameTable()
        self.sym_names: NameTable = parent.sym_names if parent else NameTable()
        self.body_syms: set[tir.Var] = set()  # defined by match_cast: may not escape
        self.captured = list(captured)
        self.params: list[Var] = []
        self.param_vals: list[Val] = []
        self.scope: list[Val] = []
        self.blocks: list[BindingBlock] = []
        self.cur: list[Binding] = []
        self.in_df = False
        self.df_has_output = False
        self.calls: list[tuple[Call, Val]] = []  # op calls made, for "repeat"
        self.counter_val: Val | None = None
        self.flag_val: Val | None = None
        self.ret_val: Val | None = None  # set by result()

    # -- drawing helpers -----------------------------------------------------------
    def draw(self, strategy: st.SearchStrategy) -> Any:
        return self.mg.draw(strategy)

    def integers(self, lo: int, hi: int) -> int:
        """An integer in [lo, hi] (for the registry's draw hooks)."""
        return self.draw(st.integers(lo, hi))

    def boolean(self) -> bool:
        return self.draw(st.booleans())

    def pick(self, items: Sequence[Any]) -> Any:
        if not items:
            raise GeneratorError("internal: nothing to choose from")
        if len(items) == 1:
            return items[0]
        return items[self.draw(st.integers(0, len(items) - 1))]

    def visible(self, pred: Callable[[Val], bool] = lambda v: True,
                kinds: Sequence[str] = (FLOAT, INT, BOOL)) -> list[Val]:
        """Values in scope of these kinds satisfying ``pred`` (params first)."""
        out = []
        for v in (*self.captured, *self.param_vals, *self.scope):
            if v.kind in kinds and pred(v):
                out.append(v)
        return out

    def nonlocal_visible(self, kinds: Sequence[str] = (FLOAT, INT, BOOL)) -> list[Val]:
        return self.visible(lambda v: not v.local, kinds)

    # -- constants -----------------------------------------------------------------
    def const_shape(self, x: Val) -> tuple:
        options: list[tuple] = [()]
        last = const_dim(x.shape[-1]) if x.rank else None
        if last is not None:
            options.append((last,))
        dims = [const_dim(d) for d in x.shape]
        if x.rank >= 2 and all(d is not None for d in dims):
            options.append(tuple(dims))
        return self.pick(options)

    def constant(self, shape: Sequence[int], rng: tuple[float, float], dtype: str) -> Val:
        """An inline constant with values drawn from ``rng`` (a leaf operand)."""
        seed = self.draw(st.integers(0, 2**16))
        gen = np.random.default_rng(seed)
        if dtype.startswith("int"):
            data = gen.integers(int(rng[0]), int(rng[1]) + 1, size=shape).astype(dtype)
        else:
            # multiples of 1/16 print exactly and stay readable in reproducers
            data = np.round(gen.uniform(rng[0], rng[1], size=shape) * 16) / 16
            data = np.clip(data, rng[0], rng[1]).astype(dtype)
        kind = INT if dtype.startswith("int") else FLOAT
        lo, hi = (float(data.min()), float(data.max())) if data.size else (0.0, 0.0)
        return Val(Constant(data), kind, lo, hi)

    def int_constant(self, shape: Sequence[int], lo: int, hi: int) -> Constant:
        return self.constant(shape, (lo, hi), "int64").expr

    # -- emitting ------------------------------------------------------------------
    def _bind(self, value: Expr, sinfo: StructInfo, hint: str,
              binding: Callable[[Var], Binding] | None = None) -> tuple[Var, bool]:
        output = True
        if self.in_df:
            output = self.draw(st.booleans())
        if self.in_df and not output:
            var: Var = DataflowVar(self.names.fresh("lv"), sinfo)
        else:
            var = Var(self.names.fresh("gv" if self.in_df else hint), sinfo)
            self.df_has_output = self.df_has_output or self.in_df
        self.cur.append(binding(var) if binding else VarBinding(var, value))
        return var, self.in_df and not output

    def emit(self, value: Expr, kind: str, iv: tuple[float, float] | None,
             hint: str = "v", fields: tuple = ()) -> Val:
        """Bind ``value`` (struct info already set) to a fresh variable."""
        if value.struct_info is None:
            set_field(value, "struct_info", infer_struct_info(value, self.mg.ctx))
        var, local = self._bind(value, value.struct_info, hint)
        lo, hi = iv if iv is not None else (0.0, 1.0)
        sinfo = value.struct_info
        if kind in (FLOAT, INT, BOOL) and not (isinstance(sinfo, TensorStructInfo)
                                              and sinfo.shape is not None):
            kind = OPAQUE  # inference lost the shape: keep it out of later operands
        elif kind in (FLOAT, INT, BOOL) and any(arith.const_int(d) == 0 for d in sinfo.shape):
            # an empty tensor (R.arange(0, 0)): a result, never a later operand, as
            # the draw declarations build operands for tensors with elements
            kind = OPAQUE
        val = Val(var, kind, float(lo), float(hi), fields=fields, local=local)
        self.scope.append(val)
        if isinstance(value, Call) and kind != TUPLE:
            self.calls.append((value, val))
        return val

    def emit_tuple(self, value: Expr, kinds: Sequence[str], iv: tuple[float, float]) -> Val:
        fields = tuple((k, iv[0], iv[1]) for k in kinds)
        return self.emit(value, TUPLE, (0.0, 0.0), fields=fields)

    def get_item(self, tup: Val, index: int) -> Val:
        kind, lo, hi = tup.fields[index]
        if kind not in (FLOAT, INT, BOOL):
            kind = OPAQUE  # a nested tuple: its fields are not tracked
        item = TupleGetItem(tup.expr, index)
        return self.emit(item, kind, (lo, hi))

    # -- parameters ------------------------------------------------------------------
    def add_param(self, name: str, sinfo: StructInfo, kind: str,
                  iv: tuple[float, float]) -> Val:
        var = Var(self.names.fresh(name), sinfo)
        self.params.append(var)
        val = Val(var, kind, float(iv[0]), float(iv[1]))
        self.param_vals.append(val)
        return val

    def draw_main_params(self) -> None:
        cfg = self.cfg
        pool: list[Any] = []
        for i in range(3):
            if i and not self.more(2):
                break
            if cfg.symbolic and self.draw(st.booleans()):
                pool.append(tir.Var(self.sym_names.fresh(_SYM_NAMES[len(pool) % 4])))
            else:
                pool.append(self.draw(st.integers(1, cfg.max_dim)))
        # the first parameter is a float tensor, so every op has an operand
        for i in range(cfg.max_params):
            if i and not self.more(2):
                break
            rank = self.draw(st.integers(1, cfg.max_rank))
            shape = tuple(self.pick(pool + [1]) for _ in range(rank))
            dtype = "float32" if i == 0 else self.draw(st.sampled_from(_PARAM_DTYPES))
            self.add_param(PARAM_NAMES[i % len(PARAM_NAMES)],
                           TensorStructInfo(shape, dtype), *_input_kind(dtype))

    def counter(self) -> Val | None:
        """An int64 scalar in [-3, 3] (a recursion count): main adds a parameter."""
        found = self.visible(lambda v: v.dtype == "int64" and v.rank == 0
                             and INT_INPUT_RANGE[0] <= v.lo and v.hi <= INT_INPUT_RANGE[1],
                             kinds=(INT,))
        if found:
            return found[0]
        if self.is_main:
            self.counter_val = self.add_param("k", TensorStructInfo((), "int64"), INT,
                                              INT_INPUT_RANGE)
            return self.counter_val
        return None

    # -- bodies ------------------------------------------------------------------------
    def open_dataflow(self) -> None:
        self.close_block()
        self.in_df = True
        self.df_has_output = False

    def close_block(self) -> None:
        if self.in_df:
            if self.cur and not self.df_has_output:
                # a dataflow block must hand something out: alias its last value
                last = next(v for v in reversed(self.scope) if v.local)
                var = Var(self.names.fresh("gv"), last.sinfo)
                self.cur.append(VarBinding(var, last.expr))
                self.scope.append(Val(var, last.kind, last.lo, last.hi, last.fields))
            if self.cur:
                self.blocks.append(DataflowBlock(self.cur))
            # dataflow variables die with their block
            self.scope = [v for v in self.scope if not v.local]
            self.in_df = False
        elif self.cur:
            if self.blocks and type(self.blocks[-1]) is BindingBlock:
                # adjacent plain blocks print as one; keep them one
                self.cur = [*self.blocks.pop().bindings, *self.cur]
            self.blocks.append(BindingBlock(self.cur))
        self.cur = []

    def gen_body(self, budget: int, allow_dataflow: bool = True) -> SeqExpr:
        """Statements, then the result (a value in scope), as a SeqExpr."""
        use_df = allow_dataflow and self.cfg.dataflow
        budget = max(budget, 1)
        for count in range(1, budget + 1):
            # each statement and the "another one?" after it are one span (not
            # a count up front): deleting the span deletes exactly that
            # statement and leaves the ones after it drawn as they were
            if not self.statement(use_df, ask_more=count < budget):
                break
        self.close_block()
        return SeqExpr(self.blocks, self.result())

    def more(self, weight: int = 8) -> bool:
        """Continue a list? True with probability ~weight/(weight+2); shrinks to False."""
        return self.draw(st.integers(0, weight + 1)) >= 2

    def result(self) -> Expr:
        def escapes(v: Val) -> bool:
            return bool(syms_of(v.sinfo) & self.body_syms)

        # a tensor of unknown shape (unique, nonzero...) may be the result, so
        # that later passes and the VM compute it rather than drop it
        cands = [v for v in self.visible(
            lambda v: not escapes(v) and (v.kind != OPAQUE
                                          or isinstance(v.sinfo, TensorStructInfo)),
            kinds=(FLOAT, INT, BOOL, TUPLE, OPAQUE))]
        cands.reverse()
        first = cands[0]  # the most recent value: the program's last result is used
        tensors = [v for v in cands if v.is_tensor]
        # a pair of tensors (a tuple of tuples would lose the inner fields' kinds)
        if first.is_tensor and len(tensors) > 1 and self.draw(st.booleans()):
            second = self.pick(tensors)
            tup = Tuple([first.expr, second.expr])
            set_field(tup, "struct_info", TupleStructInfo([first.sinfo, second.sinfo]))
            self.ret_val = Val(tup, TUPLE, fields=((first.kind, first.lo, first.hi),
                                                   (second.kind, second.lo, second.hi)))
            return tup
        self.ret_val = first
        return first.expr

    def finish_function(self, body: SeqExpr, attrs: dict[str, Any]) -> Function:
        if self.mode == "force_pure":
            attrs = {**attrs, FORCE_PURE: True}
        return Function(self.params, body, None, self.mode != "impure", attrs)

    # -- statements ----------------------------------------------------------------------
    def statement(self, use_df: bool = False, ask_more: bool = False) -> bool:
        """One statement, drawn as one unit (a span hypothesis can delete);
        with ``ask_more``, the span ends with "another statement?", returned."""
        return self.mg.draw(_statement_span(self, use_df, ask_more))

    def _one_statement(self, use_df: bool) -> None:
        """The statement itself (see :meth:`statement`)."""
        # in a dataflow block or not, drawn for each statement (not a
        # "switch" draw: deleting a statement while shrinking then
        # leaves the block kind of the following ones as it was)
        if use_df and self.draw(st.booleans()) != self.in_df:
            if self.in_df:
                self.close_block()
            else:
                self.open_dataflow()
        # half the statements are operator calls: programs are
        # made of operators, and each of ~100 must come up regularly
        # (0, the shrink target, is the plain choice of a statement kind)
        if self.draw(st.integers(0, 1)) == 1:
            # swarm: half the calls start a chain (see GenConfig); no, the
            # shrink target, leaves the statement one call
            chain = (self.cfg.swarm and self.cfg.chains and bool(self.mg.epilogue_gens)
                     and self.draw(st.booleans()))
            if chain and use_df and not self.in_df:
                self.open_dataflow()
            made = self._op_call()
            if made is not None:
                if chain and isinstance(made, Val) and made.is_tensor:
                    self._epilogue(made)
                return
        kinds = _STATEMENTS
        start = self.draw(st.integers(0, len(kinds) - 1))
        for j in range(len(kinds)):
            if getattr(self, "_stmt_" + kinds[(start + j) % len(kinds)])():
                return
        raise GeneratorError("internal: no statement applies")

    def _stmt_op(self) -> bool:
        return self._op_call() is not None

    def _epilogue(self, x: Val) -> None:
        """One or two elementwise or broadcast calls, each on the previous
        result, starting from ``x`` (a chain, see :class:`GenConfig`)."""
        gens = [g for g in self.mg.op_gens if _is_epilogue(g.name)] or self.mg.epilogue_gens
        for _ in range(1 + self.draw(st.integers(0, 1))):
            fits = [g for g in gens if g.accepts(self, x)]
            made = self.pick(fits).build(self, x) if fits else None
            if made is None:
                return
            x = made

    def _op_call(self) -> Val | None:
        """One operator call, its value (None: no operator applies). The
        operator is drawn first, uniformly over the
        table (coverage by design: every operator is drawn about equally
        often, whatever its operand constraints); when nothing in scope fits
        it, an operand is built to fit (a new parameter of ``main``, else a
        constant, made positive through ``exp`` where the operator needs it)."""
        gens = self.mg.op_gens
        if not gens:
            return None
        # hypothesis favours some integers (small ones, powers of two, the
        # bounds, values it drew before): over 1,300 draws of an index among
        # 169, an integer left 17 indices out (a wide integer taken modulo,
        # 20); its random module, hypothesis-controlled (replayed and shrunk
        # like any draw; 0, R.add, is still the simplest), left none
        start = self.draw(_RANDOM).randrange(len(gens))
        first: OpGen = gens[start]
        cands = self.visible(lambda v: first.accepts(self, v))
        if not cands:
            fitted = self._fit_operand(first)
            cands = [fitted] if fitted is not None else []
        # build() returns None when the drawn operands do not suit the
        # operator after all (a result interval out of bounds...): try on
        made = first.build(self, self.pick(cands)) if cands else None
        for j in range(1, len(gens)):
            if made is not None:
                break
            gen: OpGen = gens[(start + j) % len(gens)]
            cands = self.visible(lambda v, gen=gen: gen.accepts(self, v))
            made = gen.build(self, self.pick(cands)) if cands else None
        return made

    def _fit_operand(self, gen: OpGen) -> Val | None:
        """A first operand made for ``gen`` (None when none fits)."""
        wanted = gen.operand(self)
        if wanted is None:
            return None
        kind, shape = wanted
        val = self._fresh_operand(kind, shape)
        if gen.accepts(self, val):
            return val
        adapted = gen.adapt(self, val)
        if adapted is not None and gen.accepts(self, adapted):
            return adapted
        return None

    def fresh_param(self, kind: str, shape: tuple) -> Val | None:
        """A new parameter of ``main`` of this kind and shape; None outside
        ``main``, past the parameter limit, or when a dimension is defined in
        the body (by a match_cast: a parameter cannot use it)."""
        if not (self.is_main and len(self.params) < self.cfg.max_params + _MAX_EXTRA_PARAMS):
            return None
        if syms_of(TensorStructInfo(shape, "float32")) & self.body_syms:
            return None
        dtype = {FLOAT: "float32", INT: "int32", BOOL: "bool"}[kind]
        name = PARAM_NAMES[len(self.params) % len(PARAM_NAMES)]
        return self.add_param(name, TensorStructInfo(shape, dtype), *_input_kind(dtype))

    def _fresh_operand(self, kind: str, shape: tuple[int, ...]) -> Val:
        """A new parameter of ``main`` (at most :data:`_MAX_EXTRA_PARAMS` more),
        else a constant, of this kind and shape."""
        dtype = {FLOAT: "float32", INT: "int32", BOOL: "bool"}[kind]
        if self.is_main and len(self.params) < self.cfg.max_params + _MAX_EXTRA_PARAMS:
            name = PARAM_NAMES[len(self.params) % len(PARAM_NAMES)]
            return self.add_param(name, TensorStructInfo(shape, dtype), *_input_kind(dtype))
        if kind == BOOL:
            c = self.constant(shape, INPUT_RANGE, "float32")
            zero = Constant(np.zeros((), dtype="float32"))
            return self.emit(call_op("relax.greater", c.expr, zero), BOOL, (0, 1), hint="b")
        if kind == INT:
            return self.constant(shape, INT_INPUT_RANGE, "int32")
        return self.constant(shape, INPUT_RANGE, "float32")

    def _stmt_const(self) -> bool:
        if not self.cfg.constants:
            return False
        shapes = [tuple(const_dim(d) for d in v.shape) for v in self.visible(kinds=(FLOAT,))]
        shapes = [s for s in shapes if all(d is not None for d in s)]
        shape = self.pick([()] + shapes)
        c = self.constant(shape, INPUT_RANGE, "float32")
        self.emit(c.expr, FLOAT, (c.lo, c.hi), hint="c")
        return True

    def _stmt_tuple(self) -> bool:
        tuples = self.visible(kinds=(TUPLE,))
        if tuples and self.draw(st.booleans()):
            tup = self.pick(tuples)
            self.get_item(tup, self.pick(list(range(len(tup.fields)))))
            return True
        vals = self.visible()
        a, b = self.pick(vals), self.pick(vals)
        tup = Tuple([a.expr, b.expr])
        fields = ((a.kind, a.lo, a.hi), (b.kind, b.lo, b.hi))
        t = self.emit(tup, TUPLE, (0.0, 0.0), hint="t", fields=fields)
        self.get_item(t, self.pick([0, 1]))
        return True

    def _stmt_repeat(self) -> bool:
        """Compute an earlier operator call again (work for CSE)."""
        visible = {id(v.expr) for v in self.visible(kinds=(FLOAT, INT, BOOL, TUPLE))}
        cands = [(c, v) for c, v in self.calls
                 if isinstance(c.op, Op) and _is_compute(c.op.name)
                 and all(id(var) in visible for var in _vars_in(c.args))]
        if not cands:
            return False
        call, val = self.pick(cands)
        again = Call(call.op, call.args, call.attrs, call.sinfo_args, struct_info=call.struct_info)
        self.emit(again, val.kind, (val.lo, val.hi))
        return True


    def _stmt_if(self) -> bool:
        if self.in_df or not self.cfg.control_flow or self.nest >= self.cfg.max_depth:
            return False
        if not (self.is_main or self.visible(kinds=(FLOAT, INT))):
            return False
        cond = self.condition()
        target = self.pick(self.visible(kinds=(FLOAT, INT)) or self.visible())
        branches = []
        results = []
        for _ in range(2):
            sub = self.branch()
            for _ in range(2):
                if not sub.more(2):
                    break
                sub.statement()
            sub.close_block()
            same = sub.visible(lambda v: v.kind == target.kind and v.dtype == target.dtype
                               and shapes_equal(v.shape, target.shape))
            res = sub.pick(same)
            branches.append(SeqExpr(sub.blocks, res.expr))
            results.append(res)
        value = If(cond.expr, branches[0], branches[1])
        set_field(value, "struct_info", target.sinfo)
        iv = hull(*((r.lo, r.hi) for r in results))
        self.emit(value, target.kind, iv, hint="r")
        return True


    def _stmt_packed(self) -> bool:
        if not self.cfg.packed:
            return False
        xs = self.visible(kinds=(FLOAT,))
        if not xs:
            return False
        x = self.pick(xs)
        forms = ["pure", "dps"]
        if self.mode != "pure" and not self.in_df:
            # the only place an impure packed call may go: draw it often there
            forms += ["impure"] * 4
        form = self.pick(forms)
        table = DPS_FUNCS if form == "dps" else PACKED_FUNCS
        names = [n for n, (_, f) in table.items() if iv_ok(f(x.lo, x.hi))]
        name = self.pick(names)
        iv = table[name][1](x.lo, x.hi)
        if form == "pure":
            call = call_op("call_pure_packed", ExternFunc(name), x.expr, sinfo_args=[x.sinfo])
        elif form == "dps":
            call = call_op("call_dps_packed", ExternFunc(name), Tuple([x.expr]),
                           sinfo_args=[x.sinfo])
        else:
            call = Call(ExternFunc(name), [x.expr], sinfo_args=[x.sinfo], struct_info=x.sinfo)
        self.emit(call, FLOAT, iv, hint="p")
        return True

    def _stmt_match_cast(self) -> bool:
        """Refine a constant dimension to a new symbolic variable."""
        if not self.cfg.symbolic:
            return False
        xs = self.visible(lambda v: any(const_dim(d) is not None for d in v.shape))
        if not xs:
            return False
        x = self.pick(xs)
        axis = self.pick([i for i, d in enumerate(x.shape) if const_dim(d) is not None])
        sym = tir.Var(self.sym_names.fresh("k"))
        self.body_syms.add(sym)
        shape = tuple(sym if i == axis else d for i, d in enumerate(x.shape))
        sinfo = TensorStructInfo(shape, x.dtype)
        var, local = self._bind(x.expr, sinfo, "mc", lambda v: MatchCast(v, x.expr, sinfo))
        self.scope.append(Val(var, x.kind, x.lo, x.hi, local=local))
        return True

    # -- pieces of statements ------------------------------------------------------------
    def branch(self) -> "FuncGen":
        """A generator for one if-branch: same function, nested scope."""
        sub = FuncGen(self.mg, self.name, mode=self.mode, is_main=False, parent=self,
                      captured=self.nonlocal_visible(), nest=self.nest + 1)
        sub.body_syms = self.body_syms
        sub.calls = []
        return sub

    def condition(self) -> Val:
        """A bool scalar to branch on."""
        opts: list[Any] = self.visible(lambda v: v.rank == 0, kinds=(BOOL,))
        if self.visible(kinds=(FLOAT, INT)):
            opts.append("compare")
        if self.is_main:
            opts.append("param")
        choice = self.pick(opts)
        if choice == "param":
            if self.flag_val is None:
                self.flag_val = self.add_param("flag", TensorStructInfo((), "bool"), BOOL,
                                               (0.0, 1.0))
            return self.flag_val
        if choice == "compare":
            x = self.pick(self.visible(kinds=(FLOAT, INT)))
            if x.rank:
                count = numel_max(x.shape, self.cfg.max_dim)
                iv = (min(x.lo, count * x.lo), max(x.hi, count * x.hi))
                x = self.emit(call_op("relax.sum", x.expr), x.kind, iv, hint="s")
            zero = Constant(np.zeros((), dtype=x.dtype))
            return self.emit(call_op("relax.greater", x.expr, zero), BOOL, (0, 1), hint="cond")
        return choice


    # -- module-level helpers -----------------------------------------------------------


# statement kinds, simplest first (hypothesis shrinks towards the first)
_STATEMENTS = ("op", "const", "tuple", "repeat", "call", "if", "closure", "packed",
               "match_cast", "loop", "factory")


@st.composite
def _statement_span(draw: Any, g: FuncGen, use_df: bool, ask_more: bool) -> bool:
    """One statement of ``g`` drawn as one span (see :meth:`FuncGen.statement`).
    Defined once here: hypothesis reads a composite's source when it is
    defined (~1.4 ms), which per statement was a sixth of generating a module."""
    mg = g.mg
    outer, mg.draw = mg.draw, draw
    try:
        g._one_statement(use_df)
        return ask_more and g.more()
    finally:
        mg.draw = outer


def _is_epilogue(op: str) -> bool:
    """Whether FuseOps fuses ``op`` after a producer (elementwise or broadcast)."""
    opdef = find_op(op)
    return opdef is not None and opdef.pattern in (OpPattern.ELEMWISE, OpPattern.BROADCAST)


#: hypothesis's random module: each call a recorded draw (replayed, shrunk)
_RANDOM = st.randoms(use_true_random=False)


def _is_compute(name: str) -> bool:
    """A pure compute operator (a call ``repeat`` may compute again anywhere)."""
    opdef = find_op(name)
    return opdef is not None and opdef.category == "compute" and opdef.pure


def _vars_in(exprs: Sequence[Expr]) -> list[Var]:
    out: list[Var] = []
    stack = list(exprs)
    while stack:
        e = stack.pop()
        if isinstance(e, Var):
            out.append(e)
        elif isinstance(e, Tuple):
            stack.extend(e.fields)
    return out


def _input_kind(dtype: str) -> tuple[str, tuple[float, float]]:
    if dtype == "bool":
        return BOOL, (0.0, 1.0)
    if dtype.startswith("int"):
        return INT, (float(INT_INPUT_RANGE[0]), float(INT_INPUT_RANGE[1]))
    return FLOAT, INPUT_RANGE


def generate_module(draw: Callable[[st.SearchStrategy], Any], cfg: GenConfig) -> IRModule:
    """Draw one ingestion-phase module (verified; see :class:`GeneratorError`)."""
    mod = ModuleGen(draw, cfg).build()
    errors = [d for d in verifier.check(mod) if d.is_error]
    if errors:
        text = "\n".join(str(d) for d in errors[:5])
        raise GeneratorError(f"phasec.testing generated an ill-formed module (a generator bug):\n"
                             f"{text}\n{mod.script()}")
    return mod

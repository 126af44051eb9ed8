"""A structure-aware fuzzer of ONNX graphs, judged against ONNX Runtime.

Each case is a small graph (one to four nodes) over the operators the
frontend converts (drawn from its registry), built from the operators'
ONNX schemas: inputs of the types the schema allows, taken from earlier
values or made constant initializers, attributes of the schema's types with
hostile values (negative, zero, huge, NaN/Inf, empty lists, unknown
strings), shapes with zero-size axes; a few cases are *near-valid*: a
duplicated output name, an undefined input, an attribute of the wrong type,
an opset that does not exist, no graph outputs.

ONNX Runtime is the reference. Per case:

* a **crash** -- any exception that is not a :class:`phasec.errors.PhasecError`,
  or a message saying "internal error" -- is always a failure;
* phasec's **unsupported** verdict (:class:`~phasec.frontend.UnsupportedModelError`:
  an operator, attribute or dtype it does not implement) is no verdict, and
  so is ONNX Runtime's refusal of a valid model it has no kernel for
  (``_ORT_LIMITS``);
* otherwise the verdicts must **agree**: phasec imports, compiles and runs
  the model exactly when ONNX Runtime creates a session and runs it, and
  then the outputs match (shapes, dtypes, values within tolerance; NaN
  where ORT has NaN). A run that fails is a refusal on either side: an
  integer ``Div``/``Mod`` by a zero computed at run time fails in both
  (ORT's "Integer division by zero", phasec's DivisionByZeroError).

``python -m phasec.frontend.onnx.fuzz --minutes 10`` runs a campaign and
prints its figures (cases, accepted, refused, unsupported, disagreements,
crashes) and the first disagreements and crashes, each with the seed that
rebuilds it (``--seed S --cases 1``); ``tests/frontend/test_onnx_fuzz.py``
runs a short hypothesis-driven version.
"""

from __future__ import annotations

import argparse
import math
import random
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

import phasec
from phasec.errors import PhasecError
from phasec.frontend.errors import UnsupportedModelError
from phasec.frontend.onnx import from_onnx
from phasec.frontend.onnx._registry import CONVERTERS

__all__ = ["Source", "RandomSource", "Case", "Verdict", "draw_case", "judge", "main",
           "ort_verdict", "phasec_verdict",
           "FUZZ_OPS"]

#: The opset the cases import (the newest ONNX Runtime and onnx both know).
OPSET = 21

#: Operators left out, and why: results that are not functions of the
#: inputs (Dropout's mask in training mode), or operators whose ONNX schema
#: needs inputs the fuzzer cannot make meaningfully (attention's many
#: optional operands); the rest of the registry is drawn.
_SKIP = {"Dropout": "random in training mode", "Attention": "too many coupled operands",
         "RotaryEmbedding": "coupled cache operands", "CausalConvWithState": "not in ORT",
         "SwiGLU": "not in ORT"}


def FUZZ_OPS() -> list[str]:  # noqa: N802 - read like a table
    """The operators the fuzzer draws: the frontend's registry, less ``_SKIP``
    and those without a schema at :data:`OPSET`."""
    import onnx.defs

    ops = []
    for op in sorted(CONVERTERS):
        if op in _SKIP:
            continue
        try:
            onnx.defs.get_schema(op, OPSET, "")
        except Exception:  # noqa: BLE001 - SchemaError: not at this opset
            continue
        ops.append(op)
    return ops


class Source(Protocol):
    """Where the fuzzer's choices come from (hypothesis in the tests, a seeded
    ``random.Random`` in campaigns)."""

    def integers(self, lo: int, hi: int) -> int: ...


class RandomSource:
    """A :class:`Source` from a seed."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def integers(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


def _pick(src: Source, items: Sequence[Any]) -> Any:
    return items[src.integers(0, len(items) - 1)]


def _chance(src: Source, percent: int) -> bool:
    return src.integers(0, 99) < percent


_HOSTILE_INTS = (0, 1, 2, 3, -1, -2, 4, 1 << 40, -(1 << 40))
_HOSTILE_FLOATS = (0.0, 1.0, 0.5, 2.0, -1.0, 1e-3, float("nan"), float("inf"), -float("inf"), 1e30)
_STRINGS = ("", "NOT_A_MODE", "nearest", "linear", "constant", "reflect", "edge", "DCR", "CRD",
            "mean", "sum", "none", "half_pixel", "asymmetric", "tanh", "NOTSET", "VALID")
_DTYPES = {"tensor(float)": np.float32, "tensor(int64)": np.int64, "tensor(bool)": np.bool_,
           "tensor(int32)": np.int32}


@dataclass
class Case:
    """One graph and the inputs to run it on."""

    model: Any
    feeds: dict[str, np.ndarray]
    note: str = ""


@dataclass
class _Value:
    name: str
    dtype: Any
    shape: tuple[int, ...] | None


@dataclass
class _Builder:
    src: Source
    values: list[_Value] = field(default_factory=list)
    inputs: list[Any] = field(default_factory=list)
    inits: list[Any] = field(default_factory=list)
    nodes: list[Any] = field(default_factory=list)
    feeds: dict[str, np.ndarray] = field(default_factory=dict)
    count: int = 0

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def shape(self) -> tuple[int, ...]:
        rank = self.src.integers(0, 4)
        return tuple(_pick(self.src, (0, 1, 2, 3, 4, 1, 2, 3)) for _ in range(rank))

    def array(self, dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
        n = math.prod(shape)
        if dtype == np.float32:
            if _chance(self.src, 15):
                vals = [_pick(self.src, _HOSTILE_FLOATS) for _ in range(n)]
            else:
                vals = [self.src.integers(-30, 30) / 10 for _ in range(n)]
        elif dtype == np.bool_:
            vals = [bool(self.src.integers(0, 1)) for _ in range(n)]
        else:
            hostile = _chance(self.src, 25)
            vals = [_pick(self.src, _HOSTILE_INTS) if hostile else self.src.integers(-3, 5)
                    for _ in range(n)]
        with np.errstate(all="ignore"):  # (int32: the huge values wrap)
            wide = np.float64 if dtype == np.float32 else np.int64 if dtype != np.bool_ else dtype
            return np.array(vals, dtype=wide).astype(dtype).reshape(shape)

    def graph_input(self, dtype: Any) -> _Value:
        from onnx import helper

        name = self.fresh("in")
        shape = self.shape()
        self.inputs.append(helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), list(shape)))
        self.feeds[name] = self.array(dtype, shape)
        v = _Value(name, dtype, shape)
        self.values.append(v)
        return v

    def constant(self, dtype: Any) -> _Value:
        from onnx import numpy_helper

        name = self.fresh("c")
        shape = _pick(self.src, ((), (1,), (2,), (3,), (4,), (2, 2), ()))
        if dtype == np.int64 and _chance(self.src, 40):  # a shape-like vector
            shape = (self.src.integers(0, 4),)
        arr = self.array(dtype, shape)
        self.inits.append(numpy_helper.from_array(arr, name))
        v = _Value(name, dtype, shape)
        self.values.append(v)
        return v

    def operand(self, dtype: Any) -> _Value:
        same = [v for v in self.values if v.dtype == dtype]
        if same and _chance(self.src, 70):
            return _pick(self.src, same)
        if dtype == np.float32 and _chance(self.src, 60):
            return self.graph_input(dtype)
        return self.constant(dtype)


def _attribute(src: Source, name: str, attr: Any) -> Any:
    """A value of the schema's attribute type: its default, or a hostile one."""
    from onnx import AttributeProto, helper
    from onnx.defs import OpSchema

    t = attr.type
    A = OpSchema.AttrType
    if attr.default_value.name and _chance(src, 40):
        return attr.default_value
    if t == A.INT:
        return helper.make_attribute(name, _pick(src, _HOSTILE_INTS))
    if t == A.FLOAT:
        return helper.make_attribute(name, _pick(src, _HOSTILE_FLOATS))
    if t == A.STRING:
        return helper.make_attribute(name, _pick(src, _STRINGS))
    if t == A.INTS:
        n = src.integers(0, 4)
        return helper.make_attribute(name, [_pick(src, _HOSTILE_INTS[:7]) for _ in range(n)],
                                     attr_type=AttributeProto.INTS)
    if t == A.FLOATS:
        n = src.integers(0, 4)
        return helper.make_attribute(name, [_pick(src, _HOSTILE_FLOATS) for _ in range(n)],
                                     attr_type=AttributeProto.FLOATS)
    return None  # tensors, graphs, strings lists: left to their defaults


def _node(b: _Builder, op: str) -> None:
    import onnx.defs
    from onnx import helper
    from onnx.defs import OpSchema

    schema = onnx.defs.get_schema(op, OPSET, "")
    # one element type per type constraint, among those the fuzzer makes
    chosen: dict[str, Any] = {}
    for tc in schema.type_constraints:
        ok = [_DTYPES[t] for t in tc.allowed_type_strs if t in _DTYPES]
        if ok:
            chosen[tc.type_param_str] = np.float32 if np.float32 in ok and _chance(b.src, 70) \
                else _pick(b.src, ok)
    names: list[str] = []
    Opt = OpSchema.FormalParameterOption
    for formal in schema.inputs:
        dtype = chosen.get(formal.type_str, _DTYPES.get(formal.type_str))
        if formal.option == Opt.Optional and not _chance(b.src, 50):
            names.append("")
            continue
        if dtype is None:
            if formal.option == Opt.Single:
                raise _Skip(f"{op}: input {formal.name} of type {formal.type_str}")
            names.append("")
            continue
        repeat = b.src.integers(1, 3) if formal.option == Opt.Variadic else 1
        names.extend(b.operand(dtype).name for _ in range(repeat))
    while names and names[-1] == "":
        names.pop()
    attrs = []
    for name, attr in schema.attributes.items():
        if attr.required or _chance(b.src, 35):
            a = _attribute(b.src, name, attr)
            if a is not None:
                attrs.append(a)
            elif attr.required:
                raise _Skip(f"{op}: required attribute {name}")
    outs = []
    for k, formal in enumerate(schema.outputs):
        if formal.option == Opt.Optional and k and not _chance(b.src, 50):
            break
        outs.append(b.fresh("v"))
    node = helper.make_node(op, names, outs, name=b.fresh("n"))
    node.attribute.extend(attrs)
    b.nodes.append(node)
    # the outputs' element types are unknown here: they serve later nodes
    # only as float operands, a guess the schemas then accept or refuse
    for o in outs:
        b.values.append(_Value(o, np.float32, None))


class _Skip(Exception):
    pass


def draw_case(src: Source, ops: Sequence[str] | None = None) -> Case:
    """A random graph over ``ops`` (default :func:`FUZZ_OPS`) and its inputs."""
    import onnx
    from onnx import helper

    ops = list(ops or FUZZ_OPS())
    for _ in range(20):
        b = _Builder(src)
        b.graph_input(np.float32)
        try:
            for _k in range(src.integers(1, 3)):
                _node(b, _pick(src, ops))
        except _Skip:
            continue
        # every value no node reads is an output: no dead node (phasec drops
        # one, ORT runs it, and an error only it makes would be a false finding)
        read = {i for n in b.nodes for i in n.input}
        outs = [o for n in b.nodes for o in n.output if o and o not in read]
        outputs = [helper.make_value_info(o, onnx.TypeProto()) for o in outs]
        opset = OPSET
        note = ""
        mutation = src.integers(0, 99)
        if mutation < 3:
            outputs, note = [], "no outputs"
        elif mutation < 6 and len(b.nodes) > 1:
            b.nodes[-1].output[0] = b.nodes[0].output[0]
            outputs = [helper.make_value_info(b.nodes[0].output[0], onnx.TypeProto())]
            note = "an output name defined twice"
        elif mutation < 8:
            b.nodes[-1].input.append("undefined_value")
            note = "an undefined input"
        elif mutation < 10:
            opset, note = _pick(src, (0, 29, 99)), "an opset that does not exist"
        elif mutation < 12 and b.nodes[-1].attribute:
            a = b.nodes[-1].attribute[0]
            b.nodes[-1].attribute[0].CopyFrom(helper.make_attribute(
                a.name, "wrong" if a.type != onnx.AttributeProto.STRING else 1.5))
            note = "an attribute of the wrong type"
        graph = helper.make_graph(b.nodes, "fuzz", b.inputs, outputs, initializer=b.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 10
        return Case(model, b.feeds, note)
    raise _Skip("no graph drawn")


@dataclass
class Verdict:
    """What one side made of a case: ``ok`` (with outputs), ``refused`` (a
    clear error), ``unsupported`` (phasec only) or ``crash`` (phasec only)."""

    kind: str
    detail: str = ""
    outputs: list[np.ndarray] = field(default_factory=list)


def ort_verdict(case: Case) -> Verdict:
    """ONNX Runtime's verdict: session creation, then a run."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    # no graph optimizations: they drop nodes whose results are not used (a
    # Gather only Shape reads), and with them the errors the nodes make
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        sess = ort.InferenceSession(case.model.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
        out = sess.run(None, case.feeds)
    except Exception as exc:  # noqa: BLE001 - ORT raises its own exception types
        return Verdict("refused", _line(exc))
    return Verdict("ok", outputs=_leaves(out))


def _leaves(outputs: Sequence[Any]) -> list[np.ndarray]:
    """The graph outputs as arrays, a sequence output (a list of tensors, in
    ORT and phasec alike) as its tensors in order."""
    arrays: list[np.ndarray] = []
    for o in outputs:
        if isinstance(o, (list, tuple)):
            arrays += _leaves(o)
        else:
            arrays.append(np.asarray(o))
    return arrays


def phasec_verdict(case: Case) -> Verdict:
    """phasec's verdict: import, compile with the default pipeline, run."""
    try:
        mod = from_onnx(case.model)
        vm = phasec.VirtualMachine(phasec.build(mod))
        inits = {t.name for t in case.model.graph.initializer}
        names = [vi.name for vi in case.model.graph.input if vi.name not in inits]
        out = vm["main"](*[case.feeds[n] for n in names])
    except UnsupportedModelError as exc:
        return Verdict("unsupported", _line(exc))
    except PhasecError as exc:
        text = _line(exc)
        return Verdict("crash" if "internal error" in text else "refused",
                       f"{type(exc).__name__}: {text}")
    except Exception as exc:  # noqa: BLE001 - exactly what the fuzzer looks for
        return Verdict("crash", f"{type(exc).__name__}: {_line(exc)}")
    outs = list(out) if len(case.model.graph.output) > 1 else [out]
    return Verdict("ok", outputs=_leaves(outs))


#: ONNX Runtime refusing a *valid* model for want of an implementation (a
#: kernel for the element type, LRN of other than 4-D input): no verdict.
_ORT_LIMITS = ("NOT_IMPLEMENTED : Could not find an implementation",
               # its expansion of CenterCropPad's function body with int32 shapes
               "Type parameter (T) of Optype (Max) bound to different types",
               "LRN<T>::Compute(onnxruntime::OpKernelContext*) const [with T = float] "
               "X_shape.NumDimen")


#: Models that break the ONNX specification which ONNX Runtime nevertheless
#: runs, and phasec refuses: counted apart ("stricter"), never hidden.
#: MeanVarianceNormalization with axes beyond the input's rank (ORT's kernel
#: ignores them), a Constant node given an undefined input.
_PHASEC_STRICTER = ("(MeanVarianceNormalization, opset 21): axis",
                    # a Constant node with inputs (ORT makes it an initializer unread)
                    "(Constant): input")
#: Concat of inputs whose other axes differ ("All input tensors must have the
#: same shape, except for the dimension size of the axis to concatenate on"):
#: ORT skips the empty ones unchecked.
_CONCAT_MISMATCH = re.compile(r"\(Concat, opset \d+\): R\.concat\(.*which differs from tensor")
#: ... and an axis outside ``[-r, r-1]`` (ONNX's range for every ``axis``
#: attribute) by more than int32 holds: ORT reads it as int32, so 2**40
#: becomes axis 0.
_AXIS_OUT_OF_RANGE = re.compile(r"axis (-?\d+) is out of range")
#: ... and CumSum's axis outside ``[-r, r-1]`` on an empty input, which ORT's
#: kernel returns at once without looking at the axis.
_CUMSUM_AXIS = re.compile(r"\(CumSum, opset \d+\): axis -?\d+ is out of range")


def _stricter(detail: str) -> bool:
    """Is phasec's refusal (``detail``) of a model ORT runs one of the known
    breaches of the ONNX specification ORT lets through?"""
    if any(p in detail for p in _PHASEC_STRICTER) or _CONCAT_MISMATCH.search(detail) \
            or _CUMSUM_AXIS.search(detail):
        return True
    m = _AXIS_OUT_OF_RANGE.search(detail)
    return m is not None and abs(int(m.group(1))) >= 2**31


def judge(case: Case, reported: Callable[[Verdict], None] | None = None) -> tuple[str, str]:
    """``(outcome, detail)``: outcome ``agree-ok``, ``agree-refused``,
    ``unsupported``, ``stricter`` (see ``_PHASEC_STRICTER``), ``disagree``
    or ``crash``. ``reported`` is told phasec's verdict before ORT runs."""
    mine = phasec_verdict(case)
    if mine.kind == "crash":
        return "crash", mine.detail
    if mine.kind == "unsupported":
        return "unsupported", mine.detail
    if reported is not None:
        reported(mine)
    ref = ort_verdict(case)
    if ref.kind == "refused" and any(p in ref.detail for p in _ORT_LIMITS):
        return "unsupported", f"ONNX Runtime: {ref.detail}"
    if mine.kind == "refused" and ref.kind == "ok" and _stricter(mine.detail):
        return "stricter", mine.detail
    if mine.kind != ref.kind:
        return "disagree", (f"phasec {mine.kind} ({mine.detail or 'ran'}), ONNX Runtime "
                            f"{ref.kind} ({ref.detail or 'ran'})")
    if mine.kind == "refused":
        return "agree-refused", mine.detail
    if _nan_undefined(case):
        return "agree-ok", "values not compared (NaN into an operator that leaves it undefined)"
    if _rounding_decides(case):
        return "agree-ok", "values not compared (a comparison of computed floats)"
    problem = _compare(mine.outputs, ref.outputs)
    return ("disagree", problem) if problem else ("agree-ok", "")


#: Operators whose result ONNX leaves undefined for NaN or infinite inputs:
#: Unique (NaN is not equal to itself; ORT's grouping depends on its sort),
#: DynamicQuantizeLinear (the scale of an infinite range, NaN to uint8).
_NAN_UNDEFINED = frozenset({"Unique", "DynamicQuantizeLinear",
                            # NaN against a number: ONNX does not say which
                            # wins; ORT's min/max kernels differ on it
                            "ReduceMax", "ReduceMin", "ArgMax", "ArgMin", "Max", "Min",
                            "MaxPool", "GlobalMaxPool", "TopK", "Clip"})
#: ... and for negative inputs too: a cast of a float out of the target
#: type's range (-2.8 to uint16: C leaves it undefined; ORT wraps, phasec
#: saturates).
_NEGATIVE_UNDEFINED = frozenset({"Cast", "CastLike"})


def _nan_undefined(case: Case) -> bool:
    from onnx import numpy_helper

    ops = {n.op_type for n in case.model.graph.node}
    if not ops & (_NAN_UNDEFINED | _NEGATIVE_UNDEFINED):
        return False
    arrays = [*case.feeds.values(),
              *(numpy_helper.to_array(t) for t in case.model.graph.initializer),
              *_computed_operands(case)]
    floats = [a for a in arrays if a.dtype.kind == "f"]
    if any(not np.all(np.isfinite(a)) for a in floats):
        return True
    return bool(ops & _NEGATIVE_UNDEFINED) and any(np.any(a < 0) for a in floats)


def _computed_operands(case: Case) -> list[np.ndarray]:
    """The values other nodes compute for the operands of the operators in
    ``_NAN_UNDEFINED``/``_NEGATIVE_UNDEFINED`` (a NaN made by Log, then
    ArgMin), as ONNX Runtime computes them; none when it cannot."""
    import onnx

    graph = case.model.graph
    made = {o for n in graph.node for o in n.output if o}
    wanted = [i for n in graph.node if n.op_type in _NAN_UNDEFINED | _NEGATIVE_UNDEFINED
              for i in n.input if i in made]
    if not wanted:
        return []
    probe = onnx.ModelProto()
    probe.CopyFrom(case.model)
    del probe.graph.output[:]
    probe.graph.output.extend(onnx.helper.make_value_info(w, onnx.TypeProto())
                              for w in dict.fromkeys(wanted))
    verdict = ort_verdict(Case(probe, case.feeds))
    return verdict.outputs if verdict.kind == "ok" else []


_COMPARISONS = frozenset({"Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Equal"})


def _rounding_decides(case: Case) -> bool:
    """A comparison after other arithmetic: one rounding apart (Mean(x, x, x)
    against x) flips a boolean, which no tolerance absorbs."""
    ops = [n.op_type for n in case.model.graph.node]
    return bool(set(ops) & _COMPARISONS) and len(ops) > 1


def _compare(mine: list[np.ndarray], ref: list[np.ndarray]) -> str:
    if len(mine) != len(ref):  # (a sequence output of another length)
        return f"{len(mine)} output tensors, ONNX Runtime {len(ref)}"
    for k, (a, r) in enumerate(zip(mine, ref)):
        if a.shape != r.shape:
            return f"output {k}: shape {a.shape}, ONNX Runtime {r.shape}"
        if a.dtype != r.dtype:
            return f"output {k}: dtype {a.dtype}, ONNX Runtime {r.dtype}"
        if a.dtype.kind in "fc":
            a64, r64 = a.astype(np.float64), r.astype(np.float64)
            with np.errstate(all="ignore"):
                ok = np.isclose(a64, r64, rtol=1e-3, atol=1e-4, equal_nan=True)
            # ORT and phasec may differ on which huge value overflowed to inf
            ok |= (np.abs(r64) > 1e30) & (np.abs(a64) > 1e30)
        else:
            ok = a == r
        if not np.all(ok):
            i = tuple(int(j) for j in np.argwhere(~ok)[0])
            return f"output {k}: at {i} phasec {a[i]}, ONNX Runtime {r[i]}"
    return ""


def _judge_isolated(case: Case) -> tuple[str, str]:
    """:func:`judge` in a forked child: a signal or an abort there is a crash."""
    import json
    import os
    import signal

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: judge, report, leave without cleanups
        os.close(r)
        try:  # phasec's verdict on its own line first: a crash after it is ORT's
            result = judge(case, lambda v: os.write(w, f"{v.kind}\n".encode()))
        except BaseException as exc:  # noqa: BLE001 - the fuzzer's own failure is a finding
            result = ("crash", f"{type(exc).__name__}: {_line(exc)}")
        os.write(w, json.dumps(result).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        lines = f.read().decode().split("\n")
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) or not lines[-1]:
        why = (f"died of {signal.Signals(os.WTERMSIG(status)).name}" if os.WIFSIGNALED(status)
               else f"ended without a verdict (status {status})")
        if len(lines) > 1:  # phasec had given its verdict
            return "unsupported", f"ONNX Runtime's process {why} (phasec: {lines[0]})"
        return "crash", f"the process {why}"
    outcome, detail = json.loads(lines[-1])
    return outcome, detail


def _line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """The campaign: draw and judge cases until the time is up."""
    p = argparse.ArgumentParser(prog="python -m phasec.frontend.onnx.fuzz",
                                description="fuzz the ONNX frontend against ONNX Runtime")
    p.add_argument("--minutes", type=float, default=1.0, help="how long to run (default 1)")
    p.add_argument("--cases", type=int, default=0, help="stop after this many cases")
    p.add_argument("--seed", type=int, default=0, help="the first case's seed (default 0)")
    p.add_argument("--ops", default="", help="comma-separated op types (default: all)")
    p.add_argument("--show", type=int, default=10, help="findings printed per kind")
    p.add_argument("--verbose", action="store_true", help="print each case's seed first")
    p.add_argument("--no-fork", dest="fork", action="store_false",
                   help="judge in this process (default: a child process per case, so a "
                        "crash of the process is a finding, not the campaign's end)")
    args = p.parse_args(argv)
    ops = [o for o in args.ops.split(",") if o] or FUZZ_OPS()
    counts: dict[str, int] = {}
    findings: dict[str, list[str]] = {"disagree": [], "crash": [], "stricter": []}
    by_op: dict[str, int] = {}
    end = time.monotonic() + args.minutes * 60
    seed = args.seed
    while time.monotonic() < end and (not args.cases or sum(counts.values()) < args.cases):
        try:
            case = draw_case(RandomSource(seed), ops)
        except _Skip:
            seed += 1
            continue
        if args.verbose:
            print(f"seed {seed}: {','.join(n.op_type for n in case.model.graph.node)}",
                  file=sys.stderr, flush=True)
        outcome, detail = _judge_isolated(case) if args.fork else judge(case)
        counts[outcome] = counts.get(outcome, 0) + 1
        if outcome in findings:
            nodes = ",".join(n.op_type for n in case.model.graph.node)
            findings[outcome].append(f"seed {seed} [{nodes}]{' ' + case.note if case.note else ''}"
                                     f": {detail}")
            for n in case.model.graph.node:
                by_op[n.op_type] = by_op.get(n.op_type, 0) + 1
        seed += 1
    total = sum(counts.values())
    print(f"cases: {total} (seeds {args.seed} to {seed - 1})")
    for k in ("agree-ok", "agree-refused", "unsupported", "stricter", "disagree", "crash"):
        print(f"  {k}: {counts.get(k, 0)}")
    for kind, items in findings.items():
        for line in items[:args.show]:
            print(f"{kind}: {line}")
    if by_op:
        print("operators in findings:", ", ".join(f"{o} {n}" for o, n in
                                                 sorted(by_op.items(), key=lambda kv: -kv[1])))
    return 1 if findings["disagree"] or findings["crash"] else 0  # ("stricter" is known)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

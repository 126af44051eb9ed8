"""The graph walk: an ONNX ``ModelProto`` -> an ingestion-phase IRModule.

One Relax function ``main``: graph inputs (those without an initializer)
become its parameters, the graph's nodes become bindings of one dataflow
block (each converted by its converter, see :mod:`._registry`), graph
outputs its result (a tuple when there are several). Initializers are
constants, or trailing parameters with ``keep_params_in_input``.

Every binding carries a span naming the ONNX node it came from:
``Span(file="<model> node '<name>' (<op_type>)", line=<1-based position of
the node in graph.node>, col=0)``, so a verifier diagnostic reads
``resnet50.onnx node 'conv1' (Conv):3:1``. Variables are named after the
ONNX output tensors (made identifiers).
"""

from __future__ import annotations

import contextlib
import keyword
import math
import os
import re
from collections import ChainMap
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np

from phasec import arith
from phasec.arith.lattice import collect_shape_vars
from phasec.errors import PhasecError, StructInfoError
from phasec.fileio import MAX_INPUT_ENV, format_size, max_input_bytes, read_bytes
from phasec.frontend.errors import (
    GRAPH_INPUT, FrontendError, UnsupportedModelError, UnsupportedNode,
)
from phasec.frontend.onnx import (  # noqa: F401  (the converter families register on import)
    ops_attention, ops_control, ops_linalg, ops_math, ops_nn, ops_quant, ops_quant_contrib,
    ops_image, ops_quant_loss, ops_reduce, ops_rnn, ops_signal, ops_slice, ops_tensor,
    ops_training, ops_vision,
)
from phasec.frontend.onnx.ops_sequence import SEQUENCE_OPS, SeqValue
from phasec.frontend.onnx._context import NodeContext, Unsupported, Value, materialize
from phasec.frontend.onnx._dtypes import carrier, narrow_format, onnx_dtype, type_name
from phasec.frontend.onnx._registry import CONVERTERS, converter_key
from phasec.frontend.onnx._validate import check_text_fields, validate
from phasec.ir import IRModule, tir
from phasec.ir.expr import Call, Constant, Expr, Function, Op, Tuple, Var
from phasec.ir.node import Span
from phasec.ir.struct_info import TensorStructInfo
from phasec.ir.visitor import collect_exprs
from phasec.runtime.random_inputs import available_memory
from phasec.script.builder import BlockBuilder
from phasec.verifier import verify

__all__ = ["import_model", "read_model", "sanitize", "supported_ops"]

#: A model file larger than this is refused before reading (protobuf's own
#: limit; larger models keep their weights in external data files).
MAX_MODEL_BYTES = 2 << 30


def sanitize(name: str, fallback: str = "v") -> str:
    """An identifier for an ONNX name: other characters become ``_``."""
    s = re.sub(r"\W", "_", name, flags=re.ASCII)
    if not s:
        s = fallback
    if s[0].isdigit():
        s = "v_" + s
    if keyword.iskeyword(s) or s in ("R", "T", "I"):
        s += "_"
    return s


def read_model(model_or_path: Any) -> tuple[Any, str]:
    """The ``ModelProto`` and a label for spans, from a path, bytes or a proto."""
    import onnx

    if isinstance(model_or_path, onnx.ModelProto):
        check_text_fields(model_or_path, "model.onnx")
        label = (model_or_path.graph.name or "model") + ".onnx"
        return model_or_path, label
    if isinstance(model_or_path, (bytes, bytearray)):
        try:
            model = onnx.load_model_from_string(bytes(model_or_path))
        except Exception as exc:  # noqa: BLE001 - protobuf raises assorted errors
            raise FrontendError(f"cannot read the ONNX model: {exc}") from None
        check_text_fields(model, "model.onnx")
        return model, "model.onnx"
    if not isinstance(model_or_path, (str, os.PathLike)):
        raise TypeError("from_onnx() expects an onnx.ModelProto, a path or bytes, "
                        f"not {type(model_or_path).__name__}")
    path = os.fspath(model_or_path)
    # a regular file, size-capped (phasec.fileio): never a FIFO or a device
    data = read_bytes(path, "ONNX model", limit=MAX_MODEL_BYTES)
    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:  # noqa: BLE001 - protobuf raises assorted decode errors
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise FrontendError(f"cannot read {path!r} as an ONNX model: {msg}") from None
    check_text_fields(model, os.path.basename(path))
    if not model.HasField("graph"):
        raise FrontendError(f"{path!r} holds no ONNX graph (is it an ONNX model file?)")
    if _uses_external_data(model):
        from onnx.external_data_helper import load_external_data_for_model

        base_dir = os.path.dirname(os.path.abspath(path))
        try:  # tensors stored beside the model, by relative path
            _check_external_data_budget(model, base_dir, path)
            load_external_data_for_model(model, base_dir)
        except FrontendError:
            raise
        except Exception as exc:  # noqa: BLE001 - missing or unreadable data files
            raise FrontendError(f"cannot read the external data of {path!r}: {exc}") from None
    return model, os.path.basename(path)


def _check_external_data_budget(model: Any, base_dir: str, path: str) -> None:
    """Refuse external data that would not fit before reading any of it.

    Each data file is within the input size limit, but nothing stops a model
    of a few KiB from naming the same file for a thousand initializers: onnx
    reads them all into the protobuf, and protobuf crashes the process
    (SIGSEGV) when an allocation fails. So the bytes all the main graph's
    initializers would read (each one's ``length``, else the rest of its
    file) must together stay within the input size limit, and twice that (the
    protobuf's copy, then the arrays) within the memory available."""
    from onnx import TensorProto
    from onnx.external_data_helper import ExternalDataInfo

    total = 0
    for t in model.graph.initializer:
        if t.data_location != TensorProto.EXTERNAL:
            continue
        info = ExternalDataInfo(t)  # (a ValueError for a malformed offset or length)
        if info.length is not None:
            total += max(int(info.length), 0)
            continue
        try:  # (a file onnx will refuse to read counts nothing: it fails there)
            size = os.stat(os.path.join(base_dir, info.location)).st_size
        except (OSError, ValueError):
            continue
        total += max(size - max(int(info.offset or 0), 0), 0)
    limit = max_input_bytes()
    if total > limit:
        raise FrontendError(
            f"the external data of {path!r} would take {format_size(total)} in all, more "
            f"than the input size limit ({format_size(limit)}; --max-input-size or "
            f"{MAX_INPUT_ENV})")
    room = available_memory()
    if room is not None and 2 * total > room:
        raise FrontendError(
            f"the external data of {path!r} would take {format_size(total)}, twice that "
            f"while it is read: more than the memory available ({format_size(room)})")


def tensor_array(t: Any, what: str) -> np.ndarray:
    """A ``TensorProto``'s values, its dims checked first: numpy would read
    ``dims=[-1, 2]`` without data as a (0, 2) array, silently. External data
    is read only for the main graph's initializers (beside the model, by
    :func:`read_model`): elsewhere it would resolve against the working
    directory.

    Raises:
        FrontendError: naming ``what`` (e.g. ``initializer 'w'``).
    """
    from onnx import TensorProto, numpy_helper

    dims = [int(d) for d in t.dims]
    if any(d < 0 for d in dims):
        raise FrontendError(f"{what} has a negative dimension: {dims}")
    if t.data_location == TensorProto.EXTERNAL:
        raise FrontendError(f"{what} keeps its values in external data, which is read only "
                            "for the main graph's initializers")
    try:
        return numpy_helper.to_array(t)
    except Exception as exc:  # noqa: BLE001 - data that does not match the dims, etc.
        msg = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise FrontendError(f"cannot read {what}: {msg}") from None


def _check_element_count(value: Any, where: str) -> None:
    """A static shape holds fewer than 2**63 elements: beyond, no index fits
    an int64, and later passes (constant folding, the memory plan) would
    fail inside numpy or wrap around. (A Pad of 2**62 on both sides.)"""
    si = getattr(value, "struct_info", None)
    if not isinstance(si, TensorStructInfo) or si.shape is None:
        return
    dims = [arith.const_int(arith.simplify(d)) if isinstance(d, tir.PrimExpr) else d
            for d in si.shape]
    if all(isinstance(d, (int, np.integer)) for d in dims) and math.prod(map(int, dims)) >= 1 << 63:
        raise FrontendError(f"{where} would have shape ({', '.join(map(str, dims))}): more "
                            "than 2**63 elements")


def _uses_external_data(model: Any) -> bool:
    from onnx import TensorProto

    return any(t.data_location == TensorProto.EXTERNAL for t in model.graph.initializer)


def _attr_value(attr: Any) -> Any:
    from onnx import AttributeProto, helper

    t = attr.type
    if t == AttributeProto.STRING:
        return attr.s.decode("utf-8", errors="replace")
    if t == AttributeProto.STRINGS:
        return [s.decode("utf-8", errors="replace") for s in attr.strings]
    if t == AttributeProto.TENSOR:
        return tensor_array(attr.t, f"attribute {attr.name!r}")
    if t == AttributeProto.INTS:
        return [int(i) for i in attr.ints]
    if t == AttributeProto.FLOATS:
        return [float(f) for f in attr.floats]
    return helper.get_attribute_value(attr)


#: operators that take values of a narrow float format (held in float32):
#: casts (ops_math: to another type or format), quantization (ops_quant: to
#: and from the float8s, float4 and the narrow integers) and the data
#: movement that keeps the format (_NARROW_MOVES)
_NARROW_MOVES = frozenset({"Identity", "Reshape", "Transpose", "Squeeze", "Unsqueeze",
                           "Flatten"})
_NARROW_OPS = _NARROW_MOVES | {"Cast", "CastLike", "QuantizeLinear", "DequantizeLinear"}


def _with_shape(bb: BlockBuilder, value: Value, hint: str) -> Value:
    """``value``, or when it is a tensor of known rank whose shape is known
    only at run time (NonZero's, Unique's: data-dependent) that tensor
    matched to fresh symbolic dimensions (``R.match_cast``), so the operators
    it feeds can be lowered like those on any dynamic shape."""
    sinfo = value.struct_info if isinstance(value, Expr) else None
    if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is not None or sinfo.ndim < 0 \
            or not sinfo.dtype:
        return value
    dims = tuple(tir.Var(f"{hint}_d{k}", "int64") for k in range(sinfo.ndim))
    return bb.match_cast(value, TensorStructInfo(dims, sinfo.dtype), hint)


def _sym_vars(value: Expr) -> list[tir.Var]:
    """The symbolic variables in a value's shape."""
    sinfo = value.struct_info
    return collect_shape_vars(sinfo) if isinstance(sinfo, TensorStructInfo) else []


class _PoisonedCapture(Exception):
    """A subgraph's result depends on an outer value left unconverted (its
    node is reported as unsupported already): the node holding the subgraph
    is skipped as if that value were one of its inputs."""


class _Importer:
    def __init__(self, model: Any, label: str, shapes: Mapping[str, Sequence[Any]] | None,
                 keep_params: bool) -> None:
        self.model = model
        self.graph = model.graph
        self.label = label
        self.shapes = dict(shapes or {})
        self.keep_params = keep_params
        self.opsets = {o.domain or "ai.onnx": int(o.version) for o in model.opset_import}
        self.opset = self.opsets.get("ai.onnx", 0)
        self.sym_vars: dict[str, tir.Var] = {}
        self.unsupported: list[UnsupportedNode] = []
        self.values: MutableMapping[str, Value | None] = {}
        self.poisoned: set[str] = set()
        self.param_vars: dict[str, Var] = {}     # keep_params: initializer name -> Var
        self.param_arrays: dict[str, np.ndarray] = {}
        self.used_params: set[str] = set()
        self.names: set[str] = set()
        #: value name -> narrow float format held in float32 (_dtypes.NARROW_FORMATS)
        self.formats: dict[str, str] = {}
        #: the Constants of known arrays, one per array (NodeContext.expr)
        self.constants: dict[int, tuple[np.ndarray, Constant]] = {}
        #: subgraphs (If branches, Loop/Scan bodies) being converted, nested
        self.subgraph_depth = 0
        #: ids of the symbolic dimensions a subgraph's data-dependent shapes bind
        self.inner_syms: set[int] = set()

    # -- inputs ------------------------------------------------------------------
    def _unique(self, hint: str) -> str:
        name = sanitize(hint)
        k, base = 1, name
        while name in self.names:
            name = f"{base}_{k}"
            k += 1
        self.names.add(name)
        return name

    def _dim(self, input_name: str, i: int, d: Any) -> Any:
        if isinstance(d, (int, np.integer)) and not isinstance(d, bool):
            if d < 0:
                raise FrontendError(f"input {input_name!r}: dimension {i} is {d}; give sizes "
                                    "that are non-negative integers or names")
            return int(d)
        if isinstance(d, str):
            return self._sym(d)
        if isinstance(d, tir.PrimExpr):
            return d
        raise FrontendError(f"input {input_name!r}: dimension {i} must be an int or a name, "
                            f"not {d!r}")

    def _sym(self, name: str) -> tir.Var:
        key = sanitize(name, "n")
        var = self.sym_vars.get(key)
        if var is None:
            var = self.sym_vars[key] = tir.Var(key, "int64")
        return var

    def _input_sinfo(self, vi: Any) -> TensorStructInfo:
        name = vi.name
        tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        if tt is None:
            kind = vi.type.WhichOneof("value") or "unknown"
            raise Unsupported(f"graph input {name!r} is a {kind}, not a tensor")
        dtype = onnx_dtype(tt.elem_type)
        if dtype is None and narrow_format(tt.elem_type) is not None:
            self.formats[name] = narrow_format(tt.elem_type)
            dtype = carrier(self.formats[name])  # its values, exactly (_dtypes.NARROW_FORMATS)
        if dtype is None:
            raise Unsupported(f"graph input {name!r} has element type {type_name(tt.elem_type)}, "
                              "which phasec does not compute with")
        if name in self.shapes:
            dims = [self._dim(name, i, d) for i, d in enumerate(self.shapes[name])]
        elif not tt.HasField("shape"):
            raise FrontendError(f"graph input {name!r} has no shape; give one: "
                                f"`phasec import --shape {name}=D1,D2,...` or "
                                f"from_onnx(..., shapes={{{name!r}: (...)}}) (names for "
                                "dynamic dimensions)")
        else:
            dims = []
            for i, d in enumerate(tt.shape.dim):
                if d.HasField("dim_value"):
                    dims.append(self._dim(name, i, d.dim_value))
                elif d.dim_param:
                    dims.append(self._sym(d.dim_param))
                else:  # unnamed dynamic dimension: a fresh symbolic variable
                    dims.append(self._sym(f"{name}_dim{i}"))
        return TensorStructInfo(tuple(dims), dtype)

    # -- the walk ------------------------------------------------------------------
    def _record(self, node: Any, index: int, reason: str, needs_value: str = "") -> None:
        op = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}:{node.op_type}"
        opset = self.opsets.get(node.domain or "ai.onnx", 0)
        self.unsupported.append(UnsupportedNode(node.name or f"{node.op_type}#{index}", op,
                                                opset, reason, index, needs_value))
        self.poisoned.update(o for o in node.output if o)

    def _span(self, node: Any, index: int) -> Span:
        name = node.name or f"{node.op_type}#{index}"
        return Span(f"{self.label} node {name!r} ({node.op_type})", index + 1, 0)

    def run(self) -> IRModule:
        convs = CONVERTERS
        graph = self.graph
        unknown = [n for n in self.shapes if n not in {i.name for i in graph.input}]
        if unknown:
            names = ", ".join(repr(i.name) for i in graph.input)
            raise FrontendError(f"the given shapes name {', '.join(map(repr, unknown))}, which "
                                f"{'is' if len(unknown) == 1 else 'are'} not graph inputs "
                                f"(the inputs are: {names})")
        order = validate(self.model, self.label, self.shapes)  # as ONNX Runtime would
        if len(graph.sparse_initializer):
            raise FrontendError("the model has sparse initializers, which the frontend "
                                "does not support")
        inits: dict[str, np.ndarray] = {}
        for t in graph.initializer:
            if onnx_dtype(t.data_type) is None and narrow_format(t.data_type) is not None:
                self.formats[t.name] = narrow_format(t.data_type)  # its values, exactly
                inits[t.name] = tensor_array(t, f"initializer {t.name!r}").astype(
                    carrier(self.formats[t.name]))
                continue
            if onnx_dtype(t.data_type) is None:
                self.unsupported.append(UnsupportedNode(
                    t.name, "initializer", self.opset,
                    f"element type {type_name(t.data_type)} is not supported"))
                self.poisoned.add(t.name)
                continue
            inits[t.name] = tensor_array(t, f"initializer {t.name!r}")

        params: list[Var] = []
        for vi in graph.input:
            if vi.name in inits:
                continue
            try:
                sinfo = self._input_sinfo(vi)
            except Unsupported as exc:
                self.unsupported.append(UnsupportedNode(vi.name, GRAPH_INPUT, self.opset,
                                                        exc.reason))
                self.poisoned.add(vi.name)
                continue
            var = Var(self._unique(vi.name), sinfo)
            params.append(var)
            self.values[vi.name] = var
        for name, arr in inits.items():
            if self.keep_params:
                self.param_arrays[name] = arr
                self.param_vars[name] = Var(self._unique(name),
                                            TensorStructInfo(arr.shape, str(arr.dtype)))
                self.values[name] = self.param_vars[name]
            else:
                self.values[name] = arr

        # Unsupported operators are known before any conversion.
        for index, node in enumerate(graph.node):
            domain = node.domain or "ai.onnx"
            conv = convs.get(converter_key(node.domain, node.op_type))
            if conv is None:
                self._record(node, index, "operator not supported" if domain == "ai.onnx"
                             or any(k.startswith(domain + ":") for k in convs)
                             else f"operator domain {node.domain!r} not supported")
            elif self.opsets.get(domain, 0) < conv.since:
                self._record(node, index, f"opset {self.opset} semantics not supported "
                                          f"(the converter implements opset {conv.since}+)")

        bb = BlockBuilder()
        outputs: list[Expr] = []
        # Control flow (a node with a subgraph: If, Loop, Scan) cannot sit in a
        # dataflow block; such a graph is imported as plain bindings, which
        # ConvertToDataflow regroups around the control flow.
        control = any(a.type == a.GRAPH for n in graph.node for a in n.attribute)
        with bb.function("main", params):
            with contextlib.nullcontext() if control else bb.dataflow():
                done = {u.index for u in self.unsupported}
                for index in order:  # topological: ONNX Runtime accepts any listed order
                    node = graph.node[index]
                    if index in done:
                        continue
                    if any(i in self.poisoned for i in node.input if i):
                        self.poisoned.update(o for o in node.output if o)
                        continue
                    self._convert(bb, convs[converter_key(node.domain, node.op_type)].fn, node, index)
                self._check_narrow_outputs(graph)
                if self.unsupported:
                    raise UnsupportedModelError(self.unsupported, self.label)
                for vi in graph.output:
                    if vi.name not in self.values or self.values[vi.name] is None:
                        raise FrontendError(f"graph output {vi.name!r} is not produced by any "
                                            "node, input or initializer")
                    v = self.values[vi.name]
                    if isinstance(v, SeqValue):  # a sequence output: the tuple of its tensors
                        v = Tuple([Constant(t) if isinstance(t, np.ndarray) else t for t in v])
                    if isinstance(v, np.ndarray):
                        # a symbolic shape value is computed at run time from the inputs' shapes
                        v = (materialize(bb, v, sanitize(vi.name)) if v.dtype == object
                             else Constant(v))
                    emit = bb.emit if control else bb.emit_output
                    outputs.append(emit(v, sanitize(vi.name)))
            bb.emit_func_output(outputs[0] if len(outputs) == 1 else Tuple(outputs))
        mod = bb.get()
        if control and _asserts(mod["main"]):
            # an If branch that fails at run time (ops_control): main is impure
            f = mod["main"]
            mod = mod.update_func("main", Function(f.params, f.body, f.ret_struct_info, False,
                                                   f.attrs, span=f.span))
        if self.keep_params:
            mod = self._with_params(mod, params)
        return mod

    def _convert(self, bb: BlockBuilder, fn: Any, node: Any, index: int) -> None:
        inputs: list[Value | None] = []
        param_inputs: dict[int, np.ndarray] = {}
        for k, name in enumerate(node.input):
            if not name:
                inputs.append(None)
                continue
            if name not in self.values:
                raise FrontendError(f"node {index} {node.name!r} ({node.op_type}) uses "
                                    f"{name!r}, which no earlier node, input or initializer "
                                    "defines (is the graph topologically sorted?)")
            inputs.append(self.values[name])
            if name in self.param_vars:
                param_inputs[k] = self.param_arrays[name]
        try:
            attrs = {a.name: _attr_value(a) for a in node.attribute}
        except Exception as exc:  # noqa: BLE001
            self._record(node, index, f"unreadable attribute: {exc}")
            return
        hint = sanitize(next((o for o in node.output if o), node.op_type))
        if node.op_type not in SEQUENCE_OPS and any(isinstance(v, SeqValue) for v in inputs):
            self._record(node, index, "takes a sequence (phasec expands sequences into their "
                                      "tensors at import, for the sequence operators only)")
            return
        narrow = [self.formats[n] for n in node.input if n in self.formats]
        # bfloat16 operands: computed in float32, each float result rounded to bfloat16
        bf16 = bool(narrow) and node.op_type not in _NARROW_OPS and set(narrow) == {"bfloat16"}
        if narrow and node.op_type not in _NARROW_OPS and not bf16:
            self._record(node, index, f"computes on {narrow[0]} values (phasec holds them in "
                                      f"{carrier(narrow[0])} for casts, quantization and data "
                                      "movement only)")
            return
        ctx = NodeContext(bb, node, index, self.opset, inputs, attrs, self._span(node, index),
                          hint, param_inputs, self.convert_graph, self.formats,
                          self.constants)
        try:
            result = fn(ctx)
        except Unsupported as exc:
            self._record(node, index, exc.reason, exc.needs_value)
            return
        except _PoisonedCapture:
            # a subgraph uses an outer value whose node is already reported
            self.poisoned.update(o for o in node.output if o)
            return
        except StructInfoError as exc:
            raise FrontendError(f"{self.label}: node {index} {node.name!r} ({node.op_type}, "
                                f"opset {self.opset}): {exc.message}") from None
        except PhasecError as exc:
            raise FrontendError(f"{self.label}: node {index} {node.name!r} ({node.op_type}, "
                                f"opset {self.opset}): {exc}") from None
        except MemoryError:
            raise FrontendError(f"{self.label}: node {index} {node.name!r} ({node.op_type}, "
                                f"opset {self.opset}): out of memory converting it") from None
        except Exception as exc:  # noqa: BLE001 - a converter's own failure, located
            # An input the converter does not check (or a phasec bug): the
            # node is named rather than a traceback from inside the converter;
            # "internal error" keeps it a finding for the fuzzers
            # (fuzz.phasec_verdict), the cause stays chained for a report.
            raise FrontendError(f"{self.label}: node {index} {node.name!r} ({node.op_type}, "
                                f"opset {self.opset}): internal error in its converter, "
                                f"please report: {type(exc).__name__}: {exc}") from exc
        known = {id(v) for x in inputs if isinstance(x, Expr) for v in _sym_vars(x)}
        results = (list(result) if isinstance(result, (list, tuple))
                   and not isinstance(result, SeqValue) else [result])
        for k, out in enumerate(node.output):
            if not out:
                continue
            value = results[k] if k < len(results) else None
            if value is None:
                self._record(node, index, f"output {k} ({out!r}) is not supported")
                return
            # (inside a subgraph the dimensions exist in it only: ops_control
            # keeps them out of the struct info of its results)
            shaped = _with_shape(bb, value, f"{hint}_{k}")
            _check_element_count(shaped, f"{self.label}: node {index} {node.name!r} "
                                 f"({node.op_type}, opset {self.opset}): output {k} ({out!r})")
            if bf16 and not isinstance(shaped, SeqValue) and ctx.dtype(shaped) == "float32":
                if ctx.sinfo(shaped).shape is None:
                    self._record(node, index, "a bfloat16 result of unknown rank")
                    return
                shaped = ctx.emit("round_to_format", shaped, format="bfloat16", saturate=False)
                self.formats[out] = "bfloat16"
            if self.subgraph_depth and isinstance(shaped, Expr):
                # dimensions none of the inputs has: bound in the subgraph
                self.inner_syms.update(id(v) for v in _sym_vars(shaped) if id(v) not in known)
            self.values[out] = shaped
            if narrow and node.op_type in _NARROW_MOVES:
                self.formats[out] = narrow[0]

    def _check_narrow_outputs(self, graph: Any) -> None:
        """A graph output declared of a narrow float type must hold that
        format's values (a cast to it, or an input of it moved)."""
        for vi in graph.output:
            tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
            fmt = narrow_format(tt.elem_type) if tt is not None else None
            if fmt is not None and self.formats.get(vi.name) != fmt and vi.name in self.values:
                self.unsupported.append(UnsupportedNode(
                    vi.name, "graph output", self.opset,
                    f"declared {type_name(tt.elem_type)} but computed in {carrier(fmt)}"))

    def convert_graph(self, bb: BlockBuilder, graph: Any,
                      bound: Mapping[str, Value]) -> list[Value]:
        """Convert a subgraph (an If branch, a Loop or Scan body) into the
        function ``bb`` has open: its inputs are the values ``bound`` by name,
        and the names of the enclosing graphs stay visible (ONNX subgraphs
        capture outer values by name). Returns its outputs' values; any
        unsupported node inside raises :class:`Unsupported` naming it."""
        saved = self.values, self.unsupported, self.poisoned
        inner: dict[str, Value | None] = dict(bound)
        for t in graph.initializer:
            if onnx_dtype(t.data_type) is None:
                raise Unsupported(f"subgraph {graph.name!r}: initializer {t.name!r} has element "
                                  f"type {type_name(t.data_type)}, which is not supported")
            inner[t.name] = tensor_array(t, f"subgraph {graph.name!r}: initializer {t.name!r}")
        self.values = ChainMap(inner, saved[0])
        self.unsupported, self.poisoned = [], set(saved[2])
        self.subgraph_depth += 1
        try:
            for index, node in enumerate(graph.node):
                domain = node.domain or "ai.onnx"
                conv = CONVERTERS.get(node.op_type) if domain == "ai.onnx" else None
                if conv is None:
                    self._record(node, index, "operator not supported" if domain == "ai.onnx"
                                 else f"operator domain {node.domain!r} not supported")
                elif self.opset < conv.since:
                    self._record(node, index, f"opset {self.opset} semantics not supported")
                elif any(i in self.poisoned for i in node.input if i):
                    self.poisoned.update(o for o in node.output if o)
                else:
                    self._convert(bb, conv.fn, node, index)
            if self.unsupported:
                # the value the subgraph needs known at import (its own or an
                # enclosing graph's: the backend traces it through subgraphs)
                needs = {u.needs_value for u in self.unsupported}
                raise Unsupported(f"subgraph {graph.name!r}: "
                                  + "; ".join(str(u) for u in self.unsupported),
                                  next(iter(needs)) if len(needs) == 1 else "")
            if any(vi.name in self.poisoned for vi in graph.output):
                raise _PoisonedCapture()
            outs: list[Value] = []
            for vi in graph.output:
                v = self.values.get(vi.name)
                if v is None:
                    raise FrontendError(f"subgraph {graph.name!r}: output {vi.name!r} is not "
                                        "produced by any node, input or outer value")
                outs.append(self._declared(bb, v, vi))
            return outs
        finally:
            self.values, self.unsupported, self.poisoned = saved
            self.subgraph_depth -= 1

    def _declared(self, bb: BlockBuilder, value: Value, vi: Any) -> Value:
        """A subgraph output whose shape is known only at run time (a Slice
        with run-time bounds in a loop body: ONNX's loop11), matched to the
        static shape the subgraph declares for it (checked at run time), so
        a loop-carried value keeps its shape and a scan output's element
        shape is known outside the body. Declared symbolic or partial shapes
        are left alone."""
        sinfo = value.struct_info if isinstance(value, Expr) else None
        tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        if not isinstance(sinfo, TensorStructInfo) or tt is None or not tt.HasField("shape") \
                or onnx_dtype(tt.elem_type) != sinfo.dtype:
            return value
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if None in dims or len(dims) != sinfo.ndim:
            return value
        if sinfo.shape is not None and not any(id(v) in self.inner_syms
                                               for v in _sym_vars(value)):
            return value
        return bb.match_cast(value, TensorStructInfo(tuple(dims), sinfo.dtype),
                             sanitize(vi.name))

    def _with_params(self, mod: IRModule, inputs: list[Var]) -> IRModule:
        func = mod["main"]
        # Parameters only read at import (a Reshape's shape) are not run-time inputs.
        seen = {id(v) for v in collect_exprs(func.body, frozenset((Var,)))}
        self.used_params = {n for n, v in self.param_vars.items() if id(v) in seen}
        used = [self.param_vars[n] for n in self.param_vars if n in self.used_params]
        attrs = dict(func.attrs or {})
        attrs["num_input"] = len(inputs)
        new = Function([*inputs, *used], func.body, func.ret_struct_info, func.is_pure, attrs,
                       span=func.span)
        return mod.update_func("main", new)


def _asserts(func: Function) -> bool:
    """Does ``func`` call ``R.assert_op`` (in a branch, say)?"""
    return any(isinstance(c.op, Op) and c.op.name in ("relax.assert_op", "assert_op")
               for c in collect_exprs(func.body, frozenset((Call,))))


def supported_ops() -> list[str]:
    """Every ONNX op_type the frontend converts (another domain's as
    ``"domain:op_type"``), sorted."""
    return sorted(CONVERTERS)


def import_model(model_or_path: Any, shapes: Mapping[str, Sequence[Any]] | None = None,
                 keep_params_in_input: bool = False) -> tuple[IRModule, dict[str, np.ndarray]]:
    """Import and verify; returns the module and the parameter values (empty
    unless ``keep_params_in_input``), keyed by parameter name."""
    model, label = read_model(model_or_path)
    imp = _Importer(model, label, shapes, keep_params_in_input)
    mod = imp.run()
    verify(mod)
    params = {imp.param_vars[n].name_hint: imp.param_arrays[n]
              for n in imp.param_vars if n in imp.used_params}
    return mod, params

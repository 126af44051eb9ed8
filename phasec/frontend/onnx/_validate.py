"""Structural validation of an ONNX model before conversion, as strict as
ONNX Runtime's session creation.

ONNX Runtime (the reference for what a valid model is) refuses a model
whose graph breaks the ONNX IR's rules; the importer refuses the same
models, with a :class:`~phasec.frontend.errors.FrontendError` naming the
node (index, name, op type) -- exit status 2 on the command line:

* **opsets**: each imported domain ONNX Runtime knows (the default domain,
  ``ai.onnx.ml``, the training domains, ``com.microsoft``) at a version it
  knows (``opset 99`` is refused; an unknown domain that no node uses is
  accepted, as ORT does); a model importing no opset at all;
* **single assignment**: every value name is defined once: graph inputs,
  node outputs (a node output may not redefine a graph input or an
  initializer); non-empty node names are unique, except Constant nodes'
  (ORT makes them initializers first); a node output named ``""``
  where the operator's output is not optional;
* **references**: every node input is a graph input, an initializer or a
  node output; the graph has at least one output and each is defined; the
  nodes form no cycle. Nodes listed out of order are *accepted* (ORT sorts
  them): :func:`validate` returns the topological order to convert in;
* **schemas**: each default-domain node against its operator's schema at
  the model's opset (known operator at that version, input and output
  counts, attribute names and types, required attributes) --
  ``onnx.checker.check_node``, the check ORT's graph resolution makes;
* **attribute and constant-input domains**: ONNX's type and shape inference
  in strict mode, as ORT runs it when it loads a model (negative or
  mismatching ``Split`` sizes, ``TopK``'s k beyond the axis, a
  ``DepthToSpace`` blocksize of 0, a window length below 1, element types
  of the declared outputs...). Declared shapes of outputs and intermediate
  values are not held against the inferred ones (ORT only warns); their
  element types are.

Nodes outside the default domain are left to the importer, which lists
them as unsupported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from phasec.frontend.errors import FrontendError
from phasec.frontend.onnx._dtypes import type_name

__all__ = ["validate", "known_opsets", "check_text_fields"]

#: Domains ONNX Runtime knows beyond those in ``onnx.defs``, with the
#: newest version it accepts (its contrib operators).
_ORT_DOMAINS = {"com.microsoft": 1, "com.microsoft.nchwc": 1, "com.microsoft.experimental": 1}

#: A larger initializer is given to shape inference as a typed graph input
#: (its shape known, its values not): values that decide shapes are small,
#: and inference would otherwise copy every weight of a large model.
_INFERENCE_VALUE_LIMIT = 1 << 16


def known_opsets() -> dict[str, tuple[int, int]]:
    """Domain -> (oldest, newest) opset version accepted."""
    import onnx.defs

    table = {d or "ai.onnx": v for d, v in onnx.defs.C.schema_version_map().items()}
    for d, newest in _ORT_DOMAINS.items():
        table.setdefault(d, (1, newest))
    return table


def check_text_fields(model: Any, label: str) -> None:
    """Every string field of ``model`` is UTF-8, as protobuf requires: a
    damaged name would otherwise raise a ``UnicodeDecodeError`` wherever it
    is first read. Bytes fields (tensor data) are not touched.

    Raises:
        FrontendError: naming the field's path, e.g. ``graph.node[3].name``.
    """
    from google.protobuf.descriptor import FieldDescriptor as FD

    # (only the fields set, ListFields; a path is kept as links and spelled
    # out on an error only: the walk costs ~0.1 s for a DenseNet-121 otherwise)
    stack: list[tuple[Any, tuple[Any, ...] | None]] = [(model, None)]
    while stack:
        msg, path = stack.pop()
        for field, value in msg.ListFields():
            repeated = (field.is_repeated if hasattr(field, "is_repeated")  # protobuf >= 6
                        else field.label == FD.LABEL_REPEATED)
            if field.type == FD.TYPE_MESSAGE:
                if repeated:
                    stack.extend((m, (path, field.name, i)) for i, m in enumerate(value))
                else:
                    stack.append((value, (path, field.name, None)))
            elif field.type == FD.TYPE_STRING and any(
                    not isinstance(v, str) for v in (value if repeated else (value,))):
                # (ONNX is proto2: protobuf hands back invalid UTF-8 as bytes, not str)
                raise FrontendError(f"{label}: {_spelled((path, field.name, None))} is not "
                                    "valid UTF-8 text (a damaged or non-ONNX file)")


def _spelled(path: tuple[Any, ...] | None) -> str:
    """``graph.node[3].name`` of a path of (parent, field, index) links."""
    parts: list[str] = []
    while path is not None:
        path, name, index = path
        parts.append(name if index is None else f"{name}[{index}]")
    return ".".join(reversed(parts))


def _where(node: Any, index: int) -> str:
    return f"node {index} {node.name!r} ({node.op_type})"


def validate(model: Any, label: str, shapes: Mapping[str, Sequence[Any]] | None = None
             ) -> list[int]:
    """Check ``model`` as ONNX Runtime does when it loads it (see the module
    docstring); returns the order in which to convert the nodes (their
    indices, topologically sorted, the listed order where it is one).
    ``shapes`` are the importer's overrides of input shapes (ints or names).

    Raises:
        FrontendError: what is wrong, and where (node index, name, op type).
    """
    graph = model.graph
    _check_ir_version(model, label)
    opsets = _check_opsets(model, label)
    _check_names(graph, label)
    order = _topological_order(graph, label)
    _check_schemas(model, label, opsets)
    _check_inference(model, label, order, shapes or {})
    return order


#: what onnx's checker (and ORT) hold IR and opset versions in, a C int: the
#: fields are int64, and beyond the checker's context raised TypeError
_C_INT = (-(1 << 31), (1 << 31) - 1)


def _check_ir_version(model: Any, label: str) -> None:
    # (within a C int, what ORT accepts stays accepted, a negative version included)
    import onnx

    if not _C_INT[0] <= model.ir_version <= _C_INT[1]:
        raise FrontendError(f"{label}: ir_version {model.ir_version} is not an IR version "
                            f"(the installed onnx knows versions up to {onnx.IR_VERSION})")


def _check_opsets(model: Any, label: str) -> dict[str, int]:
    if not len(model.opset_import):
        raise FrontendError(f"{label}: the model imports no opset (an ONNX model names the "
                            "version of every operator set it uses)")
    known = known_opsets()
    opsets: dict[str, int] = {}
    for o in model.opset_import:
        domain = o.domain or "ai.onnx"
        if domain in opsets:
            raise FrontendError(f"{label}: the model imports domain {domain!r} twice")
        opsets[domain] = int(o.version)
        rng = known.get(domain)
        if rng is not None and not rng[0] <= o.version <= rng[1]:
            raise FrontendError(f"{label}: opset {o.version} of domain {domain!r} does not "
                                f"exist (known versions: {rng[0]} to {rng[1]})")
    if "ai.onnx" not in opsets and any((n.domain or "ai.onnx") == "ai.onnx"
                                       for n in model.graph.node):
        raise FrontendError(f"{label}: the model's nodes use the default operator set but "
                            "the model does not import it")
    return opsets


def _check_names(graph: Any, label: str) -> None:
    defined: dict[str, str] = {}
    for vi in graph.input:
        if not vi.name:
            raise FrontendError(f"{label}: a graph input has an empty name")
        if vi.name in defined:
            raise FrontendError(f"{label}: graph input {vi.name!r} is declared twice")
        defined[vi.name] = "a graph input"
    inits = {t.name for t in graph.initializer}
    node_names: dict[str, int] = {}
    for index, node in enumerate(graph.node):
        # ORT turns default-domain Constant nodes into initializers before it
        # checks node names: their names may repeat (silero-vad's exports)
        constant = node.op_type == "Constant" and node.domain in ("", "ai.onnx")
        if node.name and not constant:
            if node.name in node_names:
                raise FrontendError(f"{label}: {_where(node, index)}: node {node_names[node.name]} "
                                    f"has the same name (node names are unique)")
            node_names[node.name] = index
        for out in node.output:
            if not out:
                continue
            if out in defined or out in inits:
                what = defined.get(out, "an initializer")
                raise FrontendError(f"{label}: {_where(node, index)}: output {out!r} is "
                                    f"already defined by {what} (each value is assigned once)")
            defined[out] = f"node {index}"
    if not len(graph.output):
        raise FrontendError(f"{label}: the graph has no outputs (nothing to compute)")
    for vi in graph.output:
        if vi.name not in defined and vi.name not in inits:
            raise FrontendError(f"{label}: graph output {vi.name!r} is not produced by any node, "
                                "input or initializer")


def _topological_order(graph: Any, label: str) -> list[int]:
    available = {vi.name for vi in graph.input} | {t.name for t in graph.initializer}
    producer = {out: i for i, n in enumerate(graph.node) for out in n.output if out}
    for index, node in enumerate(graph.node):
        for name in node.input:
            if name and name not in available and name not in producer:
                raise FrontendError(f"{label}: {_where(node, index)}: input {name!r} is not a "
                                    "graph input, an initializer or the output of a node")
    order: list[int] = []
    state = [0] * len(graph.node)  # 0 new, 1 on the path, 2 done
    for root in range(len(graph.node)):
        if state[root]:
            continue
        stack = [(root, 0)]
        state[root] = 1
        while stack:  # depth first over inputs, without recursion (deep graphs)
            i, k = stack[-1]
            inputs = graph.node[i].input
            if k < len(inputs):
                stack[-1] = (i, k + 1)
                j = producer.get(inputs[k]) if inputs[k] not in available else None
                if j is None or state[j] == 2:
                    continue
                if state[j] == 1:
                    raise FrontendError(f"{label}: {_where(graph.node[j], j)}: the graph has a "
                                        "cycle through this node")
                state[j] = 1
                stack.append((j, 0))
            else:
                state[i] = 2
                order.append(i)
                stack.pop()
    return order


def _check_schemas(model: Any, label: str, opsets: dict[str, int]) -> None:
    import onnx.checker
    import onnx.defs

    ctx = onnx.checker.C.CheckerContext()
    ctx.ir_version = model.ir_version or onnx.IR_VERSION
    # (a domain onnx does not know may have any version, as in ORT; the known
    # ones are within their range already)
    ctx.opset_imports = {("" if d == "ai.onnx" else d): v for d, v in opsets.items()
                         if _C_INT[0] <= v <= _C_INT[1]}
    opset = opsets.get("ai.onnx", 0)
    for index, node in enumerate(model.graph.node):
        if (node.domain or "ai.onnx") != "ai.onnx":
            continue
        if not _has_subgraph(node):
            try:
                onnx.checker.check_node(node, ctx)
            except Exception as exc:  # noqa: BLE001 - onnx's ValidationError and protobuf errors
                raise FrontendError(f"{label}: {_where(node, index)}, opset {opset}: "
                                    f"{_first_line(exc)}") from None
        _check_attribute_types(node, index, label, opset)
        if node.op_type == "Split":
            _check_split_outputs(node, index, label)


def _check_attribute_types(node: Any, index: int, label: str, opset: int) -> None:
    """Each attribute has the type the operator's schema declares: onnx's
    checker is not run on a node holding a graph (control flow), so a graph
    where ``strides`` belongs reached the converters (a TypeError there)."""
    import onnx.defs

    try:
        schema = onnx.defs.get_schema(node.op_type, opset, "")
    except Exception:  # noqa: BLE001 - no such operator: the checks that follow say so
        return
    for a in node.attribute:
        want = schema.attributes.get(a.name)
        if want is None:
            if _has_subgraph(node):  # (check_node reports it for the others)
                raise FrontendError(f"{label}: {_where(node, index)}, opset {opset}: "
                                    f"{node.op_type} has no attribute {a.name!r}")
            continue
        if int(a.type) != int(want.type):
            got = _ATTR_NAMES.get(int(a.type), str(int(a.type)))
            raise FrontendError(f"{label}: {_where(node, index)}, opset {opset}: attribute "
                                f"{a.name!r} must be of type {want.type.name}, not {got}")


#: AttributeProto.AttributeType's names, for messages (any number may come)
_ATTR_NAMES = {0: "UNDEFINED", 1: "FLOAT", 2: "INT", 3: "STRING", 4: "TENSOR", 5: "GRAPH",
            6: "FLOATS", 7: "INTS", 8: "STRINGS", 9: "TENSORS", 10: "GRAPHS",
            11: "SPARSE_TENSOR", 12: "SPARSE_TENSORS", 13: "TYPE_PROTO", 14: "TYPE_PROTOS"}


def _check_split_outputs(node: Any, index: int, label: str) -> None:
    """``Split``'s ``num_outputs`` is its number of outputs (ORT's rule;
    onnx's own inference aborts the process on fewer outputs than that)."""
    for a in node.attribute:
        if a.name == "num_outputs" and a.i != len(node.output):
            raise FrontendError(f"{label}: {_where(node, index)}: num_outputs is {a.i}, but the "
                                f"node has {len(node.output)} outputs")


def _check_inference(model: Any, label: str, order: list[int],
                     shapes: Mapping[str, Sequence[Any]]) -> None:
    """Each node's type and shape inference function on its inputs' types and
    known values, in strict mode and in topological order, each node's
    inferred outputs typing the next ones: as ORT resolves a graph. (Not
    onnx's whole-graph inference: run strictly it also checks the bodies of
    operators defined as functions, which ORT does not, and run leniently
    it carries on past a node's error and can crash on what follows.)"""
    import onnx
    import onnx.defs
    import onnx.shape_inference

    copy = _inference_copy(model, order, shapes)
    types = {vi.name: vi.type for vi in copy.graph.input if vi.type.WhichOneof("value")}
    known = {t.name: t for t in copy.graph.initializer}
    for t in copy.graph.initializer:  # (not graph inputs since IR version 4)
        types.setdefault(t.name, onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims)))
    for node in copy.graph.node:  # ORT makes Constant nodes initializers
        if node.op_type == "Constant" and (node.domain or "ai.onnx") == "ai.onnx":
            for a in node.attribute:
                if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                    known[node.output[0]] = a.t
                    types[node.output[0]] = onnx.helper.make_tensor_type_proto(
                        a.t.data_type, list(a.t.dims))
    opsets = list(copy.opset_import)
    versions = {(o.domain or "ai.onnx"): o.version for o in opsets}
    for index in order:
        node = model.graph.node[index]
        if (node.domain or "ai.onnx") != "ai.onnx" or _has_subgraph(node):
            continue
        if node.op_type == "Constant":  # ORT makes it an initializer, uninferred
            continue
        if any(name and name not in types for name in node.input):
            continue  # an input of unknown type: nothing to check it against
        try:
            schema = onnx.defs.get_schema(node.op_type, versions["ai.onnx"], "")
            out = onnx.shape_inference.infer_node_outputs(
                schema, node, {n: types[n] for n in node.input if n},
                {n: known[n] for n in node.input if n in known}, opset_imports=opsets,
                ir_version=copy.ir_version or onnx.IR_VERSION)
        except Exception as exc:  # noqa: BLE001 - InferenceError, SchemaError
            raise FrontendError(f"{label}: {_where(node, index)}: invalid model (ONNX type and "
                                f"shape inference): {_first_line(exc)}") from None
        _check_declared_types(model, label, node, index, out)
        types.update((k, t) for k, t in out.items() if t.WhichOneof("value"))


def _check_declared_types(model: Any, label: str, node: Any, index: int,
                          inferred: Mapping[str, Any]) -> None:
    """A graph output's declared element type is the one its node makes."""
    for vi in model.graph.output:
        t = inferred.get(vi.name)
        if t is None or not vi.type.HasField("tensor_type") or not t.HasField("tensor_type"):
            continue
        want, got = vi.type.tensor_type.elem_type, t.tensor_type.elem_type
        if want and got and want != got:
            name = type_name  # (an unknown number too)
            raise FrontendError(f"{label}: {_where(node, index)}: output {vi.name!r} is "
                                f"declared {name(want)} but the node makes {name(got)}")


def _inference_copy(model: Any, order: list[int], shapes: Mapping[str, Sequence[Any]]) -> Any:
    """The model as shape inference sees it: nodes in topological order,
    input shapes overridden by ``shapes``, large initializers as typed
    inputs, declared shapes of outputs and intermediate values dropped
    (element types kept)."""
    import onnx
    from onnx import helper

    copy = onnx.ModelProto()
    copy.ir_version = model.ir_version
    # (an opset of a domain onnx does not know, beyond a C int, is left out:
    # inference does not read it, and its arguments are C ints)
    copy.opset_import.extend(o for o in model.opset_import
                             if _C_INT[0] <= o.version <= _C_INT[1])
    g = copy.graph
    src = model.graph
    g.name = src.name
    g.node.extend(src.node[i] for i in order)
    declared = {vi.name for vi in src.input}
    g.input.extend(src.input)
    for vi in g.input:
        dims = shapes.get(vi.name)
        if dims is None or not vi.type.HasField("tensor_type"):
            continue
        shape = vi.type.tensor_type.shape
        shape.Clear()
        for d in dims:
            dim = shape.dim.add()
            if isinstance(d, str):
                dim.dim_param = d
            elif isinstance(d, int):
                dim.dim_value = d
    for t in src.initializer:
        if _elements(t) <= _INFERENCE_VALUE_LIMIT:
            g.initializer.append(t)
        elif t.name not in declared:
            declared.add(t.name)
            g.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    for vi in src.output:
        out = g.output.add()
        out.name = vi.name
        if vi.type.HasField("tensor_type"):
            out.type.tensor_type.elem_type = vi.type.tensor_type.elem_type
        else:
            out.type.CopyFrom(vi.type)
    return copy


def _has_subgraph(node: Any) -> bool:
    """Control flow (If, Loop, Scan): its bodies read values of the enclosing
    graph, which the node-by-node checks cannot see; the converters check
    these nodes."""
    return any(a.type in (5, 10) for a in node.attribute)  # GRAPH, GRAPHS


def _elements(t: Any) -> int:
    n = 1
    for d in t.dims:
        n *= int(d)
    return n


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return " ".join(text.splitlines()[0].split())[:600] if text else type(exc).__name__

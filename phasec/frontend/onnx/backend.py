"""phasec as an ONNX backend (``onnx.backend.base.Backend``), the interface the
ONNX conformance suite (``onnx.backend.test.BackendTest``) drives::

    import phasec.frontend.onnx.backend as backend
    rep = backend.prepare(model)                 # import, compile, load the VM
    outputs = rep.run([x])                       # or backend.run_model(model, [x])
    outputs = backend.run_node(node, [x, y])     # one node on its own

``prepare`` imports the model with :func:`~phasec.frontend.onnx.from_onnx`,
compiles it with the default phase-checked pipeline (:func:`phasec.build`)
and loads it on a :class:`~phasec.VirtualMachine`. A model that uses an
operator, attribute or dtype the frontend does not support makes ``prepare``
raise :class:`unittest.SkipTest` with the frontend's list of unsupported
nodes: the test runner counts it as skipped, never as a wrong answer. Only
the CPU device exists.

Shape-determining inputs. phasec compiles for known shapes, so values that
decide shapes (a Reshape's target shape, Slice's starts, a reduction's
axes...) must be known at import. When such a value is a graph input (as
in many conformance cases), ``prepare`` returns a representation that
compiles on ``run``, with those inputs bound to the values given (recompiled
when they change, one compiled model per distinct set of values): the
specialization a static-shape compiler performs. A value computed from
graph inputs (a window's size cast and shifted before a Range) binds the
inputs it is computed from, when they are small (at most
:data:`SMALL_INPUT` elements, statically shaped): never a data tensor (a
``Shape`` or ``Size`` of a data tensor reads only its shape, which the importer
knows: CenterCropPad's expansion pads by the difference of the input's shape
and a target shape given as an input). If the model is still
unsupported with the values bound, ``run`` raises ``unittest.SkipTest``.
"""

from __future__ import annotations

import unittest
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper
from onnx.backend.base import Backend, BackendRep, Device, DeviceType

import phasec
from phasec.frontend.errors import FrontendError, UnsupportedModelError
from phasec.frontend.onnx import from_onnx
from phasec.frontend.onnx._dtypes import carrier, narrow_format

__all__ = ["PhasecBackend", "PhasecRep", "SpecializingRep", "prepare", "run_model", "run_node", "supports_device"]


class PhasecRep(BackendRep):
    """A compiled model: ``run(inputs)`` returns its outputs as a tuple of arrays."""

    def __init__(self, vm: Any, input_names: Sequence[str], output_names: Sequence[str],
                 narrow: Mapping[str, Any] | None = None, sequences: Sequence[str] = ()) -> None:
        self.vm = vm
        self.input_names = list(input_names)
        self.output_names = list(output_names)
        #: inputs and outputs of a narrow float type (bfloat16, float8, float4),
        #: held in float32 by phasec: name -> their numpy (ml_dtypes) dtype
        self.narrow = dict(narrow or {})
        #: outputs that are sequences (returned as lists of arrays)
        self.sequences = set(sequences)
        #: the dtypes phasec holds them in (float32, int8, uint8)
        self.carriers = {n: carrier(narrow_format(helper.np_dtype_to_tensor_dtype(t)))
                         for n, t in self.narrow.items()}

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Run on ``inputs``: a sequence in graph-input order, a mapping by
        input name, or a single array for a one-input model."""
        if isinstance(inputs, Mapping):
            missing = [n for n in self.input_names if n not in inputs]
            if missing:
                raise FrontendError(f"missing input(s) {', '.join(map(repr, missing))}; "
                                    f"the model's inputs are {self.input_names}")
            inputs = [inputs[n] for n in self.input_names]
        elif isinstance(inputs, np.ndarray):
            inputs = [inputs]
        # np.require keeps 0-d arrays 0-d (ascontiguousarray would make them 1-d)
        arrays = [np.require(np.asarray(x), requirements="C") for x in inputs]
        arrays = [a.astype(self.carriers[n]) if n in self.narrow else a
                  for n, a in zip(self.input_names, arrays)]
        out = self.vm["main"](*arrays)
        outs = tuple(out) if len(self.output_names) > 1 else (out,)
        # a sequence output (a tuple of its tensors): the list of them
        outs = tuple([np.asarray(t) for t in o] if n in self.sequences else o
                     for n, o in zip(self.output_names, outs))
        # (exact: the values are the format's, rounded by the casts to it)
        return tuple(o if n in self.sequences else
                     np.asarray(o).astype(self.narrow[n]) if n in self.narrow else np.asarray(o)
                     for n, o in zip(self.output_names, outs))


class SpecializingRep(BackendRep):
    """A model whose shape-determining graph inputs are bound at ``run``."""

    def __init__(self, model: onnx.ModelProto, bound: Sequence[str], device: str) -> None:
        self.model = model
        self.device = device
        inits = {t.name for t in model.graph.initializer}
        self.input_names = [vi.name for vi in model.graph.input if vi.name not in inits]
        self.bound = [n for n in self.input_names if n in set(bound)]
        self._compiled: dict[tuple, PhasecRep] = {}

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        if isinstance(inputs, Mapping):
            feeds = {n: np.asarray(inputs[n]) for n in self.input_names}
        else:
            seq = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            feeds = {n: np.asarray(v) for n, v in zip(self.input_names, seq)}
        key = tuple((n, feeds[n].dtype.str, feeds[n].shape, feeds[n].tobytes())
                    for n in self.bound)
        rep = self._compiled.get(key)
        if rep is None:
            rep = self._compiled[key] = PhasecBackend.prepare(
                _bind_inputs(self.model, {n: feeds[n] for n in self.bound}), self.device)
        return rep.run({n: v for n, v in feeds.items() if n not in self.bound})


#: a graph input of at most this many elements may be bound to decide a value
#: computed from it (a window size, a crop size); larger ones are data
SMALL_INPUT = 16


def _subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    return [a.g for a in node.attribute if a.HasField("g")] + \
        [g for a in node.attribute for g in a.graphs]


def _nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """The graph's nodes and those of its subgraphs, at any depth (ONNX
    names each value once across scopes)."""
    out = []
    for n in graph.node:
        out.append(n)
        for g in _subgraphs(n):
            out.extend(_nodes(g))
    return out


def _small_sources(model: onnx.ModelProto, needed: set[str],
                   inputs: set[str]) -> set[str] | None:
    """The graph inputs the ``needed`` values are computed from (through the
    graph's nodes and its subgraphs'), when those are all small (a statically shaped input
    of at most :data:`SMALL_INPUT` elements) and a graph input feeds each
    value: binding them makes the values known. None otherwise."""
    producer = {o: n for n in _nodes(model.graph) for o in n.output if o}
    declared = {vi.name: vi for vi in model.graph.input}
    inits = {t.name for t in model.graph.initializer}
    sources: set[str] = set()
    for value in needed:
        stack, seen, found = [value], set(), False
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            if name in inputs:
                dims = declared[name].type.tensor_type.shape.dim
                if not declared[name].type.HasField("tensor_type") or any(
                        not d.HasField("dim_value") for d in dims):
                    return None
                if int(np.prod([d.dim_value for d in dims])) > SMALL_INPUT:
                    return None
                sources.add(name)
                found = True
            elif name in producer and producer[name].op_type in ("Shape", "Size"):
                continue  # reads only its input's shape, which the importer knows
            elif name in producer:
                node = producer[name]
                stack.extend(i for i in node.input if i)
                # an If / Loop / Scan's outputs depend on what its bodies read
                for g in _subgraphs(node):
                    stack.extend(i for n in _nodes(g) for i in n.input if i)
            elif name not in inits:
                return None  # a subgraph's own input (a loop's iteration count...)
        if not found:
            return None
    return sources


def _bind_inputs(model: onnx.ModelProto, values: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """``model`` with the graph inputs in ``values`` turned into initializers."""
    from onnx import numpy_helper

    bound = onnx.ModelProto()
    bound.CopyFrom(model)
    keep = [vi for vi in bound.graph.input if vi.name not in values]
    del bound.graph.input[:]
    bound.graph.input.extend(keep)
    bound.graph.initializer.extend(numpy_helper.from_array(np.asarray(v), name)
                                   for name, v in values.items())
    return bound


class PhasecBackend(Backend):
    """The phasec ONNX backend (CPU only)."""

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return Device(device).type == DeviceType.CPU

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU",
                **kwargs: Any) -> PhasecRep | SpecializingRep:
        """Import and compile ``model``; unsupported content raises unittest.SkipTest."""
        if not cls.supports_device(device):
            raise FrontendError(f"phasec runs on the CPU only, not on {device!r}")
        try:
            mod = from_onnx(model)
        except UnsupportedModelError as exc:
            inits = {t.name for t in model.graph.initializer}
            inputs = {vi.name for vi in model.graph.input if vi.name not in inits}
            needed = {n.needs_value for n in exc.nodes}
            if all(n.needs_value in inputs for n in exc.nodes):
                return SpecializingRep(model, sorted(needed), device)
            # (a node failing for another reason may be one whose branches
            # only agree once a condition is known: bound, it is tried again)
            needed.discard("")
            sources = _small_sources(model, needed, inputs) if needed else None
            if sources:
                return SpecializingRep(model, sorted(sources), device)
            raise unittest.SkipTest(str(exc)) from None
        inits = {t.name for t in model.graph.initializer}
        inputs = [vi.name for vi in model.graph.input if vi.name not in inits]
        outputs = [vi.name for vi in model.graph.output]
        vm = phasec.VirtualMachine(phasec.build(mod))
        narrow = {vi.name: helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
                  for vi in [*model.graph.input, *model.graph.output]
                  if vi.type.HasField("tensor_type")
                  and narrow_format(vi.type.tensor_type.elem_type) is not None}
        sequences = [vi.name for vi in model.graph.output if vi.type.HasField("sequence_type")]
        return PhasecRep(vm, inputs, outputs, narrow, sequences)

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Sequence[tuple[Any, tuple[int, ...]]] | None = None,
                 **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Run one node: a model is built around it (inputs typed from ``inputs``)."""
        if isinstance(inputs, Mapping):
            names = [n for n in node.input if n]
            arrays = [np.asarray(inputs[n]) for n in names]
        else:
            arrays = [np.asarray(x) for x in inputs]
            names = [n for n in node.input if n][:len(arrays)]
        value_infos = [helper.make_tensor_value_info(
            n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in zip(names, arrays)]
        outs = [helper.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None)
                for n in node.output if n]
        opset = kwargs.get("opset_version", onnx.defs.onnx_opset_version())
        graph = helper.make_graph([node], "node", value_infos, outs)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        return cls.prepare(model, device).run(arrays)


prepare = PhasecBackend.prepare
run_model = PhasecBackend.run_model
run_node = PhasecBackend.run_node
supports_device = PhasecBackend.supports_device

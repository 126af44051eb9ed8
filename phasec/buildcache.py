"""Whole builds kept between processes: :func:`build_file`.

Building a model file again (a second ``phasec run model.onnx``, a service
restart) repeats import, every pass and the weight packing, although
nothing changed. :func:`build_file` keeps the finished executable in the
kernel cache (:mod:`phasec.backend.llvm.diskcache`, entries of kind
"build"), keyed by the SHA-256 of:

* the input file's bytes and its suffix (how it is read);
* every build option (optimization level, bounds checks, verification)
  and the threads set when building (:func:`phasec.target.tuning.build_threads`:
  a stem's conv + pool kernel is split in as many bands);
* every ``PHASEC_*`` environment variable (``PHASEC_WINOGRAD`` and
  ``PHASEC_VECTOR_BITS`` change the schedules; the others cost at most a
  miss);
* all of phasec's own sources (the package, its passes and verifier) and
  the phasec, llvmlite and LLVM versions and the target CPU: a changed
  compiler never reuses an old build.

A hit reads the executable back (its members stored, not deflated: no
inflating on the warm path; the entry read once into memory where its
constants, written on 64-byte boundaries, are used in place by the VM,
never copied) and compiles its kernels, which the kernel
entries of the same cache map without running LLVM. The kernels' TIR is
kept pickled, not as the executable's JSON: reading the JSON format needs
its schema, whose construction alone takes longer than the rest of a warm
build. The entries live under the kernel cache's trust rules (private
directories, no links followed, each entry bound to its key by an HMAC
under the cache's secret, all checked before anything is unpickled: the
same trust the cache gives the native code it maps), and the unpickler
makes nothing but phasec's TIR nodes and their ABIs. With the kernels the
entry keeps their plan (``runtime.plan_library``: exact fingerprint, the
kernel cache's program key, ABIs), so that a hit maps their code without
walking the TIR again; a plan that no longer fits (other settings) is
ignored and the kernels compiled from their TIR. A planted, damaged or
mismatching entry is ignored and the model is built again; so is an entry
of another format (:data:`ENTRY_FORMAT`, a warning says why) or one that
reads back as no valid executable. A model whose weights are in external data
files is never cached (their content is not in the key). ``PHASEC_KERNEL_CACHE=off`` turns this off
with the kernel cache; ``phasec cache info`` counts the builds, ``clear``
and ``prune`` treat them like any entry.
"""

from __future__ import annotations

import base64
import binascii
import copyreg
import dataclasses
import hashlib
import importlib.util
import inspect
import io
import operator
import os
import pickle
import warnings
from contextlib import AbstractContextManager
from pathlib import Path
from types import MappingProxyType, MemberDescriptorType
from typing import Any

import phasec
from phasec import __version__, collector
from phasec.errors import PhasecError
from phasec.fileio import read_bytes
from phasec.ir import Span, tir
from phasec.ir.expr import Function, SeqExpr
from phasec.backend.llvm import diskcache
from phasec.backend.llvm.abi import KernelABI, ParamABI
from phasec.backend.llvm.jit import compile_jobs, host_target_info
from phasec.backend.llvm.parallel import meanwhile, standby
from phasec.backend.llvm.runtime import PlannedLibrary, plan_library
from phasec.backend.vm import Executable
from phasec.frontend.onnx import from_onnx
from phasec.target.tuning import build_threads

__all__ = ["build_file", "build_key", "lookup", "remember"]

_SOURCES: list[str] = []


def _sources_digest() -> str:
    """SHA-256 of every source file of phasec, its passes and its verifier
    (computed once per process)."""
    if not _SOURCES:
        roots = [Path(__file__).resolve().parent]
        for sub in ("phasec.passes", "phasec.verifier"):
            spec = importlib.util.find_spec(sub)
            roots += [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
        h = hashlib.sha256(__version__.encode())
        for root in sorted(set(roots)):
            # (os.walk and plain strings: pathlib's rglob and relative_to
            # were two thirds of this, ~15 ms of a warm build)
            files = sorted(os.path.relpath(os.path.join(d, n), root)
                           for d, _, names in os.walk(root) for n in names if n.endswith(".py"))
            for rel in files:
                h.update(rel.encode() + b"\0")
                with open(os.path.join(root, rel), "rb") as f:
                    h.update(f.read())
        _SOURCES.append(h.hexdigest())
    return _SOURCES[0]


def build_key(data: bytes, suffix: str, opt_level: int, check_bounds: bool | None,
              verify: str = "each") -> str:
    """The cache key of building a file of content ``data`` and ``suffix``
    with these options (see the module docstring)."""
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("PHASEC_"))
    target = host_target_info()  # (its parallel runtime compiles meanwhile)
    text = "\0".join(("build", hashlib.sha256(data).hexdigest(), suffix.lower(),
                      repr((opt_level, check_bounds, verify, build_threads())), repr(env),
                      _sources_digest()))
    return diskcache.entry_key(text, opt_level, (target.triple, target.cpu, target.features))


def _mapping_proxy(items: dict) -> MappingProxyType:
    """Unpickles a read-only mapping of the TIR (a mappingproxy has no name to pickle by)."""
    return MappingProxyType(items)


#: the classes a pickled kernel may hold: TIR's own node classes, by plain name
#: (never a dotted path, which pickle would follow through the module's imports)
_TIR_CLASSES = frozenset(n for n, v in vars(tir).items()
                         if isinstance(v, type) and v.__module__ == tir.__name__)
#: the kernels' ABIs (their plan, see _pack), pickled as the nodes are
_ABI_CLASSES = (KernelABI, ParamABI)
#: each TIR node (and ABI) class's fields, in order (the state it is pickled as)
_NODE_FIELDS = {v: tuple(f.name for f in dataclasses.fields(v)) for v in (*(
    v for n, v in vars(tir).items() if n in _TIR_CLASSES and dataclasses.is_dataclass(v)),
    *_ABI_CLASSES)}
#: each TIR node class's state as a tuple, read in C (a generator of getattr
#: calls per node was a third of packing a build entry)
_NODE_STATE = {cls: (operator.attrgetter(*names) if len(names) > 1
                     else (lambda obj, _get=operator.attrgetter(*names): (_get(obj),))
                     if names else (lambda obj: ()))
               for cls, names in _NODE_FIELDS.items()}


def _setter(cls: type, name: str) -> Any:
    """A function setting field ``name`` of a ``cls`` node as the frozen
    dataclass's own ``__setstate__`` does: through the field's slot
    descriptor (no ``__setattr__``, no lookup of the name: reading a warm
    build's kernels ~20% faster), or ``object.__setattr__`` for a field that
    is no slot."""
    slot = inspect.getattr_static(cls, name, None)
    if isinstance(slot, MemberDescriptorType):
        return slot.__set__
    return lambda obj, value: object.__setattr__(obj, name, value)


#: each TIR node class's field setters, in order (see :func:`_setter`)
_NODE_SETTERS = {cls: tuple(_setter(cls, name) for name in names)
                 for cls, names in _NODE_FIELDS.items()}


def _tir_node(cls: type, values: tuple) -> Any:
    """Unpickles a TIR node: its fields set as the dataclass's own
    ``__setstate__`` sets them, without looking the fields up for every node
    (a third of reading a warm build's kernels)."""
    setters = _NODE_SETTERS.get(cls)
    if setters is None or type(values) is not tuple or len(values) != len(setters):
        raise pickle.UnpicklingError(f"{cls!r:.80} is no TIR node of {len(values)} fields")
    obj = object.__new__(cls)
    for setter, value in zip(setters, values):
        setter(obj, value)
    return obj


class _KernelPickler(pickle.Pickler):
    dispatch_table = {**copyreg.dispatch_table,
                      MappingProxyType: lambda m: (_mapping_proxy, (dict(m),))}

    def reducer_override(self, obj: Any) -> Any:
        state = _NODE_STATE.get(type(obj))
        if state is None:
            return NotImplemented
        return _tir_node, (type(obj), state(obj))


class _KernelUnpickler(pickle.Unpickler):
    """Makes TIR nodes (and their source positions) and nothing else."""

    def find_class(self, module: str, name: str) -> Any:
        # (a Span, a source position of kernels parsed from TVMScript, is data too)
        if (module == tir.__name__ and name in _TIR_CLASSES) or (module, name) in (
                (__name__, "_mapping_proxy"), (__name__, "_tir_node"), (Span.__module__, "Span"),
                *((c.__module__, c.__name__) for c in _ABI_CLASSES)):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not part of the TIR")


#: the first word of a build entry's text: another format (an older
#: phasec's entry) is a miss, never read as this one
ENTRY_FORMAT = "phasec-build-2"


def _pack(exe: Executable) -> tuple[bytes, str] | None:
    """(data, text) of a build entry: the executable's archive without its
    kernels; a line ``ENTRY_FORMAT fingerprint program-key`` (the kernels'
    plan, :func:`runtime.plan_library`, "none none" without kernels) and the
    kernels and their ABIs pickled together (base64: the ABIs' variables are
    the kernels' own). None when the kernels cannot be planned."""
    kernels = dict(exe.prim_funcs)
    plan = plan_library(kernels, check_bounds=exe.check_bounds) if kernels else None
    if kernels and plan is None:
        return None
    buffer = io.BytesIO()
    _KernelPickler(buffer, protocol=5).dump((kernels, dict(plan.abis) if plan else {}))
    head = f"{plan.fingerprint} {plan.program_key}" if plan else "none none"
    return exe.to_bytes(compress=False, with_kernels=False), \
        f"{ENTRY_FORMAT} {head}\n" + base64.b64encode(buffer.getvalue()).decode("ascii")


def _unpack(archive: bytes | memoryview, text: str, check_bounds: bool | None
            ) -> tuple[Executable, PlannedLibrary | None] | None:
    """The executable of a build entry and its kernels' plan, or None when
    it is not what this phasec stores (a warning says so). The entry is
    authenticated (its HMAC): the plan is the one computed from these very
    kernels when it was stored, not computed again (a walk of every kernel)."""
    try:
        head, _, pickled = text.partition("\n")
        form, _, plan_text = head.partition(" ")
        if form != ENTRY_FORMAT:  # (an older phasec's entry starts with a fingerprint)
            raise ValueError(f"format {form[:40]!r}, not {ENTRY_FORMAT!r}")
        fingerprint, program_key = plan_text.split(" ")
        kernels, abis = _KernelUnpickler(io.BytesIO(base64.b64decode(pickled, validate=True))).load()
        if not isinstance(kernels, dict) or not all(
                isinstance(k, str) and isinstance(f, tir.PrimFunc) for k, f in kernels.items()):
            raise ValueError("its kernels are no TIR")
        if not isinstance(abis, dict) or abis.keys() != kernels.keys() or not all(
                isinstance(a, KernelABI) for a in abis.values()):
            raise ValueError("its kernels' ABIs are not theirs")
        plan = PlannedLibrary(fingerprint, program_key, abis) if kernels else None
        return Executable.load(archive, check_bounds, name="build cache entry", kernels=kernels,
                               authenticated=True), plan
    except (PhasecError, pickle.UnpicklingError, binascii.Error, EOFError, ValueError,
            TypeError, AttributeError, IndexError, KeyError) as exc:
        warnings.warn(f"phasec: a build cache entry does not read back ({exc!s:.200}): it is "
                      f"not used (the model is built again)", diskcache.KernelCacheWarning,
                      stacklevel=2)
        return None


def _external_data(data: bytes) -> bool:
    """Whether the ONNX model ``data`` keeps weights in files of their own
    (or cannot be read: the importer will say why)."""
    import onnx  # (an optional dependency, as in phasec.frontend.onnx)

    try:
        model = onnx.load_from_string(data)
    except Exception:  # noqa: BLE001 - not a model: nothing to cache
        return True
    graphs = [model.graph]
    while graphs:  # every initializer, in subgraphs too
        g = graphs.pop()
        if any(t.data_location == onnx.TensorProto.EXTERNAL for t in g.initializer):
            return True
        graphs += [a.g for n in g.node for a in n.attribute if a.HasField("g")]
        graphs += [s for n in g.node for a in n.attribute for s in a.graphs]
    return False


def lookup(path: str | os.PathLike, opt_level: int = 2, check_bounds: bool | None = None,
           verify: str = "each") -> tuple[str | None, Executable | None]:
    """(the build key of the file ``path`` with these options, the cached
    executable or None); the key is None when the build may not be cached
    (cache off, weights in external files). The executable's kernels are
    compiled (from the kernel cache)."""
    if not diskcache.enabled():
        return None, None
    try:
        data = read_bytes(path, "model file")
    except PhasecError:  # the build reports it, as it would without a cache
        return None, None
    key = build_key(data, Path(path).suffix, opt_level, check_bounds, verify)
    hit = diskcache.load(key, kind="build")
    read = _unpack(*hit, check_bounds) if hit is not None else None
    if read is not None:
        # (no look for external data first: an entry exists only for bytes
        # that had none when it was stored, and the key is those bytes' hash)
        exe, plan = read
        exe.kernels("llvm", planned=plan)
        return key, exe
    try:
        if Path(path).suffix.lower() == ".onnx" and _external_data(data):
            return None, None
    except ImportError:  # the build reports it, as it would without a cache
        return None, None
    return key, None


def remember(key: str | None, exe: Executable) -> bool:
    """Keep ``exe``, built from the file :func:`lookup` gave ``key`` for
    (nothing when ``key`` is None); False when it was not kept."""
    return _store(key, _pack(exe) if key is not None else None)


def _store(key: str | None, entry: tuple[bytes, str] | None) -> bool:
    return key is not None and entry is not None and diskcache.store(key, *entry, kind="build")


def build_file(path: str | os.PathLike, opt_level: int = 2, *,
               check_bounds: bool | None = None, cache: bool = True) -> Executable:
    """Read a module file (``.py`` TVMScript, ``.json``, ``.onnx``) and
    build it with the default pipeline (as :func:`phasec.build`, kernels
    compiled with LLVM), reusing the executable of an earlier build of the
    same file with the same options and the same phasec (see the module
    docstring); ``cache=False`` always builds."""
    path = os.fspath(path)
    key, exe = lookup(path, opt_level, check_bounds) if cache else (None, None)
    if exe is not None:
        return exe
    # (the pipeline and the TVMScript loader through the package's lazy names:
    # a hit runs no pass and reads no script, and importing them was ~24 ms
    # of a fresh process's warm build)
    with collector.rare_collections():
        mod = from_onnx(path) if Path(path).suffix.lower() == ".onnx" else phasec.load(path)
        if key is None:
            return phasec.build(mod, opt_level, check_bounds=check_bounds)
        with compile_worker_ahead(mod):
            exe = phasec.build(mod, opt_level, check_bounds=check_bounds, kernels="none")
            compile_and_remember(key, exe)
    return exe


def compile_worker_ahead(mod: Any) -> AbstractContextManager[None]:
    """For the block that builds ``mod``: a compile worker started now,
    beside the passes, for a model large enough to give it modules (see
    ``parallel.standby``; unused, it is stopped when the block ends)."""
    return standby(1 if compile_jobs() > 1 and _bindings(mod) >= STANDBY_BINDINGS else 0)


def compile_and_remember(key: str | None, exe: Executable, backend: str = "llvm") -> None:
    """Compile ``exe``'s kernels and keep the executable under ``key`` (as
    :func:`remember`; nothing kept when ``key`` is None). The entry (the
    executable and its kernels' TIR) is packed and stored while LLVM
    compiles the kernels in worker processes, not after them: for ResNet-50
    that is ~0.5 s of CPU (an archive of 126 MB, its HMAC, its write), which
    ran on one core once LLVM had finished. Should the kernels then fail (an
    error, Ctrl-C), the entry is removed again: an entry exists only for a
    build that ended (one killed outright may leave its entry, an executable
    whose kernels a later build compiles from its TIR, as this one would have)."""
    if key is None:
        exe.kernels(backend)
        return
    with meanwhile(lambda: _store(key, _pack(exe))) as storing:
        try:
            exe.kernels(backend)
        except BaseException:
            if not storing.pending:  # (stored meanwhile)
                diskcache.discard(key, kind="build")
            raise
    storing.result()


#: the Relax bindings of a model from which :func:`build_file` starts a
#: compile worker before its passes (SqueezeNet has 113, ResNet-50 285): a
#: model under it rarely has kernel IR for two modules
#: (``parallel.MIN_SPLIT_IR_CHARS``). A wrong guess costs ~0.05 s: of CPU
#: on another core (a worker unused), or of the worker's time (one started
#: at the first module, as before)
STANDBY_BINDINGS = 16


def _bindings(mod: Any) -> int:
    """The bindings of the Relax functions of ``mod`` (its operators, roughly)."""
    return sum(len(block.bindings) for f in mod.functions.values()
               if isinstance(f, Function) and isinstance(f.body, SeqExpr)
               for block in f.body.blocks)

"""The default compilation pipeline and :func:`build`.

``phasec.build(mod)`` takes a module from whatever phase it is in to a VM
:class:`~phasec.backend.vm.Executable`::

    exe = phasec.build(mod, opt_level=2)
    vm = phasec.VirtualMachine(exe)
    y = vm["main"](x, w)

The default pipeline (:func:`default_pipeline`), phase by phase. Passes whose
``opt_level`` is above the requested level are left out (``opt_level`` in
brackets where it is not 0):

**ingestion (0)**

1. ``Normalize`` -- A-normal form, struct info filled in.
2. ``LambdaLifting`` -- nested functions become private module-level
   functions; transition to *optimization*.

**optimization (1)**

3. ``ConvertToDataflow`` [1] -- runs of pure bindings become dataflow blocks,
   so that the dataflow passes below (and FuseOps) see them even in modules
   written without ``R.dataflow()``.
4. ``CanonicalizeBindings`` [1] -- removes trivial rebindings.
5. ``FoldConstant`` -- evaluates calls whose inputs are all constants with
   the operators' numpy references (:mod:`phasec.op.fold`; no compiler
   involved).
6. ``FuseQDQMatmul`` [1] -- a dequantize -> matmul (constant int8 weight)
   -> quantize chain becomes the integer GEMM requantized in its epilogue,
   as ONNX Runtime's QLinearMatMul computes it.
7. ``BatchTakenMatmuls`` [1] -- matmuls of one constant weight by rows
   taken from one tensor (a recurrence exported step by step) become one
   matmul of the tensor, split into its rows.
8. ``EliminateCommonSubexpr`` [3] -- merges identical pure calls (opt_level 3,
   as in TVM's tutorial); runs before DeadCodeElimination, which then removes
   the duplicates it left unused.
9. ``DeadCodeElimination`` [1] -- unused pure bindings and unreachable
   private functions.
10. ``FuseOps{fuse_opt_level=<opt_level>}`` -- groups operators into
    ``Primitive`` functions (``fuse_opt_level=0``: one operator per group).
11. ``ToNonDataflow`` -- removes dataflow blocks (``LegalizeOps`` requires it).
12. ``LegalizeOps`` -- every operator, and every fused group, becomes a
    ``call_tir`` into one generated PrimFunc; transition to *lowering*.

**lowering (2)**

13. ``PackConstantWeights`` [2] -- a matmul kernel's constant weights are
    packed into its register tiles' layout once, at build time, instead of
    on every call.
14. ``RemovePurityChecking`` -- functions marked ``relax.force_pure``; pure
    packed calls and closures become ordinary (impure) ones.
15. ``CallTIRRewrite`` -- explicit output allocation plus a direct kernel call.
16. ``StaticPlanBlockMemory`` -- tensors whose lifetimes do not overlap share
    storage.
17. ``VMBuiltinLower`` -- what is left becomes VM builtins; transition to
    *build*.

**build (3)**: empty; :func:`build` then runs VM codegen
(:func:`phasec.backend.vm.codegen`) and compiles the PrimFuncs to native code
with LLVM (cached per executable and by the structure of the kernels).

The pipeline is a :class:`phasec.transform.Pipeline`: validated statically
when it is created and again (under the actual :class:`PassContext`) before
anything runs, and extensible per phase window::

    pipeline = default_pipeline(opt_level=2)
    pipeline.insert(Phase.LOWERING, passes=[MyKernelTweak()], at="end")
    exe = phasec.build(mod, pipeline=pipeline)

Modules may enter :func:`build` in any phase: the pipeline starts at the
module's phase window (a module already in *lowering* skips ingestion and
optimization; one in *build* goes straight to codegen).

**Required passes.** ``LegalizeOps`` requires ``ToNonDataflow`` and
``VMBuiltinLower`` requires ``RemovePurityChecking``, ``CallTIRRewrite`` and
``StaticPlanBlockMemory``. The pipeline lists them explicitly, where they
belong; a :class:`Sequential` does not run a required pass again when it
already ran earlier in the sequence, so each pass of the default pipeline
runs once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from phasec import collector
from phasec.errors import PhaseError
from phasec.ir import IRModule, Phase
from phasec.transform import (
    Pass, PassConfigError, PassContext, PassInstrument, Pipeline, Sequential, get_pass,
    parse_pipeline,
)
from phasec.transform.context import as_instruments
from phasec.transform.info import is_int_at_least
from phasec.transform.verification import is_verified

if TYPE_CHECKING:
    from phasec.backend.vm import Executable

__all__ = ["default_pipeline", "build", "lower", "codegen_and_compile", "run_pipeline",
           "pipeline_from", "pipeline_for_phase", "lower_context", "KERNEL_BACKENDS"]

#: Values of ``build(..., kernels=...)``: compile kernels with LLVM, prepare
#: the TIR interpreter, or compile nothing yet (the VM compiles on creation).
KERNEL_BACKENDS = ("llvm", "interp", "none")

# Pass names per phase window, in order; FuseOps gets fuse_opt_level=opt_level.
_INGESTION = ("Normalize", "LambdaLifting")
_OPTIMIZATION = ("ConvertToDataflow", "CanonicalizeBindings", "FoldConstant",
                 "FuseQDQMatmul", "BatchTakenMatmuls", "EliminateCommonSubexpr",
                 "DeadCodeElimination", "FuseOps", "ToNonDataflow", "LegalizeOps")
_LOWERING = ("PackConstantWeights", "RemovePurityChecking", "CallTIRRewrite",
             "StaticPlanBlockMemory", "VMBuiltinLower")


def default_pipeline(opt_level: int = 2) -> Pipeline:
    """The default pipeline from ingestion to build (see the module docstring).

    Passes whose ``opt_level`` is above ``opt_level`` are left out (transition
    passes are always in); ``FuseOps`` gets ``fuse_opt_level=opt_level``.
    Each call returns a new :class:`Pipeline`, so editing it (``insert``)
    never changes anyone else's.

    Raises :class:`PassConfigError` for a bad ``opt_level`` or when a pass of
    the pipeline is not registered.
    """
    if not is_int_at_least(opt_level, 0):
        raise PassConfigError(f"default_pipeline(opt_level=...) must be an int >= 0, "
                              f"not {opt_level!r}")
    passes: list[Pass] = []
    for name in (*_INGESTION, *_OPTIMIZATION, *_LOWERING):
        options = {"fuse_opt_level": opt_level} if name == "FuseOps" else {}
        p = get_pass(name, **options)
        if p.info.opt_level > opt_level and not p.info.is_transition:
            continue
        passes.append(p)
    return Pipeline(passes, start_phase=Phase.INGESTION, name=f"default_O{opt_level}")


def pipeline_from(pipeline: "Pipeline | Sequential | Pass | Iterable[Pass] | str | None",
                  opt_level: int = 2) -> Pipeline:
    """A :class:`Pipeline` from what users may pass as ``pipeline=``: None (the
    default pipeline), a Pipeline, a Sequential or a list of passes (flattened),
    one pass, or a textual spec (``"LambdaLifting,FuseOps{fuse_opt_level=2}"``)."""
    if pipeline is None:
        return default_pipeline(opt_level)
    if isinstance(pipeline, Pipeline):
        return pipeline
    if isinstance(pipeline, str):
        return Pipeline(parse_pipeline(pipeline).flatten(), name="pipeline")
    if isinstance(pipeline, Sequential):
        return Pipeline(pipeline.flatten(), name=pipeline.name)
    if isinstance(pipeline, Pass):
        return Pipeline([pipeline], name=pipeline.info.name)
    if isinstance(pipeline, Iterable):
        return Pipeline(list(pipeline), name="pipeline")
    raise PassConfigError(f"pipeline=... takes a Pipeline, a Sequential, a list of passes or "
                          f"a textual spec, not {type(pipeline).__name__}")


def pipeline_for_phase(pipeline: Pipeline, phase: Phase) -> Pipeline:
    """The part of ``pipeline`` that runs on a module in ``phase``: from the
    start of that phase's window (``pipeline`` itself when it starts in
    ``phase``). Raises :class:`PhaseError` when the pipeline never has the
    module in ``phase``."""
    if phase == pipeline.start_phase:
        return pipeline
    windows = pipeline.windows()
    if phase not in windows:
        reached = " -> ".join(p.label for p in windows)
        raise PhaseError(
            f"the module is in phase {phase.label}, but pipeline {pipeline.name!r} never has a "
            f"module in that phase (it goes {reached}); give the module in phase "
            f"{pipeline.start_phase.label} or use a pipeline that covers {phase.label}")
    start, _ = windows[phase]
    return Pipeline(pipeline.passes[start:], start_phase=phase, name=pipeline.name)


def run_pipeline(pipeline: "Pipeline | Sequential", mod: IRModule,
                 ctx: PassContext | None = None) -> IRModule:
    """Run ``pipeline`` on ``mod`` under ``ctx`` (default: the current context).

    The whole plan is validated before any pass runs (a misordered pipeline
    is a :class:`PhaseError` and nothing has run); ``mod`` is never modified.
    """
    if not isinstance(mod, IRModule):
        raise TypeError(f"run_pipeline needs an IRModule, not {type(mod).__name__}")
    seq = pipeline.to_sequential() if isinstance(pipeline, Pipeline) else pipeline
    if ctx is None:
        return seq(mod)
    with ctx:
        return seq(mod)


class _Forward(PassInstrument):
    """An instrument of an enclosing context, seen from a nested one: every
    hook is forwarded except entering and leaving (which would reset it)."""

    def __init__(self, inner: PassInstrument) -> None:
        self.inner = inner

    def should_run(self, mod: IRModule, info: Any) -> bool:
        return self.inner.should_run(mod, info)

    def run_before_pass(self, mod: IRModule, info: Any) -> None:
        self.inner.run_before_pass(mod, info)

    def run_after_pass(self, mod: IRModule, info: Any) -> None:
        self.inner.run_after_pass(mod, info)

    def run_after_verify(self, mod: IRModule, info: Any, seconds: float, stage: str) -> None:
        self.inner.run_after_verify(mod, info, seconds, stage)

    def run_on_skip(self, mod: IRModule, info: Any, reason: str) -> None:
        self.inner.run_on_skip(mod, info, reason)

    def run_on_error(self, mod: IRModule, info: Any, error: BaseException) -> None:
        self.inner.run_on_error(mod, info, error)

    def run_before_required(self, mod: IRModule, info: Any, required_by: Any) -> None:
        self.inner.run_before_required(mod, info, required_by)


def lower_context(opt_level: int, verify: str | bool,
                   instruments: Iterable[PassInstrument]) -> PassContext:
    """The context :func:`lower` runs in: the current context's settings
    (disabled and required passes, config, its instruments) with
    ``opt_level``, ``verify`` and ``instruments`` added."""
    outer = PassContext.current()
    own = as_instruments(instruments, "instruments=...")
    inherited = tuple(_Forward(i) for i in outer.instruments if not any(i is o for o in own))
    return outer.replace(opt_level=opt_level, verify=verify, instruments=inherited + own)


def lower(mod: IRModule, opt_level: int = 2, *, pipeline: Any = None,
          verify: str | bool = "each", instruments: Iterable[PassInstrument] = ()) -> IRModule:
    """Run the pipeline (default: :func:`default_pipeline`) on ``mod`` up to
    the build phase and return the lowered module (what :func:`build` hands to
    VM codegen).

    The pipeline starts at the window of the module's phase and must end in
    the build phase; both are checked, with the whole plan, before any pass
    runs. Passes run in a :class:`PassContext` with ``opt_level``, ``verify``
    and ``instruments`` (plus the settings and instruments of the context
    ``lower`` is called in).
    """
    if not isinstance(mod, IRModule):
        raise TypeError(f"build/lower need an IRModule, not {type(mod).__name__}")
    if not is_int_at_least(opt_level, 0):
        raise PassConfigError(f"opt_level must be an int >= 0, not {opt_level!r}")
    full = pipeline_from(pipeline, opt_level)
    part = pipeline_for_phase(full, mod.phase)
    ctx = lower_context(opt_level, verify, instruments)
    final = part.validate(ctx)
    if final != Phase.BUILD:
        raise PhaseError(
            f"pipeline {full.name!r} leaves the module in phase {final.label}, but building "
            f"needs phase {Phase.BUILD.label}: the pipeline must end with VMBuiltinLower "
            f"(nothing has run)")
    return run_pipeline(part, mod, ctx)


def build(mod: IRModule, opt_level: int = 2, *, pipeline: Any = None,
          verify: str | bool = "each", instruments: Iterable[PassInstrument] = (),
          kernels: str = "llvm", check_bounds: bool | None = None) -> "Executable":
    """Compile ``mod`` to a VM :class:`~phasec.backend.vm.Executable`.

    Args:
        mod: a module in any phase; the pipeline starts at its phase window.
        opt_level: the PassContext opt_level (passes above it are skipped)
            and the level of the default pipeline.
        pipeline: None for :func:`default_pipeline` ``(opt_level)``, or a
            Pipeline, Sequential, list of passes or textual spec ending in the
            build phase.
        verify: ``"each"`` (verify after every pass), ``"transitions"`` or
            ``"off"``; the final module is verified before codegen either way.
        instruments: pass instruments (e.g. ``PassTiming()``), added to those
            of the current context.
        kernels: ``"llvm"`` compiles the kernels now (cached, so the VM
            created from the executable starts at once), ``"interp"`` prepares
            the TIR interpreter, ``"none"`` leaves it to the VM.
        check_bounds: which buffer accesses of the compiled kernels are
            checked at run time. None (the default): every access not proven
            in bounds at compile time (:mod:`phasec.arith.inbounds`; the
            loops of GEMM, convolution and elementwise kernels are proven and
            run unchecked), so a wrong or data-dependent index in any kernel,
            hand-written ones included, raises
            :class:`~phasec.errors.BufferAccessError` naming the kernel,
            buffer, dimension, index and extent instead of corrupting memory.
            True: every access (like TVM's ``tir.instrument_bound_checkers``;
            slower, inner loops no longer vectorize). False: none, for
            trusted kernels only. The executable records it; loading obeys
            True, never False (see :meth:`Executable.load`). The TIR
            interpreter always checks.

    Raises :class:`PhaseError` for a pipeline that does not fit the module
    (before anything runs), :class:`PassError`/:class:`WellFormedError` when
    a pass fails, and the backend's errors (CodegenError...) for kernels.
    """
    if kernels not in KERNEL_BACKENDS:
        raise PassConfigError(f"build(kernels={kernels!r}): expected one of "
                              f"{', '.join(map(repr, KERNEL_BACKENDS))}")
    with collector.rare_collections():
        lowered = lower(mod, opt_level, pipeline=pipeline, verify=verify,
                        instruments=instruments)
        return codegen_and_compile(lowered, kernels=kernels, check_bounds=check_bounds)


def codegen_and_compile(lowered: IRModule, kernels: str = "llvm",
                        check_bounds: bool | None = None) -> "Executable":
    """VM codegen for a build-phase module, then kernel compilation (see
    :func:`build`'s ``kernels`` and ``check_bounds``). The module is verified
    unless the pass that produced it was just verified."""
    # (the VM and LLVM backend load when something is built: running a
    # pipeline, as ``phasec opt`` and the explorer do, does not need llvmlite)
    from phasec.backend.vm import codegen

    exe = codegen(lowered, verify=not is_verified(lowered))
    exe.check_bounds = check_bounds
    if kernels != "none":
        exe.kernels(kernels)
    return exe

"""Phase-checked pass infrastructure (TVM's ``tvm.transform``, plus phases).

Every pass declares the phases it accepts (and, for transition passes, the
phase it moves the module to); the infrastructure checks the phase before a
pass runs, sets the new phase after a transition, and verifies the result::

    from phasec import transform as T
    from phasec.ir import Phase

    @T.module_pass(opt_level=1, phases=Phase.OPTIMIZATION)
    class MyPass:
        factor: int = 2            # an option: MyPass(factor=3)

        def transform_module(self, mod, ctx):
            return mod

    with T.PassContext(opt_level=2, instruments=[T.PassTiming()]):
        mod = T.Sequential([T.get_pass("LambdaLifting"), MyPass()])(mod)

Configuration mistakes (unknown pass or option, malformed pipeline spec,
bad context argument, malformed pass declaration) raise
:class:`PassConfigError`, a :class:`phasec.PhasecError` and ``ValueError``.
"""

import importlib
from typing import Any

from phasec.transform.context import (
    VERIFY_MODES, PassContext, config_options, register_config_option,
)
from phasec.transform.info import (
    ALL_PHASES, TRANSITION_PASSES, PassConfigError, PassInfo, as_phases, describe_phases,
    phase_mismatch_message,
)
from phasec.transform.instruments import (
    PassInstrument, PassTiming, PassTrace, PrintAfterAll, PrintBeforeAll, TimingRow, TraceEntry,
    pass_instrument,
)
from phasec.transform.options import MISSING, format_value
from phasec.transform.pass_infra import (
    FunctionPass, ModulePass, Pass, PrimFuncPass, PrintIR, function_pass, module_pass,
    prim_func_pass,
)
from phasec.transform.phase_pipeline import Pipeline
from phasec.transform.plugins import (
    ENTRY_POINT_GROUP, PLUGIN_ENV, load_plugin, load_plugins, loaded_plugins,
)
from phasec.transform.registry import (
    REGISTRY, PassEntry, PassRegistry, get_pass, get_pass_entry, list_passes, pass_entries,
    register_pass,
)
from phasec.transform.sequential import PlanStep, Sequential
from phasec.transform.spec import parse_pipeline, pass_spec

# Result validation loads the JSON module format (its float64 evaluation goes
# through it), which takes a while: its names are imported on first use.
_LAZY = {name: "phasec.transform.validate" for name in (
    "ValidateResults", "ResultChange", "ResultsChangedError", "StageCheck", "ROUNDING_PASSES")}
_LAZY["Tolerance"] = "phasec.transform.results"


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'phasec.transform' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "PassContext", "VERIFY_MODES", "register_config_option", "config_options", "PassInfo", "PassConfigError", "ALL_PHASES",
    "TRANSITION_PASSES", "as_phases", "describe_phases", "phase_mismatch_message",
    "PassInstrument", "pass_instrument", "PrintBeforeAll", "PrintAfterAll", "PassTiming",
    "TimingRow", "PassTrace", "TraceEntry", "Pass", "ModulePass", "FunctionPass",
    "PrimFuncPass", "Sequential", "PlanStep", "module_pass", "function_pass",
    "prim_func_pass", "PrintIR", "MISSING", "Pipeline", "PassEntry", "PassRegistry",
    "REGISTRY", "register_pass", "get_pass", "get_pass_entry", "list_passes", "pass_entries",
    "parse_pipeline", "pass_spec", "format_value", "load_plugin", "load_plugins",
    "loaded_plugins", "PLUGIN_ENV", "ENTRY_POINT_GROUP", "ValidateResults", "ResultChange",
    "ResultsChangedError", "StageCheck", "Tolerance", "ROUNDING_PASSES",
]

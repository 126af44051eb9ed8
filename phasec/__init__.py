"""phasec: a phase-checked tensor compiler for a Relax-like IR.

The top-level names are loaded lazily, so that importing ``phasec`` stays cheap
and the layers below never import the layers above them.
"""

from __future__ import annotations

import importlib
from typing import Any

from phasec.errors import (  # noqa: F401
    InvalidPhaseError, ParseError, PassError, PhasecError, PhaseError, SchemaError,
    StructInfoError, VMError, WellFormedError,
)
from phasec.ir import IRModule, Phase, assert_structural_equal, structural_equal, structural_hash  # noqa: F401

__version__ = "0.1.0"

# name -> module that defines it (imported on first use)
_LAZY = {
    "parse": "phasec.script.parser",
    "load": "phasec.script.loader",
    "to_json": "phasec.script.json_format",
    "from_json": "phasec.script.json_format",
    "register_func": "phasec.packed",
    "get_packed_func": "phasec.packed",
    "transform": "phasec.transform",
    "interp": "phasec.interp",
    "evaluate": "phasec.interp",
    "build": "phasec.pipeline",
    "Executable": "phasec.backend.vm",
    "VirtualMachine": "phasec.backend.vm",
    "report": "phasec.explorer",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'phasec' has no attribute {name!r}")
    mod = importlib.import_module(module)
    return mod if module.endswith("." + name) else getattr(mod, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

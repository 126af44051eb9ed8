"""phasec: a phase-checked tensor compiler for a Relax-like IR.

The top-level names are loaded lazily, so that importing ``phasec`` stays cheap
and the layers below never import the layers above them.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from pathlib import Path
from typing import Any


class _SourceCheckoutFinder(importlib.abc.MetaPathFinder):
    """Finds ``phasec.verifier`` and ``phasec.passes`` in a source checkout.

    The repository keeps them as the top-level folders ``verifier/`` and
    ``passes/``; an install maps them into the package (pyproject.toml's
    package-dir). When Python imports ``phasec`` from the checkout itself (the
    repository root on ``sys.path``), this finder supplies the same mapping.
    """

    def __init__(self, root: Path) -> None:
        self._folders = {f"{__name__}.{name}": root / name for name in ("verifier", "passes")}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        folder = self._folders.get(fullname)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, folder / "__init__.py", submodule_search_locations=[str(folder)])


_HERE = Path(__file__).resolve().parent
if not (_HERE / "verifier").is_dir() and (_HERE.parent / "verifier" / "__init__.py").is_file():
    sys.meta_path.append(_SourceCheckoutFinder(_HERE.parent))

from phasec.errors import (  # noqa: F401
    InvalidPhaseError, ParseError, PassError, PhasecError, PhaseError, SchemaError,
    StructInfoError, VMError, WellFormedError,
)
from phasec.ir import IRModule, Phase, assert_structural_equal, structural_equal, structural_hash  # noqa: F401
from phasec.ir.node import set_printer


def _print_on_first_use(obj: Any, syntax: str | None) -> str | None:
    """The IR's printer until the real one is loaded: the first ``str(mod)``
    or ``repr(node)`` imports phasec.script.printer (which installs itself in
    place of this function) and prints with it. ``import phasec`` stays cheap:
    the printer reads the operator registry, which loads every operator."""
    return importlib.import_module("phasec.script.printer").script_text(obj, syntax)


set_printer(_print_on_first_use)

__version__ = "0.1.0"

# name -> module that defines it (imported on first use)
_LAZY = {
    "parse": "phasec.script.parser",
    "load": "phasec.script.loader",
    "to_json": "phasec.script.json_format",
    "from_json": "phasec.script.json_format",
    "register_func": "phasec.runtime.packed",
    "get_packed_func": "phasec.runtime.packed",
    "transform": "phasec.transform",
    "interp": "phasec.interp",
    "evaluate": "phasec.interp",
    "build": "phasec.pipeline",
    "build_file": "phasec.buildcache",
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


__all__ = sorted({"__version__", "IRModule", "Phase", "assert_structural_equal", "structural_equal",
                  "structural_hash", "InvalidPhaseError", "ParseError", "PassError",
                  "PhasecError", "PhaseError", "SchemaError", "StructInfoError", "VMError",
                  "WellFormedError", *_LAZY})


def __dir__() -> list[str]:
    return list(__all__)

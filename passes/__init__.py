"""phasec's compiler passes: one module per pass, each declaring its phases.

Importing this package imports every module in it, and each module registers
its pass with :mod:`phasec.transform`'s registry; adding a pass is adding a
file. ``phasec.transform`` imports this package lazily, on the first registry
query, so the layers stay ordered.
"""

from __future__ import annotations

import importlib
import pkgutil

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_info.name}")

"""phasec's compiler passes: one module per pass, each declaring its phases.

Importing this package imports every module in it, and each module registers
its pass with :mod:`phasec.transform`'s registry; adding a pass is adding a
file. ``phasec.transform`` imports this package lazily, on the first registry
query, so the layers stay ordered.

Every registered pass is also exported here by its registry name, the way
TVM users write ``relax.transform.LambdaLift()``::

    from phasec import passes
    seq = transform.Sequential([passes.LambdaLifting(), passes.FuseOps(fuse_opt_level=2)])

``phasec.transform.get_pass(name, **options)`` builds the same passes by name.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from phasec.transform import Pass, pass_entries

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_info.name}")


def _constructor(factory: Any) -> Any:
    # A pass registered as an object takes no options: export a function returning it.
    return (lambda: factory) if isinstance(factory, Pass) else factory


__all__ = sorted(entry.name for entry in pass_entries())
globals().update({entry.name: _constructor(entry.factory) for entry in pass_entries()})

"""Pass plugins: a user's own passes, usable wherever a built-in pass is.

A plugin is a Python module that registers passes with
:func:`~phasec.transform.register_pass` when it is imported. Three ways to
load them, as ``mlir-opt --load-pass-plugin`` and pytest plugins do:

* ``--load MODULE_OR_FILE`` on every ``phasec`` subcommand that takes a
  pipeline (``opt``, ``build``, ``run``, ``fuzz``, ``passes``): a file path
  (``mypasses.py``) or an importable module name (``mypkg.passes``);
* the environment variable ``PHASEC_PLUGINS``: the same, separated by
  ``os.pathsep`` (``:`` on POSIX);
* installed packages declaring an entry point in the group
  ``phasec.passes`` (``[project.entry-points."phasec.passes"]`` in their
  pyproject), loaded automatically.

Loading a plugin runs its code: that is what the user asks for by naming it
(or by installing the package), exactly as ``python mypasses.py`` would.
phasec never imports anything from the files it *compiles*. A plugin that
fails to import is an :class:`~phasec.errors.InputError` naming it and what
went wrong. :func:`loaded_plugins` gives the ``--load`` arguments in effect,
so reproducers print commands that load the same passes.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import sys
import traceback
from collections.abc import Iterable
from pathlib import Path

from phasec.errors import InputError
from phasec.transform.registry import REGISTRY, PassEntry

__all__ = ["PLUGIN_ENV", "ENTRY_POINT_GROUP", "load_plugin", "load_plugins", "loaded_plugins"]

#: the environment variable naming plugins to load (``os.pathsep``-separated)
PLUGIN_ENV = "PHASEC_PLUGINS"
#: the entry-point group of installed plugin packages
ENTRY_POINT_GROUP = "phasec.passes"

# spec as given to --load (files absolute) -> the registry entries it added
_loaded: dict[str, list[PassEntry]] = {}
_entry_points_loaded = False


def _looks_like_file(spec: str) -> bool:
    return spec.endswith(".py") or os.sep in spec or (os.altsep or os.sep) in spec


def _import_file(path: Path) -> None:
    # a stable, unique module name per file, so a reload of the same file is
    # recognised as the same definitions by the registry
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    name = f"phasec_plugin_{path.stem.replace('-', '_')}_{digest}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise InputError(f"cannot load the pass plugin {str(path)!r}: not a Python file")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise


def load_plugin(spec: str) -> list[str]:
    """Import the plugin ``spec`` (a ``.py`` file or a module name) once;
    returns the names of the passes it registered."""
    spec = spec.strip()
    if not spec:
        raise InputError("an empty pass plugin name (give a .py file or a module name)")
    is_file = _looks_like_file(spec)
    key = str(Path(spec).resolve()) if is_file else spec
    if _in_effect(key):
        return [e.name for e in _loaded[key]]
    before = set(REGISTRY.names())
    try:
        if is_file:
            path = Path(key)
            if not path.is_file():
                raise InputError(f"cannot load the pass plugin {spec!r}: no such file")
            _import_file(path)
        elif spec in sys.modules:
            importlib.reload(sys.modules[spec])
        else:
            importlib.import_module(spec)
    except InputError:
        raise
    except ModuleNotFoundError as exc:
        raise InputError(f"cannot load the pass plugin {spec!r}: {exc} (give a .py file or an "
                         "importable module name)") from exc
    except Exception as exc:  # noqa: BLE001 - the user's code failed: say where, no traceback
        frame = traceback.extract_tb(exc.__traceback__)[-1]  # where it failed
        where = f" ({frame.filename}:{frame.lineno})"
        raise InputError(f"the pass plugin {spec!r} failed to load{where}: "
                         f"{type(exc).__name__}: {exc}") from exc
    _loaded[key] = [REGISTRY.entry(n) for n in sorted(set(REGISTRY.names()) - before)]
    return [e.name for e in _loaded[key]]


def _in_effect(key: str) -> bool:
    """Whether the passes plugin ``key`` registered are still the registry's
    (a registry scope that ended, or a later plugin, may have replaced them)."""
    entries = _loaded.get(key)
    return entries is not None and all(
        e.name in REGISTRY and REGISTRY.entry(e.name) is e for e in entries)


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception as exc:  # noqa: BLE001 - an installed plugin is broken: name it
            raise InputError(f"the installed pass plugin {ep.name!r} ({ep.value}) failed to "
                             f"load: {type(exc).__name__}: {exc}") from exc


def load_plugins(specs: Iterable[str] = (), environment: bool = True,
                 entry_points: bool = True) -> list[str]:
    """Load the installed entry points and the plugins in ``$PHASEC_PLUGINS``
    (unless turned off), then those named by ``specs``; returns the names of
    the passes they registered."""
    wanted = list(specs)
    if environment:
        wanted += [s for s in os.environ.get(PLUGIN_ENV, "").split(os.pathsep) if s.strip()]
    added: list[str] = []
    if entry_points:
        before = set(REGISTRY.names())
        _load_entry_points()
        added += sorted(set(REGISTRY.names()) - before)
    for spec in wanted:
        added += load_plugin(spec)
    return added


def loaded_plugins() -> list[str]:
    """The plugins loaded by file or module name (files as absolute paths),
    in load order: the ``--load`` arguments that reproduce this process's
    registry (entry-point plugins load by themselves)."""
    return [key for key in _loaded if _in_effect(key)]

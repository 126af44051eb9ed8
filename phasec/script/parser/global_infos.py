"""Module global infos: ``I.module_global_infos({"vdevice": [I.vdevice(...), ...]})``
and the ``vdevice`` of ``R.Tensor`` annotations that refer to them.

TVM keeps virtual devices (a target, an index and a memory scope) in the
module, and a tensor's struct info names one as ``"<kind>:<index>"`` (the
index counts the module's devices of that target kind; a third part, the
memory scope, is what TVM prints and is ignored when read, as TVM does).
phasec reads the devices into :class:`~phasec.ir.module.VDevice` entries and
stores the tensor's device as its canonical text ``"<kind>:<index>:<scope>"``.

Device meshes (``R.device_mesh``, the ``"mesh"`` global info) belong to
``relax.dist``, which phasec does not support: they are one clear error.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from phasec.ir.module import (
    GLOBAL_INFO_KINDS, DummyGlobalInfo, VDevice, canonical_vdevice, plain_target,
    target_problem,
)
from phasec.script.parser.common import _dotted

if TYPE_CHECKING:
    from phasec.script.parser.driver import ModuleParser

__all__ = ["parse_global_infos", "resolve_vdevice"]

_DIST_ERROR = ("distributed Relax (relax.dist: device meshes, R.DTensor) is not supported "
               "by phasec")


def parse_global_infos(mp: ModuleParser, call: ast.Call) -> dict[str, tuple[Any, ...]]:
    """The dictionary of ``I.module_global_infos({...})``."""
    I = mp.I  # noqa: N806,E741 - the dialect's conventional name
    if len(call.args) != 1 or call.keywords or not isinstance(call.args[0], ast.Dict):
        raise mp.error(f"{I}.module_global_infos expects one dictionary literal, e.g. "
                       f'{I}.module_global_infos({{"vdevice": [{I}.vdevice("llvm")]}})', call)
    out: dict[str, tuple[Any, ...]] = {}
    for key_node, value in zip(call.args[0].keys, call.args[0].values):
        if key_node is None:
            raise mp.error("dictionary unpacking (**) is not supported", value)
        key = mp.str_arg(key_node, f"{I}.module_global_infos key")
        if key == "mesh" or _mentions_device_mesh(mp, value):
            raise mp.error(f"{_DIST_ERROR} ({I}.module_global_infos {key!r})", key_node)
        dummies = (isinstance(value, (ast.List, ast.Tuple)) and value.elts
                   and all(_is_dummy(mp, e) for e in value.elts))
        if key not in GLOBAL_INFO_KINDS and not dummies:
            raise mp.error(f"unsupported module global info {key!r}; phasec reads "
                           f"{', '.join(repr(k) for k in GLOBAL_INFO_KINDS)} (and "
                           f"{I}.dummy_global_info() entries)", key_node)
        if key in out:
            raise mp.error(f"{I}.module_global_infos: {key!r} given twice", key_node)
        if not isinstance(value, (ast.List, ast.Tuple)):
            raise mp.error(f"{I}.module_global_infos[{key!r}] must be a list of "
                           f"{I}.vdevice(...), got {mp.src(value)}", value)
        if key != "vdevice" and dummies:
            out[key] = tuple(DummyGlobalInfo(span=mp.span(e)) for e in value.elts)
        else:
            out[key] = tuple(vdevice_value(mp, e) for e in value.elts)
    return out


def _is_dummy(mp: ModuleParser, node: ast.AST) -> bool:
    """``I.dummy_global_info()``."""
    return (isinstance(node, ast.Call) and _dotted(node.func) == (mp.I, "dummy_global_info")
            and not node.args and not node.keywords)


def _mentions_device_mesh(mp: ModuleParser, node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and _dotted(n.func) == (mp.R, "device_mesh")
               for n in ast.walk(node))


def vdevice_value(mp: ModuleParser, node: ast.AST) -> VDevice:
    I = mp.I  # noqa: N806,E741
    if not (isinstance(node, ast.Call) and _dotted(node.func) == (I, "vdevice")):
        raise mp.error(f"expected {I}.vdevice(target, vdevice_id, memory_scope), got "
                       f"{mp.src(node)}", node)
    what = f"{I}.vdevice"
    a = mp.bind_args(node, what, ("target", "vdevice_id", "memory_scope"), 1)
    target = mp.literal(a["target"])
    problem = target_problem(target)
    if problem is not None:
        raise mp.error(f"{what}: {problem}, got {mp.src(a['target'])}", a["target"])
    target = plain_target(target)
    vdevice_id = 0
    if "vdevice_id" in a:
        vdevice_id = mp.number(a["vdevice_id"])
        if not isinstance(vdevice_id, int) or isinstance(vdevice_id, bool) or vdevice_id < 0:
            raise mp.error(f"{what}: vdevice_id must be a non-negative integer, got "
                           f"{mp.src(a['vdevice_id'])}", a["vdevice_id"])
    scope = "global"
    if "memory_scope" in a:
        scope = mp.str_arg(a["memory_scope"], f"{what} memory_scope")
    return VDevice(target, vdevice_id, scope, span=mp.span(node))



def resolve_vdevice(mp: ModuleParser, node: ast.AST, what: str = "") -> str:
    """The canonical ``"<kind>:<index>:<scope>"`` of a tensor's ``vdevice`` string.

    ``"cuda"`` is ``"cuda:0"``; ``"vdevice:2"`` is the module's third device
    whatever its kind (as TVM reads them). Outside a module (a struct info
    read on its own) the text is kept as written.
    """
    what = what or f"{mp.R}.Tensor vdevice"
    text = mp.str_arg(node, what)
    parts = text.split(":")
    kind = parts[0]
    try:
        index = int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        raise mp.error(f"{what} {text!r}: expected \"<target kind>:<index>\", "
                       f"e.g. \"llvm:0\"", node) from None
    devices: tuple[VDevice, ...] | None = mp.vdevices
    if devices is None:
        return text
    if not devices:
        raise mp.error(f"{what} {text!r}: the module declares no virtual "
                       f"devices; add {mp.I}.module_global_infos({{\"vdevice\": "
                       f"[{mp.I}.vdevice(...)]}})", node)
    if kind == "vdevice":
        candidates = list(devices)
    else:
        candidates = [d for d in devices if d.kind == kind]
    if not 0 <= index < len(candidates):
        known = ", ".join(sorted({d.kind for d in devices}))
        raise mp.error(f"{what} {text!r}: the module has {len(candidates)} "
                       f"virtual device(s) of kind {kind!r} (its kinds: {known})", node)
    dev = candidates[index]
    return canonical_vdevice(devices, dev)

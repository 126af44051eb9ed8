"""The architecture holds: layers import only downward, no module imports
another in a circle, no private name crosses a package boundary, and the
function-level imports that used to dodge cycles only get fewer.

The layer table is DESIGN.md's (checked against it below). Every import
statement of phasec/, verifier/ and passes/ is read with ``ast``, those inside
functions included; only imports under ``if TYPE_CHECKING:`` are left out
(they never run).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.paths import REPO

ROOT = REPO

#: Folders of the repository that install as subpackages of phasec.
MAPPED_FOLDERS = {"verifier": "phasec.verifier", "passes": "phasec.passes"}

#: Layer of each phasec package or top-level module, lowest first. A module
#: imports from its own package and from lower layers only; packages that
#: share a layer are independent of each other.
LAYERS: dict[str, int] = {
    "errors": 1,
    "fileio": 2, "interrupts": 2, "collector": 2, "target": 2, "console": 2,
    "ir": 3,
    "runtime": 4,
    "arith": 5,
    "te": 6,
    "op": 7,
    "script": 8,
    "interp": 9, "verifier": 9,
    "transform": 10,
    "passes": 11, "backend": 11, "frontend": 11,
    "pipeline": 12, "tvm": 12,
    "explorer": 13, "buildcache": 13,
    "testing": 14,
    "cli": 15, "phases_doc": 15,
    "__main__": 16, "examples": 16,
}

#: Function-level imports of phasec modules (not third-party: optional extras
#: such as onnx and tvm are imported lazily on purpose). Lower it when you
#: remove some; it must never go up.
FUNCTION_LEVEL_IMPORT_LIMIT = 33


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name
    target: str  # the phasec module imported (longest existing prefix)
    name: str | None  # the name imported from it (``from M import name``), if any
    line: int
    in_function: bool
    path: Path


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] in MAPPED_FOLDERS:
        parts = MAPPED_FOLDERS[parts[0]].split(".") + parts[1:]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files() -> dict[str, Path]:
    return {module_name(p): p for top in ("phasec", *MAPPED_FOLDERS)
            for p in sorted((ROOT / top).rglob("*.py"))}


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """Every import of a phasec module in ``path``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def resolve(name: str) -> str | None:
        parts = name.split(".")
        if parts[0] in MAPPED_FOLDERS:
            parts = MAPPED_FOLDERS[parts[0]].split(".") + parts[1:]
        while parts and ".".join(parts) not in modules:
            parts.pop()
        return ".".join(parts) or None

    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                continue
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                       ast.Lambda))
            pairs: list[tuple[str, str | None]] = []
            if isinstance(child, ast.Import):
                pairs = [(alias.name, None) for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join(anchor + ([child.module] if child.module else []))
                for alias in child.names:
                    full = f"{base}.{alias.name}"
                    pairs.append((full, None) if resolve(full) == full else (base, alias.name))
            for name, imported in pairs:
                target = resolve(name)
                if target and target != module:
                    found.append(Import(module, target, imported, child.lineno, nested, path))
            visit(child, nested)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def all_imports() -> list[Import]:
    modules = source_files()
    return [imp for module, path in modules.items() for imp in imports_of(module, path, modules)]


def layer_of(module: str) -> int:
    parts = module.split(".")
    return 0 if len(parts) == 1 else LAYERS[parts[1]]


def package_of(module: str, modules: dict[str, Path]) -> str:
    return module if modules[module].name == "__init__.py" else module.rpartition(".")[0]


def where(imp: Import) -> str:
    return f"{imp.path.relative_to(ROOT)}:{imp.line}"


# -- the rules -----------------------------------------------------------------------------

def layer_violations(imports: list[Import]) -> list[str]:
    """Imports of a higher layer, or of another package of the same layer."""
    bad = []
    for imp in imports:
        mine, theirs = layer_of(imp.importer), layer_of(imp.target)
        if mine == 0:
            continue  # the package root maps names to modules lazily
        same_package = imp.importer.split(".")[:2] == imp.target.split(".")[:2]
        if theirs > mine or (theirs == mine and not same_package):
            bad.append(f"{where(imp)}: {imp.importer} (layer {mine}) imports {imp.target} "
                       f"(layer {theirs})")
    return bad


def import_cycles(imports: list[Import]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for imp in imports:
        graph[imp.importer].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def _private(dotted: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in dotted.split("."))


def private_imports(imports: list[Import]) -> list[str]:
    """A ``_private`` module or name imported from outside the package that owns it."""
    modules = source_files()
    bad = []
    for imp in imports:
        owner = package_of(imp.target, modules)
        if imp.importer == owner or imp.importer.startswith(owner + "."):
            continue
        if _private(imp.target.removeprefix(owner)) or _private(imp.name or ""):
            bad.append(f"{where(imp)}: {imp.importer} imports "
                       f"{imp.target}{'.' + imp.name if imp.name else ''}")
    return bad


# -- the tests -------------------------------------------------------------------------------

def test_imports_only_go_downward():
    bad = layer_violations(all_imports())
    assert not bad, "imports against the layer table (DESIGN.md):\n" + "\n".join(bad)


def test_no_import_cycles():
    cycles = import_cycles(all_imports())
    assert not cycles, "import cycles (function-level imports included):\n" + "\n".join(
        f"{len(c)} modules: {', '.join(c)}" for c in cycles)


def test_no_private_imports_across_packages():
    bad = private_imports(all_imports())
    assert not bad, "private names imported across packages:\n" + "\n".join(bad)


def test_function_level_imports_only_go_down():
    found = [imp for imp in all_imports() if imp.in_function]
    statements = {(imp.path, imp.line) for imp in found}
    assert len(statements) <= FUNCTION_LEVEL_IMPORT_LIMIT, (
        f"{len(statements)} function-level imports of phasec modules, over the limit of "
        f"{FUNCTION_LEVEL_IMPORT_LIMIT}: import at module level (the layer table allows it), "
        "or move the code to the layer it belongs to")
    if len(statements) < FUNCTION_LEVEL_IMPORT_LIMIT - 10:
        pytest.fail(f"only {len(statements)} function-level imports now: lower "
                    f"FUNCTION_LEVEL_IMPORT_LIMIT to {len(statements)} to keep the gain")


def test_every_package_has_a_layer():
    names = {p.stem if p.is_file() else p.name for p in (ROOT / "phasec").iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()}
    names |= {dotted.split(".")[1] for dotted in MAPPED_FOLDERS.values()}
    names.add("examples")
    assert names == set(LAYERS), f"unclassified: {sorted(names - set(LAYERS))}, " \
                                 f"gone: {sorted(set(LAYERS) - names)}"


def test_pyproject_lists_every_package():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    listed = set(re.findall(r'"([\w.]+)"', text.split("\npackages = [", 1)[1].split("]", 1)[0]))
    on_disk = {module_name(p) for top in ("phasec", *MAPPED_FOLDERS)
               for p in (ROOT / top).rglob("__init__.py")}
    on_disk.add("phasec.examples")  # the bundled models: data read by path, never imported
    assert listed == on_disk, (f"missing from pyproject.toml: {sorted(on_disk - listed)}; "
                               f"listed but absent: {sorted(listed - on_disk)}")
    mapping = dict(re.findall(r'"([\w.]+)" = "(\w+)"', text.split("\npackage-dir = ", 1)[1]
                              .split("\n", 1)[0]))
    assert mapping == {"phasec": "phasec", **{dotted: folder for folder, dotted
                                              in MAPPED_FOLDERS.items()}}


def test_design_md_states_the_layer_table():
    """DESIGN.md's layer table is this file's LAYERS, row for row."""
    text = (ROOT / "DESIGN.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| ([^|]+) \|", text, flags=re.M)
    stated = {name.strip(" `").removeprefix("phasec."): int(layer)
              for layer, names in rows for name in names.split(",")}
    assert stated == LAYERS


# -- the rules catch what they are for ----------------------------------------------------------

def _planted(tmp_path: Path, module: str, source: str) -> list[Import]:
    path = ROOT / (module.replace(".", "/") + ".py")
    modules = {**source_files(), module: path}
    fake = tmp_path / "planted.py"
    fake.write_text(source)
    return [Import(i.importer, i.target, i.name, i.line, i.in_function, path)
            for i in imports_of(module, fake, modules)]


def test_a_planted_upward_import_is_caught(tmp_path):
    imports = _planted(tmp_path, "phasec.ir.planted",
                       "def f():\n    from phasec.transform import PassContext\n")
    assert layer_violations(imports) == [
        "phasec/ir/planted.py:2: phasec.ir.planted (layer 3) imports phasec.transform "
        "(layer 10)"]


def test_a_planted_cycle_is_caught(tmp_path):
    imports = [Import("phasec.a", "phasec.b", None, 1, False, ROOT),
               Import("phasec.b", "phasec.c", None, 1, True, ROOT),
               Import("phasec.c", "phasec.a", None, 1, False, ROOT),
               Import("phasec.c", "phasec.d", None, 1, False, ROOT)]
    assert import_cycles(imports) == [["phasec.a", "phasec.b", "phasec.c"]]


def test_a_planted_private_import_is_caught(tmp_path):
    imports = _planted(tmp_path, "phasec.passes.planted",
                       "from phasec.op.registry import get_op\n"
                       "from phasec.op import _common\n"
                       "from phasec.passes import fuse_ops\n")
    assert [b.split(": ", 1)[1] for b in private_imports(imports)] == [
        "phasec.passes.planted imports phasec.op._common"]

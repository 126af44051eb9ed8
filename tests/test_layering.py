"""The layering of DESIGN.md holds: imports only go downward, never up.

Every import statement in phasec/, verifier/ and passes/ is read with ``ast``
(function-level imports included). The one sanctioned upward reference, the
pass registry loading the ``passes`` package on first use, goes through
``importlib`` by name and is not an import statement.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: phasec subpackage/module -> layer (1 lowest). The package root is layer 0:
#: it only maps names to modules lazily.
PHASEC_LAYERS = {"verifier": 2, "passes": 4, "ir": 1, "target": 1, "arith": 1, "te": 1, "op": 1, "runtime": 1, "script": 1, "errors": 1, "packed": 1, "transform": 3, "interp": 3,
                 "fileio": 1,  # atomic writes and capped reads, used by every layer
                 "interrupts": 1,  # SIGINT/SIGTERM in the command-line tools
                 "backend": 5, "pipeline": 5, "cli": 5, "testing": 5, "phases_doc": 5,
                 "examples": 1,  # examples: TVMScript data files
                 "__main__": 5,  # `python -m phasec`: the CLI
                 "explorer": 5,  # pipeline reports
                 "frontend": 5,  # model importers (ONNX)
                 "tvm": 5}  # the optional bridge to an installed TVM


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] in ("verifier", "passes"):
        parts = ["phasec", *parts]
    if parts[0] != "phasec":
        return None  # third-party or standard library
    return 0 if len(parts) == 1 else PHASEC_LAYERS[parts[1]]


def imported_modules(path: Path, module: str) -> list[tuple[str, int]]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                found.append((".".join(base + ([node.module] if node.module else [])), node.lineno))
            else:
                found.append((node.module or "", node.lineno))
    return found


def test_imports_only_go_downward():
    sources = [p for top in ("phasec", "verifier", "passes") for p in (ROOT / top).rglob("*.py")]
    assert len(sources) > 50
    upward = []
    for path in sources:
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        if not module.startswith("phasec"):
            module = "phasec." + module
        mine = layer_of(module)
        for target, line in imported_modules(path, module):
            theirs = layer_of(target)
            if mine and theirs and theirs > mine:
                upward.append(f"{path.relative_to(ROOT)}:{line}: layer {mine} imports {target} "
                              f"(layer {theirs})")
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_every_phasec_subpackage_has_a_layer():
    names = {p.stem if p.is_file() else p.name for p in (ROOT / "phasec").iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()}
    names |= {"verifier", "passes"}
    assert names <= set(PHASEC_LAYERS), f"unclassified: {sorted(names - set(PHASEC_LAYERS))}"

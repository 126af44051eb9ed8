"""Where ``phasec-check`` finds modules: files under a directory, and modules in a Python file.

Two questions, both answered without executing anything:

* Which files does a directory hold? :func:`walk_module_files` walks it for
  ``.py`` and ``.json`` files, leaving out hidden entries, ``__pycache__``
  and whatever ``--exclude`` names (:func:`excluded`); an excluded directory
  is pruned, not walked.
* Which modules does a Python file hold? :func:`find_modules` reads the file
  with :mod:`ast` and finds every ``@I.ir_module`` class in it: at module
  level, inside functions (a TVM-style test), inside ``if`` blocks. A file
  that is nothing but a module (imports and one ``@I.ir_module`` class) is
  one module as it stands; otherwise each class is cut out into a module
  text of its own, with the same line numbers (it is padded with blank
  lines) and the imports in scope, so that the parser's and the verifier's
  locations map back into the file with :meth:`ModuleSource.to_file`.
  A decorator inside a string or a comment is not a decorator, and a file
  without any ``@I.ir_module`` class holds no module.
"""

from __future__ import annotations

import ast
import dataclasses
import fnmatch
import os
import re
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from phasec.ir.node import Span

__all__ = ["MODULE_SUFFIXES", "excluded", "walk_module_files", "ModuleSource", "find_modules",
           "looks_like_module"]

#: The suffixes of module files (TVMScript, the JSON module format).
MODULE_SUFFIXES = (".py", ".json")

#: The directories a walk never enters besides hidden ones.
_NEVER_WALKED = frozenset({"__pycache__"})


# ---------------------------------------------------------------------------
# --exclude and directory walks
# ---------------------------------------------------------------------------

def _pattern(pattern: str) -> str:
    """``build/`` and ``./build`` mean ``build``."""
    pattern = pattern.replace(os.sep, "/")
    while pattern.startswith("./"):
        pattern = pattern[2:]
    return pattern.rstrip("/") or pattern


def _components(path: str) -> list[str]:
    return [c for c in path.replace(os.sep, "/").split("/") if c not in ("", ".", "..")]


def excluded(path: str, patterns: Sequence[str], relative: str | None = None,
             is_dir: bool = False) -> bool:
    """Whether an ``--exclude`` pattern drops ``path``.

    A pattern is a shell glob (``*``, ``?``, ``[seq]``; ``*`` also matches
    ``/``). It matches when it matches any one component of the path (a
    file or directory name: ``build``, ``test_*.py``), the path relative to
    the directory named on the command line (``relative``: ``build/*``,
    ``gen/*.json``), or the path as written (``src/build/*``). A trailing
    ``/`` is ignored. For a directory, ``dir/*`` matches the directory itself,
    so that it is pruned rather than walked.
    """
    if not patterns:
        return False
    written = os.path.normpath(path).replace(os.sep, "/")
    names = _components(relative if relative is not None else written)
    paths = [written] + ([os.path.normpath(relative).replace(os.sep, "/")]
                         if relative is not None else [])
    if is_dir:
        paths += [p + "/" for p in paths]
    for raw in patterns:
        pat = _pattern(raw)
        if any(fnmatch.fnmatch(name, pat) for name in names):
            return True
        if any(fnmatch.fnmatch(p, pat) for p in paths):
            return True
    return False


def walk_module_files(top: str, patterns: Sequence[str] = ()) -> Iterator[str]:
    """The ``.py`` and ``.json`` files under the directory ``top``, sorted,
    as paths that start with ``top``: regular files only (a named pipe or
    device would block), no hidden entries, no ``__pycache__``, nothing
    :func:`excluded` by ``patterns`` (an excluded directory is not walked)."""
    for root, dirs, names in os.walk(top):
        rel_root = os.path.relpath(root, top)

        def rel(name: str) -> str:
            return name if rel_root == "." else os.path.join(rel_root, name)

        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _NEVER_WALKED
                         and not excluded(os.path.join(root, d), patterns, rel(d), is_dir=True))
        for name in sorted(names):
            path = os.path.join(root, name)
            if (name.lower().endswith(MODULE_SUFFIXES) and not name.startswith(".")
                    and os.path.isfile(path) and not excluded(path, patterns, rel(name))):
                yield path


# ---------------------------------------------------------------------------
# The modules of a Python file
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ModuleSource:
    """One module of a file: the text to parse and how its locations map back.

    Attributes:
        text: TVMScript text holding one ``@I.ir_module`` class, line for
            line where it is in the file.
        name: the class name when the module was cut out of other Python
            code; None when the whole file is the module.
        first_line, last_line: the lines of the class (decorators included).
        indent: the columns its lines were shifted left by (the class's
            indentation in the file).
        unchecked: the class is declared ``@I.ir_module(check_well_formed=False)``:
            TVM's marker of a module that is ill-formed on purpose (a test's
            input), which TVM does not check either.
    """

    text: str
    name: str | None = None
    first_line: int = 1
    last_line: int = 0
    indent: int = 0
    unchecked: bool = False

    def to_file(self, span: Span | None) -> Span | None:
        """``span`` (a location in :attr:`text`) as a location in the file."""
        if span is None or not self.indent or not self.first_line <= span.line <= self.last_line:
            return span
        end_col = span.end_col
        if end_col is not None and span.end_line is not None \
                and self.first_line <= span.end_line <= self.last_line:
            end_col += self.indent
        return dataclasses.replace(span, col=span.col + self.indent, end_col=end_col)


#: ``@I.ir_module``, ``@tvm.script.ir_module``... at the start of a line: how a
#: file that is not even valid Python shows that it meant to be a module.
_DECORATOR_LINE = re.compile(r"^[ \t]*@[\w.]*\bir_module\b", re.MULTILINE)


def looks_like_module(text: str) -> bool:
    """Whether ``text``, which is not valid Python, has an ``ir_module`` decorator line
    (so its syntax error is worth reporting rather than skipping the file)."""
    return _DECORATOR_LINE.search(text) is not None


def _dotted(node: ast.AST) -> tuple[str, ...] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return (node.id, *reversed(parts))


def _is_module_class(node: ast.AST) -> bool:
    """A class decorated with ``@I.ir_module`` (any spelling ending in ``ir_module``,
    called or not: ``@I.ir_module(check_well_formed=False)``)."""
    if not isinstance(node, ast.ClassDef):
        return False
    for deco in node.decorator_list:
        name = _dotted(deco.func if isinstance(deco, ast.Call) else deco)
        if name is not None and name[-1] == "ir_module":
            return True
    return False


def _check_well_formed_off(cls: ast.ClassDef) -> bool:
    """``@I.ir_module(check_well_formed=False)``."""
    return any(isinstance(d, ast.Call) and any(
        k.arg == "check_well_formed" and isinstance(k.value, ast.Constant)
        and k.value.value is False for k in d.keywords) for d in cls.decorator_list)


def _is_type_var(stmt: ast.stmt) -> bool:
    """``n = TypeVar("n")``: how TVM 0.27 declares a symbolic variable at module level."""
    if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)):
        return False
    return _dotted(stmt.value.func) in (("TypeVar",), ("typing", "TypeVar"))


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
        and isinstance(stmt.value.value, str)


def _module_classes(tree: ast.Module) -> list[tuple[ast.ClassDef, list[list[ast.stmt]]]]:
    """Every ``@I.ir_module`` class in the file, in source order, with the
    statement lists that enclose it (the module body first)."""
    found: list[tuple[ast.ClassDef, list[list[ast.stmt]]]] = []

    def visit(body: list[ast.stmt], scopes: list[list[ast.stmt]]) -> None:
        scopes = [*scopes, body]
        for stmt in body:
            if _is_module_class(stmt):
                found.append((stmt, scopes))  # type: ignore[arg-type]
                continue  # a class inside a module class is the parser's business
            for block in _blocks(stmt):
                visit(block, scopes)

    visit(tree.body, [])
    return found


def _blocks(stmt: ast.stmt) -> Iterator[list[ast.stmt]]:
    """The statement lists directly inside ``stmt`` (bodies, else branches,
    except handlers, match cases)."""
    for field in ("body", "orelse", "finalbody"):
        value = getattr(stmt, field, None)
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            yield value
    for item in [*getattr(stmt, "handlers", ()), *getattr(stmt, "cases", ())]:
        yield item.body


def _is_module_file(tree: ast.Module, classes: list) -> bool:
    """A file that is nothing but a module: imports, a docstring, TypeVars and
    one ``@I.ir_module`` class, all at module level. It is parsed whole, so
    its problems are reported as for any module file."""
    if len(classes) != 1 or classes[0][0] not in tree.body:
        return False
    return all(isinstance(s, (ast.Import, ast.ImportFrom)) or _is_type_var(s)
               or (i == 0 and _is_docstring(s)) or s is classes[0][0]
               for i, s in enumerate(tree.body))


def _dedent(line: str, indent: int) -> str:
    """``line`` without ``indent`` columns of leading whitespace (fewer when it
    has fewer: a blank line, a comment or a string's continuation line)."""
    stripped = len(line) - len(line.lstrip(" \t"))
    return line[min(indent, stripped):]


def _cut_out(lines: list[str], cls: ast.ClassDef, scopes: list[list[ast.stmt]]) -> ModuleSource:
    """The class as a module text of its own, on its own lines; the imports
    that are in scope before it (and the module's TypeVars) on theirs."""
    first = min([cls.lineno, *(d.lineno for d in cls.decorator_list)])
    last = cls.end_lineno or cls.lineno
    indent = cls.col_offset
    out = [""] * last
    for scope in scopes:
        for stmt in scope:
            if (stmt.end_lineno or stmt.lineno) >= first:
                break
            keep = isinstance(stmt, (ast.Import, ast.ImportFrom)) or \
                (scope is scopes[0] and _is_type_var(stmt))
            if keep:  # one line, where the statement starts
                row = stmt.lineno - 1
                text = ast.unparse(stmt)
                out[row] = f"{out[row]}; {text}" if out[row] else text
    for row in range(first - 1, last):
        out[row] = _dedent(lines[row], indent)
    return ModuleSource("\n".join(out) + "\n", cls.name, first, last, indent,
                        _check_well_formed_off(cls))


def find_modules(text: str, filename: str = "<string>") -> list[ModuleSource] | None:
    """The modules a Python file holds, without executing it.

    None when the text is not valid Python; an empty list when it has no
    ``@I.ir_module`` class; one :class:`ModuleSource` of the whole text when
    the file is nothing but a module; else one per class, cut out of the file
    (those declared ``check_well_formed=False`` marked :attr:`~ModuleSource.unchecked`).
    """
    try:
        with warnings.catch_warnings():  # e.g. SyntaxWarning: invalid escape sequence
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=filename)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    classes = _module_classes(tree)
    if not classes:
        return []
    if _is_module_file(tree, classes):
        return [ModuleSource(text)]
    lines = text.splitlines()
    return [_cut_out(lines, cls, scopes) for cls, scopes in classes]

"""Who imports whom among our modules, read from the source with `ast` (for
tests/unit/test_import_cycles.py and tests/unit/test_layering.py).

Every `import` and `from ... import` of one of our modules anywhere in a file counts:
function-local ones (a cycle hidden inside a function is still a cycle, only a later one) and
those under `if TYPE_CHECKING:` (they never run, but the reader and mypy follow them all the
same: a module that names a higher one's type depends on it). `from core.x import y` counts as
an import of `core.x.y` when that is a module, else of `core.x`; importing a module also runs
its packages' `__init__`, so those count too (but not the importer's own packages: they are
already running when it is imported).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def modules(packages: Iterable[str]) -> dict[str, Path]:
    """Every module of `packages` (package `__init__`s as the package), by dotted name."""
    found = {}
    for package in packages:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports(path: Path, known: dict[str, Path], importer: str = "") -> set[str]:
    """The modules of `known` the file at `path` (the module `importer`) imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.update(f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known
                         else node.module for a in node.names)
    deps: set[str] = set()
    for name in names:
        while name and name not in known and "." in name:  # `import core.x.attr` forms
            name = name.rsplit(".", 1)[0]
        parts = name.split(".")
        deps.update(p for p in (".".join(parts[:k]) for k in range(1, len(parts) + 1))
                    if p in known)  # the module and the packages it runs on the way
    return {d for d in deps if not importer.startswith(d + ".")}


def import_graph(packages: Iterable[str]) -> dict[str, set[str]]:
    """module -> the modules it imports, over `packages`."""
    known = modules(packages)
    return {name: imports(path, known, name) - {name} for name, path in known.items()}


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as a path (a -> b -> ... -> a), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        path.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                return path[path.index(w):] + [w]
            if w not in state and (found := visit(w)) is not None:
                return found
        path.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state and (found := visit(v)) is not None:
            return found
    return None

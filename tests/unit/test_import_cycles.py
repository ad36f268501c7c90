"""No import cycle in core: every layer can be read (and loaded) from the bottom up.

The graph is read from the source with `ast`: every `import` and `from ... import` of a core
module anywhere in a file, function-local ones included (a cycle hidden inside a function is
still a cycle, only a later one), but not those under `if TYPE_CHECKING:` (they never run).
`from core.x import y` counts as an import of `core.x.y` when that is a module, else of
`core.x`; importing a module also runs its packages' `__init__`, so those count too (but not
the importer's own packages: they are already running when it is imported).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def modules() -> dict[str, Path]:
    found = {}
    for path in (ROOT / "core").rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_checking_only(tree: ast.AST) -> set[int]:
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            hidden.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return hidden


def imports(path: Path, known: dict[str, Path], importer: str = "") -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    hidden = _type_checking_only(tree)
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
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


def test_core_has_no_import_cycle() -> None:
    known = modules()
    graph = {name: imports(path, known, name) - {name} for name, path in known.items()}
    assert len(graph) > 50 and sum(map(len, graph.values())) > 100  # it read core at all
    found = cycle(graph)
    assert found is None, "import cycle in core: " + " -> ".join(found or [])


def test_the_check_finds_a_cycle_hidden_in_a_function() -> None:
    source = {"core.a": "from core.b import f\n",
              "core.b": "def f():\n    from core.a import g\n",
              "core.c": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                        "    from core.a import g\n"}
    known = {name: Path(name) for name in source}
    graph = {name: _imports_of(text, known) - {name} for name, text in source.items()}
    assert cycle(graph) == ["core.a", "core.b", "core.a"]
    assert graph["core.c"] == set()  # TYPE_CHECKING imports never run


def _imports_of(text: str, known: dict[str, Path]) -> set[str]:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "m.py"
        path.write_text(text, encoding="utf-8")
        return imports(path, known)

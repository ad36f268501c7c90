"""The house rules of the layers (README, "Design in a few lines"), checked on the source itself.

Core is built in floors (the map is also core/__init__.py's docstring), bottom to top: a module
imports from its own floor and those below, never from one above, every import counted
(function-local and TYPE_CHECKING ones too: tests/helpers/import_graph.py). A newcomer can read
core floor by floor, from the ground up. A new module of core takes its place in FLOORS.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.helpers.import_graph import import_graph

ROOT = Path(__file__).resolve().parents[2]

# core's floors, bottom to top: its modules and packages (core/x.py or core/x/), by name
FLOORS = (
    ("ground", "model todo last_turn approval_seal questions tool_names redact json_text "
               "confined threads give_way stand_ins"),
    ("store", "store settings trust checkpoints"),
    ("llm", "llm cost"),
    ("workflows", "workflows"),
    ("tools", "tools mcp mcp_state mcp_calls mcp_stdio mcp_text agents project_files"),
    ("context", "context attachments turn_events log_writer"),
    ("engine", "engine exchange summarize request_copies titles interchange factory"),
    ("runs", "runs"),
)
FLOOR = {name: n for n, (_floor, names) in enumerate(FLOORS) for name in names.split()}


def floor(module: str) -> int:
    """The floor of a module of core (`core.store.log` is on the store's)."""
    return FLOOR[module.split(".")[1]]


def imported_modules(package: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in (ROOT / package).rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
        out[str(path.relative_to(ROOT))] = names
    return out


def test_core_never_imports_qt_or_the_ui() -> None:
    bad = {f: n & {"PySide6", "qasync", "ui", "app"} for f, n in imported_modules("core").items()}
    assert not {f: n for f, n in bad.items() if n}


def test_ui_never_talks_to_litellm_directly() -> None:
    bad = {f: n & {"litellm", "openai", "httpx"} for f, n in imported_modules("ui").items()}
    assert not {f: n for f, n in bad.items() if n}


def test_every_module_of_core_is_on_one_floor() -> None:
    names = [name for _floor, listed in FLOORS for name in listed.split()]
    assert len(names) == len(set(names)), "a name on two floors"
    tops = {m.split(".")[1] for m in import_graph(["core"]) if m != "core"}
    assert tops == set(names), f"not on a floor: {tops - set(names)}; " \
                               f"no such module: {set(names) - tops}"


def test_no_module_of_core_imports_from_a_floor_above_its_own() -> None:
    graph = import_graph(["core"])
    up = [f"{m} ({FLOORS[floor(m)][0]}) imports {d} ({FLOORS[floor(d)][0]})"
          for m in sorted(graph) if m != "core" for d in sorted(graph[m]) if floor(d) > floor(m)]
    assert not up, "arrows up a floor:\n" + "\n".join(up)


def test_core_s_docstring_draws_the_same_floors() -> None:
    doc = ast.get_docstring(ast.parse((ROOT / "core" / "__init__.py").read_text())) or ""
    drawn = [(floor_name, {n.strip().rstrip("/") for n in listed.split(",")})
             for floor_name, listed in re.findall(r"^ +\d (\w+) +([^:]+):", doc, re.M)]
    assert drawn == [(name, set(listed.split())) for name, listed in FLOORS]

"""The house rules of the layers (README, "Design in a few lines"), checked on the source itself."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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

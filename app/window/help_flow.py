"""Help → Where your data lives, and About: the paths and versions the window shows."""

from __future__ import annotations

import html
import platform
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import PySide6
from PySide6.QtCore import QObject, qVersion

from core.settings import cache_dir, data_dir, state_dir
from ui.main_window import MainWindow

PACKAGES = ("litellm", "mcp", "pydantic")  # besides Qt: what answers depend on


def version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def data_html(project: Path | None, config: Path) -> str:
    rows = [("This project's conversations, summaries and tool outputs",
             str(project / ".workbench") if project else "(no project open)"),
            ("Settings, calibration, MCP servers (mcp.json), agents", str(config)),
            ("The default project", str(data_dir())),
            ("The crash log", str(state_dir())),
            ("Tokenizer tables (made again when removed)", str(cache_dir()))]
    cells = "".join(f"<tr><td>{html.escape(what)}&nbsp;&nbsp;</td><td><code>{html.escape(where)}"
                    "</code></td></tr>" for what, where in rows)
    return (f"<table>{cells}</table><p>Nothing is sent anywhere but to the model provider you "
            "chose in Settings. A conversation is a JSONL log you can read, copy or delete; "
            "API keys are never written to these folders.</p>")


def about_html() -> str:
    versions = [("Context Workbench", version("context-workbench")),
                ("Python", platform.python_version()),
                ("Qt", qVersion()), ("PySide6", PySide6.__version__),
                *((name, version(name)) for name in PACKAGES)]
    cells = "".join(f"<tr><td>{html.escape(n)}&nbsp;&nbsp;</td><td>{html.escape(v)}</td></tr>"
                    for n, v in versions)
    return ("<h3>Context Workbench</h3><p>A desktop workbench for conversations with language "
            f"models that shows what each request holds.</p><table>{cells}</table>"
            f"<p>{html.escape(platform.platform())}</p>")


class HelpFlow(QObject):
    def __init__(self, window: MainWindow, settings_folder: Path,
                 project_root: Callable[[], Path | None], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.window = window
        self.settings_folder = settings_folder
        self.project_root = project_root
        window.help_requested.connect(self.show)

    def show(self, what: str) -> None:
        if what == "data":
            self.window.show_help("Where your data lives",
                                  data_html(self.project_root(), self.settings_folder))
        elif what == "about":
            self.window.show_help("About Context Workbench", about_html())

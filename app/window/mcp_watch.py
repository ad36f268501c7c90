"""MCP servers are read when a project opens. When their configuration (mcp.json in the config
folder or in .workbench/) changes while the project is open, the window says so once and
offers Reload, rather than ignoring the change without a word."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject

from app.window.meter import UsageMeter
from app.window.notices import Notices
from ui.main_window import MainWindow

RELOAD = "Reload"


def stamp(path: Path) -> tuple[int, int] | None:
    """What tells a file changed: its size and modification time (None: there is none)."""
    try:
        s = path.stat()
    except OSError:
        return None
    return s.st_size, s.st_mtime_ns


class McpWatch(QObject):
    def __init__(self, window: MainWindow, notices: Notices, meter: UsageMeter,
                 reopen: Callable[[], None]) -> None:
        super().__init__(window)
        self.window, self.notices, self.meter, self.reopen = window, notices, meter, reopen
        self._hub: object | None = None
        self._stamps: dict[Path, tuple[int, int] | None] = {}
        self._offered = False
        meter.listeners.append(self.check)  # after each build: two stats, no reading
        window.notice_action.connect(self._on_notice_action)

    def check(self) -> None:
        context = self.meter.context
        hub = context.mcp if context is not None else None
        if hub is None:
            return
        if hub is not self._hub:  # a project (re)opened: its servers were read just now
            self._hub, self._offered = hub, False
            self._stamps = {p: stamp(p) for p in hub.config_paths}
            return
        changed = [p for p, was in self._stamps.items() if stamp(p) != was]
        if changed and not self._offered:
            self._offered = True
            self.notices.info(f"{changed[0]} changed since this project was opened; MCP servers "
                              "are read when it opens. Reload opens it again to use them.",
                              RELOAD)

    def _on_notice_action(self) -> None:
        if self._offered and self.window.notice_button.text() == RELOAD:
            self.window.clear_notice()
            self.reopen()

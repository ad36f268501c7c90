"""The window's layout across runs: its geometry, the splitter, and which side panels are open,
kept in the global settings (extra fields beside the user's settings)."""

from __future__ import annotations

from typing import Any

from app.window.notices import Notices
from core.settings import GlobalSettings, SettingsStore
from ui.main_window import MainWindow


def restore_layout(window: MainWindow, g: GlobalSettings) -> None:
    """Lay the window out as it was left (nothing is restored that was never saved)."""
    window.restore_geometry_state(getattr(g, "window_geometry", None),
                                  getattr(g, "window_splitter", None))
    width = getattr(g, "panel_width", None)
    if isinstance(width, int) and width > 0:
        window.panel_width = width
    if getattr(g, "inspector_open", False) is True:
        window.inspector.show()
    if getattr(g, "run_panel_open", False) is True:
        window.run_panel.show()


def save_layout(window: MainWindow, store: SettingsStore, notices: Notices) -> None:
    """Keep the window's layout for the next run (a failure is said, never raised)."""
    geometry, splitter = window.geometry_state()
    with notices.saving("The window's layout could not be saved"):
        g = store.load()
        extra: dict[str, Any] = {"window_geometry": geometry, "window_splitter": splitter,
                                 "inspector_open": window.inspector.isVisible(),
                                 "run_panel_open": window.run_panel.isVisible()}
        shown = [d for d in (window.inspector, window.run_panel) if d.isVisible()]
        if shown:  # the side panels' width, as the user left it
            extra["panel_width"] = shown[0].width()
        store.save(g.model_copy(update=extra))

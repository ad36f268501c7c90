"""Project trust in the window: a project that ships an MCP command opens restricted and asks
once, listing the command in full; keeping it restricted is remembered for exactly that content;
File → Trust this project… trusts it and the project's servers are then offered."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox
from pytestqt.qtbot import QtBot

from app.window.controller import Controller
from app.window.trust_flow import KEEP, TRUST
from core.mcp_state import ServerState
from tests.helpers.gui import open_window
from tests.integration.test_mcp import configure
from tests.integration.test_trust import marking_server
from ui.main_window import MainWindow

pytestmark = pytest.mark.gui


def question(window: MainWindow) -> QMessageBox | None:
    boxes = [b for b in window.findChildren(QMessageBox) if b.isVisible()]
    return boxes[0] if boxes else None


def mcp_servers(controller: Controller) -> dict[str, ServerState]:
    """The MCP servers of the window's engine."""
    assert controller.engine is not None and controller.engine.context.mcp is not None
    return controller.engine.context.mcp.servers


def click(box: QMessageBox, label: str) -> None:
    next(b for b in box.buttons() if b.text() == label).click()


def test_an_untrusted_project_asks_once_and_stays_restricted_until_trusted(
        qtbot: QtBot, project_dir: Path, tmp_path: Path) -> None:
    marker = tmp_path / "MCP-RAN"
    project_dir.mkdir()
    configure(project_dir, trusted=False, evil=marking_server(marker))
    window, controller = open_window(qtbot, project_dir)
    box = question(window)
    assert box is not None
    assert sys.executable in box.informativeText()  # the command, in full
    assert "Restricted" in window.trust_banner.text() and window.trust_banner.isVisible()
    assert "evil" not in mcp_servers(controller)
    click(box, KEEP)
    qtbot.waitUntil(lambda: question(window) is None, timeout=5_000)

    controller.open_project(tmp_path / "elsewhere")  # away and back: not asked again
    assert controller.open_project(project_dir)
    assert question(window) is None and window.trust_banner.isVisible()
    assert window.trust_action.isEnabled()

    window.trust_action.trigger()
    box = question(window)
    assert box is not None
    click(box, TRUST)
    qtbot.waitUntil(lambda: "evil" in mcp_servers(controller), timeout=10_000)
    assert not window.trust_banner.isVisible() and not window.trust_action.isEnabled()
    assert not marker.exists()  # trusted, it starts when an agent turn needs tools
    window.close()

"""Checkpoints in the window: an agent turn that changed files shows "N files changed" in the
Changed files panel, its diff per file, Undo these changes and Redo, and a question before
restoring over a file the user changed since. Real engine thread, loopback server, real files,
the real git binary."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QMessageBox
from pytestqt.qtbot import QtBot

from app.window.controller import Controller
from tests.helpers.checkpoints import files
from tests.helpers.fake_llm import Answer, FakeLLMServer, ToolCalls
from tests.helpers.gui import open_window, run_until, type_and_send, use_fake_provider
from ui.approval_dialog import ApprovalDialog
from ui.changes_panel import DiffViewer
from ui.main_window import MainWindow

pytestmark = pytest.mark.gui

SHELL = "rm README.md && mkdir -p made && printf 'by shell\\n' > made/by_shell.txt"


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer) -> FakeLLMServer:
    return use_fake_provider(monkeypatch, llm_server)


@pytest.fixture
def project(project_dir: Path) -> Path:
    project_dir.mkdir(parents=True, exist_ok=True)
    (project_dir / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (project_dir / "README.md").write_text("# Calc\n")
    return project_dir


def question(window: MainWindow) -> QMessageBox | None:
    found = [b for b in window.findChildren(QMessageBox) if b.isVisible()]
    return found[-1] if found else None


def answer(qtbot: QtBot, qloop: asyncio.AbstractEventLoop, window: MainWindow,
           choice: str) -> None:
    run_until(qloop, lambda: question(window) is not None)
    box = question(window)
    assert box is not None
    button = next(b for b in box.buttons() if b.text() == choice)
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def run_agent_turn(qtbot: QtBot, qloop: asyncio.AbstractEventLoop, window: MainWindow,
                   controller: Controller) -> None:
    """Send in agent mode and allow every call the turn asks about."""
    qtbot.mouseClick(window.mode_switcher.buttons["agent"], Qt.MouseButton.LeftButton)
    type_and_send(qtbot, window, "fix it")
    answered: set[str] = set()

    def asking() -> list[ApprovalDialog]:
        return [d for d in window.findChildren(ApprovalDialog)
                if d.isVisible() and d.detail.toPlainText() not in answered]

    while True:
        run_until(qloop, lambda: not controller.busy() or bool(asking()), timeout=90)
        if not asking():
            return
        dialog = asking()[0]
        answered.add(dialog.detail.toPlainText())
        qtbot.mouseClick(dialog.buttons["Allow once"], Qt.MouseButton.LeftButton)


def test_a_turns_changes_are_shown_undone_and_redone(qtbot: QtBot, qloop: asyncio.AbstractEventLoop,
                                                     project: Path,
                                                     provider: FakeLLMServer) -> None:
    provider.script(
        ToolCalls([("c1", "write_file", json.dumps({"path": "new.py", "content": "x = 1\n"})),
                   ("c2", "edit_file", json.dumps({"path": "calc.py", "old": "return a - b",
                                                   "new": "return a + b"}))]),
        ToolCalls([("c3", "run_shell", json.dumps({"command": SHELL}))]),
        Answer("Fixed."))
    before = files(project)
    window, controller = open_window(qtbot, project)
    run_agent_turn(qtbot, qloop, window, controller)
    after = files(project)
    assert after != before and "made/by_shell.txt" in after

    panel = window.changes_panel
    run_until(qloop, lambda: panel.isVisible() and bool(panel.items()))
    first, title = panel.items()[0].split("\n", 1)
    assert first.startswith("4 files changed  ·  ") and title == "fix it"
    item = panel.list.item(0)
    qtbot.mouseClick(panel.list.viewport(), Qt.MouseButton.LeftButton,
                     pos=panel.list.visualItemRect(item).center())
    run_until(qloop, lambda: controller.checkpoints.viewer is not None)
    viewer = controller.checkpoints.viewer
    assert isinstance(viewer, DiffViewer)
    labels = [viewer.files.item(i).text() for i in range(viewer.files.count())]
    assert [label.split()[0] for label in labels] == [
        "README.md", "calc.py", "made/by_shell.txt", "new.py"]
    assert "(deleted)" in labels[0] and "+1 −1" in labels[1]
    viewer.files.setCurrentRow(1)
    assert "+    return a + b" in viewer.view.toPlainText()
    assert "-    return a - b" in viewer.view.toPlainText()

    qtbot.mouseClick(viewer.undo, Qt.MouseButton.LeftButton)
    assert files(project) == before
    viewer = controller.checkpoints.viewer
    assert viewer is not None and viewer.redo.isVisible() and not viewer.undo.isVisible()
    assert "undone" in panel.items()[0]
    qtbot.mouseClick(viewer.redo, Qt.MouseButton.LeftButton)
    assert files(project) == after

    # the user edits a file the turn changed: Undo asks first
    (project / "calc.py").write_text("def add(a, b):\n    return b + a  # mine\n")
    mine = files(project)
    viewer = controller.checkpoints.viewer
    assert viewer is not None and viewer.undo.isVisible()
    qtbot.mouseClick(viewer.undo, Qt.MouseButton.LeftButton)
    box = question(window)
    assert box is not None and "calc.py" in box.informativeText()
    answer(qtbot, qloop, window, "Cancel")
    assert files(project) == mine
    qtbot.mouseClick(viewer.undo, Qt.MouseButton.LeftButton)
    answer(qtbot, qloop, window, "Restore anyway")
    assert files(project) == before


def click_when_asked(choice: str) -> None:
    """Answer the (modal) rewind question with `choice` once it is up; after a deadline, close
    it (which cancels, and the test fails on what follows)."""
    deadline = time.monotonic() + 30

    def attempt() -> None:
        boxes = [w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox)
                 and w.objectName() == "rewind_question" and w.isVisible()]
        if boxes:
            next(b for b in boxes[0].buttons() if b.text() == choice).click()
        elif time.monotonic() < deadline:
            QTimer.singleShot(20, attempt)

    QTimer.singleShot(0, attempt)


@pytest.mark.parametrize("choice", ["Files too", "Conversation only", "Cancel"])
def test_edit_and_resend_asks_whether_to_restore_the_files_too(qtbot: QtBot,
                                                               qloop: asyncio.AbstractEventLoop,
                                                               project: Path,
                                                               provider: FakeLLMServer,
                                                               choice: str) -> None:
    provider.script(
        ToolCalls([("c1", "write_file", json.dumps({"path": "new.py", "content": "x = 1\n"}))]),
        Answer("Wrote it."), Answer("Answered again."))
    before = files(project)
    window, controller = open_window(qtbot, project)
    run_agent_turn(qtbot, qloop, window, controller)
    after = files(project)
    assert after == {**before, "new.py": b"x = 1\n"}
    assert controller.project is not None
    conversations = len(controller.project.conversations.list())
    user = window.transcript_model.rows()[0].message
    assert user is not None
    controller.branches.edit(user.id)
    click_when_asked(choice)
    assert controller.branches.send_edited("do it otherwise")
    run_until(qloop, lambda: not controller.busy(), timeout=60)
    made = len(controller.project.conversations.list()) - conversations
    if choice == "Cancel":
        assert made == 0 and files(project) == after
    else:
        assert made == 1
        assert files(project) == (before if choice == "Files too" else after)

"""Rough edges of the window a new user met: it never widens itself, the status bar tells the
shown conversation's state and opens Settings, a stale "Not sent" goes with the draft it was
about, the full-output viewer goes to either end by keyboard, "Expand" only where there is more."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QMenu

from core.llm.runtime import load_litellm
from core.model import ConversationMessage
from core.store.project import Project
from tests.helpers.gui import open_window
from ui.output_viewer import OutputViewer

pytestmark = pytest.mark.gui


@pytest.fixture(autouse=True)
def library() -> None:
    load_litellm()  # its loading says so in the status bar until it is in


def two_conversations(project) -> tuple[str, str]:
    with Project.open(project) as p:
        a = p.conversations.create("Short")
        p.conversations.append_many(a.id, [ConversationMessage(role="user", content="hi"),
                                           ConversationMessage(role="assistant", content="hello")])
        b = p.conversations.create("Long")
        p.conversations.append_many(b.id, [
            ConversationMessage(role="user", content="show me"),
            ConversationMessage(role="assistant", content="\n".join(f"line {i}" for i in range(80)))])
        return a.id, b.id


def test_a_long_status_or_a_side_panel_never_widens_the_window(qtbot, project_dir) -> None:
    window, controller = open_window(qtbot, project_dir)
    window.resize(1200, 800)
    qtbot.waitUntil(lambda: window.width() == 1200)
    long = "Something happened that takes many words to say, " * 12
    controller.notices.state("openai/" + "very-long-model-name-" * 8, long)
    qtbot.wait(50)
    assert window.width() == 1200
    assert window.state_label.text() == long  # the whole text, shown cut ...
    assert window.state_label.toolTip().startswith(long.strip())  # ... and in the tooltip
    window.inspector_action.trigger()
    qtbot.waitUntil(lambda: window.inspector.isVisible())
    qtbot.wait(50)
    assert window.width() == 1200
    with qtbot.waitSignal(window.settings_requested, timeout=2000):
        qtbot.mouseClick(window.model_label, Qt.MouseButton.LeftButton)


def test_switching_clears_the_last_conversations_state_and_not_sent(qtbot, project_dir) -> None:
    short, long = two_conversations(project_dir)
    window, controller = open_window(qtbot, project_dir)
    controller.show_conversation(short)
    controller.notices.state("m", "Only the latest answer can be continued or retried")
    controller.show_conversation(long)
    assert "Only the latest" not in window.state_label.text()
    controller.notices.not_sent("Not sent: this message is about 9,000 tokens …")
    assert window.composer.hint.isVisible()
    qtbot.keyClicks(window.composer.editor, "x")
    assert not window.composer.hint.isVisible()


@pytest.mark.qt_log_ignore("does not support raise", "does not support grabbing")  # a popup
def test_expand_only_where_there_is_more_and_the_viewer_goes_to_either_end(
        qtbot, project_dir) -> None:
    short, long = two_conversations(project_dir)
    window, controller = open_window(qtbot, project_dir)
    offered: list[list[str]] = []

    def read_and_close() -> None:  # the menu is open (modal): read what it offers, close it
        menu = QApplication.activePopupWidget()
        assert isinstance(menu, QMenu)
        offered.append([a.text() for a in menu.actions()])
        menu.close()

    view = window.transcript
    for conv in (short, long):
        controller.show_conversation(conv)
        qtbot.wait(20)
        index = view.model().index(1, 0)
        QTimer.singleShot(100, read_and_close)
        view._on_context_menu(view.visualRect(index).center())
    assert "Expand" not in offered[0]  # "hello" has nothing more to show
    assert "Expand" in offered[1]  # eighty lines do

    viewer = OutputViewer(window, "out", "", "\n".join(f"row {i}" for i in range(2000)))
    qtbot.addWidget(viewer)
    viewer.show()
    bar = viewer.view.verticalScrollBar()
    qtbot.keyClick(viewer.view, Qt.Key.Key_End, Qt.KeyboardModifier.ControlModifier)
    assert bar.value() == bar.maximum() > 0
    qtbot.keyClick(viewer.view, Qt.Key.Key_Home, Qt.KeyboardModifier.ControlModifier)
    assert bar.value() == 0

"""Paging through a long transcript with rows taller than the window, as a user does."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from core.model import ConversationMessage
from tests.helpers.trajectories import make_conversation
from ui.main_window import MainWindow

pytestmark = pytest.mark.gui

TALL = ("A long paragraph that wraps over several lines of the transcript. " * 12 + "\n") * 40


def long_conversation() -> list[ConversationMessage]:
    raw = []
    for m in make_conversation(120, seed=3, tool_output_chars=2000):
        raw.append(m)
        if m["role"] == "user" and len(raw) % 5 == 0:
            raw.append({"role": "assistant", "content": TALL})  # taller than the window
    return [ConversationMessage.from_openai(m) for m in raw]


@pytest.fixture
def window(qtbot) -> MainWindow:
    w = MainWindow()
    qtbot.addWidget(w)
    w.resize(900, 600)
    w.show()
    w.transcript_model.set_messages(long_conversation())
    w.transcript.setFocus()
    return w


def page(qtbot, window: MainWindow, key: Qt.Key, limit: int = 2000) -> list[int]:
    """Press `key` until the view stops moving; the scroll positions on the way."""
    bar = window.transcript.verticalScrollBar()
    values = [bar.value()]
    for _ in range(limit):
        qtbot.keyClick(window.transcript, key)
        if bar.value() == values[-1]:
            break
        values.append(bar.value())
    return values


def test_page_up_and_down_cross_the_whole_transcript_right_after_opening(qtbot, window) -> None:
    # Right after opening (the view at the end, its layout still in progress) a PageUp used to
    # spin for tens of seconds inside QListView's own paging.
    ups = page(qtbot, window, Qt.Key.Key_PageUp)
    assert ups[-1] == 0 and len(ups) > 10
    assert all(a > b for a, b in zip(ups, ups[1:], strict=False))  # every press moved up
    assert window.transcript.currentIndex().row() == 0  # the row at the top is current
    downs = page(qtbot, window, Qt.Key.Key_PageDown)
    bar = window.transcript.verticalScrollBar()
    assert downs[-1] == bar.maximum() and len(downs) > 10
    assert all(a < b for a, b in zip(downs, downs[1:], strict=False))  # through tall rows too
    assert window.transcript.currentIndex().row() > 0


def test_home_and_end_jump_to_either_end(qtbot, window) -> None:
    bar = window.transcript.verticalScrollBar()
    qtbot.keyClick(window.transcript, Qt.Key.Key_Home)
    assert bar.value() == 0 and window.transcript.currentIndex().row() == 0
    qtbot.keyClick(window.transcript, Qt.Key.Key_End)
    assert bar.value() == bar.maximum() and window.transcript.at_bottom()


def test_a_point_inside_a_row_taller_than_the_window_finds_that_row(qtbot, window) -> None:
    view = window.transcript
    model = window.transcript_model
    tall = next(r for r in range(model.rowCount()) if model.row(r).text == TALL.rstrip("\n")
                or model.row(r).text == TALL)
    view.executeDelayedItemsLayout()
    rect = view.rectForIndex(model.index(tall, 0))
    assert rect.height() > view.viewport().height()
    view.verticalScrollBar().setValue(rect.top() + rect.height() // 2 - 50)
    middle = view.viewport().rect().center()
    assert view.indexAt(middle).row() == tall


def test_any_part_of_a_message_can_be_selected_and_copied(qtbot, window) -> None:
    from PySide6.QtGui import QGuiApplication, QTextCursor

    model = window.transcript_model
    i = next(n for n, r in enumerate(model.rows()) if r.text == TALL)
    viewer = window.transcript.open_text(i)
    qtbot.addWidget(viewer)
    assert viewer.isVisible() and viewer.view.toPlainText() == TALL
    cursor = viewer.view.textCursor()
    cursor.setPosition(2)
    cursor.setPosition(16, QTextCursor.MoveMode.KeepAnchor)  # "long paragraph"
    viewer.view.setTextCursor(cursor)
    viewer.view.copy()
    assert QGuiApplication.clipboard().text() == "long paragraph"

"""Paging through a long transcript with rows taller than the window, as a user does."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from core.model import ConversationMessage
from tests.helpers.trajectories import make_conversation
from ui.main_window import MainWindow

pytestmark = pytest.mark.gui

TALL = ("A long paragraph that wraps over several lines of the transcript. " * 12 + "\n") * 40


def long_conversation(n: int = 120) -> list[ConversationMessage]:
    raw = []
    for m in make_conversation(n, seed=3, tool_output_chars=2000):
        raw.append(m)
        if m["role"] == "user" and len(raw) % 5 == 0:
            raw.append({"role": "assistant", "content": TALL})  # taller than the window
    return [ConversationMessage.from_openai(m) for m in raw]


def shown(qtbot: QtBot, rounds: int | None = None) -> MainWindow:
    w = MainWindow()
    qtbot.addWidget(w)
    w.resize(900, 600)
    w.show()
    w.transcript_model.set_messages(long_conversation() if rounds is None
                                    else long_conversation(rounds))
    return w


@pytest.fixture
def window(qtbot: QtBot) -> MainWindow:
    w = shown(qtbot)
    w.transcript.setFocus()
    return w


def page(qtbot: QtBot, window: MainWindow, key: Qt.Key, limit: int = 2000) -> list[int]:
    """Press `key` until the view stops moving; the scroll positions on the way."""
    bar = window.transcript.verticalScrollBar()
    values = [bar.value()]
    for _ in range(limit):
        qtbot.keyClick(window.transcript, key)
        if bar.value() == values[-1]:
            break
        values.append(bar.value())
    return values


def test_page_up_and_down_cross_the_whole_transcript_right_after_opening(
        qtbot: QtBot, window: MainWindow) -> None:
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


def test_home_and_end_jump_to_either_end(qtbot: QtBot, window: MainWindow) -> None:
    bar = window.transcript.verticalScrollBar()
    qtbot.keyClick(window.transcript, Qt.Key.Key_Home)
    assert bar.value() == 0 and window.transcript.currentIndex().row() == 0
    qtbot.keyClick(window.transcript, Qt.Key.Key_End)
    assert bar.value() == bar.maximum() and window.transcript.at_bottom()


def test_a_point_inside_a_row_taller_than_the_window_finds_that_row(qtbot: QtBot,
                                                                    window: MainWindow) -> None:
    view = window.transcript
    model = window.transcript_model
    tall = next(r for r in range(model.rowCount()) if model.row(r).text == TALL.rstrip("\n")
                or model.row(r).text == TALL)
    rect = view.rectForIndex(model.index(tall, 0))
    assert rect.height() > view.viewport().height()
    view.verticalScrollBar().setValue(rect.top() + rect.height() // 2 - 50)
    middle = view.viewport().rect().center()
    assert view.indexAt(middle).row() == tall


def test_any_part_of_a_message_can_be_selected_and_copied(qtbot: QtBot, window: MainWindow) -> None:
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


@pytest.fixture
def shorter(qtbot: QtBot) -> MainWindow:
    return shown(qtbot, 40)


def visible_rows(window: MainWindow) -> tuple[int, int]:
    view = window.transcript
    top = view.row_at(view.verticalOffset()).row()
    bottom = view.row_at(view.verticalOffset() + view.viewport().height() - 1).row()
    return top, bottom


def wheel(window: MainWindow, notches: int) -> None:
    viewport = window.transcript.viewport()
    at = viewport.rect().center()
    QApplication.sendEvent(viewport, QWheelEvent(
        QPointF(at), QPointF(viewport.mapToGlobal(at)), QPoint(0, 0), QPoint(0, 120 * notches),
        Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase,
        False))
    QApplication.processEvents()  # rows painted for the first time report their real height


def travel(window: MainWindow, step: Callable[[], object], done: Callable[[], bool],
           limit: int = 3000) -> list[tuple[int, int]]:
    """Call `step` until `done()`; the rows on screen after each call."""
    seen = [visible_rows(window)]
    for _ in range(limit):
        step()
        seen.append(visible_rows(window))
        if done():
            return seen
    raise AssertionError(f"did not get there in {limit} steps; on screen: {seen[-1]}")


def assert_every_row_in_order(seen: list[tuple[int, int]], rows: int, upward: bool) -> None:
    tops = [top for top, _ in seen]
    order = tops[::-1] if upward else tops
    assert order == sorted(order), "the view jumped against the direction of scrolling"
    covered: set[int] = set()
    for top, bottom in seen:
        covered.update(range(top, bottom + 1))
    assert covered == set(range(rows)), f"never shown: {sorted(set(range(rows)) - covered)[:10]}"


def test_the_wheel_reaches_every_row_in_order_both_ways(qtbot: QtBot, shorter: MainWindow) -> None:
    # The list used to jump back hundreds of rows on the 4th notch as rows got laid out.
    bar = shorter.transcript.verticalScrollBar()
    rows = shorter.transcript_model.rowCount()
    assert shorter.transcript.at_bottom()
    up = travel(shorter, lambda: wheel(shorter, 3), lambda: bar.value() == 0)
    assert_every_row_in_order(up, rows, upward=True)
    down = travel(shorter, lambda: wheel(shorter, -3), lambda: bar.value() == bar.maximum())
    assert_every_row_in_order(down, rows, upward=False)
    assert shorter.transcript.at_bottom()


def test_dragging_the_thumb_reaches_every_row_and_stays_where_it_is_let_go(
        qtbot: QtBot, shorter: MainWindow) -> None:
    bar = shorter.transcript.verticalScrollBar()
    rows = shorter.transcript_model.rowCount()
    bar.setSliderDown(True)  # as a mouse drag does: rows measured meanwhile must not move it

    def drag() -> None:
        bar.setSliderPosition(max(0, bar.sliderPosition() - bar.pageStep() // 2))
        QApplication.processEvents()

    up = travel(shorter, drag, lambda: bar.value() == 0)
    assert_every_row_in_order(up, rows, upward=True)
    bar.setSliderPosition(bar.maximum() // 2)
    QApplication.processEvents()
    view = shorter.transcript
    held = visible_rows(shorter)
    below = shorter.transcript_model.index(held[0] + 1, 0)  # the first row starting on screen
    at = view.visualRect(below).top()
    bar.setSliderDown(False)
    bar.sliderReleased.emit()  # what letting go of the mouse button sends
    qtbot.wait(50)
    # No snapping back once let go: the rows measured during the drag take their real height
    # without moving what is on screen.
    assert visible_rows(shorter)[0] == held[0] and 0 < held[0] < rows - 1
    assert view.visualRect(below).top() == at


def test_a_click_selects_the_row_under_the_mouse_and_ctrl_c_copies_it(qtbot: QtBot,
                                                                      shorter: MainWindow) -> None:
    from PySide6.QtGui import QGuiApplication

    view = shorter.transcript
    view.verticalScrollBar().setValue(view.verticalScrollBar().maximum() // 3)
    QApplication.processEvents()
    top, _ = visible_rows(shorter)
    target = shorter.transcript_model.index(top + 1, 0)
    rect = view.visualRect(target)
    point = QPoint(rect.center().x(), min(rect.bottom() - 2, rect.top() + 30))
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=point)
    assert view.currentIndex().row() == top + 1
    assert [i.row() for i in view.selectionModel().selectedIndexes()] == [top + 1]
    qtbot.keyClick(view, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QGuiApplication.clipboard().text() == shorter.transcript_model.row(top + 1).copy_text()

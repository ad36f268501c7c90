"""Rough edges of the window a new user met: it never widens itself, the status bar tells the
shown conversation's state and opens Settings, a stale "Not sent" goes with the draft it was
about, the full-output viewer goes to either end by keyboard, "Expand" only where there is more."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QInputDialog, QMenu
from pytestqt.qtbot import QtBot

from core.llm.runtime import load_litellm
from core.model import ConversationMessage
from core.store.project import Project
from tests.helpers.fake_llm import FakeLLMServer
from tests.helpers.gui import open_window
from tests.helpers.present import present
from ui.output_viewer import OutputViewer

pytestmark = pytest.mark.gui


@pytest.fixture(autouse=True)
def library() -> None:
    load_litellm()  # its loading says so in the status bar until it is in


def two_conversations(project: Path) -> tuple[str, str]:
    with Project.open(project) as p:
        a = p.conversations.create("Short")
        p.conversations.append_many(a.id, [ConversationMessage(role="user", content="hi"),
                                           ConversationMessage(role="assistant", content="hello")])
        b = p.conversations.create("Long")
        p.conversations.append_many(b.id, [
            ConversationMessage(role="user", content="show me"),
            ConversationMessage(role="assistant", content="\n".join(f"line {i}" for i in range(80)))])
        return a.id, b.id


def test_a_long_status_or_a_side_panel_never_widens_the_window(qtbot: QtBot,
                                                               project_dir: Path) -> None:
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


def test_switching_clears_the_last_conversations_state_and_not_sent(qtbot: QtBot,
                                                                    project_dir: Path) -> None:
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
        qtbot: QtBot, project_dir: Path) -> None:
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


def test_switching_back_returns_to_the_same_place(qtbot: QtBot, project_dir: Path) -> None:
    with Project.open(project_dir) as p:
        long = p.conversations.create("Many")
        p.conversations.append_many(long.id, [
            ConversationMessage(role="user" if i % 2 == 0 else "assistant",
                                content=f"message number {i}\n" + "more text\n" * (i % 4))
            for i in range(120)])
        short = p.conversations.create("Few")
        p.conversations.append_many(short.id, [ConversationMessage(role="user", content="hi")])
    window, controller = open_window(qtbot, project_dir)
    window.resize(1000, 700)
    controller.show_conversation(long.id)
    view = window.transcript
    qtbot.wait(50)
    bar = view.verticalScrollBar()
    assert bar.value() == bar.maximum() > 0  # a conversation opens at its end
    view.scrollTo(view.model().index(40, 0), view.ScrollHint.PositionAtTop)
    view._update_follow()
    qtbot.wait(50)
    top_before = view.row_at(bar.value()).row()
    assert 35 <= top_before <= 45
    controller.show_conversation(short.id)
    controller.show_conversation(long.id)
    qtbot.wait(50)
    assert view.row_at(bar.value()).row() == top_before
    assert not view.at_bottom()


def test_rename_has_room_and_the_row_keeps_its_second_line(qtbot: QtBot, project_dir: Path) -> None:
    short, _long = two_conversations(project_dir)
    window, controller = open_window(qtbot, project_dir)
    seen: list[int] = []

    def type_a_name() -> None:
        dialog = QApplication.activeModalWidget()
        assert isinstance(dialog, QInputDialog) and dialog.objectName() == "rename_dialog"
        seen.append(dialog.width())
        dialog.setTextValue("A much longer name for the short conversation")
        dialog.accept()

    QTimer.singleShot(100, type_a_name)
    window.conversations.rename(short)
    assert seen and seen[0] >= 460
    item = present(window.conversations.list.topLevelItem(window.conversations.ids().index(short)))
    title, second = item.text(0).split("\n")
    assert title == "A much longer name for the short conversation"
    assert second.endswith("· 2 messages")


def test_the_budget_preview_comes_back_to_as_configured(qtbot: QtBot, project_dir: Path) -> None:
    window, _controller = open_window(qtbot, project_dir)
    window.inspector_action.trigger()
    slider, reset = window.inspector.slider, window.inspector.slider_reset
    slider.setValue(97)  # where a drag may leave it
    assert slider.value() == 95 and reset.isVisible()
    assert window.inspector.slider_label.text() == "Budget preview: 95%"
    slider.setFocus()
    qtbot.keyClick(slider, Qt.Key.Key_Right)  # the keys reach 100 % from there
    assert slider.value() == 100 and not reset.isVisible()
    assert window.inspector.slider_label.text() == "Budget: as configured"
    slider.setValue(40)
    qtbot.mouseDClick(slider, Qt.MouseButton.LeftButton)
    assert slider.value() == 100
    slider.setValue(40)
    reset.click()
    assert slider.value() == 100


def test_the_meters_tooltip_names_where_the_window_was_set_and_lines_figures_up(
        qtbot: QtBot, project_dir: Path, monkeypatch: pytest.MonkeyPatch,
        llm_server: FakeLLMServer) -> None:
    from tests.helpers.gui import use_fake_provider

    use_fake_provider(monkeypatch, llm_server, context_window="100000")
    two_conversations(project_dir)
    window, controller = open_window(qtbot, project_dir)
    qtbot.waitUntil(lambda: "usable tokens" in window.usage.toolTip(), timeout=10_000)
    tip = window.usage.toolTip()
    assert "window 100,000 (your setting: WORKBENCH_CONTEXT_WINDOW)" in tip
    assert "<td>history</td><td align='right'>" in tip  # figures in a column of their own


def test_settings_keep_each_providers_own_values(qtbot: QtBot, project_dir: Path) -> None:
    from core.settings import GlobalSettings, ProviderEntry, SettingsStore

    store = SettingsStore()
    store.save(GlobalSettings(active_provider="OpenAI", providers=[
        ProviderEntry(name="OpenAI", model="gpt-4.1", context_window=50_000, key_name="openai"),
        ProviderEntry(name="OpenAI-compatible server", model="openai/qwen2.5-7b",
                      api_base="http://127.0.0.1:8081/v1", context_window=8192)]))
    window, controller = open_window(qtbot, project_dir)
    controller.settings_flow.open()
    dialog = controller.settings_flow.dialog
    assert dialog is not None
    assert (dialog.model.text(), dialog.context_window.value()) == ("gpt-4.1", 50_000)
    dialog.preset.setCurrentIndex(dialog.preset.findText("OpenAI-compatible server"))
    assert dialog.model.text() == "openai/qwen2.5-7b"
    assert dialog.api_base.text() == "http://127.0.0.1:8081/v1"
    assert dialog.context_window.value() == 8192  # the window set for that provider
    assert "WORKBENCH_API_KEY" in dialog.key_note.text()
    dialog.preset.setCurrentIndex(dialog.preset.findText("Anthropic"))  # never saved: defaults
    assert dialog.model.text().startswith("anthropic/") and dialog.context_window.value() == 0
    assert "ANTHROPIC_API_KEY" in dialog.key_note.text()  # no keyring here: the variable
    dialog.preset.setCurrentIndex(dialog.preset.findText("OpenAI"))  # and back
    assert (dialog.model.text(), dialog.context_window.value()) == ("gpt-4.1", 50_000)
    dialog.reject()


def test_a_small_window_with_a_side_panel_keeps_its_size_and_a_readable_list(
        qtbot: QtBot, project_dir: Path) -> None:
    from app.window.layout_state import save_layout
    from core.settings import SettingsStore
    from ui.main_window import LIST_MIN_WIDTH

    window, controller = open_window(qtbot, project_dir)
    for width in (740, 800):  # 740: a side panel still fits beside the list and the box
        window.resize(width, 600)

        def at_width(width: int = width) -> bool:
            return window.width() == width

        qtbot.waitUntil(at_width)
        for action in (window.inspector_action, window.run_panel_action):
            action.trigger()
            qtbot.wait(50)
            assert window.width() == width
            assert window.conversations.width() >= LIST_MIN_WIDTH
            assert window.splitter.sizes()[1] >= 320  # the transcript and the message box
            action.trigger()
            qtbot.wait(50)
    for action in (window.inspector_action, window.run_panel_action):
        action.trigger()
    window.run_panel_action.trigger()
    window.resize(1300, 800)
    qtbot.waitUntil(lambda: window.width() == 1300)
    window.resizeDocks([window.inspector], [360], Qt.Orientation.Horizontal)
    qtbot.wait(50)
    narrowed = window.inspector.width()
    save_layout(window, SettingsStore(), controller.notices)
    window.close()
    window2, _controller2 = open_window(qtbot, project_dir)  # the panel comes back as wide
    window2.resize(1300, 800)  # (the test screen is smaller than the window that was saved)
    qtbot.waitUntil(lambda: window2.width() == 1300)
    window2.inspector_action.trigger()
    window2.inspector_action.trigger()
    qtbot.waitUntil(lambda: window2.inspector.isVisible())
    qtbot.wait(50)
    assert window2.panel_width == narrowed and abs(window2.inspector.width() - narrowed) <= 8

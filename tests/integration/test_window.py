"""The window, driven as a user would, against the loopback server and a real project folder."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractSlider, QMessageBox
from pytestqt.qtbot import QtBot

from core.store.project import Project
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer, HttpError
from tests.helpers.gui import open_window, run_until
from tests.helpers.present import present
from ui.main_window import MainWindow
from ui.transcript_model import RowKind

pytestmark = pytest.mark.gui


@pytest.fixture(autouse=True)
def provider(monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer) -> FakeLLMServer:
    monkeypatch.setenv("WORKBENCH_MODEL", MODEL)
    monkeypatch.setenv("WORKBENCH_API_BASE", llm_server.url)
    return llm_server


def type_and_send(qtbot: QtBot, window: MainWindow, text: str) -> None:
    window.composer.editor.setFocus()
    qtbot.keyClicks(window.composer.editor, text)
    qtbot.keyClick(window.composer.editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)


def wait_for_streamed_text(qloop: asyncio.AbstractEventLoop, window: MainWindow,
                           chars: int) -> None:
    """Run until the streaming row shows more than `chars` characters."""
    run_until(qloop, lambda: (row := window.transcript_model.streaming_row()) is not None
              and len(row.text) > chars)


def test_send_streams_the_answer_into_a_new_row_and_saves_it(qtbot: QtBot,
                                                             qloop: asyncio.AbstractEventLoop,
                                                             project_dir: Path,
                                                             llm_server: FakeLLMServer) -> None:
    window, controller = open_window(qtbot, project_dir)
    llm_server.script(Answer("Hello from the model, streamed in pieces.", delay=0.01))
    type_and_send(qtbot, window, "Say hello")
    assert not window.composer.send_button.isEnabled()  # disabled while the turn runs
    run_until(qloop, lambda: not controller.busy())
    rows = window.transcript_model.rows()
    assert [r.kind for r in rows] == [RowKind.USER, RowKind.ASSISTANT]
    assert rows[1].text == "Hello from the model, streamed in pieces."
    assert window.composer.text() == ""
    with Project.open(project_dir, read_only=True) as p:
        stored = p.conversations.load(present(controller.current_id)).messages
    assert [m.text() for m in stored] == ["Say hello", "Hello from the model, streamed in pieces."]


def test_streaming_row_shows_text_before_the_answer_completes(qtbot: QtBot,
                                                              qloop: asyncio.AbstractEventLoop,
                                                              project_dir: Path,
                                                              llm_server: FakeLLMServer) -> None:
    window, controller = open_window(qtbot, project_dir)
    llm_server.script(Answer("one two three four five six seven eight nine ten " * 8, delay=0.02))
    type_and_send(qtbot, window, "count")
    wait_for_streamed_text(qloop, window, 20)
    assert controller.busy() and window.composer.stop_button.isVisible()
    run_until(qloop, lambda: not controller.busy())


def test_stop_keeps_the_partial_answer_marked_as_stopped(qtbot: QtBot,
                                                         qloop: asyncio.AbstractEventLoop,
                                                         project_dir: Path,
                                                         llm_server: FakeLLMServer) -> None:
    window, controller = open_window(qtbot, project_dir)
    llm_server.script(Answer("word " * 400, delay=0.02))
    type_and_send(qtbot, window, "talk a lot")
    wait_for_streamed_text(qloop, window, 30)
    qtbot.keyClick(window.composer.editor, Qt.Key.Key_Escape)
    run_until(qloop, lambda: not controller.busy())
    last = window.transcript_model.rows()[-1]
    assert last.message is not None and last.message.error is not None
    assert last.kind is RowKind.ERROR and last.message.error.type == "stopped"
    assert last.text.startswith("word word")
    assert window.composer.send_button.isEnabled() is False  # empty box: nothing to send yet
    qtbot.keyClicks(window.composer.editor, "next")
    assert window.composer.send_button.isEnabled()


def test_reopening_brings_back_the_conversation_its_messages_and_the_draft(
    qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path, llm_server: FakeLLMServer,
    tmp_path: Path
) -> None:
    window, controller = open_window(qtbot, project_dir)
    llm_server.script(Answer("first answer"))
    type_and_send(qtbot, window, "first question")
    run_until(qloop, lambda: not controller.busy())
    controller.new_conversation()
    other = controller.current_id
    qtbot.keyClicks(window.composer.editor, "half-typed thought")
    window.close()

    window2, controller2 = open_window(qtbot, project_dir)
    assert controller2.current_id == other
    assert window2.composer.text() == "half-typed thought"
    assert len(window2.conversations.ids()) == 2
    first = [i for i in window2.conversations.ids() if i != other][0]
    assert window2.conversations.select(first)
    assert [r.text for r in window2.transcript_model.rows()] == ["first question", "first answer"]


def test_rename_delete_and_search(qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
                                  llm_server: FakeLLMServer,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    window, controller = open_window(qtbot, project_dir)
    llm_server.script(Answer("The capital of Peru is Lima."))
    type_and_send(qtbot, window, "capital of peru?")
    run_until(qloop, lambda: not controller.busy())
    peru = controller.current_id
    controller.new_conversation()
    window.conversations.rename_requested.emit(peru, "Geography")
    assert "Geography" in window.conversations.titles()

    window.conversations.search.setText("lima")  # matches message content, not the title
    qtbot.waitUntil(lambda: len(window.conversations.ids()) == 1)
    assert window.conversations.titles() == ["Geography"]
    window.conversations.search.setText("")
    qtbot.waitUntil(lambda: len(window.conversations.ids()) == 2)

    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    window.conversations.confirm_delete(peru)
    assert len(window.conversations.ids()) == 1
    assert any((project_dir / ".workbench" / "trash").iterdir())


def test_a_500_shows_an_error_row_in_plain_words_and_retry_recovers(
    qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path, llm_server: FakeLLMServer
) -> None:
    window, controller = open_window(qtbot, project_dir)
    llm_server.script(HttpError(500, "upstream exploded"), Answer("Recovered answer"))
    type_and_send(qtbot, window, "hello?")
    run_until(qloop, lambda: not controller.busy())
    error_row = window.transcript_model.rows()[-1]
    assert error_row.kind is RowKind.ERROR
    assert error_row.message is not None and error_row.message.error is not None
    assert "HTTP 500" in error_row.message.error.message
    assert "Traceback" not in error_row.message.error.message
    lay = window.transcript.delegate.layout(error_row, 800, window.transcript.font())
    assert ("retry", "Retry") in lay.actions and ("settings", "Open settings") not in lay.actions
    window.transcript.action_requested.emit(len(window.transcript_model.rows()) - 1, "retry")
    run_until(qloop, lambda: not controller.busy())
    assert window.transcript_model.rows()[-1].text == "Recovered answer"
    # Retry sends the failed request again from scratch: the error entry stays out of it
    assert llm_server.requests[1].body["messages"][1:] == [{"role": "user", "content": "hello?"}]


def test_missing_key_points_to_settings(qtbot: QtBot, qloop: asyncio.AbstractEventLoop,
                                        project_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_MODEL", "gpt-4o-mini")
    monkeypatch.delenv("WORKBENCH_API_BASE")
    window, controller = open_window(qtbot, project_dir)
    type_and_send(qtbot, window, "hi")
    run_until(qloop, lambda: not controller.busy())
    row = window.transcript_model.rows()[-1]
    assert row.message is not None and row.message.error is not None
    assert row.kind is RowKind.ERROR and "OPENAI_API_KEY" in row.message.error.message
    lay = window.transcript.delegate.layout(row, 800, window.transcript.font())
    assert ("settings", "Open settings") in lay.actions
    window.transcript.action_requested.emit(len(window.transcript_model.rows()) - 1, "settings")
    assert controller.settings_flow.dialog is not None and controller.settings_flow.dialog.isVisible()
    controller.settings_flow.dialog.reject()


def test_locked_project_opens_read_only_with_a_banner(qtbot: QtBot,
                                                      qloop: asyncio.AbstractEventLoop,
                                                      project_dir: Path) -> None:
    holder = Project.open(project_dir)
    holder.conversations.create("held elsewhere")
    try:
        window, controller = open_window(qtbot, project_dir)
        assert window.banner.isVisible() and "Another Context Workbench" in window.banner.text()
        assert "[read-only]" in window.windowTitle()
        assert not window.composer.send_button.isEnabled()
        assert window.composer.editor.isReadOnly()
        assert not window.conversations.new_button.isEnabled()
    finally:
        holder.close()


def test_opening_the_open_project_again_keeps_it_open_and_writable(qtbot: QtBot,
                                                                   qloop: asyncio.AbstractEventLoop,
                                                                   project_dir: Path) -> None:
    window, controller = open_window(qtbot, project_dir)
    project, conv = controller.project, controller.current_id
    window.composer.set_text("a draft")
    window.recent_menu.actions()[0].trigger()  # Open recent: the open project comes first
    window.open_project_requested.emit(str(project_dir) + "/")  # File → Open, the same folder
    assert project is not None
    assert controller.project is project and not project.read_only
    assert controller.current_id == conv and window.composer.text() == "a draft"
    assert not window.banner.isVisible() and "[read-only]" not in window.windowTitle()
    assert window.conversations.new_button.isEnabled()
    assert "is already open" in window.notice_label.text()
    window.close()


def test_empty_conversation_explains_how_to_connect_a_provider(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORKBENCH_MODEL")
    monkeypatch.delenv("WORKBENCH_API_BASE")
    window, controller = open_window(qtbot, project_dir)
    assert window.stack.currentWidget() is window.welcome
    assert "Ollama" in window.welcome.text() and "Settings" in window.welcome.text()


def test_stop_right_after_send_loses_nothing(qtbot: QtBot, qloop: asyncio.AbstractEventLoop,
                                             project_dir: Path, llm_server: FakeLLMServer) -> None:
    window, controller = open_window(qtbot, project_dir)
    llm_server.script(Answer("slow " * 50, first_delay=0.5))
    window.composer.set_text("precious words")
    controller.send("precious words")
    controller.stop()  # before or after the worker started: either way nothing is lost
    run_until(qloop, lambda: not controller.busy())
    with Project.open(project_dir, read_only=True) as p:
        stored = [m.text() for m in p.conversations.load(present(controller.current_id)).messages]
    assert "precious words" in stored or window.composer.text() == "precious words"
    assert window.composer.send_button.isEnabled() == (window.composer.text() != "")


def test_closing_the_window_mid_stream_keeps_the_partial_answer(qtbot: QtBot,
                                                                qloop: asyncio.AbstractEventLoop,
                                                                project_dir: Path,
                                                                llm_server: FakeLLMServer) -> None:
    window, controller = open_window(qtbot, project_dir)
    llm_server.script(Answer("streaming " * 300, delay=0.02))
    type_and_send(qtbot, window, "long one")
    wait_for_streamed_text(qloop, window, 40)
    conv = controller.current_id
    window.close()
    with Project.open(project_dir, read_only=True) as p:
        last = p.conversations.load(present(conv)).messages[-1]
    assert last.error is not None
    assert last.kind == "error" and last.error.type == "stopped"
    assert last.text().startswith("streaming streaming")


def test_view_follows_the_stream_only_when_the_user_was_at_the_bottom(
    qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path, llm_server: FakeLLMServer
) -> None:
    window, controller = open_window(qtbot, project_dir)
    window.resize(900, 500)
    for i in range(3):  # enough history to scroll
        llm_server.script(Answer(f"answer {i}\n\n" + "line of text\n\n" * 30))
        type_and_send(qtbot, window, f"question {i}")
        run_until(qloop, lambda: not controller.busy())
    bar = window.transcript.verticalScrollBar()
    run_until(qloop, lambda: bar.maximum() > 0 and window.transcript.at_bottom())  # following

    llm_server.script(Answer("streamed line\n\n" * 60, chunks=["streamed line\n\n"] * 60, delay=0.03))
    type_and_send(qtbot, window, "one more")
    wait_for_streamed_text(qloop, window, 100)
    grown = bar.maximum()
    wait_for_streamed_text(qloop, window, 300)
    run_until(qloop, lambda: bar.maximum() > grown and window.transcript.at_bottom())  # follows
    bar.triggerAction(QAbstractSlider.SliderAction.SliderToMinimum)  # the user scrolls up
    wait_for_streamed_text(qloop, window, 500)
    assert bar.value() == 0  # left where the user put it
    run_until(qloop, lambda: not controller.busy())
    assert bar.value() == 0


def test_continue_resumes_an_interrupted_answer_from_the_error_row(
    qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path, llm_server: FakeLLMServer
) -> None:
    from tests.helpers.fake_llm import Cut

    window, controller = open_window(qtbot, project_dir)
    llm_server.script(Cut("Step one is to"), Answer(" measure first."))
    type_and_send(qtbot, window, "how do I start?")
    run_until(qloop, lambda: not controller.busy())
    error_row = window.transcript_model.rows()[-1]
    lay = window.transcript.delegate.layout(error_row, 800, window.transcript.font())
    assert [a for a, _ in lay.actions] == ["continue", "retry"]
    assert error_row.message is not None
    error_id = error_row.message.id
    window.transcript.action_requested.emit(len(window.transcript_model.rows()) - 1, "continue")
    run_until(qloop, lambda: not controller.busy())
    rows = window.transcript_model.rows()
    last = rows[-1]
    assert last.kind is RowKind.ASSISTANT and last.text == "Step one is to measure first."
    assert rows[-2].kind is RowKind.USER  # one answer on screen, not two
    assert last.message is not None
    assert last.message.continues == error_id
    meta = window.transcript.delegate.layout(last, 800, window.transcript.font()).meta
    assert "resumed after an interruption" in meta
    with Project.open(project_dir, read_only=True) as p:  # the parts stay in the log, linked
        log = p.conversations.load(present(controller.current_id)).messages
    assert [m.kind for m in log[-2:]] == ["error", "message"] and log[-1].continues == log[-2].id
    sent = llm_server.requests[-1].body["messages"]
    assert sent[-2]["content"].startswith("Step one is to")


def test_a_rate_limit_shows_retrying_and_then_the_answer(
    qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path, llm_server: FakeLLMServer,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_AUTO_RETRIES", "2")
    window, controller = open_window(qtbot, project_dir)
    llm_server.script(HttpError(429, "slow down", headers={"Retry-After": "1"}), Answer("Here."))
    type_and_send(qtbot, window, "hello")
    run_until(qloop, lambda: "Retrying in 1 s" in window.state_label.text())
    row = window.transcript_model.streaming_row()
    assert row is not None and row.note.startswith("retrying in 1 s")
    run_until(qloop, lambda: not controller.busy())
    assert window.transcript_model.rows()[-1].text == "Here."


def test_stop_during_a_retry_wait_keeps_the_message(
    qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path, llm_server: FakeLLMServer,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_AUTO_RETRIES", "2")
    window, controller = open_window(qtbot, project_dir)
    llm_server.script(HttpError(503, "busy", headers={"Retry-After": "30"}))
    type_and_send(qtbot, window, "are you there?")
    run_until(qloop, lambda: "Retrying in" in window.state_label.text())
    qtbot.keyClick(window.composer.editor, Qt.Key.Key_Escape)
    run_until(qloop, lambda: not controller.busy(), timeout=5)
    rows = window.transcript_model.rows()
    assert rows[-1].message is not None and rows[-1].message.error is not None
    assert rows[-2].text == "are you there?" and rows[-1].message.error.type == "stopped"
    assert len(llm_server.requests) == 1


def test_search_runs_beside_the_window_and_only_the_newest_result_shows(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    import time as _time

    window, controller = open_window(qtbot, project_dir)
    assert controller.project is not None
    store = controller.project.conversations
    first = controller.current_id
    controller.new_conversation()
    second = controller.current_id
    real = store.search
    assert first is not None and second is not None

    def search(text: str) -> set[str]:
        if text == "slow":
            _time.sleep(1.0)  # a big project: every log read
            return {first}
        return real(text) | {second}

    monkeypatch.setattr(store, "search", search)
    ticks: list[int] = []
    started = _time.monotonic()
    controller.search.search("slow")  # returns at once: nothing waits

    def ticking() -> bool:
        ticks.append(1)
        return _time.monotonic() - started > 0.3

    run_until(qloop, ticking)
    assert len(ticks) > 10  # the window's loop kept turning while the search ran
    controller.search.search("fast")
    run_until(qloop, lambda: _time.monotonic() - started > 1.5)  # the slow one has ended too
    shown = window.conversations.ids()
    assert shown == [second]  # the slow search's late answer ({first}) was dropped

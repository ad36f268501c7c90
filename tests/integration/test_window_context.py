"""The window's view of the context: the mode switcher and the live usage indicator."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from core.llm.runtime import load_litellm
from core.store.project import Project
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer
from tests.helpers.gui import open_window, run_until
from tests.helpers.present import present
from tests.integration.test_window import type_and_send

pytestmark = pytest.mark.gui


@pytest.fixture(autouse=True)
def provider(monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer) -> FakeLLMServer:
    load_litellm()  # the meter waits for the library, as the app does after start-up
    monkeypatch.setenv("WORKBENCH_MODEL", MODEL)
    monkeypatch.setenv("WORKBENCH_API_BASE", llm_server.url)
    monkeypatch.setenv("WORKBENCH_CONTEXT_WINDOW", "6000")
    monkeypatch.setenv("WORKBENCH_MAX_OUTPUT_TOKENS", "500")
    return llm_server


def test_switching_mode_changes_only_the_next_system_prompt(qtbot: QtBot,
                                                            qloop: asyncio.AbstractEventLoop,
                                                            project_dir: Path,
                                                            llm_server: FakeLLMServer) -> None:
    window, controller = open_window(qtbot, project_dir)
    llm_server.script(Answer("chat answer"), Answer("agent answer"))
    type_and_send(qtbot, window, "first")
    run_until(qloop, lambda: not controller.busy())
    qtbot.mouseClick(window.mode_switcher.buttons["agent"], Qt.MouseButton.LeftButton)
    type_and_send(qtbot, window, "second")
    run_until(qloop, lambda: not controller.busy())
    first, second = (r.body["messages"] for r in llm_server.requests)
    assert "Mode: chat" in first[0]["content"] and "Mode: agent" in second[0]["content"]
    assert second[1:] == [*first[1:], {"role": "assistant", "content": "chat answer"},
                          {"role": "user", "content": "second"}]  # history untouched
    conv = controller.current_id
    assert conv is not None
    window.close()
    with Project.open(project_dir, read_only=True) as p:
        assert p.conversations.meta(conv).mode == "agent"
        assert [m.mode for m in p.conversations.load(conv).messages] == [
            "chat", "chat", "agent", "agent"]
    window2, _ = open_window(qtbot, project_dir)
    assert window2.mode_switcher.mode() == "agent"


def test_the_meter_shows_usage_and_follows_the_draft(qtbot: QtBot, qloop: asyncio.AbstractEventLoop,
                                                     project_dir: Path) -> None:
    window, controller = open_window(qtbot, project_dir)
    meter = window.usage
    qtbot.waitUntil(lambda: meter.state != "pending")
    before = meter.text()
    assert "tokens" in before and meter.state == "normal"
    assert "system prompt" in meter.toolTip() and "your draft" in meter.toolTip()
    qtbot.keyClicks(window.composer.editor, "a few more words of draft " * 20)
    qtbot.waitUntil(lambda: meter.text() != before, timeout=3000)
    window.composer.set_text("long " * 4300)  # most of the 5,380 usable tokens
    qtbot.waitUntil(lambda: meter.state == "warning", timeout=3000)


def test_a_twenty_megabyte_paste_is_shown_over_budget_and_not_sent(
    qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path, llm_server: FakeLLMServer
) -> None:
    window, controller = open_window(qtbot, project_dir)
    qtbot.waitUntil(lambda: window.usage.state != "pending")
    window.composer.set_text("0123456789 " * (20 * 2**20 // 11))
    qtbot.waitUntil(lambda: window.usage.state == "over", timeout=5000)
    controller.send(window.composer.text())
    assert not controller.busy() and not llm_server.requests
    assert "Not sent" in window.composer.hint.text() and "accepts" in window.composer.hint.text()
    assert len(window.composer.text()) > 20_000_000  # the paste is still there, nothing lost
    with Project.open(project_dir, read_only=True) as p:
        assert not p.conversations.load(present(controller.current_id)).messages


def test_a_huge_paste_is_held_aside_and_the_window_stays_responsive(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path) -> None:
    from PySide6.QtCore import QMimeData

    window, controller = open_window(qtbot, project_dir)
    qtbot.keyClicks(window.composer.editor, "see below:")
    data = QMimeData()
    data.setText("log line\n" * 300_000)  # 2.7 MB
    window.composer.editor.insertFromMimeData(data)
    assert window.composer.held_label.isVisible() and "2.6 MB" in window.composer.held_label.text()
    assert window.composer.editor.toPlainText() == "see below:"  # not laid out in the box
    assert window.composer.text().startswith("see below:\n\nlog line\n")
    qtbot.mouseClick(window.composer.held_remove, Qt.MouseButton.LeftButton)
    assert window.composer.text() == "see below:"


def test_a_large_conversation_counted_for_another_model_is_counted_beside_the_window(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Entries counted for another encoding must all be tokenized again: that happens on a
    thread of its own while the meter says so, and the window keeps working."""
    from core.llm.tokens import TokenCounter
    from core.model import ConversationMessage
    from core.store.project import Project
    from tests.helpers.gui import open_window, run_until

    monkeypatch.setenv("WORKBENCH_MODEL", "gpt-4o-mini")  # o200k
    other = TokenCounter.for_model("gpt-4")  # cl100k: the counts on disk are for this one
    with Project.open(project_dir) as p:
        conv = p.conversations.create("big").id
        p.conversations.append_many(conv, [other.with_count(ConversationMessage(
            role="user" if n % 2 == 0 else "assistant", content=f"message {n} " * 20))
            for n in range(3000)])
    window, controller = open_window(qtbot, project_dir)
    controller.show_conversation(conv)
    assert "counting 3,000 entries" in window.usage.text()
    # (the meter's text and its report arrive one after the other: wait for both)
    run_until(qloop, lambda: window.usage.state != "pending"
              and controller.meter.report is not None)
    assert "tokens" in window.usage.text() and controller.meter.report is not None
    assert controller.meter.report.model == "gpt-4o-mini"


def test_a_conversation_removed_by_another_process_is_said_by_the_meter(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path) -> None:
    """The shown conversation's folder goes away behind the window's back (another process,
    a sync tool): the meter says it cannot read it, instead of a traceback and a stale figure."""
    import shutil

    window, controller = open_window(qtbot, project_dir)
    meter = window.usage
    qtbot.waitUntil(lambda: meter.state != "pending")
    conv = controller.current_id
    assert conv is not None and controller.project is not None
    shutil.rmtree(project_dir / ".workbench" / "conversations" / conv)
    controller.refresh_usage()
    qtbot.waitUntil(lambda: "not readable" in meter.text(), timeout=3000)
    assert conv in meter.toolTip()


def test_the_meter_counts_before_the_model_library_is_in(qtbot: QtBot,
                                                         qloop: asyncio.AbstractEventLoop,
                                                         project_dir: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """litellm takes seconds to import; the meter needs only the tokenizer (loaded first), so
    it shows the figures at once, and the status says a message sent now leaves when the
    library is in."""
    import threading

    from core.llm import litellm_loader, runtime
    from core.llm.tokens import get_encoding

    get_encoding("cl100k_base")  # the background import's first step
    # a provider litellm translates (an OpenAI-compatible one never waits for litellm)
    monkeypatch.setenv("WORKBENCH_MODEL", "anthropic/claude-3-5-sonnet-latest")
    monkeypatch.setattr(litellm_loader, "_module", None)  # still importing litellm
    monkeypatch.setattr(runtime, "_threads", {"litellm": threading.Thread(target=lambda: None)})
    window, controller = open_window(qtbot, project_dir)
    meter = window.usage
    qtbot.waitUntil(lambda: "tokens" in meter.text(), timeout=5000)
    assert meter.state == "normal"
    assert "a message sent now leaves as soon as it is in" in window.state_label.text()


def test_an_overflow_caused_by_the_answers_room_is_sent_again_with_less_room(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.helpers.fake_llm import HttpError

    monkeypatch.setenv("WORKBENCH_CONTEXT_WINDOW", "16000")
    monkeypatch.setenv("WORKBENCH_MAX_OUTPUT_TOKENS", "4096")
    window, controller = open_window(qtbot, project_dir)
    # A local server with a small n_ctx: the short conversation fits, the answer's room not.
    llm_server.script(HttpError(400, "This model's maximum context length is 5000 tokens. "
                                     "Please reduce the length of the messages.",
                                code="context_length_exceeded", type="invalid_request_error"),
                      Answer("It fits now."))
    type_and_send(qtbot, window, "hi")
    run_until(qloop, lambda: len(llm_server.requests) == 2 and not controller.busy())
    first, second = (r.body for r in llm_server.requests)
    assert first["messages"] == second["messages"]  # the conversation was not what overflowed
    assert first["max_tokens"] == 4096 and second["max_tokens"] == 2500  # half the limit
    assert [r.text for r in window.transcript_model.rows()] == ["hi", "It fits now."]
    window.close()


def test_the_meter_shows_the_window_a_count_learns_before_the_first_turn(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """llama-cpp-python with --n_ctx 2048 states no window: the meter and the Inspector
    counted against the 8,192 assumed until a turn was refused. Opening the conversation asks
    the server once (on the engine's thread) to count a prompt over 8,192 tokens; its refusal
    names 2,048, and the meter shows it before anything is sent."""
    from core.model import ConversationMessage

    monkeypatch.delenv("WORKBENCH_CONTEXT_WINDOW")
    llm_server.llama_cpp_python, llm_server.n_ctx = True, 2048
    with Project.open(project_dir, create=True) as project:
        conv = project.conversations.create("notes").id
        project.conversations.append_many(conv, [ConversationMessage(role="user", content="hi")])
    window, controller = open_window(qtbot, project_dir)
    meter = controller.meter
    run_until(qloop, lambda: meter.report is not None and meter.report.window == 2048)
    assert meter.report is not None and meter.report.budget_source == "provider"
    assert llm_server.probes.count("count:window") == 1 and llm_server.requests == []
    assert "2,048" in window.usage.toolTip()
    window.close()

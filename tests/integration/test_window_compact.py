"""Summaries in the window: the automatic one after a turn above the trigger, `/compact
[focus]`, a failing summarizer, all against the loopback server on the offscreen platform."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.window.compaction_flow import CompactionFlow
from app.window.controller import Controller
from core.engine import CompactionFinished
from core.llm import compat
from core.llm.runtime import load_litellm
from core.llm.tokens import TokenCounter
from core.store.project import Project
from tests.helpers.fake_llm import (
    MODEL,
    Answer,
    FakeLLMServer,
    HttpError,
    RecordedRequest,
    summary_text,
)
from tests.helpers.gui import open_window, run_until, type_and_send, use_fake_provider
from tests.helpers.present import present
from tests.helpers.trajectories import agent_session_project
from ui.main_window import MainWindow
from ui.transcript_model import Row, RowKind
from ui.transcript_text import header_line

pytestmark = pytest.mark.gui
COUNTER = TokenCounter("o200k_base")
SUMMARY = summary_text("Parsers keep line numbers.")


@pytest.fixture(autouse=True)
def provider(monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer) -> FakeLLMServer:
    load_litellm()
    use_fake_provider(monkeypatch, llm_server, context_window="16000",
                      max_output_tokens="800")
    # a summary model with a large window (the server says so), so one call reads it all
    monkeypatch.setenv("WORKBENCH_SUMMARY_MODEL", "openai/summary-model")
    llm_server.info["/v1/models"] = {"data": [{"id": "summary-model", "max_model_len": 128_000}]}
    return llm_server


def long_session(project_dir: Path) -> str:
    return agent_session_project(project_dir, 12, 4, "long session")


def manual_session(qtbot: QtBot, project_dir: Path,
                   monkeypatch: pytest.MonkeyPatch) -> tuple[str, MainWindow, Controller]:
    """The window on a long session, automatic summaries off: summaries only on request."""
    monkeypatch.setenv("WORKBENCH_AUTO_SUMMARY", "0")
    conv = long_session(project_dir)
    window, controller = open_window(qtbot, project_dir)
    controller.show_conversation(conv)
    return conv, window, controller


def finished_events(flow: CompactionFlow) -> list[CompactionFinished]:
    seen: list[CompactionFinished] = []
    flow.finished.connect(seen.append)
    return seen


def test_a_turn_above_the_trigger_prepares_a_summary_the_next_request_uses(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer) -> None:
    conv = long_session(project_dir)
    window, controller = open_window(qtbot, project_dir)
    controller.show_conversation(conv)
    done = finished_events(controller.compaction)
    notices: list[str] = []
    controller.compaction.bridge.engine_event.connect(
        lambda _e: notices.append(window.notice_label.text()))  # after the flow showed it
    llm_server.script(Answer("next answer"), Answer(SUMMARY, usage=(9000, 60)))
    type_and_send(qtbot, window, "carry on")
    run_until(qloop, lambda: not controller.busy())
    run_until(qloop, lambda: bool(done))
    assert any(n.startswith("Preparing a summary in the background") and
               "openai/summary-model" in n for n in notices)
    assert done[0].status == "ok" and done[0].automatic and done[0].freed > 0
    assert "Automatic summary: Summarized" in window.notice_label.text()
    assert f" {done[0].tokens_after:,}-token summary" in window.notice_label.text()
    assert window.notice.property("kind") == "info"  # a success is not shown as a problem
    summarizer = llm_server.requests[1].body
    assert summarizer["model"] == "summary-model"
    assert "## User intent" in summarizer["messages"][0]["content"]
    # the summary is a row of the transcript, and in the log
    model = window.transcript_model
    title, meta = header_line(model.row(model.rowCount() - 1))
    assert title == f"∑ {done[0].covered:,} earlier entries summarized"  # no other figure
    assert "openai/summary-model" in meta
    with Project.open(project_dir, read_only=True) as p:
        kinds = [m.kind for m in p.conversations.load(conv).messages]
        assert kinds.count("summary") == 1
    # the next request carries the summary in place of the entries it covers
    llm_server.script(Answer("third"))
    run_until(qloop, lambda: not controller.compaction.running())
    type_and_send(qtbot, window, "and now?")
    run_until(qloop, lambda: not controller.busy())
    sent = llm_server.requests[-1].body["messages"]
    text = "\n".join(str(m.get("content")) for m in sent)
    assert "Parsers keep line numbers." in text and "Task 0: the parser" not in text
    assert len(done) == 1 or done[1].status == "skipped"  # at most one summary per turn


def test_slash_compact_with_a_focus_summarizes_without_sending_a_message(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    conv, window, controller = manual_session(qtbot, project_dir, monkeypatch)
    done = finished_events(controller.compaction)
    llm_server.script(Answer(SUMMARY))
    type_and_send(qtbot, window, "/compact keep the API rule")
    run_until(qloop, lambda: bool(done))
    assert done[0].status == "ok" and not done[0].automatic
    assert window.composer.text() == ""
    read = llm_server.requests[0].body["messages"][1]["content"]
    assert "focus on: keep the API rule" in read
    with Project.open(project_dir, read_only=True) as p:
        messages = p.conversations.load(conv).messages
        assert not any(m.role == "user" and "/compact" in m.text() for m in messages)
        assert messages[-1].kind == "summary"


def test_a_failing_summarizer_says_so_and_changes_nothing(qtbot: QtBot,
                                                          qloop: asyncio.AbstractEventLoop,
                                                          project_dir: Path,
                                                          llm_server: FakeLLMServer,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_AUTO_SUMMARY", "0")
    conv = long_session(project_dir)
    before = (project_dir / ".workbench" / "conversations" / conv / "messages.jsonl").read_bytes()
    window, controller = open_window(qtbot, project_dir)
    controller.show_conversation(conv)
    done = finished_events(controller.compaction)
    rows = window.transcript_model.rowCount()
    llm_server.script(HttpError(500))
    controller.compaction.compact_with("")
    run_until(qloop, lambda: bool(done))
    assert done[0].status == "failed"
    assert "The summary failed" in window.notice_label.text()
    assert "Nothing was changed" in window.notice_label.text()
    assert window.transcript_model.rowCount() == rows
    after = (project_dir / ".workbench" / "conversations" / conv / "messages.jsonl").read_bytes()
    assert after == before


def test_a_failing_automatic_summary_is_said_once_and_waits_for_the_log_to_grow(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    import app.window.compaction_flow

    monkeypatch.setattr(app.window.compaction_flow, "AUTO_RETRY_ROWS", 4)  # two turns, not ten
    conv = long_session(project_dir)
    window, controller = open_window(qtbot, project_dir)
    controller.show_conversation(conv)
    done = finished_events(controller.compaction)

    def turn(text: str) -> None:
        type_and_send(qtbot, window, text)
        run_until(qloop, lambda: not controller.busy())

    llm_server.script(Answer("next answer"), HttpError(500))
    turn("carry on")
    run_until(qloop, lambda: bool(done))
    assert done[0].status == "failed" and done[0].automatic
    assert "Automatic summary: The summary failed" in window.notice_label.text()
    window.set_notice(None)  # the user has read it
    llm_server.script(Answer("second"))
    turn("go on")  # the log grew by one round only: no new try
    assert not controller.compaction.running() and len(llm_server.requests) == 3
    llm_server.script(Answer("third"), HttpError(500))
    turn("and on")  # grown enough: tried again, and failing again it is not said again
    run_until(qloop, lambda: len(done) == 2)
    assert done[1].status == "failed" and len(llm_server.requests) == 5
    assert not window.notice.isVisible()
    llm_server.script(Answer("fourth"))
    turn("more")  # the next try waits twice as long
    assert not controller.compaction.running() and len(llm_server.requests) == 6
    # Compact now works at any time, and says how it went
    llm_server.script(Answer(SUMMARY))
    assert controller.compaction.compact_with("")
    run_until(qloop, lambda: len(done) == 3)
    assert done[2].status == "ok" and "Summarized" in window.notice_label.text()


def test_compact_from_the_inspector_with_a_focus_and_undo_it_there(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    conv, window, controller = manual_session(qtbot, project_dir, monkeypatch)
    panel = window.inspector
    window.inspector_action.trigger()
    done = finished_events(controller.compaction)
    llm_server.script(Answer(SUMMARY))
    qtbot.keyClicks(panel.focus, "the file list")
    panel.compact.click()
    assert not panel.compact.isEnabled() and panel.compact.text() == "Summarizing…"
    run_until(qloop, lambda: bool(done) and panel.compact.isEnabled())
    assert done[0].status == "ok"
    assert "focus on: the file list" in llm_server.requests[0].body["messages"][1]["content"]
    qtbot.waitUntil(lambda: panel.history.count() == 1
                    and "entries" in panel.history.item(0).text(), timeout=5000)
    assert any(r[2] == "summarized" for r in panel.rows())
    panel.history.setCurrentRow(0)
    panel.undo.click()
    qtbot.waitUntil(lambda: not any(r[2] == "summarized" for r in panel.rows()), timeout=5000)


def test_a_summary_that_lands_while_an_answer_streams_sits_before_it_and_the_text_stays(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # a provider that takes two requests at once (a local server waits: the test below)
    compat.seed(llm_server.url, MODEL, {"one_at_a_time": False})
    conv, window, controller = manual_session(qtbot, project_dir, monkeypatch)
    model = window.transcript_model
    done = finished_events(controller.compaction)
    answer = "".join(f"word{i} " for i in range(120))
    llm_server.script(Answer(answer, delay=0.04), Answer(SUMMARY))
    type_and_send(qtbot, window, "carry on")
    qtbot.waitUntil(lambda: (model.streaming_row() or Row(RowKind.USER, "")).text
                    .startswith("word0 word1"), timeout=20_000)
    assert controller.compaction.compact_with("")
    qtbot.waitUntil(lambda: bool(done), timeout=20_000)
    assert done[0].status == "ok"
    assert controller.busy(), "the answer should still be streaming"
    model.flush_stream()
    last = model.row(model.rowCount() - 1)
    assert last.kind is RowKind.STREAMING and last.text.startswith("word0 word1")
    before = model.row(model.rowCount() - 2)
    assert before.message is not None and before.message.kind == "summary"
    qtbot.waitUntil(lambda: not controller.busy(), timeout=20_000)
    texts = [model.row(i).text for i in range(model.rowCount())]
    assert texts[-1] == answer.strip() or texts[-1] == answer
    assert present(model.row(model.rowCount() - 2).message).kind == "summary"


def test_a_compact_during_a_send_to_llama_cpp_python_cuts_neither(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """llama-cpp-python ends a running request when another arrives. With tools offered it
    does not stream: the answer is asked whole and takes its time. A /compact meanwhile waits
    its turn behind the answer, and both are whole."""
    llm_server.llama_cpp_python = True
    conv, window, controller = manual_session(qtbot, project_dir, monkeypatch)
    done = finished_events(controller.compaction)
    answer = "".join(f"word{i} " for i in range(120))
    thinking = 1.5  # the server generates the whole answer before it sends a byte
    llm_server.script(Answer(answer, first_delay=thinking), Answer(SUMMARY))

    def asked_whole() -> list[RecordedRequest]:
        return [r for r in llm_server.requests if not r.body.get("stream")]

    type_and_send(qtbot, window, "carry on")
    qtbot.waitUntil(lambda: bool(asked_whole()) and controller.busy(), timeout=20_000)
    assert controller.compaction.compact_with("")
    qtbot.waitUntil(lambda: bool(done) and not controller.busy(), timeout=30_000)
    assert done[0].status == "ok" and llm_server.cut_streams == 0
    model = window.transcript_model
    texts = [model.row(i).text for i in range(model.rowCount())]
    assert answer.strip() in [t.strip() for t in texts]
    answered, summary = asked_whole()[0], llm_server.requests[-1]
    assert summary is not answered and summary.arrived >= answered.arrived + thinking, \
        "the summary was asked while the answer was still being generated"

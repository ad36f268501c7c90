"""Agent mode in the window: live tool cards, the approval prompt, the todo list, the agent
picker, full outputs. Real engine thread, real loopback server, real files."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.window.controller import Controller
from core.store.project import Project
from core.tools.runner import ALLOW_CONVERSATION, ALLOW_ONCE, DENY
from tests.helpers.fake_llm import Answer, FakeLLMServer, ToolCalls
from tests.helpers.gui import open_window, run_until, type_and_send, use_fake_provider
from tests.helpers.present import present
from ui.approval_dialog import ApprovalDialog
from ui.main_window import MainWindow
from ui.output_viewer import OutputViewer
from ui.row_paint import Layout
from ui.transcript_model import Row, RowKind
from ui.transcript_text import header_line

pytestmark = pytest.mark.gui


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer) -> FakeLLMServer:
    return use_fake_provider(monkeypatch, llm_server)


@pytest.fixture
def project(project_dir: Path) -> Path:
    project_dir.mkdir(parents=True, exist_ok=True)
    (project_dir / "notes.md").write_text("# Notes\n")
    return project_dir


def approval(window: MainWindow) -> ApprovalDialog | None:
    found = [d for d in window.findChildren(ApprovalDialog) if d.isVisible()]
    return found[0] if found else None


def cards(window: MainWindow) -> list[Row]:
    return [r for r in window.transcript_model.rows() if r.kind is RowKind.TOOL]


def agent_window(qtbot: QtBot, project: Path) -> tuple[MainWindow, Controller]:
    window, controller = open_window(qtbot, project)
    qtbot.mouseClick(window.mode_switcher.buttons["agent"], Qt.MouseButton.LeftButton)
    assert window.mode_switcher.mode() == "agent"
    return window, controller


def test_escape_in_the_prompt_denies(qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project: Path,
                                     provider: FakeLLMServer) -> None:
    provider.script(ToolCalls([("w", "write_file", '{"path": "x.txt", "content": "x"}')]),
                    Answer("ok"))
    window, controller = agent_window(qtbot, project)
    type_and_send(qtbot, window, "write x")
    run_until(qloop, lambda: approval(window) is not None)
    qtbot.keyClick(approval(window), Qt.Key.Key_Escape)
    run_until(qloop, lambda: not controller.busy())
    assert not (project / "x.txt").exists() and present(cards(window)[0].result).status == "denied"


def test_a_write_asks_with_its_diff_and_runs_once_allowed(qtbot: QtBot,
                                                          qloop: asyncio.AbstractEventLoop,
                                                          project: Path,
                                                          provider: FakeLLMServer) -> None:
    provider.script(ToolCalls([("w", "edit_file", json.dumps(
        {"path": "notes.md", "old": "# Notes\n", "new": "# Notes\nShip it.\n"}))]),
        Answer("Added the line."))
    window, controller = agent_window(qtbot, project)
    type_and_send(qtbot, window, "add a line")
    run_until(qloop, lambda: approval(window) is not None)
    dialog = approval(window)
    assert dialog is not None and dialog.title.text() == "Allow edit_file?"
    diff = dialog.detail.toPlainText()
    assert "+Ship it." in diff and "--- a/notes.md" in diff
    assert (project / "notes.md").read_text() == "# Notes\n"  # nothing before the answer
    assert window.transcript_model.rows()[-1].kind is RowKind.TOOL  # the card is on screen
    qtbot.mouseClick(dialog.buttons[ALLOW_ONCE], Qt.MouseButton.LeftButton)
    run_until(qloop, lambda: not controller.busy())
    assert (project / "notes.md").read_text() == "# Notes\nShip it.\n"
    card = cards(window)[0]
    assert card.result is not None and card.result.approval == "once"
    assert header_line(card)[1].startswith("✓ done")
    assert window.transcript_model.rows()[-1].text == "Added the line."


def test_deny_with_a_reason_reaches_the_model_and_writes_nothing(qtbot: QtBot,
                                                                 qloop: asyncio.AbstractEventLoop,
                                                                 project: Path,
                                                                 provider: FakeLLMServer) -> None:
    provider.script(ToolCalls([("w", "write_file", '{"path": "x.txt", "content": "x"}')]),
                    Answer("Understood, I will not."))
    window, controller = agent_window(qtbot, project)
    type_and_send(qtbot, window, "write x")
    run_until(qloop, lambda: approval(window) is not None)
    dialog = approval(window)
    assert dialog is not None
    qtbot.keyClicks(dialog.reason, "not in this folder")
    qtbot.mouseClick(dialog.buttons[DENY], Qt.MouseButton.LeftButton)
    run_until(qloop, lambda: not controller.busy())
    assert not (project / "x.txt").exists()
    sent = [m for m in provider.requests[1].body["messages"] if m["role"] == "tool"]
    assert "not in this folder" in sent[0]["content"]
    assert header_line(cards(window)[0])[1].startswith("✕ denied")


def test_a_running_command_shows_a_live_card_and_the_window_stays_responsive(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project: Path,
        provider: FakeLLMServer) -> None:
    provider.script(ToolCalls([("s", "run_shell", '{"command": "sleep 1.5; echo finished"}')]),
                    Answer("It finished."))
    window, controller = agent_window(qtbot, project)
    type_and_send(qtbot, window, "wait a bit")
    run_until(qloop, lambda: approval(window) is not None)
    dialog = approval(window)
    assert dialog is not None and "$ sleep 1.5; echo finished" in dialog.detail.toPlainText()
    assert "Protection:" in dialog.detail.toPlainText()
    qtbot.mouseClick(dialog.buttons[ALLOW_CONVERSATION], Qt.MouseButton.LeftButton)
    run_until(qloop, lambda: bool(cards(window)) and cards(window)[0].running_since is not None)
    assert "running" in header_line(cards(window)[0])[1]
    window.composer.editor.setFocus()  # typing while the tool runs
    qtbot.keyClicks(window.composer.editor, "next question")
    assert window.composer.text() == "next question"
    run_until(qloop, lambda: not controller.busy())
    card = cards(window)[0]
    assert card.running_since is None and "exit 0" in header_line(card)[1]
    assert card.result is not None
    assert "finished" in card.result.text()


def test_stop_while_approval_is_pending_closes_the_prompt_and_records_aborted(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project: Path,
        provider: FakeLLMServer) -> None:
    provider.script(ToolCalls([("w", "write_file", '{"path": "x.txt", "content": "x"}')]))
    window, controller = agent_window(qtbot, project)
    type_and_send(qtbot, window, "write x")
    run_until(qloop, lambda: approval(window) is not None)
    assert window.composer.stop_button.isVisible()
    qtbot.mouseClick(window.composer.stop_button, Qt.MouseButton.LeftButton)
    run_until(qloop, lambda: not controller.busy())
    assert approval(window) is None and not (project / "x.txt").exists()
    assert (card := cards(window)[0]).result is not None and card.result.status == "aborted"


def test_the_todo_list_shows_while_the_agent_works(qtbot: QtBot, qloop: asyncio.AbstractEventLoop,
                                                   project: Path, provider: FakeLLMServer) -> None:
    provider.script(
        ToolCalls([("t1", "manage_todo_list",
                    '{"action": "set", "items": ["Read notes", "Write summary"]}')]),
        ToolCalls([("t2", "manage_todo_list", '{"action": "complete", "number": 1}')]),
        Answer("Half done."))
    window, controller = agent_window(qtbot, project)
    type_and_send(qtbot, window, "plan it")
    run_until(qloop, lambda: not controller.busy())
    assert window.todo.isVisible()
    assert "1 of 2 done" in window.todo.text() and "Write summary" in window.todo.text()
    controller.new_conversation()  # another conversation has no plan
    assert not window.todo.isVisible()


def test_an_offloaded_output_opens_from_disk(qtbot: QtBot, qloop: asyncio.AbstractEventLoop,
                                             project: Path, provider: FakeLLMServer) -> None:
    provider.script(ToolCalls([("big", "run_shell", '{"command": "seq 1 100000"}')]),
                    Answer("Long."))
    window, controller = agent_window(qtbot, project)
    type_and_send(qtbot, window, "count")
    run_until(qloop, lambda: approval(window) is not None)
    qtbot.mouseClick(present(approval(window)).buttons[ALLOW_ONCE], Qt.MouseButton.LeftButton)
    run_until(qloop, lambda: not controller.busy())
    index = next(i for i, r in enumerate(window.transcript_model.rows())
                 if r.kind is RowKind.TOOL)
    assert "on disk" in header_line(cards(window)[0])[1]
    controller.turns.on_action(index, "open_output")
    viewers = [v for v in window.findChildren(OutputViewer) if v.isVisible()]
    assert viewers and viewers[0].view.toPlainText().splitlines()[-1] == "100000"


def test_the_agent_picker_lists_project_agents_and_shapes_the_request(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project: Path,
        provider: FakeLLMServer) -> None:
    agents = project / ".workbench" / "agents"
    agents.mkdir(parents=True)
    (agents / "reviewer.json").write_text(json.dumps({
        "name": "Reviewer", "instructions": "You review; you never change files.",
        "tools": ["read_file", "search_files"]}))
    (agents / "broken.json").write_text("{ not json")
    provider.script(Answer("Looks fine."))
    window, controller = agent_window(qtbot, project)
    box = window.mode_switcher.agent_box
    assert [box.itemText(i) for i in range(box.count())] == ["Default", "Reviewer"]
    assert "broken.json" in window.notice_label.text()
    box.setCurrentIndex(1)
    box.activated.emit(1)
    type_and_send(qtbot, window, "review notes")
    run_until(qloop, lambda: not controller.busy())
    body = provider.requests[0].body
    assert "You review; you never change files." in body["messages"][0]["content"]
    assert [t["function"]["name"] for t in body["tools"]] == ["read_file", "search_files"]
    with Project.open(project, read_only=True) as p:
        assert p.conversations.meta(present(controller.current_id)).agent == "Reviewer"


def test_the_network_switch_is_kept_per_conversation(qtbot: QtBot, qloop: asyncio.AbstractEventLoop,
                                                     project: Path,
                                                     provider: FakeLLMServer) -> None:
    window, controller = agent_window(qtbot, project)
    switch = window.mode_switcher.network
    if not switch.isVisibleTo(window):
        pytest.skip("no sandbox here: commands have the network anyway")
    first = controller.current_id
    assert first is not None
    qtbot.mouseClick(switch, Qt.MouseButton.LeftButton)
    assert switch.isChecked()
    controller.new_conversation()
    assert not switch.isChecked()  # a new conversation starts offline
    controller.show_conversation(first)
    assert switch.isChecked()
    with Project.open(project, read_only=True) as p:
        assert p.conversations.meta(first).allow_network


def test_a_call_left_running_by_a_crash_reopens_as_aborted(qtbot: QtBot,
                                                           qloop: asyncio.AbstractEventLoop,
                                                           project: Path) -> None:
    from core.model import ConversationMessage, FunctionCall, ToolCall

    with Project.open(project) as p:
        conv = p.conversations.create("crashed").id
        p.conversations.append(conv, ConversationMessage(role="user", content="build it"))
        p.conversations.append(conv, ConversationMessage(role="assistant", tool_calls=[
            ToolCall(id="make", function=FunctionCall(name="run_shell",
                                                      arguments='{"command": "make"}'))]))
    window, controller = open_window(qtbot, project)
    controller.show_conversation(conv)
    card = cards(window)[0]
    assert card.result is not None and card.result.status == "aborted"
    assert header_line(card)[1].startswith("⊘ aborted") and "app closed" in card.result.text()
    with Project.open(project, read_only=True) as p:  # written once, in the log
        assert [m.role for m in p.conversations.load(conv).messages] == [
            "user", "assistant", "tool"]


def test_the_step_limit_pauses_with_continue_and_continue_goes_on(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project: Path, provider: FakeLLMServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_STEP_LIMIT", "1")
    provider.script(ToolCalls([("r", "read_file", '{"path": "notes.md"}')]))
    window, controller = agent_window(qtbot, project)
    type_and_send(qtbot, window, "read the notes")
    run_until(qloop, lambda: not controller.busy())
    rows = window.transcript_model.rows()
    last = rows[-1]
    assert last.message is not None and last.message.error is not None
    assert last.kind is RowKind.ERROR and "paused after 1 round" in last.message.error.message
    layout = window.transcript.delegate.layout(last, window.transcript.viewport().width(),
                                               window.transcript.font())
    assert ("continue", "Continue") in layout.actions
    provider.script(Answer("The notes are empty."))
    controller.turns.on_action(len(rows) - 1, "continue")
    run_until(qloop, lambda: not controller.busy())
    assert window.transcript_model.rows()[-1].text == "The notes are empty."
    sent = provider.requests[-1].body["messages"]
    assert sent[-1]["role"] == "tool" and "# Notes" in sent[-1]["content"]


def test_after_stop_during_a_tool_the_last_card_offers_continue(qtbot: QtBot,
                                                                qloop: asyncio.AbstractEventLoop,
                                                                project: Path,
                                                                provider: FakeLLMServer) -> None:
    provider.script(ToolCalls([("s", "run_shell", '{"command": "sleep 30", "timeout": 60}')]))
    window, controller = agent_window(qtbot, project)
    type_and_send(qtbot, window, "wait")
    run_until(qloop, lambda: approval(window) is not None)
    dialog = approval(window)
    assert dialog is not None

    def lay(r: Row) -> Layout:
        return window.transcript.delegate.layout(
            r, window.transcript.viewport().width(), window.transcript.font())

    qtbot.mouseClick(dialog.buttons[ALLOW_ONCE], Qt.MouseButton.LeftButton)
    run_until(qloop, lambda: bool(cards(window)) and cards(window)[0].running_since is not None)
    assert ("continue", "Continue the agent") not in lay(cards(window)[0]).actions
    qtbot.mouseClick(window.composer.stop_button, Qt.MouseButton.LeftButton)
    run_until(qloop, lambda: not controller.busy())
    rows = window.transcript_model.rows()
    assert rows[-1].result is not None
    assert rows[-1].kind is RowKind.TOOL and rows[-1].result.status == "aborted"
    assert ("continue", "Continue the agent") in lay(rows[-1]).actions
    provider.script(Answer("The command was stopped; nothing else to do."))
    controller.turns.on_action(len(rows) - 1, "continue")
    run_until(qloop, lambda: not controller.busy())
    assert window.transcript_model.rows()[-1].text.startswith("The command was stopped")
    assert provider.requests[-1].body["messages"][-1]["role"] == "tool"


def test_an_offloaded_output_made_a_fifo_is_not_opened_and_the_window_goes_on(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project: Path, provider: FakeLLMServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    provider.script(ToolCalls([("big", "run_shell", '{"command": "seq 1 100000"}')]),
                    Answer("Long."))
    window, controller = agent_window(qtbot, project)
    type_and_send(qtbot, window, "count")
    run_until(qloop, lambda: approval(window) is not None)
    qtbot.mouseClick(present(approval(window)).buttons[ALLOW_ONCE], Qt.MouseButton.LeftButton)
    run_until(qloop, lambda: not controller.busy())
    index = next(i for i, r in enumerate(window.transcript_model.rows())
                 if r.kind is RowKind.TOOL)
    kept = next((project / ".workbench" / "tool-results").rglob("*.txt"))
    kept.unlink()
    os.mkfifo(kept)  # a folder from elsewhere can hold one; opening it blocked the window
    said: list[str] = []
    monkeypatch.setattr(window, "show_warning", lambda title, text: said.append(text))
    controller.turns.on_action(index, "open_output")
    assert said and "is a named pipe (FIFO), not a file" in said[0]

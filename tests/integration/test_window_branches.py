"""Branches from the window: Regenerate (Ctrl+Shift+R), Edit and resend, Fork from here, the
version navigator where branches part, and the list with branches under their origin."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from core.llm.runtime import load_litellm
from tests.helpers.fake_llm import Answer, FakeLLMServer
from tests.helpers.gui import open_window, run_until, type_and_send, use_fake_provider
from tests.helpers.present import present
from ui.main_window import MainWindow

pytestmark = pytest.mark.gui


@pytest.fixture(autouse=True)
def provider(monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer) -> FakeLLMServer:
    load_litellm()
    return use_fake_provider(monkeypatch, llm_server, context_window="100000",
                             auto_summary="0")


def checksum(project: Path, conv: str) -> str:
    path = project / ".workbench" / "conversations" / conv / "messages.jsonl"
    return hashlib.sha256(path.read_bytes()).hexdigest()


def texts(window: MainWindow) -> list[str]:
    return [r.text for r in window.transcript_model.rows()]


def versions(window: MainWindow) -> dict[str, tuple[int, int]]:
    return {r.text: r.versions for r in window.transcript_model.rows() if r.versions}


def test_regenerate_edit_and_versions(qtbot: QtBot, qloop: asyncio.AbstractEventLoop,
                                      project_dir: Path, llm_server: FakeLLMServer) -> None:
    window, controller = open_window(qtbot, project_dir)
    llm_server.script(Answer("Paris."), Answer("About 2.1 million."))
    type_and_send(qtbot, window, "Capital of France?")
    run_until(qloop, lambda: not controller.busy())
    type_and_send(qtbot, window, "How many people live there?")
    run_until(qloop, lambda: not controller.busy())
    original = controller.current_id
    assert original is not None
    saved = checksum(project_dir, original)

    # Regenerate the last answer: a branch at the question, asked again with the same request.
    llm_server.script(Answer("About 2.2 million."))
    window.regenerate_action.trigger()
    run_until(qloop, lambda: len(llm_server.requests) == 3 and not controller.busy())
    regenerated = controller.current_id
    assert regenerated != original
    assert llm_server.requests[2].raw == llm_server.requests[1].raw
    assert texts(window) == ["Capital of France?", "Paris.", "How many people live there?",
                             "About 2.2 million."]
    assert versions(window) == {"About 2.2 million.": (2, 2)}
    assert checksum(project_dir, original) == saved

    # ‹ goes back to the original, where the same row says version 1 of 2.
    row = next(i for i, r in enumerate(window.transcript_model.rows()) if r.versions)
    window.transcript.action_requested.emit(row, "version_prev")
    assert controller.current_id == original
    assert versions(window) == {"About 2.1 million.": (1, 2)}

    # Edit and resend the second question: the box holds it, sending branches before it.
    question = next(r.message for r in window.transcript_model.rows()
                    if r.text == "How many people live there?")
    assert question is not None
    window.composer.set_text("a draft of mine")
    window.transcript.branch_action.emit(question.id, "edit")
    assert window.composer.text() == "How many people live there?"
    assert window.composer.editing()
    qtbot.keyClick(window.composer.editor, Qt.Key.Key_Escape)  # Esc gives up the edit ...
    assert not window.composer.editing() and window.composer.text() == "a draft of mine"
    window.transcript.branch_action.emit(question.id, "edit")  # ... and again, for real
    window.composer.set_text("")
    llm_server.script(Answer("The Seine."))
    type_and_send(qtbot, window, "Which river runs through it?")
    run_until(qloop, lambda: len(llm_server.requests) == 4 and not controller.busy())
    edited = controller.current_id
    assert edited not in (original, regenerated)
    assert texts(window) == ["Capital of France?", "Paris.", "Which river runs through it?",
                             "The Seine."]
    sent = llm_server.requests[3].body["messages"]
    assert sent[:-1] == llm_server.requests[1].body["messages"][:-1]
    assert sent[-1]["content"] == "Which river runs through it?"
    assert versions(window) == {"Which river runs through it?": (2, 2)}
    assert checksum(project_dir, original) == saved
    assert not window.composer.editing()

    # The list: one conversation at the top, its two branches under it.
    tree = window.conversations.list
    assert tree.topLevelItemCount() == 1
    assert present(tree.topLevelItem(0)).childCount() == 2
    assert set(window.conversations.ids()) == {original, regenerated, edited}

    # The original shows where each branch parted from it.
    window.conversations.select(original)
    assert versions(window) == {"How many people live there?": (1, 2),
                                "About 2.1 million.": (1, 2)}
    window.close()


def test_fork_from_here_keeps_the_history_up_to_that_row(qtbot: QtBot,
                                                         qloop: asyncio.AbstractEventLoop,
                                                         project_dir: Path,
                                                         llm_server: FakeLLMServer) -> None:
    window, controller = open_window(qtbot, project_dir)
    llm_server.script(Answer("One."), Answer("Two."))
    type_and_send(qtbot, window, "first")
    run_until(qloop, lambda: not controller.busy())
    type_and_send(qtbot, window, "second")
    run_until(qloop, lambda: not controller.busy())
    original = controller.current_id
    first_answer = window.transcript_model.row(1).message
    assert first_answer is not None
    window.transcript.branch_action.emit(first_answer.id, "fork")
    assert controller.current_id != original
    assert texts(window) == ["first", "One."]
    assert "new branch" in window.notice_label.text()
    llm_server.script(Answer("Another two."))
    type_and_send(qtbot, window, "another second")
    run_until(qloop, lambda: not controller.busy())
    assert texts(window) == ["first", "One.", "another second", "Another two."]
    window.close()
    window2, controller2 = open_window(qtbot, project_dir)  # reopens on the branch
    assert texts(window2) == ["first", "One.", "another second", "Another two."]
    assert versions(window2) == {"another second": (2, 2)}


def test_fork_at_a_tool_card_keeps_the_whole_batch_and_its_results(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer) -> None:
    from tests.integration.test_branch_batches import batch_session
    from ui.transcript_model import RowKind

    conv, _ = batch_session(project_dir)
    window, controller = open_window(qtbot, project_dir)
    assert controller.current_id == conv
    card = next(r for r in window.transcript_model.rows()
                if r.kind is RowKind.TOOL and r.call is not None and r.call.id == "c1")
    assert card.result is not None
    window.transcript.branch_action.emit(card.result.id, "fork")  # what the card's menu emits
    assert controller.current_id != conv
    llm_server.script(Answer("Nothing is left."))
    type_and_send(qtbot, window, "what is left in build/?")
    run_until(qloop, lambda: len(llm_server.requests) == 1 and not controller.busy())
    sent = {m.get("tool_call_id"): m["content"] for m in llm_server.requests[0].body["messages"]
            if m["role"] == "tool"}
    assert sent == {"c1": "[exit code 0]\nout.o", "c2": "[exit code 0]\n(no output)"}
    window.close()


def test_regenerate_in_chat_mode_after_tool_calls_keeps_the_calls_and_results(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer) -> None:
    from tests.integration.test_branch_batches import batch_session

    conv, msgs = batch_session(project_dir)
    window, controller = open_window(qtbot, project_dir)
    assert controller.current_id == conv
    llm_server.script(Answer("build/ is gone."))
    window.transcript.branch_action.emit(msgs[-1].id, "regenerate:chat")
    run_until(qloop, lambda: len(llm_server.requests) == 1 and not controller.busy())
    sent = llm_server.requests[0].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool"]
    assert [m["content"] for m in sent[3:]] == ["[exit code 0]\nout.o",
                                                "[exit code 0]\n(no output)"]
    assert controller.mode() == "chat" and texts(window)[-1] == "build/ is gone."
    window.close()


def test_regenerate_with_another_saved_provider_or_in_agent_mode(qtbot: QtBot,
                                                                 qloop: asyncio.AbstractEventLoop,
                                                                 project_dir: Path,
                                                                 llm_server: FakeLLMServer) -> None:
    from core.settings import GlobalSettings, ProviderEntry, SettingsStore

    store = SettingsStore()
    store.save(GlobalSettings(providers=[ProviderEntry(name="Other", model="openai/other-model",
                                                       api_base=llm_server.url)]))
    window, controller = open_window(qtbot, project_dir)
    llm_server.script(Answer("Blue."), Answer("Azure."), Answer("Cerulean."))
    type_and_send(qtbot, window, "Colour of the sky?")
    run_until(qloop, lambda: not controller.busy())
    original = controller.current_id
    answer = window.transcript_model.row(1).message
    assert original is not None and answer is not None
    assert window.transcript.regenerate_with == [("Other: openai/other-model", "Other")]
    window.transcript.branch_action.emit(answer.id, "regenerate@Other")
    run_until(qloop, lambda: len(llm_server.requests) == 2 and not controller.busy())
    assert llm_server.requests[1].body["model"] == "other-model"
    assert texts(window) == ["Colour of the sky?", "Azure."]
    assert present(window.transcript_model.row(1).message).model == "openai/other-model"

    window.conversations.select(original)
    window.transcript.branch_action.emit(answer.id, "regenerate:agent")
    run_until(qloop, lambda: len(llm_server.requests) == 3 and not controller.busy())
    assert controller.mode() == "agent" and texts(window)[-1] == "Cerulean."
    assert "Mode: agent" in llm_server.requests[2].body["messages"][0]["content"]
    window.conversations.select(original)
    assert versions(window) == {"Blue.": (1, 3)} and controller.mode() == "chat"
    window.close()

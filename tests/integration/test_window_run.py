"""Run mode in the window: the run panel starts a workflow, follows it step by step, steers it
(pause, resume, skip, redo, abort) and shows a run interrupted earlier where it was. Real engine
thread, loopback server, files on disk."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.window.controller import Controller
from core.store.project import Project
from tests.helpers.fake_llm import Answer, FakeLLMServer, HttpError
from tests.helpers.gui import open_window, run_until, type_and_send, use_fake_provider
from tests.helpers.present import present
from tests.integration.test_run import BRIEFS, WORKFLOW, complete
from ui.main_window import MainWindow
from ui.transcript_model import Row
from ui.transcript_text import header_line

pytestmark = pytest.mark.gui


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer) -> FakeLLMServer:
    return use_fake_provider(monkeypatch, llm_server)


@pytest.fixture
def project(project_dir: Path) -> Path:
    folder = project_dir / ".workbench" / "workflows"
    folder.mkdir(parents=True)
    (folder / "release-notes.json").write_text(json.dumps(WORKFLOW))
    return project_dir


def panel_steps(window: MainWindow) -> list[str]:
    tree = window.run_panel.steps
    return [present(tree.topLevelItem(i)).text(0) for i in range(tree.topLevelItemCount())]


def answer_box(qloop: asyncio.AbstractEventLoop, button: str) -> None:
    """Press `button` on the question box the window shows (non-modal)."""
    from PySide6.QtWidgets import QApplication, QMessageBox

    def box() -> QMessageBox | None:
        return next((w for w in QApplication.topLevelWidgets()
                     if isinstance(w, QMessageBox) and w.isVisible()), None)

    run_until(qloop, lambda: box() is not None)
    found = box()
    assert found is not None
    next(b for b in found.buttons() if b.text() == button).click()


def start_from_panel(qtbot: QtBot, window: MainWindow, goal: str = "") -> None:
    panel = window.run_panel
    panel.workflows.setCurrentText("Release notes")
    if goal:
        qtbot.keyClicks(panel.goal, goal)
    qtbot.mouseClick(panel.start_button, Qt.MouseButton.LeftButton)


def waiting_run(qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project: Path
                ) -> tuple[MainWindow, Controller]:
    """The window with a run started from its panel, once the run waits for the user (the
    model answered without completing its step, nudged once)."""
    window, controller = open_window(qtbot, project)
    window.run_panel.show()
    start_from_panel(qtbot, window)
    run_until(qloop, lambda: not controller.busy() and "waiting" in window.run_panel.title.text())
    return window, controller


def test_a_run_started_from_the_panel_walks_its_steps(qtbot: QtBot,
                                                      qloop: asyncio.AbstractEventLoop,
                                                      project: Path,
                                                      provider: FakeLLMServer) -> None:
    provider.script(complete("c1", "three changes"), complete("c2", "notes.md drafted"),
                    complete("c3", "proofread"), Answer("Wrap-up: done."))
    window, controller = open_window(qtbot, project)
    window.resize(900, 650)  # (800 px and more hold a side panel: test_window_polish)
    qtbot.waitUntil(lambda: window.width() == 900)
    qtbot.mouseClick(window.mode_switcher.buttons["run"], Qt.MouseButton.LeftButton)
    assert window.run_panel.isVisible()  # switching to Run shows where runs start
    assert window.run_panel.workflows.currentText() == "Release notes"
    # before it starts, the workflow's steps are there to read
    assert window.run_panel.title.text() == "Release notes · 3 steps · not started"
    assert panel_steps(window) == ["○ 1. Collect the changes", "○ 2. Draft the notes",
                                   "○ 3. Review"]
    width = window.width()
    start_from_panel(qtbot, window, "v2.0")
    run_until(qloop, lambda: not controller.busy() and "complete" in window.run_panel.title.text())
    assert window.mode_switcher.mode() == "run"
    assert panel_steps(window) == ["✓ 1. Collect the changes", "✓ 2. Draft the notes",
                                   "✓ 3. Review"]
    assert window.run_panel.title.text() == "Release notes · 3 of 3 done · complete"
    for n, brief in enumerate(BRIEFS):
        assert brief in provider.requests[n].body["messages"][0]["content"]
    # the transcript says which step each entry belongs to
    rows = window.transcript_model.rows()
    assert any("▸ draft" in header_line(r)[1] for r in rows)
    assert rows[-1].message is not None and rows[-1].message.text() == "Wrap-up: done."
    assert window.width() == width  # the panel took room from the transcript
    assert present(window.conversations.list.topLevelItem(0)).text(0).startswith(
        "Run: Release notes\n")
    assert window.run_panel.start_button.isEnabled()


def test_pause_stops_after_the_round_and_resume_goes_on(qtbot: QtBot,
                                                        qloop: asyncio.AbstractEventLoop,
                                                        project: Path,
                                                        provider: FakeLLMServer) -> None:
    # a slow answer, so the pause lands while the step's turn runs
    provider.script(complete("c1", "listed"), Answer("Thinking about the draft " * 10, delay=0.1),
                    Answer("still thinking"))
    window, controller = open_window(qtbot, project)
    window.run_panel.show()
    start_from_panel(qtbot, window)
    run_until(qloop, lambda: len(provider.requests) >= 2)
    assert window.run_panel.pause_button.text() == "&Pause"
    qtbot.mouseClick(window.run_panel.pause_button, Qt.MouseButton.LeftButton)
    assert "pausing after this round" in window.run_panel.title.text()  # not paused yet
    run_until(qloop, lambda: not controller.busy())
    assert "paused" in window.run_panel.title.text()
    assert len(provider.requests) == 2  # nothing more was sent once paused
    assert window.run_panel.pause_button.text() == "Res&ume"
    provider.script(complete("c2", "drafted"), complete("c3", "reviewed"), Answer("Done."))
    qtbot.mouseClick(window.run_panel.pause_button, Qt.MouseButton.LeftButton)
    run_until(qloop, lambda: not controller.busy() and "complete" in window.run_panel.title.text())
    assert "BRIEF-DRAFT" in provider.requests[2].body["messages"][0]["content"]


def test_typing_during_a_run_joins_the_active_step(qtbot: QtBot, qloop: asyncio.AbstractEventLoop,
                                                   project: Path, provider: FakeLLMServer) -> None:
    provider.script(Answer("Where are the changes?"), Answer("I need the file name."))
    window, controller = waiting_run(qtbot, qloop, project)
    assert "answer it, or Resume" in window.run_panel.message.text()
    provider.script(complete("c1", "from CHANGES.txt"), Answer("Draft coming"),
                    Answer("Still drafting"))
    type_and_send(qtbot, window, "They are in CHANGES.txt")
    run_until(qloop, lambda: not controller.busy() and len(provider.requests) >= 5)
    sent = provider.requests[2].body
    assert sent["messages"][-1] == {"role": "user", "content": "They are in CHANGES.txt"}
    assert "BRIEF-COLLECT" in sent["messages"][0]["content"]
    assert panel_steps(window)[:2] == ["✓ 1. Collect the changes", "▶ 2. Draft the notes"]


def test_regenerate_after_a_nudge_keeps_the_answer_it_followed_and_asks_with_the_nudge(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project: Path,
        provider: FakeLLMServer) -> None:
    """The answer after a nudge was asked after the answer before it, with the nudge (never
    stored): Regenerate branches at that answer, not at the run's start, and the request is
    the original's byte for byte."""
    provider.script(Answer("I looked around."), Answer("Still looking."))
    window, controller = waiting_run(qtbot, qloop, project)
    assert len(provider.requests) == 2 and "call complete_step" in str(provider.requests[1].body)
    assert "stopped without completing" in window.run_panel.message.text()
    original = controller.current_id
    answer = window.transcript_model.rows()[-1].message
    assert answer is not None and answer.text() == "Still looking."
    provider.script(Answer("Looking again."))
    window.transcript.branch_action.emit(answer.id, "regenerate")
    run_until(qloop, lambda: len(provider.requests) == 3 and not controller.busy())
    assert controller.current_id != original and controller.mode() == "run"
    assert provider.requests[2].raw == provider.requests[1].raw
    said = [r.message.text() for r in window.transcript_model.rows()
            if r.message is not None and r.message.role == "assistant"]
    assert said == ["I looked around.", "Looking again."]


def test_a_run_that_failed_shows_where_it_was_after_a_restart_and_resumes(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project: Path,
        provider: FakeLLMServer) -> None:
    provider.script(complete("c1", "listed"), HttpError(500, "down"))
    window, controller = open_window(qtbot, project)
    window.run_panel.show()
    start_from_panel(qtbot, window)
    run_until(qloop, lambda: not controller.busy() and "failed" in window.run_panel.title.text())
    controller.shutdown()
    window.close()
    runs = project / ".workbench" / "runs"
    for cached in runs.glob("*.json"):
        cached.write_text("{torn")  # its saved state, damaged while the app was closed
    # the next session: the panel shows the run where the log says it is
    window, controller = open_window(qtbot, project)
    assert window.run_panel.isVisible()  # it was open when the window closed
    notice = window.notice_label.text()  # repaired from the log: news, in the neutral colour
    assert "made again from the conversation; nothing is lost" in notice
    assert window.notice.property("kind") == "info"
    assert panel_steps(window) == ["✓ 1. Collect the changes", "✗ 2. Draft the notes",
                                   "○ 3. Review"]
    # its result, wrapped to the panel's width
    failed = present(window.run_panel.steps.topLevelItem(1))
    assert "HTTP 500" in " ".join(present(failed.child(i)).text(0)
                                  for i in range(failed.childCount()))
    provider.script(complete("c2", "drafted"), complete("c3", "reviewed"), Answer("Done."))
    qtbot.mouseClick(window.run_panel.pause_button, Qt.MouseButton.LeftButton)  # Resume
    run_until(qloop, lambda: not controller.busy() and "complete" in window.run_panel.title.text())
    assert "BRIEF-DRAFT" in provider.requests[2].body["messages"][0]["content"]


def test_skip_redo_and_abort_from_the_panel(qtbot: QtBot, qloop: asyncio.AbstractEventLoop,
                                            project: Path, provider: FakeLLMServer) -> None:
    provider.script(complete("c1", "listed"), Answer("drafting"), Answer("drafting more"))
    window, controller = waiting_run(qtbot, qloop, project)
    provider.script(Answer("reviewing"), Answer("reviewing more"))
    qtbot.mouseClick(window.run_panel.skip_button, Qt.MouseButton.LeftButton)
    run_until(qloop, lambda: not controller.busy() and len(provider.requests) == 5)
    assert panel_steps(window)[1:] == ["↷ 2. Draft the notes", "▶ 3. Review"]
    assert "1 of 3 done, 1 skipped" in window.run_panel.title.text()
    assert "BRIEF-REVIEW" in provider.requests[3].body["messages"][0]["content"]
    # redo the first step: select it, Redo
    tree = window.run_panel.steps
    tree.setCurrentItem(present(tree.topLevelItem(0)))
    provider.script(Answer("listing again"), Answer("listing"))
    qtbot.mouseClick(window.run_panel.redo_button, Qt.MouseButton.LeftButton)
    answer_box(qloop, "Redo")  # finished steps would no longer count: asked first
    run_until(qloop, lambda: not controller.busy() and len(provider.requests) == 7)
    assert panel_steps(window) == ["▶ 1. Collect the changes", "○ 2. Draft the notes",
                                   "○ 3. Review"]
    run_until(qloop, lambda: window.focusWidget() is window.composer.editor)  # not the search
    # what you did shows in the transcript, as it is in the log
    said = [r.text for r in window.transcript_model.rows()
            if header_line(r)[0] == "▶ Run"]
    assert said == ["Run: step 2 (Draft the notes) skipped by you.",
                    "Run: step 1 (Collect the changes) is redone; the steps after it start over."]
    qtbot.mouseClick(window.run_panel.abort_button, Qt.MouseButton.LeftButton)
    answer_box(qloop, "Cancel")
    assert "aborted" not in window.run_panel.title.text()
    qtbot.mouseClick(window.run_panel.abort_button, Qt.MouseButton.LeftButton)
    answer_box(qloop, "Abort run")
    run_until(qloop, lambda: "aborted" in window.run_panel.title.text())
    assert panel_steps(window)[0] == "✗ 1. Collect the changes"  # where it ended
    with Project.open(project, read_only=True) as p:
        conv = p.conversations.list()[0].id
        actions = [m.run_event.action for m in p.conversations.load(conv).messages
                   if m.run_event is not None]
    assert actions == ["start", "skip", "redo", "abort"]


def test_the_agents_plan_becomes_a_workflow_and_can_be_duplicated_and_deleted(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project: Path,
        provider: FakeLLMServer) -> None:
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication, QMessageBox

    from tests.helpers.fake_llm import ToolCalls
    from ui.workflow_dialog import WorkflowDialog

    provider.script(ToolCalls([("t", "manage_todo_list", json.dumps(
        {"action": "set", "items": ["Read the code", "Fix the bug"]}))]), Answer("Planned."))
    window, controller = open_window(qtbot, project)
    qtbot.mouseClick(window.mode_switcher.buttons["agent"], Qt.MouseButton.LeftButton)
    type_and_send(qtbot, window, "plan the fix")
    run_until(qloop, lambda: not controller.busy())
    window.run_panel.show()
    seen: list[list[str]] = []

    def accept_dialog() -> None:
        dialog = next(w for w in QApplication.topLevelWidgets()
                      if isinstance(w, WorkflowDialog) and w.isVisible())
        seen.append([dialog.steps_list.item(i).text() for i in range(dialog.steps_list.count())])
        dialog.accept()

    QTimer.singleShot(200, accept_dialog)
    qtbot.mouseClick(window.run_panel._manage["save_plan"], Qt.MouseButton.LeftButton)
    assert seen == [["1. Read the code", "2. Fix the bug"]]
    names = [window.run_panel.workflows.itemText(i)
             for i in range(window.run_panel.workflows.count())]
    assert window.run_panel.workflows.currentText().startswith("Plan: ")
    assert panel_steps(window) == ["○ 1. Read the code", "○ 2. Fix the bug"]  # at once
    saved = sorted(p.name for p in (project / ".workbench" / "workflows").glob("*.json"))
    assert len(saved) == 2 and "release-notes.json" in saved
    # duplicate, then delete the copy (after saying yes)
    window.run_panel.workflows.setCurrentText("Release notes")
    qtbot.mouseClick(window.run_panel._manage["duplicate"], Qt.MouseButton.LeftButton)
    assert window.run_panel.workflows.currentText() == "Release notes copy"
    assert len(names) + 1 == window.run_panel.workflows.count()

    def confirm() -> None:
        box = next(w for w in QApplication.topLevelWidgets()
                   if isinstance(w, QMessageBox) and w.isVisible())
        next(b for b in box.buttons() if b.text() == "Delete").click()

    qtbot.mouseClick(window.run_panel._manage["delete"], Qt.MouseButton.LeftButton)
    run_until(qloop, lambda: any(isinstance(w, QMessageBox) and w.isVisible()
                                 for w in QApplication.topLevelWidgets()))
    confirm()
    run_until(qloop, lambda: window.run_panel.workflows.count() == len(names))
    assert not (project / ".workbench" / "workflows" / "release-notes-copy.json").exists()


def test_switching_to_chat_during_a_run_pauses_it_after_the_round(qtbot: QtBot,
                                                                  qloop: asyncio.AbstractEventLoop,
                                                                  project: Path,
                                                                  provider: FakeLLMServer) -> None:
    provider.script(complete("c1", "listed"), Answer("Thinking about the draft " * 10, delay=0.1),
                    Answer("should not be asked for"))
    window, controller = open_window(qtbot, project)
    window.run_panel.show()
    start_from_panel(qtbot, window)
    run_until(qloop, lambda: len(provider.requests) >= 2)
    qtbot.mouseClick(window.mode_switcher.buttons["chat"], Qt.MouseButton.LeftButton)
    assert "pauses after this round" in window.notice_label.text()
    run_until(qloop, lambda: not controller.busy())
    assert len(provider.requests) == 2  # no nudge with the run's tools once you left
    assert "paused" in window.run_panel.title.text()


def test_a_selected_step_stays_selected_without_moving_the_transcript(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project: Path,
        provider: FakeLLMServer) -> None:
    provider.script(complete("c1", "listed"), Answer("drafting"), Answer("drafting more"))
    window, controller = waiting_run(qtbot, qloop, project)
    shown: list[str] = []
    window.run_panel.step_selected.connect(shown.append)
    tree = window.run_panel.steps
    tree.setCurrentItem(present(tree.topLevelItem(0)))  # the user selects step 1
    assert shown == ["collect"]
    for _ in range(3):  # refreshes while the run goes on
        controller.runs.show_current()
    assert shown == ["collect"] and window.run_panel.selected_step() == "collect"


def test_abort_while_a_request_waits_leaves_no_phantom_entry_or_dead_retry(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project: Path,
        provider: FakeLLMServer) -> None:
    """Abort while the step's request has not answered yet: the run ends with the notice that
    says so, and no "stopped before any text arrived" entry offers a Retry that cannot act."""
    from tests.helpers.fake_llm import Hang
    from ui.transcript_model import RowKind

    provider.script(complete("c1", "listed"), Hang(30))
    window, controller = open_window(qtbot, project)
    window.run_panel.show()
    start_from_panel(qtbot, window)
    run_until(qloop, lambda: len(provider.requests) == 2 and controller.busy())
    qtbot.mouseClick(window.run_panel.abort_button, Qt.MouseButton.LeftButton)
    answer_box(qloop, "Abort run")
    run_until(qloop, lambda: not controller.busy() and "aborted" in
              window.run_panel.title.text())
    rows = window.transcript_model.rows()
    assert not [r for r in rows if r.kind is RowKind.ERROR]
    assert rows[-1].text == "Run aborted by you."
    with Project.open(project, read_only=True) as p:
        conv = p.conversations.list()[0].id
        log = p.conversations.load(conv).messages
    assert not [m for m in log if m.kind == "error"]
    assert log[-1].run_event is not None and log[-1].run_event.action == "abort"


def test_a_pause_row_keeps_its_place_live_and_after_a_restart(qtbot: QtBot,
                                                              qloop: asyncio.AbstractEventLoop,
                                                              project: Path,
                                                              provider: FakeLLMServer) -> None:
    """Paused while an answer streams: the "Run paused by you" row stands where the log has
    it, live and when the conversation is read again (another window, after a restart)."""
    from ui.transcript_model import rows_from_messages

    provider.script(complete("c1", "listed"), Answer("Thinking about the draft " * 10, delay=0.1))
    window, controller = open_window(qtbot, project)
    window.run_panel.show()
    start_from_panel(qtbot, window)
    run_until(qloop, lambda: (row := window.transcript_model.streaming_row()) is not None
              and bool(row.text))
    qtbot.mouseClick(window.run_panel.pause_button, Qt.MouseButton.LeftButton)
    run_until(qloop, lambda: not controller.busy())

    def shown(rows: list[Row]) -> list[tuple[str, str]]:
        return [(r.kind.value, r.text[:40]) for r in rows]

    live = shown(window.transcript_model.rows())
    assert any(text.startswith("Run paused by you") for _, text in live)
    conv = controller.current_id
    assert conv is not None
    with Project.open(project, read_only=True) as p:
        logged = shown(rows_from_messages(p.conversations.load(conv).messages))
    assert live == logged
    window.close()
    window, controller = open_window(qtbot, project)  # after a restart
    controller.show_conversation(conv)
    assert shown(window.transcript_model.rows()) == logged


def test_while_the_users_answer_to_a_waiting_run_streams_the_panel_no_longer_says_it_stopped(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project: Path,
        provider: FakeLLMServer) -> None:
    provider.script(Answer("I looked around."), Answer("Still looking."))
    window, controller = waiting_run(qtbot, qloop, project)
    assert "stopped without completing" in window.run_panel.message.text()
    provider.script(Answer("Yes, add a one-line migration hint. " * 30, delay=0.05))
    controller.send("Add a migration hint.")
    run_until(qloop, lambda: controller.busy() and "running" in window.run_panel.title.text())
    assert "stopped without completing" not in window.run_panel.message.text()
    run_until(qloop, lambda: not controller.busy())

"""Telling the user: the notice channel, the exception boundary, and store errors met in the
window's slots (a full disk) said as notices instead of tracebacks."""

from __future__ import annotations

import asyncio
import errno
import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QTimer
from pytestqt.qtbot import QtBot

from app.window import boundary
from app.window.controller import Controller
from app.window.notices import Notices
from core.store.project import Project
from tests.helpers.disk import json_files_fail
from tests.helpers.gui import open_window, run_until
from ui.main_window import MainWindow

pytestmark = pytest.mark.gui


def test_what_is_said_before_the_window_is_attached_is_shown_once_it_is(qtbot: QtBot) -> None:
    notices = Notices()
    notices.state("a-model", "Starting")
    notices.warning("Something was repaired.")
    notices.not_sent("Not sent: too long.")
    window = MainWindow()
    qtbot.addWidget(window)
    window.show()
    assert not window.notice.isVisible()
    notices.attach(window)
    assert window.notice_label.text() == "Something was repaired."
    assert window.notice.isVisible() and window.notice.property("kind") == "problem"
    assert window.state_label.text() == "Starting"
    assert window.composer.hint.text() == "Not sent: too long."
    notices.info("Done.", "Save")  # attached: shown at once
    assert window.notice_label.text() == "Done." and window.notice_button.text() == "Save"
    assert window.notice.property("kind") == "info"
    notices.clear()
    assert not window.notice.isVisible()


@pytest.fixture
def guarded(qtbot: QtBot, project_dir: Path,
            tmp_path: Path) -> Iterator[tuple[MainWindow, Controller, Path]]:
    """A window with the exception boundary up, writing to a crash log of the test's own."""
    window, controller = open_window(qtbot, project_dir)
    log = tmp_path / "state" / "crash.log"
    uninstall = boundary.install(controller.notices, log)
    yield window, controller, log
    uninstall()


def test_an_exception_in_a_slot_is_logged_and_said_in_one_sentence(
        qtbot: QtBot, guarded: tuple[MainWindow, Controller, Path]) -> None:
    window, _, log = guarded

    def broken() -> None:
        raise ValueError("a bug in a slot")

    QTimer.singleShot(0, broken)
    qtbot.waitUntil(lambda: "Something went wrong" in window.notice_label.text(), timeout=5000)
    assert window.notice_label.text() == (
        f"Something went wrong (ValueError); the details are in {log}.")
    written = log.read_text()
    assert "Traceback" in written and "a bug in a slot" in written and "broken" in written


def test_an_exception_in_a_worker_thread_or_a_task_is_logged_and_said(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop,
        guarded: tuple[MainWindow, Controller, Path]) -> None:
    window, controller, log = guarded

    def work() -> None:
        raise KeyError("a bug on a thread")

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(5)
    qtbot.waitUntil(lambda: "(KeyError)" in window.notice_label.text(), timeout=5000)
    qloop.set_exception_handler(boundary.loop_handler(controller.notices, log))

    async def task() -> None:
        raise LookupError("a bug in a task nobody awaits")

    running = [qloop.create_task(task())]
    run_until(qloop, lambda: running[0].done(), timeout=5)
    running.clear()  # nobody retrieves its exception: asyncio reports it once the task
    gc.collect()     # is gone, through the loop's exception handler
    qtbot.waitUntil(lambda: "(LookupError)" in window.notice_label.text(), timeout=5000)
    assert "a bug in a task nobody awaits" in log.read_text()
    written = log.read_text()
    assert "a bug on a thread" in written and "work" in written


def test_a_full_disk_when_switching_mode_is_a_notice(qtbot: QtBot, project_dir: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    window, controller = open_window(qtbot, project_dir)
    with json_files_fail(monkeypatch):
        qtbot.mouseClick(window.mode_switcher.buttons["agent"], Qt.MouseButton.LeftButton)
    assert window.mode_switcher.mode() == "agent"  # used all the same
    assert window.notice_label.text() == (
        "The mode is used but could not be saved: Could not save the conversation's details "
        "in conversation.json (the disk is full).")


def test_a_full_disk_when_renaming_is_a_notice(qtbot: QtBot, project_dir: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    window, controller = open_window(qtbot, project_dir)
    conv = controller.current_id
    assert conv is not None
    with json_files_fail(monkeypatch):
        window.conversations.rename_requested.emit(conv, "A new title")
    assert window.notice_label.text().startswith("Not renamed: Could not save")
    assert controller.project is not None
    assert controller.project.conversations.meta(conv).title != "A new title"


def test_a_read_only_folder_when_saving_a_draft_is_a_notice(
        qtbot: QtBot, project_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    window, controller = open_window(qtbot, project_dir)
    with json_files_fail(monkeypatch, errno.EACCES):
        qtbot.keyClicks(window.composer.editor, "a draft")
        qtbot.waitUntil(lambda: window.notice.isVisible(), timeout=5000)
    assert window.notice_label.text() == (
        "The open conversation and drafts could not be saved: permission denied.")


def test_closing_on_a_full_disk_says_so_and_still_closes_the_project(
        qtbot: QtBot, project_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    window, controller = open_window(qtbot, project_dir)
    qtbot.keyClicks(window.composer.editor, "unsaved draft")
    with json_files_fail(monkeypatch):
        window.close()
    assert controller.project is None
    assert "could not be saved: the disk is full." in window.notice_label.text()
    with Project.open(project_dir) as again:  # the lock was released: writable again
        assert again.read_only_reason is None


def test_a_full_disk_when_making_a_conversation_is_a_notice(
        qtbot: QtBot, project_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    window, controller = open_window(qtbot, project_dir)
    shown = controller.current_id
    with json_files_fail(monkeypatch):
        window.new_conversation_action.trigger()
    assert window.notice_label.text().startswith("No new conversation: Could not save")
    assert controller.current_id == shown


def test_a_folder_that_refuses_a_delete_is_a_notice(qtbot: QtBot, project_dir: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    window, controller = open_window(qtbot, project_dir)
    conv = controller.current_id
    assert conv is not None

    def refused(*args: object) -> None:
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(shutil, "move", refused)
    window.conversations.delete_requested.emit(conv)
    assert window.notice_label.text() == "Not deleted: permission denied."
    assert controller.current_id == conv


def test_a_full_disk_when_opening_a_project_is_a_notice_and_the_project_opens(
        qtbot: QtBot, project_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    window, controller = open_window(qtbot, project_dir)
    other = tmp_path / "other"
    with Project.open(other) as p:
        p.conversations.create("kept")
    with json_files_fail(monkeypatch):
        assert controller.open_project(other)  # the recent-projects list cannot be saved
    assert controller.project is not None and controller.project.root == other.resolve()
    assert window.notice_label.text().endswith("the disk is full.")  # said, not raised

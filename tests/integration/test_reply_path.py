"""The reply path: the engine thread asks, the window answers, neither loop blocks; Stop
withdraws a pending question. Driven through the real worker thread and signal bridge."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox
from pytestqt.qtbot import QtBot

from core.engine import EngineEvent, QuestionAsked, StoreNotice, TurnFinished
from core.model import ConversationMessage
from core.questions import Question, QuestionCancelled
from tests.helpers.gui import open_window, run_until
from ui.main_window import MainWindow

pytestmark = pytest.mark.gui


def asking_turn(outcome: list[str]) -> AsyncIterator[EngineEvent]:
    async def turn() -> AsyncIterator[EngineEvent]:
        question = Question("Run this command in the project?", ("Approve", "Deny"),
                            detail="rm -rf build/")
        yield QuestionAsked(question)
        try:
            choice = await question.wait()
        except (QuestionCancelled, asyncio.CancelledError):  # Stop cancels the waiting turn
            outcome.append("withdrawn")
            raise
        outcome.append(choice)
        yield StoreNotice(f"you chose {choice}")
        yield TurnFinished("ok", ConversationMessage(role="assistant", content="done"))

    return turn()


def question_box(window: MainWindow) -> QMessageBox | None:
    boxes = [w for w in window.findChildren(QMessageBox) if w.isVisible()]
    return boxes[0] if boxes else None


def test_a_question_from_the_engine_thread_is_answered_in_the_window(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path) -> None:
    window, controller = open_window(qtbot, project_dir)
    outcome: list[str] = []
    controller.turns._start(asking_turn(outcome))
    run_until(qloop, lambda: question_box(window) is not None)
    box = question_box(window)
    assert box is not None and "Run this command" in box.text()
    assert "rm -rf build/" in box.informativeText()
    assert controller.busy() and window.isEnabled()  # the window keeps working meanwhile
    deny = next(b for b in box.buttons() if b.text() == "Deny")
    deny.click()
    run_until(qloop, lambda: not controller.busy())
    assert outcome == ["Deny"] and "you chose Deny" in window.notice_label.text()


def test_stop_withdraws_a_pending_question(qtbot: QtBot, qloop: asyncio.AbstractEventLoop,
                                           project_dir: Path) -> None:
    window, controller = open_window(qtbot, project_dir)
    outcome: list[str] = []
    controller.turns._start(asking_turn(outcome))
    run_until(qloop, lambda: question_box(window) is not None)
    controller.stop()
    run_until(qloop, lambda: not controller.busy())
    assert outcome == ["withdrawn"] and question_box(window) is None

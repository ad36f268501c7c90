"""GUI test helpers: a qasync loop in the test's QApplication, and a window on a project."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.window.controller import Controller
from core.settings import SettingsStore
from tests.helpers.fake_llm import MODEL, FakeLLMServer
from ui.main_window import MainWindow


@pytest.fixture
def qloop(qapp: QApplication) -> Iterator[asyncio.AbstractEventLoop]:
    import qasync

    loop = qasync.QEventLoop(qapp, already_running=False)
    asyncio.set_event_loop(loop)
    yield loop
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.close()  # also stops qasync's executor thread
    asyncio.set_event_loop(None)


def run_until(loop: asyncio.AbstractEventLoop, condition: Callable[[], bool],
              timeout: float = 20.0) -> None:
    """Run the Qt + asyncio loop until `condition()` holds (fails the test on time-out)."""

    async def wait() -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError("condition not reached in time")
            await asyncio.sleep(0.02)

    loop.run_until_complete(wait())


def open_window(qtbot: QtBot, project: Path,
                config: Path | None = None) -> tuple[MainWindow, Controller]:
    window = MainWindow()
    qtbot.addWidget(window)
    store = SettingsStore(config) if config else SettingsStore()
    controller = Controller(window, store, open_settings_on_first_run=False)
    window.show()
    assert controller.open_project(project)
    return window, controller


def use_fake_provider(monkeypatch: pytest.MonkeyPatch, server: FakeLLMServer,
                      **env: str) -> FakeLLMServer:
    """Point the window's settings at the loopback server (the environment layer); `env` sets
    more WORKBENCH_* variables (context_window="16000" sets WORKBENCH_CONTEXT_WINDOW)."""
    monkeypatch.setenv("WORKBENCH_MODEL", MODEL)
    monkeypatch.setenv("WORKBENCH_API_BASE", server.url)
    for key, value in env.items():
        monkeypatch.setenv(f"WORKBENCH_{key.upper()}", value)
    return server


def type_and_send(qtbot: QtBot, window: MainWindow, text: str) -> None:
    """Type into the message box and press Ctrl+Enter, as a user does."""
    window.composer.editor.setFocus()
    qtbot.keyClicks(window.composer.editor, text)
    qtbot.keyClick(window.composer.editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)

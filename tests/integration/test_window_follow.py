"""A running agent turn's figures follow its entries as they land, built beside the engine's
work, never on the window's thread: its tool results make a build shorten and count them,
which stalled the window mid-turn."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.window import turns
from core.context.service import ProjectContext
from tests.helpers.fake_llm import Answer, FakeLLMServer, ToolCalls
from tests.helpers.gui import open_window, run_until, type_and_send, use_fake_provider

pytestmark = pytest.mark.gui


def test_a_running_turn_is_followed_off_the_window_thread(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    project_dir.mkdir(parents=True, exist_ok=True)
    for n in range(6):
        (project_dir / f"f{n}.txt").write_text(f"line {n}\n" * 200)
    use_fake_provider(monkeypatch, llm_server)
    # the last answer keeps the turn running after the results landed: time for the follow
    llm_server.script(ToolCalls([(f"r{n}", "read_file", json.dumps({"path": f"f{n}.txt"}))
                                 for n in range(6)]), Answer("All read.", first_delay=1.0))
    monkeypatch.setattr(turns, "MID_TURN_REFRESH_MS", 20)  # followed soon after each entry
    window, controller = open_window(qtbot, project_dir)
    qtbot.mouseClick(window.mode_switcher.buttons["agent"], Qt.MouseButton.LeftButton)
    builds: list[tuple[bool, int]] = []  # (on the window's thread, the log's length)
    build = ProjectContext.build

    def recorded(self: ProjectContext, conv_id: str | None, history: list[Any], *args: Any,
                 **kwargs: Any) -> Any:
        if not kwargs.get("what_if") and controller.busy():
            builds.append((threading.current_thread() is threading.main_thread(),
                           len(history)))
        return build(self, conv_id, history, *args, **kwargs)

    monkeypatch.setattr(ProjectContext, "build", recorded)
    type_and_send(qtbot, window, "read them")
    results = 2 + 6  # the message, the answer calling the tools, its six results
    run_until(qloop, lambda: controller.meter.report is not None and any(
        n >= results for _, n in builds) and not controller.meter.counting)
    assert controller.busy()  # followed while the turn still runs
    assert [n for on_window, n in builds if on_window and n >= results] == []
    run_until(qloop, lambda: not controller.busy())

"""Pin and exclude from the window: the row says so in place, the next request follows, and
both survive a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from core.llm.runtime import load_litellm
from core.llm.tokens import TokenCounter
from tests.helpers.fake_llm import Answer, FakeLLMServer
from tests.helpers.gui import open_window, run_until, type_and_send, use_fake_provider
from tests.helpers.present import present
from tests.helpers.trajectories import agent_session_project
from ui.transcript_text import header_line

pytestmark = pytest.mark.gui
COUNTER = TokenCounter("o200k_base")


@pytest.fixture(autouse=True)
def provider(monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer) -> FakeLLMServer:
    load_litellm()
    return use_fake_provider(monkeypatch, llm_server, context_window="100000",
                             auto_summary="0")


def test_pin_and_exclude_from_the_window_show_in_place_steer_the_request_and_persist(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer) -> None:
    conv = agent_session_project(project_dir, 3, 5, "s")
    window, controller = open_window(qtbot, project_dir)
    controller.show_conversation(conv)
    model = window.transcript_model
    first = next(i for i, r in enumerate(model.rows()) if r.message is not None
                 and r.message.role == "user")
    second = next(i for i, r in enumerate(model.rows()) if i > first and r.message is not None
                  and r.message.role == "user")
    excluded_text = present(model.row(first).message).text()
    rows_before = model.rowCount()
    controller.inspector.annotate([present(model.row(first).message).id], "exclude")
    controller.inspector.annotate([present(model.row(second).message).id], "pin")
    assert model.rowCount() == rows_before  # shown in place, nothing added to the transcript
    assert "not sent" in header_line(model.row(first))[1]
    assert "pinned" in header_line(model.row(second))[1]
    llm_server.script(Answer("ok"))
    type_and_send(qtbot, window, "next")
    run_until(qloop, lambda: not controller.busy())
    sent = [m.get("content") for m in llm_server.requests[-1].body["messages"]]
    assert excluded_text not in sent and present(model.row(second).message).text() in sent
    window.close()
    window2, controller2 = open_window(qtbot, project_dir)
    controller2.show_conversation(conv)
    m2 = window2.transcript_model
    assert "not sent" in header_line(m2.row(first))[1]
    assert "pinned" in header_line(m2.row(second))[1]
    controller2.inspector.annotate([present(m2.row(first).message).id], "include")
    assert "not sent" not in header_line(m2.row(first))[1]

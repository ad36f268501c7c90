"""Cost in the window: an answer's row shows its tokens and what it cost, the meter's tooltip
the next request's price, and a spending cap keeps a message from being sent (kept in the
box, the figures said) until the cap is raised."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from tests.helpers.fake_llm import Answer, FakeLLMServer
from tests.helpers.gui import open_window, run_until, type_and_send, use_fake_provider
from tests.helpers.present import present
from ui.transcript_model import RowKind
from ui.transcript_text import header_line

pytestmark = pytest.mark.gui


@pytest.fixture(autouse=True)
def provider(monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer) -> FakeLLMServer:
    use_fake_provider(monkeypatch, llm_server)
    monkeypatch.setenv("WORKBENCH_MODEL", "openai/gpt-4o-mini")  # priced, behind a gateway
    return llm_server


def test_cost_is_shown_and_the_cap_keeps_a_message_unsent(qtbot: QtBot,
                                                          qloop: asyncio.AbstractEventLoop,
                                                          project_dir: Path,
                                                          llm_server: FakeLLMServer,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    window, controller = open_window(qtbot, project_dir)
    llm_server.script(Answer("first answer", usage=(1000, 50)))
    type_and_send(qtbot, window, "hi")
    run_until(qloop, lambda: not controller.busy())
    answer = next(r for r in window.transcript_model.rows() if r.kind is RowKind.ASSISTANT)
    assert "1,050 tokens · $0.0002 · " in header_line(answer)[1]
    run_until(qloop, lambda: "Next request: about $" in window.usage.toolTip())
    run_until(qloop, lambda: "$" in present(window.conversations.list.topLevelItem(0)).text(0))
    listed = present(window.conversations.list.topLevelItem(0)).text(0)
    assert "· $0.0002" in listed  # the conversation's cost in the list

    monkeypatch.setenv("WORKBENCH_COST_CAP", "0.0001")
    type_and_send(qtbot, window, "more please")
    hint = window.composer.hint.text()
    assert "Not sent: this conversation has spent $0.0002 of its $0.0001 cap" in hint
    assert window.composer.text() == "more please" and len(llm_server.requests) == 1
    assert not controller.busy()

    monkeypatch.setenv("WORKBENCH_COST_CAP", "5")  # raised: the same message goes
    llm_server.script(Answer("second", usage=(1100, 20)))
    qtbot.keyClick(window.composer.editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    run_until(qloop, lambda: len(llm_server.requests) == 2 and not controller.busy())
    window.close()

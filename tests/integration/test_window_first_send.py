"""A message to an OpenAI-compatible server leaves without waiting for litellm: the window says
"Ready" at once, never "Loading the model library…", and the request goes through the openai
SDK with litellm not loaded."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from core.llm import litellm_loader, runtime
from tests.helpers.fake_llm import Answer, FakeLLMServer
from tests.helpers.gui import open_window, run_until, type_and_send, use_fake_provider

pytestmark = pytest.mark.gui


def test_a_message_to_an_openai_compatible_server_does_not_wait_for_litellm(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(litellm_loader, "_module", None)  # as at launch: litellm not in
    monkeypatch.setenv("WORKBENCH_AUTO_TITLE", "0")
    use_fake_provider(monkeypatch, llm_server)
    said: list[str] = []
    window, controller = open_window(qtbot, project_dir)
    controller.notices.status.connect(lambda _model, text: said.append(text))
    controller.settings_flow.changed.emit()  # the status said again, as after Settings
    llm_server.script(Answer("hi back"))
    type_and_send(qtbot, window, "hello")
    run_until(qloop, lambda: len(llm_server.requests) == 1 and not controller.busy())
    assert said[0] == "Ready"
    assert "Waiting for the model…" in said
    assert not any("Loading the model library" in text for text in said), said
    assert not runtime.is_loaded()  # the whole turn without litellm

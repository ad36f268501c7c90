"""A first start without a key offers a model server already running on this computer (issue
51): found on ports the test chooses, shown in the Settings dialog the first start opens, one
click fills the provider in, and the next send reaches it. Nothing found, or a port answering
garbage or hanging: the dialog as it always was, and the window never waits for the search."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.window.controller import Controller
from core.llm import local_servers
from core.llm.runtime import load_litellm
from core.settings import SettingsStore
from tests.helpers.fake_llm import Answer, FakeLLMServer
from tests.helpers.gui import run_until, type_and_send
from tests.helpers.odd_ports import closed_port, odd_port
from ui.main_window import MainWindow
from ui.settings_dialog import SettingsDialog

pytestmark = pytest.mark.gui


def first_start(qtbot: QtBot, tmp_path: Path, project_dir: Path, addresses: list[str]
                ) -> tuple[MainWindow, Controller, SettingsStore]:
    """The window as a first start opens it: no settings.json yet, so Settings opens."""
    window = MainWindow()
    qtbot.addWidget(window)
    store = SettingsStore(tmp_path / "config")
    controller = Controller(window, store, local_servers=addresses)
    window.show()
    assert controller.open_project(project_dir)
    return window, controller, store


def opened(qtbot: QtBot, controller: Controller) -> SettingsDialog:
    qtbot.waitUntil(lambda: controller.settings_flow.dialog is not None
                    and controller.settings_flow.dialog.isVisible())
    dialog = controller.settings_flow.dialog
    assert dialog is not None
    return dialog


def test_a_running_server_is_offered_and_one_click_and_save_make_the_next_send_reach_it(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, tmp_path: Path, project_dir: Path,
        llm_server: FakeLLMServer) -> None:
    load_litellm()
    llm_server.info["/v1/models"] = {"object": "list", "data": [
        {"id": "test-model", "object": "model", "owned_by": "vllm"},
        {"id": "other-model", "object": "model", "owned_by": "vllm"}]}
    address = llm_server.url.removesuffix("/v1")
    window, controller, store = first_start(qtbot, tmp_path, project_dir,
                                            [closed_port(), address])
    dialog = opened(qtbot, controller)
    qtbot.waitUntil(lambda: dialog.local_offer is not None)
    offer = dialog.local_offer
    assert offer is not None and offer.isVisible()
    assert f"vLLM at {address} · 2 models" in [label.text() for label in offer.findChildren(
        type(offer.chosen))]
    assert [b.text() for b in offer.buttons] == ["Use test-model", "Use other-model"]
    qtbot.mouseClick(offer.buttons[0], Qt.MouseButton.LeftButton)
    assert dialog.current_preset().name == "OpenAI-compatible server"
    assert (dialog.model.text(), dialog.api_base.text()) == ("openai/test-model", llm_server.url)
    assert dialog.api_key.text() == "" and offer.chosen.isVisible()
    dialog.accept()  # Save
    saved = store.load()
    entry = saved.provider(saved.active_provider)
    assert entry is not None and (entry.model, entry.api_base) == ("openai/test-model",
                                                                   llm_server.url)
    assert controller.settings_flow.local_servers == []  # chosen: not offered again
    llm_server.script(Answer("Hello from this computer."))
    type_and_send(qtbot, window, "hello")
    run_until(qloop, lambda: not controller.busy() and bool(llm_server.requests))
    assert llm_server.requests[0].body["model"] == "test-model"
    assert "Hello from this computer." in [r.message.text() for r in
                                           window.transcript_model.rows() if r.message]


def test_nothing_running_leaves_the_dialog_as_it_was_and_it_opens_before_the_search_ends(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, tmp_path: Path, project_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_servers, "DEADLINE_S", 60.0)
    with odd_port("hang") as hang:
        _window, controller, _store = first_start(qtbot, tmp_path, project_dir,
                                                  [closed_port(), hang])
        dialog = opened(qtbot, controller)
        assert not controller.local_servers.searched  # the search goes on; nobody waits
        assert dialog.local_offer is None
        dialog.reject()


def test_a_port_answering_garbage_or_hanging_is_not_offered_within_the_deadline(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, tmp_path: Path, project_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_servers, "DEADLINE_S", 0.5)
    with odd_port("garbage") as garbage, odd_port("hang") as hang:
        _window, controller, _store = first_start(qtbot, tmp_path, project_dir,
                                                  [garbage, hang, closed_port()])
        dialog = opened(qtbot, controller)
        qtbot.waitUntil(lambda: controller.local_servers.searched, timeout=10_000)
        assert dialog.local_offer is None and dialog.isVisible()
        assert controller.settings_flow.local_servers == []


def test_with_a_key_nothing_is_looked_for(qtbot: QtBot, qloop: asyncio.AbstractEventLoop,
                                          tmp_path: Path, project_dir: Path,
                                          monkeypatch: pytest.MonkeyPatch,
                                          llm_server: FakeLLMServer) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-only-0000000000000000")
    llm_server.info["/v1/models"] = {"data": [{"id": "test-model"}]}
    _window, controller, _store = first_start(qtbot, tmp_path, project_dir,
                                              [llm_server.url.removesuffix("/v1")])
    dialog = opened(qtbot, controller)
    assert controller.local_servers.searched and dialog.local_offer is None
    assert llm_server.probes == []

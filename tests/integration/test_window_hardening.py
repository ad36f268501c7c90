"""The window never sends with settings the user did not choose, and a read-only view never
sends or writes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from core.model import ConversationMessage, ErrorInfo
from core.store.project import Project
from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer
from tests.helpers.gui import open_window, run_until, type_and_send, use_fake_provider
from tests.helpers.present import present
from ui.settings_dialog import SettingsDialog

pytestmark = pytest.mark.gui


@pytest.fixture(autouse=True)
def provider(monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer) -> FakeLLMServer:
    return use_fake_provider(monkeypatch, llm_server)


def set_project_settings(project_dir: Path, settings: dict[str, Any]) -> None:
    with Project.open(project_dir) as p:
        p.update_info(settings=settings)
        p.trust_now()  # the user's own project: they trust the model it names


def test_a_typo_in_project_settings_refuses_to_send_instead_of_using_the_default_provider(
    qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path, llm_server: FakeLLMServer,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WORKBENCH_MODEL")  # the project decides the model...
    set_project_settings(project_dir, {"model": MODEL, "max_output_tokens": "lots"})  # ...typo
    window, controller = open_window(qtbot, project_dir)
    assert "settings problem" in window.model_label.text()
    assert "max output tokens" in window.state_label.text()
    type_and_send(qtbot, window, "hello?")
    assert "Not sent" in window.composer.hint.text() and "max output tokens" in \
        window.composer.hint.text()
    assert window.composer.text() == "hello?"  # the draft is kept
    assert not controller.busy() and llm_server.requests == []
    with Project.open(project_dir, read_only=True) as p:
        assert p.conversations.load(present(controller.current_id)).messages == []


def test_a_bad_environment_value_does_not_stop_the_window_from_starting(
    qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path, llm_server: FakeLLMServer,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKBENCH_MAX_OUTPUT_TOKENS", "-5")
    window, controller = open_window(qtbot, project_dir)
    assert window.isVisible() and "settings problem" in window.model_label.text()
    monkeypatch.setenv("WORKBENCH_MAX_OUTPUT_TOKENS", "300")  # fixed: sending works again
    llm_server.script(Answer("fine"))
    type_and_send(qtbot, window, "hi")
    run_until(qloop, lambda: not controller.busy())
    assert llm_server.requests and llm_server.requests[0].body["max_tokens"] == 300


def test_an_unreadable_settings_file_refuses_to_send(qtbot: QtBot, qloop: asyncio.AbstractEventLoop,
                                                     project_dir: Path, llm_server: FakeLLMServer,
                                                     isolated_env: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORKBENCH_MODEL")
    config = isolated_env / "config" / "context-workbench"
    config.mkdir(parents=True, exist_ok=True)
    (config / "settings.json").write_text('{"active_provider": "Ollama", "providers": [')
    window, controller = open_window(qtbot, project_dir)
    type_and_send(qtbot, window, "hello")
    assert "settings.json could not be read" in window.composer.hint.text()
    assert llm_server.requests == []


def test_a_read_only_window_never_retries_or_continues(qtbot: QtBot,
                                                       qloop: asyncio.AbstractEventLoop,
                                                       project_dir: Path,
                                                       llm_server: FakeLLMServer) -> None:
    with Project.open(project_dir) as p:
        conv = p.conversations.create()
        p.conversations.append_many(conv.id, [
            ConversationMessage(role="user", content="question"),
            ConversationMessage(role="assistant", kind="error", content="half an ans",
                                error=ErrorInfo(type="stream_interrupted", message="cut",
                                                retryable=True, partial=True)),
        ])
    log = project_dir / ".workbench" / "conversations" / conv.id / "messages.jsonl"
    before = log.read_bytes()
    owner = Project.open(project_dir)  # another process has it: this window is read-only
    try:
        window, controller = open_window(qtbot, project_dir)
        assert controller.project is not None and controller.project.read_only
        llm_server.script(Answer("billable"), Answer("billable"))
        last = window.transcript_model.rowCount() - 1
        controller.turns.on_action(last, "retry")
        controller.turns.on_action(last, "continue")
        assert not controller.busy()
        assert "Read-only" in window.state_label.text()
    finally:
        owner.close()
    assert llm_server.requests == []
    assert log.read_bytes() == before
    assert sorted(x.name for x in log.parent.iterdir()) == ["conversation.json", "messages.jsonl"]


def test_settings_name_the_variable_a_custom_base_url_key_is_read_from(qtbot: QtBot) -> None:
    dialog = SettingsDialog(None, preset_name="OpenAI", model="gpt-4o-mini", api_base=None,
                            max_output_tokens=1000, keyring_available=False, keys_present={})
    qtbot.addWidget(dialog)
    assert "OPENAI_API_KEY" in dialog.key_note.text()
    dialog.api_base.setText("http://127.0.0.1:8000/v1")
    note = dialog.key_note.text()
    assert "WORKBENCH_API_KEY" in note and "never OPENAI_API_KEY" in note
    dialog.preset.setCurrentIndex(3)  # OpenAI-compatible server: a base URL from the preset
    assert "WORKBENCH_API_KEY" in dialog.key_note.text()


def test_cli_reports_a_non_text_model_in_project_json(capsys: pytest.CaptureFixture[str],
                                                      project_dir: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from app.cli.main import main

    monkeypatch.delenv("WORKBENCH_MODEL")

    with Project.open(project_dir) as p:
        conv = p.conversations.create()
        info = json.loads((p.state / "project.json").read_text())
        p.update_info(settings={**info.get("settings", {}), "model": 123})
        p.trust_now()
    code = main(["context", str(project_dir), "-c", conv.id])
    _, err = capsys.readouterr()
    assert code == 1 and "model" in err and "must be text" in err and "Traceback" not in err


def test_a_full_disk_keeps_the_answer_on_screen_and_save_writes_it_later(
    qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path, llm_server: FakeLLMServer,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.helpers.disk import disk_full

    window, controller = open_window(qtbot, project_dir)
    with disk_full(monkeypatch, from_write=2):  # the question is saved, the answer is not
        llm_server.script(Answer("an answer worth keeping"))
        type_and_send(qtbot, window, "question")
        run_until(qloop, lambda: not controller.busy())
        assert window.transcript_model.rows()[-1].text == "an answer worth keeping"
        assert window.notice.isVisible() and "the disk is full" in window.notice_label.text()
        assert window.notice_button.isVisible() and window.notice_button.text() == "Save"
    # space was freed
    qtbot.mouseClick(window.notice_button, Qt.MouseButton.LeftButton)
    with Project.open(project_dir, read_only=True) as p:
        texts = [m.text() for m in p.conversations.load(present(controller.current_id)).messages]
    assert texts == ["question", "an answer worth keeping"]
    assert window.notice_label.text() == "Saved."


def test_a_repair_during_a_turn_shows_a_notice(qtbot: QtBot, qloop: asyncio.AbstractEventLoop,
                                               project_dir: Path,
                                               llm_server: FakeLLMServer) -> None:
    window, controller = open_window(qtbot, project_dir)
    llm_server.script(Answer("one"), Answer("two"))
    type_and_send(qtbot, window, "first")
    run_until(qloop, lambda: not controller.busy())
    assert controller.current_id is not None
    log = project_dir / ".workbench" / "conversations" / controller.current_id / "messages.jsonl"
    with open(log, "ab") as f:  # another program tore the last line meanwhile
        f.write(b'{"role": "user", "content": "tor')
    assert controller.project is not None
    controller.project.conversations._clean_tails.clear()
    type_and_send(qtbot, window, "second")
    run_until(qloop, lambda: not controller.busy())
    assert window.notice.isVisible() and "unfinished last line" in window.notice_label.text()


def test_a_read_only_window_shows_an_answer_pending_from_a_crash(qtbot: QtBot,
                                                                 qloop: asyncio.AbstractEventLoop,
                                                                 project_dir: Path,
                                                                 llm_server: FakeLLMServer) -> None:
    with Project.open(project_dir) as p:
        conv = p.conversations.create()
        p.conversations.append(conv.id, ConversationMessage(role="user", content="question"))
        p.conversations.write_partial(conv.id, {"text": "what arrived before the crash"})
        p.conversations._streaming.clear()  # that process died
    owner = Project.open(project_dir)  # another window owns the project now...
    try:
        owner_sidecar = owner.conversations.root / conv.id / "streaming.partial.json"
        window, controller = open_window(qtbot, project_dir)  # ...so this one is read-only
        last = window.transcript_model.rows()[-1]
        assert last.message is not None and last.message.error is not None
        assert last.text == "what arrived before the crash" and "Pending" in last.message.error.message
        assert "pending" in window.notice_label.text()
        assert owner_sidecar.exists()  # the owner recovers it; this view never writes
    finally:
        owner.close()


def test_settings_list_remembered_limits_and_forget_one(qtbot: QtBot,
                                                        qloop: asyncio.AbstractEventLoop,
                                                        project_dir: Path,
                                                        isolated_env: Path) -> None:
    from core.context.calibration import Calibration
    from core.settings import SettingsStore

    calibration = Calibration(SettingsStore().folder / "calibration.json")
    calibration.remember_window("openai/tiny", 100)
    window, controller = open_window(qtbot, project_dir)
    controller.calibration = Calibration(SettingsStore().folder / "calibration.json")
    controller.settings_flow.open()
    dialog = controller.settings_flow.dialog
    assert dialog is not None and dialog.windows.isVisible()
    assert dialog.windows.item(0).text() == "openai/tiny: 100 tokens"
    qtbot.mouseClick(dialog.forget_button, Qt.MouseButton.LeftButton)
    assert dialog.windows.count() == 0
    assert Calibration(SettingsStore().folder / "calibration.json").remembered_windows() == {}
    dialog.reject()


def test_settings_set_the_context_window_and_the_meter_follows(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from core.llm.runtime import load_litellm
    from core.settings import SettingsStore

    load_litellm()
    monkeypatch.delenv("WORKBENCH_MODEL")
    monkeypatch.delenv("WORKBENCH_API_BASE")
    window, controller = open_window(qtbot, project_dir)
    controller.settings_flow.open()
    dialog = controller.settings_flow.dialog
    assert dialog is not None
    dialog.preset.setCurrentIndex(3)  # an OpenAI-compatible server: litellm cannot know it
    dialog.context_window.setValue(32_000)
    dialog.accept()
    saved = SettingsStore().load()
    assert present(saved.provider(saved.active_provider)).context_window == 32_000
    report = controller.meter.report
    assert report is not None and report.window == 32_000 and report.budget_source == "override"


def test_settings_choose_the_summary_model_and_switch_automatic_summaries_off(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from core.settings import SettingsStore

    window, controller = open_window(qtbot, project_dir)
    controller.settings_flow.open()
    dialog = controller.settings_flow.dialog
    assert dialog is not None and dialog.auto_summary.isChecked()
    dialog.summary_model.setText("openai/cheap-model")
    dialog.auto_summary.setChecked(False)
    dialog.accept()
    saved = SettingsStore().load()
    assert saved.summary_model == "openai/cheap-model" and saved.auto_summary is False
    settings = controller.settings_flow.llm_settings()
    assert settings.summary_model == "openai/cheap-model" and not settings.auto_summary
    controller.settings_flow.open()  # the dialog shows what was saved
    again = controller.settings_flow.dialog
    assert again is not None and again.summary_model.text() == "openai/cheap-model"
    assert not again.auto_summary.isChecked()
    again.reject()


def test_a_limit_the_provider_states_below_the_setting_is_kept_and_the_setting_wins(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings say 16,000; the server refuses at 6,000. The answer comes (rebuilt smaller); the
    limit is remembered for the server and listed in Settings, but the window the user stated
    wins over it (issue 47): the meter still counts against 16,000."""
    from core.llm.runtime import load_litellm
    from core.llm.tokens import TokenCounter
    from tests.helpers.fake_llm import ContextLengthError
    from tests.helpers.trajectories import make_agent_session

    load_litellm()
    monkeypatch.setenv("WORKBENCH_CONTEXT_WINDOW", "16000")
    counter = TokenCounter("o200k_base")
    with Project.open(project_dir) as p:
        conv = p.conversations.create("long").id
        p.conversations.append_many(conv, [counter.with_count(m) for m in
                                           make_agent_session(4, seed=1, output_chars=2500)])
    window, controller = open_window(qtbot, project_dir)
    controller.show_conversation(conv)
    run_until(qloop, lambda: controller.meter.report is not None)
    assert controller.meter.report is not None and controller.meter.report.window == 16_000
    llm_server.script(ContextLengthError(limit=6000, requested=9000), Answer("fits now"))
    type_and_send(qtbot, window, "go on")
    run_until(qloop, lambda: not controller.busy())
    assert window.transcript_model.rows()[-1].text == "fits now"
    run_until(qloop, lambda: controller.meter.report is not None)
    assert controller.meter.report is not None and controller.meter.report.window == 16_000
    controller.settings_flow.open()
    dialog = controller.settings_flow.dialog
    assert dialog is not None
    assert dialog.window_applied.text().startswith("Requests are built for 16,000 tokens")
    listed = [dialog.windows.item(i).text() for i in range(dialog.windows.count())]
    assert listed == [f"{MODEL} at {llm_server.url}: 6,000 tokens"]
    dialog.reject()

"""The Context Inspector panel: the next request's decisions, the same as `workbench context
--json` entry by entry; a filter; a click that shows the entry in the transcript."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.cli.main import main
from app.window.controller import Controller
from core.llm.runtime import load_litellm
from core.llm.tokens import TokenCounter
from core.store.project import Project
from tests.helpers.fake_llm import FakeLLMServer
from tests.helpers.gui import open_window, use_fake_provider
from tests.helpers.present import present
from tests.helpers.trajectories import agent_session_project, make_agent_session
from ui.inspector import InspectorPanel
from ui.main_window import MainWindow
from ui.output_viewer import OutputViewer

pytestmark = pytest.mark.gui
COUNTER = TokenCounter("o200k_base")


@pytest.fixture(autouse=True)
def provider(monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer) -> FakeLLMServer:
    load_litellm()
    return use_fake_provider(monkeypatch, llm_server, context_window="12000")


def inspect(qtbot: QtBot, project_dir: Path,
            conv: str) -> tuple[MainWindow, Controller, InspectorPanel]:
    """The window on `conv` with the Inspector open and showing its rows."""
    window, controller = open_window(qtbot, project_dir)
    controller.show_conversation(conv)
    window.inspector_action.trigger()
    qtbot.waitUntil(lambda: bool(window.inspector.rows()), timeout=5000)
    return window, controller, window.inspector


def test_the_panel_agrees_with_the_cli_filters_and_shows_the_entry(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, capsys: pytest.CaptureFixture[str],
        project_dir: Path) -> None:
    conv = agent_session_project(project_dir, 12, 6, "long")
    assert main(["context", str(project_dir), "-c", conv, "--json"]) == 0
    cli_entries = json.loads(capsys.readouterr().out)["report"]["entries"]
    window, controller = open_window(qtbot, project_dir)
    controller.show_conversation(conv)
    panel = window.inspector
    assert not panel.isVisible()
    window.inspector_action.trigger()  # View > Context Inspector (Ctrl+I)
    qtbot.waitUntil(lambda: panel.isVisible() and bool(panel.rows()), timeout=5000)
    shown = {r[1]: r[2] for r in panel.rows()}
    assert shown == {e["id"]: e["decision"] for e in cli_entries}
    assert {"kept", "digested", "synthetic"} <= set(shown.values())
    assert {"previewed", "referenced"} & set(shown.values())
    assert "usable tokens" in panel.header.text() and "compaction" in panel.header.text()
    assert [name for name, _ in panel.bar.parts] == ["system", "instructions", "tools",
                                                     "summary", "history", "draft", "reserved",
                                                     "free"]
    assert not panel.instructions.isVisible()  # the project has no AGENTS.md
    panel.filter.setCurrentIndex(panel.filter.findText("only digested"))
    digested = panel.rows()
    assert digested and all(r[2] == "digested" for r in digested)
    # clicking a decision shows that entry in the transcript
    target = digested[len(digested) // 2]
    panel.table.clicked.emit(panel.model.index(len(digested) // 2, 1))
    current = window.transcript.currentIndex()
    assert current.isValid()
    row = window.transcript_model.row(current.row())
    assert row.message is not None
    assert target[1] in (row.message.id, row.result.id if row.result else None)
    window.inspector_action.trigger()
    assert not panel.isVisible()


def test_undo_in_the_compaction_history_brings_the_entries_back(qtbot: QtBot,
                                                                qloop: asyncio.AbstractEventLoop,
                                                                project_dir: Path,
                                                                llm_server: FakeLLMServer) -> None:
    from core.model import ConversationMessage

    with Project.open(project_dir) as p:
        conv = p.conversations.create("long").id
        msgs = [COUNTER.with_count(m) for m in make_agent_session(12, seed=6)]
        summary = COUNTER.with_count(ConversationMessage(
            role="system", kind="summary", content="SUMMARY OF THE FIRST HALF",
            covers=[m.id for m in msgs[:40]], model="openai/cheap"))
        p.conversations.append_many(conv, [*msgs, summary])
    window, controller = open_window(qtbot, project_dir)
    controller.show_conversation(conv)
    panel = window.inspector
    window.inspector_action.trigger()
    qtbot.waitUntil(lambda: panel.history.count() == 1 and bool(panel.rows()), timeout=5000)
    assert "40 entries" in panel.history.item(0).text()
    decided = {r[1]: r[2] for r in panel.rows()}
    assert decided[msgs[0].id] == "summarized"
    panel.history.setCurrentRow(0)
    assert panel.undo.text() == "Undo"
    panel.undo.click()
    qtbot.waitUntil(lambda: {r[1]: r[2] for r in panel.rows()}.get(msgs[0].id) != "summarized",
                    timeout=5000)
    assert "undone" in panel.history.item(0).text() and panel.undo.text() == "Redo"
    with Project.open(project_dir, read_only=True) as p:
        loaded = p.conversations.load(conv).messages
        assert not next(m for m in loaded if m.id == summary.id).include_in_context
    panel.undo.click()  # Redo
    qtbot.waitUntil(lambda: {r[1]: r[2] for r in panel.rows()}.get(msgs[0].id) == "summarized",
                    timeout=5000)


def test_the_panel_comes_back_open_after_a_restart(qtbot: QtBot, qloop: asyncio.AbstractEventLoop,
                                                   project_dir: Path) -> None:
    window, _ = open_window(qtbot, project_dir)
    window.inspector_action.trigger()
    assert window.inspector.isVisible()
    window.close()
    again, _ = open_window(qtbot, project_dir)
    qtbot.waitUntil(again.inspector.isVisible, timeout=3000)
    again.inspector_action.trigger()
    again.close()
    third, _ = open_window(qtbot, project_dir)
    assert not third.inspector.isVisible()


def test_the_model_view_dims_exactly_what_the_request_leaves_out(qtbot: QtBot,
                                                                 qloop: asyncio.AbstractEventLoop,
                                                                 project_dir: Path) -> None:
    conv = agent_session_project(project_dir, 12, 6, "long")
    window, controller, panel = inspect(qtbot, project_dir, conv)
    delegate, model = window.transcript.delegate, window.transcript_model
    assert all(delegate.dimmed(r) is None for r in model.rows())  # off until asked
    panel.model_view.setChecked(True)
    decided = {r[1]: r[2] for r in panel.rows()}
    left_out = {"dropped", "digested", "summarized", "excluded"}
    dimmed = 0
    for row in model.rows():
        ids = [present(row.message).id] + ([row.result.id] if row.result is not None else [])
        expected = all(decided[i] in left_out for i in ids)
        assert (delegate.dimmed(row) is not None) == expected, (ids, [decided[i] for i in ids])
        dimmed += expected
    assert 0 < dimmed < model.rowCount()
    window.transcript.viewport().repaint()  # paints dimmed rows with their badge
    panel.model_view.setChecked(False)
    assert all(delegate.dimmed(r) is None for r in model.rows())


def test_since_the_last_request_shows_the_stable_prefix(qtbot: QtBot,
                                                        qloop: asyncio.AbstractEventLoop,
                                                        project_dir: Path,
                                                        llm_server: FakeLLMServer) -> None:
    from tests.helpers.fake_llm import Answer
    from tests.helpers.gui import run_until, type_and_send

    window, controller = open_window(qtbot, project_dir)
    controller.new_conversation()
    window.inspector_action.trigger()
    qtbot.waitUntil(lambda: "No request sent yet" in window.inspector.header.text(),
                    timeout=5000)
    llm_server.script(Answer("first answer", cached=1024))
    type_and_send(qtbot, window, "a first question")
    run_until(qloop, lambda: not controller.busy())
    qtbot.waitUntil(lambda: "Since the last request" in window.inspector.header.text(),
                    timeout=5000)
    text = window.inspector.header.text()
    # the request sent was system + question; the next one starts with exactly those
    assert "the first 2 of 3 messages are identical" in text
    assert "the provider read 1,024 tokens of the last one from its cache" in text
    assert "1 entry joined, 0 entries left" in text


def test_the_budget_slider_changes_what_is_kept_without_sending_anything(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer) -> None:
    conv = agent_session_project(project_dir, 12, 6, "long")
    window, controller, panel = inspect(qtbot, project_dir, conv)

    def kept() -> int:
        return sum(1 for r in panel.rows() if r[2] in ("kept", "previewed", "referenced"))

    as_is = kept()
    panel.model_view.setChecked(True)
    dimmed_as_is = sum(1 for r in window.transcript_model.rows()
                       if window.transcript.delegate.dimmed(r))
    panel.slider.setValue(30)
    qtbot.waitUntil(lambda: "Preview at" in panel.header.text(), timeout=5000)
    assert kept() < as_is and "nothing is sent" in panel.header.text()
    dimmed_small = sum(1 for r in window.transcript_model.rows()
                       if window.transcript.delegate.dimmed(r))
    assert dimmed_small > dimmed_as_is  # the model view follows the slider
    panel.slider.setValue(200)
    qtbot.waitUntil(lambda: kept() > as_is, timeout=5000)
    panel.slider.setValue(100)
    qtbot.waitUntil(lambda: "Preview at" not in panel.header.text(), timeout=5000)
    assert kept() == as_is
    assert llm_server.requests == []  # none of it reached the provider


def test_a_sent_request_can_be_picked_and_shows_what_was_sent_then(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer) -> None:
    from tests.helpers.fake_llm import Answer
    from tests.helpers.gui import run_until, type_and_send

    window, controller = open_window(qtbot, project_dir)
    controller.new_conversation()
    panel = window.inspector
    window.inspector_action.trigger()
    for text in ("first question", "second question"):
        llm_server.script(Answer(f"answer to {text}"))
        type_and_send(qtbot, window, text)
        run_until(qloop, lambda: not controller.busy())
    qtbot.waitUntil(lambda: panel.picker.count() == 3, timeout=5000)
    live = len(panel.rows())
    panel.picker.setCurrentIndex(2)  # the older of the two sent
    qtbot.waitUntil(lambda: "Sent at" in panel.header.text(), timeout=5000)
    assert "2 messages" in panel.header.text()  # system prompt + the first question
    assert [r[3] for r in panel.rows()] == ["user"] and live == 4
    assert not panel.slider.isEnabled()
    panel.picker.setCurrentIndex(0)
    qtbot.waitUntil(lambda: len(panel.rows()) == live, timeout=5000)
    assert len(llm_server.requests) == 2  # looking sent nothing


def test_the_bar_follows_the_draft_as_it_is_typed(qtbot: QtBot, qloop: asyncio.AbstractEventLoop,
                                                  project_dir: Path,
                                                  llm_server: FakeLLMServer) -> None:
    conv = agent_session_project(project_dir, 3, 6, "short")
    window, controller, panel = inspect(qtbot, project_dir, conv)
    assert dict(panel.bar.parts)["draft"] == 0
    rows_before = panel.rows()
    qtbot.keyClicks(window.composer.editor, "a draft of some length " * 20)
    qtbot.waitUntil(lambda: dict(panel.bar.parts)["draft"] > 50, timeout=3000)
    free = dict(panel.bar.parts)["free"]
    window.composer.set_text("")
    qtbot.waitUntil(lambda: dict(panel.bar.parts)["draft"] == 0, timeout=3000)
    assert panel.rows() == rows_before and llm_server.requests == []
    assert free >= 0


def test_the_decisions_follow_the_draft_before_it_is_sent(qtbot: QtBot,
                                                          qloop: asyncio.AbstractEventLoop,
                                                          project_dir: Path,
                                                          llm_server: FakeLLMServer) -> None:
    conv = agent_session_project(project_dir, 12, 6, "long")
    window, controller, panel = inspect(qtbot, project_dir, conv)
    with Project.open(project_dir, read_only=True) as p:
        entries = len(p.conversations.load(conv).messages)
    sent_before = sum(1 for r in panel.rows() if r[2] in ("kept", "previewed", "referenced"))
    window.composer.set_text("Please also check the parser for off-by-one errors. " * 500)
    qtbot.waitUntil(lambda: "With your draft" in panel.header.text(), timeout=5000)
    draft_row = [r for r in panel.rows() if r[0] == entries + 1]
    assert len(draft_row) == 1 and draft_row[0][2] == "kept" and draft_row[0][3] == "user"
    # the bar shows the draft as its own part, with the draft's one count, and not again
    # inside the history
    parts = dict(panel.bar.parts)
    assert parts["draft"] == draft_row[0][5] == controller.meter.draft_figure()
    used = re.search(r"([\d,]+) of [\d,]+ usable tokens", panel.header.text())
    assert used is not None
    assert sum(t for name, t in parts.items() if name not in ("free", "reserved")) == \
        int(used.group(1).replace(",", ""))
    # a long draft takes room: fewer earlier entries are sent whole
    sent_now = sum(1 for r in panel.rows() if r[2] in ("kept", "previewed", "referenced"))
    assert sent_now - 1 < sent_before
    assert llm_server.requests == []  # nothing was sent
    window.composer.set_text("")
    qtbot.waitUntil(lambda: "With your draft" not in panel.header.text(), timeout=5000)
    assert not [r for r in panel.rows() if r[0] == entries + 1]


def test_the_decisions_keep_their_place_while_the_request_stays_the_same(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path) -> None:
    conv = agent_session_project(project_dir, 12, 6, "long")
    window, controller, panel = inspect(qtbot, project_dir, conv)
    middle = panel.model.index(len(panel.rows()) // 2, 1)
    panel.table.setCurrentIndex(middle)
    panel.table.scrollTo(middle)
    scrolled = panel.table.verticalScrollBar().value()
    assert scrolled > 0
    panel.model_view.setChecked(True)  # the panel shows the same request again
    assert panel.table.currentIndex().row() == middle.row()
    assert panel.table.verticalScrollBar().value() == scrolled


def test_a_pin_and_an_exclusion_show_in_the_model_view_as_the_request_has_them(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path) -> None:
    """Exclude an assistant message that called a tool: its card is dimmed (the call and its
    result are left out together), and the header counts the two entries, not the annotations
    that said so; a pin adds no "excluded" at all."""
    from tests.helpers.gui import run_until
    from ui.transcript_model import RowKind

    conv = agent_session_project(project_dir, 3, 6, "short")
    window, controller, panel = inspect(qtbot, project_dir, conv)
    delegate, model = window.transcript.delegate, window.transcript_model
    panel.model_view.setChecked(True)
    assert "excluded" not in panel.header.text()
    card = next(r for r in model.rows() if r.kind is RowKind.TOOL and r.result is not None)
    user = next(r for r in model.rows() if r.message is not None and r.message.role == "user")
    controller.inspector.annotate([present(user.message).id], "pin")
    run_until(qloop, lambda: "the history changed" in panel.header.text())  # built again
    assert "excluded" not in panel.header.text()  # the pin's annotation is no entry
    # the message, not its result
    controller.inspector.annotate([present(card.message).id], "exclude")
    run_until(qloop, lambda: "2 excluded" in panel.header.text())
    card = next(r for r in model.rows() if r.kind is RowKind.TOOL and r.result is not None)
    assert delegate.dimmed(card) == "excluded"
    window.transcript.viewport().repaint()  # the label fits between the title and the meta


def test_the_digest_row_opens_the_digest_as_the_request_sends_it(qtbot: QtBot,
                                                                 qloop: asyncio.AbstractEventLoop,
                                                                 project_dir: Path) -> None:
    # The digest is no entry of the log: a click on its row opens its text (it used to select
    # the transcript's first row, as if the digest were the first message).
    conv = agent_session_project(project_dir, 12, 6, "long")
    window, _controller, panel = inspect(qtbot, project_dir, conv)
    before = window.transcript.currentIndex()
    at = next(n for n, r in enumerate(panel.rows()) if r[2] == "synthetic" and not r[1])
    panel.table.clicked.emit(panel.model.index(at, 1))
    viewer = window.findChild(OutputViewer, "output_viewer")
    assert viewer is not None and viewer.isVisible()
    assert viewer.windowTitle() == "The context digest"
    assert viewer.view.toPlainText().startswith("[Context digest: ")
    assert "pytest tests/test_0.py → ok" in viewer.view.toPlainText()
    assert window.transcript.currentIndex() == before
    viewer.close()


def test_agents_md_shows_with_its_tokens_and_is_switched_off_for_one_conversation(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path) -> None:
    conv = agent_session_project(project_dir, 2, 2, "short")  # no compaction either way
    (project_dir / "AGENTS.md").write_text("Always answer in French. " * 20, encoding="utf-8")
    window, controller, panel = inspect(qtbot, project_dir, conv)
    report = controller.meter.report
    assert report is not None and report.instructions_sent
    tokens = report.shown(report.totals["instructions"])
    assert panel.instructions.isVisible() and panel.instructions.isChecked()
    assert panel.instructions.text() == \
        f"AGENTS.md · {tokens:,} tokens"
    assert dict(panel.bar.parts)["instructions"] == tokens
    assert "project instructions" in window.usage.toolTip()
    used = report.used
    panel.instructions.click()  # off, for this conversation only
    qtbot.waitUntil(lambda: controller.meter.report is not None
                    and not controller.meter.report.instructions_sent, timeout=5000)
    assert controller.meter.report is not None
    assert controller.meter.report.used == used - report.totals["instructions"]
    assert not panel.instructions.isChecked()
    assert panel.instructions.text() == "AGENTS.md · off"
    assert "not sent in this conversation" in panel.instructions.toolTip()
    assert dict(panel.bar.parts)["instructions"] == 0
    with Project.open(project_dir, read_only=True) as p:
        assert p.conversations.meta(conv).project_instructions is False
    panel.instructions.click()  # and on again
    qtbot.waitUntil(lambda: controller.meter.report is not None
                    and controller.meter.report.instructions_sent, timeout=5000)
    assert controller.meter.report is not None
    assert controller.meter.report.used == used


def test_an_agents_md_written_while_the_window_is_open_is_counted_at_once(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path) -> None:
    conv = agent_session_project(project_dir, 2, 2, "short")
    window, controller = open_window(qtbot, project_dir)
    controller.show_conversation(conv)
    qtbot.waitUntil(lambda: controller.meter.report is not None, timeout=5000)
    assert controller.meter.report is not None
    assert not controller.meter.report.instructions
    (project_dir / "AGENTS.md").write_text("Use tabs.", encoding="utf-8")
    qtbot.waitUntil(lambda: controller.meter.report is not None
                    and controller.meter.report.instructions_sent, timeout=5000)
    assert controller.meter.report is not None
    tokens = controller.meter.report.totals["instructions"]
    (project_dir / "AGENTS.md").write_text("Use tabs. " * 50, encoding="utf-8")
    qtbot.waitUntil(lambda: controller.meter.report is not None
                    and controller.meter.report.totals["instructions"] > tokens + 50,
                    timeout=5000)
    (project_dir / "AGENTS.md").unlink()
    qtbot.waitUntil(lambda: controller.meter.report is not None
                    and not controller.meter.report.instructions, timeout=5000)

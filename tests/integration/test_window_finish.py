"""Issue 51, the window's finish: the rough edges a new user met, one test each (geometry for the
layout ones: the window never leaves the screen's available area, the list keeps its width)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from PySide6.QtCore import QRect
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from tests.helpers.fake_llm import FakeLLMServer
from tests.helpers.gui import open_window
from tests.helpers.present import present
from ui.main_window import LIST_MIN_WIDTH, MainWindow

pytestmark = pytest.mark.gui


def available(window: MainWindow) -> QRect:
    screen = window.screen()
    assert screen is not None
    return screen.availableGeometry()


def fits(window: MainWindow) -> bool:
    area = available(window)
    return window.width() <= area.width() and window.height() <= area.height()


def test_chips_a_paste_and_two_panels_keep_the_window_on_screen_and_the_list_wide(
        qtbot: QtBot, project_dir: Path) -> None:
    window, _controller = open_window(qtbot, project_dir)
    area = available(window)
    window.resize(area.width(), area.height() - 40)
    qtbot.waitUntil(lambda: window.width() == area.width())
    list_width = window.conversations.width()
    window.composer.set_attachments([
        (f"src/a_rather_long_module_name_number_{n}.py · 12,345 bytes · 3,456 tokens", "tip")
        for n in range(6)])
    qtbot.wait(50)
    assert fits(window)
    assert window.conversations.width() == list_width
    window.composer._hold("x" * 2_200_000)  # the held paste's chip
    qtbot.wait(50)
    assert fits(window)
    assert window.conversations.width() == list_width
    window.inspector_action.trigger()
    window.run_panel_action.trigger()
    qtbot.wait(100)
    assert fits(window)
    assert window.conversations.width() >= LIST_MIN_WIDTH


def test_the_list_gets_its_width_back_after_the_window_was_small(qtbot: QtBot,
                                                                 project_dir: Path) -> None:
    window, _controller = open_window(qtbot, project_dir)
    panels = (window.inspector_action, window.run_panel_action)
    window.resize(1100, 700)
    qtbot.waitUntil(lambda: window.width() == 1100)
    kept = window.conversations.width()
    for width, height in ((760, 560), (1100, 700)):
        for action in panels:  # both panels open, then closed again
            action.trigger()
        qtbot.wait(50)
        for action in panels:
            action.trigger()
        window.resize(width, height)

        def at_width(width: int = width) -> bool:
            return window.width() == width

        qtbot.waitUntil(at_width)
        for action in panels:
            action.trigger()
        qtbot.wait(50)
        assert window.conversations.width() >= LIST_MIN_WIDTH
    for action in panels:
        action.trigger()
    qtbot.wait(50)
    assert window.conversations.width() == kept  # the width given up came back


def test_a_header_never_draws_its_title_over_the_status(qtbot: QtBot, project_dir: Path) -> None:
    from PySide6.QtGui import QFont, QFontMetrics

    from ui.row_paint import LABEL_GAP, fit_header

    window, _controller = open_window(qtbot, project_dir)
    font = window.transcript.font()
    bold = QFont(font)
    bold.setBold(True)
    long_call = 'run_shell python3 -c "from src.calc import add, mean; print(add(2, 3), mean([1]))"'
    for header, meta, width in ((long_call, "✓ done · 0.4 s", 420),
                                ("complete_step result=SUMMARY.md written", "▸ step-2", 260),
                                ("Assistant", "openai/fake-model · 14:19 · resumed after an "
                                              "interruption", 300)):
        title, shown = fit_header(font, header, meta, width)
        used = QFontMetrics(bold).horizontalAdvance(title) + LABEL_GAP + \
            QFontMetrics(font).horizontalAdvance(shown)
        assert used <= width, (header, title, shown)
        assert title and shown  # both still say something
    assert fit_header(font, "You", "14:19", 400) == ("You", "14:19")  # room: nothing is cut
    # a header fitted once is fitted again for a bigger font (zoomed in): cut shorter, still fits
    title_before = fit_header(font, long_call, "✓ done · 0.4 s", 420)[0]
    big = QFont(font)
    big.setPointSizeF(font.pointSizeF() * 1.6)
    big_bold = QFont(big)
    big_bold.setBold(True)
    title, shown = fit_header(big, long_call, "✓ done · 0.4 s", 420)
    assert len(title) < len(title_before)
    assert QFontMetrics(big_bold).horizontalAdvance(title) + LABEL_GAP + \
        QFontMetrics(big).horizontalAdvance(shown) <= 420


def test_an_unchecked_box_shows_in_the_dark_theme(qtbot: QtBot, qapp: QApplication) -> None:
    from PySide6.QtGui import QColor
    from PySide6.QtWidgets import QCheckBox, QWidget

    from ui import palette

    palette.apply(qapp, "dark")
    try:
        holder = QWidget()
        qtbot.addWidget(holder)
        holder.setAutoFillBackground(True)
        box = QCheckBox("network", holder)
        holder.resize(120, 30)
        holder.show()
        image = holder.grab().toImage()
        background = QColor(holder.palette().window().color())
        left = box.geometry()  # the indicator: the box's first 20 pixels
        most = max(abs(QColor(image.pixel(left.x() + x, left.y() + y)).lightness()
                       - background.lightness())
                   for x in range(20) for y in range(left.height()))
        assert most >= 60  # its edge stands out of the dark
    finally:
        palette.apply(qapp, "light")


def test_a_tables_header_cells_sit_on_one_line_after_a_code_block(qapp: QApplication) -> None:
    from PySide6.QtGui import QTextDocument, QTextTable

    from ui.highlight import align_table_headers
    from ui.transcript_text import keep_line_breaks

    doc = QTextDocument()
    doc.setMarkdown(keep_line_breaks("Turn 3:\n\n```go\nx := 1\n```\n\n| File | Status | Tests |\n"
                                     "|---|---|---|\n| a.go | edited | pass |\n"))
    align_table_headers(doc)
    table = next(f for f in doc.rootFrame().childFrames() if isinstance(f, QTextTable))
    tops = []
    for col in range(3):
        cell = table.cellAt(0, col)
        assert cell.firstCursorPosition().block().text() == ["File", "Status", "Tests"][col]
        layout = doc.documentLayout()
        tops.append(layout.blockBoundingRect(cell.firstCursorPosition().block()).top())
    assert len(set(tops)) == 1  # the first sits as high as the others


def test_no_continue_the_agent_on_a_card_in_the_middle_of_a_finished_turn(
        qtbot: QtBot, project_dir: Path) -> None:
    from core.model import ConversationMessage, FunctionCall, ToolCall

    window, _controller = open_window(qtbot, project_dir)
    model = window.transcript_model
    model.set_messages([ConversationMessage(role="user", content="fix it")])
    calls = [ToolCall(id=f"c{n}", function=FunctionCall(name="read_file",
                                                        arguments=f'{{"path": "f{n}"}}'))
             for n in range(2)]
    model.append_message(ConversationMessage(role="assistant", tool_calls=calls))
    for call in calls:  # the round's two results, as they arrive
        model.append_message(ConversationMessage(role="tool", tool_call_id=call.id,
                                                 content="text"))
    model.append_message(ConversationMessage(role="assistant", content="Done."))
    delegate = window.transcript.delegate
    for n, row in enumerate(model.rows()[:-1]):
        actions = [a for a, _ in delegate.layout(row, 600, window.transcript.font()).actions]
        assert "continue" not in actions, n


def test_a_stopped_answer_reads_as_markdown_as_it_did_while_streaming(qtbot: QtBot,
                                                                      project_dir: Path) -> None:
    from core.model import ConversationMessage, ErrorInfo

    window, _controller = open_window(qtbot, project_dir)
    model = window.transcript_model
    partial = "# Heading\n\nSome **bold** text\n\n- item one\n- item two"
    model.set_messages([
        ConversationMessage(role="user", content="tell me"),
        ConversationMessage(role="assistant", kind="error", content=partial, status="aborted",
                            error=ErrorInfo(type="stopped", partial=True,
                                            message="Stopped by you"))])
    row = model.rows()[-1]
    doc = window.transcript.delegate.layout(row, 600, window.transcript.font()).doc
    text = doc.toPlainText()
    assert "**" not in text and "# Heading" not in text
    assert "Heading" in text and "bold" in text
    assert doc.firstBlock().blockFormat().headingLevel() == 1


def test_the_help_menu_lists_the_keys_where_data_lives_and_the_versions(qtbot: QtBot,
                                                                        project_dir: Path) -> None:
    import PySide6
    from PySide6.QtWidgets import QMenu, QMessageBox

    from ui.help_menu import shortcut_rows

    window, _controller = open_window(qtbot, project_dir)
    menus = [a.text().replace("&", "") for a in window.menuBar().actions()]
    assert menus[-1] == "Help"
    help_menu = window.menuBar().actions()[-1].menu()
    assert isinstance(help_menu, QMenu)
    entries = {a.text().replace("&", ""): a for a in help_menu.actions() if a.text()}
    entries["Keyboard shortcuts"].trigger()
    entries["Where your data lives"].trigger()
    entries["About Context Workbench"].trigger()
    boxes = [b for b in window.findChildren(QMessageBox) if b.objectName() == "help"]
    assert [b.windowTitle() for b in boxes] == ["Keyboard shortcuts", "Where your data lives",
                                                "About Context Workbench"]
    keys, data, about = (b.text() for b in boxes)
    assert "Ctrl+Enter" in keys and "Ctrl+Shift+R" in keys and "Regenerate the last answer" in keys
    for mode_keys, mode in (("Ctrl+1", "Chat"), ("Ctrl+2", "Agent"), ("Ctrl+3", "Run")):
        assert f"<b>{mode_keys}</b>&nbsp;&nbsp;</td><td>{mode} mode" in keys  # the mode switcher
    # a paused run's Resume and Redo step do not share Alt+R (the key would only move focus)
    window.run_panel.set_busy(False)
    rows = shortcut_rows(window)
    assert ("Alt+U", "Resume (in the Run panel)") in rows
    taken = [k for k, _ in rows]
    assert len(taken) == len(set(taken)), sorted(k for k in taken if taken.count(k) > 1)
    assert str(project_dir / ".workbench") in data
    assert PySide6.__version__ in about and "litellm" in about
    for box in boxes:
        box.close()


def test_file_dialogs_start_in_the_project_then_where_the_user_went(
        qtbot: QtBot, project_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from PySide6.QtWidgets import QFileDialog, QWidget

    window, controller = open_window(qtbot, project_dir)
    starts: list[str] = []
    elsewhere = tmp_path / "exports"

    def fake_open(parent: QWidget | None, caption: str, start: str,
                  *rest: object) -> tuple[str, str]:
        starts.append(start)
        return str(elsewhere / "chat.json"), ""

    def fake_save(parent: QWidget | None, caption: str, start: str,
                  *rest: object) -> tuple[str, str]:
        starts.append(start)
        return str(elsewhere / "out.md"), "Markdown (*.md)"

    def fake_many(parent: QWidget | None, caption: str, start: str,
                  *rest: object) -> tuple[list[str], str]:
        starts.append(start)
        return [], ""

    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(fake_open))
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(fake_save))
    monkeypatch.setattr(QFileDialog, "getOpenFileNames", staticmethod(fake_many))
    window.blockSignals(True)  # only where the dialogs open is looked at here
    window.import_action.trigger()
    window.import_action.trigger()
    controller.new_conversation()
    monkeypatch.setattr(window.conversations, "current_title",
                        lambda: "Fix tests/test_calc.py: mean()")
    window.export_action.trigger()
    window.export_action.trigger()
    window.composer.choose_files(window.folders)
    window.blockSignals(False)
    assert starts[0] == str(project_dir)  # the project, not the folder the app started in
    assert starts[1] == str(elsewhere)  # then the last folder chosen
    assert starts[2] == str(project_dir / "Fix tests-test_calc.py- mean().json")
    assert starts[3].startswith(str(elsewhere))
    assert starts[4] == str(project_dir)  # attaching: its own last folder, first the project


def test_a_401_from_a_custom_server_says_its_sentence_and_offers_settings(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer) -> None:
    from tests.helpers.fake_llm import HttpError
    from tests.helpers.gui import run_until, type_and_send, use_fake_provider
    from ui.transcript_model import RowKind

    use_fake_provider(monkeypatch, llm_server)
    llm_server.script(HttpError(401, "Invalid API key provided", code="invalid_api_key",
                                type="invalid_request_error"))
    window, controller = open_window(qtbot, project_dir)
    controller.new_conversation()
    type_and_send(qtbot, window, "hello")
    model = window.transcript_model
    run_until(qloop, lambda: any(r.kind is RowKind.ERROR for r in model.rows()))
    row = next(r for r in model.rows() if r.kind is RowKind.ERROR)
    assert row.message is not None and row.message.error is not None
    assert row.message.error.type == "auth"
    assert '"Invalid API key provided"' in row.message.error.message
    actions = [a for a, _ in window.transcript.delegate.layout(
        row, 600, window.transcript.font()).actions]
    assert "settings" in actions


def test_settings_window_note_follows_the_field_the_provider_and_forget(qtbot: QtBot,
                                                                        project_dir: Path) -> None:
    from core.settings import GlobalSettings, ProviderEntry, SettingsStore

    SettingsStore().save(GlobalSettings(active_provider="OpenAI-compatible server", providers=[
        ProviderEntry(name="OpenAI-compatible server", model="openai/fake-model",
                      api_base="http://127.0.0.1:9/v1"),
        ProviderEntry(name="OpenAI", model="gpt-4.1", key_name="openai")]))
    window, controller = open_window(qtbot, project_dir)
    # learned from that server (a limit is the server's, not the model name's everywhere)
    controller.calibration.remember_window("openai/fake-model", 6000, "http://127.0.0.1:9/v1")
    controller.settings_flow.open()
    dialog = controller.settings_flow.dialog
    assert dialog is not None
    note = dialog.window_applied
    assert "6,000" in note.text()  # the limit the provider stated
    dialog.forget_button.click()
    assert "6,000" not in note.text()  # forgotten: no longer quoted
    dialog.context_window.setValue(16000)
    assert "Requests are built for 16,000 tokens" in note.text()
    dialog.preset.setCurrentIndex(dialog.preset.findText("OpenAI"))
    assert "16,000" not in note.text() and "Requests are built for" in note.text()
    dialog.reject()


def test_settings_lays_out_its_notes_whole_without_overlap_and_keeps_its_place(
        qtbot: QtBot, project_dir: Path) -> None:
    from PySide6.QtWidgets import QCheckBox, QLabel

    window, controller = open_window(qtbot, project_dir)
    controller.calibration.remember_window("openai/fake-model", 6000)
    controller.calibration.remember_window("openai/other-model", 9000)
    controller.settings_flow.mcp_states = lambda: [("notes", "python3 notes.py", "ready"),
                                                   ("docs", "https://example.com", "failed")]
    controller.settings_flow.open()
    dialog = controller.settings_flow.dialog
    assert dialog is not None
    dialog.set_protection("bubblewrap sandbox: only the project folder is writable, the "
                          "network is off unless the conversation allows it, /run hidden")
    qtbot.waitUntil(dialog.isVisible)
    qtbot.wait(50)
    area = available(window)
    assert dialog.frameGeometry().height() <= area.height()
    ys = []
    for name in ("OpenAI", "Anthropic", "Ollama (local)", "OpenAI-compatible server"):
        dialog.preset.setCurrentIndex(dialog.preset.findText(name))
        qtbot.wait(20)
        ys.append(dialog.preset.mapTo(dialog, dialog.preset.rect().topLeft()).y())
        widgets: list[QLabel | QCheckBox] = [*dialog.findChildren(QLabel),
                                             *dialog.findChildren(QCheckBox)]
        shown = [w for w in widgets
                 if w.isVisible()
                 and w.parent() is not None and w.text()]
        for w in shown:
            if isinstance(w, QLabel) and w.wordWrap():  # a note gets the height its lines need
                assert w.height() >= w.heightForWidth(w.width()), (name, w.text()[:40])
            elif isinstance(w, QCheckBox):  # a check box's label is not cut
                assert w.width() >= w.sizeHint().width(), (name, w.text()[:40])
        rects = sorted((w.mapTo(dialog, w.rect().topLeft()).y(), w.height(), w.text()[:30])
                       for w in shown if isinstance(w, QLabel) and w.wordWrap())
        for (y1, h1, t1), (y2, _h2, t2) in zip(rects, rects[1:], strict=False):
            assert y1 + h1 <= y2, (t1, t2)  # no note drawn over the next
    assert len(set(ys)) == 1  # the Provider box stays under the mouse
    dialog.reject()


def test_the_list_counts_messages_not_marks_and_numbers_branches_of_branches(
        qtbot: QtBot, project_dir: Path) -> None:
    from core.model import ConversationMessage, annotation
    from core.store.project import Project

    with Project.open(project_dir) as p:
        conv = p.conversations.create("The tests in tests/test_calc.py fail")
        entries = [ConversationMessage(role="user" if n % 2 == 0 else "assistant",
                                       content=f"message {n}") for n in range(4)]
        p.conversations.append_many(conv.id, entries)
        p.conversations.append_many(conv.id, [annotation(entries[1].id, "exclude"),
                                              annotation(entries[1].id, "include")])
        first = p.conversations.fork(conv.id, entries[1].id)
        second = p.conversations.fork(first.id, entries[0].id)
        assert first.title == "The tests in tests/test_calc.py fail (branch 1)"
        assert second.title == "The tests in tests/test_calc.py fail (branch 2)"
    window, _controller = open_window(qtbot, project_dir)
    items = window.conversations.list
    origin = present(items.topLevelItem(0))
    assert origin.text(0).endswith("· 4 messages")  # the exclude and include are no messages
    texts = []
    stack = [present(origin.child(i)) for i in range(origin.childCount())]
    while stack:
        item = stack.pop()
        texts.append(item.text(0))
        stack += [present(item.child(i)) for i in range(item.childCount())]
    assert sorted(t.split("\n")[0] for t in texts) == ["↳ (branch 1)", "↳ (branch 2)"]
    assert any(t.endswith("· 1 message") for t in texts)  # one message, not "1 messages"


def test_an_mcp_config_changed_while_open_is_said_with_reload(
        qtbot: QtBot, project_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    window, controller = open_window(qtbot, project_dir)
    controller.new_conversation()
    qtbot.waitUntil(lambda: controller.meter.report is not None, timeout=10_000)
    controller.refresh_usage()
    qtbot.waitUntil(lambda: controller.mcp_watch._hub is not None, timeout=10_000)
    assert not window.notice.isVisible()
    config = project_dir / ".workbench" / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"notes": {"command": "python3"}}}))
    controller.refresh_usage()  # the next build (a keystroke, a switch) looks
    qtbot.waitUntil(window.notice.isVisible, timeout=10_000)
    assert "mcp.json changed since this project was opened" in window.notice_label.text()
    assert window.notice_button.text() == "Reload"
    reopened: list[bool] = []
    monkeypatch.setattr(controller.mcp_watch, "reopen", lambda: reopened.append(True))
    window.notice_button.click()
    assert reopened == [True] and not window.notice.isVisible()


def test_an_automatic_summary_that_would_save_little_is_skipped_and_said(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer) -> None:
    from core.model import ConversationMessage
    from core.store.project import Project
    from core.turn_events import CompactionFinished
    from tests.helpers.fake_llm import Answer
    from tests.helpers.gui import run_until, use_fake_provider

    use_fake_provider(monkeypatch, llm_server)
    with Project.open(project_dir) as p:
        conv = p.conversations.create("small")
        p.conversations.append_many(conv.id, [
            ConversationMessage(role="user" if n % 2 == 0 else "assistant",
                                content=f"short message number {n} about the calculator")
            for n in range(24)])
    llm_server.script(Answer("A summary of the calculator talk."))
    window, controller = open_window(qtbot, project_dir)
    controller.show_conversation(conv.id)
    done: list[CompactionFinished] = []
    controller.compaction.finished.connect(done.append)
    controller.compaction.compact(automatic=True)
    run_until(qloop, lambda: bool(done))
    assert done[0].status == "skipped", done[0]
    assert not [r for r in llm_server.requests if "messages" in r.body]  # no request for it
    assert window.state_label.text().startswith("No automatic summary: only ")


def test_a_local_servers_stated_window_is_used_before_the_first_send(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer) -> None:
    from tests.helpers.gui import run_until, use_fake_provider

    use_fake_provider(monkeypatch, llm_server)
    llm_server.info["/v1/models"] = {"data": [{"id": "test-model", "max_model_len": 32_768}]}
    window, controller = open_window(qtbot, project_dir)
    controller.new_conversation()
    run_until(qloop, lambda: controller.meter.report is not None
              and controller.meter.report.window == 32_768)
    assert not [r for r in llm_server.requests if "messages" in r.body]  # nothing was sent
    assert "/v1/models" in llm_server.probes


def test_editing_an_earlier_message_counts_the_branch_being_made(qtbot: QtBot,
                                                                 project_dir: Path) -> None:
    from core.model import ConversationMessage
    from core.store.project import Project

    with Project.open(project_dir) as p:
        conv = p.conversations.create("long")
        entries = [ConversationMessage(role="user" if n % 2 == 0 else "assistant",
                                       content=f"message {n}: " + "words of history " * 40)
                   for n in range(20)]
        p.conversations.append_many(conv.id, entries)
    window, controller = open_window(qtbot, project_dir)
    controller.show_conversation(conv.id)
    window.inspector_action.trigger()
    qtbot.waitUntil(lambda: controller.meter.report is not None, timeout=10_000)
    whole = controller.meter.report
    assert whole is not None
    assert whole.totals["history"] > 2000
    controller.branches.edit(entries[2].id)  # as a double-click on the second message does
    qtbot.waitUntil(lambda: controller.meter.report is not None
                    and controller.meter.report is not whole, timeout=10_000)
    branch = controller.meter.report
    assert branch is not None
    assert branch.totals["history"] < whole.totals["history"] // 5  # two entries, not twenty
    assert len(window.inspector.rows()) <= 3  # two kept entries (and the draft)
    controller.branches.cancel_edit()
    qtbot.waitUntil(lambda: controller.meter.report is not None
                    and controller.meter.report.totals["history"] == whole.totals["history"],
                    timeout=10_000)


def test_the_list_meter_and_inspector_follow_an_agent_turn_as_it_goes(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer) -> None:
    from PySide6.QtCore import Qt

    from tests.helpers.fake_llm import Answer, ToolCalls
    from tests.helpers.gui import run_until, type_and_send, use_fake_provider
    from ui.approval_dialog import ApprovalDialog

    use_fake_provider(monkeypatch, llm_server)
    project_dir.mkdir(parents=True, exist_ok=True)
    (project_dir / "notes.md").write_text("# Notes\n" + "a line of notes\n" * 50)
    llm_server.script(ToolCalls([("r", "read_file", '{"path": "notes.md"}')]),
                      ToolCalls([("w", "write_file", '{"path": "x.txt", "content": "x"}')]),
                      Answer("done"))
    window, controller = open_window(qtbot, project_dir)
    qtbot.mouseClick(window.mode_switcher.buttons["agent"], Qt.MouseButton.LeftButton)
    window.inspector_action.trigger()
    type_and_send(qtbot, window, "read the notes, then write x")

    def asking() -> ApprovalDialog | None:
        found = [d for d in window.findChildren(ApprovalDialog) if d.isVisible()]
        return found[0] if found else None

    run_until(qloop, lambda: asking() is not None)  # mid-turn: the second round waits

    run_until(qloop, lambda: " 0 messages" not in present(window.conversations.list.topLevelItem(0))
              .text(0) and controller.meter.report is not None
              and controller.meter.report.totals["history"] > 0)
    assert controller.busy()  # still the same turn
    assert "none yet" not in window.inspector.header.text()
    qtbot.keyClick(asking(), Qt.Key.Key_Escape)
    run_until(qloop, lambda: not controller.busy())



def test_a_summarys_size_reads_right() -> None:
    from core.summarize import article

    assert [f"{article(n)} {n:,}" for n in (86, 92, 8, 11, 18_000, 11_500, 180, 800_000, 1_800)
            ] == ["an 86", "a 92", "an 8", "an 11", "an 18,000", "an 11,500", "a 180",
                  "an 800,000", "a 1,800"]


def test_a_budget_preview_does_not_call_its_budget_your_setting(qtbot: QtBot,
                                                                project_dir: Path) -> None:
    from core.model import ConversationMessage
    from core.store.project import Project

    with Project.open(project_dir) as p:
        conv = p.conversations.create("some")
        p.conversations.append_many(conv.id, [
            ConversationMessage(role="user" if n % 2 == 0 else "assistant",
                                content=f"message {n} " + "text " * 30) for n in range(10)])
    window, controller = open_window(qtbot, project_dir)
    controller.show_conversation(conv.id)
    window.inspector_action.trigger()
    qtbot.waitUntil(lambda: controller.meter.report is not None, timeout=10_000)
    window.inspector.slider.setValue(25)
    qtbot.waitUntil(lambda: window.inspector.header.text().startswith("Preview at"),
                    timeout=10_000)
    header = window.inspector.header.text()
    assert "(your setting)" not in header
    assert "(the budget asked for, not a window)" in header


def test_a_short_window_with_the_inspector_keeps_its_height_and_the_header_whole(
        qtbot: QtBot, project_dir: Path) -> None:
    window, controller = open_window(qtbot, project_dir)
    controller.new_conversation()
    window.resize(780, 540)
    qtbot.waitUntil(lambda: window.height() == 540)
    window.inspector_action.trigger()
    window.run_panel_action.trigger()
    window.inspector_action.trigger()  # off and on: the Inspector in front
    window.inspector_action.trigger()
    qtbot.waitUntil(lambda: controller.meter.report is not None, timeout=10_000)
    qtbot.wait(100)
    assert window.height() == 540 and fits(window)  # the panel scrolls; the window stays
    header = window.inspector.header
    assert header.height() >= header.heightForWidth(header.width())


def test_a_small_screen_gets_the_whole_window_and_a_whole_side_panel(
        qtbot: QtBot, project_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from PySide6.QtCore import QSize

    window, controller = open_window(qtbot, project_dir)
    controller.new_conversation()
    area = available(window)
    qtbot.waitUntil(lambda: window.isVisible())
    assert fits(window)
    if area.width() < 1024 or area.height() < 700:  # 800x600 and the like
        # not 720 px: room for a panel beside the list (the frame, where there is one, on it)
        assert window.frameGeometry().width() == area.width()
    # A window manager's frame around it (its title bar): the frame, too, stays on the screen.
    frame = QSize(2, 25)
    before = window.width()
    monkeypatch.setattr(window, "frameGeometry", lambda: QRect(window.pos(), window.size() + frame))
    window.fit_screen()
    qtbot.waitUntil(lambda: area.contains(window.frameGeometry()))
    # only the frame's room given up
    assert window.width() >= min(before, area.width() - frame.width())
    for action, dock in ((window.inspector_action, window.inspector),
                         (window.run_panel_action, window.run_panel)):
        action.trigger()
        qtbot.waitUntil(dock.isVisible)
        qtbot.wait(100)
        body = dock.widget()
        assert body is not None
        inner = body.widget() if hasattr(body, "widget") else body  # the Inspector scrolls
        shown = body.viewport().width() if hasattr(body, "viewport") else body.width()
        assert shown >= inner.minimumSizeHint().width(), dock.objectName()  # nothing cut off
        assert dock.geometry().right() <= window.rect().right()  # inside the window
        assert fits(window)
        assert window.conversations.width() >= LIST_MIN_WIDTH
        right = window.splitter.widget(1)
        assert right is not None and right.width() >= right.minimumSizeHint().width()
        action.trigger()


def test_a_frame_known_when_the_window_first_shows_stays_on_the_screen(
        qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the platform knows the frame from the start (Windows, macOS), no move tells of
    it: a window as large as the screen's free area is fitted, frame and all, as it shows."""
    from PySide6.QtCore import QSize

    from ui.main_window import MainWindow

    window = MainWindow()
    qtbot.addWidget(window)
    area = available(window)
    window.resize(area.size())
    frame = QSize(2, 25)
    monkeypatch.setattr(window, "frameGeometry", lambda: QRect(window.pos(), window.size() + frame))
    window.show()
    qtbot.waitUntil(lambda: area.contains(window.frameGeometry()), timeout=3000)
    assert window.height() == area.height() - frame.height()  # only the frame's room given up


def test_the_list_keeps_its_width_at_the_next_start_and_around_settings(
        qtbot: QtBot, project_dir: Path) -> None:
    window, controller = open_window(qtbot, project_dir)
    window.resize(780, 580)
    qtbot.waitUntil(lambda: window.width() == 780)
    kept = window.conversations.width()
    assert kept > LIST_MIN_WIDTH + 50  # the list's own width, not its least
    controller.settings_flow.open()  # a first start opens Settings; the user closes the app
    window.close()
    again, controller = open_window(qtbot, project_dir)  # the next start, its layout restored
    qtbot.waitUntil(lambda: again.width() == 780)
    qtbot.wait(50)
    assert again.conversations.width() == kept
    controller.settings_flow.open()
    dialog = controller.settings_flow.dialog
    assert dialog is not None
    qtbot.waitUntil(dialog.isVisible)
    assert again.conversations.width() == kept  # while Settings is open
    dialog.reject()
    qtbot.wait(50)
    assert again.conversations.width() == kept  # and after

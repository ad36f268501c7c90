"""Attachments in the window, as a user makes them: files dropped on the message box, a pasted
screenshot, chips that say what each costs (and go with a click), the meter counting them, and
the message reaching the loopback server with them; refusals said under the box, nothing lost."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, Qt, QUrl
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QApplication, QToolButton
from pytestqt.qtbot import QtBot

from app.window.controller import Controller
from core.llm.runtime import load_litellm
from core.store.project import Project
from tests.helpers.fake_llm import Answer, FakeLLMServer
from tests.helpers.gui import open_window, run_until, type_and_send
from tests.helpers.present import present
from ui.image_viewer import ImageViewer
from ui.main_window import MainWindow

pytestmark = pytest.mark.gui


@pytest.fixture(autouse=True)
def provider(monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer) -> FakeLLMServer:
    load_litellm()
    from tests.helpers.gui import use_fake_provider
    return use_fake_provider(monkeypatch, llm_server, context_window="16000")


def drop(window: MainWindow, *paths: Path) -> None:
    """What a drop of files on the message box hands the editor."""
    data = QMimeData()
    data.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    window.composer.editor.insertFromMimeData(data)


def open_on_new(qtbot: QtBot, project_dir: Path) -> tuple[MainWindow, Controller]:
    window, controller = open_window(qtbot, project_dir)
    controller.new_conversation()
    qtbot.waitUntil(lambda: controller.meter.report is not None, timeout=5000)
    return window, controller


def test_a_dropped_file_is_a_chip_counted_by_the_meter_and_sent(qtbot: QtBot,
                                                                qloop: asyncio.AbstractEventLoop,
                                                                project_dir: Path,
                                                                llm_server: FakeLLMServer) -> None:
    project_dir.mkdir()
    (project_dir / "notes.md").write_text("# Plan\n\n- parse\n- test\n" * 30, encoding="utf-8")
    window, controller = open_on_new(qtbot, project_dir)
    drop(window, project_dir / "notes.md")
    labels = window.composer.attachment_labels()
    assert len(labels) == 1 and labels[0].startswith("notes.md · 690 bytes · ")
    attached = controller.turns.attachments.current()[0]
    assert labels[0].endswith(f"· {attached.tokens:,} tokens")
    assert window.composer.send_button.isEnabled()  # a file alone may be sent
    qtbot.keyClicks(window.composer.editor, "Summarize")
    assert controller.meter.report is not None
    before = controller.meter.report.used + controller.meter.draft_tokens()
    llm_server.script(Answer("Read it."))
    window.composer.send_button.click()
    run_until(qloop, lambda: not controller.busy())
    user = llm_server.requests[-1].body["messages"][-1]
    assert user["content"][0] == {"type": "text", "text": "Summarize"}
    assert user["content"][1]["text"].startswith("Attached file notes.md (690 bytes):")
    # the meter's figure before sending is what the request counted
    assert controller.turns.last_report is not None
    assert controller.turns.last_report.used == before
    assert window.composer.attachment_labels() == []  # the box starts empty again
    shown = window.transcript_model.rows()[-2].text
    assert shown.startswith("Summarize\n\nAttached file notes.md (690 bytes):\n# Plan\n")
    assert "```" not in shown  # the fence is for the model; the row shows the file


def test_a_pasted_screenshot_goes_only_to_a_model_that_takes_images(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    window, controller = open_on_new(qtbot, project_dir)
    image = QImage(640, 480, QImage.Format.Format_RGB32)
    image.fill(QColor("#3366aa"))
    data = QMimeData()
    data.setImageData(image)
    window.composer.editor.insertFromMimeData(data)
    assert window.composer.attachment_labels()[0].startswith("pasted image 1.png · ")
    assert controller.turns.attachments.current()[0].tokens == 85 + 170 * 2  # 640x480: 2 tiles
    type_and_send(qtbot, window, "What colour?")
    assert "does not take images" in window.composer.hint.text()
    assert not llm_server.requests  # nothing left
    assert window.composer.text() == "What colour?"  # nothing lost: text and chip stay
    assert len(window.composer.attachment_labels()) == 1
    monkeypatch.setenv("WORKBENCH_IMAGES", "1")  # the user says this model reads images
    llm_server.script(Answer("Blue."))
    window.composer.editor.setFocus()
    window.composer.send_button.click()
    run_until(qloop, lambda: not controller.busy())
    part = llm_server.requests[-1].body["messages"][-1]["content"][1]
    assert part["image_url"]["url"].startswith("data:image/png;base64,")
    assert "[image: pasted image 1.png · 640×480]" in window.transcript_model.rows()[-2].text
    kept = list((project_dir / ".workbench" / "attachments").iterdir())
    assert len(kept) == 1 and kept[0].read_bytes().startswith(b"\x89PNG")
    # a thumbnail in the row, and View opens the image at its own size
    delegate = window.transcript.delegate
    qtbot.waitUntil(lambda: kept[0].name in delegate.thumbnails, timeout=5000)
    assert delegate.thumbnails[kept[0].name].width() == 160  # 640x480 fits 160x160
    row = len(window.transcript_model.rows()) - 2
    lay = delegate.layout(window.transcript_model.rows()[row], 600, window.font())
    assert ("view_image:" + kept[0].name, "View pasted image 1.png") in lay.actions
    assert lay.doc.toHtml().count("<img") == 1
    window.transcript.action_requested.emit(row, "view_image:" + kept[0].name)
    viewer = window.findChild(ImageViewer)
    assert viewer is not None and viewer.label.pixmap().width() == 640
    viewer.close()


def test_refused_files_say_why_and_a_chip_is_removed_with_a_click(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer) -> None:
    project_dir.mkdir()
    (project_dir / "a.txt").write_text("alpha", encoding="utf-8")
    (project_dir / "b.bin").write_bytes(b"\x00\x01\x02binary")
    window, controller = open_on_new(qtbot, project_dir)
    drop(window, project_dir / "a.txt", project_dir / "b.bin")
    assert [x.split(" · ")[0] for x in window.composer.attachment_labels()] == ["a.txt"]
    assert "b.bin is not a text file" in window.composer.hint.text()
    assert window.composer.hint.isVisible()  # said, not only set
    with_chip = controller.meter.draft_tokens()
    chips = window.composer.chips.findChildren(QToolButton)
    assert len(chips) == 1
    chips[0].click()
    assert window.composer.attachment_labels() == []
    assert controller.meter.draft_tokens() < with_chip
    assert not window.composer.send_button.isEnabled()


def test_attachments_wait_with_their_own_conversation(qtbot: QtBot,
                                                      qloop: asyncio.AbstractEventLoop,
                                                      project_dir: Path,
                                                      llm_server: FakeLLMServer) -> None:
    project_dir.mkdir()
    (project_dir / "a.txt").write_text("alpha", encoding="utf-8")
    with Project.open(project_dir) as p:
        other = p.conversations.create("other").id
    window, controller = open_on_new(qtbot, project_dir)
    first = controller.current_id
    assert first is not None
    drop(window, project_dir / "a.txt")
    controller.show_conversation(other)
    qtbot.waitUntil(lambda: window.composer.attachment_labels() == [], timeout=5000)
    controller.show_conversation(first)
    qtbot.waitUntil(lambda: len(window.composer.attachment_labels()) == 1, timeout=5000)


def test_project_files_leave_out_what_git_ignores(tmp_path: Path) -> None:
    from core.project_files import project_files

    root = tmp_path / "p"
    for rel in ("src/app.py", "src/gen/out.js", "build/x.o", ".git/HEAD", ".workbench/a",
                "docs/guide.md", "docs/draft.tmp", "logs/today.log"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x", encoding="utf-8")
    (root / ".gitignore").write_text("build/\n*.log\n", encoding="utf-8")
    (root / "docs" / ".gitignore").write_text("*.tmp\n", encoding="utf-8")
    (root / "src" / ".gitignore").write_text("gen/\n", encoding="utf-8")
    files, cut = project_files(root)
    assert files == [".gitignore", "docs/.gitignore", "docs/guide.md", "src/.gitignore",
                     "src/app.py"] and not cut
    assert project_files(root, limit=2) == ([".gitignore", "docs/.gitignore"], True)


@pytest.mark.qt_log_ignore("does not support raise", "does not support grabbing")  # a popup
def test_at_completes_project_paths_and_a_mention_sends_the_file_as_of_sending(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer) -> None:
    (project_dir / "src").mkdir(parents=True)
    (project_dir / "src" / "parser.py").write_text("VERSION = 1\n", encoding="utf-8")
    (project_dir / "src" / "lexer.py").write_text("TOKENS = []\n", encoding="utf-8")
    (project_dir / ".gitignore").write_text("secret.txt\n", encoding="utf-8")
    (project_dir / "secret.txt").write_text("hidden", encoding="utf-8")
    window, controller = open_on_new(qtbot, project_dir)
    editor, mentions = window.composer.editor, window.composer.mentions
    editor.setFocus()
    qtbot.keyClicks(editor, "Check @pars")
    qtbot.waitUntil(mentions.popup_open, timeout=5000)
    shown = [mentions.completer.completionModel().index(i, 0).data()
             for i in range(mentions.completer.completionCount())]
    assert shown == ["src/parser.py"]
    qtbot.keyClick(editor, Qt.Key.Key_Tab)  # Tab takes it, as Enter does
    qtbot.waitUntil(lambda: len(window.composer.attachment_labels()) == 1, timeout=5000)
    assert editor.toPlainText() == "Check @src/parser.py "
    assert QApplication.focusWidget() is not window.composer.send_button  # Tab stayed
    assert window.composer.attachment_labels()[0].startswith("src/parser.py · 12 bytes")
    # the file changes before the message leaves: what is sent is the file as it is then
    (project_dir / "src" / "parser.py").write_text("VERSION = 2\n", encoding="utf-8")
    qtbot.keyClicks(editor, "and @src/lexer.py")  # typed, not chosen
    qtbot.keyClick(editor, Qt.Key.Key_Escape)  # closes the list, if open
    qtbot.keyClick(editor, Qt.Key.Key_Space)  # the word ends: a chip, counted at once
    qtbot.waitUntil(lambda: len(window.composer.attachment_labels()) == 2, timeout=5000)
    llm_server.script(Answer("Done."))
    window.composer.send_button.click()
    run_until(qloop, lambda: not controller.busy())
    parts = llm_server.requests[-1].body["messages"][-1]["content"]
    assert parts[0]["text"] == "Check @src/parser.py and @src/lexer.py "
    assert "VERSION = 2" in parts[1]["text"] and "Attached file src/parser.py" in parts[1]["text"]
    assert "TOKENS = []" in parts[2]["text"]
    offered = mentions.paths()  # what git ignores is not offered
    assert "src/lexer.py" in offered and "secret.txt" not in offered
    assert mentions._ranked("l")[0] == "src/lexer.py"  # a name starting with it comes first
    assert mentions._ranked("p") == ["src/parser.py", "src/lexer.py"]  # then in the name


def test_settings_say_a_local_model_reads_images_per_provider(qtbot: QtBot,
                                                              qloop: asyncio.AbstractEventLoop,
                                                              project_dir: Path) -> None:
    from core.settings import GlobalSettings, ProviderEntry, SettingsStore, resolve_llm_settings

    store = SettingsStore()
    store.save(GlobalSettings(active_provider="OpenAI-compatible server", providers=[
        ProviderEntry(name="OpenAI-compatible server", model="openai/llava",
                      api_base="http://127.0.0.1:8081/v1")]))
    window, controller = open_window(qtbot, project_dir)
    controller.settings_flow.open()
    dialog = controller.settings_flow.dialog
    assert dialog is not None and not dialog.images.isChecked()
    dialog.images.setChecked(True)
    dialog.accept()
    saved = store.load()
    assert present(saved.provider("OpenAI-compatible server")).images is True
    assert resolve_llm_settings(env={}, global_settings=saved).images is True
    controller.settings_flow.open()
    dialog = controller.settings_flow.dialog
    assert dialog is not None
    assert dialog.images.isChecked()
    dialog.preset.setCurrentIndex(dialog.preset.findText("OpenAI"))  # another provider's own
    assert not dialog.images.isChecked()
    dialog.reject()


def test_the_inspector_with_a_draft_counts_its_attachments_as_the_meter_does(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer) -> None:
    project_dir.mkdir()
    (project_dir / "notes.md").write_text("- parse\n- test\n" * 40, encoding="utf-8")
    window, controller = open_on_new(qtbot, project_dir)
    window.inspector_action.trigger()
    drop(window, project_dir / "notes.md")  # a chip, no text
    attached = controller.turns.attachments.current()[0].tokens
    meter = controller.meter
    assert meter.report is not None
    shown = meter.report.provider_estimate + round(meter.draft_tokens() * meter.report.calibration)
    qtbot.waitUntil(lambda: "With your draft" in window.inspector.header.text(), timeout=5000)
    assert f"{shown:,} of " in window.inspector.header.text()
    parts = dict(window.inspector.bar.parts)
    assert parts["draft"] >= attached  # the draft's part holds its attachments
    assert parts["history"] < attached  # and the history does not count them again


def test_an_attachment_too_large_for_the_window_is_named_in_the_refusal(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer) -> None:
    project_dir.mkdir()
    (project_dir / "huge.txt").write_text("word " * 60_000, encoding="utf-8")
    window, controller = open_on_new(qtbot, project_dir)
    drop(window, project_dir / "huge.txt")
    type_and_send(qtbot, window, "read this")
    hint = window.composer.hint.text()
    assert "with its attachments this message alone is" in hint and "(huge.txt: " in hint
    assert window.composer.hint.isVisible() and not llm_server.requests
    assert window.composer.attachment_labels()  # nothing lost


def test_edit_and_resend_keeps_attachments_as_chips_and_the_draft_where_it_was(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path,
        llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_IMAGES", "1")
    project_dir.mkdir()
    (project_dir / "notes.md").write_text("- parse\n- test\n", encoding="utf-8")
    (project_dir / "draft.txt").write_text("for later\n", encoding="utf-8")
    window, controller = open_on_new(qtbot, project_dir)
    drop(window, project_dir / "notes.md")
    image = QImage(64, 48, QImage.Format.Format_RGB32)
    image.fill(QColor("#3366aa"))
    data = QMimeData()
    data.setImageData(image)
    window.composer.editor.insertFromMimeData(data)
    llm_server.script(Answer("Read both."), Answer("Read both again."))
    type_and_send(qtbot, window, "Check these")
    run_until(qloop, lambda: not controller.busy())
    first = llm_server.requests[0].body["messages"][-1]["content"]
    original = controller.current_id
    assert original is not None
    # an unsent draft of the user's own, with a chip of its own
    qtbot.keyClicks(window.composer.editor, "my own unrelated draft")
    drop(window, project_dir / "draft.txt")
    user = next(r.message for r in window.transcript_model.rows()
                if r.message is not None and r.message.role == "user")
    window.transcript.branch_action.emit(user.id, "edit")
    assert window.composer.text() == "Check these"  # the typed text only, no fenced file
    assert [a.split(" · ")[0] for a in window.composer.attachment_labels()] == [
        "notes.md", "pasted image 1.png"]
    window.composer.set_text("Check these again")
    window.composer.send_button.click()
    run_until(qloop, lambda: len(llm_server.requests) == 2 and not controller.busy())
    again = llm_server.requests[1].body["messages"][-1]["content"]
    assert again[0] == {"type": "text", "text": "Check these again"}
    assert again[1:] == first[1:]  # the file as it was sent, and the image
    assert controller.current_id != original
    window.conversations.select(original)
    assert window.composer.text() == "my own unrelated draft"  # not the text sent in the branch
    assert [a.split(" · ")[0] for a in window.composer.attachment_labels()] == ["draft.txt"]
    window.close()


@pytest.mark.qt_log_ignore("does not support raise", "does not support grabbing")  # a popup
def test_a_listed_file_made_a_link_out_or_a_fifo_before_it_is_chosen_is_refused(
        qtbot: QtBot, qloop: asyncio.AbstractEventLoop, project_dir: Path, tmp_path: Path) -> None:
    """The list is read when `@` is typed; what is chosen is read then, by the confined
    reader: a link out of the project sends nothing, a FIFO does not block the window."""
    import os

    project_dir.mkdir()
    for name in ("notes.md", "pipe.md", "zero.md"):
        (project_dir / name).write_text("x", encoding="utf-8")
    secret = tmp_path / "creds.txt"
    secret.write_text("OUTSIDE-SECRET", encoding="utf-8")
    window, controller = open_on_new(qtbot, project_dir)
    editor, mentions = window.composer.editor, window.composer.mentions
    editor.setFocus()
    link_out = "leads outside the project folder (a symbolic link)"
    for name, swap, why in (("notes.md", lambda p: p.symlink_to(secret), link_out),
                            ("pipe.md", os.mkfifo, "is a named pipe (FIFO), not a file"),
                            ("zero.md", lambda p: p.symlink_to("/dev/zero"), link_out)):
        qtbot.keyClicks(editor, f" @{name[:4]}")
        qtbot.waitUntil(mentions.popup_open, timeout=5000)
        (project_dir / name).unlink()
        swap(project_dir / name)
        qtbot.keyClick(editor, Qt.Key.Key_Tab)

        def hinted(n: str = name) -> bool:
            return n in window.composer.hint.text()

        qtbot.waitUntil(hinted, timeout=5000)
        assert f"Not attached: {name} {why}." == window.composer.hint.text()
        assert window.composer.attachment_labels() == []
        qtbot.keyClick(editor, Qt.Key.Key_Escape)

"""Import and export from the window (into the project it holds open), and a search that finds:
the conversation opens at the first match, marked, F3 / Shift+F3 move between matches, and no
match says so."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent
from pytestqt.qtbot import QtBot

from app.cli.main import main
from core.model import ConversationMessage, annotation
from core.store.project import Project
from tests.helpers.gui import open_window, run_until
from ui.main_window import MainWindow

pytestmark = pytest.mark.gui

TRIP = {"title": "Trip planning", "messages": [
    {"role": "system", "content": "You plan trips."},
    {"role": "user", "content": "Three days in Lisbon?"},
    {"role": "assistant", "content": "Day 1: Alfama. Day 2: Belém. Day 3: Sintra."}]}


def texts(window: MainWindow) -> list[str]:
    return [r.text for r in window.transcript_model.rows()]


def test_import_and_export_from_the_window(qtbot: QtBot, qloop: asyncio.AbstractEventLoop,
                                           project_dir: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    window, controller = open_window(qtbot, project_dir)
    source = tmp_path / "trip.json"
    source.write_text(json.dumps(TRIP), encoding="utf-8")
    # The window holds the project: the command line says where to import instead.
    assert main(["import", str(project_dir), str(source)]) == 1
    assert "File → Import" in capsys.readouterr().err

    window.import_requested.emit(str(source))
    run_until(qloop, lambda: "Trip planning" in window.conversations.titles()
              and controller.current_id is not None and "Three days in Lisbon?" in texts(window))
    assert "Imported 3 messages as “Trip planning”" in window.notice_label.text()
    trip = controller.current_id
    assert trip is not None

    with Project.open(project_dir, read_only=True) as p:  # a pin, to see it travel
        first_user = next(m for m in p.conversations.load(trip).messages if m.role == "user")
    controller.inspector.annotate([first_user.id], "pin")
    window.export_requested.emit(str(tmp_path / "trip-log"), "jsonl")
    exported = tmp_path / "trip-log.jsonl"
    run_until(qloop, lambda: "Exported" in window.notice_label.text())  # written aside
    assert exported.exists() and "Exported “Trip planning”" in window.notice_label.text()
    window.export_requested.emit(str(tmp_path / "trip.md"), "markdown")
    run_until(qloop, lambda: "trip.md" in window.notice_label.text())
    markdown = (tmp_path / "trip.md").read_text(encoding="utf-8")
    assert markdown.startswith("# Trip planning") and "Day 2: Belém." in markdown

    # Dropping the JSONL log on the list imports it again, entry for entry, the pin included.
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(exported))])
    tree = window.conversations.list
    tree.dropEvent(QDropEvent(QPointF(5, 5), Qt.DropAction.CopyAction, mime,
                              Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier))
    run_until(qloop, lambda: controller.current_id not in (None, trip)
              and len(window.conversations.ids()) == 3)
    copy = controller.current_id
    assert copy is not None
    with Project.open(project_dir.parent / project_dir.name, read_only=True) as p:
        a, b = p.conversations.load(trip).messages, p.conversations.load(copy).messages
    assert [m.id for m in a] == [m.id for m in b]
    assert next(m for m in b if m.id == first_user.id).pinned

    # A file that is no conversation: said plainly, nothing made.
    bad = tmp_path / "notes.json"
    bad.write_text("{not json", encoding="utf-8")
    window.import_requested.emit(str(bad))
    run_until(qloop, lambda: "Not imported" in window.notice_label.text())
    assert "notes.json is not valid JSON" in window.notice_label.text()
    assert "Nothing was created" in window.notice_label.text()
    assert len(window.conversations.ids()) == 3
    window.close()


def test_search_opens_at_the_first_match_and_f3_moves_between_them(qtbot: QtBot,
                                                                   qloop: asyncio.AbstractEventLoop,
                                                                   project_dir: Path) -> None:
    with Project.open(project_dir) as p:
        store = p.conversations
        keeper = store.create("Stories")
        lines = ["Tell me a story.", "Once upon a time.", "More.", "The lighthouse keeper woke.",
                 "And then?", "Storms came.", "Go on.", "The LIGHTHOUSE went dark."]
        msgs = [ConversationMessage(role="user" if i % 2 == 0 else "assistant", content=t)
                for i, t in enumerate(lines)]
        store.append_many(keeper.id, msgs)
        store.append(keeper.id, annotation(msgs[0].id, "pin"))
        other = store.create("Groceries")
        store.append_many(other.id, [ConversationMessage(role="user", content="milk and eggs")])
    window, controller = open_window(qtbot, project_dir)
    window.conversations.select(other.id)
    window.conversations.search.setText("lighthouse")
    run_until(qloop, lambda: window.conversations.ids() == [keeper.id])
    assert controller.current_id == other.id  # nothing opens behind the user's back ...
    window.conversations.select(keeper.id)  # ... choosing the result opens it at the match
    view, model = window.transcript, window.transcript_model
    assert view.currentIndex().row() == 3 and model.row(3).found == "lighthouse"
    assert [i for i, r in enumerate(model.rows()) if r.found] == [3, 7]
    assert "match 1 of 2" in window.notice_label.text()
    qtbot.keyClick(view, Qt.Key.Key_F3)
    assert view.currentIndex().row() == 7 and "match 2 of 2" in window.notice_label.text()
    qtbot.keyClick(view, Qt.Key.Key_F3, Qt.KeyboardModifier.ShiftModifier)
    assert view.currentIndex().row() == 3

    window.conversations.search.setText("zebra")
    run_until(qloop, lambda: window.conversations.ids() == [])
    assert not any(r.found for r in model.rows())  # the last search's marks went with it
    assert "lighthouse" not in window.notice_label.text()
    qtbot.keyClick(view, Qt.Key.Key_F3)
    assert "match" not in window.notice_label.text()
    note = window.conversations.list.topLevelItem(0)
    assert note is not None and note.text(0) == "No conversation mentions “zebra”."
    window.conversations.search.setText("")
    run_until(qloop, lambda: len(window.conversations.ids()) == 2)
    assert not any(r.found for r in model.rows())  # the marks go with the search
    window.close()

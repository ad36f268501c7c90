"""What the transcript paints while an agent runs many tools: cards that changed are drawn anew
(a kept picture of a row is never shown stale), spinners move without laying cards out again, and
every card is drawn in the end even when a paint runs out of time."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from PySide6.QtGui import QImage, QTextBlock, QTextDocument
from pytestqt.qtbot import QtBot

from core.model import ConversationMessage, FunctionCall, ToolCall
from ui import row_view
from ui.transcript_model import TranscriptModel
from ui.transcript_view import TranscriptView

pytestmark = pytest.mark.gui


def _call(n: int) -> ToolCall:
    return ToolCall(id=f"c{n}", function=FunctionCall(name="read_file",
                                                      arguments=f'{{"path": "f{n}.txt"}}'))


def _view(qtbot: QtBot, calls: int = 6) -> tuple[TranscriptView, TranscriptModel]:
    model = TranscriptModel()
    model.set_messages([
        ConversationMessage(role="user", content="read them all"),
        ConversationMessage(role="assistant", content="", tool_calls=[_call(n)
                                                                      for n in range(calls)]),
    ])
    view = TranscriptView()
    view.set_transcript_model(model)
    view.resize(700, 600)
    qtbot.addWidget(view)
    view.show()
    qtbot.waitExposed(view)
    return view, model


def _shot(view: TranscriptView) -> QImage:
    return view.viewport().grab().toImage()


def _settled(qtbot: QtBot, view: TranscriptView) -> QImage:
    """The viewport once painting has settled: no row left for a later paint, heights learnt
    (two pictures in a row alike)."""
    shots: list[QImage] = []

    def still() -> bool:
        view.viewport().repaint()
        qtbot.wait(10)
        shots.append(_shot(view))
        return not view.delegate.deferred and len(shots) > 1 and shots[-1] == shots[-2]
    qtbot.waitUntil(still, timeout=10_000)
    return shots[-1]


def test_a_card_whose_result_arrives_is_drawn_anew(qtbot: QtBot) -> None:
    view, model = _view(qtbot)
    before = _settled(qtbot, view)
    model.append_message(ConversationMessage(role="tool", tool_call_id="c0",
                                             content="the contents of f0"))
    assert _settled(qtbot, view) != before


def test_a_selected_row_looks_selected(qtbot: QtBot) -> None:
    view, _ = _view(qtbot)
    before = _settled(qtbot, view)
    view.selectionModel().select(view.model().index(0, 0),
                                 view.selectionModel().SelectionFlag.Select)
    assert _settled(qtbot, view) != before


def test_a_running_cards_spinner_moves_without_a_new_layout(qtbot: QtBot) -> None:
    view, model = _view(qtbot)
    started = time.time() - 3
    for n in range(6):
        model.tool_started(f"c{n}", started)
    before = _settled(qtbot, view)
    row = model.rows()[1]
    version = row.version
    layout = view.delegate.layout(row, view.viewport().width(), view.font())
    for n in range(6):  # two seconds later
        model.rows()[1 + n].running_since = started - 2
    assert model.tick_running()
    after = _settled(qtbot, view)
    assert after != before  # "running 3 s" became "running 5 s"
    assert row.version == version
    assert view.delegate.layout(row, view.viewport().width(), view.font()) is layout


def test_a_card_that_starts_running_shows_it_without_a_new_layout(qtbot: QtBot) -> None:
    """Forty cards start at once in an agent's round: each shows its spinner, none is laid
    out again for it (only its header's details change)."""
    view, model = _view(qtbot)
    before = _settled(qtbot, view)
    row = model.rows()[1]
    version = row.version
    layout = view.delegate.layout(row, view.viewport().width(), view.font())
    for n in range(6):
        model.tool_started(f"c{n}", time.time() - 2)
    assert _settled(qtbot, view) != before  # "waiting" became "running 2 s"
    assert row.version == version
    kept = view.delegate.layout(row, view.viewport().width(), view.font())
    assert kept is layout
    view.delegate.forget()  # what the card reads is what a new layout of it would read
    fresh = view.delegate.layout(row, view.viewport().width(), view.font())
    assert kept.doc.toPlainText() == fresh.doc.toPlainText()


def test_cards_left_for_the_next_paint_are_all_drawn(qtbot: QtBot,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    view, model = _view(qtbot, calls=12)
    full = _settled(qtbot, view)
    view.delegate.forget()  # as if these cards had just arrived
    monkeypatch.setattr(row_view, "PAINT_SLICE_S", -1.0)  # a paint out of time at once
    view.viewport().repaint()
    assert view.delegate.deferred  # the cards were left as plain bubbles
    partial = _shot(view)
    assert partial != full
    monkeypatch.undo()
    assert _settled(qtbot, view) == full


def test_an_answer_reads_as_markdown_while_it_arrives_and_keeps_its_layout(qtbot: QtBot) -> None:
    view, model = _view(qtbot, calls=1)
    model.begin_streaming()
    text = "# Plan\n\nFirst **this**, then:\n\n- one\n- two\n\n```python\nx = 1\n"
    model.add_stream_text(text)
    model.flush_stream()
    row = model.streaming_row()
    assert row is not None
    streaming = view.delegate.layout(row, 600, view.font()).doc
    assert streaming.toPlainText().startswith("Plan\n")  # a heading, not "# Plan"
    assert streaming.begin().blockFormat().headingLevel() == 1
    listed = [b for b in _blocks(streaming) if b.textList() is not None]
    assert [b.text() for b in listed] == ["one", "two"]
    model.finish_streaming(ConversationMessage(role="assistant", content=text + "```\n"))
    done = view.delegate.layout(model.row(model.rowCount() - 1), 600, view.font()).doc
    assert done.toPlainText() == streaming.toPlainText()  # the same text, the same blocks


def _blocks(doc: QTextDocument) -> Iterator[QTextBlock]:
    block = doc.begin()
    while block.isValid():
        yield block
        block = block.next()

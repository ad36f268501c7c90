"""What transcript rows show: never a cut word in a finished paragraph, the whole answer while it
streams, the user's Stop as a stop (not a failure), actions only on the latest answer."""

from __future__ import annotations

import pytest
from pytestqt.qtbot import QtBot

from core.model import ConversationMessage, ErrorInfo, FunctionCall, ToolCall
from ui.transcript_model import Row, RowKind, TranscriptModel
from ui.transcript_text import clip, header_line

pytestmark = pytest.mark.gui

PARAGRAPH = " ".join(f"word{i}" for i in range(200))  # about 1,400 characters, one line


def test_a_long_finished_paragraph_is_shown_whole() -> None:
    row = Row(RowKind.ASSISTANT, "a", text=PARAGRAPH)
    shown, hidden = clip(row, PARAGRAPH)
    assert shown == PARAGRAPH and hidden == 0


def test_a_huge_single_line_is_cut_at_a_word() -> None:
    line = " ".join(["lorem"] * 2000)
    shown, hidden = clip(Row(RowKind.ASSISTANT, "a", text=line), line)
    assert hidden >= 1 and shown.endswith("lorem …")


def test_the_streaming_row_is_never_clipped() -> None:
    text = "\n".join(f"line {i}" for i in range(500))
    shown, hidden = clip(Row(RowKind.STREAMING, "streaming", text=text), text)
    assert shown == text and hidden == 0


def test_a_stop_reads_as_a_stop() -> None:
    stopped = ConversationMessage(role="assistant", kind="error", content="half",
                                  error=ErrorInfo(type="stopped", message="Stopped by you."))
    title, _ = header_line(Row(RowKind.ERROR, stopped.id, message=stopped, text="half"))
    assert title == "■ Stopped by you" and "Error" not in title


def test_only_the_latest_row_keeps_its_actions(qtbot: QtBot) -> None:
    failed = ConversationMessage(role="assistant", kind="error", content="",
                                 error=ErrorInfo(type="provider_error", message="boom"))
    model = TranscriptModel()
    model.set_messages([ConversationMessage(role="user", content="q"), failed])
    assert not model.rows()[-1].superseded
    model.append_message(ConversationMessage(role="assistant", content="retried fine"))
    assert model.rows()[1].superseded and not model.rows()[2].superseded


def test_code_blocks_of_an_answer_can_be_copied_one_by_one() -> None:
    from ui.transcript_view import TranscriptView

    answer = ("Change it:\n\n```python\ndef parse(text):\n    return fromisoformat(text)\n```\n\n"
              "Then run:\n\n```sh\npytest -q\n```\n")
    row = Row(RowKind.ASSISTANT, "a", text=answer)
    actions = TranscriptView.code_copy_actions(row)
    assert [label for label, _ in actions] == [
        "Copy code block 1 (python): def parse(text):", "Copy code block 2 (sh): pytest -q"]
    assert actions[0][1] == "def parse(text):\n    return fromisoformat(text)"
    one = Row(RowKind.ASSISTANT, "b", text="```\nonly one\n```")
    assert TranscriptView.code_copy_actions(one) == [("Copy code", "only one")]
    cut = Row(RowKind.ASSISTANT, "c", text="```js\nconsole.log(1)")  # cut off mid-block
    assert TranscriptView.code_copy_actions(cut) == [("Copy code (js)", "console.log(1)")]


def test_a_long_stream_keeps_the_rows_around_it_laid_out(qapp: object) -> None:
    """Every flush of a streaming answer is a new version of its row: only the newest one's
    layout is kept, so hundreds of flushes neither push the rows on screen out of the layout
    cache (laid out again, on the window's thread) nor leave hundreds of documents to free
    at once when the answer ends."""
    from PySide6.QtGui import QFont

    from ui.transcript_delegate import CACHE_SIZE, TranscriptDelegate

    delegate = TranscriptDelegate()
    font = QFont()
    rows = [Row(RowKind.ASSISTANT, f"a{i}", text=f"answer {i}") for i in range(20)]
    first = [delegate.layout(r, 600, font) for r in rows]
    stream = Row(RowKind.STREAMING, "streaming")
    for n in range(CACHE_SIZE + 50):
        stream.text += f"tok{n} "
        stream.version += 1
        delegate.layout(stream, 600, font)
    assert all(delegate.layout(r, 600, font) is lay for r, lay in zip(rows, first, strict=True))
    assert len(delegate._cache) == len(rows) + 1
    delegate.stream_ended()
    assert len(delegate._cache) == len(rows)


def test_an_answers_single_line_breaks_stay_and_markdown_blocks_are_untouched(
        qapp: object) -> None:
    """A poem's lines stay lines (markdown would join them into one paragraph), in a finished
    answer as while it streams; lists, code and tables read as before."""
    from PySide6.QtGui import QFont

    from ui.transcript_delegate import TranscriptDelegate

    text = ("Roses are red,\nviolets are blue.\n\n- one\n- two\n\n```py\nx = 1\ny = 2\n```\n\n"
            "| name | size |\n|---|---:|\n| a.txt | 12 |")
    delegate = TranscriptDelegate()
    for kind in (RowKind.ASSISTANT, RowKind.STREAMING):
        doc = delegate.layout(Row(kind, f"{kind}", text=text), 600, QFont()).doc
        shown = doc.toPlainText()
        assert shown.startswith("Roses are red,\nviolets are blue.\none\ntwo\nx = 1\ny = 2")
        assert "x = 1  " not in shown  # code keeps its bytes


def test_a_tables_header_is_aligned_as_its_column(qapp: object) -> None:
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QFont, QTextTable

    from ui.transcript_delegate import TranscriptDelegate

    row = Row(RowKind.ASSISTANT, "t", text="| name | size |\n|:---|---:|\n| a.txt | 12 |")
    doc = TranscriptDelegate().layout(row, 600, QFont()).doc
    table = next(f for f in doc.rootFrame().childFrames() if isinstance(f, QTextTable))

    def align(r: int, c: int) -> int:  # left, right, centre or justified
        flag = table.cellAt(r, c).firstCursorPosition().block().blockFormat().alignment()
        return int(flag.value) & 0xF

    assert align(0, 1) == align(1, 1) == Qt.AlignmentFlag.AlignRight.value
    assert align(0, 0) == align(1, 0) == Qt.AlignmentFlag.AlignLeft.value


def test_a_card_whose_result_alone_is_pinned_says_so() -> None:
    """`workbench pin` pins one entry: a card pinned through its result (the call is sent whole
    with it) is marked as one pinned through its call."""
    call = ToolCall(id="c1", function=FunctionCall(name="run_shell", arguments='{"cmd": "ls"}'))
    asked = ConversationMessage(role="assistant", tool_calls=[call])
    result = ConversationMessage(role="tool", tool_call_id="c1", content="a.txt", pinned=True)
    row = Row(RowKind.TOOL, "c1", message=asked, call=call, result=result)
    assert "★ pinned" in header_line(row)[1]
    unpinned = Row(RowKind.TOOL, "c1", message=asked, call=call,
                   result=result.model_copy(update={"pinned": False}))
    assert "★ pinned" not in header_line(unpinned)[1]

"""Code blocks in answers get syntax colours; prose and unknown languages stay as they are."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QTextCursor, QTextDocument
from PySide6.QtWidgets import QApplication

from ui.highlight import highlight_code_blocks

pytestmark = pytest.mark.gui


def colour_at(doc: QTextDocument, needle: str) -> str:
    at = doc.toPlainText().index(needle)
    cursor = QTextCursor(doc)
    cursor.setPosition(at + 1)
    return cursor.charFormat().foreground().color().name()


def test_python_code_is_coloured_and_prose_is_not(qapp: QApplication) -> None:
    doc = QTextDocument()
    doc.setMarkdown('Use this:\n\n```python\ndef parse(text):\n    """Parse it."""\n'
                    '    return 42  # the answer\n```\n\nThe def word in prose stays plain.')
    assert highlight_code_blocks(doc) == 1
    assert colour_at(doc, "def parse") == "#7c3aed"  # keyword
    assert colour_at(doc, '"""Parse') == "#15803d"  # string
    assert colour_at(doc, "42") == "#b45309"  # number
    assert colour_at(doc, "# the answer") == "#6b7280"  # comment
    assert colour_at(doc, "def word in prose") == "#000000"  # prose: untouched


def test_unknown_or_missing_language_stays_plain(qapp: QApplication) -> None:
    doc = QTextDocument()
    doc.setMarkdown("```\nplain code\n```\n\n```no-such-language\nx = 1\n```\n")
    assert highlight_code_blocks(doc) == 0


def test_code_blocks_stand_apart_and_long_lines_wrap_instead_of_being_cut(
        qapp: QApplication) -> None:
    long_line = "result = compute(" + ", ".join(f"argument_{i}" for i in range(30)) + ")"
    doc = QTextDocument()
    doc.setMarkdown(f"Prose first.\n\n```\n{long_line}\n```\n")
    doc.setTextWidth(400)
    highlight_code_blocks(doc)
    prose, code = doc.begin(), doc.begin().next()
    assert code.text() == long_line
    assert code.blockFormat().background().color().name() == "#f1f2f4"
    assert prose.blockFormat().background().style().name == "NoBrush"
    assert doc.size().width() <= 401  # (lays the document out)
    assert code.layout().lineCount() > 1  # wrapped at the row's width, not clipped

"""Syntax colours for the code blocks of an answer (Pygments), applied to the laid-out document.

Qt's markdown reader marks each line of a fenced block with its language; the lines of a block
are joined, tokenized once, and each token's colour is merged onto the document. It runs when a
row is laid out (cached with the layout), never per frame; blocks in a language Pygments does
not know, or longer than a limit, stay plain.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from PySide6.QtGui import (
    QColor,
    QFont,
    QTextBlock,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextTable,
)
from PySide6.QtGui import QTextFormat as F

from ui.palette import current

MAX_CODE_CHARS = 8_000  # longer blocks stay plain: colouring them would hold up the paint



def highlight_code_blocks(doc: QTextDocument) -> int:
    """Colour every fenced code block of `doc` (a background for all; syntax colours where
    Pygments knows the language); long lines wrap instead of being cut at the row's edge.
    Returns how many blocks were syntax-coloured."""
    coloured = 0
    band = QTextBlockFormat()
    band.setBackground(QColor(current().code_bg))  # apart from the prose around it
    band.setNonBreakableLines(False)  # Qt's markdown reader keeps code lines whole: clipped
    block = doc.begin()
    while block.isValid():
        fmt = block.blockFormat()
        if not fmt.hasProperty(F.Property.BlockCodeFence):
            block = block.next()
            continue
        language = str(fmt.property(F.Property.BlockCodeLanguage) or "")
        lines: list[QTextBlock] = []
        while block.isValid() and block.blockFormat().hasProperty(F.Property.BlockCodeFence) \
                and str(block.blockFormat().property(F.Property.BlockCodeLanguage) or "") \
                == language:
            lines.append(block)
            QTextCursor(block).mergeBlockFormat(band)
            block = block.next()
        if _colour(doc, lines, language):
            coloured += 1
    return coloured


def align_table_headers(doc: QTextDocument) -> int:
    """Each markdown table's header cells aligned as their column is (Qt's reader leaves a
    header on the left over a right-aligned or centred column), and on their first line (after
    a code block, its reader starts the first header cell with an empty line). Returns the
    cells moved."""
    moved = 0
    for frame in doc.rootFrame().childFrames():
        if not isinstance(frame, QTextTable) or frame.rows() < 2:
            continue
        for col in range(frame.columns()):
            cell = frame.cellAt(0, col)
            first = cell.firstCursorPosition()
            if not first.block().text() and first.block().next().position() < cell.lastPosition():
                first.deleteChar()  # the empty line's end: the header moves up to the top
                moved += 1
            below = frame.cellAt(1, col).firstCursorPosition().block().blockFormat()
            head = frame.cellAt(0, col).firstCursorPosition()
            if head.block().blockFormat().alignment() != below.alignment():
                fmt = QTextBlockFormat()
                fmt.setAlignment(below.alignment())
                head.mergeBlockFormat(fmt)
                moved += 1
    return moved


def _colour(doc: QTextDocument, lines: list[QTextBlock], language: str) -> bool:
    lexer = _lexer(language.lower())
    code = "\n".join(b.text() for b in lines)
    if lexer is None or not code.strip() or len(code) > MAX_CODE_CHARS:
        return False
    starts = []  # offset of each line in `code`
    offset = 0
    for b in lines:
        starts.append(offset)
        offset += len(b.text()) + 1
    cursor = QTextCursor(doc)
    line = 0
    for index, token, value in lexer.get_tokens_unprocessed(code):
        fmt = _format(str(token), current().name)
        if fmt is None or not value.strip():
            continue
        end = index + len(value)
        while index < end:  # a token may span lines (a docstring)
            while line + 1 < len(starts) and starts[line + 1] <= index:
                line += 1
            line_end = starts[line] + len(lines[line].text())
            stop = min(end, line_end)
            if stop > index:
                cursor.setPosition(lines[line].position() + index - starts[line])
                cursor.setPosition(lines[line].position() + stop - starts[line],
                                   QTextCursor.MoveMode.KeepAnchor)
                cursor.mergeCharFormat(fmt)
            index = max(stop, line_end + 1) if stop == line_end else stop
    return True


@lru_cache(maxsize=64)
def _lexer(language: str) -> Any:
    if not language:
        return None
    try:
        from pygments.lexers import get_lexer_by_name
        from pygments.util import ClassNotFound
    except ImportError:  # pragma: no cover - a dependency; plain code if it is missing
        return None
    try:
        return get_lexer_by_name(language, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


@lru_cache(maxsize=512)
def _format(token: str, _scheme: str) -> QTextCharFormat | None:
    """The format of a Pygments token type in the palette in use (`_scheme`: its name, the
    cache's key). Token types are matched most specific first."""
    name = token.removeprefix("Token.")
    for prefix, colour, italic in current().syntax:
        if name == prefix or name.startswith(prefix + "."):
            fmt = QTextCharFormat()
            fmt.setForeground(QColor(colour))
            if italic:
                fmt.setFontItalic(True)
            if prefix == "Keyword":
                fmt.setFontWeight(QFont.Weight.DemiBold)
            return fmt
    return None


MAX_FOUND = 500  # matches marked in one row at most


def highlight_found(doc: QTextDocument, term: str) -> int:
    """Give every occurrence of `term` (case ignored) a marker background; returns how many."""
    if not term:
        return 0
    fmt = QTextCharFormat()
    fmt.setBackground(QColor(current().found_bg))
    found = 0
    cursor = doc.find(term, 0)
    while not cursor.isNull() and found < MAX_FOUND:
        cursor.mergeCharFormat(fmt)
        found += 1
        cursor = doc.find(term, cursor)
    return found

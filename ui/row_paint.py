"""How a transcript row is drawn, given its layout (made by the delegate): its bubble, header,
text and links; the plain bubble a row shows until a later paint draws it; and the bounded
cache of rows already drawn, as pixmaps."""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

from PySide6.QtCore import QPoint, QRect, QRectF, QSize, Qt
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QColor,
    QFont,
    QFontMetrics,
    QPainter,
    QPalette,
    QPixmap,
    QTextDocument,
)
from PySide6.QtWidgets import QStyle, QStyleOptionViewItem

from ui.palette import current
from ui.row_heights import GAP, PAD, SIDE
from ui.transcript_model import Row, RowKind
from ui.transcript_text import header_line


def _bubble_colours(row: Row, stopped: bool = False) -> tuple[QColor, QColor]:
    """(border, background) of a row's bubble, from the palette in use."""
    p = current()
    if stopped:
        return QColor(p.row_borders["tool"]), QColor(p.stopped)
    return (QColor(p.row_borders.get(row.kind.value, p.row_borders["default"])),
            QColor(p.rows[row.kind.value]))


@dataclass
class Layout:
    doc: QTextDocument
    height: int
    header: str
    meta: str
    footer: str  # "show more" hint, or empty
    actions: list[tuple[str, str]]  # (action id, label) shown as links under the body


LABEL_GAP = 12  # pixels between the header's title, the model view's label and the meta
MIN_LABEL = 48  # narrower than this, the label is left out (the meta's "⊘ not sent" stays)


def label_span(header_w: int, title_w: int, meta_w: int) -> tuple[int, int] | None:
    """Where the model view's "not sent · why" label goes in a row's header line: (left, width)
    between the title on the left and the meta on the right, never over either; None when
    there is no room for it."""
    left = title_w + LABEL_GAP
    width = header_w - meta_w - LABEL_GAP - left
    return (left, width) if width >= MIN_LABEL else None


# (font, title, meta, width) -> what fit_header made of them: every paint of a running card
# fits its header again (its meta is the spinner and the time so far), forty at a time in an
# agent's tool round, and measuring text is most of a paint's work
_fitted: OrderedDict[tuple[str, str, str, int], tuple[str, str]] = OrderedDict()
FITTED_KEPT = 512


def fit_header(font: QFont, header: str, meta: str, width: int) -> tuple[str, str]:
    """A header line's bold title and right-hand meta, each cut (…) so that together they fit
    `width` with a gap between: the meta is kept whole while the title keeps at least half."""
    key = (font.key(), header, meta, width)
    fitted = _fitted.get(key)
    if fitted is not None:
        _fitted.move_to_end(key)
        return fitted
    fitted = _fit(font, header, meta, width)
    _fitted[key] = fitted
    if len(_fitted) > FITTED_KEPT:
        _fitted.popitem(last=False)
    return fitted


def _fit(font: QFont, header: str, meta: str, width: int) -> tuple[str, str]:
    bold = QFont(font)
    bold.setBold(True)
    fm, bfm = QFontMetrics(font), QFontMetrics(bold)
    room = max(width - fm.horizontalAdvance(meta) - LABEL_GAP, width // 2)
    title = bfm.elidedText(header, Qt.TextElideMode.ElideRight, room)
    rest = width - (bfm.horizontalAdvance(title) + LABEL_GAP if title else 0)
    return title, fm.elidedText(meta, Qt.TextElideMode.ElideRight, max(0, rest))


def draw_row(painter: QPainter, option: QStyleOptionViewItem, row: Row, lay: Layout,
             why_not: str | None, clip: QSize, live_meta: bool = False) -> None:
    """The row in `option.rect`: dimmed with the model view's `why_not`, its text drawn only
    within `clip` (the window's size); with `live_meta`, without the header's details (a
    running card's, drawn over its kept picture by `draw_meta`)."""
    rect = option.rect
    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    if why_not:
        painter.setOpacity(0.45)
    bubble = QRect(rect.left() + SIDE, rect.top(), rect.width() - 2 * SIDE, lay.height - GAP)
    stopped = is_stopped(row)  # the user's own Stop is not a failure: no red
    p = current()
    border, background = _bubble_colours(row, stopped)
    painter.setPen(border)
    painter.setBrush(background)
    painter.drawRoundedRect(bubble, 8, 8)
    if option.state & QStyle.StateFlag.State_Selected:
        painter.setPen(option.palette.color(QPalette.ColorRole.Highlight))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRoundedRect(bubble.adjusted(1, 1, -1, -1), 8, 8)

    fm = QFontMetrics(option.font)
    x, y = bubble.left() + PAD, bubble.top() + PAD
    bold = QFont(option.font)
    bold.setBold(True)
    painter.setFont(bold)
    painter.setPen(QColor(p.error_text if row.kind is RowKind.ERROR and not stopped
                          else p.text))
    header_w = bubble.width() - 2 * PAD
    # a running card's spinner and elapsed time move on without a new layout
    header, meta = header_line(row) if row.running_since is not None else (lay.header,
                                                                           lay.meta)
    title, meta = fit_header(option.font, header, meta, header_w)
    painter.drawText(QRect(x, y, header_w, fm.lineSpacing()), Qt.AlignmentFlag.AlignLeft,
                     title)
    span = label_span(header_w, QFontMetrics(bold).horizontalAdvance(title),
                      fm.horizontalAdvance(meta)) if why_not else None
    if why_not and span is not None:
        painter.setOpacity(1.0)
        painter.setPen(QColor(p.warn_text))
        label = fm.elidedText(f"not sent · {why_not}", Qt.TextElideMode.ElideRight, span[1])
        painter.drawText(QRect(x + span[0], y, span[1], fm.lineSpacing()),
                         Qt.AlignmentFlag.AlignLeft, label)
        painter.setOpacity(0.45)
    painter.setFont(option.font)
    if not live_meta:
        painter.setPen(QColor(p.faint))
        painter.drawText(QRect(x, y, header_w, fm.lineSpacing()),
                         Qt.AlignmentFlag.AlignRight, meta)
    y += fm.lineSpacing() + 4

    painter.translate(x, y)
    ctx = QAbstractTextDocumentLayout.PaintContext()
    ctx.palette.setColor(QPalette.ColorRole.Text, QColor(p.text))
    # only the lines on screen are drawn (a long answer or an open card is taller)
    ctx.clip = QRectF(-x, -y, clip.width(), clip.height())
    lay.doc.documentLayout().draw(painter, ctx)
    painter.translate(-x, -y)
    y += math.ceil(lay.doc.size().height()) + 4

    link = QColor(p.link)
    painter.setPen(link)
    lx = x
    for _, label in lay.actions:
        painter.drawText(QPoint(lx, y + fm.ascent()), label)
        lx += fm.horizontalAdvance(label) + 24
    if lay.footer:
        painter.setPen(QColor(p.muted))
        painter.drawText(QPoint(lx, y + fm.ascent()), lay.footer)
    painter.restore()


def draw_meta(painter: QPainter, rect: QRect, font: QFont, header: str, meta: str,
              dimmed: bool) -> None:
    """A row's right-aligned details in its header line (cut where its title needs room)."""
    fm = QFontMetrics(font)
    meta = fit_header(font, header, meta, rect.width() - 2 * SIDE - 2 * PAD)[1]
    painter.save()
    if dimmed:
        painter.setOpacity(0.45)
    painter.setFont(font)
    painter.setPen(QColor(current().faint))
    painter.drawText(QRect(rect.left() + SIDE + PAD, rect.top() + PAD,
                           rect.width() - 2 * SIDE - 2 * PAD, fm.lineSpacing()),
                     Qt.AlignmentFlag.AlignRight, meta)
    painter.restore()


def draw_placeholder(painter: QPainter, rect: QRect, row: Row) -> None:
    """The row's bubble without its text, until the next paint draws it."""
    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    border, background = _bubble_colours(row)
    painter.setPen(border)
    painter.setBrush(background)
    painter.drawRoundedRect(QRect(rect.left() + SIDE, rect.top(), rect.width() - 2 * SIDE,
                                  max(1, rect.height() - GAP)), 8, 8)
    painter.restore()


class PixmapCache:
    """Rows already drawn, least recently used first out, within `budget` bytes."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._pixmaps: OrderedDict[tuple[object, ...], QPixmap] = OrderedDict()
        self._bytes = 0

    def get(self, key: tuple[object, ...]) -> QPixmap | None:
        pixmap = self._pixmaps.get(key)
        if pixmap is not None:
            self._pixmaps.move_to_end(key)
        return pixmap

    def keep(self, key: tuple[object, ...], pixmap: QPixmap) -> None:
        self._pixmaps[key] = pixmap
        self._bytes += _bytes(pixmap)
        while self._bytes > self.budget and len(self._pixmaps) > 1:
            _, old = self._pixmaps.popitem(last=False)
            self._bytes -= _bytes(old)

    def clear(self) -> None:
        self._pixmaps.clear()
        self._bytes = 0


def _bytes(pixmap: QPixmap) -> int:
    return pixmap.width() * pixmap.height() * 4


def is_stopped(row: Row) -> bool:
    """A row of an answer the user stopped (its text is a partial answer, shown as one)."""
    m = row.message
    return row.kind is RowKind.ERROR and m is not None and m.error is not None \
        and m.error.type == "stopped"

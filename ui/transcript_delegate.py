"""How one transcript row looks: its layout, painting, hit-testing and size.

Heights of rows never shown are estimated from their text (cheap); a row's exact layout is made
when it is painted, kept in a small LRU cache keyed by (row key, row version, width), and if it
differs from the estimate the view is told once. So opening a 10,000-message conversation costs
a pass of arithmetic, and scrolling costs only the rows on screen.

A painted row (other than the streaming one, and one taller than the window) is kept as a pixmap,
keyed by everything its look depends on, in a cache of bounded size: following an agent that runs
forty tools repaints the screen many times over while only a card or two changes.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict

from PySide6.QtCore import (
    QAbstractItemModel,
    QEvent,
    QModelIndex,
    QPersistentModelIndex,
    QPoint,
    QRect,
    QSize,
    Qt,
    Signal,
)
from PySide6.QtGui import (
    QFont,
    QFontDatabase,
    QFontMetrics,
    QImage,
    QMouseEvent,
    QPainter,
    QPixmap,
    QTextDocument,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QWidget,
)

from core.model import continuable
from ui.highlight import align_table_headers, highlight_code_blocks, highlight_found
from ui.message_parts import add_thumbnails, image_refs
from ui.row_heights import GAP, PAD, SIDE, RowHeights
from ui.row_paint import (
    Layout,
    PixmapCache,
    draw_meta,
    draw_placeholder,
    draw_row,
    is_stopped,
)
from ui.throttle import Throttle
from ui.transcript_model import ROW_ROLE, Row, RowKind, TranscriptModel
from ui.transcript_text import (
    body_text,
    clip,
    header_line,
    keep_line_breaks,
    truncated,
)

CACHE_SIZE = 300
PIXMAP_BYTES = 32 * 1024 * 1024  # painted rows kept: a few screens' worth of a wide window
# A paint lays out new rows for at most this long (the rest show as plain bubbles until the next
# one): with the engine's events (worker.SLICE_S), a loop's pass fits a 60 Hz frame in a storm.
PAINT_SLICE_S = 0.006
STREAM_MARKDOWN_CHARS = 24_000  # a streaming answer laid out as markdown up to this length
HEIGHTS_MS = 0  # new heights found by a paint are told to the view once, in a later pass
STREAM_RESERVE_LINES = 8  # the streaming row grows by at least this much room at a time

SETTINGS_CAUSES = {"auth", "missing_api_key", "unknown_model", "context_overflow", "network"}


class TranscriptDelegate(QStyledItemDelegate):
    """Signals:
        action_clicked(int, str): row, action id ("retry", "settings", "toggle").
        heights_changed(list): rows whose painted height differs from what the view was told.
    """

    action_clicked = Signal(int, str)
    heights_changed = Signal(list)  # rows whose painted height differs from what the view has

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._cache: OrderedDict[tuple[str, int, int], Layout] = OrderedDict()
        self._pixmaps = PixmapCache(PIXMAP_BYTES)
        self.paint_deadline: float | None = None  # set by the view around a paint
        self.deferred = False  # a row was left as a plain bubble: paint again
        self._stream_keys: list[tuple[str, int, int]] = []  # the streaming row's, in _cache
        self.sizes = RowHeights()
        self._pending: set[int] = set()
        self._stream_height = 0
        self.stream_rect: QRect | None = None  # where the streaming row was last painted
        self.turn_running = False  # no "Continue" on a tool card while its turn goes on
        self.stream_text_height = 0  # how much of its reserved height the text fills
        # The Inspector's model view: entries the selected request leaves out, and why.
        self.model_view = False
        self.left_out: dict[str, str] = {}
        # Attached images' thumbnails, by reference (the app reads them: app/window/attachment_flow)
        self.thumbnails: dict[str, QImage] = {}
        self._mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        self._tell_heights = Throttle(self._emit_pending, HEIGHTS_MS, self, mode="debounce")

    def dimmed(self, row: Row) -> str | None:
        """Why the model does not see this row, in the model view (None: it does)."""
        if not self.model_view or row.message is None or row.kind is RowKind.STREAMING:
            return None
        ids = [row.message.id] + ([row.result.id] if row.result is not None else [])
        why = [self.left_out.get(i) for i in ids]
        return why[0] if all(why) else None

    # --- sizes -----------------------------------------------------------------------------------

    def sizeHint(self, option: QStyleOptionViewItem,
                 index: QModelIndex | QPersistentModelIndex) -> QSize:
        row = self._row(index)
        width = max(200, option.rect.width() or self._view_width())
        return QSize(width, self.height_of(row, width, option.fontMetrics))

    def height_of(self, row: Row, width: int, fm: QFontMetrics) -> int:
        """The row's height at `width`: exact once it was painted, estimated before."""
        if row.kind is RowKind.STREAMING:
            if self._stream_height == 0:
                self._stream_height = self.sizes.estimate(row, width, fm)
            return self._stream_height
        return self.sizes.height(row, width, fm)

    def heights(self, rows: list[Row], width: int, fm: QFontMetrics) -> list[int]:
        """`height_of` for many rows at once (a relayout at a new width asks for all)."""
        return self.sizes.heights(rows, width, fm, lambda row: self.height_of(row, width, fm))

    def _row(self, index: QModelIndex | QPersistentModelIndex) -> Row:
        # A relayout asks every row for its size: reading our own model's list directly skips
        # a QVariant round trip per row (a third of the cost of a 10,000-row pass).
        model = index.model()
        if isinstance(model, TranscriptModel):
            return model.row(index.row())
        row: Row = index.data(ROW_ROLE)
        return row

    def _view_height(self) -> int:
        view = self.parent()
        return view.viewport().height() if isinstance(view, QAbstractItemView) else 400

    def _view_width(self) -> int:
        view = self.parent()
        return view.viewport().width() if isinstance(view, QAbstractItemView) else 600

    # --- layout ----------------------------------------------------------------------------------

    def layout(self, row: Row, width: int, font: QFont) -> Layout:
        key = (row.key, row.version, width)
        lay = self._cache.get(key)
        if lay is not None:
            self._cache.move_to_end(key)
            return lay
        lay = self._make_layout(row, width, font)
        if row.kind is RowKind.STREAMING:
            # Only the newest text's layout is ever drawn again: older ones would fill the
            # cache (evicting the rows around it) and all be freed at once when the answer ends.
            for old in self._stream_keys:
                if old[1] != row.version:
                    self._cache.pop(old, None)
            self._stream_keys = [k for k in self._stream_keys if k[1] == row.version]
            self._stream_keys.append(key)
        self._cache[key] = lay
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return lay

    def _make_layout(self, row: Row, width: int, font: QFont) -> Layout:
        body = body_text(row)
        shown, hidden_lines = clip(row, body)
        images = image_refs(row) if row.kind is RowKind.USER else []
        doc = self._document(row, shown, width, font, images)
        header, meta = header_line(row)
        footer = _footer(row, body, hidden_lines)
        actions = self._actions(row, images)
        fm = QFontMetrics(font)
        line_h = fm.lineSpacing()
        height = 2 * PAD + line_h + 4 + math.ceil(doc.size().height())
        if footer or actions:
            height += line_h + 4
        return Layout(doc, height + GAP, header, meta, footer, actions)

    def _document(self, row: Row, shown: str, width: int, font: QFont,
                  images: list[tuple[str, str]]) -> QTextDocument:
        """The row's text laid out at `width`: markdown for an answer, plain text else."""
        doc = QTextDocument()
        doc.setDocumentMargin(0)
        doc.setDefaultFont(self._mono if row.kind is RowKind.TOOL else font)
        if row.kind is RowKind.ASSISTANT or (is_stopped(row) and row.text):
            doc.setMarkdown(keep_line_breaks(shown))  # a stopped answer reads as it streamed
            highlight_code_blocks(doc)
            align_table_headers(doc)
        elif row.kind is RowKind.STREAMING and len(shown) <= STREAM_MARKDOWN_CHARS:
            # Read as it arrives (headings, lists, fences), so the answer does not jump into
            # another layout when it ends; its code colours come then (Pygments per frame is
            # too dear). A very long answer streams as plain text.
            doc.setMarkdown(keep_line_breaks(shown))
        else:
            doc.setPlainText(shown)
        if images:
            add_thumbnails(doc, [self.thumbnails[r] for r, _ in images if r in self.thumbnails])
        highlight_found(doc, row.found)
        doc.setTextWidth(max(50, width - 2 * SIDE - 2 * PAD))
        return doc

    def _actions(self, row: Row, images: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The row's clickable words, (action id, label) each: the versions where branches
        part, carrying on or retrying, the full output, the images."""
        actions = self._resume_actions(row)
        if row.kind is RowKind.TOOL and row.result is not None and row.result.offload is not None:
            actions.append(("open_output", "Open full output"))
        for ref, name in images:
            actions.append((f"view_image:{ref}", f"View {name}"))
        if row.versions is not None:  # where branches part: ‹ version n of m ›
            actions[:0] = _version_actions(*row.versions)
        return actions

    def _resume_actions(self, row: Row) -> list[tuple[str, str]]:
        """Continue, Retry, Open settings: on the latest answer that ended short."""
        actions: list[tuple[str, str]] = []
        if row.superseded:
            pass  # only the latest answer can be continued or retried
        elif row.kind is RowKind.ERROR and row.message is not None and row.message.error:
            if continuable(row.message):
                actions.append(("continue", "Continue"))
            actions.append(("retry", "Retry"))
            if row.message.error.type in SETTINGS_CAUSES:
                actions.append(("settings", "Open settings"))
        elif row.kind is RowKind.ASSISTANT and continuable(row.message):
            actions.append(("continue", "Continue (the answer hit the output limit)"))
        elif row.kind is RowKind.TOOL and row.result is not None and not self.turn_running:
            # The turn ended on a tool's result (Stop, a crash): the model has not seen it yet.
            actions.append(("continue", "Continue the agent"))
        return actions

    # --- painting --------------------------------------------------------------------------------

    def paint(self, painter: QPainter, option: QStyleOptionViewItem,
              index: QModelIndex | QPersistentModelIndex) -> None:
        row = self._row(index)
        rect = option.rect
        if row.kind is RowKind.STREAMING or rect.isEmpty():
            self._paint_row(painter, option, index, row)
            return
        key = (row.key, row.version, rect.width(),
               bool(option.state & QStyle.StateFlag.State_Selected), self.dimmed(row),
               self.turn_running, option.font.key(), row.running_since is not None)
        pixmap = self._pixmaps.get(key)
        if pixmap is None and self.paint_deadline is not None \
                and time.perf_counter() > self.paint_deadline \
                and (row.key, row.version, rect.width()) not in self._cache:
            draw_placeholder(painter, rect, row)
            self.deferred = True
            return
        running = row.running_since is not None
        # What the row looks like depends on its layout, not on the height the view gives it
        # (an estimate until its first paint): the pixmap is the layout's height, and clipped.
        height = self.layout(row, rect.width(), option.font).height
        if height > self._view_height():
            self._paint_row(painter, option, index, row)
            return
        if pixmap is None:
            ratio = painter.device().devicePixelRatioF() if painter.device() else 1.0
            pixmap = QPixmap(QSize(rect.width(), height) * ratio)
            pixmap.setDevicePixelRatio(ratio)
            pixmap.fill(Qt.GlobalColor.transparent)
            into = QPainter(pixmap)
            local = QStyleOptionViewItem(option)
            local.rect = QRect(0, 0, rect.width(), height)
            self._paint_row(into, local, index, row, live_meta=running)
            into.end()
            self._pixmaps.keep(key, pixmap)
        elif self.sizes.note(row, rect.width(), height):  # as _paint_row does
            self._pending.add(index.row())
            self._tell_heights()
        painter.drawPixmap(rect.topLeft(), pixmap)
        if running:  # the spinner and the elapsed time, over the kept picture
            draw_meta(painter, rect, option.font, *header_line(row), bool(self.dimmed(row)))

    def _paint_row(self, painter: QPainter, option: QStyleOptionViewItem,
                   index: QModelIndex | QPersistentModelIndex, row: Row,
                   live_meta: bool = False) -> None:
        """The row in `option.rect`; with `live_meta`, without the header's details (a
        running card's: painted over its kept picture, see paint)."""
        rect = option.rect
        if row.kind is RowKind.STREAMING:
            self.stream_rect = QRect(rect)
            self.stream_text_height = self.layout(row, rect.width(), option.font).height
        lay = self.layout(row, rect.width(), option.font)
        if row.kind is RowKind.STREAMING:
            # The streaming row's height only grows, a few lines at a time: every change costs
            # the list a relayout of all rows, so it must not happen on every update.
            if lay.height > self._stream_height:
                reserve = max(STREAM_RESERVE_LINES * option.fontMetrics.lineSpacing(),
                              self._view_height() * 3 // 4)
                self._stream_height = lay.height + reserve
                self._pending.add(index.row())
                self._tell_heights()
        elif self.sizes.note(row, rect.width(), lay.height):
            self._pending.add(index.row())
            self._tell_heights()

        draw_row(painter, option, row, lay, self.dimmed(row),
                 QSize(self._view_width(), self._view_height()), live_meta)

    def _emit_pending(self) -> None:
        view = self.parent()
        if not isinstance(view, QAbstractItemView) or view.model() is None:
            self._pending.clear()
            return
        rows = sorted(r for r in self._pending if r < view.model().rowCount())
        self._pending.clear()
        if rows:
            self.heights_changed.emit(rows)

    # --- clicks ----------------------------------------------------------------------------------

    def hit(self, row: Row, rect: QRect, font: QFont, pos: QPoint) -> str | None:
        """Which action (or 'toggle') lies under `pos` inside the row's `rect`."""
        lay = self.layout(row, rect.width(), font)
        fm = QFontMetrics(font)
        x = rect.left() + SIDE + PAD
        y = rect.top() + PAD + fm.lineSpacing() + 4 + math.ceil(lay.doc.size().height()) + 4
        if y <= pos.y() <= y + fm.lineSpacing():
            for action, label in lay.actions:
                w = fm.horizontalAdvance(label)
                if x <= pos.x() <= x + w:
                    return action
                x += w + 24
            if lay.footer and x <= pos.x() <= x + fm.horizontalAdvance(lay.footer):
                return "toggle"
        if pos.y() <= rect.top() + PAD + fm.lineSpacing() + 4 and (
            row.kind in (RowKind.TOOL, RowKind.SYSTEM) or lay.footer
        ):
            return "toggle"  # clicking a card's header opens or closes it
        return None

    def editorEvent(self, event: QEvent, model: QAbstractItemModel,
                    option: QStyleOptionViewItem,
                    index: QModelIndex | QPersistentModelIndex) -> bool:
        if event.type() == QEvent.Type.MouseButtonRelease and isinstance(event, QMouseEvent) \
                and event.button() == Qt.MouseButton.LeftButton:
            row: Row = index.data(ROW_ROLE)
            action = self.hit(row, option.rect, option.font, event.position().toPoint())
            if action:
                self.action_clicked.emit(index.row(), action)
                return True
        return super().editorEvent(event, model, option, index)

    def forget(self) -> None:
        """Drop every cached layout and painted row (a new conversation was loaded)."""
        self._cache.clear()
        self._pixmaps.clear()
        self._stream_keys = []
        self.sizes.forget()
        self._stream_height = 0

    def stream_slack(self) -> int:
        """Room reserved below the streaming text that it does not fill yet."""
        if not self._stream_height or not self.stream_text_height:
            return 0
        return max(0, self._stream_height - self.stream_text_height)

    def stream_ended(self) -> None:
        self._stream_height = 0
        self.stream_rect = None
        self.stream_text_height = 0
        for key in self._stream_keys:
            self._cache.pop(key, None)
        self._stream_keys = []


def _footer(row: Row, body: str, hidden_lines: int) -> str:
    """The words under the row that open or close it ("" when there is nothing more)."""
    if row.kind is RowKind.TOOL:
        return "Show less ▴" if row.expanded else "Show arguments and full result ▾"
    if hidden_lines:
        noun = "line" if hidden_lines == 1 else "lines"
        return f"Show more ▾  ({hidden_lines:,} more {noun})"
    if row.expanded and truncated(row, body):
        return "Show less ▴"
    return ""


def _version_actions(n: int, of: int) -> list[tuple[str, str]]:
    """‹ previous · version n of m · next ›, each arrow only where there is one to go to."""
    return (([("version_prev", "‹ previous")] if n > 1 else [])
            + [("version_list", f"version {n} of {of}")]
            + ([("version_next", "next ›")] if n < of else []))

"""The transcript on screen: a QListView with a delegate that lays out only what is visible.

Heights of rows never shown are estimated from their text (cheap); a row's exact layout is made
when it is painted, kept in a small LRU cache keyed by (row key, row version, width), and if it
differs from the estimate the view is told once. So opening a 10,000-message conversation costs
a pass of arithmetic, and scrolling costs only the rows on screen.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from PySide6.QtCore import (
    QAbstractItemModel,
    QEvent,
    QItemSelectionModel,
    QModelIndex,
    QPersistentModelIndex,
    QPoint,
    QRect,
    QSize,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QColor,
    QFont,
    QFontDatabase,
    QFontMetrics,
    QGuiApplication,
    QKeyEvent,
    QKeySequence,
    QMouseEvent,
    QPainter,
    QPalette,
    QTextDocument,
    QWheelEvent,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QAbstractSlider,
    QListView,
    QMenu,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QWidget,
)

from core.model import continuable
from ui.transcript_model import ROW_ROLE, Row, RowKind, TranscriptModel, main_argument

PAD = 10  # inside a bubble
GAP = 6  # between bubbles
SIDE = 12  # bubble to view edge
COLLAPSED_LINES = 40  # longer messages show this many lines until expanded
CARD_PREVIEW_LINES = 3
PREVIEW_LINE_CHARS = 140  # a card's preview line longer than this is cut with "…"
MAX_SHOWN_CHARS = 200_000  # an expanded row shows at most this much; Copy gives everything
CACHE_SIZE = 300
STREAM_RESERVE_LINES = 8  # the streaming row grows by at least this much room at a time

COLORS = {
    RowKind.USER: "#e8f0fe",
    RowKind.ASSISTANT: "#ffffff",
    RowKind.STREAMING: "#ffffff",
    RowKind.TOOL: "#f4f4f5",
    RowKind.ERROR: "#fdecea",
    RowKind.SYSTEM: "#f7f3e8",
}
BORDERS = {RowKind.ERROR: "#e0a39b", RowKind.TOOL: "#d4d4d8"}
# Keys we page with ourselves (see TranscriptView.page).
PAGING_KEYS = {
    Qt.Key.Key_PageDown: QAbstractSlider.SliderAction.SliderPageStepAdd,
    Qt.Key.Key_PageUp: QAbstractSlider.SliderAction.SliderPageStepSub,
    Qt.Key.Key_Home: QAbstractSlider.SliderAction.SliderToMinimum,
    Qt.Key.Key_End: QAbstractSlider.SliderAction.SliderToMaximum,
}
SETTINGS_CAUSES = {"auth", "missing_api_key", "unknown_model", "context_overflow"}


@dataclass
class Layout:
    doc: QTextDocument
    height: int
    header: str
    meta: str
    footer: str  # "show more" hint, or empty
    actions: list[tuple[str, str]]  # (action id, label) shown as links under the body


class TranscriptDelegate(QStyledItemDelegate):
    """Signals:
        action_clicked(int, str): row, action id ("retry", "settings", "toggle").
    """

    action_clicked = Signal(int, str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._cache: OrderedDict[tuple[str, int, int], Layout] = OrderedDict()
        self._heights: dict[tuple[str, int], tuple[int, int]] = {}  # -> (width, height)
        self._pending: set[int] = set()
        self._stream_height = 0
        self.stream_rect: QRect | None = None  # where the streaming row was last painted
        self.stream_text_height = 0  # how much of its reserved height the text fills
        self._mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._emit_pending)

    # --- sizes -----------------------------------------------------------------------------------

    def sizeHint(self, option: QStyleOptionViewItem,  # noqa: N802
                 index: QModelIndex | QPersistentModelIndex) -> QSize:
        row = self._row(index)
        width = max(200, option.rect.width() or self._view_width())
        if row.kind is RowKind.STREAMING:
            if self._stream_height == 0:
                self._stream_height = self._estimate(row, width, option.fontMetrics)
            return QSize(width, self._stream_height)
        key = (row.key, row.version)
        known = self._heights.get(key)
        if known is not None and known[0] == width:
            return QSize(width, known[1])
        height = self._estimate(row, width, option.fontMetrics)
        self._heights[key] = (width, height)  # one entry per row: resizing never piles up
        return QSize(width, height)

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
        return view.viewport().height() if isinstance(view, QListView) else 400

    def _view_width(self) -> int:
        view = self.parent()
        return view.viewport().width() if isinstance(view, QListView) else 600

    def _estimate(self, row: Row, width: int, fm: QFontMetrics) -> int:
        text_w = max(50, width - 2 * SIDE - 2 * PAD)
        line_h = fm.lineSpacing()
        chars_per_line = max(10, text_w // max(1, fm.averageCharWidth()))
        body = _body_text(row)
        limit = COLLAPSED_LINES if not row.expanded else 10**9
        if row.kind is RowKind.TOOL and not row.expanded:
            limit = CARD_PREVIEW_LINES
        if row.kind is RowKind.SYSTEM and not row.expanded:
            limit = 2
        lines = 0
        for part in body[: MAX_SHOWN_CHARS].split("\n"):
            lines += max(1, math.ceil(len(part) / chars_per_line))
            if lines >= limit:
                lines = limit
                break
        extra = line_h if (row.kind is RowKind.ERROR or _truncated(row, body)) else 0
        return 2 * PAD + line_h + 4 + int(lines * line_h * 1.15) + extra + GAP

    # --- layout ----------------------------------------------------------------------------------

    def layout(self, row: Row, width: int, font: QFont) -> Layout:
        key = (row.key, row.version, width)
        lay = self._cache.get(key)
        if lay is not None:
            self._cache.move_to_end(key)
            return lay
        lay = self._make_layout(row, width, font)
        self._cache[key] = lay
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return lay

    def _make_layout(self, row: Row, width: int, font: QFont) -> Layout:
        doc = QTextDocument()
        doc.setDocumentMargin(0)
        doc.setDefaultFont(self._mono if row.kind is RowKind.TOOL else font)
        body = _body_text(row)
        shown, hidden_lines = _clip(row, body)
        if row.kind in (RowKind.ASSISTANT, RowKind.STREAMING):
            doc.setMarkdown(shown)
        else:
            doc.setPlainText(shown)
        doc.setTextWidth(max(50, width - 2 * SIDE - 2 * PAD))
        header, meta = _header(row)
        footer = ""
        if row.kind is RowKind.TOOL:
            footer = "Show less ▴" if row.expanded else "Show arguments and full result ▾"
        elif hidden_lines:
            noun = "line" if hidden_lines == 1 else "lines"
            footer = f"Show more ▾  ({hidden_lines:,} more {noun})"
        elif row.expanded and _truncated(row, body):
            footer = "Show less ▴"
        actions: list[tuple[str, str]] = []
        if row.kind is RowKind.ERROR and row.message is not None and row.message.error:
            if continuable(row.message):
                actions.append(("continue", "Continue"))
            actions.append(("retry", "Retry"))
            if row.message.error.type in SETTINGS_CAUSES:
                actions.append(("settings", "Open settings"))
        elif row.kind is RowKind.ASSISTANT and continuable(row.message):
            actions.append(("continue", "Continue (the answer hit the output limit)"))
        fm = QFontMetrics(font)
        line_h = fm.lineSpacing()
        height = 2 * PAD + line_h + 4 + math.ceil(doc.size().height())
        if footer or actions:
            height += line_h + 4
        return Layout(doc, height + GAP, header, meta, footer, actions)

    # --- painting --------------------------------------------------------------------------------

    def paint(self, painter: QPainter, option: QStyleOptionViewItem,
              index: QModelIndex | QPersistentModelIndex) -> None:
        row = self._row(index)
        rect = option.rect
        if row.kind is RowKind.STREAMING:
            self.stream_rect = QRect(rect)
            self.stream_text_height = self.layout(row, rect.width(), option.font).height
        lay = self.layout(row, rect.width(), option.font)
        est_key = (row.key, row.version)
        if row.kind is RowKind.STREAMING:
            # The streaming row's height only grows, a few lines at a time: every change costs
            # the list a relayout of all rows, so it must not happen on every update.
            if lay.height > self._stream_height:
                reserve = max(STREAM_RESERVE_LINES * option.fontMetrics.lineSpacing(),
                              self._view_height() * 3 // 4)
                self._stream_height = lay.height + reserve
                self._pending.add(index.row())
                self._timer.start(0)
        elif self._heights.get(est_key) != (rect.width(), lay.height):
            self._heights[est_key] = (rect.width(), lay.height)
            self._pending.add(index.row())
            self._timer.start(0)

        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        bubble = QRect(rect.left() + SIDE, rect.top(), rect.width() - 2 * SIDE, lay.height - GAP)
        painter.setPen(QColor(BORDERS.get(row.kind, "#e4e4e7")))
        painter.setBrush(QColor(COLORS[row.kind]))
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
        painter.setPen(QColor("#b42318" if row.kind is RowKind.ERROR else "#18181b"))
        header_w = bubble.width() - 2 * PAD
        painter.drawText(QRect(x, y, header_w, fm.lineSpacing()), Qt.AlignmentFlag.AlignLeft,
                         fm.elidedText(lay.header, Qt.TextElideMode.ElideRight, header_w * 2 // 3))
        painter.setFont(option.font)
        painter.setPen(QColor("#71717a"))
        painter.drawText(QRect(x, y, header_w, fm.lineSpacing()), Qt.AlignmentFlag.AlignRight,
                         lay.meta)
        y += fm.lineSpacing() + 4

        painter.translate(x, y)
        ctx = QAbstractTextDocumentLayout.PaintContext()
        ctx.palette.setColor(QPalette.ColorRole.Text, QColor("#18181b"))
        lay.doc.documentLayout().draw(painter, ctx)
        painter.translate(-x, -y)
        y += math.ceil(lay.doc.size().height()) + 4

        link = QColor("#2563eb")
        painter.setPen(link)
        lx = x
        for _, label in lay.actions:
            painter.drawText(QPoint(lx, y + fm.ascent()), label)
            lx += fm.horizontalAdvance(label) + 24
        if lay.footer:
            painter.setPen(QColor("#52525b"))
            painter.drawText(QPoint(lx, y + fm.ascent()), lay.footer)
        painter.restore()

    def _emit_pending(self) -> None:
        view = self.parent()
        if not isinstance(view, QListView) or view.model() is None:
            self._pending.clear()
            return
        model = view.model()
        for r in sorted(self._pending):
            if r < model.rowCount():
                self.sizeHintChanged.emit(model.index(r, 0))
        self._pending.clear()

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

    def editorEvent(self, event: QEvent, model: QAbstractItemModel,  # noqa: N802
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
        """Drop every cached layout (a new conversation was loaded)."""
        self._cache.clear()
        self._heights.clear()
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
        for key in [k for k in self._cache if k[0] == "streaming"]:
            del self._cache[key]


class TranscriptView(QListView):
    """The transcript. Follows new content only when the user was already at the bottom.

    Signals:
        action_requested(int, str): an error row's action (retry, settings) was clicked.
    """

    action_requested = Signal(int, str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("transcript")
        self.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setResizeMode(QListView.ResizeMode.Adjust)
        self.setLayoutMode(QListView.LayoutMode.Batched)
        self.setBatchSize(200)
        self.setUniformItemSizes(False)
        self.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.setMouseTracking(True)
        self.setSpacing(0)
        self.verticalScrollBar().setSingleStep(24)
        self.setStyleSheet("QListView#transcript { background: #fafafa; border: none; }")
        self.delegate = TranscriptDelegate(self)
        self.setItemDelegate(self.delegate)
        self.delegate.action_clicked.connect(self._on_delegate_action_clicked)
        self.delegate.sizeHintChanged.connect(self._follow_if_needed)
        self.verticalScrollBar().rangeChanged.connect(self._on_range_changed)
        self.verticalScrollBar().actionTriggered.connect(self._on_user_scrolled)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._on_context_menu)
        self._follow = True

    def set_transcript_model(self, model: TranscriptModel) -> None:
        self.setModel(model)
        model.rowsInserted.connect(self._follow_if_needed)
        model.dataChanged.connect(self._follow_if_needed)
        model.modelReset.connect(self._on_model_reset)
        model.streaming_changed.connect(self._on_streaming_changed)

    def transcript_model(self) -> TranscriptModel:
        model = self.model()
        assert isinstance(model, TranscriptModel)
        return model

    # --- following the stream --------------------------------------------------------------------

    def dataChanged(self, top_left: QModelIndex | QPersistentModelIndex,  # noqa: N802
                    bottom_right: QModelIndex | QPersistentModelIndex,
                    roles: Sequence[int] = ()) -> None:
        """QListView relays out every row on any dataChanged; for the streaming row that would
        be a full pass over the transcript 30 times a second. Its height changes reach us
        through sizeHintChanged (rarely, see the delegate), so here a repaint is enough."""
        model = self.model()
        if (isinstance(model, TranscriptModel) and model.streaming_row() is not None
                and top_left.row() == bottom_right.row() == model.rowCount() - 1):
            # Repaint where it was painted last; asking visualRect() would force a pending
            # batched layout to finish at once.
            rect = self.delegate.stream_rect
            self.viewport().update(rect if rect is not None else self.viewport().rect())
            self._follow_if_needed()
            return
        super().dataChanged(top_left, bottom_right, roles or [])

    def at_bottom(self) -> bool:
        bar = self.verticalScrollBar()
        return bar.value() >= self._bottom(bar.maximum()) - 4

    def _follow_if_needed(self, *args: object) -> None:
        # Pin the scroll bar rather than call scrollToBottom(): that one forces any pending
        # layout to run at once, a full pass over every row, 30 times a second while streaming.
        # Qt's batched layout then finishes in small steps and rangeChanged re-pins us.
        if self._follow:
            bar = self.verticalScrollBar()
            bar.setValue(self._bottom(bar.maximum()))

    def _on_range_changed(self, _low: int, high: int) -> None:
        if self._follow:
            self.verticalScrollBar().setValue(self._bottom(high))

    def _bottom(self, maximum: int) -> int:
        """The scroll position that shows the end of the text: a streaming row's unused
        reserve stays below the fold."""
        return max(0, maximum - self.delegate.stream_slack())

    def _on_streaming_changed(self, streaming: bool) -> None:
        if not streaming:
            self.delegate.stream_ended()
            self._follow_if_needed()  # the reserve is gone: settle on the true bottom

    def _on_model_reset(self) -> None:
        self.delegate.forget()
        self._follow = True
        QTimer.singleShot(0, self.scrollToBottom)  # once per load: a full layout is expected

    # Only the user decides whether the view follows: relayouts and our own scrolling move the
    # scroll bar too, and must never switch following off by catching it mid-way.
    def _on_user_scrolled(self, *args: object) -> None:
        QTimer.singleShot(0, self._update_follow)

    def _update_follow(self) -> None:
        self._follow = self.at_bottom()

    def wheelEvent(self, event: QWheelEvent) -> None:  # noqa: N802
        super().wheelEvent(event)
        self._update_follow()

    # --- copy and actions ------------------------------------------------------------------------

    def copy_selection(self) -> str:
        rows = sorted(i.row() for i in self.selectionModel().selectedIndexes())
        model = self.transcript_model()
        text = "\n\n".join(model.row(r).copy_text() for r in rows)
        if text:
            QGuiApplication.clipboard().setText(text)
        return text

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802
        if event.matches(QKeySequence.StandardKey.Copy):
            self.copy_selection()
            return
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Space) \
                and self.currentIndex().isValid():
            self.transcript_model().toggle_expanded(self.currentIndex().row())
            return
        paging = PAGING_KEYS.get(Qt.Key(event.key()))
        if paging is not None and not event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier:
            self.page(paging)
            return
        super().keyPressEvent(event)
        self._update_follow()  # Home, arrows: the user moved

    def page(self, action: QAbstractSlider.SliderAction) -> None:
        """PageUp/PageDown/Home/End move by pixels, like a document, and make the row at the top
        of the view current. QListView's own paging searches row rectangles from the current
        row, which stalls for seconds on a long transcript whose layout is still in progress and
        cannot page through a row taller than the window."""
        # Finish a pending (batched) layout first, once: paging over a half-laid-out list
        # would skip rows and find no row at the top.
        self.executeDelayedItemsLayout()
        bar = self.verticalScrollBar()
        bar.triggerAction(action)  # actionTriggered: the user moved, following is re-decided
        top = self.row_at(bar.value())
        if top.isValid() and top != self.currentIndex():
            auto = self.hasAutoScroll()
            self.setAutoScroll(False)  # the current row may be taller than the view: stay put
            self.selectionModel().setCurrentIndex(
                top, QItemSelectionModel.SelectionFlag.ClearAndSelect)
            self.setAutoScroll(auto)

    def indexAt(self, point: QPoint) -> QModelIndex:  # noqa: N802
        """QListView's own answer, or ours where it misses (inside a row taller than the view:
        clicks, hovers and context menus there must find their row)."""
        index = super().indexAt(point)
        if index.isValid():
            return index
        candidate = self.row_at(point.y() + self.verticalOffset())
        return candidate if self.visualRect(candidate).contains(point) else QModelIndex()

    def row_at(self, y: int) -> QModelIndex:
        """The row covering content offset `y` (in pixels from the top of the transcript).

        A binary search over the rows' laid-out rectangles: QListView.indexAt misses a row
        whose rectangle is taller than the view."""
        model = self.model()
        if model is None or model.rowCount() == 0:
            return QModelIndex()
        lo, hi = 0, model.rowCount() - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.rectForIndex(model.index(mid, 0)).top() <= y:
                lo = mid
            else:
                hi = mid - 1
        return model.index(lo, 0)

    def _on_context_menu(self, pos: QPoint) -> None:
        index = self.indexAt(pos)
        if not index.isValid():
            return
        if not self.selectionModel().isSelected(index):
            self.setCurrentIndex(index)
        menu = QMenu(self)
        menu.addAction("Copy", self.copy_selection)
        row = self.transcript_model().row(index.row())
        menu.addAction("Collapse" if row.expanded else "Expand",
                       lambda: self.transcript_model().toggle_expanded(index.row()))
        menu.exec(self.viewport().mapToGlobal(pos))

    def _on_delegate_action_clicked(self, row: int, action: str) -> None:
        if action == "toggle":
            self.transcript_model().toggle_expanded(row)
        else:
            self.action_requested.emit(row, action)


# --- text helpers -------------------------------------------------------------------------------


def _body_text(row: Row) -> str:
    if row.kind is RowKind.TOOL:
        result = row.result.text() if row.result is not None else ""
        if not row.expanded:
            return result if row.result is not None else "(waiting for the result)"
        args = row.call.function.arguments if row.call else ""
        try:
            args = json.dumps(json.loads(args), indent=2, ensure_ascii=False)
        except ValueError:
            pass
        return f"Arguments:\n{args}\n\nResult:\n{result}" if row.call else result
    if row.kind is RowKind.ERROR and row.message is not None and row.message.error is not None:
        msg = row.message.error.message
        return f"{msg}\n\nPartial answer kept:\n{row.text}" if row.text else msg
    return row.text


def _clip(row: Row, body: str) -> tuple[str, int]:
    """The text to lay out, and how many lines were left out of it."""
    if row.expanded:
        if len(body) > MAX_SHOWN_CHARS:
            rest = len(body) - MAX_SHOWN_CHARS
            return body[:MAX_SHOWN_CHARS] + f"\n… {rest:,} more characters (Copy gives all)", 0
        return body, 0
    limit = {RowKind.TOOL: CARD_PREVIEW_LINES, RowKind.SYSTEM: 2}.get(row.kind, COLLAPSED_LINES)
    lines = body.split("\n", limit + 1)
    width = 400 if row.kind is not RowKind.TOOL else PREVIEW_LINE_CHARS
    if len(lines) <= limit and all(len(ln) <= width for ln in lines):
        return body, 0
    hidden = body.count("\n") + 1 - limit
    shown = "\n".join(ln if len(ln) <= width else ln[:width] + " …" for ln in lines[:limit])
    return shown, max(hidden, 1)


def _truncated(row: Row, body: str) -> bool:
    return _clip(replace(row, expanded=False), body)[1] > 0


def _header(row: Row) -> tuple[str, str]:
    m = row.message
    when = m.created_at.astimezone().strftime("%H:%M") if m is not None else ""
    if row.kind is RowKind.USER:
        return "You", when
    if row.kind is RowKind.ASSISTANT:
        model = f"{m.model} · " if m is not None and m.model else ""
        resumed = " · resumed after an interruption" if row.resumed else ""
        return "Assistant", f"{model}{when}{resumed}"
    if row.kind is RowKind.STREAMING:
        return "Assistant", row.note or "streaming…"
    if row.kind is RowKind.SYSTEM:
        return "System prompt", when
    if row.kind is RowKind.ERROR:
        kind = m.error.type.replace("_", " ") if m is not None and m.error else "error"
        return f"⚠ Error: {kind}", when
    # tool card
    if row.call is None:
        return f"⚙ tool result {m.tool_call_id if m else ''}", when
    status = "running…"
    if row.result is not None:
        st = row.result.status or "ok"
        status = {"ok": "✓ done", "error": "✗ failed", "aborted": "⊘ aborted"}.get(st, st)
        if row.result.duration_ms is not None:
            status += f" · {row.result.duration_ms} ms"
    arg = main_argument(row.call)
    return f"⚙ {row.call.function.name}  {arg}", status

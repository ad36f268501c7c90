"""The transcript's rows on screen: an item view whose rows are drawn by the transcript delegate
(ui/transcript_delegate.py) and placed by our own row geometry (ui/row_geometry.py), and which
keeps the end of the transcript in sight while the user is at the bottom.

Why not QListView: its item layout asks every row its size through Python on each change (a
row painted for the first time, the streaming row growing, an insertion), lays out in batches
whose estimated positions shift while the user scrolls (the wheel jumped back hundreds of
messages, the thumb snapped back), and pages by searching row rectangles. Here a position is a
running sum of cached heights and a change costs one row. When a row above the top of the window
changes height, the scroll position moves with it, so what the user reads stays where it is;
while the thumb is held, heights wait for its release.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from PySide6.QtCore import (
    QItemSelection,
    QItemSelectionModel,
    QModelIndex,
    QPersistentModelIndex,
    QPoint,
    QRect,
    Qt,
    QTimer,
)
from PySide6.QtGui import QPainter, QPaintEvent, QRegion, QResizeEvent, QWheelEvent
from PySide6.QtWidgets import QAbstractItemView, QStyle, QStyleOptionViewItem, QWidget

from ui.row_geometry import RowGeometry
from ui.transcript_delegate import PAINT_SLICE_S, TranscriptDelegate
from ui.transcript_model import TICK_ROLE, TranscriptModel

_Index = QModelIndex | QPersistentModelIndex
_Cursor = QAbstractItemView.CursorAction


class RowView(QAbstractItemView):
    """Rows of varying height, scrolled by the pixel, following the end when at the bottom."""

    def __init__(self, parent: QWidget | None = None) -> None:
        # Set before Qt's constructor: it already calls our updateGeometries().
        self.placement = RowGeometry()
        self._width = 0  # the width the heights were measured at
        self._follow = True
        self._deferred: dict[int, int] = {}  # row -> height measured while the thumb is held
        super().__init__(parent)
        self.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        # Always there, so the text width (and every height measured at it) never flips when
        # a conversation grows past one screen.
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOn)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.verticalScrollBar().setSingleStep(24)
        self.delegate = TranscriptDelegate(self)
        self.setItemDelegate(self.delegate)
        self.delegate.heights_changed.connect(self._on_heights_changed)
        self.verticalScrollBar().rangeChanged.connect(self._on_range_changed)
        self.verticalScrollBar().actionTriggered.connect(self._on_user_scrolled)
        self.verticalScrollBar().sliderReleased.connect(self._on_slider_released)

    # --- geometry --------------------------------------------------------------------------------

    def _measure(self, first: int, last: int) -> list[int]:
        model = self.model()
        if not isinstance(model, TranscriptModel):
            return []
        width = max(200, self.viewport().width())
        fm = self.fontMetrics()
        return self.delegate.heights(model.rows()[first:last + 1], width, fm)

    def _remeasure_all(self) -> None:
        model = self.model()
        n = model.rowCount() if model is not None else 0
        self._width = self.viewport().width()
        self.placement.reset(self._measure(0, n - 1) if n else [])
        self.updateGeometries()

    def _set_heights(self, heights: dict[int, int]) -> None:
        """Rows' heights changed (at once: one relayout for them all). A row that starts above
        the top of the window takes the scroll position with it (unless the user is dragging
        the thumb), so the rows on screen stay where they are."""
        bar = self.verticalScrollBar()
        if bar.isSliderDown():
            # The thumb follows the mouse; moving rows under it would make dragging go back
            # and forth. Rows keep their place until the thumb is let go.
            self._deferred.update(heights)
            return
        value = bar.value()
        above = {row: self.placement.top(row) < value for row in heights}
        shift = 0
        changed = []
        for row, height in heights.items():
            delta = self.placement.set_height(row, height)
            if delta:
                changed.append(row)
                shift += delta if above[row] else 0
        if not changed:
            return
        self.updateGeometries()
        if self._follow:
            bar.setValue(self._bottom(bar.maximum()))
        elif shift:
            bar.setValue(value + shift)
            self.viewport().update()  # the scroll moved pixels that were to stay still
            return
        self._update_from(min(changed))

    def _on_slider_released(self) -> None:
        deferred, self._deferred = self._deferred, {}
        self._set_heights({row: height for row, height in deferred.items()
                           if row < len(self.placement)})

    def updateGeometries(self) -> None:
        bar = self.verticalScrollBar()
        page = max(1, self.viewport().height())
        bar.setPageStep(page)
        bar.setRange(0, max(0, self.placement.total() - page))
        if self.selectionModel() is not None:  # not while setModel() is still under way
            super().updateGeometries()

    def reset(self) -> None:
        super().reset()
        self.delegate.forget()
        self._remeasure_all()
        self._follow = True
        self.verticalScrollBar().setValue(self.verticalScrollBar().maximum())
        self.viewport().update()

    def rowsInserted(self, parent: _Index, first: int, last: int) -> None:
        self.placement.insert(first, self._measure(first, last))
        self.updateGeometries()
        super().rowsInserted(parent, first, last)
        self._follow_if_needed()
        self._update_from(first)

    def _update_from(self, row: int) -> None:
        """Repaint what lies from `row` down; what is above it has not moved, or moved with
        the scroll, which copies it (see scrollContentsBy)."""
        viewport = self.viewport()
        top = self.placement.top(row) - self.verticalOffset() if row < len(self.placement) else 0
        top = max(0, min(top, viewport.height()))
        viewport.update(0, top, viewport.width(), viewport.height() - top)

    def rowsAboutToBeRemoved(self, parent: _Index, first: int, last: int) -> None:
        super().rowsAboutToBeRemoved(parent, first, last)
        self.placement.remove(first, last)
        QTimer.singleShot(0, self.updateGeometries)  # once the model has really removed them
        self.viewport().update()

    def _on_heights_changed(self, rows: list[int]) -> None:
        rows = [r for r in rows if 0 <= r < len(self.placement)]
        self._set_heights({r: self._measure(r, r)[0] for r in rows})

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self.viewport().width() != self._width and len(self.placement):
            # New width, new heights: keep the row at the top (and how far into it) in place.
            bar = self.verticalScrollBar()
            top = self.placement.row_at(bar.value())
            into = (bar.value() - self.placement.top(top)) / self.placement.height(top)
            self._remeasure_all()
            if self._follow:
                bar.setValue(self._bottom(bar.maximum()))
            else:
                bar.setValue(self.placement.top(top) + int(into * self.placement.height(top)))
        else:
            self.updateGeometries()

    def visualRect(self, index: _Index) -> QRect:
        r = index.row()
        if not index.isValid() or r >= len(self.placement):
            return QRect()
        return QRect(0, self.placement.top(r) - self.verticalOffset(), self.viewport().width(),
                     self.placement.height(r))

    def rectForIndex(self, index: _Index) -> QRect:
        """The row's rectangle in content coordinates (pixels from the top of the transcript)."""
        r = index.row()
        if not index.isValid() or r >= len(self.placement):
            return QRect()
        return QRect(0, self.placement.top(r), self.viewport().width(), self.placement.height(r))

    def row_at(self, y: int) -> QModelIndex:
        """The row covering content offset `y` (in pixels from the top of the transcript)."""
        model = self.model()
        r = self.placement.row_at(y)
        return model.index(r, 0) if model is not None and r >= 0 else QModelIndex()

    def indexAt(self, point: QPoint) -> QModelIndex:
        y = point.y() + self.verticalOffset()
        if y < 0 or y >= self.placement.total():
            return QModelIndex()
        return self.row_at(y)

    def scrollTo(self, index: _Index,
                 hint: QAbstractItemView.ScrollHint = QAbstractItemView.ScrollHint.EnsureVisible,
                 ) -> None:
        r = index.row()
        if not index.isValid() or r >= len(self.placement):
            return
        bar = self.verticalScrollBar()
        top, height, page = self.placement.top(r), self.placement.height(r), bar.pageStep()
        hints = QAbstractItemView.ScrollHint
        if hint == hints.PositionAtTop or (hint == hints.EnsureVisible and top < bar.value()):
            bar.setValue(top)
        elif hint == hints.PositionAtBottom or (
                hint == hints.EnsureVisible and top + height > bar.value() + page):
            bar.setValue(min(top, top + height - page))
        elif hint == hints.PositionAtCenter:
            bar.setValue(top + height // 2 - page // 2)
        self._update_follow()

    def horizontalOffset(self) -> int:
        return 0

    def verticalOffset(self) -> int:
        return self.verticalScrollBar().value()

    def isIndexHidden(self, index: _Index) -> bool:
        return False

    def moveCursor(self, action: _Cursor,
                   modifiers: Qt.KeyboardModifier) -> QModelIndex:
        model = self.model()
        n = model.rowCount() if model is not None else 0
        if model is None or n == 0:
            return QModelIndex()
        current = self.currentIndex().row() if self.currentIndex().isValid() else -1
        page = self.verticalScrollBar().pageStep()
        if action in (_Cursor.MoveUp, _Cursor.MovePrevious):
            r = max(0, current - 1)
        elif action in (_Cursor.MoveDown, _Cursor.MoveNext):
            r = min(n - 1, current + 1)
        elif action == _Cursor.MoveHome:
            r = 0
        elif action == _Cursor.MoveEnd:
            r = n - 1
        elif action == _Cursor.MovePageUp:
            r = self.placement.row_at(self.verticalOffset() - page)
        elif action == _Cursor.MovePageDown:
            r = self.placement.row_at(self.verticalOffset() + page)
        else:
            r = max(0, current)
        return model.index(r, 0)

    def setSelection(self, rect: QRect,
                     command: QItemSelectionModel.SelectionFlag) -> None:
        model = self.model()
        if model is None or not len(self.placement):
            return
        off = self.verticalOffset()
        first = self.placement.row_at(min(rect.top(), rect.bottom()) + off)
        last = self.placement.row_at(max(rect.top(), rect.bottom()) + off)
        self.selectionModel().select(
            QItemSelection(model.index(first, 0), model.index(last, 0)), command)

    def visualRegionForSelection(self, selection: QItemSelection) -> QRegion:
        region = QRegion()
        first, last = self._visible_rows()
        for i in range(selection.count()):
            span = selection.at(i)
            a, b = max(first, span.top()), min(last, span.bottom())
            if a <= b:
                top = self.visualRect(self.model().index(a, 0))
                bottom = self.visualRect(self.model().index(b, 0))
                region += top.united(bottom)
        return region

    def _visible_rows(self) -> tuple[int, int]:
        """First and last row on screen; (0, -1) when none."""
        if not len(self.placement):
            return 0, -1
        off = self.verticalOffset()
        return (self.placement.row_at(off),
                self.placement.row_at(off + max(0, self.viewport().height() - 1)))

    def paintEvent(self, event: QPaintEvent) -> None:
        model = self.model()
        if model is None:
            return
        painter = QPainter(self.viewport())
        option = QStyleOptionViewItem()
        self.initViewItemOption(option)
        selection = self.selectionModel()
        current = self.currentIndex()
        clip = event.rect()
        self.delegate.paint_deadline = time.perf_counter() + PAINT_SLICE_S
        self.delegate.deferred = False
        first, last = self._visible_rows()
        for r in range(first, last + 1):
            index = model.index(r, 0)
            rect = self.visualRect(index)
            if not rect.intersects(clip):
                continue
            option.rect = rect
            state = option.state & ~(QStyle.StateFlag.State_Selected
                                     | QStyle.StateFlag.State_HasFocus)
            if selection.isSelected(index):
                state |= QStyle.StateFlag.State_Selected
            if index == current and self.hasFocus():
                state |= QStyle.StateFlag.State_HasFocus
            option.state = state
            painter.setClipRect(rect)  # a height measured during a drag waits for the release
            self.delegate.paint(painter, option, index)
        painter.end()
        self.delegate.paint_deadline = None
        if self.delegate.deferred:  # rows left as plain bubbles: drawn in the next paint
            QTimer.singleShot(0, self.viewport().update)

    def scrollContentsBy(self, dx: int, dy: int) -> None:
        # Qt copies what stays on screen and repaints only the strip the scroll uncovers:
        # following a tool storm or a stream moves a few lines at a time.
        self.viewport().scroll(dx, dy)

    # --- following the stream --------------------------------------------------------------------

    def dataChanged(self, top_left: _Index, bottom_right: _Index,
                    roles: Sequence[int] = ()) -> None:
        """A changed row is measured again (its cached height is keyed by its version); the
        streaming row only repaints: its height grows through sizeHintChanged, a few lines at a
        time (see the delegate)."""
        model = self.model()
        if not isinstance(model, TranscriptModel):
            return
        if list(roles) == [TICK_ROLE]:  # spinners: their rows repaint, nothing moves
            first, last = self._visible_rows()
            top, bottom = max(first, top_left.row()), min(last, bottom_right.row())
            if top <= bottom:
                region = self.visualRect(model.index(top, 0)).united(
                    self.visualRect(model.index(bottom, 0)))
                self.viewport().update(region.intersected(self.viewport().rect()))
            return
        stream = model.streaming_row() is not None
        last_row = model.rowCount() - 1
        self._set_heights({r: self._measure(r, r)[0] for r in range(
            top_left.row(), min(bottom_right.row(), len(self.placement) - 1) + 1)
            if not (stream and r == last_row)})
        first, last = self._visible_rows()
        if top_left.row() <= last and bottom_right.row() >= first:
            region = self.visualRect(top_left).united(self.visualRect(bottom_right))
            self.viewport().update(region.intersected(self.viewport().rect())
                                   if top_left.row() >= first else self.viewport().rect())
        self._follow_if_needed()

    def at_bottom(self) -> bool:
        bar = self.verticalScrollBar()
        return bar.value() >= self._bottom(bar.maximum()) - 4

    def _follow_if_needed(self, *args: object) -> None:
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

    # Only the user decides whether the view follows: relayouts and our own scrolling move the
    # scroll bar too, and must never switch following off by catching it mid-way.
    def _on_user_scrolled(self, *args: object) -> None:
        QTimer.singleShot(0, self._update_follow)

    def _update_follow(self) -> None:
        self._follow = self.at_bottom()

    def wheelEvent(self, event: QWheelEvent) -> None:
        super().wheelEvent(event)
        self._update_follow()

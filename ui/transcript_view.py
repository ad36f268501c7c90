"""The transcript on screen: a QListView over the transcript model, drawn by the delegate
(ui/transcript_delegate.py) that lays out only what is visible. The view decides following (the
end of a streaming answer stays in sight only while the user is at the bottom), paging, copying
and the row actions' context menu.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from PySide6.QtCore import (
    QItemSelectionModel,
    QModelIndex,
    QPersistentModelIndex,
    QPoint,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QGuiApplication, QKeyEvent, QKeySequence, QWheelEvent
from PySide6.QtWidgets import QAbstractItemView, QAbstractSlider, QListView, QMenu, QWidget

from ui.output_viewer import OutputViewer
from ui.transcript_delegate import TranscriptDelegate
from ui.transcript_model import Row, RowKind, TranscriptModel
from ui.transcript_text import code_blocks

# Keys we page with ourselves (see TranscriptView.page).
PAGING_KEYS = {
    Qt.Key.Key_PageDown: QAbstractSlider.SliderAction.SliderPageStepAdd,
    Qt.Key.Key_PageUp: QAbstractSlider.SliderAction.SliderPageStepSub,
    Qt.Key.Key_Home: QAbstractSlider.SliderAction.SliderToMinimum,
    Qt.Key.Key_End: QAbstractSlider.SliderAction.SliderToMaximum,
}


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
        for label, code in self.code_copy_actions(row):
            menu.addAction(label, partial(QGuiApplication.clipboard().setText, code))
        menu.addAction("Select text…", lambda: self.open_text(index.row()))
        menu.addAction("Collapse" if row.expanded else "Expand",
                       lambda: self.transcript_model().toggle_expanded(index.row()))
        menu.exec(self.viewport().mapToGlobal(pos))

    def open_text(self, i: int) -> OutputViewer:
        """The row's whole text in a window where any part can be selected and copied."""
        row = self.transcript_model().row(i)
        viewer = OutputViewer(self.window(), "Message text",
                              "Select any part and copy it (Ctrl+C); Esc closes.",
                              row.copy_text(), wrap=row.kind is not RowKind.TOOL)
        viewer.setObjectName("message_text")
        viewer.show()
        return viewer

    @staticmethod
    def code_copy_actions(row: Row) -> list[tuple[str, str]]:
        """'Copy code' entries for the row's code blocks: (menu label, code)."""
        if row.kind not in (RowKind.ASSISTANT, RowKind.ERROR, RowKind.USER):
            return []
        blocks = code_blocks(row.text)
        if len(blocks) == 1:
            return [("Copy code" + (f" ({blocks[0][0]})" if blocks[0][0] else ""), blocks[0][1])]
        out = []
        for n, (lang, code) in enumerate(blocks, start=1):
            first = code.strip().split("\n", 1)[0][:40]
            out.append((f"Copy code block {n}" + (f" ({lang})" if lang else "") + f": {first}",
                        code))
        return out

    def _on_delegate_action_clicked(self, row: int, action: str) -> None:
        if action == "toggle":
            self.transcript_model().toggle_expanded(row)
        else:
            self.action_requested.emit(row, action)

"""The transcript on screen (rows placed and followed by ui/row_view.py): paging, copying, the
keyboard, and the row actions' context menu.
"""

from __future__ import annotations

from collections import OrderedDict
from functools import partial

from PySide6.QtCore import (
    QItemSelectionModel,
    QModelIndex,
    QPersistentModelIndex,
    QPoint,
    Qt,
    Signal,
)
from PySide6.QtGui import (
    QGuiApplication,
    QKeyEvent,
    QKeySequence,
    QMouseEvent,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QAbstractSlider,
    QMenu,
    QWidget,
)

from ui.output_viewer import OutputViewer
from ui.row_view import RowView
from ui.transcript_model import Row, RowKind, TranscriptModel
from ui.transcript_text import code_blocks

# Keys we page with ourselves (see TranscriptView.page).
PAGING_KEYS = {
    Qt.Key.Key_PageDown: QAbstractSlider.SliderAction.SliderPageStepAdd,
    Qt.Key.Key_PageUp: QAbstractSlider.SliderAction.SliderPageStepSub,
    Qt.Key.Key_Home: QAbstractSlider.SliderAction.SliderToMinimum,
    Qt.Key.Key_End: QAbstractSlider.SliderAction.SliderToMaximum,
}
_Index = QModelIndex | QPersistentModelIndex
PLACES_KEPT = 100  # conversations whose reading place is remembered (this session)
_Cursor = QAbstractItemView.CursorAction


class TranscriptView(RowView):
    """The transcript. Follows new content only when the user was already at the bottom.

    Signals:
        action_requested(int, str): an error row's action (retry, settings) was clicked.
        entry_action(list, str): pin, unpin, exclude or include these entries (a tool card
            is its call and its result).
        branch_action(str, str): entry id and "fork" (a branch keeping the history up to it),
            "edit" (a user message, to send again changed) or "regenerate[:mode]" (an answer).
    """

    action_requested = Signal(int, str)
    entry_action = Signal(list, str)  # entry ids, "pin" | "unpin" | "exclude" | "include"
    branch_action = Signal(str, str)
    read_only = False  # a read-only project: no pin or exclude
    regenerate_with: list[tuple[str, str]] = []  # (label, provider) offered by "Regenerate with"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("transcript")
        self.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.setMouseTracking(True)
        self.delegate.action_clicked.connect(self._on_delegate_action_clicked)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._on_context_menu)
        self._places: OrderedDict[tuple[str, str], tuple[str, int]] = OrderedDict()

    def set_transcript_model(self, model: TranscriptModel) -> None:
        self.setModel(model)
        model.streaming_changed.connect(self._on_streaming_changed)
        model.modelAboutToBeReset.connect(self._remember_place)
        self.reset()

    # --- the place in each conversation ----------------------------------------------------------

    def _which(self) -> tuple[str, str] | None:
        """The conversation shown, as its first and last rows (no conversation id up here: a
        conversation that got new rows since is shown at its end, as a new one is)."""
        model = self.model()
        if not isinstance(model, TranscriptModel) or model.rowCount() == 0:
            return None
        return model.row(0).key, model.row(model.rowCount() - 1).key

    def _remember_place(self) -> None:
        which = self._which()
        if which is None:
            return
        self._places.pop(which, None)
        if self.at_bottom():
            return  # the end, where a conversation opens anyway
        bar = self.verticalScrollBar()
        top = self.row_at(bar.value())
        if top.isValid():
            key = self.transcript_model().row(top.row()).key
            self._places[which] = (key, bar.value() - self.rectForIndex(top).top())
            while len(self._places) > PLACES_KEPT:
                self._places.popitem(last=False)

    def reset(self) -> None:
        """A conversation shown: at its end, or where the user left it when it is the same."""
        super().reset()
        which = self._which()
        places = getattr(self, "_places", {})  # (none yet while the view is being made)
        place = places.get(which) if which is not None else None
        if place is None:
            return
        key, offset = place
        model = self.transcript_model()
        row = next((i for i in range(model.rowCount()) if model.row(i).key == key), None)
        if row is None:
            return
        self._follow = False
        self.verticalScrollBar().setValue(self.rectForIndex(model.index(row, 0)).top() + offset)

    def transcript_model(self) -> TranscriptModel:
        model = self.model()
        assert isinstance(model, TranscriptModel)
        return model

    # --- copy and actions ------------------------------------------------------------------------

    def copy_selection(self) -> str:
        rows = sorted(i.row() for i in self.selectionModel().selectedIndexes())
        model = self.transcript_model()
        text = "\n\n".join(model.row(r).copy_text() for r in rows)
        if text:
            QGuiApplication.clipboard().setText(text)
        return text

    def keyPressEvent(self, event: QKeyEvent) -> None:
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
        of the view current, so paging goes through a row taller than the window too."""
        bar = self.verticalScrollBar()
        bar.triggerAction(action)  # actionTriggered: the user moved, following is re-decided
        top = self.row_at(bar.value())
        if top.isValid() and top != self.currentIndex():
            auto = self.hasAutoScroll()
            self.setAutoScroll(False)  # the current row may be taller than the view: stay put
            self.selectionModel().setCurrentIndex(
                top, QItemSelectionModel.SelectionFlag.ClearAndSelect)
            self.setAutoScroll(auto)

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
        more = self.delegate.layout(row, self.visualRect(index).width(), self.font()).footer
        if row.expanded or more:  # only a row with more to show (or less) offers it
            menu.addAction("Collapse" if row.expanded else "Expand",
                           lambda: self.transcript_model().toggle_expanded(index.row()))
        m = row.message
        if m is not None and row.kind is not RowKind.STREAMING and not self.read_only:
            ids = [m.id] + ([row.result.id] if row.result is not None
                            and row.result.id != m.id else [])
            menu.addSeparator()
            pin = ("unpin", "Unpin") if row.pinned else ("pin", "Pin (always sent)")
            off = (("include", "Include in the context again") if not m.include_in_context
                   else ("exclude", "Exclude from the context"))
            for action, label in (pin, off):
                menu.addAction(label, partial(self.entry_action.emit, ids, action))
            self._branch_actions(menu, row)
        menu.exec(self.viewport().mapToGlobal(pos))

    def _branch_actions(self, menu: QMenu, row: Row) -> None:
        """Fork from here; Edit and resend (a user message); Regenerate (an answer)."""
        m = row.message
        if m is None:
            return
        menu.addSeparator()
        last = row.result.id if row.result is not None else m.id  # a card: call and result
        menu.addAction("Fork from here (a new branch)",
                       partial(self.branch_action.emit, last, "fork"))
        if row.kind is RowKind.USER:
            menu.addAction("Edit and resend…", partial(self.branch_action.emit, m.id, "edit"))
        elif row.kind in (RowKind.ASSISTANT, RowKind.ERROR, RowKind.TOOL):
            menu.addAction("Regenerate", partial(self.branch_action.emit, m.id, "regenerate"))
            again = menu.addMenu("Regenerate in")
            for mode, label in (("chat", "Chat mode"), ("agent", "Agent mode")):
                again.addAction(label, partial(self.branch_action.emit, m.id,
                                               f"regenerate:{mode}"))
            if self.regenerate_with:
                other = menu.addMenu("Regenerate with")
                for label, provider in self.regenerate_with:
                    other.addAction(label, partial(self.branch_action.emit, m.id,
                                                   f"regenerate@{provider}"))

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        """Double-clicking one of the user's messages edits it (to send it again, changed)."""
        index = self.indexAt(event.position().toPoint())
        row = self.transcript_model().row(index.row()) if index.isValid() else None
        if row is not None and row.kind is RowKind.USER and row.message is not None \
                and not self.read_only:
            self.branch_action.emit(row.message.id, "edit")
            return
        super().mouseDoubleClickEvent(event)

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

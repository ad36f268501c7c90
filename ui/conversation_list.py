"""The left panel: the project's conversations, newest activity first, with search; branches
under the conversation they grew from (collapsible)."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QAction, QDragEnterEvent, QDragMoveEvent, QDropEvent, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QMenu,
    QMessageBox,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QTreeWidgetItemIterator,
    QVBoxLayout,
    QWidget,
)

from core.cost import money
from core.store.branches import BRANCH_SUFFIX
from core.store.conversations import ConversationSummary
from ui.throttle import Throttle

ID_ROLE = Qt.ItemDataRole.UserRole + 1
SEARCH_DEBOUNCE_MS = 200  # typing in the search box rests this long before the list is searched


class _Tree(QTreeWidget):
    """The list itself; files dropped on it are offered for import (`dropped`)."""

    dropped = Signal(list)

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setAcceptDrops(True)
        self.setDragDropMode(QAbstractItemView.DragDropMode.DropOnly)

    def _files(self, event: QDropEvent | QDragEnterEvent | QDragMoveEvent) -> list[str]:
        data = event.mimeData()
        return [u.toLocalFile() for u in data.urls() if u.isLocalFile()] if data.hasUrls() else []

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if self._files(event):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:
        if self._files(event):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event: QDropEvent) -> None:
        files = self._files(event)
        if files:
            event.acceptProposedAction()
            self.dropped.emit(files)
        else:
            event.ignore()


class ConversationList(QWidget):
    """Signals:
        selected(str): a conversation was chosen.
        new_requested(): Ctrl+N or the New button.
        rename_requested(str, str): id, new title.
        delete_requested(str): id (already confirmed by the user).
        search_changed(str): the search text, debounced.
        files_dropped(list): files dropped on the list (to import).
    """

    selected = Signal(str)
    new_requested = Signal()
    rename_requested = Signal(str, str)
    delete_requested = Signal(str)
    search_changed = Signal(str)
    files_dropped = Signal(list)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.project_label = QLabel("", self)
        self.project_label.setStyleSheet("font-weight: bold; font-size: 14px; padding: 4px 2px;")
        self.search = QLineEdit(self)
        self.search.setPlaceholderText("Search…")
        self.search.setToolTip("Search titles and messages (F3: the next match)")
        self.search.setClearButtonEnabled(True)
        self.new_button = QPushButton("New", self)
        self.new_button.setToolTip("New conversation (Ctrl+N)")
        self.list = _Tree(self)
        self.list.dropped.connect(self.files_dropped)
        self.list.setObjectName("conversation_list")
        self.list.setHeaderHidden(True)
        self.list.setColumnCount(1)
        self.list.setIndentation(14)
        self.list.setAlternatingRowColors(False)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)

        top = QHBoxLayout()
        top.addWidget(self.search, 1)
        top.addWidget(self.new_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 4, 8)
        layout.addWidget(self.project_label)
        layout.addLayout(top)
        layout.addWidget(self.list, 1)

        self._search_rested = Throttle(self.search_changed.emit, SEARCH_DEBOUNCE_MS, self,
                                       mode="debounce")
        self.search.textChanged.connect(self._search_rested)
        self.new_button.clicked.connect(self.new_requested)
        self.list.currentItemChanged.connect(self._on_list_current_changed)
        self.list.itemDoubleClicked.connect(lambda item, _c: self.rename(item.data(0, ID_ROLE)))
        self.list.itemCollapsed.connect(lambda item: self._collapsed.add(item.data(0, ID_ROLE)))
        self.list.itemExpanded.connect(
            lambda item: self._collapsed.discard(item.data(0, ID_ROLE)))
        self.list.customContextMenuRequested.connect(self._on_list_context_menu)

        rename = QAction("Rename", self.list)
        rename.setShortcut(QKeySequence(Qt.Key.Key_F2))
        rename.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        rename.triggered.connect(lambda: self.rename(self.current_id()))
        delete = QAction("Delete", self.list)
        delete.setShortcut(QKeySequence(QKeySequence.StandardKey.Delete))
        delete.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        delete.triggered.connect(lambda: self.confirm_delete(self.current_id()))
        self.list.addActions([rename, delete])
        self._writable = True
        self._titles: dict[str, str] = {}
        self._collapsed: set[str] = set()  # origins whose branches the user folded away

    def set_project_name(self, name: str) -> None:
        self.project_label.setText(name)

    def set_writable(self, writable: bool) -> None:
        self._writable = writable
        self.new_button.setEnabled(writable)

    def set_rows(self, rows: list[ConversationSummary], current: str | None,
                 empty_note: str | None = None) -> None:
        """Show `rows` (newest first); a branch goes under the conversation it grew from when
        that one is shown too. With no rows, `empty_note` says why (a search found nothing)."""
        self.list.blockSignals(True)
        self.list.clear()
        if not rows and empty_note:
            note = QTreeWidgetItem([empty_note])
            note.setFlags(Qt.ItemFlag.ItemIsEnabled)  # a sentence, not a conversation to choose
            note.setToolTip(0, empty_note)
            self.list.addTopLevelItem(note)
        self._titles = {r.id: r.title for r in rows}
        items: dict[str, QTreeWidgetItem] = {}
        for r in rows:
            when = r.updated_at.astimezone().strftime("%b %d, %H:%M")
            branch = "branch · " if r.branch_of is not None else ""
            spent = f" · {money(r.cost)}" if r.cost else ""
            noun = "message" if r.message_count == 1 else "messages"
            item = QTreeWidgetItem([f"{r.title}\n{branch}{when} · {r.message_count} {noun}"
                                    f"{spent}"])
            item.setData(0, ID_ROLE, r.id)
            item.setToolTip(0, r.title)
            items[r.id] = item
        by_id = {r.id: r for r in rows}
        for r in rows:
            parent = items.get(r.branch_of) if r.branch_of not in (None, r.id) else None
            if parent is not None and not _under(parent, items[r.id]):
                parent.addChild(items[r.id])
                origin = by_id[r.branch_of].title if r.branch_of in by_id else ""
                origin = BRANCH_SUFFIX.sub("", origin)  # a branch of "X (branch 1)" is "X (…)"
                if origin and r.title.startswith(origin) and r.title != origin:
                    # under its origin, what tells it apart: "↳ (branch 2)"
                    first, _, rest = items[r.id].text(0).partition("\n")
                    items[r.id].setText(0, f"↳ {first[len(origin):].strip()}\n"
                                           f"{rest.removeprefix('branch · ')}")
            else:
                self.list.addTopLevelItem(items[r.id])
        for conv_id, item in items.items():
            if item.childCount():
                item.setExpanded(conv_id not in self._collapsed)
        if current in items:
            shown = items[current].parent()
            while shown is not None:  # the open conversation is never folded away
                shown.setExpanded(True)
                shown = shown.parent()
            self.list.setCurrentItem(items[current])
        self.list.blockSignals(False)

    def current_id(self) -> str | None:
        item = self.list.currentItem()
        return str(item.data(0, ID_ROLE)) if item is not None else None

    def current_title(self) -> str | None:
        conv = self.current_id()
        return self._titles.get(conv) if conv else None

    def ids(self) -> list[str]:
        """The conversations shown, top to bottom (branches after their origin)."""
        out = []
        it = QTreeWidgetItemIterator(self.list)
        while it.value() is not None:
            if it.value().data(0, ID_ROLE) is not None:
                out.append(str(it.value().data(0, ID_ROLE)))
            it += 1
        return out

    def titles(self) -> list[str]:
        return [self._titles[i] for i in self.ids()]

    def select(self, conv_id: str) -> bool:
        """Make `conv_id` the current row (as a click does); False when it is not shown."""
        it = QTreeWidgetItemIterator(self.list)
        while it.value() is not None:
            if it.value().data(0, ID_ROLE) == conv_id:
                self.list.setCurrentItem(it.value())
                return True
            it += 1
        return False

    def rename(self, conv_id: str | None) -> None:
        if not conv_id or not self._writable:
            return
        dialog = QInputDialog(self)
        dialog.setObjectName("rename_dialog")
        dialog.setWindowTitle("Rename conversation")
        dialog.setLabelText("Title:")
        dialog.setTextValue(self._titles.get(conv_id, ""))
        # Room for the window's title and a long name (the default is a narrow box).
        dialog.resize(min(900, max(460, dialog.fontMetrics().horizontalAdvance(
            dialog.textValue()) + 80)),
                      dialog.sizeHint().height())
        if dialog.exec() and dialog.textValue().strip():
            self.rename_requested.emit(conv_id, dialog.textValue().strip())

    def confirm_delete(self, conv_id: str | None) -> None:
        if not conv_id or not self._writable:
            return
        title = self._titles.get(conv_id, conv_id)
        answer = QMessageBox.question(
            self, "Delete conversation",
            f"Delete “{title}”?\n\nIt moves to the project's .workbench/trash folder, "
            "so it can still be recovered by hand.",
        )
        if answer == QMessageBox.StandardButton.Yes:
            self.delete_requested.emit(conv_id)

    def _on_list_current_changed(self, current: QTreeWidgetItem | None, _prev: object) -> None:
        if current is not None and current.data(0, ID_ROLE) is not None:
            self.selected.emit(current.data(0, ID_ROLE))

    def _on_list_context_menu(self, pos: QPoint) -> None:
        item = self.list.itemAt(pos)
        if item is None or item.data(0, ID_ROLE) is None or not self._writable:
            return
        conv_id = item.data(0, ID_ROLE)
        menu = QMenu(self)
        menu.addAction("Rename…", lambda: self.rename(conv_id))
        menu.addAction("Delete…", lambda: self.confirm_delete(conv_id))
        menu.exec(self.list.viewport().mapToGlobal(pos))


def _under(item: QTreeWidgetItem, other: QTreeWidgetItem) -> bool:
    """Whether `item` is `other` or lies under it (a loop in broken metadata: shown flat)."""
    at: QTreeWidgetItem | None = item
    while at is not None:
        if at is other:
            return True
        at = at.parent()
    return False

"""The left panel: the project's conversations, newest activity first, with search."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from core.store.conversations import ConversationSummary

ID_ROLE = Qt.ItemDataRole.UserRole + 1


class ConversationList(QWidget):
    """Signals:
        selected(str): a conversation was chosen.
        new_requested(): Ctrl+N or the New button.
        rename_requested(str, str): id, new title.
        delete_requested(str): id (already confirmed by the user).
        search_changed(str): the search text, debounced.
    """

    selected = Signal(str)
    new_requested = Signal()
    rename_requested = Signal(str, str)
    delete_requested = Signal(str)
    search_changed = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.project_label = QLabel("", self)
        self.project_label.setStyleSheet("font-weight: bold; font-size: 14px; padding: 4px 2px;")
        self.search = QLineEdit(self)
        self.search.setPlaceholderText("Search titles and messages")
        self.search.setClearButtonEnabled(True)
        self.new_button = QPushButton("New", self)
        self.new_button.setToolTip("New conversation (Ctrl+N)")
        self.list = QListWidget(self)
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

        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(200)
        self._search_timer.timeout.connect(lambda: self.search_changed.emit(self.search.text()))
        self.search.textChanged.connect(lambda _: self._search_timer.start())
        self.new_button.clicked.connect(self.new_requested)
        self.list.currentItemChanged.connect(self._on_list_current_changed)
        self.list.itemDoubleClicked.connect(lambda item: self.rename(item.data(ID_ROLE)))
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

    def set_project_name(self, name: str) -> None:
        self.project_label.setText(name)

    def set_writable(self, writable: bool) -> None:
        self._writable = writable
        self.new_button.setEnabled(writable)

    def set_rows(self, rows: list[ConversationSummary], current: str | None) -> None:
        self.list.blockSignals(True)
        self.list.clear()
        self._titles = {r.id: r.title for r in rows}
        for r in rows:
            when = r.updated_at.astimezone().strftime("%b %d, %H:%M")
            item = QListWidgetItem(f"{r.title}\n{when} · {r.message_count} messages")
            item.setData(ID_ROLE, r.id)
            item.setToolTip(r.title)
            self.list.addItem(item)
            if r.id == current:
                self.list.setCurrentItem(item)
        self.list.blockSignals(False)

    def current_id(self) -> str | None:
        item = self.list.currentItem()
        return str(item.data(ID_ROLE)) if item is not None else None

    def rename(self, conv_id: str | None) -> None:
        if not conv_id or not self._writable:
            return
        title, ok = QInputDialog.getText(self, "Rename conversation", "Title:",
                                         text=self._titles.get(conv_id, ""))
        if ok and title.strip():
            self.rename_requested.emit(conv_id, title.strip())

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

    def _on_list_current_changed(self, current: QListWidgetItem | None, _prev: object) -> None:
        if current is not None:
            self.selected.emit(current.data(ID_ROLE))

    def _on_list_context_menu(self, pos: QPoint) -> None:
        item = self.list.itemAt(pos)
        if item is None or not self._writable:
            return
        conv_id = item.data(ID_ROLE)
        menu = QMenu(self)
        menu.addAction("Rename…", lambda: self.rename(conv_id))
        menu.addAction("Delete…", lambda: self.confirm_delete(conv_id))
        menu.exec(self.list.viewport().mapToGlobal(pos))

"""The Context Inspector's list of the tools a request offers: by source (ours, each MCP
server), each tool with its schema's tokens; an MCP tool or a whole server ticked off or on."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QHeaderView, QTreeWidget, QTreeWidgetItem, QWidget

MAX_HEIGHT = 150


class ToolList(QTreeWidget):
    """Signals:
        toggled(str, bool): an MCP tool's name, or a server's: offered or not.
    """

    toggled = Signal(str, bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("tools_offered")
        self.setHeaderLabels(["Tools offered", "tokens"])
        self.setRootIsDecorated(True)
        header = self.header()
        header.setStretchLastSection(False)  # the names take the room, the figures what they need
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        self.setToolTip("Every tool the next request offers and what its schema costs. Untick an "
                        "MCP tool, or a whole server, to stop offering it in this conversation.")
        self.itemChanged.connect(self._on_item_changed)
        self.itemExpanded.connect(lambda _item: self._fit())
        self.itemCollapsed.connect(lambda _item: self._fit())
        self.hide()  # shown with the first request's tools

    def show_tools(self, groups: list[tuple[str, list[tuple[str, int, bool]], str]],
                   switchable: set[str]) -> None:
        """The tools offered, by source: (source, [(name, tokens, on)], a note when it offers
        nothing and why: "failed: …") each; the sources and tools in `switchable` (an MCP
        server, its tools) can be ticked off."""
        self.blockSignals(True)
        self.clear()
        for source, tools, note in groups:
            total = sum(t for _, t, on in tools if on)
            head = QTreeWidgetItem([source, note.split(":")[0] if note else f"{total:,}"])
            if note:
                head.setToolTip(0, f"{source}: {note}")
                head.setToolTip(1, note)
            head.setData(0, Qt.ItemDataRole.UserRole, source)
            if source in switchable:
                head.setCheckState(0, Qt.CheckState.Checked if any(on for *_, on in tools)
                                   else Qt.CheckState.Unchecked)
            for name, tokens, on in tools:
                item = QTreeWidgetItem([name, f"{tokens:,}" if on else "off"])
                item.setData(0, Qt.ItemDataRole.UserRole, name)
                if name in switchable:
                    item.setCheckState(0, Qt.CheckState.Checked if on
                                       else Qt.CheckState.Unchecked)
                head.addChild(item)
            self.addTopLevelItem(head)
            head.setExpanded(source in switchable)
        self.setVisible(bool(groups))
        self._fit()
        self.blockSignals(False)

    def _fit(self) -> None:
        """As tall as its rows (MAX_HEIGHT at most): one source does not take a screenful."""
        rows, item = 0, self.topLevelItem(0)
        while item is not None:
            rows += 1
            item = self.itemBelow(item)
        height = self.header().height() + rows * max(16, self.sizeHintForRow(0))
        self.setFixedHeight(min(MAX_HEIGHT, height + 2 * self.frameWidth() + 2))

    def _on_item_changed(self, item: QTreeWidgetItem, column: int) -> None:
        name = item.data(0, Qt.ItemDataRole.UserRole)
        if column == 0 and name:
            on = item.checkState(0) == Qt.CheckState.Checked
            # after this signal: the list is made anew in answer, and `item` goes with it
            QTimer.singleShot(0, lambda: self.toggled.emit(str(name), on))

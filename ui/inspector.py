"""The Context Inspector: a side panel showing what the next request sends, what it leaves out
and why, against the model's window."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QModelRoleData,
    QModelRoleDataSpan,
    QPersistentModelIndex,
    Qt,
    Signal,
)
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDockWidget,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSlider,
    QTableView,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ui.palette import current
from ui.panel_scroll import PanelScroll
from ui.tool_list import ToolList

Row = tuple[int, str, str, str, int, int, str, str]
DECISIONS = ("all", "kept", "previewed", "referenced", "summarized", "digested", "dropped",
             "excluded", "synthetic")
COLUMNS = ("#", "decision", "role", "tokens", "stage", "reason")
BAR_PARTS = ("system", "instructions", "tools", "summary", "history", "draft", "reserved",
             "free")
LABELS = {"instructions": "project instructions"}  # a part's name where it is not its key
_Index = QModelIndex | QPersistentModelIndex
_DISPLAY = int(Qt.ItemDataRole.DisplayRole.value)
_TOOLTIP = int(Qt.ItemDataRole.ToolTipRole.value)
_FOREGROUND = int(Qt.ItemDataRole.ForegroundRole.value)
_GREY = frozenset(("dropped", "excluded", "digested", "summarized"))


class DecisionModel(QAbstractTableModel):
    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._rows: list[Row] = []

    def set_rows(self, rows: list[Row]) -> None:
        self.beginResetModel()
        self._rows = rows
        self.endResetModel()

    def entry_id(self, row: int) -> str:
        return self._rows[row][1]

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return COLUMNS[section]
        return None

    def index(self, row: int, column: int, parent: _Index = QModelIndex()) -> QModelIndex:  # noqa: B008
        # One call back into Python per cell instead of two (rowCount and columnCount).
        if parent.isValid() or not (0 <= row < len(self._rows) and 0 <= column < len(COLUMNS)):
            return QModelIndex()
        return self.createIndex(row, column)

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        role = int(role)
        if role == _TOOLTIP:
            return self._rows[index.row()][7]
        return self._cell(index.row(), index.column()).get(role)

    def multiData(self, index: _Index,
                  span: QModelRoleDataSpan | QModelRoleData, /) -> None:
        """All the roles a painted cell needs in one call back into Python: while another
        thread runs Python, every call from Qt into Python waits for the GIL, and a table
        asking role by role stalls the window (Qt 6's delegate asks through here)."""
        cell = self._cell(index.row(), index.column()) if index.isValid() else {}
        slots = [span] if isinstance(span, QModelRoleData) else \
            cast(Iterable[QModelRoleData], span)  # iterable, though its stub does not say
        for slot in slots:
            value = cell.get(slot.role())
            if value is None:
                slot.clearData()
            else:
                slot.setData(value)

    def _cell(self, row: int, col: int) -> dict[int, Any]:
        pos, _id, decision, who, before, after, stage, reason = self._rows[row]
        if col == 0:
            text = str(pos) if pos else ""
        elif col == 3:
            text = f"{before:,} → {after:,}" if before != after else f"{after:,}"
        else:
            text = (decision, who, stage, reason)[(1, 2, 4, 5).index(col)]
        cell: dict[int, Any] = {_DISPLAY: text}
        if decision in _GREY:
            cell[_FOREGROUND] = QColor(current().faint)
        return cell


class BudgetBar(QWidget):
    """The request against the window: stacked parts, numbers on hover."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.parts: list[tuple[str, int]] = []
        self.setMinimumHeight(16)
        self.setMaximumHeight(16)

    def set_parts(self, parts: list[tuple[str, int]]) -> None:
        self.parts = parts
        self.setToolTip("\n".join(f"{LABELS.get(name, name)}: {tokens:,} tokens"
                                   for name, tokens in parts))
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        total = sum(t for _, t in self.parts) or 1
        painter = QPainter(self)
        x = 0.0
        width = self.width()
        for name, tokens in self.parts:
            w = width * tokens / total
            painter.fillRect(int(x), 0, max(0, round(x + w) - int(x)), self.height(),
                             QColor(current().bar.get(name, current().bar["other"])))
            x += w
        painter.end()


class InspectorPanel(QDockWidget):
    """Signals:
        entry_clicked(str): the user picked an entry's decision (the window shows that entry).
    """

    entry_clicked = Signal(str)
    summary_action = Signal(str, str)  # summary entry id, "exclude" (undo) | "include" (redo)
    model_view_toggled = Signal(bool)
    compact_requested = Signal(str)  # the focus (may be empty)
    budget_changed = Signal(int)  # percent of the usable budget to preview (100: as it is)
    request_picked = Signal(int)  # 0: the next request (live); k: the k-th saved, newest first
    instructions_toggled = Signal(bool)  # send the project instructions in this conversation
    tool_toggled = Signal(str, bool)  # an MCP tool's name, or "server__*": offered or not

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Context Inspector", parent)
        self.setObjectName("inspector")
        body = QWidget(self)
        layout = QVBoxLayout(body)
        layout.setContentsMargins(8, 6, 8, 8)  # as the run panel's: one panel beside 740 px
        self.header = QLabel("No conversation.", body)
        self.header.setObjectName("inspector_header")
        self.header.setWordWrap(True)
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.bar = BudgetBar(body)
        self.legend = QLabel(legend(), body)
        self.legend.setWordWrap(True)  # a narrow panel: the key on two lines
        self.picker = QComboBox(body)
        self.picker.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.picker.setMinimumContentsLength(10)
        self.picker.setObjectName("request_picker")
        self.picker.addItem("The next request (live preview)")
        self.picker.currentIndexChanged.connect(self.request_picked)
        self.slider = _BudgetSlider(Qt.Orientation.Horizontal, body)
        self.slider.setObjectName("budget_slider")
        self.slider.setRange(5, 200)
        self.slider.setSingleStep(5)
        self.slider.setPageStep(10)
        self.slider.setValue(100)
        self.slider.setToolTip("Preview what a smaller or larger budget would keep; nothing is "
                               "sent")
        self.slider_label = QLabel("Budget: as configured", body)
        self.slider.valueChanged.connect(self._on_slider)
        self.slider_reset = QToolButton(body)
        self.slider_reset.setObjectName("budget_reset")
        self.slider_reset.setText("As configured")
        self.slider_reset.setToolTip("Back to the budget as configured (or double-click the "
                                     "slider)")
        self.slider_reset.clicked.connect(lambda: self.slider.setValue(100))
        self.slider_reset.hide()
        self.instructions = QCheckBox("Project instructions", body)
        self.instructions.setObjectName("project_instructions")
        self.instructions.hide()  # shown when the project has an AGENTS.md (or CLAUDE.md)
        self.instructions.toggled.connect(self.instructions_toggled)
        self.tools = ToolList(body)
        self.tools.toggled.connect(self.tool_toggled)
        self.model_view = QCheckBox("Model view", body)
        self.model_view.setToolTip("Dim, in the transcript, every entry the request leaves out "
                                   "(and say why)")
        self.model_view.setObjectName("model_view")
        self.model_view.toggled.connect(self.model_view_toggled)
        self.filter = QComboBox(body)
        self.filter.addItems([d if d == "all" else f"only {d}" for d in DECISIONS])
        self.filter.currentIndexChanged.connect(self._apply_filter)
        self.model = DecisionModel(self)
        self.table = QTableView(body)
        self.table.setObjectName("decisions")
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.setWordWrap(False)
        self.table.activated.connect(self._on_activated)
        self.table.clicked.connect(self._on_activated)
        self.history_label = QLabel("Summaries", body)  # the compaction history
        self.history_label.setToolTip("The compaction history: every summary written, newest "
                                      "last; Undo takes the selected one back")
        self.history = QListWidget(body)
        self.history.setObjectName("compaction_history")
        self.history.setMaximumHeight(110)
        self.history.currentItemChanged.connect(self._on_history_current)
        self.history.itemActivated.connect(
            lambda item: self.entry_clicked.emit(item.data(Qt.ItemDataRole.UserRole)))
        self.undo = QPushButton("Undo", body)
        self.undo.setObjectName("undo_summary")
        self.undo.setToolTip("Exclude the selected summary: the entries it stands for are sent "
                             "again (Redo includes it again). The log keeps both.")
        self.undo.setEnabled(False)
        self.undo.clicked.connect(self._on_undo_clicked)
        row = QHBoxLayout()
        row.addWidget(self.history_label)
        row.addStretch(1)
        row.addWidget(self.undo)
        self.focus = QLineEdit(body)
        self.focus.setObjectName("compact_focus")
        self.focus.setPlaceholderText("Focus of the summary (optional)")
        self.compact = QPushButton("Compact now", body)
        self.compact.setObjectName("compact_now")
        self.compact.setToolTip("Summarize the older history now (the recent rounds stay as "
                                "they are; Undo above takes it back)")
        self.compact.clicked.connect(lambda: self.compact_requested.emit(self.focus.text()))
        self.focus.returnPressed.connect(self.compact.click)
        compact_row = QHBoxLayout()
        compact_row.addWidget(self.focus, 1)
        compact_row.addWidget(self.compact)
        slider_row = QHBoxLayout()
        slider_row.addWidget(self.slider_label)
        slider_row.addWidget(self.slider, 1)
        slider_row.addWidget(self.slider_reset)
        layout.addWidget(self.picker)
        layout.addWidget(self.header)
        layout.addLayout(slider_row)
        for widget in (self.bar, self.legend, self.instructions, self.tools, self.model_view,
                       self.filter, self.table):
            layout.addWidget(widget)
        layout.addLayout(row)
        layout.addWidget(self.history)
        layout.addLayout(compact_row)
        # On a short screen the panel scrolls: squeezed, its header lost its last lines.
        self.setWidget(PanelScroll(body, self))  # never narrower than what it holds
        self._all: list[Row] = []

    def show_request(self, header: str, parts: list[tuple[str, int]], rows: list[Row]) -> None:
        self.header.setText(header)
        self.bar.set_parts(parts)
        if rows is not self._all:  # the same decisions as shown: the table keeps its place
            self._all = rows
            self._apply_filter()

    def show_instructions(self, text: str, sent: bool, tip: str) -> None:
        """The project instructions' switch: `text` names the file and its cost ("" hides
        it: the project has none); `sent`: the request carries them."""
        self.instructions.setVisible(bool(text))
        self.instructions.setText(text)
        self.instructions.setToolTip(tip)
        self.instructions.blockSignals(True)
        self.instructions.setChecked(sent)
        self.instructions.blockSignals(False)

    def show_tools(self, groups: list[tuple[str, list[tuple[str, int, bool]], str]],
                   switchable: set[str]) -> None:
        """The tools offered (see ToolList.show_tools)."""
        self.tools.show_tools(groups, switchable)

    def show_summaries(self, summaries: list[tuple[str, str, bool, str]]) -> None:
        """(entry id, one line, in force, its tooltip) per summary, oldest first."""
        current = self.history.currentItem()
        keep = current.data(Qt.ItemDataRole.UserRole) if current is not None else None
        self.history.clear()
        for entry_id, line, active, tip in summaries:
            item = QListWidgetItem(line if active else f"{line} · undone")
            item.setToolTip(tip)
            item.setData(Qt.ItemDataRole.UserRole, entry_id)
            item.setData(Qt.ItemDataRole.UserRole + 1, active)
            self.history.addItem(item)
            if entry_id == keep:
                self.history.setCurrentItem(item)
        if not summaries:
            self.history.addItem("No summaries yet: Conversation → Compact now, or /compact.")
        self._on_history_current()

    def _on_history_current(self, *args: object) -> None:
        item = self.history.currentItem()
        entry_id = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        self.undo.setEnabled(bool(entry_id))
        active = bool(item.data(Qt.ItemDataRole.UserRole + 1)) if item is not None else True
        self.undo.setText("Undo" if active else "Redo")

    def _on_undo_clicked(self) -> None:
        item = self.history.currentItem()
        entry_id = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        if entry_id:
            active = bool(item.data(Qt.ItemDataRole.UserRole + 1))
            self.summary_action.emit(entry_id, "exclude" if active else "include")

    def set_saved(self, labels: list[str]) -> None:
        """The kept requests, newest first (the picker keeps its choice when it can)."""
        current = self.picker.currentIndex()
        self.picker.blockSignals(True)
        while self.picker.count() > 1:
            self.picker.removeItem(1)
        self.picker.addItems(labels)
        self.picker.setCurrentIndex(current if current < self.picker.count() else 0)
        self.picker.blockSignals(False)
        self.slider.setEnabled(self.picker.currentIndex() == 0)

    def _on_slider(self, value: int) -> None:
        if value % 5:  # a drag lands anywhere; the keys move by 5 from a multiple of 5
            self.slider.setValue(5 * round(value / 5))
            return
        self.slider_reset.setVisible(value != 100)
        self.slider_label.setText("Budget: as configured" if value == 100
                                  else f"Budget preview: {value}%")
        self.budget_changed.emit(value)

    def restyle(self) -> None:
        """The palette changed: the bar and its key in the new colours."""
        self.legend.setText(legend())
        self.bar.update()

    def set_compacting(self, running: bool) -> None:
        self.compact.setEnabled(not running)
        self.compact.setText("Summarizing…" if running else "Compact now")

    def clear(self, why: str) -> None:
        self.header.setText(why)
        self.bar.set_parts([])
        self._all = []
        self.model.set_rows([])

    def rows(self) -> list[Row]:
        return list(self.model._rows)

    def _apply_filter(self, *args: object) -> None:
        wanted = DECISIONS[self.filter.currentIndex()]
        self.model.set_rows(self._all if wanted == "all"
                            else [r for r in self._all if r[2] == wanted])
        for col, width in ((0, 48), (1, 86), (2, 70), (3, 96), (4, 90)):
            self.table.setColumnWidth(col, width)

    def _on_activated(self, index: QModelIndex) -> None:
        if index.isValid():
            self.entry_clicked.emit(self.model.entry_id(index.row()))


class _BudgetSlider(QSlider):
    """The budget preview's slider: a double-click returns it to the budget as configured."""

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        self.setValue(100)
        event.accept()


def legend() -> str:
    """The bar's key: a square of each part's colour in the palette in use, and its name."""
    bar = current().bar
    return " ".join(f"<span style='color:{bar[n]}'>■</span>&nbsp;"  # a square stays with its name
                    + LABELS.get(n, n).replace(" ", "&nbsp;") for n in BAR_PARTS)

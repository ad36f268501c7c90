"""The run panel (run mode): choose a workflow and start it; while it runs, its steps with
status, result, time and tokens, the active one highlighted, and the controls (pause or
resume, skip, redo, abort). It shows plain values (`RunView`); app/window/run_flow.py makes them."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QKeySequence, QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDockWidget,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ui.palette import current

ICONS = {"pending": "○", "active": "▶", "done": "✓", "skipped": "↷", "failed": "✗"}
STATUS_TEXT = {"ready": "not started", "pausing": "pausing after this round",
               "running": "running", "waiting": "waiting for you", "limit": "at its step limit",
               "failed": "failed", "paused": "paused", "post_run": "writing the wrap-up",
               "finished": "complete", "aborted": "aborted"}


@dataclass(frozen=True)
class StepView:
    id: str
    title: str
    status: str  # pending | active | done | skipped | failed
    result: str = ""
    elapsed_s: float = 0.0
    tokens: int = 0
    error: str = ""
    brief: str = ""


@dataclass(frozen=True)
class RunView:
    workflow: str
    status: str  # see STATUS_TEXT
    steps: list[StepView] = field(default_factory=list)
    goal: str = ""
    message: str = ""  # why the run stopped, when it did

    @property
    def open(self) -> bool:
        """A run that can go on (not a workflow shown before it starts, not an ended run)."""
        return self.status not in ("finished", "aborted", "ready")


class RunPanel(QDockWidget):
    """Signals:
        start_requested(str, str): the workflow's name and the goal typed.
        control_requested(str, str): pause | resume | skip | redo | abort, and a step id
            (redo: the selected step; otherwise "").
        workflow_action(str, str): new | edit | duplicate | delete | save_plan, and the
            workflow's name ("" for new and save_plan).
        step_selected(str): a step was clicked (its id): show its entries.
        workflow_chosen(str): another workflow was picked (its name).
    """

    start_requested = Signal(str, str)
    control_requested = Signal(str, str)
    workflow_action = Signal(str, str)
    step_selected = Signal(str)
    workflow_chosen = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Run", parent)
        self.setObjectName("run_panel")
        body = QWidget(self)
        layout = QVBoxLayout(body)
        layout.setContentsMargins(8, 6, 8, 8)

        pick = QHBoxLayout()
        self.workflows = QComboBox(body)
        self.workflows.setToolTip("The project's workflows (.workbench/workflows/)")
        label = QLabel("&Workflow:", body)
        label.setBuddy(self.workflows)
        pick.addWidget(label)
        pick.addWidget(self.workflows, 1)
        layout.addLayout(pick)
        self.workflows.currentTextChanged.connect(self.workflow_chosen)
        manage = QGridLayout()  # two a row: the panel stays narrow in a small window
        self._manage: dict[str, QPushButton] = {}
        for action, text, tip in (
                ("new", "New…", "Create a workflow"),
                ("edit", "Edit…", "Edit the chosen workflow's steps"),
                ("duplicate", "Duplicate", "Copy the chosen workflow under a new name"),
                ("delete", "Delete", "Delete the chosen workflow's file"),
                ("save_plan", "From plan", "Save the agent's todo list as a workflow")):
            button = QPushButton(text, body)
            button.setToolTip(tip)
            button.clicked.connect(lambda _=False, a=action: self._on_manage(a))
            manage.addWidget(button, len(self._manage) // 2, len(self._manage) % 2)
            self._manage[action] = button
        layout.addLayout(manage)
        start = QHBoxLayout()
        self.goal = QLineEdit(body)
        self.goal.setPlaceholderText("Goal of this run (optional)")
        self.goal.returnPressed.connect(self._on_start)
        self.start_button = QPushButton("&Start run", body)
        self.start_button.clicked.connect(self._on_start)
        start.addWidget(self.goal, 1)
        start.addWidget(self.start_button)
        layout.addLayout(start)

        self.title = QLabel(body)
        self.title.setWordWrap(True)
        bold = self.title.font()
        bold.setBold(True)
        self.title.setFont(bold)
        layout.addWidget(self.title)
        self.steps = QTreeWidget(body)
        self.steps.setColumnCount(3)
        self.steps.setHeaderLabels(["step", "time", "tokens"])
        self.steps.setRootIsDecorated(False)
        self.steps.setWordWrap(True)
        self.steps.setUniformRowHeights(False)
        self.steps.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        header = self.steps.header()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(False)
        self.steps.itemSelectionChanged.connect(self._on_selection)
        self.steps.itemActivated.connect(
            lambda item, _col: self.step_selected.emit(item.data(0, Qt.ItemDataRole.UserRole)))
        layout.addWidget(self.steps, 1)
        self.message = QLabel(body)
        self.message.setWordWrap(True)
        self.message.setProperty("role", "accent")
        layout.addWidget(self.message)

        controls = QGridLayout()
        self.pause_button = QPushButton("&Pause", body)
        self.pause_button.setToolTip("Stop after the current round; Resume carries on")
        self.pause_button.clicked.connect(self._on_pause)
        self.skip_button = QPushButton("S&kip step", body)
        self.skip_button.setToolTip("Mark the active step skipped and go to the next one")
        self.skip_button.clicked.connect(lambda: self.control_requested.emit("skip", ""))
        self.redo_button = QPushButton("&Redo step", body)
        self.redo_button.setToolTip("Work on the selected step again (the steps after it too)")
        self.redo_button.clicked.connect(self._on_redo)
        self.abort_button = QPushButton("A&bort", body)
        self.abort_button.setToolTip("End the run here (its entries stay in the conversation)")
        self.abort_button.clicked.connect(lambda: self.control_requested.emit("abort", ""))
        for n, button in enumerate((self.pause_button, self.skip_button, self.redo_button,
                                    self.abort_button)):
            controls.addWidget(button, n // 2, n % 2)
        layout.addLayout(controls)
        self.setWidget(body)
        self.toggleViewAction().setShortcut(QKeySequence("Ctrl+R"))
        self._view: RunView | None = None
        self._busy = False
        self.show_run(None)

    # --- what it shows ---------------------------------------------------------------------------

    def set_workflows(self, names: list[str], selected: str | None = None) -> None:
        current = selected or self.workflows.currentText()
        self.workflows.blockSignals(True)
        self.workflows.clear()
        self.workflows.addItems(names)
        if current in names:
            self.workflows.setCurrentText(current)
        self.workflows.blockSignals(False)
        self._update_buttons()

    def set_busy(self, busy: bool) -> None:
        """A turn is running: starting or redoing waits; pause and abort stay."""
        self._busy = busy
        self._update_buttons()

    def show_run(self, view: RunView | None) -> None:
        # Rebuilt quietly: a refresh that keeps the selection is not the user selecting a
        # step (which shows its entries in the transcript).
        self.steps.blockSignals(True)
        try:
            self._show_run(view)
        finally:
            self.steps.blockSignals(False)
        self._update_buttons()

    def _show_run(self, view: RunView | None) -> None:
        self._view = view
        selected = self.selected_step()
        self.steps.clear()
        if view is None:
            self.title.setText("No run in this conversation. Choose a workflow and start it.")
            self.message.setText("")
            self._update_buttons()
            return
        done = sum(1 for s in view.steps if s.status == "done")
        skipped = sum(1 for s in view.steps if s.status == "skipped")
        if view.status == "ready":  # a workflow's steps before a run of it starts
            self.title.setText(f"{view.workflow} · {len(view.steps)} steps · not started")
        else:
            also = f", {skipped} skipped" if skipped else ""
            self.title.setText(f"{view.workflow} · {done} of {len(view.steps)} done{also} · "
                               f"{STATUS_TEXT.get(view.status, view.status)}")
        self.message.setText(view.message)
        for n, step in enumerate(view.steps, 1):
            item = QTreeWidgetItem([f"{ICONS.get(step.status, '?')} {n}. {step.title}",
                                    _elapsed(step.elapsed_s) if step.elapsed_s else "",
                                    f"{step.tokens:,}" if step.tokens else ""])
            item.setData(0, Qt.ItemDataRole.UserRole, step.id)
            tip = [f"{step.title} ({step.id}) — {step.status}"]
            if step.brief:
                tip.append(f"Brief: {step.brief}")
            if step.result:
                tip.append(f"Result: {step.result}")
            if step.error:
                tip.append(f"Error: {step.error}")
            item.setToolTip(0, "\n".join(tip))
            if step.status in ("active", "failed"):
                font = QFont(item.font(0))
                font.setBold(True)
                for col in range(3):
                    item.setBackground(col, QBrush(QColor(current().active_step)))
                    item.setFont(col, font)
            if step.status in ("done", "skipped"):
                item.setForeground(0, QBrush(QColor(current().muted)))
            self.steps.addTopLevelItem(item)
            detail = step.error or step.result
            for line in _wrapped(detail, self._chars_per_line()):
                child = QTreeWidgetItem([line])
                child.setData(0, Qt.ItemDataRole.UserRole, step.id)
                child.setForeground(0, QBrush(QColor(current().error_text if step.error
                                                     else current().muted)))
                child.setToolTip(0, detail)
                item.addChild(child)
                item.setExpanded(True)
            if step.id == selected:
                item.setSelected(True)
        self._update_buttons()

    def _chars_per_line(self) -> int:
        """How many characters of a result fit in the step column (results wrap there)."""
        width = self.steps.header().sectionSize(0) - 2 * self.steps.indentation()
        # average width under-counts capitals and wide glyphs: keep a margin
        return max(24, int(0.85 * width / max(1, self.steps.fontMetrics().averageCharWidth())))

    def resizeEvent(self, event: QResizeEvent) -> None:  # Qt's name
        super().resizeEvent(event)
        if self._view is not None and event.size().width() != event.oldSize().width():
            self.show_run(self._view)  # the results wrap again at the new width

    def restyle(self) -> None:
        """The palette changed: the steps in its colours."""
        self._show_run(self._view)

    def view(self) -> RunView | None:
        return self._view

    def selected_step(self) -> str:
        items = self.steps.selectedItems()
        return str(items[0].data(0, Qt.ItemDataRole.UserRole)) if items else ""

    # --- slots ---------------------------------------------------------------------------------

    def _update_buttons(self) -> None:
        view, busy = self._view, self._busy
        running = view is not None and view.open
        has_workflow = self.workflows.count() > 0
        self.start_button.setEnabled(has_workflow and not busy and not running)
        self.goal.setEnabled(self.start_button.isEnabled())
        for action in ("edit", "duplicate", "delete"):
            self._manage[action].setEnabled(has_workflow)
        paused = view is not None and view.status == "paused"
        # While a turn runs the button pauses it (a run just started may not show yet);
        # otherwise it carries an open run on.
        self.pause_button.setText("&Pause" if busy else "Res&ume")  # Alt+R: Redo step
        self.pause_button.setEnabled((running or busy) and not (busy and paused))
        active = view is not None and any(s.status in ("active", "failed") for s in view.steps)
        self.skip_button.setEnabled(running and active)
        self.redo_button.setEnabled(view is not None and view.status != "ready"
                                    and bool(self.selected_step()) and not busy)
        self.abort_button.setEnabled(running or busy)

    def _on_selection(self) -> None:
        self._update_buttons()
        step = self.selected_step()
        if step:
            self.step_selected.emit(step)

    def _on_start(self) -> None:
        if self.start_button.isEnabled():
            self.start_requested.emit(self.workflows.currentText(), self.goal.text().strip())

    def _on_pause(self) -> None:
        self.control_requested.emit("pause" if self._busy else "resume", "")

    def _on_redo(self) -> None:
        step = self.selected_step()
        if step:
            self.control_requested.emit("redo", step)

    def _on_manage(self, action: str) -> None:
        name = "" if action in ("new", "save_plan") else self.workflows.currentText()
        self.workflow_action.emit(action, name)


def _wrapped(text: str, width: int, most: int = 6) -> list[str]:
    """`text` in lines of at most `width` characters, at most `most` of them."""
    lines = textwrap.wrap(" ".join(text.split()), width)
    if len(lines) > most:
        lines = [*lines[:most - 1], lines[most - 1][:max(0, width - 1)] + "…"]
    return lines


def _elapsed(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"

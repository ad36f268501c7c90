"""The workflow editor: a run-mode workflow's name, description and ordered steps.

The steps are listed on the left (add, remove, reorder); the selected step is edited on the
right, and every edit is kept at once, so switching steps never loses text. OK checks the whole
workflow with core's `validate_workflow`: a problem is shown in the dialog, with the step it
names selected, and the dialog stays open. The dialog never reads or writes files; the caller
saves what `workflow()` returns.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGridLayout,
    QLabel,
    QLineEdit,
    QListView,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from core.tools import TOOL_NAMES
from core.workflows.workflow import Workflow, WorkflowError, validate_workflow
from ui.workflow_problems import in_words, where


@dataclass(eq=False)  # identity: depends_on points at drafts, so renames and moves follow
class _Draft:
    """A step being edited (plain strings; checked only on OK)."""

    id: str
    title: str = ""
    brief: str = ""
    done_when: str = ""
    tools: list[str] | None = None  # None: every tool of run mode
    depends_on: list[_Draft] | None = None  # None: the step before it
    max_rounds: int | None = None  # None: the settings' limit
    unchecked_tools: list[str] | None = None  # the list before "All tools" was checked


def _drafts(workflow: Workflow) -> list[_Draft]:
    out: dict[str, _Draft] = {}  # a valid workflow's ids are unique and name earlier steps
    for s in workflow.steps:
        deps = None if s.depends_on is None else [out[i] for i in s.depends_on]
        tools = None if s.tools is None else list(s.tools)
        out[s.id] = _Draft(s.id, s.title, s.brief, s.done_when, tools, deps, s.max_rounds)
    return list(out.values())


def _multiline(parent: QWidget, placeholder: str, lines: int) -> QPlainTextEdit:
    edit = QPlainTextEdit(parent)
    edit.setPlaceholderText(placeholder)
    edit.setTabChangesFocus(True)  # Tab moves on, as in the line edits
    edit.setMinimumHeight(edit.fontMetrics().lineSpacing() * lines + 12)
    return edit


def _tools_list(parent: QWidget) -> QListWidget:
    """Run mode's tools, each to tick, in two columns (the list wraps top to bottom), so the
    brief keeps the room."""
    tools = QListWidget(parent)
    for name in sorted(TOOL_NAMES):
        item = QListWidgetItem(name, tools)
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
        item.setCheckState(Qt.CheckState.Unchecked)
    tools.setFlow(QListView.Flow.TopToBottom)
    tools.setWrapping(True)
    tools.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    tools.setResizeMode(QListView.ResizeMode.Adjust)
    tools.setGridSize(QSize(tools.sizeHintForColumn(0) + 40, tools.sizeHintForRow(0) + 4))
    tools.setFixedHeight(tools.gridSize().height() * ((tools.count() + 1) // 2)
                         + 2 * tools.frameWidth() + 4)
    return tools


class WorkflowDialog(QDialog):
    """Edits a copy of a workflow; read `workflow()` after it is accepted.

    Attributes:
        name_edit, description_edit: the workflow's fields.
        steps_list: the steps in order ("1. title"); its current row is the step edited.
        add_button, remove_button, up_button, down_button: change the list.
        id_edit, title_edit, brief_edit, done_edit, all_tools, tools_list, max_rounds: the
            selected step's fields (`max_rounds` 0: the settings' limit).
        error: the problem OK found, in red (hidden when there is none).
        buttons: OK and Cancel.
    """

    def __init__(self, workflow: Workflow | None, parent: QWidget | None = None,
                 title: str = "New workflow") -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.setObjectName("workflow")
        self._steps = _drafts(workflow) if workflow is not None else [_Draft("step-1")]
        self._result: Workflow | None = None
        self._loading = False
        self._shown: _Draft | None = None  # the step in the editor

        self.name_edit = QLineEdit(workflow.name if workflow else "", self)
        self.name_edit.setPlaceholderText("e.g. Release notes")
        self.description_edit = _multiline(self, "What the workflow is for (optional)", 2)
        self.description_edit.setMaximumHeight(self.description_edit.minimumHeight() + 16)
        self.description_edit.setPlainText(workflow.description if workflow else "")
        left = self._make_steps_pane()
        self._make_step_editor()
        self._lay_out(left)
        self._connect()
        self._refill_list(0)
        self.resize(860, 600)
        self.name_edit.setFocus()

    def _make_steps_pane(self) -> QWidget:
        """The left side: the steps in order, and the buttons that change the list."""
        left = QWidget(self)
        self.steps_list = QListWidget(left)
        self.steps_list.setMinimumWidth(200)
        self.steps_list.setSpacing(2)
        self.add_button, self.remove_button, self.up_button, self.down_button = (
            QPushButton(text, left) for text in ("&Add step", "Re&move", "Move &up", "Move do&wn"))
        self.up_button.setToolTip("Move the step up (Alt+Up)")
        self.down_button.setToolTip("Move the step down (Alt+Down)")
        self.remove_button.setToolTip("Remove the step (Delete in the list)")
        steps_label = QLabel("Ste&ps", left)
        steps_label.setBuddy(self.steps_list)
        grid = QGridLayout()
        for n, b in enumerate((self.add_button, self.remove_button, self.up_button,
                               self.down_button)):
            b.setAutoDefault(False)  # Return means OK wherever the focus is
            grid.addWidget(b, n // 2, n % 2)
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addWidget(steps_label)
        left_layout.addWidget(self.steps_list, 1)
        left_layout.addLayout(grid)
        return left

    def _make_step_editor(self) -> None:
        """The right side, `editor`: the selected step's fields in a form."""
        self.editor = QWidget(self)
        self.id_edit = QLineEdit(self.editor)
        self.id_edit.setPlaceholderText("letters, digits, '_', '-' or '.'")
        self.title_edit = QLineEdit(self.editor)
        self.title_edit.setPlaceholderText("a few words, shown in the run's step list")
        self.brief_edit = _multiline(self.editor, "What the model should do in this step", 5)
        self.done_edit = _multiline(self.editor, "How the model knows the step is done "
                                    "(optional)", 2)
        self.done_edit.setMaximumHeight(self.done_edit.minimumHeight() * 2)
        self.all_tools = QCheckBox("A&ll tools of run mode", self.editor)
        self.tools_list = _tools_list(self.editor)
        self.max_rounds = QSpinBox(self.editor)
        self.max_rounds.setRange(0, 10_000)
        self.max_rounds.setSpecialValueText("settings' limit")
        self.max_rounds.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.max_rounds.setToolTip("How many model rounds the step may take before the run "
                                   "pauses; 0: the limit in the settings")
        form = QFormLayout(self.editor)
        form.setContentsMargins(0, 0, 0, 0)
        tools_box = QVBoxLayout()
        tools_box.addWidget(self.all_tools)
        tools_box.addWidget(self.tools_list)
        for text, widget in (("&Id", self.id_edit), ("&Title", self.title_edit),
                             ("&Brief", self.brief_edit), ("Done w&hen", self.done_edit)):
            form.addRow(text, widget)
        tools_label = QLabel("Tool&s", self.editor)
        tools_label.setBuddy(self.all_tools)
        form.addRow(tools_label, tools_box)
        form.addRow("Max &rounds", self.max_rounds)

    def _lay_out(self, left: QWidget) -> None:
        """The workflow's fields on top, the steps and the step editor side by side, the
        error and the buttons below; Tab goes through them in that order."""
        splitter = QSplitter(Qt.Orientation.Horizontal, self)
        splitter.addWidget(left)
        splitter.addWidget(self.editor)
        splitter.setStretchFactor(1, 1)
        splitter.setChildrenCollapsible(False)
        top = QFormLayout()
        top.addRow("&Name", self.name_edit)
        top.addRow("&Description", self.description_edit)
        self.error = QLabel(self)
        self.error.setObjectName("error")
        self.error.setWordWrap(True)
        self.error.setProperty("role", "error")
        self.error.hide()
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(splitter, 1)
        layout.addWidget(self.error)
        layout.addWidget(self.buttons)
        chain: list[QWidget] = [
            self.name_edit, self.description_edit, self.steps_list, self.add_button,
            self.remove_button, self.up_button, self.down_button, self.id_edit, self.title_edit,
            self.brief_edit, self.done_edit, self.all_tools, self.tools_list, self.max_rounds,
            self.buttons.button(QDialogButtonBox.StandardButton.Ok),
            self.buttons.button(QDialogButtonBox.StandardButton.Cancel)]
        for before, after in zip(chain, chain[1:], strict=False):
            QWidget.setTabOrder(before, after)

    def _connect(self) -> None:
        """The shortcuts, the buttons, and every field's edit kept in its step at once."""
        for keys, slot in (("Ctrl+Return", self.accept), ("Ctrl+Enter", self.accept),
                           ("Alt+Up", lambda: self._move(-1)),
                           ("Alt+Down", lambda: self._move(1))):
            QShortcut(QKeySequence(keys), self, slot)
        delete = QShortcut(QKeySequence(QKeySequence.StandardKey.Delete), self.steps_list,
                           self._on_remove_clicked)
        delete.setContext(Qt.ShortcutContext.WidgetShortcut)
        self.add_button.clicked.connect(self._on_add_clicked)
        self.remove_button.clicked.connect(self._on_remove_clicked)
        self.up_button.clicked.connect(lambda: self._move(-1))
        self.down_button.clicked.connect(lambda: self._move(1))
        self.steps_list.currentRowChanged.connect(self._on_steps_list_current_row_changed)
        self.id_edit.textChanged.connect(lambda t: self._write("id", t))
        self.title_edit.textChanged.connect(self._on_title_edit_text_changed)
        self.brief_edit.textChanged.connect(
            lambda: self._write("brief", self.brief_edit.toPlainText()))
        self.done_edit.textChanged.connect(
            lambda: self._write("done_when", self.done_edit.toPlainText()))
        self.all_tools.toggled.connect(self._on_all_tools_toggled)
        self.tools_list.itemChanged.connect(self._on_tools_list_item_changed)
        self.max_rounds.valueChanged.connect(lambda v: self._write("max_rounds", v or None))

    def workflow(self) -> Workflow | None:
        """The checked workflow once the dialog was accepted; None before, or after Cancel."""
        return self._result

    def accept(self) -> None:
        """OK: keep the workflow if core accepts it, otherwise say why and stay open."""
        try:
            result = validate_workflow(self._data(), "the workflow")
        except WorkflowError as e:
            self._show_error(str(e))
            return
        self._result = result
        self.error.hide()
        super().accept()

    # -- the steps list ------------------------------------------------------------------

    def _current(self) -> _Draft | None:
        row = self.steps_list.currentRow()
        return self._steps[row] if 0 <= row < len(self._steps) else None

    def _label(self, row: int) -> str:
        return f"{row + 1}. {self._steps[row].title.strip() or '(untitled)'}"

    def _refill_list(self, current: int) -> None:
        self.steps_list.blockSignals(True)
        self.steps_list.clear()
        self.steps_list.addItems([self._label(r) for r in range(len(self._steps))])
        self.steps_list.setCurrentRow(max(0, min(current, len(self._steps) - 1)))
        self.steps_list.blockSignals(False)
        self._on_steps_list_current_row_changed(self.steps_list.currentRow())

    def _on_add_clicked(self) -> None:
        ids = {s.id for s in self._steps}
        n = len(self._steps) + 1
        while f"step-{n}" in ids:
            n += 1
        row = self.steps_list.currentRow() + 1 if self._steps else 0
        self._steps.insert(row, _Draft(f"step-{n}"))
        self._refill_list(row)
        self.title_edit.setFocus()

    def _on_remove_clicked(self) -> None:
        row = self.steps_list.currentRow()
        if len(self._steps) <= 1 or not 0 <= row < len(self._steps):
            return  # a workflow has at least one step
        del self._steps[row]
        self._refill_list(row)

    def _move(self, delta: int) -> None:
        row = self.steps_list.currentRow()
        to = row + delta
        if not (0 <= row < len(self._steps) and 0 <= to < len(self._steps)):
            return
        self._steps[row], self._steps[to] = self._steps[to], self._steps[row]
        self._refill_list(to)

    def _on_steps_list_current_row_changed(self, row: int) -> None:
        step = self._current()
        count = len(self._steps)
        self.remove_button.setEnabled(count > 1)
        self.up_button.setEnabled(row > 0)
        self.down_button.setEnabled(0 <= row < count - 1)
        self.editor.setEnabled(step is not None)
        if step is None or step is self._shown:
            return  # a step moved keeps its editor (and the cursor) as it is
        self._shown = step
        self._loading = True
        try:
            self.id_edit.setText(step.id)
            self.title_edit.setText(step.title)
            self.brief_edit.setPlainText(step.brief)
            self.done_edit.setPlainText(step.done_when)
            self.all_tools.setChecked(step.tools is None)
            self._show_tools(step.tools)
            self.max_rounds.setValue(step.max_rounds or 0)
        finally:
            self._loading = False

    # -- the step editor -----------------------------------------------------------------

    def _write(self, name: str, value: object) -> None:
        step = self._current()
        if step is not None and not self._loading:
            setattr(step, name, value)

    def _on_title_edit_text_changed(self, text: str) -> None:
        self._write("title", text)
        row = self.steps_list.currentRow()
        if not self._loading and 0 <= row < len(self._steps):
            self.steps_list.item(row).setText(self._label(row))

    def _show_tools(self, tools: list[str] | None) -> None:
        """Check the step's tools (all of them when it takes every tool, greyed)."""
        was, self._loading = self._loading, True
        for i in range(self.tools_list.count()):
            item = self.tools_list.item(i)
            on = tools is None or item.text() in tools
            item.setCheckState(Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
        self.tools_list.setEnabled(tools is not None)
        self._loading = was

    def _on_all_tools_toggled(self, on: bool) -> None:
        self.tools_list.setEnabled(not on)
        step = self._current()
        if self._loading or step is None:
            return
        # Like a "select all" box: unchecking it starts from none checked (or from the tools
        # chosen before it was checked), then the user checks the ones the step needs.
        if on:
            step.unchecked_tools, step.tools = step.tools, None
        else:
            step.tools = list(step.unchecked_tools or ())
        self._show_tools(step.tools)

    def _on_tools_list_item_changed(self, item: QListWidgetItem) -> None:
        step = self._current()
        if self._loading or step is None or step.tools is None:
            return
        name = item.text()
        if item.checkState() == Qt.CheckState.Checked and name not in step.tools:
            step.tools.append(name)  # appended, so an untouched list keeps its order
        elif item.checkState() != Qt.CheckState.Checked and name in step.tools:
            step.tools.remove(name)

    # -- OK ------------------------------------------------------------------------------

    def _data(self) -> dict[str, object]:
        """The workflow as plain data; an empty text is left out, so core says it is missing."""
        def texts(**fields: str) -> dict[str, object]:
            return {key: text.strip() for key, text in fields.items() if text.strip()}

        steps: list[dict[str, object]] = []
        for s in self._steps:
            step = texts(id=s.id, title=s.title, brief=s.brief, done_when=s.done_when)
            if s.tools is not None:
                step["tools"] = list(s.tools)
            if s.depends_on is not None:  # a removed step is no longer depended on
                step["depends_on"] = [d.id.strip() for d in s.depends_on
                                      if any(d is x for x in self._steps)]
            if s.max_rounds is not None:
                step["max_rounds"] = s.max_rounds
            steps.append(step)
        return texts(name=self.name_edit.text(),
                     description=self.description_edit.toPlainText()) | {"steps": steps}

    def _show_error(self, message: str) -> None:
        """Say what is wrong, select the step it names and put the cursor in its field."""
        self.error.setText(in_words(message, [d.title for d in self._steps]))
        self.error.show()
        row, field = where(message, [s.id.strip() for s in self._steps])
        if field == "name":
            self.name_edit.setFocus()
        if 0 <= row < len(self._steps):
            focus = {"id": self.id_edit, "title": self.title_edit, "brief": self.brief_edit,
                     "done_when": self.done_edit, "tools": self.all_tools,
                     "max_rounds": self.max_rounds}.get(field)
            self.steps_list.setCurrentRow(row)
            (focus or self.steps_list).setFocus()

"""The files agent turns changed: a side panel listing each turn that changed files ("N files
changed"), and a diff viewer per turn (per file, added and removed lines) with "Undo these
changes" / "Redo". Widgets only: the app reads the checkpoints and restores the files."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QFontDatabase, QSyntaxHighlighter, QTextCharFormat, QTextDocument
from PySide6.QtWidgets import (
    QDialog,
    QDockWidget,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)


@dataclass(frozen=True)
class TurnItem:
    """One turn as the panel shows it."""

    entry: str
    title: str  # the user's message, first line
    when: str
    count: int
    undone: bool
    skipped: int = 0

    @property
    def label(self) -> str:
        files = f"{self.count} file{'s' if self.count != 1 else ''} changed"
        state = " — undone" if self.undone else ""
        # the time on the short first line: after the title it wrapped onto a line of its own
        return f"{files}{state}  ·  {self.when}\n{self.title}"


@dataclass(frozen=True)
class FileItem:
    """One file of a turn's diff."""

    path: str
    status: str  # A, M or D
    added: int
    removed: int
    lines: list[str]

    @property
    def label(self) -> str:
        what = {"A": "added", "D": "deleted"}.get(self.status, "modified")
        return f"{self.path}   +{self.added} −{self.removed}   ({what})"


class ChangesPanel(QDockWidget):
    """Signals: open_requested(entry id): show that turn's diff."""

    open_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Changed files", parent)
        self.setObjectName("changes_panel")
        body = QWidget(self)
        layout = QVBoxLayout(body)
        self.status = QLabel("No agent turn of this conversation changed files.", body)
        self.status.setWordWrap(True)
        self.status.setProperty("role", "muted")
        layout.addWidget(self.status)
        self.list = QListWidget(body)
        self.list.setWordWrap(True)
        self.list.itemActivated.connect(self._on_activated)
        self.list.itemClicked.connect(self._on_activated)
        layout.addWidget(self.list, 1)
        self.setWidget(body)

    def show_turns(self, turns: list[TurnItem], note: str = "") -> None:
        self.list.clear()
        for turn in reversed(turns):  # the newest first
            item = QListWidgetItem(turn.label)
            item.setData(Qt.ItemDataRole.UserRole, turn.entry)
            item.setToolTip("Open the diff of this turn: per file, the lines it added and "
                            "removed, and Undo these changes.")
            self.list.addItem(item)
        self.status.setText(note or (
            "Each agent turn that changed files; click one to see its diff or undo it."
            if turns else "No agent turn of this conversation changed files."))

    def items(self) -> list[str]:
        return [self.list.item(i).text() for i in range(self.list.count())]

    def _on_activated(self, item: QListWidgetItem) -> None:
        self.open_requested.emit(str(item.data(Qt.ItemDataRole.UserRole)))


class _DiffColors(QSyntaxHighlighter):
    """Added lines green, removed lines red, hunk headers muted."""

    def __init__(self, document: QTextDocument) -> None:
        super().__init__(document)
        self.formats: dict[str, QTextCharFormat] = {}
        for mark, color in (("+", "#2e7d32"), ("-", "#c62828"), ("@", "#6a6a9a")):
            fmt = QTextCharFormat()
            fmt.setForeground(QColor(color))
            self.formats[mark] = fmt

    def highlightBlock(self, text: str) -> None:
        fmt = self.formats.get(text[:1])
        if fmt is not None:
            self.setFormat(0, len(text), fmt)


class DiffViewer(QDialog):
    """A turn's diff. Signals: undo_requested(entry), redo_requested(entry)."""

    undo_requested = Signal(str)
    redo_requested = Signal(str)

    def __init__(self, parent: QWidget | None, turn: TurnItem, files: list[FileItem]) -> None:
        super().__init__(parent)
        self.setObjectName("diff_viewer")
        self.entry = turn.entry
        self.setWindowTitle(f"{turn.count} files changed — {turn.title}")
        layout = QVBoxLayout(self)
        self.note = QLabel(self)
        self.note.setWordWrap(True)
        self.note.setProperty("role", "muted")
        layout.addWidget(self.note)
        split = QSplitter(Qt.Orientation.Horizontal, self)
        self.files = QListWidget(split)
        self.view = QPlainTextEdit(split)
        self.view.setReadOnly(True)
        self.view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.view.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self._colors = _DiffColors(self.view.document())
        split.setSizes([280, 620])
        layout.addWidget(split, 1)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        self.undo = QPushButton("Undo these changes", self)
        self.undo.clicked.connect(lambda: self.undo_requested.emit(self.entry))
        self.redo = QPushButton("Redo", self)
        self.redo.clicked.connect(lambda: self.redo_requested.emit(self.entry))
        close = QPushButton("Close", self)
        close.clicked.connect(self.close)
        for button in (self.undo, self.redo, close):
            buttons.addWidget(button)
        layout.addLayout(buttons)
        self._files: list[FileItem] = []
        self.files.currentRowChanged.connect(self._show_file)
        self.show_turn(turn, files)
        self.resize(960, 620)

    def show_turn(self, turn: TurnItem, files: list[FileItem]) -> None:
        self._files = files
        self.files.clear()
        for f in files:
            self.files.addItem(f.label)
        self.undo.setVisible(not turn.undone)
        self.redo.setVisible(turn.undone)
        skipped = f" {turn.skipped} file(s) were too big or in a nested repository and are " \
                  "not covered." if turn.skipped else ""
        self.note.setText(
            ("These changes were undone: the files are as they were before this turn. Redo "
             "puts them back." if turn.undone else
             "Undo puts these files back as they were just before this turn (and the "
             "changes of later turns to them); it can itself be undone.") + skipped)
        if files:
            self.files.setCurrentRow(0)
            self._show_file(0)
        else:
            self.view.setPlainText("")

    def _show_file(self, row: int) -> None:
        if 0 <= row < len(self._files):
            lines = self._files[row].lines
            self.view.setPlainText("\n".join(lines) if lines else "(no text lines: a binary "
                                                                 "file or an empty one)")


FILES_TOO = "Files too"
CONVERSATION_ONLY = "Conversation only"
CANCEL_BRANCH = "Cancel"


def ask_rewind(parent: QWidget | None, text: str, detail: str) -> str:
    """Before a branch rewinds the conversation past turns that changed files: restore the
    files to that point too? Files too, Conversation only, or Cancel (Esc)."""
    box = QMessageBox(QMessageBox.Icon.Question, "Context Workbench asks", text,
                      QMessageBox.StandardButton.NoButton, parent)
    box.setObjectName("rewind_question")
    box.setInformativeText(detail)
    buttons = {box.addButton(FILES_TOO, QMessageBox.ButtonRole.AcceptRole): FILES_TOO,
               box.addButton(CONVERSATION_ONLY, QMessageBox.ButtonRole.NoRole): CONVERSATION_ONLY}
    cancel = box.addButton(CANCEL_BRANCH, QMessageBox.ButtonRole.RejectRole)
    box.setEscapeButton(cancel)
    box.setDefaultButton(cancel)
    box.exec()
    clicked = box.clickedButton()
    return next((choice for button, choice in buttons.items() if button is clicked),
                CANCEL_BRANCH)

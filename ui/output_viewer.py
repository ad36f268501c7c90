"""A window on text to read and select freely: a tool's full output (read from disk by the
app), or one message of the transcript ("Select text…")."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import QDialog, QLabel, QPlainTextEdit, QVBoxLayout, QWidget


class OutputViewer(QDialog):
    def __init__(self, parent: QWidget | None, title: str, note: str, text: str,
                 wrap: bool = False) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.setObjectName("output_viewer")
        layout = QVBoxLayout(self)
        self.note = QLabel(note, self)
        self.note.setWordWrap(True)
        self.note.setProperty("role", "muted")
        layout.addWidget(self.note)
        self.view = QPlainTextEdit(self)
        self.view.setReadOnly(True)
        # The keyboard moves through it too: Ctrl+Home / Ctrl+End, PageUp / PageDown, Shift+arrows
        self.view.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse
                                          | Qt.TextInteractionFlag.TextSelectableByKeyboard)
        self.view.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.view.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth if wrap
                                  else QPlainTextEdit.LineWrapMode.NoWrap)
        self.view.setPlainText(text)
        layout.addWidget(self.view, 1)
        self.resize(900, 600)

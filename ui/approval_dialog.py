"""The approval prompt for a write or a command: what would happen, and Allow / Deny.

Non-modal: the window stays usable (scrolling, reading the transcript) while the engine waits.
The diff is coloured like a terminal's; a reason typed before Deny goes to the model. Escape
or closing the dialog denies.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QKeySequence,
    QShortcut,
    QSyntaxHighlighter,
    QTextCharFormat,
)
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ui.palette import current


class DiffHighlighter(QSyntaxHighlighter):
    """Added lines green, removed red, hunk headers blue, the protection note grey."""

    def highlightBlock(self, text: str) -> None:  # Qt's name
        colour = None
        p = current()
        if text.startswith("+++") or text.startswith("---"):
            colour = p.muted
        elif text.startswith("+"):
            colour = p.ok_text
        elif text.startswith("-"):
            colour = p.error_text
        elif text.startswith("@@"):
            colour = p.link
        elif text.startswith("$ "):
            colour = p.text
        if colour is not None:
            fmt = QTextCharFormat()
            fmt.setForeground(QColor(colour))
            if text.startswith("$ "):
                fmt.setFontWeight(QFont.Weight.Bold)
            self.setFormat(0, len(text), fmt)


class ApprovalDialog(QDialog):
    """Attributes:
        buttons: choice label -> its button (the first choice has the focus).
        reason: what the user adds to a denial.
    """

    def __init__(self, parent: QWidget | None, text: str, detail: str,
                 choices: tuple[str, ...], on_answer: Callable[[str, str], None],
                 deny: str = "Deny") -> None:
        super().__init__(parent)
        self.setWindowTitle("Context Workbench asks")
        self.setObjectName("approval")
        self.setWindowModality(Qt.WindowModality.NonModal)
        self._on_answer = on_answer
        self._deny = deny
        self._answered = False
        layout = QVBoxLayout(self)
        self.title = QLabel(text, self)
        bold = self.title.font()
        bold.setBold(True)
        bold.setPointSizeF(bold.pointSizeF() * 1.15)
        self.title.setFont(bold)
        layout.addWidget(self.title)
        self.detail = QPlainTextEdit(self)
        self.detail.setReadOnly(True)
        self.detail.setPlainText(detail)
        self.detail.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        # A diff keeps its lines (columns matter); a command, an MCP call and their notes
        # wrap to be read whole.
        self.detail.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap
                                    if detail.startswith(("--- ", "diff ", "@@"))
                                    else QPlainTextEdit.LineWrapMode.WidgetWidth)
        self._highlighter = DiffHighlighter(self.detail.document())
        layout.addWidget(self.detail, 1)
        self.reason = QLineEdit(self)
        self.reason.setPlaceholderText("Reason for denying (optional; the model reads it)")
        layout.addWidget(self.reason)
        row = QHBoxLayout()
        row.addStretch(1)
        self.buttons: dict[str, QPushButton] = {}
        for n, choice in enumerate(choices):
            b = QPushButton(choice, self)
            b.setAutoDefault(False)
            b.clicked.connect(lambda _=False, c=choice: self._answer(c))
            row.addWidget(b)
            self.buttons[choice] = b
            if n == 0:
                b.setFocus()
        layout.addLayout(row)
        self.reason.returnPressed.connect(lambda: self._answer(deny))
        QShortcut(QKeySequence(Qt.Key.Key_Escape), self, lambda: self._answer(deny))
        self.resize(720, 420)

    def _answer(self, choice: str) -> None:
        if self._answered:
            return
        self._answered = True
        self._on_answer(choice, self.reason.text() if choice == self._deny else "")
        self.close()

    def closeEvent(self, event: object) -> None:  # Qt's name
        if not self._answered:  # closing the dialog is not an approval
            self._answered = True
            self._on_answer(self._deny, "")
        super().closeEvent(event)  # type: ignore[arg-type]

    def withdraw(self) -> None:
        """The turn moved on (Stop): close without answering."""
        self._answered = True
        self.close()

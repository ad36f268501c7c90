"""The message box: multi-line, Ctrl+Enter sends, Esc stops a running answer."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

MAX_DRAFT_CHARS = 50_000_000  # beyond this the box refuses more; the context builder says why


class _Editor(QPlainTextEdit):
    submit = Signal()
    escape = Signal()

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and (
            event.modifiers() & Qt.KeyboardModifier.ControlModifier
        ):
            self.submit.emit()
            return
        if event.key() == Qt.Key.Key_Escape:
            self.escape.emit()
            return
        super().keyPressEvent(event)


class Composer(QWidget):
    """Signals:
        send_requested(str): the user asked to send this text.
        stop_requested(): the user asked to stop the running answer.
        draft_changed(): the text changed (for saving drafts, debounced by the owner).
    """

    send_requested = Signal(str)
    stop_requested = Signal()
    draft_changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.editor = _Editor(self)
        self.editor.setPlaceholderText("Message…  (Ctrl+Enter to send, Esc to stop)")
        self.editor.setTabChangesFocus(True)
        self.editor.setMinimumHeight(60)
        self.editor.setMaximumHeight(160)
        self.editor.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Maximum)
        self.editor.sizeHint = lambda: QSize(400, 84)  # type: ignore[method-assign]
        self.send_button = QPushButton("Send", self)
        self.send_button.setToolTip("Send (Ctrl+Enter)")
        self.stop_button = QPushButton("Stop", self)
        self.stop_button.setToolTip("Stop the answer (Esc); what arrived is kept")
        self.stop_button.hide()
        self.hint = QLabel("", self)
        self.hint.setStyleSheet("color: #b42318;")
        self.hint.hide()

        buttons = QVBoxLayout()
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        buttons.addStretch(1)
        row = QHBoxLayout()
        row.addWidget(self.editor, 1)
        row.addLayout(buttons)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(12, 6, 12, 10)
        outer.addWidget(self.hint)
        outer.addLayout(row)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)

        self._busy = False
        self._blocked_reason: str | None = None
        self.editor.submit.connect(self._on_editor_submit)
        self.editor.escape.connect(self._on_editor_escape)
        self.editor.textChanged.connect(self._on_editor_text_changed)
        self.send_button.clicked.connect(self._on_editor_submit)
        self.stop_button.clicked.connect(self.stop_requested)
        self._update_buttons()

    def text(self) -> str:
        return self.editor.toPlainText()

    def set_text(self, text: str) -> None:
        self.editor.setPlainText(text)
        cursor = self.editor.textCursor()
        cursor.movePosition(cursor.MoveOperation.End)
        self.editor.setTextCursor(cursor)

    def set_busy(self, busy: bool) -> None:
        """While a turn runs: Send is disabled and Stop shows."""
        self._busy = busy
        self.stop_button.setVisible(busy)
        self._update_buttons()

    def set_blocked(self, reason: str | None) -> None:
        """Sending is impossible (read-only project, no conversation): say why."""
        self._blocked_reason = reason
        self.editor.setReadOnly(reason is not None)
        self.hint.setText(reason or "")
        self.hint.setVisible(reason is not None)
        self._update_buttons()

    def _update_buttons(self) -> None:
        can_send = not self._busy and self._blocked_reason is None and bool(self.text().strip())
        self.send_button.setEnabled(can_send)

    def _on_editor_submit(self) -> None:
        if self._busy or self._blocked_reason is not None:
            return
        text = self.text()
        if text.strip():
            self.send_requested.emit(text)

    def _on_editor_escape(self) -> None:
        if self._busy:
            self.stop_requested.emit()

    def _on_editor_text_changed(self) -> None:
        self._update_buttons()
        self.draft_changed.emit()

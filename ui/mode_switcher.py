"""Chat | Agent | Run: which system prompt the next request gets. History never changes."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QButtonGroup, QHBoxLayout, QToolButton, QWidget

from core.model import Mode

MODES: tuple[tuple[Mode, str, str], ...] = (
    ("chat", "Chat", "Ctrl+1"), ("agent", "Agent", "Ctrl+2"), ("run", "Run", "Ctrl+3"))


class ModeSwitcher(QWidget):
    """Signals:
        mode_changed(str): the user picked another mode.
    """

    mode_changed = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.group = QButtonGroup(self)
        self.group.setExclusive(True)
        self.buttons: dict[Mode, QToolButton] = {}
        layout = QHBoxLayout(self)
        layout.setContentsMargins(12, 4, 12, 0)
        layout.setSpacing(0)
        for mode, label, key in MODES:
            b = QToolButton(self)
            b.setText(label)
            b.setCheckable(True)
            b.setShortcut(QKeySequence(key))
            b.setToolTip(f"{label} mode ({key}): changes only the system prompt of the next "
                         "request; the history stays as it is")
            b.setStyleSheet("QToolButton { padding: 3px 14px; border: 1px solid #d4d4d8; }"
                            "QToolButton:checked { background: #2563eb; color: white; }")
            self.group.addButton(b)
            self.buttons[mode] = b
            layout.addWidget(b)
            b.clicked.connect(lambda _=False, m=mode: self.mode_changed.emit(m))
        layout.addStretch(1)
        self.buttons["chat"].setChecked(True)

    def mode(self) -> Mode:
        return next(m for m, b in self.buttons.items() if b.isChecked())

    def set_mode(self, mode: str) -> None:
        """Show `mode` without emitting mode_changed."""
        if mode in self.buttons:
            self.buttons[mode].setChecked(True)

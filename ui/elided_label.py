"""A one-line label that never asks for more room than it is given: a text too long for it is
cut with "…" and the whole text is its tooltip (a long status must not widen the window)."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QMouseEvent, QResizeEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget


class ElidedLabel(QLabel):
    """Signals: clicked(): the label was clicked (where it stands for something to open).

    `widest`: the most it asks for (None: only what the layout gives it)."""

    clicked = Signal()

    def __init__(self, parent: QWidget | None = None, widest: int | None = None,
                 least: int = 24) -> None:
        super().__init__(parent)
        self._full = ""
        self._widest = widest
        self.hint = ""  # the tooltip while the whole text shows
        self.setSizePolicy(QSizePolicy.Policy.Ignored if widest is None
                           else QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Preferred)
        self._least = least  # the narrowest it gets (0: it may vanish in a small window)
        self.setMinimumWidth(least)

    def setText(self, text: str) -> None:
        self._full = text
        self._elide()

    def text(self) -> str:
        return self._full

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        if self._widest is None:
            return QSize(self._least, hint.height())
        width = self.fontMetrics().horizontalAdvance(self._full) + 2 * self.margin() + 8
        return QSize(min(width, self._widest), hint.height())

    def minimumSizeHint(self) -> QSize:
        return QSize(self._least, super().minimumSizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._elide()

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self.clicked.emit()
        super().mousePressEvent(event)

    def _elide(self) -> None:
        room = max(0, self.width() - 2 * self.margin() - 2)
        shown = self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight, room)
        super().setText(shown)
        self.setToolTip(self._full.strip() + (f"\n{self.hint}" if self.hint else "")
                        if shown != self._full else self.hint)
        self.updateGeometry()

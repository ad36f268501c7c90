"""An attached image at its own size (scrolled when larger than the screen); Esc closes."""

from __future__ import annotations

from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import QDialog, QLabel, QScrollArea, QVBoxLayout, QWidget


class ImageViewer(QDialog):
    def __init__(self, parent: QWidget | None, title: str, image: QImage) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.setObjectName("image_viewer")
        self.label = QLabel(self)
        self.label.setPixmap(QPixmap.fromImage(image))
        self.label.setToolTip(f"{image.width()}×{image.height()} pixels")
        area = QScrollArea(self)
        area.setWidget(self.label)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(area)
        screen = self.screen().availableGeometry() if self.screen() else None
        most = (screen.width() * 9 // 10, screen.height() * 9 // 10) if screen else (1200, 800)
        self.resize(min(image.width() + 24, most[0]), min(image.height() + 24, most[1]))

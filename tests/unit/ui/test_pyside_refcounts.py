"""The Qt binding must not leak references to None: on Python 3.11 None is an ordinary object,
and a binding that returns it from void methods without a reference (PySide6 6.12.0 did) makes
every paint take one away until the process dies with "deallocating None"."""

from __future__ import annotations

import sys

import pytest
from PySide6.QtCore import QRect
from PySide6.QtGui import QImage, QPainter, QTextCursor, QTextDocument
from PySide6.QtWidgets import QApplication, QLabel

pytestmark = pytest.mark.gui


def test_void_methods_used_when_painting_keep_none_alive(qapp: QApplication) -> None:
    doc = QTextDocument()
    doc.setPlainText("x" * 100)
    cursor = QTextCursor(doc)
    image = QImage(50, 50, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    label = QLabel()
    try:
        before = sys.getrefcount(None)
        for _ in range(200):
            cursor.setPosition(1)
            painter.drawRoundedRect(QRect(0, 0, 9, 9), 2, 2)
            label.setText("a")
        lost = before - sys.getrefcount(None)
    finally:
        painter.end()
    assert lost < 50, f"{lost} references to None lost in 600 calls: the Qt binding leaks them"

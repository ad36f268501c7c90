"""The conversation list keeps the width the user left it: a small window (or a side panel)
takes room from it only while it must, and it gets it back as soon as there is room again."""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QDataStream, QEvent, QObject, QTimer
from PySide6.QtWidgets import QSplitter


class ListWidth(QObject):
    def __init__(self, splitter: QSplitter, width: int, least: int) -> None:
        super().__init__(splitter)
        self.splitter, self.width, self.least = splitter, width, least
        splitter.splitterMoved.connect(lambda _pos, _index: self.remember())
        splitter.installEventFilter(self)

    def remember(self) -> None:
        """The width the list has now is the user's (a drag)."""
        self.width = self.splitter.sizes()[0] or self.width

    def restore(self, state: QByteArray) -> None:
        """The layout saved by the last run; the list's width is the one it saved. What the
        splitter holds right after restoring is not: the window is not laid out yet then (48
        px was read, and the list stayed at its least width from then on)."""
        self.splitter.restoreState(state)
        stream = QDataStream(state)  # QSplitter's own format: magic, version, the sizes
        magic, _version, count = stream.readInt32(), stream.readInt32(), stream.readUInt32()
        if magic == 0xFF and count == 2 and stream.status() == QDataStream.Status.Ok:
            saved = stream.readInt32()
            if stream.status() == QDataStream.Status.Ok and saved >= self.least:
                self.width = saved
        QTimer.singleShot(0, self.give_back)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.splitter and event.type() == QEvent.Type.Resize:
            # after the splitter has shared out its new size (this runs before it does)
            QTimer.singleShot(0, self.give_back)
        return super().eventFilter(watched, event)

    def give_back(self) -> None:
        sizes = self.splitter.sizes()
        right = self.splitter.widget(1)
        if len(sizes) != 2 or right is None or sum(sizes) <= 0:
            return
        total = sum(sizes)
        left = max(self.least, min(self.width, total - right.minimumSizeHint().width()))
        if left != sizes[0]:
            self.splitter.setSizes([left, total - left])

"""@-mentions in the message box: typing `@` offers the project's files (as the owner gives
them, see `set_paths`); choosing one writes `@path` and says so (`chosen`), so the owner can
attach that file. Keys as in any completer: arrows move, Enter or Tab takes, Esc closes."""

from __future__ import annotations

from PySide6.QtCore import QObject, QStringListModel, Signal
from PySide6.QtWidgets import QAbstractItemView, QCompleter, QPlainTextEdit

MAX_SHOWN = 12
MAX_OFFERED = 200  # the best matches; typing more narrows them


class MentionCompleter(QObject):
    """Signals:
        wanted(): an `@` was typed and no paths were given yet (the owner lists them).
        chosen(str): the user took a path (relative to the project).
    """

    wanted = Signal()
    chosen = Signal(str)

    def __init__(self, editor: QPlainTextEdit) -> None:
        super().__init__(editor)
        self.editor = editor
        self._paths: list[str] | None = None
        self.model = QStringListModel(self)
        self.completer = QCompleter(self.model, self)
        self.completer.setWidget(editor)
        # We filter and rank ourselves (a file whose name starts with the word first).
        self.completer.setCompletionMode(QCompleter.CompletionMode.UnfilteredPopupCompletion)
        self.completer.setMaxVisibleItems(MAX_SHOWN)
        self.completer.activated.connect(self._take)
        editor.textChanged.connect(self._follow)

    def set_paths(self, paths: list[str]) -> None:
        self._paths = paths
        self._follow()

    def offered(self) -> list[str]:
        """What the list offers now."""
        return self.model.stringList()

    def paths(self) -> list[str]:
        """Every path it may offer (the project's files, as last listed)."""
        return list(self._paths or [])

    def _ranked(self, word: str) -> list[str]:
        """The paths holding `word` (any case): those whose file name starts with it first,
        then those whose path does, then the rest; shorter first in each."""
        w = word.lower()
        scored = []
        for path in self._paths or []:
            low = path.lower()
            if w not in low:
                continue
            base = low.rsplit("/", 1)[-1]
            rank = 0 if base.startswith(w) else 1 if low.startswith(w) else \
                2 if w in base else 3
            scored.append((rank, len(path), path))
        return [p for *_, p in sorted(scored)[:MAX_OFFERED]]

    def forget_paths(self) -> None:
        """Another project: the next `@` asks for its files."""
        self._paths = None
        self.model.setStringList([])
        self.popup().hide()

    def popup(self) -> QAbstractItemView:
        popup = self.completer.popup()
        assert popup is not None  # a completer in popup mode always has one
        return popup

    def popup_open(self) -> bool:
        return self.popup().isVisible()

    def _word(self) -> tuple[int, str] | None:
        """The `@word` the cursor ends, as (where its @ is, the word), if it is one."""
        cursor = self.editor.textCursor()
        block = cursor.block().text()
        col = cursor.positionInBlock()
        start = block.rfind("@", 0, col)
        if start < 0 or (start > 0 and not block[start - 1].isspace()):
            return None
        word = block[start + 1:col]
        if any(c.isspace() for c in word):
            return None
        return cursor.block().position() + start, word

    def _follow(self) -> None:
        found = self._word()
        popup = self.popup()
        if found is None:
            popup.hide()
            return
        if self._paths is None or not found[1]:  # a new @: the files as they are now
            self.wanted.emit()
        if self._paths is None:
            return
        ranked = self._ranked(found[1])
        if ranked != self.model.stringList():
            self.model.setStringList(ranked)
        if not ranked:
            popup.hide()
            return
        rect = self.editor.cursorRect()
        rect.setWidth(max(320, popup.sizeHintForColumn(0) + 24))
        self.completer.complete(rect)
        if not popup.currentIndex().isValid():  # Enter takes the first without an arrow key
            popup.setCurrentIndex(self.completer.completionModel().index(0, 0))

    def take_current(self) -> bool:
        """Take the suggestion the list has selected (Tab); False when there is none."""
        index = self.popup().currentIndex()
        if not self.popup_open() or not index.isValid():
            return False
        self._take(str(index.data()))
        return True

    def _take(self, path: str) -> None:
        found = self._word()
        if found is None:
            return
        at, word = found
        cursor = self.editor.textCursor()
        cursor.setPosition(at)
        cursor.setPosition(at + 1 + len(word), cursor.MoveMode.KeepAnchor)
        cursor.insertText(f"@{path} ")
        self.editor.setTextCursor(cursor)
        self.popup().hide()
        self.chosen.emit(path)

"""The transcript as a list model: one row per thing the user reads.

Log entries map to rows: user, assistant text, error, system, and one *tool card* per tool call
that carries both the call and, once it arrives, its result. The row being streamed is the last
row, and only it changes while an answer arrives (throttled by the view's owner); entries
appended meanwhile are inserted before it.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import (
    QAbstractListModel,
    QModelIndex,
    QPersistentModelIndex,
    Qt,
    Signal,
)

from core.model import ConversationMessage
from ui.transcript_rows import Row, RowKind, append_rows, main_argument, rows_from_messages

# Row, RowKind, main_argument and rows_from_messages are imported from here by the window too
__all__ = ["EXPANDED_ROLE", "KIND_ROLE", "ROW_ROLE", "TICK_ROLE", "Row", "RowKind",
           "TranscriptModel", "main_argument", "rows_from_messages"]

ROW_ROLE = Qt.ItemDataRole.UserRole + 1
KIND_ROLE = Qt.ItemDataRole.UserRole + 2
EXPANDED_ROLE = Qt.ItemDataRole.UserRole + 3
# A running card's spinner and elapsed time moved on: a repaint, not a new layout.
TICK_ROLE = Qt.ItemDataRole.UserRole + 4

_Index = QModelIndex | QPersistentModelIndex


class TranscriptModel(QAbstractListModel):
    """Signals:
        streaming_changed(bool): a streaming row appeared or went away.
    """

    streaming_changed = Signal(bool)

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._rows: list[Row] = []
        self._versioned = False  # some row shows "version n of m"
        self._marked = False  # some row may show a search's marks
        self._cards: dict[str, int] = {}
        self._expanded: set[str] = set()
        self._stream_dirty = False  # text arrived since the last flush

    # --- Qt model interface ----------------------------------------------------------------------

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008 - Qt's own default
        return 0 if parent.isValid() else len(self._rows)

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        row = self._rows[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return row.copy_text()
        if role == ROW_ROLE:
            return row
        if role == KIND_ROLE:
            return row.kind.value
        if role == EXPANDED_ROLE:
            return row.expanded
        if role == Qt.ItemDataRole.ToolTipRole and row.message is not None:
            return row.message.created_at.astimezone().strftime("%Y-%m-%d %H:%M:%S")
        return None

    def flags(self, index: _Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable

    # --- content ---------------------------------------------------------------------------------

    def rows(self) -> list[Row]:
        return self._rows

    def row(self, i: int) -> Row:
        return self._rows[i]

    def set_messages(self, messages: list[ConversationMessage]) -> None:
        self.beginResetModel()
        self._versioned = self._marked = False
        self._rows = rows_from_messages(messages)
        self._cards = {r.call.id: i for i, r in enumerate(self._rows)
                       if r.call is not None and r.result is None}
        for r in self._rows:
            r.expanded = r.key in self._expanded
            r.superseded = True
        if self._rows:
            self._rows[-1].superseded = False
        self.endResetModel()

    def update_messages(self, messages: dict[str, ConversationMessage]) -> None:
        """Entries whose flags changed (pinned, left out): their rows show the new state in
        place, where the user is reading."""
        for i, r in enumerate(self._rows):
            fresh = messages.get(r.message.id) if r.message is not None else None
            result = messages.get(r.result.id) if r.result is not None else None
            if fresh is None and result is None:
                continue
            if fresh is not None:
                r.message = fresh
            if result is not None:
                r.result = result
            r.version += 1
            self.dataChanged.emit(self.index(i), self.index(i))

    def append_message(self, m: ConversationMessage) -> None:
        """Show an entry that joined the log. While a row streams, the entry is inserted before
        it and the streamed text stays: whatever lands meanwhile (a summary, a run's control)
        is before the answer in the log too. The streamed answer itself goes through
        `finish_streaming`."""
        end = len(self._rows) - (self.streaming_row() is not None)
        rows = self._rows[:end]
        changed = append_rows(rows, m, self._cards)
        added = rows[end:]
        for i in changed:
            call = rows[i].call
            self._cards.pop(call.id if call is not None else "", None)
            idx = self.index(i)
            self.dataChanged.emit(idx, idx)
        if added and end and not self._rows[end - 1].superseded:
            last = self._rows[end - 1]  # a later row stands after it now: no more actions on it
            last.superseded = True
            last.version += 1
            self.dataChanged.emit(self.index(end - 1), self.index(end - 1))
        for row in added[:-1]:  # a round of several calls: only its last card is the end
            row.superseded = True
        if added:
            self.beginInsertRows(QModelIndex(), end, end + len(added) - 1)
            self._rows[end:end] = added
            self.endInsertRows()

    def finish_streaming(self, m: ConversationMessage) -> None:
        """The answer that was streaming is an entry now (or the error that ended it): it takes
        the streaming row's place."""
        streaming = self._take_streaming_row()
        self.append_message(m)
        if streaming:  # after the entry is in, so the view settles on the true bottom
            self.streaming_changed.emit(False)

    # --- streaming -------------------------------------------------------------------------------

    def begin_streaming(self) -> Row:
        """The row the answer streams into (added at the end unless there is one)."""
        existing = self.streaming_row()
        if existing is not None:
            return existing
        n = len(self._rows)
        self.beginInsertRows(QModelIndex(), n, n)
        row = Row(RowKind.STREAMING, "streaming")
        self._rows.append(row)
        self.endInsertRows()
        self.streaming_changed.emit(True)
        return row

    def streaming_row(self) -> Row | None:
        if self._rows and self._rows[-1].kind is RowKind.STREAMING:
            return self._rows[-1]
        return None

    def add_stream_text(self, text: str) -> None:
        """Buffer text into the streaming row; `flush_stream` tells the view (throttled)."""
        row = self.streaming_row()
        if row is not None:
            row.text += text
            self._stream_dirty = True

    def set_stream_note(self, note: str) -> None:
        row = self.streaming_row()
        if row is not None:
            row.note = note
            self._stream_dirty = True
            self.flush_stream()

    def flush_stream(self) -> None:
        """Tell the view the streaming row changed, when it did (a flush with nothing new
        would repaint the visible rows for nothing, 30 times a second)."""
        row = self.streaming_row()
        if row is not None and self._stream_dirty:
            self._stream_dirty = False
            row.version += 1
            idx = self.index(len(self._rows) - 1)
            self.dataChanged.emit(idx, idx)

    def end_streaming(self) -> None:
        if self._take_streaming_row():
            self.streaming_changed.emit(False)

    def _take_streaming_row(self) -> bool:
        if self.streaming_row() is None:
            return False
        n = len(self._rows) - 1
        self.beginRemoveRows(QModelIndex(), n, n)
        self._rows.pop()
        self.endRemoveRows()
        return True

    # --- running tools -------------------------------------------------------------------------

    def tool_started(self, call_id: str, since: float) -> None:
        """The card of `call_id` shows a spinner and its elapsed time until its result."""
        i = self._cards.get(call_id)
        if i is not None and i < len(self._rows) and self._rows[i].result is None:
            self._rows[i].running_since = since
            idx = self.index(i)  # only its header's details change: repainted, not laid out
            self.dataChanged.emit(idx, idx, [TICK_ROLE])

    def tick_running(self) -> bool:
        """Advance the running cards' spinners; False when none is running."""
        running = [i for i, r in enumerate(self._rows) if r.running_since is not None]
        if running:
            self.dataChanged.emit(self.index(running[0]), self.index(running[-1]), [TICK_ROLE])
        return bool(running)

    def stop_running(self) -> None:
        """The turn ended: no card is running any more (a result that never came reads as
        waiting, and the log closes it as aborted)."""
        for i, r in enumerate(self._rows):
            if r.running_since is not None:
                r.running_since = None
                self._changed(i)

    def set_versions(self, versions: dict[str, tuple[int, int]]) -> None:
        """Show "version n of m" on the first row of each entry named (where branches part)."""
        if not versions and not self._versioned:
            return  # the common case, a conversation without branches: no walk over its rows
        self._versioned = bool(versions)
        seen: set[str] = set()
        for i, r in enumerate(self._rows):
            entry = r.message.id if r.message is not None else ""
            want = versions.get(entry) if entry not in seen else None
            seen.add(entry)
            if r.versions != want:
                r.versions = want
                self._changed(i)

    def set_found(self, term: str) -> list[int]:
        """Mark `term` (case ignored) in the rows that hold it; returns their indexes."""
        needle = term.casefold().strip()
        if not needle and not self._marked:
            return []  # no search, nothing marked: no walk over the rows
        self._marked = bool(needle)
        hits = []
        for i, r in enumerate(self._rows):
            want = term.strip() if needle and needle in r.copy_text().casefold() else ""
            if want:
                hits.append(i)
            if r.found != want:
                r.found = want
                self._changed(i)
        return hits

    def touch_last(self) -> None:
        """Lay the last row out again (its actions depend on whether a turn runs)."""
        if self._rows:
            self._changed(len(self._rows) - 1)

    def relayout(self, indexes: list[int]) -> None:
        """Lay these rows out again (their thumbnails arrived)."""
        for i in indexes:
            if 0 <= i < len(self._rows):
                self._changed(i)

    def _changed(self, i: int) -> None:
        self._rows[i].version += 1
        idx = self.index(i)
        self.dataChanged.emit(idx, idx)

    # --- expansion -------------------------------------------------------------------------------

    def toggle_expanded(self, i: int) -> None:
        row = self._rows[i]
        row.expanded = not row.expanded
        row.version += 1
        (self._expanded.add if row.expanded else self._expanded.discard)(row.key)
        idx = self.index(i)
        self.dataChanged.emit(idx, idx, [EXPANDED_ROLE])

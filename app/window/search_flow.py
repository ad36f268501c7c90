"""Searching the conversation list: on a thread of its own (reading every log of a big
project takes a while and the window must not wait), only the newest search's result shown;
no match says so in the list. A conversation opened while a search is typed shows the search's
text marked where it occurs, at its first match; F3 and Shift+F3 go to the next and previous."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from PySide6.QtCore import QObject, Signal, SignalInstance
from PySide6.QtWidgets import QAbstractItemView

from app.window.notices import Notices
from core.store.errors import StoreError
from core.store.project import Project
from ui.main_window import MainWindow


class SearchHost(Protocol):
    project: Project | None
    current_id: str | None
    conversation_loaded: SignalInstance


class SearchFlow(QObject):
    _done = Signal(int, object)  # generation, the ids found (None: the search failed)

    def __init__(self, window: MainWindow, notices: Notices, host: SearchHost) -> None:
        super().__init__(window)
        self.window = window
        self.notices = notices
        self.host = host
        self._generation = 0
        self._searcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="search")
        self._done.connect(self._on_search_done)
        self._hits: list[int] = []  # rows of the open conversation that hold the search's text
        self._at = -1
        self._said = ""  # our notice ("match 1 of 3"): it goes with the marks
        host.conversation_loaded.connect(self._mark)
        window.find_requested.connect(self.step)

    def search(self, text: str) -> None:
        """Filter the list by `text` (an empty text shows every conversation)."""
        if self.host.project is None:
            return
        self._generation += 1
        if not text.strip():
            self.window.conversations.set_rows(self.host.project.conversations.list(),
                                               self.host.current_id)
            self._unmark()
            return
        generation, store = self._generation, self.host.project.conversations

        def search() -> None:
            try:
                hits: set[str] | None = store.search(text)
            except (StoreError, OSError):
                hits = None
            self._done.emit(generation, hits)

        self._searcher.submit(search)

    def _on_search_done(self, generation: int, hits: set[str] | None) -> None:
        if generation != self._generation or self.host.project is None:
            return  # a newer search (or another project) replaced it
        rows = self.host.project.conversations.list()
        if hits is None:
            self.notices.warning("The search could not read every conversation.")
            hits = {r.id for r in rows}
        text = self._term()
        shown = [r for r in rows if r.id in hits]
        self.window.conversations.set_rows(
            shown, self.host.current_id,
            f"No conversation mentions “{text}”." if text else None)
        if self.host.current_id in hits:
            self._mark(self.host.current_id or "")
        else:  # the marks and the notice of the last search are not about this one
            self._unmark()

    def _term(self) -> str:
        return self.window.conversations.search.text().strip()

    def _mark(self, _conv_id: str) -> None:
        """Mark the search's text in the conversation shown and go to its first match."""
        term = self._term()
        self._hits = self.window.transcript_model.set_found(term)
        self._at = -1
        if self._hits:
            self.step(1)
        elif term and self.host.current_id is not None:
            self._say(f"“{term}” is not in the messages shown here (it may be in the title, or "
                      "in an entry the transcript does not show).")

    def _unmark(self) -> None:
        self._hits = self.window.transcript_model.set_found("")
        self._at = -1
        if self._said and self.window.notice_label.text() == self._said:
            self.notices.clear()  # (a later notice of someone else's stays)
        self._said = ""

    def _say(self, text: str) -> None:
        self.notices.info(text)
        self._said = text

    def step(self, direction: int) -> None:
        """Go to the next (1) or previous (-1) match in the conversation shown."""
        term = self._term()
        if not self._hits:
            if term:
                self._say(f"“{term}” does not occur in this conversation.")
            return
        self._at = (self._at + direction) % len(self._hits)
        view = self.window.transcript
        index = view.model().index(self._hits[self._at], 0)
        view.scrollTo(index, QAbstractItemView.ScrollHint.PositionAtCenter)
        view.setCurrentIndex(index)
        self._say(f"“{term}”: match {self._at + 1} of {len(self._hits)} "
                  "(F3 next, Shift+F3 previous).")

    def refresh(self) -> None:
        if self.host.project is None:
            return
        if self.window.conversations.search.text().strip():  # keep the list filtered
            self.search(self.window.conversations.search.text())
            return
        self.window.conversations.set_rows(self.host.project.conversations.list(),
                                           self.host.current_id)

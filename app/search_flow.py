"""Searching the conversation list: on a thread of its own (reading every log of a big
project takes a while and the window must not wait), only the newest search's result shown."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from PySide6.QtCore import QObject, Signal

from app.notices import Notices
from core.store.errors import StoreError
from core.store.project import Project
from ui.main_window import MainWindow


class SearchHost(Protocol):
    project: Project | None
    current_id: str | None


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

    def search(self, text: str) -> None:
        """Filter the list by `text` (an empty text shows every conversation)."""
        if self.host.project is None:
            return
        self._generation += 1
        if not text.strip():
            self.window.conversations.set_rows(self.host.project.conversations.list(),
                                               self.host.current_id)
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
        self.window.conversations.set_rows([r for r in rows if r.id in hits],
                                           self.host.current_id)

    def refresh(self) -> None:
        if self.host.project is None:
            return
        if self.window.conversations.search.text().strip():  # keep the list filtered
            self.search(self.window.conversations.search.text())
            return
        self.window.conversations.set_rows(self.host.project.conversations.list(),
                                           self.host.current_id)

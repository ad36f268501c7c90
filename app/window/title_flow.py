"""Titles in the window: after a turn of an untitled conversation ends well, its title is written
on the engine's loop (core/titles.py) while the user goes on; the list shows it when it comes."""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import QObject

from app.window.turns import TurnRunner
from app.window.worker import EventBridge
from core.engine import Engine
from core.settings import LLMSettings, SettingsError
from core.store.errors import StoreError
from core.store.project import Project
from core.titles import TitleWritten, write_title


class TitleHost(Protocol):
    project: Project | None
    current_id: str | None
    engine: Engine | None
    turns: TurnRunner

    def llm_settings(self) -> LLMSettings: ...
    def refresh_list(self) -> None: ...


class TitleFlow(QObject):
    def __init__(self, host: TitleHost) -> None:
        super().__init__(host.turns)
        self.host = host
        self.bridge = EventBridge(self)
        self.bridge.engine_event.connect(self._on_event)
        self._asked: set[str] = set()  # conversations whose title is being written
        # Conversations found titled: never read again after their turns (a title only comes,
        # it is never taken away by the app).
        self._titled: set[str] = set()
        host.turns.finished.connect(self._after_turn)

    def _after_turn(self, status: str) -> None:
        project, engine, conv = self.host.project, self.host.engine, self.host.current_id
        if status != "ok" or project is None or engine is None or conv is None \
                or project.read_only or conv in self._asked or conv in self._titled:
            return
        store = project.conversations
        try:
            if not store.untitled(store.meta(conv)):
                self._titled.add(conv)
                return
        except StoreError:
            return
        try:
            settings = self.host.llm_settings()
        except SettingsError:  # no model to ask: the opening of the first message
            settings = LLMSettings(auto_title=False)
        self._asked.add(conv)
        self.host.turns.worker.submit(write_title(store, engine.client, conv, settings),
                                      self.bridge.post, lambda _outcome: self._asked.discard(conv))

    def _on_event(self, event: object) -> None:
        if isinstance(event, TitleWritten) and self.host.project is not None:
            self.host.refresh_list()

"""The conversation list's own requests: rename and delete (moved to the project's trash), a
failure said in plain words; deleting the open conversation shows the next one."""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import QObject

from app.window.notices import Notices
from core.store.project import Project
from ui.main_window import MainWindow


class ListHost(Protocol):
    project: Project | None
    current_id: str | None

    def stop(self) -> None: ...
    def refresh_list(self) -> None: ...
    def forget_draft(self, conv_id: str) -> None: ...
    def show_conversation(self, conv_id: str) -> None: ...
    def new_conversation(self) -> None: ...


class ListFlow(QObject):
    def __init__(self, window: MainWindow, notices: Notices, host: ListHost,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.host, self.window, self.notices = host, window, notices
        window.conversations.rename_requested.connect(self._on_rename_requested)
        window.conversations.delete_requested.connect(self._on_delete_requested)

    def _on_rename_requested(self, conv_id: str, title: str) -> None:
        host = self.host
        if host.project is None:
            return
        with self.notices.saving("Not renamed"):
            host.project.conversations.rename(conv_id, title)
        host.refresh_list()

    def _on_delete_requested(self, conv_id: str) -> None:
        host = self.host
        if host.project is None:
            return
        if conv_id == host.current_id:
            host.stop()
        with self.notices.saving("Not deleted") as deleted:
            host.project.conversations.delete(conv_id)
        if not deleted.ok:
            return
        host.forget_draft(conv_id)
        rows = host.project.conversations.list()
        if conv_id == host.current_id:
            host.current_id = None
            if rows:
                host.show_conversation(rows[0].id)
            else:
                host.new_conversation()
                return
        self.window.conversations.set_rows(rows, host.current_id)

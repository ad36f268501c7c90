"""The conversation list's own requests: rename and delete (moved to the project's trash), a
failure said in plain words; deleting the open conversation shows the next one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject

if TYPE_CHECKING:
    from app.controller import Controller


class ListFlow(QObject):
    def __init__(self, host: Controller) -> None:
        super().__init__(host)
        self.host = host
        host.window.conversations.rename_requested.connect(self._on_rename_requested)
        host.window.conversations.delete_requested.connect(self._on_delete_requested)

    def _on_rename_requested(self, conv_id: str, title: str) -> None:
        host = self.host
        if host.project is None:
            return
        with host.notices.saving("Not renamed"):
            host.project.conversations.rename(conv_id, title)
        host.refresh_list()

    def _on_delete_requested(self, conv_id: str) -> None:
        host = self.host
        if host.project is None:
            return
        if conv_id == host.current_id:
            host.stop()
        with host.notices.saving("Not deleted") as deleted:
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
        host.window.conversations.set_rows(rows, host.current_id)

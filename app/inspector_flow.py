"""The Context Inspector in the window: the meter's live preview of the next request (the same
build a turn runs), every entry's decision, and a click that shows the entry in the transcript.
"""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import QItemSelectionModel

from app.meter import UsageMeter
from core.context.report_text import budget_parts, inspector_header, inspector_rows
from core.store.project import Project
from ui.main_window import MainWindow


class InspectorHost(Protocol):
    project: Project | None
    current_id: str | None


class InspectorFlow:
    def __init__(self, window: MainWindow, host: InspectorHost, meter: UsageMeter) -> None:
        self.window = window
        self.host = host
        self.meter = meter
        self.panel = window.inspector
        meter.listeners.append(self.refresh)
        self.panel.visibilityChanged.connect(self._on_visibility_changed)
        self.panel.entry_clicked.connect(self.show_entry)

    def _on_visibility_changed(self, visible: bool) -> None:
        if visible:
            self.refresh()

    def refresh(self) -> None:
        """Show the meter's last build (nothing is built here: the panel costs no request)."""
        if not self.panel.isVisible():
            return
        report = self.meter.report
        project, conv = self.host.project, self.host.current_id
        if report is None or project is None or conv is None:
            self.panel.clear("No request to show: open a conversation (or see the meter for "
                             "why the next request cannot be built).")
            return
        messages = project.conversations.load(conv).messages
        positions = {m.id: n for n, m in enumerate(messages, start=1)}
        self.panel.show_request(inspector_header(report), budget_parts(report),
                                inspector_rows(report, positions))

    def show_entry(self, entry_id: str) -> None:
        """Select and show the transcript row holding the entry (a tool card holds its call
        and its result)."""
        model = self.window.transcript_model
        for i, row in enumerate(model.rows()):
            ids = {row.message.id if row.message is not None else "",
                   row.result.id if row.result is not None else ""}
            if entry_id in ids:
                view = self.window.transcript
                index = model.index(i)
                view.selectionModel().setCurrentIndex(
                    index, QItemSelectionModel.SelectionFlag.ClearAndSelect)
                view.scrollTo(index)
                return

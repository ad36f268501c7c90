"""Summaries in the window: "Compact now" (menu, `/compact [focus]`) and the automatic summary
prepared in the background after a turn that ended above the compaction trigger.

The summary runs on the engine worker's loop like a turn, but never blocks one: the user may
send while it is written (the no-LLM stages carry that request), and the summary entry joins
the log when it is ready. Its progress and result are shown in the status bar and the notice
above the transcript; the summary appears as a row of the transcript.
"""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import QObject, Signal

from app.settings_flow import SettingsFlow
from app.worker import EngineWorker, EventBridge, TurnHandle
from core.context.report import BuildReport
from core.context.stages import TRIGGER
from core.engine import (
    CompactionFinished,
    CompactionProgress,
    CompactionStarted,
    Engine,
    EntryAppended,
    SaveFailed,
)
from core.settings import SettingsError
from core.store.project import Project
from ui.main_window import MainWindow


class CompactionHost(Protocol):
    project: Project | None
    engine: Engine | None
    current_id: str | None

    def refresh_usage(self) -> None: ...


def above_trigger(report: BuildReport | None) -> bool:
    """The request passed the compaction trigger: the no-LLM stages ran on it, or it reused
    the compaction of an earlier request."""
    if report is None:
        return False
    return report.used > TRIGGER * report.usable or any(
        s["name"] in ("tool outputs", "key messages", "reused") for s in report.stages)


class CompactionFlow(QObject):
    """Signals:
        finished(object): the CompactionFinished event of a summary that ended.
        idle(): no summary runs any more (however the last one ended).
    """

    finished = Signal(object)
    idle = Signal()  # no summary runs any more (however the last one ended)

    def __init__(self, window: MainWindow, host: CompactionHost, settings_flow: SettingsFlow,
                 worker: EngineWorker) -> None:
        super().__init__(window)
        self.window = window
        self.host = host
        self.settings_flow = settings_flow
        self.worker = worker
        self.bridge = EventBridge(self)
        self.bridge.engine_event.connect(self._on_event)
        self.bridge.finished.connect(self._on_done)
        self._handle: TurnHandle | None = None
        self._conv: str | None = None
        self._automatic = False
        self._last_auto: dict[str, int] = {}  # conversation -> log length at its last try
        window.compact_requested.connect(self.ask_and_compact)
        window.inspector.compact_requested.connect(self._compact_from_panel)
        self.idle.connect(lambda: window.inspector.set_compacting(False))

    def running(self) -> bool:
        return self._handle is not None

    def compact(self, focus: str | None = None, automatic: bool = False) -> bool:
        """Start a summary of the shown conversation; False (and why, on screen) when none
        can start."""
        host = self.host
        if host.project is None or host.engine is None or host.current_id is None:
            return False
        if self.running():
            if not automatic:
                self.window.set_notice("A summary is already being written for "
                                       "this project; wait for it to finish.")
            return False
        if host.project.read_only:
            if not automatic:
                self.window.set_notice("Read-only: no summary is written from this window.")
            return False
        try:
            settings = self.settings_flow.llm_settings()
        except SettingsError as e:
            self.window.set_notice(f"No summary: {e}. Open Settings (Ctrl+,) to fix it.")
            return False
        if automatic and not settings.auto_summary:
            return False
        self._conv, self._automatic = host.current_id, automatic
        events = host.engine.summarize(host.current_id, settings, focus=focus,
                                       automatic=automatic)
        self._handle = self.worker.submit(events, self.bridge.engine_event.emit,
                                          self.bridge.finished.emit)
        self.window.inspector.set_compacting(True)  # however it was started
        return True

    def ask_and_compact(self) -> None:
        """The menu's Compact now: an optional focus, then the summary in the background."""
        if self.host.current_id is None:
            return
        focus = self.window.ask_text(
            "Compact now",
            "Summarize the older part of this conversation. The recent rounds stay as they "
            "are; the log keeps everything (excluding the summary undoes it).\n\n"
            "Focus (optional): what the summary should keep above all")
        if focus is not None:
            self.compact_with(focus)

    def compact_with(self, focus: str) -> bool:
        """A summary with this focus (blank: none); see `compact`."""
        return self.compact(focus.strip() or None)

    def _compact_from_panel(self, focus: str) -> None:
        if self.compact_with(focus):
            self.window.inspector.focus.clear()

    def after_turn(self, status: str, report: BuildReport | None, log_length: int) -> None:
        """A turn ended: above the trigger, prepare a summary in the background (once per
        turn, and not again for a log that has not grown since the last try)."""
        conv = self.host.current_id
        if status != "ok" or conv is None or not above_trigger(report):
            return
        if self._last_auto.get(conv) == log_length:
            return
        self._last_auto[conv] = log_length
        self.compact(automatic=True)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()

    def _on_event(self, event: object) -> None:
        model = self.settings_flow.model_label()
        shown = self._conv == self.host.current_id
        if isinstance(event, CompactionStarted):
            what = "Preparing a summary in the background" if event.automatic else "Summarizing"
            calls = f" in {event.calls} calls" if event.calls > 1 else ""
            self.window.set_notice(f"{what}: {event.entries:,} older entries, with "
                                   f"{event.model}{calls}…", kind="info")
            self.window.set_status(model, "Summarizing older history…")
        elif isinstance(event, CompactionProgress):
            self.window.set_status(model, f"Summarizing older history… {event.chars:,} "
                                          f"characters ({event.call}/{event.calls})")
        elif isinstance(event, EntryAppended) and shown:
            self.window.transcript_model.append_message(event.message)
        elif isinstance(event, SaveFailed):
            self.window.set_notice(event.message)
        elif isinstance(event, CompactionFinished):
            if event.status != "skipped" or not event.automatic:
                prefix = "Automatic summary: " if event.automatic else ""
                self.window.set_notice(prefix + event.message,
                                       kind="info" if event.status == "ok" else "problem")
            self.window.set_status(model, "Ready")
            self.finished.emit(event)

    def _on_done(self, outcome: str) -> None:
        self._handle = None
        self.idle.emit()
        if outcome == "failed":
            self.window.set_notice("The summary stopped on an unexpected problem; nothing was "
                                   "changed.")
        self.host.refresh_usage()

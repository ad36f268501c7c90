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

from app.window.notices import Notices
from app.window.settings_flow import SettingsFlow
from app.window.worker import EngineWorker, EventBridge, TurnHandle
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

AUTO_RETRY_ROWS = 20  # after a failed automatic summary, the log grows this much before the next
AUTO_RETRY_MAX = 320  # ... twice as much after each further failure, up to this


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

    def __init__(self, window: MainWindow, notices: Notices, host: CompactionHost,
                 settings_flow: SettingsFlow, worker: EngineWorker) -> None:
        super().__init__(window)
        self.window = window
        self.notices = notices
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
        # conversation -> (growth the log needs before the next automatic try, whether its
        # last failure was said): a summary that keeps failing (no key for the summary model,
        # a provider down) is neither replanned over the whole log nor said again each turn
        self._backoff: dict[str, tuple[int, bool]] = {}
        settings_flow.changed.connect(self._backoff.clear)  # fixed settings: try again
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
                self.notices.warning("A summary is already being written for "
                                     "this project; wait for it to finish.")
            return False
        if host.project.read_only:
            if not automatic:
                self.notices.warning("Read-only: no summary is written from this window.")
            return False
        try:
            settings = self.settings_flow.llm_settings()
        except SettingsError as e:
            self.notices.warning(f"No summary: {e}. Open Settings (Ctrl+,) to fix it.")
            return False
        if automatic and not settings.auto_summary:
            return False
        self._conv, self._automatic = host.current_id, automatic
        events = host.engine.summarize(host.current_id, settings, focus=focus,
                                       automatic=automatic)
        self._handle = self.worker.submit(events, self.bridge.post,
                                          self.bridge.done)
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
        last = self._last_auto.get(conv)
        wait = self._backoff.get(conv, (1, False))[0]
        if last is not None and last <= log_length < last + wait:
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
            self.notices.state(model, "Summarizing older history…")
            if self._quiet():
                return
            what = "Preparing a summary in the background" if event.automatic else "Summarizing"
            calls = f" in {event.calls} calls" if event.calls > 1 else ""
            self.notices.info(f"{what}: {event.entries:,} older entries, with "
                              f"{event.model}{calls}…")
        elif isinstance(event, CompactionProgress):
            self.notices.state(model, f"Summarizing older history… {event.chars:,} "
                                      f"characters ({event.call}/{event.calls})")
        elif isinstance(event, EntryAppended) and shown:
            self.window.transcript_model.append_message(event.message)
        elif isinstance(event, SaveFailed):
            self.notices.error(event.message)
        elif isinstance(event, CompactionFinished):
            said = self._after_summary(event)
            if (event.status != "skipped" or not event.automatic) and not said:
                prefix = "Automatic summary: " if event.automatic else ""
                say = {"ok": self.notices.info, "failed": self.notices.error}.get(
                    event.status, self.notices.warning)
                say(prefix + event.message)
            skipped = event.status == "skipped" and event.automatic  # said, quietly
            self.notices.state(model, f"No automatic summary: {event.message}" if skipped
                               else "Ready")
            self.finished.emit(event)

    def _after_summary(self, event: CompactionFinished) -> bool:
        """Note how a summary ended for the automatic ones to come; True when it is a failed
        automatic summary whose failure was already said (the user is not told again)."""
        conv = self._conv
        if conv is None or event.status == "stopped":
            return False
        if event.status == "ok":
            self._backoff.pop(conv, None)
            return False
        if event.status != "failed" or not event.automatic:
            return False
        said = self._quiet()
        wait = self._backoff[conv][0] * 2 if said else AUTO_RETRY_ROWS
        self._backoff[conv] = (min(AUTO_RETRY_MAX, wait), True)
        return said

    def _quiet(self) -> bool:
        """The running summary is an automatic retry after a failure that was said: it is
        shown in the status bar only, and a success alone makes it to the notice."""
        return self._automatic and self._backoff.get(self._conv or "", (0, False))[1]

    def _on_done(self, outcome: str) -> None:
        self._handle = None
        self.idle.emit()
        if outcome == "failed":
            self.notices.error("The summary stopped on an unexpected problem; nothing was "
                               "changed.")
        self.host.refresh_usage()

"""Turns in the window: starting them from the state they need, showing their events.

A turn runs on the engine worker's own thread and loop (worker.py), so provider code never
runs on the window's thread; its events cross back through one signal bridge, in order. Stop
cancels the turn and the engine keeps the partial answer. A full disk keeps the turn's entries
on screen and in memory until the notice's Save writes them.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QMessageBox

from app.window.agent_flow import AgentFlow
from app.window.attachment_flow import AttachmentFlow
from app.window.meter import UsageMeter
from app.window.notices import Notices
from app.window.settings_flow import SettingsFlow
from app.window.worker import EngineWorker, EventBridge, TurnHandle
from core.agents import Agent
from core.attachments import Attachment
from core.context.report import BuildReport
from core.engine import (
    Engine,
    EngineEvent,
    EntryAppended,
    NothingToRetry,
    QuestionAsked,
    RequestBuilt,
    RequestStarted,
    Retrying,
    RunUpdated,
    SaveFailed,
    StoreNotice,
    StreamText,
    ToolStarted,
    TurnFinished,
    TurnOptions,
)
from core.llm import runtime
from core.model import ConversationMessage, Mode
from core.questions import Question
from core.runs.driver import RunDriver
from core.settings import LLMSettings, SettingsError
from core.store.project import Project
from ui.approval_dialog import ApprovalDialog
from ui.main_window import MainWindow
from ui.throttle import Throttle

STREAM_FLUSH_MS = 33  # ~30 updates a second while an answer streams
TOOL_TICK_MS = 250  # a running tool card's spinner and elapsed time
MID_TURN_REFRESH_MS = 500  # how often a running turn's figures follow its entries


class TurnHost(Protocol):
    """What a turn needs from the window's session (the controller)."""

    project: Project | None
    engine: Engine | None
    current_id: str | None
    agent_flow: AgentFlow

    def mode(self) -> Mode: ...
    def agent(self) -> Agent: ...
    def run_driver(self) -> RunDriver | None: ...
    def refresh_usage(self) -> None: ...
    def refresh_list(self) -> None: ...
    def forget_draft(self, conv_id: str) -> None: ...


class TurnRunner(QObject):
    """Signals:
        finished(str): the turn is over: "ok", "error" or "stopped".
        run_updated(object): a run moved on: a RunUpdated, or None when an entry of a run was
            appended (its state is to be read again).
    Attributes:
        worker: the engine thread; bridge: its events, delivered on the window's thread.
    """

    finished = Signal(str)
    run_updated = Signal(object)

    def __init__(self, window: MainWindow, notices: Notices, host: TurnHost,
                 settings_flow: SettingsFlow, meter: UsageMeter) -> None:
        super().__init__(window)
        self.window = window
        self.notices = notices
        self.host = host
        self.settings_flow = settings_flow
        self.meter = meter
        self.worker = EngineWorker()
        self.bridge = EventBridge(self)
        self.bridge.engine_event.connect(self._on_bridge_engine_event)
        self.bridge.finished.connect(self._on_bridge_finished)
        self._turn: TurnHandle | None = None
        self._turn_text = ""
        self._turn_attached: list[Attachment] = []  # sent with the turn's message
        self._turn_entries = 0
        self._busy = False
        self._turn_conv: str | None = None
        self._turn_status = "error"
        self._turn_started = 0.0
        self._turn_model = ""
        self.last_report: BuildReport | None = None  # of the last request a turn sent
        # Entries a full disk kept from being saved, by conversation: shown, saved on request.
        self._unsaved: dict[str, list[ConversationMessage]] = {}
        self._turn_notices: list[str] = []  # what the store repaired during the running turn
        self._question: Question | None = None  # asked by the running turn, not yet answered
        self._question_box: QMessageBox | ApprovalDialog | None = None
        self._tool_timer = QTimer(self)
        self._tool_timer.setInterval(TOOL_TICK_MS)
        self._tool_timer.timeout.connect(self._tick_tools)
        self._flush_timer = QTimer(self)
        self._flush_timer.setInterval(STREAM_FLUSH_MS)
        self._flush_timer.timeout.connect(window.transcript_model.flush_stream)
        # The list's count, the meter and the Inspector follow a long (agent) turn as its
        # entries land, at most once per MID_TURN_REFRESH_MS, not only when it ends.
        self._follow_entries = Throttle(self._follow, MID_TURN_REFRESH_MS, self, mode="throttle")
        window.notice_action.connect(self.save_unsaved)
        self.attachments = AttachmentFlow(window, notices, host, meter)

    def busy(self) -> bool:
        """A turn is running (until its last event has reached the window)."""
        return self._busy

    def _turn_settings(self) -> LLMSettings | None:
        """Settings for a turn about to start, or None (and the reason on screen) when no turn
        may start: a read-only view never sends (nor writes), broken settings never fall back."""
        host = self.host
        if self.busy() or host.project is None or host.current_id is None or host.engine is None:
            return None
        if host.project.read_only:
            self.notices.state(self.settings_flow.model_label(),
                               "Read-only: nothing is sent from this window")
            return None
        try:
            return self.settings_flow.llm_settings()
        except SettingsError as e:
            self.notices.not_sent(f"Not sent: {e}. Open Settings (Ctrl+,) to fix it.")
            self.notices.state("settings problem", str(e))
            return None

    def send(self, text: str) -> None:
        settings = self._turn_settings()
        if settings is None or self.host.engine is None or self.host.current_id is None:
            return
        if not self.meter.within_cap(self.host.current_id, settings):
            return
        attached = self.attachments.take(settings, text)
        if attached is None or not self.meter.message_fits():
            return
        self.notices.not_sent(None)
        self.window.composer.set_text("")
        self.host.forget_draft(self.host.current_id)
        conv, options = self.host.current_id, self._options()
        self.attachments.sent(conv)
        driver = self.host.run_driver() if options.mode == "run" else None
        events = (driver.send(conv, text, settings, options, attached) if driver is not None
                  else self.host.engine.send(conv, text, settings, options, attached))
        self._start(events, text)
        self._turn_attached = attached

    def start_run(self, make: Callable[[str, LLMSettings, TurnOptions],
                                       AsyncIterator[EngineEvent]]) -> bool:
        """A run's turn (start, resume): `make(conversation, settings, options)` gives its
        events. False (and the reason on screen) when no turn may start now."""
        settings = self._turn_settings()
        if settings is None or self.host.current_id is None:
            return False
        self._start(make(self.host.current_id, settings, self._options()))
        return True

    def retry(self) -> None:
        settings = self._turn_settings()
        if settings is None or self.host.engine is None or self.host.current_id is None:
            return
        try:
            self.host.engine.check_retry(self.host.current_id)
        except NothingToRetry as e:
            self.notices.state(self.settings_flow.model_label(), str(e))
            return
        self._start(self._in_run(self.host.engine.retry(self.host.current_id, settings,
                                                        self._options()), settings))

    def _in_run(self, events: AsyncIterator[EngineEvent],
                settings: LLMSettings) -> AsyncIterator[EngineEvent]:
        """A Continue or Retry in run mode: the run goes on after it."""
        options = self._options()
        driver = self.host.run_driver() if options.mode == "run" else None
        if driver is None or self.host.current_id is None:
            return events
        return driver.drive_after(self.host.current_id, events, settings, options)

    def _options(self) -> TurnOptions:
        return TurnOptions(mode=self.host.mode(), agent=self.host.agent(), approve="ask")

    def stop(self) -> None:
        if self._busy and self._turn is not None:
            self._turn.cancel()

    def _start(self, events: Any, text: str = "") -> None:
        self._busy = True
        self.last_report = None
        self._turn_notices = []
        self._turn_text, self._turn_attached = text, []
        self._turn_entries = 0
        self._turn_conv = self.host.current_id
        self._turn_status = "error"
        self._turn_started = time.monotonic()
        self.window.transcript.delegate.turn_running = True
        self.window.composer.set_busy(True)
        self._turn = self.worker.submit(events, self.bridge.post,
                                        self.bridge.done)

    def _on_bridge_engine_event(self, event: object) -> None:
        if isinstance(event, RequestBuilt):
            self.last_report = event.request.report
            return
        if self._turn_conv != self.host.current_id:
            return  # the user switched away; entries are on disk all the same
        model = self.window.transcript_model
        if isinstance(event, StreamText):  # the hot path: hundreds a second
            row = model.streaming_row() or model.begin_streaming()
            if not row.text:
                model.set_stream_note("")
                self.notices.state(self._turn_model, "Receiving the answer…")
            model.add_stream_text(event.text)
        elif isinstance(event, Retrying):
            note = f"retrying in {event.delay:.0f} s ({event.attempt} of {event.of}) — Esc stops"
            model.set_stream_note(note)
            self.notices.state(self._turn_model, f"{event.cause} Retrying in "
                                                 f"{event.delay:.0f} s…")
        elif isinstance(event, RequestStarted):
            self._turn_model = self.settings_flow.model_label(event.model)
            model.begin_streaming()
            self._flush_timer.start()
            self.notices.state(self._turn_model, "Waiting for the model…"
                               if runtime.ready_for(event.model)
                               else "Loading the model library; the message leaves then…")
        elif isinstance(event, EntryAppended):
            self._turn_entries += 1
            self._show_entry(event.message)
            self._follow_entries()
            self.host.agent_flow.entry_appended(event.message)
            if event.message.run_id is not None:
                self.run_updated.emit(None)
        elif isinstance(event, RunUpdated):
            self.run_updated.emit(event)
        elif isinstance(event, ToolStarted):
            model.end_streaming()
            model.tool_started(event.call_id, event.started)
            self.notices.state(self._turn_model, f"Running {event.name}…")
            if not self._tool_timer.isActive():
                self._tool_timer.start()
        elif isinstance(event, StoreNotice):
            self._turn_notices.append(event.text)
            self.notices.warning("While saving: " + "; ".join(self._turn_notices) + ".")
        elif isinstance(event, SaveFailed):
            self._on_save_failed(event)
        elif isinstance(event, QuestionAsked):
            self._ask(event.question)
        elif isinstance(event, TurnFinished):
            self._turn_status = event.status

    def _follow(self) -> None:
        if self._busy and self._turn_conv == self.host.current_id:
            self.host.refresh_list()
            self.host.refresh_usage()  # built beside the engine's work (the meter's rule)

    def _show_entry(self, msg: ConversationMessage) -> None:
        """The turn's answer (or the error that ended it) takes the streaming row's place; its
        other entries follow the model's rule for rows arriving while a row streams."""
        model = self.window.transcript_model
        if msg.role == "assistant":
            model.finish_streaming(msg)
        else:
            model.append_message(msg)

    def _tick_tools(self) -> None:
        if not self.window.transcript_model.tick_running():
            self._tool_timer.stop()

    def _ask(self, question: Question) -> None:
        self._close_question()
        self._question = question
        if question.kind == "approval":
            self.notices.state(self._turn_model, "Waiting for your approval…")
            self._question_box = self.window.ask_approval(
                question.text, question.detail, question.choices, question.answer)
            return
        self._question_box = self.window.ask(question.text, question.detail, question.choices,
                                             question.answer)

    def _close_question(self) -> None:
        """The turn ended or moved on: a question still open is withdrawn and its box closed."""
        if self._question is not None and not self._question.answered:
            self._question.withdraw()
        if isinstance(self._question_box, ApprovalDialog):
            self._question_box.withdraw()
        elif self._question_box is not None:
            self._question_box.close()
        self._question, self._question_box = None, None

    def _on_save_failed(self, event: SaveFailed) -> None:
        if any(m.role == "user" for m in event.unsaved):
            # Nothing was sent: the message goes back to the box, as typed.
            self.window.composer.set_text(self._turn_text)
            self.attachments.give_back(self._turn_conv, self._turn_attached)
            self.notices.not_sent(
                f"Not sent: {event.cause}, so your message could not be saved. Free some space "
                "and send it again.")
            return
        assert self._turn_conv is not None
        self._unsaved.setdefault(self._turn_conv, []).extend(event.unsaved)
        for msg in event.unsaved:
            self._show_entry(msg)
        self.notices.error(event.message, "Save")

    def save_unsaved(self) -> None:
        """The notice's Save: write what a full disk kept in memory, in order."""
        if self.host.engine is None or not self._unsaved:  # another notice's button
            return
        for conv_id, entries in list(self._unsaved.items()):
            failure = self.host.engine.writer.write(conv_id, entries, "them").failure
            if failure is not None:
                self.notices.error(f"Still not saved: {failure.cause}.", "Save")
                return
            del self._unsaved[conv_id]
        self.notices.info("Saved.")

    def _on_bridge_finished(self, outcome: str) -> None:
        status = self._turn_status
        if outcome == "cancelled":
            status = "stopped"
            if (self._turn_entries == 0 and self._turn_text
                    and self._turn_conv == self.host.current_id):
                # Stopped before the message was even saved: give the text back, lose nothing.
                self.window.composer.set_text(self._turn_text)
                self.attachments.give_back(self._turn_conv, self._turn_attached)
        elif outcome == "failed":
            status = "error"
        self._flush_timer.stop()
        self._tool_timer.stop()
        self._follow_entries.cancel()  # (the end refreshes them below)
        self.window.transcript.delegate.turn_running = False
        self.window.transcript_model.stop_running()
        self.window.transcript_model.touch_last()
        self._close_question()
        self.window.transcript_model.end_streaming()
        self.window.composer.set_busy(False)
        self._busy = False
        took = time.monotonic() - self._turn_started
        state = {"ok": f"Answered in {took:.1f} s",
                 "stopped": "Stopped; the partial answer is kept",
                 "error": "The last request failed; see the error in the conversation"}[status]
        self.notices.state(self.settings_flow.model_label(), state)
        # Each in its own pass of the event loop: together, in a 10,000-message conversation,
        # they were one stall the user could feel as the answer settled.
        QTimer.singleShot(0, self.host.refresh_list)
        QTimer.singleShot(0, self.host.refresh_usage)
        self.finished.emit(status)

    def on_action(self, row: int, action: str) -> None:
        """An error row's action: Open settings, Retry or Continue (versions: branch_flow)."""
        if action.startswith("version_"):
            return
        if action == "settings":
            self.settings_flow.open()
            return
        if action.startswith("view_image:"):
            self.attachments.view(action.partition(":")[2])
            return
        if action == "open_output":
            result = self.window.transcript_model.row(row).result
            if result is not None:
                self.host.agent_flow.open_output(result)
            return
        if row != self.window.transcript_model.rowCount() - 1:
            self.notices.state(self.settings_flow.model_label(),
                               "Only the latest answer can be continued or retried")
            return
        if action == "retry":
            self.retry()
        elif action == "continue":
            self.continue_()

    def continue_(self) -> None:
        settings = self._turn_settings()
        if settings is None or self.host.engine is None or self.host.current_id is None:
            return
        self._start(self._in_run(self.host.engine.continue_(self.host.current_id, settings,
                                                            self._options()), settings))

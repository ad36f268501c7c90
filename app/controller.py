"""Wiring: the core services on one side, the window on the other.

The controller opens projects, fills the window, turns the window's signals into core calls and
the engine's events into model updates. Turns run on the engine worker's own thread and loop
(app/worker.py), so provider code never runs on the window's thread; Stop cancels the turn and
the engine keeps the partial answer.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QMessageBox

from app.worker import EngineWorker, EventBridge, TurnHandle
from core.context.builder import BudgetError, BuildReport
from core.context.calibration import Calibration
from core.context.prompts import PromptComposer
from core.engine import (
    Engine,
    NothingToRetry,
    RequestStarted,
    Retrying,
    SaveFailed,
    StoreNotice,
    StreamText,
    TurnFinished,
)
from core.llm import runtime
from core.llm.adapter import LLMClient
from core.model import ConversationMessage, ErrorInfo, Mode
from core.settings import (
    ENV_API_KEY,
    LLMSettings,
    ProviderEntry,
    SettingsError,
    SettingsStore,
    key_env_var,
    keyring_set,
    lookup_api_key,
    resolve_llm_settings,
)
from core.store.errors import StoreError
from core.store.project import Project
from ui.main_window import MainWindow
from ui.settings_dialog import SettingsDialog

STREAM_FLUSH_MS = 33  # ~30 updates a second while an answer streams
DRAFT_SAVE_MS = 1000
USAGE_DEBOUNCE_MS = 150
WARNING_AT = 0.80  # the compaction trigger: above it the meter turns orange
EXACT_DRAFT_CHARS = 200_000  # longer drafts are estimated (4 chars a token), not tokenized


class Controller(QObject):
    """Signals:
        turn_finished(str): status of the last turn ("ok", "error", "stopped").
        conversation_loaded(str): a conversation is shown.
    Attributes:
        project: the open project (None before the first open).
        current_id: the conversation shown.
    """

    turn_finished = Signal(str)
    conversation_loaded = Signal(str)

    def __init__(
        self,
        window: MainWindow,
        settings_store: SettingsStore,
        client: LLMClient | None = None,
        open_settings_on_first_run: bool = True,
    ) -> None:
        super().__init__(window)
        self.window = window
        self.settings_store = settings_store
        self.client = client or LLMClient()
        self.project: Project | None = None
        self.engine: Engine | None = None
        self.current_id: str | None = None
        self.worker = EngineWorker()
        self.bridge = EventBridge(self)
        self.bridge.engine_event.connect(self._on_bridge_event)
        self.bridge.entry.connect(self._on_bridge_entry)
        self.bridge.finished.connect(self._on_bridge_finished)
        self._turn: TurnHandle | None = None
        self._turn_text = ""
        self._turn_entries = 0
        self._busy = False
        self._turn_conv: str | None = None
        self._turn_status = "error"
        self._turn_started = 0.0
        self._turn_model = ""
        self._drafts: dict[str, str] = {}
        # Entries a full disk kept from being saved, by conversation: shown, saved on request.
        self._unsaved: dict[str, list[ConversationMessage]] = {}
        self._turn_notices: list[str] = []  # what the store repaired during the running turn
        self._first_run = not settings_store.path.exists() and open_settings_on_first_run
        self._dialog: SettingsDialog | None = None

        self._flush_timer = QTimer(self)
        self._flush_timer.setInterval(STREAM_FLUSH_MS)
        self._flush_timer.timeout.connect(window.transcript_model.flush_stream)
        self._draft_timer = QTimer(self)
        self._draft_timer.setSingleShot(True)
        self._draft_timer.setInterval(DRAFT_SAVE_MS)
        self._draft_timer.timeout.connect(self._save_ui_state)
        self._usage_timer = QTimer(self)
        self._usage_timer.setSingleShot(True)
        self._usage_timer.setInterval(USAGE_DEBOUNCE_MS)
        self._usage_timer.timeout.connect(self._show_usage)
        self._report: BuildReport | None = None
        self._report_error: tuple[str, str] | None = None  # (meter text, why)
        self.calibration = Calibration(settings_store.folder / "calibration.json")
        self.preview: Engine | None = None  # builds for the meter, on the window's thread
        self._import_timer = QTimer(self)
        self._import_timer.setInterval(150)
        self._import_timer.timeout.connect(self._poll_library)

        c = window.conversations
        c.selected.connect(self._on_conversations_selected)
        c.new_requested.connect(self.new_conversation)
        c.rename_requested.connect(self._on_conversations_rename_requested)
        c.delete_requested.connect(self._on_conversations_delete_requested)
        c.search_changed.connect(self._on_conversations_search_changed)
        window.composer.send_requested.connect(self.send)
        window.composer.stop_requested.connect(self.stop)
        window.composer.draft_changed.connect(self._on_composer_draft_changed)
        window.mode_switcher.mode_changed.connect(self._on_mode_switcher_mode_changed)
        window.transcript.action_requested.connect(self._on_transcript_action_requested)
        window.settings_requested.connect(self.open_settings)
        window.notice_action.connect(self.save_unsaved)
        window.open_project_requested.connect(self.open_project)
        window.new_project_requested.connect(self.open_project)
        window.closing.connect(self.shutdown)

        g = settings_store.load()
        window.restore_geometry_state(getattr(g, "window_geometry", None),
                                      getattr(g, "window_splitter", None))
        window.set_recent_projects(g.recent_projects)
        self._refresh_status()
        if not runtime.is_loaded():
            self._import_timer.start()

    # --- settings --------------------------------------------------------------------------------

    def llm_settings(self) -> LLMSettings:
        """The settings the next request uses.

        Raises:
            SettingsError: a layer (environment, project.json, settings.json) is invalid. Never a
                silent fallback to defaults: that would send to a provider the user did not choose.
        """
        overrides = self.project.overrides if self.project else {}
        g = self.settings_store.load()
        if self.settings_store.problem:
            raise SettingsError(
                f"{self.settings_store.problem}. Fix that file, or save Settings to start over "
                "(the unreadable file is kept beside it as settings.json.bad)")
        return resolve_llm_settings(project=overrides, global_settings=g)

    def settings_problem(self) -> str | None:
        """Why no request can be sent with the current settings, or None."""
        try:
            self.llm_settings()
        except SettingsError as e:
            return str(e)
        return None

    def _model_label(self) -> str:
        try:
            s = self.llm_settings()
        except SettingsError:
            return "settings problem"
        return s.model + (f" @ {s.api_base}" if s.api_base else "")

    def provider_configured(self) -> bool:
        g = self.settings_store.load()
        if g.active_provider or g.model:
            return True
        try:
            s = self.llm_settings()
        except SettingsError:
            return True  # configured, if wrongly: the problem is shown, not the welcome text
        return s.sources.get("model") != "default" or bool(lookup_api_key("openai"))

    def open_settings(self) -> None:
        g = self.settings_store.load()
        try:
            s = self.llm_settings()
        except SettingsError:  # show what the saved provider says; the problem is on screen
            try:
                s = resolve_llm_settings(env={}, global_settings=g)
            except SettingsError:
                s = LLMSettings()
        keys = {p: bool(lookup_api_key(p)) for p in ("openai", "anthropic")}
        self._dialog = SettingsDialog(
            self.window, preset_name=g.active_provider, model=s.model, api_base=s.api_base,
            max_output_tokens=s.max_output_tokens, keyring_available=_keyring_works(),
            keys_present=keys, remembered_windows=self.calibration.remembered_windows())
        self._dialog.accepted.connect(self._on_settings_accepted)
        self._dialog.forget_window_requested.connect(self._on_settings_forget_window_requested)
        self._dialog.open()

    def _on_settings_forget_window_requested(self, model: str) -> None:
        self.calibration.forget_window(model)
        self.refresh_usage()

    def _on_settings_accepted(self) -> None:
        assert self._dialog is not None
        choice = self._dialog.choice()
        g = self.settings_store.load()
        entry = ProviderEntry(name=choice.preset.name, model=choice.model,
                              api_base=choice.api_base, max_output_tokens=choice.max_output_tokens,
                              key_name=choice.preset.provider)
        g.providers = [p for p in g.providers if p.name != entry.name] + [entry]
        g.active_provider = entry.name
        g.model = g.api_base = g.max_output_tokens = None  # the provider entry decides now
        self.settings_store.save(g, replace_unreadable=True)
        if choice.api_key and not keyring_set(choice.preset.provider, choice.api_key):
            # The variable the key will actually be read from: a custom base URL never gets a
            # provider's own key (see core.settings.key_for_request).
            env = ENV_API_KEY if choice.api_base else key_env_var(choice.preset.provider)
            QMessageBox.warning(
                self.window, "Key not saved",
                f"No system keyring works on this machine, so the key was not saved. Set "
                f"{env} in your environment and restart Context Workbench.")
        self.window.set_welcome(self.provider_configured())
        self._refresh_status()
        self.refresh_usage()

    # --- projects --------------------------------------------------------------------------------

    def open_project(self, path: str | Path) -> bool:
        self.stop()
        try:
            project = Project.open(path)
        except StoreError as e:
            QMessageBox.critical(self.window, "Cannot open project", str(e))
            return False
        self._close_project()
        self.project = project
        self.engine = Engine(project.conversations, self.client,
                             on_entry=lambda conv, msg: self.bridge.entry.emit(conv, msg),
                             composer=PromptComposer(project.state / "prompts"),
                             requests_dir=project.state / "requests",
                             calibration=self.calibration)
        self.preview = Engine(project.conversations, composer=self.engine.composer,
                              calibration=self.calibration)
        g = self.settings_store.remember_project(project.root)
        self.window.set_recent_projects(g.recent_projects)
        self.window.set_project(project.name, project.read_only_reason)
        self.window.set_welcome(self.provider_configured())
        state = project.ui_state()
        self._drafts = dict(state.get("drafts") or {})
        rows = project.conversations.list()
        wanted = state.get("open_conversation")
        if not any(r.id == wanted for r in rows):
            wanted = rows[0].id if rows else None
        if wanted is None and not project.read_only:
            wanted = project.conversations.create().id
            rows = project.conversations.list()
        self.window.conversations.set_rows(rows, wanted)
        if wanted:
            self.show_conversation(wanted)
        else:
            self.window.transcript_model.set_messages([])
        self._refresh_status()  # the project's own settings may name another model
        if self._first_run:
            self._first_run = False
            QTimer.singleShot(0, self.open_settings)
        return True

    def _close_project(self) -> None:
        if self.project is not None:
            self._save_ui_state()
            self.project.close()
        self.project = None
        self.current_id = None

    def shutdown(self) -> None:
        """The window is closing: stop a running turn (its partial answer is kept), save state."""
        self.worker.shutdown()
        geometry, splitter = self.window.geometry_state()
        g = self.settings_store.load()
        extra: dict[str, Any] = {"window_geometry": geometry, "window_splitter": splitter}
        self.settings_store.save(g.model_copy(update=extra))
        self._close_project()

    def _save_ui_state(self) -> None:
        if self.project is None:
            return
        if self.current_id is not None:
            self._drafts[self.current_id] = self.window.composer.text()
        drafts = {k: v for k, v in self._drafts.items() if v}
        self.project.save_ui_state({"open_conversation": self.current_id, "drafts": drafts})

    # --- conversations ---------------------------------------------------------------------------

    def show_conversation(self, conv_id: str) -> None:
        if self.project is None:
            return
        if self.current_id is not None and self.current_id != conv_id:
            self._drafts[self.current_id] = self.window.composer.text()
        loaded = self.project.conversations.load(conv_id)
        self.current_id = conv_id
        shown = loaded.messages
        if loaded.pending_partial is not None:  # a read-only view: show it, never write it
            shown = [*shown, ConversationMessage(
                role="assistant", kind="error", content=loaded.pending_partial, status="aborted",
                error=ErrorInfo(type="app_closed", partial=bool(loaded.pending_partial),
                                message="Pending: an app closed while this answer was arriving. "
                                        "It becomes an entry when the project is opened for "
                                        "writing."))]
        self.window.transcript_model.set_messages(shown)
        # A long conversation is hundreds of thousands of long-lived objects; without this a
        # full collection rescans them all, a quarter-second stall in the middle of a stream.
        gc.freeze()
        self.window.composer.set_text(self._drafts.get(conv_id, ""))
        self.window.mode_switcher.set_mode(loaded.meta.mode)
        self.refresh_usage()
        self.window.set_notice("Found on opening: " + "; ".join(loaded.problems) + "."
                               if loaded.problems else None)
        self.conversation_loaded.emit(conv_id)
        self._save_ui_state()

    def new_conversation(self) -> None:
        if self.project is None or self.project.read_only:
            return
        meta = self.project.conversations.create()
        self.window.conversations.set_rows(self.project.conversations.list(), meta.id)
        self.show_conversation(meta.id)
        self.window.composer.editor.setFocus()

    def _on_conversations_selected(self, conv_id: str) -> None:
        if conv_id != self.current_id:
            self.stop()
            self.show_conversation(conv_id)

    def _on_conversations_rename_requested(self, conv_id: str, title: str) -> None:
        if self.project is None:
            return
        self.project.conversations.rename(conv_id, title)
        self._refresh_list()

    def _on_conversations_delete_requested(self, conv_id: str) -> None:
        if self.project is None:
            return
        if conv_id == self.current_id:
            self.stop()
        self.project.conversations.delete(conv_id)
        self._drafts.pop(conv_id, None)
        rows = self.project.conversations.list()
        if conv_id == self.current_id:
            self.current_id = None
            if rows:
                self.show_conversation(rows[0].id)
            else:
                self.new_conversation()
                return
        self.window.conversations.set_rows(rows, self.current_id)

    def _on_conversations_search_changed(self, text: str) -> None:
        if self.project is None:
            return
        rows = self.project.conversations.list()
        if text.strip():
            hits = self.project.conversations.search(text)
            rows = [r for r in rows if r.id in hits]
        self.window.conversations.set_rows(rows, self.current_id)

    def _refresh_list(self) -> None:
        if self.project is not None:
            self.window.conversations.set_rows(self.project.conversations.list(), self.current_id)

    def _on_composer_draft_changed(self) -> None:
        self._draft_timer.start()
        self._usage_timer.start()  # only the draft is recounted, debounced

    def _on_mode_switcher_mode_changed(self, mode: str) -> None:
        if self.project is not None and self.current_id is not None and not self.project.read_only:
            self.project.conversations.update_meta(self.current_id, mode=mode)
        self.refresh_usage()

    def mode(self) -> Mode:
        return self.window.mode_switcher.mode()

    # --- the usage meter -------------------------------------------------------------------------

    def refresh_usage(self) -> None:
        """Rebuild the request the next turn would send (cheap: incremental) and show it."""
        self._report, self._report_error = None, None
        if self.project is None or self.current_id is None or self.preview is None:
            return
        if not runtime.is_loaded():
            self.window.usage.set_pending("context: waiting for the model library…")
            return
        history = self.project.conversations.load(self.current_id).messages
        try:
            settings = self.llm_settings()
            self._report = self.preview.build(history, settings, self.mode(),
                                              conv_id=self.current_id).report
        except BudgetError as e:
            self._report_error = ("context: does not fit", self.preview.budget_message(e, settings))
        except SettingsError as e:
            self._report_error = ("context: settings problem", str(e))
        self._show_usage()

    def draft_tokens(self) -> int:
        text = self.window.composer.text()
        if not text:
            return 0
        if len(text) > EXACT_DRAFT_CHARS or self.preview is None or self._report is None:
            return len(text) // 4 + 4
        # Per keystroke: the model comes from the last build, not from settings.json on disk.
        return self.preview.counter(self._report.model).text(text) + 4

    def _show_usage(self) -> None:
        meter = self.window.usage
        r = self._report
        if r is None:
            if self._report_error:
                meter.set_problem(*self._report_error)
            return
        draft = round(self.draft_tokens() * r.calibration)
        used = r.provider_estimate + draft
        state = "over" if used > r.usable else "warning" if used > WARNING_AT * r.usable else \
            "normal"
        lines = [
            f"{used:,} of {r.usable:,} usable tokens ({r.model}, {r.mode} mode)",
            f"  system prompt   {r.totals['system']:>9,}",
            f"  tools           {r.totals['tools']:>9,}",
            f"  history         {r.totals['history']:>9,}",
            f"  your draft      {draft:>9,}",
            f"  reserved for the answer {r.reserved_output:,}; window {r.window:,} "
            f"({r.budget_source})",
        ]
        if r.calibration != 1.0:
            lines.append(f"  calibrated against the provider: x{r.calibration:.3f}")
        if r.budget_note:
            lines.append(r.budget_note)
        dropped = sum(1 for e in r.entries if e.decision == "dropped") if state != "normal" else 0
        if dropped:
            lines.append(f"{dropped:,} older entries are left out to fit")
        meter.set_usage(used, r.usable, state, "\n".join(lines))

    def _message_fits(self, text: str) -> bool:
        """A message the model cannot take even alone: say so instead of sending it."""
        r = self._report
        if r is None:
            return True
        need = round((r.totals["system"] + self.draft_tokens()) * r.calibration)
        if need <= r.usable:
            return True
        self.window.composer.show_warning(
            f"Not sent: this message is about {need:,} tokens with the system prompt, but "
            f"{r.model} accepts {r.usable:,} for input. Shorten it, or choose a model with a "
            "larger context window in Settings.")
        return False

    # --- turns -----------------------------------------------------------------------------------

    def busy(self) -> bool:
        """A turn is running (until its last event has reached the window)."""
        return self._busy

    def _turn_settings(self) -> LLMSettings | None:
        """Settings for a turn about to start, or None (and the reason on screen) when no turn
        may start: a read-only view never sends (nor writes), broken settings never fall back."""
        if self.busy() or self.project is None or self.current_id is None or self.engine is None:
            return None
        if self.project.read_only:
            self.window.set_status(self._model_label(),
                                   "Read-only: nothing is sent from this window")
            return None
        try:
            return self.llm_settings()
        except SettingsError as e:
            self.window.composer.show_warning(f"Not sent: {e}. Open Settings (Ctrl+,) to fix it.")
            self.window.set_status("settings problem", str(e))
            return None

    def send(self, text: str) -> None:
        settings = self._turn_settings()
        if settings is None or self.engine is None or self.current_id is None:
            return
        if not self._message_fits(text):
            return
        self.window.composer.show_warning(None)
        self.window.composer.set_text("")
        self._drafts.pop(self.current_id, None)
        self._start(self.engine.send(self.current_id, text, settings, self.mode()), text)

    def retry(self) -> None:
        settings = self._turn_settings()
        if settings is None or self.engine is None or self.current_id is None:
            return
        try:
            self.engine.check_retry(self.current_id)
        except NothingToRetry as e:
            self.window.set_status(self._model_label(), str(e))
            return
        self._start(self.engine.retry(self.current_id, settings, self.mode()))

    def stop(self) -> None:
        if self._busy and self._turn is not None:
            self._turn.cancel()

    def _start(self, events: Any, text: str = "") -> None:
        self._busy = True
        self._turn_notices = []
        self._turn_text = text
        self._turn_entries = 0
        self._turn_conv = self.current_id
        self._turn_status = "error"
        self._turn_started = time.monotonic()
        self.window.composer.set_busy(True)
        self._turn = self.worker.submit(events, self.bridge.engine_event.emit,
                                        self.bridge.finished.emit)

    def _on_bridge_event(self, event: object) -> None:
        if self._turn_conv != self.current_id:
            return  # the user switched away; entries are on disk all the same
        model = self.window.transcript_model
        if isinstance(event, StreamText):  # the hot path: hundreds a second
            row = model.streaming_row() or model.begin_streaming()
            if not row.text:
                model.set_stream_note("")
                self.window.set_status(self._turn_model, "Receiving the answer…")
            model.add_stream_text(event.text)
        elif isinstance(event, Retrying):
            note = f"retrying in {event.delay:.0f} s ({event.attempt} of {event.of}) — Esc stops"
            model.set_stream_note(note)
            self.window.set_status(self._turn_model, f"{event.cause} Retrying in "
                                                     f"{event.delay:.0f} s…")
        elif isinstance(event, RequestStarted):
            self._turn_model = event.model
            model.begin_streaming()
            self._flush_timer.start()
            self.window.set_status(event.model, "Waiting for the model…")
        elif isinstance(event, StoreNotice):
            self._turn_notices.append(event.text)
            self.window.set_notice("While saving: " + "; ".join(self._turn_notices) + ".")
        elif isinstance(event, SaveFailed):
            self._on_save_failed(event)
        elif isinstance(event, TurnFinished):
            self._turn_status = event.status

    def _on_save_failed(self, event: SaveFailed) -> None:
        if any(m.role == "user" for m in event.unsaved):
            # Nothing was sent: the message goes back to the box, as typed.
            self.window.composer.set_text(self._turn_text)
            self.window.composer.show_warning(
                f"Not sent: {event.cause}, so your message could not be saved. Free some space "
                "and send it again.")
            return
        assert self._turn_conv is not None
        self._unsaved.setdefault(self._turn_conv, []).extend(event.unsaved)
        for msg in event.unsaved:
            self.window.transcript_model.append_message(msg)
        self.window.set_notice(event.message, "Save")

    def save_unsaved(self) -> None:
        """The notice's Save: write what a full disk kept in memory, in order."""
        if self.project is None:
            return
        for conv_id, entries in list(self._unsaved.items()):
            try:
                self.project.conversations.append_many(conv_id, entries)
            except StoreError as e:
                self.window.set_notice(f"Still not saved: {e}", "Save")
                return
            self.project.conversations.clear_partial(conv_id)  # saved: nothing to recover
            del self._unsaved[conv_id]
        self.window.set_notice("Saved.")

    def _on_bridge_entry(self, conv_id: str, msg: object) -> None:
        self._turn_entries += 1
        if conv_id == self.current_id and isinstance(msg, ConversationMessage):
            self.window.transcript_model.append_message(msg)

    def _on_bridge_finished(self, outcome: str) -> None:
        status = self._turn_status
        if outcome == "cancelled":
            status = "stopped"
            if self._turn_entries == 0 and self._turn_text and self._turn_conv == self.current_id:
                # Stopped before the message was even saved: give the text back, lose nothing.
                self.window.composer.set_text(self._turn_text)
        elif outcome == "failed":
            status = "error"
        self._flush_timer.stop()
        self.window.transcript_model.end_streaming()
        self.window.composer.set_busy(False)
        self._busy = False
        took = time.monotonic() - self._turn_started
        state = {"ok": f"Answered in {took:.1f} s",
                 "stopped": "Stopped; the partial answer is kept",
                 "error": "The last request failed; see the error in the conversation"}[status]
        self.window.set_status(self._model_label(), state)
        self._refresh_list()
        self.refresh_usage()
        self.turn_finished.emit(status)

    def _on_transcript_action_requested(self, row: int, action: str) -> None:
        if action == "settings":
            self.open_settings()
            return
        if row != self.window.transcript_model.rowCount() - 1:
            self.window.set_status(self._model_label(),
                                   "Only the latest answer can be continued or retried")
            return
        if action == "retry":
            self.retry()
        elif action == "continue":
            self.continue_()

    def continue_(self) -> None:
        settings = self._turn_settings()
        if settings is None or self.engine is None or self.current_id is None:
            return
        self._start(self.engine.continue_(self.current_id, settings, self.mode()))

    # --- status ----------------------------------------------------------------------------------

    def _poll_library(self) -> None:
        if runtime.is_loaded():
            self._import_timer.stop()
            gc.freeze()  # litellm's many long-lived objects: never rescan them
            self.refresh_usage()
        self._refresh_status()

    def _refresh_status(self) -> None:
        if self.busy():
            return
        problem = self.settings_problem()
        if problem:
            self.window.set_status("settings problem", f"{problem}. Open Settings (Ctrl+,).")
            return
        state = "Ready" if runtime.is_loaded() else "Loading the model library…"
        self.window.set_status(self._model_label(), state)


def _keyring_works() -> bool:
    try:
        import keyring
        from keyring.backends.fail import Keyring as FailKeyring

        return not isinstance(keyring.get_keyring(), FailKeyring)
    except Exception:  # noqa: BLE001
        return False

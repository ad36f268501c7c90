"""Wiring: the core services on one side, the window on the other.

The controller opens projects, fills the window, turns the window's signals into core calls and
the engine's events into model updates. Turns run on the engine worker's own thread and loop
(worker.py), so provider code never runs on the window's thread; Stop cancels the turn and
the engine keeps the partial answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal

from app.window import memory
from app.window.agent_flow import AgentFlow
from app.window.branch_flow import BranchFlow
from app.window.checkpoint_flow import CheckpointFlow
from app.window.compaction_flow import CompactionFlow
from app.window.help_flow import HelpFlow
from app.window.inspector_flow import InspectorFlow
from app.window.interchange_flow import InterchangeFlow
from app.window.layout_state import restore_layout, save_layout
from app.window.library_status import LibraryStatus
from app.window.list_flow import ListFlow
from app.window.local_server_flow import LocalServerSearch
from app.window.mcp_watch import McpWatch
from app.window.meter import UsageMeter
from app.window.notices import Notices
from app.window.process import follow_window_thread
from app.window.run_flow import RunFlow
from app.window.search_flow import SearchFlow
from app.window.server_window import ServerWindow
from app.window.settings_flow import SettingsFlow
from app.window.title_flow import TitleFlow
from app.window.trust_flow import TrustFlow
from app.window.turns import TurnRunner
from core.agents import Agent
from core.context.budget import Budget
from core.context.calibration import Calibration
from core.context.service import ProjectContext
from core.engine import Engine
from core.factory import build_engine
from core.llm.adapter import LLMClient
from core.llm.local_servers import LOCAL_ADDRESSES
from core.model import ConversationMessage, Mode, pending_entry
from core.runs.driver import RunDriver
from core.settings import LLMSettings, SettingsStore
from core.store.errors import StoreError
from core.store.project import Project
from ui.main_window import MainWindow
from ui.throttle import Throttle

DRAFT_SAVE_MS = 1000  # typing rests this long before the draft is saved with the window's state
USAGE_DEBOUNCE_MS = 150  # ... and this long before the meter counts the draft


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
        notices: Notices | None = None,
        local_servers: Sequence[str] = LOCAL_ADDRESSES,
    ) -> None:
        """`local_servers`: where a first start without a key looks for a model server
        already running (loopback addresses; tests give their own)."""
        super().__init__(window)
        follow_window_thread()
        self.window = window
        # Everything the flows tell the user goes through this one channel.
        self.notices = notices or Notices(self)
        self.notices.attach(window)
        self.settings_store = settings_store
        self.client = client or LLMClient()
        self.project: Project | None = None
        self.engine: Engine | None = None
        self.current_id: str | None = None
        self._drafts: dict[str, str] = {}
        self._first_run = not settings_store.path.exists() and open_settings_on_first_run

        self._save_draft = Throttle(self._save_ui_state, DRAFT_SAVE_MS, self, mode="debounce")
        self.calibration = Calibration(settings_store.folder / "calibration.json")
        self.settings_flow = SettingsFlow(
            window, settings_store, self.calibration,
            lambda: self.project.overrides if self.project is not None else {},
            self._budget_for)
        self.settings_flow.changed.connect(self._on_settings_flow_changed)
        self.agent_flow = AgentFlow(window, self.notices)
        self.meter = UsageMeter(window, self.notices, self.settings_flow, self.mode,
                                self.agent_flow.agent)
        window.mode_switcher.agent_changed.connect(lambda _name: self.refresh_usage())
        self._count_draft = Throttle(self.meter.show, USAGE_DEBOUNCE_MS, self, mode="debounce")
        self.turns = TurnRunner(window, self.notices, self, self.settings_flow, self.meter)
        self.meter.turn_running = self.turns.busy
        self.turns.finished.connect(self.turn_finished)
        self.server_window = ServerWindow(self.turns.worker, self.meter, self.settings_flow,
                                          self.refresh_usage, self)
        self.local_servers = LocalServerSearch(self.turns.worker, self.settings_flow,
                                               local_servers, self)
        self.compaction = CompactionFlow(window, self.notices, self, self.settings_flow,
                                         self.turns.worker)
        self.turns.finished.connect(self._after_turn)
        self.inspector = InspectorFlow(window, self.notices, self, self.meter)
        self.runs = RunFlow(window, self.notices, self, self.turns, self.inspector.show_entry)
        self.branches = BranchFlow(window, self.notices, self)
        self.checkpoints = CheckpointFlow(window, self.notices, self)
        self.branches.rewind_files = self.checkpoints.rewind_files
        self.titles = TitleFlow(self)
        self.interchange = InterchangeFlow(window, self.notices, self)
        self.trust = TrustFlow(window, self.notices, self._reopen_project, self)
        window.trust_requested.connect(self.trust.review)
        self.help = HelpFlow(window, settings_store.folder,
                             lambda: self.project.root if self.project is not None else None,
                             self)
        self.mcp_watch = McpWatch(window, self.notices, self.meter, self._reopen_project)
        self.library = LibraryStatus(self.notices, self.settings_flow, self.busy, self)

        c = window.conversations
        c.selected.connect(self._on_conversations_selected)
        c.new_requested.connect(self.new_conversation)
        self.list_flow = ListFlow(window, self.notices, self, self)  # rename, delete
        self.search = SearchFlow(window, self.notices, self)
        c.search_changed.connect(self.search.search)
        window.composer.send_requested.connect(self.send)
        window.composer.stop_requested.connect(self.stop)
        window.composer.draft_changed.connect(self._on_composer_draft_changed)
        window.composer.editing_changed.connect(self.refresh_usage)  # count the branch's part
        window.mode_switcher.mode_changed.connect(self._on_mode_switcher_mode_changed)
        window.transcript.action_requested.connect(self.turns.on_action)
        window.settings_requested.connect(self.settings_flow.open)
        window.open_project_requested.connect(self.open_project)
        window.new_project_requested.connect(self.open_project)
        window.closing.connect(self.shutdown)

        g = settings_store.load()
        restore_layout(window, g)
        window.set_recent_projects(g.recent_projects)
        self.library.watch()

    # --- settings --------------------------------------------------------------------------------

    def llm_settings(self) -> LLMSettings:  # raises SettingsError: see SettingsFlow
        return self.settings_flow.llm_settings()

    def _budget_for(self, settings: LLMSettings) -> Budget | None:
        """The window the current conversation's next request is built for (no server asked)."""
        context = self.meter.context
        if context is None:
            return None
        return context.budget(self.current_id, settings, ask_servers=False)

    def model_in_use(self) -> str | None:
        """The model the next request goes to (None: the settings cannot be read)."""
        return self.library.model_in_use()

    def _on_settings_flow_changed(self) -> None:
        self.window.set_welcome(self.settings_flow.provider_configured())
        self.library.settings_changed()
        self.refresh_usage()

    # --- projects --------------------------------------------------------------------------------

    def open_project(self, path: str | Path) -> bool:
        if self.project is not None and \
                Path(path).expanduser().resolve() == self.project.root.resolve():
            # Open again, it would find its own lock and open read-only: it is kept as it is.
            self.notices.info(f"“{self.project.name}” is already open.")
            return True
        self.stop()
        try:
            project = Project.open(path)
        except StoreError as e:
            self.window.show_error("Cannot open project", str(e))
            return False
        self._close_project()
        self.project = project
        # One context: the engine builds with it on its thread, the meter and the Inspector on
        # the window's, so what they show is what is sent.
        self.meter.context = ProjectContext.for_project(project, self.calibration)
        self.engine = build_engine(project, self.meter.context, self.client)
        with self.notices.saving("The list of recent projects was not updated"):
            self.window.set_recent_projects(
                self.settings_store.remember_project(project.root).recent_projects)
        self.window.set_project(project.name, project.read_only_reason, str(project.root))
        self.trust.project_opened(project)
        if project.links_removed:
            self.notices.warning("Removed symbolic links the project's .workbench/ held (the "
                                 "app never follows one there): "
                                 + "; ".join(project.links_removed[:5]) + ".")
        self.window.set_welcome(self.settings_flow.provider_configured())
        agent_problems = self.agent_flow.project_opened(project)
        agent_problems += self.runs.project_opened(project, self.engine)
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
        self.library.refresh()  # the project's own settings may name another model
        if agent_problems:
            self.notices.warning("Agents and workflows: " + " ".join(agent_problems))
        if not project.read_only:
            self.window.composer.editor.setFocus()  # typing starts in the message box
        if self._first_run:
            self._first_run = False
            self.local_servers.start()  # offered in Settings once found, never waited for
            QTimer.singleShot(0, self.settings_flow.open)
        return True

    def _reopen_project(self) -> None:
        """Open the project again (trusted now: its servers and settings are read anew)."""
        if self.project is not None:
            root = self.project.root
            self._close_project()
            self.open_project(root)

    def _close_project(self) -> None:
        """Save what the window shows and close the project: closed even when saving fails, so
        its lock and index writer are released."""
        try:
            self._save_ui_state()
        finally:
            closed, self.project, self.current_id = self.project, None, None
            if closed is not None:
                closed.close()
            if self.engine is not None:  # its MCP servers stop (on the engine's loop)
                self.turns.worker.call_soon(self.engine.close())
            if closed is not None:  # the window's first project closes none: nothing to free
                memory.settle()

    def shutdown(self) -> None:
        """The window is closing: stop a running turn (its partial answer is kept), save state,
        close the project whatever failed before."""
        try:
            self.turns.worker.shutdown()
            save_layout(self.window, self.settings_store, self.notices)
        finally:
            self._close_project()

    def _save_ui_state(self) -> None:
        if self.project is None:
            return
        if self.current_id is not None:
            self._drafts[self.current_id] = self.window.composer.text()
        drafts = {k: v for k, v in self._drafts.items() if v}
        with self.notices.saving("The open conversation and drafts could not be saved"):
            self.project.save_ui_state({"open_conversation": self.current_id, "drafts": drafts})

    # --- conversations ---------------------------------------------------------------------------

    def show_conversation(self, conv_id: str) -> None:
        if self.project is None:
            return
        if self.current_id is not None and self.current_id != conv_id:
            self._drafts[self.current_id] = self.window.composer.text()
        if self.engine is not None and not self.busy():
            # Calls a crash left without results close as aborted: cards say so, requests complete.
            for _ in self.engine.close_interrupted(conv_id):
                pass
        loaded = self.project.conversations.load(conv_id)
        self.current_id = conv_id
        shown = loaded.messages
        if loaded.pending_partial is not None:  # a read-only view: show it, never write it
            shown = [*shown, pending_entry(loaded.pending_partial)]
        left_long = self.window.transcript_model.rowCount() >= memory.COLLECT_AFTER_ROWS
        self.window.transcript_model.set_messages(shown)
        memory.settle(collect=left_long)  # collect when a long conversation was left
        self.window.composer.set_text(self._drafts.get(conv_id, ""))
        self.window.mode_switcher.set_mode(loaded.meta.mode)
        network = self.project.conversations.network_allowed(loaded.meta)
        self.agent_flow.conversation_shown(conv_id, loaded.meta.agent, loaded.messages, network)
        self.refresh_usage()
        if loaded.problems:
            self.notices.warning("Found on opening: " + "; ".join(loaded.problems) + ".")
        else:
            self.notices.clear()
        self.library.refresh()  # the last conversation's state is not this one's
        self.runs.conversation_shown(conv_id)
        self.conversation_loaded.emit(conv_id)
        self._save_ui_state()

    def new_conversation(self) -> None:
        if self.project is None or self.project.read_only:
            return
        with self.notices.saving("No new conversation") as made:
            meta = self.project.conversations.create()
        if not made.ok:
            return
        self.window.conversations.set_rows(self.project.conversations.list(), meta.id)
        self.show_conversation(meta.id)
        self.window.composer.editor.setFocus()

    def _on_conversations_selected(self, conv_id: str) -> None:
        if conv_id != self.current_id:
            self.stop()
            self.show_conversation(conv_id)

    def _on_composer_draft_changed(self) -> None:
        self._save_draft()
        self._count_draft()  # only the draft is recounted

    def _on_mode_switcher_mode_changed(self, mode: str) -> None:
        if self.project is not None and self.current_id is not None and not self.project.read_only:
            with self.notices.saving("The mode is used but could not be saved"):
                self.project.conversations.update_meta(self.current_id, mode=mode)
        if mode == "run":
            self.window.run_panel.show()  # where a run is started and followed
        self.refresh_usage()

    def mode(self) -> Mode:
        return self.window.mode_switcher.mode()

    def set_mode(self, mode: Mode) -> None:
        """Switch the conversation to `mode` as if the user had (a run starting)."""
        if self.mode() != mode:
            self.window.mode_switcher.set_mode(mode)
            self._on_mode_switcher_mode_changed(mode)

    def run_driver(self) -> RunDriver | None:
        return self.runs.open_driver()

    def agent(self) -> Agent:
        return self.agent_flow.agent()

    # --- the usage meter -------------------------------------------------------------------------

    def history(self, conv_id: str, project: Project | None = None) -> list[ConversationMessage]:
        """The history the next request is built from: while an earlier message is edited,
        what comes before it (sending makes a branch there). `project`: the one the
        conversation is in (a build may run after another project opened)."""
        project = project or self.project
        if project is None:
            return []
        messages = project.conversations.load(conv_id).messages
        cut = self.branches.editing_entry() if conv_id == self.current_id else None
        at = next((n for n, m in enumerate(messages) if m.id == cut), None)
        return messages if at is None else messages[:at]

    def refresh_usage(self) -> None:  # the request the next turn would send (incremental)
        project, conv = self.project, self.current_id
        if project is None or conv is None:
            self.meter.refresh(None, list)
            return
        self.meter.refresh(conv, lambda: self.history(conv, project))
        self.server_window.ask(conv)  # a local server not asked yet: what it states

    # --- turns (app/turns.py runs them) ----------------------------------------------------------

    def busy(self) -> bool:  # a turn runs (until its last event has reached the window)
        return self.turns.busy()

    def send(self, text: str) -> None:
        if self.branches.send_edited(text):  # an earlier message, edited: sent in a branch
            return
        command, _, focus = text.strip().partition(" ")
        if command == "/compact":
            if self.compaction.compact_with(focus):
                self.window.composer.set_text("")
            return
        self.turns.send(text)

    def stop(self) -> None:
        if not self.turns.busy() and self.compaction.running():
            self.compaction.stop()
            return
        self.turns.stop()

    def _after_turn(self, status: str) -> None:
        self.compaction.after_turn(status, self.turns.last_report,
                                   self.window.transcript_model.rowCount())

    def refresh_list(self) -> None:
        self.search.refresh()

    def forget_draft(self, conv_id: str) -> None:
        self._drafts.pop(conv_id, None)

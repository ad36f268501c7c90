"""Branches in the window: Fork from here, Edit and resend, Regenerate (Ctrl+Shift+R for the last
answer), and "‹ version n of m ›" where branches part. A branch is a conversation of its own
(core/store/branches.py): the one shown is never rewritten."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from functools import partial
from typing import Protocol

from PySide6.QtCore import QEvent, QObject, QPoint, QTimer, SignalInstance
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import QApplication, QMenu

from app.window.notices import Notices
from app.window.settings_flow import SettingsFlow
from app.window.turns import TurnRunner
from core.attachments import Attachment
from core.engine import Engine, EngineEvent, TurnOptions
from core.model import ConversationMessage, Mode
from core.runs.driver import RunDriver
from core.settings import LLMSettings, SettingsError
from core.store.branches import asked_at
from core.store.conversations import ConversationSummary
from core.store.project import Project
from ui.main_window import MainWindow

EDITING_NOTE = ("Editing an earlier message: sending it starts a new branch from just before it; "
                "this conversation stays as it is. Esc cancels.")


@dataclass(frozen=True)
class _Editing:
    """An edit under way: of which conversation's entry, and the draft (text and chips) that
    waits aside meanwhile."""

    conv: str
    entry: str
    draft: str
    attached: list[Attachment]


class BranchHost(Protocol):
    project: Project | None
    current_id: str | None
    engine: Engine | None
    turns: TurnRunner
    settings_flow: SettingsFlow
    conversation_loaded: SignalInstance

    def show_conversation(self, conv_id: str) -> None: ...
    def set_mode(self, mode: Mode) -> None: ...
    def busy(self) -> bool: ...
    def run_driver(self) -> RunDriver | None: ...


class BranchFlow(QObject):
    def __init__(self, window: MainWindow, notices: Notices, host: BranchHost) -> None:
        super().__init__(window)
        self.window = window
        self.notices = notices
        self.host = host
        self._editing: _Editing | None = None
        # Where the shown conversation's branches part: its entry -> the versions, in order.
        self._versions: dict[str, list[str]] = {}
        # asked before a branch rewinds the conversation: restore the files too? (False: cancel)
        self.rewind_files = _files_stay
        window.transcript.branch_action.connect(self.on_branch_action)
        window.transcript.action_requested.connect(self._on_row_action)
        window.regenerate_requested.connect(self.regenerate_last)
        window.composer.edit_cancelled.connect(self.cancel_edit)
        host.conversation_loaded.connect(self._on_conversation_loaded)
        host.turns.finished.connect(self._on_turn_finished)  # a branch's first own entries

    # --- the actions ------------------------------------------------------------------------------

    def on_branch_action(self, entry_id: str, action: str) -> None:
        """"fork", "edit", "regenerate", "regenerate:MODE" or "regenerate@PROVIDER"."""
        verb, _, provider = action.partition("@")
        verb, _, mode = verb.partition(":")
        if verb == "fork":
            self.fork(entry_id)
        elif verb == "edit":
            self.edit(entry_id)
        elif verb == "regenerate":
            self.regenerate(entry_id, "agent" if mode == "agent" else "chat" if mode else None,
                            provider or None)

    def fork(self, entry_id: str | None, before: bool = False) -> str | None:
        """Make the branch and show it; its id, or None (and why, on screen) when none was
        made."""
        project, conv = self.host.project, self.host.current_id
        if project is None or conv is None or project.read_only:
            return None
        if self.host.busy():
            self.notices.warning("A branch is made once the answer has ended (or is stopped).")
            return None
        if not self.rewind_files(conv, entry_id, before):
            return None
        with self.notices.saving("No branch was made") as made:
            meta = project.conversations.fork(conv, entry_id, before=before)
        if not made.ok:
            return None
        self.window.conversations.set_rows(project.conversations.list(), meta.id)
        self.host.show_conversation(meta.id)
        self.notices.info(f"A new branch, “{meta.title}”: the conversation it came from is "
                          "unchanged (‹ › at the point where they part switch between them).")
        return meta.id

    def edit(self, entry_id: str) -> None:
        """Put one of the user's messages in the message box (its typed text; its attachments
        as chips); sending it branches before it. The draft waits aside until then."""
        entry = self._entry(entry_id)
        conv = self.host.current_id
        if entry is None or entry.role != "user" or conv is None:
            return
        attachments = self.host.turns.attachments
        text, attached = attachments.taken_apart(entry)
        aside = attachments.swap(conv, attached)
        if self._editing is None:
            self._editing = _Editing(conv, entry_id, self.window.composer.text(), aside)
        else:
            self._editing = replace(self._editing, conv=conv, entry=entry_id)
        self.window.composer.set_text(text)
        self.window.composer.set_editing(EDITING_NOTE)
        self.window.composer.editor.setFocus()

    def cancel_edit(self) -> None:
        if self._editing is None:
            return
        editing, self._editing = self._editing, None
        self.window.composer.set_editing(None)
        self._draft_back(editing)

    def _draft_back(self, editing: _Editing) -> list[Attachment]:
        """The draft (text and chips) back in its conversation's box; the edit's chips."""
        self.window.composer.set_text(editing.draft)
        return self.host.turns.attachments.swap(editing.conv, editing.attached)

    def editing_entry(self) -> str | None:
        """The entry being edited in the conversation shown: the branch is made before it, so
        the meter and the Inspector count what comes before it (and the draft)."""
        if self._editing is None or self._editing.conv != self.host.current_id:
            return None
        return self._editing.entry

    def send_edited(self, text: str) -> bool:
        """When a message is being edited: branch before it and send `text` there (True). False
        when no edit is under way (the caller sends as usual)."""
        editing = self._editing
        if editing is None:
            return False
        if editing.conv != self.host.current_id:
            self.cancel_edit()
            return False
        attachments = self.host.turns.attachments
        # The conversation left keeps its own draft, never the text sent in the branch.
        self._editing = None
        edited = self._draft_back(editing)
        branch = self.fork(editing.entry, before=True)
        if branch is None:  # why is on screen; the edit stays in the box
            self._editing = editing
            attachments.swap(editing.conv, edited)
            self.window.composer.set_text(text)
            return True
        self.window.composer.set_editing(None)
        self.window.composer.set_text(text)  # what the user wrote, until it has left
        attachments.swap(branch, edited)
        self.host.turns.send(text)
        return True

    def regenerate(self, entry_id: str, mode: Mode | None = None,
                   provider: str | None = None) -> None:
        """Ask again for the answer `entry_id` belongs to: a branch at the entry its request
        ended in (the user's message, the results of the tool calls it followed, which come
        along whole, or in a run the answer it followed), sent again there (in `mode`, with a
        saved `provider`'s model, when given). In Run mode the request carries what the run
        would ask with there: its nudge, after an answer that did not complete the step."""
        asked = asked_at(self._messages(), entry_id)
        if asked is None:
            self.notices.warning("There is no message of yours before this answer to ask again.")
            return
        if self.fork(asked.id) is None:
            return
        if mode is not None:
            self.host.set_mode(mode)
        engine = self.host.engine
        if engine is None:
            return
        other: LLMSettings | None = None
        if provider is not None:
            try:
                other = self.host.settings_flow.llm_settings(provider)
            except SettingsError as e:
                self.notices.warning(f"Not regenerated: {e}.")
                return

        def again(conv: str, settings: LLMSettings, options: TurnOptions
                  ) -> AsyncIterator[EngineEvent]:
            driver = self.host.run_driver() if options.mode == "run" else None
            nudge = driver.nudge(conv) if driver is not None else None
            return engine.proceed(conv, other or settings, options, nudge)

        self.host.turns.start_run(again)

    def regenerate_last(self) -> None:
        last = next((m for m in reversed(self._messages())
                     if m.role in ("assistant", "tool") and m.kind in ("message", "error")), None)
        if last is None:
            self.notices.warning("There is no answer to regenerate yet.")
            return
        self.regenerate(last.id)

    # --- versions ---------------------------------------------------------------------------------

    def _on_conversation_loaded(self, conv_id: str) -> None:
        self.window.transcript.regenerate_with = self.host.settings_flow.other_providers()
        if self._editing is not None and self._editing.conv != conv_id:
            editing, self._editing = self._editing, None
            self.window.composer.set_editing(None)
            self.host.turns.attachments.swap(editing.conv, editing.attached)  # its draft's
        self.show_versions(conv_id)

    def _on_turn_finished(self, _status: str) -> None:
        if self.host.current_id is not None:
            self.show_versions(self.host.current_id)

    def show_versions(self, conv_id: str) -> None:
        """Mark the rows where this conversation and its branches (or its siblings) part."""
        project = self.host.project
        self._versions = {}
        if project is None:
            return
        rows = {r.id: r for r in project.conversations.list()}
        me = rows.get(conv_id)
        groups = {key: ms for key, ms in _groups(rows).items() if conv_id in ms}
        messages = self._messages() if groups else []
        position = {m.id: i for i, m in enumerate(messages)}
        for (_origin, at), members in groups.items():
            start = position[at] + 1 if at in position else (0 if not at else None)
            if start is None or me is None:
                continue
            entry = next((m for m in messages[start:] if m.kind in ("message", "error")
                          and m.role != "system"), None)
            if entry is not None:
                self._versions[entry.id] = members
        self.window.transcript_model.set_versions(
            {e: (ms.index(conv_id) + 1, len(ms)) for e, ms in self._versions.items()})

    def _on_row_action(self, index: int, action: str) -> None:
        if not action.startswith("version_") or self.host.current_id is None:
            return
        row = self.window.transcript_model.row(index)
        members = self._versions.get(row.message.id if row.message is not None else "")
        if not members:
            return
        n = members.index(self.host.current_id)
        if action == "version_list":
            self._choose(members, n)
            return
        target = members[max(0, min(len(members) - 1, n + (1 if action == "version_next"
                                                            else -1)))]
        self.open_version(target, members)

    def _choose(self, members: list[str], current: int) -> None:
        project = self.host.project
        if project is None:
            return
        titles = {r.id: r.title for r in project.conversations.list()}
        menu = QMenu(self.window)
        for n, conv in enumerate(members):
            action = menu.addAction(f"{n + 1}. {titles.get(conv, conv[:8])}",
                                    partial(self.open_version, conv, members))
            action.setCheckable(True)
            action.setChecked(n == current)
        menu.exec(QCursor.pos())

    def open_version(self, conv_id: str, members: list[str]) -> None:
        """Show another version, with its row where branches part at the same place on screen."""
        view = self.window.transcript
        mine = next((e for e, ms in self._versions.items() if ms == members), None)
        y = _row_y(self.window, mine)
        if not self.window.conversations.select(conv_id):
            self.host.show_conversation(conv_id)
        theirs = next((e for e, ms in self._versions.items() if ms == members), None)
        if y is not None and theirs is not None:
            QTimer.singleShot(0, partial(_put_row_at, self.window, theirs, y))
        view.setFocus()

    # --- reading ----------------------------------------------------------------------------------

    def _messages(self) -> list[ConversationMessage]:
        project, conv = self.host.project, self.host.current_id
        if project is None or conv is None:
            return []
        return project.conversations.load(conv).messages

    def _entry(self, entry_id: str) -> ConversationMessage | None:
        return next((m for m in self._messages() if m.id == entry_id), None)


def _groups(rows: dict[str, ConversationSummary]) -> dict[tuple[str, str], list[str]]:
    """Versions of each other: (origin, last shared entry) -> the origin (when it still exists)
    and the branches made there, oldest first."""
    out: dict[tuple[str, str], list[ConversationSummary]] = {}
    for r in rows.values():
        if r.branch_of is not None:
            out.setdefault((r.branch_of, r.branch_at or ""), []).append(r)
    return {(origin, at): ([origin] if origin in rows else []) +
            [r.id for r in sorted(forks, key=lambda r: (r.created_at, r.id))]
            for (origin, at), forks in out.items()}


def _index_of(window: MainWindow, entry: str | None) -> int | None:
    model = window.transcript_model
    return next((i for i, r in enumerate(model.rows())
                 if r.message is not None and r.message.id == entry), None)


def _row_y(window: MainWindow, entry: str | None) -> int | None:
    """Where the entry's row starts on screen (global: a notice above the transcript may come or
    go in between)."""
    i = _index_of(window, entry)
    if i is None:
        return None
    view = window.transcript
    top = view.visualRect(view.model().index(i, 0)).top()
    return view.viewport().mapToGlobal(QPoint(0, top)).y()


def _put_row_at(window: MainWindow, entry: str, y: int) -> None:
    i = _index_of(window, entry)
    if i is None:
        return
    QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest.value)  # the notice's change
    view = window.transcript
    index = view.model().index(i, 0)
    view.scrollTo(index)
    top = view.viewport().mapToGlobal(QPoint(0, view.visualRect(index).top())).y()
    bar = view.verticalScrollBar()
    bar.setValue(bar.value() + top - y)
    view.setCurrentIndex(index)


def _files_stay(conv: str, entry: str | None, before: bool) -> bool:
    """Until the app wires checkpoints in: a branch leaves the files as they are."""
    del conv, entry, before
    return True

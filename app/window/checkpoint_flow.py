"""The window's checkpoints: the Changed files panel kept up to date with the current
conversation's turns that changed files, a turn's diff, and Undo / Redo (asking first when the
user changed any of those files since). The work is core's (core.checkpoints)."""

from __future__ import annotations

import time
from typing import Protocol

from PySide6.QtCore import QObject, QTimer, SignalInstance

from app.window.notices import Notices
from core.checkpoints.store import Store
from core.checkpoints.views import (
    GitFailed,
    GitMissing,
    NothingToRestore,
    RestoreConflict,
    TurnFiles,
    file_diffs,
    redo,
    turn_diff,
    turns,
    undo,
)
from core.store.project import Project
from ui.changes_panel import (
    CANCEL_BRANCH,
    FILES_TOO,
    DiffViewer,
    FileItem,
    TurnItem,
    ask_rewind,
)
from ui.main_window import MainWindow

RESTORE_ANYWAY = "Restore anyway"
CANCEL = "Cancel"


class CheckpointHost(Protocol):
    project: Project | None
    current_id: str | None
    turn_finished: SignalInstance
    conversation_loaded: SignalInstance

    def busy(self) -> bool: ...


class CheckpointFlow(QObject):
    def __init__(self, window: MainWindow, notices: Notices, host: CheckpointHost) -> None:
        super().__init__(window)
        self.window = window
        self.notices = notices
        self.host = host
        self.panel = window.changes_panel
        self.viewer: DiffViewer | None = None
        self._turns: dict[str, TurnFiles] = {}
        self._seen: set[tuple[str | None, str]] = set()
        self.panel.open_requested.connect(self.open_turn)
        host.turn_finished.connect(lambda _status: QTimer.singleShot(0, self.after_turn))
        host.conversation_loaded.connect(lambda _conv: self.refresh())

    def _store(self) -> Store | None:
        project = self.host.project
        if project is None or project.read_only or self.host.current_id is None:
            return None
        return Store(project.root, project.state)

    def refresh(self) -> list[TurnFiles]:
        """The panel shows the current conversation's turns that changed files (reading them
        also finishes a restore a crash interrupted)."""
        store = self._store()
        found: list[TurnFiles] = []
        note = ""
        if store is not None and self.host.current_id is not None:
            try:
                found = turns(store, self.host.current_id)
            except GitMissing as e:
                note = str(e)
            except (GitFailed, OSError) as e:
                note = f"The checkpoints cannot be read: {e}"
        self._turns = {t.entry: t for t in found}
        self.panel.show_turns([self._item(t) for t in found], note)
        return found

    def after_turn(self) -> None:
        """A turn that changed files brings the panel up, once."""
        found = self.refresh()
        fresh = [t for t in found if (self.host.current_id, t.entry) not in self._seen]
        self._seen.update((self.host.current_id, t.entry) for t in found)
        if fresh and not fresh[-1].undone:
            self.panel.show()
            self.notices.info(f"The agent changed {fresh[-1].count} file"
                              f"{'s' if fresh[-1].count != 1 else ''}: see Changed files to "
                              "review or undo them.")

    def _item(self, turn: TurnFiles) -> TurnItem:
        title = ""
        for row in self.window.transcript_model.rows():
            if row.message is not None and row.message.id == turn.entry:
                title = row.message.text().strip().splitlines()[0][:80] if \
                    row.message.text().strip() else ""
                break
        when = time.strftime("%H:%M", time.localtime(turn.time))
        return TurnItem(turn.entry, title or turn.entry[:12], when, turn.count, turn.undone,
                        len(turn.skipped))

    def open_turn(self, entry: str) -> DiffViewer | None:
        """The turn's diff, per file, with Undo / Redo."""
        store, turn = self._store(), self._turns.get(entry)
        if store is None or turn is None or self.host.current_id is None:
            return None
        try:
            text = turn_diff(store, self.host.current_id, entry)
        except (GitFailed, GitMissing, NothingToRestore, OSError) as e:
            self.notices.error(f"The changes cannot be shown: {e}")
            return None
        files = [FileItem(f.path, f.status, f.added, f.removed, f.lines)
                 for f in file_diffs(text)]
        if self.viewer is not None:
            self.viewer.close()
        self.viewer = DiffViewer(self.window, self._item(turn), files)
        self.viewer.undo_requested.connect(lambda e: self.restore(e, "undo"))
        self.viewer.redo_requested.connect(lambda e: self.restore(e, "redo"))
        self.viewer.show()
        return self.viewer

    def restore(self, entry: str, how: str, force: bool = False) -> None:
        """Undo (back to before the turn) or redo (take the undo back); over files the user
        changed since, only once they say so."""
        store, conv = self._store(), self.host.current_id
        if store is None or conv is None:
            return
        if self.host.busy():
            self.notices.warning("A turn is running: wait for it to end before undoing files.")
            return
        try:
            changed = (undo if how == "undo" else redo)(store, conv, entry, force)
        except RestoreConflict as e:
            self.window.ask(
                "You changed some of these files since the agent's turn.",
                "Restoring puts them back too, and your edits go (they are kept in a "
                "checkpoint, so Redo brings them back):\n" + "\n".join(e.paths),
                (RESTORE_ANYWAY, CANCEL),
                lambda choice: self.restore(entry, how, True) if choice == RESTORE_ANYWAY
                else None, safe_default=True)
            return
        except (GitFailed, GitMissing, NothingToRestore, OSError) as e:
            self.notices.error(f"Nothing was restored: {e}")
            return
        done = "Undone" if how == "undo" else "Redone"
        self.notices.info(f"{done}: {len(changed)} file{'s' if len(changed) != 1 else ''} "
                          "restored.")
        self.refresh()
        if self.viewer is not None and entry in self._turns:
            self.open_turn(entry)

    def rewind_files(self, conv: str, entry: str | None, before: bool) -> bool:
        """Before a branch (edit & resend, regenerate, fork) that leaves out turns which changed
        files: ask whether to restore the files to that point too. False: the user cancelled,
        or the files could not be restored (why is on screen): no branch."""
        store, project = self._store(), self.host.project
        if store is None or project is None or entry is None:
            return True
        try:
            found = [t for t in turns(store, conv) if not t.undone]
        except (GitFailed, GitMissing, OSError):
            return True  # nothing to offer
        ids = [m.id for m in project.conversations.load(conv).messages]
        if entry not in ids:
            return True
        kept = ids[:ids.index(entry) + (0 if before else 1)]
        last = kept[-1] if kept else None  # a kept question whose answer goes: its turn goes
        dropped = [t for t in found if t.entry not in kept or t.entry == last]
        if not dropped:
            return True
        paths = sorted({p for t in dropped for p in (*t.added, *t.modified, *t.deleted)})
        choice = ask_rewind(
            self.window, f"The agent changed {len(paths)} file{'s' if len(paths) != 1 else ''} "
            "after this point. Restore the files to this point too?",
            "Files too: they are put back as they were then (undoable from Changed files). "
            "Conversation only: the files stay as they are now.\n\n" + "\n".join(paths[:20]))
        if choice == CANCEL_BRANCH:
            return False
        if choice != FILES_TOO:
            return True
        try:
            undo(store, conv, dropped[0].entry)
        except RestoreConflict as e:
            self.notices.warning("No branch was made: you changed some of these files since "
                                 "the agent's turn (" + ", ".join(e.paths) + "). Undo them from "
                                 "Changed files (it asks), or choose Conversation only.")
            return False
        except (GitFailed, GitMissing, NothingToRestore, OSError) as e:
            self.notices.error(f"No branch was made: the files could not be restored ({e}).")
            return False
        return True

"""Conversations inside a project: metadata, the append-only log, and the index cache.

Layout under `.workbench/conversations/`:
    index.json                 list of summaries, a cache rebuilt from the folders when stale
    <id>/conversation.json     ConversationMeta, replaced atomically
    <id>/messages.jsonl        one ConversationMessage per line, appended durably
Deleting moves a conversation's folder to `.workbench/trash/`, so a slip is never final.
"""

from __future__ import annotations

import builtins
import hmac
import json
import logging
import os
import shutil
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core import confined
from core.model import (
    ConversationMessage,
    Mode,
    apply_annotations,
    new_id,
)
from core.redact import redact
from core.store.attachment_refs import trash_unused
from core.store.branches import (
    Cut,
    answered_upstream,
    branch_title,
    carried_over,
    fill_branch,
    find_cut,
    origin_of,
)
from core.store.errors import (
    ConversationNotFound,
    ConversationUnreadable,
    ReadOnlyError,
    StoreError,
    StoreWriteError,
    describe_os_error,
)
from core.store.fileio import (
    append_durably,
    atomic_write_json,
    atomic_write_json_in_pieces,
    read_json,
    timestamp_tag,
    write_staged,
)
from core.store.log import (
    MAX_LOG,
    encode_line,
    ensure_clean_tail,
    read_log,
    without_lone_surrogates,
)
from core.store.meta import DEFAULT_TITLE as DEFAULT_TITLE  # their home is core.store.meta
from core.store.meta import ConversationMeta as ConversationMeta
from core.store.meta import ConversationSummary as ConversationSummary
from core.store.partial import read_sidecar, recovered_entry, sidecar_text
from core.store.search_index import SearchIndex, searchable
from core.store.tally import kept, tally

LOADED_CACHE = 2  # conversations kept parsed in memory (the open one and the last)
PARTIAL_FILE = "streaming.partial.json"
VIEW_FILE = "view.json"  # the kept compaction (core.context.view): a cache
IMPORTING_PREFIX = ".importing-"
PROBLEMS_KEPT = 200


@dataclass
class LoadedConversation:
    """A conversation as read from disk.

    Attributes:
        problems: what was found and repaired or skipped, one sentence each, for the user.
        pending_partial: in a read-only view, the text of an answer that was arriving when an
            app closed and that is not yet an entry (it becomes one when the project is opened
            for writing); None when there is none.
    """

    meta: ConversationMeta
    messages: list[ConversationMessage]
    problems: list[str] = field(default_factory=list)
    pending_partial: str | None = None


log = logging.getLogger(__name__)

class ConversationStore:
    """All conversations of one project.

    Attributes:
        root: the `conversations/` folder.
        read_only_reason: None when writable; otherwise the sentence to show the user.
    """

    def __init__(self, root: Path, trash: Path, read_only_reason: str | None,
                 lost: Callable[[], str | None] | None = None) -> None:
        """`lost()`: why this process no longer holds the project (checked before each
        write; from then on the store is read-only), None while it does."""
        self.root = root
        self._lost = lost
        self.trash = trash
        self.read_only_reason = read_only_reason
        self._clean_tails: set[str] = set()
        # A turn appends on the engine's thread while the window reads: loading may repair
        # (rewrite) a log, so reads and writes of the files take turns.
        self._lock = threading.RLock()
        self._streaming: set[str] = set()  # conversations with a live turn in this process
        self._loaded: OrderedDict[
            str, tuple[tuple[int, int], builtins.list[ConversationMessage]]] = OrderedDict()
        # What was repaired or skipped, for whoever shows it (see drain_problems); bounded so
        # a process that never drains does not grow.
        self._problems: deque[tuple[str, str]] = deque(maxlen=PROBLEMS_KEPT)
        self._index = SearchIndex()
        # The list's rows as last made (the index file is read once per process) and the one
        # thread that writes the file: a cache, never worth a stall of the window's thread
        # (a rename can wait behind another thread's fsync).
        self._rows: builtins.list[ConversationSummary] | None = None
        self._index_writer: ThreadPoolExecutor | None = None
        # Seals "allow the network" as the app's own (core.approval_seal); without it no
        # conversation's network switch is honoured.
        self.network_seal: Callable[[str], str] | None = None

    # --- problems found on the way -------------------------------------------------------------

    def drain_problems(self, conv_id: str | None = None) -> builtins.list[str]:
        """The problems found since the last drain, oldest first, each one sentence, and forget
        them: whatever call found them (a torn or corrupt line quarantined by `load` or
        `append_many`, duplicate lines skipped, an answer recovered after a crash by `load`,
        `append_many` or `write_partial`, a sidecar that could not be removed). With `conv_id`,
        only that conversation's (the others stay queued).

        The call that found a problem also returns it (`append_many`'s list,
        `LoadedConversation.problems`); a caller shows either those or these, not both. The
        queue keeps the last PROBLEMS_KEPT sentences.
        """
        with self._lock:
            if conv_id is None:
                out = [text for _, text in self._problems]
                self._problems.clear()
                return out
            out = [text for cid, text in self._problems if cid == conv_id]
            rest = [(cid, text) for cid, text in self._problems if cid != conv_id]
            self._problems.clear()
            self._problems.extend(rest)
            return out

    def _note(self, conv_id: str, *texts: str) -> None:
        for text in texts:
            self._problems.append((conv_id, text))

    # --- reading -------------------------------------------------------------------------------

    def list(self) -> builtins.list[ConversationSummary]:
        """Summaries, most recently active first; refreshes stale index rows from the folders."""
        with self._lock:
            known = self._rows if self._rows is not None else self._read_index()
            cached = {s.id: s for s in known}
            fresh: builtins.list[ConversationSummary] = []
            changed = False
            for entry in sorted(self.root.iterdir()) if self.root.is_dir() else []:
                if entry.name.startswith(".") or not entry.is_dir() or \
                        not (entry / "conversation.json").exists():
                    continue
                stamp = _stamp(entry)
                row = cached.get(entry.name)
                if row is None or row.stamp != stamp or row.cost is None:
                    row = self._summarize(entry, stamp, row)
                    if row is None:
                        continue
                    changed = True
                fresh.append(row)
            if changed or len(fresh) != len(cached):
                self._write_index(fresh)
            self._rows = list(fresh)
            fresh.sort(key=lambda s: s.updated_at, reverse=True)
            return fresh

    def resolve(self, id_or_prefix: str) -> str:
        """The full id for an id or a unique prefix of one (at least 4 characters)."""
        self._dir(id_or_prefix)  # a path, or a name that cannot be an id, is refused here
        if (self.root / id_or_prefix / "conversation.json").is_file():
            return id_or_prefix
        if len(id_or_prefix) >= 4 and self.root.is_dir():
            hits = [p.name for p in self.root.iterdir() if p.name.startswith(id_or_prefix)
                    and (p / "conversation.json").is_file()]
            if len(hits) == 1:
                return hits[0]
            if len(hits) > 1:
                raise ConversationNotFound(
                    f"{id_or_prefix!r} matches {len(hits)} conversations; give more of the id"
                )
        raise ConversationNotFound(f"no conversation with id {id_or_prefix!r} in this project")

    def meta(self, conv_id: str) -> ConversationMeta:
        return self.meta_and_problems(conv_id)[0]

    def meta_and_problems(self, conv_id: str) -> tuple[ConversationMeta, builtins.list[str]]:
        """The conversation's metadata, keeping every valid field of `conversation.json`; a
        field that is invalid takes its default and is reported (never replaced by an error
        message). The folder's name is the id, whatever the file says."""
        path = self._dir(conv_id) / "conversation.json"
        try:
            data = read_json(path)
        except FileNotFoundError:
            raise ConversationNotFound(f"no conversation with id {conv_id!r}") from None
        except (OSError, ValueError) as e:
            reason = "not valid JSON" if isinstance(e, ValueError) else describe_os_error(e)
            return ConversationMeta(id=conv_id), [
                f"conversation.json could not be read ({reason}); its title and settings are "
                "shown as defaults and the file is kept as it is until you change one"]
        if not isinstance(data, dict):
            return ConversationMeta(id=conv_id), [
                "conversation.json is not a JSON object; defaults are shown"]
        problems: builtins.list[str] = []
        data = {**data, "id": conv_id}
        for _ in range(len(data) + 1):
            try:
                return ConversationMeta.model_validate(data), problems
            except ValidationError as e:
                bad = {str(err["loc"][0]) for err in e.errors() if err.get("loc")}
                if not bad or not bad & data.keys():
                    break
                for key in sorted(bad & data.keys()):
                    problems.append(f"conversation.json: {key!r} is invalid "
                                    f"({_short(data[key])}); the default is used")
                    del data[key]
        return ConversationMeta(id=conv_id), problems

    def load(self, conv_id: str) -> LoadedConversation:
        with self._lock:
            meta, problems = self.meta_and_problems(conv_id)
            path = self._dir(conv_id) / "messages.jsonl"
            recovered = self._recover_partial(conv_id) if self.writable else []
            pending = None if self.writable else self.pending_partial(conv_id)
            if pending is not None:
                problems.append(
                    f"an answer that was arriving when the app closed is pending "
                    f"({len(pending):,} characters); it becomes an entry when the project is "
                    "opened for writing")
            cached = self._loaded.get(conv_id)
            if cached is not None and cached[0] == _file_stamp(path):
                self._note(conv_id, *recovered)
                return LoadedConversation(meta, list(cached[1]), problems + recovered, pending)
            try:
                result = read_log(path, repair=self.writable)
            except OSError as e:
                raise ConversationUnreadable(
                    f"The messages of conversation {conv_id[:8]}… cannot be read "
                    f"({path.name}: {describe_os_error(e)}).") from e
            if self.writable:
                self._clean_tails.add(conv_id)
            result.messages = apply_annotations(result.messages)
            self._remember(conv_id, result.messages)
            self._note(conv_id, *result.problems)
            problems = list(result.problems) + problems
            problems += recovered
            self._note(conv_id, *recovered)
            return LoadedConversation(meta, list(result.messages), problems, pending)

    # --- the kept compaction (a cache of the context builder's) ----------------------------------

    def read_view(self, conv_id: str) -> dict[str, Any] | None:
        """The compaction kept for the conversation's requests (see core.context.view), or
        None when there is none or it cannot be read: it is rebuilt from the log then."""
        try:
            data = read_json(self._dir(conv_id) / VIEW_FILE)
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def write_view(self, conv_id: str, data: dict[str, Any] | None) -> None:
        """Keep (or with None, forget) the conversation's kept compaction. A cache: a write
        that fails is only a later rebuild, never an error; a read-only view writes nothing."""
        if self.read_only_reason is not None:
            return
        path = self._dir(conv_id) / VIEW_FILE
        try:
            if data is None:
                path.unlink(missing_ok=True)
            else:
                # in pieces: thousands of entries, while the window streams an answer
                atomic_write_json_in_pieces(path, data, durable=False)
        except OSError:
            pass

    # --- the answer being received (crash recovery) ----------------------------------------------

    def write_partial(self, conv_id: str, state: dict[str, Any]) -> None:
        """Keep the text of the answer being streamed on disk (called about once a second)."""
        with self._lock:
            self._check_writable()
            if conv_id not in self._streaming:
                # an older crash's answer first, so it keeps its place
                self._note(conv_id, *self._recover_partial(conv_id))
                self._streaming.add(conv_id)
            atomic_write_json(self._dir(conv_id) / PARTIAL_FILE, state)

    def clear_partial(self, conv_id: str) -> None:
        """The answer became a log entry (or never started): drop its sidecar.

        Raises:
            ReadOnlyError: in a read-only view, whose sidecars belong to the writer.
        """
        with self._lock:  # unlinked before it stops being ours: no reader may recover it
            self._check_writable()
            try:
                (self._dir(conv_id) / PARTIAL_FILE).unlink(missing_ok=True)
            except OSError as e:
                # The entry is written; a stale sidecar would come back as a duplicate.
                self._note(conv_id, f"the crash-recovery copy of the answer could not be "
                                    f"removed ({describe_os_error(e)}); it may come back as a "
                                    "duplicate entry when the conversation is next opened")
            self._streaming.discard(conv_id)

    def pending_partial(self, conv_id: str) -> str | None:
        """The text of an orphaned answer sidecar, if there is one (for read-only views)."""
        state = read_sidecar(self._dir(conv_id) / PARTIAL_FILE)
        return None if state is None else sidecar_text(state)

    def _recover_partial(self, conv_id: str) -> builtins.list[str]:
        """A sidecar no live turn owns is an answer the app was receiving when it closed:
        turn it into an error entry with the text, so nothing shown on screen is lost.
        Runs before anything else is appended, so the entry takes its place in order.
        Returns what was done (repairs on the way, then the recovery), one sentence each."""
        sidecar = self._dir(conv_id) / PARTIAL_FILE
        if conv_id in self._streaming or not sidecar.is_file():
            return []
        entry, text = recovered_entry(read_sidecar(sidecar) or {})
        found = self._append_now(conv_id, [entry])
        try:
            sidecar.unlink(missing_ok=True)
        except OSError:
            pass
        return [*found, f"recovered {len(text):,} characters of an answer that was arriving "
                        "when the app closed"]

    def _remember(self, conv_id: str, messages: builtins.list[ConversationMessage]) -> None:
        """Keep the most recently loaded conversations in memory, keyed by the file's stamp, so
        the next turn (or the window switching back) does not re-read and re-validate them."""
        path = self._dir(conv_id) / "messages.jsonl"
        self._loaded[conv_id] = (_file_stamp(path), list(messages))
        self._loaded.move_to_end(conv_id)
        while len(self._loaded) > LOADED_CACHE:
            self._loaded.popitem(last=False)

    def search(self, text: str) -> set[str]:
        """Ids of conversations whose title or any message's text contains `text`, ignoring
        case in every script (str.casefold). Only what a user reads is searched (message text,
        tool-call arguments, errors), never the JSON around it."""
        needle = text.strip().casefold()
        rows = self.list()
        if not needle:
            return {r.id for r in rows}
        hits = {r.id for r in rows if needle in r.title.casefold()}
        for row in rows:
            if row.id not in hits and self._mentions(row.id, needle):
                hits.add(row.id)
        return hits

    def _mentions(self, conv_id: str, needle: str) -> bool:
        if self.writable:
            try:
                return self._index.mentions(self.root / conv_id, needle)
            except OSError as e:
                log.warning("search index of %s unusable (%s); reading its log", conv_id, e)
        return self._log_mentions(conv_id, needle)

    def _log_mentions(self, conv_id: str, needle: str) -> bool:
        try:
            raw = confined.read(self.root / conv_id / "messages.jsonl", MAX_LOG, root=None)
        except OSError:
            return False
        # A cheap first look: in an all-ASCII log (the common case) case folding is plain
        # lower-casing, so a needle absent from the raw bytes is absent from the text too.
        # The needle is looked for as it is written inside a JSON string (quotes, backslashes
        # escaped).
        if needle.isascii() and raw.isascii() and \
                json.dumps(needle)[1:-1].encode() not in raw.lower():
            return False
        for line in raw.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and needle in searchable(entry).casefold():
                return True
        return False

    def message_count(self, conv_id: str, since: tuple[int, int] | None = None) -> int:
        """Entries of the conversation's log, annotations left out. `since`: (size, count) of
        an earlier reading of it; the log only grows, so only what was appended after that is
        read (a 10,000-entry log is tens of megabytes: the list recounts after every append)."""
        return self.tally(conv_id, None if since is None else (*since, 0.0))[0]

    def tally(self, conv_id: str, since: tuple[int, int, float] | None = None
              ) -> tuple[int, float]:
        """(entries, USD they cost) of the conversation's log (see core.store.tally)."""
        return tally(self._dir(conv_id) / "messages.jsonl", since)

    # --- writing -------------------------------------------------------------------------------

    @property
    def writable(self) -> bool:
        return self.read_only_reason is None

    def create(
        self, title: str | None = None, mode: Mode = "chat", model: str | None = None
    ) -> ConversationMeta:
        with self._lock:
            self._check_writable()
            meta = ConversationMeta(id=new_id(), title=_clean_title(title), mode=mode, model=model,
                                    titled="user" if title and title.strip() else None)
            folder = self.root / meta.id
            folder.mkdir(parents=True)
            (folder / "messages.jsonl").touch()
            self._write_meta(meta)
            return meta

    def update_meta(self, conv_id: str, **changes: Any) -> ConversationMeta:
        with self._lock:
            self._check_writable()
            if "title" in changes:
                changes["title"] = _clean_title(changes["title"])
            meta, problems = self.meta_and_problems(conv_id)
            if problems:  # what could not be read is kept beside, never silently replaced
                original = self._dir(conv_id) / "conversation.json"
                kept = original.with_name(f"conversation.json.bad-{timestamp_tag()}")
                try:
                    shutil.copy2(original, kept)
                except OSError as e:
                    raise StoreWriteError(
                        f"conversation.json of {conv_id[:8]}… cannot be read or kept aside "
                        f"({describe_os_error(e)}); nothing was changed.",
                        e.errno, describe_os_error(e)) from e
            if "allow_network" in changes:
                allowed = bool(changes["allow_network"]) and self.network_seal is not None
                changes["network_seal"] = self.network_seal(conv_id) if allowed and \
                    self.network_seal is not None else None
            meta = meta.model_copy(update=changes)
            self._write_meta(meta)
            return meta

    def network_allowed(self, meta: ConversationMeta) -> bool:
        """Commands in the conversation may use the network: the user said so in this app
        (a switch a project's file carries without the app's seal is not honoured)."""
        if not meta.allow_network or self.network_seal is None or meta.network_seal is None:
            return False
        return hmac.compare_digest(meta.network_seal, self.network_seal(meta.id))

    def import_conversation(self, title: str | None,
                            messages: Iterable[ConversationMessage]) -> ConversationMeta:
        """Create a conversation holding `messages`, all or nothing (`write_staged`)."""
        with self._lock:
            self._check_writable()
            meta = ConversationMeta(id=new_id(), title=_clean_title(title),
                                    titled="user" if title and title.strip() else None)

            def fill(folder: Path) -> None:
                append_durably(folder / "messages.jsonl",
                               b"".join(encode_line(m) for m in messages))
                atomic_write_json(folder / "conversation.json", meta.model_dump(mode="json"))

            write_staged(self.root / f"{IMPORTING_PREFIX}{meta.id}", self.root / meta.id, fill,
                         "import")
            return meta

    def fork(self, conv_id: str, entry_id: str | None, title: str | None = None,
             before: bool = False) -> ConversationMeta:
        """A branch of `conv_id`: its history up to and including `entry_id` (with `before`, up
        to just before it; None: none of it) and the pins, exclusions and summaries of that part
        (see core.store.branches). The parent is never written. Raises NoSuchEntry (no such
        entry) or StoreWriteError (not written: nothing was created)."""
        with self._lock:
            self._check_writable()
            parent = self.meta(conv_id)
            src = self._dir(conv_id) / "messages.jsonl"
            try:
                cut = Cut(0, "") if entry_id is None else find_cut(src, entry_id, before)
                extra = carried_over(src, cut)
                origin = origin_of(conv_id, parent, cut,
                                   lambda c: self._dir(c) / "messages.jsonl", self.meta)
            except OSError as e:
                raise ConversationUnreadable(
                    f"The messages of conversation {conv_id[:8]}… cannot be read "
                    f"({describe_os_error(e)}); nothing was forked.") from e
            named = bool(title and title.strip())
            meta = ConversationMeta(
                id=new_id(), title=_clean_title(title if named else self._branch_title(
                    origin, parent)),
                titled="user" if named else parent.titled,
                **parent.model_dump(include={"mode", "model", "context_window", "compaction",
                                             "agent", "allow_network"}),
                branch_of=origin, branch_at=cut.last_id)
            write_staged(self.root / f"{IMPORTING_PREFIX}{meta.id}", self.root / meta.id,
                         partial(fill_branch, src, cut, extra, self._dir(conv_id) / VIEW_FILE,
                                 meta.model_dump(mode="json")), "fork")
            return meta

    def grew_from(self, conv_id: str) -> builtins.list[str]:
        """The conversations `conv_id` grew from, nearest first: its parent, the parent's
        parent, … (as far as their metadata reads)."""
        chain: builtins.list[str] = []
        at = conv_id
        while True:
            try:
                up = self.meta(at).branch_of
            except StoreError:
                return chain
            if up is None or up == conv_id or up in chain:
                return chain
            chain.append(up)
            at = up

    def ran_upstream(self, conv_id: str, call_id: str) -> bool:
        """Whether a conversation `conv_id` grew from holds a result of the call `call_id`
        (the call ran there; the branch was cut without its result)."""
        try:
            meta = self.meta(conv_id)
        except StoreError:
            return False
        return answered_upstream(meta, call_id, lambda c: self._dir(c) / "messages.jsonl",
                                 self.meta)

    def _branch_title(self, origin: str, parent: ConversationMeta) -> str:
        """"<the origin's title> (branch n)" (an untitled one's stays untitled)."""
        if self.untitled(parent):
            return parent.title
        try:
            base = self.meta(origin).title
        except StoreError:
            base = parent.title
        rows = self.list()
        n = 1 + sum(1 for r in rows if r.branch_of == origin)
        taken = {r.title for r in rows}
        while branch_title(base, n) in taken:  # a branch of a branch: numbered after them all
            n += 1
        return branch_title(base, n)

    def remove_unfinished_imports(self) -> builtins.list[str]:
        """Remove what imports that were killed half-way left behind; returns their names."""
        if not self.writable or not self.root.is_dir():
            return []
        gone = []
        for entry in self.root.iterdir():
            if entry.name.startswith(IMPORTING_PREFIX) and entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
                gone.append(entry.name)
        return gone

    def rename(self, conv_id: str, title: str) -> ConversationMeta:
        return self.update_meta(conv_id, title=title, titled="user")

    @staticmethod
    def untitled(meta: ConversationMeta) -> bool:
        """Nobody has named the conversation yet (see core.titles)."""
        return meta.titled is None and meta.title == DEFAULT_TITLE

    def set_title_if_untitled(self, conv_id: str, title: str, by: str) -> bool:
        """Title the conversation, unless somebody named it meanwhile; True when it was."""
        with self._lock:
            if not self.untitled(self.meta(conv_id)):
                return False
            self.update_meta(conv_id, title=title, titled=by)
            return True

    def delete(self, conv_id: str) -> Path:
        """Move the conversation to the project's trash; returns where it went."""
        with self._lock:
            self._check_writable()
            src = self._dir(conv_id)
            if not src.is_dir():
                raise ConversationNotFound(f"no conversation with id {conv_id!r}")
            self.trash.mkdir(parents=True, exist_ok=True)
            dst = self.trash / f"{conv_id}-{timestamp_tag()}"
            shutil.move(str(src), dst)
            self._clean_tails.discard(conv_id)
            self._loaded.pop(conv_id, None)
            # the images only it used go with it (those others use stay)
            trash_unused(self.root.parent / "attachments", dst / "messages.jsonl",
                         [d / "messages.jsonl" for d in self.root.iterdir() if d.is_dir()],
                         dst / "attachments")
            self.list()  # drop the row from the index now
            return dst

    def discard_if_empty(self, conv_id: str) -> bool:
        """Remove a conversation that holds nothing yet (its first message could not be
        saved): an empty log and its details, nothing else. True when it went."""
        with self._lock:
            folder = self._dir(conv_id)
            try:
                names = {p.name for p in folder.iterdir()}
                empty = (folder / "messages.jsonl").stat().st_size == 0
            except OSError:
                return False
            if self.read_only_reason is not None or not empty or \
                    not names <= {"messages.jsonl", "conversation.json"}:
                return False
            shutil.rmtree(folder, ignore_errors=True)
            self._clean_tails.discard(conv_id)
            self._loaded.pop(conv_id, None)
            self.list()  # drop the row from the index now
            return not folder.exists()

    def append(self, conv_id: str, msg: ConversationMessage) -> builtins.list[str]:
        """Append one message durably. Returns problems found (and repaired) on the way."""
        return self.append_many(conv_id, [msg])

    def append_many(self, conv_id: str, msgs: Iterable[ConversationMessage]) -> builtins.list[str]:
        """Append messages in one write and one fsync; all or none are acknowledged.

        Returns the problems found (and repaired) on the way, one sentence each: a torn or
        corrupt line quarantined, an answer recovered from a crash (appended first, so it
        keeps its place before the new messages).

        Raises:
            StoreWriteError: the write failed (disk full, no permission); the log is as before.
        """
        with self._lock:
            self._check_writable()
            recovered = self._recover_partial(conv_id)
            self._note(conv_id, *recovered)
            found = self._append_now(conv_id, list(msgs))
            self._note(conv_id, *found)
            return recovered + found

    def _append_now(self, conv_id: str, msgs: builtins.list[ConversationMessage]
                    ) -> builtins.list[str]:
        path = self._dir(conv_id) / "messages.jsonl"
        if not path.parent.is_dir():
            raise ConversationNotFound(f"no conversation with id {conv_id!r}")
        problems: builtins.list[str] = []
        try:
            if conv_id not in self._clean_tails:
                repaired = ensure_clean_tail(path)
                if repaired is not None:
                    problems = repaired.problems
                self._clean_tails.add(conv_id)
            cached = self._loaded.get(conv_id)
            fresh = cached is not None and not problems and cached[0] == _file_stamp(path)
            data = b"".join(encode_line(m) for m in msgs)
            if data:
                append_durably(path, data)
        except OSError as e:
            self._loaded.pop(conv_id, None)
            raise StoreWriteError(
                f"Could not save to {path.parent.name[:8]}… ({describe_os_error(e)}); "
                "nothing was added to the conversation.", e.errno, describe_os_error(e)) from e
        if fresh and cached is not None:
            cached[1].extend(msgs)
            if any(m.kind == "annotation" for m in msgs):  # the targets change, not the lines
                cached[1][:] = apply_annotations(cached[1])
            self._loaded[conv_id] = (_file_stamp(path), cached[1])
        else:
            self._loaded.pop(conv_id, None)
        return problems

    # --- internals -----------------------------------------------------------------------------

    def _dir(self, conv_id: str) -> Path:
        if not conv_id or "/" in conv_id or "\\" in conv_id or conv_id.startswith("."):
            raise ConversationNotFound(f"{conv_id!r} is not a conversation id")
        return self.root / conv_id

    def _check_writable(self) -> None:
        if self.read_only_reason is None and self._lost is not None:
            self.read_only_reason = self._lost()
        if self.read_only_reason is not None:
            raise ReadOnlyError(self.read_only_reason)

    def _write_meta(self, meta: ConversationMeta) -> None:
        path = self._dir(meta.id) / "conversation.json"
        try:
            atomic_write_json(path, meta.model_dump(mode="json"))
        except OSError as e:
            raise StoreWriteError(
                f"Could not save the conversation's details in conversation.json "
                f"({describe_os_error(e)}).",
                e.errno, describe_os_error(e)) from e

    def _summarize(self, folder: Path, stamp: builtins.list[int],
                   before: ConversationSummary | None = None) -> ConversationSummary | None:
        """The list's row for a conversation; `before`: its row from an earlier stamp (the
        log's lines are then counted from where that one stopped, when the log grew)."""
        try:
            meta = self.meta(folder.name)
        except StoreError:
            return None
        since = None
        if before is not None and before.stamp and before.stamp[0] <= stamp[0] and \
                before.cost is not None:  # (a row from before costs were tallied: read all)
            since = (before.stamp[0], before.message_count, before.cost - before.title_cost)
        mtimes = [stamp[1], stamp[3]]
        updated = datetime.fromtimestamp(max(mtimes) / 1e9, UTC)
        count, cost = self.tally(folder.name, since)
        title = meta.title_request or {}
        title_cost = (kept(title.get("cost")) or 0.0) if isinstance(title, dict) else 0.0
        return ConversationSummary(
            id=meta.id,
            title=meta.title,
            created_at=meta.created_at,
            updated_at=max(updated, meta.created_at),
            mode=meta.mode,
            message_count=count,
            cost=cost + title_cost,
            title_cost=title_cost,
            branch_of=meta.branch_of,
            branch_at=meta.branch_at,
            stamp=stamp,
        )

    def _read_index(self) -> builtins.list[ConversationSummary]:
        try:
            rows = read_json(self.root / "index.json")
            return [ConversationSummary.model_validate(r) for r in rows]
        except (OSError, ValueError, TypeError, ValidationError):
            return []  # missing or unreadable: it is only a cache, rebuilt from the folders

    def _write_index(self, rows: builtins.list[ConversationSummary]) -> None:
        """Write the index (a cache, rebuilt from the folders when lost: no fsync) on a
        thread of its own, in order."""
        if not self.writable:
            return
        data = [r.model_dump(mode="json") for r in rows]
        path = self.root / "index.json"

        def write() -> None:
            try:
                atomic_write_json(path, data, durable=False)
            except OSError:
                pass  # a cache: the next list makes it again

        if self._index_writer is None:
            self._index_writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="index")
        self._index_writer.submit(write)

    def close(self) -> None:
        """Finish writing what is pending (the list's index)."""
        if self._index_writer is not None:
            self._index_writer.shutdown(wait=True)
            self._index_writer = None


def _file_stamp(path: Path) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return (0, 0)
    return (st.st_size, st.st_mtime_ns)


def _stamp(folder: Path) -> list[int]:
    out: list[int] = []
    for name in ("messages.jsonl", "conversation.json"):
        try:
            st = os.stat(folder / name)
            out += [st.st_size, st.st_mtime_ns]
        except FileNotFoundError:
            out += [0, 0]
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _clean_title(title: str | None) -> str:
    """A title as stored and shown: one line, no key (whoever named it: the user, the title
    model, an imported file)."""
    title = " ".join(redact(without_lone_surrogates(title or "")).split())
    return title[:200] if title else DEFAULT_TITLE

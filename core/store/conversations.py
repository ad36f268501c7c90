"""Conversations inside a project: metadata, the append-only log, and the index cache.

Layout under `.workbench/conversations/`:
    index.json                 list of summaries, a cache rebuilt from the folders when stale
    <id>/conversation.json     ConversationMeta, replaced atomically
    <id>/messages.jsonl        one ConversationMessage per line, appended durably
Deleting moves a conversation's folder to `.workbench/trash/`, so a slip is never final.
"""

from __future__ import annotations

import builtins
import json
import os
import shutil
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.model import ConversationMessage, ErrorInfo, Mode, new_id, utc_now
from core.store.errors import ConversationNotFound, ReadOnlyError, StoreError
from core.store.fileio import append_durably, atomic_write_json, read_json, timestamp_tag
from core.store.log import encode_line, ensure_clean_tail, read_log

DEFAULT_TITLE = "New conversation"
LOADED_CACHE = 4  # conversations kept parsed in memory
PARTIAL_FILE = "streaming.partial.json"


class ConversationMeta(BaseModel):
    """What `conversation.json` holds: everything about a conversation except its messages."""

    model_config = ConfigDict(extra="allow")
    id: str
    title: str = DEFAULT_TITLE
    created_at: datetime = Field(default_factory=utc_now)
    mode: Mode = "chat"
    model: str | None = None
    context_window: int | None = Field(default=None, gt=0)  # overrides the model's window
    compaction: dict[str, Any] = Field(default_factory=dict)


class ConversationSummary(BaseModel):
    """One row of `index.json` (and of the conversation list)."""

    id: str
    title: str
    created_at: datetime
    updated_at: datetime
    mode: Mode
    message_count: int
    # Size and mtime of the files the row was computed from: how staleness is detected.
    stamp: list[int] = Field(default_factory=list)


@dataclass
class LoadedConversation:
    meta: ConversationMeta
    messages: list[ConversationMessage]
    problems: list[str] = field(default_factory=list)


class ConversationStore:
    """All conversations of one project.

    Attributes:
        root: the `conversations/` folder.
        read_only_reason: None when writable; otherwise the sentence to show the user.
    """

    def __init__(self, root: Path, trash: Path, read_only_reason: str | None) -> None:
        self.root = root
        self.trash = trash
        self.read_only_reason = read_only_reason
        self._clean_tails: set[str] = set()
        # A turn appends on the engine's thread while the window reads: loading may repair
        # (rewrite) a log, so reads and writes of the files take turns.
        self._lock = threading.RLock()
        self._streaming: set[str] = set()  # conversations with a live turn in this process
        self._loaded: OrderedDict[str, tuple[tuple[int, int], builtins.list[ConversationMessage]]] = (
            OrderedDict())

    # --- reading -------------------------------------------------------------------------------

    def list(self) -> builtins.list[ConversationSummary]:
        """Summaries, most recently active first; refreshes stale index rows from the folders."""
        with self._lock:
            cached = {s.id: s for s in self._read_index()}
            fresh: builtins.list[ConversationSummary] = []
            changed = False
            for entry in sorted(self.root.iterdir()) if self.root.is_dir() else []:
                if not entry.is_dir() or not (entry / "conversation.json").exists():
                    continue
                stamp = _stamp(entry)
                row = cached.get(entry.name)
                if row is None or row.stamp != stamp:
                    row = self._summarize(entry, stamp)
                    if row is None:
                        continue
                    changed = True
                fresh.append(row)
            if changed or len(fresh) != len(cached):
                self._write_index(fresh)
            fresh.sort(key=lambda s: s.updated_at, reverse=True)
            return fresh

    def resolve(self, id_or_prefix: str) -> str:
        """The full id for an id or a unique prefix of one (at least 4 characters)."""
        if (self.root / id_or_prefix / "conversation.json").exists():
            return id_or_prefix
        if len(id_or_prefix) >= 4 and self.root.is_dir():
            hits = [p.name for p in self.root.iterdir() if p.name.startswith(id_or_prefix)]
            if len(hits) == 1:
                return hits[0]
            if len(hits) > 1:
                raise ConversationNotFound(
                    f"{id_or_prefix!r} matches {len(hits)} conversations; give more of the id"
                )
        raise ConversationNotFound(f"no conversation with id {id_or_prefix!r} in this project")

    def meta(self, conv_id: str) -> ConversationMeta:
        path = self._dir(conv_id) / "conversation.json"
        try:
            return ConversationMeta.model_validate(read_json(path))
        except FileNotFoundError:
            raise ConversationNotFound(f"no conversation with id {conv_id!r}") from None
        except (ValueError, ValidationError) as e:
            # Unreadable metadata must not hide the messages: fall back to defaults.
            return ConversationMeta(id=conv_id, title=f"{conv_id[:8]} (metadata unreadable: {e})")

    def load(self, conv_id: str) -> LoadedConversation:
        with self._lock:
            meta = self.meta(conv_id)
            path = self._dir(conv_id) / "messages.jsonl"
            recovered = self._recover_partial(conv_id) if self.writable else None
            cached = self._loaded.get(conv_id)
            if cached is not None and cached[0] == _file_stamp(path):
                return LoadedConversation(meta, list(cached[1]))
            result = read_log(path, repair=self.writable)
            if self.writable:
                self._clean_tails.add(conv_id)
            self._remember(conv_id, result.messages)
            problems = list(result.problems)
            if recovered:
                problems.append(recovered)
            return LoadedConversation(meta, list(result.messages), problems)

    # --- the answer being received (crash recovery) ----------------------------------------------

    def write_partial(self, conv_id: str, state: dict[str, Any]) -> None:
        """Keep the text of the answer being streamed on disk (called about once a second)."""
        self._streaming.add(conv_id)
        atomic_write_json(self._dir(conv_id) / PARTIAL_FILE, state)

    def clear_partial(self, conv_id: str) -> None:
        """The answer became a log entry (or never started): drop its sidecar."""
        self._streaming.discard(conv_id)
        (self._dir(conv_id) / PARTIAL_FILE).unlink(missing_ok=True)

    def _recover_partial(self, conv_id: str) -> str | None:
        """A sidecar no live turn owns is an answer the app was receiving when it closed:
        turn it into an error entry with the text, so nothing shown on screen is lost."""
        sidecar = self._dir(conv_id) / PARTIAL_FILE
        if conv_id in self._streaming or not sidecar.exists():
            return None
        try:
            state = read_json(sidecar)
            if not isinstance(state, dict):
                raise ValueError("not an object")
        except (OSError, ValueError):
            state = {}
        text = str(state.get("text") or "")
        entry = ConversationMessage(
            role="assistant", kind="error", content=text,
            error=ErrorInfo(
                type="app_closed", retryable=True, partial=bool(text),
                message="The app closed while this answer was arriving. The text received "
                        "is kept; Continue resumes it."),
            model=state.get("model"), mode=state.get("mode") or None,
            continues=state.get("continues"), status="aborted",
        )
        self.append_many(conv_id, [entry])
        sidecar.unlink(missing_ok=True)
        return (f"recovered {len(text):,} characters of an answer that was arriving when the "
                "app closed")

    def _remember(self, conv_id: str, messages: builtins.list[ConversationMessage]) -> None:
        """Keep the most recently loaded conversations in memory, keyed by the file's stamp, so
        the next turn (or the window switching back) does not re-read and re-validate them."""
        path = self._dir(conv_id) / "messages.jsonl"
        self._loaded[conv_id] = (_file_stamp(path), list(messages))
        self._loaded.move_to_end(conv_id)
        while len(self._loaded) > LOADED_CACHE:
            self._loaded.popitem(last=False)

    def search(self, text: str) -> set[str]:
        """Ids of conversations whose title or any message contains `text` (case-insensitive)."""
        needle = text.strip().lower()
        if not needle:
            return {r.id for r in self.list()}
        escaped = json.dumps(needle, ensure_ascii=False)[1:-1].encode("utf-8")
        hits: set[str] = set()
        for row in self.list():
            if needle in row.title.lower():
                hits.add(row.id)
                continue
            try:
                raw = (self.root / row.id / "messages.jsonl").read_bytes().lower()
            except OSError:
                continue
            if escaped in raw:
                hits.add(row.id)
        return hits

    def message_count(self, conv_id: str) -> int:
        path = self._dir(conv_id) / "messages.jsonl"
        try:
            return path.read_bytes().count(b"\n")
        except FileNotFoundError:
            return 0

    # --- writing -------------------------------------------------------------------------------

    @property
    def writable(self) -> bool:
        return self.read_only_reason is None

    def create(
        self, title: str | None = None, mode: Mode = "chat", model: str | None = None
    ) -> ConversationMeta:
        with self._lock:
            self._check_writable()
            meta = ConversationMeta(id=new_id(), title=_clean_title(title), mode=mode, model=model)
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
            meta = self.meta(conv_id).model_copy(update=changes)
            self._write_meta(meta)
            return meta

    def rename(self, conv_id: str, title: str) -> ConversationMeta:
        return self.update_meta(conv_id, title=title)

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
            self.list()  # drop the row from the index now
            return dst

    def append(self, conv_id: str, msg: ConversationMessage) -> builtins.list[str]:
        """Append one message durably. Returns problems found (and repaired) on the way."""
        return self.append_many(conv_id, [msg])

    def append_many(self, conv_id: str, msgs: Iterable[ConversationMessage]) -> builtins.list[str]:
        """Append messages in one write and one fsync; all or none are acknowledged."""
        with self._lock:
            self._check_writable()
            path = self._dir(conv_id) / "messages.jsonl"
            if not path.parent.is_dir():
                raise ConversationNotFound(f"no conversation with id {conv_id!r}")
            problems: builtins.list[str] = []
            if conv_id not in self._clean_tails:
                repaired = ensure_clean_tail(path)
                if repaired is not None:
                    problems = repaired.problems
                self._clean_tails.add(conv_id)
            msgs = list(msgs)
            cached = self._loaded.get(conv_id)
            fresh = cached is not None and not problems and cached[0] == _file_stamp(path)
            data = b"".join(encode_line(m) for m in msgs)
            if data:
                append_durably(path, data)
            if fresh and cached is not None:
                cached[1].extend(msgs)
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
        if self.read_only_reason is not None:
            raise ReadOnlyError(self.read_only_reason)

    def _write_meta(self, meta: ConversationMeta) -> None:
        atomic_write_json(self._dir(meta.id) / "conversation.json", meta.model_dump(mode="json"))

    def _summarize(self, folder: Path, stamp: builtins.list[int]) -> ConversationSummary | None:
        try:
            meta = self.meta(folder.name)
        except StoreError:
            return None
        mtimes = [stamp[1], stamp[3]]
        updated = datetime.fromtimestamp(max(mtimes) / 1e9, UTC)
        return ConversationSummary(
            id=meta.id,
            title=meta.title,
            created_at=meta.created_at,
            updated_at=max(updated, meta.created_at),
            mode=meta.mode,
            message_count=self.message_count(folder.name),
            stamp=stamp,
        )

    def _read_index(self) -> builtins.list[ConversationSummary]:
        try:
            rows = read_json(self.root / "index.json")
            return [ConversationSummary.model_validate(r) for r in rows]
        except (OSError, ValueError, TypeError, ValidationError):
            return []  # missing or unreadable: it is only a cache, rebuilt from the folders

    def _write_index(self, rows: builtins.list[ConversationSummary]) -> None:
        if self.writable:
            atomic_write_json(self.root / "index.json", [r.model_dump(mode="json") for r in rows])


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


def _clean_title(title: str | None) -> str:
    title = " ".join((title or "").split())
    return title[:200] if title else DEFAULT_TITLE

"""Import and export in the window: File → Import… (or files dropped on the list) reads an OpenAI
JSON file or a JSONL log on a thread of its own and adds it as a new conversation of the open
project (all or nothing: core.store's staged import); Conversation → Export… writes the open one
as OpenAI messages, the JSONL log or Markdown (core/interchange.py)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QObject, Signal

from app.window.notices import Notices
from core.attachments import AttachmentStore
from core.interchange import (
    ImportProblem,
    export_jsonl,
    export_markdown,
    export_openai,
    read_import,
)
from core.llm.tokens import TokenCounter
from core.settings import LLMSettings, SettingsError
from core.store.conversations import ConversationMeta
from core.store.errors import StoreError, describe_os_error
from core.store.fileio import atomic_write_bytes
from core.store.project import Project
from ui.main_window import MainWindow


class InterchangeHost(Protocol):
    project: Project | None
    current_id: str | None

    def llm_settings(self) -> LLMSettings: ...
    def show_conversation(self, conv_id: str) -> None: ...


class InterchangeFlow(QObject):
    _imported = Signal(object, str, int)  # the new conversation's meta (None: failed), why, count
    _exported = Signal(str, bool)  # what to say, whether it went well

    def __init__(self, window: MainWindow, notices: Notices, host: InterchangeHost) -> None:
        super().__init__(window)
        self.window = window
        self.notices = notices
        self.host = host
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="import")
        self._imported.connect(self._on_imported)
        self._exported.connect(self._on_exported)
        window.import_requested.connect(self.import_file)
        window.conversations.files_dropped.connect(self._on_files_dropped)
        window.export_requested.connect(self.export)

    # --- import ----------------------------------------------------------------------------------

    def _on_files_dropped(self, paths: list[str]) -> None:
        for path in paths:
            self.import_file(path)

    def import_file(self, path: str) -> None:
        project = self.host.project
        if project is None:
            return
        if project.read_only:
            self.notices.warning(f"Not imported: {project.read_only_reason}")
            return
        try:
            model = self.host.llm_settings().model
        except SettingsError:
            model = None
        store, counter = project.conversations, TokenCounter.for_model(model)
        kept = AttachmentStore.of(project.state)  # inline images: kept once, referred to
        self.notices.info(f"Importing {Path(path).name}…")

        def read_and_add() -> None:
            try:
                title, messages = read_import(Path(path))
                meta = store.import_conversation(
                    title, [counter.with_count(kept.extern(m)) for m in messages])
            except ImportProblem as e:
                self._imported.emit(None, f"{e}", 0)
            except (StoreError, OSError) as e:
                self._imported.emit(None, str(e) if isinstance(e, StoreError)
                                    else describe_os_error(e), 0)
            else:
                self._imported.emit(meta, "", len(messages))

        self._reader.submit(read_and_add)

    def _on_imported(self, meta: ConversationMeta | None, why: str, count: int) -> None:
        project = self.host.project
        if meta is None:
            self.notices.warning(f"Not imported: {why.rstrip('.')}. Nothing was created.")
            return
        if project is None:
            return
        self.window.conversations.set_rows(project.conversations.list(), meta.id)
        self.host.show_conversation(meta.id)
        noun = "message" if count == 1 else "messages"
        self.notices.info(f"Imported {count:,} {noun} as “{meta.title}”.")

    # --- export ----------------------------------------------------------------------------------

    def export(self, path: str, fmt: str) -> None:
        """Write the open conversation (on the reading thread: a long one takes a while)."""
        project, conv = self.host.project, self.host.current_id
        if project is None or conv is None:
            return
        store, attachments = project.conversations, AttachmentStore.of(project.state)
        target = Path(path)
        if not target.suffix:
            target = target.with_suffix({"jsonl": ".jsonl", "markdown": ".md"}.get(fmt, ".json"))

        def write() -> None:
            try:
                loaded = store.load(conv)
                title, pending = loaded.meta.title, loaded.pending_partial
                if fmt == "jsonl":
                    text = export_jsonl(loaded.messages, pending)
                elif fmt == "markdown":
                    text = export_markdown(loaded.messages, title, pending)
                else:
                    text = export_openai(loaded.messages, title, pending, attachments.inline)
                atomic_write_bytes(target, text.encode("utf-8"))
            except StoreError as e:
                self._exported.emit(f"Not exported: {e}", False)
            except OSError as e:
                self._exported.emit(f"Not exported: {target} cannot be written "
                                    f"({describe_os_error(e)}).", False)
            else:
                self._exported.emit(f"Exported “{title}” to {target}.", True)

        self._reader.submit(write)

    def _on_exported(self, text: str, ok: bool) -> None:
        (self.notices.info if ok else self.notices.warning)(text)

    def close(self) -> None:
        self._reader.shutdown(wait=True)

"""Attachments in the window: Attach… (and File → Attach…, Ctrl+Shift+A), files dropped on the
message box, a pasted screenshot and @-mentions become chips above the box with their size and
token cost; the meter counts them with the draft; Send takes them with the message
(core/attachments.py reads, checks and keeps them).

Each conversation has its own: switching away and back finds them again (until the app closes).
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QImage

from app.window.meter import UsageMeter
from app.window.notices import Notices
from core.attachments import (
    Attachment,
    AttachmentError,
    AttachmentStore,
    accepts_images,
    attach_bytes,
    attach_file,
    images_refused,
    size_text,
    taken_apart,
)
from core.confined import Refused, inside
from core.model import ConversationMessage
from core.project_files import SKIPPED, project_files
from core.settings import LLMSettings
from core.store.project import Project
from ui.image_viewer import ImageViewer
from ui.main_window import MainWindow
from ui.message_parts import THUMBNAIL, image_refs

MENTION = re.compile(r"(?<!\S)@([\w./-]+)")


class AttachmentHost(Protocol):
    project: Project | None
    current_id: str | None


class AttachmentFlow(QObject):
    _listed = Signal(object, object)  # the project's root, its files (for @-mentions)

    def __init__(self, window: MainWindow, notices: Notices, host: AttachmentHost,
                 meter: UsageMeter) -> None:
        super().__init__(window)
        self.window = window
        self.notices = notices
        self.host = host
        self.meter = meter
        self._pending: dict[str, list[Attachment]] = {}
        self._shown: tuple[str | None, int] = (None, 0)  # whose chips, how many
        self._looked: tuple[str | None, int] = (None, 0)  # rows looked at for images
        self._pasted = 0
        composer = window.composer
        composer.files_chosen.connect(self.add_paths)
        composer.image_pasted.connect(self.add_image)
        composer.attachment_removed.connect(self.remove)
        window.attach_requested.connect(self._choose)
        composer.attach_requested.connect(self._choose)
        meter.attached = self.current
        meter.listeners.append(self._follow)
        self._listing: Path | None = None  # the project whose files are being listed
        self._listed.connect(self._on_listed)
        composer.mentions.wanted.connect(self._list_files)
        composer.mentions.chosen.connect(self._mentioned)
        composer.draft_changed.connect(self._on_draft_changed)
        self._root: Path | None = None  # the project the mention list is of

    def current(self) -> list[Attachment]:
        conv = self.host.current_id
        return list(self._pending.get(conv, [])) if conv is not None else []

    def _choose(self) -> None:
        where = self._where()
        if where is not None:
            self.window.composer.choose_files(self.window.folders)  # starts in the project

    def _where(self) -> tuple[Project, str, AttachmentStore] | None:
        project, conv = self.host.project, self.host.current_id
        if project is None or conv is None:
            return None
        if project.read_only:
            self.notices.not_sent(f"Not attached: {project.read_only_reason}")
            return None
        return project, conv, AttachmentStore.of(project.state)

    def _counter_model(self) -> str | None:
        report = self.meter.report
        return report.model if report is not None else None

    def add_paths(self, paths: list[str], mentioned: bool = False) -> None:
        """Attach files: chosen by the user (anywhere), or `mentioned` (the project's own, read
        inside it only)."""
        where = self._where()
        if where is None or self.meter.context is None:
            return
        project, conv, store = where
        counter = self.meter.context.counter(self._counter_model())
        refused = []
        for path in paths:
            try:
                self._add(conv, attach_file(Path(path), store, counter, project.root,
                                            confined_to_root=mentioned))
            except AttachmentError as e:
                refused.append(str(e))
        self.show()  # then what was refused (the box's text changing clears the line)
        self.notices.not_sent(f"Not attached: {'; '.join(refused)}." if refused else None)

    def add_image(self, data: bytes) -> None:
        where = self._where()
        if where is None or self.meter.context is None:
            return
        _, conv, store = where
        self._pasted += 1
        name = f"pasted image {self._pasted}.png"
        try:
            self._add(conv, attach_bytes(data, name, store,
                                         self.meter.context.counter(self._counter_model())))
        except AttachmentError as e:
            self.notices.not_sent(f"Not attached: {e}.")
            return
        self.show()
        self.notices.not_sent(None)

    def _add(self, conv: str, attachment: Attachment) -> None:
        pending = self._pending.setdefault(conv, [])
        if any(a.name == attachment.name and a.part == attachment.part for a in pending):
            return  # the same file twice: once
        pending.append(attachment)

    def remove(self, index: int) -> None:
        pending = self._pending.get(self.host.current_id or "", [])
        if 0 <= index < len(pending):
            del pending[index]
        self.notices.not_sent(None)
        self.show()

    def show(self) -> None:
        """The chips of the conversation shown, and the meter with them."""
        current = self.current()
        self._shown = (self.host.current_id, len(current))
        self.window.composer.set_attachments([
            (f"{a.name} · {size_text(a.size)} · {a.tokens:,} tokens",
             f"{'Image' if a.kind == 'image' else 'Text file'} {a.name}, {size_text(a.size)}: "
             f"{a.tokens:,} tokens of the request"
             + (" (an estimate: OpenAI's rule for images)" if a.kind == "image" else ""))
            for a in current])
        self.meter.show()

    def _follow(self) -> None:
        """After each build of the meter: another conversation shows its own chips; another
        project lists its own files for mentions."""
        project = self.host.project
        if project is not None and project.root != self._root:
            self._root = project.root
            self.window.composer.mentions.forget_paths()
        if self._shown != (self.host.current_id, len(self.current())):
            self.show()
        self._thumbnails()

    # --- images in the transcript ----------------------------------------------------------------

    def _thumbnails(self) -> None:
        """Thumbnails of the images the transcript's rows carry, read once each."""
        project = self.host.project
        if project is None:
            return
        model, delegate = self.window.transcript_model, self.window.transcript.delegate
        rows = model.rows()
        conv, seen = self._looked
        # (two back: an entry may land before a row that was streaming when last looked)
        start = max(0, seen - 2) if conv == self.host.current_id and seen <= len(rows) else 0
        self._looked = (self.host.current_id, len(rows))  # only new rows next time
        store = AttachmentStore.of(project.state)
        changed = []
        for i, row in enumerate(rows[start:], start):
            refs = [r for r, _ in image_refs(row) if r not in delegate.thumbnails]
            for ref in refs:
                image = self._image(store, ref)
                if image is not None and max(image.width(), image.height()) > THUMBNAIL:
                    image = image.scaled(THUMBNAIL, THUMBNAIL, Qt.AspectRatioMode.KeepAspectRatio,
                                         Qt.TransformationMode.SmoothTransformation)
                if image is not None:  # a small one as it is, never blown up
                    delegate.thumbnails[ref] = image
            if refs:
                changed.append(i)
        model.relayout(changed)

    def _image(self, store: AttachmentStore, ref: str) -> QImage | None:
        try:
            image = QImage.fromData(store.read(ref))
        except (OSError, ValueError):
            return None
        return None if image.isNull() else image

    def view(self, ref: str) -> None:
        """A thumbnail's View: the image at its own size."""
        project = self.host.project
        image = self._image(AttachmentStore.of(project.state), ref) if project else None
        if image is None:
            self.notices.warning("That image is no longer in .workbench/attachments.")
            return
        ImageViewer(self.window, "Attached image", image).open()

    # --- @-mentions ------------------------------------------------------------------------------

    def _list_files(self) -> None:
        """An `@` typed: the project's files as they are now, listed on a thread (a large tree
        takes a while; the list shown meanwhile is the last one)."""
        project = self.host.project
        if project is None or self._listing == project.root:
            return
        root = self._listing = project.root
        threading.Thread(target=lambda: self._listed.emit(root, project_files(root)[0]),
                         name="mentions", daemon=True).start()

    def _on_listed(self, root: Path, paths: list[str]) -> None:
        self._listing = None
        project = self.host.project
        if project is not None and project.root == root:
            self.window.composer.mentions.set_paths(paths)

    def _on_draft_changed(self) -> None:
        """A mention typed in full and followed by a space is a chip at once (the meter
        counts it before sending, as it counts the others)."""
        text = self.window.composer.text()
        if "@" in text and text[-1:].isspace():
            self._typed_mentions(text)

    def _mentioned(self, path: str) -> None:
        project = self.host.project
        if project is not None:
            self.add_paths([str(project.root / path)], mentioned=True)

    def _typed_mentions(self, text: str) -> None:
        """`@path` typed (not chosen from the list) of a file in the project: attached too."""
        project, conv = self.host.project, self.host.current_id
        if project is None or conv is None or "@" not in text:
            return
        have = {a.source for a in self._pending.get(conv, [])}
        root = project.root.resolve()
        paths = []
        for word in MENTION.findall(text):
            try:
                path = inside(root, word.rstrip(".,;:!?)"))
            except Refused:  # a link out, `..`: not a mention of the project's files
                continue
            if path.is_file() and path not in have and \
                    path.relative_to(root).parts[0] not in SKIPPED:
                paths.append(str(path))
                have.add(path)
        if paths:
            self.add_paths(paths, mentioned=True)

    # --- sending ---------------------------------------------------------------------------------

    def take(self, settings: LLMSettings, text: str = "") -> list[Attachment] | None:
        """The attachments to send with the message, files read again as they are now (a
        mention is the file as of sending), or None (and why on screen) when they cannot go."""
        self._typed_mentions(text)
        conv = self.host.current_id
        current = self.current()
        if conv is not None and any(a.source is not None for a in current) and \
                self.meter.context is not None:
            counter = self.meter.context.counter(settings.model)
            store = AttachmentStore.of(self.host.project.state) if self.host.project else None
            try:
                current = [attach_file(a.source, store, counter, self._root,
                                       confined_to_root=a.confined)
                           if a.source is not None and store is not None else a
                           for a in current]
            except AttachmentError as e:
                self.notices.not_sent(f"Not sent: {e}.")
                return None
            self._pending[conv] = current
            self.show()
        if any(a.kind == "image" for a in current) and \
                not accepts_images(settings.model, settings.images):
            self.notices.not_sent(
                f"Not sent: {images_refused(settings.model, settings.images)}.")
            return None
        return current

    def sent(self, conv: str) -> None:
        """The message left with them: the box starts empty."""
        self._pending.pop(conv, None)
        self.show()

    def taken_apart(self, message: ConversationMessage) -> tuple[str, list[Attachment]]:
        """A message of the user's, to edit: its typed text and its attachments as sent."""
        if self.meter.context is None:  # no project open
            return message.text(), []
        return taken_apart(message, self.meter.context.counter(self._counter_model()))

    def swap(self, conv: str, attachments: list[Attachment]) -> list[Attachment]:
        """Give `conv`'s box these attachments; the ones it had before (Edit and resend keeps
        the draft's aside, and gives them back)."""
        before = self._pending.pop(conv, [])
        if attachments:
            self._pending[conv] = list(attachments)
        self.show()
        return before

    def give_back(self, conv: str | None, attachments: list[Attachment]) -> None:
        """The message was not saved (a full disk, a Stop before it was): its attachments
        wait again with its text."""
        if conv is not None and attachments:
            self._pending[conv] = [*attachments, *self._pending.get(conv, [])]
            self.show()

"""Attachments: files and images sent with a user message.

A text file becomes a text part of the user message, headed with its name and size, so the model
knows what it is; it is in the log as it was sent (a later edit of the file changes nothing).
An image is an `image_url` part whose bytes live content-addressed in the project, under
`.workbench/attachments/<sha256>.<ext>`; the log's part refers to them by an
`attachment:<sha256>.<ext>` URL with the image's name and size beside it:

    {"type": "image_url", "image_url": {"url": "attachment:9f2c….png", "name": "shot.png",
                                        "width": 1280, "height": 800}}

The request carries the image itself: `inline` makes each reference a `data:` URL (and drops
our fields) on the way to the provider, and in `export --format openai`, so an export is
self-contained; an import keeps inline images in the store again (`extern`), once per content.

Refused, with a sentence that says why: binary files, PDFs (not read as text here), images of a
type providers do not take, files over the caps below; the window decides the rest (a file
too large for the room left is refused with both numbers, see `room_problem`).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import re
import stat
import struct
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from core import confined
from core.confined import Refused
from core.llm.model_map import supports_vision
from core.llm.tokens import TokenCounter, image_tokens
from core.model import ConversationMessage, ImagePart, ImageUrl, TextPart
from core.store.attachment_refs import REF, SCHEME
from core.store.fileio import atomic_write_bytes

TEXT_MAX_BYTES = 2 * 2**20  # a text file past this is refused, whatever the window
IMAGE_MAX_BYTES = 20 * 2**20  # OpenAI's and Anthropic's limits are about this
IMAGE_TYPES = {"png": "image/png", "jpg": "image/jpeg", "gif": "image/gif", "webp": "image/webp"}
_DATA_URL = re.compile(r"data:(image/(?:png|jpeg|gif|webp));base64,(.*)", re.S)


class AttachmentError(ValueError):
    """A file that cannot be attached; the message says which and why, in plain words."""


@dataclass(frozen=True)
class Attachment:
    """One file or image ready to go with the next message.

    Attributes:
        name: as shown and sent (a path inside the project, else the file's name).
        kind: "text" or "image"; size: its bytes.
        part: the content part as logged (see the module's doc).
        tokens: what it adds to the request (an image: the provider's rule, see image_tokens).
        source: the file it was read from, if any; confined: the project named it (see
            attach_file).
    """

    name: str
    kind: Literal["text", "image"]
    size: int
    part: TextPart | ImagePart
    tokens: int
    source: Path | None = None  # the file it was read from (read again as the message leaves)
    confined: bool = False  # the project named `source` (a mention): read inside it only


def size_text(n: int) -> str:
    return f"{n:,} bytes" if n < 1024 else f"{n / 1024:,.1f} KB" if n < 2**20 \
        else f"{n / 2**20:,.1f} MB"


def image_type(data: bytes) -> str | None:
    """The extension of an image type providers take (png, jpg, gif, webp), from its bytes."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if data.startswith(b"\xff\xd8\xff"):
        return "jpg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return None


def image_size(data: bytes, ext: str) -> tuple[int, int] | None:
    """Width and height from the image's header (None when it cannot be read)."""
    try:
        if ext == "png":
            w, h = struct.unpack(">II", data[16:24])
            return int(w), int(h)
        if ext == "gif":
            w, h = struct.unpack("<HH", data[6:10])
            return int(w), int(h)
        if ext == "webp":
            return _webp_size(data)
        if ext == "jpg":
            return _jpeg_size(data)
    except struct.error:
        return None
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X":
        w = int.from_bytes(data[24:27], "little") + 1
        h = int.from_bytes(data[27:30], "little") + 1
        return w, h
    if chunk == b"VP8L":
        b = data[21:25]
        w = 1 + (((b[1] & 0x3F) << 8) | b[0])
        h = 1 + (((b[3] & 0xF) << 10) | (b[2] << 2) | ((b[1] & 0xC0) >> 6))
        return w, h
    if chunk == b"VP8 ":
        w, h = struct.unpack("<HH", data[26:30])
        return int(w) & 0x3FFF, int(h) & 0x3FFF
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        length = int.from_bytes(data[i + 2:i + 4], "big")
        if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE,
                      0xCF):
            h, w = struct.unpack(">HH", data[i + 5:i + 9])
            return int(w), int(h)
        i += 2 + length
    return None


class AttachmentStore:
    """The project's attachment bytes, one file per content (`<sha256>.<ext>`)."""

    def __init__(self, folder: Path, read_only: bool = False) -> None:
        self.folder = folder
        self.read_only = read_only

    @classmethod
    def of(cls, state: Path, read_only: bool = False) -> AttachmentStore:
        """The store of the project whose `.workbench/` is `state`."""
        return cls(state / "attachments", read_only)

    def put(self, data: bytes, ext: str) -> str:
        """Keep `data` (once: the same bytes are the same file); returns its reference."""
        ref = f"{hashlib.sha256(data).hexdigest()}.{ext}"
        path = self.folder / ref
        with contextlib.suppress(OSError):
            info = os.lstat(path)  # a link or a FIFO under this name is replaced, never kept
            if stat.S_ISREG(info.st_mode) and info.st_size == len(data):
                return ref
        if self.read_only:
            raise AttachmentError("the project is open read-only: nothing can be attached")
        try:
            atomic_write_bytes(path, data)
        except OSError as e:
            raise AttachmentError(f"the attachment could not be saved ({e.strerror or e})") \
                from e
        return ref

    def data_url(self, ref: str) -> str:
        ext = ref.rsplit(".", 1)[-1]
        return f"data:{IMAGE_TYPES.get(ext, 'application/octet-stream')};base64," + \
            base64.b64encode(self.read(ref)).decode("ascii")

    def read(self, ref: str) -> bytes:
        """The image's bytes, read confined to the store: a cloned project's store can hold a
        link to a key elsewhere, or a FIFO, under an image's name.

        Raises:
            AttachmentError: it is missing, or not a regular file of the store.
        """
        try:
            return confined.read(ref, IMAGE_MAX_BYTES, root=self.folder,
                                 name=f".workbench/attachments/{ref[:12]}…")
        except Refused as e:
            if e.missing:
                raise AttachmentError(
                    f"the image {ref[:12]}… is missing from .workbench/attachments; exclude "
                    "its message to send without it") from None
            raise AttachmentError(f"{e}; the image is not sent") from None

    def inline(self, messages: list[dict[str, Any]], images: bool = True
               ) -> list[dict[str, Any]]:
        """`messages` with every attachment reference made the image itself (a data: URL) and
        our fields left out: what a provider reads. Messages without one are the same objects.
        An image whose bytes are gone is sent as a sentence saying so (the rest still goes);
        so is every image for a model that takes none (`images` False)."""
        out = []
        for m in messages:
            content = m.get("content")
            if not isinstance(content, list) or not any(
                    _is_ref(p) or not images and _is_image(p) for p in content):
                out.append(m)
                continue
            parts: list[dict[str, Any]] = []
            for p in content:
                if not images and _is_image(p):
                    parts.append({"type": "text", "text": _left_out(p)})
                    continue
                try:
                    ref = _ref(p)
                    url = self.data_url(ref) if ref is not None else None
                except AttachmentError as e:
                    parts.append({"type": "text", "text": f"[An image is not available: {e}.]"})
                    continue
                if url is None:
                    parts.append(p)
                    continue
                image = {"url": url}
                detail = p["image_url"].get("detail")
                if detail:
                    image["detail"] = detail
                parts.append({"type": "image_url", "image_url": image})
            out.append({**m, "content": parts})
        return out

    def extern(self, m: ConversationMessage) -> ConversationMessage:
        """An imported message with its inline images kept here and referred to (the same
        image twice is one file)."""
        if not isinstance(m.content, list):
            return m
        parts: list[Any] = []
        changed = False
        for p in m.content:
            url = p.image_url if isinstance(p, ImagePart) else None
            found = _DATA_URL.fullmatch(url if isinstance(url, str) else url.url) \
                if url is not None else None
            if found is None:
                parts.append(p)
                continue
            try:
                data = base64.b64decode(found.group(2), validate=False)
            except ValueError:
                parts.append(p)
                continue
            ext = image_type(data)
            if ext is None:
                parts.append(p)
                continue
            parts.append(image_part(self.put(data, ext), "image." + ext, data, ext))
            changed = True
        return m.model_copy(update={"content": parts}) if changed else m


def _is_image(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "image_url"


def _left_out(part: dict[str, Any]) -> str:
    image = part.get("image_url")
    name = image.get("name") if isinstance(image, dict) else None
    return (f"[An image{f' ({name})' if name else ''} was here; it is not sent, as this model "
            "does not take images.]")


def _is_ref(part: Any) -> bool:
    image = part.get("image_url") if isinstance(part, dict) else None
    return isinstance(image, dict) and str(image.get("url", "")).startswith(SCHEME)


def _ref(part: Any) -> str | None:
    if not isinstance(part, dict) or part.get("type") != "image_url":
        return None
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, dict) else None
    if not isinstance(url, str) or not url.startswith(SCHEME):
        return None
    ref = url[len(SCHEME):]
    if not REF.fullmatch(ref):  # never a path: a log line cannot name another file
        raise AttachmentError(f"an image part refers to {ref[:40]!r}, not an attachment")
    return ref


def image_part(ref: str, name: str, data: bytes, ext: str) -> ImagePart:
    size = image_size(data, ext) or (0, 0)
    return ImagePart(image_url=ImageUrl(url=SCHEME + ref, name=name, width=size[0],
                                        height=size[1], bytes=len(data)))


def text_part(name: str, text: str, size: int) -> TextPart:
    fence = "````" if "```" in text else "```"
    return TextPart(text=f"Attached file {name} ({size_text(size)}):\n{fence}\n{text}"
                         f"{'' if text.endswith(chr(10)) else chr(10)}{fence}")


def attach_bytes(data: bytes, name: str, store: AttachmentStore,
                 counter: TokenCounter) -> Attachment:
    """The attachment for `data` (a file's content, or a pasted image), named `name`.

    Raises:
        AttachmentError: it cannot be attached (binary, a PDF, too large, not saved).
    """
    ext = image_type(data)
    if ext is not None:
        if len(data) > IMAGE_MAX_BYTES:
            raise AttachmentError(
                f"{name} is {size_text(len(data))}; images up to "
                f"{size_text(IMAGE_MAX_BYTES)} can be attached")
        part: TextPart | ImagePart = image_part(store.put(data, ext), name, data, ext)
        assert isinstance(part, ImagePart) and isinstance(part.image_url, ImageUrl)
        size = image_size(data, ext)
        tokens = image_tokens(*size) if size else image_tokens(1024, 1024)
        return Attachment(name, "image", len(data), part, tokens)
    if data.startswith(b"%PDF"):
        raise AttachmentError(
            f"{name} is a PDF: PDFs are not read here; paste its text, or attach a text "
            "export of it")
    if len(data) > TEXT_MAX_BYTES:
        raise AttachmentError(
            f"{name} is {size_text(len(data))}; text files up to "
            f"{size_text(TEXT_MAX_BYTES)} can be attached")
    if b"\0" in data[:65536]:
        raise AttachmentError(
            f"{name} is not a text file (binary content); only text files and PNG, JPEG, "
            "GIF or WebP images can be attached")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise AttachmentError(
            f"{name} is not UTF-8 text; only UTF-8 text files and images can be attached") \
            from None
    part = text_part(name, text.replace("\r\n", "\n"), len(data))
    return Attachment(name, "text", len(data), part,
                      counter.text(part.text))


def attach_file(path: Path, store: AttachmentStore, counter: TokenCounter,
                root: Path | None = None, *, confined_to_root: bool = False) -> Attachment:
    """The attachment for the file at `path`, named by its path inside `root` (the project)
    when it is there, else by its file name.

    Args:
        confined_to_root: the project named the file (an @-mention), so it must be inside
            `root`; else the user chose it and it may be anywhere. Either way it is read by the
            confined reader: a regular file, at most the larger of the caps.

    Raises:
        AttachmentError: the file cannot be read or attached.
    """
    name = path.name
    if root is not None:
        try:
            name = path.resolve().relative_to(root.resolve()).as_posix()
        except (ValueError, OSError, RuntimeError):
            pass
    if path.is_dir():
        raise AttachmentError(f"{name} is a folder; attach the files in it one by one")
    try:
        data = confined.read(path, max(TEXT_MAX_BYTES, IMAGE_MAX_BYTES),
                             root=root if confined_to_root else None, name=name)
    except Refused as e:
        raise AttachmentError(str(e)) from None
    return replace(attach_bytes(data, name, store, counter), source=path,
                   confined=confined_to_root)


def room_problem(attachments: list[Attachment], room: int) -> str | None:
    """Why the attachments do not fit the `room` the request has left (None when they do)."""
    total = sum(a.tokens for a in attachments)
    if total <= room:
        return None
    biggest = max(attachments, key=lambda a: a.tokens)
    return (f"the attachments take {total:,} tokens and the request has room for "
            f"{max(0, room):,} ({biggest.name}: {biggest.tokens:,}); remove one, or choose a "
            "model with a larger window")


def user_message(text: str, attachments: list[Attachment], **fields: Any) -> ConversationMessage:
    """The user's message with its attachments as content parts (plain text without any)."""
    if not attachments:
        return ConversationMessage(role="user", content=text, **fields)
    parts: list[Any] = [TextPart(text=text)] if text.strip() else []
    parts += [a.part for a in attachments]
    return ConversationMessage(role="user", content=parts, **fields)


_ATTACHED = re.compile(r"Attached file (.+) \(.+\):\n(`{3,4})\n(.*)\2", re.S)


def taken_apart(message: ConversationMessage, counter: TokenCounter
                ) -> tuple[str, list[Attachment]]:
    """A user message as it was written (Edit and resend): the text the user typed, and its
    attachments as they were sent (a file as it was then, not read again)."""
    if not isinstance(message.content, list):
        return message.text(), []
    typed: list[str] = []
    attached: list[Attachment] = []
    for part in message.content:
        if isinstance(part, ImagePart):
            image = part.image_url if isinstance(part.image_url, ImageUrl) else ImageUrl(url="")
            attached.append(Attachment(image.name or "image", "image", image.bytes or 0, part,
                                       image_tokens(image.width or 1024, image.height or 1024)))
        elif isinstance(part, TextPart) and (m := _ATTACHED.fullmatch(part.text)):
            attached.append(Attachment(m[1], "text", len(m[3].encode()), part,
                                       counter.text(part.text)))
        elif isinstance(part, TextPart):
            typed.append(part.text)
    return "\n".join(typed), attached


def accepts_images(model: str, said: bool | None) -> bool:
    """The model takes images: as the user said (Settings, WORKBENCH_IMAGES), else as
    litellm's model map says (a local server's model is unknown there: say so in Settings)."""
    return said if said is not None else supports_vision(model)


def images_refused(model: str, said: bool | None = None) -> str:
    """Why an image is not sent to `model`, with the way to change it."""
    if said is False:
        return (f"images are turned off for {model} (\"This model reads images\" in Settings, "
                "or WORKBENCH_IMAGES=0); remove the image or turn them on")
    return (f"{model} does not take images (as litellm knows it); remove the image, choose a "
            "vision model, or, if this model does read images (a local server's), tick "
            "\"This model reads images\" in Settings or set WORKBENCH_IMAGES=1")


def has_images(messages: list[dict[str, Any]]) -> bool:
    return any(isinstance(m.get("content"), list) and
               any(isinstance(p, dict) and p.get("type") == "image_url" for p in m["content"])
               for m in messages)

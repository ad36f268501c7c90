"""A message of several parts (an attached file, an image) as a transcript row shows it: its
texts apart, an attached file without the fence meant for the model, a line and a thumbnail for
each image (the app reads the images; see app/window/attachment_flow.py)."""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import QUrl
from PySide6.QtGui import QImage, QTextCursor, QTextDocument

from core.model import ConversationMessage, ImagePart, ImageUrl, TextPart

THUMBNAIL = 160  # an attached image's thumbnail fits this square (pixels)


class ShowsMessage(Protocol):
    """A transcript row (ui.transcript_model.Row), as far as its parts are concerned."""

    @property
    def message(self) -> ConversationMessage | None: ...


def image_refs(row: ShowsMessage) -> list[tuple[str, str]]:
    """The attached images of a row's message: (reference, name) each."""
    m = row.message
    if m is None or not isinstance(m.content, list):
        return []
    out = []
    for part in m.content:
        image = part.image_url if isinstance(part, ImagePart) else None
        if isinstance(image, ImageUrl) and image.url.startswith("attachment:"):
            out.append((image.url[len("attachment:"):], image.name or "image"))
    return out


def add_thumbnails(doc: QTextDocument, images: list[QImage]) -> None:
    """The images at the end of a row's text, side by side."""
    cursor = QTextCursor(doc)
    cursor.movePosition(QTextCursor.MoveOperation.End)
    cursor.insertBlock()
    for n, image in enumerate(images):
        name = f"thumbnail:{n}"
        doc.addResource(QTextDocument.ResourceType.ImageResource, QUrl(name), image)
        cursor.insertImage(image, name)
        cursor.insertText("  ")


def _unfenced(text: str) -> str:
    """An attached file's part as shown in a (plain text) row: its heading, then the file,
    without the fence that tells the model where it starts and ends."""
    head, _, rest = text.partition("\n")
    fence = rest.split("\n", 1)[0]
    if not head.startswith("Attached file ") or fence not in ("```", "````") or \
            not rest.endswith("\n" + fence):
        return text
    return f"{head}\n{rest[len(fence) + 1:-len(fence) - 1]}"


def with_parts(m: ConversationMessage) -> str:
    """A message of several parts as shown: its texts (an attached file's with its heading)
    apart, and a line for each image (its name and size; the Inspector and an export have the
    image itself)."""
    shown = []
    for part in m.content if isinstance(m.content, list) else []:
        if isinstance(part, TextPart):
            shown.append(_unfenced(part.text))
        elif isinstance(part, ImagePart):
            image = part.image_url
            if isinstance(image, ImageUrl) and image.name:
                size = f" · {image.width}×{image.height}" if image.width else ""
                shown.append(f"[image: {image.name}{size}]")
            else:
                shown.append("[image]")
    return "\n\n".join(shown)

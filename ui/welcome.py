"""What the transcript's place shows while a conversation is empty: how to start, and, while
no model is connected, how to connect one."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget

WELCOME_NO_PROVIDER = (
    "<h2>Welcome to Context Workbench</h2>"
    "<p>No model is connected yet. Give Context Workbench an "
    "<b>OpenAI</b> or <b>Anthropic</b> API key, or point it at a model running on your own "
    "machine — <b>Ollama</b> (http://localhost:11434), or <b>llama.cpp</b> / <b>LM Studio</b> as "
    "an OpenAI-compatible server. Open <b>File → Settings</b> (Ctrl+,) to choose one, then type "
    "below and press <b>Ctrl+Enter</b>.</p>"
)
WELCOME_READY = (
    "<h2>New conversation</h2><p>Type a message below and press <b>Ctrl+Enter</b> to send. "
    "Every answer is saved in this project as it arrives.</p>"
)


class Welcome(QLabel):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWordWrap(True)
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setObjectName("welcome")
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setText(WELCOME_READY)

    def set_configured(self, provider_configured: bool) -> None:
        self.setText(WELCOME_READY if provider_configured else WELCOME_NO_PROVIDER)

"""Token counting with tiktoken, cached per message.

The BPE files come from litellm's package (see core.llm.offline), so counting
never downloads anything. Counts follow OpenAI's accounting for chat messages: a few tokens of
framing per message on top of the content, the tool calls' names and arguments, and the reply
primer. A message's count is computed once and kept, in memory and in the log line itself, keyed
by encoding name, so reopening a long conversation never re-tokenizes it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from core.llm.offline import configure_offline_environment
from core.model import ConversationMessage

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMER = 3
TOKENS_PER_TOOL_CALL = 7  # framing of one call: id, type, name/arguments keys
TOKENS_PER_IMAGE = 85  # the low-detail price: an image whose size is not known


def image_tokens(width: int, height: int) -> int:
    """What an image costs by OpenAI's published rule for detail "high" (auto picks it for
    all but small images): scaled to fit 2048x2048, then its shorter side to at most 768, it
    is 85 tokens plus 170 per 512-pixel tile. Other providers count otherwise (Anthropic:
    about width x height / 750); this is the estimate the meter states."""
    if width <= 0 or height <= 0:
        return TOKENS_PER_IMAGE
    scale = min(1.0, 2048 / max(width, height))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    tiles = -(-int(w) // 512) * -(-int(h) // 512)
    return 85 + 170 * tiles

_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")

_encodings: dict[str, Any] = {}
_enc_lock = threading.Lock()


def encoding_for_model(model: str | None) -> str:
    """o200k_base for current OpenAI models, cl100k_base for everything else."""
    name = (model or "").split("/")[-1].lower()
    return "o200k_base" if name.startswith(_O200K_PREFIXES) else "cl100k_base"


_shared: dict[str, TokenCounter] = {}  # see TokenCounter.for_model
_shared_lock = threading.Lock()


def encoding_loaded(name: str) -> bool:
    """Whether counting in `name` can start without loading its BPE file first."""
    return name in _encodings


def get_encoding(name: str) -> Any:
    enc = _encodings.get(name)
    if enc is None:
        with _enc_lock:
            enc = _encodings.get(name)
            if enc is None:
                configure_offline_environment()
                from core.llm import bpe_cache

                enc = bpe_cache.load(name)
                _encodings[name] = enc
    return enc


class TokenCounter:
    """Counts tokens for one encoding, remembering every message it has counted (safe to share
    between threads: a count is only ever added, and the same whoever counts it)."""

    def __init__(self, encoding: str = "o200k_base") -> None:
        self.encoding_name = encoding
        self._enc = get_encoding(encoding)
        self._cache: dict[tuple[str, int, int], int] = {}

    @classmethod
    def for_model(cls, model: str | None) -> TokenCounter:
        """The process's counter for the model's encoding: the window's meter and the engine
        share what each has counted (an entry is counted once, not once per thread: a 10,000
        entry log is a long count)."""
        enc = encoding_for_model(model)
        counter = _shared.get(enc)
        if counter is None:
            with _shared_lock:  # not _enc_lock: making the counter takes that one
                counter = _shared.get(enc) or _shared.setdefault(enc, cls(enc))
        return counter

    def text(self, text: str) -> int:
        if not text:
            return 0
        # disallowed_special=() so text that happens to contain "<|endoftext|>" is counted, not
        # refused: users paste all sorts of things.
        return len(self._enc.encode(text, disallowed_special=()))

    def message(self, msg: ConversationMessage) -> int:
        cached = msg.token_counts.get(self.encoding_name)
        if cached is not None:
            return cached
        # Keyed by more than the id: a compression stage makes a shorter copy of an entry
        # under the same id, and that copy must be counted afresh.
        key = (msg.id, len(msg.text()), len(msg.tool_calls or ()))
        cached = self._cache.get(key)
        if cached is None:
            cached = self.openai_message(msg.to_openai())
            self._cache[key] = cached
        return cached

    def messages(self, msgs: Iterable[ConversationMessage]) -> int:
        return sum(self.message(m) for m in msgs) + REPLY_PRIMER

    def openai_message(self, m: dict[str, Any]) -> int:
        n = TOKENS_PER_MESSAGE + self.text(str(m.get("role", "")))
        content = m.get("content")
        if isinstance(content, str):
            n += self.text(content)
        elif isinstance(content, list):  # to_openai() gives parts as dicts
            for part in content:
                if part.get("type") == "text":
                    n += self.text(str(part.get("text", "")))
                elif part.get("type") == "image_url" and isinstance(part.get("image_url"), dict):
                    image = part["image_url"]  # an attachment's part says its size
                    width, height = image.get("width"), image.get("height")
                    n += image_tokens(width, height) if isinstance(width, int) and \
                        isinstance(height, int) else TOKENS_PER_IMAGE
                else:
                    n += TOKENS_PER_IMAGE
        if m.get("name"):
            n += TOKENS_PER_NAME + self.text(str(m["name"]))
        for call in m.get("tool_calls") or []:
            fn = call.get("function", {})
            n += TOKENS_PER_TOOL_CALL + self.text(fn.get("name", "")) + self.text(
                fn.get("arguments", "")
            )
        if m.get("tool_call_id"):
            n += self.text(str(m["tool_call_id"]))
        return n

    def with_count(self, msg: ConversationMessage) -> ConversationMessage:
        """A copy of `msg` carrying its count, ready to be persisted with it."""
        if self.encoding_name in msg.token_counts:
            return msg
        return msg.model_copy(
            update={"token_counts": {**msg.token_counts, self.encoding_name: self.message(msg)}}
        )

"""Titles for untitled conversations: after the first answer, a short title (about six words, in
the conversation's language) written by the summary model (or the chat model); without a model
(an error, no key), the opening words of the user's first message. A title the user set is never
replaced (`ConversationStore.set_title_if_untitled` decides, under the store's lock)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from core.cost import cost_of
from core.llm.adapter import LLMClient, LLMRequest, TextDelta, Usage
from core.llm.errors import LLMError
from core.model import ConversationMessage, TextPart
from core.settings import LLMSettings
from core.store.conversations import ConversationStore

TITLE_WORDS = 6
TITLE_CHARS = 80
SHOWN_CHARS = 1500  # of the first question and of the first answer
TITLE_TOKENS = 40
TITLE_TIMEOUT = 30.0
PROMPT = ("Write a title of about six words for the conversation below, in the language the "
          "user writes in. Reply with the title only: no quotes, no full stop, no preamble.")


@dataclass(frozen=True)
class TitleWritten:
    """The conversation got a title (`by`: "model", or "opening" when the model could not)."""

    conv_id: str
    title: str
    by: str


def first_exchange(messages: list[ConversationMessage]
                   ) -> tuple[ConversationMessage, ConversationMessage] | None:
    """The user's first message and the first answer in text after it, or None."""
    asked = next((m for m in messages if m.role == "user" and m.kind == "message"
                  and m.text().strip()), None)
    if asked is None:
        return None
    after = messages[messages.index(asked) + 1:]
    answer = next((m for m in after if m.role == "assistant" and m.kind == "message"
                   and m.text().strip()), None)
    return None if answer is None else (asked, answer)


def typed(m: ConversationMessage) -> str:
    """What the user typed: a message with attachments is its first part (the files after it
    are not what the conversation is called by)."""
    if isinstance(m.content, list):
        return next((p.text for p in m.content if isinstance(p, TextPart)), "")
    return m.text()


def opening_title(text: str) -> str:
    """The first words of a message (its first line), as a title."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "").strip()
    words = line.split()
    title = " ".join(words[:TITLE_WORDS])
    if len(title) > TITLE_CHARS:
        title = title[:TITLE_CHARS - 1].rstrip()
    return title + ("…" if len(words) > TITLE_WORDS or len(title) < len(" ".join(words)) else "")


_WRAPPING = re.compile(r'^(?:title\s*:\s*)?[\s"\'“”‘’«»*#`_]+|[\s"\'“”‘’«»*#`_.。!！]+$',
                       re.IGNORECASE)


def clean_title(answer: str) -> str | None:
    """The model's answer as a title: its first line, without quotes, markup or a full stop,
    cut to about six words (a small model's titles are sentences); None when nothing usable is
    left."""
    line = next((ln for ln in answer.splitlines() if ln.strip()), "")
    line = re.sub(r"^\s*title\s*:\s*", "", line, flags=re.IGNORECASE)
    words = _WRAPPING.sub("", line).split()
    if not words:
        return None
    if len(words) > TITLE_WORDS + 2:  # a sentence, not a title: its first words
        return " ".join(words[:TITLE_WORDS]).rstrip(",;:") + "…"
    title = " ".join(words)
    return title if len(title) <= TITLE_CHARS else title[:TITLE_CHARS - 1].rstrip() + "…"


async def write_title(store: ConversationStore, client: LLMClient, conv_id: str,
                      settings: LLMSettings) -> AsyncIterator[TitleWritten]:
    """Title the conversation when it is untitled and has its first answer (one event, or
    none when there is nothing to do or the user named it meanwhile)."""
    loaded = store.load(conv_id)
    exchange = first_exchange(loaded.messages)
    if exchange is None or not store.untitled(loaded.meta):
        return
    asked, answer = exchange
    title, by, spent = None, "model", None
    if settings.auto_title:
        title, spent = await _ask(client, settings, typed(asked), answer.text())
    if title is None:
        title, by = opening_title(typed(asked)), "opening"
    if title and store.set_title_if_untitled(conv_id, title, by):
        if spent is not None:  # the title's request costs too (core.cost)
            store.update_meta(conv_id, title_request=spent)
        yield TitleWritten(conv_id, store.meta(conv_id).title, by)  # as stored: no key


async def _ask(client: LLMClient, settings: LLMSettings, asked: str, answer: str
               ) -> tuple[str | None, dict[str, Any] | None]:
    """The title the model wrote (None when it wrote none that serves), and what its request
    spent ({"model", "usage", "cost"}; None without usage)."""
    model = settings.summary_model or settings.model
    request = LLMRequest(
        model=model, api_base=settings.api_base,
        key_name=settings.key_name, max_tokens=TITLE_TOKENS,
        timeout=min(TITLE_TIMEOUT, settings.request_timeout),
        messages=[{"role": "system", "content": PROMPT},
                  {"role": "user", "content": f"User: {asked[:SHOWN_CHARS]}\n\n"
                                              f"Assistant: {answer[:SHOWN_CHARS]}"}])
    parts: list[str] = []
    usage: dict[str, Any] | None = None
    try:
        async for ev in client.stream(request):
            if isinstance(ev, TextDelta):
                parts.append(ev.text)
            elif isinstance(ev, Usage):
                usage = ev.raw or {"prompt_tokens": ev.prompt_tokens,
                                   "completion_tokens": ev.completion_tokens}
                if not ev.reported:
                    usage = {**usage, "estimated": True}
    except LLMError:
        return None, None
    spent = None if usage is None else {"model": model, "usage": usage,
                                        "cost": cost_of(model, usage)}
    return clean_title("".join(parts)), spent

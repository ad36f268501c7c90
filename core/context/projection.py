"""How log entries read as the messages a model is sent: errors and summaries have no OpenAI
form of their own, and a summary or digest (a user message) needs an answer before the next
user message so user and assistant turns alternate."""

from __future__ import annotations

from typing import Any

from core.context.compaction import DIGEST_MARK
from core.llm.tokens import TokenCounter
from core.model import ConversationMessage

SUMMARY_MARK = "[Summary of the earlier conversation"
ACK = "(Noted; continuing from there.)"  # short: it is only there to alternate turns


def error_projection(m: ConversationMessage) -> dict[str, Any]:
    """An error entry as the model sees it: its partial answer, then an LLM_ERROR block, so a
    later "continue" has an anchor."""
    info = m.error
    block = (f"[LLM_ERROR type={info.type}] {info.message}" if info is not None
             else "[LLM_ERROR]")
    partial = m.text()
    return {"role": "assistant", "content": f"{partial}\n\n{block}" if partial else block}


def summary_projection(m: ConversationMessage) -> dict[str, Any]:
    """A summary entry as the model sees it: a user message (valid for providers that want
    strict user/assistant turns, unlike a system message in the middle)."""
    covered = len(m.covers or ())
    by = f", written by {m.model}" if m.model else ""
    return {"role": "user",
            "content": f"{SUMMARY_MARK} ({covered:,} entries{by}), standing in for them:]\n"
                       f"{m.text()}"}


def project(m: ConversationMessage) -> dict[str, Any]:
    """Any candidate entry as the model sees it."""
    if m.kind == "error":
        return error_projection(m)
    if m.kind == "summary":
        return summary_projection(m)
    return m.to_openai()


def alternate(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A summary or digest (a user message) followed by a user message gets a short assistant
    acknowledgement between them, so user and assistant turns alternate."""
    out: list[dict[str, Any]] = []
    for k, m in enumerate(messages):
        out.append(m)
        content = m.get("content")
        if m.get("role") == "user" and isinstance(content, str) and \
                content.startswith((SUMMARY_MARK, DIGEST_MARK)) and \
                k + 1 < len(messages) and messages[k + 1].get("role") == "user":
            out.append({"role": "assistant", "content": ACK})
    return out


def ack_tokens(counter: TokenCounter) -> int:
    """What the acknowledgement after a digest or summary costs (see `alternate`)."""
    return counter.openai_message({"role": "assistant", "content": ACK})

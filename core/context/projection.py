"""How log entries read as the messages a model is sent: errors and summaries have no OpenAI
form of their own, and a summary or digest (a user message) needs an answer before the next
user message so user and assistant turns alternate."""

from __future__ import annotations

from typing import Any

from core.context.digest import DIGEST_MARK
from core.llm.tokens import TokenCounter
from core.model import ConversationMessage

SUMMARY_MARK = "[Summary of the earlier conversation"
ACK = "(Noted; continuing from there.)"  # short: it is only there to alternate turns
# Where the request would start with the model's turn (the user left the first messages out):
# providers want the user's turn first (Anthropic refuses anything else).
LEAD = "(The conversation's first messages are left out of this request.)"


# What the model reads where an answer of its own stopped unfinished: a few neutral words it can
# use (the sentence the user was shown is for the user, and says "Continue" and "Retry").
UNFINISHED = {
    "stopped": "stopped by the user here",
    "max_tokens": "cut off at the output limit here",
    "app_closed": "interrupted here: the app closed",
    "stream_interrupted": "interrupted here: the connection broke",
    "timeout": "interrupted here: the provider stopped answering",
    "step_limit": "paused here at the step limit",
    "cost_cap": "paused here at the spending cap",
}


def unfinished_marker(m: ConversationMessage) -> str:
    kind = m.error.type if m.error is not None else ""
    return f"[unfinished: {UNFINISHED.get(kind, 'interrupted here')}]"


def error_projection(m: ConversationMessage) -> dict[str, Any]:
    """An unfinished answer as the model sees it: its text, then one short neutral marker (an
    anchor for a later "continue")."""
    marker = unfinished_marker(m)
    partial = m.text()
    return {"role": "assistant", "content": f"{partial}\n\n{marker}" if partial else marker}


def project_entries(entries: list[ConversationMessage]
                    ) -> tuple[list[dict[str, Any]], list[int]]:
    """`entries` as the model sees them: an answer and the entries continuing it (Continue after
    a stop, a cut or a crash) are one assistant message, their texts joined, as the window shows
    them; only where the chain ends unfinished does the marker follow. Also returns, per entry,
    the index of the message it went into."""
    out: list[dict[str, Any]] = []
    into: list[int] = []
    chain_end, joined = "", ""  # the id of the last entry merged into out[-1], its text so far
    for m in entries:
        p = project(m)
        if m.continues and m.continues == chain_end and out and not out[-1].get("tool_calls"):
            head = joined
            joined += m.text()
            content = p.get("content")
            p = {**p, "content": head + content if isinstance(content, str) else head}
            out[-1] = p
        else:
            out.append(p)
            joined = m.text() if m.role == "assistant" else ""
        into.append(len(out) - 1)
        chain_end = m.id if m.role == "assistant" else ""
    return out, into


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
    acknowledgement between them, so user and assistant turns alternate; messages that start
    with the model's turn get a short user message (`LEAD`) before them."""
    out: list[dict[str, Any]] = []
    if messages and messages[0].get("role") != "user":
        out.append({"role": "user", "content": LEAD})
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


def summary_tokens(m: ConversationMessage, counter: TokenCounter) -> int:
    """What a summary entry costs in a request, in our counting: it is sent framed as the
    user's turn (the one size of a summary: the notice, the history and the meter agree)."""
    return counter.openai_message(summary_projection(m))

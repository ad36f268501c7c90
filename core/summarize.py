"""Compaction's LLM stage as an engine step: the running summary of a conversation.

Merges the entries no summary covers yet (outside the recent rounds) into the running summary
(`core.context.summary` plans it and writes the prompt) and appends it as a `kind=summary` entry.
Only appends: a failed, empty, cut or oversized summary leaves the log as it was and says why.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from core.context.projection import summary_tokens
from core.context.report_text import calibrated
from core.context.service import ProjectContext
from core.context.summary import (
    MIN_SECTIONS,
    SECTIONS,
    NothingToSummarize,
    chunks,
    messages_for,
    missing_sections,
    plan_summary,
    summary_words,
)
from core.cost import cost_of
from core.give_way import give_way
from core.llm.adapter import Finished, LLMClient, LLMRequest, TextDelta, Usage
from core.llm.errors import LLMError
from core.model import ConversationMessage, Measured
from core.settings import LLMSettings
from core.store.errors import ReadOnlyError
from core.turn_events import (
    CompactionFinished,
    CompactionProgress,
    CompactionStarted,
    EngineEvent,
)

MIN_SUMMARY_OUTPUT = 512  # tokens a summary may always take, whatever the answers' limit
MIN_AUTO_GAIN = 1000  # tokens an automatic summary must save (covered less its own length)


def article(n: int) -> str:
    """"a" or "an" before the number `n` read aloud: an 86-token, an 11,000-token, a 92-token."""
    digits = str(abs(n))
    lead = int(digits[:len(digits) % 3 or 3])
    return "an" if digits.startswith("8") or lead in (11, 18) else "a"


class _SummaryRejected(Exception):
    """A summarizer's answer that may not stand in for the entries."""


async def summarize(
    context: ProjectContext, client: LLMClient, conv_id: str, settings: LLMSettings,
    focus: str | None = None, automatic: bool = False,
) -> AsyncIterator[EngineEvent]:
    """Write the conversation's next summary and append it (through the project's log
    writer); events say what happened."""
    store = context.store
    if not store.writable:
        raise ReadOnlyError(store.read_only_reason or "the project is read-only")
    history = store.load(conv_id).messages
    counter = context.counter(settings.model)
    try:
        plan = plan_summary(history, counter, pause=give_way)
    except NothingToSummarize as e:
        yield CompactionFinished("skipped", str(e), automatic=automatic)
        return
    words = summary_words(plan.covered_tokens)
    if automatic and plan.covered_tokens - words * 4 // 3 < MIN_AUTO_GAIN:
        # a request (on a small local model, a slow one) to save a few dozen tokens
        yield CompactionFinished("skipped", f"only {plan.covered_tokens:,} tokens of older "
                                 "history could be summarized, too few to be worth a request "
                                 f"(it waits until it would save {MIN_AUTO_GAIN:,})",
                                 automatic=automatic)
        return
    model = settings.summary_model or settings.model
    # Never under 512: an answer limit set low for chat (64 on a small local model) would cut
    # every summary; the window check below says when even 512 leaves no room.
    max_out = min(max(settings.max_output_tokens, MIN_SUMMARY_OUTPUT), max(512, words * 2))
    own = settings.model_copy(update={
        "model": model, "max_output_tokens": max_out,
        "context_window": settings.context_window if model == settings.model else None})
    budget = context.budget(None, own)
    sum_counter = context.counter(model)
    previous = plan.previous.text() if plan.previous is not None else ""
    # What one call may read: its window, less the instructions, the running summary
    # (as long as the answer may be) and the focus.
    # (The answer's own room is already kept out of `usable`.)
    room = budget.usable_ours - 600 - sum_counter.text(previous) - sum_counter.text(focus or "")
    if room < 500:
        yield CompactionFinished("failed", _no_room(model, budget.window, budget.reserved_output,
                                                    room), automatic=automatic)
        return
    parts = chunks(plan.entries, room, sum_counter, give_way)
    yield CompactionStarted(len(plan.entries), model, automatic, len(parts))
    started = time.monotonic()
    running = previous
    usage_total = {"prompt_tokens": 0, "completion_tokens": 0}
    try:
        for k, chunk in enumerate(parts, start=1):
            request = LLMRequest(model=model,
                                 messages=messages_for(running, chunk, focus, words),
                                 api_base=settings.api_base, max_tokens=max_out,
                                 key_name=settings.key_name,
                                 timeout=settings.request_timeout)
            answers: list[str] = []
            async for progress in _read_summary(client, request, (k, len(parts)), usage_total,
                                                answers):
                yield progress
            running = answers[0]
    except LLMError as e:
        yield CompactionFinished("failed", f"The summary failed: {e.message} Nothing was "
                                 "changed; the no-LLM stages carry the requests.",
                                 automatic=automatic)
        return
    except _SummaryRejected as e:
        yield CompactionFinished("failed", f"The summary was not kept: {e}. Nothing was "
                                 "changed.", automatic=automatic)
        return
    except asyncio.CancelledError:
        yield CompactionFinished("stopped", "Summary stopped; nothing was changed.",
                                 automatic=automatic)
        return
    entry = counter.with_count(ConversationMessage(
        role="system", kind="summary", content=running, covers=plan.covers, model=model,
        usage=usage_total, cost_usd=cost_of(model, usage_total), status="ok",
        duration_ms=int((time.monotonic() - started) * 1000)))
    after = summary_tokens(entry, counter)
    if after >= plan.covered_tokens:
        yield CompactionFinished(
            "failed", f"The summary was not kept: it is larger ({after:,} tokens) than what "
            f"it would stand for ({plan.covered_tokens:,}). Nothing was changed.",
            automatic=automatic)
        return
    # shown as every figure is: calibrated for the conversation's model; its size is kept
    # with it as shown here (the Inspector's compaction history gives the same figure later)
    factor = context.calibration.factor(settings.model) if context.calibration else 1.0
    before, now = round(plan.covered_tokens * factor), round(after * factor)
    entry = entry.model_copy(update={"measured": Measured(tokens=now, calibration=factor)})
    written = context.writer.write(conv_id, [entry], "the summary")
    for event in written.events:
        yield event
    entry = written.entries[0]
    cost = entry.cost_usd
    if not written.ok:
        yield CompactionFinished("failed", "The summary could not be saved; nothing was "
                                 "changed.", automatic=automatic)
        return
    covered = len(plan.entries) + (1 if plan.previous is not None else 0)
    price = f", cost ${cost:.4f}" if cost is not None else ""
    yield CompactionFinished(
        "ok", f"Summarized {covered:,} entries with {model}: {before:,} tokens of history "
              f"(as logged, outputs whole) → {article(now)} {now:,}-token summary{price}"
              f"{calibrated(factor, ' (', ')')}.",
        entry, covered, before, now, cost, automatic)


def _no_room(model: str, window: int, reserved: int, room: int) -> str:
    """Why no summary can be read at this window, and the fix that fits: a smaller answer
    where the answer's room is what crowds the window out, else a larger window."""
    head = (f"{model}'s window ({window:,} tokens) leaves no room to read the conversation "
            f"for a summary ({reserved:,} are kept for the summary itself)")
    if reserved + room >= 500 + 256:  # a smaller answer would make room
        return (f"{head}; lower the summary's output limit (--max-tokens, or Settings → Max "
                "output tokens) or choose a summary model with a larger window. Nothing was "
                "changed.")
    return f"{head}; choose a summary model with a larger window. Nothing was changed."


async def _read_summary(client: LLMClient, request: LLMRequest, part: tuple[int, int],
                        usage_total: dict[str, int], answers: list[str]
                        ) -> AsyncIterator[EngineEvent]:
    """Stream one summarizing call, saying how far it got; its answer goes into `answers`
    (a generator cannot return it) and its usage into `usage_total`.

    Raises:
        _SummaryRejected: the answer was cut at the output limit, or is empty.
    """
    text: list[str] = []
    finish = None
    shown = 0
    async for ev in client.stream(request):
        if isinstance(ev, TextDelta):
            text.append(ev.text)
            chars = sum(map(len, text))
            if chars - shown >= 400:
                shown = chars
                yield CompactionProgress(part[0], part[1], chars)
        elif isinstance(ev, Usage):
            usage_total["prompt_tokens"] += ev.prompt_tokens
            usage_total["completion_tokens"] += ev.completion_tokens
        elif isinstance(ev, Finished):
            finish = ev.reason
    answer = "".join(text).strip()
    if finish == "length":
        raise _SummaryRejected(
            f"the summary reached its output limit ({request.max_tokens:,} tokens) and was "
            "cut off")
    if not answer:
        raise _SummaryRejected("the model returned an empty summary")
    missing = missing_sections(answer)
    if len(SECTIONS) - len(missing) < MIN_SECTIONS:
        raise _SummaryRejected(
            f"the model's answer is not a summary: it has {len(SECTIONS) - len(missing)} of "
            f"the {len(SECTIONS)} sections asked for (missing: {', '.join(missing)}); it "
            f"began: {answer[:120]!r}. A model that follows instructions better can write it "
            "(Settings → Summary model, or --summary-model)")
    answers.append(answer)

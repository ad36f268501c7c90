"""build_request: the one function every LLM request goes through, in every mode.

    history (the log) --candidates--> units (messages, complete tool-call groups) --compaction
    (the sticky view, or made anew) and trim to budget--> normalize --> [system prefix] +
    messages, and a BuildReport that says, for every log entry, what happened to it and why.

The request is made by a pipeline of stages, each a small object with a written contract
(`BuildStage`, core/context/stages.py), run in this order over one `Draft`:

    candidates -> sticky view -> tool outputs -> key messages -> digest -> trim -> normalize

(core/context/candidates.py, pipeline.py and fit.py). A tool call is never separated from its
results and the latest user message is never left out: when even that does not fit, the build
fails with BudgetError.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from core.context.budget import Budget, BudgetError
from core.context.candidates import BuildCache
from core.context.fit import NormalizeStage, TrimStage
from core.context.instructions import Instructions
from core.context.pipeline import (
    CandidateStage,
    DigestStage,
    KeyMessageStage,
    StickyViewStage,
    ToolOutputStage,
)
from core.context.projection import ACK
from core.context.prompts import PromptComposer
from core.context.report import BuildReport, Decisions, ms_since
from core.context.stages import BuildStage, Draft
from core.llm.tokens import REPLY_PRIMER, TokenCounter
from core.model import ConversationMessage, Mode
from core.workflows.state import RunContext

# What callers import from here (ACK and BudgetError are defined where they are used).
__all__ = ["ACK", "BudgetError", "BuildCache", "BuiltRequest", "build_request"]

USER_MESSAGE_CAP = 20
RECENT_ROUNDS = 2

CANDIDATES: BuildStage = CandidateStage()
# After the candidates (and any stages a caller adds there), in order.
PIPELINE: tuple[BuildStage, ...] = (StickyViewStage(), ToolOutputStage(), KeyMessageStage(),
                                    DigestStage(), TrimStage(), NormalizeStage())


@dataclass
class BuiltRequest:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    report: BuildReport


def build_request(
    history: list[ConversationMessage],
    mode: Mode,
    *,
    model: str,
    budget: Budget,
    counter: TokenCounter,
    composer: PromptComposer,
    run_context: RunContext | None = None,
    tools: list[dict[str, Any]] | None = None,
    user_cap: int = USER_MESSAGE_CAP,
    recent_rounds: int = RECENT_ROUNDS,
    cache: BuildCache | None = None,
    stages: list[BuildStage] | None = None,
    persona: str | None = None,
    compact: bool = True,
    update_view: bool = True,
    disk_view: dict[str, Any] | None = None,
    count_tools: bool = True,
    instructions: Instructions | None = None,
) -> BuiltRequest:
    """The request for `history` (see the module's doc).

    Args:
        stages: further stages, run right after the candidates (a `CompressionStage` rewrites
            entries, past the trigger).
        update_view: False for a what-if build (another budget, nothing sent) that must not
            replace the sticky view in `cache` for the real requests (see
            core.context.view).
        disk_view: the sticky view saved on disk for the conversation, for a cache that has
            none yet (a new process).
        count_tools: False when the server leaves the tools out of the prompt (they are
            sent, and cost nothing).
        instructions: the project's instructions (AGENTS.md), a part of the system prefix
            counted on its own ("instructions" in the report's totals).

    Raises:
        BudgetError: even the system prefix and the latest user message do not fit.
    """
    started = time.perf_counter()
    tools = list(tools or [])
    report = BuildReport(model, mode, budget.window, budget.usable, budget.reserved_output,
                         budget.safety, budget.source, budget.note, calibration=budget.calibration)
    system_msg = {"role": "system", "content": composer.compose(
        mode, run_context, persona, instructions.text if instructions else None)}
    system_tokens = counter.openai_message(system_msg)
    tools_tokens = counter.text(json.dumps(tools)) if tools and count_tools else 0
    report.tools_offered = [(str(t.get("function", {}).get("name", "")),
                             _schema_tokens(counter, t) if count_tools else 0) for t in tools]
    draft = Draft(history, budget, counter, report, cache or BuildCache(),
                  system_tokens + tools_tokens + REPLY_PRIMER, user_cap, recent_rounds,
                  compact, update_view, disk_view,
                  instructions=instructions.fingerprint if instructions else 0)
    if instructions is not None:
        report.instructions, report.instructions_sent = instructions.name, True
        # exactly what leaving them out saves (the separators included)
        without = counter.openai_message(
            {"role": "system", "content": composer.compose(mode, run_context, persona)})
        report.totals["instructions"] = max(0, system_tokens - without)
    try:
        for stage in (CANDIDATES, *(stages or ()), *PIPELINE):
            stage.run(draft)
    except BudgetError as e:
        directive = 0 if run_context is None else system_tokens - counter.openai_message(
            {"role": "system", "content": composer.compose(
                mode, None, persona, instructions.text if instructions else None)})
        # in the figures shown everywhere: calibrated, against the usable budget
        shown = report.shown
        raise BudgetError(shown(e.needed), budget.usable, [
            (what, shown(tokens), do) for what, tokens, do in minimum_parts(
                e.needed - draft.prefix_tokens, system_tokens, tools_tokens, directive,
                report.totals.get("instructions", 0), instructions)]) from None
    if update_view:
        draft.cache.view = draft.view
    _account(draft, system_tokens, tools_tokens)
    report.elapsed_ms = ms_since(started)
    return BuiltRequest([system_msg, *draft.messages], tools, report)


def minimum_parts(message: int, system: int, tools: int, directive: int, instructions: int,
                  source: Instructions | None) -> list[tuple[str, int, str]]:
    """What the smallest request is made of, each part with what shortens it."""
    parts = [("your latest message", message, "Shorten the message"),
             ("the tool definitions", tools, "Offer fewer tools (an agent with fewer, or MCP "
                                             "servers switched off)"),
             ("the workflow's directive", directive,
              "Shorten the workflow (its goal, steps and briefs)"),
             ("the rest of the system prompt", system - directive - instructions,
              "Shorten the system prompt (an agent's instructions)")]
    if source is not None:
        parts.append((f"the project's instructions in {source.name}", instructions,
                      f"Shorten {source.name}"))
    return parts


_SCHEMA_TOKENS: dict[tuple[str, str], int] = {}  # (encoding, a tool's schema) -> its tokens


def _schema_tokens(counter: TokenCounter, tool: dict[str, Any]) -> int:
    """One tool's schema in tokens (counted once per process: the schemas do not change)."""
    key = (counter.encoding_name, json.dumps(tool, sort_keys=True))
    if key not in _SCHEMA_TOKENS:
        if len(_SCHEMA_TOKENS) > 4096:
            _SCHEMA_TOKENS.clear()
        _SCHEMA_TOKENS[key] = counter.text(key[1])
    return _SCHEMA_TOKENS[key]


def _account(draft: Draft, system_tokens: int, tools_tokens: int) -> None:
    """The report's per-entry decisions and totals, from what the stages decided."""
    report, plan, keep, left_out = draft.report, draft.plan, draft.keep, draft.left_out
    cands = draft.cands
    staged = draft.staged
    digest_tokens = plan.digest_tokens if plan is not None else 0
    with_digest = plan is not None and bool(plan.digest)
    if plan is not None:
        staged.update(plan.staged)
    report.decisions = Decisions(
        draft.cache.excluded, cands, draft.units, keep, draft.reasons, draft.kept_items,
        draft.counter, [n for n in draft.notes if n.action == "synthetic"], staged,
        digested={n for n in left_out if not keep[n]} if with_digest else set(),
        digest=(f"digest of the {len(left_out):,} left-out parts of the conversation",
                digest_tokens) if with_digest else None)
    report.normalize_notes = [f"{n.action}: {n.reason}" for n in draft.notes]
    history_tokens = draft.used - draft.fixed
    summary_tokens = sum(cands[i][1] for i in draft.kept_items if cands[i][0].kind == "summary")
    summary_tokens += digest_tokens
    instructions = report.totals.get("instructions", 0)
    report.totals = {"system": system_tokens - instructions, "instructions": instructions,
                     "tools": tools_tokens,
                     "summary": summary_tokens,
                     "history": history_tokens + REPLY_PRIMER - summary_tokens + digest_tokens,
                     "reserved": draft.budget.reserved_output}
    report.used = draft.used
    report.provider_estimate = round(draft.used * draft.budget.calibration)

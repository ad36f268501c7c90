"""Compression stages: the interface the compression pipeline plugs into.

When a conversation outgrows its budget (usage above the trigger, default 80% of the usable
budget), the builder runs its stages in order, cheapest first, until usage is at or below the
target (default 50%); the last-resort trimming of whole rounds runs after them.

Contract of a stage (`CompressionStage.compress`):
- It receives the candidate entries (log entries that take part in the context, in log order),
  the token budget it should aim for, and the token counter.
- It returns entries to use *instead*, plus one decision per entry it changed: (id, decision,
  reason), the decision one of previewed | referenced | summarized | digested. It may replace an
  entry by a shorter one (a preview of a tool output with a reference to the full text on disk),
  or several entries by one summary entry that `covers` them; it must never reorder entries,
  separate a tool call from its results, or touch the latest user message or pinned entries.
- A changed entry is a new value with a fresh token count, or none: the builder discards the
  cached counts of a copy (they are the original's, and would make the change save nothing).
- Stages are pure planners: they run inside every build (the meter and the Inspector preview
  them on the window's thread), so they do no I/O and call no model. What calls an LLM (the
  summary) or appends an entry is an async step of the engine.
- It must not raise for an ordinary overflow: when it cannot reach the target it returns what it
  managed and lets the next stage (and finally trimming) continue.
- It does no I/O the user cannot see; anything it persists (offloaded outputs, summaries) is a
  log entry or a file under `.workbench/`, and is reversible.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from core.llm.tokens import TokenCounter
from core.model import ConversationMessage

TRIGGER = 0.80
TARGET = 0.50


@dataclass
class StageResult:
    entries: list[ConversationMessage]
    decisions: list[tuple[str, str, str]] = field(default_factory=list)  # (id, action, reason)


class CompressionStage(ABC):
    """One step of the compression pipeline (see the module's contract)."""

    name = "stage"

    @abstractmethod
    def compress(
        self, entries: list[ConversationMessage], target_tokens: int, counter: TokenCounter
    ) -> StageResult:
        """Return entries that use fewer tokens, aiming at `target_tokens` in total."""


class NoCompression(CompressionStage):
    """The do-nothing stage: the builder's behaviour until real stages are configured."""

    name = "none"

    def compress(
        self, entries: list[ConversationMessage], target_tokens: int, counter: TokenCounter
    ) -> StageResult:
        return StageResult(entries)

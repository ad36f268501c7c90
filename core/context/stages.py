"""Build stages: the steps every request is built by, and the contract each of them keeps.

`build_request` (core/context/builder.py) makes a `Draft` and hands it to its stages in order:

    candidates -> [stages given by the caller] -> sticky view (the last compaction, reused) ->
    tool outputs -> key messages -> digest -> last-resort trim -> normalize

Each stage is a small object with one method, `BuildStage.run`, whose docstring is the contract.
The three compaction stages (tool outputs, key messages, digest) only work when the sticky view
could not be reused and a new compaction is due (see core/context/compaction.py and
core/context/view.py); the last two make whatever is left fit the budget and the protocol.

A caller's stage of the entry-rewriting kind (`CompressionStage`, a preview of long outputs, a
summary standing for several entries) runs right after the candidates, only when usage passes
the trigger (default 80% of the usable budget); it aims at the target (default 50%).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from core.context.budget import Budget
from core.context.candidates import BuildCache
from core.context.memo import Compaction, CompactionMemo
from core.context.normalize import Note
from core.context.report import DECISIONS, BuildReport, ms_since
from core.context.units import Unit
from core.context.view import Key, StickyView
from core.llm.tokens import TokenCounter
from core.model import ConversationMessage

TRIGGER = 0.80
TARGET = 0.50


@dataclass(eq=False)
class Compacting:
    """A new compaction while its stages make it (the sticky view could not be reused).

    Attributes:
        key: what it is made for (see `StickyView.key`).
        plan: what the stages decided so far, over a copy of the candidates.
        target: the history's tokens the compaction aims at.
        first: the oldest unit that could still be sent (see `compaction.horizon`).
        tail: the first unit of the recent tail the stages leave untouched.
        protected: units no stage shortens or leaves out.
        over: tokens still over the target after the tool-output stage.
        reserve: the room selection kept for the digest.
        before: what was left out before selection (selection may run again).
        chosen: how many units selection chose besides the mandatory ones.
        selection: the key-message stage's row in the report (a second selection updates it).
    """

    key: Key
    plan: Compaction
    target: int
    first: int = 0
    tail: int = 0
    protected: set[int] = field(default_factory=set)
    over: int = 0
    reserve: int = 0
    before: dict[int, str] = field(default_factory=dict)
    chosen: int = 0
    selection: dict[str, Any] | None = None


@dataclass(eq=False)
class Draft:
    """A request in the making, handed from stage to stage.

    Attributes:
        history: the log, as given to `build_request` (never changed).
        cache: the conversation's build cache (a stage that rewrites entries swaps in a fresh
            one: a rewritten view is not the log).
        prefix_tokens: what every request carries besides the history: the system prompt,
            the tools and the reply primer.
        cands: the candidates, (entry, tokens), in the order they are sent; `units` group them.
        staged: entry id -> (decision, reason, stage, tokens before) for entries a stage
            changed.
        plan: the compaction in use (the sticky view's or new), once decided; its digest is
            part of `fixed`.
        view: the sticky view for the cache, for the next builds (None: none).
        update_view, disk_view: whether `view` goes into the cache (False: a what-if build);
            the sticky view saved on disk, for a cache that has none yet.
        compacting: the new compaction while its stages make it.
        keep, reasons, left_out: per unit, whether it is sent, why not, and what the digest
            stands for.
        messages, notes, kept_items, used: the normalized request, what normalizing changed,
            the candidates sent and the tokens of it all (set by the last stage).
    """

    history: list[ConversationMessage]
    budget: Budget
    counter: TokenCounter
    report: BuildReport
    cache: BuildCache
    prefix_tokens: int
    user_cap: int
    recent_rounds: int
    compact: bool = True
    update_view: bool = True
    disk_view: dict[str, Any] | None = None
    instructions: int = 0  # the project instructions' fingerprint (0: none), for the sticky view
    cands: list[tuple[ConversationMessage, int]] = field(default_factory=list)
    units: list[Unit] = field(default_factory=list)
    staged: dict[str, tuple[str, str, str, int]] = field(default_factory=dict)
    plan: Compaction | None = None
    view: StickyView | None = None
    compacting: Compacting | None = None
    keep: list[bool] = field(default_factory=list)
    reasons: dict[int, str] = field(default_factory=dict)
    left_out: dict[int, str] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    kept_items: list[int] = field(default_factory=list)
    used: int = 0

    @property
    def fixed(self) -> int:
        """Tokens sent whatever the history's units: the prefix, and the digest if any."""
        return self.prefix_tokens + (self.plan.digest_tokens if self.plan is not None else 0)

    @property
    def usable(self) -> int:
        """The budget the stages fit the request into (in our own counting)."""
        return self.budget.usable_ours

    def history_tokens(self) -> int:
        return sum(u.tokens for u in self.units)

    def memo(self) -> CompactionMemo:
        """The per-entry memo of the compaction stages, for this build's tokenizer."""
        return self.cache.memo.for_encoding(self.counter.encoding_name)


class BuildStage(ABC):
    """One step of request building (see the module's doc for the order)."""

    name = "stage"

    @abstractmethod
    def run(self, draft: Draft) -> None:
        """Carry the request in `draft` one step further.

        Receives the draft as the stages before it left it: the candidates and their units,
        and whatever compaction, trimming or normalizing was decided so far.

        May change the draft's candidates, units and per-unit decisions, and the plan's
        previews and digest; a changed entry is a new value (a copy) with a fresh token count,
        and the log (`draft.history`) is never changed.

        Must never separate an assistant tool call from its results (units stay whole: they
        are sent or left out together), reorder entries, or leave out the latest user message
        (when even that does not fit, the last stage fails the build with BudgetError). Must
        not shorten pinned entries, summaries or the latest call of a protected tool (the todo
        list); only the last two stages may leave them out, as a last resort. Does no
        I/O and calls no model (stages run in every build, the meter's on the window's thread
        too), and does not raise for an ordinary overflow: it does what it can and leaves the
        rest to the stages after it.

        Records what it did in the report: one row in `draft.report.stages` ({"name", "ms"}
        and its counts) when it did any work, and for each entry it changed or left out a
        decision with its reason (`draft.staged`, `draft.reasons`), which the report shows per
        log entry.
        """


@dataclass
class StageResult:
    entries: list[ConversationMessage]
    decisions: list[tuple[str, str, str]] = field(default_factory=list)  # (id, action, reason)


class CompressionStage(BuildStage):
    """A stage that rewrites candidate entries: implement `compress`.

    It runs only when usage passes the trigger. `compress` receives the candidate entries (in
    the order sent), the tokens the history should aim for and the counter, and returns the
    entries to use instead, with one (id, decision, reason) per entry changed: a shorter copy
    (a preview), or one summary entry that `covers` several. The builder counts a changed entry
    afresh (a copy keeps its original's cached counts, which would make the change save
    nothing), and takes the candidates again from the result; an entry replaced is reported
    with its decision (summarized unless said otherwise). The contract of `BuildStage.run`
    holds for `compress` too.
    """

    def run(self, draft: Draft) -> None:
        if draft.prefix_tokens + draft.history_tokens() <= TRIGGER * draft.usable:
            return
        t = time.perf_counter()
        originals = {m.id: (m, tokens) for m, tokens in draft.cands}
        target = int(TARGET * draft.usable) - draft.prefix_tokens
        result = self.compress([m for m, _ in draft.cands], target, draft.counter)
        entries = [m if originals.get(m.id, (None, 0))[0] is m or not m.token_counts
                   else m.model_copy(update={"token_counts": {}}) for m in result.entries]
        for entry_id, action, why in result.decisions:
            before = originals[entry_id][1] if entry_id in originals else 0
            decision = action if action in DECISIONS else "previewed"
            draft.staged[entry_id] = (decision, why, self.name, before)
        draft.report.stages.append({"name": self.name, "ms": ms_since(t),
                                    "changed": len(result.decisions)})
        if any(m is not originals.get(m.id, (None, 0))[0] for m in entries) or \
                len(entries) != len(originals):
            self._take(draft, entries, originals)

    def _take(self, draft: Draft, entries: list[ConversationMessage],
              originals: dict[str, tuple[ConversationMessage, int]]) -> None:
        """Candidates made afresh from `entries`: a rewritten view is not the log."""
        excluded = draft.cache.excluded  # left out before any stage: still in the report
        cache = draft.cache = BuildCache()
        cache.prepare(entries, draft.counter)
        cache.excluded = excluded + cache.excluded
        kept_ids = {m.id for m in entries}
        for m, tokens in originals.values():  # replaced by a stage (e.g. a summary)
            if m.id not in kept_ids:
                decision, why, stage_name, _ = draft.staged.get(
                    m.id, ("summarized", "replaced by a stage", "", tokens))
                cache.excluded.append((m, f"{decision}: {why} ({stage_name})"))
        draft.cands, draft.units = cache.cands, cache.units

    @abstractmethod
    def compress(
        self, entries: list[ConversationMessage], target_tokens: int, counter: TokenCounter
    ) -> StageResult:
        """Return entries that use fewer tokens, aiming at `target_tokens` in total."""


"""The stages of a build up to the compaction: candidates, the sticky view, and the three
no-LLM compaction stages (tool outputs, key messages, digest) that make a new one when the
sticky view cannot be reused. The contract they keep is `BuildStage.run`
(core/context/stages.py); what each stage plans is in core/context/compaction.py,
core/context/fold.py and core/context/digest.py, what is reused between builds in
core/context/view.py.
"""

from __future__ import annotations

import time
from dataclasses import replace

from core.context.compaction import (
    horizon,
    protected_units,
    select,
    tail_excess,
    tail_start,
    tool_outputs,
)
from core.context.digest import digest, digest_caps
from core.context.fold import fold_units
from core.context.memo import Compaction, CompactionMemo
from core.context.projection import ack_tokens
from core.context.report import ms_since
from core.context.stages import TARGET, TRIGGER, BuildStage, Compacting, Draft
from core.context.units import Unit
from core.context.view import StickyView, reuse
from core.context.view import from_json as view_from_json
from core.llm.tokens import TokenCounter

OPENING_TOKENS = 22  # what the digest keeps of a left-out request: its opening


class CandidateStage(BuildStage):
    """The log's entries that take part, counted and grouped into units (see `BuildCache`)."""

    name = "candidates"

    def run(self, draft: Draft) -> None:
        t = time.perf_counter()
        draft.cache.prepare(draft.history, draft.counter)
        draft.cands, draft.units = draft.cache.cands, draft.cache.units
        draft.report.stages.append({"name": self.name, "ms": ms_since(t)})


class StickyViewStage(BuildStage):
    """Past the trigger, the sticky view: the compaction of an earlier build, extended with
    what came after it, when it still holds (see core/context/view.py); otherwise a new
    compaction is started for the next three stages, and the report says why. Below the
    trigger the whole history is sent, and no sticky view stays."""

    name = "reused"

    def run(self, draft: Draft) -> None:
        draft.view = draft.cache.view
        if not draft.compact:
            return
        fixed, usable = draft.prefix_tokens, draft.usable
        limit = TRIGGER * usable
        if fixed + draft.history_tokens() <= limit:
            draft.view = None  # below the trigger: the whole history is sent again
            return
        t = time.perf_counter()
        cache, counter, report = draft.cache, draft.counter, draft.report
        key = (counter.encoding_name, draft.budget.usable, fixed, draft.recent_rounds,
               draft.instructions)
        view = draft.view
        if view is None and draft.disk_view is not None and not cache.reset:
            view = view_from_json(draft.disk_view, draft.cands, draft.units, counter, draft.memo())
        reused = reuse(view, key, draft.cands, draft.units, limit - fixed, usable - fixed)
        if isinstance(reused, str) or view is None:
            report.compaction = "new compaction: " + (
                cache.reset if cache.reset and view is None else str(reused))
            plan = Compaction(list(draft.cands), [u.tokens for u in draft.units])
            draft.compacting = Compacting(key, plan, int(TARGET * (usable - fixed)))
            return
        plan, draft.units = reused
        view.builds += int(draft.update_view)
        report.compaction = f"the kept compaction, reused ({view.builds} since it was made)"
        report.stages.append({"name": self.name, "ms": ms_since(t), "builds": view.builds,
                              "left out": len(plan.left_out), "changed": len(plan.staged)})
        draft.view, draft.plan, draft.cands = view, plan, plan.cands


class ToolOutputStage(BuildStage):
    """A new compaction's first stage: old tool outputs (and long arguments of old calls)
    become previews, then one-line references, oldest first, until the history reaches the
    target (`compaction.tool_outputs`). The recent tail and protected units stay as they are,
unless the tail alone exceeds its share of the target: then its outputs are shortened too."""

    name = "tool outputs"

    def run(self, draft: Draft) -> None:
        work = draft.compacting
        if work is None:
            return
        t = time.perf_counter()
        plan, units, target = work.plan, draft.units, work.target
        work.protected = protected_units(plan, units)
        work.first = horizon(units, plan.unit_tokens, target)
        work.tail = max(work.first,
                        tail_start(units, plan.unit_tokens, draft.recent_rounds, target))
        over = sum(plan.unit_tokens) - target
        work.over = tool_outputs(plan, units, work.tail, over, draft.counter, draft.memo(),
                                 work.first, work.protected)
        need = min(work.over, tail_excess(plan.unit_tokens, work.tail,
                                          draft.usable - draft.prefix_tokens))
        if need > 0:  # previews first: they save enough more often than not
            work.over -= need - tool_outputs(plan, units, len(units), need, draft.counter,
                                             draft.memo(), work.tail, work.protected,
                                             recent=True)
        draft.report.stages.append({"name": self.name, "ms": ms_since(t),
                                    "changed": len(plan.staged)})


class KeyMessageStage(BuildStage):
    """When previews were not enough: the mandatory units and the best-scoring others are
    kept within the target less the room the digest will take, the rest left out whole
    (`compaction.select`)."""

    name = "key messages"

    def run(self, draft: Draft) -> None:
        work = draft.compacting
        if work is None or work.over <= 0:
            return
        t = time.perf_counter()
        plan, units, usable, target = work.plan, draft.units, draft.usable, work.target
        cap = digest_caps(usable, usable)[0]
        # Room for the digest: every request left out keeps its opening there.
        openings = sum(min(plan.unit_tokens[n], OPENING_TOKENS) for n in range(work.tail)
                       if units[n].user)
        work.reserve = min(target // 2, max(min(cap, max(200, target // 10)), openings + 80))
        work.before = dict(plan.left_out)
        work.chosen = select(plan, units, work.tail, target - work.reserve, draft.memo(),
                             work.first, work.protected, logged=draft.cands)
        work.selection = {"name": self.name, "ms": ms_since(t), "changed": len(plan.left_out)}
        draft.report.stages.append(work.selection)


class DigestStage(BuildStage):
    """One message standing for what selection left out (`digest.digest`), within what
    the request has left; then the new compaction is the one in use, and the sticky view of
    the builds after this one (unless even it could not get under the trigger: then it may
    grow to the whole budget, so the request's prefix stays the same)."""

    name = "digest"

    def run(self, draft: Draft) -> None:
        work = draft.compacting
        if work is None:
            return
        if work.over > 0:
            self._make(draft, work)
        _settle(draft, work)

    def _make(self, draft: Draft, work: Compacting) -> None:
        t = time.perf_counter()
        plan, units, usable = work.plan, draft.units, draft.usable
        memo = draft.memo()
        _fit_digest(plan, units, draft.prefix_tokens, usable, draft.counter, memo)
        if work.chosen and plan.digest_tokens > work.reserve + max(100, work.target // 20):
            # The digest took more than the room kept for it: select again with the room it
            # really takes, so the compaction lands near its target. (Past it, the next
            # builds would reach the trigger sooner and compact again: each new compaction
            # changes the request's prefix, which a provider's prompt cache needs unchanged.)
            # With only mandatory units chosen, selecting again could not do better.
            plan.left_out = work.before
            select(plan, units, work.tail, work.target - plan.digest_tokens, memo, work.first,
                   work.protected, logged=draft.cands)
            _fit_digest(plan, units, draft.prefix_tokens, usable, draft.counter, memo)
        if work.selection is not None:  # the selection's row says what it finally left out
            work.selection["changed"] = len(plan.left_out)
        if plan.left_out:
            draft.report.stages.append({"name": self.name, "ms": ms_since(t),
                                        "tokens": plan.digest_tokens})


def _settle(draft: Draft, work: Compacting) -> None:
    """The new compaction becomes the one in use, and the sticky view of later builds."""
    plan, prefix, usable = work.plan, draft.prefix_tokens, draft.usable
    units = [u if tokens == u.tokens else replace(u, tokens=tokens)
             for u, tokens in zip(draft.units, plan.unit_tokens, strict=True)]
    sent = plan.digest_tokens + sum(
        u.tokens for n, u in enumerate(units[:-1]) if n not in plan.left_out)
    draft.view = None
    if units:
        limit = TRIGGER * usable - prefix
        below = sent + units[-1].tokens <= limit
        draft.view = StickyView(work.key, len(units), replace(plan, cands=list(plan.cands)),
                                units[:-1], sent, limit if below else usable - prefix)
    draft.units, draft.plan, draft.cands, draft.compacting = units, plan, plan.cands, None


def _fit_digest(plan: Compaction, units: list[Unit], fixed: int, usable: int,
               counter: TokenCounter, memo: CompactionMemo) -> None:
    """The digest of what selection left out, within what the request has left (`fixed`:
    the tokens sent besides the history)."""
    plan.digest, plan.digest_tokens = "", 0
    if not plan.left_out:
        return
    kept = sum(t for n, t in enumerate(plan.unit_tokens) if n not in plan.left_out)
    soft, hard = digest_caps(usable, usable - fixed - kept - ack_tokens(counter))
    plan.digest, plan.digest_tokens = digest(
        fold_units(plan, units, plan.left_out, memo), max(soft, 1), counter, memo,
        hard_cap=hard)

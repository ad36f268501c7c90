"""build_request: the one function every LLM request goes through, in every mode.

    history (the log) --candidates--> units (messages, complete tool-call groups) --trim to
    budget--> normalize --> [system prefix] + messages, and a BuildReport that says, for every
    log entry, what happened to it and why.

Trimming (when over budget) keeps, in this order of priority: the system prefix, the latest user
message, pinned entries and summaries, the most recent rounds, and older user messages up to a
cap (newest first); everything else goes whole rounds at a time, oldest first. A tool call is
never separated from its results. The compression pipeline (previews, key-message selection,
summaries) plugs in as further stages before this last-resort trimming.
"""

from __future__ import annotations

import json
import operator
import time
from dataclasses import dataclass, replace
from typing import Any

from core.context.budget import Budget
from core.context.compaction import (
    DIGEST_MARK,
    PROTECTED_TOOLS,
    Compaction,
    CompactionMemo,
    digest,
    digest_caps,
    fold_units,
    horizon,
    protected_units,
    select,
    tail_start,
    tool_outputs,
)
from core.context.normalize import ABORTED_RESULT, normalize
from core.context.prompts import PromptComposer, RunContext
from core.context.report import (
    DECISIONS,
    DEFAULT_DROP_REASON,
    BuildReport,
    _Decisions,
)
from core.context.stages import TARGET, TRIGGER, CompressionStage
from core.context.summary import active_summaries
from core.context.view import KeptView, reuse
from core.context.view import from_json as view_from_json
from core.llm.tokens import REPLY_PRIMER, TokenCounter
from core.model import ConversationMessage, Mode

USER_MESSAGE_CAP = 20
RECENT_ROUNDS = 2


class BudgetError(ValueError):
    """Even the minimum (system prefix and the latest user message) does not fit."""

    def __init__(self, needed: int, usable: int) -> None:
        super().__init__(
            f"This request needs at least {needed:,} tokens (the system prompt and your latest "
            f"message), but only {usable:,} are available for input. Shorten the message or "
            "choose a model with a larger context window."
        )
        self.needed = needed
        self.usable = usable


@dataclass
class BuiltRequest:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    report: BuildReport


class BuildCache:
    """Per-conversation memo of the candidates and units of the last build.

    Log entries are immutable values and the log only grows, so when the new history starts
    with the very same objects, only the entries after them need looking at.
    """

    def __init__(self) -> None:
        self.history: list[ConversationMessage] = []
        self.cands: list[tuple[ConversationMessage, int]] = []
        self.excluded: list[tuple[ConversationMessage, str]] = []
        self.units: list[_Unit] = []
        self._last_user = -1
        self.encoding = ""
        self.memo = CompactionMemo()
        self.view: KeptView | None = None  # the last compaction, kept for later builds
        self.reset = ""  # why the last `prepare` started over (a new compaction says it)

    def fork(self) -> BuildCache:
        """A copy for a build that is never sent (a draft or another budget): it starts from
        this cache's work, and what it does stays out of this one (the per-entry memo is
        shared: entries never change)."""
        other = BuildCache()
        other.history, other.cands, other.excluded = list(self.history), list(self.cands), \
            list(self.excluded)
        other.units = list(self.units)
        if 0 <= self._last_user < len(other.units):  # `prepare` flips its flag in place
            other.units[self._last_user] = replace(other.units[self._last_user])
        other._last_user, other.encoding = self._last_user, self.encoding
        other.memo, other.view = self.memo, self.view
        return other

    def prepare(self, history: list[ConversationMessage], counter: TokenCounter) -> None:
        n = len(self.history)
        reusable = (self.encoding == counter.encoding_name and len(history) >= n
                    and all(map(operator.is_, history[:n], self.history)))
        why = "" if reusable or not n else (
            "the model changed (another tokenizer)" if self.encoding != counter.encoding_name
            else "the history changed (a pin, an exclusion, an entry included again)")
        if reusable and 0 < n < len(history) and _superseded(history[n - 1], history[n]):
            # a Retry's answer arrived: the failed attempt before it leaves
            reusable, why = False, "a retried answer replaced a failed one"
        if reusable and any(m.covers for m in history[n:]):
            # a summary arrived: what it covers leaves the candidates
            reusable, why = False, "a summary was written (compaction by the LLM)"
        self.reset = why
        if not reusable:
            self.history, self.cands, self.excluded, self.units = [], [], [], []
            self.encoding = counter.encoding_name
            self.view = None  # it decided over units that are gone
            n = 0
        before = len(self.cands)
        enc = counter.encoding_name
        append = self.cands.append
        covered = active_summaries(history) if n == 0 else {}
        last = len(history) - 1
        # A summary is appended after what it covers but stands where its first covered entry
        # was, so the model reads it before what followed.
        order = _summary_order(history, covered) if covered else range(n, len(history))
        for i in order:
            m = history[i]
            kind = m.kind
            # The common case first, inline: an ordinary entry whose count is stored with it.
            if kind == "message" and m.include_in_context and m.role != "system" \
                    and m.id not in covered:
                tokens = m.token_counts.get(enc)
                append((m, tokens if tokens is not None else counter.message(m)))
                continue
            reason = _excluded(m)
            if reason is None and m.id in covered:
                reason = f"{SUMMARIZED}: covered by summary {covered[m.id][:8]}"
            if reason is None and kind == "error" and i < last and \
                    _superseded(m, history[i + 1]):
                reason = "a failed attempt that a later answer replaced (Retry)"
            if reason:
                self.excluded.append((m, reason))
            elif kind == "error":
                append((m, counter.openai_message(error_projection(m))))
            else:
                append((m, counter.message(m)))
        self.history = list(history)
        if len(self.cands) != before or not self.units:
            # Only the last unit can grow (tool results arriving for its calls): redo from it.
            start = self.units.pop().items[0] if self.units else 0
            round_no = self.units[-1].round_no if self.units else 0
            self.units.extend(_units(self.cands, start, round_no))
        last_user = max((k for k, u in enumerate(self.units) if u.user), default=-1)
        for k in (self._last_user, last_user):
            if 0 <= k < len(self.units):
                self.units[k].latest_user = (k == last_user)
        self._last_user = last_user


def _summary_order(history: list[ConversationMessage], covered: dict[str, str]) -> list[int]:
    """History indexes with each active summary moved to its first covered entry."""
    first: dict[str, int] = {}
    for i, m in enumerate(history):
        by = covered.get(m.id)
        if by is not None and by not in first:
            first[by] = i
    at: dict[int, list[int]] = {}
    moved = set()
    for i, m in enumerate(history):
        k = first.get(m.id)
        if k is not None and k < i:
            at.setdefault(k, []).append(i)
            moved.add(i)
    order: list[int] = []
    for i in range(len(history)):
        order.extend(at.get(i, ()))
        if i not in moved:
            order.append(i)
    return order


@dataclass(slots=True)
class _Unit:
    """One or more candidates that stay together (an assistant tool call and its results)."""

    items: list[int]  # indexes into the candidate list
    round_no: int
    tokens: int
    protected: bool  # pinned or summary
    latest_user: bool = False
    user: bool = False
    tool: str = ""  # the protected tool it calls (the todo list), if any


def error_projection(m: ConversationMessage) -> dict[str, Any]:
    """An error entry as the model sees it: its partial answer, then an LLM_ERROR block, so a
    later "continue" has an anchor."""
    info = m.error
    block = (f"[LLM_ERROR type={info.type}] {info.message}" if info is not None
             else "[LLM_ERROR]")
    partial = m.text()
    return {"role": "assistant", "content": f"{partial}\n\n{block}" if partial else block}


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
    stages: list[CompressionStage] | None = None,
    persona: str | None = None,
    compact: bool = True,
    keep_view: bool = True,
    kept: dict[str, Any] | None = None,
) -> BuiltRequest:
    """The request for `history` (see the module's doc). `keep_view`: False for a what-if
    build (another budget, nothing sent) that must not replace the compaction kept in `cache`
    for the real requests (see core.context.view). `kept`: the compaction kept on disk for
    the conversation, for a cache that has none yet (a new process)."""
    started = time.perf_counter()
    tools = list(tools or [])
    report = BuildReport(model, mode, budget.window, budget.usable, budget.reserved_output,
                         budget.safety, budget.source, budget.note, calibration=budget.calibration)
    prefix = composer.compose(mode, run_context, persona)
    system_msg = {"role": "system", "content": prefix}
    system_tokens = counter.openai_message(system_msg)
    tools_tokens = counter.text(json.dumps(tools)) if tools else 0

    # 1. candidates
    t = time.perf_counter()
    cache = cache or BuildCache()
    cache.prepare(history, counter)
    cands = cache.cands
    units = cache.units
    report.stages.append({"name": "candidates", "ms": _ms(t)})

    # 1b. compression stages, when usage passes the trigger (each may shorten entries)
    fixed_tokens = system_tokens + tools_tokens + REPLY_PRIMER
    staged: dict[str, tuple[str, str, str, int]] = {}
    if stages and fixed_tokens + sum(u.tokens for u in units) > TRIGGER * budget.usable_ours:
        originals = {m.id: (m, tokens) for m, tokens in cands}
        entries = [m for m, _ in cands]
        target = int(TARGET * budget.usable_ours) - fixed_tokens
        for stage in stages:
            t = time.perf_counter()
            result = stage.compress(entries, target, counter)
            # The contract's rule, enforced: a changed entry is counted afresh (a copy keeps
            # the original's cached counts, which would make the change save nothing).
            entries = [m if originals.get(m.id, (None, 0))[0] is m or not m.token_counts
                       else m.model_copy(update={"token_counts": {}}) for m in result.entries]
            for entry_id, action, why in result.decisions:
                before = originals[entry_id][1] if entry_id in originals else 0
                decision = action if action in DECISIONS else "previewed"
                staged[entry_id] = (decision, why, stage.name, before)
            report.stages.append({"name": stage.name, "ms": _ms(t),
                                  "changed": len(result.decisions)})
        if any(m is not originals.get(m.id, (None, 0))[0] for m in entries) or \
                len(entries) != len(originals):
            excluded = cache.excluded  # left out before any stage: still in the report
            cache = BuildCache()  # a compressed view is not the log: build it afresh
            cache.prepare(entries, counter)
            cache.excluded = excluded + cache.excluded
            kept_ids = {m.id for m in entries}
            for m, tokens in originals.values():  # replaced by a stage (e.g. a summary)
                if m.id not in kept_ids:
                    decision, why, stage_name, _ = staged.get(
                        m.id, ("summarized", "replaced by a stage", "", tokens))
                    cache.excluded.append((m, f"{decision}: {why} ({stage_name})"))
            cands, units = cache.cands, cache.units

    # 1c. compaction: the no-LLM stages (see core/context/compaction.py)
    # A compaction is kept for the builds after it (see core/context/view.py) until they pass
    # the trigger.
    fixed = system_tokens + tools_tokens + REPLY_PRIMER
    plan: Compaction | None = None
    view = cache.view  # the compaction kept in the cache after this build
    limit = TRIGGER * budget.usable_ours
    if compact and fixed + sum(u.tokens for u in units) > limit:
        t = time.perf_counter()
        key = (counter.encoding_name, budget.usable, fixed, recent_rounds)
        if view is None and kept is not None and not cache.reset:
            view = view_from_json(kept, cands, units, counter,
                                  cache.memo.for_encoding(counter.encoding_name))
        reused = reuse(view, key, cands, units, limit - fixed, budget.usable_ours - fixed)
        if not isinstance(reused, str) and view is not None:
            plan, units = reused
            view.builds += int(keep_view)
            report.compaction = f"the kept compaction, reused ({view.builds} since it was made)"
            report.stages.append({"name": "reused", "ms": _ms(t), "builds": view.builds,
                                  "left out": len(plan.left_out),
                                  "changed": len(plan.staged)})
        else:
            report.compaction = "new compaction: " + (
                cache.reset if cache.reset and view is None else str(reused))
            plan = _compact(cands, units, fixed, budget.usable_ours, recent_rounds, counter,
                            cache.memo.for_encoding(counter.encoding_name), report)
            units = [u if tokens == u.tokens else replace(u, tokens=tokens)
                     for u, tokens in zip(units, plan.unit_tokens, strict=True)]
            sent = plan.digest_tokens + sum(
                u.tokens for n, u in enumerate(units[:-1]) if n not in plan.left_out)
            view = None
            if units:
                below = sent + units[-1].tokens <= limit - fixed
                view = KeptView(key, len(units), replace(plan, cands=list(plan.cands)),
                                units[:-1], sent,
                                limit - fixed if below else budget.usable_ours - fixed)
        cands = plan.cands
        fixed += plan.digest_tokens
    elif compact:
        view = None  # below the trigger: the whole history is sent again

    # 2. trim to budget: the last resort, whole old rounds, over what compaction kept
    t = time.perf_counter()
    left_out = plan.left_out if plan is not None else {}
    keep = [n not in left_out for n in range(len(units))]
    reasons: dict[int, str] = dict(left_out)
    total = fixed + sum(u.tokens for u, k in zip(units, keep, strict=True) if k)
    if total > budget.usable_ours:
        still = [n for n, k in enumerate(keep) if k]
        sub_keep = [True] * len(still)
        sub_reasons: dict[int, str] = {}
        total = _trim([units[n] for n in still], sub_keep, sub_reasons, fixed,
                      budget.usable_ours, user_cap, recent_rounds)
        for k, n in enumerate(still):
            keep[n] = sub_keep[k]
            if k in sub_reasons:
                reasons[n] = sub_reasons[k]
    if plan is not None and (total > budget.usable_ours or not all(
            keep[n] for n in range(len(units)) if n not in left_out)):
        # Trimming left out more than selection did (or the digest itself is what does not
        # fit): one digest stands for all of it, within the room that is left.
        view = None  # too tight to keep: the next build compacts afresh
        total -= plan.digest_tokens
        fixed -= plan.digest_tokens
        left_out = _redigest(plan, units, keep, reasons, budget.usable_ours - total, counter,
                             cache.memo, budget.usable_ours)
        total += plan.digest_tokens
        fixed += plan.digest_tokens
    report.stages.append({"name": "trim", "ms": _ms(t)})

    # 3. project, normalize, and make sure normalizing did not push us over
    t = time.perf_counter()
    while True:
        kept_items = [i for u, k in zip(units, keep, strict=True) if k for i in u.items]
        projected = [_project(cands[i][0]) for i in kept_items]
        if plan is not None and plan.digest:
            projected.insert(0, {"role": "user", "content": plan.digest})
        normalized, notes = normalize(projected)
        normalized = _alternate(normalized)
        extra = sum(counter.openai_message(m) for m in normalized if (m.get("content") ==
                    ABORTED_RESULT and m.get("role") == "tool") or m.get("content") == ACK)
        used = fixed + sum(cands[i][1] for i in kept_items) + extra
        if used <= budget.usable_ours:
            break
        if _drop_one_more(units, keep, reasons, recent_rounds):
            view = None
            if plan is not None and plan.digest:  # the digest stands for that one too
                fixed -= plan.digest_tokens
                synthetic = sum(counter.openai_message(m) for m in normalized
                                if m.get("content") == ABORTED_RESULT and m.get("role") == "tool")
                room = budget.usable_ours - fixed - synthetic - sum(
                    u.tokens for u, k in zip(units, keep, strict=True) if k)
                left_out = _redigest(plan, units, keep, reasons, room, counter, cache.memo,
                                     budget.usable_ours)
                fixed += plan.digest_tokens
            continue
        if plan is None or not plan.digest:
            break
        fixed -= plan.digest_tokens  # the digest goes before the request fails
        plan.digest, plan.digest_tokens = "", 0
    report.stages.append({"name": "normalize", "ms": _ms(t)})
    if used > budget.usable_ours:
        raise BudgetError(used, budget.usable_ours)
    if keep_view:
        cache.view = view

    if plan is not None:
        staged.update(plan.staged)
    report._decide = _Decisions(
        cache.excluded, cands, units, keep, reasons, kept_items, counter,
        [n for n in notes if n.action == "synthetic"], staged,
        digested={n for n in left_out if not keep[n]} if plan is not None and plan.digest
        else set(),
        digest=(f"digest of the {len(left_out):,} left-out parts of the conversation",
                plan.digest_tokens) if plan is not None and plan.digest else None)
    report.normalize_notes = [f"{n.action}: {n.reason}" for n in notes]
    history_tokens = used - fixed
    summary_tokens = sum(cands[i][1] for i in kept_items if cands[i][0].kind == "summary")
    summary_tokens += plan.digest_tokens if plan is not None else 0
    report.totals = {"system": system_tokens, "tools": tools_tokens,
                     "summary": summary_tokens,
                     "history": history_tokens + REPLY_PRIMER - summary_tokens
                     + (plan.digest_tokens if plan is not None else 0),
                     "reserved": budget.reserved_output}
    report.used = used
    report.provider_estimate = round(used * budget.calibration)
    report.elapsed_ms = _ms(started)
    return BuiltRequest([system_msg, *normalized], tools, report)


# --- helpers -----------------------------------------------------------------------------------


SUMMARIZED = "summarized"


def _superseded(m: ConversationMessage, following: ConversationMessage) -> bool:
    """An error entry directly followed by another answer that does not continue it: the user
    retried, and the new attempt stands in its place."""
    return (m.kind == "error" and following.role == "assistant"
            and following.continues != m.id)


def _excluded(m: ConversationMessage) -> str | None:
    if not m.include_in_context:
        return "left out by you (include in context is off)"
    if m.kind == "error" and not m.text() and not m.tool_calls:
        return ("a failed request with no answer text (it may never have reached a model): "
                "nothing in it for the model")
    if m.kind == "notice":
        return "a notice, not part of the conversation"
    if m.kind == "annotation":
        return f"an annotation ({m.content} {str(m.target)[:8]}…), not a message"
    if m.role == "system" and m.kind != "summary":
        return "an old system entry; the system prompt is composed for each request"
    return None


MIN_DIGEST_TOKENS = 60
SUMMARY_MARK = "[Summary of the earlier conversation"
ACK = "(Noted; continuing from there.)"  # short: it is only there to alternate turns


def summary_projection(m: ConversationMessage) -> dict[str, Any]:
    """A summary entry as the model sees it: a user message (valid for providers that want
    strict user/assistant turns, unlike a system message in the middle)."""
    covered = len(m.covers or ())
    by = f", written by {m.model}" if m.model else ""
    return {"role": "user",
            "content": f"{SUMMARY_MARK} ({covered:,} entries{by}), standing in for them:]\n"
                       f"{m.text()}"}


def _project(m: ConversationMessage) -> dict[str, Any]:
    if m.kind == "error":
        return error_projection(m)
    if m.kind == "summary":
        return summary_projection(m)
    return m.to_openai()


def _alternate(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
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


def _compact(cands: list[tuple[ConversationMessage, int]], units: list[_Unit], fixed: int,
             usable: int, recent_rounds: int, counter: TokenCounter, memo: CompactionMemo,
             report: BuildReport) -> Compaction:
    """Run the no-LLM stages down to the target; their timings go into the report."""
    plan = Compaction(list(cands), [u.tokens for u in units])
    target = int(TARGET * (usable - fixed))  # of the room history has
    t = time.perf_counter()
    protected = protected_units(plan, units)
    first = horizon(units, plan.unit_tokens, target)
    tail = max(first, tail_start(units, plan.unit_tokens, recent_rounds, target))
    over = sum(plan.unit_tokens) - target
    over = tool_outputs(plan, units, tail, over, counter, memo, first, protected)
    report.stages.append({"name": "tool outputs", "ms": _ms(t),
                          "changed": len(plan.staged)})
    if over > 0:
        t = time.perf_counter()
        cap = digest_caps(usable, usable)[0]
        # Room for the digest: every request left out keeps its opening there (~20 tokens).
        openings = sum(min(plan.unit_tokens[n], 22) for n in range(tail) if units[n].user)
        reserve = min(target // 2, max(min(cap, max(200, target // 10)), openings + 80))
        before = dict(plan.left_out)
        chosen = select(plan, units, tail, target - reserve, memo, first, protected,
                        logged=cands)
        selecting = _ms(t)
        t = time.perf_counter()
        _digest(plan, units, fixed, usable, counter, memo)
        if chosen and plan.digest_tokens > reserve + max(100, target // 20):
            # The digest took more than the room kept for it: select again with the room it
            # really takes, so the compaction lands near its target. (Past it, the next
            # builds would reach the trigger sooner and compact again: each new compaction
            # changes the request's prefix, which a provider's prompt cache needs unchanged.)
            # With only mandatory units chosen, selecting again could not do better.
            plan.left_out = before
            select(plan, units, tail, target - plan.digest_tokens, memo, first, protected,
                   logged=cands)
            _digest(plan, units, fixed, usable, counter, memo)
        report.stages.append({"name": "key messages", "ms": selecting,
                              "changed": len(plan.left_out)})
        if plan.left_out:
            report.stages.append({"name": "digest", "ms": _ms(t),
                                  "tokens": plan.digest_tokens})
    return plan


def _digest(plan: Compaction, units: list[_Unit], fixed: int, usable: int,
            counter: TokenCounter, memo: CompactionMemo) -> None:
    """The digest of what selection left out, within what the request has left."""
    plan.digest, plan.digest_tokens = "", 0
    if not plan.left_out:
        return
    kept = sum(t for n, t in enumerate(plan.unit_tokens) if n not in plan.left_out)
    soft, hard = digest_caps(usable, usable - fixed - kept - ack_tokens(counter))
    plan.digest, plan.digest_tokens = digest(
        fold_units(plan.cands, units, plan.left_out, memo), max(soft, 1), counter, memo,
        hard_cap=hard)


def ack_tokens(counter: TokenCounter) -> int:
    """What the acknowledgement after a digest or summary costs (see `_alternate`)."""
    return counter.openai_message({"role": "assistant", "content": ACK})


def _redigest(plan: Compaction, units: list[_Unit], keep: list[bool], reasons: dict[int, str],
              room: int, counter: TokenCounter, memo: CompactionMemo,
              usable: int) -> dict[int, str]:
    """Make the digest stand for every unit `keep` leaves out, within `room` (less the
    acknowledgement that may follow it); returns the left-out units and their reasons."""
    left_out = {n: reasons.get(n, DEFAULT_DROP_REASON) for n in range(len(units)) if not keep[n]}
    plan.digest, plan.digest_tokens = "", 0
    room -= ack_tokens(counter)
    if room >= MIN_DIGEST_TOKENS:
        memo = memo.for_encoding(counter.encoding_name)
        soft, hard = digest_caps(usable, room)
        plan.digest, plan.digest_tokens = digest(
            fold_units(plan.cands, units, left_out, memo), max(soft, 1), counter, memo,
            hard_cap=hard)
        if plan.digest_tokens > room:
            plan.digest, plan.digest_tokens = "", 0
    return left_out


def _units(cands: list[tuple[ConversationMessage, int]], start: int = 0,
           round_no: int = 0) -> list[_Unit]:
    """Group candidates from `start` on into units; `round_no` is the round before `start`.

    Hot on a first build of a long log: plain messages take the short path."""
    units: list[_Unit] = []
    append = units.append
    i, n = start, len(cands)
    while i < n:
        m, tokens = cands[i]
        role = m.role
        if role == "assistant" and m.tool_calls:
            items = [i]
            protected = m.pinned or m.kind == "summary"
            j = i + 1
            while j < n and cands[j][0].role == "tool":
                r, t = cands[j]
                items.append(j)
                tokens += t
                protected = protected or r.pinned
                j += 1
            tool = next((c.function.name for c in m.tool_calls
                         if c.function.name in PROTECTED_TOOLS), "")
            append(_Unit(items, round_no, tokens, protected, tool=tool))
            i = j
            continue
        is_user = role == "user" and m.kind == "message"
        if is_user:
            round_no += 1
        append(_Unit([i], round_no, tokens, m.pinned or m.kind == "summary", False, is_user))
        i += 1
    return units


def _trim(units: list[_Unit], keep: list[bool], reasons: dict[int, str], fixed: int,
          usable: int, user_cap: int, recent_rounds: int) -> int:
    """Drop units until the total fits; returns the new total."""
    last_round = units[-1].round_no if units else 0
    recent = {r for r in range(last_round - recent_rounds + 1, last_round + 1)}
    capped_users: set[int] = set()
    for n in range(len(units) - 1, -1, -1):
        if len(capped_users) >= user_cap:
            break
        if units[n].user:
            capped_users.add(n)

    # The usual case, in O(kept): everything that must stay fits, so keep the newest of the
    # rest while they fit, and drop all older ones (the same set dropping oldest-first gives).
    def must_stay(n: int, u: _Unit) -> bool:
        return u.round_no in recent or u.protected or u.latest_user or n in capped_users

    first_recent = next((n for n, u in enumerate(units) if u.round_no in recent), len(units))
    mandatory = [n for n in range(first_recent, len(units))]
    mandatory += [n for n in capped_users if n < first_recent]
    mandatory += [n for n in range(first_recent) if units[n].protected and n not in capped_users]
    base = fixed + sum(units[n].tokens for n in set(mandatory))
    if base <= usable:
        room = usable - base
        keep[:] = [False] * len(units)
        for n in mandatory:
            keep[n] = True
        for n in range(first_recent - 1, -1, -1):
            if keep[n]:
                continue
            if units[n].tokens > room:
                break
            keep[n] = True
            room -= units[n].tokens
        return usable - room  # the dropped ones get the default reason: an older round

    total = fixed + sum(u.tokens for u in units)

    def drop(n: int, why: str) -> None:
        nonlocal total
        if keep[n]:
            keep[n] = False
            reasons[n] = why
            total -= units[n].tokens

    # A: old rounds, oldest first, keeping their user messages (up to the cap) and protected.
    for n, u in enumerate(units):
        if total <= usable:
            return total
        if u.round_no in recent or u.protected or u.latest_user:
            continue
        if u.user and n in capped_users:
            continue
        drop(n, "older round dropped to fit the budget")
    # B: the kept user messages of old rounds, oldest first.
    for n, u in enumerate(units):
        if total <= usable:
            return total
        if u.user and not u.latest_user and u.round_no not in recent and not u.protected:
            drop(n, "older user message dropped to fit the budget")
    # C: inside the recent rounds, oldest first, whole units (never the latest user message).
    for n, u in enumerate(units):
        if total <= usable:
            return total
        if not u.latest_user and not u.protected:
            drop(n, "recent message dropped: even the latest rounds exceed the budget")
    # D: protected entries last.
    for n, u in enumerate(units):
        if total <= usable:
            return total
        if not u.latest_user:
            drop(n, "pinned or summary entry dropped: nothing else was left to drop")
    return total


def _drop_one_more(units: list[_Unit], keep: list[bool], reasons: dict[int, str],
                   recent_rounds: int) -> bool:
    """Normalizing added synthetic results and went over: drop the oldest droppable unit."""
    for n, u in enumerate(units):
        if keep[n] and not u.latest_user:
            keep[n] = False
            reasons[n] = "dropped to make room for a synthetic tool result"
            return True
    return False


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 3)

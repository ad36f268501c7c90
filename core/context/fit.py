"""The last two stages of a build: the last-resort trim to the budget, and normalizing (which
may leave out a little more: the synthetic results it adds cost tokens too).

Trimming keeps, in this order of priority: the system prefix, the latest user message, pinned
entries and summaries, the most recent rounds, and older user messages up to a cap (newest
first); everything else goes whole rounds at a time, oldest first. When a compaction is in use,
its digest is made again to stand for everything left out.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from core.context.budget import BudgetError
from core.context.digest import digest, digest_caps
from core.context.fold import fold_units
from core.context.memo import Compaction, CompactionMemo
from core.context.normalize import ABORTED_RESULT, Note, normalize
from core.context.projection import ACK, LEAD, ack_tokens, alternate, project_entries
from core.context.report import DEFAULT_DROP_REASON, ms_since
from core.context.stages import BuildStage, Draft
from core.context.units import Unit
from core.llm.tokens import TokenCounter

MIN_DIGEST_TOKENS = 60


class TrimStage(BuildStage):
    """What the compaction kept (or the whole history) still over the budget: whole units go,
    old rounds first (see the module's doc for what stays longest)."""

    name = "trim"

    def run(self, draft: Draft) -> None:
        t = time.perf_counter()
        plan, units, usable = draft.plan, draft.units, draft.usable
        left_out = plan.left_out if plan is not None else {}
        keep = [n not in left_out for n in range(len(units))]
        reasons: dict[int, str] = dict(left_out)
        total = draft.fixed + sum(u.tokens for u, k in zip(units, keep, strict=True) if k)
        if total > usable:
            total = _trim_kept(draft, keep, reasons)
        if plan is not None and (total > usable or not all(
                keep[n] for n in range(len(units)) if n not in left_out)):
            # Trimming left out more than selection did (or the digest itself is what does
            # not fit): one digest stands for all of it, within the room that is left.
            draft.view = None  # too tight to keep: the next build compacts afresh
            total -= plan.digest_tokens
            left_out = redigest(plan, units, keep, reasons, usable - total, draft.counter,
                                draft.cache.memo, usable)
        draft.keep, draft.reasons, draft.left_out = keep, reasons, left_out
        draft.report.stages.append({"name": self.name, "ms": ms_since(t)})


class NormalizeStage(BuildStage):
    """The kept units as messages (`projection`), made valid for the protocol (`normalize`);
    when what normalizing adds goes over the budget, the oldest unit left goes, then the
    digest. Raises BudgetError when even the latest user message and the prefix do not fit."""

    name = "normalize"

    def run(self, draft: Draft) -> None:
        t = time.perf_counter()
        plan, usable = draft.plan, draft.usable
        while True:
            _project(draft)
            if draft.used <= usable:
                break
            if drop_one_more(draft.units, draft.keep, draft.reasons):
                draft.view = None
                if plan is not None and plan.digest:  # the digest stands for that one too
                    _redigest_after_drop(draft, plan)
                continue
            if plan is None or not plan.digest:
                break
            plan.digest, plan.digest_tokens = "", 0  # the digest goes before the request fails
        draft.report.stages.append({"name": self.name, "ms": ms_since(t)})
        if draft.used > usable:
            raise BudgetError(draft.used, usable)


def _project(draft: Draft) -> None:
    """The kept units as normalized messages, and what they cost with the prefix."""
    cands, plan, counter = draft.cands, draft.plan, draft.counter
    kept_items = [i for u, k in zip(draft.units, draft.keep, strict=True) if k
                  for i in u.items]
    projected, into = project_entries([cands[i][0] for i in kept_items])
    # The entries' counts are kept with them; where the request differs from the entries
    # (answers joined with their continuations, messages normalize drops), it is counted
    # as sent, so the figure shown is the request's own.
    extra = _joined_delta(projected, into, [cands[i][1] for i in kept_items], counter)
    if plan is not None and plan.digest:
        projected.insert(0, {"role": "user", "content": plan.digest})
    normalized, notes = normalize(projected)
    extra -= sum(counter.openai_message(projected[n.index]) for n in notes
                 if n.action == "dropped")
    normalized = alternate(normalized)
    if normalized and normalized[0].get("content") == LEAD:
        notes = [*notes, Note(0, "added", "the request would start with the model's turn (the "
                                          "user's first messages are left out): a short user "
                                          "message stands first")]
    extra += sum(counter.openai_message(m) for m in normalized
                 if _synthetic_result(m) or m.get("content") in (ACK, LEAD))
    draft.kept_items, draft.messages, draft.notes = kept_items, normalized, notes
    draft.used = draft.fixed + sum(cands[i][1] for i in kept_items) + extra


def _joined_delta(projected: list[dict[str, Any]], into: list[int], counts: list[int],
                  counter: TokenCounter) -> int:
    """What joining answers with their continuations changed in the count (0 when none was)."""
    if len(projected) == len(into):
        return 0
    parts: dict[int, int] = {}
    for j, n in zip(into, counts, strict=True):
        parts[j] = parts.get(j, 0) + n
    return sum(counter.openai_message(projected[j]) - parts[j]
               for j, n in Counter(into).items() if n > 1)


def _synthetic_result(m: dict[str, Any]) -> bool:
    return m.get("content") == ABORTED_RESULT and m.get("role") == "tool"


def _redigest_after_drop(draft: Draft, plan: Compaction) -> None:
    synthetic = sum(draft.counter.openai_message(m) for m in draft.messages
                    if _synthetic_result(m))
    room = draft.usable - draft.prefix_tokens - synthetic - sum(
        u.tokens for u, k in zip(draft.units, draft.keep, strict=True) if k)
    draft.left_out = redigest(plan, draft.units, draft.keep, draft.reasons, room,
                              draft.counter, draft.cache.memo, draft.usable)


def _trim_kept(draft: Draft, keep: list[bool], reasons: dict[int, str]) -> int:
    """Trim the units `keep` still sends (selection may have left some out already); returns
    the new total with the fixed tokens."""
    units = draft.units
    still = [n for n, k in enumerate(keep) if k]
    sub_keep = [True] * len(still)
    sub_reasons: dict[int, str] = {}
    total = trim([units[n] for n in still], sub_keep, sub_reasons, draft.fixed, draft.usable,
                 draft.user_cap, draft.recent_rounds)
    for k, n in enumerate(still):
        keep[n] = sub_keep[k]
        if k in sub_reasons:
            reasons[n] = sub_reasons[k]
    return total


def trim(units: list[Unit], keep: list[bool], reasons: dict[int, str], fixed: int,
         usable: int, user_cap: int, recent_rounds: int) -> int:
    """Drop units until the total fits; returns the new total."""
    last_round = units[-1].round_no if units else 0
    recent = set(range(last_round - recent_rounds + 1, last_round + 1))
    capped_users: set[int] = set()
    for n in range(len(units) - 1, -1, -1):
        if len(capped_users) >= user_cap:
            break
        if units[n].user:
            capped_users.add(n)
    total = _keep_newest(units, keep, recent, capped_users, fixed, usable)
    if total is not None:
        return total
    return _drop_in_order(units, keep, reasons, recent, capped_users,
                          fixed + sum(u.tokens for u in units), usable)


def _keep_newest(units: list[Unit], keep: list[bool], recent: set[int], capped_users: set[int],
                 fixed: int, usable: int) -> int | None:
    """The usual case, in O(kept): everything that must stay fits, so keep the newest of the
    rest while they fit, and drop all older ones (the same set dropping oldest-first gives);
    None when what must stay does not fit."""
    first_recent = next((n for n, u in enumerate(units) if u.round_no in recent), len(units))
    mandatory = list(range(first_recent, len(units)))
    mandatory += [n for n in capped_users if n < first_recent]
    mandatory += [n for n in range(first_recent) if units[n].protected and n not in capped_users]
    base = fixed + sum(units[n].tokens for n in set(mandatory))
    if base > usable:
        return None
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


def _drop_in_order(units: list[Unit], keep: list[bool], reasons: dict[int, str],
                   recent: set[int], capped_users: set[int], total: int, usable: int) -> int:
    """Drop units in four passes, each oldest first, until `total` fits; returns it."""
    passes: tuple[tuple[Callable[[int, Unit], bool], str], ...] = (
        # old rounds, keeping their user messages (up to the cap) and protected entries
        (lambda n, u: not (u.round_no in recent or u.protected or u.latest_user)
         and not (u.user and n in capped_users), "older round dropped to fit the budget"),
        # the kept user messages of old rounds
        (lambda n, u: u.user and not u.latest_user and u.round_no not in recent
         and not u.protected, "older user message dropped to fit the budget"),
        # inside the recent rounds, whole units (never the latest user message)
        (lambda n, u: not u.latest_user and not u.protected,
         "recent message dropped: even the latest rounds exceed the budget"),
        # protected entries last
        (lambda n, u: not u.latest_user,
         "pinned or summary entry dropped: nothing else was left to drop"),
    )
    for droppable, why in passes:
        for n, u in enumerate(units):
            if total <= usable:
                return total
            if keep[n] and droppable(n, u):
                keep[n] = False
                reasons[n] = why
                total -= u.tokens
    return total


def drop_one_more(units: list[Unit], keep: list[bool], reasons: dict[int, str]) -> bool:
    """Normalizing added messages (a stand-in result for a call without one, a user message
    before a request that would start with the model's turn) and went over: drop the oldest
    droppable unit, a pinned one or a summary only when no other is left."""
    for protected in (False, True):
        for n, u in enumerate(units):
            if keep[n] and not u.latest_user and u.protected is protected:
                keep[n] = False
                reasons[n] = "dropped to make room for what the request's form adds (a " \
                             "stand-in tool result, a first user message)"
                return True
    return False


def redigest(plan: Compaction, units: list[Unit], keep: list[bool], reasons: dict[int, str],
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
            fold_units(plan, units, left_out, memo), max(soft, 1), counter, memo,
            hard_cap=hard)
        if plan.digest_tokens > room:
            plan.digest, plan.digest_tokens = "", 0
    return left_out

"""The sticky view (the report and the user's docs call it "the kept compaction"): what a
compaction decided, reused by the builds after it until they pass the trigger, and saved with
the conversation so a new process sends the same request too.

Providers cache a request's prefix (OpenAI and Anthropic prompt caching, a local server's KV
cache) only when the next request starts with exactly the same bytes. A compaction changes the
history's beginning; re-planning it on every turn would change it every turn. So a compaction
is made once, down to the target, and later builds send the same previews, references, digest
and left-out set, appending only what is new, until that passes the trigger again.

On disk (`view.json` beside the log) it is a small description, not the request: which entries
were shortened and how (previews and references are made again from the logged entry, the same
bytes), which units were left out, the digest as sent. It is checked against the log when read;
anything that no longer matches makes a new compaction, never a wrong request.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from core.context.compaction import shorter
from core.context.memo import Compaction, CompactionMemo
from core.context.units import Unit
from core.llm.tokens import TokenCounter
from core.model import ConversationMessage

VERSION = 1
# (encoding, usable, fixed tokens, recent rounds, project instructions' fingerprint or 0)
Key = tuple[str, int, int, int, int]


@dataclass
class StickyView:
    """Attributes:
        key: what it was made for; any change (model, budget, the mode's prompt or tools,
            recent rounds) makes a new compaction. The usable budget is the nominal one:
            calibration against the provider's counts moves a little after every answer, and
            the fit is checked with the current one.
        decided: how many units it decided; the last of them is taken afresh by each build
            (tool results may still arrive for it; it is in the recent tail, never shortened).
        plan: what the stages decided (its lists are never changed after).
        units: units [0, decided - 1) with the plan's tokens.
        sent: tokens of those units that are sent, and of the digest.
        room: how far later builds may grow it: the trigger, or the whole budget when even
            the compaction could not get under the trigger (compacting again each turn
            would change the request every time for nothing).
        builds: how many builds reused it since.
    """

    key: Key
    decided: int
    plan: Compaction
    units: list[Unit]
    sent: int
    room: float
    builds: int = 0


def reuse(view: StickyView | None, key: Key, cands: list[tuple[ConversationMessage, int]],
          units: list[Unit], trigger: float, usable: int
          ) -> tuple[Compaction, list[Unit]] | str:
    """The view extended with what came after it, when it is still for this build and the
    result stays within its room (`trigger` or `usable` tokens of history); otherwise why a
    new compaction is due (said in the build report)."""
    if view is None:
        return "no compaction kept for this conversation"
    if view.key != key:
        return why_key_changed(view.key, key)
    if len(units) < view.decided:
        return "the history changed under the kept compaction"
    k = view.decided - 1
    old = view.units
    if any(units[n].items != old[n].items for n in (0, k - 1) if 0 <= n < k):
        return "the history changed under the kept compaction"
    fresh = units[k:]
    if view.sent + sum(u.tokens for u in fresh) > (usable if view.room > trigger else trigger):
        return "what was appended since the last compaction passed the trigger"
    first_fresh = fresh[0].items[0] if fresh else len(cands)
    p = view.plan
    plan = Compaction(p.cands[:first_fresh] + cands[first_fresh:],
                      p.unit_tokens[:k] + [u.tokens for u in fresh], p.staged, p.left_out,
                      p.logged, p.digest, p.digest_tokens)
    return plan, old + fresh


def why_key_changed(old: Key, new: Key) -> str:
    if old[0] != new[0]:
        return "the model changed (another tokenizer)"
    if old[1] != new[1]:
        return f"the usable budget changed ({old[1]:,} -> {new[1]:,} tokens)"
    if old[4] != new[4]:
        return ("the project instructions were turned on" if not old[4] else
                "the project instructions were turned off or removed" if not new[4] else
                "the project instructions (AGENTS.md) changed")
    if old[2] != new[2]:
        return ("the system prompt or the tools changed (mode, agent, run step, or a tool "
                "switched on or off)")
    return "the recent rounds kept verbatim changed"


def to_json(view: StickyView) -> dict[str, Any]:
    """What is saved on disk: enough to make the same view again from the log."""
    plan = view.plan
    cands = plan.cands  # shortened copies keep their entry's id
    k = view.decided - 1

    def first_id(n: int) -> str:
        return cands[view.units[n].items[0]][0].id if n < k else ""

    return {
        "version": VERSION, "key": list(view.key), "decided": view.decided,
        "anchors": [first_id(0), first_id(k - 1)] if k > 0 else [],
        "staged": {i: list(v) for i, v in plan.staged.items()},
        "left_out": [[n, first_id(n), why] for n, why in sorted(plan.left_out.items())],
        "digest": plan.digest, "digest_tokens": plan.digest_tokens, "sent": view.sent,
        "room": view.room, "builds": view.builds}


def from_json(data: dict[str, Any], cands: list[tuple[ConversationMessage, int]],
              units: list[Unit], counter: TokenCounter, memo: CompactionMemo
              ) -> StickyView | None:
    """The view `to_json` saved, made again over this build's candidates and units; None when
    it does not match them (then a new compaction is made, and saved in its place)."""
    try:
        decided = _decided(data, cands, units)
        if decided is None:
            return None
        k = decided - 1
        plan = Compaction(list(cands), [u.tokens for u in units])
        if not _restage(plan, data["staged"], units[:k], counter, memo) or \
                not _leave_out(plan, data["left_out"], units[:k]):
            return None
        plan.digest, plan.digest_tokens = str(data["digest"]), int(data["digest_tokens"])
        if plan.digest and counter.openai_message({"role": "user", "content": plan.digest}) \
                != plan.digest_tokens:
            return None  # not the digest that was counted (or counted otherwise now)
        planned_units = [u if t == u.tokens else replace(u, tokens=t)
                      for u, t in zip(units[:k], plan.unit_tokens, strict=False)]
        sent = plan.digest_tokens + sum(u.tokens for n, u in enumerate(planned_units)
                                        if n not in plan.left_out)
        if sent != int(data["sent"]):
            return None  # counted otherwise now: not the request that was sent
        key = tuple(data["key"])  # saved before project instructions: four parts, none
        return StickyView((str(key[0]), int(key[1]), int(key[2]), int(key[3]),
                           int(key[4]) if len(key) > 4 else 0), decided, plan,
                          planned_units, sent, float(data["room"]), int(data.get("builds", 0)))
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        return None


def _decided(data: dict[str, Any], cands: list[tuple[ConversationMessage, int]],
             units: list[Unit]) -> int | None:
    """How many units the sticky view decided, when its description is whole and its anchors
    (the first entries of its first and last units) are still where they were."""
    if data.get("version") != VERSION:
        return None
    decided = int(data["decided"])
    k = decided - 1
    if len(tuple(data["key"])) not in (4, 5) or k < 1 or len(units) < decided:
        return None
    anchors = [cands[units[n].items[0]][0].id for n in (0, k - 1)]
    if list(data["anchors"]) != anchors:
        return None
    if not isinstance(data["staged"], dict) or not isinstance(data["left_out"], list):
        return None
    return decided


def _restage(plan: Compaction, staged: dict[str, Any], units: list[Unit],
             counter: TokenCounter, memo: CompactionMemo) -> bool:
    """Make the view's previews and references again from the logged entries (the same bytes);
    False when one cannot be (the entry was pinned since, or is no longer long)."""
    cands = plan.cands
    where = {cands[i][0].id: (n, i) for n, u in enumerate(units) for i in u.items}
    for entry_id, (decision, why, stage, before) in staged.items():
        n, i = where[entry_id]
        m, tokens = cands[i]
        if m.pinned:  # pinned since (by another process): always sent as it is
            return False
        made = shorter(m, tokens, "preview" if decision == "previewed" else "reference",
                       counter, memo, cands[units[n].items[0]][0])
        if made is None:
            return False
        plan.logged.setdefault(i, m)
        cands[i] = made
        plan.unit_tokens[n] -= tokens - made[1]
        plan.staged[entry_id] = (str(decision), str(why), str(stage), int(before))
    return True


def _leave_out(plan: Compaction, left_out: list[Any], units: list[Unit]) -> bool:
    """Leave out again the units the view left out; False when one of them no longer starts
    with the same entry or holds a pinned one."""
    cands = plan.cands  # a shortened copy keeps its entry's id and pin
    for n, first, why in left_out:
        if not 0 <= n < len(units) or cands[units[n].items[0]][0].id != first or \
                any(cands[i][0].pinned for i in units[n].items):
            return False
        plan.left_out[int(n)] = str(why)
    return True

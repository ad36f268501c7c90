"""A build's report: what happened to every log entry of a request, and why.

`build_request` (core/context/builder.py) fills a BuildReport; the meter, the Inspector,
`workbench context` and the saved copies of sent requests read it. The per-entry decisions are
held compact (`Decisions`) and made into rows or EntryDecisions only when asked: most builds
never need them, and a 10,000-entry log has 10,000 of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

from core.context.units import Unit
from core.llm.tokens import TokenCounter
from core.model import ConversationMessage

DEFAULT_DROP_REASON = "older round dropped to fit the budget"
DECISIONS = ("kept", "previewed", "referenced", "summarized", "digested", "dropped", "excluded",
             "synthetic")


@dataclass
class EntryDecision:
    """What one log entry became in the request.

    Attributes:
        decision: kept | previewed | referenced | summarized | digested (a stage changed or
            replaced it) | dropped (left out to fit) | excluded (never a candidate: switched off,
            a notice, an old system entry, a failed attempt a retry replaced) | synthetic.
        tokens: what it costs in the request (0 when left out); tokens_before: as logged.
        stage: the stage that decided, when one did.
    """

    id: str
    role: str
    kind: str
    decision: str
    reason: str
    tokens: int
    stage: str = ""
    tokens_before: int | None = None


ENTRY_KEYS = ("id", "role", "kind", "decision", "reason", "tokens", "stage", "tokens_before")


@dataclass
class BuildReport:
    model: str
    mode: str
    window: int
    usable: int
    reserved_output: int
    safety: int
    budget_source: str
    budget_note: str | None
    used: int = 0  # our count
    calibration: float = 1.0
    provider_estimate: int = 0  # used x calibration: what the provider is expected to count
    calibration_basis: str = ""  # what `calibration` rests on, in words (Calibration.basis)
    totals: dict[str, int] = field(default_factory=dict)
    normalize_notes: list[str] = field(default_factory=list)
    stages: list[dict[str, Any]] = field(default_factory=list)
    elapsed_ms: float = 0.0
    compaction: str = ""  # why the history's compaction is what it is (sticky, or new and why)
    # The project instructions: the project's file ("" when none), whether the request
    # carries it (its tokens are totals["instructions"]), and what the user should know
    # (turned off for this conversation, cut, unreadable).
    instructions: str = ""
    instructions_sent: bool = False
    instructions_note: str = ""
    # Each tool offered, (name, tokens of its schema), in the request's order; and the MCP tools
    # or servers (`server__*`) the conversation switched off.
    tools_offered: list[tuple[str, int]] = field(default_factory=list)
    tools_off: list[str] = field(default_factory=list)
    # Against the request sent before it (set by the engine as it sends): the leading
    # messages identical to it and their tokens ({"messages", "tokens", "of_tokens"}), and
    # what the provider said it read from its cache for this one.
    stable_prefix: dict[str, int] | None = None
    cached_tokens: int | None = None
    # what happened to each entry, held compact (see `Decisions`); not part of the JSON
    decisions: Decisions | None = field(default=None, repr=False, compare=False)

    def shown(self, tokens: int) -> int:
        """`tokens` of ours as the figure shown everywhere: calibrated against the provider (the
        meter, its tooltip, the Inspector and `workbench context` all show this one)."""
        return round(tokens * self.calibration)

    @property
    def percent(self) -> float:
        """Share of the usable budget, in the provider's counting."""
        return 100.0 * self.provider_estimate / self.usable if self.usable else 100.0

    def rows(self, pause: Callable[[], None] | None = None
             ) -> Iterator[tuple[str, str, str, str, str, int, str, int | None]]:
        """The entries' decisions as plain tuples, in EntryDecision's field order (cheaper
        than `entries` when they are only read once); `pause` as in `Decisions.rows`."""
        return self.decisions.rows(pause) if self.decisions is not None else iter(())

    def sent_ids(self) -> set[str]:
        """The ids of the entries the request carries (cheap: the entries are not made)."""
        return self.decisions.sent_ids() if self.decisions is not None else set()

    def decision_counts(self) -> dict[str, int]:
        """How many log entries got each decision (cheap: the entries are not made)."""
        return self.decisions.counts() if self.decisions is not None else {}

    @property
    def entries(self) -> list[EntryDecision]:
        """One decision per log entry (made on first use: most builds never need them)."""
        return self.decisions.entries() if self.decisions is not None else []

    def to_json(self, compact: bool = False,
                pause: Callable[[], None] | None = None) -> dict[str, Any]:
        """Plain data, written field by field: `asdict` would deep-copy the decisions' whole
        history first (a second on a 10,000-entry log). `compact`: the entries as rows under
        "entry_keys" (what saved requests store: a third of the size, no dict per entry; read
        them with `entry_dicts`)."""
        data: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)
                                if f.name != "decisions"}
        data["totals"] = dict(self.totals)
        data["normalize_notes"] = list(self.normalize_notes)
        data["stages"] = [dict(s) for s in self.stages]
        keys = ENTRY_KEYS
        rows = self.decisions.rows(pause) if self.decisions is not None else iter(())
        if compact:
            data["entry_keys"] = list(keys)
            data["entries"] = [list(row) for row in rows]
        else:
            data["entries"] = [dict(zip(keys, row, strict=True)) for row in rows]
        data["percent"] = round(self.percent, 1)
        return data


def sent_in(report: dict[str, Any], sent: tuple[str, ...]) -> set[str] | None:
    """The ids of the entries with a decision in `sent`, from a report's JSON in either form
    (without a dict per row); None when it has no entries."""
    entries = report.get("entries")
    if not isinstance(entries, list):
        return None
    keys = report.get("entry_keys")
    if isinstance(keys, list) and "id" in keys and "decision" in keys:
        at, d = keys.index("id"), keys.index("decision")
        return {e[at] for e in entries if isinstance(e, list) and len(e) > max(at, d)
                and e[d] in sent}
    return {str(e.get("id")) for e in entries if isinstance(e, dict) and e.get("decision") in sent}


def entry_dicts(report: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The entries of a report's JSON as dicts, in either form `BuildReport.to_json` writes;
    None when it has none."""
    entries = report.get("entries")
    if not isinstance(entries, list):
        return None
    keys = report.get("entry_keys")
    if isinstance(keys, list):
        return [dict(zip(keys, e, strict=False)) for e in entries if isinstance(e, list)]
    return [e for e in entries if isinstance(e, dict)]


def ms_since(since: float) -> float:
    """Milliseconds from `since` (a `time.perf_counter()` reading), as the report's rows
    give a stage's time."""
    return round((time.perf_counter() - since) * 1000, 3)


PAUSE_EVERY = 500  # rows between two pauses of a long walk over a report's decisions


class Decisions:
    """What happened to each log entry, held compact until someone asks."""

    def __init__(self, excluded: list[tuple[ConversationMessage, str]],
                 cands: list[tuple[ConversationMessage, int]], units: list[Unit],
                 keep: list[bool], reasons: dict[int, str], kept_items: list[int],
                 counter: TokenCounter, synthetic: list[Any],
                 staged: dict[str, tuple[str, str, str, int]] | None = None,
                 digested: set[int] | None = None, digest: tuple[str, int] | None = None
                 ) -> None:
        self.staged = staged or {}  # id -> (decision, reason, stage, tokens before)
        self.digested = digested or set()  # units the digest stands for
        self.digest = digest  # (reason, tokens) of the digest message, when there is one
        self.excluded = list(excluded)
        self.cands = cands[:]
        # copies: the cache goes on growing its lists after this build (read later, maybe on
        # another thread, the decisions must still be this build's)
        self.units, self.keep, self.reasons = list(units), keep, reasons
        self.kept = set(kept_items)
        self.counter = counter
        self.synthetic = synthetic
        self._entries: list[EntryDecision] | None = None
        self._counts: dict[str, int] | None = None

    def sent_ids(self) -> set[str]:
        """The ids of the entries the request carries (kept, previewed or referenced)."""
        cands = self.cands
        return {cands[i][0].id for i in self.kept}

    def counts(self) -> dict[str, int]:
        """How many entries got each decision, without making the entries (the meter asks on
        every refresh, and making ten thousand EntryDecisions each time would be a pause of its
        own). Counted once: a report does not change, and the meter counts where it builds,
        off the window's thread."""
        if self._counts is None:
            self._counts = self._count()
        return dict(self._counts)

    def _count(self) -> dict[str, int]:
        counts: dict[str, int] = {}

        def add(decision: str, n: int = 1) -> None:
            if n:
                counts[decision] = counts.get(decision, 0) + n

        for _, why in self.excluded:
            add(_excluded_decision(why))
        cands, staged = self.cands, self.staged
        for i in self.kept:
            found = staged.get(cands[i][0].id) if staged else None
            add(found[0] if found is not None else "kept")
        digested = sum(len(self.units[n].items) for n in self.digested)
        add("digested", digested)
        add("dropped", len(cands) - len(self.kept) - digested)
        add("synthetic", len(self.synthetic) + (self.digest is not None))
        return counts

    def entries(self) -> list[EntryDecision]:
        if self._entries is None:
            self._entries = [EntryDecision(*row) for row in self.rows()]
        return self._entries

    def rows(self, pause: Callable[[], None] | None = None
             ) -> Iterator[tuple[str, str, str, str, str, int, str, int | None]]:
        """(id, role, kind, decision, reason, tokens, stage, tokens_before) per entry, in the
        order of EntryDecision's fields: cheap enough to write 10,000 of them per request.
        `pause`: called every PAUSE_EVERY rows (see `core.give_way`)."""
        if pause is not None:
            for n, row in enumerate(self.rows(), start=1):
                if n % PAUSE_EVERY == 0:
                    pause()
                yield row
            return
        if self._entries is not None:
            for e in self._entries:
                yield (e.id, e.role, e.kind, e.decision, e.reason, e.tokens, e.stage,
                       e.tokens_before)
            return
        message = self.counter.message
        if self.digest is not None:
            # a synthetic entry was never logged: no size "as logged" (None), only its own
            yield ("", "user", "digest", "synthetic", self.digest[0], self.digest[1], "digest",
                   None)
        for m, why in self.excluded:
            yield (m.id, m.role, m.kind, _excluded_decision(why), why, 0, "", message(m))
        reason_of = {i: self.reasons.get(n, DEFAULT_DROP_REASON)
                     for n, u in enumerate(self.units) if not self.keep[n] for i in u.items}
        digested = {i for n in self.digested for i in self.units[n].items}
        kept, staged_of = self.kept, self.staged
        for i, (m, tokens) in enumerate(self.cands):
            if i in kept:
                staged = staged_of.get(m.id) if staged_of else None
                if staged is not None:
                    decision, why, stage, before = staged
                    yield (m.id, m.role, m.kind, decision, why, tokens, stage, before)
                    continue
                why = ("an unfinished answer, sent with a short marker (joined with what "
                       "continues it)" if m.kind == "error" else "fits the budget")
                yield (m.id, m.role, m.kind, "kept", why, tokens, "", tokens)
            elif i in digested:
                yield (m.id, m.role, m.kind, "digested", reason_of.get(i, "over budget"), 0,
                       "key messages", tokens)
            else:
                yield (m.id, m.role, m.kind, "dropped", reason_of.get(i, "over budget"), 0, "",
                       tokens)
        for note in self.synthetic:
            yield ("", "tool", "message", "synthetic", note.reason, 0, "", 0)


def _excluded_decision(reason: str) -> str:
    """An entry left out before trimming: summarized (a summary or stage replaced it) or
    excluded (switched off, a notice, an old system entry, a superseded attempt)."""
    head = reason.split(":", 1)[0]
    return head if head in DECISIONS and head not in ("kept", "dropped") else "excluded"

"""What requests cost, in USD, from the usage a provider reported and litellm's price map.

The price follows the model's name in the map (`core.llm.model_map`, read offline, without
importing litellm), whatever the address: a gateway on localhost in front of a paid API still
costs money. A model the map does not know costs "unknown" (None), never a made-up figure; the
window calls that "local" at a local address. Prompt tokens are priced as the provider counts
them: OpenAI's `prompt_tokens` include the cached ones (`prompt_tokens_details.cached_tokens`),
priced at the map's cache-read price; Anthropic's cache writes at its cache-creation price.

A cost is a fact of an answer: computed once, when its entry is made, and kept with it
(`ConversationMessage.cost_usd`), so a later change of the price map does not rewrite history.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from core.llm.model_map import model_info
from core.store.tally import kept


@dataclass(frozen=True)
class Price:
    """USD per token."""

    prompt: float
    completion: float
    cache_read: float
    cache_write: float


def price(model: str | None) -> Price | None:
    """The map's price of `model`, or None when it has none."""
    entry = model_info(model) if model else None
    if not entry:
        return None
    try:
        prompt = float(entry.get("input_cost_per_token") or 0)
        completion = float(entry.get("output_cost_per_token") or 0)
        read = float(entry.get("cache_read_input_token_cost") or prompt)
        write = float(entry.get("cache_creation_input_token_cost") or prompt)
    except (TypeError, ValueError):
        return None
    if prompt <= 0 and completion <= 0:
        return None
    return Price(prompt, completion, read, write)


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and value > 0 else 0


def cached_prompt_tokens(usage: Mapping[str, Any]) -> int:
    """The prompt tokens read from the provider's cache, as it reported them."""
    details = usage.get("prompt_tokens_details")
    value = details.get("cached_tokens") if isinstance(details, dict) else None
    return _int(value if value is not None else usage.get("cache_read_input_tokens"))


def cost_of(model: str | None, usage: Mapping[str, Any] | None) -> float | None:
    """What a request of `model` with this usage cost in USD; None when the model has no
    price or there is no usage."""
    if not usage:
        return None
    p = price(model)
    if p is None:
        return None
    prompt = _int(usage.get("prompt_tokens"))
    cached = min(cached_prompt_tokens(usage), prompt)
    written = min(_int(usage.get("cache_creation_input_tokens")), prompt - cached)
    plain = prompt - cached - written
    return (plain * p.prompt + cached * p.cache_read + written * p.cache_write
            + _int(usage.get("completion_tokens")) * p.completion)


def cache_saving(model: str | None, usage: Mapping[str, Any] | None) -> float | None:
    """What the cached prompt tokens saved against the full prompt price (None: unknown)."""
    if not usage:
        return None
    p = price(model)
    cached = cached_prompt_tokens(usage)
    if p is None or not cached:
        return None
    return cached * (p.prompt - p.cache_read)


def prompt_cost(model: str | None, tokens: int) -> float | None:
    """The price of sending `tokens` prompt tokens (the next request's estimate)."""
    p = price(model)
    return None if p is None else tokens * p.prompt


@dataclass
class Spend:
    """What a conversation (or a project) has spent, as its entries say.

    Attributes:
        requests: answers (and summaries) that report usage.
        prompt, cached, completion: their tokens.
        usd: the sum of the known costs.
        unpriced: requests whose model has no price (their cost is unknown, not zero).
        estimated: requests whose usage the provider did not report (counted by us).
        imported: requests that came in with an import.
        saved: what the prompt cache saved (USD).
    """

    requests: int = 0
    prompt: int = 0
    cached: int = 0
    completion: int = 0
    usd: float = 0.0
    unpriced: int = 0
    estimated: int = 0
    imported: int = 0
    saved: float = 0.0
    models: set[str] = field(default_factory=set)

    def add(self, model: str | None, usage: Mapping[str, Any] | None, cost: float | None,
            imported: bool = False) -> None:
        if not usage:
            return
        self.requests += 1
        self.prompt += _int(usage.get("prompt_tokens"))
        self.cached += cached_prompt_tokens(usage)
        self.completion += _int(usage.get("completion_tokens"))
        self.estimated += bool(usage.get("estimated"))
        self.imported += imported
        if model:
            self.models.add(model)
        if cost is None:
            self.unpriced += 1
        else:
            self.usd += cost
        self.saved += cache_saving(model, usage) or 0.0

    def merge(self, other: Spend) -> None:
        for name in ("requests", "prompt", "cached", "completion", "usd", "unpriced",
                     "estimated", "imported", "saved"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.models |= other.models

    def as_json(self) -> dict[str, Any]:
        return {"requests": self.requests, "prompt_tokens": self.prompt,
                "cached_tokens": self.cached, "completion_tokens": self.completion,
                "cost_usd": round(self.usd, 6), "unpriced_requests": self.unpriced,
                "estimated_requests": self.estimated, "imported_requests": self.imported,
                "cache_saved_usd": round(self.saved, 6)}


def spend(entries: Iterable[Any], since: datetime | None = None,
          extra: Iterable[tuple[str | None, Mapping[str, Any] | None, float | None]] = (),
          seen: set[str] | None = None) -> Spend:
    """What `entries` (a conversation's log) spent: every entry that carries usage, the cost
    kept with it (a cost never kept is priced now); `extra`: (model, usage, cost) of requests
    that made no entry (titles). `seen`: ids already counted (a branch holds copies of its
    origin's entries: they were paid for once), added to as entries are counted."""
    total = Spend()
    for m in entries:
        if not m.usage or (since is not None and m.created_at < since):
            continue
        if seen is not None:
            if m.id in seen:
                continue
            seen.add(m.id)
        cost = kept(m.cost_usd)
        cost = cost if cost is not None else cost_of(m.model, m.usage)
        total.add(m.model, m.usage, cost, imported=bool(m.usage.get("imported")))
    for model, usage, cost in extra:
        cost = kept(cost)
        total.add(model, usage, cost if cost is not None else cost_of(model, usage))
    return total


def money(usd: float | None, local: bool = False) -> str:
    """A cost as people read it: "$0.0042", "$1.23"; "unknown" (or "local") without one."""
    if usd is None:
        return "local" if local else "unknown"
    if usd == 0:
        return "$0"
    if usd < 0.01:
        return f"${usd:.4f}"
    return f"${usd:,.2f}"


def over_cap(spent: float, next_cost: float | None, cap: float | None,
             what: str = "this conversation") -> str | None:
    """Why a send is refused by the cap (a sentence with the figures), or None."""
    if cap is None:
        return None
    if spent >= cap:
        return f"{what} has spent {money(spent)} of its {money(cap)} cap"
    if next_cost is not None and spent + next_cost > cap:
        return (f"{what} has spent {money(spent)} of its {money(cap)} cap, and the next "
                f"request would cost about {money(next_cost)} more")
    return None


def cap_refusal(store: Any, conv_id: str, model: str, cost_cap: float | None,
                project_cost_cap: float | None, next_prompt_tokens: int) -> str | None:
    """Why the next request of `conv_id` must not be sent (the caps, with the figures), or
    None. `next_prompt_tokens`: the request as built (its prompt's price is the estimate)."""
    if cost_cap is None and project_cost_cap is None:
        return None
    next_cost = prompt_cost(model, next_prompt_tokens)
    if cost_cap is not None:
        why = over_cap(conversation_spend(store, conv_id).usd, next_cost, cost_cap)
        if why:
            return why
    if project_cost_cap is not None:
        seen: set[str] = set()
        total = sum(conversation_spend(store, r.id, seen=seen).usd
                    for r in sorted(store.list(), key=lambda r: r.created_at))
        return over_cap(total, next_cost, project_cost_cap, "this project")
    return None


def conversation_spend(store: Any, conv_id: str, since: datetime | None = None,
                       seen: set[str] | None = None) -> Spend:
    """What the conversation `conv_id` of `store` (a ConversationStore) spent: its answers and
    summaries, and its title's request."""
    loaded = store.load(conv_id)
    title = loaded.meta.title_request
    extra = []
    if isinstance(title, dict) and (since is None or loaded.meta.created_at >= since):
        extra.append((title.get("model"), title.get("usage"), title.get("cost")))
    return spend(loaded.messages, since, extra, seen)

"""Context quality without any LLM: the compaction stages against a naive baseline (drop the
oldest rounds until it fits, tool pairs kept whole), on the shared real trajectories at 10%,
25% and 50% of each one's full size; and the stages' speed on a 10,000-message log."""

from __future__ import annotations

import gc
import json
import time
from collections import defaultdict

from core.context.budget import Budget
from core.context.builder import BudgetError, BuildCache, BuiltRequest, build_request
from core.context.normalize import protocol_errors
from core.context.prompts import PromptComposer
from core.llm.tokens import TokenCounter
from core.model import ConversationMessage
from tests.bench.common import SHARED_TRAJECTORIES, big_messages, median, report

COUNTER = TokenCounter("o200k_base")
COMPOSER = PromptComposer()
FRACTIONS = (0.10, 0.25, 0.50)
ROOMY = 200  # below this, a window has no room for history beyond the latest message


def build(history: list[ConversationMessage], usable: int, compact: bool,
          cache: BuildCache | None = None) -> BuiltRequest:
    return build_request(history, "agent", model="gpt-4o", budget=Budget(usable, 0, 0, "bench"),
                         counter=COUNTER, composer=COMPOSER, compact=compact, cache=cache)


def folded(text: str) -> str:
    return " ".join(text.split())


def request_text(built: BuiltRequest) -> str:
    parts = []
    for m in built.messages:
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [p.get("text", "") for p in content if isinstance(p, dict)]
        for call in m.get("tool_calls") or ():
            parts.append(call["function"]["arguments"])
    return "\n".join(parts)


def user_intent(history: list[ConversationMessage], built: BuiltRequest) -> tuple[int, int]:
    """User messages sent verbatim, or whose opening (32 characters) the digest carries."""
    verbatim = {folded(c) for m in built.messages if m["role"] == "user"
                and isinstance(c := m.get("content"), str)}
    text = folded(request_text(built))
    users = [m for m in history if m.role == "user" and m.kind == "message" and m.text().strip()]
    kept = sum(1 for u in users if folded(u.text()) in verbatim or folded(u.text())[:32] in text)
    return kept, len(users)


def quality() -> None:
    if not SHARED_TRAJECTORIES.is_dir():
        print("  (../shared/data/trajectories not present: quality figures skipped)")
        return
    # figures[(fraction, variant)] -> lists
    sums: dict[tuple[float, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for path in sorted(SHARED_TRAJECTORIES.glob("*.json")):
        data = json.loads(path.read_text())
        history = [COUNTER.with_count(ConversationMessage.from_openai(m))
                   for m in data["messages"]]
        files = (data.get("meta") or {}).get("files_touched") or []
        full = build(history, 10**8, False).report.used
        for fraction in FRACTIONS:
            for variant, compact in (("compaction", True), ("naive", False)):
                s = sums[(fraction, variant)]
                s["builds"] += 1
                t = time.perf_counter()
                try:
                    built = build(history, int(full * fraction), compact)
                except BudgetError:
                    s["refused"] += 1
                    continue
                s["ms"] = max(s["ms"], (time.perf_counter() - t) * 1000)
                s["valid"] += not protocol_errors(built.messages[1:])
                s["within"] += built.report.used <= int(full * fraction)
                kept, users = user_intent(history, built)
                s["users_kept"] += kept
                s["users"] += users
                r = built.report
                if r.usable - r.totals["system"] - r.totals["tools"] >= ROOMY:
                    s["roomy_kept"] += kept
                    s["roomy_users"] += users
                    s["roomy"] += 1
                text = request_text(built)
                s["paths_kept"] += sum(p in text for p in files)
                s["paths"] += len(files)
    for fraction in FRACTIONS:
        for variant in ("compaction", "naive"):
            s = sums[(fraction, variant)]
            built = s["builds"] - s["refused"]
            label = f"{int(fraction * 100)}% of full size, {variant}"
            intent_target = {0.25: ">= 100 %", 0.10: ">= 90 %"}.get(fraction, "")
            path_target = {0.25: ">= 95 %", 0.10: ">= 90 %"}.get(fraction, "")
            if variant == "naive":
                intent_target = path_target = ""
            print(f"  {label}: {int(built)} builds ({int(s['refused'])} refused as too small)")
            report("    protocol valid", 100 * s["valid"] / max(1, built), "%",
                   "100 %" if variant == "compaction" else "")
            report("    within budget", 100 * s["within"] / max(1, built), "%",
                   "100 %" if variant == "compaction" else "")
            report("    user messages verbatim or in the digest",
                   100 * s["users_kept"] / max(1, s["users"]), "%", intent_target)
            report(f"      in the {int(s['roomy'])} builds with >= {ROOMY} tokens of room for "
                   "history", 100 * s["roomy_kept"] / max(1, s["roomy_users"]), "%")
            report("    files_touched paths present", 100 * s["paths_kept"] / max(1, s["paths"]),
                   "%", path_target)
            report("    slowest build", s["ms"], "ms")


def speed() -> None:
    msgs = big_messages()
    gc.freeze()  # as the window does once a conversation is open (app/controller.py)
    usable = 128_000 - 4096 - 2560
    full = build(msgs, 10**9, False).report.used
    build(msgs, usable, True)  # the process's first build pays one-time costs: not counted
    times, staged = [], []
    for _ in range(5):  # each a first build of the conversation (a new cache)
        t = time.perf_counter()
        built = build(msgs, usable, True)
        times.append((time.perf_counter() - t) * 1000)
        stages = {s["name"]: s["ms"] for s in built.report.stages}
        staged.append(sum(stages.get(k, 0.0) for k in ("tool outputs", "key messages",
                                                        "digest")))
    report(f"first build with compaction, {len(msgs):,} messages ({full:,} tokens -> "
           f"{built.report.used:,}), median of 5", median(times), "ms")
    report("  of which the no-LLM stages", median(staged), "ms", "< 100 ms")
    times = []
    cache = BuildCache()
    build(msgs, usable, True, cache)
    history = list(msgs)
    for i in range(6):
        history.append(COUNTER.with_count(ConversationMessage(role="user", content=f"more {i}")))
        t = time.perf_counter()
        build(history, usable, True, cache)
        times.append((time.perf_counter() - t) * 1000)
    report("  rebuild after one append, compaction active (kept, extended)", median(times),
           "ms", "< 10 ms")
    times = []
    for i in range(4):  # the compaction renewed (as when the kept one passes the trigger)
        history.append(COUNTER.with_count(ConversationMessage(role="user", content=f"now {i}")))
        t = time.perf_counter()
        build(history, usable - 1 - i, True, cache)
        times.append((time.perf_counter() - t) * 1000)
    report("  a new compaction after appends (per-entry work remembered)", median(times), "ms")


def run() -> None:
    print("compaction")
    speed()
    quality()

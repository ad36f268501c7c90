"""Context quality without any LLM: the compaction stages against a naive baseline (drop the
oldest rounds until it fits, tool pairs kept whole) at 10%, 25% and 50% of each session's full
size, on the shared real trajectories and on sessions made here in every dialect of shell and
tool (tests/helpers/dialects.py); and the stages' speed on a 10,000-message log.

What a request keeps is judged by the benchmark's own reading of each session
(tests/bench/session_reading.py), not by the product's.
"""

from __future__ import annotations

import gc
import json
import time
from collections import defaultdict
from typing import Any

from core.context.budget import Budget
from core.context.builder import BudgetError, BuildCache, BuiltRequest, build_request
from core.context.normalize import protocol_errors
from core.context.prompts import PromptComposer
from core.llm.tokens import TokenCounter
from core.model import ConversationMessage
from tests.bench.common import SHARED_TRAJECTORIES, big_messages, median, report
from tests.bench.session_reading import kept_facts, request_text, user_intent
from tests.helpers.dialects import dialect_sessions

COUNTER = TokenCounter("o200k_base")
COMPOSER = PromptComposer()
FRACTIONS = (0.10, 0.25, 0.50)
ROOMY = 200  # below this, a window has no room for history beyond the latest message


def build(history: list[ConversationMessage], usable: int, compact: bool,
          cache: BuildCache | None = None) -> BuiltRequest:
    return build_request(history, "agent", model="gpt-4o", budget=Budget(usable, 0, 0, "bench"),
                         counter=COUNTER, composer=COMPOSER, compact=compact, cache=cache)


Sums = dict[tuple[float, str], dict[str, float]]  # (fraction, variant) -> figures


def session_sets() -> dict[str, list[tuple[list[ConversationMessage], list[str]]]]:
    """Named sets of sessions: (history, paths it modified) each."""
    def counted(raw: list[dict[str, Any]]) -> list[ConversationMessage]:
        return [COUNTER.with_count(ConversationMessage.from_openai(m)) for m in raw]

    sets = {}
    if SHARED_TRAJECTORIES.is_dir():
        shared = [json.loads(p.read_text()) for p in sorted(SHARED_TRAJECTORIES.glob("*.json"))]
        sets["shared sessions"] = [(counted(d["messages"]),
                                    (d.get("meta") or {}).get("files_touched") or [])
                                   for d in shared]
    else:
        print("  (../shared/data/trajectories not present: shared sessions skipped)")
    sets["dialect sessions"] = [(counted(raw), []) for raw in dialect_sessions().values()]
    return sets


def measure(sessions: list[tuple[list[ConversationMessage], list[str]]]) -> Sums:
    sums: Sums = defaultdict(lambda: defaultdict(float))
    for history, files in sessions:
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
                r = built.report
                roomy = r.usable - r.totals["system"] - r.totals["tools"] >= ROOMY
                s["users_kept"] += kept
                s["users"] += users
                if roomy:
                    s["roomy_kept"] += kept
                    s["roomy_users"] += users
                    s["roomy"] += 1
                text = request_text(built)
                s["paths_kept"] += sum(p in text for p in files)
                s["paths"] += len(files)
                for key, value in kept_facts(history, text).items():
                    s[key] += value
                    if roomy:
                        s["roomy_" + key] += value
    return sums


FACTS = (("commands", "distinct commands kept (their text)", {0.25: 90, 0.10: 75}),
         ("failures", "failing commands with their error text", {0.25: 90, 0.10: 75}),
         ("rules", "the user's constraint sentences verbatim", {0.25: 100, 0.10: 95}))


def detail(sums: Sums) -> None:
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
            if s["paths"]:
                report("    files_touched paths present",
                       100 * s["paths_kept"] / max(1, s["paths"]), "%", path_target)
            for key, name, targets in FACTS:
                target = targets.get(fraction)
                report(f"    {name} (of {int(s[key])})",
                       100 * s[key + "_kept"] / max(1, s[key]), "%")
                report(f"      in the builds with >= {ROOMY} tokens of room (of "
                       f"{int(s['roomy_' + key])})",
                       100 * s["roomy_" + key + "_kept"] / max(1, s["roomy_" + key]), "%",
                       f">= {target} %" if target and variant == "compaction" else "")
            report("    slowest build", s["ms"], "ms")


def table(name: str, count: int, sums: Sums) -> None:
    """Commands, failures and rules kept, compaction beside the naive window, per size (of
    the builds made: see `detail` for those refused as too small)."""
    print(f"  {name} ({count}): kept, compaction | naive newest-first window")
    print(f"    {'':<12}" + "".join(f"{f'{int(f * 100)}% of full size':>22}"
                                     for f in FRACTIONS))
    for key, _, targets in FACTS:
        row = []
        for fraction in FRACTIONS:
            pair = []
            for variant in ("compaction", "naive"):
                s = sums[(fraction, variant)]
                pair.append(f"{100 * s[key + '_kept'] / max(1, s[key]):5.1f}")
            row.append(f"{pair[0]} % | {pair[1]} %")
        target = targets.get(0.25)
        print(f"    {key:<12}" + "".join(f"{cell:>22}" for cell in row)
              + (f"   (target at 25%: >= {target} %)" if target else ""))


def quality() -> None:
    sets = session_sets()
    figures = {}
    for name, sessions in sets.items():
        print(f"  --- {name} ({len(sessions)}) ---")
        figures[name] = measure(sessions)
        detail(figures[name])
    for name, sums in figures.items():
        table(name, len(sets[name]), sums)


def speed() -> None:
    msgs = big_messages()
    gc.freeze()  # as the window does once a conversation is open (app/window/controller.py)
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

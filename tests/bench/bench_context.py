"""The context builder: build time on 10,000 messages, and validity on real trajectories."""

from __future__ import annotations

import json
import time

from core.context.budget import Budget
from core.context.builder import BudgetError, BuildCache, build_request
from core.context.normalize import protocol_errors
from core.context.prompts import PromptComposer
from core.llm.tokens import TokenCounter
from core.model import ConversationMessage
from tests.bench.common import SHARED_TRAJECTORIES, big_messages, median, report


def run() -> None:
    print("context")
    send_to_wire()
    counter = TokenCounter("o200k_base")
    composer = PromptComposer()
    msgs = big_messages()
    budget = Budget(128_000, 4096, 2560, "override")

    def build(history: list[ConversationMessage], cache: BuildCache | None = None) -> float:
        # Compaction off: the builder's own cost (`make bench compaction` has the stages').
        t = time.perf_counter()
        build_request(history, "chat", model="gpt-4o", budget=budget, counter=counter,
                      composer=composer, cache=cache, compact=False)
        return (time.perf_counter() - t) * 1000

    build(msgs)  # first build: prefix templates read
    times = [build(msgs) for _ in range(5)]
    report(f"build_request on {len(msgs):,} messages (cached counts, 128k window, trimming "
           "only)", median(times), "ms", "< 30 ms")
    times = []
    for i in range(5):
        cache = BuildCache()
        build(msgs, cache)
        extra = counter.with_count(ConversationMessage(role="user", content=f"question {i}"))
        times.append(build([*msgs, extra], cache))
    report("  rebuild after one append (incremental)", median(times), "ms", "< 5 ms")
    draft = "a draft the user is typing, a sentence or two long " * 4
    t = time.perf_counter()
    for _ in range(100):
        counter.text(draft)
    report("usage update per keystroke (count the draft)", (time.perf_counter() - t) * 10, "ms",
           "< 5 ms")

    if not SHARED_TRAJECTORIES.is_dir():
        print("  (../shared/data/trajectories not present: trajectory checks skipped)")
        return
    valid = total = refused = 0
    worst = 0.0
    for path in sorted(SHARED_TRAJECTORIES.glob("*.json")):
        raw = json.loads(path.read_text())["messages"]
        history = [counter.with_count(ConversationMessage.from_openai(m)) for m in raw]
        full = build_request(history, "agent", model="gpt-4o", budget=Budget(10**8, 0, 0, "x"),
                             counter=counter, composer=composer).report.used
        for fraction in (0.10, 0.25, 0.50):
            limit = int(full * fraction)
            total += 1
            t = time.perf_counter()
            try:
                built = build_request(history, "agent", model="gpt-4o",
                                      budget=Budget(limit, 0, 0, "x"), counter=counter,
                                      composer=composer)
            except BudgetError:
                refused += 1
                valid += 1  # a clear refusal, never an invalid request
                continue
            worst = max(worst, (time.perf_counter() - t) * 1000)
            if built.report.used <= limit and not protocol_errors(built.messages[1:]):
                valid += 1
    report(f"trajectories at 10/25/50% of full size: valid requests ({total} builds, "
           f"{refused} refused as too small)", 100.0 * valid / total, "%", "100 %")
    report("  slowest of those builds", worst, "ms")


def send_to_wire() -> None:
    """From Send to the request arriving at the (loopback) provider, in a 10,000-message
    conversation: the engine's whole hot path (append, build, save the request copy, litellm)."""
    import asyncio
    import tempfile
    from pathlib import Path

    from core.context.service import ProjectContext
    from core.engine import Engine
    from core.llm.runtime import load_litellm
    from core.settings import LLMSettings
    from core.store.project import Project
    from tests.bench.common import project_with
    from tests.helpers.fake_llm import MODEL, Answer, FakeLLMServer

    load_litellm()
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer() as server:
        conv = project_with(Path(tmp) / "p", big_messages())
        with Project.open(Path(tmp) / "p") as project:
            engine = Engine(ProjectContext(project.conversations, PromptComposer()),
                            requests_dir=project.state / "requests")
            settings = LLMSettings(model=MODEL, api_base=server.url, max_output_tokens=256,
                                   context_window=128_000)
            times: list[float] = []
            for i in range(6):
                server.script(Answer("ok"))

                async def turn(text: str) -> float:
                    start = time.time()
                    async for _ in engine.send(conv, text, settings):
                        pass
                    return (server.requests[-1].arrived - start) * 1000

                took = asyncio.run(turn(f"question {i}"))
                if i:  # the first turn loads the conversation and warms litellm's client
                    times.append(took)
    report("send -> request on the wire, 10,000-message conversation", median(times), "ms",
           "< 50 ms")

"""Store: durable appends and opening a 10,000-message conversation."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from core.llm.tokens import TokenCounter
from core.model import ConversationMessage
from core.store.project import Project
from tests.bench.common import big_messages, median, percentile, project_with, report


def run() -> None:
    print("store")
    with tempfile.TemporaryDirectory() as tmp:
        with Project.open(Path(tmp) / "p") as p:
            conv = p.conversations.create("appends")
            times = []
            for i in range(2000):
                msg = ConversationMessage(role="user", content=f"message {i} " + "x" * 200)
                t = time.perf_counter()
                p.conversations.append(conv.id, msg)
                times.append((time.perf_counter() - t) * 1000)
        report("durable append (fsync), median of 2,000", median(times), "ms")
        report("durable append (fsync), p99 of 2,000", percentile(times, 99), "ms")

        msgs = big_messages()
        conv_id = project_with(Path(tmp) / "big", msgs)
        log = Path(tmp) / "big" / ".workbench" / "conversations" / conv_id / "messages.jsonl"
        size_mb = log.stat().st_size / 2**20
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            with Project.open(Path(tmp) / "big", read_only=True) as p:
                loaded = p.conversations.load(conv_id).messages
            best = min(best, time.perf_counter() - t)
        report(f"open {len(loaded):,} messages / {size_mb:.1f} MB from disk", best * 1000, "ms",
               "< 1000 ms")
        counter = TokenCounter("o200k_base")
        t = time.perf_counter()
        total = counter.messages(loaded)
        report(f"count tokens of all of them from cached counts ({total:,} tokens)",
               (time.perf_counter() - t) * 1000, "ms")

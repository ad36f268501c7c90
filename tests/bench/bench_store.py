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

        search(Path(tmp) / "big", conv_id, msgs)


def search(root: Path, conv_id: str, msgs: list[ConversationMessage]) -> None:
    """Search across five 10,000-message conversations: by reading every log (what the store
    falls back to) and through the index (first search builds it, later ones only read what
    was appended)."""
    for n in range(4):
        project_with(root, msgs, title=f"copy {n}")
    with Project.open(root) as p:
        store = p.conversations
        ids = [r.id for r in store.list()]
        t = time.perf_counter()
        scanned = {c for c in ids if store._log_mentions(c, "needle-not-there")}
        report(f"search {len(ids)} x {len(msgs):,} messages by reading every log",
               (time.perf_counter() - t) * 1000, "ms")
        t = time.perf_counter()
        for c in ids:
            store._log_mentions(c, "straße")
        report("  the same, a word the raw bytes cannot rule out (non-ASCII)",
               (time.perf_counter() - t) * 1000, "ms")
        t = time.perf_counter()
        store.search("needle-not-there")
        report("  first indexed search (builds the index)", (time.perf_counter() - t) * 1000, "ms")
        times = []
        for word in ("word", "tool", "qzx", "ab", "straße"):
            t = time.perf_counter()
            store.search(word)
            times.append((time.perf_counter() - t) * 1000)
        report("  indexed search, median of 5 words", median(times), "ms")
        store.append(ids[0], ConversationMessage(role="user", content="needle-not-there now"))
        t = time.perf_counter()
        found = store.search("needle-not-there")
        report("  indexed search after an append", (time.perf_counter() - t) * 1000, "ms")
        assert found == {ids[0]} and not scanned

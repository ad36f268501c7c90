"""Store: durable appends and opening a 10,000-message conversation."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from core.llm.tokens import TokenCounter
from core.model import ConversationMessage, annotation
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

        fork(Path(tmp) / "big", conv_id, msgs)
        search(Path(tmp) / "big", conv_id, msgs)


def fork(root: Path, conv_id: str, msgs: list[ConversationMessage]) -> None:
    """A branch of a 10,000-message conversation: its time and the Python memory it takes (the
    log is copied file to file, never held)."""
    import tracemalloc

    with Project.open(root) as p:
        store = p.conversations
        store.load(conv_id)  # as the window has it
        times = []
        for entry in (msgs[-1].id, msgs[len(msgs) // 2].id, msgs[-1].id):
            t = time.perf_counter()
            made = store.fork(conv_id, entry)
            times.append((time.perf_counter() - t) * 1000)
            store.delete(made.id)
        report(f"fork a {len(msgs):,}-message conversation, median of 3", median(times), "ms",
               "< 100 ms")
        store.append(conv_id, annotation(msgs[10].id, "pin"))  # a later decision to carry
        tracemalloc.start()
        made = store.fork(conv_id, msgs[len(msgs) // 2].id)  # the tail is read for it
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        log = root / ".workbench" / "conversations" / conv_id / "messages.jsonl"
        report(f"  Python memory it takes at its peak (the log: {log.stat().st_size / 2**20:.1f} MB)",
               peak / 2**20, "MB")


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

"""Helpers shared by the benchmarks: figures, a big conversation, the shared data folder."""

from __future__ import annotations

import statistics
from pathlib import Path

from core.llm.tokens import TokenCounter
from core.model import ConversationMessage
from core.store.project import Project
from tests.helpers.trajectories import make_conversation

ROOT = Path(__file__).resolve().parents[2]
SHARED_TRAJECTORIES = ROOT.parent / "shared" / "data" / "trajectories"


def report(name: str, value: float, unit: str, target: str = "") -> None:
    suffix = f"   (target {target})" if target else ""
    print(f"  {name:<58} {value:>10.2f} {unit}{suffix}", flush=True)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def median(values: list[float]) -> float:
    return statistics.median(values)


def big_messages(count: int = 10_000, tool_chars: int = 9_000) -> list[ConversationMessage]:
    """About `count` messages, tool outputs included (~30 MB at the defaults), token-counted."""
    raw = make_conversation(count // 3, seed=11, tool_output_chars=tool_chars)
    while len(raw) < count:
        raw += make_conversation(50, seed=len(raw), tool_output_chars=tool_chars)[1:]
    raw = raw[:count]
    # never end on an assistant tool call without its results
    counter = TokenCounter("o200k_base")
    return [counter.with_count(ConversationMessage.from_openai(m)) for m in raw]


def project_with(path: Path, messages: list[ConversationMessage], title: str = "big") -> str:
    with Project.open(path) as p:
        conv = p.conversations.create(title)
        p.conversations.append_many(conv.id, messages)
        return conv.id


def headless_window_env(config: Path) -> None:
    """A window benchmark's environment: offscreen, its own settings folder, no keyring."""
    import os

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ["XDG_CONFIG_HOME"] = str(config)
    os.environ["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"

"""Helpers shared by the benchmarks: figures, a big conversation, the shared data folder."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

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
    # a title request after a first answer would take the next scripted reply of a run
    os.environ["WORKBENCH_AUTO_TITLE"] = "0"


def window_loop(config: Path, model: str | None = None) -> tuple[Any, Any]:
    """(the QApplication, its asyncio loop) for a window benchmark in this process, the model
    library warmed for `model` (None: litellm) as for a user who waited before sending."""
    import asyncio

    import qasync
    from PySide6.QtWidgets import QApplication

    from app.window.process import prepare_runtime, warm_up_library
    from core.llm.runtime import start_background_import

    headless_window_env(config)
    app = QApplication.instance() or QApplication([])
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    prepare_runtime()
    warm_up_library(model)
    start_background_import(True, model).join()
    return app, loop


class StallWatch:
    """Where the window's thread was during its longest stall: a sampler thread looks at the
    thread's stack every few milliseconds while `tick()` has not been called for `after` ms,
    and keeps the samples of the longest such stall (printed by `where`)."""

    def __init__(self, after_ms: float = 30.0) -> None:
        import threading

        self.after = after_ms / 1000
        self.main = threading.get_ident()
        self.last = 0.0
        self.current: list[str] = []
        self.longest: tuple[float, list[str]] = (0.0, [])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> StallWatch:
        import time

        self.last = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def tick(self) -> None:
        import time

        now = time.perf_counter()
        if self.current and now - self.last > self.longest[0]:
            self.longest = (now - self.last, self.current)
        self.current = []
        self.last = now

    def _run(self) -> None:
        import sys
        import threading
        import time

        while not self._stop.wait(0.004):
            if time.perf_counter() - self.last > self.after:
                frames = sys._current_frames()
                frame = frames.get(self.main)
                if frame is not None:
                    where = self._where(frame)
                    if where.startswith("bench_"):  # in Qt or waiting for the GIL:
                        # what the other threads were doing meanwhile
                        others = [self._where(f, 1) for t, f in frames.items()
                                  if t not in (self.main, threading.get_ident())]
                        busy = [o for o in others if "wait" not in o and "select" not in o]
                        where += " (other threads: " + ("; ".join(busy) or "idle") + ")"
                    self.current.append(where)

    @staticmethod
    def _where(frame: Any, depth: int = 3) -> str:
        """The innermost `depth` frames of ours (the innermost one with `depth` 1). Read from
        the frames alone: the sampler holds the interpreter while it looks, and looking up
        source lines (as traceback does) would lengthen the very stall it measures."""
        stack: list[tuple[str, int, str]] = []
        f = frame
        while f is not None:
            stack.append((f.f_code.co_filename, f.f_lineno, f.f_code.co_name))
            f = f.f_back
        ours = [s for s in stack if "/site-packages/" not in s[0] and "/lib/python3" not in s[0]]
        inner = (ours or stack)[:depth] if depth > 1 else stack[:1]
        return " < ".join(f"{Path(name).name}:{line} {func}" for name, line, func in inner)

    def where(self) -> str:
        """The commonest sample of the longest stall, or '' when none was seen."""
        samples = self.longest[1]
        if not samples:
            return ""
        common = max(set(samples), key=samples.count)
        return f"{self.longest[0] * 1000:.0f} ms, mostly in {common}"

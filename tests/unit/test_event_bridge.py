"""The engine's events reach the window in order, the turn's end after all of them, and a burst
of them (an answer that calls forty tools) does not keep the window from painting meanwhile."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time

import pytest
from PySide6.QtCore import QTimer
from pytestqt.qtbot import QtBot

from app.window.worker import SLICE_S, EventBridge

pytestmark = pytest.mark.gui


def test_a_burst_arrives_in_order_and_the_window_gets_turns_between(qtbot: QtBot) -> None:
    bridge = EventBridge()
    seen: list[object] = []
    window_turns: list[int] = []  # how many events had been handled when the window had a turn
    ended: list[tuple[str, int]] = []

    def handle(event: object) -> None:
        seen.append(event)
        time.sleep(SLICE_S / 4)  # a card laid out: a few milliseconds each

    def window_turn() -> None:
        window_turns.append(len(seen))
        if not ended:
            QTimer.singleShot(0, window_turn)

    bridge.engine_event.connect(handle)
    bridge.finished.connect(lambda outcome: ended.append((outcome, len(seen))))

    def engine() -> None:
        for n in range(80):
            bridge.post(n)
        bridge.done("done")

    worker = threading.Thread(target=engine)
    worker.start()
    worker.join(5)  # the whole burst is waiting before the window's loop turns at all
    QTimer.singleShot(0, window_turn)
    qtbot.waitUntil(lambda: bool(ended), timeout=10_000)
    assert seen == list(range(80))
    assert ended == [("done", 80)]
    # the window had turns while the burst was being handled, not only before and after it
    assert any(0 < n < 80 for n in window_turns)


def test_events_posted_after_a_drain_are_not_lost(qtbot: QtBot) -> None:
    bridge = EventBridge()
    seen: list[object] = []
    bridge.engine_event.connect(seen.append)
    bridge.post("first")
    qtbot.waitUntil(lambda: seen == ["first"], timeout=5000)
    bridge.post("second")  # the bridge is idle again: this one must wake it
    qtbot.waitUntil(lambda: seen == ["first", "second"], timeout=5000)


def test_an_engine_posting_while_the_window_is_busy_waits_for_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from core import give_way as gw

    monkeypatch.setattr(gw, "LONGEST_WAIT", 30.0)
    bridge = EventBridge()
    posted = threading.Event()
    gw.window_busy()  # the window's thread handles events and paints
    try:
        def post() -> None:
            bridge.post("card")
            posted.set()

        engine = threading.Thread(target=post)
        engine.start()
        assert not posted.wait(0.2)  # the engine gives the window its turn first
        gw.window_idle()
        assert posted.wait(5)
        engine.join(5)
    finally:
        gw.window_idle()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread niceness: Linux")
def test_the_engine_and_the_threads_it_starts_yield_the_processor_to_the_window() -> None:
    from app.window.worker import EngineWorker

    worker = EngineWorker()
    future = asyncio.run_coroutine_threadsafe(_priorities(), worker.loop)
    engine, tool_thread = future.result(10)
    window = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert engine > window and tool_thread > window
    worker.shutdown()


async def _priorities() -> tuple[int, int]:
    def nice() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    return nice(), await asyncio.to_thread(nice)  # a tool call's thread, say

"""The engine's events reach the window in order, the turn's end after all of them, and a burst
of them (an answer that calls forty tools) does not keep the window from painting meanwhile."""

from __future__ import annotations

import threading
import time

import pytest
from PySide6.QtCore import QTimer

from app.worker import SLICE_S, EventBridge

pytestmark = pytest.mark.gui


def test_a_burst_arrives_in_order_and_the_window_gets_turns_between(qtbot) -> None:
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


def test_events_posted_after_a_drain_are_not_lost(qtbot) -> None:
    bridge = EventBridge()
    seen: list[object] = []
    bridge.engine_event.connect(seen.append)
    bridge.post("first")
    qtbot.waitUntil(lambda: seen == ["first"], timeout=5000)
    bridge.post("second")  # the bridge is idle again: this one must wake it
    qtbot.waitUntil(lambda: seen == ["first", "second"], timeout=5000)

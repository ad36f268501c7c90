"""Engine turns on their own thread, with their own asyncio loop.

litellm and the provider SDK run Python on every streamed chunk, and more at the end of a
stream; on the window's thread that adds up to visible stalls. Here they run on a worker loop,
and every engine event crosses to the window's thread through a Qt signal (queued, so in
order). Stop cancels the worker task; the engine then persists the partial answer.

The window takes those events in short slices (SLICE_S): an agent's answer that calls forty
tools brings eighty events at once, and handling them in one go (each lays out a card) froze the
window for a moment the user could see. Between slices it paints and its other timers run.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from PySide6.QtCore import QObject, Qt, QTimer, Signal

from core.give_way import give_way, lower_priority

SLICE_S = 0.004  # the longest the window spends on engine events before it paints again


class _Finished:
    def __init__(self, outcome: str) -> None:
        self.outcome = outcome


class EventBridge(QObject):
    """From the worker thread to the window's: `post` and `done` may be called from any
    thread; the signals are emitted on the window's thread, in the order posted, a slice of
    at most `SLICE_S` at a time.

    Signals:
        engine_event(object): an engine event (entries arrive as EntryAppended, like the rest).
        finished(str): the turn is over: "done", "cancelled" or "failed" (after its events).
    """

    engine_event = Signal(object)
    finished = Signal(str)
    _wake = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._queue: deque[object] = deque()
        self._lock = threading.Lock()
        self._scheduled = False
        self._wake.connect(self._drain, Qt.ConnectionType.QueuedConnection)

    def post(self, event: object) -> None:
        give_way()  # an engine that posts while the window paints takes the GIL from it
        self._put(event)

    def done(self, outcome: str) -> None:
        self._put(_Finished(outcome))

    def _put(self, item: object) -> None:
        with self._lock:
            self._queue.append(item)
            if self._scheduled:
                return
            self._scheduled = True
        self._wake.emit()

    def _drain(self) -> None:
        deadline = time.perf_counter() + SLICE_S
        while True:
            with self._lock:
                if not self._queue:
                    self._scheduled = False
                    return
                item = self._queue.popleft()
            if isinstance(item, _Finished):
                self.finished.emit(item.outcome)
            else:
                self.engine_event.emit(item)
            if time.perf_counter() >= deadline:
                break
        QTimer.singleShot(0, self._drain)  # the rest after the window has painted


class TurnHandle:
    """A running turn, cancellable from any thread, even before its task has started."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._task: asyncio.Task[None] | None = None
        self._cancel = False
        self._lock = threading.Lock()

    def attach(self, task: asyncio.Task[None]) -> None:
        with self._lock:
            self._task = task
            if self._cancel:
                task.cancel()

    def cancel(self) -> None:
        with self._lock:
            self._cancel = True
            if self._task is not None:
                self._loop.call_soon_threadsafe(self._task.cancel)


def _outcome(task: asyncio.Task[None]) -> str:
    if task.cancelled():
        return "cancelled"
    return "failed" if task.exception() is not None else "done"


class EngineWorker:
    """A daemon thread running an asyncio loop for engine turns."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="engine", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        lower_priority()  # and the threads it starts: tool calls, litellm's (core/give_way.py)
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(
        self,
        events: AsyncIterator[Any],
        on_event: Callable[[Any], None],
        on_done: Callable[[str], None],
    ) -> TurnHandle:
        """Drive `events` on the worker loop.

        `on_done` is called exactly once, on the worker thread, after the task has finished
        everything it does (so after the engine persisted a stopped entry): with "done",
        "cancelled" or "failed".
        """

        async def drive() -> None:
            async for ev in events:
                on_event(ev)

        handle = TurnHandle(self.loop)

        def start() -> None:
            task = self.loop.create_task(drive())
            task.add_done_callback(lambda t: on_done(_outcome(t)))
            handle.attach(task)

        self.loop.call_soon_threadsafe(start)
        return handle

    def call_soon(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run `work` on the worker loop, not waiting for it (closing what a project kept
        open there)."""
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(work, self.loop)
        else:
            work.close()

    def shutdown(self, timeout: float = 5.0) -> None:
        """Cancel running turns, give them `timeout` seconds to persist what they have, stop."""
        if not self._thread.is_alive():
            return

        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks(self.loop) if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(cancel_all(), self.loop).result(timeout)
        except (TimeoutError, RuntimeError):
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()

"""Engine turns on their own thread, with their own asyncio loop.

litellm and the provider SDK spend a few milliseconds of Python on every streamed chunk and more
at the end of a stream; on the window's thread that adds up to visible stalls. Here they run on a
worker loop, and every engine event crosses to the window's thread through a Qt signal (queued,
so in order). Stop cancels the worker task; the engine then persists the partial answer.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

from PySide6.QtCore import QObject, Signal


class EventBridge(QObject):
    """Signals (emitted from the worker thread, delivered on the window's thread):
        engine_event(object): an engine event (entries arrive as EntryAppended, like the rest).
        finished(str): the turn is over: "done", "cancelled" or "failed".
    """

    engine_event = Signal(object)
    finished = Signal(str)


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

"""Work on a thread the process does not wait for.

`asyncio.to_thread` runs on the loop's executor, and `asyncio.run` joins that executor on the way
out: one call stuck in the kernel (a read of a hung network drive, a terminal waiting for Enter)
then keeps the whole program from ending, Ctrl+C included. Here each call gets a daemon thread of
its own: cancelling the wait returns at once, and a thread still stuck dies with the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")


async def in_daemon_thread(fn: Callable[..., T], *args: Any,
                           deadline: float | None = None) -> T:
    """`fn(*args)` on a daemon thread of its own; its result, or its exception.

    Raises:
        TimeoutError: it took longer than `deadline` seconds (it is abandoned, not stopped).
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if not future.done():
            if ok:
                future.set_result(cast(T, value))
            else:
                future.set_exception(value)

    def work() -> None:
        ok, value = True, cast(object, None)
        try:
            value = fn(*args)
        except BaseException as e:  # handed to the awaiting task, whatever it is
            ok, value = False, e
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            loop.call_soon_threadsafe(settle, ok, value)

    threading.Thread(target=work, name=getattr(fn, "__name__", "work"), daemon=True).start()
    return await wait_within(future, deadline)


async def wait_within(aw: Awaitable[T], seconds: float | None) -> T:
    """`aw`'s result, as `asyncio.wait_for` gives it, except that a cancellation is never lost:
    Python 3.11's wait_for returns the result when it arrives together with the cancellation
    (a tool that ends as the user presses Stop), and the turn then goes on as if not stopped.

    Raises:
        TimeoutError: `aw` took longer than `seconds` (it is cancelled).
    """
    future = asyncio.ensure_future(aw)
    try:
        done, _ = await asyncio.wait({future}, timeout=seconds)
    except asyncio.CancelledError:
        future.cancel()
        raise
    if not done:
        future.cancel()
        raise TimeoutError
    return future.result()

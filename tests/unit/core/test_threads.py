"""Work on a thread the process does not wait for: a result, an error, a deadline, a Stop."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time

import pytest

from core.threads import in_daemon_thread, wait_within


def test_the_result_and_the_error_come_back() -> None:
    async def go() -> None:
        assert await in_daemon_thread(sum, [1, 2, 3]) == 6
        with pytest.raises(ZeroDivisionError):
            await in_daemon_thread(lambda: 1 / 0)

    asyncio.run(asyncio.wait_for(go(), 10))


def test_a_stuck_call_is_abandoned_at_its_deadline_and_on_stop() -> None:
    release = threading.Event()

    async def go() -> None:
        with pytest.raises(TimeoutError):
            await in_daemon_thread(release.wait, 30, deadline=0.2)
        task = asyncio.ensure_future(in_daemon_thread(release.wait, 30))
        await asyncio.sleep(0.1)
        task.cancel()  # Stop
        with pytest.raises(asyncio.CancelledError):
            await task

    started = time.monotonic()
    asyncio.run(asyncio.wait_for(go(), 10))
    assert time.monotonic() - started < 10  # and asyncio.run did not wait for the threads
    release.set()


def test_a_program_ends_though_a_thread_is_stuck_for_good() -> None:
    code = ("import asyncio, threading\nfrom core.threads import in_daemon_thread\n"
            "async def go():\n    try:\n        await in_daemon_thread(threading.Event().wait, "
            "deadline=0.2)\n    except TimeoutError:\n        print('abandoned')\n"
            "asyncio.run(go())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=30, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "abandoned"


def test_a_result_that_comes_with_a_stop_does_not_swallow_the_stop() -> None:
    """Python 3.11's wait_for returns a result that arrives as its task is cancelled: a tool
    ending as the user pressed Stop let the turn go on (found by tests/fuzz)."""
    async def go() -> None:
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        waiter = asyncio.ensure_future(wait_within(done, 5))
        await asyncio.sleep(0)
        done.set_result(1)
        waiter.cancel()  # in the same turn of the loop: both at once
        with pytest.raises(asyncio.CancelledError):
            await waiter

    asyncio.run(go())


def test_wait_within_gives_the_result_or_times_out() -> None:
    async def go() -> None:
        assert await wait_within(asyncio.sleep(0, "ok"), 5) == "ok"
        with pytest.raises(TimeoutError):
            await wait_within(asyncio.sleep(5), 0.01)

    asyncio.run(go())

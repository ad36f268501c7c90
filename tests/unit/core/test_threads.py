"""Work on a thread the process does not wait for: a result, an error, a deadline, a Stop."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time

import pytest

from core.threads import in_daemon_thread


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

"""core.llm.compat's queue: one request at a time per server, first come first served, for
event loops and threads alike; a waiter that gives up passes its turn on."""

from __future__ import annotations

import asyncio
import threading

from core.llm import compat
from core.llm.compat import ServerQueue

DEADLINE_S = 10.0


def test_waiters_enter_in_the_order_they_came_and_a_cancelled_one_is_skipped() -> None:
    queue = ServerQueue()
    order: list[str] = []

    async def go() -> None:
        await queue.enter()  # the answer

        async def wait(name: str) -> None:
            await queue.enter()
            order.append(name)
            queue.leave()

        first = asyncio.create_task(wait("title"))
        gone = asyncio.create_task(wait("stopped"))
        last = asyncio.create_task(wait("summary"))
        await asyncio.sleep(0)  # all three wait now
        assert queue.waiting() == 3
        gone.cancel()
        queue.leave()  # the answer ends
        await asyncio.gather(first, last)

    asyncio.run(asyncio.wait_for(go(), DEADLINE_S))
    assert order == ["title", "summary"] and not queue.busy()


def test_a_thread_waits_its_turn_behind_a_loop_and_gives_up_at_its_deadline() -> None:
    queue = ServerQueue()
    got: list[bool] = []

    async def go() -> None:
        await queue.enter()
        waiting = threading.Thread(target=lambda: got.append(queue.enter_sync(DEADLINE_S)))
        waiting.start()
        while queue.waiting() == 0:
            await asyncio.sleep(0.01)
        queue.leave()
        await asyncio.to_thread(waiting.join, DEADLINE_S)

    asyncio.run(asyncio.wait_for(go(), DEADLINE_S))
    assert got == [True] and queue.busy()
    assert queue.enter_sync(0.0) is False  # busy: a deadline of nothing gives up at once
    queue.leave()
    assert not queue.busy()


def test_on_a_loop_s_thread_a_blocking_request_never_waits() -> None:
    url = "http://127.0.0.1:9/v1"
    queue = compat.queue_for(url, "m")
    assert queue is not None

    async def go() -> bool:
        await queue.enter()  # the loop's own answer is under way
        try:
            with compat.one_at_a_time_sync(url, "m", DEADLINE_S) as turn:
                return turn
        finally:
            queue.leave()

    assert asyncio.run(asyncio.wait_for(go(), DEADLINE_S)) is False
    with compat.one_at_a_time_sync(url, "m", DEADLINE_S) as turn:  # no loop: free, so at once
        assert turn


def test_profiles_local_hosted_learned_and_kept() -> None:
    local = "http://192.168.1.5:8080/v1"
    assert compat.profile(local, "m") == compat.LOCAL
    assert compat.profile("https://openrouter.ai/api/v1", "m") == compat.HOSTED
    assert compat.queue_for("https://openrouter.ai/api/v1", "m") is None
    assert compat.learned(local, "m") is None
    assert compat.learn(local, "m", streams_tools=False)
    assert not compat.learn(local, "m", streams_tools=False)  # not news twice
    kept = compat.learned(local, "m")
    assert kept is not None and kept["streams_tools"] == 0.0 and kept["tool_choice"] == 1.0
    compat.forget_all()
    compat.seed(local + "/", "m", kept)
    assert not compat.profile(local, "m").streams_tools

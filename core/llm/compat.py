"""What a server needs beyond the OpenAI protocol as OpenAI's own API speaks it: a small
compatibility profile per (address, model), and one request at a time where it says so.

A server on this machine or the local network (llama.cpp, llama-cpp-python, Ollama, LM Studio,
vLLM) starts from `LOCAL`:
- `tool_choice: "auto"` with the tools: llama-cpp-python's `chatml-function-calling` shows the
  model the tools only when a tool choice is given; llama.cpp, vLLM, LM Studio and Ollama take
  "auto" as the default it is;
- an assistant message of tool calls carries `content: ""`: llama-cpp-python's templates read
  `message.content` (a missing key or null is an HTTP 500); every other server takes "";
- tool rounds are streamed until the server refuses one streamed (llama-cpp-python: an empty
  200, "Automatic streaming tool choice is not supported"); then they are asked unstreamed
  from then on (`learn`), never twice;
- one request at a time: llama-cpp-python ends a running stream when another request arrives,
  so titles, counting requests and summaries wait their turn (`ServerQueue`), in order.
Any other address (OpenAI's own API, OpenRouter, ...) gets `HOSTED`: the request unchanged.

What is learned is kept here for the process; `learned()` and `seed()` carry it to and from the
calibration file beside the learned window (key `profile:<address>|<model>`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass, replace
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Profile:
    tool_choice: bool = False  # send tool_choice "auto" with the tools
    empty_content: bool = False  # a tool-call message without text carries content ""
    streams_tools: bool = True  # a request with tools may be streamed
    one_at_a_time: bool = False  # requests to the server wait for each other


HOSTED = Profile()
LOCAL = Profile(tool_choice=True, empty_content=True, streams_tools=True, one_at_a_time=True)

_lock = threading.Lock()
_learned: dict[tuple[str, str], Profile] = {}
_queues: dict[str, ServerQueue] = {}


def is_local(api_base: str) -> bool:
    """A server on this machine or the local network (asking it costs nobody anything)."""
    host = (urlsplit(api_base).hostname or "").lower()
    if host == "localhost" or host.endswith(".local"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def _key(api_base: str, model: str) -> tuple[str, str]:
    return api_base.rstrip("/"), model


def profile(api_base: str | None, model: str) -> Profile:
    """What the server at `api_base` needs for `model` (learned, else its kind's default)."""
    if not api_base or not is_local(api_base):
        return HOSTED
    with _lock:
        return _learned.get(_key(api_base, model), LOCAL)


def learn(api_base: str | None, model: str, **changes: bool) -> bool:
    """Remember what the server showed (`streams_tools=False`); True when it is news."""
    if not api_base or not is_local(api_base):
        return False
    key = _key(api_base, model)
    with _lock:
        old = _learned.get(key, LOCAL)
        new = replace(old, **changes)
        _learned[key] = new
    return new != old


def learned(api_base: str, model: str) -> dict[str, float] | None:
    """The learned profile as the calibration file keeps it (None: nothing learned)."""
    with _lock:
        found = _learned.get(_key(api_base, model))
    return None if found is None else {k: float(v) for k, v in asdict(found).items()}


def seed(api_base: str, model: str, values: dict[str, Any]) -> None:
    """Take a profile learned by an earlier run (from the calibration file)."""
    fields = {k: bool(v) for k, v in values.items() if k in Profile.__dataclass_fields__}
    with _lock:
        _learned[_key(api_base, model)] = replace(LOCAL, **fields)


def forget(api_base: str, model: str) -> None:
    with _lock:
        _learned.pop(_key(api_base, model), None)


def forget_all() -> None:
    """For tests: every server as new (a request still under way leaves a queue no longer
    handed out, so a server later at the same address never waits for it)."""
    with _lock:
        _learned.clear()
        _queues.clear()


def queue_for(api_base: str | None, model: str) -> ServerQueue | None:
    """The queue of the server at `api_base` when it takes one request at a time."""
    if not api_base or not profile(api_base, model).one_at_a_time:
        return None
    root = api_base.rstrip("/")
    with _lock:
        return _queues.setdefault(root, ServerQueue())


def busy(api_base: str | None, model: str) -> bool:
    """Whether a request to the server at `api_base` is under way now (a one-at-a-time one)."""
    queue = queue_for(api_base, model)
    return queue is not None and queue.busy()


@asynccontextmanager
async def one_at_a_time(api_base: str | None, model: str) -> AsyncIterator[None]:
    """Around a request: waits for the server's earlier requests to end (in order)."""
    queue = queue_for(api_base, model)
    if queue is None:
        yield
        return
    await queue.enter()
    try:
        yield
    finally:
        queue.leave()


@contextmanager
def one_at_a_time_sync(api_base: str | None, model: str, deadline_s: float) -> Iterator[bool]:
    """The same for a blocking request: yields False when the turn did not come within
    `deadline_s` (the caller then does without). On an event loop's thread it never waits: the
    request it would wait for may be that loop's own."""
    queue = queue_for(api_base, model)
    if queue is None:
        yield True
        return
    try:
        asyncio.get_running_loop()
        deadline_s = 0.0
    except RuntimeError:  # no loop on this thread: waiting blocks nothing of ours
        pass
    entered = queue.enter_sync(deadline_s)
    try:
        yield entered
    finally:
        if entered:
            queue.leave()


def _grant(turn: asyncio.Future[None]) -> None:
    if not turn.done():  # not cancelled meanwhile
        turn.set_result(None)


class _Waiter:
    def __init__(self, wake: Callable[[], None]) -> None:
        self.wake = wake
        self.granted = False
        self.gone = False


class ServerQueue:
    """One request at a time, first come first served, for threads and event loops alike
    (a title on the window's loop, a count on a worker thread, the answer on the engine's)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy = False
        self._waiting: deque[_Waiter] = deque()

    def busy(self) -> bool:
        with self._lock:
            return self._busy

    def waiting(self) -> int:
        with self._lock:
            return sum(not w.gone for w in self._waiting)

    async def enter(self) -> None:
        loop = asyncio.get_running_loop()
        turn: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            loop.call_soon_threadsafe(_grant, turn)

        with self._lock:
            if not self._busy:
                self._busy = True
                return
            waiter = _Waiter(wake)
            self._waiting.append(waiter)
        try:
            await turn
        except BaseException:  # cancelled while waiting (a Stop): give the turn on
            with self._lock:
                waiter.gone = True
                if waiter.granted:
                    self._hand_on()
            raise

    def enter_sync(self, deadline_s: float) -> bool:
        event = threading.Event()
        with self._lock:
            if not self._busy:
                self._busy = True
                return True
            waiter = _Waiter(event.set)
            self._waiting.append(waiter)
        if event.wait(deadline_s):
            return True
        with self._lock:
            waiter.gone = True
            if waiter.granted:  # granted as the deadline passed
                self._hand_on()
        return False

    def leave(self) -> None:
        with self._lock:
            self._hand_on()

    def _hand_on(self) -> None:
        """(Under `_lock`.) The next waiter still there gets the turn, else none is busy."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if waiter.gone:
                continue
            try:
                waiter.wake()
            except RuntimeError:  # its event loop has closed
                waiter.gone = True
                continue
            waiter.granted = True
            return
        self._busy = False

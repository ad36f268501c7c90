"""What a request leaves behind as it goes out: its copy in `.workbench/requests/` with its
build report (and its stable prefix against the request before it), and where a provider that
needs marks should cache it."""

from __future__ import annotations

import asyncio
import contextlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from core.context.builder import BuiltRequest
from core.context.report_text import identical_lead, stable_prefix
from core.give_way import give_way
from core.llm.tokens import TokenCounter
from core.store.errors import describe_os_error
from core.store.requests import latest_request, save_request

REMEMBERED_CONVERSATIONS = 4  # the last requests held in memory, for this many conversations


def remember(memory: dict[str, Any], conv_id: str, value: Any) -> None:
    """`memory[conv_id] = value`, the least recently set conversation forgotten past a few (a
    request of a long conversation holds megabytes)."""
    memory.pop(conv_id, None)
    memory[conv_id] = value
    while len(memory) > REMEMBERED_CONVERSATIONS:
        memory.pop(next(iter(memory)))


MAX_BREAKPOINTS = 4  # Anthropic's limit per request


def cache_breakpoints(previous: list[dict[str, Any]] | None,
                      messages: list[dict[str, Any]]) -> tuple[int, ...]:
    """Where a provider that needs marks should cache this request: after the system prompt,
    where it stops repeating the previous request (what this one can read from the cache),
    and at its end (what the next one can)."""
    same = identical_lead(previous, messages)
    points = {0, len(messages) - 1}
    if same > 1:
        points.add(same - 1)
    return tuple(sorted(p for p in points if p >= 0))[:MAX_BREAKPOINTS]


# One thread writes every copy, in the order the requests were made: two copies of one turn
# (a request and its rebuild after an overflow) never race each other to the folder.
_WRITER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="request-copies")


def finish_writes(timeout: float = 30.0) -> None:
    """Wait until every copy asked for so far is written (a process about to end at once), for
    at most `timeout` seconds: a copy is a convenience, never worth a hung command."""
    with contextlib.suppress(TimeoutError):
        _WRITER.submit(lambda: None).result(timeout)  # one thread, in order: the last one done


class RequestCopies:
    """The copies of a turn's requests for `.workbench/requests/`: written on the copies'
    thread once the request is on its way (never between Send and the wire), and settled
    after the turn's entry is saved (a failure is reported after it)."""

    def __init__(self, requests_dir: Path | None, conv_id: str, notes: list[str],
                 previous: list[dict[str, Any]] | None, counter: TokenCounter,
                 saved: dict[str, tuple[Path, BuiltRequest]] | None = None) -> None:
        self._dir, self._conv_id, self._notes = requests_dir, conv_id, notes
        self._saved = saved  # conversation -> (its newest copy, the request it holds)
        self._previous, self._counter = previous, counter
        self._waiting: list[BuiltRequest] = []
        self._running: list[asyncio.Future[None]] = []

    def add(self, built: BuiltRequest) -> None:
        self._waiting.append(built)

    def start(self) -> None:
        while self._waiting:
            built = self._waiting.pop(0)
            self._running.append(asyncio.get_running_loop().run_in_executor(
                _WRITER, self._save, built))

    async def settle(self) -> list[str]:
        """Wait until every copy is written; returns the notes for the user (a copy that
        could not be saved, with whatever else the turn noted on the way)."""
        self.start()
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)
        return self._notes

    def _save(self, built: BuiltRequest) -> None:
        """The request's stable prefix against the one sent before it (else the last copy
        saved), then its copy."""
        requests_dir, conv_id = self._dir, self._conv_id
        before = self._previous
        if before is None and requests_dir is not None:
            last = latest_request(requests_dir, conv_id)
            before = last[1]["messages"] if last is not None else None
        if before is not None:
            built.report.stable_prefix = stable_prefix(before, built.messages, built.report,
                                                       self._counter)
        if requests_dir is None:
            return
        try:
            path = save_request(requests_dir, conv_id, {
                "messages": built.messages, "tools": built.tools,
                "report": built.report.to_json(compact=True, pause=give_way)})
            if self._saved is not None:
                remember(self._saved, conv_id, (path, built))
        except OSError as e:
            self._notes.append(f"A copy of this request could not be kept in .workbench/"
                               f"requests ({describe_os_error(e)}); the answer is not affected.")

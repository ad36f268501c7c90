"""Every failure the fuzzer found, replayed step by step as it found it (shrunk): each test
names the invariant it broke and, while the bug is unfixed, the KNOWN_BUGS entry that excuses
it (tests/fuzz/known_bugs.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from core.tools.runner import ALLOW_ONCE
from tests.fuzz.machine import KEY, Workbench


@pytest.fixture(autouse=True)
def fake_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


@pytest.fixture
def machine() -> Iterator[Workbench]:
    m = Workbench()
    m.first_conversation()
    yield m
    m.teardown()


def check(m: Workbench) -> None:
    m.logs_are_complete()
    m.no_key_in_files()
    m.requests_are_valid_and_true()


def test_stop_as_a_quick_tool_ends_stops_the_turn(machine: Workbench) -> None:
    """Invariant: a Stop ends the turn as stopped. Pressed right after the entry of an answer
    that calls read_file (in a Retry), the Stop reached the engine while the tool's thread
    ended: asyncio.wait_for (Python 3.11) returned the result and dropped the cancellation, and
    the turn made its next request and ended "ok" (some runs: it depends on the thread being
    done first). Fixed by core.threads.wait_within."""
    m = machine
    m.send(which=0, mode="chat", text="fix the add function", attach=["notes.md"],
           script=([([6, 3, 5], True)], 5), stop_at=28, approve="never", choice=ALLOW_ONCE,
           via_preview=True)
    check(m)
    m.continue_or_retry(which=0, script=([([1], True)], 1), stop_at=4)
    check(m)


def test_a_run_started_after_a_crash_mid_batch_answers_the_interrupted_calls_first(
        machine: Workbench) -> None:
    """Invariant: the stored log is protocol-complete. The app was killed between the results
    of one batch (call_2 answered, call_3 not); a run started on reopening wrote its start
    message after the batch without answering call_3 (RunDriver.start did not close the
    interrupted calls, as Engine.send does), and call_3 stayed without a result for good."""
    m = machine
    m.crash(which=0, mode="agent", script=([([7, 1], True)], 5), crash_at=8)
    check(m)
    m.run_workflow(which=0, steps=["done"], stop_at=None)
    check(m)


def test_excluding_the_first_user_message_starts_the_request_with_the_answer(
        machine: Workbench) -> None:
    """Invariant: every request is valid for Anthropic (the first message after the system
    prompt is the user's). KNOWN_BUGS["F1"] while unfixed."""
    m = machine
    m.send(which=0, mode="chat", text="hi", attach=[], script=([], 0), stop_at=None,
           approve="always", choice=ALLOW_ONCE, via_preview=False)
    m.annotate(which=0, entry=0, action="exclude")  # the user's "hi"
    check(m)
    m.send(which=0, mode="chat", text="hi", attach=[], script=([], 0), stop_at=None,
           approve="always", choice=ALLOW_ONCE, via_preview=False)
    check(m)


def test_excluding_the_only_user_message_then_retry_sends_only_the_system_prompt(
        machine: Workbench) -> None:
    """Invariant: every request is valid (a message besides the system prompt, the user's
    first). KNOWN_BUGS["F2"] while unfixed."""
    m = machine
    m.send(which=0, mode="chat", text="hi", attach=[], script=([], 6), stop_at=None,
           approve="always", choice=ALLOW_ONCE, via_preview=False)  # HTTP 500
    m.annotate(which=0, entry=0, action="exclude")
    check(m)
    m.continue_or_retry(which=0, script=([], 0), stop_at=None)  # Retry
    check(m)

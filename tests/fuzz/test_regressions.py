"""Every failure the fuzzer found, replayed step by step as it found it (shrunk): each test
names the invariant it broke and, while the bug is unfixed, the KNOWN_BUGS entry that excuses
it (tests/fuzz/known_bugs.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from core.context.projection import LEAD
from core.tools.runner import ALLOW_ONCE
from tests.fuzz.known_bugs import HITS, KNOWN_BUGS
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


@contextmanager
def meets(bug: str) -> Iterator[None]:
    """While `bug` is in KNOWN_BUGS the replay must still meet it (else the entry is stale:
    delete it); once deleted, the invariants inside are strict."""
    before = HITS[bug]
    yield
    if bug in KNOWN_BUGS:
        assert HITS[bug] > before, f"{bug} no longer happens: delete it from KNOWN_BUGS"


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
    prompt is the user's). Was F1: the request started with the model's answer; a short
    user message now stands before it."""
    m = machine
    m.send(which=0, mode="chat", text="hi", attach=[], script=([], 0), stop_at=None,
           approve="always", choice=ALLOW_ONCE, via_preview=False)
    m.annotate(which=0, entry=0, action="exclude")  # the user's "hi"
    check(m)
    m.send(which=0, mode="chat", text="hi", attach=[], script=([], 0), stop_at=None,
           approve="always", choice=ALLOW_ONCE, via_preview=False)
    check(m)
    sent = m.server.requests[-1].body["messages"]
    assert [x["role"] for x in sent[:3]] == ["system", "user", "assistant"]
    assert sent[1]["content"] == LEAD  # what stands for the left-out message


def test_excluding_the_only_user_message_then_retry_sends_only_the_system_prompt(
        machine: Workbench) -> None:
    """Invariant: every request is valid (a message besides the system prompt). Was F2: the
    system prompt alone was sent; now nothing is, and the turn ends in an error that says why."""
    m = machine
    m.send(which=0, mode="chat", text="hi", attach=[], script=([], 6), stop_at=None,
           approve="always", choice=ALLOW_ONCE, via_preview=False)  # HTTP 500
    m.annotate(which=0, entry=0, action="exclude")
    check(m)
    requests = len(m.server.requests)
    m.continue_or_retry(which=0, script=([], 0), stop_at=None)  # Retry
    check(m)
    assert len(m.server.requests) == requests  # nothing went out
    last = m.messages(m.convs[0])[-1]
    assert last.error is not None and last.error.type == "nothing_to_send"
    assert "left out of the context" in last.error.message


# --- the known bugs (tests/fuzz/known_bugs.py), as the fuzzer met them -------------------------


def send(m: Workbench, text: str = "hi", mode: str = "chat", attach: list[str] | None = None,
         script: tuple[list[tuple[list[int], bool]], int] = ([], 0),
         stop_at: int | None = None) -> None:
    m.send(which=0, mode=mode, text=text, attach=attach or [], script=script,
           stop_at=stop_at, approve="always", choice=ALLOW_ONCE, via_preview=False)
    check(m)


def test_n2_a_fork_at_a_result_card_cuts_the_batch_and_the_branch_says_it_did_nothing(
        machine: Workbench) -> None:
    """Invariant: the model is never told something false. The user pinned a message while
    the batch of two commands ran (the pin lands between their results); forked at the first
    result, the branch's next request says of the second call "Not run ... it did nothing",
    though it ran in the conversation the branch came from."""
    with meets("N2"):
        m = machine
        m.send(which=0, mode="agent", text="look around", attach=[], script=([([6, 6], False)], 0),
               stop_at=None, approve="always", choice=ALLOW_ONCE, via_preview=False,
               pin_at=6)  # after the first result's entry
        check(m)
        m.fork(which=0, entry=2, before=False)  # user, calls, result 1 | pin, result 2, answer
        check(m)
        m.send(which=1, mode="agent", text="go on", attach=[], script=([], 0), stop_at=None,
               approve="always", choice=ALLOW_ONCE, via_preview=False)
        check(m)


def test_n3_edit_and_resend_drops_the_attachments(machine: Workbench) -> None:
    """Invariant: an edited message resent unchanged is the message it edits."""
    m = machine
    with meets("N3"):
        send(m, "please read the README", attach=["notes.md", "shot.png"])
        m.edit_and_resend(which=0, message=0, script=([], 0))
        check(m)


def test_n9_a_stop_while_the_copies_settle_ends_the_turn_ok(machine: Workbench) -> None:
    """Invariant: a Stop ends the turn as stopped. Stop right after the answer's entry (event
    6: your message, built, started, two pieces of text, the answer)."""
    with meets("N9"):
        send(machine, "hi", script=([], 0), stop_at=6)


def test_n10_an_image_in_the_history_goes_to_a_model_without_vision(machine: Workbench) -> None:
    """Invariant: every request is valid (no image to a model without vision)."""
    m = machine
    with meets("N10"):
        send(m, "what is this?", attach=["shot.png"])
        m.switch_model()
        send(m, "and now?")


def test_regenerate_in_chat_mode_drops_the_tool_calls(machine: Workbench) -> None:
    """Invariant: a regenerated request is the original's (its tail after the user's message:
    the calls and results the answer was based on)."""
    m = machine
    with meets("regen-drops-tools"):
        send(m, "read the readme", "agent", script=([([0], False)], 0))
        m.regenerate(which=0, entry=2, mode="chat", script=([], 0))  # the answer after the result
        check(m)


def test_n8_a_key_in_an_imported_file_is_written_and_sent(machine: Workbench) -> None:
    """Invariant: no key in the project's files nor in a request."""
    m = machine
    with meets("N8-import"):
        m.export_import(which=0, key=True)
        check(m)
        m.send(which=1, mode="chat", text="hi", attach=[], script=([], 0), stop_at=None,
               approve="always", choice=ALLOW_ONCE, via_preview=False)
        check(m)


def test_n8_a_key_in_agents_md_is_sent_and_kept_in_the_request_copies(
        machine: Workbench) -> None:
    """Invariant: no key in the project's files nor in a request."""
    m = machine
    with meets("N8-agents-md"):
        m.agents_md(which=0, what="with key")
        send(m, "hi")


def test_the_preview_leaves_out_the_tools_of_an_mcp_server_not_started_yet() -> None:
    """Invariant: what the preview (and `workbench context`) says is sent is what the server
    receives. The project has an MCP server that was never started: the preview offers only
    our tools, the first agent request also the server's six."""
    m = Workbench()
    try:
        with meets("F3"):
            m.first_conversation(mcp=True)
            m.send(which=0, mode="agent", text="look", attach=[], script=([([9, 10], False)], 0),
                   stop_at=None, approve="always", choice=ALLOW_ONCE, via_preview=True)
            check(m)
    finally:
        m.teardown()


def test_an_import_keeps_calls_without_results_before_a_later_message(
        machine: Workbench) -> None:
    """Invariant: the stored log reads back protocol-complete. Killed after the answer that
    calls three tools (event 5), the conversation is exported with a message added (as a
    foreign export might hold one) and imported: its log has the calls, then the message,
    and no results."""
    m = machine
    m.crash(which=0, mode="chat", script=([([0, 0, 0], False)], 0), crash_at=5)
    check(m)
    m.export_import(which=0, key=True)
    check(m)


def test_regenerate_when_no_message_of_the_users_is_sent(machine: Workbench) -> None:
    """The fuzzer's own check of a regenerated request assumed a user message in it (the
    user's messages may all be excluded, F1/F2)."""
    m = machine
    send(m, "hi")
    m.annotate(which=0, entry=0, action="exclude")
    m.regenerate(which=0, entry=0, mode="chat", script=([], 0))


def test_regenerate_an_answer_of_a_multi_round_retry_and_the_local_servers_empty_content(
        machine: Workbench) -> None:
    """Found by the fuzzer in the fuzzer: every answer of a turn was taken for an answer to
    the turn's last request, so regenerating the first round of a Retry looked like calls
    dropped; and the local server's `content: ""` on a tool-call message looked like a
    request other than the preview (the wire form is the same message)."""
    m = machine
    m.crash(crash_at=8, mode="chat", script=([([0], False)], 0), which=0)
    check(m)
    m.crash(crash_at=4, mode="chat", script=([], 2), which=0)
    check(m)
    m.continue_or_retry(script=([([0, 0], False), ([0, 0], False)], 0), stop_at=None, which=0)
    check(m)
    m.continue_or_retry(script=([], 0), stop_at=None, which=0)
    check(m)
    m.regenerate(entry=223, mode=None, script=([], 0), which=0)
    check(m)


def test_regenerate_an_answer_stopped_before_its_request_left(machine: Workbench) -> None:
    """Found by the fuzzer in the fuzzer (reported as regen-drops-tools, after a run stopped at
    its second event): an answer is paired with the last request in when its entry comes, so
    the entry of a turn stopped before its request left was paired with request -1, which
    read as whatever request came last, by the time of the check the regenerated turn's own
    second round; its calls looked dropped from the regenerated request. Such an answer
    answers no request: there is no original to compare."""
    m = machine
    send(m, "hi", stop_at=1)  # your message, then Stop: the stopped entry, no request
    m.regenerate(which=0, entry=0, mode="agent", script=([([0], False)], 0))
    check(m)


def test_regenerate_an_answer_stopped_between_the_results_and_its_request(
        machine: Workbench) -> None:
    """The same pairing, the other way round: stopped after the call's result (event 6), before
    the next request left, the stopped entry was paired with the request that made the call;
    regenerated at the result, the request rightly ends with the call and its result, which
    the request that made the call could not hold."""
    m = machine
    send(m, "read the readme", "agent", script=([([0], False)], 0), stop_at=6)
    m.regenerate(which=0, entry=2, mode="agent", script=([], 0))  # the stopped entry
    check(m)


def test_the_preview_of_a_history_image_for_a_model_that_takes_none(machine: Workbench) -> None:
    """Found by the fuzzer in the fuzzer: since N10's fix the exchange sends each image of the
    history to a model that takes none as a one-line note, as it makes references images (both
    in `AttachmentStore.inline`); the check that the preview is what is sent put the preview on
    the wire as for a model that reads images."""
    m = machine
    send(m, "what is this?", attach=["shot.png"])
    m.switch_model()
    m.send(which=0, mode="chat", text="and now?", attach=[], script=([], 0), stop_at=None,
           approve="always", choice=ALLOW_ONCE, via_preview=True)
    check(m)


def test_regenerate_the_answer_after_a_runs_nudge(machine: Workbench) -> None:
    """Invariant: a regenerated request is the original's. A run's step read two files, then
    answered "Done." without completing the step; nudged (an instruction, never stored), it
    called complete_step. Regenerating that call branched at the second file's result, before
    "Done.": the branch lost the answer and the request the nudge. It now branches at the
    answer it followed and asks with the run's nudge again (core.store.branches.asked_at,
    RunDriver.nudge)."""
    m = machine
    m.run_workflow(which=0, steps=["tool", "done"], stop_at=None)
    check(m)
    m.regenerate(which=0, entry=4, mode=None, script=([], 0))  # the call after the nudge
    check(m)


def test_a_stop_while_a_command_starts_leaves_its_output_with_the_key(
        machine: Workbench) -> None:
    """Invariant: no key in the project's files. Stop right after the command's card (event 5:
    your message, built, started, the answer, the tool started) landed while `cat .env` was
    being started: asyncio killed the process, but the file it printed into, key and all, was
    left in tool-results/ for good (core/tools/shell.py took it away only from a Stop later on).
    Found in the long run as a flaky failure, after a crash and a Retry."""
    send(machine, "go", "agent", script=([([7], False)], 0), stop_at=5)


def test_regenerate_after_excluding_the_call_the_answer_was_based_on(
        machine: Workbench) -> None:
    """Found by the fuzzer in the fuzzer: the user excluded the answer that called
    complete_step (its result goes with it), then regenerated the failed answer after the
    result. The branch keeps the exclusion, as it keeps every later decision about its history,
    so the request leaves both out: what the user asked for, not calls dropped."""
    m = machine
    m.run_workflow(which=0, steps=["done"], stop_at=None)  # the next step's request fails
    check(m)
    m.annotate(which=0, entry=1, action="exclude")  # the answer that called complete_step
    m.regenerate(which=0, entry=2, mode=None, script=([], 0))  # the failed answer
    check(m)


def test_regenerate_in_chat_mode_the_answer_after_a_runs_nudge(machine: Workbench) -> None:
    """Found by the fuzzer in the fuzzer: regenerated in Chat mode, the answer a run asked
    after its nudge is asked without it (the nudge is a run's instruction: it asks for a
    complete_step a chat has not got), after the answer it followed."""
    m = machine
    m.run_workflow(which=0, steps=["talk", "done"], stop_at=None)
    check(m)
    m.regenerate(which=0, entry=1, mode="chat", script=([], 0))  # the call after the nudge
    check(m)


def test_regenerate_at_a_result_of_a_batch_a_crash_cut(machine: Workbench) -> None:
    """Found by the fuzzer in the fuzzer: killed after the first result of two, the branch
    made at that result ends with the second call unanswered. Engine.proceed answers it first
    (as the window does on showing the branch), so the preview is of the log after that, as
    `send_with_preview` had it."""
    m = machine
    m.crash(which=0, mode="agent", script=([([7, 3], False)], 0), crash_at=6)  # after result 1
    check(m)
    m.regenerate(which=0, entry=1, mode=None, script=([], 0))  # at that result
    check(m)


def test_a_branch_inside_a_batch_a_crash_cut_says_a_started_call_did_nothing(
        machine: Workbench) -> None:
    """Invariant: the model is never told something false. Killed once two of three reads'
    results were written (the three had run together; the third's start is marked in the
    conversation's folder), the conversation was regenerated at the second result: the branch
    answered the third call "Not run ... it did nothing", looking for the mark in its own
    folder, while the conversation it came from answered it "the app closed while this call
    was running". Engine._started now reads the marks of the conversations a branch grew from
    too."""
    m = machine
    m.crash(which=0, mode="chat", script=([([0, 0, 0], False)], 0), crash_at=9)
    check(m)
    m.regenerate(which=0, entry=2, mode=None, script=([], 0))  # at the second result
    check(m)
    send(m, "hi")  # the conversation it came from answers the third call
    m.send(which=1, mode="chat", text="hi", attach=[], script=([], 0), stop_at=None,
           approve="always", choice=ALLOW_ONCE, via_preview=False)
    check(m)


def test_an_imported_conversation_sent_on_after_a_crash_with_a_call_awaiting_approval(
        machine: Workbench) -> None:
    """Found by the long fuzzer, a mistake of its model: a crash left a call waiting for
    approval, the conversation was exported and imported, the call then ran in the original
    (Continue), and the import, sent on, told the model the call had not run: true of the
    import, whose file ends before the call ran. What ran after an export is no part of the
    imported history; what had run before it still is."""
    m = machine
    m.switch_model()
    check(m)
    m.crash(which=0, mode="chat", script=([([0, 0, 0], False)], 0), crash_at=9)
    check(m)
    m.export_import(which=0, key=False)
    check(m)
    m.continue_or_retry(which=0, script=([], 0), stop_at=None)
    check(m)
    m.send(which=21, mode="chat", text="hi", attach=["notes.md"], script=([], 0), stop_at=None,
           approve="always", choice=ALLOW_ONCE, via_preview=False)
    check(m)

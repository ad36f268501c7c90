"""One turn, end to end: log on disk, loopback server, real litellm."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.context.service import ProjectContext
from core.engine import Engine, EngineEvent, EntryAppended, StreamText, TurnFinished, TurnOptions
from core.llm.adapter import LLMRequest, StreamEvent
from core.model import ConversationMessage
from core.settings import LLMSettings
from core.store.project import Project
from tests.helpers.fake_llm import MODEL, Answer, Cut, FakeLLMServer, HttpError


def settings(server: FakeLLMServer, auto_retries: int = 0) -> LLMSettings:
    return LLMSettings(model=MODEL, api_base=server.url, max_output_tokens=256,
                       auto_retries=auto_retries)


def run_turn(project: Project, conv_id: str, text: str, server: FakeLLMServer) -> list[EngineEvent]:
    async def go() -> list[EngineEvent]:
        return [ev async for ev in Engine(ProjectContext(project.conversations)).send(conv_id, text, settings(server))]

    return asyncio.run(go())


def test_answer_is_streamed_then_persisted_with_its_metadata(project: Project,
                                                             llm_server: FakeLLMServer) -> None:
    conv = project.conversations.create()
    llm_server.script(Answer("Paris is the capital.", usage=(20, 6)))
    events = run_turn(project, conv.id, "Capital of France?", llm_server)
    assert "".join(e.text for e in events if isinstance(e, StreamText)) == "Paris is the capital."
    assert isinstance(events[-1], TurnFinished) and events[-1].status == "ok"
    stored = project.conversations.load(conv.id).messages
    assert [(m.role, m.text()) for m in stored] == [
        ("user", "Capital of France?"), ("assistant", "Paris is the capital.")]
    answer = stored[1]
    assert answer.model == MODEL and answer.finish_reason == "stop" and answer.status == "ok"
    assert answer.usage and answer.usage["prompt_tokens"] == 20
    assert all(m.token_counts for m in stored)  # counted once, kept with the entry


def test_history_is_sent_with_each_request(project: Project, llm_server: FakeLLMServer) -> None:
    conv = project.conversations.create()
    llm_server.script(Answer("one"), Answer("two"))
    run_turn(project, conv.id, "first", llm_server)
    run_turn(project, conv.id, "second", llm_server)
    sent = llm_server.requests[1].body["messages"]
    assert sent[0]["role"] == "system" and "Mode: chat" in sent[0]["content"]
    assert sent[1:] == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "one"},
        {"role": "user", "content": "second"},
    ]
    assert llm_server.requests[1].body["max_tokens"] == 256


def test_cut_stream_becomes_an_error_entry_with_the_partial_text(project: Project,
                                                                 llm_server: FakeLLMServer) -> None:
    conv = project.conversations.create()
    llm_server.script(Cut("The answer is forty", transport=True))
    events = run_turn(project, conv.id, "question", llm_server)
    assert isinstance(events[-1], TurnFinished)
    assert events[-1].status == "error"
    entry = project.conversations.load(conv.id).messages[-1]
    assert entry.kind == "error" and entry.text() == "The answer is forty"
    assert entry.error is not None and entry.error.type == "stream_interrupted"
    assert entry.error.partial and entry.error.retryable


def test_provider_error_is_persisted_in_plain_words(project: Project,
                                                    llm_server: FakeLLMServer) -> None:
    conv = project.conversations.create()
    llm_server.script(HttpError(500, "kaboom: stack trace here"))
    run_turn(project, conv.id, "question", llm_server)
    entry = project.conversations.load(conv.id).messages[-1]
    assert entry.kind == "error" and entry.error is not None
    assert "kaboom" not in entry.error.message and "kaboom" in (entry.error.details or "")


def test_stopping_keeps_the_partial_answer_as_a_stopped_entry(project: Project,
                                                              llm_server: FakeLLMServer) -> None:
    conv = project.conversations.create()
    llm_server.script(Answer("word " * 200, delay=0.02))

    events: list[EngineEvent] = []

    async def go() -> None:
        seen: list[str] = []

        async def consume() -> None:
            async for ev in Engine(ProjectContext(project.conversations)).send(conv.id, "talk", settings(llm_server)):
                events.append(ev)
                if isinstance(ev, StreamText):
                    seen.append(ev.text)

        task = asyncio.create_task(consume())
        while len(seen) < 5:
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.wait_for(task, 20)  # Stop ends the turn; it is reported like any other

    asyncio.run(go())
    # The stopped entry comes through the same channel as every other entry, then the end.
    assert isinstance(events[-2], EntryAppended) and events[-2].message.error is not None
    assert events[-2].message.error.type == "stopped"
    assert isinstance(events[-1], TurnFinished) and events[-1].status == "stopped"
    entry = project.conversations.load(conv.id).messages[-1]
    assert entry.kind == "error" and entry.error is not None and entry.error.type == "stopped"
    assert entry.status == "aborted" and entry.text().startswith("word word")


def test_every_event_entry_is_on_disk_when_reported(project: Project,
                                                    llm_server: FakeLLMServer) -> None:
    conv = project.conversations.create()
    llm_server.script(Answer("ok"))

    async def go() -> None:
        async for ev in Engine(ProjectContext(project.conversations)).send(conv.id, "hi", settings(llm_server)):
            if isinstance(ev, EntryAppended):
                ids = [m.id for m in project.conversations.load(conv.id).messages]
                assert ev.message.id in ids

    asyncio.run(go())


def test_an_unexpected_failure_still_keeps_the_partial_answer(project: Project,
                                                              llm_server: FakeLLMServer) -> None:
    from core.llm.adapter import LLMClient, TextDelta

    class Flaky(LLMClient):
        async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
            yield TextDelta("So far so")
            raise RuntimeError("a bug in our own code")

    conv = project.conversations.create()

    async def go() -> list[EngineEvent]:
        engine = Engine(ProjectContext(project.conversations), client=Flaky())
        return [ev async for ev in engine.send(conv.id, "hi", settings(llm_server))]

    events = asyncio.run(go())
    assert isinstance(events[-1], TurnFinished)
    assert events[-1].status == "error"
    entry = project.conversations.load(conv.id).messages[-1]
    assert entry.kind == "error" and entry.text() == "So far so"
    assert entry.error is not None
    assert "a bug in our own code" in (entry.error.details or "")


def test_a_message_larger_than_the_budget_is_refused_in_plain_words(
        project: Project, llm_server: FakeLLMServer) -> None:
    conv = project.conversations.create()
    tight = LLMSettings(model=MODEL, api_base=llm_server.url, max_output_tokens=256,
                        context_window=1000)
    async def go() -> list[EngineEvent]:
        return [ev async for ev in Engine(ProjectContext(project.conversations)).send(conv.id, "word " * 3000, tight)]

    events = asyncio.run(go())
    assert isinstance(events[-1], TurnFinished)
    assert events[-1].status == "error" and not llm_server.requests  # nothing was sent
    entry = project.conversations.load(conv.id).messages[-1]
    assert entry.error is not None
    assert entry.error.type == "context_overflow" and "needs at least" in entry.error.message


def test_each_built_request_is_saved_with_its_report(project: Project,
                                                     llm_server: FakeLLMServer) -> None:
    import json

    conv = project.conversations.create()
    llm_server.script(Answer("ok"))
    engine_of: list[Engine] = []

    async def go() -> None:
        engine = Engine(ProjectContext(project.conversations), requests_dir=project.state / "requests")
        engine_of.append(engine)
        async for _ in engine.send(conv.id, "hello", settings(llm_server),
                                   TurnOptions(mode="agent")):
            pass

    asyncio.run(go())
    saved = list((project.state / "requests" / conv.id).glob("*.json"))
    assert len(saved) == 1
    data = json.loads(saved[0].read_text())
    assert data["messages"] == llm_server.requests[0].body["messages"]
    assert data["report"]["mode"] == "agent" and data["report"]["used"] > 0
    assert "engineer" in data["messages"][0]["content"]  # the agent persona
    # ... and the engine still holds the request of its newest copy: the Inspector's "since
    # the last request" line reads the same from it as from the copy, without reading it back
    from core.context.report_text import sent_before, since_last

    path, built = engine_of[0].kept_request(conv.id) or (None, None)
    assert path == saved[0] and built is not None
    assert built.messages == data["messages"]
    assert built.report.sent_ids() == sent_before(data)[1]
    counter = engine_of[0].context.counter(None)
    assert since_last(built.messages, built.report.sent_ids(), built.messages, built.report,
                      counter, "now") == \
        since_last(*sent_before(data), built.messages, built.report, counter, "now")


def test_the_providers_count_calibrates_the_next_budget(project: Project, llm_server: FakeLLMServer,
                                                        tmp_path: Path) -> None:
    from core.context.calibration import Calibration

    calibration = Calibration(tmp_path / "calibration.json")
    engine = Engine(ProjectContext(project.conversations, calibration=calibration))
    conv = project.conversations.create()
    first = engine.context.build(None, [ConversationMessage(role="user", content="x " * 100)],
                                 settings(llm_server)).report
    # The provider counts twice what we count (as a non-OpenAI tokenizer might).
    llm_server.script(Answer("ok", usage=(first.used * 2, 1)))

    async def go() -> None:
        async for _ in engine.send(conv.id, "x " * 100, settings(llm_server)):
            pass

    asyncio.run(go())
    factor = calibration.factor(MODEL)
    assert 1.2 < factor <= 2.0
    again = engine.context.build(None, project.conversations.load(conv.id).messages,
                                 settings(llm_server)).report
    assert again.calibration == factor
    assert again.provider_estimate == round(again.used * factor)
    assert Calibration(tmp_path / "calibration.json").factor(MODEL) == factor  # kept on disk


def test_a_conversation_can_set_its_own_window(project: Project, llm_server: FakeLLMServer) -> None:
    conv = project.conversations.create()
    project.conversations.update_meta(conv.id, context_window=3000)
    engine = Engine(ProjectContext(project.conversations))
    report = engine.context.build(conv.id, [], settings(llm_server)).report
    assert report.window == 3000 and report.budget_source == "override"


def test_an_answer_cut_by_the_output_limit_is_kept_as_a_continuable_entry(
    project: Project, llm_server: FakeLLMServer
) -> None:
    from core.model import continuable

    conv = project.conversations.create()
    llm_server.script(Answer("The list: alpha, beta, gam", finish_reason="length"))
    events = run_turn(project, conv.id, "list them", llm_server)
    assert isinstance(events[-1], TurnFinished)
    assert events[-1].status == "error"
    entry = project.conversations.load(conv.id).messages[-1]
    assert entry.error is not None
    assert entry.kind == "error" and entry.error.type == "max_tokens"
    assert entry.text() == "The list: alpha, beta, gam" and "output limit" in entry.error.message
    assert continuable(entry)


def test_transient_failures_before_any_text_are_retried_after_retry_after(
    project: Project, llm_server: FakeLLMServer
) -> None:
    from core.engine import Retrying

    conv = project.conversations.create()
    llm_server.script(HttpError(429, "slow down", headers={"Retry-After": "1"}), HttpError(503),
                      Answer("third time"))

    async def go() -> list[EngineEvent]:
        engine = Engine(ProjectContext(project.conversations), retry_delays=(0.05, 0.05, 0.05))
        return [ev async for ev in engine.send(conv.id, "hi", settings(llm_server, 3))]

    events = asyncio.run(go())
    retries = [e for e in events if isinstance(e, Retrying)]
    assert [(r.attempt, r.delay) for r in retries] == [(1, 1.0), (2, 0.05)]
    assert "rate-limiting" in retries[0].cause
    assert isinstance(events[-1], TurnFinished)
    assert events[-1].status == "ok" and len(llm_server.requests) == 3
    assert llm_server.requests[1].arrived - llm_server.requests[0].arrived >= 0.95  # honoured
    assert [m.kind for m in project.conversations.load(conv.id).messages] == ["message", "message"]


def test_retries_stop_after_the_limit_and_never_repeat_a_partial_answer(
    project: Project, llm_server: FakeLLMServer
) -> None:
    conv = project.conversations.create()
    llm_server.script(HttpError(500), HttpError(500), Cut("half"))

    async def go() -> list[EngineEvent]:
        engine = Engine(ProjectContext(project.conversations), retry_delays=(0.01, 0.01, 0.01))
        return [ev async for ev in engine.send(conv.id, "hi", settings(llm_server, 2))]

    events = asyncio.run(go())
    assert isinstance(events[-1], TurnFinished)
    assert events[-1].status == "error" and len(llm_server.requests) == 3  # 1 + 2 retries
    entry = project.conversations.load(conv.id).messages[-1]
    assert entry.error is not None
    assert entry.error.type == "stream_interrupted" and entry.text() == "half"


def test_context_overflow_rebuilds_within_the_stated_limit_and_remembers_it(
    project: Project, llm_server: FakeLLMServer, tmp_path: Path
) -> None:
    from core.context.calibration import Calibration
    from tests.helpers.fake_llm import ContextLengthError

    conv = project.conversations.create()
    history = [ConversationMessage(role="user" if i % 2 == 0 else "assistant",
                                   content=f"message {i} " + "lorem ipsum " * 60) for i in range(40)]
    project.conversations.append_many(conv.id, history)
    calibration = Calibration(tmp_path / "calibration.json")
    engine = Engine(ProjectContext(project.conversations, calibration=calibration))
    llm_server.script(ContextLengthError(limit=2500, requested=9000), Answer("fits now"),
                      Answer("fits at once"))

    async def turn(text: str) -> list[EngineEvent]:
        return [ev async for ev in engine.send(conv.id, text, settings(llm_server))]

    events = asyncio.run(turn("and now?"))
    assert isinstance(events[-1], TurnFinished)
    assert events[-1].status == "ok"
    first, second = (len(str(r.body["messages"])) for r in llm_server.requests)
    assert second < first  # the rebuilt request is smaller
    assert calibration.window(MODEL, llm_server.url) == 2500  # learned for that server
    report = engine.context.build(None, project.conversations.load(conv.id).messages,
                                  settings(llm_server)).report
    assert report.window == 2500 and report.budget_source == "provider"
    asyncio.run(turn("again"))
    assert len(llm_server.requests) == 3  # the next request fitted at once


def test_context_overflow_that_cannot_shrink_stops_with_a_clear_error(
        project: Project, llm_server: FakeLLMServer) -> None:
    from tests.helpers.fake_llm import ContextLengthError

    conv = project.conversations.create()
    llm_server.script(*[ContextLengthError(limit=100_000, requested=200_000)] * 5)

    async def go() -> list[EngineEvent]:
        return [ev async for ev in Engine(ProjectContext(project.conversations)).send(conv.id, "hi",
                                                                      settings(llm_server))]

    events = asyncio.run(go())
    # The rebuild could not make "hi" any shorter, so it was not sent again: exactly one request.
    assert isinstance(events[-1], TurnFinished)
    assert events[-1].status == "error" and len(llm_server.requests) == 1
    entry = project.conversations.load(conv.id).messages[-1]
    assert entry.error is not None
    assert entry.error.type == "context_overflow" and "not sent again" in entry.error.message


def test_a_key_in_a_failures_traceback_never_reaches_the_log(
    project: Project, llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.llm.adapter import LLMClient, TextDelta

    key = "local-server-secret-7f3a9"  # not key-shaped: only known because it is in use
    monkeypatch.setenv("WORKBENCH_API_KEY", key)

    class Leaky(LLMClient):
        async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
            yield TextDelta("Half")
            raise RuntimeError(f"a bug of ours that printed the credentials {key}")

    conv = project.conversations.create()

    async def go() -> list[EngineEvent]:
        engine = Engine(ProjectContext(project.conversations), client=Leaky())
        return [ev async for ev in engine.send(conv.id, "hi", settings(llm_server))]

    events = asyncio.run(go())
    assert isinstance(events[-1], TurnFinished)
    assert events[-1].status == "error" and events[-1].message.text() == "Half"
    assert events[-1].message.error is not None
    details = events[-1].message.error.details or ""
    assert "a bug of ours that printed the credentials [redacted]" in details
    log = project.state / "conversations" / conv.id / "messages.jsonl"
    assert key.encode() not in log.read_bytes()


def test_a_disk_error_while_saving_the_answer_keeps_it_in_memory(
    project: Project, llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from core.engine import SaveFailed

    conv = project.conversations.create()
    store = project.conversations
    real_append = store.append_many

    # the disk fills up after the question is saved
    def full_disk_for_answers(conv_id: str, msgs: list[ConversationMessage]) -> list[str]:
        if any(m.role == "assistant" for m in msgs):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_append(conv_id, msgs)

    monkeypatch.setattr(store, "append_many", full_disk_for_answers)
    llm_server.script(Answer("The answer the user must not lose."))
    events = run_turn(project, conv.id, "question", llm_server)  # no exception escapes
    failed = [e for e in events if isinstance(e, SaveFailed)]
    assert len(failed) == 1 and "the disk is full" in failed[0].message
    assert failed[0].unsaved[0].text() == "The answer the user must not lose."
    assert isinstance(events[-1], TurnFinished) and events[-1].status == "error"
    assert events[-1].message.text() == "The answer the user must not lose."
    assert [m.role for m in store.load(conv.id).messages] == ["user"]


def test_a_request_copy_that_cannot_be_written_never_stops_the_answer(
    project: Project, llm_server: FakeLLMServer
) -> None:
    from core.engine import StoreNotice

    conv = project.conversations.create()
    not_a_folder = project.state / "requests-file"
    not_a_folder.write_text("a file where the requests folder should be")
    llm_server.script(Answer("Still here."))

    async def go() -> list[EngineEvent]:
        engine = Engine(ProjectContext(project.conversations), requests_dir=not_a_folder)
        return [ev async for ev in engine.send(conv.id, "hi", settings(llm_server))]

    events = asyncio.run(go())
    assert isinstance(events[-1], TurnFinished)
    assert events[-1].status == "ok" and events[-1].message.text() == "Still here."
    notes = [e.text for e in events if isinstance(e, StoreNotice)]
    assert any("could not be kept" in n and "not affected" in n for n in notes)
    assert project.conversations.load(conv.id).messages[-1].text() == "Still here."


def test_a_partial_answer_replaced_by_a_retry_leaves_later_requests(
    project: Project, llm_server: FakeLLMServer
) -> None:
    from core.engine import NothingToRetry

    conv = project.conversations.create()
    engine = Engine(ProjectContext(project.conversations))  # one engine: its build cache sees every step
    llm_server.script(Cut("Half an ans"), Answer("The whole answer."), Answer("Next answer."))

    async def drain(events: AsyncIterator[EngineEvent]) -> list[EngineEvent]:
        return [ev async for ev in events]

    s = settings(llm_server)
    asyncio.run(drain(engine.send(conv.id, "question", s)))
    retried_turn = asyncio.run(drain(engine.retry(conv.id, s)))
    assert isinstance(retried_turn[-1], TurnFinished) and retried_turn[-1].status == "ok"
    with pytest.raises(NothingToRetry, match="does not end in a failed answer"):
        asyncio.run(drain(engine.retry(conv.id, s)))  # a good answer is not retried
    asyncio.run(drain(engine.send(conv.id, "next question", s)))
    assert len(llm_server.requests) == 3
    retried, later = (r.body["messages"][1:] for r in llm_server.requests[1:])
    assert retried == [{"role": "user", "content": "question"}]
    assert later == [{"role": "user", "content": "question"},
                     {"role": "assistant", "content": "The whole answer."},
                     {"role": "user", "content": "next question"}]
    # The failed attempt stays in the log, and the report says why it was left out.
    log = project.conversations.load(conv.id).messages
    assert [m.kind for m in log] == ["message", "error", "message", "message", "message"]
    report = engine.context.build(conv.id, log, s).report
    reasons = [e.reason for e in report.entries if e.id == log[1].id]
    assert reasons and "replaced (Retry)" in reasons[0]


def test_the_answer_is_asked_for_the_room_the_budget_keeps_for_it(
        project: Project, llm_server: FakeLLMServer) -> None:
    """An unknown model gets the 8,192-token default window, a quarter of it kept for the
    answer: a request filled to the budget must not ask for more than that."""
    from core.engine import RequestBuilt

    conv = project.conversations.create()
    llm_server.script(Answer("ok"))
    wants_more = LLMSettings(model=MODEL, api_base=llm_server.url, max_output_tokens=4096,
                             auto_retries=0)

    async def go() -> list[EngineEvent]:
        engine = Engine(ProjectContext(project.conversations))
        return [ev async for ev in engine.send(conv.id, "hi", wants_more)]

    events = asyncio.run(asyncio.wait_for(go(), 60))
    built = next(e for e in events if isinstance(e, RequestBuilt)).request
    assert built.report.window == 8192 and built.report.reserved_output == 2048
    assert llm_server.requests[-1].body["max_tokens"] == 2048


def test_usage_the_server_did_not_send_is_not_learnt_from(project: Project,
                                                          llm_server: FakeLLMServer,
                                                          tmp_path: Path) -> None:
    # llama.cpp's server streams no usage; litellm then counts the stream itself. That count
    # is ours, not the provider's: the entry says it is an estimate and nothing is calibrated.
    from core.context.calibration import Calibration

    calibration = Calibration(tmp_path / "calibration.json")
    engine = Engine(ProjectContext(project.conversations, calibration=calibration))
    conv = project.conversations.create()
    engine.context.budget(conv.id, settings(llm_server))  # the server's sample count, once
    before = calibration.factor(MODEL)
    llm_server.stream_usage = False
    llm_server.script(Answer("ok"), Answer("still ok"))

    async def go(text: str) -> None:
        async for _ in engine.send(conv.id, text, settings(llm_server)):
            pass

    asyncio.run(go("word " * 300))
    asyncio.run(go("more " * 300))
    answers = [m for m in project.conversations.load(conv.id).messages if m.role == "assistant"]
    assert [m.content for m in answers] == ["ok", "still ok"]
    assert all(m.usage and m.usage.get("estimated") for m in answers)
    assert calibration.factor(MODEL) == before
    report = engine.context.preview(conv.id, settings(llm_server)).report
    assert report.calibration == before
    assert "no usage" in report.calibration_basis


def test_a_count_no_tokenizer_would_give_is_set_aside(project: Project, llm_server: FakeLLMServer,
                                                      tmp_path: Path) -> None:
    from core.context.calibration import Calibration

    calibration = Calibration(tmp_path / "calibration.json")
    engine = Engine(ProjectContext(project.conversations, calibration=calibration))
    conv = project.conversations.create()
    first = engine.context.build(None, [ConversationMessage(role="user", content="x " * 100)],
                                 settings(llm_server)).report
    before = calibration.factor(MODEL)  # from the server's sample count
    llm_server.script(Answer("ok", usage=(first.used * 10, 1)))  # a counting bug somewhere

    async def go() -> None:
        async for _ in engine.send(conv.id, "x " * 100, settings(llm_server)):
            pass

    asyncio.run(go())
    assert calibration.factor(MODEL) == before  # was clamped to 2.0: every figure doubled
    basis = engine.context.preview(conv.id, settings(llm_server)).report.calibration_basis
    assert "1 implausible ratio set aside" in basis

"""The kept compaction: later requests keep the earlier ones as their exact prefix, in this
process and in the next, until the history passes the trigger again; what invalidates it is
said in the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core.context.service import ProjectContext
from core.llm.tokens import TokenCounter
from core.model import ConversationMessage, annotation
from core.settings import LLMSettings
from core.store.project import Project
from tests.helpers.trajectories import make_agent_session

SETTINGS = LLMSettings(model="gpt-4o", max_output_tokens=1024, context_window=12_000)


def setup(folder: Path) -> str:
    counter = TokenCounter.for_model("gpt-4o")
    with Project.open(folder, create=True) as project:
        conv = project.conversations.create("long")
        project.conversations.append_many(
            conv.id, [counter.with_count(m) for m in make_agent_session(30)])
        return conv.id


def turn(project: Project, conv: str, n: int, mode: str = "agent",
         service: ProjectContext | None = None) -> list[str]:
    """Append a question, build the request as the engine does, append a short answer."""
    store = project.conversations
    service = service or ProjectContext(store, offer_tools=True)
    counter = service.counter("gpt-4o")
    store.append(conv, counter.with_count(ConversationMessage(role="user",
                                                              content=f"question {n}")))
    built = service.build(conv, store.load(conv).messages, SETTINGS, mode)  # type: ignore[arg-type]
    store.append(conv, counter.with_count(ConversationMessage(role="assistant",
                                                              content=f"answer {n}")))
    turn.report = built.report  # type: ignore[attr-defined]
    return [json.dumps(m, sort_keys=True) for m in built.messages]


def test_a_new_process_sends_the_kept_compaction_so_the_prefix_holds(tmp_path: Path) -> None:
    conv = setup(tmp_path / "p")
    requests, said = [], []
    for n in range(4):  # each turn a new process: only the folder carries over
        with Project.open(tmp_path / "p") as project:
            requests.append(turn(project, conv, n))
            said.append(turn.report.compaction)  # type: ignore[attr-defined]
    assert said[0].startswith("new compaction")
    assert all(s.startswith("the kept compaction, reused") for s in said[1:]), said
    for before, after in zip(requests, requests[1:], strict=False):
        assert after[:len(before)] == before  # the previous request is the exact prefix
    assert (tmp_path / "p" / ".workbench" / "conversations" / conv / "view.json").is_file()


def test_a_damaged_kept_compaction_is_made_again_from_the_log(tmp_path: Path) -> None:
    conv = setup(tmp_path / "p")
    with Project.open(tmp_path / "p") as project:
        first = turn(project, conv, 0)
    view = tmp_path / "p" / ".workbench" / "conversations" / conv / "view.json"
    view.write_text("{ not json")
    with Project.open(tmp_path / "p") as project:
        again = turn(project, conv, 1)
        assert turn.report.compaction.startswith("new compaction")  # type: ignore[attr-defined]
    assert again[0] == first[0] and len(again) > 2  # a valid request all the same
    assert json.loads(view.read_text())["version"] == 1  # and kept again


def test_what_invalidates_the_kept_compaction_is_said_in_the_report(tmp_path: Path) -> None:
    conv = setup(tmp_path / "p")
    with Project.open(tmp_path / "p") as project:
        service = ProjectContext(project.conversations, offer_tools=True)
        turn(project, conv, 0, service=service)
        assert turn.report.compaction.startswith("new compaction")  # type: ignore[attr-defined]
        turn(project, conv, 1, service=service)
        assert turn.report.compaction.startswith("the kept compaction, reused")  # type: ignore[attr-defined]
        turn(project, conv, 2, mode="chat", service=service)
        assert "the system prompt or the tools changed" in turn.report.compaction  # type: ignore[attr-defined]
        first_user = next(m for m in project.conversations.load(conv).messages
                          if m.role == "user")
        project.conversations.append(conv, annotation(first_user.id, "pin"))
        turn(project, conv, 3, mode="chat", service=service)
        assert "the history changed (a pin" in turn.report.compaction  # type: ignore[attr-defined]
        turn(project, conv, 4, mode="chat", service=service)  # and then it is kept again
        assert turn.report.compaction.startswith("the kept compaction, reused")  # type: ignore[attr-defined]


def test_a_compaction_lands_near_its_target_so_it_lasts(tmp_path: Path) -> None:
    conv = setup(tmp_path / "p")
    with Project.open(tmp_path / "p") as project:
        service = ProjectContext(project.conversations, offer_tools=True)
        turn(project, conv, 0, service=service)
        report = turn.report  # type: ignore[attr-defined]
    assert report.compaction.startswith("new compaction")
    # the target is half the room history has; the digest counts against it
    assert report.used <= 0.6 * report.usable


def test_a_first_compaction_long_after_a_pin_does_not_blame_the_pin(tmp_path: Path) -> None:
    counter = TokenCounter.for_model("gpt-4o")
    session = [counter.with_count(m) for m in make_agent_session(30)]
    with Project.open(tmp_path / "p", create=True) as project:
        store = project.conversations
        conv = store.create("growing").id
        store.append_many(conv, session[:6])  # well below the trigger
        service = ProjectContext(store, offer_tools=True)
        service.build(conv, store.load(conv).messages, SETTINGS, "agent")
        store.append(conv, annotation(session[0].id, "pin"))
        service.build(conv, store.load(conv).messages, SETTINGS, "agent")  # still below
        store.append_many(conv, session[6:])  # now far past it
        built = service.build(conv, store.load(conv).messages, SETTINGS, "agent")
    assert built.report.compaction == "new compaction: no compaction kept for this conversation"


def test_a_kept_compaction_with_wrong_shapes_is_made_again(tmp_path: Path) -> None:
    conv = setup(tmp_path / "p")
    with Project.open(tmp_path / "p") as project:
        turn(project, conv, 0)
    view = tmp_path / "p" / ".workbench" / "conversations" / conv / "view.json"
    broken: dict[str, Any]
    for broken in ({"staged": []}, {"staged": None}, {"left_out": {}}, {"digest_tokens": 3}):
        data = json.loads(view.read_text())
        view.write_text(json.dumps({**data, **broken}))
        with Project.open(tmp_path / "p") as project:
            turn(project, conv, 1)  # a request all the same, never a crash
            assert turn.report.compaction.startswith("new compaction")  # type: ignore[attr-defined]


def test_an_entry_pinned_by_another_process_is_sent(tmp_path: Path) -> None:
    conv = setup(tmp_path / "p")
    with Project.open(tmp_path / "p") as project:
        turn(project, conv, 0)
        left_out = [row[0] for row in turn.report.rows()  # type: ignore[attr-defined]
                    if row[3] in ("digested", "dropped") and row[0]]
    assert left_out
    with Project.open(tmp_path / "p") as project:  # `workbench pin` builds nothing
        project.conversations.append(conv, annotation(left_out[0], "pin"))
    with Project.open(tmp_path / "p") as project:
        turn(project, conv, 1)
        assert left_out[0] in turn.report.sent_ids()  # type: ignore[attr-defined]
